import attrs

from genesis_core import validators as v
from genesis_core.particles.solver import ParticleOptions


@attrs.define(frozen=True, kw_only=True)
class PelletOptions(ParticleOptions):
    """The kit's domain (lower_bound, upper_bound, particle_size, m) and the pellets' contact with colliders:
    radius (m; None: half the particle_size), restitution (0: plastic, 1: elastic)."""

    radius: float | None = attrs.field(default=None, validator=attrs.validators.optional(v.non_negative))
    restitution: float = attrs.field(default=0.5, validator=v.unit_interval)
