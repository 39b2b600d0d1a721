"""Particles (or grid nodes) against the geoms of a collider (`genesis_core.coupler.ColliderView`): signed distances
to every geom kind, a contact response that conserves momentum with bodies of finite mass, and the impulses
handed back to the collider. Written once for every particle solver; MPM calls it on its grid nodes, a particle
solver on its particles (through `ParticleColliderCoupling`).

Signed distance (negative inside) and outward unit normal, in world axes, of a point x to a geom:
plane (local z = 0), height field (genesis_core.terrain: along the normal of the triangle under the point), sphere,
capsule and cylinder (along local Z), box, ellipsoid (semi-axes r along local X, Y,
Z: with k0 = |p / r| and k1 = |p / r^2| in its frame, d = k0 (k0 - 1) / k1, the level k0 - 1 over the length of
its gradient: zero on the surface, exact to first order across it, and the normal p / r^2 normalised, the surface's
own normal on it), and convex mesh (the largest of its hull planes' distances: exact inside and on the faces;
outside it is a lower bound, exact in front of a face and up to ~30% short near an edge or a vertex, so a point
tested against a positive radius touches a little early there). A decomposed mesh is several convex geoms.

Response: a point of mass m whose velocity relative to the geom's surface points into it (v_n < 0) gets the
normal impulse that leaves it at -restitution v_n relative to the surface, and a tangential one of at most
friction times that (Coulomb). The body is not infinitely heavy: with w = 1/M + (r x n) . I^-1 (r x n) its
inverse effective mass at the point (`inverse_effective_mass`), the response is scaled by the body's share:
1 / (1 + m w) for a point alone (exact for one point: the two-body exchange), or 1 / (1 + sum_k m_k w_k) over
all the points touching the body in the substep (exact for points that move together against a translating
body; a first pass sums m_k w_k per body). MPM uses the first on its grid nodes, the particle coupling the
second.
"""


import taichi as ti

from ..geoms import BOX, CAPSULE, CYLINDER, ELLIPSOID, HFIELD, MESH, PLANE, SPHERE
from ..ti_math import quat_to_mat

V3 = ti.types.vector(3, float)


@ti.func
def mat_vec(A, x):
    """A @ x, written out (Taichi's matrix product stores into a local vector element by element, which its
    autodiff warns about)."""
    return ti.Vector([A[0, 0] * x[0] + A[0, 1] * x[1] + A[0, 2] * x[2],
                      A[1, 0] * x[0] + A[1, 1] * x[1] + A[1, 2] * x[2],
                      A[2, 0] * x[0] + A[2, 1] * x[1] + A[2, 2] * x[2]])


@ti.func
def mat_t_vec(A, x):
    """A^T @ x, written out."""
    return ti.Vector([A[0, 0] * x[0] + A[1, 0] * x[1] + A[2, 0] * x[2],
                      A[0, 1] * x[0] + A[1, 1] * x[1] + A[2, 1] * x[2],
                      A[0, 2] * x[0] + A[1, 2] * x[1] + A[2, 2] * x[2]])


