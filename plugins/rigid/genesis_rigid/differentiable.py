"""The differentiable substep: the semi-implicit Euler substep of kernels_step.py, written with torch operations
batched over environments, so that autograd carries gradients from frame fn back to frame f.

The stages are those of the fast path, in the same order and with the same arithmetic:

    kinematics(q)            link poses, rotation matrices, centres of mass, joint anchors and axes
    motions(v)               dof motion subspaces cdof, their derivatives cdof_dot, link spatial velocities
    dynamics(...)            RNE bias forces, CRBA mass matrix plus the implicit terms, the generalized forces
                             (passive, control, coupling impulses), Cholesky solve: the unconstrained velocity
    contacts(...)            contact points, normals and depths of the primitive pairs (the kernels' narrowphase,
                             differentiable in the link poses); mesh pairs come from the kernels, held constant
    rows(...)                constraint rows: Jacobians, targets (restitution; the position pass's), warm starts
    kernels_grad.pgs         projected Gauss-Seidel, a fixed number of sweeps (its adjoint is written by hand);
                             then again on the normal and limit rows for the position pass (split impulse)
    advance(...)             positions advance with the constrained velocity; kinematics of frame fn

Which geoms touch, which pool entry and candidate slot a contact takes, which warm start it matches, which joint limits are violated and how many rows fit are
discrete decisions: the fast path's collision kernels take them at frame f (the limits and rows: the same tests
here), so that the forward is the fast path's; the gradient is that of the substep with those decisions held fixed (the
derivative almost everywhere). The model (masses, geometry, friction) is constant.
"""

from __future__ import annotations

import math

import numpy as np
import torch

import genesis_core as gs
from genesis_core.rotations import quat_to_mat  # torch tensors, batched

from .kernels_collision import CF_DEPTH, CF_NORMAL, CF_POS, CI_ACTIVE, CI_FEATURE, CI_PREV, CI_SLOT
from .kernels_constraint import BOUNCE_THRESHOLD
from .kernels_grad import ROW_FRICTION, ROW_LIMIT, ROW_NONE, ROW_NORMAL, pgs
from .layout import (CTRL_FORCE, CTRL_POSITION, CTRL_VELOCITY, DF_ARMATURE, DF_DAMPING, DF_FORCE_HI, DF_FORCE_LO,
                     DF_RANGE_HI, DF_RANGE_LO, DF_SPRINGREF, DF_STIFFNESS, DI_LIMITED, DI_LINK, DI_PARENT, DI_Q,
                     GF_FRICTION, GF_POS, GF_QUAT, GF_RESTITUTION, GF_SIZE, GI_LINK, GI_TYPE, JF_AXIS, JF_POS, JF_REF,
                     JI_DOF_START, JI_Q_START, JI_TYPE, LF_COM, LF_FLUID_BOX, LF_FLUID_DENSITY, LF_FLUID_IQUAT,
                     LF_FLUID_VISCOSITY, LF_FLUID_WIND, LF_GRAVCOMP, LF_INERTIA, LF_MASS, LF_POS, LF_QUAT, LI_DOF_END,
                     LI_DOF_START, LI_JOINT_END, LI_JOINT_START, LI_LAST_DOF, LI_PARENT, TF_DAMPING, TF_LIMITED,
                     TF_SPRING_HI, TF_SPRING_LO, TF_STIFFNESS, TI_COUNT, TI_START)
from .model import BALL, BOX, CAPSULE, CYLINDER, FREE, HINGE, MESH, PLANE, SLIDE, SPHERE

# the fields a substep reads (frame f, or frameless) and writes (frame fn) in differentiable mode
INPUT_FIELDS = ("qpos", "dofs_vel", "contact_impulse", "links_ext_impulse", "dofs_ctrl_force", "dofs_ctrl_pos",
                "dofs_ctrl_vel", "dofs_kp", "dofs_kv")
OUTPUT_FIELDS = ("qpos", "dofs_vel", "dofs_acc", "links_pos", "links_quat", "contact_impulse")
# the ColliderView arrays computed from frame fn
VIEW_ARRAYS = ("geom_pos", "geom_quat", "body_com", "body_lin_vel", "body_ang_vel", "body_quat")


# -- small torch functions (quaternions (w, x, y, z), spatial vectors (angular, linear) at the world origin) ----------


def quat_mul(a, b):
    aw, ax, ay, az = a.unbind(-1)
    bw, bx, by, bz = b.unbind(-1)
    return torch.stack([aw * bw - ax * bx - ay * by - az * bz, aw * bx + ax * bw + ay * bz - az * by,
                        aw * by - ax * bz + ay * bw + az * bx, aw * bz + ax * by - ay * bx + az * bw], dim=-1)


def quat_normalize(q):
    return q / q.norm(dim=-1, keepdim=True).clamp_min(1e-30)


def mv(m, v):
    """m @ v over leading batch dimensions (v: [..., 3] or a constant [3])."""
    return (m @ v.unsqueeze(-1)).squeeze(-1)


def dot(a, b):
    return (a * b).sum(-1)


def safe_norm(v, eps=1e-30):
    """|v|, and True where |v|^2 > eps; the gradient is finite everywhere (0 where the norm is treated as 0)."""
    sq = dot(v, v)
    ok = sq > eps
    return torch.sqrt(torch.where(ok, sq, torch.ones_like(sq))) * ok, ok


def motion_cross(a, b):
    w, v = a[..., :3], a[..., 3:]
    bw, bv = b[..., :3], b[..., 3:]
    return torch.cat([torch.cross(w, bw, dim=-1), torch.cross(w, bv, dim=-1) + torch.cross(v, bw, dim=-1)], -1)


def force_cross(a, f):
    w, v = a[..., :3], a[..., 3:]
    n, fl = f[..., :3], f[..., 3:]
    return torch.cat([torch.cross(w, n, dim=-1) + torch.cross(v, fl, dim=-1), torch.cross(w, fl, dim=-1)], -1)


def inertia_apply(m, mc, io, a):
    """Spatial inertia (mass m, first moment mc, rotational inertia io about the origin) times motion a."""
    w, v = a[..., :3], a[..., 3:]
    return torch.cat([mv(io, w) + torch.cross(mc, v, dim=-1), m * v - torch.cross(mc, w, dim=-1)], -1)


def quat_integrate(q, omega, h):
    """q * exp(omega h / 2), normalised (kernels_math.quat_integrate), with the small-angle series below 1e-4 rad
    so that the derivative at omega = 0 is the exact one."""
    a2 = dot(omega, omega) * (h * h)
    big = a2 > 1e-8
    a = torch.sqrt(torch.where(big, a2, torch.ones_like(a2)))
    c = torch.where(big, torch.cos(0.5 * a), 1 - a2 / 8 + a2 * a2 / 384)
    k = torch.where(big, torch.sin(0.5 * a) / a, 0.5 - a2 / 48 + a2 * a2 / 3840)  # sin(a/2) / a
    dq = torch.cat([c.unsqueeze(-1), omega * (h * k).unsqueeze(-1)], -1)
    return quat_normalize(quat_mul(q, dq))


def tangent_basis(n):
    """kernels_math.tangent_basis: two unit tangents completing n to a right-handed frame."""
    nx, ny, nz = n.unbind(-1)
    zero = torch.zeros_like(nx)
    first = (torch.abs(nx) < 0.57).unsqueeze(-1)
    t1 = torch.where(first, torch.stack([zero, nz, -ny], -1), torch.stack([ny, -nx, zero], -1))
    t1 = t1 / t1.norm(dim=-1, keepdim=True)
    return t1, torch.cross(n, t1, dim=-1)


def corner_signs(dtype, device):
    k = np.arange(8)
    signs = np.stack([np.where(k & 1, 1.0, -1.0), np.where(k & 2, 1.0, -1.0), np.where(k & 4, 1.0, -1.0)], -1)
    return torch.as_tensor(signs, dtype=dtype, device=device)


