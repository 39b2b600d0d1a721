"""Packs the solvers' render views into the ray caster's arrays, checks them, and launches it."""

from __future__ import annotations

import hashlib

import attrs
import numpy as np
import torch

from ..errors import SceneError
from ..rotations import quat_to_mat
from . import kernels as K
from ..launch import torch_one_thread
from .view import (PALETTE, PRIM_OF_GEOM, RenderView, entity_color, particle_codes, segmentation_map,
                   view_keys)

# the light: direction towards it (world, normalised below), the ambient share of the shading
LIGHT_DIR = (0.4, 0.25, 1.0)
AMBIENT = 0.3
F32 = torch.float32
# fewer bounded primitives than this are tested one by one (bounding-sphere culling) rather than through the BVH,
# whose box tests cost more than they save on a handful (measured: docs/rendering.md)
BVH_MIN_PRIMS = 16
# the particle grid's cells per axis, at most
GRID_MAX_CELLS = 128
# a triangle mesh's BVH leaves hold at most this many triangles
LEAF_TRIS = 4
# the triangle index is carried as a float32 in the kernel (exact below 2^24)
MAX_MESH_FACES = 2 ** 24


def _bound_radius(kind: int, size: np.ndarray, planes: np.ndarray) -> float:
    """A sphere about the primitive's origin that holds it (m); -1 for the unbounded plane."""
    if kind == K.PRIM_PLANE:
        return -1.0
    if kind == K.PRIM_SPHERE:
        return float(size[0])
    if kind in (K.PRIM_CAPSULE,):
        return float(size[0] + size[1])
    if kind == K.PRIM_CYLINDER:
        return float(np.hypot(size[0], size[1]))
    if kind == K.PRIM_BOX:
        return float(np.linalg.norm(size))
    if kind == K.PRIM_ELLIPSOID:
        return float(np.max(size[:3]))
    # a convex piece: the farthest of its vertices (unbounded if it has none)
    return -1.0 if planes is None else convex_bound(planes)


