"""Joint-space dynamics of one environment b: composite-rigid-body mass matrix, recursive Newton-Euler bias
forces (Coriolis, centrifugal, gravity), and a factorisation and solve that follow the tree's sparsity.

M qacc = tau - c(q, qdot): with each link's spatial quantities about its own origin (kernels_kinematics), the bias
c is RNE with qacc = 0 and the base accelerating at -g (Featherstone, Rigid Body Dynamics Algorithms, 5.3); M by
CRBA (6.2). Accelerations pass from a parent to its child, forces and composite inertias from a child to its
parent, shifted between their origins; a mass-matrix entry between a dof and an ancestor's takes the force of the
dof's composite inertia shifted to the ancestor's link. The factorised matrix is M + diag(armature + h (damping +
kv) + h^2 kp): damping and PD gains are integrated implicitly, as in MuJoCo's Euler integrator, which keeps stiff
position servos stable at large steps; joint springs are explicit, as MuJoCo's.
"""

import taichi as ti

from .kernels_math import (force_cross, force_shift, force_shift_reverse, func, inertia_apply, inertia_shift,
                           inertia_shift_reverse, motion_shift, motion_shift_reverse, quat_conj, quat_mul,
                           quat_mul_reverse, quat_to_mat, quat_to_mat_reverse, spatial, v3e, v4e)
from .kernels_kinematics import add_ref_adjoint
from .layout import (CTRL_FORCE, CTRL_POSITION, CTRL_VELOCITY, DF_ARMATURE, DF_DAMPING, DF_FORCE_HI, DF_FORCE_LO,
                     DF_SPRINGREF, DF_STIFFNESS, DI_LINK, DI_PARENT, DI_PD_Q, DI_Q, DI_ROT_AXIS, DI_ROT_Q, GD_ACC,
                     GD_BIAS, GD_EXT, GT_FORCE, GT_KP, GT_KV, GT_POS, GT_VEL, LF_FLUID_BOX, LF_FLUID_DENSITY,
                     LF_FLUID_IQUAT, LF_FLUID_VISCOSITY, LF_FLUID_WIND, LF_GRAVCOMP, LF_INERTIA, LF_MASS, LI_DOF_END,
                     LI_DOF_START, LI_PARENT, PP_TENDONS, SD_ACC, SD_BIAS, SD_EXT, SD_SATURATED, TF_DAMPING,
                     TF_SPRING_HI, TF_SPRING_LO, TF_STIFFNESS, TI_COUNT, TI_START)


@func
def rotation_target(b, d0, ctrl_pos):
    """The quaternion of the intrinsic x-y-z Euler angles ctrl_pos[b, d0:d0 + 3] (R = Rx Ry Rz, the rotation dofs'
    positions as get_dofs_position reads them) and the three half-angle (cos, sin) pairs it is made of."""
    c = ti.Vector([ti.cos(0.5 * ctrl_pos[b, d0 + k]) for k in ti.static(range(3))])
    s = ti.Vector([ti.sin(0.5 * ctrl_pos[b, d0 + k]) for k in ti.static(range(3))])
    qx = ti.Vector([c[0], s[0], 0.0, 0.0])
    qy = ti.Vector([c[1], 0.0, s[1], 0.0])
    qz = ti.Vector([c[2], 0.0, 0.0, s[2]])
    return quat_mul(quat_mul(qx, qy), qz), qx, qy, qz, c, s


@func
def rotvec_of_quat(e):
    """The rotation vector (axis times angle, the angle in [0, pi]) of the unit quaternion e, and the sign (+-1) that
    took e to its half with w >= 0."""
    sign = 1.0
    if e[0] < 0.0:
        sign = -1.0
    w = sign * e[0]
    v = sign * ti.Vector([e[1], e[2], e[3]])
    s = v.norm()
    k = 2.0 / ti.max(w, 1e-30)  # the limit of 2 atan2(s, w) / s at s -> 0
    if s > 1e-8:
        k = 2.0 * ti.atan2(s, w) / s
    return k * v, sign


@func
def pick3(v, axis):
    out = v[0]
    if axis == 1:
        out = v[1]
    elif axis == 2:
        out = v[2]
    return out


@func
def rotation_error(b, f, d, qpos, dof_i, ctrl_pos):
    """A ball or free joint's rotation dof d: its component of the rotation vector rotvec(q^-1 q_target) from the
    joint's quaternion q to the target q_target of its three rotation dofs' ctrl_pos (rotation_target), in the
    joint's child frame, the frame of the rotation dofs' velocities: the PD law's position error, exact at any
    angle (the shorter way round)."""
    axis = dof_i[d, DI_ROT_AXIS]
    q = v4e(qpos, f, b, dof_i[d, DI_ROT_Q])
    qt, qx, qy, qz, c, s = rotation_target(b, d - axis, ctrl_pos)
    rv, sign = rotvec_of_quat(quat_mul(quat_conj(q), qt))
    return pick3(rv, axis)


@func
def control_raw(b, f, d, hi, qpos, dofs_vel, dof_i, ctrl_mode, ctrl_force, ctrl_pos, ctrl_vel, ctrl_kp, ctrl_kv):
    """Dof d's control force at (qpos[f, b], dofs_vel[f, b]) before its range: the command (force mode); the PD law
    kp (target - q - hi v) + kv (target_v - v) (position mode, hi the implicit step; q a free joint's coordinate
    for its translation dofs; for a ball or free joint's rotation dofs target - q is rotation_error's); kv (target_v - v) (velocity mode)."""
    v = dofs_vel[f, b, d]
    mode = ctrl_mode[b, d]
    raw = 0.0
    if mode == CTRL_FORCE:
        raw = ctrl_force[b, d]
    elif mode == CTRL_POSITION:
        qi = dof_i[d, DI_PD_Q]
        err = 0.0
        if qi >= 0:
            err = ctrl_pos[b, d] - qpos[f, b, qi]
        elif dof_i[d, DI_ROT_Q] >= 0:
            err = rotation_error(b, f, d, qpos, dof_i, ctrl_pos)
        raw = ctrl_kp[b, d] * (err - hi * v) + ctrl_kv[b, d] * (ctrl_vel[b, d] - v)
    elif mode == CTRL_VELOCITY:
        raw = ctrl_kv[b, d] * (ctrl_vel[b, d] - v)
    return raw


