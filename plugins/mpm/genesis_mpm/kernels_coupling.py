"""Grid nodes against the rigid geoms of a collider (genesis_core.coupler.ColliderView), after the grid update and
before grid-to-particle: a node inside a geom loses its velocity into the geom relative to the geom's surface,
its tangential relative velocity drops by up to mu times that (Coulomb), and the momentum it lost is handed to
the geom's body as an impulse (linear, and angular about the body's centre of mass).

The nodes of an environment are split into slabs along x, one thread each, accumulating the impulses of their
slab into a private row that is summed afterwards in a fixed order (deterministic, no atomics).
"""

import taichi as ti

from genesis_core.ti_math import quat_to_mat

V3 = ti.types.vector(3, float)
V4 = ti.types.vector(4, float)
nd = ti.types.ndarray

PLANE, SPHERE, CAPSULE, BOX, CYLINDER = 0, 1, 2, 3, 4


@ti.func
def node_in_geom(v, x, m, n, friction, body, com, v_body, k, b, slab_impulse: ti.template()):
    """The velocity of a node (position x, mass m, velocity v) inside a geom, outward normal n there, whose surface
    moves at v_body: the part into the geom is removed and the tangential part drops by up to friction times it;
    the momentum lost goes to slab_impulse[k, b, body] (linear, and angular about the body's centre of mass com)
    unless the geom is fixed (body < 0). Square roots only of positive numbers, for the autodiff of the
    differentiable kernel."""
    out = v
    rel = v - v_body
    vn = rel.dot(n)
    if vn < 0:
        tangential = rel - vn * n
        t2 = tangential.norm_sqr()
        if t2 > 1e-24:
            t = ti.sqrt(t2)
            tangential *= ti.max(t + friction * vn, 0.0) / t
        out = v_body + tangential
        if body >= 0:
            dp = m * (v - out)
            arm = (x - com).cross(dp)
            for a in ti.static(range(3)):
                slab_impulse[k, b, body, a] += dp[a]
                slab_impulse[k, b, body, 3 + a] += arm[a]
    return out


