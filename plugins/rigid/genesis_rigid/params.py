"""The rigid solver's parameter syncs: the state's per-environment parameter fields (the dofs' damping, armature,
stiffness and force range; the links' inertial mass, mass and centre-of-mass shifts; the geoms' friction ratios;
the poses of the links welded to the world)
handed to the kernels' model arrays after they changed, checked by the tensors' version counters so that an
unchanged state costs nothing; and the rules across those fields (StateStore.rules)."""

from __future__ import annotations

import warnings

import numpy as np
import torch

import genesis_core as gs
from genesis_core.state import first_entry

from .layout import DF_ARMATURE, DF_DAMPING, DF_FORCE_HI, DF_FORCE_LO, DF_N, DF_STIFFNESS, GF_FRICTION, LF_COM, \
    LF_INERTIA, LF_MASS, LF_POS, LF_QUAT

# a link's mass in the dynamics is at least this fraction of its inertial mass, whatever its links_mass_shift
MIN_MASS_FRACTION = 0.1


def same_values(tensors, saved):
    """Whether the tensors hold the values `saved` (a list of copies, or None) bit for bit."""
    return saved is not None and all(torch.equal(t.detach(), c) for t, c in zip(tensors, saved))


def versions(tensors):
    """(id, version counter) of each tensor: equal to an earlier key while no tensor was replaced or written in
    place (the parameter syncs and the applied wrenches look at the state only when it moved)."""
    return tuple((id(t), t._version) for t in tensors)


