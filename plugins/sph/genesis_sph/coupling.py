"""SPH against every collider: the collider's geoms are boundaries of the liquid (see `kernels`), two-way.

The coupler constructs one `SPHBoundaryCoupling` per collider; it hands the collider to the SPH solver, which
reads the collider's view in its own post-coupling part (when the view of the substep is final, whatever the
solvers' order), adds each geom's solid fraction to the densities, pushes the particles with their own pressure
and hands the opposite impulse to the geom's body (`ColliderView.body_impulse`, which the collider applies in its
next substep). The kit's particle contact (`ParticleColliderCoupling`) then puts back on the surface any particle
whose centre entered a geom, momentum-consistently.
"""

from genesis_core.coupler import Collider
from genesis_core.errors import GenesisError
from genesis_core.particles.grid_exchange import MPMGridCoupling


class SPHBoundaryCoupling:
    def __init__(self, collider, sph, sim_options):
        if not isinstance(collider, Collider):
            raise GenesisError(f"{collider.name} does not expose collider_view(f); it cannot bound {sph.name}'s "
                               "liquid.")
        self.collider, self.sph = collider, sph
        sph.add_boundary(collider, sim_options)

    def couple(self, f: int):
        """Nothing at coupling time: the SPH solver's post-coupling part integrates the boundary."""

    def couple_grad(self, f: int):
        """Nothing: the SPH solver's post-coupling reverse carries the boundary's gradients."""


class MPMSPHCoupling(MPMGridCoupling):
    """MPM against SPH, momentum-conserving: at coupling time the liquid's particles meet the MPM grid after its
    update (`MPMSolver.grid_view`): an approaching particle and the grid mass around it exchange the momentum of
    a perfectly inelastic normal collision (see `genesis_core.particles.grid_exchange`); the particle's share
    enters the SPH step of the same substep, the grid's the MPM grid-to-particle."""
