import attrs

from genesis_core import validators as v
from genesis_core.errors import OptionError
from genesis_core.particles.solver import ParticleOptions


@attrs.define(frozen=True, kw_only=True)
class FEMOptions(ParticleOptions):
    """Options of the FEM solver, with Genesis World's names and defaults.

    damping: explicit solver: velocities decay by exp(-damping * dt) each substep (1/s), gravity excluded.
    floor_height: a frictionless floor at this height (m) that the vertices cannot pass (None: SimOptions'
    floor_height); a body may start below it (as in Genesis World), and whatever lies below it does not descend.
    use_implicit_solver: backward Euler (Newton's method with a preconditioned conjugate-gradient solve and a
    backtracking line search) instead of symplectic Euler.
    n_newton_iterations, n_pcg_iterations, n_linesearch_iterations: the caps of the three loops (0 line-search
    iterations: full Newton steps). newton_dx_threshold: an environment's Newton loop stops when no vertex moved
    more than this (m) in an iteration. pcg_threshold: the CG solve stops when r.z (the preconditioned squared
    residual) fell below this fraction of its first value. linesearch_c (Armijo's sufficient decrease), linesearch_tau (the step's shrink
    factor). damping_alpha (1/s), damping_beta (s): implicit solver: Rayleigh damping, forces -alpha M v and
    -beta K v. enable_vertex_constraints: accepted for Genesis scripts; vertex constraints always work here.
    lower_bound, upper_bound: the domain (m) that every vertex lies in, below the floor too (its walls stop a body
    that reaches them; Genesis World's FEM has no bounds).
    dt: Genesis World's per-solver step (s): None (the default) runs with SimOptions.dt; a value makes each of
    this solver's substeps advance dt / SimOptions.substeps, whatever the scene's dt (the other solvers, the
    couplings' impulses and scene.t keep theirs).
    """

    lower_bound: tuple = attrs.field(default=(-100.0, -100.0, -100.0), converter=v.to_float_tuple, validator=v.vec(3))
    upper_bound: tuple = attrs.field(default=(100.0, 100.0, 100.0), converter=v.to_float_tuple, validator=v.vec(3))
    damping: float = attrs.field(default=0.0, validator=v.non_negative)
    dt: float | None = attrs.field(default=None, validator=attrs.validators.optional(v.positive))
    floor_height: float | None = attrs.field(default=None, validator=attrs.validators.optional(v.finite))
    use_implicit_solver: bool = attrs.field(default=False, validator=v.is_bool)
    n_newton_iterations: int = attrs.field(default=1, validator=v.int_at_least(1))
    n_pcg_iterations: int = attrs.field(default=500, validator=v.int_at_least(1))
    n_linesearch_iterations: int = attrs.field(default=0, validator=v.int_at_least(0))
    newton_dx_threshold: float = attrs.field(default=1e-6, validator=v.positive)
    pcg_threshold: float = attrs.field(default=1e-6, validator=v.positive)
    linesearch_c: float = attrs.field(default=1e-4, validator=v.positive)
    linesearch_tau: float = attrs.field(default=0.5, validator=v.positive)
    damping_alpha: float = attrs.field(default=0.5, validator=v.non_negative)
    damping_beta: float = attrs.field(default=5e-4, validator=v.non_negative)
    enable_vertex_constraints: bool = attrs.field(default=False, validator=v.is_bool)

    def __attrs_post_init__(self):
        super().__attrs_post_init__()
        if not self.linesearch_tau < 1:
            raise OptionError(f"FEMOptions.linesearch_tau={self.linesearch_tau!r} is not accepted: expected a "
                                "number in (0, 1).")
        if not self.linesearch_c < 1:
            raise OptionError(f"FEMOptions.linesearch_c={self.linesearch_c!r} is not accepted: expected a number "
                                "in (0, 1).")
