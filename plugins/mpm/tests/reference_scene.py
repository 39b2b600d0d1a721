"""A fixed MPM scene (five materials, two environments, a free rigid box and a sphere falling in, one set of
particles deactivated): its state after 100 steps is kept in data/reference_100.npz, so that a change meant to
move code and not physics shows that it did not. Run as a script to rewrite the file (only when the physics is
meant to change)."""

import os

import numpy as np

import genesis_core as gs

DATA = os.path.join(os.path.dirname(__file__), "data", "reference_100.npz")
STEPS = 100


def build():
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=2e-3, substeps=8),
                     mpm_options=gs.options.MPMOptions(lower_bound=(-0.3, -0.3, 0.0), upper_bound=(0.3, 0.3, 0.5),
                                                       grid_density=40.0))
    scene.add_entity(gs.morphs.Plane())
    mats = [gs.materials.MPM.Elastic(E=2e4), gs.materials.MPM.ElastoPlastic(E=2e4, yield_stress=500.0),
            gs.materials.MPM.Liquid(E=2e4), gs.materials.MPM.Sand(E=2e4), gs.materials.MPM.Snow(E=2e4)]
    ents = []
    for i, mat in enumerate(mats):
        x = -0.2 + 0.1 * i
        ents.append(scene.add_entity(gs.morphs.Box(pos=(x, 0.0, 0.1), size=(0.06, 0.1, 0.08)), material=mat))
    scene.add_entity(gs.morphs.Box(pos=(-0.15, 0.0, 0.3), size=(0.06, 0.06, 0.06)), material=gs.materials.Rigid(rho=400.0))
    scene.add_entity(gs.morphs.Sphere(pos=(0.1, 0.02, 0.3), radius=0.03), material=gs.materials.Rigid(rho=800.0))
    scene.build(n_envs=2)
    ents[4].deactivate(envs_idx=[1])
    ents[0].set_velocity(np.array([[0.0, 0.0, -0.5], [0.3, 0.0, 0.0]]))
    return scene


def state_after(scene, steps=STEPS):
    for _ in range(steps):
        scene.step()
    return {key: x.detach().cpu().numpy() for key, x in scene.get_state().fields_by_key().items()}


if __name__ == "__main__":
    gs.init(backend=gs.cpu, precision="64", seed=0, logging_level="warning")
    arrays = state_after(build())
    np.savez_compressed(DATA, **arrays)
    print(f"wrote {DATA}: {len(arrays)} arrays, {sum(a.nbytes for a in arrays.values())} bytes")
