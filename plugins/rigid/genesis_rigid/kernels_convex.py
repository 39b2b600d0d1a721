"""Convex narrowphase for pairs with a mesh or an ellipsoid, for one environment b: GJK, EPA and face clipping.

A convex shape is a core plus a radius: a hull (a mesh's convex hull or a box, vertices in hull_f), a point (a
sphere), a segment along the local z axis (a capsule; a cylinder is taken as a capsule of its radius and
half-length) or an ellipsoid (its semi-axes e, no radius). Its support point in a unit direction u is the core's
farthest point plus radius * u; an ellipsoid's is exact, R diag(e^2) u' / |diag(e) u'| with u' = R^T u
(kernels_collision.ellipsoid_support).

1. GJK (Gilbert, Johnson and Keerthi 1988) in its boolean form (the simplex cases of Muratori's "Implementing
   GJK") decides whether the origin lies in the Minkowski difference A - B, i.e. whether the shapes overlap.
2. EPA (van den Bergen 2001, "Proximity queries and penetration depth computation on 3D game objects") grows the
   enclosing tetrahedron toward the boundary of A - B: the face nearest the origin gives the penetration normal u
   (from A to B: B must move along +u to separate) and depth, and its barycentric coordinates the witness points.
3. Contact manifold (as in Box2D / Bullet's polyhedral clipping): if a face of either hull is within FACE_COS of u
   (the better aligned becomes the reference face), the other shape's incident feature (its face best aligned with
   u toward the reference, a capsule's segment, a sphere's centre or an ellipsoid's support point toward the
   reference face) is clipped against the side planes of the reference face (Sutherland-Hodgman), and every
   clipped point below the reference plane is a candidate contact with the reference normal. Otherwise
   (edge-edge, a curved surface, or nothing left after clipping) the single contact is midway between the EPA
   witness points.

Candidates (point, depth) are left in the scratch s_nar_f for the caller to reduce to the pair's contacts. Every
loop is bounded (GJK_ITERS, EPA_V, EPA_F, EPA_E, CLIP_N), and storage is checked before it is written: a shape
that would overflow a buffer ends the iteration early with the best answer so far.
"""

import taichi as ti

from .hull import MAX_HULL_VERTICES
from .kernels_collision import (CI_FEATURE, CI_META, CM_SETTLED, KEY_SPAN, box_support_radius, closest_between_segments,
                                ellipsoid_support, emit, geom_pose)
from .kernels_math import func, func_ref, tangent_basis, v3
from .layout import (GF_FRICTION, GF_HULL_BOX, GF_SIZE, GI_FACE, GI_LINK, GI_N_FACES, GI_N_VERTS, GI_TYPE, GI_VERT,
                     PI_GEOM_A, PI_GEOM_B, PI_N_SLOTS, PI_SEP, PI_SLOT)
from .model import BOX, CAPSULE, CYLINDER, ELLIPSOID, PLANE, SPHERE

# box-box: an edge-edge axis closer than this (cosine, about 2.6 degrees) to a face normal of either box is left to
# that face
EDGE_AXIS_COS = 0.999

GJK_ITERS = 32
# GJK's iterations for a pair with an ellipsoid: on a curved surface it closes in on an overlap only gradually (with
# 32, a sphere 1e-6 m into an ellipsoid went unseen in 29 of 200 random poses; with 128, in none; 1e-9 m deep, in
# 1)
GJK_ITERS_CURVED = 128
EPA_V = 32  # polytope vertices: the 4 of the GJK tetrahedron, then one per expansion
EPA_F = 128  # polytope faces, discarded ones included
EPA_E = 32  # horizon edges of one expansion
EPA_TOL = 1e-6  # m: EPA stops once the support in the nearest face's normal is this close to the face
SEPARATION_MARGIN = 1e-5  # m: a cached separating direction settles a pair only if it clears it by this much
BOUND_SLACK = 1e-4  # of the pair's scale: what the hull-box bound must clear beyond that (rounding is ~1e-7 of it)
FACE_COS = 0.99  # a hull face this well aligned with the EPA normal makes a face contact
# a pair with an ellipsoid: Newton steps on EPA's normal (refine_normal), and the angle (rad) of the finite differences
# that give their Hessian
REFINE_ITERS = 4
REFINE_STEP = 1e-3
CLIP_N = MAX_HULL_VERTICES  # points of a clipped polygon (also the candidates of a whole hull below a plane)
# scratch rows: s_nar_f [B, NAR_ROWS, NF_N]: polytope vertices (Minkowski point, witness on A) at rows [0, EPA_V),
# faces (unit normal, distance to the origin) at [EPA_V, EPA_V + EPA_F); later the two clipping buffers of CLIP_N
# rows each at [0, 2 CLIP_N), then the contact candidates (point, depth, whether taken, a score: the squared
# distance to the nearest taken one, then the angle about the normal). s_nar_i [B, NAR_ROWS, NI_N]: faces (3 vertex
# rows, alive) at [0, EPA_F), horizon edges (from, to, alive) at [EPA_F, EPA_F + EPA_E); a candidate's feature code.
NAR_ROWS = max(EPA_V + EPA_F, EPA_F + EPA_E, 2 * CLIP_N)
# s_nar_f columns: a point or a normal at [NF_XYZ, NF_XYZ + 3); a vertex's witness at [NF_WITNESS, NF_WITNESS + 3);
# a face's distance NF_DIST; a candidate's depth NF_DEPTH, NF_TAKEN and NF_SCORE
NF_XYZ, NF_DIST, NF_DEPTH, NF_WITNESS, NF_TAKEN, NF_SCORE, NF_N = 0, 3, 3, 3, 4, 5, 6
# s_nar_i columns: a face's vertex rows at [NI_V, NI_V + 3) and NI_ALIVE; an edge's NI_FROM, NI_TO and
# NI_EDGE_ALIVE; a candidate's feature code NI_CODE
NI_V, NI_ALIVE, NI_FROM, NI_TO, NI_EDGE_ALIVE, NI_CODE, NI_N = 0, 3, 0, 1, 2, 3, 4


