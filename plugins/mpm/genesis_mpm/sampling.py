"""Particles inside a morph: the points of a regular lattice (spacing `size`, aligned to the shape's own frame)
that lie inside the shape, moved to its pose."""

import numpy as np

import genesis_core as gs


def _rotation(q):
    w, x, y, z = q
    return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
                     [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
                     [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)]])


def _lattice(half, size):
    """A lattice of spacing `size` centred on the origin, filling [-half, half] with whole cells."""
    axes = []
    for h in half:
        n = max(1, int(round(2 * h / size)))
        axes.append((np.arange(n) - (n - 1) / 2) * size)
    return np.stack(np.meshgrid(*axes, indexing="ij"), axis=-1).reshape(-1, 3)


def _inside(triangles, points):
    """Points inside a closed triangle mesh: the generalized winding number (the solid angle the surface subtends,
    over 4 pi; Van Oosterom & Strackee's formula per triangle) is 1 inside and 0 outside."""
    inside = np.zeros(len(points), dtype=bool)
    chunk = max(1, 2 ** 20 // len(triangles))  # points per batch: ~ 1M point-triangle pairs (tens of MB)
    for start in range(0, len(points), chunk):
        p = points[start:start + chunk, None, None, :]
        a, b, c = (triangles[None, :, i, :] - p[:, :, 0, :] for i in range(3))
        la, lb, lc = (np.linalg.norm(v, axis=-1) for v in (a, b, c))
        det = np.einsum("ntk,ntk->nt", a, np.cross(b, c))
        denom = la * lb * lc + np.einsum("ntk,ntk->nt", a, b) * lc + np.einsum("ntk,ntk->nt", a, c) * lb \
            + np.einsum("ntk,ntk->nt", b, c) * la
        winding = np.arctan2(det, denom).sum(axis=1) / (2 * np.pi)
        inside[start:start + chunk] = np.abs(winding) > 0.5
    return inside


def sample(morph, size) -> np.ndarray:
    """Local lattice points inside the morph, in world coordinates, shape (n, 3)."""
    if isinstance(morph, gs.morphs.Box):
        pts = _lattice(np.asarray(morph.size) / 2, size)
    elif isinstance(morph, gs.morphs.Sphere):
        r = morph.radius
        pts = _lattice((r, r, r), size)
        pts = pts[np.linalg.norm(pts, axis=1) <= r + 1e-9]
    elif isinstance(morph, gs.morphs.Cylinder):
        r, h = morph.radius, morph.height / 2
        pts = _lattice((r, r, h), size)
        pts = pts[np.linalg.norm(pts[:, :2], axis=1) <= r + 1e-9]
    elif isinstance(morph, gs.morphs.Mesh):
        import trimesh

        mesh = trimesh.load(morph.file, force="mesh")
        if not mesh.is_watertight:
            raise gs.OptionError(f"Mesh(file={morph.file!r}): particles fill a closed surface; this mesh has holes.")
        mesh.apply_scale(morph.scale)
        lo, hi = mesh.bounds
        centre = (lo + hi) / 2
        pts = _lattice((hi - lo) / 2, size) + centre
        pts = pts[_inside(np.asarray(mesh.triangles), pts)]
    else:
        raise gs.OptionError(f"MPM entities are sampled from Box, Sphere, Cylinder or Mesh morphs, "
                             f"not {type(morph).__name__}.")
    if len(pts) == 0:
        raise gs.OptionError(f"{type(morph).__name__} is smaller than one particle (particle_size {size:g} m).")
    return pts @ _rotation(morph.quat).T + np.asarray(morph.pos)


def volume_per_particle(size) -> float:
    return size ** 3

