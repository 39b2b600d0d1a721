"""The skin of a hybrid entity (gs.materials.Hybrid, genesis_mpm.hybrid): where its particles start, and how they
follow the rigid links they are attached to.

Placement (at add_entity): every point of a lattice is measured against the skeleton's collision geoms with the
particle kit's signed distances (genesis_core.particles.collider.distance_to); the skin is the points outside
every geom and within `thickness` of the nearest, each attached to the link of that geom.

Following (every substep, after grid-to-particle, Genesis World's HybridEntity.update_soft_part): a particle
attached to a link at the point `local` of the link's frame (about its centre of mass) has its target there,
x* = com + R(q) local, and the velocity that closes the gap in one step of the rigid solver, v* = (x* - x) / dt.
Its velocity takes the share `soft_dv_coef` of the difference, damped by exp(-dt_soft damping):

    dv = (v* - v) exp(-dt_soft damping),    v <- v + soft_dv_coef dv,

and its link takes the reaction of the force m dv / dt over one rigid substep: the impulse -m dv h / dt at the
particle (h the substep, dt the rigid solver's step), linear and angular about the link's centre of mass.
"""

import taichi as ti

from genesis_core.particles.collider import add_body_impulse, body_point_offset, distance_to, n_bodies_of
from genesis_core.particles.reduce import TASK_STRIDE

V3 = ti.types.vector(3, float)
V4 = ti.types.vector(4, float)
nd = ti.types.ndarray

FOLLOW_DECAY, FOLLOW_COEF = 0, 1  # p_follow [n_particles, 2]: exp(-dt_soft damping), soft_dv_coef (0: not a skin)


@ti.kernel
def nearest_geom(points: nd(dtype=V3, ndim=1), geom_type: nd(ndim=1), geom_size: nd(dtype=V3, ndim=1),
                 geom_hull: nd(ndim=2), hull_planes: nd(ndim=2), geom_pos: nd(dtype=V3, ndim=2),
                 geom_quat: nd(dtype=V4, ndim=2), distance: nd(ndim=1), nearest: nd(dtype=ti.i32, ndim=1)):
    """The signed distance of each point to the nearest geom (environment 0 of the pose arrays) and that geom's
    index; ties go to the lower index."""
    for i in range(points.shape[0]):
        best = 1e30
        arg = -1
        for g in range(geom_type.shape[0]):
            d, n = distance_to(g, 0, points[i], geom_type, geom_size, geom_hull, hull_planes, geom_pos, geom_quat)
            if d < best:
                best = d
                arg = g
        distance[i] = best
        nearest[i] = arg


@ti.kernel
def follow_links(fn: ti.i32, inv_dt: float, impulse_scale: float, pos: nd(dtype=V3, ndim=3),
                 vel: nd(dtype=V3, ndim=3), active: nd(ndim=2), p_mass: nd(ndim=1), p_follow: nd(ndim=2),
                 attach_link: nd(ndim=2), attach_local: nd(dtype=V3, ndim=2), body_com: nd(dtype=V3, ndim=2),
                 body_quat: nd(ndim=3), body_impulse: nd(ndim=3)):
    """The velocity update of the attached particles of frame fn and their links' impulses (module docstring):
    inv_dt = 1 / dt of the rigid solver, impulse_scale = h / dt. One thread per environment, particles in index
    order, so that a link's impulses add up in a fixed order. A link index outside the view's bodies is
    ignored."""
    n_bodies = n_bodies_of(body_com, body_quat, body_impulse)
    for t in range(pos.shape[1] * TASK_STRIDE):
        if t % TASK_STRIDE == 0:
            b = t // TASK_STRIDE
            for i in range(pos.shape[2]):
                link = attach_link[b, i]
                if active[b, i] != 0 and link >= 0 and link < n_bodies:
                    com, x = body_com[b, link], pos[fn, b, i]
                    target = com + body_point_offset(b, link, attach_local[b, i], body_com, body_quat)
                    dv = ((target - x) * inv_dt - vel[fn, b, i]) * p_follow[i, FOLLOW_DECAY]
                    vel[fn, b, i] = vel[fn, b, i] + p_follow[i, FOLLOW_COEF] * dv
                    dp = -p_mass[i] * impulse_scale * dv
                    add_body_impulse(b, link, dp, (x - com).cross(dp), body_impulse)
