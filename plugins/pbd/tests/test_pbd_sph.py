"""PBD with SPH: the kit's particle exchange (genesis_core.particles.pair_exchange), float64."""

import numpy as np
import pytest
import torch

import genesis_core as gs
from genesis_core.testing import check_momentum_exchange

import pbd_meshes

pytest.importorskip("genesis_sph", reason="the SPH plugin (genesis-sph) is not installed")


def test_pbd_sph_exchange_conserves_momentum_without_gravity(tmp_path):
    """A PBD elastic cube thrown into a block of SPH liquid, gravity off, far from every wall: the total linear
    momentum stays the initial one to 1e-6 while the cube pushes the liquid."""
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=1e-3, substeps=2, gravity=(0, 0, 0)),
                     sph_options=gs.options.SPHOptions(lower_bound=(-1, -1, -1), upper_bound=(1, 1, 1),
                                                       particle_size=0.02),
                     pbd_options=gs.options.PBDOptions(lower_bound=(-1, -1, -1), upper_bound=(1, 1, 1),
                                                       particle_size=0.02))
    water = scene.add_entity(gs.morphs.Box(pos=(0.12, 0.0, 0.0), size=(0.12, 0.12, 0.12)),
                             material=gs.materials.SPH.Liquid())
    cube = scene.add_entity(gs.morphs.Box(pos=(-0.02, 0.0, 0.0), size=(0.08, 0.08, 0.08), maxvolume=0.02 ** 3 / 3),
                            material=gs.materials.PBD.Elastic(stretch_compliance=1e-6, volume_compliance=1e-7))
    scene.build()
    cube.set_velocity(torch.tensor([2.0, 0.0, 0.3], dtype=torch.float64))
    m_sph, m_pbd = scene.sph_solver.p_mass, scene.pbd_solver.p_mass
    got = check_momentum_exchange(scene, lambda: (water.get_particles_vel() * m_sph[:, None]).sum(0),
                                  lambda: (cube.get_particles_vel() * m_pbd[:, None]).sum(0), 30, rtol=1e-6)
    assert float(got.a[0]) > 0.2 * float(got.total0[0]), "the cube never pushed the liquid"


def _hammock(tmp_path, with_water):
    """A 0.3 m cloth of 16 x 16 vertices fixed at its four corners at z = 0.3, and (with_water) a 0.1 m block of
    SPH liquid released 0.1 m above it; returns (cloth, water, the cloth's mean sag over the last 0.4 s of 0.5 s)."""
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=2e-3, substeps=4),
                     sph_options=gs.options.SPHOptions(lower_bound=(-0.5, -0.5, 0.0), upper_bound=(0.5, 0.5, 1.0),
                                                       particle_size=0.02),
                     pbd_options=gs.options.PBDOptions(lower_bound=(-0.5, -0.5, 0.0), upper_bound=(0.5, 0.5, 1.0),
                                                       particle_size=0.02))
    n = 16
    cloth = scene.add_entity(gs.morphs.Mesh(file=pbd_meshes.flat(tmp_path / "c.obj", n, 0.3), pos=(0, 0, 0.3)),
                             material=gs.materials.PBD.Cloth(stretch_compliance=3e-4, bending_compliance=1e-3))
    water = None
    if with_water:
        water = scene.add_entity(gs.morphs.Box(pos=(0.0, 0.0, 0.42), size=(0.1, 0.1, 0.1)),
                                 material=gs.materials.SPH.Liquid())
    scene.build()
    cloth.fix_particles([0, n - 1, n * (n - 1), n * n - 1])
    sag = []
    for k in range(250):
        scene.step()
        if k >= 50:
            sag.append(0.3 - float(cloth.get_particles_pos()[:, 2].min()))
    return cloth, water, float(np.mean(sag))


def test_a_cloth_hammock_holds_sph_water(tmp_path):
    """Water poured onto a cloth fixed at its corners stays on it (no liquid particle below the cloth's lowest
    point, every one above the cloth particle nearest to it in the plane), and the cloth, which bounces like a
    trampoline, sags on average (over 0.4 s) further under the water than under its own weight."""
    _, _, sag_dry = _hammock(tmp_path, with_water=False)
    cloth, water, sag_wet = _hammock(tmp_path, with_water=True)
    xc = cloth.get_particles_pos().numpy()
    xw = water.get_particles_pos().numpy()
    assert np.isfinite(xw).all() and np.isfinite(xc).all()
    assert xw[:, 2].min() > xc[:, 2].min(), "liquid fell through the cloth"
    # every liquid particle above the cloth particle nearest to it in the plane
    nearest = np.argmin(((xw[:, None, :2] - xc[None, :, :2]) ** 2).sum(-1), axis=1)
    assert (xw[:, 2] > xc[nearest, 2]).all()
    assert sag_wet > 1.5 * sag_dry, (sag_dry, sag_wet)


def test_pbd_sph_exchange_is_refused_in_differentiable_mode(tmp_path):
    scene = gs.Scene(sim_options=gs.options.SimOptions(requires_grad=True),
                     sph_options=gs.options.SPHOptions(lower_bound=(-1, -1, -1), upper_bound=(1, 1, 1)),
                     pbd_options=gs.options.PBDOptions(lower_bound=(-1, -1, -1), upper_bound=(1, 1, 1)))
    scene.add_entity(gs.morphs.Box(pos=(0.3, 0, 0), size=(0.1, 0.1, 0.1)), material=gs.materials.SPH.Liquid())
    scene.add_entity(gs.morphs.Box(pos=(0, 0, 0), size=(0.1, 0.1, 0.1)), material=gs.materials.PBD.Particle())
    with pytest.raises(gs.GenesisError, match="not differentiable"):
        scene.build()
