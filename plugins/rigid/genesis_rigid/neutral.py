"""Self-collision pairs that already overlap in the neutral configuration (qpos0).

A robot's collision meshes often interpenetrate where its links meet: the Franka's hand sits inside the hull of its
fifth link, its two fingers' pads cross at the closed neutral pose. Left in, such a pair pushes the links apart from
the first step, fighting the actuators (a held arm drifts, fingers that should close spring open). Genesis World drops
the geom pairs of one kinematic tree that overlap at qpos0 unless RigidOptions(enable_neutral_collision=True); this
module finds them the same way, by geometry, at build.

The test is exact for the convex shapes the narrowphase sees: a geom is its convex hull (meshes and boxes) or a
polytope sampled on its surface (spheres, capsules, cylinders), and two convex polytopes overlap by the smallest of
their overlaps along the separating-axis candidates (the faces' normals and the cross products of their edges), their
penetration depth. A pair counts as overlapping when that depth exceeds 0.1 % of the smaller geom's bounding radius,
so geoms that only touch stay in (Genesis World shrinks each mesh by 0.1 % before its voxel test)."""

from __future__ import annotations

import numpy as np

from genesis_core.rotations import quat_mul, quat_to_mat, rotate

from .hull import hull_of_points
from .model import BOX, CAPSULE, CYLINDER, FREE, MESH, SPHERE

RELATIVE_DEPTH = 1e-3  # the depth, relative to the smaller bounding radius, above which a pair overlaps


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


def _sphere_points(n=48):
    """n points spread over the unit sphere (a Fibonacci lattice)."""
    k = np.arange(n) + 0.5
    z = 1.0 - 2.0 * k / n
    r = np.sqrt(1.0 - z * z)
    phi = np.pi * (1.0 + 5.0 ** 0.5) * k
    return np.stack([r * np.cos(phi), r * np.sin(phi), z], axis=1)


def geom_hull(desc):
    """The convex polytope of a geom in its own frame (a Hull), or None for a type without volume (a plane)."""
    s = np.asarray(desc.size, dtype=np.float64)
    if desc.type in (MESH, BOX):
        return desc.hull()
    if desc.type == SPHERE:
        return hull_of_points(s[0] * _sphere_points())
    if desc.type == CAPSULE:
        pts = s[0] * _sphere_points()
        pts[:, 2] += np.where(pts[:, 2] >= 0.0, s[1], -s[1])
        return hull_of_points(pts)
    if desc.type == CYLINDER:
        a = np.linspace(0.0, 2.0 * np.pi, 24, endpoint=False)
        ring = np.stack([s[0] * np.cos(a), s[0] * np.sin(a)], axis=1)
        return hull_of_points(np.concatenate([np.c_[ring, np.full(24, -s[1])], np.c_[ring, np.full(24, s[1])]]))
    return None


def _world(hull, pos, quat):
    """The hull's vertices, face normals and unique edge directions in the world frame."""
    rot = quat_to_mat(quat)
    verts = hull.vertices @ rot.T + pos
    edges = []
    for loop in hull.face_loops:
        idx = np.asarray(loop)
        edges.append(hull.vertices[np.roll(idx, -1)] - hull.vertices[idx])
    edges = np.concatenate(edges)
    edges /= np.linalg.norm(edges, axis=1, keepdims=True)
    # each edge is on two faces, walked both ways: one direction per line (sign fixed, near-duplicates merged)
    lead = edges[np.arange(len(edges)), np.argmax(np.abs(edges), axis=1)]
    edges = np.unique(np.round(edges * np.sign(lead)[:, None], 9), axis=0)
    return verts, np.asarray(hull.face_normals) @ rot.T, edges @ rot.T


def _overlap(va, vb, axes):
    """The overlaps of two point sets' projections on each axis (rows)."""
    pa, pb = va @ axes.T, vb @ axes.T
    return np.minimum(pa.max(axis=0) - pb.min(axis=0), pb.max(axis=0) - pa.min(axis=0))


def penetration_depth(a, b, stop=None):
    """The penetration depth of two convex polytopes, each (vertices, face normals, edge directions) in one frame:
    the smallest overlap of their projections over the separating-axis candidates; <= 0 when they are apart.
    With `stop`, the search may end at the first axis whose overlap is at most `stop`, and return that overlap
    (enough to know the depth does not exceed it)."""
    va, na, ea = a
    vb, nb, eb = b
    depth = float(_overlap(va, vb, np.concatenate([na, nb])).min())
    chunk = max(1, 4096 // max(len(eb), 1))  # edges of a taken at a time: the cross products stay small
    for i in range(0, len(ea), chunk):
        if stop is not None and depth <= stop:
            break
        cross = np.cross(ea[i:i + chunk, None, :], eb[None, :, :]).reshape(-1, 3)
        norm = np.linalg.norm(cross, axis=1)
        keep = norm > 1e-6
        if keep.any():
            depth = min(depth, float(_overlap(va, vb, cross[keep] / norm[keep, None]).min()))
    return depth


def neutral_overlaps(pairs, geoms, links, joints, qpos0):
    """The pairs of `pairs` (geom index pairs within one kinematic tree) whose geoms overlap at qpos0."""
    poses = neutral_link_poses(links, joints, qpos0)
    world, radius = {}, {}

    def shape(g):
        if g not in world:
            gm = geoms[g]
            hull = geom_hull(gm["desc"])
            if hull is None:
                world[g] = None
            else:
                lpos, lquat = poses[gm["link"]]
                pos = lpos + rotate(lquat, gm["pos"])
                world[g] = _world(hull, pos, quat_mul(lquat, gm["quat"]))
                centre = world[g][0].mean(axis=0)
                radius[g] = (centre, float(np.linalg.norm(world[g][0] - centre, axis=1).max()))
        return world[g]

    found = []
    for ga, gb in pairs:
        a, b = shape(ga), shape(gb)
        if a is None or b is None:
            continue
        (ca, ra), (cb, rb) = radius[ga], radius[gb]
        if np.linalg.norm(ca - cb) >= ra + rb:
            continue
        tol = RELATIVE_DEPTH * min(ra, rb)
        if penetration_depth(a, b, stop=tol) > tol:
            found.append((ga, gb))
    return found
