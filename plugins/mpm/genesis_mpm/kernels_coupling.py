"""Grid nodes against the geoms of a collider (genesis_core.coupler.ColliderView), after the grid update and
before grid-to-particle, with the particle kit's signed distances and contact response
(genesis_core.particles.collider): a node in contact with a geom loses its velocity into the geom relative to the
geom's surface (perfectly inelastic, as MPM's walls), its tangential relative velocity drops by up to mu times
that (Coulomb), each scaled by the node's share of the body's inertia, and the momentum it lost is handed to the
geom's body as an impulse (linear, and angular about the body's centre of mass).

A node is in contact when the geom's surface passes within half a cell of it (signed distance d < dx / 2,
`CONTACT_BAND`): the contact acts at the grid's resolution. Material settles where its nodes stop, so the highest
node in contact sets where it rests: within half a cell of the surface, on either side. Were only the nodes inside
a geom in contact (d < 0), that node would lie up to a whole cell below the surface and material would rest about
a cell inside every geom (through a plane lying on a node layer, whose nodes, at d = 0, would keep their velocity
into it); a body whose face lies between a block's outermost nodes and the next layer would feel nothing from the
block, nor from nodes that entered a thin geom and found a side face nearest (see docs/mpm.md for figures).

The nodes that move into a body in a substep share its inertia: each is answered with the body's share
1 / (1 + sum m w), the sum over those nodes (a first pass, `grid_contact_mass`) of their mass times the body's
inverse effective mass at them (the kit's rule for particles: exact for nodes that move together against a
translating body, the inelastic collision of the two). Were each node to see the whole body (1 / (1 + m w)), the
impulses of a block's many nodes would add up to more than the block's momentum could give a light body, and
kinetic energy would grow. The nodes of an environment are split into slabs along x, one thread each,
accumulating the sums and impulses into private rows that are summed afterwards in a fixed order (deterministic,
no atomics).
"""

import taichi as ti

from genesis_core.particles.collider import (add_impulse, approaching, body_of, body_surface, clear_impulse_rows,
                                            distance_to, inverse_effective_mass, respond, signed_distance)
from genesis_core.particles.reduce import part_range
from genesis_core.ti_math import quat_to_mat

from .layout import PF_DX, PF_ORIGIN

V3 = ti.types.vector(3, float)
V4 = ti.types.vector(4, float)
M3 = ti.types.matrix(3, 3, float)
nd = ti.types.ndarray

CONTACT_BAND = 0.5  # cells: a node is in contact with a geom whose signed distance is below CONTACT_BAND * dx


# -- the node's contact, shared by both modes ----------------------------------------------------------------------

@ti.func
def node_contact_mass(m, x, v, d, n, b, body, com, v_body, band, body_inv_mass: ti.template(),
                      body_inv_inertia: ti.template()):
    """m w for a node (mass m, at x, velocity v) in contact with a geom of a body (d < band, d and n the signed
    distance and outward normal there) that it moves into (relative to the surface velocity v_body), w the body's
    inverse effective mass at the node; 0 otherwise (and for a static geom, body < 0)."""
    mw = 0.0
    if body >= 0 and d < band:
        if approaching(v, v_body, n) < 0:
            mw = m * inverse_effective_mass(x, n, com, body_inv_mass[body], body_inv_inertia[b, body])
    return mw


@ti.func
def node_contact(v, d, n, v_body, friction, band, share):
    """The node's velocity after its contact with a geom (d < band): the kit's response (`respond`: the normal
    velocity into the geom relative to its surface removed, Coulomb friction), scaled by `share`, the body's share
    1 / (1 + sum m w) (1 for a static geom); v unchanged out of contact. m (v - out) is the impulse the body
    receives."""
    out = v
    if d < band:
        out = respond(v, n, v_body, friction, 0.0, share)
    return out


@ti.func
def n_bodies_of(rows: ti.template(), body_inv_mass: ti.template(), body_com: ti.template(),
                body_inv_inertia: ti.template(), body_lin_vel: ti.template(), body_ang_vel: ti.template(),
                lead: ti.template()):
    """The bodies every array holds (rows [K, B, L, ...]; body_com, body_lin_vel and body_ang_vel hold them on axis
    `lead`: 1 for [B, L, 3], 2 for per-slab copies [K, B, L, 3]): a geom's body outside them is static
    (`body_of`)."""
    return ti.min(ti.min(rows.shape[2], body_inv_mass.shape[0]),
                  ti.min(ti.min(body_com.shape[lead], body_inv_inertia.shape[1]),
                         ti.min(body_lin_vel.shape[lead], body_ang_vel.shape[lead])))


# -- plain mode ----------------------------------------------------------------------------------------------------

