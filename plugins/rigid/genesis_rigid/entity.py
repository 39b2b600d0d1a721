"""The per-entity API of the rigid solver. Every getter returns torch tensors on gs.device shaped
`([n_envs,] ...)`; every setter takes `envs_idx` (None: all environments) and leaves the others untouched;
`dofs_idx_local` / `qs_idx_local` / `links_idx_local` index within the entity (None: all of them)."""

from __future__ import annotations

import numpy as np
import torch

import genesis_core as gs
from genesis_core.rotations import quat_to_mat as _quat_to_mat
from genesis_core.state import to_index, to_tensor

from .layout import CTRL_FORCE, CTRL_POSITION, CTRL_VELOCITY, DF_SPRINGREF
from .model import BALL, BOX, CAPSULE, CYLINDER, FREE, HINGE, JOINT_NQ, JOINT_NV, MESH, SLIDE, SPHERE


class RigidLink:
    """A link of an entity: `name`, `idx` (in the solver), `idx_local` (in the entity)."""

    def __init__(self, entity, idx_local, name):
        self.entity, self.idx_local, self.name = entity, idx_local, name

    @property
    def idx(self):
        return self.entity.link_start + self.idx_local

    def get_pos(self, envs_idx=None):
        return self.entity.get_links_pos(links_idx_local=[self.idx_local], envs_idx=envs_idx)[..., 0, :]

    def get_quat(self, envs_idx=None):
        return self.entity.get_links_quat(links_idx_local=[self.idx_local], envs_idx=envs_idx)[..., 0, :]

    @property
    def parent_idx(self) -> int:
        """The solver-wide index of the parent link, -1 for a base."""
        return int(self.entity.solver.compiled.links[self.idx]["parent"])

    @property
    def inertial_mass(self) -> float:
        return float(self.entity.solver.compiled.links[self.idx]["mass"])

    def get_mass(self) -> float:
        """The link's mass (its inertial mass plus its shift) in the first environment, kg; `entity.
        get_links_inertial_mass` reads every environment's."""
        mass = self.entity.get_links_inertial_mass([self.idx_local]) + self.entity.get_links_mass_shift([self.idx_local])
        return float(mass.reshape(-1)[0])

    def set_mass(self, mass):
        """Set the link's inertial mass (kg, > 0) in every environment; its rotational inertia scales with it."""
        self.entity.set_links_inertial_mass(_positive_number(mass, "RigidLink.set_mass"), [self.idx_local])

    def get_vel(self, envs_idx=None):
        """Linear velocity of the link frame's origin, world, m/s, `([n_envs,] 3)`."""
        return self.entity.get_links_vel([self.idx_local], envs_idx)[..., 0, :]

    def get_ang(self, envs_idx=None):
        """Angular velocity, world, rad/s, `([n_envs,] 3)`."""
        return self.entity.get_links_ang([self.idx_local], envs_idx)[..., 0, :]

    def __repr__(self):
        return f"<RigidLink {self.name!r} of entity {self.entity.idx}>"


def _named(items, name, what, kind):
    """The item of `items` (links or joints) whose name is `name`, or an OptionError listing the names."""
    for item in items:
        if item.name == name:
            return item
    raise gs.OptionError(f"{what}: no {kind} {name!r}; {kind}s: {[i.name for i in items]}.")


def _positive_number(value, what):
    """value as a finite float > 0, or an OptionError naming `what`."""
    try:
        x = float(value) if not isinstance(value, (bool, np.bool_)) else float("nan")
    except (TypeError, ValueError):
        x = float("nan")
    if not (x > 0 and x < float("inf")):
        raise gs.OptionError(f"{what}: expected a finite number > 0 (kg), got {value!r:.60}.")
    return x


class RigidJoint:
    """A joint of an entity, with Genesis World's attributes. `idx` and `dof_start`, `q_start` ... index the
    solver's arrays; `*_idx_local` the entity's (what the entity's `dofs_idx_local` arguments take)."""

    TYPE_NAMES = {FREE: "FREE", BALL: "SPHERICAL", SLIDE: "PRISMATIC", HINGE: "REVOLUTE"}

    def __init__(self, entity, idx_local, desc, idx):
        self.entity, self.idx_local, self.idx = entity, idx_local, idx
        self.name = desc["name"]
        self.type = desc["type"]
        self.n_dofs, self.n_qs = JOINT_NV[self.type], JOINT_NQ[self.type]
        self.dof_start, self.q_start = desc["dof"], desc["q"]
        self.dof_end, self.q_end = self.dof_start + self.n_dofs, self.q_start + self.n_qs
        self.link = entity.links[desc["link"] - entity.link_start]

    @property
    def type_name(self) -> str:
        """"REVOLUTE", "PRISMATIC", "SPHERICAL" or "FREE" (Genesis World's joint type names)."""
        return self.TYPE_NAMES[self.type]

    @property
    def dofs_idx(self) -> list:
        return list(range(self.dof_start, self.dof_end))

    @property
    def dofs_idx_local(self) -> list:
        return [d - self.entity.dof_start for d in self.dofs_idx]

    @property
    def dof_idx(self):
        """The joint's dof (an int) for a one-dof joint, its list of dofs otherwise (Genesis World's)."""
        return self.dof_start if self.n_dofs == 1 else self.dofs_idx

    @property
    def dof_idx_local(self):
        return self.dof_start - self.entity.dof_start if self.n_dofs == 1 else self.dofs_idx_local

    @property
    def qs_idx(self) -> list:
        return list(range(self.q_start, self.q_end))

    @property
    def qs_idx_local(self) -> list:
        return [q - self.entity.q_start for q in self.qs_idx]

    @property
    def q_idx_local(self):
        return self.q_start - self.entity.q_start if self.n_qs == 1 else self.qs_idx_local

    def __repr__(self):
        return f"<RigidJoint {self.name!r} ({self.type_name}) of entity {self.entity.idx}>"


