"""PBD materials (`gs.materials.PBD.Cloth`, `.Elastic`, `.Liquid`, `.Particle`), with Genesis World's names and
defaults except the relaxations (see below)."""

import attrs

from genesis_core import validators as v
from genesis_core.materials import Material

# particle kinds, as the kernels read them
PARTICLE, CLOTH, ELASTIC, LIQUID = 0, 1, 2, 3


def _relaxation(inst, attr, value):
    if not v._is_real(value) or not 0.0 < value < 2.0:
        v._fail(inst, attr, value, "a number in (0, 2)")


def _sampler(inst, attr, value):
    if value not in ("regular", "random", "pbs"):
        v._fail(inst, attr, value, "'regular', 'random' or 'pbs' (the lattice, as 'regular')")


@attrs.define(frozen=True, kw_only=True)
class _Base(Material):
    solver = "PBDSolver"
    kind = PARTICLE

    def kernel_params(self) -> tuple:
        """(static friction, kinetic friction, air resistance, density relaxation, viscosity relaxation)."""
        return (getattr(self, "static_friction", 0.0), getattr(self, "kinetic_friction", 0.0),
                getattr(self, "air_resistance", 0.0), getattr(self, "density_relaxation", 0.0),
                getattr(self, "viscosity_relaxation", 0.0))


@attrs.define(frozen=True, kw_only=True)
class Cloth(_Base):
    """A cloth: the triangles of a surface mesh (`gs.morphs.Mesh`; its vertices are the particles). A mesh file
    of line segments only (OBJ `l` elements) is a rope: its segments are stretch constraints.

    rho: kg per m^2 of cloth (kg per m of rope); each particle weighs a third of its triangles' mass (half of its
    segments'). static_friction, kinetic_friction: Coulomb coefficients of its particle contacts (with other
    particles; against rigid geoms the geom's friction applies). stretch_compliance (m/N): the inverse stiffness
    of each edge's length; 0 is inextensible. bending_compliance (1/(N m)): the inverse stiffness of the
    dihedral angle across each interior edge, whose rest value is the mesh's own (a pre-folded cloth keeps its
    fold). stretch_relaxation, bending_relaxation: the relaxation factor of each Gauss-Seidel update, in
    (0, 2); the multipliers accumulate, so a converged solve does not depend on them, but a substep's few sweeps
    do (below 1 a sweep moves less). Defaults: 1 for stretch (Genesis World's 0.3 damps its averaged Jacobi
    updates, which this solver does not use); 0.5 for bending, where full steps of the stiff default dihedral
    constraint overshoot (a cloth held at two corners tore its edges apart at 1.0, holds within 6% at 0.5). A
    script's own values are honoured. air_resistance (kg/m): quadratic drag, force -air_resistance |v| v on each particle.
    """

    kind = CLOTH
    rho: float = attrs.field(default=4.0, validator=v.positive)
    static_friction: float = attrs.field(default=0.15, validator=v.non_negative)
    kinetic_friction: float = attrs.field(default=0.15, validator=v.non_negative)
    stretch_compliance: float = attrs.field(default=1e-7, validator=v.non_negative)
    bending_compliance: float = attrs.field(default=1e-5, validator=v.non_negative)
    stretch_relaxation: float = attrs.field(default=1.0, validator=_relaxation)
    bending_relaxation: float = attrs.field(default=0.5, validator=_relaxation)
    air_resistance: float = attrs.field(default=1e-3, validator=v.non_negative)


@attrs.define(frozen=True, kw_only=True)
class Elastic(_Base):
    """An elastic body: the tetrahedra of the morph (the core's tet meshing; its options on the morph), with a
    stretch constraint on every tet edge and a volume constraint on every tet.

    rho: kg/m^3 (each particle weighs a quarter of its tets' mass). stretch_compliance (m/N), volume_compliance
    (m^3/N... per unit of volume change: the inverse stiffness of each tet's volume). bending_compliance: accepted
    for Genesis World's scripts and unused (a tet mesh resists bending through its volumes). Relaxations as
    Cloth's.
    """

    kind = ELASTIC
    rho: float = attrs.field(default=1000.0, validator=v.positive)
    static_friction: float = attrs.field(default=0.15, validator=v.non_negative)
    kinetic_friction: float = attrs.field(default=0.15, validator=v.non_negative)
    stretch_compliance: float = attrs.field(default=0.0, validator=v.non_negative)
    bending_compliance: float = attrs.field(default=0.0, validator=v.non_negative)
    volume_compliance: float = attrs.field(default=0.0, validator=v.non_negative)
    stretch_relaxation: float = attrs.field(default=1.0, validator=_relaxation)
    bending_relaxation: float = attrs.field(default=1.0, validator=_relaxation)
    volume_relaxation: float = attrs.field(default=1.0, validator=_relaxation)


@attrs.define(frozen=True, kw_only=True)
class Liquid(_Base):
    """A position-based fluid (Macklin & Mueller 2013) of rest density rho (kg/m^3), sampled on the lattice of
    particle_size (each particle weighs rho * particle_size^3, so it starts at its rest density).

    density_relaxation: the constraint-force mixing of the density solve (epsilon in lambda = -C / (|grad C|^2 +
    epsilon), here relative to a lattice particle's own |grad C|^2: larger is softer and steadier).
    viscosity_relaxation: XSPH's c, the share of the neighbours' mean velocity difference a particle takes per
    pass. sampler: "regular" (the lattice) or "random"; "pbs" (Genesis World's default) means the lattice here.
    """

    kind = LIQUID
    rho: float = attrs.field(default=1000.0, validator=v.positive)
    sampler: str = attrs.field(default="regular", validator=_sampler)
    density_relaxation: float = attrs.field(default=0.2, validator=v.positive)
    viscosity_relaxation: float = attrs.field(default=0.01, validator=v.non_negative)


@attrs.define(frozen=True, kw_only=True)
class Particle(_Base):
    """Free particles (rho kg/m^3, sampled like Liquid): gravity, the walls and rigid geoms act on them, nothing
    between them."""

    kind = PARTICLE
    rho: float = attrs.field(default=1000.0, validator=v.positive)
    sampler: str = attrs.field(default="regular", validator=_sampler)


class PBD:
    """The namespace `gs.materials.PBD`."""

    Cloth = Cloth
    Elastic = Elastic
    Liquid = Liquid
    Particle = Particle