@func
def pd_saturated(b, f, d, h, m_dd, qpos, dofs_vel, dof_f, dof_i, ctrl_mode, ctrl_force, ctrl_pos, ctrl_vel, ctrl_kp,
                 ctrl_kv):
    """1 where dof d's PD law (position or velocity mode) saturates, else 0: its implicit value, the explicit one
    scaled by m / (m + h (kv + h kp)) with m = m_dd + armature the dof's own inertia (m_dd: its entry of the CRBA
    mass matrix), leaves the force range. h is the implicit step."""
    mode = ctrl_mode[b, d]
    out = 0
    if mode == CTRL_POSITION or mode == CTRL_VELOCITY:
        kp = ctrl_kp[b, d] if mode == CTRL_POSITION else 0.0
        kv = ctrl_kv[b, d]
        raw = control_raw(b, f, d, h, qpos, dofs_vel, dof_i, ctrl_mode, ctrl_force, ctrl_pos, ctrl_vel, ctrl_kp,
                          ctrl_kv)
        m_eff = m_dd + dof_f[b, d, DF_ARMATURE]
        est = raw * m_eff / ti.max(m_eff + h * (kv + h * kp), 1e-30)
        if est < dof_f[b, d, DF_FORCE_LO] or est > dof_f[b, d, DF_FORCE_HI]:
            out = 1
    return out


@func
def link_inertia(b, l, link_f):
    """Link l's rotational inertia about its centre of mass, link frame (the 9 LF_INERTIA columns, row-major)."""
    ic = ti.Matrix.zero(float, 3, 3)
    for r in ti.static(range(3)):
        for c in ti.static(range(3)):
            ic[r, c] = link_f[b, l, LF_INERTIA + 3 * r + c]
    return ic


@func
def link_inertia_world(b, l, link_f, s_R, s_com):
    """Mass, first moment m c and rotational inertia about its origin of link l (world axes)."""
    m = link_f[b, l, LF_MASS]
    ic = link_inertia(b, l, link_f)
    rot = s_R[b, l]
    c = s_com[b, l]
    io = rot @ ic @ rot.transpose() + m * (c.dot(c) * ti.Matrix.identity(float, 3) - c.outer_product(c))
    return m, m * c, io


@func
def fluid_wrench(b, l, link_f, s_R, s_com, cvel):
    """MuJoCo's inertia-box fluid model (mj_inertiaBoxFluidModel) for link l: the force and the torque (world axes,
    at the centre of mass) of a medium of the link's density, viscosity and wind on its equivalent box, from the
    velocity of its centre of mass and its angular velocity in the inertia's principal axes."""
    density = link_f[b, l, LF_FLUID_DENSITY]
    viscosity = link_f[b, l, LF_FLUID_VISCOSITY]
    box = v3e(link_f, b, l, LF_FLUID_BOX)
    rot = s_R[b, l] @ quat_to_mat(v4e(link_f, b, l, LF_FLUID_IQUAT))
    omega = ti.Vector([cvel[0], cvel[1], cvel[2]])
    lin = ti.Vector([cvel[3], cvel[4], cvel[5]]) + omega.cross(s_com[b, l]) - v3e(link_f, b, l, LF_FLUID_WIND)
    w = rot.transpose() @ omega
    v = rot.transpose() @ lin
    diam = (box[0] + box[1] + box[2]) / 3.0
    torque = -ti.math.pi * diam * diam * diam * viscosity * w
    force = -3.0 * ti.math.pi * diam * viscosity * v
    b4 = box * box * box * box
    force -= 0.5 * density * ti.Vector([box[1] * box[2], box[0] * box[2], box[0] * box[1]]) * ti.abs(v) * v
    torque -= density / 64.0 * ti.Vector([box[0] * (b4[1] + b4[2]), box[1] * (b4[0] + b4[2]),
                                          box[2] * (b4[0] + b4[1])]) * ti.abs(w) * w
    return rot @ force, rot @ torque


@func
def bias_and_mass(b, f, qpos, dofs_vel, params_f, link_f, link_i, dof_f, dof_i, ctrl_mode, ctrl_force, ctrl_pos,
                  ctrl_vel, ctrl_kp, ctrl_kv, h, s_R, s_com, s_ref, s_cdof, s_cdof_dot, s_cvel, s_cacc, s_cfrc,
                  s_crb_m, s_crb_mc, s_crb_io, s_mass, s_dof):
    """Fill s_dof[b, :, SD_BIAS] with the bias forces c and s_mass[b] with the implicit-integration matrix."""
    n_links = link_i.shape[0]
    n_dofs = dof_i.shape[0]
    gravity = ti.Vector([params_f[0], params_f[1], params_f[2]])
    # forward pass: bias accelerations (qacc = 0, the base accelerating at -g) and link forces
    for l in range(n_links):
        parent = link_i[l, LI_PARENT]
        cacc = spatial(ti.Vector([0.0, 0.0, 0.0]), -gravity)
        if parent >= 0:
            cacc = motion_shift(s_cacc[b, parent], s_ref[b, l] - s_ref[b, parent])
        for d in range(link_i[l, LI_DOF_START], link_i[l, LI_DOF_END]):
            cacc += s_cdof_dot[b, d] * dofs_vel[f, b, d]
        s_cacc[b, l] = cacc
        m, mc, io = link_inertia_world(b, l, link_f, s_R, s_com)
        s_crb_m[b, l] = m
        s_crb_mc[b, l] = mc
        s_crb_io[b, l] = io
        cvel = s_cvel[b, l]
        s_cfrc[b, l] = inertia_apply(m, mc, io, cacc) + force_cross(cvel, inertia_apply(m, mc, io, cvel))
        # gravity compensation: a force holding the share LF_GRAVCOMP of the link's weight, at its centre of mass
        comp = link_f[b, l, LF_GRAVCOMP]
        if comp != 0.0:
            lift = -comp * m * gravity
            s_cfrc[b, l] = s_cfrc[b, l] - spatial(s_com[b, l].cross(lift), lift)
        # the fluid's force and torque at the centre of mass (explicit, as MuJoCo's)
        if link_f[b, l, LF_FLUID_DENSITY] + link_f[b, l, LF_FLUID_VISCOSITY] > 0.0 and m > 1e-15:
            fl, tq = fluid_wrench(b, l, link_f, s_R, s_com, cvel)
            s_cfrc[b, l] = s_cfrc[b, l] - spatial(tq + s_com[b, l].cross(fl), fl)
    # backward pass: subtree forces and composite inertias, each moved to the parent's origin
    for i in range(n_links):
        l = n_links - 1 - i
        parent = link_i[l, LI_PARENT]
        if parent >= 0:
            d = s_ref[b, parent] - s_ref[b, l]
            s_cfrc[b, parent] = s_cfrc[b, parent] + force_shift(s_cfrc[b, l], d)
            m, mc, io = inertia_shift(s_crb_m[b, l], s_crb_mc[b, l], s_crb_io[b, l], d)
            s_crb_m[b, parent] = s_crb_m[b, parent] + m
            s_crb_mc[b, parent] = s_crb_mc[b, parent] + mc
            s_crb_io[b, parent] = s_crb_io[b, parent] + io
    for d in range(n_dofs):
        s_dof[b, d, SD_BIAS] = s_cdof[b, d].dot(s_cfrc[b, dof_i[d, DI_LINK]])
    # mass matrix by CRBA (the entries between a dof and its ancestors: the only ones factor_ldl reads; the force
    # of dof d's composite inertia moved to each ancestor's link), plus the implicit terms on the diagonal
    for d in range(n_dofs):
        l = dof_i[d, DI_LINK]
        force = inertia_apply(s_crb_m[b, l], s_crb_mc[b, l], s_crb_io[b, l], s_cdof[b, d])
        moved = force
        at = l
        i = d
        while i >= 0:
            li = dof_i[i, DI_LINK]
            if li != at:
                moved = force_shift(force, s_ref[b, li] - s_ref[b, l])
                at = li
            v = s_cdof[b, i].dot(moved)
            s_mass[b, i, d] = v
            s_mass[b, d, i] = v
            i = dof_i[i, DI_PARENT]
    for d in range(n_dofs):
        gain_v = dof_f[b, d, DF_DAMPING]
        gain_p = 0.0
        # a saturated PD law acts as its clamped force, explicitly (s_dof[b, d, SD_SATURATED] = 1 for
        # smooth_acceleration); otherwise its gains enter the matrix
        mode = ctrl_mode[b, d]
        s_dof[b, d, SD_SATURATED] = 0.0
        if mode == CTRL_POSITION or mode == CTRL_VELOCITY:
            if pd_saturated(b, f, d, h, s_mass[b, d, d], qpos, dofs_vel, dof_f, dof_i, ctrl_mode, ctrl_force,
                            ctrl_pos, ctrl_vel, ctrl_kp, ctrl_kv):
                s_dof[b, d, SD_SATURATED] = 1.0
            else:
                gain_v += ctrl_kv[b, d]
                gain_p = ctrl_kp[b, d] if mode == CTRL_POSITION else 0.0
        s_mass[b, d, d] = s_mass[b, d, d] + (dof_f[b, d, DF_ARMATURE] + h * gain_v + h * h * gain_p)


