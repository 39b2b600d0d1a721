"""Self-collision pairs that already overlap in the neutral configuration (qpos0).

A robot's collision meshes often interpenetrate where its links meet: the Franka's hand sits inside the hull of its
fifth link. Left in, such a pair pushes the links apart from the first step, fighting the actuators (a held arm
drifts off its target). Genesis World drops the geom pairs of one kinematic tree that overlap at qpos0 unless
RigidOptions(enable_neutral_collision=True); this module finds them, by geometry, at build.

Each geom is a convex core swept by a ball (Shape): hulls (meshes, boxes, cylinders as prisms of 64 sides and
ellipsoids as polyhedra inscribed in them) with no radius, a sphere's centre or a capsule's segment with its radius.
Two such shapes overlap by the smallest overlap of their projections over the separating-axis candidates of their
Minkowski difference (penetration_depth), exact for all but the cylinder's prism and the ellipsoid's polyhedron. A
pair counts as overlapping when that depth exceeds 0.1 % of the smaller geom's bounding radius, so geoms that only
touch stay in (Genesis World shrinks each mesh by 0.1 % before its voxel test, whose cells, up to 1 cm, also drop
pairs that only touch)."""

from __future__ import annotations

import numpy as np

from genesis_core.rotations import quat_mul, quat_to_mat, rotate

from .hull import hull_of_points
from .model import BOX, CAPSULE, CYLINDER, ELLIPSOID, FREE, MESH, SPHERE

RELATIVE_DEPTH = 1e-3  # the depth, relative to the smaller bounding radius, above which a pair overlaps
ELLIPSOID_POINTS = 128  # an ellipsoid's core: the hull of this many points of its surface


def _sphere_lattice(n):
    """n nearly uniform unit vectors (a Fibonacci lattice)."""
    k = np.arange(n) + 0.5
    z = 1 - 2 * k / n
    phi = np.pi * (1 + 5 ** 0.5) * k
    r = np.sqrt(1 - z * z)
    return np.stack([r * np.cos(phi), r * np.sin(phi), z], axis=1)


def neutral_link_poses(links, joints, qpos0):
    """World (pos, quat) of every link at qpos0. Hinges and slides sit at their reference (the body where the file
    places it), balls at the identity; a free joint's body is where its qpos0 puts it."""
    poses = []
    for link in links:
        j0, j1 = link["joints"]
        free = [j for j in joints[j0:j1] if j["type"] == FREE]
        if free:
            q = qpos0[free[0]["q"]:free[0]["q"] + 7]
            poses.append((np.asarray(q[:3], dtype=np.float64), np.asarray(q[3:7], dtype=np.float64)))
        elif link["parent"] < 0:
            poses.append((np.asarray(link["pos"], dtype=np.float64), np.asarray(link["quat"], dtype=np.float64)))
        else:
            ppos, pquat = poses[link["parent"]]
            poses.append((ppos + rotate(pquat, link["pos"]), quat_mul(pquat, link["quat"])))
    return poses


class Shape:
    """A convex geom in the world frame as a core swept by a ball: the core's vertices [V, 3], its outward face
    normals [F, 3] (none for a point or a segment), the unit directions of its edges [E, 3] (one per direction) and
    its edges as vertex index pairs [K, 2]; `radius` the ball's (0 for a polytope). A hull is its own core; a sphere
    is its centre swept by its radius, a capsule its segment."""

    def __init__(self, verts, normals, edges, segments, radius=0.0):
        self.verts, self.normals, self.edges, self.segments, self.radius = verts, normals, edges, segments, radius
        self.centre = verts.mean(axis=0)
        self.bound = float(np.linalg.norm(verts - self.centre, axis=1).max()) + radius


def _unit_rows(x):
    """The rows of x normalised, those of near-zero length dropped."""
    norm = np.linalg.norm(x, axis=1)
    keep = norm > 1e-9
    return x[keep] / norm[keep, None]


def _directions(d):
    """One unit direction per line among the rows of d (sign fixed by the largest component, near-duplicates
    merged)."""
    d = _unit_rows(d)
    lead = d[np.arange(len(d)), np.argmax(np.abs(d), axis=1)]
    return np.unique(np.round(d * np.sign(lead)[:, None], 9), axis=0)


