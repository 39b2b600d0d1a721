"""Mesh files (OBJ, STL, PLY, GLB, DAE, ...) as every solver reads them: one reader that refuses what cannot be
simulated, before any hull, sampling or tetrahedralization sees it.

trimesh's processing drops a vertex that is not finite, with the faces that use it, without a word; and a face
that names a vertex past the end raises a bare IndexError. So the file is read unprocessed, checked, then
processed (duplicate vertices merged) as trimesh would have done."""

from __future__ import annotations

import os

import numpy as np

from .errors import ModelFileError

# the largest vertex coordinate accepted in a file's own units (a solver bounds the scaled coordinates again)
MAX_MESH_COORDINATE = 1e9


def read_mesh(path, process: bool = True):
    """The trimesh mesh of the file at `path` (all its parts as one mesh). `process`: merge duplicate vertices,
    as `trimesh.load` does by default. Raises gs.ModelFileError naming the file where it cannot be read, holds a
    vertex that is not finite or beyond MAX_MESH_COORDINATE (the first one named), or a face that names a vertex
    it does not have."""
    import trimesh

    path = os.fspath(path)
    if not os.path.isfile(path):
        raise ModelFileError(f"mesh {path!r} is not a file")
    try:
        mesh = trimesh.load(path, force="mesh", process=False)
        if not isinstance(mesh, trimesh.Trimesh):
            raise ValueError("it holds no triangle mesh")
        vertices = np.asarray(mesh.vertices, dtype=np.float64).reshape(-1, 3)
        faces = np.asarray(mesh.faces).reshape(-1, 3)
    except Exception as exc:  # trimesh raises many kinds for unreadable files
        raise ModelFileError(f"cannot read mesh {path!r}: {type(exc).__name__}: {exc}") from None
    check_vertices(vertices, MAX_MESH_COORDINATE, f"mesh {path!r}")
    if len(faces) and (faces.min() < 0 or faces.max() >= len(vertices)):
        raise ModelFileError(f"mesh {path!r}: a face names vertex {int(faces.max())} of {len(vertices)} (or a "
                             "negative one)")
    if process:
        mesh.process()
    return mesh


def check_vertices(vertices, bound: float, what: str):
    """Refuse (gs.ModelFileError naming `what`) vertices [N, 3] that are not finite or beyond +-bound."""
    v = np.asarray(vertices, dtype=np.float64).reshape(-1, 3)
    bad = ~np.isfinite(v).all(axis=1) | (np.abs(v) > bound).any(axis=1)
    if bad.any():
        i = int(np.argmax(bad))
        raise ModelFileError(f"{what}: vertex {i} = {v[i].tolist()} is not accepted: expected finite coordinates "
                             f"of magnitude at most {bound:g}")