@func
def factor_ldl(b, n, a, dof_i):
    """In place, M = L^T D L of the symmetric positive-definite a[b, :n, :n], whose off-diagonal entries are
    non-zero only between a dof and its ancestors (the dof parents of the kinematic tree). Eliminating from the
    leaves up creates no fill-in (Featherstone, Rigid Body Dynamics Algorithms, 6.5): the cost is n times the
    squared depth of the tree, not n^3, so free bodies cost 6^2 each. Afterwards a[b, k, k] holds D and a[b, k, i],
    i an ancestor of k, the unit lower factor L; no other entry is read or written."""
    for kk in range(n):
        k = n - 1 - kk
        dkk = ti.max(a[b, k, k], 1e-30)
        a[b, k, k] = dkk
        i = dof_i[k, DI_PARENT]
        while i >= 0:
            t = a[b, k, i] / dkk
            j = i
            while j >= 0:
                a[b, i, j] = a[b, i, j] - t * a[b, k, j]
                j = dof_i[j, DI_PARENT]
            a[b, k, i] = t
            i = dof_i[i, DI_PARENT]


@ti.func
def entry(x: ti.template(), b, fixed, k, by_row: ti.template(), shift):
    """Entry k of the vector x[b, fixed, :] (by_row; at column k + shift) or x[b, :, fixed]."""
    return x[b, fixed, k + shift] if ti.static(by_row) else x[b, k, fixed]


@ti.func
def _scale_add(x: ti.template(), b, fixed, k, by_row: ti.template(), shift, scale, add):
    """Entry k of that vector becomes scale times itself plus add."""
    if ti.static(by_row):
        x[b, fixed, k + shift] = scale * x[b, fixed, k + shift] + add
    else:
        x[b, k, fixed] = scale * x[b, k, fixed] + add


@func
def ldl_solve(b, lo, hi, ldl, dof_i, x, fixed, by_row: ti.template(), shift):
    """Solve L^T D L y = r in place for r = x[b, fixed, :] (by_row: a compact row, dof k at column k + shift) or
    x[b, :, fixed] (ldl from factor_ldl), on the dofs lo..hi-1: all of them, or whole kinematic trees (the matrix
    is block diagonal over trees, and a dof's ancestors are in its tree)."""
    for kk in range(hi - lo):
        k = hi - 1 - kk
        i = dof_i[k, DI_PARENT]
        while i >= 0:
            _scale_add(x, b, fixed, i, by_row, shift, 1.0, -ldl[b, k, i] * entry(x, b, fixed, k, by_row, shift))
            i = dof_i[i, DI_PARENT]
    for k in range(lo, hi):
        _scale_add(x, b, fixed, k, by_row, shift, 1.0 / ldl[b, k, k], 0.0)
    for k in range(lo, hi):
        i = dof_i[k, DI_PARENT]
        while i >= 0:
            _scale_add(x, b, fixed, k, by_row, shift, 1.0, -ldl[b, k, i] * entry(x, b, fixed, i, by_row, shift))
            i = dof_i[i, DI_PARENT]


# -- reverse (adjoint) functions of the differentiable substep --------------------------------------------------
# Each reads the adjoints of its forward's outputs and accumulates (+=) into the adjoints of its inputs (g_* arrays,
# per environment, shaped as what they are the adjoints of; zeroed by the caller). g_mass holds dL/dM~ at the lower
# entries [b, k, i] (i == k or i an ancestor dof of k), the symmetric counterpart folded in. Discrete decisions (a
# saturated PD law, an active clamp, a tendon outside its slack) are the forward's, recomputed with its arithmetic.


@func
def ldl_solve_reverse(b, lo, hi, ldl, dof_i, x, fixed, by_row: ti.template(), shift, g_x, g_fixed, g_mass):
    """Adjoint of ldl_solve, y = M~^-1 r on the dofs lo..hi-1 (M~ factorised in place in ldl by factor_ldl).

    x[b, fixed, :] / x[b, :, fixed] (by_row, shift as ldl_solve's) holds the forward's solution y; the vector g_x
    at g_fixed, same layout, holds dL/dy on entry and dL/dr = M~^-1 dL/dy on exit (M~ is symmetric). Accumulates
    dL/dM~ = -(dL/dr) y^T, folded symmetric, into the lower entries of g_mass: g_mass[b, k, i] -= rb_k y_i + rb_i
    y_k for i a strict ancestor dof of k, g_mass[b, k, k] -= rb_k y_k."""
    ldl_solve(b, lo, hi, ldl, dof_i, g_x, g_fixed, by_row, shift)
    for k in range(lo, hi):
        yk = entry(x, b, fixed, k, by_row, shift)
        rk = entry(g_x, b, g_fixed, k, by_row, shift)
        g_mass[b, k, k] = g_mass[b, k, k] - rk * yk
        i = dof_i[k, DI_PARENT]
        while i >= 0:
            g_mass[b, k, i] = g_mass[b, k, i] - (rk * entry(x, b, fixed, i, by_row, shift)
                                                 + entry(g_x, b, g_fixed, i, by_row, shift) * yk)
            i = dof_i[i, DI_PARENT]


