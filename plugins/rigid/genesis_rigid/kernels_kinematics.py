"""Forward kinematics and dof motion subspaces, for one environment b (called inside the per-env loop).

Follows MuJoCo's mj_kinematics / mj_comVel: a body's frame is its parent's composed with its offset, then each
of its joints in order rotates (hinge, ball) about the joint anchor or translates (slide) along the axis (hinge
and slide by q - ref: at q = ref the body is where the file placed it); a free
joint sets the pose from qpos. Free-joint translations are world-axis dofs, ball and free rotations are
body-axis dofs.

Link poses (links_pos, links_quat) are world poses. A link's spatial quantities (its centre of mass, its joints'
anchors, the motion subspaces of its dofs, its spatial velocity, and in the dynamics its inertia, its subtree's
composite inertia and forces) are expressed in world axes about the link's own origin at the configuration (s_ref
per link: its world position); a quantity passing from a link to its parent or child is shifted between the two
origins (kernels_math.motion_shift, force_shift, inertia_shift). MuJoCo and Genesis World express them all about
one point per tree, its centre of mass. Single precision cannot hold that for a large system: about a point at
distance r, a link carries an inertia m r^2 beside its own I, and a mass-matrix entry of size I comes out of terms
of size m r^2 that cancel. About the world origin a body 1 km from it went NaN at its second step; about the root
a tree whose small links sit 300 m from its base did the same. About each link's origin the numbers are the
link's size, and the large ones (a subtree's inertia about a distant parent joint) are the physics, not
cancellation.
"""

import taichi as ti

from .kernels_math import (axis_angle_quat, axis_angle_quat_reverse, func, motion_cross, motion_cross_reverse,
                           motion_shift, motion_shift_reverse, quat_mul, quat_mul_reverse, quat_normalize,
                           quat_normalize_reverse, quat_to_mat, quat_to_mat_reverse, spatial, v3, v3e, v4e)
from .layout import (JF_AXIS, JF_POS, JF_REF, JI_DOF_START, JI_Q_START, JI_TYPE, LF_COM, LF_POS, LF_QUAT, LI_DOF_START,
                     LI_JOINT_END, LI_JOINT_START, LI_PARENT)
from .model import BALL, FREE, HINGE, SLIDE


@func
def compose_joint(b, f, j, qpos, joint_f, joint_i, xpos, xquat):
    """A link frame (xpos, xquat: the parent's composed with the link's offset and its joints before j) moved by
    joint j at qpos[f, b]: (xpos, xquat, the joint's world anchor, its world axis). Hinge and ball joints rotate the
    frame about the anchor, a slide translates it along the axis (hinge and slide by q - ref), a free joint sets it
    from qpos (its anchor: the new origin). xquat is not normalised here (forward_kinematics does at the link's end)."""
    jtype = joint_i[j, JI_TYPE]
    qs = joint_i[j, JI_Q_START]
    jpos = v3(joint_f, j, JF_POS)
    jaxis = v3(joint_f, j, JF_AXIS)
    rot = quat_to_mat(xquat)
    anchor = rot @ jpos + xpos
    axis = rot @ jaxis
    if jtype == FREE:
        xpos = ti.Vector([qpos[f, b, qs], qpos[f, b, qs + 1], qpos[f, b, qs + 2]])
        xquat = quat_normalize(ti.Vector([qpos[f, b, qs + 3], qpos[f, b, qs + 4], qpos[f, b, qs + 5],
                                          qpos[f, b, qs + 6]]))
        anchor = xpos
    elif jtype == BALL:
        q = quat_normalize(ti.Vector([qpos[f, b, qs], qpos[f, b, qs + 1], qpos[f, b, qs + 2], qpos[f, b, qs + 3]]))
        xquat = quat_mul(xquat, q)
        xpos = anchor - quat_to_mat(xquat) @ jpos
    elif jtype == HINGE:
        xquat = quat_mul(xquat, axis_angle_quat(jaxis, qpos[f, b, qs] - joint_f[j, JF_REF]))
        xpos = anchor - quat_to_mat(xquat) @ jpos
    elif jtype == SLIDE:
        xpos = xpos + axis * (qpos[f, b, qs] - joint_f[j, JF_REF])
    return xpos, xquat, anchor, axis


