"""The per-entity API of the rigid solver. Every getter returns torch tensors on gs.device shaped
`([n_envs,] ...)`; every setter takes `envs_idx` (None: all environments) and leaves the others untouched;
`dofs_idx_local` / `qs_idx_local` / `links_idx_local` index within the entity (None: all of them)."""

from __future__ import annotations

import numpy as np
import torch

import genesis_core as gs
from genesis_core.rotations import quat_to_mat as _quat_to_mat
from genesis_core.state import to_index, to_tensor

from .layout import CTRL_FORCE, CTRL_POSITION, CTRL_VELOCITY


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

    def __repr__(self):
        return f"<RigidLink {self.name!r} of entity {self.entity.idx}>"


class RigidEntity(gs.Entity):
    def _setup(self, link_start, link_end, dof_start, dof_end, q_start, q_end, link_names):
        self.link_start, self.link_end = link_start, link_end
        self.dof_start, self.dof_end = dof_start, dof_end
        self.q_start, self.q_end = q_start, q_end
        self.links = [RigidLink(self, i, name) for i, name in enumerate(link_names)]
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

    def get_link(self, name):
        for link in self.links:
            if link.name == name:
                return link
        raise gs.OptionError(f"get_link: no link {name!r}; links: {[l.name for l in self.links]}.")

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

    def _read(self, field, cols, envs_idx):
        return self.solver.state.get_rows(field, self.solver.frame, self._envs_idx(envs_idx), (cols,))

    def _moved(self):
        self.solver.kinematics(self.solver.frame)

    # -- control ----------------------------------------------------------------------------------------------------

    def _control(self, mode, field, value, dofs, envs_idx, what):
        self._write(field, value, dofs, envs_idx, what)  # validates the value before the mode changes
        self._write("dofs_ctrl_mode", mode, dofs, envs_idx, what)

    def control_dofs_force(self, force, dofs_idx_local=None, envs_idx=None):
        """Apply generalized forces (N or N m) from the next step on, until another control replaces them."""
        self._control(CTRL_FORCE, "dofs_ctrl_force", force, self._dofs(dofs_idx_local), envs_idx,
                      "control_dofs_force")

    def control_dofs_position(self, position, dofs_idx_local=None, envs_idx=None):
        """PD control toward `position` with the gains of set_dofs_kp / set_dofs_kv (implicit in the step)."""
        dofs, _ = self._position_dofs(dofs_idx_local, "control_dofs_position")
        self._control(CTRL_POSITION, "dofs_ctrl_pos", position, dofs, envs_idx, "control_dofs_position")

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

    def get_dofs_force(self, dofs_idx_local=None, envs_idx=None):
        """The control force each dof receives now (N or N m): the command, or the PD law's current value."""
        dofs = self._dofs(dofs_idx_local)
        mode = self._read("dofs_ctrl_mode", dofs, envs_idx)
        v = self._read("dofs_vel", dofs, envs_idx)
        kp, kv = self._read("dofs_kp", dofs, envs_idx), self._read("dofs_kv", dofs, envs_idx)
        qs = self.solver.dof_q[dofs].clamp(min=0)
        q = self._read("qpos", qs, envs_idx)
        lo, hi = self.solver.dof_force_range[0][dofs], self.solver.dof_force_range[1][dofs]
        force = torch.minimum(torch.maximum(self._read("dofs_ctrl_force", dofs, envs_idx), lo), hi)
        pos = kp * (self._read("dofs_ctrl_pos", dofs, envs_idx) - q) - kv * v
        vel = kv * (self._read("dofs_ctrl_vel", dofs, envs_idx) - v)
        return torch.where(mode == CTRL_POSITION, pos, torch.where(mode == CTRL_VELOCITY, vel, force))

    # -- state setters ----------------------------------------------------------------------------------------------

    def set_qpos(self, qpos, qs_idx_local=None, envs_idx=None, zero_velocity=True):
        qs = self.q_start + self._local(qs_idx_local, self.n_qs, "qs_idx_local").to(gs.device)
        self._write("qpos", qpos, qs, envs_idx, "set_qpos")
        if zero_velocity:
            self._write("dofs_vel", 0.0, self._dofs(None), envs_idx, "set_qpos")
        self._moved()

    def set_dofs_position(self, position, dofs_idx_local=None, envs_idx=None, zero_velocity=True):
        dofs, qs = self._position_dofs(dofs_idx_local, "set_dofs_position")
        self._write("qpos", position, qs, envs_idx, "set_dofs_position")
        if zero_velocity:
            self._write("dofs_vel", 0.0, dofs, envs_idx, "set_dofs_position")
        self._moved()

    def set_dofs_velocity(self, velocity, dofs_idx_local=None, envs_idx=None):
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
        self._moved()

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
        self._moved()

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
