"""The PBD solver's static structure, in numpy: each entity's particles and constraints from its morph (a cloth's
or rope's mesh, an elastic body's tets, a liquid's lattice), the particles' lumped masses, and the order the
Gauss-Seidel sweeps visit the constraints in.

Sweep order. An environment's constraints of one kind are split into `K` groups of particles (slabs along the
rest shape's longest axis, equal particle counts) plus a last group of the constraints that straddle two slabs.
The K slab groups touch disjoint particles, so K threads sweep them at once; the straddling group is swept after
them. Each group is swept in constraint order. K is a function of the batch and the constraint count only, so
a scene gives the same numbers on every machine.
"""

from __future__ import annotations

import os

import numpy as np

from genesis_core.errors import OptionError
from genesis_core.particles.reduce import n_parts
from genesis_core.rotations import quat_to_mat

CONSTRAINTS_PER_PART = 2048  # a slab group per this many constraints, up to the kit's part count


def _transform(verts, morph):
    return (np.asarray(verts, dtype=np.float64) * morph.scale) @ quat_to_mat(morph.quat).T + np.asarray(morph.pos)


def _obj_lines(path):
    """(vertices, segments) of an OBJ file's `v` and `l` records (a polyline `l a b c` is two segments); a record
    that is not numbers, a vertex that is not finite and a segment naming a vertex the file lacks raise
    gs.ModelFileError naming the file and the line."""
    from genesis_core.errors import ModelFileError
    from genesis_core.mesh_files import MAX_MESH_COORDINATE, check_vertices

    verts, segs = [], []
    with open(path, errors="replace") as fh:
        for number, line in enumerate(fh, 1):
            parts = line.split()
            if not parts or parts[0] not in ("v", "l"):
                continue
            try:
                if parts[0] == "v":
                    verts.append([float(x) for x in parts[1:4]])
                    if len(verts[-1]) != 3:
                        raise ValueError("a vertex needs 3 coordinates")
                else:
                    idx = [int(p.split("/")[0]) for p in parts[1:]]
                    idx = [i - 1 if i > 0 else len(verts) + i for i in idx]
                    segs.extend([a, b] for a, b in zip(idx, idx[1:]))
            except ValueError as exc:
                raise ModelFileError(f"mesh {path!r}, line {number}: {line.strip()[:80]!r}: {exc}") from None
    verts = np.asarray(verts, dtype=np.float64).reshape(-1, 3)
    check_vertices(verts, MAX_MESH_COORDINATE, f"mesh {path!r}")
    segs = np.asarray(segs, dtype=np.int64).reshape(-1, 2)
    if len(segs) and (segs.min() < 0 or segs.max() >= len(verts)):
        raise ModelFileError(f"mesh {path!r}: a segment names a vertex the file does not have ({len(verts)} vertices)")
    return verts, segs


def cloth_mesh(morph):
    """(vertices world (n, 3), triangles (m, 3), segments (k, 2)) of a cloth's Mesh morph: a triangle mesh, or
    a rope of line segments (then no triangles)."""
    from genesis_core import morphs

    if not isinstance(morph, morphs.Mesh):
        raise OptionError(f"gs.materials.PBD.Cloth takes a gs.morphs.Mesh (a surface mesh, or line segments for a "
                          f"rope), not {type(morph).__name__}.")
    if os.path.splitext(morph.file)[1].lower() == ".obj":
        verts, segs = _obj_lines(morph.file)
        if len(segs):
            used = np.unique(segs)
            if len(used) != len(verts):
                raise OptionError(f"Mesh(file={morph.file!r}): a rope's every vertex must belong to a segment "
                                  f"({len(verts) - len(used)} do not).")
            return _transform(verts, morph), np.zeros((0, 3), dtype=np.int64), segs
    from genesis_core.mesh_files import read_mesh

    mesh = read_mesh(morph.file)
    if len(mesh.faces) == 0:
        raise OptionError(f"Mesh(file={morph.file!r}) holds no triangles (and no line segments).")
    faces = np.asarray(mesh.faces, dtype=np.int64)
    return _transform(mesh.vertices, morph), faces, np.zeros((0, 2), dtype=np.int64)


def triangle_edges(faces):
    """(edges (e, 2) sorted pairs in first-seen order, bending quads (q, 4): (p0, p1, p2, p3) with (p0, p1) an
    interior edge shared by triangles (p0, p1, p2) and (p1, p0, p3) as oriented in the mesh)."""
    edges, first_tri, quads = [], {}, []
    for a, b, c in faces:
        for u, w, opp in ((a, b, c), (b, c, a), (c, a, b)):
            key = (min(u, w), max(u, w))
            if key not in first_tri:
                edges.append(key)
                first_tri[key] = (u, w, opp)
            else:  # the second triangle: the first one's orientation for both (the rest angle is measured alike)
                u0, w0, opp0 = first_tri[key]
                quads.append((u0, w0, opp0, opp))
    return (np.asarray(edges, dtype=np.int64).reshape(-1, 2), np.asarray(quads, dtype=np.int64).reshape(-1, 4))


