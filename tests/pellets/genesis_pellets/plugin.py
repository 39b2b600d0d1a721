"""Hook implementations: what the pellets contribute to genesis-core."""

import genesis_core as gs
from genesis_core.coupler import ANY_COLLIDER
from genesis_core.particles.coupling import ParticleColliderCoupling

from .materials import Pellet
from .options import PelletOptions
from .solver import PelletSolver


@gs.hookimpl
def register_solvers(register):
    register(PelletSolver)


@gs.hookimpl
def register_options(register):
    register(PelletOptions)


@gs.hookimpl
def register_materials(register):
    register("Pellet", Pellet)


@gs.hookimpl
def register_couplings(register):
    register(ANY_COLLIDER, "PelletSolver", ParticleColliderCoupling)