def closest_between_segments(p0, p1, q0, q1):
    """kernels_collision.closest_between_segments, branch for branch (torch.where, safe denominators)."""
    eps = 1e-30
    d1, d2, r = p1 - p0, q1 - q0, p0 - q0
    a, e, f = dot(d1, d1), dot(d2, d2), dot(d2, r)
    c, bb = dot(d1, r), dot(d1, d2)
    one = torch.ones_like(a)
    a_ok, e_ok = a > eps, e > eps
    a_s, e_s = torch.where(a_ok, a, one), torch.where(e_ok, e, one)
    denom = a * e - bb * bb
    d_ok = denom > eps
    s_gen = torch.where(d_ok, ((bb * f - c * e) / torch.where(d_ok, denom, one)).clamp(0.0, 1.0), torch.zeros_like(a))
    t_gen = (bb * s_gen + f) / e_s
    s_gen = torch.where(t_gen < 0, (-c / a_s).clamp(0.0, 1.0), torch.where(t_gen > 1, ((bb - c) / a_s).clamp(0.0, 1.0),
                                                                           s_gen))
    t_gen = t_gen.clamp(0.0, 1.0)
    s = torch.where(a_ok, torch.where(e_ok, s_gen, (-c / a_s).clamp(0.0, 1.0)), torch.zeros_like(a))
    t = torch.where(a_ok, torch.where(e_ok, t_gen, torch.zeros_like(a)), torch.where(e_ok, (f / e_s).clamp(0.0, 1.0),
                                                                                     torch.zeros_like(a)))
    return p0 + d1 * s.unsqueeze(-1), q0 + d2 * t.unsqueeze(-1)


def box_support_radius(rot, h, n):
    """Half-extent of a box (rotation rot [..., 3, 3], half-sizes h [..., 3]) along the unit direction n."""
    return (h * torch.abs((rot * n.unsqueeze(-1)).sum(-2))).sum(-1)