@func
def crba_diagonal(b, d, dof_i, s_cdof, s_crb_m, s_crb_mc, s_crb_io):
    """Dof d's entry of the CRBA mass matrix (before the implicit terms), from the composite inertias that
    bias_and_mass leaves in s_crb_* and the motion subspaces s_cdof: the value bias_and_mass computed."""
    l = dof_i[d, DI_LINK]
    force = inertia_apply(s_crb_m[b, l], s_crb_mc[b, l], s_crb_io[b, l], s_cdof[b, d])
    return s_cdof[b, d].dot(force)


@func
def rotation_error_reverse(b, f, d, err_bar, qpos, dof_i, ctrl_pos, g_qpos, g_ctrl):
    """Adjoint of rotation_error for d(loss)/d(error) = err_bar: into g_qpos[b] (the joint's quaternion, as read)
    and g_ctrl[b, :, GT_POS] (the three rotation dofs' targets)."""
    axis = dof_i[d, DI_ROT_AXIS]
    qs = dof_i[d, DI_ROT_Q]
    d0 = d - axis
    q = v4e(qpos, f, b, qs)
    qt, qx, qy, qz, c, s = rotation_target(b, d0, ctrl_pos)
    e = quat_mul(quat_conj(q), qt)
    rv, sign = rotvec_of_quat(e)
    rv_bar = ti.Vector([0.0, 0.0, 0.0])
    for k in ti.static(range(3)):
        if axis == k:
            rv_bar[k] = err_bar
    w = sign * e[0]
    v = sign * ti.Vector([e[1], e[2], e[3]])
    sn = v.norm()
    r2 = ti.max(sn * sn + w * w, 1e-30)
    # rv = k v with k = 2 atan2(sn, w) / sn: dk/dw = -2 / r2, dk/dsn = (2 w / r2 - k) / sn (-> 0 as sn -> 0)
    k = 2.0 / ti.max(w, 1e-30)
    dk_dsn = 0.0
    if sn > 1e-8:
        k = 2.0 * ti.atan2(sn, w) / sn
        dk_dsn = (2.0 * w / r2 - k) / sn
    proj = v.dot(rv_bar)
    v_bar = k * rv_bar
    if sn > 1e-8:
        v_bar += v * (dk_dsn * proj / sn)
    w_bar = -2.0 / r2 * proj
    e_bar = sign * ti.Vector([w_bar, v_bar[0], v_bar[1], v_bar[2]])
    g_qc, g_qt = quat_mul_reverse(quat_conj(q), qt, e_bar)
    g_q = quat_conj(g_qc)
    for j in ti.static(range(4)):
        g_qpos[b, qs + j] = g_qpos[b, qs + j] + g_q[j]
    g_qxy, g_qz = quat_mul_reverse(quat_mul(qx, qy), qz, g_qt)
    g_qx, g_qy = quat_mul_reverse(qx, qy, g_qxy)
    # each factor is (cos t/2, sin t/2 on its axis): d/dt = (-sin t/2, cos t/2) / 2
    g_ctrl[b, d0, GT_POS] = g_ctrl[b, d0, GT_POS] + 0.5 * (c[0] * g_qx[1] - s[0] * g_qx[0])
    g_ctrl[b, d0 + 1, GT_POS] = g_ctrl[b, d0 + 1, GT_POS] + 0.5 * (c[1] * g_qy[2] - s[1] * g_qy[0])
    g_ctrl[b, d0 + 2, GT_POS] = g_ctrl[b, d0 + 2, GT_POS] + 0.5 * (c[2] * g_qz[3] - s[2] * g_qz[0])


@func
def control_raw_reverse(b, f, d, hi, raw_bar, qpos, dofs_vel, dof_i, ctrl_mode, ctrl_pos, ctrl_vel, ctrl_kp,
                        ctrl_kv, g_qpos, g_vel, g_ctrl):
    """Adjoint of control_raw for dL/draw = raw_bar: into g_ctrl[b, d, 0..4] (force, pos, vel, kp, kv),
    g_qpos[b] and g_vel[b]."""
    v = dofs_vel[f, b, d]
    mode = ctrl_mode[b, d]
    if mode == CTRL_FORCE:
        g_ctrl[b, d, GT_FORCE] = g_ctrl[b, d, GT_FORCE] + raw_bar
    elif mode == CTRL_POSITION:
        qi = dof_i[d, DI_PD_Q]
        err = 0.0
        if qi >= 0:
            err = ctrl_pos[b, d] - qpos[f, b, qi]
            g_qpos[b, qi] = g_qpos[b, qi] - raw_bar * ctrl_kp[b, d]
            g_ctrl[b, d, GT_POS] = g_ctrl[b, d, GT_POS] + raw_bar * ctrl_kp[b, d]
        elif dof_i[d, DI_ROT_Q] >= 0:
            err = rotation_error(b, f, d, qpos, dof_i, ctrl_pos)
            rotation_error_reverse(b, f, d, raw_bar * ctrl_kp[b, d], qpos, dof_i, ctrl_pos, g_qpos, g_ctrl)
        g_ctrl[b, d, GT_VEL] = g_ctrl[b, d, GT_VEL] + raw_bar * ctrl_kv[b, d]
        g_ctrl[b, d, GT_KP] = g_ctrl[b, d, GT_KP] + raw_bar * (err - hi * v)
        g_ctrl[b, d, GT_KV] = g_ctrl[b, d, GT_KV] + raw_bar * (ctrl_vel[b, d] - v)
        g_vel[b, d] = g_vel[b, d] - raw_bar * (hi * ctrl_kp[b, d] + ctrl_kv[b, d])
    elif mode == CTRL_VELOCITY:
        g_ctrl[b, d, GT_VEL] = g_ctrl[b, d, GT_VEL] + raw_bar * ctrl_kv[b, d]
        g_ctrl[b, d, GT_KV] = g_ctrl[b, d, GT_KV] + raw_bar * (ctrl_vel[b, d] - v)
        g_vel[b, d] = g_vel[b, d] - raw_bar * ctrl_kv[b, d]


