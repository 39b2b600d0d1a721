"""Hook implementations of the FEM solver plugin (see genesis_core.plugins.hookspecs)."""

import genesis_core as gs

from .materials import FEM
from .options import FEMOptions
from .solver import FEMSolver


@gs.hookimpl
def register_solvers(register):
    register(FEMSolver)


@gs.hookimpl
def register_options(register):
    register(FEMOptions)


@gs.hookimpl
def register_materials(register):
    register("FEM", FEM)


@gs.hookimpl
def register_couplings(register):
    from genesis_core.coupler import ANY_COLLIDER
    from genesis_core.particles.coupling import ParticleColliderCoupling

    from genesis_core.particles.grid_exchange import MPMGridCoupling
    from genesis_core.particles.pair_exchange import ParticlePairCoupling

    from .coupling import RigidFEMCoupling

    register(ANY_COLLIDER, "FEMSolver", ParticleColliderCoupling)
    register("RigidSolver", "FEMSolver", RigidFEMCoupling)  # contacts, and the links vertices follow
    register("MPMSolver", "FEMSolver", MPMGridCoupling)  # FEMSolver.exchange_with_mpm
    register("SPHSolver", "FEMSolver", ParticlePairCoupling)  # both solvers' exchange_view


@gs.hookimpl
def register_test_scenes(register):
    register("fem", _test_scene)
    register("fem_implicit", _test_scene_implicit)


def _scene(n_envs, implicit):
    """A soft cube and a stiffer sphere thrown differently in every environment onto the floor; one vertex of the
    cube held softly, one hard."""
    import torch

    opts = gs.options.FEMOptions(use_implicit_solver=implicit, n_newton_iterations=2, n_pcg_iterations=40,
                                 n_linesearch_iterations=2 if implicit else 0, damping=0.0 if implicit else 1.0)
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=2e-3 if implicit else 5e-4, substeps=2),
                     fem_options=opts)
    cube = scene.add_entity(gs.morphs.Box(pos=(0.0, 0.0, 0.08), size=(0.06, 0.06, 0.06), maxvolume=2e-5),
                            material=gs.materials.FEM.Elastic(E=2e4, nu=0.3, model="stable_neohookean"))
    ball = scene.add_entity(gs.morphs.Sphere(pos=(0.1, 0.0, 0.06), radius=0.03, maxvolume=2e-5),
                            material=gs.materials.FEM.Muscle(E=5e4, nu=0.25))
    scene.build(n_envs=n_envs)
    batch = max(n_envs, 1)
    vel = torch.stack([torch.linspace(-0.5, 0.5, batch), torch.zeros(batch), torch.linspace(0.0, -1.0, batch)], 1)
    cube.set_velocity(vel if n_envs else vel[0])
    cube.set_vertex_constraints([0], is_soft_constraint=True, stiffness=50.0)
    cube.set_vertex_constraints([1])
    ball.set_actuation(0.05)

    def drive(scene, i_step):
        pass

    return scene, drive


def _test_scene(n_envs):
    return _scene(n_envs, False)


def _test_scene_implicit(n_envs):
    return _scene(n_envs, True)


@gs.hookimpl
def register_demo_parts(register):
    register("fem", _demo_part)


def _demo_part():
    """The FEM part of `genesis-core demo`: a soft cube dropped onto the ground (the rigid plane when the rigid
    plugin is installed, the floor otherwise), explicit, coarse (750 tets): a few seconds of the demo's run."""
    from .materials import Elastic

    return {
        "options": {"fem_options": FEMOptions(damping=2.0)},
        "entities": [(gs.morphs.Box(pos=(0.4, 0.0, 0.3), size=(0.2, 0.2, 0.2), maxvolume=0.04 ** 3 / 3),
                      Elastic(E=2e4, nu=0.3, rho=500.0, model="stable_neohookean"))],
    }
