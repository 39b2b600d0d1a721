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
def signed_distance(gtype, size, centre, rot, x):
    """Signed distance from x to the geom (negative inside) and the outward unit normal there."""
    p = rot.transpose() @ (x - centre)
    d = 1e9
    n_local = ti.Vector([0.0, 0.0, 1.0])
    if gtype == PLANE:
        d = p[2]
    elif gtype == SPHERE:
        r = p.norm()
        d = r - size[0]
        if r > 1e-12:
            n_local = p / r
    elif gtype == CAPSULE or gtype == CYLINDER:
        # cylinders as capsules of the same radius and half-length
        axial = ti.min(ti.max(p[2], -size[1]), size[1])
        q = p - ti.Vector([0.0, 0.0, axial])
        r = q.norm()
        d = r - size[0]
        if r > 1e-12:
            n_local = q / r
    elif gtype == BOX:
        h = ti.Vector([size[0], size[1], size[2]])
        q = ti.abs(p) - h
        outside = ti.max(q, 0.0)
        if outside.norm() > 0:
            d = outside.norm()
            n_local = ti.math.sign(p) * outside / d
        else:
            axis = 0
            for i in ti.static(range(1, 3)):
                if q[i] > q[axis]:
                    axis = i
            d = q[axis]
            n_local = ti.Vector([0.0, 0.0, 0.0])
            n_local[axis] = 1.0 if p[axis] >= 0 else -1.0
    return d, rot @ n_local


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
                            v_body = ti.Vector([0.0, 0.0, 0.0])
                            if body >= 0:
                                v_body = body_lin_vel[b, body] + body_ang_vel[b, body].cross(x - body_com[b, body])
                            rel = v - v_body
                            vn = rel.dot(n)
                            if vn < 0:
                                tangential = rel - vn * n
                                t = tangential.norm()
                                if t > 1e-12:
                                    tangential *= ti.max(t + geom_friction[g] * vn, 0.0) / t
                                v_new = v_body + tangential
                                if body >= 0:
                                    dp = m * (v - v_new)
                                    arm = (x - body_com[b, body]).cross(dp)
                                    for c in ti.static(range(3)):
                                        slab_impulse[k, b, body, c] += dp[c]
                                        slab_impulse[k, b, body, 3 + c] += arm[c]
                                v = v_new
                    grid_v[b, i, j, l] = v
