import attrs

from genesis_core import validators as v
from genesis_core.options import Options


# Genesis World's integrators (gs.integrator.*): its implicit ones are this solver's "euler" (damping and PD gains
# implicit)
_INTEGRATORS = {"Euler": "euler", "implicitfast": "euler", "approximate_implicitfast": "euler", "RK4": "rk4"}


@attrs.define(frozen=True, kw_only=True)
class RigidOptions(Options):
    """Options of the rigid solver.

    integrator: "euler" (semi-implicit Euler; joint damping and PD gains implicit, springs explicit, as MuJoCo's) or
    "rk4" (classic Runge-Kutta on the smooth dynamics, all forces explicit, four times the dynamics per substep;
    contacts and limits act once per substep at its start).
    iterations: projected Gauss-Seidel sweeps per substep, at most; tolerance: the sweeps stop early once a sweep
    changes no impulse by more than this fraction of the largest impulse, or no dof's velocity by more than this
    fraction of the largest velocity (nearly dependent rows, as two contacts of one link, leave the impulses
    drifting where the velocities have settled); None (default): 1e-5 in float32, 1e-9 in float64 (rounding moves
    float32 values by about 1e-7 of themselves a sweep); both for the velocity pass and for the position pass.
    baumgarte: fraction of a penetration or limit violation corrected per substep, by the position pass (split
    impulse: the correction moves positions and adds no momentum). contact_slop: penetration (m) left
    uncorrected, which keeps resting contacts steady; the correction starts once a contact is 10% deeper than
    that, then brings every contact back toward it.
    max_correction_velocity: the fastest a penetration or limit violation is undone (m/s or rad/s).
    max_contacts: the contact pool's entries per environment (a full pool keeps the deepest contacts); None
    (default): sized from the model, 16 per moving body, at least 64. enable_collision,
    enable_joint_limit, enable_self_collision, enable_adjacent_collision: switches (adjacent: parent-child links).
    enable_neutral_collision: False (the default, as in Genesis World): geom pairs of one kinematic tree that
    already overlap in the neutral configuration (qpos0), as a hand inside its wrist's hull, never collide (a
    warning names them); True keeps them.

    gravity: the rigid bodies' own gravity (m/s^2, world), as Genesis World's; None (the default): SimOptions'.
    `scene.set_gravity` later sets every solver's, this one's included. The IMUs on rigid links read it.

    Genesis World's names, accepted where they mean something here: dt (the solver steps with the scene: it must
    equal SimOptions' dt, or be None); max_collision_pairs (geom pairs in contact at
    once, as in Genesis World: the contact pool holds 5 contacts for each when max_contacts is None);
    constraint_solver (None, the default, or gs.constraint_solver.Newton: projected Gauss-Seidel;
    gs.constraint_solver.CG: its velocity pass accelerated by nonsmooth nonlinear conjugate gradients, which
    follows a converged solve more closely where rows are nearly dependent, not with requires_grad; see
    docs/rigid.md, "Constraints"); batch_dofs_info, batch_links_info, batch_joints_info (the dof and link
    parameters are per environment whatever they say: the setters take envs_idx); disable_constraint (True: no
    contact, no joint limit and no equality constraint acts, as in Genesis World, where it drops every constraint
    row: it sets enable_collision and enable_joint_limit to False, loads the files' equalities inactive and
    refuses welds added while running); max_dynamic_constraints (an int >= 0, 8 by default as in Genesis
    World: the equality slots kept for welds added while running, genesis_rigid.equality).

    Genesis World's choices of algorithm, accepted (validated as there) with no effect, since this solver has one
    way of doing each: box_box_detection (two boxes always meet through the dedicated box-box test: the
    separating axis of least overlap among 15, then the face manifold or the edge pair; False, Genesis World's
    default, asks for its general convex test instead, and True is what runs); use_gjk_collision (None or a bool:
    convex pairs are met by analytic tests, support mapping and clipping, not by GJK or MPR); use_contact_island
    (each environment's constraints are solved as one system); noslip_iterations (an int >= 0; 0, the default,
    is what runs) and noslip_tolerance (> 0): Genesis World's no-slip pass removes the creep that its soft
    constraints let through, and the friction rows here are solved as hard constraints, with no such creep;
    enable_mujoco_compatibility (the dynamics follow MuJoCo's equations whatever it says; Genesis World uses it
    for its own collision tolerances and default density).
    constraint_timeconst (s, > 0; 0.01 by default) is MuJoCo's time constant of its soft constraints, how fast a
    penetration or a violated limit is pulled back; here contacts and limits are hard constraints whose
    violation the position pass removes, a fraction `baumgarte` per substep, so that it decays with a time
    constant of about substep_dt / baumgarte. It is accepted with no effect; the nearest setting is
    baumgarte = substep_dt / constraint_timeconst (at most 1).
    use_hibernation (False by default), hibernation_thresh_vel (> 0; 1e-3) and hibernation_thresh_acc (> 0; 1e-2)
    let Genesis World's resting bodies sleep, a saving of time that leaves them where they lie; here every body
    is stepped every step (a resting one stays at rest by its contacts), so they are accepted with no effect.
    Genesis World's options that mean nothing here (GENESIS_ONLY) raise an OptionError naming what to use
    instead.
    """

    integrator: str = attrs.field(default="euler", converter=lambda x: _INTEGRATORS.get(x, x),
                                  validator=v.one_of("euler", "rk4"))
    iterations: int = attrs.field(default=100, validator=v.int_at_least(1))
    tolerance: float | None = attrs.field(default=None, validator=attrs.validators.optional(v.non_negative))
    baumgarte: float = attrs.field(default=0.2, validator=v.unit_interval)
    contact_slop: float = attrs.field(default=1e-4, validator=v.non_negative)
    max_correction_velocity: float = attrs.field(default=1.0, validator=v.positive)
    regularization: float = attrs.field(default=1e-9, validator=v.non_negative)
    max_contacts: int | None = attrs.field(default=None, validator=attrs.validators.optional(v.int_at_least(1)))
    enable_collision: bool = attrs.field(default=True, validator=v.is_bool)
    enable_joint_limit: bool = attrs.field(default=True, validator=v.is_bool)
    enable_self_collision: bool = attrs.field(default=True, validator=v.is_bool)
    enable_adjacent_collision: bool = attrs.field(default=False, validator=v.is_bool)
    enable_neutral_collision: bool = attrs.field(default=False, validator=v.is_bool)
    dt: float | None = attrs.field(default=None, validator=attrs.validators.optional(v.positive))
    gravity: tuple | None = attrs.field(default=None, converter=attrs.converters.optional(v.to_float_tuple),
                                        validator=attrs.validators.optional(v.vec(3)))
    max_collision_pairs: int | None = attrs.field(default=None,
                                                  validator=attrs.validators.optional(v.int_at_least(1)))
    constraint_solver: str | None = attrs.field(default=None,
                                              validator=attrs.validators.optional(v.one_of("CG", "Newton")))
    batch_dofs_info: bool = attrs.field(default=False, validator=v.is_bool)
    batch_links_info: bool = attrs.field(default=False, validator=v.is_bool)
    batch_joints_info: bool = attrs.field(default=False, validator=v.is_bool)
    disable_constraint: bool = attrs.field(default=False, validator=v.is_bool)
    box_box_detection: bool = attrs.field(default=True, validator=v.is_bool)
    use_gjk_collision: bool | None = attrs.field(default=None, validator=attrs.validators.optional(v.is_bool))
    use_contact_island: bool = attrs.field(default=False, validator=v.is_bool)
    noslip_iterations: int = attrs.field(default=0, validator=v.int_at_least(0))
    noslip_tolerance: float = attrs.field(default=1e-6, validator=v.positive)
    enable_mujoco_compatibility: bool = attrs.field(default=False, validator=v.is_bool)
    max_dynamic_constraints: int = attrs.field(default=8, validator=v.int_at_least(0))
    constraint_timeconst: float = attrs.field(default=0.01, validator=v.positive)
    use_hibernation: bool = attrs.field(default=False, validator=v.is_bool)
    hibernation_thresh_vel: float = attrs.field(default=1e-3, validator=v.positive)
    hibernation_thresh_acc: float = attrs.field(default=1e-2, validator=v.positive)

    def as_dict(self) -> dict:
        """The option values a checkpoint must match: all but the Genesis World options accepted without effect."""
        return {k: x for k, x in super().as_dict().items() if k not in WITHOUT_EFFECT}