@func_ref("c", "rot", "semi", "u")
def shape_support(c, rot, radius, half, semi, v0, nv, u, hull_f):
    """The farthest point of a shape (centre c, rotation rot) in unit direction u: a hull's vertex (nv > 0), an
    ellipsoid's surface point (semi-axes semi, semi[0] > 0; 0 for other shapes), or the end of the segment of
    half-length `half` along local z (a point if 0), plus radius u."""
    local = rot.transpose() @ u
    p = ti.Vector([0.0, 0.0, half if local[2] >= 0 else -half])
    if semi[0] > 0:
        w = semi * local
        p = semi * w / ti.max(w.norm(), 1e-30)
    if nv > 0:
        best = -1e30
        for i in range(nv):
            q = v3(hull_f, v0 + i, 0)
            if q.dot(local) > best:
                best = q.dot(local)
                p = q
    return c + rot @ p + radius * u


@func_ref("c", "rot", "semi", "u")
def support_bound(c, rot, radius, half, semi, nv, g, u, geom_f):
    """An upper bound of shape_support(...).dot(u) for unit u from the hull's box (GF_HULL_BOX, in the geom's
    frame: the hull lies inside it) instead of its vertices; exact for a shape without a hull (an ellipsoid's:
    |diag(semi) u'|)."""
    local = rot.transpose() @ u
    reach = half * ti.abs(local[2])
    if semi[0] > 0:
        reach = (semi * local).norm()
    if nv > 0:
        reach = 0.0
        for k in ti.static(range(3)):
            reach += geom_f[g, GF_HULL_BOX + k] * local[k] + geom_f[g, GF_HULL_BOX + 3 + k] * ti.abs(local[k])
    return c.dot(u) + reach + radius


@func_ref("d", "ca", "rot_a", "ea", "cb", "rot_b", "eb")
def minkowski_support(d, ca, rot_a, ra, ha, ea, va, na, cb, rot_b, rb, hb, eb, vb, nb, hull_f):
    """The support point of A - B in direction d, s_A(d) - s_B(-d), and s_A(d) (its witness on A)."""
    u = d / ti.max(d.norm(), 1e-30)
    nu = -u
    pa = shape_support(ca, rot_a, ra, ha, ea, va, na, u, hull_f)
    return pa - shape_support(cb, rot_b, rb, hb, eb, vb, nb, nu, hull_f), pa


@ti.func
def any_normal(d):
    """A unit vector perpendicular to d (any unit vector if d = 0)."""
    t = d.cross(ti.Vector([1.0, 0.0, 0.0]))
    if t.norm_sqr() <= 1e-12 * d.norm_sqr():
        t = d.cross(ti.Vector([0.0, 1.0, 0.0]))
    if t.norm_sqr() == 0.0:
        t = ti.Vector([1.0, 0.0, 0.0])
    return t / t.norm()


@func
def row3(b, i, s_nar_f):
    """The first three columns of scratch row i: a point or a normal."""
    return ti.Vector([s_nar_f[b, i, NF_XYZ], s_nar_f[b, i, NF_XYZ + 1], s_nar_f[b, i, NF_XYZ + 2]])


@func
def epa_face(b, f, i, j, k, s_nar_f, s_nar_i):
    """Face f of the polytope on vertex rows (i, j, k), counter-clockwise seen from outside."""
    p0 = row3(b, i, s_nar_f)
    n = (row3(b, j, s_nar_f) - p0).cross(row3(b, k, s_nar_f) - p0)
    dist = 1e30  # a degenerate face is never the nearest
    if n.norm() > 1e-30:
        n = n / n.norm()
        dist = n.dot(p0)
    r = EPA_V + f
    for c in ti.static(range(3)):
        s_nar_f[b, r, NF_XYZ + c] = n[c]
    s_nar_f[b, r, NF_DIST] = dist
    s_nar_i[b, f, NI_V], s_nar_i[b, f, NI_V + 1], s_nar_i[b, f, NI_V + 2], s_nar_i[b, f, NI_ALIVE] = i, j, k, 1


@func_ref("p")
def epa_visible(b, f, p, s_nar_f, s_nar_i):
    """Whether p lies in front of the plane of live face f."""
    r = EPA_V + f
    return s_nar_i[b, f, NI_ALIVE] == 1 and \
        row3(b, r, s_nar_f).dot(p - row3(b, s_nar_i[b, f, NI_V], s_nar_f)) > 0


