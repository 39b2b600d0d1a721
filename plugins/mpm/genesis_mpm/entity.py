"""The MPM entity API. Particle arrays are `([n_envs,] n_particles, 3)`; `envs_idx` selects environments."""

import torch

import genesis_core as gs
from genesis_core.state import to_tensor


class MPMEntity(gs.Entity):
    def _setup(self, start, end, index):
        self.particle_start, self.particle_end = start, end
        self._material_index = index  # this entity's column of the solver's E and nu

    @property
    def n_particles(self) -> int:
        return self.particle_end - self.particle_start

    @property
    def _range(self):
        return slice(self.particle_start, self.particle_end)

    def _read(self, name, envs_idx):
        return self.solver.state.get_rows(name, self.solver.frame, self._envs_idx(envs_idx), (self._range,))

    def get_particles_pos(self, envs_idx=None):
        return self._read("pos", envs_idx)

    def get_particles_vel(self, envs_idx=None):
        return self._read("vel", envs_idx)

    def get_mass(self) -> float:
        return float(self.solver.p_mass[self._range].sum())

    def get_pos(self, envs_idx=None):
        """Centre of mass of the entity's active particles, `([n_envs,] 3)`."""
        pos = self.get_particles_pos(envs_idx)
        w = self.solver.p_mass[self._range] * self._read("active", envs_idx)
        return (pos * w.unsqueeze(-1)).sum(-2) / w.sum(-1, keepdim=True).clamp(min=1e-30)

    def set_pos(self, pos, envs_idx=None):
        """Particle positions, `([n_envs,] n_particles, 3)` m; every particle must lie inside the domain."""
        self.solver.state.set_rows("pos", self.solver.frame, pos, self._envs_idx(envs_idx), (self._range,),
                                   what="set_pos")

    def set_velocity(self, vel, envs_idx=None):
        """Particle velocities: `([n_envs,] n_particles, 3)` or one velocity `([n_envs,] 3)` for all of them."""
        value = to_tensor(vel, self.solver.float_dtype, gs.device, "set_velocity")
        if value.shape[-1:] == (3,) and (value.ndim == 1 or (self.scene.n_envs and value.ndim == 2)):
            value = value.unsqueeze(-2)  # one velocity per environment, for every particle
        self.solver.state.set_rows("vel", self.solver.frame, value, self._envs_idx(envs_idx), (self._range,),
                                   what="set_velocity")

    def activate(self, envs_idx=None):
        self.solver.state.set_rows("active", self.solver.frame, 1, self._envs_idx(envs_idx), (self._range,))

    def deactivate(self, envs_idx=None):
        """Inactive particles keep their state and take no part in the simulation until activated."""
        self.solver.state.set_rows("active", self.solver.frame, 0, self._envs_idx(envs_idx), (self._range,))

    def get_material_params(self, envs_idx=None):
        """(E, nu): Young's modulus (Pa) and Poisson's ratio, each `([n_envs,])`."""
        envs = self._envs_idx(envs_idx)
        st, item = self.solver.state, (self._material_index,)
        return st.get_rows("E", self.solver.frame, envs, item), st.get_rows("nu", self.solver.frame, envs, item)

    def set_material_params(self, E=None, nu=None, envs_idx=None):
        """Young's modulus E (Pa, > 0) and Poisson's ratio nu (in [0, 0.5)): a number, or one per environment
        `([n_envs,])`. They hold from the next substep on; in differentiable mode a tensor that requires grad
        receives dL/dE, dL/dnu. The material's other parameters derived from them (the ElastoPlastic yield
        strain, the Liquid bulk modulus) follow."""
        envs = self._envs_idx(envs_idx)
        checks = (("E", E, lambda x: x > 0, "positive"), ("nu", nu, lambda x: (x >= 0) & (x < 0.5), "in [0, 0.5)"))
        values = {}
        for name, value, ok, what in checks:
            if value is None:
                continue
            if isinstance(value, bool) or not (torch.is_tensor(value) or isinstance(value, (int, float, list, tuple))):
                raise gs.OptionError(f"set_material_params: {name} must be a number or a tensor, got "
                                     f"{type(value).__name__}.")
            x = to_tensor(value, self.solver.float_dtype, gs.device, f"set_material_params({name}=...)")
            if x.dtype == torch.bool or x.is_complex():
                raise gs.OptionError(f"set_material_params: {name} must be real numbers.")
            x = x.to(self.solver.float_dtype)
            want = (self.scene.n_envs if envs is None else len(envs),) if self.scene.n_envs else ()
            try:
                fits = torch.broadcast_shapes(x.shape, want) == want
            except RuntimeError:
                fits = False
            if not fits:
                raise gs.OptionError(f"set_material_params: {name} must be a number or shaped {want}, got "
                                     f"{tuple(x.shape)}.")
            plain = x.detach()
            if not torch.isfinite(plain).all() or not bool(ok(plain).all()):
                raise gs.OptionError(f"set_material_params: {name}={plain.tolist()} is not accepted: expected "
                                     f"{what}.")
            values[name] = x
        for name, x in values.items():
            self.solver.state.set_rows(name, self.solver.frame, x, envs, (self._material_index,),
                                       what=f"set_material_params({name}=...)")
