"""FEM with SPH: the kit's particle exchange (genesis_core.particles.pair_exchange) on the FEM surface's vertices,
float64."""

import numpy as np
import pytest
import torch

import genesis_core as gs
from genesis_core.testing import check_momentum_exchange

pytest.importorskip("genesis_sph", reason="the SPH plugin (genesis-sph) is not installed")


def test_fem_sph_exchange_conserves_momentum_without_gravity():
    """A soft FEM cube thrown into a block of SPH liquid, gravity off, far from every wall: the total linear
    momentum (lumped vertex masses and particle masses) stays the initial one to 1e-6 while the cube pushes the
    liquid."""
    bounds = dict(lower_bound=(-1, -1, 0), upper_bound=(1, 1, 1))
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=5e-4, substeps=2, gravity=(0, 0, 0)),
                     sph_options=gs.options.SPHOptions(particle_size=0.02, **bounds),
                     fem_options=gs.options.FEMOptions(damping=0.0))
    water = scene.add_entity(gs.morphs.Box(pos=(0.12, 0.0, 0.5), size=(0.12, 0.12, 0.12)),
                             material=gs.materials.SPH.Liquid())
    cube = scene.add_entity(gs.morphs.Box(pos=(-0.02, 0.0, 0.5), size=(0.08, 0.08, 0.08), maxvolume=2e-5),
                            material=gs.materials.FEM.Elastic(E=5e4, nu=0.3, rho=800.0))
    scene.build()
    cube.set_velocity(torch.tensor([2.0, 0.0, 0.3], dtype=torch.float64))
    m_sph, m_fem = scene.sph_solver.p_mass, scene.fem_solver.p_mass
    got = check_momentum_exchange(scene, lambda: (water.get_particles_vel() * m_sph[:, None]).sum(0),
                                  lambda: (cube.get_state().vel.reshape(-1, 3) * m_fem[:, None]).sum(0), 60, rtol=1e-6)
    assert float(got.a[0]) > 0.2 * float(got.total0[0]), "the cube never pushed the liquid"


def test_a_soft_cube_dropped_on_water_stays_out_of_it():
    """A light soft cube dropped onto a pool of SPH liquid 0.1 m deep lands on it: its bottom never comes within
    4 cm of the pool's floor (without the liquid it reaches the floor) and no liquid particle ends inside it."""
    def run(with_water):
        scene = gs.Scene(sim_options=gs.options.SimOptions(dt=1e-3, substeps=4),
                         sph_options=gs.options.SPHOptions(lower_bound=(-0.15, -0.15, 0.0),
                                                           upper_bound=(0.15, 0.15, 0.5), particle_size=0.02),
                         fem_options=gs.options.FEMOptions(damping=0.0))
        water = None
        if with_water:
            water = scene.add_entity(gs.morphs.Box(pos=(0.0, 0.0, 0.05), size=(0.28, 0.28, 0.1)),
                                     material=gs.materials.SPH.Liquid())
        cube = scene.add_entity(gs.morphs.Box(pos=(0.0, 0.0, 0.2), size=(0.08, 0.08, 0.08), maxvolume=2e-5),
                                material=gs.materials.FEM.Elastic(E=5e4, nu=0.3, rho=300.0))
        scene.build()
        lowest = 1.0
        for _ in range(400):
            scene.step()
            lowest = min(lowest, float(cube.get_state().pos.reshape(-1, 3)[:, 2].min()))
        return cube, water, lowest

    _, _, lowest_dry = run(False)
    assert lowest_dry < 0.005  # it reached the floor
    cube, water, lowest = run(True)
    xc = cube.get_state().pos.reshape(-1, 3).numpy()
    xw = water.get_particles_pos().numpy()
    assert np.isfinite(xc).all() and np.isfinite(xw).all()
    assert lowest > 0.04, lowest
    lo, hi = xc.min(0) + 0.01, xc.max(0) - 0.01
    inside = np.all((xw > lo) & (xw < hi), axis=1)
    assert not inside.any(), int(inside.sum())