@func
def tendon_length(b, f, t, qpos, dof_i, ten_f, ten_i):
    """Fixed tendon t's length sum coef q at qpos[f, b]."""
    length = 0.0
    for k in range(ten_i[t, TI_START], ten_i[t, TI_START] + ten_i[t, TI_COUNT]):
        length += ten_f[k, 0] * qpos[f, b, dof_i[ten_i[k, 0], DI_Q]]
    return length


@func
def tendon_rate(b, f, t, dofs_vel, ten_f, ten_i):
    """Its rate of change sum coef v at dofs_vel[f, b]."""
    rate = 0.0
    for k in range(ten_i[t, TI_START], ten_i[t, TI_START] + ten_i[t, TI_COUNT]):
        rate += ten_f[k, 0] * dofs_vel[f, b, ten_i[k, 0]]
    return rate


@func
def smooth_acceleration(b, f, hi, qpos, dofs_vel, params_i, dof_f, dof_i, ten_f, ten_i, ctrl_mode, ctrl_force,
                        ctrl_pos, ctrl_vel, ctrl_kp, ctrl_kv, s_mass, s_dof):
    """qacc = M~^-1 (tau - c) into s_dof[b, :, SD_ACC] at (qpos[f, b], dofs_vel[f, b]); s_mass[b] is factorised.

    hi is the implicit step (h for Euler: PD laws read q + h v; 0 for RK4, where everything is explicit); joint
    springs are explicit in both, as MuJoCo's."""
    n = dof_i.shape[0]
    for d in range(n):
        v = dofs_vel[f, b, d]
        tau = -s_dof[b, d, SD_BIAS] - dof_f[b, d, DF_DAMPING] * v
        qi = dof_i[d, DI_Q]
        if qi >= 0:
            q = qpos[f, b, qi]
            tau -= dof_f[b, d, DF_STIFFNESS] * (q - dof_f[b, d, DF_SPRINGREF])
        # the control: a command clamped to the force range; a PD law as it is (its gains are in the matrix), or
        # clamped where bias_and_mass found it saturated (s_dof[b, d, SD_SATURATED])
        force = control_raw(b, f, d, hi, qpos, dofs_vel, dof_i, ctrl_mode, ctrl_force, ctrl_pos, ctrl_vel, ctrl_kp,
                            ctrl_kv)
        if ctrl_mode[b, d] == CTRL_FORCE or s_dof[b, d, SD_SATURATED] != 0.0:
            force = ti.min(ti.max(force, dof_f[b, d, DF_FORCE_LO]), dof_f[b, d, DF_FORCE_HI])
        s_dof[b, d, SD_ACC] = tau + force + s_dof[b, d, SD_EXT]
    # fixed tendons: a spring outside the slack interval and a damper along the tendon, explicit (as MuJoCo's)
    for t in range(params_i[PP_TENDONS]):
        length = tendon_length(b, f, t, qpos, dof_i, ten_f, ten_i)
        rate = tendon_rate(b, f, t, dofs_vel, ten_f, ten_i)
        stretch = 0.0
        if length > ten_f[t, TF_SPRING_HI]:
            stretch = length - ten_f[t, TF_SPRING_HI]
        elif length < ten_f[t, TF_SPRING_LO]:
            stretch = length - ten_f[t, TF_SPRING_LO]
        pull = -ten_f[t, TF_STIFFNESS] * stretch - ten_f[t, TF_DAMPING] * rate
        if pull != 0.0:
            for k in range(ten_i[t, TI_START], ten_i[t, TI_START] + ten_i[t, TI_COUNT]):
                s_dof[b, ten_i[k, 0], SD_ACC] = s_dof[b, ten_i[k, 0], SD_ACC] + ten_f[k, 0] * pull
    factor_ldl(b, n, s_mass, dof_i)
    ldl_solve(b, 0, n, s_mass, dof_i, s_dof, SD_ACC, False, 0)


@func
def smooth_acceleration_reverse(b, f, hi, qpos, dofs_vel, params_i, dof_f, dof_i, ten_f, ten_i, ctrl_mode,
                                ctrl_force, ctrl_pos, ctrl_vel, ctrl_kp, ctrl_kv, s_crb_m, s_crb_mc, s_crb_io, s_cdof,
                                s_mass, s_dof, g_qpos, g_vel, g_dof, g_mass, g_dof_f, g_ctrl):
    """Adjoint of smooth_acceleration (Euler: hi = h), qacc = M~^-1 tau with tau = -c - damping v - stiffness
    (q - springref) + control + external + the fixed tendons' spring and damper.

    Reads the forward's state: s_mass[b] the factor of M~ (factor_ldl ran), s_dof[b, :, SD_ACC] qacc, s_cdof and
    s_crb_* as bias_and_mass left them (the PD saturation test is recomputed from them). g_dof[b, :, GD_ACC] holds
    dL/dqacc on entry and dL/dtau = M~^-1 dL/dqacc on exit. Accumulates into g_dof[b, :, GD_BIAS] (bias c) and
    g_dof[b, :, GD_EXT] (external force s_dof[b, :, SD_EXT]), g_mass (lower entries of M~), g_qpos[b], g_vel[b],
    g_dof_f[b] (damping, stiffness, springref, the force range where a clamp is active) and g_ctrl[b]."""
    n = dof_i.shape[0]
    ldl_solve_reverse(b, 0, n, s_mass, dof_i, s_dof, SD_ACC, False, 0, g_dof, GD_ACC, g_mass)
    for t in range(params_i[PP_TENDONS]):
        length = 0.0
        pull_bar = 0.0
        for k in range(ten_i[t, TI_START], ten_i[t, TI_START] + ten_i[t, TI_COUNT]):
            length += ten_f[k, 0] * qpos[f, b, dof_i[ten_i[k, 0], DI_Q]]
            pull_bar += ten_f[k, 0] * g_dof[b, ten_i[k, 0], 1]
        length_bar = 0.0
        if length > ten_f[t, TF_SPRING_HI] or length < ten_f[t, TF_SPRING_LO]:
            length_bar = -ten_f[t, TF_STIFFNESS] * pull_bar
        rate_bar = -ten_f[t, TF_DAMPING] * pull_bar
        for k in range(ten_i[t, TI_START], ten_i[t, TI_START] + ten_i[t, TI_COUNT]):
            g_qpos[b, dof_i[ten_i[k, 0], DI_Q]] = g_qpos[b, dof_i[ten_i[k, 0], DI_Q]] + ten_f[k, 0] * length_bar
            g_vel[b, ten_i[k, 0]] = g_vel[b, ten_i[k, 0]] + ten_f[k, 0] * rate_bar
    for d in range(n):
        tb = g_dof[b, d, GD_ACC]
        v = dofs_vel[f, b, d]
        g_dof[b, d, GD_BIAS] = g_dof[b, d, GD_BIAS] - tb
        g_dof[b, d, GD_EXT] = g_dof[b, d, GD_EXT] + tb
        g_dof_f[b, d, DF_DAMPING] = g_dof_f[b, d, DF_DAMPING] - tb * v
        g_vel[b, d] = g_vel[b, d] - tb * dof_f[b, d, DF_DAMPING]
        qi = dof_i[d, DI_Q]
        if qi >= 0:
            g_dof_f[b, d, DF_STIFFNESS] = (g_dof_f[b, d, DF_STIFFNESS]
                                           - tb * (qpos[f, b, qi] - dof_f[b, d, DF_SPRINGREF]))
            g_dof_f[b, d, DF_SPRINGREF] = g_dof_f[b, d, DF_SPRINGREF] + tb * dof_f[b, d, DF_STIFFNESS]
            g_qpos[b, qi] = g_qpos[b, qi] - tb * dof_f[b, d, DF_STIFFNESS]
        raw_bar = tb
        clamped = ctrl_mode[b, d] == CTRL_FORCE
        if not clamped:
            clamped = pd_saturated(b, f, d, hi, crba_diagonal(b, d, dof_i, s_cdof, s_crb_m, s_crb_mc, s_crb_io),
                                   qpos, dofs_vel, dof_f, dof_i, ctrl_mode, ctrl_force, ctrl_pos, ctrl_vel, ctrl_kp,
                                   ctrl_kv) != 0
        if clamped:
            raw = control_raw(b, f, d, hi, qpos, dofs_vel, dof_i, ctrl_mode, ctrl_force, ctrl_pos, ctrl_vel, ctrl_kp,
                              ctrl_kv)
            if ti.max(raw, dof_f[b, d, DF_FORCE_LO]) > dof_f[b, d, DF_FORCE_HI]:
                g_dof_f[b, d, DF_FORCE_HI] = g_dof_f[b, d, DF_FORCE_HI] + tb
                raw_bar = 0.0
            elif raw < dof_f[b, d, DF_FORCE_LO]:
                g_dof_f[b, d, DF_FORCE_LO] = g_dof_f[b, d, DF_FORCE_LO] + tb
                raw_bar = 0.0
        control_raw_reverse(b, f, d, hi, raw_bar, qpos, dofs_vel, dof_i, ctrl_mode, ctrl_pos, ctrl_vel, ctrl_kp,
                            ctrl_kv, g_qpos, g_vel, g_ctrl)


