"""MPM materials (`gs.materials.MPM.Elastic`, ...). E: Young's modulus (Pa), nu: Poisson's ratio, rho: density
(kg/m^3); model-specific parameters below. Lame parameters mu = E / (2 (1 + nu)), lambda = E nu / ((1 + nu)(1 - 2 nu))."""

import math

import attrs

from genesis_core import validators as v
from genesis_core.errors import OptionError
from genesis_core.materials import Material

ELASTIC, ELASTOPLASTIC, LIQUID, SAND, SNOW, NEOHOOKEAN = range(6)
ELASTIC_MODELS = {"corotation": ELASTIC, "neohooken": NEOHOOKEAN}  # Genesis World's names of the elastic models


def _poisson(inst, attr, value):
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not 0 <= value < 0.5:
        raise OptionError(f"{type(inst).__name__}.{attr.name}={value!r} is not accepted: expected a number in [0, 0.5).")


@attrs.define(frozen=True, kw_only=True)
class Base(Material):
    solver = "MPMSolver"
    kind = -1

    E: float = attrs.field(default=3e5, validator=v.positive)
    nu: float = attrs.field(default=0.2, validator=_poisson)
    rho: float = attrs.field(default=1000.0, validator=v.positive)
    # how a morph is filled with particles (genesis_core.particles.sampling): "regular" (the lattice, the default)
    # or "random" (seeded); Genesis World's "pbs" (its particle-based sampler) is accepted and filled as "regular"
    sampler: str = attrs.field(default="regular", validator=v.one_of("regular", "random", "pbs"),
                               converter=lambda x: "regular" if x == "pbs" else x)

    @property
    def mu(self) -> float:
        return self.E / (2 * (1 + self.nu))

    @property
    def lam(self) -> float:
        return self.E * self.nu / ((1 + self.nu) * (1 - 2 * self.nu))

    def kernel_params(self) -> tuple:
        """(kind, x0, x1, x2): the model and its static parameters, read per particle by the kernels (E and nu
        are state: see MPMEntity.set_material_params)."""
        return (self.kind, 0.0, 0.0, 0.0)


@attrs.define(frozen=True, kw_only=True)
class Elastic(Base):
    """Hyperelasticity. model (Genesis World's names): "corotation" (the default), fixed-corotated (Stomakhin et
    al. 2012), Kirchhoff stress tau = 2 mu (F - R) F^T + lambda J (J - 1) I; "neohooken", compressible
    neo-Hookean, tau = mu (F F^T - I) + lambda log(J) I."""

    model: str = attrs.field(default="corotation", validator=v.one_of(*ELASTIC_MODELS))

    @property
    def kind(self) -> int:
        return ELASTIC_MODELS[self.model]

    @property
    def muscle_stiffness(self) -> float:
        """The fibre stress per unit actuation (Pa); 0: not a muscle."""
        return 0.0

    def kernel_params(self):
        # x0: the fibre stiffness in units of E (the kernels multiply it by the entity's E, which is state)
        return (self.kind, self.muscle_stiffness / self.E, 0.0, 0.0)


@attrs.define(frozen=True, kw_only=True)
class Muscle(Elastic):
    """An elastic solid that pulls along a fibre (Genesis World's MPM muscle): its Kirchhoff stress adds
    stiffness * a * (F m) (F m)^T, m the particle's unit fibre direction in the rest shape, a its group's
    actuation (dimensionless; a > 0 contracts the fibre), stiffness = E (Genesis World's choice; it follows
    `set_material_params(E=...)`). n_groups: the muscle groups the particles are assigned to
    (`entity.set_muscle`; all in group 0 by default, the fibres along +Z); `entity.set_actuation` sets each
    group's a. Genesis World's defaults: E = 1e6, model = "neohooken"."""

    E: float = attrs.field(default=1e6, validator=v.positive)
    model: str = attrs.field(default="neohooken", validator=v.one_of(*ELASTIC_MODELS))
    n_groups: int = attrs.field(default=1, validator=v.int_at_least(1))

    @property
    def stiffness(self) -> float:
        return self.E

    @property
    def muscle_stiffness(self) -> float:
        return self.E


@attrs.define(frozen=True, kw_only=True)
class ElastoPlastic(Base):
    """von Mises plasticity on the Hencky strain: the deviatoric strain is projected back to the yield surface
    |dev(eps)| <= yield_stress / (2 mu); elasticity fixed-corotated."""

    kind = ELASTOPLASTIC
    yield_stress: float = attrs.field(default=1e4, validator=v.positive)

    def kernel_params(self):
        return (self.kind, self.yield_stress, 0.0, 0.0)


@attrs.define(frozen=True, kw_only=True)
class Liquid(Base):
    """Weakly compressible liquid: pressure from the volume change, K (J - 1) J with K = E / (3 (1 - 2 nu));
    no shear stress. viscosity: Pa s, a Newtonian shear stress 2 eta sym(grad v)."""

    kind = LIQUID
    E: float = attrs.field(default=1e6, validator=v.positive)
    viscosity: float = attrs.field(default=0.0, validator=v.non_negative)

    def kernel_params(self):
        return (self.kind, self.viscosity, 0.0, 0.0)


@attrs.define(frozen=True, kw_only=True)
class Sand(Base):
    """Drucker-Prager plasticity on the Hencky strain (Klar et al. 2016): cohesionless, friction_angle in degrees;
    alpha = sqrt(2/3) 2 sin(phi) / (3 - sin(phi)). Stress: St. Venant-Kirchhoff on the Hencky strain."""

    kind = SAND
    rho: float = attrs.field(default=1600.0, validator=v.positive)
    friction_angle: float = attrs.field(default=35.0)

    @friction_angle.validator
    def _check_angle(self, attr, value):
        if not isinstance(value, (int, float)) or not 0 < value < 90:
            raise OptionError(f"Sand.friction_angle={value!r} is not accepted: expected degrees in (0, 90).")

    def kernel_params(self):
        s = math.sin(math.radians(self.friction_angle))
        alpha = math.sqrt(2 / 3) * 2 * s / (3 - s)
        return (self.kind, alpha, 0.0, 0.0)


@attrs.define(frozen=True, kw_only=True)
class Snow(Base):
    """Snow (Stomakhin et al. 2013): singular values of F clamped to [1 - theta_c, 1 + theta_s]; the plastic volume
    ratio Jp hardens the Lame parameters by exp(hardening (1 - Jp))."""

    kind = SNOW
    E: float = attrs.field(default=1.4e5, validator=v.positive)
    rho: float = attrs.field(default=400.0, validator=v.positive)
    theta_c: float = attrs.field(default=2.5e-2, validator=v.positive)
    theta_s: float = attrs.field(default=4.5e-3, validator=v.positive)
    hardening: float = attrs.field(default=10.0, validator=v.non_negative)

    def kernel_params(self):
        return (self.kind, self.theta_c, self.theta_s, self.hardening)


class MPM:
    """The namespace `gs.materials.MPM`."""

    Base = Base
    Elastic = Elastic
    Muscle = Muscle
    ElastoPlastic = ElastoPlastic
    Liquid = Liquid
    Sand = Sand
    Snow = Snow