@func
def forward_kinematics(b, f, qpos, links_pos, links_quat, link_f, link_i, joint_f, joint_i, s_R, s_com, s_janchor,
                       s_jaxis, s_ref):
    """Link poses of env b at frame f from qpos[f, b]: links_pos/links_quat[f, b], rotation matrices s_R, each
    link's reference point s_ref (its origin, world), and, relative to it, its centre of mass s_com and its joints'
    anchors s_janchor; the joints' world axes s_jaxis."""
    for l in range(link_i.shape[0]):
        parent = link_i[l, LI_PARENT]
        xpos = v3e(link_f, b, l, LF_POS)
        xquat = v4e(link_f, b, l, LF_QUAT)
        if parent >= 0:
            xpos = links_pos[f, b, parent] + s_R[b, parent] @ xpos
            xquat = quat_mul(links_quat[f, b, parent], xquat)
        j0 = link_i[l, LI_JOINT_START]
        j1 = link_i[l, LI_JOINT_END]
        for j in range(j0, j1):
            xpos, xquat, anchor, axis = compose_joint(b, f, j, qpos, joint_f, joint_i, xpos, xquat)
            s_jaxis[b, j] = axis
            s_janchor[b, j] = anchor
        xquat = quat_normalize(xquat)
        for j in range(j0, j1):
            s_janchor[b, j] = s_janchor[b, j] - xpos
        links_pos[f, b, l] = xpos
        links_quat[f, b, l] = xquat
        s_ref[b, l] = xpos
        s_R[b, l] = quat_to_mat(xquat)
        s_com[b, l] = s_R[b, l] @ v3e(link_f, b, l, LF_COM)


@func
def dof_motions(b, f, dofs_vel, link_i, joint_i, s_R, s_janchor, s_jaxis, s_ref, s_cdof, s_cdof_dot, s_cvel):
    """Motion subspace cdof of every dof, its time derivative cdof_dot, and link spatial velocities s_cvel, each
    about its link's origin s_ref (a spatial velocity's time derivative taken about the world point that coincides
    with the origin now: cdof_dot = cvel x cdof)."""
    for l in range(link_i.shape[0]):
        parent = link_i[l, LI_PARENT]
        cvel = ti.Vector([0.0, 0.0, 0.0, 0.0, 0.0, 0.0])
        if parent >= 0:
            cvel = motion_shift(s_cvel[b, parent], s_ref[b, l] - s_ref[b, parent])
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


# -- reverse mode ----------------------------------------------------------------------------------------------------
# Hand-written adjoints of the two functions above (kernels_step.substep_reverse). Each reverse function reads the
# adjoints of the outputs of its forward and accumulates (+=) into the adjoints of its inputs.


@func
def add_ref_adjoint(b, l, g, g_lpos):
    """Adds g, an adjoint of link l's reference point s_ref[b, l], to that of its source: the link's position."""
    g_lpos[b, l] = g_lpos[b, l] + g


@func
def link_frame_before(b, f, qpos, links_pos, links_quat, link_f, link_i, joint_f, joint_i, l, j_stop):
    """(xpos, xquat) of link l of env b as forward_kinematics has them after the link's offset and its joints before
    j_stop (xquat not normalised), from the parent's pose in links_pos / links_quat[f, b] and qpos[f, b]."""
    parent = link_i[l, LI_PARENT]
    xpos = v3e(link_f, b, l, LF_POS)
    xquat = v4e(link_f, b, l, LF_QUAT)
    if parent >= 0:
        xpos = links_pos[f, b, parent] + quat_to_mat(links_quat[f, b, parent]) @ xpos
        xquat = quat_mul(links_quat[f, b, parent], xquat)
    for j in range(link_i[l, LI_JOINT_START], j_stop):
        xpos, xquat, _, _ = compose_joint(b, f, j, qpos, joint_f, joint_i, xpos, xquat)
    return xpos, xquat


