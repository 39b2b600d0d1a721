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

Pairs: plane with sphere / capsule (2 end spheres) / box (8 corners) / cylinder (8 rim points) / ellipsoid (its
support point along -n, exact: ellipsoid_support); sphere-sphere, sphere-capsule, capsule-capsule (closest points
of the segments), sphere-box, capsule-box (3 spheres along the segment); box-box in kernels_convex (the separating
axis of least overlap among 15, then the face manifold or the edge-edge point), and an ellipsoid with anything but
a plane there too (GJK / EPA on its support function).
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

from .kernels_math import func, func_ref, quat_to_mat, v3, v4
from .layout import (GC_DEPTH, GC_NORMAL, GC_POS, GF_BCENTRE, GF_FRICTION, GF_GAP, GF_MARGIN, GF_POS, GF_QUAT,
                     GF_RESTITUTION, GF_SIZE, GI_LINK, GI_TYPE, PI_GEOM_A, PI_GEOM_B, PI_SLOT)
from .model import BOX, CAPSULE, CYLINDER, ELLIPSOID, MESH, PLANE, SPHERE

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
# s_geom_f [B, G, GS_N] of 3-vectors: a geom's world bounding-sphere centre and, for a plane, its normal
GS_CENTRE, GS_NORMAL, GS_N = 0, 1, 2


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


@func_ref("c", "rot", "r", "u")
def ellipsoid_support(c, rot, r, u):
    """The farthest point in unit direction u of the ellipsoid of centre c, rotation rot and semi-axes r, exact:
    c + R diag(r^2) u' / |diag(r) u'|, u' = R^T u the direction in its frame."""
    w = r * (rot.transpose() @ u)
    return c + rot @ (r * w) / ti.max(w.norm(), 1e-30)


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
def detect_contacts(b, f, links_pos, s_R, geom_f, geom_mu, geom_i, geom_rbound, pair_i, pair_lut, plane_pairs,
                    bound_geoms, s_sap, s_sap_axis, s_con_f, s_con_i, s_geom_f, s_near_i):
    """Empties the contact pool; the broadphase; the contacts of the near pairs of primitives. The near pairs
    with a mesh are listed for kernels_convex.detect_mesh_contacts: their count in s_near_i[b, 0], the pairs in
    s_near_i[b, 1..]. s_geom_f[b, g] holds geom g's world bounding-sphere centre and, for a plane, its normal.
    s_sap[b, :] is the sweep order of the geoms without a plane and s_sap_axis[b] its axis (any permutation and
    axis are a valid start). bound_geoms: the geoms of the candidate pairs, the only ones whose s_geom_f is read
    (a model's visual geoms, 58 of the panda's 82, collide with nothing). A geom whose friction in environment b
    (geom_mu) is negative is absent there (a heterogeneous entity's other variants): its pairs are skipped."""
    clear_contacts(b, s_con_i)
    for i in range(bound_geoms.shape[0]):  # world centres of the bounding spheres (a plane: a point), plane normals
        g = bound_geoms[i]
        l = geom_i[g, GI_LINK]
        s_geom_f[b, g, GS_CENTRE] = links_pos[f, b, l] + s_R[b, l] @ v3(geom_f, g, GF_BCENTRE)
        if geom_i[g, GI_TYPE] == PLANE:
            q = v4(geom_f, g, GF_QUAT)  # the local z axis: the third column of the rotation of q
            s_geom_f[b, g, GS_NORMAL] = s_R[b, l] @ ti.Vector([2 * (q[1] * q[3] + q[0] * q[2]),
                                                              2 * (q[2] * q[3] - q[0] * q[1]),
                                                              1 - 2 * (q[1] * q[1] + q[2] * q[2])])
    s_near_i[b, 0] = 0
    for q in range(plane_pairs.shape[0]):
        p = plane_pairs[q]
        if p >= 0:  # (-1 pads a scene without planes)
            ga = pair_i[p, PI_GEOM_A]
            gb = pair_i[p, PI_GEOM_B]
            if s_geom_f[b, ga, GS_NORMAL].dot(s_geom_f[b, gb, GS_CENTRE] - s_geom_f[b, ga, GS_CENTRE]) <= \
                    geom_rbound[gb] and geom_mu[b, gb] >= 0:
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
            lo = s_geom_f[b, g, GS_CENTRE][axis] - geom_rbound[g]
            j = i - 1
            while j >= 0:  # (Taichi's `and` does not short-circuit: no index -1 in the condition)
                gj = s_sap[b, j]
                if s_geom_f[b, gj, GS_CENTRE][axis] - geom_rbound[gj] <= lo:
                    break
                s_sap[b, j + 1] = gj
                j -= 1
            s_sap[b, j + 1] = g
        for i in range(n):
            ga = s_sap[b, i]
            hi = s_geom_f[b, ga, GS_CENTRE][axis] + geom_rbound[ga]
            for j in range(i + 1, n):
                gb = s_sap[b, j]
                if s_geom_f[b, gb, GS_CENTRE][axis] - geom_rbound[gb] > hi:
                    break
                p = pair_lut[ga, gb]
                if p >= 0:
                    ca = s_geom_f[b, ga, GS_CENTRE]
                    cb = s_geom_f[b, gb, GS_CENTRE]
                    if (cb - ca).norm_sqr() <= (geom_rbound[ga] + geom_rbound[gb]) ** 2 and \
                            geom_mu[b, ga] >= 0 and geom_mu[b, gb] >= 0:
                        narrow_pair(b, f, p, links_pos, s_R, geom_f, geom_i, pair_i, s_con_f, s_con_i, s_near_i)


