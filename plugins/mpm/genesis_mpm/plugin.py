"""Hook implementations of the MPM solver plugin (see genesis_core.plugins.hookspecs)."""

import genesis_core as gs

from .hybrid import Hybrid
from .materials import MPM
from .options import MPMOptions
from .solver import MPMSolver


@gs.hookimpl
def register_solvers(register):
    register(MPMSolver)


@gs.hookimpl
def register_options(register):
    register(MPMOptions)


@gs.hookimpl
def register_materials(register):
    register("MPM", MPM)
    register("Hybrid", Hybrid)


@gs.hookimpl
def register_couplings(register):
    from genesis_core.coupler import ANY_COLLIDER

    from .coupling import ColliderMPMCoupling

    register(ANY_COLLIDER, "MPMSolver", ColliderMPMCoupling)


@gs.hookimpl
def register_test_scenes(register):
    register("mpm", _test_scene)


def _test_scene(n_envs):
    """A muscle cube (actuated, differently in every environment, its fibres tilted) and a sand block on a coarse
    grid, thrown differently in every environment."""
    import torch

    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=2e-3, substeps=2),
                     mpm_options=gs.options.MPMOptions(lower_bound=(0, 0, 0), upper_bound=(0.5, 0.5, 0.5),
                                                       grid_density=32))
    cube = scene.add_entity(gs.morphs.Box(pos=(0.15, 0.25, 0.2), size=(0.08, 0.08, 0.08)),
                            material=gs.materials.MPM.Muscle(E=2e4, model="corotation", n_groups=2))
    scene.add_entity(gs.morphs.Box(pos=(0.35, 0.25, 0.15), size=(0.06, 0.06, 0.1)),
                     material=gs.materials.MPM.Sand())
    scene.build(n_envs=n_envs)
    batch = max(n_envs, 1)
    vel = torch.stack([torch.linspace(-0.5, 0.5, batch), torch.zeros(batch), torch.linspace(0.0, 1.0, batch)], 1)
    cube.set_velocity(vel if n_envs else vel[0])
    cube.set_muscle(muscle_group=torch.arange(cube.n_particles) % 2, muscle_direction=(0.6, 0.0, 0.8))
    actu = torch.stack([torch.linspace(0.0, 0.3, batch), torch.linspace(0.2, 0.1, batch)], 1)
    cube.set_actuation(actu if n_envs else actu[0])

    def drive(scene, i_step):
        pass

    return scene, drive


@gs.hookimpl
def register_demo_parts(register):
    register("mpm", _demo_part)


def _demo_part():
    """The MPM part of `genesis-core demo`: an elastic block dropped inside a 1 m domain (onto the rigid plane
    when the rigid plugin is installed, onto the domain's floor otherwise)."""
    return {
        "options": {"mpm_options": MPMOptions(lower_bound=(-0.5, -0.5, 0.0), upper_bound=(0.5, 0.5, 1.0),
                                              grid_density=24)},
        "entities": [(gs.morphs.Box(pos=(0.0, 0.0, 0.5), size=(0.2, 0.2, 0.2)), MPM.Elastic(E=5e4))],
    }
