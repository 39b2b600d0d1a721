"""Convex decomposition of non-convex meshes (CoACD: Wei et al. 2022, "Approximate convex decomposition for 3D
meshes with collision-aware concavity and tree search"), cached by content.

A mesh collides as convex pieces. A mesh whose convex hull exceeds its own volume by more than the morph's error
threshold of the hull (a tank, a bowl, a mug) is split into convex parts, each a hull geom of the same body;
other meshes take their convex hull. A mesh that is not closed (overlapping parts, holes: common in scans and CAD
exports) has its volume measured on a filled voxel grid (solid_volume), so it is decomposed too, never silently
taken as its hull; a decomposition that yields no part is refused with the reason. The parts are cached as `.npz` (never a pickle) under
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


VOXELS = 64  # cells along the longest side of the grid that measures an open mesh's volume


def solid_volume(vertices, faces, closed) -> float:
    """The volume a mesh encloses: exact (the divergence theorem) for a closed mesh; for one that is not closed
    (holes, overlapping parts, unmatched edges), the volume of the cells of a grid of VOXELS cells along its longest
    side that its surface crosses or encloses (the surface's cells, filled in), an overestimate by about a cell
    layer that never reads a non-convex mesh as convex."""
    import trimesh

    mesh = trimesh.Trimesh(vertices, faces, process=False)
    if closed:
        return abs(float(mesh.volume))
    pitch = float(np.ptp(vertices, axis=0).max()) / VOXELS
    if pitch <= 0:
        return 0.0
    cells = np.asarray(mesh.voxelized(pitch).sparse_indices, dtype=np.int64)
    cells -= cells.min(axis=0)
    surface = np.zeros(cells.max(axis=0) + 3, dtype=bool)  # (a layer of empty cells around it)
    surface[cells[:, 0] + 1, cells[:, 1] + 1, cells[:, 2] + 1] = True
    outside = np.zeros_like(surface)  # the empty cells reachable from the grid's border (a flood fill by dilation)
    outside[0, :, :] = outside[-1, :, :] = outside[:, 0, :] = outside[:, -1, :] = True
    outside[:, :, 0] = outside[:, :, -1] = True
    outside &= ~surface
    while True:
        grown = outside.copy()
        grown[1:] |= outside[:-1]
        grown[:-1] |= outside[1:]
        grown[:, 1:] |= outside[:, :-1]
        grown[:, :-1] |= outside[:, 1:]
        grown[:, :, 1:] |= outside[:, :, :-1]
        grown[:, :, :-1] |= outside[:, :, 1:]
        grown &= ~surface
        if np.array_equal(grown, outside):
            break
        outside = grown
    return float((~outside).sum()) * pitch ** 3


def concavity(vertices, faces, closed=True) -> float:
    """(hull volume - mesh volume) / hull volume: 0 for a convex mesh (solid_volume for one that is not
    closed)."""
    volume = solid_volume(vertices, faces, closed)
    hull = hull_of_points(vertices).mass_properties()[0]
    return max(0.0, (hull - volume) / hull) if hull > 0 else 0.0


def convex_parts(path, scale, threshold, options) -> list[np.ndarray] | None:
    """The vertex arrays of the convex parts of the mesh at `path` (scaled), or None if it is to take its hull
    (its concavity, closed or not, at most `threshold`; threshold 0 always decomposes)."""
    if not np.isfinite(threshold):
        return None
    with open(path, "rb") as fh:
        content = fh.read()
    opts = dict(options or {})
    key = hashlib.sha256(content + json.dumps({"scale": list(np.broadcast_to(scale, 3).astype(float)),
                                                "threshold": float(threshold), "options": opts,
                                                "coacd": _coacd_version(), "rule": 2}, sort_keys=True).encode()).hexdigest()
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
    if threshold == 0 or concavity(vertices, faces, closed) > threshold:
        try:
            import coacd
        except ImportError:
            raise HullError(f"mesh {path!r} is not convex and decomposing it needs CoACD: pip install coacd "
                            "(or pass decompose_object_error_threshold=float('inf') to collide as its hull)") from None
        coacd.set_log_level("error")
        run = coacd.run_coacd(coacd.Mesh(vertices, faces), **opts)
        parts = [np.asarray(p[0], dtype=np.float64) for p in run if len(p[0]) >= 4]
        if not parts:
            raise HullError(f"mesh {path!r} is not convex (concavity {concavity(vertices, faces, closed):.3f}"
                            f"{'' if closed else ', not closed'}) and its convex decomposition gave no part with "
                            "a volume; repair the mesh, or pass decompose_object_error_threshold=float('inf') "
                            "(decompose_robot_error_threshold for a robot's meshes) to collide as its hull")
    try:  # a cache that cannot be written costs a decomposition next time, never this load
        os.makedirs(cache_dir(), exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=key[:16], suffix=".tmp.npz", dir=cache_dir())
        with os.fdopen(fd, "wb") as fh:
            np.savez(fh, n_parts=np.int64(len(parts or [])), **{f"part_{i}": p for i, p in enumerate(parts or [])})
        os.replace(tmp, cached)
    except OSError:
        pass
    return parts
