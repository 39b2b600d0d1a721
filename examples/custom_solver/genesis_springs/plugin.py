"""Hook implementations: what this package contributes to genesis-core."""

import genesis_core as gs

from .materials import SpringChain
from .solver import SpringChainSolver


@gs.hookimpl
def register_solvers(register):
    register(SpringChainSolver)


@gs.hookimpl
def register_materials(register):
    register("SpringChain", SpringChain)


@gs.hookimpl
def register_test_scenes(register):
    register("springs", _test_scene)


@gs.hookimpl
def register_demo_parts(register):
    register("springs", _demo_part)


def _demo_part():
    """The spring chains of `genesis-core demo`: one hanging from its anchor, one free."""
    return {"entities": [
        (gs.morphs.Cylinder(pos=(0.0, 0.0, 1.5), height=1.0, radius=0.01, euler=(0.0, 60.0, 0.0)),
         SpringChain(n_nodes=12, stiffness=2000.0, damping=0.2)),
        (gs.morphs.Capsule(pos=(1.0, 0.0, 2.0), height=0.5, radius=0.01, euler=(30.0, 45.0, 0.0)),
         SpringChain(n_nodes=6, anchored=False, stiffness=800.0)),
    ]}


def _test_scene(n_envs):
    """Two chains (one anchored, one free) whose anchor moves differently in every environment."""
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=1e-2, substeps=4))
    hanging = scene.add_entity(gs.morphs.Cylinder(pos=(0, 0, 2), height=1.0, radius=0.01),
                               material=SpringChain(n_nodes=5, stiffness=400.0, damping=0.5))
    scene.add_entity(gs.morphs.Capsule(pos=(1, 0, 2), height=0.5, radius=0.01, euler=(0, 90, 0)),
                     material=SpringChain(n_nodes=3, anchored=False, stiffness=200.0))
    scene.build(n_envs=n_envs)

    def drive(scene, i_step):
        import torch

        batch = max(n_envs, 1)
        phase = torch.arange(batch, dtype=torch.float64) * 0.7 + 0.05 * i_step
        anchor = torch.stack([0.1 * torch.sin(phase), 0.1 * torch.cos(phase), torch.full_like(phase, 2.5)], dim=-1)
        hanging.set_anchor(anchor if n_envs else anchor[0])

    return scene, drive