class DifferentiableStep:
    """The substep and the collider geometry of one built RigidSolver as torch functions of its state."""

    def __init__(self, solver, arrays):
        self.solver = solver
        fl, dev = solver.float_dtype, solver.device
        self.fl, self.dev = fl, dev
        a = arrays
        self.h = float(solver.sim_options.substep_dt)
        opts = solver.options
        self.iterations = int(opts.iterations)
        self.baumgarte, self.slop = float(opts.baumgarte), float(opts.contact_slop)
        self.max_correction, self.reg = float(opts.max_correction_velocity), float(opts.regularization)
        self.limits_on = bool(opts.enable_joint_limit)
        self.collision = bool(solver.collision)
        self.gravity = torch.as_tensor(solver.sim_options.gravity, dtype=fl, device=dev)
        self.base_acc = torch.cat([torch.zeros_like(self.gravity), -self.gravity])  # the base accelerates at -g
        self.eye3 = torch.eye(3, dtype=fl, device=dev)
        self.L, self.J, self.D, self.Q = solver.n_links, solver.n_joints, solver.n_dofs, solver.n_qs

        def t(x, dtype=None):
            return torch.as_tensor(np.ascontiguousarray(x), dtype=dtype or fl, device=dev)

        link_f, link_i = a["link_f"][:self.L], a["link_i"][:self.L]
        joint_f, joint_i = a["joint_f"][:self.J], a["joint_i"][:self.J]
        dof_f, dof_i = a["dof_f"], a["dof_i"]
        self.link_parent = [int(x) for x in link_i[:, LI_PARENT]]
        self.link_joints = [range(int(r[LI_JOINT_START]), int(r[LI_JOINT_END])) for r in link_i]
        self.link_dofs = [range(int(r[LI_DOF_START]), int(r[LI_DOF_END])) for r in link_i]
        self.link_pos, self.link_quat = t(link_f[:, LF_POS:LF_POS + 3]), t(link_f[:, LF_QUAT:LF_QUAT + 4])
        self.link_mass = t(link_f[:, LF_MASS])
        self.link_com = t(link_f[:, LF_COM:LF_COM + 3])
        self.link_inertia = t(link_f[:, LF_INERTIA:LF_INERTIA + 9].reshape(-1, 3, 3))
        self.link_gravcomp = [float(x) for x in link_f[:, LF_GRAVCOMP]]
        self.joint_type = [int(x) for x in joint_i[:, JI_TYPE]]
        self.joint_q = [int(x) for x in joint_i[:, JI_Q_START]]
        self.joint_dof = [int(x) for x in joint_i[:, JI_DOF_START]]
        self.joint_pos, self.joint_axis = t(joint_f[:, JF_POS:JF_POS + 3]), t(joint_f[:, JF_AXIS:JF_AXIS + 3])
        self.joint_ref = [float(x) for x in joint_f[:, JF_REF]]
        D = self.D
        self.dof_link = torch.as_tensor(dof_i[:, DI_LINK], dtype=torch.long, device=dev)
        self.dof_q = torch.as_tensor(dof_i[:, DI_Q], dtype=torch.long, device=dev)
        self.dof_has_q = self.dof_q >= 0
        self.dof_q_safe = self.dof_q.clamp(min=0)
        self.springref = t(dof_f[:, DF_SPRINGREF])
        self.set_dof_params(t(dof_f[:, DF_DAMPING]), t(dof_f[:, DF_ARMATURE]), t(dof_f[:, DF_STIFFNESS]),
                            t(dof_f[:, DF_FORCE_LO]), t(dof_f[:, DF_FORCE_HI]))
        # tree structure: anc[i, d] = 1 if dof i is d or an ancestor of d; moves[l, d] = 1 if dof d moves link l
        anc = np.zeros((D, D))
        for d in range(D):
            i = d
            while i >= 0:
                anc[i, d] = 1.0
                i = int(dof_i[i, DI_PARENT])
        moves = np.zeros((max(self.L, 1), D))
        for l in range(self.L):
            d = int(link_i[l, LI_LAST_DOF])
            while d >= 0:
                moves[l, d] = 1.0
                d = int(dof_i[d, DI_PARENT])
        self.anc, self.moves = t(anc), t(moves[:self.L])
        # fixed tendons (kernels_constraint.smooth_acceleration): C [T, D] with L = C q; their limits have no
        # differentiable rows
        ten_f, ten_i = a["ten_f"], a["ten_i"]
        T = len(solver._tendons)
        if any(ten_f[k, TF_LIMITED] != 0 for k in range(T)):
            raise gs.OptionError(f"{solver.name}: a limited tendon is not available with SimOptions(requires_grad=True) "
                                 "(a tendon limit has no differentiable constraint row yet); remove its range.")
        coef = np.zeros((T, D))
        for k in range(T):
            for r in range(int(ten_i[k, TI_START]), int(ten_i[k, TI_START] + ten_i[k, TI_COUNT])):
                coef[k, int(ten_i[r, 0])] += ten_f[r, 0]
        self.tendon_coef = t(coef) if T else None
        self.tendon_params = t(ten_f[:T, [TF_STIFFNESS, TF_DAMPING, TF_SPRING_LO, TF_SPRING_HI]]) if T else None
        # the fluid around each link (kernels_dynamics.fluid_wrench)
        self.link_fluid = [None if link_f[l, LF_FLUID_DENSITY] + link_f[l, LF_FLUID_VISCOSITY] <= 0 else dict(
            density=float(link_f[l, LF_FLUID_DENSITY]), viscosity=float(link_f[l, LF_FLUID_VISCOSITY]),
            wind=t(link_f[l, LF_FLUID_WIND:LF_FLUID_WIND + 3]), box=t(link_f[l, LF_FLUID_BOX:LF_FLUID_BOX + 3]),
            irot=quat_to_mat(t(link_f[l, LF_FLUID_IQUAT:LF_FLUID_IQUAT + 4]))) for l in range(self.L)]
        limited = [d for d in range(D) if dof_i[d, DI_LIMITED] != 0]
        self.limited = torch.as_tensor(limited, dtype=torch.long, device=dev)
        self.limit_q = self.dof_q[self.limited] if limited else self.limited
        self.limit_lo, self.limit_hi = t(dof_f[limited, DF_RANGE_LO]), t(dof_f[limited, DF_RANGE_HI])
        # geoms and contact slots
        geom_f, geom_i, pair_i = a["geom_f"], a["geom_i"], a["pair_i"]
        self.G = solver.n_geoms
        self.geom_link = torch.as_tensor(geom_i[:self.G, GI_LINK], dtype=torch.long, device=dev)
        self.geom_pos = t(geom_f[:self.G, GF_POS:GF_POS + 3])
        self.geom_quat = t(geom_f[:self.G, GF_QUAT:GF_QUAT + 4])
        self.geom_rot = quat_to_mat(self.geom_quat)
        self.S = solver.n_slots
        self.max_contacts = solver.max_contacts
        self.max_rows = 3 * self.max_contacts + len(limited)
        self._setup_contacts(geom_f, geom_i, pair_i[:solver.n_pairs, :4], moves)

    # -- build-time tables of the contact slots -------------------------------------------------------------------

    def _setup_contacts(self, geom_f, geom_i, pairs, moves):
        S, fl, dev = self.S, self.fl, self.dev
        # per slot (at least one: the padding slot rows without a contact point at)
        slot_mu, slot_rest = np.zeros(max(S, 1)), np.zeros(max(S, 1))
        slot_ga, slot_gb = np.zeros(max(S, 1), dtype=np.int64), np.zeros(max(S, 1), dtype=np.int64)
        slot_jac = np.zeros((max(S, 1), self.D))
        groups = {}
        mesh_slots = []
        for ga, gb, slot, n in pairs:
            ta, tb = int(geom_i[ga, GI_TYPE]), int(geom_i[gb, GI_TYPE])
            la, lb = int(geom_i[ga, GI_LINK]), int(geom_i[gb, GI_LINK])
            slot_mu[slot:slot + n] = max(geom_f[ga, GF_FRICTION], geom_f[gb, GF_FRICTION])
            slot_ga[slot:slot + n], slot_gb[slot:slot + n] = ga, gb
            slot_rest[slot:slot + n] = max(geom_f[ga, GF_RESTITUTION], geom_f[gb, GF_RESTITUTION])
            slot_jac[slot:slot + n] = moves[lb] - moves[la]
            if tb == MESH:
                mesh_slots.extend(range(slot, slot + n))
                continue
            if ta == PLANE:
                kind = {SPHERE: "plane_sphere", CAPSULE: "plane_capsule", BOX: "plane_box",
                        CYLINDER: "plane_cylinder"}[tb]
            elif ta == BOX and tb == BOX:
                kind = "box_box"
            elif tb == BOX:
                kind = "sphere_box" if ta == SPHERE else "segment_box"
            else:
                kind = "segments"
            g = groups.setdefault(kind, dict(ga=[], gb=[], slot=[], ha=[], hb=[], sa=[], sb=[]))
            g["ga"].append(int(ga))
            g["gb"].append(int(gb))
            g["slot"].append(list(range(slot, slot + n)))
            sa, sb = geom_f[ga, GF_SIZE:GF_SIZE + 3], geom_f[gb, GF_SIZE:GF_SIZE + 3]
            g["sa"].append(sa)
            g["sb"].append(sb)
            # segment half-lengths (a sphere: a point; a cylinder meets anything but a plane as a capsule)
            g["ha"].append(0.0 if ta in (SPHERE, BOX) else sa[1])
            g["hb"].append(0.0 if tb in (SPHERE, BOX) else sb[1])
        self.groups = {}
        order = []
        for kind, g in groups.items():
            self.groups[kind] = dict(
                ga=torch.as_tensor(g["ga"], dtype=torch.long, device=dev),
                gb=torch.as_tensor(g["gb"], dtype=torch.long, device=dev),
                sa=torch.as_tensor(np.array(g["sa"]), dtype=fl, device=dev),
                sb=torch.as_tensor(np.array(g["sb"]), dtype=fl, device=dev),
                ha=torch.as_tensor(g["ha"], dtype=fl, device=dev), hb=torch.as_tensor(g["hb"], dtype=fl, device=dev),
                slot_index=torch.as_tensor(g["slot"], dtype=torch.long, device=dev))
            order.extend(s for slots in g["slot"] for s in slots)
        self.group_order = list(self.groups)
        self.mesh_slots = torch.as_tensor(mesh_slots, dtype=torch.long, device=dev)
        self.slot_is_mesh = torch.zeros(max(S, 1), dtype=torch.bool, device=dev)
        self.slot_is_mesh[self.mesh_slots] = True
        order.extend(mesh_slots)
        # the slots, in the order the groups produce them, back to slot order
        perm = np.zeros(S, dtype=np.int64)
        perm[np.array(order, dtype=np.int64)] = np.arange(len(order))
        assert sorted(order) == list(range(S))
        self.slot_perm = torch.as_tensor(perm, dtype=torch.long, device=dev)
        self.slot_mu, self.slot_rest = torch.as_tensor(slot_mu, dtype=fl, device=dev), \
            torch.as_tensor(slot_rest, dtype=fl, device=dev)
        self.slot_ga = torch.as_tensor(slot_ga, device=dev)
        self.slot_gb = torch.as_tensor(slot_gb, device=dev)
        self.slot_mu_env = None  # [B, S] once the state's friction ratios are handed over (set_friction)
        self.slot_jac = torch.as_tensor(slot_jac, dtype=fl, device=dev)
        self.corners = corner_signs(fl, dev)

    # -- stages -----------------------------------------------------------------------------------------------------

    def kinematics(self, qpos):
        """kernels_kinematics.forward_kinematics: per link (B, ...) tensors pos, quat, rot, com; per joint anchor,
        world axis."""
        B = qpos.shape[0]
        pos, quat, rot, com = [None] * self.L, [None] * self.L, [None] * self.L, [None] * self.L
        anchor, axis = [None] * self.J, [None] * self.J
        for l in range(self.L):
            parent = self.link_parent[l]
            if parent >= 0:
                xpos = pos[parent] + mv(rot[parent], self.link_pos[l])
                xquat = quat_mul(quat[parent], self.link_quat[l])
            else:
                xpos = self.link_pos[l].expand(B, 3)
                xquat = self.link_quat[l].expand(B, 4)
            for j in self.link_joints[l]:
                jtype, qs = self.joint_type[j], self.joint_q[j]
                jpos, jaxis = self.joint_pos[j], self.joint_axis[j]
                r = quat_to_mat(xquat)
                anc = mv(r, jpos) + xpos
                axis[j] = mv(r, jaxis)
                if jtype == FREE:
                    xpos = qpos[:, qs:qs + 3]
                    xquat = quat_normalize(qpos[:, qs + 3:qs + 7])
                    anc = xpos
                elif jtype == BALL:
                    xquat = quat_mul(xquat, quat_normalize(qpos[:, qs:qs + 4]))
                    xpos = anc - mv(quat_to_mat(xquat), jpos)
                elif jtype == HINGE:
                    half = 0.5 * (qpos[:, qs:qs + 1] - self.joint_ref[j])
                    xquat = quat_mul(xquat, torch.cat([torch.cos(half), jaxis * torch.sin(half)], -1))
                    xpos = anc - mv(quat_to_mat(xquat), jpos)
                elif jtype == SLIDE:
                    xpos = xpos + axis[j] * (qpos[:, qs:qs + 1] - self.joint_ref[j])
                anchor[j] = anc
            xquat = quat_normalize(xquat)
            pos[l], quat[l] = xpos, xquat
            rot[l] = quat_to_mat(xquat)
            com[l] = xpos + mv(rot[l], self.link_com[l])
        return dict(pos=pos, quat=quat, rot=rot, com=com, anchor=anchor, axis=axis)

    def motions(self, kin, vel):
        """kernels_kinematics.dof_motions: cdof, cdof_dot (lists per dof) and link spatial velocities cvel."""
        B = vel.shape[0]
        zero6 = torch.zeros((B, 6), dtype=vel.dtype, device=vel.device)
        cdof, cdof_dot, cvel = [None] * self.D, [None] * self.D, [None] * self.L
        for l in range(self.L):
            parent = self.link_parent[l]
            cv = cvel[parent] if parent >= 0 else zero6
            rot = kin["rot"][l]
            for j in self.link_joints[l]:
                jtype, d0 = self.joint_type[j], self.joint_dof[j]
                anchor = kin["anchor"][j]
                if jtype == FREE:
                    for i in range(3):
                        e = torch.zeros(6, dtype=vel.dtype, device=vel.device)
                        e[3 + i] = 1.0
                        cdof[d0 + i] = e.expand(B, 6)
                        cdof_dot[d0 + i] = zero6
                    cv = cv + torch.cat([torch.zeros_like(vel[:, d0:d0 + 3]), vel[:, d0:d0 + 3]], -1)
                    for i in range(3):
                        ax = rot[:, :, i]
                        cdof[d0 + 3 + i] = torch.cat([ax, torch.cross(anchor, ax, dim=-1)], -1)
                    for i in range(3):
                        cdof_dot[d0 + 3 + i] = motion_cross(cv, cdof[d0 + 3 + i])
                    for i in range(3):
                        cv = cv + cdof[d0 + 3 + i] * vel[:, d0 + 3 + i:d0 + 4 + i]
                elif jtype == BALL:
                    for i in range(3):
                        ax = rot[:, :, i]
                        cdof[d0 + i] = torch.cat([ax, torch.cross(anchor, ax, dim=-1)], -1)
                        cdof_dot[d0 + i] = motion_cross(cv, cdof[d0 + i])
                    for i in range(3):
                        cv = cv + cdof[d0 + i] * vel[:, d0 + i:d0 + i + 1]
                else:
                    ax = kin["axis"][j]
                    if jtype == HINGE:
                        cdof[d0] = torch.cat([ax, torch.cross(anchor, ax, dim=-1)], -1)
                    else:
                        cdof[d0] = torch.cat([torch.zeros_like(ax), ax], -1)
                    cdof_dot[d0] = motion_cross(cv, cdof[d0])
                    cv = cv + cdof[d0] * vel[:, d0:d0 + 1]
            cvel[l] = cv
        cdof = torch.stack(cdof, 1) if self.D else torch.zeros((B, 0, 6), dtype=vel.dtype, device=vel.device)
        return dict(cdof=cdof, cdof_dot=cdof_dot, cvel=cvel)

    def set_link_params(self, mass, com, inertia):
        """The links' inertial parameters per environment (the solver's state): mass [B, L], centre of mass in
        the link frame [B, L, 3], rotational inertia about it [B, L, 3, 3]; indexed [:, l] by link."""
        self.link_mass = mass.transpose(0, 1).unsqueeze(-1)  # [L, B, 1]: link l's masses broadcast over [B, 3]
        self.link_com = com.transpose(0, 1)  # [L, B, 3]
        self.link_inertia = inertia.transpose(0, 1)  # [L, B, 3, 3]

    def set_friction(self, geom_mu):
        """Each geom's friction per environment [B, G] (the model's times the state's ratio): the contact slots'
        friction becomes [B, S]."""
        self.slot_mu_env = torch.maximum(geom_mu[:, self.slot_ga], geom_mu[:, self.slot_gb])

    def set_dof_params(self, damping, armature, stiffness, force_lo, force_hi):
        """The dofs' parameters the next substeps read, [D] or per environment [B, D] (the solver's state): damping,
        armature, stiffness (zero where a dof has no scalar position), force range."""
        self.damping, self.armature = damping, armature
        self.stiffness = torch.where(self.dof_has_q, stiffness, torch.zeros_like(stiffness))
        self.force_lo, self.force_hi = force_lo, force_hi

    def dynamics(self, qpos, vel, kin, mot, ext_impulse, ctrl_mode, ctrl):
        """kernels_dynamics.bias_and_mass, kernels_step.external_forces and
        kernels_constraint.smooth_acceleration (Euler): the factorised implicit matrix and the unconstrained
        velocity v + h M~^-1 (tau - c)."""
        h, B = self.h, vel.shape[0]
        cdof, cvel = mot["cdof"], mot["cvel"]
        cacc, cfrc, crb = [None] * self.L, [None] * self.L, [None] * self.L
        base_acc = self.base_acc.expand(B, 6)
        eye = self.eye3
        for l in range(self.L):
            parent = self.link_parent[l]
            acc = cacc[parent] if parent >= 0 else base_acc
            for d in self.link_dofs[l]:
                acc = acc + mot["cdof_dot"][d] * vel[:, d:d + 1]
            cacc[l] = acc
            m, r, c = self.link_mass[l], kin["rot"][l], kin["com"][l]  # m: a number, or [B, 1] per environment
            io = r @ self.link_inertia[l] @ r.transpose(-1, -2) + (m.unsqueeze(-1) if m.dim() else m) * (
                dot(c, c)[:, None, None] * eye - c.unsqueeze(-1) * c.unsqueeze(-2))
            mc = m * c
            crb[l] = (m, mc, io)
            cfrc[l] = inertia_apply(m, mc, io, acc) + force_cross(cvel[l], inertia_apply(m, mc, io, cvel[l]))
            if self.link_gravcomp[l] != 0.0:  # kernels_dynamics.bias_and_mass: gravity compensation
                lift = (-self.link_gravcomp[l] * m * self.gravity).expand_as(c)
                cfrc[l] = cfrc[l] - torch.cat([torch.cross(c, lift, dim=-1), lift], -1)
            if self.link_fluid[l] is not None:
                fl, tq = self._fluid_wrench(self.link_fluid[l], r, c, cvel[l])
                cfrc[l] = cfrc[l] - torch.cat([tq + torch.cross(c, fl, dim=-1), fl], -1)
        for l in reversed(range(self.L)):
            parent = self.link_parent[l]
            if parent >= 0:
                cfrc[parent] = cfrc[parent] + cfrc[l]
                pm, pmc, pio = crb[parent]
                m, mc, io = crb[l]
                crb[parent] = (pm + m, pmc + mc, pio + io)
        link_of = self.dof_link.tolist()
        bias = torch.stack([dot(cdof[:, d], cfrc[link_of[d]]) for d in range(self.D)], 1)
        # CRBA: M[i, d] = cdof_i . (I_crb(link of d) cdof_d) for i an ancestor of d (or d), and its transpose
        force = torch.stack([inertia_apply(*crb[link_of[d]], cdof[:, d]) for d in range(self.D)], 1)
        gram = cdof @ force.transpose(1, 2)
        upper = gram * self.anc
        mass = upper + upper.transpose(1, 2) - torch.diag_embed(torch.diagonal(gram, dim1=1, dim2=2))
        pos_mode, vel_mode = ctrl_mode == CTRL_POSITION, ctrl_mode == CTRL_VELOCITY
        # the control force (kernels_dynamics.control_raw, bias_and_mass): clamped to the range; a saturated PD law acts as its
        # clamped force, explicitly
        q = torch.where(self.dof_has_q, qpos[:, self.dof_q_safe], torch.zeros_like(vel))
        pd = ctrl["dofs_kp"] * (ctrl["dofs_ctrl_pos"] - q - h * vel) + ctrl["dofs_kv"] * (ctrl["dofs_ctrl_vel"] - vel)
        damp = ctrl["dofs_kv"] * (ctrl["dofs_ctrl_vel"] - vel)
        raw = torch.where(ctrl_mode == CTRL_FORCE, ctrl["dofs_ctrl_force"], torch.where(pos_mode, pd, torch.where(
            vel_mode, damp, torch.zeros_like(vel))))
        zeros = torch.zeros_like(ctrl["dofs_kv"])
        kp_pd = torch.where(pos_mode, ctrl["dofs_kp"], zeros)
        m_eff = torch.diagonal(mass, dim1=1, dim2=2) + self.armature
        est = raw * m_eff / torch.clamp_min(m_eff + h * (ctrl["dofs_kv"] + h * kp_pd), 1e-30)
        saturated = (pos_mode | vel_mode) & ((est < self.force_lo) | (est > self.force_hi))
        clamped = torch.minimum(torch.maximum(raw, self.force_lo), self.force_hi)
        force = torch.where((ctrl_mode == CTRL_FORCE) | saturated, clamped, raw)
        live = (pos_mode | vel_mode) & ~saturated
        gain_v = self.damping + torch.where(live, ctrl["dofs_kv"], zeros)
        gain_p = torch.where(live & pos_mode, ctrl["dofs_kp"], zeros)
        mass = mass + torch.diag_embed(self.armature + h * gain_v + h * h * gain_p)
        # generalized forces
        tau = -bias - self.damping * vel - self.stiffness * (q - self.springref) + force
        if self.tendon_coef is not None:  # fixed tendons: spring outside the slack interval, damper
            k, b, lo, hi = self.tendon_params.unbind(-1)
            length, rate = q @ self.tendon_coef.T, vel @ self.tendon_coef.T
            stretch = torch.where(length > hi, length - hi, torch.where(length < lo, length - lo, torch.zeros_like(length)))
            tau = tau + (-k * stretch - b * rate) @ self.tendon_coef
        if ext_impulse is not None:
            # coupling impulses (linear, angular about the com) as spatial forces at the origin, through J^T / h
            lin, ang = ext_impulse[..., :3], ext_impulse[..., 3:]
            com = torch.stack(kin["com"], 1)
            spatial_force = torch.cat([ang + torch.cross(com, lin, dim=-1), lin], -1)  # [B, L, 6]
            tau = tau + ((cdof @ spatial_force.transpose(1, 2)) * self.moves.T).sum(-1) / h
        chol = torch.linalg.cholesky_ex(mass)[0]  # as the kernels: no exception mid-run
        acc = torch.cholesky_solve(tau.unsqueeze(-1), chol).squeeze(-1)
        return chol, vel + h * acc

    @staticmethod
    def _fluid_wrench(fluid, rot, com, cvel):
        """kernels_dynamics.fluid_wrench: force and torque [B, 3] (world, at the centre of mass) of the fluid."""
        r = rot @ fluid["irot"]
        omega = cvel[:, :3]
        lin = cvel[:, 3:] + torch.cross(omega, com, dim=-1) - fluid["wind"]
        w, v = mv(r.transpose(-1, -2), omega), mv(r.transpose(-1, -2), lin)
        box = fluid["box"]
        diam = box.sum() / 3.0
        torque = -math.pi * diam ** 3 * fluid["viscosity"] * w
        force = -3.0 * math.pi * diam * fluid["viscosity"] * v
        b4 = box ** 4
        area = torch.stack([box[1] * box[2], box[0] * box[2], box[0] * box[1]])
        force = force - 0.5 * fluid["density"] * area * v.abs() * v
        moment = torch.stack([box[0] * (b4[1] + b4[2]), box[1] * (b4[0] + b4[2]), box[2] * (b4[0] + b4[1])])
        torque = torque - fluid["density"] / 64.0 * moment * w.abs() * w
        return mv(r, force), mv(r, torque)

    def geom_poses(self, kin):
        """World centres [B, G, 3] and rotations [B, G, 3, 3] of the geoms (kernels_collision.geom_pose)."""
        pos, rot = torch.stack(kin["pos"], 1), torch.stack(kin["rot"], 1)
        link_rot = rot[:, self.geom_link]
        return pos[:, self.geom_link] + mv(link_rot, self.geom_pos), link_rot @ self.geom_rot

    def contacts(self, kin, kernel_con_f, kernel_con_i):
        """The kernels' contact pool recomputed from the poses: point, normal and depth [B, C, 7] per entry, which
        entries are active, and the candidate slot of each. Primitive pairs: kernels_collision's narrowphase in
        torch for every candidate slot (box-box with the kernels' feature codes), gathered per entry; mesh pairs:
        the kernels' contact frames carried by the geoms (_frozen)."""
        B, C = kernel_con_f.shape[0], self.max_contacts
        active = kernel_con_i[:, CI_ACTIVE, :C] == 1
        slot = torch.where(active, kernel_con_i[:, CI_SLOT, :C].long(), torch.zeros_like(active, dtype=torch.long))
        bi, ei = torch.nonzero(active, as_tuple=True)
        self._feature = torch.zeros((B, max(self.S, 1)), dtype=torch.int32, device=kernel_con_i.device)
        self._feature[bi, slot[bi, ei]] = kernel_con_i[bi, CI_FEATURE, ei]
        gpos, grot = self.geom_poses(kin)
        parts = []
        for kind in self.group_order:
            g = self.groups[kind]
            ca, ra = gpos[:, g["ga"]], grot[:, g["ga"]]
            cb, rb = gpos[:, g["gb"]], grot[:, g["gb"]]
            out = getattr(self, "_" + kind)(ca, ra, cb, rb, g)  # [B, P, n, 7]
            parts.append(out.reshape(out.shape[0], -1, 7))
        if len(self.mesh_slots):
            parts.append(torch.zeros((B, len(self.mesh_slots), 7), dtype=self.fl, device=self.dev))
        con = torch.cat(parts, 1)[:, self.slot_perm][torch.arange(B, device=self.dev)[:, None], slot]
        if len(self.mesh_slots):
            con = torch.where(self.slot_is_mesh[slot].unsqueeze(-1), self._frozen(gpos, grot, kernel_con_f, slot), con)
        return con, active, slot

    def _frozen(self, gpos, grot, kernel_con_f, slot):
        """Contacts whose geometry the narrowphase decided (mesh pairs) [B, C, 7], re-read through the poses: the
        kernels' point, normal (from geom a to geom b) and depth give a witness point on each geom (the point moved
        half the depth along the normal either way) and the normal, fixed in their geoms' frames at the poses
        of the substep; from the graph's poses, the points, the normal and the depth (the normal's component of
        their separation) again. Equal to the kernels' values at those poses; the derivative is that of the contact
        frame carried by the bodies."""
        C = self.max_contacts
        k = kernel_con_f[:, :C].detach()
        p, n, d = k[..., CF_POS:CF_POS + 3], k[..., CF_NORMAL:CF_NORMAL + 3], k[..., CF_DEPTH:CF_DEPTH + 1]
        rows = torch.arange(slot.shape[0], device=slot.device)[:, None]
        ga, gb = self.slot_ga[slot], self.slot_gb[slot]
        ca, ra, cb, rb = gpos[rows, ga], grot[rows, ga], gpos[rows, gb], grot[rows, gb]
        with torch.no_grad():
            la = mv(ra.transpose(-1, -2), p + 0.5 * d * n - ca)
            lb = mv(rb.transpose(-1, -2), p - 0.5 * d * n - cb)
            ln = mv(ra.transpose(-1, -2), n)
        pa, pb, normal = ca + mv(ra, la), cb + mv(rb, lb), mv(ra, ln)
        return torch.cat([0.5 * (pa + pb), normal, dot(normal, pa - pb).unsqueeze(-1)], -1)

    @staticmethod
    def _record(point, normal, depth):
        return torch.cat([point, normal.expand_as(point), depth.unsqueeze(-1)], -1)

    @staticmethod
    def _plane_point(p, n, x, radius):
        """A sphere of radius at x against the plane through p with normal n (kernels_collision.plane_point)."""
        dist = dot(n, x - p) - radius
        return DifferentiableStep._record(x - n * (radius + 0.5 * dist).unsqueeze(-1), n, -dist)

    def _plane_sphere(self, ca, ra, cb, rb, g):
        n = ra[..., :, 2]
        return self._plane_point(ca, n, cb, g["sb"][:, 0]).unsqueeze(2)

    def _plane_capsule(self, ca, ra, cb, rb, g):
        n, zb = ra[..., :, 2].unsqueeze(2), rb[..., :, 2]
        half = g["sb"][:, 1, None]
        ends = torch.stack([cb + zb * half, cb - zb * half], 2)
        return self._plane_point(ca.unsqueeze(2), n, ends, g["sb"][:, 0, None])

    def _plane_box(self, ca, ra, cb, rb, g):
        n = ra[..., :, 2].unsqueeze(2)
        local = self.corners * g["sb"][:, None, :]  # [P, 8, 3]
        corners = cb.unsqueeze(2) + (rb.unsqueeze(2) @ local.unsqueeze(-1)).squeeze(-1)
        return self._plane_point(ca.unsqueeze(2), n, corners, torch.zeros_like(corners[..., 0]))

    def _plane_cylinder(self, ca, ra, cb, rb, g):
        za, zb = ra[..., :, 2], rb[..., :, 2]
        u = -za - zb * dot(zb, -za).unsqueeze(-1)
        u = torch.where((u.norm(dim=-1) < 1e-9).unsqueeze(-1), rb[..., :, 0], u)
        u = u / u.norm(dim=-1, keepdim=True)
        w = torch.cross(zb, u, dim=-1)
        r, half = g["sb"][:, 0, None, None], g["sb"][:, 1, None, None]
        rims = torch.stack([u, w, -u, -w] * 2, 2)
        sign = torch.tensor([1.0] * 4 + [-1.0] * 4, dtype=ca.dtype, device=ca.device)[:, None]
        points = cb.unsqueeze(2) + zb.unsqueeze(2) * (sign * half) + r * rims
        return self._plane_point(ca.unsqueeze(2), za.unsqueeze(2), points, torch.zeros_like(points[..., 0]))

    def _segments(self, ca, ra, cb, rb, g):
        za, zb = ra[..., :, 2], rb[..., :, 2]
        ha, hb = g["ha"][:, None], g["hb"][:, None]
        pa, pb = closest_between_segments(ca - za * ha, ca + za * ha, cb - zb * hb, cb + zb * hb)
        return self._sphere_sphere(pa, g["sa"][:, 0], pb, g["sb"][:, 0]).unsqueeze(2)

    def _sphere_sphere(self, ca, ra, cb, rb):
        d = cb - ca
        dist, ok = safe_norm(d, 1e-24)
        pen = ra + rb - dist
        up = torch.zeros_like(d)
        up[..., 2] = 1.0
        n = torch.where(ok.unsqueeze(-1), d / torch.where(ok, dist, torch.ones_like(dist)).unsqueeze(-1), up)
        return self._record(ca + n * (ra - 0.5 * pen).unsqueeze(-1), n, pen)

    def _sphere_box(self, ca, ra, cb, rb, g):
        return self._sphere_vs_box(ca, g["sa"][:, 0], cb, rb, g["sb"]).unsqueeze(2)

    def _segment_box(self, ca, ra, cb, rb, g):
        za, ha = ra[..., :, 2], g["ha"][:, None]
        p0, p1 = ca - za * ha, ca + za * ha
        d = p1 - p0
        tt = (dot(cb - p0, d) / dot(d, d).clamp_min(1e-30)).clamp(0.0, 1.0)
        centres = torch.stack([p0 + tt.unsqueeze(-1) * d, p0, p1], 2)
        return self._sphere_vs_box(centres, g["sa"][:, 0, None], cb.unsqueeze(2), rb.unsqueeze(2), g["sb"][:, None])

    def _sphere_vs_box(self, c, r, cb, rot_b, hb):
        """kernels_collision.sphere_box: a sphere (centre c, radius r) against a box; the normal points into the
        box."""
        local = mv(rot_b.transpose(-1, -2), c - cb)
        clamped = torch.minimum(torch.maximum(local, -hb), hb)
        inside = (torch.abs(local) < hb).all(-1, keepdim=True)
        # inside: out along the face of least slack
        slack_all = hb - torch.abs(local)
        axis = torch.argmin(slack_all, dim=-1, keepdim=True)
        slack = torch.gather(slack_all, -1, axis)
        one = torch.ones_like(slack)
        side = torch.where(torch.gather(local, -1, axis) >= 0, one, -one)
        out_local = torch.zeros_like(local).scatter(-1, axis, side)
        out_in = mv(rot_b, out_local)
        surface_in = c + out_in * slack
        point_in = surface_in - out_in * (0.5 * (slack + r.unsqueeze(-1)))
        depth_in = slack.squeeze(-1) + r
        # outside: from the closest point of the box
        d = local - clamped
        dist, _ = safe_norm(d)
        out_out = mv(rot_b, d / dist.clamp_min(1e-30).unsqueeze(-1))
        surface_out = cb + mv(rot_b, clamped)
        point_out = 0.5 * (surface_out + c - out_out * r.unsqueeze(-1))
        depth_out = r - dist
        point = torch.where(inside, point_in, point_out)
        normal = -torch.where(inside, out_in, out_out)
        depth = torch.where(inside.squeeze(-1), depth_in, depth_out)
        return self._record(point, normal, depth)

    def _box_box(self, ca, ra, cb, rb, g):
        """kernels_convex.box_box_candidates: each slot's contact recomputed from the poses, with the discrete
        decisions of the kernel (the axis, the incident face, which candidate) read from its feature code."""
        code = self._feature[:, g["slot_index"]].long()  # [B, P, 4]; an inactive slot's code is arbitrary
        axis = torch.div(code, 256, rounding_mode="floor").clamp(0, 14)
        inc = (torch.div(code, 32, rounding_mode="floor") % 8).clamp(0, 5)
        row = (code % 32).clamp(0, 23)
        ha, hb = g["sa"][:, None, :], g["sb"][:, None, :]  # [P, 1, 3]
        ca, cb, ra, rb = ca[:, :, None], cb[:, :, None], ra[:, :, None], rb[:, :, None]  # slot dim

        def col(rot, k):  # rot [..., 3, 3], k [B, P, 4] long: column k, [B, P, 4, 3]
            rot = rot.expand(*k.shape, 3, 3)
            return torch.gather(rot, -1, k[..., None, None].expand(*k.shape, 3, 1)).squeeze(-1)

        def comp(h, k):  # component k of half-sizes h [P, 1, 3] -> [B, P, 4]
            return torch.gather(h.expand(*k.shape, 3), -1, k.unsqueeze(-1)).squeeze(-1)

        d = cb - ca
        i_e, j_e = torch.div(axis - 6, 3, rounding_mode="floor").clamp(0, 2), ((axis - 6) % 3).clamp(0, 2)
        face_k = (axis % 3)
        edge_axis = torch.cross(col(ra, i_e), col(rb, j_e), dim=-1)
        edge_axis = edge_axis / safe_norm(edge_axis, 1e-24)[0].clamp_min(1e-12).unsqueeze(-1)
        L = torch.where((axis < 3).unsqueeze(-1), col(ra, face_k), torch.where((axis < 6).unsqueeze(-1),
                                                                                col(rb, face_k), edge_axis))
        dl = dot(d, L)
        n = torch.where((dl >= 0).unsqueeze(-1), L, -L)
        overlap = box_support_radius(ra, ha, L) + box_support_radius(rb, hb, L) - torch.abs(dl)
        # edge - edge: midway between the closest points of the two edges that meet
        pa, pb = ca.expand_as(d), cb.expand_as(d)
        for m in range(3):
            mm = torch.full_like(axis, m)
            am, bm = col(ra, mm), col(rb, mm)
            sa_m = torch.where(dot(am, n) >= 0, 1.0, -1.0).to(d.dtype)
            sb_m = torch.where(dot(bm, n) >= 0, 1.0, -1.0).to(d.dtype)
            pa = pa + torch.where((i_e != m).unsqueeze(-1), am * (ha[..., m] * sa_m).unsqueeze(-1), 0.0)
            pb = pb - torch.where((j_e != m).unsqueeze(-1), bm * (hb[..., m] * sb_m).unsqueeze(-1), 0.0)
        ea, eb = col(ra, i_e) * comp(ha, i_e).unsqueeze(-1), col(rb, j_e) * comp(hb, j_e).unsqueeze(-1)
        qa, qb = closest_between_segments(pa - ea, pa + ea, pb - eb, pb + eb)
        edge_point = 0.5 * (qa + qb)
        # face: the reference box owns the axis, the incident face comes from the code
        ref_a = (axis < 3).unsqueeze(-1)
        nf = torch.where(ref_a, n, -n)
        c_r, c_i = torch.where(ref_a, ca, cb), torch.where(ref_a, cb, ca)
        r_r = torch.where(ref_a.unsqueeze(-1), ra.expand(*axis.shape, 3, 3), rb.expand(*axis.shape, 3, 3))
        r_i = torch.where(ref_a.unsqueeze(-1), rb.expand(*axis.shape, 3, 3), ra.expand(*axis.shape, 3, 3))
        h_r = torch.where(ref_a, ha.expand(*axis.shape, 3), hb.expand(*axis.shape, 3))
        h_i = torch.where(ref_a, hb.expand(*axis.shape, 3), ha.expand(*axis.shape, 3))
        k1, k2 = (face_k + 1) % 3, (face_k + 2) % 3
        u, v = col(r_r, k1), col(r_r, k2)
        hu, hv = comp(h_r, k1).unsqueeze(-1), comp(h_r, k2).unsqueeze(-1)
        fc = c_r + nf * comp(h_r, face_k).unsqueeze(-1)
        ii = torch.div(inc, 2, rounding_mode="floor")
        si = torch.where(inc % 2 == 1, 1.0, -1.0).to(d.dtype).unsqueeze(-1)
        mi = si * col(r_i, ii)
        iu, iv = col(r_i, (ii + 1) % 3), col(r_i, (ii + 2) % 3)
        hiu, hiv = comp(h_i, (ii + 1) % 3).unsqueeze(-1), comp(h_i, (ii + 2) % 3).unsqueeze(-1)
        fi = c_i + mi * comp(h_i, ii).unsqueeze(-1)
        sign_u = torch.tensor([1.0, -1.0, -1.0, 1.0], dtype=d.dtype, device=d.device)
        sign_v = torch.tensor([1.0, 1.0, -1.0, -1.0], dtype=d.dtype, device=d.device)

        def quad(c):  # the signs of corner c (0..3) of a rectangle, [B, P, 4, 1] each
            return sign_u[c].unsqueeze(-1), sign_v[c].unsqueeze(-1)

        # rows 0-3: incident vertices; 4-7: reference corners onto the incident face; 8-23: edge crossings
        cv = row.clamp(0, 3)
        su, sv = quad(cv)
        p_vert = fi + iu * su * hiu + iv * sv * hiv
        cq = (row - 4).clamp(0, 3)
        su, sv = quad(cq)
        q = fc + u * su * hu + v * sv * hv
        den_q = dot(nf, mi)
        t_q = dot(fi - q, mi) / torch.where(den_q.abs() > 1e-12, den_q, torch.ones_like(den_q))
        p_corner = q + t_q.unsqueeze(-1) * nf
        e = torch.div((row - 8).clamp(0, 15), 4, rounding_mode="floor")
        s_pl = (row - 8).clamp(0, 15) % 4
        s0u, s0v = quad(e)
        s1u, s1v = quad((e + 1) % 4)
        p0 = fi + iu * s0u * hiu + iv * s0v * hiv
        p1 = fi + iu * s1u * hiu + iv * s1v * hiv
        on_u = (s_pl < 2).unsqueeze(-1)
        w = torch.where(on_u, u, v)
        offset = torch.where(on_u, hu, hv).squeeze(-1) * torch.where(s_pl % 2 == 0, 1.0, -1.0).to(d.dtype)
        den_e = dot(p1 - p0, w)
        t_e = (offset - dot(p0 - fc, w)) / torch.where(den_e.abs() > 1e-12, den_e, torch.ones_like(den_e))
        p_edge = p0 + t_e.unsqueeze(-1) * (p1 - p0)
        p_face = torch.where((row < 4).unsqueeze(-1), p_vert, torch.where((row < 8).unsqueeze(-1), p_corner, p_edge))
        depth_face = torch.where(row < 4, -dot(p_vert - fc, nf), torch.where(row < 8, -t_q, -dot(p_edge - fc, nf)))
        point_face = p_face + (0.5 * depth_face).unsqueeze(-1) * nf
        is_edge = (axis >= 6)
        point = torch.where(is_edge.unsqueeze(-1), edge_point, point_face)
        depth = torch.where(is_edge, overlap, depth_face)
        return self._record(point, n, depth)

    def rows(self, qpos, con, active, slot, prev, mot, chol, v_free, impulse):
        """kernels_constraint.solve_constraints' rows: the pool's contacts in its order (3 rows each: normal, two
        tangents; con, active, slot per entry from `contacts`, prev the warm-start entry of frame f or -1), then
        violated joint limits; padded to max_rows per environment."""
        B, R, D, h = qpos.shape[0], self.max_rows, self.D, self.h
        dev, fl = qpos.device, qpos.dtype
        row_kind = torch.full((B, R), ROW_NONE, dtype=torch.int32, device=dev)
        row_entry = torch.zeros((B, R), dtype=torch.long, device=dev)
        row_k = torch.zeros((B, R), dtype=torch.long, device=dev)
        row_dof = torch.zeros((B, R), dtype=torch.long, device=dev)
        n_contacts = torch.zeros(B, dtype=torch.long, device=dev)
        if self.collision and self.S:
            index = torch.cumsum(active.long(), 1) - 1
            fits = active & (index < self.max_contacts) & (3 * index + 3 <= R)
            n_contacts = fits.sum(1)
            bi, si = torch.nonzero(fits, as_tuple=True)
            r0 = 3 * index[bi, si]
            for k in range(3):
                row_entry[bi, r0 + k] = si
                row_k[bi, r0 + k] = k
                row_kind[bi, r0 + k] = ROW_NORMAL if k == 0 else ROW_FRICTION
        n_rows = 3 * n_contacts
        lim_sign = None
        if self.limits_on and len(self.limited):
            q = qpos[:, self.limit_q]
            below, above = q < self.limit_lo, q > self.limit_hi
            violated = below | above
            index = n_rows.unsqueeze(1) + torch.cumsum(violated.long(), 1) - 1
            fits = violated & (index < R)
            bi, li = torch.nonzero(fits, as_tuple=True)
            rows_at = index[bi, li]
            row_kind[bi, rows_at] = ROW_LIMIT
            row_dof[bi, rows_at] = self.limited[li]
            n_rows = n_rows + fits.sum(1)
            lim_sign = (bi, li, rows_at, below)
        is_contact = (row_kind == ROW_NORMAL) | (row_kind == ROW_FRICTION)
        # Jacobians: a contact row is d(direction . (v_b - v_a) at the point)/d(qvel)
        arange = torch.arange(B, device=dev)[:, None]
        rc = con[arange, row_entry]  # [B, R, 7]
        row_prev = prev[arange, row_entry]
        row_slot = slot[arange, row_entry]  # the candidate slot of each row's entry
        point, normal = rc[..., 0:3], rc[..., 3:6]
        t1, t2 = tangent_basis(normal)
        k = row_k.unsqueeze(-1)
        direction = torch.where(k == 0, normal, torch.where(k == 1, t1, t2))
        cdof = mot["cdof"]
        lin = direction @ cdof[..., 3:].transpose(1, 2)
        ang = torch.cross(point, direction, dim=-1) @ cdof[..., :3].transpose(1, 2)
        jac = (lin + ang) * self.slot_jac[row_slot] * is_contact.unsqueeze(-1)
        target = torch.zeros((B, R), dtype=fl, device=dev)
        depth = rc[..., 6]
        correction = torch.clamp_max(self.baumgarte * torch.clamp_min(depth - self.slop, 0.0) / h,
                                     self.max_correction)
        approach = dot(jac, v_free.unsqueeze(1))
        rest = self.slot_rest[row_slot]
        bounce = approach < -BOUNCE_THRESHOLD
        target = torch.where((row_kind == ROW_NORMAL) & bounce, -rest * approach, target)
        # the position pass's targets (split impulse)
        ptarget = torch.where(row_kind == ROW_NORMAL, correction, torch.zeros_like(correction))
        lam0 = torch.where(is_contact & (row_prev >= 0), impulse[arange, row_prev.clamp_min(0), row_k],
                           torch.zeros_like(target))
        if lim_sign is not None:
            bi, li, rows_at, below = lim_sign
            q = qpos[bi, self.limit_q[li]]
            lo, hi = self.limit_lo[li], self.limit_hi[li]
            b_row = below[bi, li]
            onehot = torch.zeros((len(bi), D), dtype=fl, device=dev)
            onehot[torch.arange(len(bi), device=dev), self.limited[li]] = torch.where(b_row, 1.0, -1.0).to(fl)
            jac = jac.index_put((bi, rows_at), onehot)
            violation = torch.where(b_row, lo - q, q - hi)
            lim_target = torch.clamp_max(self.baumgarte * torch.clamp_min(violation, 0.0) / h, self.max_correction)
            ptarget = ptarget.index_put((bi, rows_at), lim_target)
        slot_mu = self.slot_mu[row_slot] if self.slot_mu_env is None else torch.gather(self.slot_mu_env, 1, row_slot)
        mu = torch.where(row_kind == ROW_FRICTION, slot_mu, torch.zeros_like(target))
        # W = M~^-1 J^T, the Delassus matrix A = J W and the rows' inverse effective masses
        w = torch.cholesky_solve(jac.transpose(1, 2), chol)  # [B, D, R]
        delassus = jac @ w
        valid = row_kind != ROW_NONE
        diag = torch.diagonal(delassus, dim1=1, dim2=2) + self.reg
        dinv = torch.where(valid, 1.0 / torch.where(valid, diag, torch.ones_like(diag)), torch.zeros_like(diag))
        b0 = dot(jac, v_free.unsqueeze(1))
        normal_row = torch.arange(R, device=dev).unsqueeze(0) - row_k
        return dict(jac=jac, w=w, delassus=delassus, b0=b0, target=target, ptarget=ptarget, dinv=dinv, lam0=lam0, mu=mu,
                    kind=row_kind, normal_row=normal_row.to(torch.int32), n_rows=n_rows.to(torch.int32),
                    entry=row_entry, k=row_k, is_contact=is_contact)

    def advance(self, qpos, vel):
        """kernels_constraint.advance_q over a whole substep h."""
        h = self.h
        parts = []
        j = 0
        while j < self.J:
            jtype, qs, d0 = self.joint_type[j], self.joint_q[j], self.joint_dof[j]
            if jtype in (HINGE, SLIDE):
                # a run of one-dof joints: consecutive q and dof indices
                end = j + 1
                while end < self.J and self.joint_type[end] in (HINGE, SLIDE) and \
                        self.joint_q[end] == qs + end - j and self.joint_dof[end] == d0 + end - j:
                    end += 1
                n = end - j
                parts.append(qpos[:, qs:qs + n] + h * vel[:, d0:d0 + n])
                j = end
                continue
            if jtype == FREE:
                parts.append(qpos[:, qs:qs + 3] + h * vel[:, d0:d0 + 3])
                parts.append(quat_integrate(qpos[:, qs + 3:qs + 7], vel[:, d0 + 3:d0 + 6], h))
            elif jtype == BALL:
                parts.append(quat_integrate(qpos[:, qs:qs + 4], vel[:, d0:d0 + 3], h))
            j += 1
        return torch.cat(parts, 1) if parts else qpos

    # -- the substep and the collider geometry ------------------------------------------------------------------

    def substep(self, x, ctrl_mode, kernel_con_f, kernel_con_i, coupled=True):
        """Frame fn from frame f. x: the INPUT_FIELDS as [B, ...] tensors; ctrl_mode [B, D] (int); the contact
        records of the collision kernels at frame f; coupled: False if no coupling has handed impulses to the
        links (links_ext_impulse is zero, and left out). Returns the OUTPUT_FIELDS of frame fn."""
        qpos, vel = x["qpos"], x["dofs_vel"]
        B, h = qpos.shape[0], self.h
        if self.D == 0:
            kin = self.kinematics(qpos)
            return dict(qpos=qpos + 0.0, dofs_vel=vel + 0.0, dofs_acc=torch.zeros_like(vel),
                        links_pos=torch.stack(kin["pos"], 1), links_quat=torch.stack(kin["quat"], 1),
                        contact_impulse=torch.zeros_like(x["contact_impulse"]))
        kin = self.kinematics(qpos)
        mot = self.motions(kin, vel)
        ext = x["links_ext_impulse"] if coupled else None
        chol, v_free = self.dynamics(qpos, vel, kin, mot, ext, ctrl_mode, x)
        con, active = None, None
        slot = prev = None
        if self.collision and self.S:
            con, active, slot = self.contacts(kin, kernel_con_f, kernel_con_i)
            prev = kernel_con_i[:, CI_PREV, :self.max_contacts].long()
        impulse_out = torch.zeros_like(x["contact_impulse"])
        v_new, pseudo = v_free, None
        if self.max_rows and (con is not None or (self.limits_on and len(self.limited))):
            if con is None:
                C = self.max_contacts
                con = torch.zeros((B, C, 7), dtype=qpos.dtype, device=qpos.device)
                slot = prev = torch.zeros((B, C), dtype=torch.long, device=qpos.device)
            rows = self.rows(qpos, con, active, slot, prev, mot, chol, v_free, x["contact_impulse"])
            if int(rows["n_rows"].max()) > 0:
                lam = pgs(rows["delassus"], rows["b0"], rows["target"], rows["dinv"], rows["mu"], rows["kind"],
                          rows["normal_row"], rows["n_rows"], rows["lam0"], self.iterations)
                v_new = v_free + (rows["w"] @ lam.unsqueeze(-1)).squeeze(-1)
                bi, ri = torch.nonzero(rows["is_contact"], as_tuple=True)
                impulse_out = impulse_out.index_put((bi, rows["entry"][bi, ri], rows["k"][bi, ri]), lam[bi, ri])
                if bool((rows["ptarget"] > 0).any()):
                    # the position pass: a pseudo-velocity that moves this substep's positions only (no friction)
                    zeros = torch.zeros_like(rows["b0"])
                    lam_p = pgs(rows["delassus"], zeros, rows["ptarget"], rows["dinv"], zeros, rows["kind"],
                                rows["normal_row"], rows["n_rows"], zeros, self.iterations)
                    pseudo = (rows["w"] @ lam_p.unsqueeze(-1)).squeeze(-1)
        q_new = self.advance(qpos, v_new if pseudo is None else v_new + pseudo)
        kin_new = self.kinematics(q_new)
        return dict(qpos=q_new, dofs_vel=v_new, dofs_acc=(v_new - vel) / h, links_pos=torch.stack(kin_new["pos"], 1),
                    links_quat=torch.stack(kin_new["quat"], 1), contact_impulse=impulse_out)

    def collider(self, qpos, vel):
        """kernels_step.collider_geometry: geom poses, link centres of mass, orientations and velocities at (qpos,
        vel)."""
        kin = self.kinematics(qpos)
        mot = self.motions(kin, vel)
        com = torch.stack(kin["com"], 1)
        cvel = torch.stack(mot["cvel"], 1) if self.L else torch.zeros_like(com.expand(-1, -1, 6))
        omega = cvel[..., :3]
        gpos, _ = self.geom_poses(kin)
        quat = torch.stack(kin["quat"], 1)
        gquat = quat_mul(quat[:, self.geom_link], self.geom_quat)
        return dict(geom_pos=gpos, geom_quat=gquat, body_com=com, body_lin_vel=cvel[..., 3:] + torch.cross(
            omega, com, dim=-1), body_ang_vel=omega, body_quat=quat)