def _core(desc):
    """A geom's core in its own frame, (vertices, face normals, edges as index pairs, radius); None for a plane.
    Meshes and boxes are their hulls; a cylinder is a prism of 64 sides (its faces within 0.12 % of the radius); an
    ellipsoid the hull of ELLIPSOID_POINTS points of its surface (its faces within 3 % of the semi-axes inside it,
    so it never overlaps where the ellipsoid does not)."""
    s = np.asarray(desc.size, dtype=np.float64)
    none = np.zeros((0, 3))
    if desc.type == SPHERE:
        return np.zeros((1, 3)), none, np.zeros((0, 2), dtype=np.int64), s[0]
    if desc.type == CAPSULE:
        return np.array([[0.0, 0.0, -s[1]], [0.0, 0.0, s[1]]]), none, np.array([[0, 1]]), s[0]
    if desc.type == CYLINDER:
        a = np.linspace(0.0, 2.0 * np.pi, 64, endpoint=False)
        ring = np.stack([s[0] * np.cos(a), s[0] * np.sin(a)], axis=1)
        hull = hull_of_points(np.concatenate([np.c_[ring, np.full(64, -s[1])], np.c_[ring, np.full(64, s[1])]]),
                              max_vertices=128)
    elif desc.type == ELLIPSOID:
        hull = hull_of_points(_sphere_lattice(ELLIPSOID_POINTS) * s, max_vertices=ELLIPSOID_POINTS)
    elif desc.type in (MESH, BOX):
        hull = desc.hull()
    else:
        return None
    pairs = np.concatenate([np.stack([np.asarray(loop), np.roll(np.asarray(loop), -1)], axis=1)
                            for loop in hull.face_loops])
    return hull.vertices, np.asarray(hull.face_normals), np.unique(np.sort(pairs, axis=1), axis=0), 0.0


def world_shape(desc, pos, quat):
    """The geom's Shape at the pose (pos, quat), or None for a plane."""
    core = _core(desc)
    if core is None:
        return None
    verts, normals, segments, radius = core
    rot = quat_to_mat(quat)
    verts = verts @ rot.T + pos
    edges = _directions(verts[segments[:, 1]] - verts[segments[:, 0]]) if len(segments) else np.zeros((0, 3))
    return Shape(verts, normals @ rot.T, edges, segments, float(radius))


def _perpendiculars(points, verts, segments):
    """For each point and each edge line (segments of verts): the direction from the line to the point."""
    if not len(points) or not len(segments):
        return np.zeros((0, 3))
    p0 = verts[segments[:, 0]]
    e = _unit_rows(verts[segments[:, 1]] - p0)
    if len(e) != len(p0):
        return np.zeros((0, 3))
    w = points[:, None, :] - p0[None, :, :]
    return (w - np.einsum("pki,ki->pk", w, e)[..., None] * e[None]).reshape(-1, 3)


def _overlap(a, b, axes):
    """The overlaps of two Shapes' projections on each unit axis (rows)."""
    pa, pb = a.verts @ axes.T, b.verts @ axes.T
    return np.minimum(pa.max(axis=0) - pb.min(axis=0), pb.max(axis=0) - pa.min(axis=0)) + a.radius + b.radius


def penetration_depth(a, b, stop=None):
    """The penetration depth of two Shapes: the smallest overlap of their projections over the separating-axis
    candidates of their Minkowski difference (cores A - B swept by the two radii): the face normals of both cores,
    the cross products of their edges and, where a radius sweeps a core, the directions between the cores' vertices
    and from each core's edge lines to the other's vertices (where the nearest points of the two cores can lie).
    Exact for polytopes, spheres and capsules; <= 0 when the shapes are apart. With `stop`, the search may end at
    the first axis whose overlap is at most `stop`, and return that overlap (enough to know the depth does not
    exceed it)."""
    depth = np.inf
    faces = _unit_rows(np.concatenate([a.normals, b.normals]))
    if len(faces):
        depth = float(_overlap(a, b, faces).min())
    chunk = max(1, 4096 // max(len(b.edges), 1))  # edges of a taken at a time: the cross products stay small
    for i in range(0, len(a.edges), chunk):
        if stop is not None and depth <= stop:
            return depth
        cross = _unit_rows(np.cross(a.edges[i:i + chunk, None, :], b.edges[None, :, :]).reshape(-1, 3))
        if len(cross):
            depth = min(depth, float(_overlap(a, b, cross).min()))
    if a.radius + b.radius > 0 and not (stop is not None and depth <= stop):
        swept = np.concatenate([(a.verts[:, None, :] - b.verts[None, :, :]).reshape(-1, 3),
                                _perpendiculars(b.verts, a.verts, a.segments),
                                _perpendiculars(a.verts, b.verts, b.segments)])
        swept = _unit_rows(swept)
        if len(swept):
            depth = min(depth, float(_overlap(a, b, swept).min()))
    return depth


def neutral_overlaps(pairs, geoms, links, joints, qpos0):
    """The pairs of `pairs` (geom index pairs within one kinematic tree) whose geoms overlap at qpos0."""
    poses = neutral_link_poses(links, joints, qpos0)
    world = {}

    def shape(g):
        if g not in world:
            gm = geoms[g]
            lpos, lquat = poses[gm["link"]]
            world[g] = world_shape(gm["desc"], lpos + rotate(lquat, gm["pos"]), quat_mul(lquat, gm["quat"]))
        return world[g]

    found = []
    for ga, gb in pairs:
        a, b = shape(ga), shape(gb)
        if a is None or b is None or np.linalg.norm(a.centre - b.centre) >= a.bound + b.bound:
            continue
        tol = RELATIVE_DEPTH * min(a.bound, b.bound)
        if penetration_depth(a, b, stop=tol) > tol:
            found.append((ga, gb))
    return found