@ti.kernel
def grid_vs_colliders(params_f: nd(ndim=1), grid_v: nd(dtype=V3, ndim=4), grid_m: nd(ndim=4),
                      geom_type: nd(ndim=1), geom_size: nd(dtype=V3, ndim=1), geom_friction: nd(ndim=1),
                      geom_body: nd(ndim=1), geom_pos: nd(dtype=V3, ndim=2), geom_quat: nd(dtype=V4, ndim=2),
                      body_com: nd(dtype=V3, ndim=2), body_lin_vel: nd(dtype=V3, ndim=2),
                      body_ang_vel: nd(dtype=V3, ndim=2), slab_impulse: nd(ndim=4)):
    """slab_impulse [K, B, L, 6] receives each slab's impulses on each body (linear, angular about the com)."""
    dx = params_f[1]
    lower = ti.Vector([params_f[3], params_f[4], params_f[5]])
    n_slabs = slab_impulse.shape[0]
    nx = grid_v.shape[1]
    for b, k in ti.ndrange(grid_v.shape[0], n_slabs):
        for body in range(slab_impulse.shape[2]):
            for c in ti.static(range(6)):
                slab_impulse[k, b, body, c] = 0.0
        for i in range(k * nx // n_slabs, (k + 1) * nx // n_slabs):
            for j, l in ti.ndrange(grid_v.shape[2], grid_v.shape[3]):
                m = grid_m[b, i, j, l]
                if m > 0:
                    x = lower + ti.Vector([i, j, l]) * dx
                    v = grid_v[b, i, j, l]
                    for g in range(geom_type.shape[0]):
                        d, n = signed_distance(geom_type[g], geom_size[g], geom_pos[b, g], quat_to_mat(geom_quat[b, g]), x)
                        if d < 0:
                            body = geom_body[g]
                            com, v_body = ti.Vector([0.0, 0.0, 0.0]), ti.Vector([0.0, 0.0, 0.0])
                            if body >= 0:
                                com = body_com[b, body]
                                v_body = body_lin_vel[b, body] + body_ang_vel[b, body].cross(x - com)
                            v = node_in_geom(v, x, m, n, geom_friction[g], body, com, v_body, k, b, slab_impulse)
                    grid_v[b, i, j, l] = v


# -- differentiable mode ------------------------------------------------------------------------------------------
# The same contact, written for Taichi's autodiff: the grid velocity goes from one array to another (never updated
# in place), and square roots are taken only where their argument is positive (their derivative at 0 would turn
# the zero adjoint of an unused branch into NaN). A node's velocity is carried from geom to geom: through an
# unrolled loop of GEOM_CHUNK geoms per launch (Taichi's autodiff of a dynamic loop carrying it is wrong, and
# its stack for carried values holds 32 entries), and from launch to launch through a grid array per launch. The
# reverse of the unrolled loop compiles in ~1.5 s for one geom, ~4.5 s for two, ~16 s for four.

GEOM_CHUNK = 2


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
def signed_distance(gtype, size, centre, rot, x):
    """Signed distance from x to the geom (negative inside) and the outward unit normal there; cylinders are
    capsules of the same radius and half-length. Written so that its autodiff holds wherever it is used (no norm
    of a zero vector, no dynamic index)."""
    p = mat_t_vec(rot, x - centre)
    d = 1e9
    n_local = ti.Vector([0.0, 0.0, 1.0])
    if gtype == PLANE:
        d = p[2]
    elif gtype == SPHERE or gtype == CAPSULE or gtype == CYLINDER:
        half = 0.0 if gtype == SPHERE else size[1]  # a sphere: a capsule of zero half-length
        axial = ti.min(ti.max(p[2], -half), half)
        q = p - ti.Vector([0.0, 0.0, axial])
        r2 = q.norm_sqr()
        d = -size[0]
        if r2 > 1e-24:
            r = ti.sqrt(r2)
            d = r - size[0]
            n_local = q / r
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
    return d, mat_vec(rot, n_local)


@ti.kernel
def grid_vs_colliders_ad(g0: ti.i32, params_f: nd(ndim=1), grid_v: nd(dtype=V3, ndim=4), grid_m: nd(ndim=4),
                         geom_type: nd(ndim=1), geom_size: nd(dtype=V3, ndim=1), geom_friction: nd(ndim=1),
                         geom_body: nd(ndim=1), geom_pos: nd(dtype=V3, ndim=3), geom_quat: nd(dtype=V4, ndim=3),
                         body_com: nd(dtype=V3, ndim=3), body_lin_vel: nd(dtype=V3, ndim=3),
                         body_ang_vel: nd(dtype=V3, ndim=3), grid_v_out: nd(dtype=V3, ndim=4),
                         slab_impulse: nd(ndim=4)):
    """Geoms g0 .. g0 + GEOM_CHUNK - 1 against the nodes, from grid_v into grid_v_out; the impulses are added to
    slab_impulse [K, B, L, 6]. The geom and body arrays are [K, B, ...]: one copy per slab, so that their adjoints
    are summed per slab thread, in a fixed order."""
    for b, k in ti.ndrange(grid_v.shape[0], slab_impulse.shape[0]):
        dx = params_f[1]
        lower = ti.Vector([params_f[3], params_f[4], params_f[5]])
        n_slabs = slab_impulse.shape[0]
        nx = grid_v.shape[1]
        n_geoms = geom_type.shape[0]
        for i in range(k * nx // n_slabs, (k + 1) * nx // n_slabs):
            for j, l in ti.ndrange(grid_v.shape[2], grid_v.shape[3]):
                m = grid_m[b, i, j, l]
                v = grid_v[b, i, j, l]
                if m > 0:
                    x = lower + ti.Vector([i, j, l]) * dx
                    for c in ti.static(range(GEOM_CHUNK)):
                        g = g0 + c
                        if g < n_geoms:
                            d, n = signed_distance(geom_type[g], geom_size[g], geom_pos[k, b, g],
                                                      quat_to_mat(geom_quat[k, b, g]), x)
                            if d < 0:
                                body = geom_body[g]
                                com, v_body = ti.Vector([0.0, 0.0, 0.0]), ti.Vector([0.0, 0.0, 0.0])
                                if body >= 0:
                                    com = body_com[k, b, body]
                                    v_body = body_lin_vel[k, b, body] + body_ang_vel[k, b, body].cross(x - com)
                                v = node_in_geom(v, x, m, n, geom_friction[g], body, com, v_body, k, b, slab_impulse)
                grid_v_out[b, i, j, l] = v