@ti.func
def inertia_apply_reverse(m, mc, inertia_o, a, out_bar):
    """Adjoint of inertia_apply(m, mc, inertia_o, a) for dL/dout = out_bar: (dL/dm, dL/dmc, dL/dinertia_o, dL/da)."""
    w = ti.Vector([a[0], a[1], a[2]])
    v = ti.Vector([a[3], a[4], a[5]])
    nb = ti.Vector([out_bar[0], out_bar[1], out_bar[2]])
    fb = ti.Vector([out_bar[3], out_bar[4], out_bar[5]])
    w_bar = inertia_o.transpose() @ nb - fb.cross(mc)
    v_bar = nb.cross(mc) + m * fb
    return v.dot(fb), v.cross(nb) - w.cross(fb), nb.outer_product(w), spatial(w_bar, v_bar)


@ti.func
def force_cross_reverse(a, f, out_bar):
    """Adjoint of force_cross(a, f) for dL/dout = out_bar: (dL/da, dL/df)."""
    w = ti.Vector([a[0], a[1], a[2]])
    v = ti.Vector([a[3], a[4], a[5]])
    n = ti.Vector([f[0], f[1], f[2]])
    fl = ti.Vector([f[3], f[4], f[5]])
    p = ti.Vector([out_bar[0], out_bar[1], out_bar[2]])
    q = ti.Vector([out_bar[3], out_bar[4], out_bar[5]])
    return spatial(n.cross(p) + fl.cross(q), fl.cross(p)), spatial(p.cross(w), p.cross(v) + q.cross(w))


@func
def link_inertia_world_reverse(b, l, link_f, s_R, s_com, m_bar, mc_bar, io_bar, g_R, g_com, g_link_f):
    """Adjoint of link_inertia_world for dL/d(m, mc, io) = (m_bar, mc_bar, io_bar): into g_R[b, l], g_com[b, l]
    and g_link_f[b, l] (LF_MASS, the 9 LF_INERTIA entries)."""
    m = link_f[b, l, LF_MASS]
    ic = link_inertia(b, l, link_f)
    rot = s_R[b, l]
    c = s_com[b, l]
    tr = io_bar.trace()
    g_R[b, l] = g_R[b, l] + (io_bar @ rot @ ic.transpose() + io_bar.transpose() @ rot @ ic)
    ic_bar = rot.transpose() @ io_bar @ rot
    for r in ti.static(range(3)):
        for k in ti.static(range(3)):
            g_link_f[b, l, LF_INERTIA + 3 * r + k] = g_link_f[b, l, LF_INERTIA + 3 * r + k] + ic_bar[r, k]
    g_link_f[b, l, LF_MASS] = g_link_f[b, l, LF_MASS] + (m_bar + c.dot(mc_bar) + tr * c.dot(c) - c.dot(io_bar @ c))
    g_com[b, l] = g_com[b, l] + (m * mc_bar + m * (2.0 * tr * c - (io_bar + io_bar.transpose()) @ c))


