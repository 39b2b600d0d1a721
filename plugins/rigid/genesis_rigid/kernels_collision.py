"""Contacts between primitive geoms, for one environment b, and what the mesh pairs share (kernels_convex.py).

Contacts go into a compact pool per environment (s_con_f / s_con_i, max_contacts entries), in the order they are
found. Each carries a key, (candidate pair) * KEY_SPAN + feature: the feature is the point's index in its pair (a
box on a plane: the corner) or, for two boxes, the feature code of kernels_convex.box_box_candidates. The
constraint solver's warm start is declared state kept per pool entry with its key (`contact_impulse`,
`contact_key`); `finish_contacts` matches each new contact to the last substep's entry of the same key. A full
pool keeps the deepest contacts: a new one replaces the shallowest if it is deeper. A contact stores its point,
the unit normal n pointing from geom a to geom b (b is pushed along +n), the penetration depth, the friction
coefficient and the restitution (the larger of the two geoms', as in MuJoCo for friction). Memory, the declared
state and the constraint stage scale with max_contacts, not with the candidate pairs.

Pairs: plane with sphere / capsule (2 end spheres) / box (8 corners) / cylinder (8 rim points); sphere-sphere,
sphere-capsule, capsule-capsule (closest points of the segments), sphere-box, capsule-box (3 spheres along the
segment); box-box in kernels_convex (the separating axis of least overlap among 15, then the face manifold or the
edge-edge point).
Cylinders meet anything but a plane as capsules of the same radius and half-length.

Broadphase: the candidate pairs are fixed at build (collision filters). Each substep, per environment, the pairs
with a plane are tested directly (the other geom's bounding sphere reaches below the plane); the other geoms are
sorted along the axis their bounding-sphere centres spread most on (kept until another spreads twice as much;
insertion sort, warm-started from the last substep's order, so nearly linear) and swept: only geoms whose intervals overlap are looked up in the pair table
and tested (sphere against sphere) before their narrowphase. The cost grows with the geoms and the overlaps, not
with the square of the geoms. Environments are serial in their own loop body, so the pool's order is
deterministic.
"""

import taichi as ti

from .kernels_math import func, quat_to_mat, v3, v4
from .layout import (GF_BCENTRE, GF_FRICTION, GF_GAP, GF_MARGIN, GF_POS, GF_QUAT, GF_RESTITUTION, GF_SIZE, GI_LINK, GI_TYPE, PI_GEOM_A,
                     PI_GEOM_B, PI_SLOT)
from .model import BOX, CAPSULE, CYLINDER, MESH, PLANE, SPHERE

# contact record columns of s_con_f [B, max_contacts, CF_N]: point (3), normal (3), depth, friction, restitution
CF_POS, CF_NORMAL, CF_DEPTH, CF_MU, CF_REST, CF_N = 0, 3, 6, 7, 8, 9
# s_con_i [B, CI_N, max(max_contacts, 5)] (each row contiguous; the pool is its first max_contacts columns): per pool
# entry its active flag, the links of geoms a and b, the box-box feature code (-1 otherwise), the key, the candidate
# slot (the pair's first slot plus the point's index in the pair's manifold: what the differentiable step computes the
# point from), the entry of the last substep with the same key (-1: none, no warm start); row CI_META holds the number
# of entries (column 0), of the contacts found, kept or not (column 1), and the Gauss-Seidel sweeps of the last
# constraint solve, velocity pass and position pass (columns CM_SWEEPS, CM_SWEEPS + 1), and the pairs the mesh
# narrowphase settled as apart by their kept separating direction, without GJK (column CM_SETTLED;
# kernels_convex.convex_contacts)
CI_ACTIVE, CI_LINK_A, CI_LINK_B, CI_FEATURE, CI_KEY, CI_SLOT, CI_PREV, CI_META, CI_N = range(9)
CM_SWEEPS = 2
CM_SETTLED = 4
# a key is pair * KEY_SPAN + feature (features: a point index < 8, or a box-box code < 3840)
KEY_SPAN = 4096
# the warm-start table of finish_contacts: open addressing over HASH_FACTOR * max_contacts rows (a power of two)
HASH_FACTOR = 2