@ti.kernel
def grid_contact_mass(params_f: nd(ndim=1), grid_v: nd(dtype=V3, ndim=4), grid_m: nd(ndim=4),
                      geom_type: nd(ndim=1), geom_size: nd(dtype=V3, ndim=1), geom_body: nd(ndim=1),
                      geom_hull: nd(ndim=2), hull_planes: nd(ndim=2), geom_pos: nd(dtype=V3, ndim=2),
                      geom_quat: nd(dtype=V4, ndim=2), body_com: nd(dtype=V3, ndim=2),
                      body_lin_vel: nd(dtype=V3, ndim=2), body_ang_vel: nd(dtype=V3, ndim=2),
                      body_inv_mass: nd(ndim=1), body_inv_inertia: nd(dtype=M3, ndim=2), slab_mass: nd(ndim=3)):
    """slab_mass [K, B, L] receives each slab's sum of m w over its nodes in contact with each body and moving into
    it (`node_contact_mass`): the body's share is 1 / (1 + the sum over the slabs)."""
    dx = params_f[PF_DX]
    band = CONTACT_BAND * dx
    lower = ti.Vector([params_f[PF_ORIGIN], params_f[PF_ORIGIN + 1], params_f[PF_ORIGIN + 2]])
    n_slabs = slab_mass.shape[0]
    nx = grid_v.shape[1]
    n_bodies = n_bodies_of(slab_mass, body_inv_mass, body_com, body_inv_inertia, body_lin_vel, body_ang_vel, 1)
    for b, k in ti.ndrange(grid_v.shape[0], n_slabs):
        for body in range(slab_mass.shape[2]):
            slab_mass[k, b, body] = 0.0
        i0, i1 = part_range(k, nx, n_slabs)
        for i in range(i0, i1):
            for j, l in ti.ndrange(grid_v.shape[2], grid_v.shape[3]):
                m = grid_m[b, i, j, l]
                if m > 0:
                    x = lower + ti.Vector([i, j, l]) * dx
                    v = grid_v[b, i, j, l]
                    for g in range(geom_type.shape[0]):
                        body = body_of(geom_body, g, n_bodies)
                        if body >= 0:
                            d, n = distance_to(g, b, x, geom_type, geom_size, geom_hull, hull_planes, geom_pos,
                                               geom_quat)
                            com, v_body = body_surface(b, body, x, body_com, body_lin_vel, body_ang_vel)
                            slab_mass[k, b, body] += node_contact_mass(m, x, v, d, n, b, body, com, v_body, band,
                                                                       body_inv_mass, body_inv_inertia)


@ti.kernel
def grid_vs_colliders(params_f: nd(ndim=1), grid_v: nd(dtype=V3, ndim=4), grid_m: nd(ndim=4),
                      geom_type: nd(ndim=1), geom_size: nd(dtype=V3, ndim=1), geom_friction: nd(ndim=1),
                      geom_body: nd(ndim=1), geom_hull: nd(ndim=2), hull_planes: nd(ndim=2),
                      geom_pos: nd(dtype=V3, ndim=2), geom_quat: nd(dtype=V4, ndim=2), body_com: nd(dtype=V3, ndim=2),
                      body_lin_vel: nd(dtype=V3, ndim=2), body_ang_vel: nd(dtype=V3, ndim=2),
                      body_inv_mass: nd(ndim=1), body_inv_inertia: nd(dtype=M3, ndim=2), body_share: nd(ndim=2),
                      slab_impulse: nd(ndim=4)):
    """The contacts, geom after geom (each sees the node as the previous one left it), with each body's share
    body_share [B, L] (from grid_contact_mass); slab_impulse [K, B, L, 6] receives each slab's impulses on each
    body (linear, angular about the com)."""
    dx = params_f[PF_DX]
    band = CONTACT_BAND * dx
    lower = ti.Vector([params_f[PF_ORIGIN], params_f[PF_ORIGIN + 1], params_f[PF_ORIGIN + 2]])
    n_slabs = slab_impulse.shape[0]
    nx = grid_v.shape[1]
    n_bodies = ti.min(n_bodies_of(slab_impulse, body_inv_mass, body_com, body_inv_inertia, body_lin_vel,
                                  body_ang_vel, 1), body_share.shape[1])
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
                        if d < band:
                            body = body_of(geom_body, g, n_bodies)
                            com, v_body = body_surface(b, body, x, body_com, body_lin_vel, body_ang_vel)
                            share = 1.0
                            if body >= 0:
                                share = body_share[b, body]
                            out = node_contact(v, d, n, v_body, geom_friction[g], band, share)
                            if body >= 0:
                                add_impulse(m * (v - out), x, com, k, b, body, slab_impulse)
                            v = out
                    grid_v[b, i, j, l] = v


# -- differentiable mode ------------------------------------------------------------------------------------------
# The same contact (the functions above), written for Taichi's autodiff: the grid velocity goes from one array to
# another (never updated in place). A node's velocity is carried from geom to geom: through an unrolled loop of
# GEOM_CHUNK geoms per launch (Taichi's autodiff of a dynamic loop carrying it is wrong, and its stack for carried
# values holds 32 entries), and from launch to launch through a grid array per launch. The reverse of the unrolled
# loop compiles in ~1.5 s for one geom, ~4.5 s for two, ~16 s for four. The sums of m w carry nothing from geom to
# geom, so their kernel loops over the geoms. The bodies' inverse masses and inertias are constants. Mesh geoms are
# not in this path (the coupling refuses them in differentiable mode).

