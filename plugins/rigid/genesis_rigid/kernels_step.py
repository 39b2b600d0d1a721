"""The rigid solver's kernels, each parallel over environments, each environment running a whole stage in its
loop body (launch cost, not arithmetic, dominates small batches). For a batch of one environment the solver runs
each kernel's serial copy (SERIAL_OF): the same code on the calling thread, without the thread pool's dispatch. A
substep launches up to three:

    collide:        broadphase, and the contacts between primitives, at the link poses of frame f (if any pair of
                    geoms can collide)
    collide_meshes: contacts of the near pairs with a mesh (if there are pairs with a mesh)
    substep:        kinematics -> dof motions -> bias forces and mass matrix -> smooth acceleration (x4 for RK4)
                    -> constraint rows + PGS -> integrate -> kinematics of the new frame

The narrowphase has kernels of its own because Taichi's compile time grows faster than linearly with a kernel's
size (docs/rigid.md has the figures). They read frame f (qpos,
dofs_vel, link poses, the warm start, the coupling impulses) and write frame fn; everything else they touch is
per-substep scratch.
"""

import taichi as ti

from genesis_core.launch import exact_math, serial_variant

from .kernels_collision import contact_frame_reverse, detect_contacts, finish_contacts
from .kernels_constraint import solve_constraints, solve_constraints_reverse
from .kernels_convex import detect_mesh_contacts
from .kernels_dynamics import bias_and_mass, bias_and_mass_reverse, smooth_acceleration, smooth_acceleration_reverse
from .kernels_integrate import advance_q, advance_q_reverse
from .kernels_terrain import detect_terrain_contacts
from .kernels_kinematics import (add_ref_adjoint, dof_motions, dof_motions_reverse, forward_kinematics,
                                 forward_kinematics_reverse)
from .kernels_math import V3, V4, func, quat_mul, quat_mul_reverse, quat_to_mat, spatial, v3, v4
from .layout import (DI_LINK, DI_PARENT, GD_ACC, GD_EXT, GD_FREE_VEL, GD_PSEUDO, GD_VEL, GF_POS, GF_QUAT, GI_LINK,
                     LI_LAST_DOF, PF_DT, PP_RK4, SD_ACC, SD_EXT, SD_FREE_VEL, SD_PSEUDO, SD_RK4_ACC, SD_RK4_VEL,
                     SD_VEL)

# True in the serial copies of the kernels (SERIAL_OF, for one environment: no thread-pool dispatch per launch)
SERIAL = False
# Taichi 1.7.4's CPU code gives each thread at least 512 consecutive iterations of a kernel's outermost loop, so a
# loop over 64-512 environments would run on one thread: the parallel kernels loop over about ENV_ITERATIONS
# iterations, each environment taking `env_spread` of them (the first does its work), so that up to four threads
# share the environments
ENV_ITERATIONS = 2048