@func
def emit(b, slot, key, pos, normal, depth, mu, la, lb, s_con_f, s_con_i):
    """A contact into the pool; returns its entry (-1: the pool is full of deeper ones)."""
    capacity = s_con_f.shape[1]
    n = s_con_i[b, CI_META, 0]
    s_con_i[b, CI_META, 1] = s_con_i[b, CI_META, 1] + 1
    i = n
    if n >= capacity:  # full: this one replaces the shallowest, if it is deeper
        i = -1
        shallowest = depth
        for j in range(capacity):
            if s_con_f[b, j, CF_DEPTH] < shallowest:
                shallowest = s_con_f[b, j, CF_DEPTH]
                i = j
    else:
        s_con_i[b, CI_META, 0] = n + 1
    if i >= 0:
        for k in ti.static(range(3)):
            s_con_f[b, i, CF_POS + k] = pos[k]
            s_con_f[b, i, CF_NORMAL + k] = normal[k]
        s_con_f[b, i, CF_DEPTH] = depth
        s_con_f[b, i, CF_MU] = mu
        s_con_i[b, CI_ACTIVE, i] = 1
        s_con_i[b, CI_LINK_A, i] = la
        s_con_i[b, CI_LINK_B, i] = lb
        s_con_i[b, CI_FEATURE, i] = -1
        s_con_i[b, CI_KEY, i] = key
        s_con_i[b, CI_SLOT, i] = slot
    return i


@func
def clear_contacts(b, s_con_i):
    """Empty the pool of environment b (only the entries in use are touched)."""
    for i in range(s_con_i[b, CI_META, 0]):
        s_con_i[b, CI_ACTIVE, i] = 0
    s_con_i[b, CI_META, 0] = 0
    s_con_i[b, CI_META, 1] = 0
    s_con_i[b, CI_META, CM_SETTLED] = 0


