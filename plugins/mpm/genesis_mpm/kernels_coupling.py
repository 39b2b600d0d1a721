"""Grid nodes against the geoms of a collider (genesis_core.coupler.ColliderView), after the grid update and
before grid-to-particle, with the particle kit's signed distances and contact response
(genesis_core.particles.collider): a node inside a geom loses its velocity into the geom relative to the geom's
surface (perfectly inelastic, as MPM's walls), its tangential relative velocity drops by up to mu times that
(Coulomb), each scaled by the node's share of the body's inertia, and the momentum it lost is handed to the
geom's body as an impulse (linear, and angular about the body's centre of mass).

Each node sees the body with its own effective mass: the response is scaled by 1 / (1 + m w), w the body's
inverse effective mass at the node (the kit's share for one point). The nodes are many and light, so each sees
the body nearly as heavy: a light body hit by a whole block gets the nodes' momentum in full in one substep and
may move ahead of the block (momentum is conserved and kinetic energy does not grow; the per-body share of the
particle coupling, which would damp that, is not differentiated yet). The nodes of an environment are
split into slabs along x, one thread each, accumulating the impulses into private rows that are summed afterwards
in a fixed order (deterministic, no atomics).
"""

import taichi as ti

from genesis_core.particles.collider import (add_impulse, body_of, body_surface, clear_impulse_rows, distance_to,
                                            inverse_effective_mass, respond, signed_distance)
from genesis_core.particles.reduce import part_range
from genesis_core.ti_math import quat_to_mat

from .layout import PF_DX, PF_ORIGIN

V3 = ti.types.vector(3, float)
V4 = ti.types.vector(4, float)
M3 = ti.types.matrix(3, 3, float)
nd = ti.types.ndarray


@ti.kernel
def grid_vs_colliders(params_f: nd(ndim=1), grid_v: nd(dtype=V3, ndim=4), grid_m: nd(ndim=4),
                      geom_type: nd(ndim=1), geom_size: nd(dtype=V3, ndim=1), geom_friction: nd(ndim=1),
                      geom_body: nd(ndim=1), geom_hull: nd(ndim=2), hull_planes: nd(ndim=2),
                      geom_pos: nd(dtype=V3, ndim=2), geom_quat: nd(dtype=V4, ndim=2), body_com: nd(dtype=V3, ndim=2),
                      body_lin_vel: nd(dtype=V3, ndim=2), body_ang_vel: nd(dtype=V3, ndim=2),
                      body_inv_mass: nd(ndim=1), body_inv_inertia: nd(dtype=M3, ndim=2), slab_impulse: nd(ndim=4)):
    """slab_impulse [K, B, L, 6] receives each slab's impulses on each body (linear, angular about the com)."""
    dx = params_f[PF_DX]
    lower = ti.Vector([params_f[PF_ORIGIN], params_f[PF_ORIGIN + 1], params_f[PF_ORIGIN + 2]])
    n_slabs = slab_impulse.shape[0]
    nx = grid_v.shape[1]
    n_bodies = ti.min(ti.min(slab_impulse.shape[2], body_inv_mass.shape[0]),
                      ti.min(ti.min(body_com.shape[1], body_inv_inertia.shape[1]),
                             ti.min(body_lin_vel.shape[1], body_ang_vel.shape[1])))
    for b, k in ti.ndrange(grid_v.shape[0], n_slabs):
        clear_impulse_rows(k, b, slab_impulse)
        i0, i1 = part_range(k, nx, n_slabs)
        for i in range(i0, i1):
            for j, l in ti.ndrange(grid_v.shape[2], grid_v.shape[3]):
                m = grid_m[b, i, j, l]
                if m > 0:
                    x = lower + ti.Vector([i, j, l]) * dx
                    v = grid_v[b, i, j, l]
                    for g in range(geom_type.shape[0]):
                        d, n = distance_to(g, b, x, geom_type, geom_size, geom_hull, hull_planes, geom_pos, geom_quat)
                        if d < 0:
                            body = body_of(geom_body, g, n_bodies)
                            com, v_body = body_surface(b, body, x, body_com, body_lin_vel, body_ang_vel)
                            scale = 1.0
                            if body >= 0:
                                scale = 1.0 / (1.0 + m * inverse_effective_mass(x, n, com, body_inv_mass[body],
                                                                                body_inv_inertia[b, body]))
                            out = respond(v, n, v_body, geom_friction[g], 0.0, scale)
                            if body >= 0:
                                add_impulse(m * (v - out), x, com, k, b, body, slab_impulse)
                            v = out
                    grid_v[b, i, j, l] = v


