import attrs

from genesis_core import validators as v
from genesis_core.errors import OptionError
from genesis_core.particles.solver import ParticleOptions


@attrs.define(frozen=True, kw_only=True)
class PBDOptions(ParticleOptions):
    """Options of the PBD solver, with Genesis World's names and defaults.

    max_stretch_solver_iterations, max_bending_solver_iterations, max_volume_solver_iterations: Gauss-Seidel
    sweeps per substep over the stretch (edge length), bending (dihedral angle) and volume (tetrahedron)
    constraints. Each constraint accumulates its Lagrange multiplier over the sweeps of a substep (XPBD), so a
    constraint's stiffness is set by its material's compliance, not by these counts: more sweeps only converge
    closer to it (small substeps with few sweeps are the efficient choice).
    max_density_solver_iterations: position-based-fluid density iterations per substep (Jacobi, as published).
    max_viscosity_solver_iterations: XSPH viscosity passes per substep.
    particle_size: the particles' diameter (m): particles closer than the sum of their radii collide (cloth
    self-collision, cloth against elastic bodies, ...); a cloth particle's radius is at least half its mesh's mean
    edge, so that a coarse cloth has no gaps. Liquids and free particles are sampled on a lattice of this spacing;
    a position-based fluid's kernel reaches 2 * particle_size. Particles collide with rigid geoms at a radius of
    particle_size / 2.
    hash_grid_cell_size: the neighbour search's cell (m; None or smaller: twice the largest contact distance and
    at least the fluid kernel's reach, so that a search visits 8 cells of 27 on average). hash_grid_res: accepted for Genesis
    World's scripts and unused (the neighbour search hashes occupied cells: no grid of fixed extent).
    lower_bound, upper_bound: the domain (m); its six faces are walls.
    small_step_dt: the longest PBD step (s), not one of Genesis World's options: XPBD converges best with small
    steps and few iterations (Macklin et al. 2019), so a substep longer than this is split into the fewest equal
    PBD steps no longer than it, and every iteration count n above is spread over them (each step runs
    ceil(n / steps), at least 1 where n > 0). With Genesis's default dt of 10 ms a substep is five steps of 2 ms
    with one stretch sweep each (five sweeps where Genesis runs four); a script that already takes small substeps
    (Genesis's cloth tutorial: 0.4 ms) runs as written. None: one PBD step per substep, the counts as given.
    """

    lower_bound: tuple = attrs.field(default=(-100.0, -100.0, 0.0), converter=v.to_float_tuple, validator=v.vec(3))
    upper_bound: tuple = attrs.field(default=(100.0, 100.0, 100.0), converter=v.to_float_tuple, validator=v.vec(3))
    particle_size: float = attrs.field(default=1e-2, validator=v.positive)
    max_stretch_solver_iterations: int = attrs.field(default=4, validator=v.int_at_least(0))
    max_bending_solver_iterations: int = attrs.field(default=1, validator=v.int_at_least(0))
    max_volume_solver_iterations: int = attrs.field(default=1, validator=v.int_at_least(0))
    max_density_solver_iterations: int = attrs.field(default=1, validator=v.int_at_least(0))
    max_viscosity_solver_iterations: int = attrs.field(default=1, validator=v.int_at_least(0))
    hash_grid_cell_size: float | None = attrs.field(default=None, validator=attrs.validators.optional(v.positive))
    hash_grid_res: tuple | None = attrs.field(default=None)
    small_step_dt: float | None = attrs.field(default=2e-3, validator=attrs.validators.optional(v.positive))

    def __attrs_post_init__(self):
        super().__attrs_post_init__()
        if self.hash_grid_cell_size is not None and self.hash_grid_cell_size < self.particle_size:
            raise OptionError(f"PBDOptions: hash_grid_cell_size={self.hash_grid_cell_size!r} must not be smaller "
                              f"than particle_size={self.particle_size!r} (the collision distance).")
        if any(hi - lo < 4 * self.particle_size for lo, hi in zip(self.lower_bound, self.upper_bound)):
            raise OptionError(f"PBDOptions: the domain {self.lower_bound} - {self.upper_bound} must span at least "
                              f"four particle sizes ({4 * self.particle_size:g} m) along every axis.")

    @property
    def cell_size(self) -> float:
        return self.hash_grid_cell_size or 2.0 * self.particle_size