@ti.func
def env_spread(n_envs, serial: ti.template()):
    """Loop iterations per environment: 1 in the serial copies (serial: the kernel's SERIAL), else enough for
    ENV_ITERATIONS in all."""
    spread = 1
    if ti.static(not serial):
        spread = ti.max(1, (ENV_ITERATIONS + n_envs - 1) // n_envs)
    return spread

# Scratch arrays are Taichi ndarrays of vectors and matrices, typed by the array itself (the precision is chosen at
# gs.init, after this module is imported); state arrays are torch tensors, typed here.
nd = ti.types.ndarray


@ti.kernel
def kinematics(f: ti.i32,
               # state (all frames)
               qpos: nd(ndim=3), links_pos: nd(dtype=V3, ndim=3), links_quat: nd(dtype=V4, ndim=3),
               # model
               link_f: nd(ndim=3), link_i: nd(ndim=2), joint_f: nd(ndim=2), joint_i: nd(ndim=2),
               # scratch
               s_R: nd(ndim=2), s_com: nd(ndim=2), s_janchor: nd(ndim=2), s_jaxis: nd(ndim=2),
               s_ref: nd(ndim=2)):
    """Link poses of frame f from qpos[f] (after a setter changed qpos, and at build)."""
    if ti.static(SERIAL):
        ti.loop_config(serialize=True)
    spread = env_spread(qpos.shape[1], SERIAL)
    for t in range(qpos.shape[1] * spread):
        if t % spread != 0:
            continue
        b = t // spread
        forward_kinematics(b, f, qpos, links_pos, links_quat, link_f, link_i, joint_f, joint_i, s_R, s_com,
                           s_janchor, s_jaxis, s_ref)


@ti.kernel
def collide(f: ti.i32, fn: ti.i32, fresh: ti.i32, finish: ti.i32,
            # state (all frames)
            links_pos: nd(dtype=V3, ndim=3), links_quat: nd(dtype=V4, ndim=3), contact_key: nd(ndim=3),
            # model
            geom_f: nd(ndim=2), geom_mu: nd(ndim=2), geom_i: nd(ndim=2), geom_rbound: nd(ndim=1), pair_i: nd(ndim=2),
            pair_lut: nd(ndim=2), plane_pairs: nd(ndim=1), bound_geoms: nd(ndim=1),
            # scratch
            s_sap: nd(ndim=2), s_sap_axis: nd(ndim=1), s_R: nd(ndim=2), s_con_f: nd(ndim=3), s_con_i: nd(ndim=3),
            s_geom_f: nd(ndim=3), s_near_i: nd(ndim=2), s_hash: nd(ndim=2)):
    """Broadphase at frame f, and the contacts between primitives (the link poses of frame f are the substep's
    start configuration, where its constraint stage acts); lists the near pairs with a mesh. finish: no mesh
    kernel follows, so the warm starts are matched here (the keys of frame fn written). fresh: s_R holds the
    rotations of frame f already (see substep)."""
    if ti.static(SERIAL):
        ti.loop_config(serialize=True)
    spread = env_spread(links_pos.shape[1], SERIAL)
    for t in range(links_pos.shape[1] * spread):
        if t % spread != 0:
            continue
        b = t // spread
        if fresh == 0:
            for l in range(links_pos.shape[2]):
                s_R[b, l] = quat_to_mat(links_quat[f, b, l])
        detect_contacts(b, f, links_pos, s_R, geom_f, geom_mu, geom_i, geom_rbound, pair_i, pair_lut, plane_pairs,
                        bound_geoms, s_sap, s_sap_axis, s_con_f, s_con_i, s_geom_f, s_near_i)
        if finish != 0:
            finish_contacts(b, f, fn, contact_key, pair_i, geom_f, geom_mu, s_con_f, s_con_i, s_hash)


@ti.kernel
def collide_terrain(f: ti.i32, fn: ti.i32, finish: ti.i32,
                    # state (all frames)
                    links_pos: nd(dtype=V3, ndim=3), contact_key: nd(ndim=3),
                    # model
                    geom_f: nd(ndim=2), geom_mu: nd(ndim=2), geom_i: nd(ndim=2), geom_rbound: nd(ndim=1),
                    hull_f: nd(ndim=2), pair_i: nd(ndim=2), hfield_pairs: nd(ndim=1),
                    # scratch
                    s_R: nd(ndim=2), s_con_f: nd(ndim=3), s_con_i: nd(ndim=3), s_hash: nd(ndim=2)):
    """The contacts of frame f of the height-field pairs (after `collide`'s, whose rotations s_R it reads); then
    the warm starts, if no mesh kernel follows (finish)."""
    if ti.static(SERIAL):
        ti.loop_config(serialize=True)
    spread = env_spread(links_pos.shape[1], SERIAL)
    for t in range(links_pos.shape[1] * spread):
        if t % spread != 0:
            continue
        b = t // spread
        detect_terrain_contacts(b, f, links_pos, s_R, geom_f, geom_mu, geom_i, geom_rbound, hull_f, pair_i,
                                hfield_pairs, s_con_f, s_con_i)
        if finish != 0:
            finish_contacts(b, f, fn, contact_key, pair_i, geom_f, geom_mu, s_con_f, s_con_i, s_hash)


@ti.kernel
def collide_meshes(f: ti.i32, fn: ti.i32,
                   # state (all frames)
                   links_pos: nd(dtype=V3, ndim=3), contact_key: nd(ndim=3),
                   # model
                   geom_f: nd(ndim=2), geom_mu: nd(ndim=2), geom_i: nd(ndim=2), hull_f: nd(ndim=2),
                   hull_i: nd(ndim=2), pair_i: nd(ndim=2),
                   # scratch
                   s_R: nd(ndim=2), s_con_f: nd(ndim=3), s_con_i: nd(ndim=3), s_near_i: nd(ndim=2),
                   s_nar_f: nd(ndim=3), s_nar_i: nd(ndim=3), s_sep: nd(ndim=3), s_hash: nd(ndim=2)):
    """The contacts of frame f of the near pairs with a mesh that `collide` listed; then the warm starts."""
    if ti.static(SERIAL):
        ti.loop_config(serialize=True)
    spread = env_spread(links_pos.shape[1], SERIAL)
    for t in range(links_pos.shape[1] * spread):
        if t % spread != 0:
            continue
        b = t // spread
        detect_mesh_contacts(b, f, links_pos, s_R, geom_f, geom_i, hull_f, hull_i, pair_i, s_con_f, s_con_i, s_near_i,
                             s_nar_f, s_nar_i, s_sep)
        finish_contacts(b, f, fn, contact_key, pair_i, geom_f, geom_mu, s_con_f, s_con_i, s_hash)


@ti.kernel
def substep(f: ti.i32, fn: ti.i32, fresh: ti.i32,
            # given at each launch: the external impulses (the state's field, or with the applied wrenches added)
            links_ext_impulse: nd(ndim=4),
            # state (all frames)
            qpos: nd(ndim=3), dofs_vel: nd(ndim=3), dofs_acc: nd(ndim=3), links_pos: nd(dtype=V3, ndim=3),
            links_quat: nd(dtype=V4, ndim=3), contact_impulse: nd(ndim=4), limit_impulse: nd(ndim=3),
            equality_impulse: nd(ndim=4), dofs_ctrl_mode: nd(ndim=2), dofs_ctrl_force: nd(ndim=2),
            dofs_ctrl_pos: nd(ndim=2), dofs_ctrl_vel: nd(ndim=2), dofs_kp: nd(ndim=2), dofs_kv: nd(ndim=2),
            eq_type: nd(ndim=2), eq_obj: nd(ndim=3), eq_data: nd(ndim=3), eq_active: nd(ndim=2),
            # model
            params_f: nd(ndim=1), params_i: nd(ndim=1), link_f: nd(ndim=3), link_i: nd(ndim=2), joint_f: nd(ndim=2),
            joint_i: nd(ndim=2), dof_f: nd(ndim=3), dof_i: nd(ndim=2), ten_f: nd(ndim=2), ten_i: nd(ndim=2),
            # scratch
            s_qs: nd(ndim=3), s_vs: nd(ndim=3), s_lpos: nd(ndim=3), s_lquat: nd(ndim=3), s_R: nd(ndim=2),
            s_com: nd(ndim=2), s_janchor: nd(ndim=2), s_jaxis: nd(ndim=2), s_ref: nd(ndim=2), s_cdof: nd(ndim=2),
            s_cdof_dot: nd(ndim=2),
            s_cvel: nd(ndim=2), s_cacc: nd(ndim=2), s_cfrc: nd(ndim=2), s_crb_m: nd(ndim=2), s_crb_mc: nd(ndim=2),
            s_crb_io: nd(ndim=2), s_mass: nd(ndim=3), s_dof: nd(ndim=3), s_con_f: nd(ndim=3), s_con_i: nd(ndim=3),
            s_J: nd(ndim=3), s_W: nd(ndim=3), s_row_f: nd(ndim=3), s_row_i: nd(ndim=3), s_hist: nd(ndim=3)):
    """One substep: frame f -> frame fn. The smooth dynamics are evaluated on the stage arrays s_qs / s_vs
    (once for Euler; four Runge-Kutta stages and a final evaluation at the start for RK4), then the constraints
    act at the start configuration (the contacts `collide` found there), then positions advance. fresh: the
    kinematics of frame f in the scratch (s_R, s_com, s_janchor, s_jaxis) are those the last substep's final
    kinematics left, on qpos[f] as it is now (the solver's _fresh_kinematics): the first evaluation takes them and
    the link positions of frame f instead of computing them again (the same code on the same bits: the same
    values)."""
    if ti.static(SERIAL):
        ti.loop_config(serialize=True)
    h = params_f[PF_DT]
    rk4 = params_i[PP_RK4] != 0
    hi = 0.0 if rk4 else h
    n_evals = 5 if rk4 else 1
    n_q = qpos.shape[2]
    n_v = dofs_vel.shape[2]
    spread = env_spread(qpos.shape[1], SERIAL)
    for t in range(qpos.shape[1] * spread):
        if t % spread != 0:
            continue
        b = t // spread
        for i in range(n_q):
            s_qs[0, b, i] = qpos[f, b, i]
        for d in range(n_v):
            s_vs[0, b, d] = dofs_vel[f, b, d]
            s_dof[b, d, SD_RK4_VEL] = 0.0  # RK4: weighted sum of stage velocities
            s_dof[b, d, SD_RK4_ACC] = 0.0  # RK4: weighted sum of stage accelerations
            s_dof[b, d, SD_EXT] = 0.0  # generalized force of the external impulses (couplings)
        for k in range(n_evals):
            if k > 0 or fresh == 0:
                forward_kinematics(b, 0, s_qs, s_lpos, s_lquat, link_f, link_i, joint_f, joint_i, s_R, s_com,
                                   s_janchor, s_jaxis, s_ref)
            else:
                for l in range(links_pos.shape[2]):
                    s_lpos[0, b, l] = links_pos[f, b, l]
                    s_lquat[0, b, l] = links_quat[f, b, l]
            dof_motions(b, 0, s_vs, link_i, joint_i, s_R, s_janchor, s_jaxis, s_ref, s_cdof, s_cdof_dot, s_cvel)
            if k == 0:
                external_forces(b, f, h, links_ext_impulse, link_i, dof_i, s_com, s_ref, s_cdof, s_dof)
            bias_and_mass(b, 0, s_qs, s_vs, params_f, link_f, link_i, dof_f, dof_i, dofs_ctrl_mode, dofs_ctrl_force, dofs_ctrl_pos,
                          dofs_ctrl_vel, dofs_kp, dofs_kv, hi, s_R, s_com, s_ref, s_cdof, s_cdof_dot, s_cvel, s_cacc,
                          s_cfrc, s_crb_m, s_crb_mc, s_crb_io, s_mass, s_dof)
            smooth_acceleration(b, 0, hi, s_qs, s_vs, params_i, dof_f, dof_i, ten_f, ten_i, dofs_ctrl_mode, dofs_ctrl_force,
                                dofs_ctrl_pos, dofs_ctrl_vel, dofs_kp, dofs_kv, s_mass, s_dof)
            if k < 4 and rk4:
                weight = (1.0 if k == 0 or k == 3 else 2.0) / 6.0
                for d in range(n_v):
                    s_dof[b, d, SD_RK4_VEL] = s_dof[b, d, SD_RK4_VEL] + weight * s_vs[0, b, d]
                    s_dof[b, d, SD_RK4_ACC] = s_dof[b, d, SD_RK4_ACC] + weight * s_dof[b, d, SD_ACC]
                if k < 3:
                    step = 0.5 * h if k < 2 else h
                    advance_q(b, qpos, f, s_qs, 0, s_vs, 0, step, joint_i)  # q0 moved by the stage velocity
                    for d in range(n_v):
                        s_vs[0, b, d] = dofs_vel[f, b, d] + step * s_dof[b, d, SD_ACC]
                else:  # back to the start for the constraint stage
                    for i in range(n_q):
                        s_qs[0, b, i] = qpos[f, b, i]
                    for d in range(n_v):
                        s_vs[0, b, d] = dofs_vel[f, b, d]
        for d in range(n_v):
            acc = s_dof[b, d, SD_RK4_ACC] if rk4 else s_dof[b, d, SD_ACC]
            s_dof[b, d, SD_VEL] = dofs_vel[f, b, d] + h * acc  # the unconstrained velocity
            s_dof[b, d, SD_FREE_VEL] = s_dof[b, d, SD_VEL]
        solve_constraints(b, f, fn, h, qpos, params_f, params_i, link_i, dof_f, dof_i, ten_f, ten_i, contact_impulse,
                          limit_impulse, eq_type, eq_obj, eq_data, eq_active, equality_impulse, s_cdof, s_ref, s_R,
                          s_mass, s_dof, s_con_f, s_con_i, s_J, s_W, s_row_f, s_row_i, s_hist)
        for d in range(n_v):
            v = s_dof[b, d, SD_VEL]
            dofs_acc[fn, b, d] = (v - dofs_vel[f, b, d]) / h
            dofs_vel[fn, b, d] = v
            # the velocity positions move with: the new one (Euler), or the RK4 average plus the constraint change;
            # and the position pass's pseudo-velocity
            s_vs[0, b, d] = (s_dof[b, d, SD_RK4_VEL] + v - s_dof[b, d, SD_FREE_VEL] if rk4 else v) + s_dof[b, d, SD_PSEUDO]
        advance_q(b, qpos, f, qpos, fn, s_vs, 0, h, joint_i)
        forward_kinematics(b, fn, qpos, links_pos, links_quat, link_f, link_i, joint_f, joint_i, s_R, s_com,
                           s_janchor, s_jaxis, s_ref)
        for l in range(links_ext_impulse.shape[2]):  # applied: the couplings of this substep fill frame fn
            for c in ti.static(range(6)):
                links_ext_impulse[fn, b, l, c] = 0.0


@ti.kernel
def mass_matrix(qpos: nd(ndim=3), dofs_vel: nd(ndim=3), links_pos: nd(dtype=V3, ndim=3),
                links_quat: nd(dtype=V4, ndim=3), dofs_ctrl_mode: nd(ndim=2), dofs_ctrl_force: nd(ndim=2),
                dofs_ctrl_pos: nd(ndim=2), dofs_ctrl_vel: nd(ndim=2), dofs_kp: nd(ndim=2), dofs_kv: nd(ndim=2),
                # model
                params_f: nd(ndim=1), link_f: nd(ndim=3), link_i: nd(ndim=2), joint_f: nd(ndim=2),
                joint_i: nd(ndim=2), dof_f: nd(ndim=3), dof_i: nd(ndim=2),
                # scratch
                s_R: nd(ndim=2), s_com: nd(ndim=2), s_janchor: nd(ndim=2), s_jaxis: nd(ndim=2), s_ref: nd(ndim=2),
                s_cdof: nd(ndim=2), s_cdof_dot: nd(ndim=2), s_cvel: nd(ndim=2), s_cacc: nd(ndim=2),
                s_cfrc: nd(ndim=2), s_crb_m: nd(ndim=2), s_crb_mc: nd(ndim=2), s_crb_io: nd(ndim=2),
                s_mass: nd(ndim=3), s_dof: nd(ndim=3)):
    """The joint-space mass matrix plus armature of each row at qpos[0] into s_mass: a substep's own kinematics,
    dof motions and CRBA (bias_and_mass at a step of 0, where its implicit terms vanish; the bias it also computes
    is not read). For the inverse weights (genesis_rigid.ik.mass_matrix)."""
    if ti.static(SERIAL):
        ti.loop_config(serialize=True)
    for b in range(qpos.shape[1]):
        forward_kinematics(b, 0, qpos, links_pos, links_quat, link_f, link_i, joint_f, joint_i, s_R, s_com,
                           s_janchor, s_jaxis, s_ref)
        dof_motions(b, 0, dofs_vel, link_i, joint_i, s_R, s_janchor, s_jaxis, s_ref, s_cdof, s_cdof_dot, s_cvel)
        bias_and_mass(b, 0, qpos, dofs_vel, params_f, link_f, link_i, dof_f, dof_i, dofs_ctrl_mode, dofs_ctrl_force,
                      dofs_ctrl_pos, dofs_ctrl_vel, dofs_kp, dofs_kv, 0.0, s_R, s_com, s_ref, s_cdof, s_cdof_dot,
                      s_cvel, s_cacc, s_cfrc, s_crb_m, s_crb_mc, s_crb_io, s_mass, s_dof)


@func
def external_forces(b, f, h, ext_impulse, link_i, dof_i, s_com, s_ref, s_cdof, s_dof):
    """s_dof[b, :, SD_EXT] = J^T (impulses of frame f / h): each link's (linear, angular-about-its-com) impulse becomes
    the spatial force (torque about the origin of the dof's link, force) and acts on every dof that moves the link."""
    for l in range(ext_impulse.shape[2]):
        lin = ti.Vector([ext_impulse[f, b, l, 0], ext_impulse[f, b, l, 1], ext_impulse[f, b, l, 2]])
        ang = ti.Vector([ext_impulse[f, b, l, 3], ext_impulse[f, b, l, 4], ext_impulse[f, b, l, 5]])
        if lin.norm() + ang.norm() > 0:
            d = link_i[l, LI_LAST_DOF]
            while d >= 0:
                torque = ang + ((s_ref[b, l] - s_ref[b, dof_i[d, DI_LINK]]) + s_com[b, l]).cross(lin)
                cd = s_cdof[b, d]
                s_dof[b, d, SD_EXT] = s_dof[b, d, SD_EXT] + (cd[0] * torque[0] + cd[1] * torque[1] + cd[2] * torque[2]
                                                   + cd[3] * lin[0] + cd[4] * lin[1] + cd[5] * lin[2]) / h
                d = dof_i[d, DI_PARENT]


@ti.kernel
def collider_geometry(fn: ti.i32,
                      # state (all frames)
                      qpos: nd(ndim=3), dofs_vel: nd(ndim=3), links_pos: nd(dtype=V3, ndim=3),
                      links_quat: nd(dtype=V4, ndim=3),
                      # model
                      link_f: nd(ndim=3), link_i: nd(ndim=2), joint_f: nd(ndim=2), joint_i: nd(ndim=2),
                      geom_f: nd(ndim=2), geom_i: nd(ndim=2),
                      # scratch
                      s_R: nd(ndim=2), s_com: nd(ndim=2), s_janchor: nd(ndim=2), s_jaxis: nd(ndim=2), s_ref: nd(ndim=2),
                      s_cdof: nd(ndim=2), s_cdof_dot: nd(ndim=2), s_cvel: nd(ndim=2),
                      # collider view
                      geom_pos: nd(dtype=V3, ndim=2), geom_quat: nd(dtype=V4, ndim=2), body_com: nd(dtype=V3, ndim=2),
                      body_lin_vel: nd(dtype=V3, ndim=2), body_ang_vel: nd(dtype=V3, ndim=2)):
    """The ColliderView arrays at frame fn: geom world poses, link centres of mass and velocities."""
    if ti.static(SERIAL):
        ti.loop_config(serialize=True)
    spread = env_spread(qpos.shape[1], SERIAL)
    for t in range(qpos.shape[1] * spread):
        if t % spread != 0:
            continue
        b = t // spread
        forward_kinematics(b, fn, qpos, links_pos, links_quat, link_f, link_i, joint_f, joint_i, s_R, s_com,
                           s_janchor, s_jaxis, s_ref)
        dof_motions(b, fn, dofs_vel, link_i, joint_i, s_R, s_janchor, s_jaxis, s_ref, s_cdof, s_cdof_dot, s_cvel)
        for l in range(link_i.shape[0]):
            cvel = s_cvel[b, l]
            omega = ti.Vector([cvel[0], cvel[1], cvel[2]])
            body_com[b, l] = s_ref[b, l] + s_com[b, l]
            body_ang_vel[b, l] = omega
            body_lin_vel[b, l] = ti.Vector([cvel[3], cvel[4], cvel[5]]) + omega.cross(s_com[b, l])
        for g in range(geom_pos.shape[1]):
            l = geom_i[g, GI_LINK]
            geom_pos[b, g] = links_pos[fn, b, l] + s_R[b, l] @ v3(geom_f, g, GF_POS)
            geom_quat[b, g] = quat_mul(links_quat[fn, b, l], v4(geom_f, g, GF_QUAT))






# -- differentiable mode: the reverse of `substep` (Euler), in three kernels (Taichi takes at most 64 arguments a
# kernel, and its compile time grows faster than a kernel's size). The solver re-runs the plain substep f -> fn
# first, so every scratch array holds what the forward computed; then, per environment, each stage's reverse (beside
# its forward in kernels_<stage>.py) runs, in the opposite order of the forward's. The adjoint arrays g_* are
# per-substep scratch (zeroed here; g_link_f by the solver); G_* are the state's gradients: frame fn's read, frame
# f's accumulated. g_q1 / g_q2: adjoints of qpos[f] / qpos[fn]; g_v: of dofs_vel[f]; g_vu: of the velocity the
# positions advanced with.

@ti.kernel
def substep_reverse_head(f: ti.i32, fn: ti.i32,
                         # state (all frames)
                         qpos: nd(ndim=3), dofs_vel: nd(ndim=3), links_pos: nd(dtype=V3, ndim=3),
                         links_quat: nd(dtype=V4, ndim=3), contact_impulse: nd(ndim=4),
                         # model
                         params_f: nd(ndim=1), params_i: nd(ndim=1), link_f: nd(ndim=3), link_i: nd(ndim=2),
                         joint_f: nd(ndim=2), joint_i: nd(ndim=2), dof_f: nd(ndim=3), dof_i: nd(ndim=2),
                         ten_f: nd(ndim=2), ten_i: nd(ndim=2),
                         # scratch
                         s_vs: nd(ndim=3), s_R: nd(ndim=2), s_com: nd(ndim=2), s_janchor: nd(ndim=2),
                         s_jaxis: nd(ndim=2), s_ref: nd(ndim=2), s_cdof: nd(ndim=2), s_cdof_dot: nd(ndim=2),
                         s_cvel: nd(ndim=2),
                         s_mass: nd(ndim=3), s_dof: nd(ndim=3), s_con_f: nd(ndim=3), s_con_i: nd(ndim=3),
                         s_J: nd(ndim=3), s_W: nd(ndim=3), s_row_f: nd(ndim=3), s_row_i: nd(ndim=3),
                         s_hist: nd(ndim=3),
                         # adjoints (per substep)
                         g_q1: nd(ndim=2), g_q2: nd(ndim=2), g_v: nd(ndim=2), g_vu: nd(ndim=2), g_lpos: nd(ndim=2),
                         g_lquat: nd(ndim=2), g_R: nd(ndim=2), g_com: nd(ndim=2), g_janchor: nd(ndim=2),
                         g_jaxis: nd(ndim=2), g_cdof: nd(ndim=2), g_mass: nd(ndim=3), g_dof: nd(ndim=3),
                         g_con: nd(ndim=3), g_imp_in: nd(ndim=3), g_imp_out: nd(ndim=3), g_link_f: nd(ndim=3),
                         g_dof_f: nd(ndim=3), g_row: nd(ndim=3), g_J: nd(ndim=3), g_W: nd(ndim=3), g_vs: nd(ndim=3),
                         # gradients (the state's and the collider view's .grad)
                         G_qpos: nd(ndim=3), G_dofs_vel: nd(ndim=3), G_dofs_acc: nd(ndim=3), G_links_pos: nd(ndim=4),
                         G_links_quat: nd(ndim=4), G_contact_impulse: nd(ndim=4), G_limit_impulse: nd(ndim=3)):
    """Frame fn back to the constraint stage: the kinematics of fn, the positions' advance, the velocity and
    acceleration written, the constraint stage and its contact frames at frame f's poses; leaves the adjoint of the
    smooth acceleration in g_dof[:, :, 1]. The kinematics and dof motions of frame f are computed again (the
    collider view's kernel, between the re-run and its reverse, leaves frame fn's in the scratch arrays)."""
    h = params_f[PF_DT]
    n_q = qpos.shape[2]
    n_v = g_v.shape[1]
    if ti.static(SERIAL):
        ti.loop_config(serialize=True)
    spread = env_spread(qpos.shape[1], SERIAL)
    for t in range(qpos.shape[1] * spread):
        if t % spread != 0:
            continue
        b = t // spread
        zero_link_adjoints(b, g_lpos, g_lquat, g_R, g_com, g_janchor, g_jaxis)
        for d in range(n_v):
            g_v[b, d] = 0.0
            g_vu[b, d] = 0.0
            g_cdof[b, d] = ti.Vector.zero(float, 6)
            for k in range(g_dof.shape[2]):
                g_dof[b, d, k] = 0.0
            for i in range(g_mass.shape[2]):
                g_mass[b, d, i] = 0.0
            for k in range(g_dof_f.shape[2]):
                g_dof_f[b, d, k] = 0.0
        for s in range(g_con.shape[1]):
            for k in range(g_con.shape[2]):
                g_con[b, s, k] = 0.0
            for k in ti.static(range(3)):
                g_imp_in[b, s, k] = 0.0
                g_imp_out[b, s, k] = G_contact_impulse[fn, b, s, k]
        for i in range(n_q):
            g_q1[b, i] = 0.0
            g_q2[b, i] = G_qpos[fn, b, i]
        # the kinematics of frame fn
        for l in range(G_links_pos.shape[2]):
            g_lpos[b, l] = ti.Vector([G_links_pos[fn, b, l, 0], G_links_pos[fn, b, l, 1], G_links_pos[fn, b, l, 2]])
            g_lquat[b, l] = ti.Vector([G_links_quat[fn, b, l, 0], G_links_quat[fn, b, l, 1], G_links_quat[fn, b, l, 2],
                                       G_links_quat[fn, b, l, 3]])
        forward_kinematics_reverse(b, fn, qpos, links_pos, links_quat, link_f, link_i, joint_f, joint_i, s_R, g_q2,
                                   g_lpos, g_lquat, g_R, g_com, g_janchor, g_jaxis, g_link_f)
        # the advance: qpos[fn] from qpos[f] and s_vs = the new velocity plus the pseudo-velocity
        advance_q_reverse(b, qpos, f, s_vs, 0, h, joint_i, g_q2, g_q1, g_vu)
        for d in range(n_v):
            g_dof[b, d, GD_VEL] = g_vu[b, d] + G_dofs_vel[fn, b, d] + G_dofs_acc[fn, b, d] / h
            g_dof[b, d, GD_PSEUDO] = g_vu[b, d]
            g_v[b, d] = -G_dofs_acc[fn, b, d] / h
        # the constraint stage, at frame f's poses
        zero_link_adjoints(b, g_lpos, g_lquat, g_R, g_com, g_janchor, g_jaxis)
        forward_kinematics(b, f, qpos, links_pos, links_quat, link_f, link_i, joint_f, joint_i, s_R, s_com,
                           s_janchor, s_jaxis, s_ref)
        dof_motions(b, f, dofs_vel, link_i, joint_i, s_R, s_janchor, s_jaxis, s_ref, s_cdof, s_cdof_dot, s_cvel)


@ti.kernel
def substep_reverse_constraints(f: ti.i32, fn: ti.i32,
                                # state (all frames)
                                qpos: nd(ndim=3), contact_impulse: nd(ndim=4), eq_type: nd(ndim=2),
                                eq_obj: nd(ndim=3), eq_data: nd(ndim=3), eq_active: nd(ndim=2),
                                # model
                                params_f: nd(ndim=1), params_i: nd(ndim=1), link_i: nd(ndim=2), dof_f: nd(ndim=3),
                                dof_i: nd(ndim=2), ten_f: nd(ndim=2), ten_i: nd(ndim=2),
                                # scratch
                                s_R: nd(ndim=2), s_ref: nd(ndim=2), s_cdof: nd(ndim=2), s_mass: nd(ndim=3),
                                s_dof: nd(ndim=3), s_con_f: nd(ndim=3), s_con_i: nd(ndim=3), s_J: nd(ndim=3),
                                s_W: nd(ndim=3), s_row_f: nd(ndim=3), s_row_i: nd(ndim=3), s_hist: nd(ndim=3),
                                # adjoints (per substep)
                                g_q1: nd(ndim=2), g_v: nd(ndim=2), g_lpos: nd(ndim=2), g_R: nd(ndim=2),
                                g_cdof: nd(ndim=2), g_mass: nd(ndim=3), g_dof: nd(ndim=3), g_con: nd(ndim=3),
                                g_imp_in: nd(ndim=3), g_imp_out: nd(ndim=3), g_dof_f: nd(ndim=3), g_row: nd(ndim=3),
                                g_J: nd(ndim=3), g_W: nd(ndim=3), g_vs: nd(ndim=3),
                                # gradients (the state's)
                                G_contact_impulse: nd(ndim=4), G_limit_impulse: nd(ndim=3),
                                G_equality_impulse: nd(ndim=4)):
    """The constraint stage's reverse at frame f's poses (after substep_reverse_head, which leaves frame f's
    kinematics and dof motions in the scratch): the adjoints of the velocity and pseudo-velocity into those of the
    unconstrained velocity, the mass matrix, the rows' geometry and the warm starts; leaves the adjoint of the
    smooth acceleration in g_dof[:, :, GD_ACC]. (A kernel of its own: Taichi takes at most 64 arguments a kernel.)"""
    h = params_f[PF_DT]
    n_v = g_v.shape[1]
    if ti.static(SERIAL):
        ti.loop_config(serialize=True)
    spread = env_spread(qpos.shape[1], SERIAL)
    for t in range(qpos.shape[1] * spread):
        if t % spread != 0:
            continue
        b = t // spread
        solve_constraints_reverse(b, f, fn, h, qpos, params_f, params_i, link_i, dof_f, dof_i, ten_f, ten_i,
                                  contact_impulse, eq_type, eq_obj, eq_data, eq_active, s_cdof, s_ref, s_R, s_mass,
                                  s_dof, s_con_f, s_con_i, s_J, s_W, s_row_f, s_row_i, s_hist, g_dof, g_mass, g_cdof,
                                  g_con, g_imp_in, g_imp_out, g_q1, g_dof_f, g_row, g_J, g_W, g_vs, g_lpos, g_R,
                                  G_limit_impulse, G_equality_impulse)
        for s in range(g_imp_in.shape[1]):
            for k in ti.static(range(3)):
                G_contact_impulse[f, b, s, k] = G_contact_impulse[f, b, s, k] + g_imp_in[b, s, k]
        for d in range(n_v):  # v_free = v + h qacc
            g_v[b, d] = g_v[b, d] + g_dof[b, d, GD_FREE_VEL]
            g_dof[b, d, GD_ACC] = h * g_dof[b, d, GD_FREE_VEL]


@ti.kernel
def substep_reverse_dynamics(f: ti.i32,
                             # state (all frames)
                             qpos: nd(ndim=3), dofs_vel: nd(ndim=3), links_ext_impulse: nd(ndim=4),
                             dofs_ctrl_mode: nd(ndim=2), dofs_ctrl_force: nd(ndim=2), dofs_ctrl_pos: nd(ndim=2),
                             dofs_ctrl_vel: nd(ndim=2), dofs_kp: nd(ndim=2), dofs_kv: nd(ndim=2),
                             # model
                             params_f: nd(ndim=1), params_i: nd(ndim=1), link_f: nd(ndim=3), link_i: nd(ndim=2),
                             dof_f: nd(ndim=3), dof_i: nd(ndim=2), ten_f: nd(ndim=2), ten_i: nd(ndim=2),
                             # scratch
                             s_R: nd(ndim=2), s_com: nd(ndim=2), s_ref: nd(ndim=2), s_cdof: nd(ndim=2),
                             s_cdof_dot: nd(ndim=2), s_cvel: nd(ndim=2), s_cacc: nd(ndim=2), s_cfrc: nd(ndim=2),
                             s_crb_m: nd(ndim=2), s_crb_mc: nd(ndim=2), s_crb_io: nd(ndim=2), s_mass: nd(ndim=3),
                             s_dof: nd(ndim=3),
                             # adjoints (per substep)
                             g_q1: nd(ndim=2), g_v: nd(ndim=2), g_R: nd(ndim=2), g_com: nd(ndim=2),
                             g_lpos: nd(ndim=2), g_cdof: nd(ndim=2), g_cdof_dot: nd(ndim=2), g_cvel: nd(ndim=2),
                             g_mass: nd(ndim=3), g_dof: nd(ndim=3), g_link_f: nd(ndim=3), g_dof_f: nd(ndim=3), g_ctrl: nd(ndim=3),
                             g_cacc: nd(ndim=2), g_cfrc: nd(ndim=2), g_crb_m: nd(ndim=2), g_crb_mc: nd(ndim=2),
                             g_crb_io: nd(ndim=2),
                             # gradients (the state's and the collider view's .grad)
                             G_links_ext_impulse: nd(ndim=4)):
    """The smooth dynamics backwards: the acceleration's solve and generalized forces, the couplings' impulses,
    the bias forces and the implicit mass matrix."""
    h = params_f[PF_DT]
    if ti.static(SERIAL):
        ti.loop_config(serialize=True)
    spread = env_spread(qpos.shape[1], SERIAL)
    for t in range(qpos.shape[1] * spread):
        if t % spread != 0:
            continue
        b = t // spread
        for l in range(g_cvel.shape[1]):  # (bias_and_mass_reverse zeroes its own g_cacc, g_cfrc, g_crb_*)
            g_cvel[b, l] = ti.Vector.zero(float, 6)
        for d in range(g_cdof_dot.shape[1]):
            g_cdof_dot[b, d] = ti.Vector.zero(float, 6)
            for k in ti.static(range(5)):
                g_ctrl[b, d, k] = 0.0
        smooth_acceleration_reverse(b, f, h, qpos, dofs_vel, params_i, dof_f, dof_i, ten_f, ten_i, dofs_ctrl_mode,
                                    dofs_ctrl_force, dofs_ctrl_pos, dofs_ctrl_vel, dofs_kp, dofs_kv, s_crb_m, s_crb_mc,
                                    s_crb_io, s_cdof, s_mass, s_dof, g_q1, g_v, g_dof, g_mass, g_dof_f, g_ctrl)
        external_forces_reverse(b, f, h, links_ext_impulse, link_i, dof_i, s_com, s_ref, s_cdof, g_dof, g_com, g_lpos,
                                g_cdof, G_links_ext_impulse)
        bias_and_mass_reverse(b, f, qpos, dofs_vel, params_f, link_f, link_i, dof_f, dof_i, dofs_ctrl_mode, dofs_ctrl_force,
                              dofs_ctrl_pos, dofs_ctrl_vel, dofs_kp, dofs_kv, h, s_R, s_com, s_ref, s_cdof, s_cdof_dot,
                              s_cvel, s_cacc, s_cfrc, s_crb_m, s_crb_mc, s_crb_io, g_v, g_R, g_com, g_lpos, g_cdof,
                              g_cdof_dot, g_cvel, g_mass, g_dof, g_link_f, g_dof_f, g_ctrl, g_cacc, g_cfrc, g_crb_m,
                              g_crb_mc, g_crb_io)


@ti.kernel
def substep_reverse_kinematics(f: ti.i32,
                               # state (all frames)
                               qpos: nd(ndim=3), dofs_vel: nd(ndim=3), links_pos: nd(dtype=V3, ndim=3),
                               links_quat: nd(dtype=V4, ndim=3),
                               # model
                               link_f: nd(ndim=3), link_i: nd(ndim=2), joint_f: nd(ndim=2), joint_i: nd(ndim=2),
                               pair_i: nd(ndim=2), geom_i: nd(ndim=2), geom_f: nd(ndim=2),
                               # scratch
                               s_con_f: nd(ndim=3), s_con_i: nd(ndim=3), s_R: nd(ndim=2), s_janchor: nd(ndim=2),
                               s_jaxis: nd(ndim=2), s_ref: nd(ndim=2), s_cdof: nd(ndim=2), s_cvel: nd(ndim=2),
                               # adjoints (per substep)
                               g_con: nd(ndim=3), g_q1: nd(ndim=2), g_v: nd(ndim=2), g_lpos: nd(ndim=2),
                               g_lquat: nd(ndim=2), g_R: nd(ndim=2), g_com: nd(ndim=2), g_janchor: nd(ndim=2),
                               g_jaxis: nd(ndim=2), g_cdof: nd(ndim=2), g_cdof_dot: nd(ndim=2), g_cvel: nd(ndim=2),
                               g_link_f: nd(ndim=3),
                               # gradients (the state's and the collider view's .grad)
                               G_qpos: nd(ndim=3), G_dofs_vel: nd(ndim=3)):
    """The contacts' frames, the dof motions and the kinematics of frame f backwards; then the gradients of qpos[f]
    and dofs_vel[f]."""
    if ti.static(SERIAL):
        ti.loop_config(serialize=True)
    spread = env_spread(qpos.shape[1], SERIAL)
    for t in range(qpos.shape[1] * spread):
        if t % spread != 0:
            continue
        b = t // spread
        contact_frame_reverse(b, f, links_pos, pair_i, geom_i, geom_f, s_R, s_con_f, s_con_i, g_con, g_lpos, g_R)
        state_reverse(b, f, qpos, dofs_vel, links_pos, links_quat, link_f, link_i, joint_f, joint_i, s_R, s_janchor,
                      s_jaxis, s_ref, s_cdof, s_cvel, g_q1, g_v, g_lpos, g_lquat, g_R, g_com, g_janchor, g_jaxis,
                      g_cdof, g_cdof_dot, g_cvel, g_link_f, G_qpos, G_dofs_vel)


@func
def state_reverse(b, f, qpos, dofs_vel, links_pos, links_quat, link_f, link_i, joint_f, joint_i, s_R, s_janchor,
                  s_jaxis, s_ref, s_cdof, s_cvel, g_q, g_v, g_lpos, g_lquat, g_R, g_com, g_janchor, g_jaxis, g_cdof,
                  g_cdof_dot, g_cvel, g_link_f, G_qpos, G_vel):
    """The dof motions and the kinematics of frame f backwards, then the adjoints of qpos[f] and dofs_vel[f] (g_q,
    g_v) added to the state's gradients of frame f."""
    dof_motions_reverse(b, f, dofs_vel, link_i, joint_i, s_R, s_janchor, s_jaxis, s_ref, s_cdof, s_cvel, g_v, g_R,
                        g_janchor, g_jaxis, g_lpos, g_cdof, g_cdof_dot, g_cvel)
    forward_kinematics_reverse(b, f, qpos, links_pos, links_quat, link_f, link_i, joint_f, joint_i, s_R, g_q, g_lpos,
                               g_lquat, g_R, g_com, g_janchor, g_jaxis, g_link_f)
    for i in range(qpos.shape[2]):
        G_qpos[f, b, i] = G_qpos[f, b, i] + g_q[b, i]
    for d in range(dofs_vel.shape[2]):
        G_vel[f, b, d] = G_vel[f, b, d] + g_v[b, d]


@func
def zero_link_adjoints(b, g_lpos, g_lquat, g_R, g_com, g_janchor, g_jaxis):
    for l in range(g_lpos.shape[1]):
        g_lpos[b, l] = ti.Vector.zero(float, 3)
        g_lquat[b, l] = ti.Vector.zero(float, 4)
        g_R[b, l] = ti.Matrix.zero(float, 3, 3)
        g_com[b, l] = ti.Vector.zero(float, 3)
    for j in range(g_janchor.shape[1]):
        g_janchor[b, j] = ti.Vector.zero(float, 3)
        g_jaxis[b, j] = ti.Vector.zero(float, 3)


@func
def external_forces_reverse(b, f, h, ext_impulse, link_i, dof_i, s_com, s_ref, s_cdof, g_dof, g_com, g_lpos, g_cdof,
                            G_ext):
    """The reverse of external_forces: from the adjoint of the generalized force g_dof[b, :, GD_EXT], the adjoints of the
    impulses (G_ext[f, b, l, :], accumulated), of the centres of mass, of the links' origins and of the motion
    subspaces."""
    for l in range(ext_impulse.shape[2]):
        lin = ti.Vector([ext_impulse[f, b, l, 0], ext_impulse[f, b, l, 1], ext_impulse[f, b, l, 2]])
        ang = ti.Vector([ext_impulse[f, b, l, 3], ext_impulse[f, b, l, 4], ext_impulse[f, b, l, 5]])
        g_torque = ti.Vector([0.0, 0.0, 0.0])
        g_lin = ti.Vector([0.0, 0.0, 0.0])
        d = link_i[l, LI_LAST_DOF]
        while d >= 0:
            g = g_dof[b, d, GD_EXT] / h
            cd = s_cdof[b, d]
            ld = dof_i[d, DI_LINK]
            arm = (s_ref[b, l] - s_ref[b, ld]) + s_com[b, l]
            torque = ang + arm.cross(lin)
            g_tq = g * ti.Vector([cd[0], cd[1], cd[2]])
            g_torque += g_tq
            g_lin += g * ti.Vector([cd[3], cd[4], cd[5]]) + g_tq.cross(arm)
            g_arm = lin.cross(g_tq)
            g_com[b, l] = g_com[b, l] + g_arm
            add_ref_adjoint(b, l, g_arm, g_lpos)
            add_ref_adjoint(b, ld, -g_arm, g_lpos)
            g_cdof[b, d] = g_cdof[b, d] + g * ti.Vector([torque[0], torque[1], torque[2], lin[0], lin[1], lin[2]])
            d = dof_i[d, DI_PARENT]
        for c in ti.static(range(3)):
            G_ext[f, b, l, c] = G_ext[f, b, l, c] + g_lin[c]
            G_ext[f, b, l, 3 + c] = G_ext[f, b, l, 3 + c] + g_torque[c]


@ti.kernel
def collider_geometry_reverse(fn: ti.i32,
                              # state (all frames)
                              qpos: nd(ndim=3), dofs_vel: nd(ndim=3), links_pos: nd(dtype=V3, ndim=3),
                              links_quat: nd(dtype=V4, ndim=3),
                              # model
                              link_f: nd(ndim=3), link_i: nd(ndim=2), joint_f: nd(ndim=2), joint_i: nd(ndim=2),
                              geom_f: nd(ndim=2), geom_i: nd(ndim=2),
                              # scratch
                              s_R: nd(ndim=2), s_com: nd(ndim=2), s_janchor: nd(ndim=2), s_jaxis: nd(ndim=2),
                              s_ref: nd(ndim=2),
                              s_cdof: nd(ndim=2), s_cdof_dot: nd(ndim=2), s_cvel: nd(ndim=2),
                              # adjoints (per substep)
                              g_q2: nd(ndim=2), g_vu: nd(ndim=2), g_lpos: nd(ndim=2), g_lquat: nd(ndim=2),
                              g_R: nd(ndim=2), g_com: nd(ndim=2), g_janchor: nd(ndim=2), g_jaxis: nd(ndim=2),
                              g_cdof: nd(ndim=2), g_cdof_dot: nd(ndim=2), g_cvel: nd(ndim=2), g_link_f: nd(ndim=3),
                              # gradients (the state's and the collider view's .grad)
                              G_geom_pos: nd(ndim=3), G_geom_quat: nd(ndim=3), G_body_com: nd(ndim=3),
                              G_body_lin_vel: nd(ndim=3), G_body_ang_vel: nd(ndim=3), G_body_quat: nd(ndim=3),
                              G_qpos: nd(ndim=3), G_dofs_vel: nd(ndim=3)):
    """The reverse of collider_geometry: the gradients of the ColliderView's arrays (G_*: geom poses, centres of
    mass, link velocities and orientations at frame fn) into those of qpos[fn] and dofs_vel[fn]."""
    if ti.static(SERIAL):
        ti.loop_config(serialize=True)
    spread = env_spread(qpos.shape[1], SERIAL)
    for t in range(qpos.shape[1] * spread):
        if t % spread != 0:
            continue
        b = t // spread
        zero_link_adjoints(b, g_lpos, g_lquat, g_R, g_com, g_janchor, g_jaxis)
        for l in range(g_cvel.shape[1]):
            g_cvel[b, l] = ti.Vector.zero(float, 6)
        for d in range(g_vu.shape[1]):
            g_vu[b, d] = 0.0
            g_cdof[b, d] = ti.Vector.zero(float, 6)
            g_cdof_dot[b, d] = ti.Vector.zero(float, 6)
        for i in range(g_q2.shape[1]):
            g_q2[b, i] = 0.0
        forward_kinematics(b, fn, qpos, links_pos, links_quat, link_f, link_i, joint_f, joint_i, s_R, s_com,
                           s_janchor, s_jaxis, s_ref)
        dof_motions(b, fn, dofs_vel, link_i, joint_i, s_R, s_janchor, s_jaxis, s_ref, s_cdof, s_cdof_dot, s_cvel)
        for g in range(ti.min(G_geom_pos.shape[1], geom_i.shape[0])):
            l = geom_i[g, GI_LINK]
            if l < 0:
                continue
            gp = ti.Vector([G_geom_pos[b, g, 0], G_geom_pos[b, g, 1], G_geom_pos[b, g, 2]])
            gq = ti.Vector([G_geom_quat[b, g, 0], G_geom_quat[b, g, 1], G_geom_quat[b, g, 2], G_geom_quat[b, g, 3]])
            g_lpos[b, l] = g_lpos[b, l] + gp
            g_R[b, l] = g_R[b, l] + gp.outer_product(v3(geom_f, g, GF_POS))
            ga, _ = quat_mul_reverse(links_quat[fn, b, l], v4(geom_f, g, GF_QUAT), gq)
            g_lquat[b, l] = g_lquat[b, l] + ga
        for l in range(link_i.shape[0]):
            com = s_com[b, l]
            cvel = s_cvel[b, l]
            omega = ti.Vector([cvel[0], cvel[1], cvel[2]])
            glin = ti.Vector([G_body_lin_vel[b, l, 0], G_body_lin_vel[b, l, 1], G_body_lin_vel[b, l, 2]])
            gomega = ti.Vector([G_body_ang_vel[b, l, 0], G_body_ang_vel[b, l, 1], G_body_ang_vel[b, l, 2]]) + com.cross(glin)
            g_cvel[b, l] = g_cvel[b, l] + spatial(gomega, glin)
            gbc = ti.Vector([G_body_com[b, l, 0], G_body_com[b, l, 1], G_body_com[b, l, 2]])
            g_com[b, l] = g_com[b, l] + (gbc + glin.cross(omega))
            add_ref_adjoint(b, l, gbc, g_lpos)
            g_lquat[b, l] = g_lquat[b, l] + ti.Vector([G_body_quat[b, l, 0], G_body_quat[b, l, 1], G_body_quat[b, l, 2],
                                                       G_body_quat[b, l, 3]])
        state_reverse(b, fn, qpos, dofs_vel, links_pos, links_quat, link_f, link_i, joint_f, joint_i, s_R, s_janchor,
                      s_jaxis, s_ref, s_cdof, s_cvel, g_q2, g_vu, g_lpos, g_lquat, g_R, g_com, g_janchor, g_jaxis,
                      g_cdof, g_cdof_dot, g_cvel, g_link_f, G_qpos, G_dofs_vel)


# each kernel's serial copy, for a batch of one environment (genesis_core.launch.serial_variant)
SERIAL_OF = {k: serial_variant(k) for k in (kinematics, collide, collide_meshes, collide_terrain, substep,
                                            collider_geometry, substep_reverse_head, substep_reverse_constraints, substep_reverse_dynamics,
                                            substep_reverse_kinematics, collider_geometry_reverse, mass_matrix)}
# both copies compiled without fast math: they then give the same bits, and the solver runs either (launch_mode)
exact_math(*SERIAL_OF, *SERIAL_OF.values())
