"""The MPM entity: the kit's particle API, its material parameters (state, per environment) and, for
`gs.materials.MPM.Muscle`, its muscle groups, fibres and actuation (state, per environment)."""

from genesis_core.particles.entity import ElasticParams, Muscles, ParticleEntity


class MPMEntityState:
    """What `MPMEntity.get_state()` returns (Genesis World's fields): pos, vel `([n_envs,] n_particles, 3)`,
    C, F `([n_envs,] n_particles, 3, 3)`, Jp, actu, active `([n_envs,] n_particles)`."""

    def __init__(self, **fields):
        self.__dict__.update(fields)


class MPMEntity(Muscles, ElasticParams, ParticleEntity):
    """The particle API of genesis_core.particles.ParticleEntity, the material parameters E and nu and, for a
    muscle, `set_muscle` / `set_actuation` over its particles (genesis_core.particles.entity.Muscles)."""

    _muscle_unit_name = "particles"

    @property
    def _muscle_rows(self) -> slice:
        return self._range

    def get_particles_actu(self, envs_idx=None):
        """Genesis World's name of `get_actuation`: each particle's actuation, `([n_envs,] n_particles)`."""
        return self.get_actuation(envs_idx)

    def get_state(self) -> MPMEntityState:
        """Copies of the entity's particle state (in the autograd graph in differentiable mode)."""
        envs = self._envs_idx(None)
        return MPMEntityState(**{name: self.solver.state.get_rows(name, self.solver.frame, envs, (self._range,))
                                 for name in ("pos", "vel", "C", "F", "Jp", "actu", "active")})