@func
def forward_kinematics_reverse(b, f, qpos, links_pos, links_quat, link_f, link_i, joint_f, joint_i, s_R, g_qpos, g_lpos,
                               g_lquat, g_R, g_com, g_janchor, g_jaxis, g_link_f):
    """Reverse of forward_kinematics(b, f, ...). Reads qpos[f, b], link_f[b], the forward's links_pos / links_quat
    [f, b] (the parents' poses; the rotations are recomputed from links_quat, s_R is not read) and the adjoints
    g_lpos, g_lquat, g_R, g_com (per link), g_janchor, g_jaxis (per joint); accumulates into g_qpos[b],
    g_link_f[b, :, LF_POS:+3 / LF_QUAT:+4 / LF_COM:+3] and, links in reverse order, into the parent's
    g_lpos / g_lquat / g_R (which the parent then reads). The reference point s_ref is the link's position: the
    adjoint of the anchors s_janchor it was subtracted from goes, negated, into the link's g_lpos, beside the
    adjoints of s_ref from elsewhere (add_ref_adjoint: the dof motions, the dynamics, the contact Jacobians)."""
    n_links = link_i.shape[0]
    for l_rev in range(n_links):
        l = n_links - 1 - l_rev
        parent = link_i[l, LI_PARENT]
        j0 = link_i[l, LI_JOINT_START]
        j1 = link_i[l, LI_JOINT_END]
        xpos, xquat = link_frame_before(b, f, qpos, links_pos, links_quat, link_f, link_i, joint_f, joint_i, l, j1)
        xquat_n = quat_normalize(xquat)
        rot_n = quat_to_mat(xquat_n)
        com = v3e(link_f, b, l, LF_COM)
        gcom = g_com[b, l]
        gc = rot_n.transpose() @ gcom
        for c in ti.static(range(3)):
            g_link_f[b, l, LF_COM + c] = g_link_f[b, l, LF_COM + c] + gc[c]
        gp = g_lpos[b, l]
        for j in range(j0, j1):
            gp -= g_janchor[b, j]
        gq = quat_normalize_reverse(xquat, g_lquat[b, l]
                                    + quat_to_mat_reverse(xquat_n, g_R[b, l] + gcom.outer_product(com)))
        for j_rev in range(j1 - j0):
            j = j1 - 1 - j_rev
            xp, xq = link_frame_before(b, f, qpos, links_pos, links_quat, link_f, link_i, joint_f, joint_i, l, j)
            jtype = joint_i[j, JI_TYPE]
            qs = joint_i[j, JI_Q_START]
            jpos = v3(joint_f, j, JF_POS)
            jaxis = v3(joint_f, j, JF_AXIS)
            g_rot = g_jaxis[b, j].outer_product(jaxis)
            gp_prev = ti.Vector([0.0, 0.0, 0.0])
            gq_prev = ti.Vector([0.0, 0.0, 0.0, 0.0])
            if jtype == FREE:
                g_anchor = g_janchor[b, j]
                qraw = ti.Vector([qpos[f, b, qs + 3], qpos[f, b, qs + 4], qpos[f, b, qs + 5], qpos[f, b, qs + 6]])
                gqr = quat_normalize_reverse(qraw, gq)
                for c in ti.static(range(3)):
                    g_qpos[b, qs + c] = g_qpos[b, qs + c] + (gp[c] + g_anchor[c])
                for c in ti.static(range(4)):
                    g_qpos[b, qs + 3 + c] = g_qpos[b, qs + 3 + c] + gqr[c]
            elif jtype == SLIDE:
                g_anchor = g_janchor[b, j]
                dq = qpos[f, b, qs] - joint_f[j, JF_REF]
                g_qpos[b, qs] = g_qpos[b, qs] + gp.dot(quat_to_mat(xq) @ jaxis)
                g_rot += (gp * dq).outer_product(jaxis) + g_anchor.outer_product(jpos)
                gp_prev = gp + g_anchor
                gq_prev = gq
            else:
                g_anchor = g_janchor[b, j] + gp
                q = ti.Vector([1.0, 0.0, 0.0, 0.0])
                qraw = ti.Vector([qpos[f, b, qs], qpos[f, b, qs + 1], qpos[f, b, qs + 2], qpos[f, b, qs + 3]])
                dq = qpos[f, b, qs] - joint_f[j, JF_REF]
                if jtype == BALL:
                    q = quat_normalize(qraw)
                else:
                    q = axis_angle_quat(jaxis, dq)
                xq_new = quat_mul(xq, q)
                gxq, gqj = quat_mul_reverse(xq, q, gq + quat_to_mat_reverse(xq_new, -gp.outer_product(jpos)))
                if jtype == BALL:
                    gqr = quat_normalize_reverse(qraw, gqj)
                    for c in ti.static(range(4)):
                        g_qpos[b, qs + c] = g_qpos[b, qs + c] + gqr[c]
                else:
                    g_qpos[b, qs] = g_qpos[b, qs] + axis_angle_quat_reverse(jaxis, dq, gqj)
                g_rot += g_anchor.outer_product(jpos)
                gp_prev = g_anchor
                gq_prev = gxq
            gp = gp_prev
            gq = gq_prev + quat_to_mat_reverse(xq, g_rot)
        p_off = v3e(link_f, b, l, LF_POS)
        q_off = v4e(link_f, b, l, LF_QUAT)
        g_poff = gp
        g_qoff = gq
        if parent >= 0:
            qp = links_quat[f, b, parent]
            g_poff = quat_to_mat(qp).transpose() @ gp
            g_qp, g_qoff2 = quat_mul_reverse(qp, q_off, gq)
            g_qoff = g_qoff2
            g_lpos[b, parent] = g_lpos[b, parent] + gp
            g_R[b, parent] = g_R[b, parent] + gp.outer_product(p_off)
            g_lquat[b, parent] = g_lquat[b, parent] + g_qp
        for c in ti.static(range(3)):
            g_link_f[b, l, LF_POS + c] = g_link_f[b, l, LF_POS + c] + g_poff[c]
        for c in ti.static(range(4)):
            g_link_f[b, l, LF_QUAT + c] = g_link_f[b, l, LF_QUAT + c] + g_qoff[c]


