"""Convex hulls of collision meshes: the collision shape of a mesh geom is the convex hull of its vertices.

`convex_hull` is an incremental (Quickhull-order) construction that always inserts the point farthest outside the
current hull, and stops once the hull has `max_vertices` vertices: up to that budget it is the exact hull; past
it, each inserted point was the worst-approximated one, so the result is a greedy inner approximation whose
largest deviation (`Hull.deviation`) is the distance of the farthest point left out. Hulls are then described by
their vertices and their polygonal faces (coplanar triangles merged), each face with its outward unit normal,
offset (n . x = d on the face) and vertex loop, counter-clockwise seen from outside.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass

import numpy as np

from .model import ModelError

MAX_HULL_VERTICES = 64  # the kernels' support functions and clipping buffers are sized for this
COPLANAR_COS = 1.0 - 1e-6  # adjacent triangles this close in normal form one polygonal face


class HullError(ModelError):
    pass


@dataclass(frozen=True)
class Hull:
    vertices: np.ndarray  # [V, 3], the geom frame
    triangles: np.ndarray  # [T, 3] vertex indices, outward (counter-clockwise seen from outside)
    face_normals: np.ndarray  # [F, 3] outward unit normals
    face_offsets: np.ndarray  # [F]
    face_loops: tuple  # F tuples of vertex indices, counter-clockwise seen from outside
    deviation: float  # largest distance of an input point outside the hull (0 unless simplified)

    def mass_properties(self):
        """Volume (m^3), centroid and inertia about the centroid (geom axes) at unit density."""
        import trimesh

        props = trimesh.Trimesh(self.vertices, self.triangles, process=False).mass_properties
        return float(props.volume), np.asarray(props.center_mass), np.asarray(props.inertia)


def _initial_tetrahedron(pts, eps):
    i0 = int(np.argmin(pts[:, 0]))
    i1 = int(np.argmax(np.linalg.norm(pts - pts[i0], axis=1)))
    d = pts[i1] - pts[i0]
    if np.linalg.norm(d) <= eps:
        raise HullError("all vertices coincide")
    line = np.linalg.norm(np.cross(pts - pts[i0], d / np.linalg.norm(d)), axis=1)
    i2 = int(np.argmax(line))
    if line[i2] <= eps:
        raise HullError("the vertices are collinear")
    n = np.cross(pts[i1] - pts[i0], pts[i2] - pts[i0])
    n /= np.linalg.norm(n)
    height = (pts - pts[i0]) @ n
    i3 = int(np.argmax(np.abs(height)))
    if abs(height[i3]) <= eps:
        raise HullError("the vertices are coplanar (a flat mesh has no volume to collide with)")
    return [i0, i1, i2, i3]


def _plane(pts, tri):
    a, b, c = pts[tri[0]], pts[tri[1]], pts[tri[2]]
    n = np.cross(b - a, c - a)
    norm = np.linalg.norm(n)
    n = n / norm if norm > 0 else n
    return n, float(n @ a)


def check_points(points, bound, what):
    """Refuse (HullError naming `what`) points [N, 3] that are not finite or beyond +-bound (m)."""
    from genesis_core.errors import ModelFileError
    from genesis_core.mesh_files import check_vertices

    try:
        check_vertices(points, bound, what)
    except ModelFileError as exc:
        raise HullError(str(exc)) from None


def convex_hull(points, max_vertices=MAX_HULL_VERTICES):
    """Vertices and outward triangles of the convex hull of `points` [N, 3] (finite), with at most
    `max_vertices` vertices, and the largest distance of a point outside the result. Each round inserts one
    point that lies outside the hull, which then holds it; a round that finds no such point ends the loop, so
    it takes at most N rounds (more is reported as a HullError, never a hang)."""
    pts = np.asarray(points, dtype=np.float64).reshape(-1, 3)
    if not np.isfinite(pts).all():
        raise HullError("a vertex is not finite")
    pts = np.unique(pts, axis=0)
    if len(pts) < 4:
        raise HullError(f"{len(pts)} distinct vertices; a hull needs 4 that are not coplanar")
    extent = float(np.max(pts.max(axis=0) - pts.min(axis=0)))
    eps = 1e-9 * max(extent, 1e-12)
    tet = _initial_tetrahedron(pts, eps)
    centre = pts[tet].mean(axis=0)
    faces = []
    for tri in ([tet[0], tet[1], tet[2]], [tet[0], tet[1], tet[3]], [tet[0], tet[2], tet[3]],
                [tet[1], tet[2], tet[3]]):
        n, d = _plane(pts, tri)
        faces.append(tri if n @ centre < d else [tri[0], tri[2], tri[1]])
    deviation = 0.0
    for _ in range(len(pts) + 1):
        tris = np.array(faces)
        normals = np.cross(pts[tris[:, 1]] - pts[tris[:, 0]], pts[tris[:, 2]] - pts[tris[:, 0]])
        normals /= np.maximum(np.linalg.norm(normals, axis=1, keepdims=True), 1e-300)
        offsets = np.einsum("ij,ij->i", normals, pts[tris[:, 0]])
        outside = pts @ normals.T - offsets  # [N, F]
        far = outside.max(axis=1)
        j = int(np.argmax(far))
        deviation = max(float(far[j]), 0.0)
        if far[j] <= eps or len(np.unique(tris)) >= max_vertices:
            break
        visible = outside[j] > eps
        edges = {}
        for f in np.nonzero(visible)[0]:
            a, b, c = faces[f]
            for e in ((a, b), (b, c), (c, a)):
                edges[e] = True
        horizon = [e for e in edges if (e[1], e[0]) not in edges]
        faces = [f for f, vis in zip(faces, visible) if not vis] + [[a, b, j] for a, b in horizon]
        if not horizon:  # (every face saw the point: no hull of finite points does)
            raise HullError(f"the hull of {len(pts)} vertices did not close (vertex {j} could not be inserted)")
    else:
        raise HullError(f"the hull of {len(pts)} vertices did not converge in {len(pts) + 1} rounds")
    tris = np.array(faces)
    used = np.unique(tris)
    remap = np.full(len(pts), -1)
    remap[used] = np.arange(len(used))
    return pts[used], remap[tris], (deviation if len(used) >= max_vertices else 0.0)


def _faces(vertices, triangles):
    """Merge coplanar adjacent triangles into polygons: (normals, offsets, loops)."""
    normals = np.array([_plane(vertices, t)[0] for t in triangles])
    parent = list(range(len(triangles)))

    def root(i):
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    edge_owner = {}
    for t, tri in enumerate(triangles):
        for k in range(3):
            edge_owner[(int(tri[k]), int(tri[(k + 1) % 3]))] = t
    for (a, b), t in edge_owner.items():
        u = edge_owner.get((b, a))
        if u is not None and normals[t] @ normals[u] > COPLANAR_COS:
            parent[root(t)] = root(u)
    groups = {}
    for t in range(len(triangles)):
        groups.setdefault(root(t), []).append(t)
    out_n, out_d, loops = [], [], []
    for members in groups.values():
        boundary = {}
        for t in members:
            tri = triangles[t]
            for k in range(3):
                a, b = int(tri[k]), int(tri[(k + 1) % 3])
                if (b, a) in boundary:
                    del boundary[(b, a)]
                else:
                    boundary[(a, b)] = True
        # the directed boundary edges a -> b run counter-clockwise around the outward normal
        succ = {a: b for a, b in boundary}
        start = min(succ)
        loop = [start]
        a = succ[start]
        while a != start and len(loop) <= len(succ):
            loop.append(a)
            a = succ[a]
        areas = np.array([np.linalg.norm(np.cross(vertices[triangles[t][1]] - vertices[triangles[t][0]],
                                                  vertices[triangles[t][2]] - vertices[triangles[t][0]]))
                          for t in members])
        n = (normals[members] * areas[:, None]).sum(axis=0)
        n /= np.linalg.norm(n)
        out_n.append(n)
        out_d.append(float(np.max(vertices[loop] @ n)))
        loops.append(tuple(int(i) for i in loop))
    return np.array(out_n), np.array(out_d), tuple(loops)


def hull_of_points(points, max_vertices=MAX_HULL_VERTICES) -> Hull:
    """The Hull of `points` [N, 3] (finite); a HullError says why there is none."""
    vertices, triangles, deviation = convex_hull(points, max_vertices)
    try:
        normals, offsets, loops = _faces(vertices, triangles)
    except (KeyError, IndexError, ValueError) as exc:  # a hull whose faces do not close (rounding at 1e-9 of its size)
        raise HullError(f"the hull of {len(vertices)} vertices has faces that do not close ({type(exc).__name__})") \
            from None
    if len(loops) < 4:  # (a sliver whose sides merged into its two faces within COPLANAR_COS)
        raise HullError(f"the vertices are nearly coplanar: their hull has {len(loops)} faces and no volume to "
                        "collide with")
    for a in (vertices, triangles, normals, offsets):
        a.setflags(write=False)
    return Hull(vertices, triangles, normals, offsets, loops, deviation)


def box_hull(half) -> Hull:
    h = np.asarray(half, dtype=np.float64)
    corners = np.array([[sx, sy, sz] for sx in (-1, 1) for sy in (-1, 1) for sz in (-1, 1)]) * h
    return hull_of_points(corners, 8)


def read_mesh(path, process=False):
    """The trimesh mesh of the file at `path` (process: merge duplicate vertices) through the core's checked reader
    (genesis_core.mesh_files), or a HullError naming it."""
    from genesis_core.errors import ModelFileError
    from genesis_core.mesh_files import read_mesh as read_checked

    try:
        return read_checked(path, process=process)
    except ModelFileError as exc:
        raise HullError(str(exc)) from None


@functools.lru_cache(maxsize=256)
def _mesh_hull(path, scale):
    from .checks import MAX_LENGTH

    mesh = read_mesh(path)
    vertices = np.asarray(mesh.vertices, dtype=np.float64) * np.asarray(scale)
    if len(vertices) == 0:
        raise HullError(f"mesh {path!r} has no vertices")
    try:
        check_points(vertices, MAX_LENGTH, f"mesh {path!r} scaled by {list(scale)}")
        return hull_of_points(vertices)
    except HullError as exc:
        raise HullError(exc.args[0] if str(exc).startswith("mesh ") else f"mesh {path!r}: {exc}") from None


def mesh_hull(path, scale=(1.0, 1.0, 1.0)) -> Hull:
    """The convex hull (at most MAX_HULL_VERTICES vertices) of the mesh file at `path`, its vertices scaled per
    axis by `scale`; cached per (file, scale)."""
    if not os.path.isfile(path):
        raise HullError(f"mesh file {path!r} is not a file (it does not exist, or it is a folder)")
    return _mesh_hull(os.path.abspath(path), tuple(float(s) for s in np.broadcast_to(scale, 3)))
