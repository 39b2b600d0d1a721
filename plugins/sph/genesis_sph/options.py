import attrs

from genesis_core import validators as v
from genesis_core.errors import OptionError
from genesis_core.particles.solver import ParticleOptions

PRESSURE_SOLVERS = ("WCSPH", "DFSPH")


@attrs.define(frozen=True, kw_only=True)
class SPHOptions(ParticleOptions):
    """Options of the SPH solver, with Genesis World's names and defaults.

    particle_size: the particle spacing (m; the lattice liquids are sampled on); the kernel's support radius is
    2 * particle_size. lower_bound, upper_bound: the domain (m); its six faces are walls that hold the liquid
    (boundaries after the volume of the solid inside each particle's support, like every collider's geoms).
    pressure_solver: "WCSPH" (Tait's equation of state, the material's stiffness and exponent) or "DFSPH"
    (Bender & Koschier: a divergence-free solve and a constant-density solve each substep, warm-started).
    hash_grid_cell_size: the neighbour search's cell (m; None: the support radius; not smaller than it).
    max_divergence_error: DFSPH's tolerance on the mean rate of compression, percent of the rest density per
    substep. max_density_error_percent: DFSPH's tolerance on the mean predicted compression, percent of the rest
    density. max_divergence_solver_iterations, max_density_solver_iterations: the caps of the two solves. Each
    environment stops iterating when its own error is below the tolerance.
    boundary_viscosity: the walls' and geoms' no-slip viscosity (m^2/s, the coefficient of Monaghan's viscosity
    against the boundary's layers; 0, the default: the boundaries slip, as Genesis World's do). Its friction on a
    moving geom goes to the geom's body.
    """

    lower_bound: tuple = attrs.field(default=(-100.0, -100.0, 0.0), converter=v.to_float_tuple, validator=v.vec(3))
    upper_bound: tuple = attrs.field(default=(100.0, 100.0, 100.0), converter=v.to_float_tuple, validator=v.vec(3))
    particle_size: float = attrs.field(default=0.02, validator=v.positive)
    pressure_solver: str = attrs.field(default="WCSPH", validator=v.one_of(*PRESSURE_SOLVERS))
    hash_grid_cell_size: float | None = attrs.field(default=None, validator=attrs.validators.optional(v.positive))
    max_divergence_error: float = attrs.field(default=0.1, validator=v.positive)
    max_density_error_percent: float = attrs.field(default=0.05, validator=v.positive)
    max_divergence_solver_iterations: int = attrs.field(default=100, validator=v.int_at_least(1))
    max_density_solver_iterations: int = attrs.field(default=100, validator=v.int_at_least(1))
    boundary_viscosity: float = attrs.field(default=0.0, validator=v.non_negative)

    def __attrs_post_init__(self):
        super().__attrs_post_init__()
        if self.hash_grid_cell_size is not None and self.hash_grid_cell_size < self.support_radius:
            raise OptionError(f"SPHOptions: hash_grid_cell_size={self.hash_grid_cell_size!r} must not be smaller "
                              f"than the support radius 2 * particle_size = {self.support_radius:g} m.")
        if any(hi - lo < 2 * self.support_radius for lo, hi in zip(self.lower_bound, self.upper_bound)):
            raise OptionError(f"SPHOptions: the domain {self.lower_bound} - {self.upper_bound} must span at least "
                              f"two support radii ({2 * self.support_radius:g} m) along every axis.")

    @property
    def support_radius(self) -> float:
        return 2.0 * self.particle_size
