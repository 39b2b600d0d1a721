"""The positions' advance of a substep, for one environment b: generalized positions moved by velocities (hinge and
slide add, ball and free joints rotate their quaternion by the body-frame angular velocity, free joints translate by
the world linear velocity), and its adjoint for the differentiable substep."""

import taichi as ti

from .kernels_math import func, quat_integrate, quat_mul, quat_mul_reverse, quat_normalize_reverse
from .layout import JI_DOF_START, JI_Q_START, JI_TYPE
from .model import BALL, FREE, HINGE, SLIDE


@func
def advance_q(b, src, fs, dst, fd, vel, fv, scale, joint_i):
    """dst[fd, b] = src[fs, b] moved by scale * vel[fv, b]: hinge and slide add, ball and free rotate their
    quaternion by the body-frame angular velocity, free joints translate by the world linear velocity."""
    for j in range(joint_i.shape[0]):
        jtype = joint_i[j, JI_TYPE]
        qs = joint_i[j, JI_Q_START]
        d0 = joint_i[j, JI_DOF_START]
        if jtype == HINGE or jtype == SLIDE:
            dst[fd, b, qs] = src[fs, b, qs] + scale * vel[fv, b, d0]
        elif jtype == FREE or jtype == BALL:  # (the padding row of a model without joints has type -1)
            r0 = 0
            if jtype == FREE:
                for k in ti.static(range(3)):
                    dst[fd, b, qs + k] = src[fs, b, qs + k] + scale * vel[fv, b, d0 + k]
                r0 = 3
            q = ti.Vector([src[fs, b, qs + r0], src[fs, b, qs + r0 + 1], src[fs, b, qs + r0 + 2],
                           src[fs, b, qs + r0 + 3]])
            omega = ti.Vector([vel[fv, b, d0 + r0], vel[fv, b, d0 + r0 + 1], vel[fv, b, d0 + r0 + 2]])
            qn = quat_integrate(q, omega, scale)
            for k in ti.static(range(4)):
                dst[fd, b, qs + r0 + k] = qn[k]


@ti.func
def quat_integrate_reverse(q, omega, h, g_out):
    """The adjoints of q and omega for the adjoint g_out of quat_integrate(q, omega, h). At an angle the forward
    does not rotate by (|omega| h <= 1e-30, h > 0) omega gets the derivative's limit at omega = 0."""
    a = omega.norm()
    angle = a * h
    g_q = g_out
    g_w = ti.Vector([0.0, 0.0, 0.0])
    if angle > 1e-30:
        half = 0.5 * angle
        c = ti.cos(half)
        sn = ti.sin(half)
        e = ti.Vector([c, sn * omega[0] / a, sn * omega[1] / a, sn * omega[2] / a])
        g_q, g_e = quat_mul_reverse(q, e, quat_normalize_reverse(quat_mul(q, e), g_out))
        g_ev = ti.Vector([g_e[1], g_e[2], g_e[3]])
        unit = omega / a
        # e = (cos(a h / 2), sin(a h / 2) / a * omega)
        g_w = (g_e[0] * (-sn * 0.5 * h) + g_ev.dot(omega) * (c * 0.5 * h / a - sn / (a * a))) * unit + \
            (sn / a) * g_ev
    elif h > 0.0:
        _, g_e = quat_mul_reverse(q, ti.Vector([1.0, 0.0, 0.0, 0.0]), g_out)
        g_w = 0.5 * h / ti.max(q.norm(), 1e-30) * ti.Vector([g_e[1], g_e[2], g_e[3]])
    return g_q, g_w


@func
def advance_q_reverse(b, src, fs, vel, fv, scale, joint_i, g_dst, g_src, g_vel):
    """Adjoint of advance_q(b, src, fs, dst, fd, vel, fv, scale, joint_i) for the adjoint g_dst[b, :] of dst[fd, b];
    accumulates into g_src[b, :] (src[fs, b]) and g_vel[b, :] (vel[fv, b]). Hinge, slide, ball and free joints
    (quat_integrate's normalisation included)."""
    for j in range(joint_i.shape[0]):
        jtype = joint_i[j, JI_TYPE]
        qs = joint_i[j, JI_Q_START]
        d0 = joint_i[j, JI_DOF_START]
        if jtype == HINGE or jtype == SLIDE:
            g = g_dst[b, qs]
            g_src[b, qs] = g_src[b, qs] + g
            g_vel[b, d0] = g_vel[b, d0] + scale * g
        elif jtype == FREE or jtype == BALL:
            r0 = 0
            if jtype == FREE:
                for k in ti.static(range(3)):
                    g = g_dst[b, qs + k]
                    g_src[b, qs + k] = g_src[b, qs + k] + g
                    g_vel[b, d0 + k] = g_vel[b, d0 + k] + scale * g
                r0 = 3
            q = ti.Vector([src[fs, b, qs + r0], src[fs, b, qs + r0 + 1], src[fs, b, qs + r0 + 2],
                           src[fs, b, qs + r0 + 3]])
            omega = ti.Vector([vel[fv, b, d0 + r0], vel[fv, b, d0 + r0 + 1], vel[fv, b, d0 + r0 + 2]])
            g_out = ti.Vector([g_dst[b, qs + r0], g_dst[b, qs + r0 + 1], g_dst[b, qs + r0 + 2],
                               g_dst[b, qs + r0 + 3]])
            g_q, g_w = quat_integrate_reverse(q, omega, scale, g_out)
            for k in ti.static(range(4)):
                g_src[b, qs + r0 + k] = g_src[b, qs + r0 + k] + g_q[k]
            for k in ti.static(range(3)):
                g_vel[b, d0 + r0 + k] = g_vel[b, d0 + r0 + k] + g_w[k]
