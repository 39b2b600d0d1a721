"""RigidSolver: articulated rigid bodies in generalized coordinates, batched over environments."""

from __future__ import annotations

import numpy as np
import torch

import genesis_core as gs

from . import kernels_step
from .entity import RigidEntity
from .layout import (DF_ARMATURE, DF_DAMPING, DF_FORCE_HI, DF_FORCE_LO, DF_N, DF_RANGE_HI, DF_RANGE_LO, DF_SPRINGREF,
                     DF_STIFFNESS, DI_LIMITED, DI_LINK, DI_N, DI_PARENT, DI_Q, GF_FRICTION, GF_N, GF_POS, GF_QUAT, GF_RESTITUTION,
                     GF_SIZE, GI_LINK, GI_N, GI_TYPE, JF_AXIS, JF_N, JF_POS, JI_DOF_START, JI_N, JI_Q_START, JI_TYPE,
                     LF_COM, LF_INERTIA, LF_MASS, LF_N, LF_POS, LF_QUAT, LI_DOF_END, LI_DOF_START, LI_JOINT_END,
                     LI_JOINT_START, LI_LAST_DOF, LI_N, LI_PARENT, PF_BAUMGARTE, PF_DT, PF_GRAVITY, PF_MAX_CORRECTION, PF_N, PF_REG, PF_TOL,
                     PF_SLOP, PI_GEOM_A, PI_GEOM_B, PI_N, PI_N_SLOTS, PI_SLOT, PP_COLLISION, PP_ITERATIONS, PP_LIMITS,
                     PP_MAX_CONTACTS, PP_N, PP_RK4)
from .material import Rigid
from .model import BALL, BOX, CAPSULE, CYLINDER, FREE, HINGE, JOINT_NQ, JOINT_NV, MESH, PLANE, SLIDE, SPHERE
from .options import RigidOptions
from .robots import describe

# contact slots a pair of geom types owns (types ordered so that the first <= the second)
PAIR_SLOTS = {
    (PLANE, SPHERE): 1, (PLANE, CAPSULE): 2, (PLANE, BOX): 8, (PLANE, CYLINDER): 8,
    (SPHERE, SPHERE): 1, (SPHERE, CAPSULE): 1, (SPHERE, BOX): 1, (SPHERE, CYLINDER): 1,
    (CAPSULE, CAPSULE): 1, (CAPSULE, BOX): 3, (CAPSULE, CYLINDER): 1,
    (BOX, BOX): 16, (CYLINDER, BOX): 3, (CYLINDER, CYLINDER): 1,
}
BIG_FORCE = 1e30


def _pair_order(ta, tb):
    """True if (ta, tb) is the order the narrowphase expects: planes first, boxes last."""
    rank = {PLANE: 0, SPHERE: 1, CAPSULE: 2, CYLINDER: 3, BOX: 4}
    return rank[ta] <= rank[tb]


