"""SPH materials (`gs.materials.SPH.Liquid`)."""

import attrs

from genesis_core import validators as v
from genesis_core.materials import Material


@attrs.define(frozen=True, kw_only=True)
class Liquid(Material):
    """A liquid of rest density rho (kg/m^3). Each particle weighs rho * particle_size^3, the volume of its lattice
    cell, so a liquid sampled on the lattice starts at its rest density (Genesis World weighs them at 0.8 of it).

    stiffness (Pa), exponent: Tait's equation of state of WCSPH, p = stiffness ((rho_i / rho)^exponent - 1),
    clamped at 0 (a liquid does not pull); DFSPH enforces the rest density instead and ignores both.
    mu: dynamic viscosity (Pa s; the kinematic viscosity is mu / rho), after Monaghan's SPH viscosity.
    gamma: cohesion coefficient of the surface tension after Akinci et al. 2013 (0: none).
    sampler: "regular" (the lattice; the default: SPH wants it) or "random" (seeded).
    """

    solver = "SPHSolver"

    rho: float = attrs.field(default=1000.0, validator=v.positive)
    stiffness: float = attrs.field(default=50000.0, validator=v.positive)
    exponent: float = attrs.field(default=7.0, validator=v.positive)
    mu: float = attrs.field(default=0.005, validator=v.non_negative)
    gamma: float = attrs.field(default=0.01, validator=v.non_negative)
    sampler: str = attrs.field(default="regular", validator=v.one_of("regular", "random"))

    def kernel_params(self) -> tuple:
        """(rho, stiffness, exponent, mu, gamma): what the kernels read per particle."""
        return (self.rho, self.stiffness, self.exponent, self.mu, self.gamma)


class SPH:
    """The namespace `gs.materials.SPH`."""

    Liquid = Liquid