@ti.func
def key_hash(key, mask):
    """A table row for a key: pair and feature mixed by two odd multipliers (int32 wraps), so that the low bits
    the mask keeps depend on both (a multiple of KEY_SPAN alone would leave the pair out of any table of up to
    4096 rows, and keys of one feature on many pairs would probe one long run)."""
    return ((key // KEY_SPAN) * 73856093 ^ (key % KEY_SPAN) * 19349663) & mask


@func
def finish_contacts(b, f, fn, contact_key, pair_i, geom_f, geom_mu, s_con_f, s_con_i, s_hash):
    """After the narrowphase: each entry's friction (the larger of its geoms' in this environment, geom_mu [B,
    G]: the model's times the state's friction ratio) and restitution, and its warm start, the entry of frame f with
    the same key (found through an open-addressing table of frame f's keys); the keys into frame fn. Frame f's keys
    are compact (the entries in use first, then -1: the pool writes them so and reset's validation holds any state
    to it), so the scans stop at the first -1; the table is empty between calls (every row -1: cleared here after
    use, along the probe runs of the keys put in), so the cost is O(contacts), not O(max_contacts)."""
    n = s_con_i[b, CI_META, 0]
    mask = s_hash.shape[1] - 1
    n_prev = contact_key.shape[2]
    for j in range(contact_key.shape[2]):
        key = contact_key[f, b, j]
        if key < 0:
            n_prev = j
            break
        h = key_hash(key, mask)
        while s_hash[b, h] >= 0:
            h = (h + 1) & mask
        s_hash[b, h] = j
    for i in range(n):
        key = s_con_i[b, CI_KEY, i]
        p = key // KEY_SPAN
        s_con_f[b, i, CF_REST] = ti.max(geom_f[pair_i[p, PI_GEOM_A], GF_RESTITUTION],
                                        geom_f[pair_i[p, PI_GEOM_B], GF_RESTITUTION])
        s_con_f[b, i, CF_MU] = ti.max(geom_mu[b, pair_i[p, PI_GEOM_A]], geom_mu[b, pair_i[p, PI_GEOM_B]])
        prev = -1
        h = key_hash(key, mask)
        while s_hash[b, h] >= 0:
            j = s_hash[b, h]
            if contact_key[f, b, j] == key:
                prev = j
                break
            h = (h + 1) & mask
        s_con_i[b, CI_PREV, i] = prev
    # every row a key was put in lies on the run of occupied rows that starts at the key's own row: clearing each
    # such run up to its first free row empties the table
    for j in range(n_prev):
        h = key_hash(contact_key[f, b, j], mask)
        while s_hash[b, h] >= 0:
            s_hash[b, h] = -1
            h = (h + 1) & mask
    for i in range(contact_key.shape[2]):  # frame fn's keys are compact too: past this pass's n, at their first -1
        key = s_con_i[b, CI_KEY, i] if i < n else -1  # the rest are -1 already
        if i >= n and contact_key[fn, b, i] < 0:
            break
        if contact_key[fn, b, i] != key:
            contact_key[fn, b, i] = key


@func
def closest_on_segment(p0, p1, x):
    d = p1 - p0
    t = ti.min(ti.max((x - p0).dot(d) / ti.max(d.dot(d), 1e-30), 0.0), 1.0)
    return p0 + t * d


@func
def closest_between_segments(p0, p1, q0, q1):
    """Closest points of segments p0p1 and q0q1 (Ericson, Real-Time Collision Detection, 5.1.9)."""
    d1 = p1 - p0
    d2 = q1 - q0
    r = p0 - q0
    a = d1.dot(d1)
    e = d2.dot(d2)
    f = d2.dot(r)
    s = 0.0
    t = 0.0
    if a <= 1e-30 and e <= 1e-30:
        s = 0.0
        t = 0.0
    elif a <= 1e-30:
        t = ti.min(ti.max(f / e, 0.0), 1.0)
    else:
        c = d1.dot(r)
        if e <= 1e-30:
            s = ti.min(ti.max(-c / a, 0.0), 1.0)
        else:
            bb = d1.dot(d2)
            denom = a * e - bb * bb
            if denom > 1e-30:
                s = ti.min(ti.max((bb * f - c * e) / denom, 0.0), 1.0)
            t = (bb * s + f) / e
            if t < 0.0:
                t = 0.0
                s = ti.min(ti.max(-c / a, 0.0), 1.0)
            elif t > 1.0:
                t = 1.0
                s = ti.min(ti.max((bb - c) / a, 0.0), 1.0)
    return p0 + d1 * s, q0 + d2 * t


@func
def sphere_sphere(b, slot, key, ca, ra, cb, rb, mu, la, lb, reach, shift, s_con_f, s_con_i):
    """Two spheres. Every detector reports a pair closer than `reach` (the pair's margin + gap; 0: touching), with
    depth = penetration + shift (the pair's margin: the constraint holds them that far apart; a contact in the gap
    beyond it is reported and exerts no force unless it closes the distance)."""
    d = cb - ca
    dist = d.norm()
    pen = ra + rb - dist
    if pen > -reach:
        n = ti.Vector([0.0, 0.0, 1.0])
        if dist > 1e-12:
            n = d / dist
        emit(b, slot, key, ca + n * (ra - 0.5 * pen), n, pen + shift, mu, la, lb, s_con_f, s_con_i)


@func
def plane_point(b, slot, key, p, n, x, radius, mu, la, lb, reach, shift, s_con_f, s_con_i):
    """A sphere of `radius` at x (0: a point) against the plane through p with normal n."""
    dist = n.dot(x - p) - radius
    if dist < reach:
        emit(b, slot, key, x - n * (radius + 0.5 * dist), n, shift - dist, mu, la, lb, s_con_f, s_con_i)


@func
def sphere_box(b, slot, key, c, r, cb, rot_b, hb, mu, la, lb, reach, shift, s_con_f, s_con_i):
    """Sphere (geom a) against box (geom b); the normal points from the sphere into the box."""
    local = rot_b.transpose() @ (c - cb)
    clamped = ti.min(ti.max(local, -hb), hb)
    inside = ti.abs(local[0]) < hb[0] and ti.abs(local[1]) < hb[1] and ti.abs(local[2]) < hb[2]
    if inside:
        axis = 0
        slack = hb[0] - ti.abs(local[0])
        for i in ti.static(range(1, 3)):
            if hb[i] - ti.abs(local[i]) < slack:
                slack = hb[i] - ti.abs(local[i])
                axis = i
        out_local = ti.Vector([0.0, 0.0, 0.0])
        out_local[axis] = 1.0 if local[axis] >= 0 else -1.0
        out = rot_b @ out_local
        surface = c + out * slack
        emit(b, slot, key, surface - out * (0.5 * (slack + r)), -out, slack + r + shift, mu, la, lb, s_con_f,
             s_con_i)
    else:
        d = local - clamped
        dist = d.norm()
        if dist < r + reach:
            out = rot_b @ (d / ti.max(dist, 1e-30))
            surface = cb + rot_b @ clamped
            deepest = c - out * r
            emit(b, slot, key, 0.5 * (surface + deepest), -out, r - dist + shift, mu, la, lb, s_con_f, s_con_i)


@func
def box_support_radius(rot, h, n):
    return h[0] * ti.abs(n.dot(ti.Vector([rot[0, 0], rot[1, 0], rot[2, 0]]))) + \
        h[1] * ti.abs(n.dot(ti.Vector([rot[0, 1], rot[1, 1], rot[2, 1]]))) + \
        h[2] * ti.abs(n.dot(ti.Vector([rot[0, 2], rot[1, 2], rot[2, 2]])))


@ti.func
def corner_sign(k):
    """The signs (+-1, +-1, +-1) of box corner k = 0..7 (bit i set: + along axis i)."""
    return ti.Vector([1.0 if k & 1 != 0 else -1.0, 1.0 if k & 2 != 0 else -1.0, 1.0 if k & 4 != 0 else -1.0])


@func
def geom_pose(b, f, g, l, links_pos, s_R, geom_f):
    """World centre and rotation of geom g on link l."""
    return links_pos[f, b, l] + s_R[b, l] @ v3(geom_f, g, GF_POS), s_R[b, l] @ quat_to_mat(v4(geom_f, g, GF_QUAT))


@func
def detect_contacts(b, f, links_pos, s_R, geom_f, geom_i, geom_rbound, pair_i, pair_lut, plane_pairs, bound_geoms,
                    s_sap, s_sap_axis, s_con_f, s_con_i, s_geom_f, s_near_i):
    """Empties the contact pool; the broadphase; the contacts of the near pairs of primitives. The near pairs
    with a mesh are listed for kernels_convex.detect_mesh_contacts: their count in s_near_i[b, 0], the pairs in
    s_near_i[b, 1..]. s_geom_f[b, g] holds geom g's world bounding-sphere centre and, for a plane, its normal.
    s_sap[b, :] is the sweep order of the geoms without a plane and s_sap_axis[b] its axis (any permutation and
    axis are a valid start). bound_geoms: the geoms of the candidate pairs, the only ones whose s_geom_f is read
    (a model's visual geoms, 58 of the panda's 82, collide with nothing)."""
    clear_contacts(b, s_con_i)
    for i in range(bound_geoms.shape[0]):  # world centres of the bounding spheres (a plane: a point), plane normals
        g = bound_geoms[i]
        l = geom_i[g, GI_LINK]
        s_geom_f[b, g, 0] = links_pos[f, b, l] + s_R[b, l] @ v3(geom_f, g, GF_BCENTRE)
        if geom_i[g, GI_TYPE] == PLANE:
            q = v4(geom_f, g, GF_QUAT)  # the local z axis: the third column of the rotation of q
            s_geom_f[b, g, 1] = s_R[b, l] @ ti.Vector([2 * (q[1] * q[3] + q[0] * q[2]), 2 * (q[2] * q[3] - q[0] * q[1]),
                                                      1 - 2 * (q[1] * q[1] + q[2] * q[2])])
    s_near_i[b, 0] = 0
    for q in range(plane_pairs.shape[0]):
        p = plane_pairs[q]
        if p >= 0:  # (-1 pads a scene without planes)
            ga = pair_i[p, PI_GEOM_A]
            gb = pair_i[p, PI_GEOM_B]
            if s_geom_f[b, ga, 1].dot(s_geom_f[b, gb, 0] - s_geom_f[b, ga, 0]) <= geom_rbound[gb]:
                narrow_pair(b, f, p, links_pos, s_R, geom_f, geom_i, pair_i, s_con_f, s_con_i, s_near_i)
    n = s_sap.shape[1]
    if n > 1:
        # the sweep axis: the one the centres spread most on
        mean = ti.Vector([0.0, 0.0, 0.0])
        for i in range(n):
            mean += s_geom_f[b, s_sap[b, i], 0]
        mean /= n
        var = ti.Vector([0.0, 0.0, 0.0])
        for i in range(n):
            d = s_geom_f[b, s_sap[b, i], 0] - mean
            var += d * d
        # keep the last substep's axis (and so its nearly sorted order) unless another spreads twice as much
        axis = s_sap_axis[b]
        for k in ti.static(range(3)):
            if var[k] > 2.0 * var[axis]:
                axis = k
        s_sap_axis[b] = axis
        for i in range(1, n):  # insertion sort by the lower end of the interval
            g = s_sap[b, i]
            lo = s_geom_f[b, g, 0][axis] - geom_rbound[g]
            j = i - 1
            while j >= 0:  # (Taichi's `and` does not short-circuit: no index -1 in the condition)
                gj = s_sap[b, j]
                if s_geom_f[b, gj, 0][axis] - geom_rbound[gj] <= lo:
                    break
                s_sap[b, j + 1] = gj
                j -= 1
            s_sap[b, j + 1] = g
        for i in range(n):
            ga = s_sap[b, i]
            hi = s_geom_f[b, ga, 0][axis] + geom_rbound[ga]
            for j in range(i + 1, n):
                gb = s_sap[b, j]
                if s_geom_f[b, gb, 0][axis] - geom_rbound[gb] > hi:
                    break
                p = pair_lut[ga, gb]
                if p >= 0:
                    ca = s_geom_f[b, ga, 0]
                    cb = s_geom_f[b, gb, 0]
                    if (cb - ca).norm_sqr() <= (geom_rbound[ga] + geom_rbound[gb]) ** 2:
                        narrow_pair(b, f, p, links_pos, s_R, geom_f, geom_i, pair_i, s_con_f, s_con_i, s_near_i)


@func
def narrow_pair(b, f, p, links_pos, s_R, geom_f, geom_i, pair_i, s_con_f, s_con_i, s_near_i):
    """The narrowphase of candidate pair p, whose bounding volumes overlap: contacts of primitives into the pool; a pair with a mesh, or of two boxes, is listed in s_near_i for the mesh kernel (it has the scratch
    their candidates need)."""
    ga = pair_i[p, PI_GEOM_A]
    gb = pair_i[p, PI_GEOM_B]
    ta = geom_i[ga, GI_TYPE]
    tb = geom_i[gb, GI_TYPE]
    la = geom_i[ga, GI_LINK]
    lb = geom_i[gb, GI_LINK]
    slot = pair_i[p, PI_SLOT]
    key0 = p * KEY_SPAN
    if tb == MESH or (ta == BOX and tb == BOX):
        n_near = s_near_i[b, 0] + 1
        s_near_i[b, 0] = n_near
        s_near_i[b, n_near] = p
    else:
        ca, rot_a = geom_pose(b, f, ga, la, links_pos, s_R, geom_f)
        cb, rot_b = geom_pose(b, f, gb, lb, links_pos, s_R, geom_f)
        sa = v3(geom_f, ga, GF_SIZE)
        sb = v3(geom_f, gb, GF_SIZE)
        mu = ti.max(geom_f[ga, GF_FRICTION], geom_f[gb, GF_FRICTION])
        shift = geom_f[ga, GF_MARGIN] + geom_f[gb, GF_MARGIN]  # (MuJoCo's pair margin and gap: the sums)
        reach = shift + geom_f[ga, GF_GAP] + geom_f[gb, GF_GAP]
        za = ti.Vector([rot_a[0, 2], rot_a[1, 2], rot_a[2, 2]])
        zb = ti.Vector([rot_b[0, 2], rot_b[1, 2], rot_b[2, 2]])
        if ta == PLANE:
            if tb == SPHERE:
                plane_point(b, slot, key0, ca, za, cb, sb[0], mu, la, lb, reach, shift, s_con_f, s_con_i)
            elif tb == CAPSULE:
                plane_point(b, slot, key0, ca, za, cb + zb * sb[1], sb[0], mu, la, lb, reach, shift, s_con_f,
                            s_con_i)
                plane_point(b, slot + 1, key0 + 1, ca, za, cb - zb * sb[1], sb[0], mu, la, lb, reach, shift, s_con_f,
                            s_con_i)
            elif tb == BOX:
                for k in range(8):
                    corner = cb + rot_b @ (corner_sign(k) * sb)
                    plane_point(b, slot + k, key0 + k, ca, za, corner, 0.0, mu, la, lb, reach, shift, s_con_f,
                                s_con_i)
            elif tb == CYLINDER:
                u = -za - zb * zb.dot(-za)
                if u.norm() < 1e-9:
                    u = ti.Vector([rot_b[0, 0], rot_b[1, 0], rot_b[2, 0]])
                u = u / u.norm()
                w = zb.cross(u)
                for k in range(8):
                    # 4 rim points per cap, the first the deepest toward the plane
                    centre = cb + zb * (sb[1] if k < 4 else -sb[1])
                    j = k % 4
                    rim = ti.select(j == 0, u, ti.select(j == 1, w, ti.select(j == 2, -u, -w)))
                    plane_point(b, slot + k, key0 + k, ca, za, centre + sb[0] * rim, 0.0, mu, la, lb, reach, shift,
                                s_con_f, s_con_i)
        else:
            # spheres, capsules and cylinders as segments with a radius (a sphere: a point)
            ha = 0.0 if ta == SPHERE or ta == BOX else sa[1]
            hb = 0.0 if tb == SPHERE or tb == BOX else sb[1]
            if tb != BOX:
                pa, pb = closest_between_segments(ca - za * ha, ca + za * ha, cb - zb * hb, cb + zb * hb)
                sphere_sphere(b, slot, key0, pa, sa[0], pb, sb[0], mu, la, lb, reach, shift, s_con_f, s_con_i)
            else:
                # a segment (geom a) against a box (geom b): both ends and the point closest to the box centre
                n_spheres = 1 if ta == SPHERE else 3
                for k in range(n_spheres):
                    x = closest_on_segment(ca - za * ha, ca + za * ha, cb)
                    x = ti.select(k == 1, ca - za * ha, ti.select(k == 2, ca + za * ha, x))
                    sphere_box(b, slot + k, key0 + k, x, sa[0], cb, rot_b, sb, mu, la, lb, reach, shift, s_con_f,
                               s_con_i)
