"""FEM materials (`gs.materials.FEM.Elastic`, `gs.materials.FEM.Muscle`), with Genesis World's names."""

import attrs

from genesis_core import validators as v
from genesis_core.materials import Material

MODELS = ("linear", "linear_corotated", "stable_neohookean")


def _poisson(inst, attr, value):
    if not v._is_real(value) or not 0 <= value < 0.5:
        v._fail(inst, attr, value, "a Poisson's ratio in [0, 0.5)")


def _model(inst, attr, value):
    if value == "stable_neohooken":  # Genesis World's former spelling
        return
    v.one_of(*MODELS)(inst, attr, value)


@attrs.define(frozen=True, kw_only=True)
class Elastic(Material):
    """A hyperelastic solid meshed into linear tetrahedra.

    E: Young's modulus (Pa); nu: Poisson's ratio, in [0, 0.5); rho: density (kg/m^3).
    model: the strain energy per unit rest volume, of the Lame parameters mu = E / (2 (1 + nu)) and
    lam = E nu / ((1 + nu) (1 - 2 nu)):
    - "linear": mu |eps|^2 + lam / 2 tr(eps)^2, eps = (F + F^T) / 2 - I (small strains; not rotation-invariant);
    - "linear_corotated": mu |F - R|^2 + lam / 2 tr(R^T F - I)^2, R the rotation of F's polar decomposition;
    - "stable_neohookean": Smith, de Goes & Kim 2018, mu' / 2 (I_C - 3) + lam' / 2 (J - a)^2 - mu' / 2 log(I_C + 1)
      with mu' = 4 mu / 3, lam' = lam + 5 mu / 6, a = 1 + 3 mu' / (4 lam'): the same small-strain response as the
      other two, rest-stable, and defined for inverted elements.
    friction_mu, hydroelastic_modulus, contact_resistance: Genesis World's contact settings, accepted; contacts
    here use the collider's friction.
    """

    solver = "FEMSolver"

    E: float = attrs.field(default=1e6, validator=v.positive)
    nu: float = attrs.field(default=0.2, validator=_poisson)
    rho: float = attrs.field(default=1000.0, validator=v.positive)
    model: str = attrs.field(default="linear", validator=_model)
    friction_mu: float = attrs.field(default=0.1, validator=v.non_negative)
    hydroelastic_modulus: float = attrs.field(default=1e7, validator=v.positive)
    contact_resistance: float | None = attrs.field(default=None, validator=attrs.validators.optional(v.positive))

    def __attrs_post_init__(self):
        if self.model == "stable_neohooken":
            object.__setattr__(self, "model", "stable_neohookean")

    @property
    def muscle_stiffness(self) -> float:
        return 0.0


@attrs.define(frozen=True, kw_only=True)
class Muscle(Elastic):
    """An elastic solid that contracts along a fibre direction: the energy adds stiffness * a * |F m| per unit rest
    volume (m the element's unit fibre direction, a its group's actuation, set by `entity.set_actuation`), a
    stress stiffness * a / |F m| F m m^T that shortens the fibre for a > 0. stiffness is E (Genesis World's
    choice). n_groups: the muscle groups an entity's elements are assigned to (`entity.set_muscle`; all in group
    0 by default, the fibres along +Z)."""

    n_groups: int = attrs.field(default=1, validator=v.int_at_least(1))

    @property
    def muscle_stiffness(self) -> float:
        return self.E


class FEM:
    """The namespace `gs.materials.FEM`."""

    Elastic = Elastic
    Muscle = Muscle