@func
def narrow_pair(b, f, p, links_pos, s_R, geom_f, geom_i, pair_i, s_con_f, s_con_i, s_near_i):
    """The narrowphase of candidate pair p, whose bounding volumes overlap: contacts of primitives into the pool; a
    pair with a mesh, an ellipsoid with anything but a plane, or two boxes is listed in s_near_i for the mesh kernel
    (it has the scratch their candidates need; compile.convex_pair counts the same pairs)."""
    ga = pair_i[p, PI_GEOM_A]
    gb = pair_i[p, PI_GEOM_B]
    ta = geom_i[ga, GI_TYPE]
    tb = geom_i[gb, GI_TYPE]
    la = geom_i[ga, GI_LINK]
    lb = geom_i[gb, GI_LINK]
    slot = pair_i[p, PI_SLOT]
    key0 = p * KEY_SPAN
    if tb == MESH or (ta == BOX and tb == BOX) or (tb == ELLIPSOID and ta != PLANE):
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
            elif tb == ELLIPSOID:  # its deepest point toward the plane
                down = -za
                plane_point(b, slot, key0, ca, za, ellipsoid_support(cb, rot_b, sb, down), 0.0, mu, la, lb, reach,
                            shift, s_con_f, s_con_i)
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


# -- the contact frames' adjoint (the differentiable substep) -------------------------------------------------------

# how a contact's frame is carried by its links (contact_frame_reverse): a face of geom a or b against a point of the
# other; two core points (the normal joins them); two edge lines (the normal is their cross product); a box's corner
# projected onto the other box's face; else witness points and normal fixed in the links' frames
FRAME_GENERIC, FRAME_FACE_A, FRAME_FACE_B, FRAME_CORES, FRAME_EDGES, FRAME_PROJECTED = range(6)
# how a core point (or a face's opposite point) moves: fixed in its link's frame; along a line fixed in its frame,
# to the closest point of the other side's (a capsule's segment, a box's edge); a capsule's segment point closest to
# a box's centre; an edge of the incident box where it crosses a side plane of the reference box; a cylinder's rim
# point, which turns with the plane's normal about the cylinder's axis; an ellipsoid's support point along the
# face's normal, which slides over its surface as either turns
POINT_FIXED, POINT_LINE, POINT_TO_CENTRE, POINT_CROSSING, POINT_RIM, POINT_SUPPORT = range(6)


@ti.func
def geom_axis(geom_f: ti.template(), g, k):
    """Geom g's local axis k in its link's frame."""
    q = ti.Vector([geom_f[g, GF_QUAT], geom_f[g, GF_QUAT + 1], geom_f[g, GF_QUAT + 2], geom_f[g, GF_QUAT + 3]])
    return quat_to_mat(q) @ ti.Vector([1.0 if k == 0 else 0.0, 1.0 if k == 1 else 0.0, 1.0 if k == 2 else 0.0])