class RigidSolver(gs.SolverBase):
    """Articulated bodies from primitives, URDF and MJCF; contacts and joint limits by projected Gauss-Seidel."""

    short_name = "rigid"
    order = 10
    options_class = RigidOptions
    material_class = Rigid
    entity_class = RigidEntity
    state_fields = (
        gs.FieldSpec("qpos", ("n_qs",), doc="generalized positions (free: xyz + wxyz quat; ball: wxyz), m / rad"),
        gs.FieldSpec("dofs_vel", ("n_dofs",), doc="generalized velocities (free: world linear, body angular)"),
        gs.FieldSpec("dofs_acc", ("n_dofs",), doc="generalized accelerations of the last substep"),
        gs.FieldSpec("links_pos", ("n_links", 3), doc="link frame origins, world, m"),
        gs.FieldSpec("links_quat", ("n_links", 4), doc="link orientations, world, (w, x, y, z)"),
        gs.FieldSpec("contact_impulse", ("n_slots", 3), frames=False,
                     doc="warm start: last impulses (normal, 2 tangents) per contact slot, N s"),
        gs.FieldSpec("dofs_ctrl_mode", ("n_dofs",), dtype="int", frames=False, doc="0 force, 1 position, 2 velocity"),
        gs.FieldSpec("dofs_ctrl_force", ("n_dofs",), frames=False, doc="force/torque command, N or N m"),
        gs.FieldSpec("dofs_ctrl_pos", ("n_dofs",), frames=False, doc="position target"),
        gs.FieldSpec("dofs_ctrl_vel", ("n_dofs",), frames=False, doc="velocity target"),
        gs.FieldSpec("dofs_kp", ("n_dofs",), frames=False, doc="position gain"),
        gs.FieldSpec("dofs_kv", ("n_dofs",), frames=False, doc="velocity gain"),
    )

    def add_entity(self, idx, morph, material):
        entity = super().add_entity(idx, morph, material)
        entity.robot = describe(morph, material)  # parse now: a bad file fails at add_entity, not at build
        return entity

    # -- model ------------------------------------------------------------------------------------------------------

    def build_model(self):
        links, joints, dofs, geoms = [], [], [], []
        qpos0, kp0, kv0 = [], [], []
        link_names = []
        n_q = 0
        for e in self.entities:
            robot = e.robot
            link0, dof0, q0 = len(links), len(dofs), n_q
            body_to_link = {}
            joint_names = {}
            for bi, body in enumerate(robot.bodies):
                li = len(links)
                body_to_link[bi] = li
                parent = -1 if body.parent < 0 else body_to_link[body.parent]
                pos, quat = body.pos, body.quat
                j_start, d_start = len(joints), len(dofs)
                for jd in body.joints:
                    ji = len(joints)
                    joint_names[jd.name] = ji
                    joints.append(dict(type=jd.type, q=n_q, dof=len(dofs), pos=jd.pos, axis=jd.axis))
                    nv = JOINT_NV[jd.type]
                    for k in range(nv):
                        one_to_one = jd.type in (HINGE, SLIDE)
                        rng = jd.range if one_to_one else None
                        dofs.append(dict(link=li, q=n_q if one_to_one else -1, damping=jd.damping,
                                         armature=jd.armature, stiffness=jd.stiffness if one_to_one else 0.0,
                                         springref=jd.springref, range=rng, force=(-BIG_FORCE, BIG_FORCE)))
                    qpos0.extend(self._joint_qpos0(jd, body, e, bi))
                    n_q += JOINT_NQ[jd.type]
                if body.parent < 0 and not any(j.type == FREE for j in body.joints):
                    # a base fixed to the world is placed at the morph's pose
                    pos, quat = e.place(pos, quat)
                links.append(dict(parent=parent, pos=pos, quat=quat, mass=body.mass, com=body.com,
                                  inertia=body.inertia, joints=(j_start, len(joints)), dofs=(d_start, len(dofs))))
                link_names.append(body.name)
                for g in body.geoms:
                    friction = e.material.friction if e.material.friction is not None else g.friction
                    geoms.append(dict(type=g.type, link=li, pos=g.pos, quat=g.quat, size=g.size, friction=friction,
                                      restitution=e.material.restitution,
                                      contype=g.contype, conaffinity=g.conaffinity, entity=e.idx))
            for k in range(dof0, len(dofs)):
                kp0.append(0.0)
                kv0.append(0.0)
            for act in robot.actuators:
                if act.joint in joint_names:
                    d = joints[joint_names[act.joint]]["dof"]
                    kp0[d], kv0[d] = act.kp, act.kv
                    if act.forcerange is not None:
                        dofs[d]["force"] = tuple(act.forcerange)
            e._setup(link0, len(links), dof0, len(dofs), q0, n_q, link_names[link0:])
        self._links, self._joints, self._dofs, self._geoms = links, joints, dofs, geoms
        self._qpos0 = np.array(qpos0, dtype=np.float64)
        self._kp0, self._kv0 = np.array(kp0), np.array(kv0)
        self._compile_arrays()

    def _joint_qpos0(self, jd, body, entity, body_index):
        if jd.type == FREE:
            pos, quat = entity.place(body.pos, body.quat) if body.parent < 0 else (body.pos, body.quat)
            return list(pos) + list(quat)
        if jd.type == BALL:
            return [1.0, 0.0, 0.0, 0.0]
        return [0.0]

    def _compile_arrays(self):
        links, joints, dofs, geoms = self._links, self._joints, self._dofs, self._geoms
        L, J, D, G = len(links), len(joints), len(dofs), len(geoms)
        link_f = np.zeros((max(L, 1), LF_N))
        link_i = np.full((max(L, 1), LI_N), -1, dtype=np.int32)
        last_dof = []
        for l, k in enumerate(links):
            link_f[l, LF_POS:LF_POS + 3] = k["pos"]
            link_f[l, LF_QUAT:LF_QUAT + 4] = k["quat"]
            link_f[l, LF_MASS] = k["mass"]
            link_f[l, LF_COM:LF_COM + 3] = k["com"]
            link_f[l, LF_INERTIA:LF_INERTIA + 9] = np.asarray(k["inertia"]).reshape(9)
            link_i[l, LI_PARENT] = k["parent"]
            link_i[l, LI_JOINT_START], link_i[l, LI_JOINT_END] = k["joints"]
            link_i[l, LI_DOF_START], link_i[l, LI_DOF_END] = k["dofs"]
            own_last = k["dofs"][1] - 1 if k["dofs"][1] > k["dofs"][0] else -1
            last = own_last if own_last >= 0 else (last_dof[k["parent"]] if k["parent"] >= 0 else -1)
            last_dof.append(last)
            link_i[l, LI_LAST_DOF] = last
        joint_f = np.zeros((max(J, 1), JF_N))
        joint_i = np.zeros((max(J, 1), JI_N), dtype=np.int32)
        for j, jt in enumerate(joints):
            joint_f[j, JF_POS:JF_POS + 3] = jt["pos"]
            joint_f[j, JF_AXIS:JF_AXIS + 3] = jt["axis"]
            joint_i[j] = (jt["type"], jt["q"], jt["dof"])
        dof_f = np.zeros((D, DF_N))
        dof_i = np.zeros((D, DI_N), dtype=np.int32)
        for d, df in enumerate(dofs):
            dof_f[d, DF_DAMPING] = df["damping"]
            dof_f[d, DF_ARMATURE] = df["armature"]
            dof_f[d, DF_STIFFNESS] = df["stiffness"]
            dof_f[d, DF_SPRINGREF] = df["springref"]
            lo, hi = df["range"] if df["range"] is not None else (0.0, 0.0)
            dof_f[d, DF_RANGE_LO], dof_f[d, DF_RANGE_HI] = lo, hi
            dof_f[d, DF_FORCE_LO], dof_f[d, DF_FORCE_HI] = df["force"]
            link = df["link"]
            start = links[link]["dofs"][0]
            parent = d - 1 if d > start else (last_dof[links[link]["parent"]] if links[link]["parent"] >= 0 else -1)
            dof_i[d] = (parent, link, int(df["range"] is not None), df["q"])
        geom_f = np.zeros((max(G, 1), GF_N))
        geom_i = np.zeros((max(G, 1), GI_N), dtype=np.int32)
        rbound = np.zeros(max(G, 1))
        for g, gm in enumerate(geoms):
            geom_f[g, GF_POS:GF_POS + 3] = gm["pos"]
            geom_f[g, GF_QUAT:GF_QUAT + 4] = gm["quat"]
            geom_f[g, GF_SIZE:GF_SIZE + 3] = gm["size"]
            geom_f[g, GF_FRICTION] = gm["friction"]
            geom_f[g, GF_RESTITUTION] = gm["restitution"]
            geom_i[g] = (gm["type"], gm["link"])
            s = np.asarray(gm["size"])
            rbound[g] = {SPHERE: s[0], CAPSULE: s[0] + s[1], BOX: np.linalg.norm(s),
                         CYLINDER: np.hypot(s[0], s[1])}.get(gm["type"], 0.0)
        pairs = self._collision_pairs(last_dof)
        pair_i = np.zeros((max(len(pairs), 1), PI_N), dtype=np.int32)
        n_slots = 0
        for p, (ga, gb) in enumerate(pairs):
            k = PAIR_SLOTS[(geoms[ga]["type"], geoms[gb]["type"])] if (geoms[ga]["type"], geoms[gb]["type"]) in \
                PAIR_SLOTS else PAIR_SLOTS[(geoms[gb]["type"], geoms[ga]["type"])]
            pair_i[p] = (ga, gb, n_slots, k)
            n_slots += k
        self.n_pairs, self.n_slots = len(pairs), n_slots
        opts, sim = self.options, self.sim_options
        params_f = np.zeros(PF_N)
        params_f[PF_GRAVITY:PF_GRAVITY + 3] = sim.gravity
        params_f[PF_DT], params_f[PF_BAUMGARTE], params_f[PF_SLOP] = sim.substep_dt, opts.baumgarte, opts.contact_slop
        params_f[PF_REG] = opts.regularization
        params_f[PF_TOL] = opts.tolerance
        params_f[PF_MAX_CORRECTION] = opts.max_correction_velocity
        params_i = np.zeros(PP_N, dtype=np.int32)
        params_i[PP_ITERATIONS] = opts.iterations
        params_i[PP_MAX_CONTACTS] = opts.max_contacts
        params_i[PP_COLLISION] = int(opts.enable_collision and len(pairs) > 0)
        params_i[PP_LIMITS] = int(opts.enable_joint_limit)
        params_i[PP_RK4] = int(opts.integrator == "rk4")
        fl, dev = self.float_dtype, self.device

        def t(a, dtype=None):
            return torch.as_tensor(a, dtype=dtype or (torch.int32 if a.dtype.kind == "i" else fl), device=dev).contiguous()

        self.model = dict(params_f=t(params_f), params_i=t(params_i), link_f=t(link_f), link_i=t(link_i),
                          joint_f=t(joint_f), joint_i=t(joint_i), dof_f=t(dof_f), dof_i=t(dof_i), geom_f=t(geom_f),
                          geom_i=t(geom_i), geom_rbound=t(rbound), pair_i=t(pair_i))
        self.n_links, self.n_joints, self.n_dofs, self.n_qs, self.n_geoms = L, J, D, len(self._qpos0), G
        self.n_limited = int(sum(df["range"] is not None for df in dofs))
        self.dof_q = torch.tensor([df["q"] for df in dofs], dtype=torch.long, device=dev)
        self.dof_force_range = (t(dof_f[:, DF_FORCE_LO].copy()), t(dof_f[:, DF_FORCE_HI].copy()))

    def _collision_pairs(self, last_dof):
        """Candidate geom pairs: supported types, MuJoCo's contype/conaffinity rule, not on one link, not both
        fixed to the world, not parent-child links unless enabled, not within one entity unless enabled."""
        opts = self.options
        links, geoms = self._links, self._geoms
        pairs = []
        for a in range(len(geoms)):
            for b in range(a + 1, len(geoms)):
                ga, gb = geoms[a], geoms[b]
                if ga["type"] == MESH or gb["type"] == MESH or ga["type"] == gb["type"] == PLANE:
                    continue  # meshes collide once convex-mesh collision lands
                if not (ga["contype"] & gb["conaffinity"] or gb["contype"] & ga["conaffinity"]):
                    continue
                la, lb = ga["link"], gb["link"]
                if la == lb or (last_dof[la] < 0 and last_dof[lb] < 0):
                    continue
                if not opts.enable_adjacent_collision and (links[la]["parent"] == lb or links[lb]["parent"] == la):
                    continue
                if ga["entity"] == gb["entity"] and not opts.enable_self_collision:
                    continue
                pairs.append((a, b) if _pair_order(ga["type"], gb["type"]) else (b, a))
        return pairs

    def state_dims(self):
        return {"n_qs": self.n_qs, "n_dofs": self.n_dofs, "n_links": self.n_links, "n_slots": max(self.n_slots, 1)}

    def init_state(self, f):
        st = self.state
        st.at("qpos", f)[:] = torch.as_tensor(self._qpos0, dtype=self.float_dtype)
        st.dofs_kp[:] = torch.as_tensor(self._kp0, dtype=self.float_dtype)
        st.dofs_kv[:] = torch.as_tensor(self._kv0, dtype=self.float_dtype)
        self._allocate_scratch()
        self.kinematics(f)

    def _allocate_scratch(self):
        B, L, J, D = self.batch, max(self.n_links, 1), max(self.n_joints, 1), self.n_dofs
        S = max(self.n_slots, 1)
        R = max(3 * min(self.n_slots, self.options.max_contacts) + self.n_limited, 1)
        fl, dev = self.float_dtype, self.device

        def z(*shape, dtype=fl):
            return torch.zeros(shape, dtype=dtype, device=dev)

        self.scratch = dict(
            s_qs=z(1, B, max(self.n_qs, 1)), s_vs=z(1, B, max(D, 1)), s_lpos=z(1, B, L, 3), s_lquat=z(1, B, L, 4),
            s_R=z(B, L, 3, 3), s_com=z(B, L, 3), s_janchor=z(B, J, 3), s_jaxis=z(B, J, 3), s_cdof=z(B, max(D, 1), 6),
            s_cdof_dot=z(B, max(D, 1), 6), s_cvel=z(B, L, 6), s_cacc=z(B, L, 6), s_cfrc=z(B, L, 6), s_crb_m=z(B, L),
            s_crb_mc=z(B, L, 3), s_crb_io=z(B, L, 3, 3), s_mass=z(B, max(D, 1), max(D, 1)), s_dof=z(B, max(D, 1), 6),
            s_con_f=z(B, S, 9), s_con_i=z(B, S, 3, dtype=torch.int32), s_J=z(B, R, max(D, 1)),
            s_W=z(B, R, max(D, 1)), s_row_f=z(B, R, 4), s_row_i=z(B, R, 3, dtype=torch.int32))

    # -- stepping ---------------------------------------------------------------------------------------------------

    def kinematics(self, f):
        m, s, st = self.model, self.scratch, self.state
        kernels_step.kinematics(f, st.qpos, st.links_pos, st.links_quat, m["link_f"], m["link_i"], m["joint_f"],
                                m["joint_i"], s["s_R"], s["s_com"], s["s_janchor"], s["s_jaxis"])

    def substep_pre_coupling(self, f):
        st, m, s = self.state, self.model, self.scratch
        kernels_step.substep(
            f, self.frames.next(f), st.qpos, st.dofs_vel, st.dofs_acc, st.links_pos, st.links_quat,
            st.contact_impulse, st.dofs_ctrl_mode, st.dofs_ctrl_force, st.dofs_ctrl_pos, st.dofs_ctrl_vel,
            st.dofs_kp, st.dofs_kv, m["params_f"], m["params_i"], m["link_f"], m["link_i"], m["joint_f"],
            m["joint_i"], m["dof_f"], m["dof_i"], m["geom_f"], m["geom_i"], m["geom_rbound"], m["pair_i"],
            s["s_qs"], s["s_vs"], s["s_lpos"], s["s_lquat"], s["s_R"], s["s_com"], s["s_janchor"], s["s_jaxis"], s["s_cdof"], s["s_cdof_dot"], s["s_cvel"],
            s["s_cacc"], s["s_cfrc"], s["s_crb_m"], s["s_crb_mc"], s["s_crb_io"], s["s_mass"], s["s_dof"],
            s["s_con_f"], s["s_con_i"], s["s_J"], s["s_W"], s["s_row_f"], s["s_row_i"])
