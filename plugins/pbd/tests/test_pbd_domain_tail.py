"""The PBD domain below z = 0 (Genesis World's PBDOptions bound it at z = 0 by default: its lower face is a
floor there) and the entities' mass per environment, as Genesis World's PBD entities give it (float64)."""

import numpy as np
import pytest
import torch

import genesis_core as gs

import pbd_meshes


def test_the_default_domain_is_genesis_worlds_and_bounds_below_it_are_taken(tmp_path):
    """PBDOptions() keeps Genesis World's domain, (-100, -100, 0) - (100, 100, 100) m, whose lower face is a floor
    at z = 0: a body below it is refused before build, naming the domain and the options to widen (Genesis World
    clamps a cloth or an elastic body there onto the floor in its first substep, and refuses liquids). With
    lower_bound below zero the same bodies are taken and fall freely below z = 0, the liquid's neighbour search
    hashing cells of negative coordinates."""
    o = gs.options.PBDOptions()
    assert o.lower_bound == (-100.0, -100.0, 0.0) and o.upper_bound == (100.0, 100.0, 100.0)
    cloth_file = pbd_meshes.flat(tmp_path / "c.obj", 4, 0.2)
    scene = gs.Scene(pbd_options=o)
    for morph, material in ((gs.morphs.Mesh(file=cloth_file, pos=(0, 0, -0.5)), gs.materials.PBD.Cloth()),
                            (gs.morphs.Box(pos=(0, 0, -0.5), size=(0.04,) * 3), gs.materials.PBD.Liquid())):
        with pytest.raises(gs.OptionError, match=r"PBD domain .*PBDOptions"):
            scene.add_entity(morph, material=material)

    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=2e-3, substeps=2),
                     pbd_options=gs.options.PBDOptions(lower_bound=(-1, -1, -1), upper_bound=(1, 1, 1)))
    cloth = scene.add_entity(gs.morphs.Mesh(file=cloth_file, pos=(0.3, 0, -0.5)), material=gs.materials.PBD.Cloth())
    water = scene.add_entity(gs.morphs.Box(pos=(-0.3, 0, -0.5), size=(0.04,) * 3), material=gs.materials.PBD.Liquid())
    scene.build()
    z0 = (cloth.get_pos()[2].item(), water.get_pos()[2].item())
    for _ in range(10):
        scene.step()
    assert torch.isfinite(water.get_particles_pos()).all() and torch.isfinite(cloth.get_particles_pos()).all()
    fall = 0.5 * 9.81 * 0.02 ** 2  # 0.02 s of free fall: 2 mm
    assert cloth.get_pos()[2].item() == pytest.approx(z0[0] - fall, rel=0.1)
    assert water.get_pos()[2].item() == pytest.approx(z0[1] - fall, rel=0.1)


@pytest.mark.parametrize("n_envs", [0, 2])
def test_get_mass_is_per_environment(tmp_path, n_envs):
    """get_mass gives each entity's mass per environment, `([n_envs,])` (every particle, active or not), as Genesis
    World's PBD entities do, and for the environments envs_idx: a 0.5 m x 0.5 m cloth of 2 kg/m^2, a 1 dm^3
    elastic box of 500 kg/m^3, and liquid particles of rho particle_size^3 each."""
    scene = gs.Scene(pbd_options=gs.options.PBDOptions(lower_bound=(-1, -1, 0), upper_bound=(1, 1, 1)))
    cloth = scene.add_entity(gs.morphs.Mesh(file=pbd_meshes.flat(tmp_path / "c.obj", 5, 0.5), pos=(0, 0, 0.5)),
                             material=gs.materials.PBD.Cloth(rho=2.0))
    body = scene.add_entity(gs.morphs.Box(pos=(0, 0, 0.2), size=(0.1, 0.1, 0.1), maxvolume=1e-4),
                            material=gs.materials.PBD.Elastic(rho=500.0))
    water = scene.add_entity(gs.morphs.Sphere(pos=(0.5, 0.5, 0.5), radius=0.05), material=gs.materials.PBD.Liquid())
    scene.build(n_envs=n_envs)
    water.deactivate()  # inactive particles still count
    shape = (n_envs,) if n_envs else ()
    for entity, mass in ((cloth, 2.0 * 0.25), (body, 500.0 * 1e-3), (water, 1000.0 * 0.01 ** 3 * water.n_particles)):
        m = entity.get_mass()
        assert torch.is_tensor(m) and tuple(m.shape) == shape
        np.testing.assert_allclose(m.numpy(), mass, rtol=1e-9)
    if n_envs:
        assert tuple(cloth.get_mass(envs_idx=[1]).shape) == (1,)
    else:
        with pytest.raises(gs.GenesisError, match="envs_idx"):
            cloth.get_mass(envs_idx=[0])
