"""Height fields from meshes and the subterrain generators, where Genesis World scripts import them
(`genesis.utils.terrain`): `mesh_to_heightfield`, and genesis_core.terrain's names."""

from __future__ import annotations

import math

import numpy as np

from ..terrain import (GENERATORS, SUBTERRAIN_TYPES, fractal_terrain, height_at, subterrain_grid,  # noqa: F401
                       triangles)


def mesh_to_heightfield(path, spacing, oversample: int = 1, *, up_axis: str = "z"):
    """(heights [nx, ny], xs [nx], ys [ny]) of a mesh file seen from above, as Genesis World's function: a grid of
    `spacing` (a number, or (dx, dy)) over the mesh's x-y bounds, nx = ceil(width / dx) + 1 lines; each vertex
    the highest surface hit by vertical rays cast at `oversample` x `oversample` points of its cell (oversample 1:
    one ray at the vertex); where no ray hits, the mesh's lowest height. up_axis "y" turns a Y-up mesh (glTF)
    Z-up first. The mesh's units are kept (heights in metres with vertical_scale 1)."""
    from ..mesh_files import read_mesh
    from ..errors import OptionError

    if up_axis not in ("z", "y", "Z", "Y"):
        raise OptionError(f"mesh_to_heightfield: up_axis={up_axis!r} is not 'z' or 'y'.")
    dx, dy = (float(spacing), float(spacing)) if np.isscalar(spacing) else (float(spacing[0]), float(spacing[1]))
    if not (dx > 0 and dy > 0 and math.isfinite(dx) and math.isfinite(dy)):
        raise OptionError(f"mesh_to_heightfield: spacing={spacing!r} is not accepted: expected finite sizes > 0.")
    if not isinstance(oversample, int) or isinstance(oversample, bool) or oversample < 1:
        raise OptionError(f"mesh_to_heightfield: oversample={oversample!r} is not accepted: expected an int >= 1.")
    mesh = read_mesh(path, process=False)
    v = np.asarray(mesh.vertices, dtype=np.float64)
    f = np.asarray(mesh.faces, dtype=np.int64).reshape(-1, 3)
    if up_axis.lower() == "y":  # -90 degrees about x: (x, y, z) -> (x, z, -y)
        v = np.stack([v[:, 0], -v[:, 2], v[:, 1]], axis=1)
    lo, hi = v.min(axis=0), v.max(axis=0)
    nx = math.ceil((hi[0] - lo[0]) / dx) + 1
    ny = math.ceil((hi[1] - lo[1]) / dy) + 1
    xs = np.linspace(lo[0], hi[0], nx)
    ys = np.linspace(lo[1], hi[1], ny)
    fx = np.linspace(lo[0], hi[0], nx * oversample)
    fy = np.linspace(lo[1], hi[1], ny * oversample)
    px, py = np.meshgrid(fx, fy, indexing="ij")
    top = _highest_hits(v[f], px.ravel(), py.ravel()).reshape(px.shape)
    coarse = top.reshape(nx, oversample, ny, oversample).swapaxes(1, 2).reshape(nx, ny, -1)
    with np.errstate(invalid="ignore"):
        heights = np.where(np.isnan(coarse).all(axis=2), lo[2], np.nanmax(np.where(np.isnan(coarse), -np.inf, coarse),
                                                                            axis=2))
    return heights.astype(np.float32), xs.astype(np.float32), ys.astype(np.float32)


def _highest_hits(tri, x, y, chunk=4096):
    """[P]: the highest z of the triangles [T, 3, 3] over each point (x, y) (NaN where none is), by barycentric
    coordinates of the points in each triangle's x-y projection, the triangles binned by their x-y boxes."""
    out = np.full(len(x), np.nan)
    a, b, c = tri[:, 0], tri[:, 1], tri[:, 2]
    det = (b[:, 0] - a[:, 0]) * (c[:, 1] - a[:, 1]) - (c[:, 0] - a[:, 0]) * (b[:, 1] - a[:, 1])
    keep = np.abs(det) > 1e-18  # (vertical triangles are not seen from above)
    a, b, c, det = a[keep], b[keep], c[keep], det[keep]
    tlo = np.minimum(np.minimum(a, b), c)[:, :2]
    thi = np.maximum(np.maximum(a, b), c)[:, :2]
    for s in range(0, len(x), chunk):
        px, py = x[s:s + chunk, None], y[s:s + chunk, None]
        near = np.nonzero((px >= tlo[None, :, 0] - 1e-9).any(0) & (px <= thi[None, :, 0] + 1e-9).any(0)
                          & (py >= tlo[None, :, 1] - 1e-9).any(0) & (py <= thi[None, :, 1] + 1e-9).any(0))[0]
        if not len(near):
            continue
        A, B, C, D = a[near], b[near], c[near], det[near]
        l1 = ((px - A[:, 0]) * (C[:, 1] - A[:, 1]) - (C[:, 0] - A[:, 0]) * (py - A[:, 1])) / D
        l2 = ((B[:, 0] - A[:, 0]) * (py - A[:, 1]) - (px - A[:, 0]) * (B[:, 1] - A[:, 1])) / D
        inside = (l1 >= -1e-9) & (l2 >= -1e-9) & (l1 + l2 <= 1 + 1e-9)
        z = np.where(inside, A[:, 2] + l1 * (B[:, 2] - A[:, 2]) + l2 * (C[:, 2] - A[:, 2]), -np.inf)
        best = z.max(axis=1)
        out[s:s + chunk] = np.where(np.isfinite(best), best, np.nan)
    return out
