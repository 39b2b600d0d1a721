import attrs

from genesis_core import validators as v
from genesis_core.particles.solver import ParticleOptions


@attrs.define(frozen=True, kw_only=True)
class MPMOptions(ParticleOptions):
    """Options of the MPM solver.

    lower_bound, upper_bound: the simulation domain (m): a body may start anywhere inside it; its walls, whose
    planes are the bounds (the grid reaches three cells beyond them), hold the particles in, and its floor is the
    lower z wall. grid_density: grid cells per metre (dx = 1 / grid_density). particle_size: spacing of the lattice
    particles are sampled on (m; default dx / 2: 8 particles per cell). boundary: what the walls do to the grid
    velocity: "sticky" (zero, also on the wall plane, so that what rests on the wall does not slide along it),
    "slip" (zero normal component), "separate" (zero only the component into the wall);
    wall_friction: Coulomb coefficient of the slip and separate walls (the tangential speed drops by up to
    wall_friction times the normal speed the wall removes).
    partitions: particle partitions per environment scattered by separate threads into private grids and summed in
    a fixed order (deterministic and parallel; None: as many as keep two threads busy; at most 8 in differentiable
    mode).
    dt: Genesis World's per-solver step (s): None (the default) runs with SimOptions.dt; a value makes each of
    this solver's substeps advance dt / SimOptions.substeps, whatever the scene's dt (the other solvers, the
    couplings' impulses and scene.t keep theirs).
    gravity: the MPM particles' own gravity (m/s^2, world), as Genesis World's; None (the default): SimOptions'.
    `scene.set_gravity` later sets every solver's, this one's included.
    enable_CPIC: Genesis World's compatible particle-in-cell transfer (Hu et al. 2018) for thin rigid bodies; it
    is not built here. True is accepted with a warning that says so (the grid contact with the geoms within half
    a cell, docs/mpm.md, is used as with False: a body thinner than a cell may let material through).
    """

    grid_density: float = attrs.field(default=64.0, validator=v.positive)
    dt: float | None = attrs.field(default=None, validator=attrs.validators.optional(v.positive))
    boundary: str = attrs.field(default="separate", validator=v.one_of("sticky", "slip", "separate"))
    wall_friction: float = attrs.field(default=0.0, validator=v.non_negative)
    partitions: int | None = attrs.field(default=None, validator=attrs.validators.optional(v.int_at_least(1)))
    gravity: tuple | None = attrs.field(default=None, converter=attrs.converters.optional(v.to_float_tuple),
                                        validator=attrs.validators.optional(v.vec(3)))
    enable_CPIC: bool = attrs.field(default=False, validator=v.is_bool)

    def __attrs_post_init__(self):
        from genesis_core.errors import OptionError

        super().__attrs_post_init__()
        if self.enable_CPIC:
            import warnings

            warnings.warn("MPMOptions(enable_CPIC=True): CPIC is not built in genesis-mpm; the grid contact with "
                          "the rigid geoms (within half a cell) is used instead, so a body thinner than a cell may "
                          "let material through.", stacklevel=3)
        if any(hi - lo < 8 / self.grid_density for lo, hi in zip(self.lower_bound, self.upper_bound)):
            raise OptionError(f"MPMOptions: the domain {self.lower_bound} - {self.upper_bound} must span at least 8 "
                              f"grid cells (dx = {1 / self.grid_density:g} m) along every axis.")

    @property
    def dx(self) -> float:
        return 1.0 / self.grid_density

    @property
    def grid_shape(self) -> tuple:
        import math

        return tuple(math.ceil((hi - lo) * self.grid_density) + 1 for lo, hi in zip(self.lower_bound, self.upper_bound))