@func
def geom_local(b, f, l, g, x, links_pos, s_R, geom_f):
    """World point x in geom g's frame (g on link l)."""
    q = ti.Vector([geom_f[g, GF_QUAT], geom_f[g, GF_QUAT + 1], geom_f[g, GF_QUAT + 2], geom_f[g, GF_QUAT + 3]])
    centre = ti.Vector([geom_f[g, GF_POS], geom_f[g, GF_POS + 1], geom_f[g, GF_POS + 2]])
    return quat_to_mat(q).transpose() @ (s_R[b, l].transpose() @ (x - links_pos[f, b, l]) - centre)


@func
def swept_point(b, f, l, g, kind, x, links_pos, s_R, geom_f):
    """How the core point x of a sphere or capsule (geom g on link l) moves: a sphere's centre and a capsule's end
    are fixed; a point inside a capsule's segment moves along it. Returns (mode, axis in the link's frame)."""
    mode = POINT_FIXED
    axis = geom_axis(geom_f, g, 2)
    if kind == CAPSULE:
        z = geom_local(b, f, l, g, x, links_pos, s_R, geom_f)[2]
        if ti.abs(z) < geom_f[g, GF_SIZE + 1] * (1.0 - 1e-9):
            mode = POINT_LINE
    return mode, axis


@func
def add_point_adjoint(b, l, f, point, g_point, links_pos, s_R, g_lpos, g_R):
    """point = x_l + R_l local, local fixed: its adjoint g_point into link l's position and rotation (l < 0: none)."""
    if l >= 0:
        g_lpos[b, l] = g_lpos[b, l] + g_point
        g_R[b, l] = g_R[b, l] + g_point.outer_product(s_R[b, l].transpose() @ (point - links_pos[f, b, l]))


@func
def add_axis_adjoint(b, l, axis_local, g_axis, g_R):
    """axis = R_l axis_local: its adjoint into link l's rotation."""
    if l >= 0:
        g_R[b, l] = g_R[b, l] + g_axis.outer_product(axis_local)


@func
def projection_reverse(b, f, l, x, line_point, axis_local, g_x, g_line, links_pos, s_R, g_lpos, g_R):
    """y = the point of the line through line_point (fixed in link l's frame) along R_l axis_local closest to x,
    at x's own projection there (the line point is that projection): returns the adjoint of x, and accumulates the
    line's into link l, for the adjoint g_line of y."""
    u = s_R[b, l] @ axis_local if l >= 0 else axis_local
    uu = u.dot(u)
    g_t = g_line.dot(u) / uu
    add_point_adjoint(b, l, f, line_point, g_line - g_t * u, links_pos, s_R, g_lpos, g_R)
    add_axis_adjoint(b, l, axis_local, g_t * (x - line_point), g_R)
    return g_x + g_t * u


@func
def lines_reverse(b, f, la, lb, pa, pb, ua_local, ub_local, g_pa, g_pb, links_pos, s_R, g_lpos, g_R):
    """The closest points pa, pb of two lines fixed in links la, lb (through pa and pb, along R ua_local and
    R ub_local, not parallel; pa - pb is perpendicular to both): their adjoints g_pa, g_pb into the links."""
    u = s_R[b, la] @ ua_local if la >= 0 else ua_local
    v = s_R[b, lb] @ ub_local if lb >= 0 else ub_local
    w = pa - pb
    a = u.dot(u)
    bb = u.dot(v)
    c = v.dot(v)
    den = ti.max(a * c - bb * bb, 1e-30)
    g_s = g_pa.dot(u)  # pa moves by s u and pb by t v, s = (bb e - c d) / den, t = (a e - bb d) / den
    g_t = g_pb.dot(v)  # with d = u . w, e = v . w (both 0 at the closest points)
    g_d = (-c * g_s - bb * g_t) / den
    g_e = (bb * g_s + a * g_t) / den
    g_w = g_d * u + g_e * v
    add_point_adjoint(b, la, f, pa, g_pa + g_w, links_pos, s_R, g_lpos, g_R)
    add_point_adjoint(b, lb, f, pb, g_pb - g_w, links_pos, s_R, g_lpos, g_R)
    add_axis_adjoint(b, la, ua_local, g_d * w, g_R)
    add_axis_adjoint(b, lb, ub_local, g_e * w, g_R)