class ParamSync:
    """RigidSolver's part that hands the parameter fields to the kernels (mixed into the solver: it reads state,
    compiled, model, batch, n_dofs, n_links, n_geoms)."""

    DOF_PARAMS = (("dofs_damping", DF_DAMPING), ("dofs_armature", DF_ARMATURE), ("dofs_stiffness", DF_STIFFNESS),
                  ("dofs_force_lo", DF_FORCE_LO), ("dofs_force_hi", DF_FORCE_HI))

    def _sync_dof_params(self):
        """Hand the state's dofs_* parameters to the kernels (and the differentiable step) after they changed (a
        setter, a reset, a checkpoint): checked by the tensors' version counters, so an unchanged state costs
        nothing."""
        st = self.state
        tensors = [st.tensors[name] for name, _ in self.DOF_PARAMS]
        key = versions(tensors)
        if key == self._dof_params_seen:
            return
        if same_values(tensors, self.__dict__.get("_dof_params_values")):  # rewritten with the same values (a
            self._dof_params_seen = key  # backward's restore of each substep's frame): nothing to hand over
            return
        self._dof_params_values = [t.detach().clone() for t in tensors]
        found = self._param_rule({"dofs_force_lo": st.tensors["dofs_force_lo"],
                                  "dofs_force_hi": st.tensors["dofs_force_hi"]})
        if found is not None:
            raise gs.InvalidStateError(st.entry_message("step", *found))
        if self.n_dofs:
            arr = np.array(np.broadcast_to(self.compiled.arrays["dof_f"][:self.n_dofs], (self.batch, self.n_dofs, DF_N)))
            for (name, col), t in zip(self.DOF_PARAMS, tensors):
                arr[:, :, col] = t.detach().double().cpu().numpy()
            self.model["dof_f"].from_numpy(arr.astype(self._np_float))
        self._dof_params_seen = key

    LINK_PARAMS = ("links_inertial_mass", "links_mass_shift", "links_com_shift", "geoms_friction_ratio",
                   "fixed_base_pos", "fixed_base_quat")

    def _state_rules(self, rows):
        """The rules across entries and fields (StateStore.rules) on rows {name: [R, ...]}: the contact pool's keys
        compact, the entries in use first and then -1 (finish_contacts stops at the first -1; the first key after a
        -1 is named as an entry), then _param_rule's."""
        keys = rows.get("contact_key")
        if keys is not None and keys.numel():
            bad = torch.zeros_like(keys, dtype=torch.bool)
            bad[:, 1:] = (keys[:, 1:] >= 0) & (keys[:, :-1] < 0)
            if bad.any():
                return ("contact_key", *first_entry(bad, keys),
                        "-1 after a -1 (the contact pool's entries in use come first, then -1)")
        return self._param_rule(rows) or self._equality_rule(rows)

    def _param_rule(self, rows):
        """The rules across the parameter fields, on rows {name: [R, ...]} of the fields present: each dof's force
        range lower <= upper; each link's inertial mass >= 0, and > 0 for a moving link that has mass in the model
        (a shift may take the sum lower: the dynamics floor it, _sync_link_params). The first entry that breaks one,
        (name, row, index, value, expected) as StateStore.rules names it, or None."""
        lo, hi = rows.get("dofs_force_lo"), rows.get("dofs_force_hi")
        if lo is not None and hi is not None and lo.numel():
            bad = lo > hi
            if bad.any():
                row, index, value = first_entry(bad, lo)
                return ("dofs_force_lo", row, index, value, f"a value <= dofs_force_hi there "
                        f"({hi[(row, *index)].item()!r}): a force range needs lower <= upper")
        mass0 = rows.get("links_inertial_mass")
        if mass0 is not None and mass0.numel():
            mass = mass0.double()
            m_model = torch.as_tensor(self._link_f_env[:, :self.n_links, LF_MASS].max(0), device=mass.device)
            moving = torch.as_tensor([self.compiled.last_dof[l] >= 0 for l in range(self.n_links)], device=mass.device)
            bad = (mass < 0) | ((mass <= 0) & moving & (m_model > 0))
            if bad.any():
                return ("links_inertial_mass", *first_entry(bad, mass0),
                        "> 0 for a link that moves and has mass in the model, >= 0 for every link")
        return None

    def _sync_link_params(self):
        """Hand the state's link inertial parameters and friction ratios to the kernels after they changed (as
        _sync_dof_params): mass = inertial mass + shift, at least MIN_MASS_FRACTION of the inertial mass (the
        rotational inertia scaled by it over the model's mass), centre of mass = the model's + shift, each geom's
        friction = the model's times its ratio."""
        st = self.state
        tensors = [st.tensors[name] for name in self.LINK_PARAMS]
        key = versions(tensors)
        if key == self._link_params_seen:
            return
        if same_values(tensors, self.__dict__.get("_link_params_values")):
            self._link_params_seen = key
            return
        previous = self.__dict__.get("_link_params_values")
        # only the welded links' poses moved (a kinematic entity's setter, a fixed base's set_pos): the inertial
        # columns and the friction computed last time hold
        inertial_same = (self.__dict__.get("_link_arr") is not None
                         and same_values(tensors[:4], previous[:4] if previous is not None else None))
        self._link_params_values = [t.detach().clone() for t in tensors]
        L = self.n_links
        if not inertial_same:
            found = self._param_rule(dict(zip(self.LINK_PARAMS[:2], tensors[:2])))
            if found is not None:
                raise gs.InvalidStateError(st.entry_message("step", *found))
            mass0, shift, com_shift, ratio = (t.detach().double().cpu().numpy() for t in tensors[:4])
            base = self._link_f_env
            arr = np.array(base)
            if L:
                mass = np.maximum(mass0 + shift, MIN_MASS_FRACTION * mass0)
                low = mass0 + shift < MIN_MASS_FRACTION * mass0
                if low.any() and not self.__dict__.get("_mass_floor_warned"):
                    self._mass_floor_warned = True
                    warnings.warn(
                        f"{self.name}: links_mass_shift takes {int(low.sum())} (environment, link) mass(es) below "
                        f"{MIN_MASS_FRACTION:g} of their inertial mass (lowest {float((mass0 + shift).min()):.4g} "
                        f"kg); the dynamics use {MIN_MASS_FRACTION:g} of the inertial mass for them (a mass <= 0 has "
                        "no motion; Genesis World would integrate it as given). get_links_mass_shift reads the shift "
                        "as set; said once per scene.", stacklevel=2)
                m_model = base[:, :L, LF_MASS]  # (per environment: a heterogeneous entity's variant's)
                scale = np.where(m_model > 0, mass / np.where(m_model > 0, m_model, 1.0), 1.0)
                arr[:, :L, LF_MASS] = mass
                arr[:, :L, LF_COM:LF_COM + 3] = base[:, :L, LF_COM:LF_COM + 3] + com_shift
                arr[:, :L, LF_INERTIA:LF_INERTIA + 9] = base[:, :L, LF_INERTIA:LF_INERTIA + 9] * scale[..., None]
            self._link_arr = arr
            if self.n_geoms:
                self.model["geom_mu"].from_numpy(self._geom_mu(ratio))
        if L:
            arr = self._link_arr
            base_pos, base_quat = (t.detach().double().cpu().numpy() for t in tensors[4:])
            fixed = self.fixed_bases
            arr[:, fixed, LF_POS:LF_POS + 3] = base_pos
            # a quaternion the state accepted (within QUAT_TOL of unit) is normalised; the model's own, rounded to
            # the state's precision, is kept as it is (a trajectory does not depend on the state's round trip)
            norm = np.linalg.norm(base_quat, axis=-1, keepdims=True)
            arr[:, fixed, LF_QUAT:LF_QUAT + 4] = np.where(np.abs(norm - 1) > 1e-6, base_quat / norm, base_quat)
            self.model["link_f"].from_numpy(arr.astype(self._np_float))
        self._link_params_seen = key

    def _geom_mu(self, ratio):
        """The geoms' friction per environment [B, G] as the kernels read it: the model's times the state's ratio;
        -1 where a geom is absent (another variant's, genesis_rigid.variants)."""
        geom_f = self.compiled.arrays["geom_f"]
        mu = np.zeros((self.batch, geom_f.shape[0]))
        mu[:, :self.n_geoms] = geom_f[None, :self.n_geoms, GF_FRICTION] * ratio
        if self._geom_active is not None:
            mu[~self._geom_active] = -1.0
        return np.ascontiguousarray(mu, dtype=self._np_float)

    @property
    def _np_float(self):
        return np.float64 if self.float_dtype == torch.float64 else np.float32

