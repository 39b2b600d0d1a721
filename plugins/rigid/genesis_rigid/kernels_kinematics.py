"""Forward kinematics and dof motion subspaces, for one environment b (called inside the per-env loop).

Follows MuJoCo's mj_kinematics / mj_comVel: a body's frame is its parent's composed with its offset, then each
of its joints in order rotates (hinge, ball) about the joint anchor or translates (slide) along the axis (hinge
and slide by q - ref: at q = ref the body is where the file placed it); a free
joint sets the pose from qpos. Free-joint translations are world-axis dofs, ball and free rotations are
body-axis dofs.
"""

import taichi as ti

from .kernels_math import func, axis_angle_quat, motion_cross, quat_mul, quat_normalize, quat_to_mat, spatial, v3, v3e, v4e
from .layout import (JF_AXIS, JF_POS, JF_REF, JI_DOF_START, JI_Q_START, JI_TYPE, LF_COM, LF_POS, LF_QUAT, LI_JOINT_END,
                     LI_JOINT_START, LI_PARENT)
from .model import BALL, FREE, HINGE, SLIDE


@func
def forward_kinematics(b, f, qpos, links_pos, links_quat, link_f, link_i, joint_f, joint_i, s_R, s_com, s_janchor,
                       s_jaxis):
    """Link poses of env b at frame f from qpos[f, b]: links_pos/links_quat[f, b], rotation matrices s_R,
    world centres of mass s_com, and each joint's world anchor and axis (s_janchor, s_jaxis)."""
    for l in range(link_i.shape[0]):
        parent = link_i[l, LI_PARENT]
        xpos = v3e(link_f, b, l, LF_POS)
        xquat = v4e(link_f, b, l, LF_QUAT)
        if parent >= 0:
            xpos = links_pos[f, b, parent] + s_R[b, parent] @ xpos
            xquat = quat_mul(links_quat[f, b, parent], xquat)
        for j in range(link_i[l, LI_JOINT_START], link_i[l, LI_JOINT_END]):
            jtype = joint_i[j, JI_TYPE]
            qs = joint_i[j, JI_Q_START]
            jpos = v3(joint_f, j, JF_POS)
            jaxis = v3(joint_f, j, JF_AXIS)
            rot = quat_to_mat(xquat)
            anchor = rot @ jpos + xpos
            s_jaxis[b, j] = rot @ jaxis
            if jtype == FREE:
                xpos = ti.Vector([qpos[f, b, qs], qpos[f, b, qs + 1], qpos[f, b, qs + 2]])
                xquat = quat_normalize(ti.Vector([qpos[f, b, qs + 3], qpos[f, b, qs + 4], qpos[f, b, qs + 5],
                                                  qpos[f, b, qs + 6]]))
                anchor = xpos
            elif jtype == BALL:
                q = quat_normalize(ti.Vector([qpos[f, b, qs], qpos[f, b, qs + 1], qpos[f, b, qs + 2],
                                              qpos[f, b, qs + 3]]))
                xquat = quat_mul(xquat, q)
                xpos = anchor - quat_to_mat(xquat) @ jpos
            elif jtype == HINGE:
                xquat = quat_mul(xquat, axis_angle_quat(jaxis, qpos[f, b, qs] - joint_f[j, JF_REF]))
                xpos = anchor - quat_to_mat(xquat) @ jpos
            elif jtype == SLIDE:
                xpos = xpos + s_jaxis[b, j] * (qpos[f, b, qs] - joint_f[j, JF_REF])
            s_janchor[b, j] = anchor
        xquat = quat_normalize(xquat)
        links_pos[f, b, l] = xpos
        links_quat[f, b, l] = xquat
        s_R[b, l] = quat_to_mat(xquat)
        s_com[b, l] = xpos + s_R[b, l] @ v3e(link_f, b, l, LF_COM)


@func
def dof_motions(b, f, dofs_vel, links_pos, link_i, joint_i, s_R, s_janchor, s_jaxis, s_cdof, s_cdof_dot, s_cvel):
    """Motion subspace cdof of every dof, its time derivative cdof_dot, and link spatial velocities s_cvel."""
    for l in range(link_i.shape[0]):
        parent = link_i[l, LI_PARENT]
        cvel = ti.Vector([0.0, 0.0, 0.0, 0.0, 0.0, 0.0])
        if parent >= 0:
            cvel = s_cvel[b, parent]
        rot = s_R[b, l]
        for j in range(link_i[l, LI_JOINT_START], link_i[l, LI_JOINT_END]):
            jtype = joint_i[j, JI_TYPE]
            d0 = joint_i[j, JI_DOF_START]
            anchor = s_janchor[b, j]
            if jtype == FREE:
                for i in ti.static(range(3)):
                    e = ti.Vector([0.0, 0.0, 0.0])
                    e[i] = 1.0
                    s_cdof[b, d0 + i] = spatial(ti.Vector([0.0, 0.0, 0.0]), e)
                    s_cdof_dot[b, d0 + i] = ti.Vector([0.0, 0.0, 0.0, 0.0, 0.0, 0.0])
                    cvel += s_cdof[b, d0 + i] * dofs_vel[f, b, d0 + i]
                for i in ti.static(range(3)):
                    axis = ti.Vector([rot[0, i], rot[1, i], rot[2, i]])
                    s_cdof[b, d0 + 3 + i] = spatial(axis, anchor.cross(axis))
                for i in ti.static(range(3)):
                    s_cdof_dot[b, d0 + 3 + i] = motion_cross(cvel, s_cdof[b, d0 + 3 + i])
                for i in ti.static(range(3)):
                    cvel += s_cdof[b, d0 + 3 + i] * dofs_vel[f, b, d0 + 3 + i]
            elif jtype == BALL:
                for i in ti.static(range(3)):
                    axis = ti.Vector([rot[0, i], rot[1, i], rot[2, i]])
                    s_cdof[b, d0 + i] = spatial(axis, anchor.cross(axis))
                    s_cdof_dot[b, d0 + i] = motion_cross(cvel, s_cdof[b, d0 + i])
                for i in ti.static(range(3)):
                    cvel += s_cdof[b, d0 + i] * dofs_vel[f, b, d0 + i]
            else:
                axis = s_jaxis[b, j]
                if jtype == HINGE:
                    s_cdof[b, d0] = spatial(axis, anchor.cross(axis))
                else:
                    s_cdof[b, d0] = spatial(ti.Vector([0.0, 0.0, 0.0]), axis)
                s_cdof_dot[b, d0] = motion_cross(cvel, s_cdof[b, d0])
                cvel += s_cdof[b, d0] * dofs_vel[f, b, d0]
        s_cvel[b, l] = cvel