@func_ref("ca", "rot_a", "ea", "cb", "rot_b", "eb")
def penetration(b, ca, rot_a, ra, ha, ea, va, na, cb, rot_b, rb, hb, eb, vb, nb, hull_f, s_nar_f, s_nar_i):
    """GJK (at most GJK_ITERS iterations, GJK_ITERS_CURVED with an ellipsoid), then EPA from its tetrahedron, in one
    loop that evaluates one support point per iteration.
    Returns (1 if the shapes overlap, the normal u from A to B, the depth, the witness point on A); when they do not,
    u is a unit direction d along which the support of A - B stays below the origin (a proof of separation), or 0
    if GJK ran out of iterations."""
    # the GJK simplex: rows ka (the newest point), kb, kc, kd of s_nar_f (point, witness on A); `used`: their bits
    ka, kb, kc, kd = 0, 0, 0, 0
    used = 0
    d = ca - cb
    if d.norm_sqr() < 1e-20:
        d = ti.Vector([1.0, 0.0, 0.0])
    phase = 0  # 0: GJK, 1: EPA, 2: done
    hit = 0
    apart = ti.Vector([0.0, 0.0, 0.0])  # the direction GJK proved separating, if it did
    dim = 0
    n_v, n_f, best, nearest = 4, 4, 0, 0.0
    gjk_iters = GJK_ITERS_CURVED if ea[0] > 0 or eb[0] > 0 else GJK_ITERS
    for it in range(GJK_ITERS_CURVED + EPA_V - 3):
        if phase == 2 or (phase == 0 and it >= gjk_iters):
            break
        if phase == 1:  # EPA: search along the normal of the face nearest the origin
            nearest = 1e30
            for f in range(n_f):
                if s_nar_i[b, f, NI_ALIVE] == 1 and s_nar_f[b, EPA_V + f, NF_DIST] < nearest:
                    nearest = s_nar_f[b, EPA_V + f, NF_DIST]
                    best = f
            d = row3(b, EPA_V + best, s_nar_f)
        p, w = minkowski_support(d, ca, rot_a, ra, ha, ea, va, na, cb, rot_b, rb, hb, eb, vb, nb, hull_f)
        if phase == 0:
            if dim > 0 and p.dot(d) < 0:
                phase = 2  # the support does not pass the origin: d separates the shapes
                apart = d
            else:
                ka = 0  # a free row for the new point
                while used & (1 << ka) != 0:
                    ka += 1
                for c in ti.static(range(3)):
                    s_nar_f[b, ka, NF_XYZ + c], s_nar_f[b, ka, NF_WITNESS + c] = p[c], w[c]
                ao = -p
                if dim == 0:
                    kc = ka
                    d = ao
                    dim = 1
                elif dim == 1:
                    kb = ka
                    e = row3(b, kc, s_nar_f) - p
                    d = e.cross(ao).cross(e)  # toward the origin, perpendicular to the segment
                    if d.norm_sqr() < 1e-24:
                        d = any_normal(e)
                    dim = 2
                elif dim == 2:
                    ab, ac = row3(b, kb, s_nar_f) - p, row3(b, kc, s_nar_f) - p
                    n = ab.cross(ac)
                    if ab.cross(n).dot(ao) > 0:  # nearest the edge ab
                        kc = ka
                        d = ab.cross(ao).cross(ab)
                    elif n.cross(ac).dot(ao) > 0:  # nearest the edge ac
                        kb = ka
                        d = ac.cross(ao).cross(ac)
                    elif n.dot(ao) > 0:  # above the triangle
                        kd, kc, kb = kc, kb, ka
                        d = n
                        dim = 3
                    else:  # below it: flip the winding
                        kd, kb = kb, ka
                        d = -n
                        dim = 3
                else:
                    ab, ac, ad = row3(b, kb, s_nar_f) - p, row3(b, kc, s_nar_f) - p, row3(b, kd, s_nar_f) - p
                    abc, acd, adb = ab.cross(ac), ac.cross(ad), ad.cross(ab)
                    if abc.dot(ao) > 0:
                        kd, kc, kb = kc, kb, ka
                        d = abc
                    elif acd.dot(ao) > 0:
                        kb = ka
                        d = acd
                    elif adb.dot(ao) > 0:
                        kc, kd, kb = kd, kb, ka
                        d = adb
                    else:  # the tetrahedron (rows 0..3) encloses the origin: on to EPA
                        hit = 1
                        phase = 1
                        centre = 0.25 * (row3(b, 0, s_nar_f) + row3(b, 1, s_nar_f) + row3(b, 2, s_nar_f) +
                                         row3(b, 3, s_nar_f))
                        for f in range(4):  # face f leaves out vertex f, wound with its normal away from the centre
                            i, j, k = (f + 1) % 4, (f + 2) % 4, (f + 3) % 4
                            pi = row3(b, i, s_nar_f)
                            flip = (row3(b, j, s_nar_f) - pi).cross(row3(b, k, s_nar_f) - pi).dot(pi - centre) < 0
                            epa_face(b, f, i, k if flip else j, j if flip else k, s_nar_f, s_nar_i)
                used = (1 << kb) | (1 << kc) if dim == 2 else ((1 << kb) | (1 << kc) | (1 << kd) if dim == 3
                                                               else 1 << kc)
        elif p.dot(d) - nearest < EPA_TOL or n_v >= EPA_V:
            phase = 2  # converged (or out of room): the nearest face is the answer
        else:
            # the horizon: edges of the faces p sees that are not shared by two of them
            n_e = 0
            fits = True
            for f in range(n_f):
                if epa_visible(b, f, p, s_nar_f, s_nar_i):
                    for c in range(3):
                        e0 = s_nar_i[b, f, NI_V + c]
                        e1 = s_nar_i[b, f, NI_V + (c + 1) % 3]
                        shared = False
                        for e in range(EPA_F, EPA_F + n_e):
                            if s_nar_i[b, e, NI_EDGE_ALIVE] == 1 and s_nar_i[b, e, NI_FROM] == e1 and \
                                    s_nar_i[b, e, NI_TO] == e0:
                                s_nar_i[b, e, NI_EDGE_ALIVE] = 0
                                shared = True
                        if not shared:
                            if n_e < EPA_E:
                                s_nar_i[b, EPA_F + n_e, NI_FROM], s_nar_i[b, EPA_F + n_e, NI_TO] = e0, e1
                                s_nar_i[b, EPA_F + n_e, NI_EDGE_ALIVE] = 1
                                n_e += 1
                            else:
                                fits = False
            n_new = 0
            for e in range(EPA_F, EPA_F + n_e):
                n_new += s_nar_i[b, e, NI_EDGE_ALIVE]
            if not fits or n_f + n_new > EPA_F:
                phase = 2
            else:
                for f in range(n_f):
                    if epa_visible(b, f, p, s_nar_f, s_nar_i):
                        s_nar_i[b, f, NI_ALIVE] = 0
                for c in ti.static(range(3)):
                    s_nar_f[b, n_v, NF_XYZ + c], s_nar_f[b, n_v, NF_WITNESS + c] = p[c], w[c]
                for e in range(EPA_F, EPA_F + n_e):
                    if s_nar_i[b, e, NI_EDGE_ALIVE] == 1:
                        epa_face(b, n_f, s_nar_i[b, e, NI_FROM], s_nar_i[b, e, NI_TO], n_v, s_nar_f, s_nar_i)
                        n_f += 1
                n_v += 1
    u = row3(b, EPA_V + best, s_nar_f)
    depth = s_nar_f[b, EPA_V + best, NF_DIST]
    # the barycentric coordinates of the origin's projection u depth on that face give the witness on A
    i0, i1, i2 = s_nar_i[b, best, NI_V], s_nar_i[b, best, NI_V + 1], s_nar_i[b, best, NI_V + 2]
    p0 = row3(b, i0, s_nar_f)
    e1 = row3(b, i1, s_nar_f) - p0
    e2 = row3(b, i2, s_nar_f) - p0
    q = u * depth - p0
    d00, d01, d11, d20, d21 = e1.dot(e1), e1.dot(e2), e2.dot(e2), q.dot(e1), q.dot(e2)
    denom = d00 * d11 - d01 * d01
    l1, l2 = 1.0 / 3.0, 1.0 / 3.0
    if denom > 1e-30:
        l1 = (d11 * d20 - d01 * d21) / denom
        l2 = (d00 * d21 - d01 * d20) / denom
    witness = ti.Vector([0.0, 0.0, 0.0])
    for c in ti.static(range(3)):
        witness[c] = (1.0 - l1 - l2) * s_nar_f[b, i0, NF_WITNESS + c] + l1 * s_nar_f[b, i1, NF_WITNESS + c] + \
            l2 * s_nar_f[b, i2, NF_WITNESS + c]
    if hit == 0:  # no overlap: u is the separating direction GJK proved (unit), or 0 if it ran out of iterations
        u = apart / ti.max(apart.norm(), 1e-30)
    return hit, u, depth, witness


