"""The MPM entity API. Particle arrays are `([n_envs,] n_particles, 3)`; `envs_idx` selects environments."""

import torch

import genesis_core as gs


class MPMEntity(gs.Entity):
    def _setup(self, start, end):
        self.particle_start, self.particle_end = start, end

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
        value = torch.as_tensor(pos, dtype=self.solver.float_dtype)
        self.solver.check_inside(value, "set_pos")
        self.solver.state.set_rows("pos", self.solver.frame, value, self._envs_idx(envs_idx), (self._range,),
                                   what="set_pos")

    def set_velocity(self, vel, envs_idx=None):
        """Particle velocities: `([n_envs,] n_particles, 3)` or one velocity `([n_envs,] 3)` for all of them."""
        value = torch.as_tensor(vel, dtype=self.solver.float_dtype)
        if value.shape[-1:] == (3,) and (value.ndim == 1 or (self.scene.n_envs and value.ndim == 2)):
            value = value.unsqueeze(-2)  # one velocity per environment, for every particle
        self.solver.state.set_rows("vel", self.solver.frame, value, self._envs_idx(envs_idx), (self._range,),
                                   what="set_velocity")

    def activate(self, envs_idx=None):
        self.solver.state.set_rows("active", self.solver.frame, 1, self._envs_idx(envs_idx), (self._range,))

    def deactivate(self, envs_idx=None):
        """Inactive particles keep their state and take no part in the simulation until activated."""
        self.solver.state.set_rows("active", self.solver.frame, 0, self._envs_idx(envs_idx), (self._range,))
