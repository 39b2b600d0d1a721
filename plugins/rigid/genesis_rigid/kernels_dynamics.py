"""Joint-space dynamics of one environment b: composite-rigid-body mass matrix, recursive Newton-Euler bias
forces (Coriolis, centrifugal, gravity), and a factorisation and solve that follow the tree's sparsity.

M qacc = tau - c(q, qdot): with spatial inertias about the world origin, the bias c is RNE with qacc = 0 and the
base accelerating at -g (Featherstone, Rigid Body Dynamics Algorithms, 5.3); M by CRBA (6.2). The factorised
matrix is M + diag(armature + h (damping + kv) + h^2 kp): damping and PD gains are integrated implicitly, as in
MuJoCo's Euler integrator, which keeps stiff position servos stable at large steps; joint springs are explicit, as
MuJoCo's.
"""

import taichi as ti

from .kernels_math import func, force_cross, inertia_apply, quat_to_mat, spatial, v3e, v4e
from .layout import (CTRL_FORCE, CTRL_POSITION, CTRL_VELOCITY, DF_ARMATURE, DF_DAMPING, DF_FORCE_HI, DF_FORCE_LO,
                     DI_LINK, DI_PARENT, DI_Q, LF_FLUID_BOX, LF_FLUID_DENSITY, LF_FLUID_IQUAT,
                     LF_FLUID_VISCOSITY, LF_FLUID_WIND, LF_GRAVCOMP, LF_INERTIA, LF_MASS, LI_DOF_END, LI_DOF_START,
                     LI_PARENT)


@func
def control_raw(b, f, d, hi, qpos, dofs_vel, dof_i, ctrl_mode, ctrl_force, ctrl_pos, ctrl_vel, ctrl_kp, ctrl_kv):
    """Dof d's control force at (qpos[f, b], dofs_vel[f, b]) before its range: the command (force mode); the PD law
    kp (target - q - hi v) + kv (target_v - v) (position mode, hi the implicit step); kv (target_v - v)
    (velocity mode)."""
    v = dofs_vel[f, b, d]
    mode = ctrl_mode[b, d]
    raw = 0.0
    if mode == CTRL_FORCE:
        raw = ctrl_force[b, d]
    elif mode == CTRL_POSITION:
        qi = dof_i[d, DI_Q]
        q = 0.0
        if qi >= 0:
            q = qpos[f, b, qi]
        raw = ctrl_kp[b, d] * (ctrl_pos[b, d] - q - hi * v) + ctrl_kv[b, d] * (ctrl_vel[b, d] - v)
    elif mode == CTRL_VELOCITY:
        raw = ctrl_kv[b, d] * (ctrl_vel[b, d] - v)
    return raw


@func
def link_inertia_world(b, l, link_f, s_R, s_com):
    """Mass, first moment m c and rotational inertia about the world origin of link l (world axes)."""
    m = link_f[b, l, LF_MASS]
    ic = ti.Matrix.zero(float, 3, 3)
    for r in ti.static(range(3)):
        for c in ti.static(range(3)):
            ic[r, c] = link_f[b, l, LF_INERTIA + 3 * r + c]
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
                  ctrl_vel, ctrl_kp, ctrl_kv, h, s_R, s_com, s_cdof, s_cdof_dot, s_cvel, s_cacc, s_cfrc, s_crb_m, s_crb_mc, s_crb_io, s_mass,
                  s_dof):
    """Fill s_dof[b, :, 0] with the bias forces c and s_mass[b] with the implicit-integration matrix."""
    n_links = link_i.shape[0]
    n_dofs = dof_i.shape[0]
    gravity = ti.Vector([params_f[0], params_f[1], params_f[2]])
    # forward pass: bias accelerations (qacc = 0, the base accelerating at -g) and link forces
    for l in range(n_links):
        parent = link_i[l, LI_PARENT]
        cacc = spatial(ti.Vector([0.0, 0.0, 0.0]), -gravity)
        if parent >= 0:
            cacc = s_cacc[b, parent]
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
            s_cfrc[b, l] -= spatial(s_com[b, l].cross(lift), lift)
        # the fluid's force and torque at the centre of mass (explicit, as MuJoCo's)
        if link_f[b, l, LF_FLUID_DENSITY] + link_f[b, l, LF_FLUID_VISCOSITY] > 0.0 and m > 1e-15:
            fl, tq = fluid_wrench(b, l, link_f, s_R, s_com, cvel)
            s_cfrc[b, l] -= spatial(tq + s_com[b, l].cross(fl), fl)
    # backward pass: subtree forces and composite inertias
    for i in range(n_links):
        l = n_links - 1 - i
        parent = link_i[l, LI_PARENT]
        if parent >= 0:
            s_cfrc[b, parent] += s_cfrc[b, l]
            s_crb_m[b, parent] += s_crb_m[b, l]
            s_crb_mc[b, parent] += s_crb_mc[b, l]
            s_crb_io[b, parent] += s_crb_io[b, l]
    for d in range(n_dofs):
        s_dof[b, d, 0] = s_cdof[b, d].dot(s_cfrc[b, dof_i[d, DI_LINK]])
    # mass matrix by CRBA (the entries between a dof and its ancestors: the only ones factor_ldl reads), plus the
    # implicit terms on the diagonal
    for d in range(n_dofs):
        l = dof_i[d, DI_LINK]
        force = inertia_apply(s_crb_m[b, l], s_crb_mc[b, l], s_crb_io[b, l], s_cdof[b, d])
        i = d
        while i >= 0:
            v = s_cdof[b, i].dot(force)
            s_mass[b, i, d] = v
            s_mass[b, d, i] = v
            i = dof_i[i, DI_PARENT]
    for d in range(n_dofs):
        gain_v = dof_f[b, d, DF_DAMPING]
        gain_p = 0.0
        # a PD law saturates where its implicit value (the explicit one scaled by m / (m + h (kv + h kp)), m the
        # dof's own inertia) leaves the force range: it then acts as its clamped force, explicitly (s_dof[b, d, 5]
        # = 1 for smooth_acceleration); otherwise its gains enter the matrix
        mode = ctrl_mode[b, d]
        s_dof[b, d, 5] = 0.0
        if mode == CTRL_POSITION or mode == CTRL_VELOCITY:
            kp = ctrl_kp[b, d] if mode == CTRL_POSITION else 0.0
            kv = ctrl_kv[b, d]
            raw = control_raw(b, f, d, h, qpos, dofs_vel, dof_i, ctrl_mode, ctrl_force, ctrl_pos, ctrl_vel, ctrl_kp,
                              ctrl_kv)
            m_eff = s_mass[b, d, d] + dof_f[b, d, DF_ARMATURE]
            est = raw * m_eff / ti.max(m_eff + h * (kv + h * kp), 1e-30)
            if est < dof_f[b, d, DF_FORCE_LO] or est > dof_f[b, d, DF_FORCE_HI]:
                s_dof[b, d, 5] = 1.0
            else:
                gain_v += kv
                gain_p = kp
        s_mass[b, d, d] += dof_f[b, d, DF_ARMATURE] + h * gain_v + h * h * gain_p


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
                a[b, i, j] -= t * a[b, k, j]
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