@func
def contact_frame_reverse(b, f, links_pos, pair_i, geom_i, geom_f, s_R, s_con_f, s_con_i, g_con, g_lpos, g_R):
    """Adjoint of the contacts' geometry (point p, normal n from geom a to geom b, depth d) as functions of the poses
    of their links (CI_LINK_A / CI_LINK_B) at frame f (links_pos[f, b], s_R[b]), the narrowphase's decisions held:
    each contact is a frame carried by the links the way the narrowphase's geometry moves, with witness points
    wa = p + d n / 2 and wb = p - d n / 2 (r: the radius of a sphere or capsule, 0 for other geoms):
    - a face of F (a plane; a box's face under a vertex, a ball or an incident edge) against a point c of V (a
      vertex, a ball's centre, a capsule's segment point, an edge crossing a side plane, an ellipsoid's support
      point along -sigma n): n and a point q on the face are fixed in F's frame, d = sigma n . (q - c) + r,
      p = c + sigma (d / 2 - r) n (sigma = +1 if V is geom b, -1 if it is a);
    - two cores c_a, c_b (balls, or a ball against a box's edge or corner): n = (c_b - c_a) / L,
      d = ra + rb - L, p = c_a + (ra - d / 2) n;
    - two box edges: c_a, c_b their lines' closest points, n = +-(e_a x e_b) / |e_a x e_b|, d = n . (c_a - c_b),
      p = (c_a + c_b) / 2;
    - a reference box's corner k (fixed) and the incident face (m, q fixed): x = k + lambda n on that face,
      d = -+lambda, p = k + lambda n / 2;
    - otherwise (meshes, ellipsoids and cylinders against other than a plane) wa, n fixed in a's frame and wb in
      b's.
    A point c that slides moves to the closest point of a line fixed in its link (a capsule's segment, a box's
    edge) to what it was closest to. Each is the narrowphase's value at the forward's poses. Reads g_con[b, s, 0:7]
    (column 7, the friction coefficient, is no function of the poses) and accumulates into g_lpos[b, l] and
    g_R[b, l]."""
    for s in range(s_con_i[b, CI_META, 0]):
        p = ti.Vector([s_con_f[b, s, CF_POS], s_con_f[b, s, CF_POS + 1], s_con_f[b, s, CF_POS + 2]])
        n = ti.Vector([s_con_f[b, s, CF_NORMAL], s_con_f[b, s, CF_NORMAL + 1], s_con_f[b, s, CF_NORMAL + 2]])
        depth = s_con_f[b, s, CF_DEPTH]
        g_p = ti.Vector([g_con[b, s, GC_POS], g_con[b, s, GC_POS + 1], g_con[b, s, GC_POS + 2]])
        g_n = ti.Vector([g_con[b, s, GC_NORMAL], g_con[b, s, GC_NORMAL + 1], g_con[b, s, GC_NORMAL + 2]])
        g_d = g_con[b, s, GC_DEPTH]
        wa = p + 0.5 * depth * n
        wb = p - 0.5 * depth * n
        la = s_con_i[b, CI_LINK_A, s]
        lb = s_con_i[b, CI_LINK_B, s]
        key = s_con_i[b, CI_KEY, s]
        pair = key // KEY_SPAN
        feature = key % KEY_SPAN
        ga = pair_i[pair, PI_GEOM_A]
        gb = pair_i[pair, PI_GEOM_B]
        ta = geom_i[ga, GI_TYPE]
        tb = geom_i[gb, GI_TYPE]
        swept_a = ta == SPHERE or ta == CAPSULE
        swept_b = tb == SPHERE or tb == CAPSULE
        ra = geom_f[ga, GF_SIZE] if swept_a else 0.0
        rb = geom_f[gb, GF_SIZE] if swept_b else 0.0
        kind = FRAME_GENERIC
        mode_a = POINT_FIXED  # how c_a (or V's point) moves, and the axis of its line (link frame)
        mode_b = POINT_FIXED
        axis_a = ti.Vector([0.0, 0.0, 1.0])
        axis_b = ti.Vector([0.0, 0.0, 1.0])
        code = s_con_i[b, CI_FEATURE, s]
        if ta == PLANE:
            kind = FRAME_FACE_A
            if tb == CYLINDER:
                axis_a = geom_axis(geom_f, ga, 2)  # the plane's normal and the cylinder's axis, link frames
                axis_b = geom_axis(geom_f, gb, 2)
                za = s_R[b, la] @ axis_a if la >= 0 else axis_a
                zb = s_R[b, lb] @ axis_b
                if (za - zb * zb.dot(za)).norm() >= 1e-9:  # (an upright cylinder's rim points are fixed in it)
                    mode_b = POINT_RIM
            elif tb == ELLIPSOID:
                mode_b = POINT_SUPPORT
        elif swept_a and swept_b:
            kind = FRAME_CORES
            mode_a, axis_a = swept_point(b, f, la, ga, ta, wa - ra * n, links_pos, s_R, geom_f)
            mode_b, axis_b = swept_point(b, f, lb, gb, tb, wb + rb * n, links_pos, s_R, geom_f)
        elif swept_a and tb == BOX:
            # the box's point: inside a face (the normal is the face's), on an edge, or a corner
            local = geom_local(b, f, lb, gb, wb, links_pos, s_R, geom_f)
            at_bound = 0
            free = 0
            for k in ti.static(range(3)):
                if ti.abs(local[k]) >= geom_f[gb, GF_SIZE + k] * (1.0 - 1e-9):
                    at_bound += 1
                else:
                    free = k
            kind = FRAME_FACE_B if at_bound <= 1 else FRAME_CORES
            if at_bound == 2:
                mode_b = POINT_LINE
                axis_b = geom_axis(geom_f, gb, free)
            if ta == CAPSULE and feature == 0:  # the segment's point closest to the box's centre
                mode_a, axis_a = swept_point(b, f, la, ga, ta, wa - ra * n, links_pos, s_R, geom_f)
                if mode_a == POINT_LINE:
                    mode_a = POINT_TO_CENTRE
        elif ta == BOX and tb == BOX:
            axis = code // 256
            row = code % 32
            if axis >= 6:
                kind = FRAME_EDGES
                axis_a = geom_axis(geom_f, ga, (axis - 6) // 3)
                axis_b = geom_axis(geom_f, gb, (axis - 6) % 3)
            else:
                ref_is_a = axis < 3
                incident = (code // 32) % 8 // 2
                if row < 4 or row >= 8:
                    kind = FRAME_FACE_A if ref_is_a else FRAME_FACE_B
                    if row >= 8:  # an incident edge crossing a side plane of the reference face
                        e = (row - 8) // 4
                        plane = (row - 8) % 4
                        i = axis % 3
                        edge_axis = geom_axis(geom_f, gb if ref_is_a else ga,
                                              (incident + 1) % 3 if e % 2 == 0 else (incident + 2) % 3)
                        plane_axis = geom_axis(geom_f, ga if ref_is_a else gb,
                                               (i + 1) % 3 if plane < 2 else (i + 2) % 3)
                        if ref_is_a:
                            mode_b, axis_b, axis_a = POINT_CROSSING, edge_axis, plane_axis
                        else:
                            mode_a, axis_a, axis_b = POINT_CROSSING, edge_axis, plane_axis
                else:  # a reference corner projected onto the incident face
                    kind = FRAME_PROJECTED
                    if ref_is_a:
                        axis_b = geom_axis(geom_f, gb, incident)
                    else:
                        axis_a = geom_axis(geom_f, ga, incident)
        if kind == FRAME_FACE_A or kind == FRAME_FACE_B:
            sigma = 1.0 if kind == FRAME_FACE_A else -1.0
            lf = la if kind == FRAME_FACE_A else lb
            lv = lb if kind == FRAME_FACE_A else la
            q = wa if kind == FRAME_FACE_A else wb
            r = rb if kind == FRAME_FACE_A else ra
            c = (wb + r * n) if kind == FRAME_FACE_A else (wa - r * n)
            mode = mode_b if kind == FRAME_FACE_A else mode_a
            axis_v = axis_b if kind == FRAME_FACE_A else axis_a
            axis_f = axis_a if kind == FRAME_FACE_A else axis_b
            g_c = g_p
            g_dt = g_d + 0.5 * sigma * g_p.dot(n)
            g_nt = g_n + sigma * (0.5 * depth - r) * g_p + sigma * g_dt * (q - c)
            g_c -= sigma * g_dt * n
            g_q = sigma * g_dt * n
            if mode == POINT_TO_CENTRE:  # toward the box's centre, fixed in F's frame
                centre = links_pos[f, b, lf] + s_R[b, lf] @ ti.Vector([geom_f[gb, GF_POS], geom_f[gb, GF_POS + 1],
                                                                        geom_f[gb, GF_POS + 2]])
                add_point_adjoint(b, lf, f, centre,
                                  projection_reverse(b, f, lv, centre, c, axis_v, ti.Vector([0.0, 0.0, 0.0]), g_c,
                                                     links_pos, s_R, g_lpos, g_R), links_pos, s_R, g_lpos, g_R)
            elif mode == POINT_RIM:
                # c = the cap's centre (fixed in V) + radius * (u, w, -u or -w: feature % 4), u the unit direction
                # of -z_plane across the axis z_cyl, w = z_cyl x u
                za = s_R[b, lf] @ axis_f if lf >= 0 else axis_f
                zb = s_R[b, lv] @ axis_v
                v = -za + zb * zb.dot(za)
                u = v / v.norm()
                j = feature % 4
                g_rim = geom_f[gb, GF_SIZE] * g_c
                g_u = g_rim if j == 0 else (-g_rim if j == 2 else ti.Vector([0.0, 0.0, 0.0]))
                g_w = g_rim if j == 1 else (-g_rim if j == 3 else ti.Vector([0.0, 0.0, 0.0]))
                g_zb = u.cross(g_w)
                g_u += g_w.cross(zb)
                g_v = (g_u - u * u.dot(g_u)) / v.norm()
                g_za = -g_v + zb * zb.dot(g_v)
                g_zb += zb.dot(za) * g_v + za * zb.dot(g_v)
                add_axis_adjoint(b, lf, axis_f, g_za, g_R)
                add_axis_adjoint(b, lv, axis_v, g_zb, g_R)
                rim = u if j == 0 else (zb.cross(u) if j == 1 else (-u if j == 2 else -zb.cross(u)))
                add_point_adjoint(b, lv, f, c - geom_f[gb, GF_SIZE] * rim, g_c, links_pos, s_R, g_lpos, g_R)
            elif mode == POINT_SUPPORT:
                # c = x_l + R_l (g + R_g s(u)), s(u) = D^2 u / |D u| the support point of the ellipsoid (semi-axes
                # D) in the direction u = R_V^T m of its frame, m = -sigma n (toward F), R_V = R_l R_g (link,
                # geom). At u held it moves with the link (add_point_adjoint); u's change slides it by R_V J du,
                # J = D (I - w w^T) D / |D u| (w = D u / |D u|; J symmetric): u's adjoint J R_V^T g_c goes on to m
                # (so to n) and to R_l
                gv = gb if kind == FRAME_FACE_A else ga
                if lv >= 0:
                    r_g = quat_to_mat(v4(geom_f, gv, GF_QUAT))
                    r_v = s_R[b, lv] @ r_g
                    semi = v3(geom_f, gv, GF_SIZE)
                    m = -sigma * n
                    w = semi * (r_v.transpose() @ m)
                    length = ti.max(w.norm(), 1e-30)
                    w = w / length
                    h = semi * (r_v.transpose() @ g_c)
                    g_u = semi * (h - w * w.dot(h)) / length
                    g_nt -= sigma * (r_v @ g_u)
                    g_R[b, lv] = g_R[b, lv] + m.outer_product(r_g @ g_u)
                add_point_adjoint(b, lv, f, c, g_c, links_pos, s_R, g_lpos, g_R)
            elif mode == POINT_CROSSING:  # on V's edge line (fixed in V) where it crosses F's side plane
                u = s_R[b, lv] @ axis_v
                m = s_R[b, lf] @ axis_f
                g_t = g_c.dot(u) / m.dot(u)
                add_point_adjoint(b, lv, f, c, g_c - g_t * m, links_pos, s_R, g_lpos, g_R)
                add_point_adjoint(b, lf, f, c, g_t * m, links_pos, s_R, g_lpos, g_R)
            else:
                add_point_adjoint(b, lv, f, c, g_c, links_pos, s_R, g_lpos, g_R)
            add_point_adjoint(b, lf, f, q, g_q, links_pos, s_R, g_lpos, g_R)
            if lf >= 0:  # n = R_F n_local
                g_R[b, lf] = g_R[b, lf] + g_nt.outer_product(s_R[b, lf].transpose() @ n)
        elif kind == FRAME_CORES:
            ca = wa - ra * n
            cb = wb + rb * n
            length = (cb - ca).norm()
            g_dt = g_d - 0.5 * g_p.dot(n)
            g_nt = g_n + (ra - 0.5 * depth) * g_p
            g_delta = -g_dt * n + (g_nt - n * n.dot(g_nt)) / ti.max(length, 1e-30)
            g_ca = g_p - g_delta
            g_cb = g_delta
            if mode_a == POINT_LINE and mode_b == POINT_LINE:
                lines_reverse(b, f, la, lb, ca, cb, axis_a, axis_b, g_ca, g_cb, links_pos, s_R, g_lpos, g_R)
            elif mode_b == POINT_LINE:  # b's point: the closest of its line to c_a
                g_ca = projection_reverse(b, f, lb, ca, cb, axis_b, g_ca, g_cb, links_pos, s_R, g_lpos, g_R)
                g_cb = ti.Vector([0.0, 0.0, 0.0])
            elif mode_a == POINT_LINE:
                g_cb = projection_reverse(b, f, la, cb, ca, axis_a, g_cb, g_ca, links_pos, s_R, g_lpos, g_R)
                g_ca = ti.Vector([0.0, 0.0, 0.0])
            if mode_a == POINT_TO_CENTRE:  # (a capsule against a box's edge or corner)
                centre = links_pos[f, b, lb] + s_R[b, lb] @ ti.Vector([geom_f[gb, GF_POS], geom_f[gb, GF_POS + 1],
                                                                       geom_f[gb, GF_POS + 2]])
                add_point_adjoint(b, lb, f, centre,
                                  projection_reverse(b, f, la, centre, ca, axis_a, ti.Vector([0.0, 0.0, 0.0]), g_ca,
                                                     links_pos, s_R, g_lpos, g_R), links_pos, s_R, g_lpos, g_R)
            elif mode_a != POINT_LINE or mode_b != POINT_LINE:
                add_point_adjoint(b, la, f, ca, g_ca, links_pos, s_R, g_lpos, g_R)
            if mode_b != POINT_LINE or mode_a != POINT_LINE:
                add_point_adjoint(b, lb, f, cb, g_cb, links_pos, s_R, g_lpos, g_R)
        elif kind == FRAME_EDGES:
            ua = s_R[b, la] @ axis_a
            ub = s_R[b, lb] @ axis_b
            x = ua.cross(ub)
            g_dt = g_d
            g_nt = g_n + g_dt * (wa - wb)
            g_x = (g_nt - n * n.dot(g_nt)) / ti.max(x.norm(), 1e-30) * (1.0 if x.dot(n) >= 0 else -1.0)
            add_axis_adjoint(b, la, axis_a, ub.cross(g_x), g_R)
            add_axis_adjoint(b, lb, axis_b, g_x.cross(ua), g_R)
            lines_reverse(b, f, la, lb, wa, wb, axis_a, axis_b, 0.5 * g_p + g_dt * n, 0.5 * g_p - g_dt * n,
                          links_pos, s_R, g_lpos, g_R)
        elif kind == FRAME_PROJECTED:
            # corner k of the reference box (lr), the incident face (li: normal m, point x = k + lambda n on it)
            sign = -1.0 if code // 256 < 3 else 1.0  # d = sign lambda
            lr = la if sign < 0 else lb
            li = lb if sign < 0 else la
            m_axis = axis_b if sign < 0 else axis_a
            k = wa if sign < 0 else wb
            x = wb if sign < 0 else wa
            lam = sign * depth
            m = s_R[b, li] @ m_axis
            den = m.dot(n)
            g_k = g_p
            g_lam = 0.5 * g_p.dot(n) + sign * g_d
            g_nt = g_n + 0.5 * lam * g_p
            g_a = g_lam / den  # lambda = m . (x - k) / (m . n)
            g_b = -g_lam * lam / den
            add_axis_adjoint(b, li, m_axis, g_a * (x - k) + g_b * n, g_R)
            add_point_adjoint(b, li, f, x, g_a * m, links_pos, s_R, g_lpos, g_R)
            add_point_adjoint(b, lr, f, k, g_k - g_a * m, links_pos, s_R, g_lpos, g_R)
            g_nt += g_b * m
            if lr >= 0:  # n is the reference face's
                g_R[b, lr] = g_R[b, lr] + g_nt.outer_product(s_R[b, lr].transpose() @ n)
        else:
            g_wa = 0.5 * g_p + g_d * n
            g_wb = 0.5 * g_p - g_d * n
            g_nt = g_n + g_d * (wa - wb)
            add_point_adjoint(b, la, f, wa, g_wa, links_pos, s_R, g_lpos, g_R)
            add_point_adjoint(b, lb, f, wb, g_wb, links_pos, s_R, g_lpos, g_R)
            if la >= 0:
                g_R[b, la] = g_R[b, la] + g_nt.outer_product(s_R[b, la].transpose() @ n)
