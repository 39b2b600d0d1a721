"""Convex decomposition of non-convex meshes (CoACD: Wei et al. 2022, "Approximate convex decomposition for 3D
meshes with collision-aware concavity and tree search"), cached by content.

A `gs.morphs.Mesh` collides as convex pieces. A closed mesh whose convex hull exceeds its own volume by more than
`decompose_object_error_threshold` of the hull (a tank, a bowl, a mug) is split into convex parts, each a hull
geom of the same body; other meshes take their convex hull. The parts are cached as `.npz` (never a pickle) under
$GENESIS_CORE_CACHE/decompose (default ~/.cache/genesis-core/decompose), keyed by the SHA-256 of the file's bytes,
the scale and the options, so a mesh is decomposed once per machine.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile

import numpy as np

from .hull import HullError, hull_of_points, read_mesh

CACHE_ENV = "GENESIS_CORE_CACHE"


def cache_dir() -> str:
    root = os.environ.get(CACHE_ENV) or os.path.join(os.path.expanduser("~"), ".cache", "genesis-core")
    return os.path.join(root, "decompose")


def _coacd_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("coacd")
    except PackageNotFoundError:
        return "absent"


def load_mesh(path, scale):
    """Vertices (scaled) and triangles of a mesh file (duplicate vertices merged, so that a closed mesh reads as
    closed), and whether it is closed (watertight)."""
    mesh = read_mesh(path, process=True)
    vertices = np.asarray(mesh.vertices, dtype=np.float64) * np.asarray(scale, dtype=np.float64)
    faces = np.asarray(mesh.faces, dtype=np.int64)
    if len(vertices) == 0 or len(faces) == 0:
        raise HullError(f"mesh {path!r} has no triangles")
    return vertices, faces, bool(mesh.is_watertight)


def concavity(vertices, faces) -> float:
    """(hull volume - mesh volume) / hull volume of a closed mesh: 0 for a convex one."""
    import trimesh

    volume = abs(float(trimesh.Trimesh(vertices, faces, process=False).volume))
    hull = hull_of_points(vertices).mass_properties()[0]
    return max(0.0, (hull - volume) / hull) if hull > 0 else 0.0


def convex_parts(path, scale, threshold, options) -> list[np.ndarray] | None:
    """The vertex arrays of the convex parts of the mesh at `path` (scaled), or None if it is to take its hull
    (not closed, or within `threshold` of convex)."""
    if not np.isfinite(threshold):
        return None
    with open(path, "rb") as fh:
        content = fh.read()
    opts = dict(options or {})
    key = hashlib.sha256(content + json.dumps({"scale": list(np.broadcast_to(scale, 3).astype(float)),
                                                "threshold": float(threshold), "options": opts,
                                                "coacd": _coacd_version()}, sort_keys=True).encode()).hexdigest()
    cached = os.path.join(cache_dir(), key + ".npz")
    if os.path.isfile(cached):
        try:
            with np.load(cached, allow_pickle=False) as data:
                if int(data["n_parts"]) == 0:
                    return None
                return [data[f"part_{i}"] for i in range(int(data["n_parts"]))]
        except Exception:  # a damaged entry (truncated zip, empty file, ...) is decomposed again
            try:
                os.unlink(cached)
            except OSError:
                pass
    vertices, faces, closed = load_mesh(path, scale)
    parts = None
    if closed and concavity(vertices, faces) > threshold:
        try:
            import coacd
        except ImportError:
            raise HullError(f"mesh {path!r} is not convex and decomposing it needs CoACD: pip install coacd "
                            "(or pass decompose_object_error_threshold=float('inf') to collide as its hull)") from None
        coacd.set_log_level("error")
        run = coacd.run_coacd(coacd.Mesh(vertices, faces), **opts)
        parts = [np.asarray(p[0], dtype=np.float64) for p in run if len(p[0]) >= 4]
        if not parts:
            parts = None
    try:  # a cache that cannot be written costs a decomposition next time, never this load
        os.makedirs(cache_dir(), exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=key[:16], suffix=".tmp.npz", dir=cache_dir())
        with os.fdopen(fd, "wb") as fh:
            np.savez(fh, n_parts=np.int64(len(parts or [])), **{f"part_{i}": p for i, p in enumerate(parts or [])})
        os.replace(tmp, cached)
    except OSError:
        pass
    return parts
