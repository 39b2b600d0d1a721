"""The MPM entity: the kit's particle API, and its material parameters (state, per environment)."""

from genesis_core.particles.entity import ElasticParams, ParticleEntity


class MPMEntity(ElasticParams, ParticleEntity):
    """The particle API of genesis_core.particles.ParticleEntity, and the material parameters E and nu."""