def dihedral(p0, p1, p2, p3):
    """The signed bending angle (rad, 0 flat) across edge (p0, p1) between triangles (p0, p1, p2) and
    (p1, p0, p3), for arrays of points (n, 3): the same definition as the kernels'."""
    e = p1 - p0
    na = np.cross(e, p2 - p0)
    nb = np.cross(p3 - p0, e)
    na /= np.linalg.norm(na, axis=-1, keepdims=True)
    nb /= np.linalg.norm(nb, axis=-1, keepdims=True)
    eh = e / np.linalg.norm(e, axis=-1, keepdims=True)
    return np.arctan2((np.cross(na, nb) * eh).sum(-1), (na * nb).sum(-1))


def tet_edges(tets):
    pairs = np.concatenate([tets[:, [a, b]] for a, b in ((0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3))])
    pairs = np.sort(pairs, axis=1)
    _, first = np.unique(pairs, axis=0, return_index=True)
    return pairs[np.sort(first)]


def lumped_triangle_mass(verts, faces, rho):
    area = 0.5 * np.linalg.norm(np.cross(verts[faces[:, 1]] - verts[faces[:, 0]],
                                         verts[faces[:, 2]] - verts[faces[:, 0]]), axis=1)
    mass = np.zeros(len(verts))
    np.add.at(mass, faces.ravel(), np.repeat(rho * area / 3.0, 3))
    return mass


def lumped_segment_mass(verts, segs, rho):
    length = np.linalg.norm(verts[segs[:, 1]] - verts[segs[:, 0]], axis=1)
    mass = np.zeros(len(verts))
    np.add.at(mass, segs.ravel(), np.repeat(rho * length / 2.0, 2))
    return mass


def lumped_tet_mass(verts, tets, rho):
    vol = tet_volume(verts, tets)
    mass = np.zeros(len(verts))
    np.add.at(mass, tets.ravel(), np.repeat(rho * vol / 4.0, 4))
    return mass


def tet_volume(verts, tets):
    a, b, c, d = (verts[tets[:, k]] for k in range(4))
    return np.einsum("ij,ij->i", np.cross(b - a, c - a), d - a) / 6.0


def slab_labels(points, k):
    """Each point's slab in [0, k): k equal-count slabs along the points' longest extent (ties by index)."""
    if k == 1 or len(points) == 0:
        return np.zeros(len(points), dtype=np.int64)
    axis = int(np.argmax(points.max(0) - points.min(0)))
    rank = np.empty(len(points), dtype=np.int64)
    rank[np.lexsort((np.arange(len(points)), points[:, axis]))] = np.arange(len(points))
    return rank * k // len(points)


def n_groups(batch, n_constraints):
    return n_parts(batch, n_constraints // CONSTRAINTS_PER_PART)


def group_order(idx, labels, k):
    """(permutation of the constraints, offsets (k + 2,)): constraints of slab 0, ..., slab k - 1, then those
    that straddle slabs, each in their original order."""
    if len(idx) == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(k + 2, dtype=np.int64)
    lab = labels[idx]
    group = np.where((lab == lab[:, :1]).all(axis=1), lab[:, 0], k)
    order = np.argsort(group, kind="stable")
    counts = np.bincount(group, minlength=k + 1)
    return order, np.concatenate([[0], np.cumsum(counts)])


def schedule(cons: dict, iterations, n_groups: int, n_particles: int):
    """The differentiable sweeps' schedule (kernels.sweep_schedule): the projections in the plain sweeps' order
    (groups 0..K-1, then the straddling group K; in each, `iterations[0]` stretch sweeps, then bending, then
    volume, alternating direction), as rows (kind, constraint, lambda source, 4 position sources), where a
    lambda source is the projection that last updated that constraint's multiplier in this substep (-1: none,
    zero) and a position source is 4 p + k for the k-th particle of projection p that last moved the particle
    (-1: its prediction). Returns (rows int32 (P, 7), last (N,): each particle's final source).

    cons: {"s": (flat pairs, offsets), "q": (flat quads, offsets), "t": (flat tets, offsets)} as numpy arrays."""
    kinds = (("s", 0, 2), ("q", 1, 4), ("t", 2, 4))
    rows = []
    last = np.full(n_particles, -1, dtype=np.int64)
    last_lam = {key: {} for key, _, _ in kinds}
    for k in range(n_groups + 1):
        for (key, code, width), its in zip(kinds, iterations):
            idx, off = cons[key]
            lo, hi = int(off[k]), int(off[k + 1])
            for it in range(int(its)):
                order = range(lo, hi) if it % 2 == 0 else range(hi - 1, lo - 1, -1)
                for c in order:
                    p = len(rows)
                    parts = idx[width * c:width * c + width]
                    src = [int(last[i]) for i in parts] + [-1] * (4 - width)
                    rows.append([code, c, last_lam[key].get(c, -1)] + src)
                    last_lam[key][c] = p
                    for slot, i in enumerate(parts):
                        last[i] = 4 * p + slot
    return np.asarray(rows, dtype=np.int32).reshape(-1, 7), last.astype(np.int32)