# -- differentiable mode ------------------------------------------------------------------------------------------
# The same contact, written for Taichi's autodiff: the grid velocity goes from one array to another (never updated
# in place). A node's velocity is carried from geom to geom: through an unrolled loop of GEOM_CHUNK geoms per
# launch (Taichi's autodiff of a dynamic loop carrying it is wrong, and its stack for carried values holds 32
# entries), and from launch to launch through a grid array per launch. The reverse of the unrolled loop compiles
# in ~1.5 s for one geom, ~4.5 s for two, ~16 s for four. The bodies' inverse masses and inertias are constants.
# Mesh geoms are not in this path (the coupling refuses them in differentiable mode).

GEOM_CHUNK = 2


@ti.kernel
def grid_vs_colliders_ad(g0: ti.i32, params_f: nd(ndim=1), grid_v: nd(dtype=V3, ndim=4), grid_m: nd(ndim=4),
                         geom_type: nd(ndim=1), geom_size: nd(dtype=V3, ndim=1), geom_friction: nd(ndim=1),
                         geom_body: nd(ndim=1), geom_pos: nd(dtype=V3, ndim=3), geom_quat: nd(dtype=V4, ndim=3),
                         body_com: nd(dtype=V3, ndim=3), body_lin_vel: nd(dtype=V3, ndim=3),
                         body_ang_vel: nd(dtype=V3, ndim=3), body_inv_mass: nd(ndim=1),
                         body_inv_inertia: nd(dtype=M3, ndim=2), grid_v_out: nd(dtype=V3, ndim=4),
                         slab_impulse: nd(ndim=4)):
    """Geoms g0 .. g0 + GEOM_CHUNK - 1 against the nodes, from grid_v into grid_v_out; the impulses are added to
    slab_impulse [K, B, L, 6]. The geom and body arrays are [K, B, ...]: one copy per slab, so that their adjoints
    are summed per slab thread, in a fixed order."""
    for b, k in ti.ndrange(grid_v.shape[0], slab_impulse.shape[0]):
        dx = params_f[PF_DX]
        lower = ti.Vector([params_f[PF_ORIGIN], params_f[PF_ORIGIN + 1], params_f[PF_ORIGIN + 2]])
        n_slabs = slab_impulse.shape[0]
        nx = grid_v.shape[1]
        n_geoms = geom_type.shape[0]
        n_bodies = ti.min(ti.min(slab_impulse.shape[2], body_inv_mass.shape[0]),
                          ti.min(ti.min(body_com.shape[2], body_inv_inertia.shape[1]),
                                 ti.min(body_lin_vel.shape[2], body_ang_vel.shape[2])))
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
                                                   quat_to_mat(geom_quat[k, b, g]), 0, 0, params_f, x, False)
                            if d < 0:
                                body = body_of(geom_body, g, n_bodies)
                                com, v_body = ti.Vector([0.0, 0.0, 0.0]), ti.Vector([0.0, 0.0, 0.0])
                                scale = 1.0
                                if body >= 0:
                                    com = body_com[k, b, body]
                                    v_body = body_lin_vel[k, b, body] + body_ang_vel[k, b, body].cross(x - com)
                                    scale = 1.0 / (1.0 + m * inverse_effective_mass(
                                        x, n, com, body_inv_mass[body], body_inv_inertia[b, body]))
                                out = respond(v, n, v_body, geom_friction[g], 0.0, scale)
                                if body >= 0:
                                    add_impulse(m * (v - out), x, com, k, b, body, slab_impulse)
                                v = out
                grid_v_out[b, i, j, l] = v
