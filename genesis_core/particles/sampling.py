"""Particles inside a morph, in world coordinates.

"regular": the points of a lattice of spacing `size`, centred on the shape and aligned with its own frame, that lie
inside it (inside a Mesh: where its generalized winding number exceeds 1/2, which also fills a mesh with holes).
"random": as many points as the lattice has, uniform inside the shape, from a generator seeded by `seed` (the same
morph, size and seed give the same points). The morph's pose is applied once, at the end.
"""

from __future__ import annotations

import numpy as np

from .. import morphs
from ..errors import ModelFileError, OptionError
from ..rotations import quat_to_mat

SAMPLERS = ("regular", "random")


MAX_LATTICE = 1e8  # points of the lattice a morph is sampled on
RANDOM_ROUNDS = 1000  # rounds of candidates the random sampler draws at most


def _lattice(half, size):
    """A lattice of spacing `size` centred on the origin, filling [-half, half] with whole cells."""
    axes = []
    for h in half:
        n = max(1, int(round(2 * h / size)))
        axes.append((np.arange(n) - (n - 1) / 2) * size)
    return np.stack(np.meshgrid(*axes, indexing="ij"), axis=-1).reshape(-1, 3)


def inside_closed_mesh(triangles, points):
    """Points inside a triangle mesh [T, 3, 3]: the generalized winding number (the solid angle the surface
    subtends, over 4 pi; Van Oosterom & Strackee's formula per triangle) is 1 inside and 0 outside a closed mesh,
    and stays near those values across small holes and cracks (Jacobson et al. 2013), so a mesh with holes is
    filled as if closed (as Genesis World fills it, through libigl's winding-number signed distance)."""
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


def _shape(morph):
    """(half extents of the local bounding box, its centre, inside(points) -> bool mask) in the morph's frame."""
    if isinstance(morph, morphs.Box):
        half = np.asarray(morph.size) / 2
        return half, np.zeros(3), lambda p: np.all(np.abs(p) <= half + 1e-9, axis=1)
    if isinstance(morph, morphs.Sphere):
        r = morph.radius
        return np.full(3, r), np.zeros(3), lambda p: np.linalg.norm(p, axis=1) <= r + 1e-9
    if isinstance(morph, morphs.Cylinder):
        r, h = morph.radius, morph.height / 2
        return np.array([r, r, h]), np.zeros(3), \
            lambda p: (np.linalg.norm(p[:, :2], axis=1) <= r + 1e-9) & (np.abs(p[:, 2]) <= h + 1e-9)
    if isinstance(morph, morphs.Capsule):
        r, h = morph.radius, morph.height / 2

        def inside(p):
            axial = np.clip(p[:, 2], -h, h)
            return np.linalg.norm(p - np.stack([0 * axial, 0 * axial, axial], axis=1), axis=1) <= r + 1e-9
        return np.array([r, r, h + r]), np.zeros(3), inside
    if isinstance(morph, morphs.Mesh):
        from ..mesh_files import read_mesh

        mesh = read_mesh(morph.file)
        if len(mesh.faces) == 0:
            raise ModelFileError(f"Mesh(file={morph.file!r}) holds no triangles: particles fill the volume a closed "
                                 "surface encloses.")
        mesh.apply_scale(morph.scale)
        lo, hi = mesh.bounds
        triangles = np.asarray(mesh.triangles)
        return (hi - lo) / 2, (lo + hi) / 2, lambda p: inside_closed_mesh(triangles, p)
    raise OptionError(f"particles are sampled inside Box, Sphere, Cylinder, Capsule or Mesh morphs, "
                      f"not {type(morph).__name__}.")


def sample(morph, size: float, sampler: str = "regular", seed: int = 0) -> np.ndarray:
    """Points inside the morph, world coordinates, shape (n, 3), float64."""
    if sampler not in SAMPLERS:
        raise OptionError(f"sampler={sampler!r} is not accepted: expected one of {SAMPLERS}.")
    half, centre, inside = _shape(morph)
    cells = float(np.prod([max(1.0, round(2 * h / size)) for h in half]))
    if cells > MAX_LATTICE:
        raise OptionError(f"{type(morph).__name__} is {2 * np.asarray(half)} m across: at particle_size {size:g} m its "
                          f"lattice would hold {cells:.3g} points, more than {MAX_LATTICE:g}.")
    pts = _lattice(half, size) + centre
    pts = pts[inside(pts)]
    if len(pts) == 0:
        raise OptionError(f"{type(morph).__name__} is smaller than one particle (particle_size {size:g} m).")
    if sampler == "random":
        rng = np.random.default_rng(seed)
        want, found = len(pts), []
        for _ in range(RANDOM_ROUNDS):
            cand = centre + rng.uniform(-1.0, 1.0, size=(max(2 * want, 64), 3)) * half
            found.append(cand[inside(cand)])
            if sum(len(x) for x in found) >= want:
                break
        else:
            raise OptionError(f"{type(morph).__name__}: {RANDOM_ROUNDS} rounds of random points found "
                              f"{sum(len(x) for x in found)} of the {want} inside it (a shape too thin for its box).")
        pts = np.concatenate(found)[:want]
    return pts @ quat_to_mat(morph.quat).T + np.asarray(morph.pos)


def volume_per_particle(size: float) -> float:
    return size ** 3
