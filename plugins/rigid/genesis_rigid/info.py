"""Read-only views of the rigid solver's model parameters under the names of Genesis World's `links_info` and
`dofs_info` structures (`scene.sim.rigid_solver.links_info.inertial_mass.to_numpy()`), for scripts that read
them. The values come from the solver's state (the per-environment parameter fields) and model arrays; writing
goes through the entity setters (set_links_inertial_mass, set_dofs_damping, ...), which keep checkpoints whole.

Layout as Genesis World's: `[n, ...]` for a solver built without the option's batch_*_info (the first
environment's values), `[n, n_envs, ...]` with it.
"""

from __future__ import annotations

import numpy as np
import torch

from .layout import DF_RANGE_HI, DF_RANGE_LO, DI_LIMITED, LF_COM, LF_INERTIA


class InfoField:
    """One field: `to_numpy()` and `to_torch()` give a copy."""

    def __init__(self, read):
        self._read = read

    def to_torch(self, device=None) -> torch.Tensor:
        out = self._read().detach().clone()
        return out if device is None else out.to(device)

    def to_numpy(self) -> np.ndarray:
        return self._read().detach().cpu().numpy().copy()

    def __repr__(self):
        return f"InfoField({self.to_numpy()!r})"


class InfoView:
    """Attributes are InfoFields; an unknown name raises AttributeError listing the known ones."""

    def __init__(self, what, fields):
        self._what, self._fields = what, fields

    def __getattr__(self, name):
        fields = self.__dict__.get("_fields", {})
        if name in fields:
            return InfoField(fields[name])
        raise AttributeError(f"{self.__dict__.get('_what', 'info')} has no field {name!r}; the fields read here: "
                             f"{', '.join(sorted(fields))}")

    def __dir__(self):
        return sorted(self._fields)


def _layout(x, batched):
    """[B, n, ...] per environment -> [n, B, ...] (batched) or the first environment's [n, ...]."""
    return x.transpose(0, 1) if batched else x[0]


def links_info(solver) -> InfoView:
    st, batched = solver.state, bool(solver.options.batch_links_info)
    L = solver.n_links
    base = solver._link_f_env[:, :L]  # (per environment: a heterogeneous entity's variant's)

    def com():
        com0 = torch.as_tensor(base[..., LF_COM:LF_COM + 3], dtype=solver.float_dtype, device=solver.device)
        return _layout(com0, batched)  # (the model's; links_com_shift is apart)

    def inertia():
        i0 = torch.as_tensor(base[..., LF_INERTIA:LF_INERTIA + 9].reshape(-1, L, 3, 3), dtype=solver.float_dtype,
                             device=solver.device)
        return _layout(i0, batched)

    return InfoView("links_info", {
        "inertial_mass": lambda: _layout(st.at("links_inertial_mass", solver.frame), batched),
        "inertial_pos": com,
        "inertial_i": inertia,
    })


def dofs_info(solver) -> InfoView:
    st, batched = solver.state, bool(solver.options.batch_dofs_info)
    f = solver.frame
    dof_f, dof_i = solver.compiled.arrays["dof_f"][:solver.n_dofs], solver.compiled.arrays["dof_i"][:solver.n_dofs]

    def pair(lo, hi):
        return lambda: _layout(torch.stack([st.at(lo, f), st.at(hi, f)], -1), batched)

    def limit():  # (-inf, inf) for a dof without limits, as Genesis World's
        rng = np.where(dof_i[:, DI_LIMITED, None] != 0, dof_f[:, [DF_RANGE_LO, DF_RANGE_HI]], [-np.inf, np.inf])
        rng = torch.as_tensor(rng, dtype=solver.float_dtype, device=solver.device)
        return _layout(rng.expand((solver.batch,) + tuple(rng.shape)), batched)

    fields = {name: (lambda field=field: _layout(st.at(field, f), batched)) for name, field in (
        ("damping", "dofs_damping"), ("armature", "dofs_armature"), ("stiffness", "dofs_stiffness"),
        ("kp", "dofs_kp"), ("kv", "dofs_kv"))}
    fields["force_range"] = pair("dofs_force_lo", "dofs_force_hi")
    fields["limit"] = limit
    return InfoView("dofs_info", fields)