# Genesis World's options accepted without effect here (see the docstring)
WITHOUT_EFFECT = ("box_box_detection", "use_gjk_collision", "use_contact_island", "noslip_iterations",
                  "noslip_tolerance", "enable_mujoco_compatibility", "constraint_timeconst", "use_hibernation",
                  "hibernation_thresh_vel", "hibernation_thresh_acc")


# Genesis World's RigidOptions fields without a counterpart here, and what to use instead
GENESIS_ONLY = {
    "ls_iterations": "the constraints are solved by projected Gauss-Seidel, without a line search: set iterations",
    "ls_tolerance": "the constraints are solved by projected Gauss-Seidel, without a line search: set tolerance",
    "enable_multi_contact": "pairs always keep several contact points (boxes on a plane keep four)",
    "contact_resolve_time": "penetrations are undone by the position pass: set baumgarte and "
                            "max_correction_velocity",
    "sparse_solve": "the mass matrix is always factorised along the kinematic tree (sparse)",
    "IK_max_targets": "inverse kinematics takes any number of targets",
}

_attrs_init = RigidOptions.__init__


def _init(self, **kwargs):
    for name in kwargs:
        if name in GENESIS_ONLY:
            from genesis_core.errors import OptionError

            raise OptionError(f"RigidOptions({name}=...) is a Genesis World option with no counterpart here: "
                              f"{GENESIS_ONLY[name]}.")
    if kwargs.get("disable_constraint") is True:  # no constraint row at all: no contact, no joint limit
        kwargs.update(enable_collision=False, enable_joint_limit=False)
    _attrs_init(self, **kwargs)


_init.__doc__ = _attrs_init.__doc__
RigidOptions.__init__ = _init
