"""The checkpoint file: one pickle of a plain dict, readable with `pickle.load` alone::

    {"timestamp": float,             # time.time() at save
     "step_index": int,              # scene.t at save
     "arrays": {"RigidSolver.qpos": np.ndarray, ...},   # every checkpointed field, shaped ([n_envs,] ...)
     "format": "genesis-core.checkpoint",
     "format_version": 1,
     "engine_version": str,
     "scene": {...}}                 # the scene's structure: n_envs, precision, options, entities per solver

Loading is safe: a restricted unpickler admits only the few NumPy names the format uses, so a file that tries
to run code is refused before anything runs. A save is atomic: the file is written beside the target and moved
over it, so a crash mid-write leaves the previous file intact.
"""

from __future__ import annotations

import io
import os
import pickle
import tempfile
import time

import numpy as np

from .errors import CheckpointError, CheckpointMismatchError, UnsafeCheckpointError

FORMAT = "genesis-core.checkpoint"
FORMAT_VERSION = 1
PICKLE_PROTOCOL = 4

# (module, name) pairs the format uses: NumPy's array and scalar reconstruction under NumPy 1 and 2 names.
_ALLOWED_GLOBALS = {
    (mod, name)
    for mod in ("numpy.core.multiarray", "numpy._core.multiarray")
    for name in ("_reconstruct", "scalar")
} | {
    ("numpy", "ndarray"),
    ("numpy", "dtype"),
    ("numpy.core.numeric", "_frombuffer"),
    ("numpy._core.numeric", "_frombuffer"),
    ("_codecs", "encode"),
}


class _RestrictedUnpickler(pickle.Unpickler):
    def find_class(self, module, name):
        if (module, name) in _ALLOWED_GLOBALS:
            return super().find_class(module, name)
        raise UnsafeCheckpointError(
            f"refused to load: the file references {module}.{name}, which a genesis-core checkpoint never contains "
            "(nothing from the file was run)."
        )

    def persistent_load(self, pid):
        raise UnsafeCheckpointError("refused to load: the file uses persistent ids, which the format never contains.")


def write(path, payload: dict):
    """Pickle `payload` to `path` atomically (temporary file in the same folder, fsync, rename)."""
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    try:
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".ckpt", dir=folder)
    except OSError as exc:
        raise CheckpointError(f"cannot write checkpoint {path!r}: {exc.strerror or exc}.") from exc
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.fchmod(fd, 0o666 & ~umask)  # as open() would create it, not mkstemp's 0600
        with os.fdopen(fd, "wb") as fh:
            pickle.dump(payload, fh, protocol=PICKLE_PROTOCOL)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def read(path) -> dict:
    """Read and validate a checkpoint file (format, not fit to a scene). Never runs code from the file."""
    path = os.fspath(path)
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError as exc:
        raise CheckpointError(f"cannot read checkpoint {path!r}: {exc.strerror or exc}.") from exc
    try:
        payload = _RestrictedUnpickler(io.BytesIO(data)).load()
    except UnsafeCheckpointError as exc:
        raise UnsafeCheckpointError(f"{path!r}: {exc}") from None
    except (EOFError, pickle.UnpicklingError, ValueError, TypeError, IndexError, KeyError, AttributeError,
            MemoryError, UnicodeDecodeError) as exc:
        raise CheckpointError(
            f"{path!r} is not a readable genesis-core checkpoint (truncated or corrupt: {type(exc).__name__}: {exc})."
        ) from None
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        raise CheckpointError(f"{path!r} is a pickle but not a genesis-core checkpoint (no {FORMAT!r} marker).")
    version = payload.get("format_version")
    if version != FORMAT_VERSION:
        raise CheckpointError(f"{path!r} has checkpoint format version {version!r}; this engine reads version {FORMAT_VERSION}.")
    for key, kind in (("timestamp", float), ("step_index", int), ("arrays", dict), ("scene", dict)):
        if not isinstance(payload.get(key), kind) or isinstance(payload.get(key), bool):
            raise CheckpointError(f"{path!r}: entry {key!r} is missing or not a {kind.__name__}.")
    if payload["step_index"] < 0:
        raise CheckpointError(f"{path!r}: step_index {payload['step_index']} is negative.")
    for key, arr in payload["arrays"].items():
        if not isinstance(key, str) or not isinstance(arr, np.ndarray) or arr.dtype.kind not in "fiub":
            raise CheckpointError(f"{path!r}: array entry {key!r} is not a numeric NumPy array.")
        if arr.dtype.kind == "f" and not np.isfinite(arr).all():
            raise CheckpointError(f"{path!r}: array entry {key!r} holds NaN or infinite values.")
    if not _plain(payload["scene"]):
        raise CheckpointError(f"{path!r}: entry 'scene' holds something other than plain data.")
    return payload


def _plain(x) -> bool:
    """Plain data only (what the scene signature is made of): dicts, lists, str, numbers, bools, None."""
    if isinstance(x, dict):
        return all(isinstance(k, str) and _plain(v) for k, v in x.items())
    if isinstance(x, (list, tuple)):
        return all(_plain(v) for v in x)
    return x is None or isinstance(x, (str, int, float, bool))


def first_difference(saved, current, where="scene"):
    """The first place where two plain-data structures differ, as a message, or None."""
    if isinstance(saved, dict) and isinstance(current, dict):
        for k in list(saved) + [k for k in current if k not in saved]:
            if k not in current:
                return f"{where}.{k}: in the checkpoint, absent from this scene"
            if k not in saved:
                return f"{where}.{k}: in this scene, absent from the checkpoint"
            diff = first_difference(saved[k], current[k], f"{where}.{k}")
            if diff:
                return diff
        return None
    if isinstance(saved, (list, tuple)) and isinstance(current, (list, tuple)):
        if len(saved) != len(current):
            return f"{where}: the checkpoint has {len(saved)} entries, this scene {len(current)}"
        for i, (a, b) in enumerate(zip(saved, current)):
            diff = first_difference(a, b, f"{where}[{i}]")
            if diff:
                return diff
        return None
    if saved != current or type(saved) is not type(current) and not (
        isinstance(saved, (int, float)) and isinstance(current, (int, float))
    ):
        return f"{where}: the checkpoint has {saved!r}, this scene has {current!r}"
    return None


def check_fits(payload: dict, signature: dict, expected_arrays: dict, path):
    """Raise CheckpointMismatchError naming the first difference between the file and the scene."""
    diff = first_difference(payload["scene"], signature)
    if diff is None:
        arrays = payload["arrays"]
        for key in list(arrays) + [k for k in expected_arrays if k not in arrays]:
            if key not in expected_arrays:
                diff = f"arrays[{key!r}]: in the checkpoint, not a field of this scene"
            elif key not in arrays:
                diff = f"arrays[{key!r}]: a field of this scene, absent from the checkpoint"
            else:
                shape, dtype = expected_arrays[key]
                a = arrays[key]
                if tuple(a.shape) != shape or a.dtype != dtype:
                    diff = f"arrays[{key!r}]: the checkpoint has {a.dtype}{list(a.shape)}, this scene needs {dtype}{list(shape)}"
            if diff:
                break
    if diff:
        raise CheckpointMismatchError(f"{os.fspath(path)!r} does not fit this scene: {diff}. Nothing was changed.")


def make_payload(step_index: int, arrays: dict, signature: dict, engine_version: str) -> dict:
    return {
        "timestamp": time.time(),
        "step_index": int(step_index),
        "arrays": arrays,
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "engine_version": engine_version,
        "scene": signature,
    }