@func_ref("u", "witness", "ca", "rot_a", "ea", "cb", "rot_b", "eb")
def refine_normal(u, depth, witness, ca, rot_a, ra, ha, ea, va, na, cb, rot_b, rb, hb, eb, vb, nb, hull_f):
    """EPA's normal u (from A to B), depth and witness on A, refined for a pair with an ellipsoid, whose curved
    surface EPA's polytope approximates by chords (with 32 vertices, its normal was off by up to 1.6 degrees on a
    flat ellipsoid's top). The penetration depth is the least of h(n) = s(n) . n over unit directions n, s the
    support point of A - B, and h's gradient on the sphere is s's part across n: Newton steps on it, the Hessian by
    finite differences of s along two tangents (REFINE_STEP; the surface's radii of curvature less h), each kept
    only if it lowers h (a step across a kink of h, a capsule's or a hull's, is halved, then given up). After a
    step: (n, h(n), the witness on A), the witness A's support point where A is a sphere or an ellipsoid (unique),
    else B's plus h n; else the inputs."""
    n = u
    p, pa = minkowski_support(n, ca, rot_a, ra, ha, ea, va, na, cb, rot_b, rb, hb, eb, vb, nb, hull_f)
    h = p.dot(n)
    moved = 0
    for _ in range(REFINE_ITERS):
        t1, t2 = tangent_basis(n)
        n1 = (n + REFINE_STEP * t1).normalized()
        n2 = (n + REFINE_STEP * t2).normalized()
        p1, _a1 = minkowski_support(n1, ca, rot_a, ra, ha, ea, va, na, cb, rot_b, rb, hb, eb, vb, nb, hull_f)
        p2, _a2 = minkowski_support(n2, ca, rot_a, ra, ha, ea, va, na, cb, rot_b, rb, hb, eb, vb, nb, hull_f)
        g1, g2 = p.dot(t1), p.dot(t2)
        h11 = (p1 - p).dot(t1) / REFINE_STEP - h
        h22 = (p2 - p).dot(t2) / REFINE_STEP - h
        h12 = 0.5 * ((p1 - p).dot(t2) + (p2 - p).dot(t1)) / REFINE_STEP
        det = h11 * h22 - h12 * h12
        if not (h11 > 0 and det > 0):
            break
        d1 = -(h22 * g1 - h12 * g2) / det
        d2 = -(h11 * g2 - h12 * g1) / det
        step = ti.sqrt(d1 * d1 + d2 * d2)
        if step > 0.5:  # (at most half a radian a step)
            d1, d2 = d1 * 0.5 / step, d2 * 0.5 / step
        taken = 0
        for _try in range(3):
            if taken == 0:
                m = (n + d1 * t1 + d2 * t2).normalized()
                q, qa = minkowski_support(m, ca, rot_a, ra, ha, ea, va, na, cb, rot_b, rb, hb, eb, vb, nb, hull_f)
                if q.dot(m) < h:
                    n, p, pa, h = m, q, qa, q.dot(m)
                    taken = 1
                    moved = 1
                else:
                    d1, d2 = 0.5 * d1, 0.5 * d2
        if taken == 0:
            break
    out_n, out_depth, out_witness = u, depth, witness
    if moved == 1:
        out_n, out_depth = n, h
        strict_a = ea[0] > 0 or (ra > 0 and ha == 0 and na == 0)  # (an ellipsoid or a sphere)
        out_witness = ti.select(strict_a, pa, pa - p + h * n)
    return out_n, out_depth, out_witness


@func_ref("rot")
def facing_face(f0, nf, rot, u, hull_f):
    """The face of a hull (face rows f0.., nf of them) whose outward normal is nearest u, and that cosine."""
    local = rot.transpose() @ u
    best = f0
    align = -2.0
    for f in range(f0, f0 + nf):
        if v3(hull_f, f, 0).dot(local) > align:
            align = v3(hull_f, f, 0).dot(local)
            best = f
    return best, align


@func
def clip_point(b, row, x, count, s_nar_f):
    """Append x to the clipping buffer starting at `row` if there is room; the new count."""
    out = count
    if count < CLIP_N:
        for c in ti.static(range(3)):
            s_nar_f[b, row + count, NF_XYZ + c] = x[c]
        out = count + 1
    return out