@func
def fluid_wrench_reverse(b, l, link_f, s_R, s_com, cvel, force_bar, torque_bar, g_R, g_com, g_link_f):
    """Adjoint of fluid_wrench for dL/d(its force, its torque) = (force_bar, torque_bar): into g_R[b, l],
    g_com[b, l] and g_link_f[b, l] (density, viscosity, wind, box, iquat); returns dL/dcvel."""
    density = link_f[b, l, LF_FLUID_DENSITY]
    viscosity = link_f[b, l, LF_FLUID_VISCOSITY]
    box = v3e(link_f, b, l, LF_FLUID_BOX)
    iquat = v4e(link_f, b, l, LF_FLUID_IQUAT)
    rot_i = quat_to_mat(iquat)
    rot = s_R[b, l] @ rot_i
    omega = ti.Vector([cvel[0], cvel[1], cvel[2]])
    lin = ti.Vector([cvel[3], cvel[4], cvel[5]]) + omega.cross(s_com[b, l]) - v3e(link_f, b, l, LF_FLUID_WIND)
    w = rot.transpose() @ omega
    v = rot.transpose() @ lin
    diam = (box[0] + box[1] + box[2]) / 3.0
    b4 = box * box * box * box
    area = ti.Vector([box[1] * box[2], box[0] * box[2], box[0] * box[1]])
    cube = ti.Vector([box[0] * (b4[1] + b4[2]), box[1] * (b4[0] + b4[2]), box[2] * (b4[0] + b4[1])])
    pi = ti.math.pi
    # the local force and torque before the rotation to world axes
    force = -3.0 * pi * diam * viscosity * v - 0.5 * density * area * ti.abs(v) * v
    torque = -pi * diam * diam * diam * viscosity * w - density / 64.0 * cube * ti.abs(w) * w
    fb = rot.transpose() @ force_bar
    tb = rot.transpose() @ torque_bar
    rot_bar = force_bar.outer_product(force) + torque_bar.outer_product(torque)
    w_bar = -pi * diam * diam * diam * viscosity * tb - density / 32.0 * cube * ti.abs(w) * tb
    v_bar = -3.0 * pi * diam * viscosity * fb - density * area * ti.abs(v) * fb
    g_link_f[b, l, LF_FLUID_VISCOSITY] = g_link_f[b, l, LF_FLUID_VISCOSITY] + (-pi * diam * diam * diam * w.dot(tb)
                                                                               - 3.0 * pi * diam * v.dot(fb))
    g_link_f[b, l, LF_FLUID_DENSITY] = g_link_f[b, l, LF_FLUID_DENSITY] + (-(cube * ti.abs(w) * w).dot(tb) / 64.0
                                                                           - 0.5 * (area * ti.abs(v) * v).dot(fb))
    diam_bar = -3.0 * pi * diam * diam * viscosity * w.dot(tb) - 3.0 * pi * viscosity * v.dot(fb)
    area_bar = -0.5 * density * ti.abs(v) * v * fb
    cube_bar = -density / 64.0 * ti.abs(w) * w * tb
    b3 = box * box * box
    box_bar = diam_bar / 3.0 * ti.Vector([1.0, 1.0, 1.0])
    box_bar += ti.Vector([area_bar[1] * box[2] + area_bar[2] * box[1], area_bar[0] * box[2] + area_bar[2] * box[0],
                          area_bar[0] * box[1] + area_bar[1] * box[0]])
    box_bar += ti.Vector([cube_bar[0] * (b4[1] + b4[2]) + 4.0 * b3[0] * (cube_bar[1] * box[1] + cube_bar[2] * box[2]),
                          cube_bar[1] * (b4[0] + b4[2]) + 4.0 * b3[1] * (cube_bar[0] * box[0] + cube_bar[2] * box[2]),
                          cube_bar[2] * (b4[0] + b4[1]) + 4.0 * b3[2] * (cube_bar[0] * box[0] + cube_bar[1] * box[1])])
    rot_bar += omega.outer_product(w_bar) + lin.outer_product(v_bar)
    omega_bar = rot @ w_bar
    lin_bar = rot @ v_bar
    omega_bar += s_com[b, l].cross(lin_bar)
    g_com[b, l] = g_com[b, l] + lin_bar.cross(omega)
    g_R[b, l] = g_R[b, l] + rot_bar @ rot_i.transpose()
    iquat_bar = quat_to_mat_reverse(iquat, s_R[b, l].transpose() @ rot_bar)
    for k in ti.static(range(3)):
        g_link_f[b, l, LF_FLUID_WIND + k] = g_link_f[b, l, LF_FLUID_WIND + k] - lin_bar[k]
        g_link_f[b, l, LF_FLUID_BOX + k] = g_link_f[b, l, LF_FLUID_BOX + k] + box_bar[k]
    for k in ti.static(range(4)):
        g_link_f[b, l, LF_FLUID_IQUAT + k] = g_link_f[b, l, LF_FLUID_IQUAT + k] + iquat_bar[k]
    return spatial(omega_bar, lin_bar)