def _convex_bound_uncached(planes: np.ndarray) -> float:
    """The largest distance from the origin of a vertex of the convex piece {p : n . p <= offset} (m, padded by
    1e-4 relative); -1 (no culling) if the piece is unbounded or empty.

    Every vertex ends an edge, and every edge lies on the line where two planes meet: for each pair of planes the
    line is clipped by all the other half-spaces, and a non-empty segment's ends are vertices (an unbounded one
    means an unbounded piece). O(P^3) flops in array operations: ~10 ms for the 124 planes of a panda link."""
    n, off = planes[:, :3].astype(np.float64), planes[:, 3].astype(np.float64)
    P = len(n)
    if P < 4 or not (np.all(np.isfinite(n)) and np.all(np.isfinite(off))):
        return -1.0
    tol = 1e-6 * max(1.0, float(np.abs(off).max()))
    ia, ib = np.triu_indices(P, 1)
    best = -1.0
    for lo in range(0, len(ia), max(1, 2 ** 20 // P)):  # pairs in chunks: ~1M (pair, plane) entries at a time
        a, b = ia[lo:lo + 2 ** 20 // P], ib[lo:lo + 2 ** 20 // P]
        d = np.cross(n[a], n[b])
        dd = (d * d).sum(-1)
        ok = dd > 1e-12
        a, b, d, dd = a[ok], b[ok], d[ok], dd[ok]
        # the point of the line nearest the origin: n_a . x = off_a, n_b . x = off_b, d . x = 0
        x0 = (off[a, None] * np.cross(n[b], d) + off[b, None] * np.cross(d, n[a])) / dd[:, None]
        denom = d @ n.T  # [pairs, P]: n_k . d
        room = off[None, :] - x0 @ n.T  # n_k . (x0 + s d) <= off_k  <=>  s denom <= room
        own = np.zeros_like(denom, dtype=bool)
        own[np.arange(len(a)), a] = own[np.arange(len(a)), b] = True
        par = (np.abs(denom) <= 1e-12) | own
        with np.errstate(divide="ignore", invalid="ignore"):
            s = room / denom
        s_hi = np.where(~par & (denom > 0), s, np.inf).min(-1)
        s_lo = np.where(~par & (denom < 0), s, -np.inf).max(-1)
        empty = (par & ~own & (room < -tol)).any(-1) | (s_lo > s_hi + tol / np.sqrt(dd))
        if (~empty & ~(np.isfinite(s_lo) & np.isfinite(s_hi))).any():
            return -1.0  # an edge without an end: the piece is unbounded
        keep = ~empty
        if keep.any():
            ends = np.concatenate([x0[keep] + s_lo[keep, None] * d[keep], x0[keep] + s_hi[keep, None] * d[keep]])
            best = max(best, float(np.linalg.norm(ends, axis=-1).max()))
    return best * (1.0 + 1e-4) + 1e-6 if best >= 0 else -1.0


# convex bounding radii by the planes' bytes: a pure function of them, shared by every camera and scene
_CONVEX_BOUNDS: dict[bytes, float] = {}


def convex_bound(planes: np.ndarray) -> float:
    """`_convex_bound_uncached`, computed once per distinct piece in the process."""
    key = np.ascontiguousarray(planes, dtype=np.float32).tobytes()
    if key not in _CONVEX_BOUNDS:
        _CONVEX_BOUNDS[key] = _convex_bound_uncached(planes)
    return _CONVEX_BOUNDS[key]


def particle_grid(part_f: torch.Tensor | None, B: int, dev) -> dict:
    """Each environment's uniform grid over its drawn particles (part_f [B, N, 4]: position, radius; radius <= 0:
    not drawn), in the kernel's layout (kernels.py): cells at least a particle's diameter wide (so a sphere
    overlaps at most 2 cells per axis) and about one cell per particle, at most GRID_MAX_CELLS per axis. Each
    particle is listed in every cell its bounding box overlaps, in increasing index order within a cell.

    Every array's size is fixed by B and N alone (each environment owns max(N, 1) cells, of which its grid uses
    dims_x dims_y dims_z <= max(N, 1)), so that nothing is read back from the device to size them: a grid is built
    without a host synchronisation."""
    empty = dict(grid_f=torch.zeros((B, 6), dtype=F32, device=dev), grid_i=torch.zeros((B, 4), dtype=torch.int32,
                                                                                         device=dev),
                 cell_start=torch.zeros(2, dtype=torch.int32, device=dev),
                 cell_items=torch.zeros(1, dtype=torch.int32, device=dev))
    if part_f is None:
        return empty
    N = part_f.shape[1]
    per_env = max(N, 1)  # cells each environment owns
    pos, r = part_f[..., :3].double(), part_f[..., 3].double()
    drawn = r > 0
    n_drawn = drawn.sum(dim=1)  # [B]
    big = torch.full_like(pos, float("inf"))
    lo = torch.where(drawn[..., None], pos - r[..., None], big).amin(dim=1)
    hi = torch.where(drawn[..., None], pos + r[..., None], -big).amax(dim=1)
    some = n_drawn > 0
    lo = torch.where(some[:, None], lo, torch.zeros_like(lo))
    hi = torch.where(some[:, None], hi, torch.ones_like(hi))
    extent = (hi - lo).clamp_min(1e-6)
    r_max = torch.where(drawn, r, torch.zeros_like(r)).amax(dim=1).clamp_min(1e-6)
    volume = extent.prod(dim=1)
    target = torch.maximum(2.0 * r_max, (volume / n_drawn.clamp_min(1)).pow(1.0 / 3.0))  # cell edge, m
    dims = torch.floor(extent / target[:, None]).clamp(1, GRID_MAX_CELLS).long()
    # at most per_env cells (the rule above keeps under it but where an axis was raised to 1 cell): every axis
    # shrunk by the same factor, then capped axis by axis
    over = (dims.prod(dim=1).double() / per_env).clamp_min(1.0).pow(1.0 / 3.0)
    dims = torch.floor(dims / over[:, None]).clamp_min(1).long()
    nx = dims[:, 0].clamp_max(per_env)
    ny = torch.minimum(dims[:, 1], per_env // nx)
    nz = torch.minimum(dims[:, 2], per_env // (nx * ny))
    dims = torch.stack([nx, ny, nz], dim=1)
    cell = extent / dims * (1.0 + 1e-6)  # a hair wider: the farthest particle's box stays inside the last cell
    dims = torch.where(some[:, None], dims, torch.zeros_like(dims))
    total = B * per_env
    first = torch.arange(B, device=pos.device) * per_env
    # every (particle, overlapped cell): the cells of its box's corners (two per axis at most); the others are
    # keyed `total`, past every cell
    c_lo = torch.floor((pos - r[..., None] - lo[:, None]) / cell[:, None]).long()
    c_hi = torch.floor((pos + r[..., None] - lo[:, None]) / cell[:, None]).long()
    dmax = (dims - 1).clamp_min(0)[:, None]
    c_lo = torch.minimum(torch.maximum(c_lo, torch.zeros_like(c_lo)), dmax)
    c_hi = torch.minimum(torch.maximum(c_hi, torch.zeros_like(c_hi)), dmax)
    keys = []
    for dx in (0, 1):
        for dy in (0, 1):
            for dz in (0, 1):
                c = c_lo + torch.tensor([dx, dy, dz], device=pos.device)
                ok = drawn & (c <= c_hi).all(dim=-1)
                key = first[:, None] + (c[..., 0] * dims[:, None, 1] + c[..., 1]) * dims[:, None, 2] + c[..., 2]
                keys.append(torch.where(ok, key, torch.full_like(key, total)).reshape(-1))
    keys = torch.cat(keys)
    items = torch.arange(N, device=pos.device).repeat(8 * B)
    order = torch.argsort(keys * N + items)  # by cell, then by particle index
    keys, items = keys[order], items[order]
    cell_start = torch.searchsorted(keys, torch.arange(total + 1, device=pos.device))
    grid_i = torch.cat([dims, first[:, None]], dim=1)
    return dict(grid_f=torch.cat([lo, cell], dim=1).to(dev, F32).contiguous(),
                grid_i=grid_i.to(dev, torch.int32).contiguous(),
                cell_start=cell_start.to(dev, torch.int32).contiguous(),
                cell_items=(items if items.numel() else torch.zeros(1, dtype=torch.long)).to(dev, torch.int32)
                .contiguous())


def bvh_topology(centres: np.ndarray) -> np.ndarray:
    """A BVH over M points (the bounded primitives' centres), split at the median of the widest axis down to one
    primitive a leaf. Returns node_i int32 [2M - 1, 4] in depth-first order: (primitive of a leaf, -1 for an inner
    node; skip: the node after its subtree; left child; right child; -1 for a leaf's children)."""
    rows = []

    def build(ids):
        me = len(rows)
        rows.append([-1, -1, -1, -1])
        if len(ids) == 1:
            rows[me][0] = int(ids[0])
        else:
            pts = centres[ids]
            axis = int(np.argmax(pts.max(0) - pts.min(0)))
            ids = ids[np.argsort(pts[:, axis], kind="stable")]
            half = len(ids) // 2
            rows[me][2] = build(ids[:half])
            rows[me][3] = build(ids[half:])
        rows[me][1] = len(rows)
        return me

    if len(centres):
        build(np.arange(len(centres)))
    return np.asarray(rows, dtype=np.int32).reshape(-1, 4)


class BVHRefit:
    """The refit of a BVH's boxes over its leaves (node_i from bvh_topology): `refit(leaf_lo, leaf_hi)` gives each
    node's box [B, n_nodes, 6] from its leaves' boxes (leaf_lo, leaf_hi [B, M, 3], indexed by the leaves'
    primitive slot), children before parents, one level at a time. The boxes are held node-major ([n_nodes, 6, B]:
    a level's gathers copy whole rows of environments, 1.5-2.5 times faster than environment-major indexing on the
    2-core CPU) and the maxima as minima of the negated corners (one operation a level). The index tensors are made
    once, on the device. (The ray-cast sensors refit inside their kernel instead: kernels.cast_rays.)"""

    def __init__(self, node_i: np.ndarray, dev):
        n = len(node_i)
        self.n = n
        leaves = np.nonzero(node_i[:, 0] >= 0)[0]
        self._leaves = torch.as_tensor(leaves.astype(np.int64), device=dev)
        self._slot = torch.as_tensor(node_i[leaves, 0].astype(np.int64), device=dev)
        depth = np.zeros(n, dtype=np.int64)
        for k in range(n):  # parents come first in depth-first order
            for c in node_i[k, 2:]:
                if c >= 0:
                    depth[c] = depth[k] + 1
        self._levels = []
        for level in range(int(depth.max()) if n else 0, -1, -1):
            inner = np.nonzero((depth == level) & (node_i[:, 0] < 0))[0]
            if len(inner):
                self._levels.append(tuple(torch.as_tensor(x.astype(np.int64), device=dev)
                                          for x in (inner, node_i[inner, 2], node_i[inner, 3])))

    def refit(self, leaf_lo: torch.Tensor, leaf_hi: torch.Tensor) -> torch.Tensor:
        B = leaf_lo.shape[0]
        corners = torch.cat([leaf_lo, -leaf_hi], dim=-1).permute(1, 2, 0)[self._slot]  # [M, 6, B]
        box = corners.new_empty((self.n, 6, B))
        box[self._leaves] = corners
        for inner, left, right in self._levels:
            box[inner] = torch.minimum(box[left], box[right])
        box = box.permute(2, 0, 1)
        return torch.cat([box[..., :3], -box[..., 3:]], dim=-1)


class MeshBVH:
    """A BVH over the F triangles of one mesh, split at the median of the widest axis of the triangles' centroids
    down to LEAF_TRIS triangles a leaf. order [F]: the triangles in leaf order (each node covers a contiguous range
    of it); node_i int32 [n, 3] in the kernel's layout (first triangle, triangles of a leaf (0: inner), skip);
    boxes: refit(lo, hi) gives every node's box [B, n, 6] from the triangles' boxes [B, F, 3] in leaf order."""

    def __init__(self, tris: np.ndarray):
        F = len(tris)
        cent = tris.mean(axis=1)
        # the splits, one level of the tree at a time over every segment at once: a segment [a, b) of more than
        # LEAF_TRIS triangles is sorted along its centroids' widest axis and cut at a + (b - a) // 2
        order = np.arange(F)
        starts = np.zeros(1, dtype=np.int64)
        while F:
            size = np.diff(np.append(starts, F))
            split = size > LEAF_TRIS
            if not split.any():
                break
            c = cent[order]
            axis = np.argmax(np.maximum.reduceat(c, starts, axis=0) - np.minimum.reduceat(c, starts, axis=0), axis=1)
            seg = np.repeat(np.arange(len(starts)), size)
            key = np.where(split[seg], c[np.arange(F), axis[seg]], 0.0)
            order = order[np.lexsort((key, seg))]  # (stable: a leaf's triangles keep their order)
            starts = np.sort(np.concatenate([starts, starts[split] + size[split] // 2]))
        rows = []  # first, count (leaf), skip, left, right, depth: the nodes in depth-first order

        def build(a, b, depth):
            me = len(rows)
            rows.append([a, 0, 0, -1, -1, depth])
            if b - a <= LEAF_TRIS:
                rows[me][1] = b - a
            else:
                half = (b - a) // 2
                rows[me][3] = build(a, a + half, depth + 1)
                rows[me][4] = build(a + half, b, depth + 1)
            rows[me][2] = len(rows)
            return me

        build(0, F, 0)
        r = np.asarray(rows, dtype=np.int64)
        self.order = order
        self.node_i = np.ascontiguousarray(r[:, :3], dtype=np.int32)
        leaves = np.nonzero(r[:, 1] > 0)[0]
        self._leaves = torch.as_tensor(leaves)
        # each leaf's triangles, padded with its last one
        self._leaf_tris = torch.as_tensor(r[leaves, 0:1] + np.minimum(np.arange(LEAF_TRIS)[None], r[leaves, 1:2] - 1))
        self._levels = []
        for depth in range(int(r[:, 5].max()), -1, -1):
            inner = np.nonzero((r[:, 5] == depth) & (r[:, 1] == 0))[0]
            if len(inner):
                self._levels.append(tuple(torch.as_tensor(x) for x in (inner, r[inner, 3], r[inner, 4])))

    def refit(self, lo: torch.Tensor, hi: torch.Tensor) -> torch.Tensor:
        B, n = lo.shape[0], len(self.node_i)
        out_lo = torch.empty((B, n, 3), dtype=lo.dtype)
        out_hi = torch.empty_like(out_lo)
        out_lo[:, self._leaves] = lo[:, self._leaf_tris].amin(dim=2)
        out_hi[:, self._leaves] = hi[:, self._leaf_tris].amax(dim=2)
        for inner, left, right in self._levels:
            out_lo[:, inner] = torch.minimum(out_lo[:, left], out_lo[:, right])
            out_hi[:, inner] = torch.maximum(out_hi[:, left], out_hi[:, right])
        return torch.cat([out_lo, out_hi], dim=-1)


# a fixed mesh's packed triangles and BVH by its content, shared by every camera and scene of the process
_STATIC_MESHES: dict[str, tuple] = {}
# topologies of deforming meshes by their faces' content
_MESH_TOPOLOGY: dict[str, MeshBVH] = {}


def _digest(*arrays) -> str:
    h = hashlib.sha1()
    for a in arrays:
        a = np.ascontiguousarray(a)
        h.update(str((a.dtype, a.shape)).encode())
        h.update(a.tobytes())
    return h.hexdigest()


def _tri_rows(tris: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """[..., F, 3, 3] triangles and their indices [F] as the kernel's tri_v rows [..., F, 10] (float32)."""
    flat = tris.reshape(*tris.shape[:-2], 9).to(F32)
    return torch.cat([flat, ids.to(F32).expand(*flat.shape[:-1])[..., None]], dim=-1)


def static_mesh(verts: np.ndarray, faces: np.ndarray):
    """(tri_v rows [F, 10], node_i [n, 3], node boxes [n, 6], bounding radius about the frame's origin) of a
    fixed mesh, computed once per distinct mesh in the process."""
    key = _digest(verts, faces)
    if key not in _STATIC_MESHES:
        tris = verts[faces]  # [F, 3, 3] float64
        bvh = MeshBVH(tris)
        tris = torch.as_tensor(tris[bvh.order])
        boxes = bvh.refit(tris.amin(dim=-2)[None], tris.amax(dim=-2)[None])[0].to(F32)
        # boxes a hair larger than their triangles (float32 rounding must not cut a triangle's edge off)
        pad = 1e-6 * max(1.0, float(np.abs(verts).max(initial=0.0)))
        boxes[:, :3] -= pad
        boxes[:, 3:] += pad
        bound = float(np.linalg.norm(verts[np.unique(faces)], axis=-1).max()) * (1 + 1e-5) + pad
        _STATIC_MESHES[key] = (_tri_rows(tris, torch.as_tensor(bvh.order)).contiguous(), bvh.node_i, boxes.contiguous(),
                               bound)
    return _STATIC_MESHES[key]


def deforming_mesh(tris: torch.Tensor, faces: np.ndarray):
    """A mesh whose vertices move, tris [B, F, 3, 3] (world): (tri_v rows [B, F, 10] about each environment's
    centre, node_i, node boxes [B, n, 6] refitted in every environment, centres [B, 3], drawn [B], bounding radius).
    The topology is built once per distinct face list, from the first positions it is seen with; the tree's
    quality depends on them, never the result."""
    key = _digest(faces)
    if key not in _MESH_TOPOLOGY:
        first = tris[0].detach().cpu().double().numpy()
        _MESH_TOPOLOGY[key] = MeshBVH(np.nan_to_num(first, nan=0.0, posinf=0.0, neginf=0.0))
    bvh = _MESH_TOPOLOGY[key]
    tris = tris.detach().cpu().double()
    drawn = torch.isfinite(tris).flatten(1).all(dim=1)
    tris = torch.where(drawn[:, None, None, None], tris, torch.zeros_like(tris))
    lo, hi = tris.amin(dim=(1, 2)), tris.amax(dim=(1, 2))
    centre = (lo + hi) / 2
    rel = tris[:, torch.as_tensor(bvh.order)] - centre[:, None, None]
    bound = float(rel.norm(dim=-1).amax()) if rel.numel() else 0.0
    boxes = bvh.refit(rel.amin(dim=-2), rel.amax(dim=-2)).to(F32)
    pad = 1e-6 * max(1.0, bound)
    boxes[..., :3] -= pad
    boxes[..., 3:] += pad
    return (_tri_rows(rel, torch.as_tensor(bvh.order)), bvh.node_i, boxes, centre, drawn,
            bound * (1 + 1e-5) + pad)


def _check_view(v: RenderView, B: int):
    """Raise a SceneError naming the first field of a render view whose shape does not fit its layout."""
    G = None if v.geom_type is None else v.geom_type.shape[0]
    N = None if v.particle_pos is None else v.particle_pos.shape[-2]
    expected = {}
    if G is not None:
        expected.update(geom_type=(G,), geom_size=(G, 3), geom_pos=(B, G, 3), geom_quat=(B, G, 4), geom_entity=(G,),
                        geom_color=(G, 3), geom_hull=(G, 2), geom_link=(G,), geom_id=(G,))
    if N is not None:
        expected.update(particle_pos=(B, N, 3), particle_radius=(N,), particle_active=(B, N),
                        particle_entity=(N,), particle_color=(N, 3))
    if v.mesh_verts is not None:
        if v.mesh_verts.dim() not in (2, 3) or v.mesh_verts.shape[-1] != 3 or (
                v.mesh_verts.dim() == 3 and v.mesh_verts.shape[0] != B):
            raise SceneError(f"render view: mesh_verts has shape {tuple(v.mesh_verts.shape)}, expected (V, 3) or "
                             f"({B}, V, 3).")
        M = None if v.mesh_range is None else v.mesh_range.shape[0]
        expected.update(mesh_range=(M, 2), mesh_entity=(M,), mesh_color=(M, 3), mesh_pos=(B, M, 3),
                        mesh_quat=(B, M, 4), mesh_link=(M,), mesh_id=(M,))
        if v.mesh_faces is None or v.mesh_faces.dim() != 2 or v.mesh_faces.shape[1] != 3:
            got = None if v.mesh_faces is None else tuple(v.mesh_faces.shape)
            raise SceneError(f"render view: mesh_faces has shape {got}, expected (F, 3).")
        if v.mesh_verts.dim() == 3 and v.mesh_pos is not None:
            raise SceneError("render view: mesh_pos is given with per-environment mesh_verts (B, V, 3), which are "
                             "world coordinates; give (V, 3) vertices for a posed mesh.")
    optional = {"geom_color", "geom_hull", "particle_active", "particle_color", "mesh_color", "mesh_pos",
                "mesh_quat", "geom_link", "geom_id", "mesh_link", "mesh_id"}
    for name, shape in expected.items():
        x = getattr(v, name)
        if x is None and name in optional:
            continue
        if x is None or tuple(x.shape) != shape:
            got = None if x is None else tuple(x.shape)
            raise SceneError(f"render view: {name} has shape {got}, expected {shape} (B = {B} environments).")
    if v.hull_planes is not None and (v.hull_planes.dim() != 2 or v.hull_planes.shape[1] != 4):
        raise SceneError(f"render view: hull_planes has shape {tuple(v.hull_planes.shape)}, expected (P, 4).")


def _one_env(v: RenderView, env: int) -> RenderView:
    """The view of environment env alone (its per-environment fields cut to [env:env + 1])."""
    cut = {name: getattr(v, name)[env:env + 1] for name in ("geom_pos", "geom_quat", "particle_pos", "particle_active",
                                                           "mesh_pos", "mesh_quat")
           if getattr(v, name) is not None}
    if v.mesh_verts is not None and v.mesh_verts.dim() == 3:
        cut["mesh_verts"] = v.mesh_verts[env:env + 1]
    return attrs.evolve(v, **cut)




def _mesh_arrays(meshes: list[dict], B: int, dev) -> dict:
    """The triangle meshes in the kernel's layout (mesh_i, bnode_i, bnode_box, tri_v: kernels.py); a deforming
    mesh's boxes and triangles are B consecutive blocks, one per environment."""
    mesh_i, nodes, boxes, tris = [], [], [], []
    n_node = n_box = n_tri = 0
    for rec in meshes:
        n, F = len(rec["node_i"]), rec["rows"].shape[-2]
        per_env = rec["deforming"]
        mesh_i.append([n_node, n, n_box, n if per_env else 0, n_tri, F if per_env else 0])
        nodes.append(rec["node_i"])
        boxes.append(rec["boxes"].reshape(-1, 6))
        tris.append(rec["rows"].reshape(-1, 10))
        n_node += n
        n_box += n * (B if per_env else 1)
        n_tri += F * (B if per_env else 1)
    if n_box >= 2 ** 31 // 6 or n_tri >= 2 ** 31 // 10:
        raise SceneError(f"render: the triangle meshes would need {n_tri} triangle rows and {n_box} node rows for "
                         f"{B} environments, beyond what one render's 32-bit indices address; render fewer "
                         "environments at once.")
    if not meshes:
        return dict(mesh_i=torch.zeros((1, 6), dtype=torch.int32, device=dev),
                    bnode_i=torch.zeros((1, 3), dtype=torch.int32, device=dev),
                    bnode_box=torch.zeros((1, 6), dtype=F32, device=dev),
                    tri_v=torch.zeros((1, 10), dtype=F32, device=dev))
    mesh_i = np.asarray(mesh_i, dtype=np.int64)
    node_i = np.concatenate(nodes)
    # what the kernel follows: every node's triangles and skip inside its mesh, every row inside its array
    for m, rec in enumerate(meshes):
        ni, F = rec["node_i"], rec["rows"].shape[-2]
        assert ((ni[:, 0] >= 0) & (ni[:, 1] >= 0) & (ni[:, 0] + ni[:, 1] <= F)).all()
        assert ((ni[:, 2] > np.arange(len(ni))) & (ni[:, 2] <= len(ni))).all()
        last_b = B - 1 if rec["deforming"] else 0
        assert mesh_i[m, 2] + last_b * mesh_i[m, 3] + mesh_i[m, 1] <= n_box
        assert mesh_i[m, 4] + last_b * mesh_i[m, 5] + F <= n_tri
    return dict(mesh_i=torch.as_tensor(mesh_i.astype(np.int32), device=dev),
                bnode_i=torch.as_tensor(np.ascontiguousarray(node_i, dtype=np.int32), device=dev),
                bnode_box=torch.cat(boxes).to(dev, F32).contiguous(),
                tri_v=torch.cat(tris).to(dev, F32).contiguous())


# the fields of a RenderView whose first axis is the environment's
PER_ENV_FIELDS = ("geom_pos", "geom_quat", "particle_pos", "particle_active", "mesh_pos", "mesh_quat")


def _layout_key(views: list[RenderView]) -> tuple:
    """The views' layout: per view, the fields it gives, their shapes (the environment axis left out) and dtypes;
    read on the host, no value."""
    key = []
    for v in views:
        row = []
        for field in attrs.fields(RenderView):
            x = getattr(v, field.name)
            if x is None:
                continue
            shape = tuple(x.shape)
            if field.name in PER_ENV_FIELDS or (field.name == "mesh_verts" and x.dim() == 3):
                shape = ("B",) + shape[1:]
            row.append((field.name, shape, x.dtype))
        key.append(tuple(row))
    return tuple(key)


def _static_tensors(views: list[RenderView]) -> list[torch.Tensor]:
    """The tensors of the views' fields that the model is packed from (every field but the per-environment ones)."""
    out = []
    for v in views:
        for field in attrs.fields(RenderView):
            x = getattr(v, field.name)
            if x is not None and field.name not in PER_ENV_FIELDS and not (field.name == "mesh_verts" and x.dim() == 3):
                out.append(x)
    return out


def _identity(x: torch.Tensor) -> tuple:
    """What tells a tensor's content unchanged without reading it, while the tensor is held: its storage, view and
    version counter (which every in-place write increments)."""
    return (x.data_ptr(), tuple(x.shape), x.stride(), x.dtype, str(x.device), x._version)


def _pose_rows(pos: torch.Tensor, quat: torch.Tensor) -> torch.Tensor:
    """prim_pose rows [..., 13] (kernels.py) of poses pos [..., 3], quat [..., 4] (w first, any norm), in their
    dtype: a pose that is not finite (or a zero quaternion) is not drawn (its last entry 0)."""
    shown = torch.isfinite(pos).all(-1) & torch.isfinite(quat).all(-1) & (quat.norm(dim=-1) > 0)
    pos = torch.where(shown[..., None], pos, torch.zeros_like(pos))
    quat = torch.where(shown[..., None], quat, torch.tensor([1.0, 0.0, 0.0, 0.0], dtype=quat.dtype,
                                                            device=quat.device))
    rot = quat_to_mat(torch.nn.functional.normalize(quat, dim=-1)).reshape(*pos.shape[:-1], 9)
    return torch.cat([pos, rot, shown[..., None].to(pos.dtype)], dim=-1)


def _keep(buffers: dict, name: str, x: torch.Tensor) -> torch.Tensor:
    """x written into buffers[name] (made at its first use, and again when x's shape or dtype changes): the arrays
    a pack hands over are the same tensors from pack to pack, so that a launch can be prepared once for them
    (genesis_core.launch.Launcher)."""
    b = buffers.get(name)
    if b is None or b.shape != x.shape or b.dtype != x.dtype or b.device != x.device:
        b = buffers[name] = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    b.copy_(x)
    return b


class TraceScene:
    """The arrays `kernels._trace` reads (kernels.py's layouts) for a built scene, packed from its solvers' render
    views: what the cameras draw and the ray-cast sensors (genesis_core.sensors.raycaster) see.

    The model part (the primitives' kinds, sizes, bounding radii, colours and segmentation indices, the hull
    planes, the fixed meshes' triangles and BVHs, the primitives' BVH topology, the particles' indices and colours)
    is packed at the first `pack` and again only when the views' layout (the fields given, their shapes and dtypes)
    changes: the views' static fields are read then, and taken as unchanged while the layout is. Every `pack`
    computes the rest on the views' device without reading a value back to the host: the poses (a non-finite one
    hides its primitive in that environment), the primitives' BVH boxes refitted over them, the particles and their
    grid. A deforming mesh (per-environment vertices) is packed again at every `pack`, on the host. The arrays of a
    pack that change are written into the same tensors at every pack (for a number of environments)."""

    def __init__(self, scene):
        self.scene = scene
        self._model = None
        self._model_key = None
        self._static = []  # (tensor, its identity, its bytes' digest on the host) of the static fields packed
        self._mesh_views = {}  # a render view's fixed meshes, packed, by the identity of its tensors

    def pack(self, views: list[RenderView], B: int, dev, refit: bool = True) -> tuple[dict, dict, int, int]:
        """(prims, parts, n_prims, n_parts): the primitives' and the particles' arrays for B environments.
        refit=False leaves node_box (the primitives' BVH boxes) to the kernel (kernels.cast_rays refits it)."""
        for v in views:
            _check_view(v, B)
        key = (_layout_key(views), str(dev))
        static = _static_tensors(views)
        if self._model is None or self._model_key != key or not self._unchanged(static):
            self._model = self._build_model(views, dev)
            self._model_key = key
            self._static = [(x, _identity(x), _digest(x.detach().numpy()) if x.device.type == "cpu" else None)
                            for x in static]
        return self._pack_poses(self._model, views, B, dev, refit)

    def _unchanged(self, static: list[torch.Tensor]) -> bool:
        """Whether the views' static fields hold what the model was packed from: the same tensors, unwritten since
        (held, so that their storage is not reused), or host tensors of the same bytes (a view that makes them
        anew at every call, as the particle kit's radii); a device tensor that is not the same is taken as
        changed, since comparing it would read it back."""
        for x, (_, ident, digest) in zip(static, self._static):
            if _identity(x) == ident:
                continue
            if digest is None or x.device.type != "cpu" or _digest(x.detach().numpy()) != digest:
                return False
        return True

    # -- the model: once per layout ---------------------------------------------------------------------------------

    def _build_model(self, views: list[RenderView], dev) -> dict:
        scene = self.scene
        smap, level = segmentation_map(scene, views), scene.vis_options.segmentation_level
        prim_i, prim_f, prim_color, planes = [], [], [], []
        n_planes = 0
        part_i, part_color = [], []
        segments = []  # in the primitives' order: ("geoms", view, G) or ("meshes", view, records, fixed indices)
        particles = []  # (view, N)
        meshes = []  # every mesh primitive's record, in mesh-index order
        for vi, v in enumerate(views):
            geom_keys, mesh_keys, part_ents = view_keys(v, level)
            if v.geom_type is not None and v.geom_type.shape[0] > 0:
                G = int(v.geom_type.shape[0])
                kinds = v.geom_type.cpu().numpy()
                bad = [int(k) for k in kinds if int(k) not in PRIM_OF_GEOM]
                if bad:
                    raise SceneError(f"render view: geom_type holds unknown codes {sorted(set(bad))}.")
                size = v.geom_size.detach().to("cpu", torch.float64).numpy().reshape(G, 3)
                ent = v.geom_entity.cpu().numpy().astype(np.int32).reshape(G)
                hull = (np.zeros((G, 2), np.int64) if v.geom_hull is None
                        else v.geom_hull.cpu().numpy().astype(np.int64).reshape(G, 2))
                hp = None if v.hull_planes is None else v.hull_planes.detach().to("cpu", torch.float32).numpy()
                rows = np.zeros((G, 4), np.int32)
                fl = np.zeros((G, 4), np.float32)
                seg = smap.codes(geom_keys)
                for g in range(G):
                    kind = PRIM_OF_GEOM[int(kinds[g])]
                    first, count = int(hull[g, 0]), int(hull[g, 1])
                    piece = None
                    if kind == K.PRIM_CONVEX:
                        if hp is None or count <= 0 or first < 0 or first + count > hp.shape[0]:
                            raise SceneError(f"render view: mesh geom {g} has hull rows ({first}, {count}) outside "
                                             f"hull_planes ({0 if hp is None else hp.shape[0]} rows).")
                        piece = hp[first:first + count]
                        bound = convex_bound(piece)
                    else:
                        first = count = 0
                        bound = _bound_radius(kind, size[g], None)
                    rows[g] = kind, seg[g], first + n_planes, count
                    fl[g, :3] = size[g]
                    fl[g, 3] = bound
                prim_i.append(rows)
                prim_f.append(fl)
                if v.geom_color is not None:
                    prim_color.append(v.geom_color.detach().cpu().numpy().astype(np.float32).reshape(G, 3))
                else:
                    prim_color.append(np.stack([entity_color(scene, int(e)) for e in ent]).astype(np.float32))
                if hp is not None:
                    planes.append(hp.reshape(-1, 4))
                    n_planes += hp.shape[0]
                segments.append(("geoms", vi, G))
            if v.mesh_verts is not None and v.mesh_range is not None and v.mesh_range.shape[0] > 0:
                seg = smap.codes(mesh_keys)
                records = self._view_meshes(v)
                for rec in records:
                    rec["mesh"] = len(meshes)
                    prim_i.append(np.asarray([[K.PRIM_MESH, seg[rec["index"]], len(meshes), 0]], np.int32))
                    prim_f.append(np.asarray([[0.0, 0.0, 0.0, rec["bound"]]], np.float32))
                    prim_color.append(np.asarray(rec["color"], np.float32).reshape(1, 3))
                    meshes.append(rec)
                if records:
                    fixed = torch.as_tensor([rec["index"] for rec in records], dtype=torch.long, device=dev)
                    segments.append(("meshes", vi, records, fixed))
            if v.particle_pos is not None and v.particle_pos.shape[-2] > 0:
                N = int(v.particle_pos.shape[-2])
                ent = v.particle_entity.cpu().numpy().astype(np.int32).reshape(N)
                part_i.append(particle_codes(smap, part_ents).astype(np.int32))
                if v.particle_color is not None:
                    part_color.append(v.particle_color.detach().cpu().numpy().astype(np.float32).reshape(N, 3))
                else:
                    colors = {int(e): entity_color(scene, int(e)) for e in np.unique(ent)}
                    part_color.append(np.stack([colors[int(e)] for e in ent]).astype(np.float32))
                particles.append((vi, N))

        def cat_np(parts, shape, dtype):
            return np.concatenate(parts) if parts else np.zeros(shape, dtype)

        t = lambda a: torch.as_tensor(np.ascontiguousarray(a), device=dev)  # noqa: E731
        model = dict(
            prim_i=t(cat_np(prim_i, (1, 4), np.int32)), prim_f=t(cat_np(prim_f, (1, 4), np.float32)),
            prim_color=t(cat_np(prim_color, (1, 3), np.float32)), hull_planes=t(cat_np(planes, (1, 4), np.float32)),
            part_i=t(cat_np(part_i, (1,), np.int32)), part_color=t(cat_np(part_color, (1, 3), np.float32)),
            n_prims=sum(len(x) for x in prim_i), n_parts=sum(len(x) for x in part_i), segments=segments,
            particles=particles, meshes=meshes, deforming=any(rec["deforming"] for rec in meshes), bvh=None,
            buffers={})
        for name in ("prim_f", "prim_color", "hull_planes", "part_color"):  # the model's arrays, not the state's
            if not torch.isfinite(model[name]).all():
                raise SceneError(f"render: a render view's {name} holds non-finite values.")
        convex = model["prim_i"][:, 0] == K.PRIM_CONVEX  # (a mesh primitive's third column is its mesh's index)
        if n_planes and bool(convex.any()) and int((model["prim_i"][convex, 2] + model["prim_i"][convex, 3]).max()) \
                > model["hull_planes"].shape[0]:
            raise SceneError("render: a convex piece's hull rows leave hull_planes.")  # checked per view above
        bound = model["prim_f"][:model["n_prims"], 3].cpu().numpy()
        bounded = tuple(int(g) for g in np.nonzero(bound >= 0)[0])
        loose = np.nonzero(bound < 0)[0].astype(np.int32)
        if len(bounded) < BVH_MIN_PRIMS:  # a few primitives: one by one, each culled by its bounding sphere
            bounded, loose = (), np.arange(model["n_prims"], dtype=np.int32)
        model["bounded"] = bounded
        model["loose"] = torch.as_tensor(loose if len(loose) else np.zeros(1, np.int32), device=dev)
        model["n_loose"] = len(loose)
        if not model["deforming"]:
            model["mesh_arrays"] = _mesh_arrays(meshes, 1, dev)
        return model

    def _view_meshes(self, v: RenderView) -> list[dict]:
        """The triangle meshes of a render view, checked, each with its packed triangles and BVH (a fixed mesh's
        from the process's cache, by content; the last view's, by identity, while its tensors are unchanged); a
        deforming mesh's faces only (its triangles are packed at every pack)."""
        scene = self.scene
        deforming = v.mesh_verts.dim() == 3
        tensors = (v.mesh_verts, v.mesh_faces, v.mesh_range)
        ident = tuple((id(x), x._version) for x in tensors)
        cached = self._mesh_views.get(ident)
        if deforming or cached is None or not all(a is b for a, b in zip(cached[0], tensors)):
            faces_all = v.mesh_faces.detach().cpu().numpy().astype(np.int64).reshape(-1, 3)
            V = int(v.mesh_verts.shape[-2])
            if faces_all.size and (faces_all.min() < 0 or faces_all.max() >= V):
                raise SceneError(f"render view: mesh_faces holds vertex indices outside [0, {V}).")
            rng = v.mesh_range.detach().cpu().numpy().astype(np.int64).reshape(-1, 2)
            if len(rng) and ((rng < 0).any() or (rng[:, 0] + rng[:, 1] > len(faces_all)).any()):
                raise SceneError(f"render view: mesh_range holds a range outside mesh_faces ({len(faces_all)} rows).")
            if len(rng) and rng[:, 1].max() >= MAX_MESH_FACES:
                raise SceneError(f"render view: a mesh of {int(rng[:, 1].max())} triangles; at most "
                                 f"{MAX_MESH_FACES - 1} are drawn as one mesh (split it).")
            packed = []
            if deforming:
                for first, count in rng:
                    packed.append(None if count == 0 else (faces_all[first:first + count], None))
            else:
                verts = v.mesh_verts.detach().cpu().double().numpy()
                if not np.isfinite(verts[faces_all.reshape(-1)]).all():
                    raise SceneError("render view: mesh_verts of a fixed mesh ((V, 3) vertices) holds non-finite "
                                     "values.")
                for first, count in rng:
                    faces = faces_all[first:first + count]
                    if count == 0:
                        packed.append(None)
                        continue
                    used, local = np.unique(faces, return_inverse=True)
                    packed.append((None, static_mesh(verts[used], local.reshape(-1, 3))))
            if not deforming:
                self._mesh_views[ident] = (tensors, packed)
        else:
            packed = cached[1]
        M = len(packed)
        ent = v.mesh_entity.detach().cpu().numpy().astype(np.int32).reshape(M)
        if v.mesh_color is not None:
            colors = v.mesh_color.detach().cpu().numpy().astype(np.float32).reshape(M, 3)
        else:
            colors = np.stack([entity_color(scene, int(e)) for e in ent]).astype(np.float32)
        out = []
        for m, p in enumerate(packed):
            if p is None:
                continue
            if deforming:
                out.append(dict(faces=p[0], deforming=True, bound=0.0, entity=int(ent[m]), color=colors[m], index=m))
            else:
                rows, node_i, boxes, bound = p[1]
                out.append(dict(rows=rows, node_i=node_i, boxes=boxes, deforming=False, bound=bound,
                                entity=int(ent[m]), color=colors[m], index=m))
        return out

    # -- every pack: the poses and what follows them -----------------------------------------------------------------

    def _pack_poses(self, model: dict, views: list[RenderView], B: int, dev,
                    refit: bool) -> tuple[dict, dict, int, int]:
        poses, bounds, meshes = [], {}, list(model["meshes"])
        first_prim = 0
        for seg in model["segments"]:
            v = views[seg[1]]
            if seg[0] == "geoms":
                G = seg[2]
                pos = v.geom_pos.detach().to(dev, F32).reshape(B, G, 3)
                quat = v.geom_quat.detach().to(dev, F32).reshape(B, G, 4)
                poses.append(_pose_rows(pos, quat))
                first_prim += G
                continue
            records, fixed = seg[2], seg[3]
            if records[0]["deforming"]:
                for k, rec in enumerate(records):
                    faces = rec["faces"]
                    rows, node_i, boxes, centre, drawn, bound = deforming_mesh(v.mesh_verts[:, faces], faces)
                    rot = torch.eye(3, dtype=torch.float64).reshape(1, 9).expand(B, 9)
                    poses.append(torch.cat([centre, rot, drawn[:, None].double()], dim=-1).to(dev, F32)[:, None])
                    bounds[first_prim + k] = bound
                    meshes[rec["mesh"]] = dict(rec, rows=rows, node_i=node_i, boxes=boxes)
            else:
                M = int(v.mesh_range.shape[0])
                pos = (torch.zeros((B, len(records), 3), dtype=torch.float64, device=dev) if v.mesh_pos is None
                       else v.mesh_pos.detach().to(dev, torch.float64).reshape(B, M, 3)[:, fixed])
                quat = (torch.tensor([1.0, 0.0, 0.0, 0.0], dtype=torch.float64, device=dev).expand(B, len(records), 4)
                        if v.mesh_quat is None else v.mesh_quat.detach().to(dev, torch.float64).reshape(B, M, 4)[:, fixed])
                poses.append(_pose_rows(pos, quat).to(F32))
            first_prim += len(records)
        buffers = model["buffers"].setdefault(B, {})
        prim_pose = _keep(buffers, "prim_pose", torch.cat(poses, dim=1) if poses
                          else torch.zeros((B, 1, 13), dtype=F32, device=dev))
        prim_f = model["prim_f"]
        if bounds:  # a deforming mesh's bounding radius, of its vertices at this pack
            prim_f = prim_f.clone()
            for g, bound in bounds.items():
                prim_f[g, 3] = bound
            prim_f = _keep(buffers, "prim_f", prim_f)
        prims = dict(prim_i=model["prim_i"], prim_f=prim_f, prim_pose=prim_pose, prim_color=model["prim_color"],
                     hull_planes=model["hull_planes"])
        prims.update(self._bvh_arrays(model, prims, B, dev, refit))
        if refit:
            prims["node_box"] = _keep(buffers, "node_box", prims["node_box"])
        else:  # (the kernel writes it)
            shape = (B, max(prims["n_nodes"], 1), 6)
            if buffers.get("node_box") is None or tuple(buffers["node_box"].shape) != shape:
                buffers["node_box"] = torch.zeros(shape, dtype=F32, device=dev)
            prims["node_box"] = buffers["node_box"]
        if model["deforming"]:
            prims.update({k: _keep(buffers, k, x) for k, x in _mesh_arrays(meshes, B, dev).items()})
        else:
            prims.update(model["mesh_arrays"])
        part_f = []
        for vi, N in model["particles"]:
            v = views[vi]
            pos = v.particle_pos.detach().to(dev, F32).reshape(B, N, 3)
            r = v.particle_radius.detach().to(dev, F32).reshape(N).expand(B, N)
            shown = torch.isfinite(pos).all(-1) & torch.isfinite(r)  # a non-finite particle is not drawn
            pos = torch.where(shown[..., None], pos, torch.zeros_like(pos))
            r = torch.where(shown, r, torch.zeros_like(r))
            if v.particle_active is not None:
                r = torch.where(v.particle_active.to(dev).reshape(B, N) > 0, r, torch.zeros_like(r))
            part_f.append(torch.cat([pos, r[..., None]], dim=-1))
        n_parts = model["n_parts"]
        pf = _keep(buffers, "part_f", torch.cat(part_f, dim=1) if part_f
                   else torch.zeros((B, 1, 4), dtype=F32, device=dev))
        grid = {k: _keep(buffers, k, x) for k, x in particle_grid(pf if n_parts else None, B, dev).items()}
        parts = dict(part_f=pf, part_i=model["part_i"], part_color=model["part_color"], **grid)
        return prims, parts, model["n_prims"], n_parts

    def _bvh_arrays(self, model: dict, prims: dict, B: int, dev, refit: bool = True) -> dict:
        """The primitives' BVH in the kernel's layout: the unbounded ones apart (`loose`), the others in a tree
        whose topology is built once from environment 0's poses at the first pack (the one value read back to the
        host) and whose boxes are refitted at every pack (still exact boxes when things move; only the tree's
        quality depends on the first poses)."""
        bounded, n_prims = model["bounded"], model["n_prims"]
        pose = prims["prim_pose"][:, :n_prims]
        if bounded and model["bvh"] is None:
            centres = pose[0, list(bounded), :3].cpu().double().numpy()
            node_i = bvh_topology(centres)
            kernel_i = np.stack([np.where(node_i[:, 0] >= 0, np.asarray(bounded, np.int32)[np.maximum(node_i[:, 0], 0)],
                                          -1), node_i[:, 1]], axis=1).astype(np.int32)
            n_nodes = len(node_i)
            # what the kernel follows: primitives inside [0, n_prims), skips inside (node, n_nodes]
            assert ((kernel_i[:, 0] >= -1) & (kernel_i[:, 0] < n_prims)).all()
            assert ((kernel_i[:, 1] > np.arange(n_nodes)) & (kernel_i[:, 1] <= n_nodes)).all()
            model["bvh"] = dict(refit=BVHRefit(node_i, dev), node_i=torch.as_tensor(kernel_i, device=dev),
                                idx=torch.as_tensor(bounded, device=dev), n_nodes=n_nodes)
        if bounded and not refit:
            node_box, node_i, n_nodes = None, model["bvh"]["node_i"], model["bvh"]["n_nodes"]
        elif bounded:
            bvh = model["bvh"]
            idx = bvh["idx"]
            c = pose[:, idx, :3]
            r = prims["prim_f"][idx, 3].to(dev)[None, :, None]
            shown = pose[:, idx, 12:13] > 0.5
            leaf_lo = torch.where(shown, c - r, torch.full_like(c, 1e30))  # not drawn: an empty box
            leaf_hi = torch.where(shown, c + r, torch.full_like(c, -1e30))
            node_box, node_i, n_nodes = bvh["refit"].refit(leaf_lo, leaf_hi), bvh["node_i"], bvh["n_nodes"]
        else:
            node_box = torch.zeros((B, 1, 6), dtype=F32, device=dev)
            node_i = torch.zeros((1, 2), dtype=torch.int32, device=dev)
            n_nodes = 0
        return dict(loose=model["loose"], node_box=None if node_box is None else node_box.to(F32).contiguous(),
                    node_i=node_i, n_loose=model["n_loose"], n_nodes=n_nodes)


class Renderer:
    """Draws a built scene: `render(cam_f, res)` gives (rgb, depth, seg, normal) for every environment."""

    def __init__(self, scene):
        self.scene = scene
        self.geometry = TraceScene(scene)

    def _pack(self, views: list[RenderView], B: int, dev):
        return self.geometry.pack(views, B, dev)

    def render(self, cam_f: torch.Tensor, res: tuple[int, int], shadows: bool = True, env: int | None = None):
        """cam_f: [B, 13] (Camera's layout, kernels.py). Returns rgb u8 [B, H, W, 3], depth f32 [B, H, W] (inf
        where nothing is hit), seg i32 [B, H, W] (segmentation indices; 0: background), normal f32 [B, H, W, 3] in [0, 1]. env: draw
        that environment alone (B = 1 in what is returned; cam_f is still every environment's)."""
        from .view import solver_render_views

        scene = self.scene
        B = max(scene.n_envs, 1)
        dev = cam_f.device
        W, H = res
        views = solver_render_views(scene)
        if env is not None:
            for v in views:
                _check_view(v, B)
            views = [_one_env(v, env) for v in views]
            cam_f, B = cam_f[env:env + 1], 1
        with torch_one_thread():
            prims, parts, n_prims, n_parts = self._pack(views, B, dev)
        light = torch.tensor([*(np.asarray(LIGHT_DIR) / np.linalg.norm(LIGHT_DIR)), AMBIENT, float(shadows)],
                             dtype=F32, device=dev)
        if B * H * W * 3 >= 2 ** 31:
            raise SceneError(f"render: the images would hold {B * H * W * 3} values, beyond the 2^31 - 1 that one "
                             f"render can address ({B} environments at {W} x {H}); render fewer environments or "
                             "pixels at once.")
        rgb = torch.empty((B, H, W, 3), dtype=torch.uint8, device=dev)
        depth = torch.empty((B, H, W), dtype=F32, device=dev)
        seg = torch.empty((B, H, W), dtype=torch.int32, device=dev)
        normal = torch.empty((B, H, W, 3), dtype=F32, device=dev)
        assert cam_f.shape == (B, 13) and cam_f.dtype == F32 and prims["prim_pose"].shape[0] == B
        # the kernel addresses its arrays with 32-bit indices: a larger array would be written out of bounds
        arrays = {k: v for k, v in {**prims, **parts}.items() if torch.is_tensor(v)}
        for name, x in arrays.items():
            if x.numel() >= 2 ** 31:
                raise SceneError(f"render: {name} would hold {x.numel()} values, beyond the 2^31 - 1 that one "
                                 f"render can address ({B} environments at {W} x {H}); render fewer environments "
                                 "or pixels at once.")
        K.render(cam_f.contiguous(), prims["prim_i"], prims["prim_f"], prims["prim_pose"].contiguous(),
                 prims["prim_color"], prims["hull_planes"], parts["part_f"], parts["part_i"], parts["part_color"],
                 parts["grid_f"], parts["grid_i"], parts["cell_start"], parts["cell_items"], prims["loose"],
                 prims["node_box"], prims["node_i"], prims["mesh_i"], prims["bnode_i"], prims["bnode_box"],
                 prims["tri_v"], light, prims["n_loose"], prims["n_nodes"], int(n_parts), rgb, depth,
                 seg, normal)
        return rgb, depth, seg, normal


__all__ = ["PALETTE", "Renderer"]