@func_ref("ca", "rot_a", "sa", "cb", "rot_b", "sb")
def convex_contacts(b, p, ta, tb, ga, gb, ca, rot_a, sa, cb, rot_b, sb, geom_f, geom_i, hull_f, hull_i, pair_i,
                    s_con_i, s_nar_f, s_nar_i, s_sep):
    """Candidate contacts of pair p with a hull: (count, first row in s_nar_f, normal from a to b).

    s_sep[b, pair_i[p, PI_SEP]] keeps, in A's frame, the direction that last proved the pair apart (0: none).
    One support point along it settles most pairs that stay apart from substep to substep (a folding arm's links
    near each other: GJK took most of the mesh kernel's time), and before it the bound from the two hulls' boxes
    (support_bound) settles most of those without visiting a vertex (the folding panda at 64 environments: 15.1 of
    its 24.4 settled pairs an environment); a pair neither settles by SEPARATION_MARGIN goes
    through GJK as if there were none, so the contacts found never depend on it (a checkpoint need not hold it)."""
    ra = sa[0] if ta == SPHERE or ta == CAPSULE or ta == CYLINDER else 0.0
    rb = sb[0] if tb == SPHERE or tb == CAPSULE or tb == CYLINDER else 0.0
    ha = sa[1] if ta == CAPSULE or ta == CYLINDER else 0.0
    hb = sb[1] if tb == CAPSULE or tb == CYLINDER else 0.0
    ea = ti.select(ta == ELLIPSOID, sa, ti.Vector([0.0, 0.0, 0.0]))  # an ellipsoid's semi-axes (else 0)
    eb = ti.select(tb == ELLIPSOID, sb, ti.Vector([0.0, 0.0, 0.0]))
    va, na = geom_i[ga, GI_VERT], geom_i[ga, GI_N_VERTS]
    vb, nb = geom_i[gb, GI_VERT], geom_i[gb, GI_N_VERTS]
    n_cand, base, normal = 0, 0, ti.Vector([0.0, 0.0, 1.0])
    slot = pair_i[p, PI_SEP]
    cached = ti.Vector([s_sep[b, slot, 0], s_sep[b, slot, 1], s_sep[b, slot, 2]])
    apart = False
    if cached.norm_sqr() > 0.25:
        d = rot_a @ cached
        # first the hulls' boxes: an upper bound of the support of A - B along d, so where it clears the margin
        # (by BOUND_SLACK of the scale, more than rounding moves either) the support query would too
        u = d / ti.max(d.norm(), 1e-30)
        nu = -u
        bound = support_bound(ca, rot_a, ra, ha, ea, na, ga, u, geom_f) + support_bound(cb, rot_b, rb, hb, eb, nb, gb,
                                                                                         nu, geom_f)
        scale = ca.norm() + cb.norm() + ra + rb + ha + hb + ea.sum() + eb.sum()
        for k in ti.static(range(3)):
            scale += geom_f[ga, GF_HULL_BOX + 3 + k] + geom_f[gb, GF_HULL_BOX + 3 + k]
        apart = bound < -SEPARATION_MARGIN - BOUND_SLACK * scale
        if not apart:
            sp, _ = minkowski_support(d, ca, rot_a, ra, ha, ea, va, na, cb, rot_b, rb, hb, eb, vb, nb, hull_f)
            apart = sp.dot(d) < -SEPARATION_MARGIN * d.norm()
        if apart:
            s_con_i[b, CI_META, CM_SETTLED] = s_con_i[b, CI_META, CM_SETTLED] + 1
    hit, u, depth, witness = 0, ti.Vector([0.0, 0.0, 0.0]), 0.0, ti.Vector([0.0, 0.0, 0.0])
    if not apart:
        hit, u, depth, witness = penetration(b, ca, rot_a, ra, ha, ea, va, na, cb, rot_b, rb, hb, eb, vb, nb, hull_f,
                                             s_nar_f, s_nar_i)
        local = rot_a.transpose() @ u
        for c in ti.static(range(3)):
            s_sep[b, slot, c] = local[c] if hit == 0 else 0.0
    if hit == 1:
        if depth > 0 and depth < 1e29:  # (1e30: only degenerate faces were left)
            if ea[0] > 0 or eb[0] > 0:
                u, depth, witness = refine_normal(u, depth, witness, ca, rot_a, ra, ha, ea, va, na, cb, rot_b, rb, hb,
                                                  eb, vb, nb, hull_f)
            normal = u
            fa, align_a = facing_face(geom_i[ga, GI_FACE], geom_i[ga, GI_N_FACES], rot_a, u, hull_f)
            fb, align_b = facing_face(geom_i[gb, GI_FACE], geom_i[gb, GI_N_FACES], rot_b, -u, hull_f)
            if align_a >= FACE_COS or align_b >= FACE_COS:
                # reference face on x (b unless a's face is clearly better aligned), incident feature on y
                cx, rot_x, fx, cy, rot_y, fy, ry, hy, ey, ny = cb, rot_b, fb, ca, rot_a, fa, ra, ha, ea, na
                sign = -1.0
                if align_a > align_b + 1e-3:
                    cx, rot_x, fx, cy, rot_y, fy, ry, hy, ey, ny = ca, rot_a, fa, cb, rot_b, fb, rb, hb, eb, nb
                    sign = 1.0
                n_ref = rot_x @ v3(hull_f, fx, 0)
                m = 0
                if ny > 0:
                    for k in range(hull_i[fy, 1]):
                        m = clip_point(b, 0, cy + rot_y @ v3(hull_f, hull_i[hull_i[fy, 0] + k, 0], 0), m, s_nar_f)
                elif ey[0] > 0:  # an ellipsoid: its deepest point toward the reference face
                    toward = -n_ref
                    m = clip_point(b, 0, ellipsoid_support(cy, rot_y, ey, toward), m, s_nar_f)
                else:
                    axis = ti.Vector([rot_y[0, 2], rot_y[1, 2], rot_y[2, 2]])
                    m = clip_point(b, 0, cy + hy * axis, m, s_nar_f)
                    if hy > 0:
                        m = clip_point(b, 0, cy - hy * axis, m, s_nar_f)
                loop0, n_loop = hull_i[fx, 0], hull_i[fx, 1]
                src = 0
                for k in range(n_loop):  # Sutherland-Hodgman against the side plane of each reference edge
                    q0 = cx + rot_x @ v3(hull_f, hull_i[loop0 + k, 0], 0)
                    q1 = cx + rot_x @ v3(hull_f, hull_i[loop0 + (k + 1) % n_loop, 0], 0)
                    side = (q1 - q0).cross(n_ref)
                    dst = CLIP_N - src
                    m_out = 0
                    for j in range(m):
                        cur = row3(b, src + j, s_nar_f)
                        jp = src + (j + m - 1) % m
                        prev = row3(b, jp, s_nar_f)
                        dc, dp = side.dot(cur - q0), side.dot(prev - q0)
                        if (dc <= 0) != (dp <= 0):
                            m_out = clip_point(b, dst, prev + dp / (dp - dc) * (cur - prev), m_out, s_nar_f)
                        if dc <= 0:
                            m_out = clip_point(b, dst, cur, m_out, s_nar_f)
                    src = dst
                    m = m_out
                # depth below the reference plane of the incident surface (core point - radius along n_ref)
                plane = n_ref.dot(cx) + hull_f[fx, 3]
                for j in range(m):
                    q = row3(b, src + j, s_nar_f)
                    dj = plane - n_ref.dot(q) + ry
                    x = q - n_ref * (ry - 0.5 * dj)
                    for c in ti.static(range(3)):
                        s_nar_f[b, src + j, NF_XYZ + c] = x[c]
                    s_nar_f[b, src + j, NF_DEPTH] = dj
                    if dj > 0:
                        n_cand = m
                base = src
                normal = sign * n_ref
            if n_cand == 0:  # no face contact: the EPA witnesses, midway
                x = witness - 0.5 * depth * u
                for c in ti.static(range(3)):
                    s_nar_f[b, 0, NF_XYZ + c] = x[c]
                s_nar_f[b, 0, NF_DEPTH] = depth
                n_cand, base, normal = 1, 0, u
    return n_cand, base, normal


