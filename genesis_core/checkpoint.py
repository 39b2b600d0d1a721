"""The checkpoint file: one pickle of a plain dict, readable with `pickle.load` alone::

    {"timestamp": float,             # time.time() at save
     "step_index": int,              # scene.t at save
     "arrays": {"RigidSolver.qpos": np.ndarray, ...},   # every checkpointed field, shaped ([n_envs,] ...)
     "format": "genesis-core.checkpoint",
     "format_version": 4,
     "engine_version": str,
     "scene": {...},                 # the scene's structure: n_envs, precision, options, entities per solver
     "checksum": {"algorithm": "sha256", "digest": str}}   # over every other entry (see `digest`)

Loading is safe: a restricted unpickler admits only the few NumPy names the format uses, so a file that tries
to run code is refused before anything runs; a file larger than the reader's limit, nested deeper than
`MAX_DEPTH`, or whose arrays claim more than the file holds is refused with a CheckpointError before it is
unpickled or walked. The checksum makes a damaged file (a flipped bit anywhere in what it covers) fail as
damaged, naming what does not match. Files of older format versions are refused with a message that says why
(OLDER_VERSIONS). A save is atomic: the file is
written beside the target and moved over it, so a crash mid-write leaves the previous file intact.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import pickle
import tempfile
import time

import numpy as np

from .errors import CheckpointError, CheckpointMismatchError, DamagedCheckpointError, UnsafeCheckpointError

FORMAT = "genesis-core.checkpoint"
FORMAT_VERSION = 4
READABLE_VERSIONS = (4,)
# what changed since each older version: why its files are refused
OLDER_VERSIONS = {
    1: "version 1 had no checksum, and its rigid contact state was per candidate slot",
    2: "version 2 kept the rigid solver's contact warm start per candidate slot; version 3 keeps a compact pool "
       "keyed by (geom pair, feature) (RigidSolver.contact_impulse, RigidSolver.contact_key)",
    3: "version 3 had no warm start for the rigid solver's joint and tendon limits; version 4 keeps each limit's "
       "impulse (RigidSolver.limit_impulse)",
}
PICKLE_PROTOCOL = 4
MAX_DEPTH = 32  # nesting of the plain-data entries ("scene"); the scene signature needs about 6
MAX_NODES = 1_000_000  # values in the plain-data entries
DEFAULT_MAX_BYTES = 16 * 2**30  # read()'s limit when the caller gives none (load_checkpoint sizes its own)
MAX_STEP_INDEX = 2**62  # step indices (a checkpoint's step_index, scene.t, a state's t) stay below it

# (module, name) pairs the format uses: NumPy's array and scalar reconstruction under NumPy 1 and 2 names.
# Pickle protocol 4 stores bytes natively, so neither _codecs.encode (protocol 2's bytes, which chained would
# expand without bound) nor protocol 5's _frombuffer is ever needed.
_ALLOWED_GLOBALS = {
    (mod, name)
    for mod in ("numpy.core.multiarray", "numpy._core.multiarray")
    for name in ("_reconstruct", "scalar")
} | {
    ("numpy", "ndarray"),
    ("numpy", "dtype"),
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
    """Pickle `payload`, sealed with its checksum, to `path` atomically (temporary file in the same folder, fsync,
    rename)."""
    payload = seal(dict(payload))
    write_atomically(path, lambda fh: pickle.dump(payload, fh, protocol=PICKLE_PROTOCOL), "wb", ".ckpt")


def write_atomically(path, write_to, mode="wb", suffix=".tmp"):
    """Call write_to(file) on a temporary file in `path`'s folder, fsync it and rename it to `path`: a reader sees
    the old file or the whole new one, never a part; the temporary file is removed on any failure. The file gets
    the permissions open() would give it (mkstemp's are 0600)."""
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    try:
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=suffix, dir=folder)
    except OSError as exc:
        raise CheckpointError(f"cannot write checkpoint {path!r}: {exc.strerror or exc}.") from exc
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.fchmod(fd, 0o666 & ~umask)
        with os.fdopen(fd, mode) as fh:
            write_to(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def read_at_most(path, limit: int, what: str = "", outcome: str = "nothing was read") -> bytes:
    """The bytes of the file at `path`, or a CheckpointError when it holds more than `limit` bytes: by its size
    before reading, or by what was read (a file that grew meanwhile). `what` follows the limit in the message,
    `outcome` ends it; open's OSError is the caller's to name."""
    with open(path, "rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        if size > limit:
            raise CheckpointError(f"{path!r} is {size} bytes, more than the limit of {limit}{what}; {outcome}.")
        data = fh.read(limit + 1)
    if len(data) > limit:
        raise CheckpointError(f"{path!r} holds more than the limit of {limit} bytes{what}; {outcome}.")
    return data


def read(path, max_bytes: int | None = None) -> dict:
    """Read and validate a checkpoint file (format and checksum, not fit to a scene). Never runs code from the
    file. max_bytes: refuse a larger file (default DEFAULT_MAX_BYTES)."""
    path = os.fspath(path)
    limit = DEFAULT_MAX_BYTES if max_bytes is None else int(max_bytes)
    try:
        data = read_at_most(path, limit, " (load_checkpoint(path, max_bytes=...) raises it)")
    except OSError as exc:
        raise CheckpointError(f"cannot read checkpoint {path!r}: {exc.strerror or exc}.") from exc
    stream = io.BytesIO(data)
    try:
        payload = _RestrictedUnpickler(stream).load()
    except UnsafeCheckpointError as exc:
        raise UnsafeCheckpointError(f"{path!r}: {exc}") from None
    except Exception as exc:  # whatever a corrupt pickle makes the unpickler or NumPy raise
        raise CheckpointError(
            f"{path!r} is not a readable genesis-core checkpoint (truncated or corrupt: {type(exc).__name__}: "
            f"{str(exc)[:200]})."
        ) from None
    if stream.tell() != len(data):
        raise DamagedCheckpointError(f"{path!r} is damaged: {len(data) - stream.tell()} bytes follow the end of the "
                                     "checkpoint.")
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        raise CheckpointError(f"{path!r} is a pickle but not a genesis-core checkpoint (no {FORMAT!r} marker).")
    if not all(isinstance(k, str) for k in payload):
        raise CheckpointError(f"{path!r}: the checkpoint's keys must be strings.")
    version = payload.get("format_version")
    if not isinstance(version, bool) and version in OLDER_VERSIONS:
        raise CheckpointError(f"{path!r} has checkpoint format version {version}, older than the version "
                              f"{FORMAT_VERSION} this engine reads ({OLDER_VERSIONS[version]}). Re-create it: run "
                              f"the scene with this engine and save_checkpoint again.")
    if isinstance(version, bool) or version not in READABLE_VERSIONS:
        raise CheckpointError(f"{path!r} has checkpoint format version {version!r}; this engine reads versions "
                              f"{list(READABLE_VERSIONS)}.")
    for key, kind in (("timestamp", float), ("step_index", int), ("arrays", dict), ("scene", dict)):
        if not isinstance(payload.get(key), kind) or isinstance(payload.get(key), bool):
            raise CheckpointError(f"{path!r}: entry {key!r} is missing or not a {kind.__name__}.")
    if not 0 <= payload["step_index"] < MAX_STEP_INDEX:
        raise CheckpointError(f"{path!r}: step_index {payload['step_index']} is not in [0, 2**62).")
    if not np.isfinite(payload["timestamp"]):
        raise CheckpointError(f"{path!r}: timestamp {payload['timestamp']!r} is not a finite number.")
    for key, arr in payload["arrays"].items():
        if not isinstance(key, str) or not isinstance(arr, np.ndarray) or arr.dtype.kind not in "fiub":
            raise CheckpointError(f"{path!r}: array entry {key!r} is not a numeric NumPy array.")
    for key, value in payload.items():
        if key != "arrays":
            problem = _plain_problem(value)
            if problem:
                raise CheckpointError(f"{path!r}: entry {key!r} {problem}.")
    if version >= 2 or "checksum" in payload:  # (a version-1 file never has one: verify any that is there)
        check = payload.get("checksum")
        if not isinstance(check, dict) or check.get("algorithm") != "sha256" or not isinstance(check.get("digest"), str):
            raise DamagedCheckpointError(f"{path!r} is damaged: its 'checksum' entry is missing or malformed "
                                         f"(format version {version} files carry one).")
        if check["digest"] != digest(payload):
            raise DamagedCheckpointError(
                f"{path!r} is damaged: its contents do not match the SHA-256 checksum written with it (the arrays, "
                "the step index or the scene description changed after it was saved). Nothing was changed.")
    return payload


def _plain_problem(x) -> str | None:
    """Why `x` is not plain data (what the scene signature is made of: dicts with str keys, lists, str, numbers,
    bools, None, at most MAX_DEPTH deep and MAX_NODES values), or None. Iterative: no recursion limit to hit."""
    stack = [(x, 0)]
    nodes = 0
    while stack:
        v, depth = stack.pop()
        nodes += 1
        if depth > MAX_DEPTH:
            return f"is nested deeper than {MAX_DEPTH} levels"
        if nodes > MAX_NODES:
            return f"holds more than {MAX_NODES} values"
        if isinstance(v, dict):
            for k, item in v.items():
                if not isinstance(k, str):
                    return "has a key that is not a string"
                stack.append((item, depth + 1))
        elif isinstance(v, (list, tuple)):
            stack.extend((item, depth + 1) for item in v)
        elif not (v is None or isinstance(v, (str, int, float, bool))):
            return f"holds a {type(v).__name__}, which is not plain data"
    return None


def digest(payload: dict) -> str:
    """SHA-256 over every entry but "checksum": the plain entries as canonical JSON, then each array's key, dtype,
    shape and bytes in key order. (JSON does not tell a tuple from a list: `check_fits` still compares the
    scene description and every array's shape and dtype with the scene.)"""
    h = hashlib.sha256()
    plain = {k: v for k, v in payload.items() if k not in ("arrays", "checksum")}
    # default=repr: a writer may seal what the reader then refuses as not plain data
    h.update(json.dumps(plain, sort_keys=True, separators=(",", ":"), allow_nan=True, default=repr).encode())
    for key in sorted(payload["arrays"]):
        a = payload["arrays"][key]
        h.update(b"\0" + key.encode() + b"\0" + f"{a.dtype.str}{list(a.shape)}".encode() + b"\0")
        h.update(memoryview(np.ascontiguousarray(a).reshape(-1)).cast("B"))  # (ascontiguousarray makes 0-d 1-d)
    return h.hexdigest()


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
    payload = {
        "timestamp": time.time(),
        "step_index": int(step_index),
        "arrays": arrays,
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "engine_version": engine_version,
        "scene": signature,
    }
    return seal(payload)


def seal(payload: dict) -> dict:
    """Set payload["checksum"] from its contents (format version 2); returns the payload."""
    payload["checksum"] = {"algorithm": "sha256", "digest": digest(payload)}
    return payload
