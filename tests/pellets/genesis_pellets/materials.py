import attrs

from genesis_core import validators as v
from genesis_core.materials import Material


@attrs.define(frozen=True, kw_only=True)
class Pellet(Material):
    """Pellets sampled inside the morph, one per lattice cell of the solver's particle_size. rho: kg/m^3, each
    pellet weighing rho * particle_size^3. sampler: "regular" (the lattice) or "random" (seeded)."""

    solver = "PelletSolver"

    rho: float = attrs.field(default=1000.0, validator=v.positive)
    sampler: str = attrs.field(default="regular", validator=v.one_of("regular", "random"))
