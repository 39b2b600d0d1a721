"""Hook implementations of the SPH solver plugin (see genesis_core.plugins.hookspecs)."""

import genesis_core as gs

from .materials import SPH
from .options import SPHOptions
from .solver import SPHSolver


@gs.hookimpl
def register_solvers(register):
    register(SPHSolver)


@gs.hookimpl
def register_options(register):
    register(SPHOptions)


@gs.hookimpl
def register_materials(register):
    register("SPH", SPH)


@gs.hookimpl
def register_couplings(register):
    from genesis_core.coupler import ANY_COLLIDER

    from .coupling import MPMSPHCoupling, SPHBoundaryCoupling

    register(ANY_COLLIDER, "SPHSolver", SPHBoundaryCoupling)
    register("MPMSolver", "SPHSolver", MPMSPHCoupling)


@gs.hookimpl
def register_test_scenes(register):
    register("sph", _test_scene)
    register("sph_dfsph", _test_scene_dfsph)


def _scene(n_envs, pressure_solver):
    """A small block of water thrown differently in every environment, in a 0.3 m box."""
    import torch

    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=2e-3, substeps=2),
                     sph_options=gs.options.SPHOptions(lower_bound=(0, 0, 0), upper_bound=(0.3, 0.3, 0.3),
                                                       particle_size=0.03, pressure_solver=pressure_solver))
    block = scene.add_entity(gs.morphs.Box(pos=(0.12, 0.15, 0.12), size=(0.12, 0.12, 0.18)),
                             material=gs.materials.SPH.Liquid())
    scene.build(n_envs=n_envs)
    batch = max(n_envs, 1)
    vel = torch.stack([torch.linspace(-0.5, 0.5, batch), torch.zeros(batch), torch.linspace(0.0, 0.5, batch)], 1)
    block.set_velocity(vel if n_envs else vel[0])

    def drive(scene, i_step):
        pass

    return scene, drive


def _test_scene(n_envs):
    return _scene(n_envs, "WCSPH")


def _test_scene_dfsph(n_envs):
    return _scene(n_envs, "DFSPH")


@gs.hookimpl
def register_demo_parts(register):
    register("sph", _demo_part)


def _demo_part():
    """The SPH part of `genesis-core demo`: a block of water poured into a 1 m domain (onto the rigid plane when
    the rigid plugin is installed, onto the domain's floor otherwise)."""
    from .materials import Liquid

    return {
        "options": {"sph_options": SPHOptions(lower_bound=(-0.5, -0.5, 0.0), upper_bound=(0.5, 0.5, 1.0),
                                              particle_size=0.04, pressure_solver="DFSPH")},
        "entities": [(gs.morphs.Box(pos=(-0.3, 0.0, 0.3), size=(0.3, 0.3, 0.4)), Liquid())],
    }