@ti.func
def signed_distance(gtype, size, centre, rot, hull0, n_hull, hull_planes: ti.template(), x, MESHES: ti.template()):
    """(d, n): the signed distance from x to the geom and the outward unit normal there (world axes). hull_planes
    [P, 4] holds (n, offset) rows in the geom's frame (n . p <= offset inside); a mesh uses rows hull0 ..
    hull0 + n_hull - 1. With MESHES False, meshes are far away (the differentiable kernels: the loop over the
    planes carries its maximum, which Taichi's autodiff does not follow). Square roots only of positive numbers,
    no dynamic index in the autodiff path."""
    p = mat_t_vec(rot, x - centre)
    d = 1e9
    n_local = ti.Vector([0.0, 0.0, 1.0])
    if gtype == PLANE:
        d = p[2]
    elif gtype == SPHERE or gtype == CAPSULE:
        half = 0.0 if gtype == SPHERE else size[1]  # a sphere: a capsule of zero half-length
        axial = ti.min(ti.max(p[2], -half), half)
        q = p - ti.Vector([0.0, 0.0, axial])
        r2 = q.norm_sqr()
        d = -size[0]
        if r2 > 1e-24:
            r = ti.sqrt(r2)
            d = r - size[0]
            n_local = q / r
    elif gtype == CYLINDER:
        r2 = p[0] * p[0] + p[1] * p[1]
        radial = ti.Vector([1.0, 0.0, 0.0])
        r = 0.0
        if r2 > 1e-24:
            r = ti.sqrt(r2)
            radial = ti.Vector([p[0] / r, p[1] / r, 0.0])
        cap = ti.Vector([0.0, 0.0, 1.0 if p[2] >= 0 else -1.0])
        qr = r - size[0]
        qz = ti.abs(p[2]) - size[1]
        if qr > 0 and qz > 0:  # beyond the rim
            o = ti.sqrt(qr * qr + qz * qz)
            d = o
            n_local = (qr * radial + qz * cap) / o
        elif qr > qz:
            d = qr
            n_local = radial
        else:
            d = qz
            n_local = cap
    elif gtype == BOX:
        h = ti.Vector([size[0], size[1], size[2]])
        q = ti.abs(p) - h
        outside = ti.max(q, 0.0)
        o2 = outside.norm_sqr()
        if o2 > 0:
            o = ti.sqrt(o2)
            d = o
            n_local = ti.math.sign(p) * outside / o
        else:
            axis = 0
            for i in ti.static(range(1, 3)):
                if q[i] > q[axis]:
                    axis = i
            pick = ti.Vector([ti.cast(axis == 0, float), ti.cast(axis == 1, float), ti.cast(axis == 2, float)])
            d = (q * pick).sum()
            n_local = pick * ti.select(p >= 0, 1.0, -1.0)
    elif gtype == ELLIPSOID:
        r = ti.Vector([size[0], size[1], size[2]])
        q1 = p / r
        q2 = q1 / r
        k1_2 = q2.norm_sqr()
        d = -ti.min(r[0], ti.min(r[1], r[2]))  # (the centre)
        if k1_2 > 1e-24:
            k0 = ti.sqrt(q1.norm_sqr())
            k1 = ti.sqrt(k1_2)
            d = k0 * (k0 - 1.0) / k1
            n_local = q2 / k1
    elif ti.static(MESHES):
        if gtype == MESH and n_hull > 0:
            best = -1e30
            for k in range(hull0, hull0 + n_hull):
                s = hull_planes[k, 0] * p[0] + hull_planes[k, 1] * p[1] + hull_planes[k, 2] * p[2] - hull_planes[k, 3]
                if s > best:
                    best = s
                    n_local = ti.Vector([hull_planes[k, 0], hull_planes[k, 1], hull_planes[k, 2]])
            d = best
        elif gtype == HFIELD and n_hull > 0:
            d, n_local = height_field_distance(size, hull0, n_hull, hull_planes, p)
    return d, mat_vec(rot, n_local)


@ti.func
def height_field_distance(size, hull0, n_hull, hull_planes: ti.template(), p):
    """(d, n) of local point p to a height field (genesis_core.terrain: size (hx, hy, ny), its heights in rows
    hull0 .. hull0 + n_hull - 1, column 0): the distance to the plane of the triangle under p, along its upward
    normal (exact above and below the triangle's interior); far (1e9) off the grid."""
    d = 1e9
    n = ti.Vector([0.0, 0.0, 1.0])
    ny = ti.max(ti.cast(size[2] + 0.5, ti.i32), 2)
    nx = n_hull // ny
    u = p[0] / size[0]
    w = p[1] / size[1]
    if nx >= 2 and u >= 0 and w >= 0 and u <= nx - 1 and w <= ny - 1:
        i = ti.min(ti.cast(ti.floor(u), ti.i32), nx - 2)
        j = ti.min(ti.cast(ti.floor(w), ti.i32), ny - 2)
        r = hull0 + i * ny + j
        ha, hb, hc, hd = hull_planes[r, 0], hull_planes[r + ny, 0], hull_planes[r + 1, 0], hull_planes[r + ny + 1, 0]
        fx = u - i
        fy = w - j
        sx = (hb - ha) / size[0]  # the triangle's slopes along x and y, and its height at p
        sy = (hd - hb) / size[1]
        h = ha + fx * (hb - ha) + fy * (hd - hb)
        if fx < fy:
            sx = (hd - hc) / size[0]
            sy = (hc - ha) / size[1]
            h = ha + fy * (hc - ha) + fx * (hd - hc)
        k = 1.0 / ti.sqrt(1.0 + sx * sx + sy * sy)
        n = ti.Vector([-sx * k, -sy * k, k])
        d = (p[2] - h) * k
    return d, n


@ti.func
def body_surface(b, body, x, body_com: ti.template(), body_lin_vel: ti.template(), body_ang_vel: ti.template()):
    """(com, surface velocity at x) of a body (zeros for a static geom, body < 0)."""
    com, v_body = ti.Vector([0.0, 0.0, 0.0]), ti.Vector([0.0, 0.0, 0.0])
    if body >= 0:
        com = body_com[b, body]
        v_body = body_lin_vel[b, body] + body_ang_vel[b, body].cross(x - com)
    return com, v_body