GEOM_CHUNK = 2


@ti.kernel
def grid_contact_mass_ad(params_f: nd(ndim=1), grid_v: nd(dtype=V3, ndim=4), grid_m: nd(ndim=4),
                         geom_type: nd(ndim=1), geom_size: nd(dtype=V3, ndim=1), geom_body: nd(ndim=1),
                         geom_pos: nd(dtype=V3, ndim=3), geom_quat: nd(dtype=V4, ndim=3),
                         body_com: nd(dtype=V3, ndim=3), body_lin_vel: nd(dtype=V3, ndim=3),
                         body_ang_vel: nd(dtype=V3, ndim=3), body_inv_mass: nd(ndim=1),
                         body_inv_inertia: nd(dtype=M3, ndim=2), slab_mass: nd(ndim=3)):
    """grid_contact_mass over the geom and body arrays' per-slab copies [K, B, ...]; slab_mass [K, B, L] is
    cleared before (its reverse reads the adjoint of the sums)."""
    for b, k in ti.ndrange(grid_v.shape[0], slab_mass.shape[0]):
        dx = params_f[PF_DX]
        band = CONTACT_BAND * dx
        lower = ti.Vector([params_f[PF_ORIGIN], params_f[PF_ORIGIN + 1], params_f[PF_ORIGIN + 2]])
        n_slabs = slab_mass.shape[0]
        nx = grid_v.shape[1]
        n_bodies = n_bodies_of(slab_mass, body_inv_mass, body_com, body_inv_inertia, body_lin_vel, body_ang_vel, 2)
        for i in range(k * nx // n_slabs, (k + 1) * nx // n_slabs):
            for j, l in ti.ndrange(grid_v.shape[2], grid_v.shape[3]):
                m = grid_m[b, i, j, l]
                if m > 0:
                    x = lower + ti.Vector([i, j, l]) * dx
                    v = grid_v[b, i, j, l]
                    for g in range(geom_type.shape[0]):
                        body = body_of(geom_body, g, n_bodies)
                        if body >= 0:
                            d, n = signed_distance(geom_type[g], geom_size[g], geom_pos[k, b, g],
                                                   quat_to_mat(geom_quat[k, b, g]), 0, 0, params_f, x, False)
                            com = body_com[k, b, body]
                            v_body = body_lin_vel[k, b, body] + body_ang_vel[k, b, body].cross(x - com)
                            slab_mass[k, b, body] += node_contact_mass(m, x, v, d, n, b, body, com, v_body, band,
                                                                       body_inv_mass, body_inv_inertia)


@ti.kernel
def grid_vs_colliders_ad(g0: ti.i32, params_f: nd(ndim=1), grid_v: nd(dtype=V3, ndim=4), grid_m: nd(ndim=4),
                         geom_type: nd(ndim=1), geom_size: nd(dtype=V3, ndim=1), geom_friction: nd(ndim=1),
                         geom_body: nd(ndim=1), geom_pos: nd(dtype=V3, ndim=3), geom_quat: nd(dtype=V4, ndim=3),
                         body_com: nd(dtype=V3, ndim=3), body_lin_vel: nd(dtype=V3, ndim=3),
                         body_ang_vel: nd(dtype=V3, ndim=3), body_share: nd(ndim=3), grid_v_out: nd(dtype=V3, ndim=4),
                         slab_impulse: nd(ndim=4)):
    """Geoms g0 .. g0 + GEOM_CHUNK - 1 against the nodes, from grid_v into grid_v_out; the impulses are added to
    slab_impulse [K, B, L, 6]. The geom and body arrays, and the bodies' shares body_share [K, B, L], are one copy
    per slab, so that their adjoints are summed per slab thread, in a fixed order."""
    for b, k in ti.ndrange(grid_v.shape[0], slab_impulse.shape[0]):
        dx = params_f[PF_DX]
        band = CONTACT_BAND * dx
        lower = ti.Vector([params_f[PF_ORIGIN], params_f[PF_ORIGIN + 1], params_f[PF_ORIGIN + 2]])
        n_slabs = slab_impulse.shape[0]
        nx = grid_v.shape[1]
        n_geoms = geom_type.shape[0]
        n_bodies = ti.min(ti.min(slab_impulse.shape[2], body_share.shape[2]),
                          ti.min(body_com.shape[2], ti.min(body_lin_vel.shape[2], body_ang_vel.shape[2])))
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
                            if d < band:
                                body = body_of(geom_body, g, n_bodies)
                                com, v_body = ti.Vector([0.0, 0.0, 0.0]), ti.Vector([0.0, 0.0, 0.0])
                                share = 1.0
                                if body >= 0:
                                    com = body_com[k, b, body]
                                    v_body = body_lin_vel[k, b, body] + body_ang_vel[k, b, body].cross(x - com)
                                    share = body_share[k, b, body]
                                out = node_contact(v, d, n, v_body, geom_friction[g], band, share)
                                if body >= 0:
                                    add_impulse(m * (v - out), x, com, k, b, body, slab_impulse)
                                v = out
                grid_v_out[b, i, j, l] = v