class RigidEntity(gs.Entity):
    def _setup(self, link_start, link_end, dof_start, dof_end, q_start, q_end, link_names, joints=(), joint_start=0):
        self.link_start, self.link_end = link_start, link_end
        self.dof_start, self.dof_end = dof_start, dof_end
        self.q_start, self.q_end = q_start, q_end
        self.links = [RigidLink(self, i, name) for i, name in enumerate(link_names)]
        self.joint_start, self.joint_end = joint_start, joint_start + len(joints)
        self.joints = [RigidJoint(self, i, desc, joint_start + i) for i, desc in enumerate(joints)]
        for link in self.links:
            link.joints = [j for j in self.joints if j.link is link]
        base = self.robot.bodies[0]
        self._free_base = bool(base.joints) and base.joints[0].type == 0  # FREE

    def place(self, pos, quat):
        """Compose a base pose with the morph's pose."""
        from genesis_core.rotations import quat_mul, rotate

        return np.asarray(self.morph.pos) + rotate(self.morph.quat, pos), quat_mul(self.morph.quat, quat)

    # -- sizes and lookup -------------------------------------------------------------------------------------------

    @property
    def base_link_idx(self) -> int:
        """The solver-wide index of the entity's base link (Genesis World's name)."""
        return self.link_start

    @property
    def n_links(self):
        return self.link_end - self.link_start

    @property
    def n_dofs(self):
        return self.dof_end - self.dof_start

    @property
    def n_qs(self):
        return self.q_end - self.q_start

    @property
    def n_joints(self):
        return self.joint_end - self.joint_start

    def get_link(self, name=None, uid=None):
        """The link named `name` (Genesis World's `uid` is accepted as a name too)."""
        name = name if name is not None else uid
        merged = getattr(getattr(self, "robot", None), "merged", {})
        if name in merged and all(l.name != name for l in self.links):
            raise gs.OptionError(f"get_link: link {name!r} was merged into {merged[name]!r} (it hangs on a fixed "
                                 f"joint and the URDF morph merges such links, as Genesis World does); keep it with "
                                 f"gs.morphs.URDF(..., links_to_keep=[{name!r}]) or merge_fixed_links=False.")
        return _named(self.links, name, "get_link", "link")

    def get_joint(self, name=None, uid=None):
        """The joint named `name` (`uid` accepted as a name): its `dofs_idx_local`, `dof_idx_local`,
        `qs_idx_local`, `dof_start`, ... index the entity's dofs and qpos."""
        return _named(self.joints, name if name is not None else uid, "get_joint", "joint")

    def _local(self, idx, n, what):
        if idx is None:
            return torch.arange(n)
        return to_index(idx, n, what)

    def _dofs(self, dofs_idx_local):
        return (self.dof_start + self._local(dofs_idx_local, self.n_dofs, "dofs_idx_local")).to(gs.device)

    def _position_dofs(self, dofs_idx_local, what):
        """Global dof indices and their qpos indices; only hinge and slide dofs have a scalar position."""
        dofs = self._dofs(dofs_idx_local)
        qs = self.solver.dof_q[dofs]
        if (qs < 0).any():
            bad = (dofs[qs < 0] - self.dof_start).tolist()
            raise gs.OptionError(f"{what}: dofs {bad} belong to ball or free joints, which have no scalar position; "
                                 "use set_qpos / set_pos / set_quat.")
        return dofs, qs

    def _write(self, field, value, cols, envs_idx, what):
        st = self.solver.state
        st.set_rows(field, self.solver.frame, value, self._envs_idx(envs_idx), (cols,), what=what)

    def _write_ruled(self, field, value, cols, envs_idx, what):
        """_write, then the solver's rules across the parameter fields (RigidSolver._param_rule) on the result:
        a value that breaks them is taken back and refused."""
        st = self.solver.state
        before = st.tensors[field].detach().clone()
        mark = st.tape.mark() if st.tape is not None else None
        self._write(field, value, cols, envs_idx, what)
        found = self.solver._param_rule({name: st.tensors[name] for name in
                                         ("dofs_force_lo", "dofs_force_hi", "links_inertial_mass")})
        if found is not None:
            with torch.no_grad():
                st.tensors[field].copy_(before)
            if mark is not None:  # a differentiable run forgets the write too
                st.tape.undo_to(mark)
            raise gs.InvalidStateError(st.entry_message(what, *found))

    def _read(self, field, cols, envs_idx):
        return self.solver.state.get_rows(field, self.solver.frame, self._envs_idx(envs_idx), (cols,))

    def _moved(self, envs_idx=None):
        """The link poses after a setter changed qpos, in the environments it wrote (the others keep theirs bit for
        bit: the standalone kinematics may round differently from the step that wrote them)."""
        self.solver.kinematics(self.solver.frame, self._envs_idx(envs_idx))

    # -- control ----------------------------------------------------------------------------------------------------

    def _control(self, mode, field, value, dofs, envs_idx, what):
        self._write(field, value, dofs, envs_idx, what)  # validates the value before the mode changes
        self._write("dofs_ctrl_mode", mode, dofs, envs_idx, what)

    def control_dofs_force(self, force, dofs_idx_local=None, envs_idx=None):
        """Apply generalized forces (N or N m) from the next step on, until another control replaces them."""
        self._control(CTRL_FORCE, "dofs_ctrl_force", force, self._dofs(dofs_idx_local), envs_idx,
                      "control_dofs_force")

    def control_dofs_position(self, position, dofs_idx_local=None, envs_idx=None):
        """PD control toward `position` (velocity target 0) with the gains of set_dofs_kp / set_dofs_kv (implicit
        in the step), its force clamped to the dofs' force range."""
        dofs, _ = self._position_dofs(dofs_idx_local, "control_dofs_position")
        self._write("dofs_ctrl_vel", 0.0, dofs, envs_idx, "control_dofs_position")
        self._control(CTRL_POSITION, "dofs_ctrl_pos", position, dofs, envs_idx, "control_dofs_position")

    def control_dofs_position_velocity(self, position, velocity, dofs_idx_local=None, envs_idx=None):
        """PD control toward `position` and `velocity`: kp (position - q) + kv (velocity - v), implicit in the
        step, clamped to the dofs' force range."""
        dofs, _ = self._position_dofs(dofs_idx_local, "control_dofs_position_velocity")
        self._write("dofs_ctrl_pos", position, dofs, envs_idx, "control_dofs_position_velocity")
        self._control(CTRL_POSITION, "dofs_ctrl_vel", velocity, dofs, envs_idx, "control_dofs_position_velocity")

    def control_dofs_velocity(self, velocity, dofs_idx_local=None, envs_idx=None):
        """Damping control toward `velocity` with the gains of set_dofs_kv."""
        self._control(CTRL_VELOCITY, "dofs_ctrl_vel", velocity, self._dofs(dofs_idx_local), envs_idx,
                      "control_dofs_velocity")

    def set_dofs_kp(self, kp, dofs_idx_local=None, envs_idx=None):
        """Position gains (>= 0, the field's declared bound)."""
        self._write("dofs_kp", kp, self._dofs(dofs_idx_local), envs_idx, "set_dofs_kp")

    def set_dofs_kv(self, kv, dofs_idx_local=None, envs_idx=None):
        """Velocity gains (>= 0, the field's declared bound)."""
        self._write("dofs_kv", kv, self._dofs(dofs_idx_local), envs_idx, "set_dofs_kv")

    def get_dofs_kp(self, dofs_idx_local=None, envs_idx=None):
        return self._read("dofs_kp", self._dofs(dofs_idx_local), envs_idx)

    def get_dofs_kv(self, dofs_idx_local=None, envs_idx=None):
        return self._read("dofs_kv", self._dofs(dofs_idx_local), envs_idx)

    def _dof_q(self, dofs, envs_idx):
        """The dofs' scalar positions (0 for ball and free dofs) and velocities at the current frame."""
        qs = self.solver.dof_q[dofs]
        q = self._read("qpos", qs.clamp(min=0), envs_idx)
        return torch.where(qs >= 0, q, torch.zeros_like(q)), self._read("dofs_vel", dofs, envs_idx)

    def get_dofs_control_force(self, dofs_idx_local=None, envs_idx=None):
        """The control force each dof receives at the current state (N or N m), clamped to its force range: the
        command (force control) or the PD law kp (target - q) + kv (target_v - v) (position and velocity control,
        evaluated explicitly; the step integrates it implicitly)."""
        dofs = self._dofs(dofs_idx_local)
        mode = self._read("dofs_ctrl_mode", dofs, envs_idx)
        q, v = self._dof_q(dofs, envs_idx)
        kp, kv = self._read("dofs_kp", dofs, envs_idx), self._read("dofs_kv", dofs, envs_idx)
        vel_target = self._read("dofs_ctrl_vel", dofs, envs_idx)
        pos = kp * (self._read("dofs_ctrl_pos", dofs, envs_idx) - q) + kv * (vel_target - v)
        vel = kv * (vel_target - v)
        raw = torch.where(mode == CTRL_POSITION, pos, torch.where(mode == CTRL_VELOCITY, vel,
                                                                  self._read("dofs_ctrl_force", dofs, envs_idx)))
        lo, hi = self.get_dofs_force_range(dofs_idx_local, envs_idx)
        return torch.minimum(torch.maximum(raw, lo), hi)

    def get_dofs_force(self, dofs_idx_local=None, envs_idx=None):
        """The generalized force each dof experiences from its joint and its actuator at the current state (N or
        N m): the control force (get_dofs_control_force) plus the joint's passive forces, -damping v - stiffness
        (q - springref). Constraint (contact, limit) and bias (gravity, Coriolis) forces are not included."""
        dofs = self._dofs(dofs_idx_local)
        q, v = self._dof_q(dofs, envs_idx)
        springref = torch.as_tensor(self.solver.compiled.arrays["dof_f"][:, DF_SPRINGREF], dtype=q.dtype,
                                    device=q.device)[dofs]
        has_q = self.solver.dof_q[dofs] >= 0
        spring = torch.where(has_q, self._read("dofs_stiffness", dofs, envs_idx) * (q - springref),
                             torch.zeros_like(q))
        return (self.get_dofs_control_force(dofs_idx_local, envs_idx)
                - self._read("dofs_damping", dofs, envs_idx) * v - spring)

    # -- dof parameters, per environment (state: checkpoints carry them) -------------------------------------------

    def set_dofs_force_range(self, lower, upper, dofs_idx_local=None, envs_idx=None):
        """The control force range [lower, upper] (N or N m): commands and PD laws are clamped to it (a PD law
        that exceeds it acts as its clamped force). `([n_envs,] n)` values or numbers."""
        dofs = self._dofs(dofs_idx_local)
        lo = to_tensor(lower, self.solver.float_dtype, gs.device, "set_dofs_force_range(lower)")
        hi = to_tensor(upper, self.solver.float_dtype, gs.device, "set_dofs_force_range(upper)")
        if bool((torch.broadcast_to(lo, torch.broadcast_shapes(lo.shape, hi.shape))
                 > torch.broadcast_to(hi, torch.broadcast_shapes(lo.shape, hi.shape))).any()):
            raise gs.OptionError(f"set_dofs_force_range: lower must not exceed upper (got lower={lower!r}, "
                                 f"upper={upper!r}).")
        self._write("dofs_force_lo", lo, dofs, envs_idx, "set_dofs_force_range(lower)")
        self._write("dofs_force_hi", hi, dofs, envs_idx, "set_dofs_force_range(upper)")

    def get_dofs_force_range(self, dofs_idx_local=None, envs_idx=None):
        """(lower, upper), each `([n_envs,] n)`."""
        dofs = self._dofs(dofs_idx_local)
        return self._read("dofs_force_lo", dofs, envs_idx), self._read("dofs_force_hi", dofs, envs_idx)

    def set_dofs_damping(self, damping, dofs_idx_local=None, envs_idx=None):
        """Joint damping (>= 0), N m s/rad or N s/m."""
        self._write("dofs_damping", damping, self._dofs(dofs_idx_local), envs_idx, "set_dofs_damping")

    def get_dofs_damping(self, dofs_idx_local=None, envs_idx=None):
        return self._read("dofs_damping", self._dofs(dofs_idx_local), envs_idx)

    def set_dofs_armature(self, armature, dofs_idx_local=None, envs_idx=None):
        """Armature (>= 0) added to the mass matrix's diagonal, kg m^2 or kg."""
        self._write("dofs_armature", armature, self._dofs(dofs_idx_local), envs_idx, "set_dofs_armature")

    def get_dofs_armature(self, dofs_idx_local=None, envs_idx=None):
        return self._read("dofs_armature", self._dofs(dofs_idx_local), envs_idx)

    def set_dofs_stiffness(self, stiffness, dofs_idx_local=None, envs_idx=None):
        """Joint spring stiffness (>= 0) toward the spring reference, N m/rad or N/m (hinge and slide dofs; a
        ball or free dof has no scalar position, and its stiffness is not used)."""
        self._write("dofs_stiffness", stiffness, self._dofs(dofs_idx_local), envs_idx, "set_dofs_stiffness")

    def get_dofs_stiffness(self, dofs_idx_local=None, envs_idx=None):
        return self._read("dofs_stiffness", self._dofs(dofs_idx_local), envs_idx)

    # -- state setters ----------------------------------------------------------------------------------------------

    def set_qpos(self, qpos, qs_idx_local=None, envs_idx=None, zero_velocity=True, skip_forward=False):
        """(skip_forward, Genesis World's: accepted; the link poses are always brought up to date.)"""
        qs = self.q_start + self._local(qs_idx_local, self.n_qs, "qs_idx_local").to(gs.device)
        self._write("qpos", qpos, qs, envs_idx, "set_qpos")
        if zero_velocity:
            self._write("dofs_vel", 0.0, self._dofs(None), envs_idx, "set_qpos")
        self._moved(envs_idx)

    def set_dofs_position(self, position, dofs_idx_local=None, envs_idx=None, zero_velocity=True, skip_forward=False):
        dofs, qs = self._position_dofs(dofs_idx_local, "set_dofs_position")
        self._write("qpos", position, qs, envs_idx, "set_dofs_position")
        if zero_velocity:
            self._write("dofs_vel", 0.0, dofs, envs_idx, "set_dofs_position")
        self._moved(envs_idx)

    def set_dofs_velocity(self, velocity, dofs_idx_local=None, envs_idx=None, skip_forward=False):
        self._write("dofs_vel", velocity, self._dofs(dofs_idx_local), envs_idx, "set_dofs_velocity")

    def _require_free_base(self, what):
        if not self._free_base:
            raise gs.OptionError(f"{what}: this entity's base is fixed (or not a free joint); its pose is set by "
                                 "the morph at build.")

    def set_pos(self, pos, envs_idx=None, zero_velocity=True):
        """Base position, `([n_envs,] 3)` m (a free base)."""
        self._require_free_base("set_pos")
        self._write("qpos", pos, torch.arange(self.q_start, self.q_start + 3, device=gs.device), envs_idx, "set_pos")
        if zero_velocity:
            self._write("dofs_vel", 0.0, self._dofs([0, 1, 2, 3, 4, 5]), envs_idx, "set_pos")
        self._moved(envs_idx)

    def set_quat(self, quat, envs_idx=None, zero_velocity=True):
        """Base orientation, `([n_envs,] 4)` (w, x, y, z), normalised here (a free base)."""
        self._require_free_base("set_quat")
        q = to_tensor(quat, self.solver.float_dtype, gs.device, "set_quat")
        norm = q.norm(dim=-1, keepdim=True)
        if q.shape[-1:] != (4,) or not bool(torch.isfinite(q).all()) or bool((norm < 1e-9).any()):
            raise gs.OptionError(f"set_quat: expected finite, non-zero quaternions (w, x, y, z), shaped "
                                 f"([n_envs,] 4), got {q.tolist() if q.numel() <= 16 else tuple(q.shape)}.")
        qs = torch.arange(self.q_start + 3, self.q_start + 7, device=gs.device)
        self._write("qpos", q / norm, qs, envs_idx, "set_quat")
        if zero_velocity:
            self._write("dofs_vel", 0.0, self._dofs([0, 1, 2, 3, 4, 5]), envs_idx, "set_quat")
        self._moved(envs_idx)

    # -- getters ----------------------------------------------------------------------------------------------------

    def get_qpos(self, qs_idx_local=None, envs_idx=None):
        qs = self.q_start + self._local(qs_idx_local, self.n_qs, "qs_idx_local").to(gs.device)
        return self._read("qpos", qs, envs_idx)

    def get_dofs_position(self, dofs_idx_local=None, envs_idx=None):
        _, qs = self._position_dofs(dofs_idx_local, "get_dofs_position")
        return self._read("qpos", qs, envs_idx)

    def get_dofs_velocity(self, dofs_idx_local=None, envs_idx=None):
        return self._read("dofs_vel", self._dofs(dofs_idx_local), envs_idx)

    def _links(self, links_idx_local):
        return (self.link_start + self._local(links_idx_local, self.n_links, "links_idx_local")).to(gs.device)

    def get_links_pos(self, links_idx_local=None, envs_idx=None):
        return self._read("links_pos", self._links(links_idx_local), envs_idx)

    def get_links_quat(self, links_idx_local=None, envs_idx=None):
        return self._read("links_quat", self._links(links_idx_local), envs_idx)

    def apply_links_external_force(self, force, links_idx_local=None, envs_idx=None, ref="link_origin", local=False):
        """`force` (N) on the entity's links during the next step (RigidSolver.apply_links_external_force)."""
        self.solver.apply_links_external_force(force, self._links(links_idx_local), envs_idx, ref=ref, local=local)

    def apply_links_external_torque(self, torque, links_idx_local=None, envs_idx=None, ref="link_origin",
                                    local=False):
        """`torque` (N m) on the entity's links during the next step."""
        self.solver.apply_links_external_torque(torque, self._links(links_idx_local), envs_idx, ref=ref, local=local)

    # -- kinematics without stepping: Jacobians and inverse kinematics (genesis_rigid.ik) -----------------------------

    def get_jacobian(self, link, local_point=None):
        """The geometric Jacobian `([n_envs,] 6, n_dofs)` of a point of `link` (default its frame's origin) at the
        current state: rows linear then angular velocity, world frame (genesis_rigid.ik.get_jacobian)."""
        from . import ik

        return ik.get_jacobian(self, link, local_point=local_point)

    def get_dofs_invweight(self, dofs_idx_local=None, envs_idx=None):
        """Genesis World's dof inverse weights `([n_envs,] n)`: the diagonal of the inverse mass matrix at the
        model's initial configuration, with each environment's inertial parameters and armature
        (genesis_rigid.ik.get_dofs_invweight)."""
        from . import ik

        return ik.get_dofs_invweight(self, dofs_idx_local, envs_idx)

    def inverse_kinematics(self, link, pos=None, quat=None, *args, **kwargs):
        """qpos `([n_envs,] n_qs)` that puts `link` at `pos` / `quat`, by batched damped least squares within the
        joint limits, with restarts; the scene's state is left as it is (genesis_rigid.ik.inverse_kinematics:
        Genesis World's parameters)."""
        from . import ik

        return ik.inverse_kinematics(self, link, pos, quat, *args, **kwargs)

    def inverse_kinematics_multilink(self, links, poss=None, quats=None, *args, **kwargs):
        """inverse_kinematics for several links at once (genesis_rigid.ik.inverse_kinematics_multilink)."""
        from . import ik

        return ik.inverse_kinematics_multilink(self, links, poss, quats, *args, **kwargs)

    def forward_kinematics(self, qpos, qs_idx_local=None, links_idx_local=None, envs_idx=None):
        """(links_pos, links_quat) at `qpos`, without touching the scene (genesis_rigid.ik.forward_kinematics)."""
        from . import ik

        return ik.forward_kinematics(self, qpos, qs_idx_local=qs_idx_local, links_idx_local=links_idx_local,
                                     envs_idx=envs_idx)

    # -- the links' inertial parameters and friction, per environment (domain randomization; state) ------------------

    def set_links_inertial_mass(self, mass, links_idx_local=None, envs_idx=None):
        """The links' masses before their shift (kg, `([n_envs,] n)`); a link's rotational inertia scales with its
        mass. A moving link's inertial mass must be > 0."""
        self._write_ruled("links_inertial_mass", mass, self._links(links_idx_local), envs_idx,
                          "set_links_inertial_mass")

    def get_links_inertial_mass(self, links_idx_local=None, envs_idx=None):
        return self._read("links_inertial_mass", self._links(links_idx_local), envs_idx)

    def set_mass_shift(self, mass_shift, links_idx_local=None, envs_idx=None):
        """Mass added to each link (kg, `([n_envs,] n)`, negative removes), on top of its inertial mass. A shift
        may take the sum below zero (Genesis World's domain randomization does, on light links): the dynamics then
        use a tenth of the inertial mass (`MIN_MASS_FRACTION`) and a warning says so once per scene."""
        self._write("links_mass_shift", mass_shift, self._links(links_idx_local), envs_idx, "set_mass_shift")

    set_links_mass_shift = set_mass_shift

    def get_links_mass_shift(self, links_idx_local=None, envs_idx=None):
        return self._read("links_mass_shift", self._links(links_idx_local), envs_idx)

    def set_COM_shift(self, com_shift, links_idx_local=None, envs_idx=None):
        """Offset of each link's centre of mass in the link's frame (m, `([n_envs,] n, 3)`)."""
        self._write("links_com_shift", com_shift, self._links(links_idx_local), envs_idx, "set_COM_shift")

    set_links_COM_shift = set_COM_shift

    def get_links_COM_shift(self, links_idx_local=None, envs_idx=None):
        return self._read("links_com_shift", self._links(links_idx_local), envs_idx)

    def _geoms_of(self, links):
        """The solver's geoms on the given (global) links, and for each the position of its link in `links`."""
        where = {int(l): i for i, l in enumerate(links.tolist())}
        geoms = [(g, where[k["link"]]) for g, k in enumerate(self.solver.compiled.geoms) if k["link"] in where]
        return [g for g, _ in geoms], [i for _, i in geoms]

    def set_friction_ratio(self, friction_ratio, links_idx_local=None, envs_idx=None):
        """Factor (>= 0) on the friction coefficient of every geom of each link, `([n_envs,] n_links)`: a contact
        takes the larger of its two geoms' products (Genesis World's domain randomization)."""
        links = self._links(links_idx_local)
        geoms, col = self._geoms_of(links)
        ratio = to_tensor(friction_ratio, self.solver.float_dtype, gs.device, "set_friction_ratio")
        if ratio.shape[-1:] != (len(links),) and ratio.dim() > 0:
            raise gs.OptionError(f"set_friction_ratio: expected ([n_envs,] {len(links)}) ratios (one per link), got "
                                 f"shape {tuple(ratio.shape)}.")
        if geoms:
            per_geom = ratio[..., col] if ratio.dim() else ratio
            self._write("geoms_friction_ratio", per_geom, torch.as_tensor(geoms, device=gs.device), envs_idx,
                        "set_friction_ratio")

    def get_friction_ratio(self, links_idx_local=None, envs_idx=None):
        """Each link's friction ratio (that of its first geom; 1 for a link without geoms), `([n_envs,] n)`."""
        links = self._links(links_idx_local)
        geoms, col = self._geoms_of(links)
        out = torch.ones(((max(self.scene.n_envs, 1),) if self._envs_idx(envs_idx) is None else
                          (len(self._envs_idx(envs_idx)),)) + (len(links),), dtype=self.solver.float_dtype,
                         device=gs.device)
        if geoms:
            vals = self._read("geoms_friction_ratio", torch.as_tensor(geoms, device=gs.device), envs_idx)
            vals = vals if self.scene.n_envs else vals.unsqueeze(0)
            for k in reversed(range(len(geoms))):  # the first geom of each link wins
                out[:, col[k]] = vals[:, k]
        return out if self.scene.n_envs else out[0]

    def get_mass(self):
        """The entity's total mass in the first environment, kg (inertial masses plus shifts)."""
        m = self.get_links_inertial_mass() + self.get_links_mass_shift()
        return float(m.reshape(-1, self.n_links)[0].sum())

    def set_mass(self, mass):
        """Scale every link's inertial mass so that the entity's total is `mass` (kg, > 0) in every environment."""
        mass = _positive_number(mass, "set_mass")
        m = self.get_links_inertial_mass()
        total = float(m.reshape(-1, self.n_links)[0].sum())
        if not total > 0:
            raise gs.OptionError("set_mass: the entity has no mass to scale.")
        self.set_links_inertial_mass(m * (float(mass) / total))

    def get_AABB(self, envs_idx=None):
        """The entity's axis-aligned bounding box, `([n_envs,] 2, 3)` (min, max corner), world, m, over its geoms
        at the current state (planes left out; meshes by their hull's vertices, cylinders by their box)."""

        links = self._links(None)
        geoms, _ = self._geoms_of(links)
        pos = self._read("links_pos", links, envs_idx)
        quat = self._read("links_quat", links, envs_idx)
        if not self.scene.n_envs:
            pos, quat = pos.unsqueeze(0), quat.unsqueeze(0)
        rot = _quat_to_mat(quat)  # [B, n, 3, 3]
        lo = torch.full((pos.shape[0], 3), float("inf"), dtype=pos.dtype, device=pos.device)
        hi = -lo.clone()
        for g in geoms:
            k = self.solver.compiled.geoms[g]
            desc = k["desc"]
            if k["type"] == SPHERE:
                pts = np.zeros((1, 3))
                pad = float(k["size"][0])
            elif k["type"] == CAPSULE:
                pts = np.array([[0, 0, 1.0], [0, 0, -1.0]]) * float(k["size"][1])
                pad = float(k["size"][0])
            elif k["type"] in (BOX, CYLINDER):
                s = np.asarray(k["size"][:3], dtype=np.float64)
                half = s if k["type"] == BOX else np.array([s[0], s[0], s[1]])
                pts = np.array([[sx, sy, sz] for sx in (-1, 1) for sy in (-1, 1) for sz in (-1, 1)]) * half
                pad = 0.0
            elif k["type"] == MESH:
                hull = desc.hull()
                if hull is None:
                    continue
                pts, pad = np.asarray(hull.vertices, dtype=np.float64), 0.0
            else:  # planes: unbounded
                continue
            local = np.asarray(k["pos"], dtype=np.float64) + pts @ _quat_to_mat(np.asarray(k["quat"],
                                                                                        dtype=np.float64)).T
            li = int(k["link"]) - self.link_start
            world = pos[:, li, None, :] + torch.einsum("bij,nj->bni", rot[:, li],
                                                       torch.as_tensor(local, dtype=pos.dtype, device=pos.device))
            lo = torch.minimum(lo, world.min(1).values - pad)
            hi = torch.maximum(hi, world.max(1).values + pad)
        out = torch.stack([lo, hi], 1)
        return out if self.scene.n_envs else out[0]

    # -- contacts ----------------------------------------------------------------------------------------------------

    def get_contacts(self, with_entity=None, exclude_self_contact=False):
        """The contacts of the last substep that involve this entity (and `with_entity`, if given; with_entity=self:
        its self-contacts only), Genesis World's dict: geom_a, geom_b, link_a, link_b (the solver's indices),
        position (world), force_a, force_b (N, on geoms a and b), normal (a to b). Batched: each `(n_envs,
        n_contacts, ...)` with `valid_mask`; unbatched: the valid contacts only, `(n_contacts, ...)`."""
        c = self.solver.contacts()
        mine_a = (c["link_a"] >= self.link_start) & (c["link_a"] < self.link_end)
        mine_b = (c["link_b"] >= self.link_start) & (c["link_b"] < self.link_end)
        if with_entity is self:
            if exclude_self_contact:
                raise gs.OptionError("get_contacts: with_entity is this entity, and exclude_self_contact=True leaves "
                                     "nothing.")
            mask = mine_a & mine_b
        else:
            mask = (mine_a ^ mine_b) if exclude_self_contact else (mine_a | mine_b)
            if with_entity is not None:
                if not isinstance(with_entity, RigidEntity):
                    raise gs.OptionError(f"get_contacts: with_entity must be a rigid entity, got "
                                         f"{type(with_entity).__name__}.")
                lo, hi = with_entity.link_start, with_entity.link_end
                mask = mask & (((c["link_a"] >= lo) & (c["link_a"] < hi)) | ((c["link_b"] >= lo) & (c["link_b"] < hi)))
        mask = mask & c.pop("valid")
        sweeps = c.pop("sweeps", None)  # per environment, not per contact: never masked
        if not self.scene.n_envs:
            out = {k: v[0][mask[0]] for k, v in c.items()}
            if sweeps is not None:
                out["sweeps"] = sweeps[0]
            return out
        c["valid_mask"] = mask
        if sweeps is not None:
            c["sweeps"] = sweeps
        return c

    def get_links_net_contact_force(self, envs_idx=None):
        """The net contact force on each of the entity's links over the last substep, `([n_envs,] n_links, 3)`, N,
        world."""
        c = self.solver.contacts()
        B, L = c["force_b"].shape[0], self.n_links
        net = torch.zeros((B, L + 1, 3), dtype=c["force_b"].dtype, device=c["force_b"].device)
        for side in ("a", "b"):
            link = c[f"link_{side}"] - self.link_start
            inside = c["valid"] & (link >= 0) & (link < L)
            net.scatter_add_(1, torch.where(inside, link, L)[..., None].expand(-1, -1, 3),
                             torch.where(inside[..., None], c[f"force_{side}"], torch.zeros_like(c["force_b"])))
        net = net[:, :L]
        envs = self._envs_idx(envs_idx)
        if envs is not None:
            net = net[envs]
        return net if self.scene.n_envs else net[0]

    def _link_motion(self, links_idx_local, envs_idx):
        links = self._links(links_idx_local)
        com, v_com, omega = (x[:, links] for x in self.solver.link_motion())
        envs = self._envs_idx(envs_idx)
        if envs is not None:
            com, v_com, omega = com[envs], v_com[envs], omega[envs]
        if not self.scene.n_envs:
            com, v_com, omega = com[0], v_com[0], omega[0]
        return links, com, v_com, omega

    def get_links_vel(self, links_idx_local=None, envs_idx=None, ref="link_origin"):
        """Linear velocities of the links, world, m/s, `([n_envs,] n_links, 3)`: of each link frame's origin
        (ref="link_origin", Genesis World's default) or of its centre of mass (ref="link_com")."""
        if ref not in ("link_origin", "link_com"):
            raise gs.OptionError(f"get_links_vel: ref={ref!r} is not accepted: expected 'link_origin' or 'link_com'.")
        links, com, v_com, omega = self._link_motion(links_idx_local, envs_idx)
        if ref == "link_com":
            return v_com
        origin = self._read("links_pos", links, envs_idx)
        return v_com + torch.cross(omega, origin.to(com.dtype) - com, dim=-1)

    def get_links_ang(self, links_idx_local=None, envs_idx=None):
        """Angular velocities of the links, world, rad/s, `([n_envs,] n_links, 3)`."""
        return self._link_motion(links_idx_local, envs_idx)[3]

    def get_pos(self, envs_idx=None):
        """Base link position, `([n_envs,] 3)`."""
        return self.get_links_pos([0], envs_idx)[..., 0, :]

    def get_quat(self, envs_idx=None):
        return self.get_links_quat([0], envs_idx)[..., 0, :]

    def get_vel(self, envs_idx=None):
        """Base linear velocity (of the base frame origin), world, m/s; zero for a fixed base."""
        if not self._free_base:
            return torch.zeros_like(self.get_pos(envs_idx))
        return self._read("dofs_vel", self._dofs([0, 1, 2]), envs_idx)

    def get_ang(self, envs_idx=None):
        """Base angular velocity, world axes, rad/s; zero for a fixed base."""
        if not self._free_base:
            return torch.zeros_like(self.get_pos(envs_idx))
        local = self._read("dofs_vel", self._dofs([3, 4, 5]), envs_idx)
        return (_quat_to_mat(self.get_quat(envs_idx)) @ local.unsqueeze(-1)).squeeze(-1)