@ti.func
def body_of(geom_body: ti.template(), g, n_bodies):
    """The body carrying geom g, or -1 (static, or an index outside the body arrays)."""
    body = geom_body[g]
    if body >= n_bodies:
        body = -1
    return body


@ti.func
def distance_to(g, b, x, geom_type: ti.template(), geom_size: ti.template(), geom_hull: ti.template(),
                hull_planes: ti.template(), geom_pos: ti.template(), geom_quat: ti.template()):
    """(d, n) of point x to geom g of environment b, with the mesh's hull rows clamped to hull_planes."""
    n_rows = hull_planes.shape[0]
    hull0 = ti.min(ti.max(geom_hull[g, 0], 0), n_rows)
    n_hull = ti.min(ti.max(geom_hull[g, 1], 0), n_rows - hull0)
    return signed_distance(geom_type[g], geom_size[g], geom_pos[b, g], quat_to_mat(geom_quat[b, g]), hull0, n_hull,
                           hull_planes, x, True)


@ti.func
def inverse_effective_mass(x, n, com, inv_mass, inv_inertia):
    """1/M + (r x n) . I^-1 (r x n), r = x - com: how fast the body's surface at x gives way along n per unit
    impulse (0 for an immovable body)."""
    rn = (x - com).cross(n)
    return inv_mass + rn.dot(mat_vec(inv_inertia, rn))


@ti.func
def approaching(v, v_body, n):
    """The normal relative velocity, when the point moves into the geom (< 0), else 0."""
    vn = (v - v_body).dot(n)
    return ti.min(vn, 0.0)


@ti.func
def respond(v, n, v_body, friction, restitution, scale):
    """The point's velocity after the contact: its normal velocity relative to the surface, vn < 0, goes to
    -restitution vn (scaled by `scale`, the body's share, 1 for an immovable one), and the tangential relative
    velocity drops by up to friction times the normal change (never reversing). Square roots only of positive
    numbers."""
    out = v
    rel = v - v_body
    vn = rel.dot(n)
    if vn < 0:
        dvn = -(1.0 + restitution) * vn * scale
        tangential = rel - vn * n
        t2 = tangential.norm_sqr()
        dt = ti.Vector([0.0, 0.0, 0.0])
        if t2 > 1e-24:
            t = ti.sqrt(t2)
            dt = -tangential * (ti.min(t * scale, friction * dvn) / t)
        out = v + dvn * n + dt
    return out


@ti.func
def clear_impulse_rows(k, b, rows: ti.template()):
    """Zeroes thread k's private rows of environment b, rows [K, B, L, 6], before it accumulates into them."""
    for body in range(rows.shape[2]):
        for c in ti.static(range(6)):
            rows[k, b, body, c] = 0.0


@ti.func
def add_impulse(dp, x, com, k, b, body, rows: ti.template()):
    """Adds the impulse dp (N s, world) applied at x to the private rows [K, B, L, 6] of thread k: linear, then
    angular about the body's centre of mass."""
    arm = (x - com).cross(dp)
    for a in ti.static(range(3)):
        rows[k, b, body, a] += dp[a]
        rows[k, b, body, 3 + a] += arm[a]


# -- points fixed in a body (particles attached to a rigid link: PBD attachments, hybrid skins) -----------------------

@ti.func
def body_point_offset(b, body, local, body_com: ti.template(), body_quat: ti.template()):
    """R(q) local: where the point `local` (m, in the body's frame, about its centre of mass) of body `body` of
    environment b lies from the body's centre of mass, world axes (the view's body_quat [B, L, 4], w first)."""
    q = ti.Vector([body_quat[b, body, 0], body_quat[b, body, 1], body_quat[b, body, 2], body_quat[b, body, 3]])
    return quat_to_mat(q) @ local


@ti.func
def n_bodies_of(body_com: ti.template(), body_quat: ti.template(), body_impulse: ti.template()):
    """The bodies a point may be fixed in: those every one of the view's body arrays holds."""
    return ti.min(body_com.shape[1], ti.min(body_quat.shape[1], body_impulse.shape[1]))


@ti.func
def add_body_impulse(b, body, dp, tau, body_impulse: ti.template()):
    """Adds the linear impulse dp (N s) and the angular one tau (N m s, about the body's centre of mass) to the
    view's body_impulse [B, L, 6] of environment b; one thread per environment keeps the order fixed."""
    for a in ti.static(range(3)):
        body_impulse[b, body, a] = body_impulse[b, body, a] + dp[a]
        body_impulse[b, body, 3 + a] = body_impulse[b, body, 3 + a] + tau[a]
