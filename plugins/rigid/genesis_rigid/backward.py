"""The rigid solver's differentiable mode: the contacts a recording forward keeps in the tape, the backward's re-run
of each substep on the plain kernels (recording what the reverse reads), the reverse kernels, the gradients of the
collider view, and the controls' and parameters' gradients. The forward, the re-run and the reverse all run the
plain kernels' physics, so a differentiable trajectory is the plain one, bit for bit."""

from __future__ import annotations

import numpy as np
import torch

import genesis_core as gs
from genesis_core.launch import Launcher

from . import kernels_step
from .kernels_collision import CI_ACTIVE, CI_META, CM_SETTLED
from .layout import GC_MU, GF_FRICTION, GT_FORCE, GT_KP, GT_KV, GT_POS, GT_VEL, LF_INERTIA, LF_MASS
from .params import MIN_MASS_FRACTION
from .views import VIEW_OUTPUTS


class Backward:
    """RigidSolver's differentiable part (mixed into the solver)."""

    def _log_contacts(self):
        """Differentiable mode, a forward that records: keep the contacts this substep's collision pass found (the
        pool's entries in use, in every environment, and the pool's counts) in the tape. The backward's re-run of
        the substep puts them back (_rerun_substep) instead of colliding again: it saves the collision passes, and
        the re-run has the forward's contacts in the forward's order whatever the broadphase's sweep order and
        axis, which carry over from substep to substep while the re-runs go last first."""
        tape = self.state.tape if self.sim_options.requires_grad else None
        if tape is None or tape.consumed:
            return
        con_f, con_i = self.scratch["s_con_f"], self.scratch["s_con_i"]
        if con_f.device.type == "cpu":  # numpy views: a third of torch's cost per call on these small copies
            views = self.__dict__.get("_pool_views")
            if views is None or views[0] is not con_f:
                views = self._pool_views = (con_f, con_f.numpy(), con_i.numpy())
            _, cf, ci = views
            n = int(ci[:, CI_META, 0].max())
            record = (torch.from_numpy(cf[:, :n].copy()), torch.from_numpy(ci[:, :, :max(n, CM_SETTLED + 1)].copy()))
        else:
            n = int(con_i[:, CI_META, 0].max())
            record = (con_f[:, :n].clone(), con_i[:, :, :max(n, CM_SETTLED + 1)].clone())
        tape.keep(self.state.owner, record)

    def _restore_contacts(self):
        """The backward's re-run of a substep: the contacts the forward's collision pass found (_log_contacts)."""
        record = self.state.tape.take(self.state.owner)
        if record is None:
            raise gs.GenesisError("RigidSolver: the backward found no contacts kept for a substep it re-runs.")
        con_f, con_i = record
        self.scratch["s_con_f"][:, :con_f.shape[1]] = con_f
        self.scratch["s_con_i"][:, :, :con_i.shape[2]] = con_i

    def _recording(self) -> bool:
        """Differentiable mode while the backward re-runs a substep (which then records what its reverse reads). The
        forward of a run, the re-run and the reverse all run the plain kernels' physics, so a differentiable run's
        trajectory is the plain one, bit for bit."""
        if not self.sim_options.requires_grad:
            return False
        tape = self.state.tape
        return tape is not None and tape.consumed

    def _rerun_substep(self, f):
        """The backward's re-run of the substep at frame f on the plain kernels, recording the constraint sweeps'
        impulses (s_hist): every scratch array then holds what the reverse kernels read."""
        fn = self.frames.next(f)
        if self.collision:
            self._restore_contacts()
        if self.__dict__.get("_rerun_launch") is None:  # (its own bound arguments: s_hist is not the forward's)
            self._rerun_launch = Launcher()
        substep = self._bind(kernels_step.substep, self._rerun_launch, {"s_hist": self.adjoint["s_hist"]})
        substep(f=f, fn=fn, fresh=0, links_ext_impulse=self._ext_impulse(f))
        self._fk_key = None
        self._diff_tape = f
        self._view_tape = None

    def _reverse_substep(self, f):
        """The reverse kernels of the substep at frame f (after _rerun_substep): the gradients of frame fn's fields
        into frame f's, the controls' and the parameters'."""
        st, fn = self.state, self.frames.next(f)
        if not self.n_dofs:  # nothing moves: no gradient flows through the substep
            return
        ext = self._ext_copy if self._step_wrench() is not None else st.links_ext_impulse
        arrays = self._reverse_arrays()
        self._run(kernels_step.substep_reverse_head, arrays, f=f, fn=fn)
        self._run(kernels_step.substep_reverse_constraints, arrays, f=f, fn=fn)
        self._run(kernels_step.substep_reverse_dynamics, arrays, f=f, links_ext_impulse=ext)
        self._run(kernels_step.substep_reverse_kinematics, arrays, f=f)
        self._parameter_gradients(f)

    # the control fields and their columns of g_ctrl
    CONTROL_GRADIENTS = (("dofs_ctrl_force", GT_FORCE), ("dofs_ctrl_pos", GT_POS), ("dofs_ctrl_vel", GT_VEL),
                         ("dofs_kp", GT_KP), ("dofs_kv", GT_KV))
    GRAD_FIELDS = ("qpos", "dofs_vel", "dofs_acc", "links_pos", "links_quat", "contact_impulse", "limit_impulse",
                   "equality_impulse", "links_ext_impulse")

    def _reverse_arrays(self) -> dict:
        """What the reverse kernels take beyond kernel_arrays(): the adjoints (g_*, and the sweeps' history s_hist in
        place of the forward's placeholder) and the state's gradients, G_<field>; the same dict while these arrays
        are the same objects (the kernels stay bound)."""
        st = self.state
        grads = tuple(st.tensors[name].grad for name in self.GRAD_FIELDS)
        cached = self.__dict__.get("_reverse_cache")
        if cached is None or cached[0] is not self.adjoint or any(a is not b for a, b in zip(cached[1], grads)):
            arrays = {**self.adjoint, **{f"G_{name}": g for name, g in zip(self.GRAD_FIELDS, grads)}}
            cached = self._reverse_cache = (self.adjoint, grads, arrays)
        return cached[2]

    def _reverse_view(self, fn):
        """The gradients of the collider view's arrays (their .grad, which the couplings' backward filled) into those
        of qpos[fn] and dofs_vel[fn] (kernels_step.collider_geometry_reverse); the view's gradients are then zeroed."""
        v = self._view
        names = VIEW_OUTPUTS + ("body_quat",)
        grads = [getattr(v, n).grad for n in names]
        if any(g is not None and bool(g.any()) for g in grads) and self.n_links and self.n_dofs:
            arrays = {**self._reverse_arrays(), **{f"G_{n}": g.contiguous() for n, g in zip(names, grads)}}
            self._run(kernels_step.collider_geometry_reverse, arrays, fn=fn)
        for g in grads:
            if g is not None:
                g.zero_()

    def _parameter_gradients(self, f):
        """The controls' and the parameters' gradients from the reverse kernels' adjoints of the arrays the kernels
        read (g_ctrl, g_dof_f, g_link_f, and each contact's friction in g_con), into the state fields that carry a
        gradient."""
        st, a = self.state, self.adjoint
        D, L, G = self.n_dofs, self.n_links, self.n_geoms
        wanted = self._wanted_gradients()
        g_ctrl = a["g_ctrl"][:, :D]
        for name, col in self.CONTROL_GRADIENTS:
            if name in wanted:
                st.grad_at(name, f).add_(g_ctrl[..., col])
        g_dof_f = a["g_dof_f"][:, :D]
        for name, col in self.DOF_PARAMS:
            if name in wanted:
                st.grad_at(name, f).add_(g_dof_f[..., col])
        if L and ("links_inertial_mass" in wanted or "links_mass_shift" in wanted):
            # mass = max(inertial mass + shift, MIN_MASS_FRACTION inertial mass); the rotational inertia is the
            # model's times mass / the model's mass (_sync_link_params)
            g_link_f = a["g_link_f"][:, :L]
            base = self._link_base()
            m_model, inertia = base[:, 0], base[:, 1:]
            g_mass = g_link_f[..., LF_MASS] + torch.where(
                m_model > 0, (g_link_f[..., LF_INERTIA:LF_INERTIA + 9] * inertia).sum(-1) / m_model.clamp_min(1e-300),
                torch.zeros_like(m_model))
            mass0, shift = st.tensors["links_inertial_mass"].detach(), st.tensors["links_mass_shift"].detach()
            floored = mass0 + shift < MIN_MASS_FRACTION * mass0
            if "links_inertial_mass" in wanted:
                st.grad_at("links_inertial_mass", f).add_(torch.where(floored, MIN_MASS_FRACTION * g_mass, g_mass))
            if "links_mass_shift" in wanted:
                st.grad_at("links_mass_shift", f).add_(torch.where(floored, torch.zeros_like(g_mass), g_mass))
        if G and self.max_contacts and "geoms_friction_ratio" in wanted:
            # an entry's friction is the larger of its geoms' (kernels_collision.finish_contacts): its gradient
            # goes to that geom's ratio, times the geom's friction in the model
            g_mu = a["g_con"][..., GC_MU]
            con_i = self.scratch["s_con_i"]
            C = self.max_contacts
            active = con_i[:, CI_ACTIVE, :C] == 1
            ga, gb = self._entry_geoms(con_i, C)
            base = torch.as_tensor(self.compiled.arrays["geom_f"][:G, GF_FRICTION], dtype=self.float_dtype, device=self.device)
            mu = base * st.tensors["geoms_friction_ratio"].detach()  # (geom_mu, as _sync_link_params wrote it)
            mu_a, mu_b = torch.gather(mu, 1, ga), torch.gather(mu, 1, gb)
            g = torch.where(active, g_mu, torch.zeros_like(g_mu))
            geom = torch.where(mu_a >= mu_b, ga, gb)
            out = torch.zeros_like(st.grad_at("geoms_friction_ratio", f))
            out.scatter_add_(1, geom, g * base[geom])
            st.grad_at("geoms_friction_ratio", f).add_(out)

    def _link_base(self):
        """The model's link masses and rotational inertias [L, 1 + 9] (torch, made once)."""
        if self.__dict__.get("_link_base_t") is None:
            link_f = self.compiled.arrays["link_f"][:self.n_links]
            self._link_base_t = torch.as_tensor(np.concatenate([link_f[:, LF_MASS:LF_MASS + 1],
                                                                link_f[:, LF_INERTIA:LF_INERTIA + 9]], 1),
                                                dtype=self.float_dtype, device=self.device)
        return self._link_base_t

    def _wanted_gradients(self) -> set:
        """The frameless fields of this solver whose gradient the backward under way hands to a user's tensor: those
        a setter wrote with a tensor that requires grad during the forward (Tape.events; the core reads a frameless
        field's gradient only there). The controls' and parameters' gradients are accumulated for these alone."""
        tape = self.state.tape
        key = (id(tape), tape.k0, tape.k, sum(len(e) for e in tape.events.values()))
        cached = self.__dict__.get("_wanted")
        if cached is None or cached[0] != key:
            names = {name for events in tape.events.values() for store, name, _, _, value in events
                     if store is self.state and value is not None and self.state.has_grad(name)}
            cached = self._wanted = (key, names)
        return cached[1]

    def substep_post_coupling_grad(self, f):
        pass  # the couplings read the adjoint of the impulses they add from the view (frame fn's gradient)

    def substep_pre_coupling_grad(self, f):
        """The couplings' gradients of the view (geom poses, centres of mass, velocities at frame fn) into the
        gradients of frame fn; then the substep's adjoint: dL/d(frame f) and the controls' gradients."""
        self.adjoint["g_link_f"].zero_()
        if self._view_tape is not None:
            self._reverse_view(self._view_tape)
            self._view_tape = None
        if self._diff_tape != f:
            raise gs.GenesisError(f"{self.name}: the adjoint of the substep at frame {f} needs its forward first "
                                  "(the core re-runs it before the backward of each substep).")
        self._diff_tape = None
        self._reverse_substep(f)