@func_ref("p", "n", "c", "rot")
def plane_hull(b, p, n, c, rot, v0, nv, hull_f, s_nar_f):
    """Candidates of a hull (centre c, rotation rot, vertex rows v0.., nv of them) against the plane through p
    with normal n: its vertices, at rows 0.. of s_nar_f, each moved midway to the plane, with their depth below
    it (<= 0: no contact). Returns their count."""
    for i in range(nv):
        x = c + rot @ v3(hull_f, v0 + i, 0)
        depth = -n.dot(x - p)
        x += 0.5 * depth * n
        for k in ti.static(range(3)):
            s_nar_f[b, i, NF_XYZ + k] = x[k]
        s_nar_f[b, i, NF_DEPTH] = depth
    return nv


@ti.func
def unit(k):
    return ti.Vector([1.0 if k == 0 else 0.0, 1.0 if k == 1 else 0.0, 1.0 if k == 2 else 0.0])


@ti.func
def quad_sign(c):
    """The signs (u, v) of corner c = 0..3 of a rectangle, in cyclic order: (+,+), (-,+), (-,-), (+,-)."""
    return ti.Vector([1.0 if c == 0 or c == 3 else -1.0, 1.0 if c < 2 else -1.0])


@func
def box_candidate(b, row, code, p, depth, ok, s_nar_f, s_nar_i):
    """Row `row` of the box-box candidates: the point p (on the incident surface) moved midway to the reference
    surface along n_ref (p already includes it), its depth (<= 0 when not a contact) and its feature code."""
    for c in ti.static(range(3)):
        s_nar_f[b, row, NF_XYZ + c] = p[c]
    s_nar_f[b, row, NF_DEPTH] = depth if ok else -1.0
    s_nar_i[b, row, NI_CODE] = code