@func
def _motion_axis_reverse(anchor, axis, g):
    """Adjoints (of the anchor, of the axis) of the rotation subspace spatial(axis, anchor x axis) for its adjoint
    g."""
    g_ang = ti.Vector([g[0], g[1], g[2]])
    g_lin = ti.Vector([g[3], g[4], g[5]])
    return axis.cross(g_lin), g_ang + g_lin.cross(anchor)


@func
def dof_motions_reverse(b, f, dofs_vel, link_i, joint_i, s_R, s_janchor, s_jaxis, s_ref, s_cdof, s_cvel, g_vel, g_R,
                        g_janchor, g_jaxis, g_lpos, g_cdof, g_cdof_dot, g_cvel):
    """Reverse of dof_motions(b, f, ...). Reads dofs_vel[f, b], the forward's s_R, s_janchor, s_jaxis, s_ref,
    s_cdof, s_cvel (the running link velocities are recomputed from s_cvel of the parent and s_cdof), and the
    adjoints g_cdof, g_cdof_dot, g_cvel; accumulates into g_vel[b], g_R[b] (ball and free rotation axes: the
    columns of s_R), g_janchor[b], g_jaxis[b], g_lpos[b] (the origins the parent's velocity was shifted between)
    and, links in reverse order, into the parent's g_cvel (which the parent then reads)."""
    n_links = link_i.shape[0]
    for l_rev in range(n_links):
        l = n_links - 1 - l_rev
        parent = link_i[l, LI_PARENT]
        rot = s_R[b, l]
        g_rot = ti.Matrix.zero(float, 3, 3)
        gcv = g_cvel[b, l]
        j0 = link_i[l, LI_JOINT_START]
        j1 = link_i[l, LI_JOINT_END]
        for j_rev in range(j1 - j0):
            j = j1 - 1 - j_rev
            jtype = joint_i[j, JI_TYPE]
            d0 = joint_i[j, JI_DOF_START]
            anchor = s_janchor[b, j]
            cvel = ti.Vector([0.0, 0.0, 0.0, 0.0, 0.0, 0.0])
            if parent >= 0:
                cvel = motion_shift(s_cvel[b, parent], s_ref[b, l] - s_ref[b, parent])
            for d in range(link_i[l, LI_DOF_START], d0):
                cvel += s_cdof[b, d] * dofs_vel[f, b, d]
            g_anchor = ti.Vector([0.0, 0.0, 0.0])
            if jtype == FREE or jtype == BALL:
                r0 = 0
                if jtype == FREE:
                    r0 = 3
                    for i in ti.static(range(3)):
                        cvel += s_cdof[b, d0 + i] * dofs_vel[f, b, d0 + i]
                g_cross = ti.Vector([0.0, 0.0, 0.0, 0.0, 0.0, 0.0])
                for i in ti.static(range(3)):
                    d = d0 + r0 + i
                    cd = s_cdof[b, d]
                    g_vel[b, d] = g_vel[b, d] + gcv.dot(cd)
                    ga, gcd = motion_cross_reverse(cvel, cd, g_cdof_dot[b, d])
                    g_cross += ga
                    ganc, gax = _motion_axis_reverse(anchor, ti.Vector([rot[0, i], rot[1, i], rot[2, i]]),
                                                     g_cdof[b, d] + gcv * dofs_vel[f, b, d] + gcd)
                    g_anchor += ganc
                    for k in ti.static(range(3)):
                        g_rot[k, i] = g_rot[k, i] + gax[k]
                gcv += g_cross
                if jtype == FREE:
                    for i in ti.static(range(3)):
                        g_vel[b, d0 + i] = g_vel[b, d0 + i] + gcv[3 + i]
            else:
                cd = s_cdof[b, d0]
                g_vel[b, d0] = g_vel[b, d0] + gcv.dot(cd)
                ga, gcd = motion_cross_reverse(cvel, cd, g_cdof_dot[b, d0])
                gcd += g_cdof[b, d0] + gcv * dofs_vel[f, b, d0]
                gcv += ga
                if jtype == HINGE:
                    ganc, gax = _motion_axis_reverse(anchor, s_jaxis[b, j], gcd)
                    g_anchor += ganc
                    g_jaxis[b, j] = g_jaxis[b, j] + gax
                else:
                    g_jaxis[b, j] = g_jaxis[b, j] + ti.Vector([gcd[3], gcd[4], gcd[5]])
            g_janchor[b, j] = g_janchor[b, j] + g_anchor
        g_R[b, l] = g_R[b, l] + g_rot
        if parent >= 0:
            g_pv, g_shift = motion_shift_reverse(s_cvel[b, parent], s_ref[b, l] - s_ref[b, parent], gcv)
            g_cvel[b, parent] = g_cvel[b, parent] + g_pv
            add_ref_adjoint(b, l, g_shift, g_lpos)
            add_ref_adjoint(b, parent, -g_shift, g_lpos)
