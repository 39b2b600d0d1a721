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
    World's option)."""

    solver = "RigidSolver"

    rho: float = attrs.field(default=200.0, validator=v.positive)
    friction: float | None = attrs.field(default=None, validator=attrs.validators.optional(v.non_negative))
    restitution: float = attrs.field(default=0.0, validator=v.unit_interval)
    gravity_compensation: float = attrs.field(default=0.0, validator=v.non_negative)