@func_ref("ca", "rot_a", "ha", "cb", "rot_b", "hb")
def box_box_candidates(b, ca, rot_a, ha, cb, rot_b, hb, s_nar_f, s_nar_i):
    """Candidate contacts of two boxes (a, b: centres, rotations, half-sizes) at rows 0.. of s_nar_f, with their
    feature codes in s_nar_i[b, row, NI_CODE]; returns (count, normal from a to b).

    The separating axis of least overlap among the 15 that can separate boxes (the 6 face normals and the 9
    cross products of edge directions; Gottschalk 1996) gives the normal and the exact depth; an edge axis must
    beat the best face axis by 5% (parallel faces make edge axes of the same overlap) and be more than 2.6 degrees
    from every face normal (EDGE_AXIS_COS).
    - Face axis (of the reference box): the incident face is the other box's face most opposed to it. The
      overlap of the two rectangles (as Sutherland-Hodgman clipping would find it) has its corners among 24
      candidates, each with a depth below the reference face: the incident face's 4 vertices inside the
      reference face (rows 0-3), the reference face's 4 corners inside the incident face, projected onto it along
      the normal (rows 4-7), and the crossings of the incident face's 4 edges with the reference face's 4 side
      planes (rows 8 + 4 edge + plane).
    - Edge axis: one contact, midway between the closest points of the two edges that meet (row 0).
    code = (axis * 8 + incident face) * 32 + row, incident face = 2 axis + (1 if its outward normal is +axis):
    what the differentiable step needs to recompute each point from the poses."""
    d = cb - ca
    best = 1e30
    best_face = 1e30
    best_axis = -1
    apart = 0
    n = ti.Vector([0.0, 0.0, 1.0])
    for k in range(15):
        axis = ti.Vector([0.0, 0.0, 0.0])
        if k < 3:
            axis = rot_a @ unit(k)
        elif k < 6:
            axis = rot_b @ unit(k - 3)
        else:
            axis = (rot_a @ unit((k - 6) // 3)).cross(rot_b @ unit((k - 6) % 3))
        length = axis.norm()
        if length > 1e-6:
            axis = axis / length
            overlap = box_support_radius(rot_a, ha, axis) + box_support_radius(rot_b, hb, axis) - ti.abs(d.dot(axis))
            if overlap < 0:  # apart: no candidates, and the normal is not read
                apart = 1
                break
            # an edge axis within EDGE_AXIS_COS of a face normal is that face's contact (crossed beams: the cross
            # product of their long edges is the face normal, and a tilt of a fraction of a degree would otherwise
            # pick it, and a single point, over the face's four-point manifold)
            near_face = 0
            if k >= 6:
                in_a = ti.abs(rot_a.transpose() @ axis)
                in_b = ti.abs(rot_b.transpose() @ axis)
                near_face = 1 if ti.max(in_a.max(), in_b.max()) > EDGE_AXIS_COS else 0
            if overlap < best and (k < 6 or (overlap < 0.95 * best_face and near_face == 0)):
                best = overlap
                best_axis = k
                n = axis if d.dot(axis) >= 0 else -axis
            if k < 6:
                best_face = best
    n_cand = 0
    if apart == 0 and best_axis >= 6:
        i, j = (best_axis - 6) // 3, (best_axis - 6) % 3
        ea, eb = rot_a @ unit(i), rot_b @ unit(j)
        pa, pb = ca, cb
        for m in range(3):  # the edge of a farthest along n, the edge of b farthest along -n
            am, bm = rot_a @ unit(m), rot_b @ unit(m)
            if m != i:
                pa += am * (ha.dot(unit(m)) * (1.0 if am.dot(n) >= 0 else -1.0))
            if m != j:
                pb -= bm * (hb.dot(unit(m)) * (1.0 if bm.dot(n) >= 0 else -1.0))
        la, lb = ha.dot(unit(i)), hb.dot(unit(j))
        qa, qb = closest_between_segments(pa - ea * la, pa + ea * la, pb - eb * lb, pb + eb * lb)
        box_candidate(b, 0, best_axis * 8 * 32, 0.5 * (qa + qb), best, 1, s_nar_f, s_nar_i)
        n_cand = 1
    elif apart == 0 and best_axis >= 0:
        cr, rr, hr, ci, ri, hi, nf = ca, rot_a, ha, cb, rot_b, hb, n
        if best_axis >= 3:
            cr, rr, hr, ci, ri, hi, nf = cb, rot_b, hb, ca, rot_a, ha, -n
        i = best_axis % 3
        u, v = rr @ unit((i + 1) % 3), rr @ unit((i + 2) % 3)
        hu, hv = hr.dot(unit((i + 1) % 3)), hr.dot(unit((i + 2) % 3))
        fc = cr + nf * hr.dot(unit(i))  # the reference face's centre
        ii = 0
        most = -1.0
        for m in range(3):
            c = ti.abs((ri @ unit(m)).dot(nf))
            if c > most:
                most = c
                ii = m
        si = -1.0 if (ri @ unit(ii)).dot(nf) > 0 else 1.0
        mi = si * (ri @ unit(ii))  # the incident face's outward normal, against nf
        iu, iv = ri @ unit((ii + 1) % 3), ri @ unit((ii + 2) % 3)
        hiu, hiv = hi.dot(unit((ii + 1) % 3)), hi.dot(unit((ii + 2) % 3))
        fi = ci + mi * hi.dot(unit(ii))  # the incident face's centre
        code0 = (best_axis * 8 + 2 * ii + (1 if si > 0 else 0)) * 32
        tol = 1e-6 * (hu + hv + hiu + hiv)
        for c in range(4):  # incident vertices inside the reference face
            sg = quad_sign(c)
            p = fi + iu * (sg[0] * hiu) + iv * (sg[1] * hiv)
            r = p - fc
            depth = -r.dot(nf)
            ok = ti.abs(r.dot(u)) <= hu + tol and ti.abs(r.dot(v)) <= hv + tol
            box_candidate(b, c, code0 + c, p + 0.5 * depth * nf, depth, ok, s_nar_f, s_nar_i)
        for c in range(4):  # reference corners inside the incident face (along nf onto its plane)
            sg = quad_sign(c)
            q = fc + u * (sg[0] * hu) + v * (sg[1] * hv)
            t = (fi - q).dot(mi) / nf.dot(mi)
            p = q + t * nf
            r = p - fi
            ok = ti.abs(r.dot(iu)) <= hiu + tol and ti.abs(r.dot(iv)) <= hiv + tol
            box_candidate(b, 4 + c, code0 + 4 + c, p - 0.5 * t * nf, -t, ok, s_nar_f, s_nar_i)
        for e in range(4):  # incident edges across the reference face's side planes
            s0, s1 = quad_sign(e), quad_sign((e + 1) % 4)
            p0 = fi + iu * (s0[0] * hiu) + iv * (s0[1] * hiv)
            p1 = fi + iu * (s1[0] * hiu) + iv * (s1[1] * hiv)
            for s in range(4):
                w, other, half, other_half = u, v, hu, hv
                if s >= 2:
                    w, other, half, other_half = v, u, hv, hu
                offset = half if s % 2 == 0 else -half
                den = (p1 - p0).dot(w)
                p = p0
                ok = 0
                if ti.abs(den) > 1e-12:
                    t = (offset - (p0 - fc).dot(w)) / den
                    if t > 0 and t < 1:
                        p = p0 + t * (p1 - p0)
                        if ti.abs((p - fc).dot(other)) <= other_half + tol:
                            ok = 1
                depth = -(p - fc).dot(nf)
                box_candidate(b, 8 + 4 * e + s, code0 + 8 + 4 * e + s, p + 0.5 * depth * nf, depth, ok, s_nar_f,
                              s_nar_i)
        n_cand = 24
    return n_cand, n


@func
def emit_manifold(b, slot, key0, n_slots, base, n, normal, mu, la, lb, coded, s_nar_f, s_nar_i, s_con_f, s_con_i):
    """Up to n_slots contacts from n candidates (s_nar_f rows base.., point and depth; depth <= 0: none) into the
    pool: the deepest, then each time the candidate farthest from those taken (a spread-out subset that keeps a
    resting face's corners), written in order of angle about their centroid in the contact plane, the k-th at
    candidate slot `slot + k`. coded: the candidates' feature codes are in s_nar_i[b, row, NI_CODE] (box-box) and key
    each contact (key0 + code), so a resting contact keeps its warm start whatever the order; else the k-th
    contact's key is key0 + k and its code -1."""
    first = -1
    deepest = 0.0
    for i in range(base, base + n):
        s_nar_f[b, i, NF_TAKEN] = 0.0  # taken
        s_nar_f[b, i, NF_SCORE] = 1e30  # squared distance to the nearest taken candidate
        if s_nar_f[b, i, NF_DEPTH] > deepest:
            deepest = s_nar_f[b, i, NF_DEPTH]
            first = i
    if first >= 0:
        taken = 1
        last = first
        s_nar_f[b, first, NF_TAKEN] = 1.0
        for _ in range(n_slots - 1):
            pick = -1
            farthest = 1e-12  # m^2: coincident candidates are one contact
            for i in range(base, base + n):
                if s_nar_f[b, i, NF_DEPTH] > 0 and s_nar_f[b, i, NF_TAKEN] == 0.0:
                    d2 = 0.0
                    for k in ti.static(range(3)):
                        d2 += (s_nar_f[b, i, NF_XYZ + k] - s_nar_f[b, last, NF_XYZ + k]) ** 2
                    s_nar_f[b, i, NF_SCORE] = ti.min(s_nar_f[b, i, NF_SCORE], d2)
                    if s_nar_f[b, i, NF_SCORE] > farthest:
                        farthest = s_nar_f[b, i, NF_SCORE]
                        pick = i
            if pick < 0:
                break
            s_nar_f[b, pick, NF_TAKEN] = 1.0
            taken += 1
            last = pick
        centre = ti.Vector([0.0, 0.0, 0.0])
        for i in range(base, base + n):
            if s_nar_f[b, i, NF_TAKEN] == 1.0:
                centre += row3(b, i, s_nar_f) / taken
        t1, t2 = tangent_basis(normal)
        for i in range(base, base + n):
            if s_nar_f[b, i, NF_TAKEN] == 1.0:
                r = row3(b, i, s_nar_f) - centre
                s_nar_f[b, i, NF_SCORE] = ti.atan2(r.dot(t2), r.dot(t1))
        for k in range(taken):
            pick = base
            lowest = 1e30
            for i in range(base, base + n):
                if s_nar_f[b, i, NF_TAKEN] == 1.0 and s_nar_f[b, i, NF_SCORE] < lowest:
                    lowest = s_nar_f[b, i, NF_SCORE]
                    pick = i
            s_nar_f[b, pick, NF_TAKEN] = 0.0
            code = s_nar_i[b, pick, NI_CODE] if coded else -1
            i = emit(b, slot + k, key0 + (code if coded else k), row3(b, pick, s_nar_f), normal,
                     s_nar_f[b, pick, NF_DEPTH], mu, la, lb, s_con_f, s_con_i)
            if i >= 0:
                s_con_i[b, CI_FEATURE, i] = code


@func
def detect_mesh_contacts(b, f, links_pos, s_R, geom_f, geom_i, hull_f, hull_i, pair_i, s_con_f, s_con_i, s_near_i,
                         s_nar_f, s_nar_i, s_sep):
    """The contacts of the near pairs with a mesh (always geom b), with an ellipsoid (geom b, or geom a against a
    mesh; never a plane) or of two boxes that kernels_collision.detect_contacts listed in s_near_i: two boxes by
    box_box_candidates, a plane against the hull's vertices, anything else by convex_contacts; then
    emit_manifold."""
    for k in range(s_near_i[b, 0]):
        p = s_near_i[b, 1 + k]
        ga = pair_i[p, PI_GEOM_A]
        gb = pair_i[p, PI_GEOM_B]
        ta = geom_i[ga, GI_TYPE]
        la = geom_i[ga, GI_LINK]
        lb = geom_i[gb, GI_LINK]
        ca, rot_a = geom_pose(b, f, ga, la, links_pos, s_R, geom_f)
        cb, rot_b = geom_pose(b, f, gb, lb, links_pos, s_R, geom_f)
        n_cand, base, normal = 0, 0, ti.Vector([rot_a[0, 2], rot_a[1, 2], rot_a[2, 2]])
        tb = geom_i[gb, GI_TYPE]
        coded = ta == BOX and tb == BOX
        if coded:
            ha = v3(geom_f, ga, GF_SIZE)
            hb = v3(geom_f, gb, GF_SIZE)
            n_cand, normal = box_box_candidates(b, ca, rot_a, ha, cb, rot_b, hb, s_nar_f, s_nar_i)
        elif ta == PLANE:
            n_cand = plane_hull(b, ca, normal, cb, rot_b, geom_i[gb, GI_VERT], geom_i[gb, GI_N_VERTS], hull_f, s_nar_f)
        else:
            sa = v3(geom_f, ga, GF_SIZE)
            sb = v3(geom_f, gb, GF_SIZE)
            n_cand, base, normal = convex_contacts(b, p, ta, tb, ga, gb, ca, rot_a, sa, cb, rot_b, sb, geom_f, geom_i,
                                                   hull_f, hull_i, pair_i, s_con_i, s_nar_f, s_nar_i, s_sep)
        if n_cand > 0:
            emit_manifold(b, pair_i[p, PI_SLOT], p * KEY_SPAN, pair_i[p, PI_N_SLOTS], base, n_cand, normal,
                          ti.max(geom_f[ga, GF_FRICTION], geom_f[gb, GF_FRICTION]), la, lb, coded, s_nar_f, s_nar_i,
                          s_con_f, s_con_i)
