import attrs

from genesis_core import validators as v
from genesis_core.materials import Material


@attrs.define(frozen=True, kw_only=True)
class Rigid(Material):
    """Rigid bodies. rho: density, kg/m^3, for primitives and for geoms of a model without inertial data.
    friction: Coulomb coefficient for every geom of the entity (None: the model's own, 1.0 for primitives).
    restitution: normal velocity ratio after/before an impact (0: plastic; contacts closing slower than 5 cm/s
    never bounce). A contact takes the larger friction and restitution of its two geoms. gravity_compensation: the
    share of each link's weight a force at its centre of mass holds up (0: none, 1: the entity floats; Genesis
    World's option).

    Coupling with the particle solvers (MPM, SPH, PBD, FEM), Genesis World's names: coup_friction: the Coulomb
    coefficient of this entity's geoms against particles and grid nodes (None: each geom's own friction, as above;
    Genesis World's default is 0.1). coup_softness, coup_restitution, sdf_cell_size, sdf_min_res, sdf_max_res:
    accepted and validated, unused (contacts with particles are exact signed distances to the geoms here, with the
    particle solver's restitution). needs_coup: whether the entity's geoms are colliders for the particle solvers
    (False: particles pass through them, as Genesis World's; the rigid part of a gs.materials.Hybrid is made so)."""

    solver = "RigidSolver"

    rho: float = attrs.field(default=200.0, validator=v.positive)
    friction: float | None = attrs.field(default=None, validator=attrs.validators.optional(v.non_negative))
    restitution: float = attrs.field(default=0.0, validator=v.unit_interval)
    gravity_compensation: float = attrs.field(default=0.0, validator=v.non_negative)
    coup_friction: float | None = attrs.field(default=None, validator=attrs.validators.optional(v.non_negative))
    coup_softness: float = attrs.field(default=0.002, validator=v.non_negative)
    coup_restitution: float = attrs.field(default=0.0, validator=v.unit_interval)
    sdf_cell_size: float = attrs.field(default=0.005, validator=v.positive)
    sdf_min_res: int = attrs.field(default=32, validator=v.positive)
    sdf_max_res: int = attrs.field(default=128, validator=v.positive)
    needs_coup: bool = attrs.field(default=True, validator=v.is_bool)


@attrs.define(frozen=True, kw_only=True)
class Kinematic(Material):
    """Kinematic bodies (Genesis World's): an entity moved only by setting its configuration (set_qpos,
    set_dofs_position, set_pos, set_quat), with no dynamics, contacts or coupling: a reference motion drawn beside
    a simulated robot, a marker. The cameras and the viewer draw it; ray-cast sensors see it only with
    use_visual_raycasting=True (genesis_rigid.kinematic)."""

    solver = "RigidSolver"

    use_visual_raycasting: bool = attrs.field(default=False, validator=v.is_bool)