@func
def bias_and_mass_reverse(b, f, qpos, dofs_vel, params_f, link_f, link_i, dof_f, dof_i, ctrl_mode, ctrl_force,
                          ctrl_pos, ctrl_vel, ctrl_kp, ctrl_kv, h, s_R, s_com, s_ref, s_cdof, s_cdof_dot, s_cvel,
                          s_cacc, s_cfrc, s_crb_m, s_crb_mc, s_crb_io, g_vel, g_R, g_com, g_lpos, g_cdof, g_cdof_dot,
                          g_cvel, g_mass, g_dof, g_link_f, g_dof_f, g_ctrl, g_cacc, g_cfrc, g_crb_m, g_crb_mc,
                          g_crb_io):
    """Adjoint of bias_and_mass (h: the implicit step it ran with).

    Reads the forward's state: s_R, s_com, s_ref, s_cdof, s_cdof_dot, s_cvel of the stage (s_R, s_com and s_ref
    are rewritten by the substep's last forward_kinematics: the caller restores them), s_cacc (per link) and s_cfrc,
    s_crb_* (subtree sums) as bias_and_mass left them. Reads dL/dc from g_dof[b, :, GD_BIAS] and dL/dM~ from the
    lower entries of g_mass. Accumulates into g_vel[b], g_R[b], g_com[b], g_lpos[b] (the origins s_ref the
    quantities were shifted between), g_cdof[b], g_cdof_dot[b], g_cvel[b], g_link_f[b] (mass, inertia,
    gravity compensation, the fluid's columns), g_dof_f[b] (armature, damping) and g_ctrl[b] (kp, kv of the live PD
    laws, through the matrix's diagonal). g_cacc, g_cfrc ([B, L] 6-vectors), g_crb_m ([B, L]), g_crb_mc ([B, L]
    3-vectors) and g_crb_io ([B, L] 3x3) are its own scratch (overwritten)."""
    n_links = link_i.shape[0]
    n_dofs = dof_i.shape[0]
    gravity = ti.Vector([params_f[0], params_f[1], params_f[2]])
    for l in range(n_links):
        g_cacc[b, l] = ti.Vector([0.0, 0.0, 0.0, 0.0, 0.0, 0.0])
        g_cfrc[b, l] = ti.Vector([0.0, 0.0, 0.0, 0.0, 0.0, 0.0])
        g_crb_m[b, l] = 0.0
        g_crb_mc[b, l] = ti.Vector([0.0, 0.0, 0.0])
        g_crb_io[b, l] = ti.Matrix.zero(float, 3, 3)
    # the diagonal's implicit terms, the CRBA entries and the bias (adjoints of the subtree sums)
    for d in range(n_dofs):
        gdd = g_mass[b, d, d]
        g_dof_f[b, d, DF_ARMATURE] = g_dof_f[b, d, DF_ARMATURE] + gdd
        g_dof_f[b, d, DF_DAMPING] = g_dof_f[b, d, DF_DAMPING] + h * gdd
        mode = ctrl_mode[b, d]
        if mode == CTRL_POSITION or mode == CTRL_VELOCITY:
            if pd_saturated(b, f, d, h, crba_diagonal(b, d, dof_i, s_cdof, s_crb_m, s_crb_mc, s_crb_io), qpos,
                            dofs_vel, dof_f, dof_i, ctrl_mode, ctrl_force, ctrl_pos, ctrl_vel, ctrl_kp, ctrl_kv) == 0:
                g_ctrl[b, d, GT_KV] = g_ctrl[b, d, GT_KV] + h * gdd
                if mode == CTRL_POSITION:
                    g_ctrl[b, d, GT_KP] = g_ctrl[b, d, GT_KP] + h * h * gdd
        l = dof_i[d, DI_LINK]
        force = inertia_apply(s_crb_m[b, l], s_crb_mc[b, l], s_crb_io[b, l], s_cdof[b, d])
        force_bar = ti.Vector([0.0, 0.0, 0.0, 0.0, 0.0, 0.0])
        i = d
        while i >= 0:
            g = g_mass[b, d, i]
            li = dof_i[i, DI_LINK]
            if li == l:
                g_cdof[b, i] = g_cdof[b, i] + g * force
                force_bar += g * s_cdof[b, i]
            else:
                shift = s_ref[b, li] - s_ref[b, l]
                g_cdof[b, i] = g_cdof[b, i] + g * force_shift(force, shift)
                g_force, g_shift = force_shift_reverse(force, shift, g * s_cdof[b, i])
                force_bar += g_force
                add_ref_adjoint(b, li, g_shift, g_lpos)
                add_ref_adjoint(b, l, -g_shift, g_lpos)
            i = dof_i[i, DI_PARENT]
        m_bar, mc_bar, io_bar, a_bar = inertia_apply_reverse(s_crb_m[b, l], s_crb_mc[b, l], s_crb_io[b, l],
                                                             s_cdof[b, d], force_bar)
        g_crb_m[b, l] = g_crb_m[b, l] + m_bar
        g_crb_mc[b, l] = g_crb_mc[b, l] + mc_bar
        g_crb_io[b, l] = g_crb_io[b, l] + io_bar
        g_cdof[b, d] = g_cdof[b, d] + a_bar
        c_bar = g_dof[b, d, GD_BIAS]
        g_cdof[b, d] = g_cdof[b, d] + c_bar * s_cfrc[b, l]
        g_cfrc[b, l] = g_cfrc[b, l] + c_bar * s_cdof[b, d]
    # the subtree sums: a link's value enters its own and, shifted, its parent's (whose adjoint is complete: links
    # in order)
    for l in range(n_links):
        parent = link_i[l, LI_PARENT]
        if parent >= 0:
            d = s_ref[b, parent] - s_ref[b, l]
            g_f, g_shift = force_shift_reverse(s_cfrc[b, l], d, g_cfrc[b, parent])
            g_cfrc[b, l] = g_cfrc[b, l] + g_f
            gm, gmc, gio, g_shift2 = inertia_shift_reverse(s_crb_m[b, l], s_crb_mc[b, l], d, g_crb_m[b, parent],
                                                           g_crb_mc[b, parent], g_crb_io[b, parent])
            g_crb_m[b, l] = g_crb_m[b, l] + gm
            g_crb_mc[b, l] = g_crb_mc[b, l] + gmc
            g_crb_io[b, l] = g_crb_io[b, l] + gio
            add_ref_adjoint(b, parent, g_shift + g_shift2, g_lpos)
            add_ref_adjoint(b, l, -(g_shift + g_shift2), g_lpos)
    # the forward pass, leaves first: link forces, inertias, bias accelerations
    for i in range(n_links):
        l = n_links - 1 - i
        parent = link_i[l, LI_PARENT]
        m, mc, io = link_inertia_world(b, l, link_f, s_R, s_com)
        cvel = s_cvel[b, l]
        fb = g_cfrc[b, l]
        fb_ang = ti.Vector([fb[0], fb[1], fb[2]])
        fb_lin = ti.Vector([fb[3], fb[4], fb[5]])
        com = s_com[b, l]
        m_bar = g_crb_m[b, l]
        if link_f[b, l, LF_FLUID_DENSITY] + link_f[b, l, LF_FLUID_VISCOSITY] > 0.0 and m > 1e-15:
            fl, tq = fluid_wrench(b, l, link_f, s_R, s_com, cvel)
            g_com[b, l] = g_com[b, l] - fl.cross(fb_ang)
            g_cvel[b, l] = g_cvel[b, l] + fluid_wrench_reverse(b, l, link_f, s_R, s_com, cvel,
                                                               -fb_lin - fb_ang.cross(com), -fb_ang, g_R, g_com,
                                                               g_link_f)
        comp = link_f[b, l, LF_GRAVCOMP]
        lift = -comp * m * gravity
        lift_bar = -fb_ang.cross(com) - fb_lin
        g_com[b, l] = g_com[b, l] - lift.cross(fb_ang)
        g_link_f[b, l, LF_GRAVCOMP] = g_link_f[b, l, LF_GRAVCOMP] - m * lift_bar.dot(gravity)
        m_bar -= comp * lift_bar.dot(gravity)
        cacc = s_cacc[b, l]
        a_bar, icv_bar = force_cross_reverse(cvel, inertia_apply(m, mc, io, cvel), fb)
        m1, mc1, io1, cvel_bar = inertia_apply_reverse(m, mc, io, cvel, icv_bar)
        m2, mc2, io2, cacc_bar = inertia_apply_reverse(m, mc, io, cacc, fb)
        g_cvel[b, l] = g_cvel[b, l] + (a_bar + cvel_bar)
        link_inertia_world_reverse(b, l, link_f, s_R, s_com, m_bar + m1 + m2, g_crb_mc[b, l] + mc1 + mc2,
                                   g_crb_io[b, l] + io1 + io2, g_R, g_com, g_link_f)
        cacc_bar += g_cacc[b, l]
        for d in range(link_i[l, LI_DOF_START], link_i[l, LI_DOF_END]):
            g_cdof_dot[b, d] = g_cdof_dot[b, d] + cacc_bar * dofs_vel[f, b, d]
            g_vel[b, d] = g_vel[b, d] + cacc_bar.dot(s_cdof_dot[b, d])
        if parent >= 0:
            d = s_ref[b, l] - s_ref[b, parent]
            g_pa, g_shift = motion_shift_reverse(s_cacc[b, parent], d, cacc_bar)
            g_cacc[b, parent] = g_cacc[b, parent] + g_pa
            add_ref_adjoint(b, l, g_shift, g_lpos)
            add_ref_adjoint(b, parent, -g_shift, g_lpos)
