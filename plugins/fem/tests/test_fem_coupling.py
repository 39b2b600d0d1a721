"""FEM coupled with other solvers: rigid bodies (the kit's contact), MPM (the kit's grid exchange)."""

import pytest
import torch

import genesis_core as gs


def test_fem_mpm_coupling_conserves_momentum_without_gravity():
    """A soft FEM cube thrown into an elastic MPM block, gravity off, far from every wall: the total linear
    momentum of both stays the initial one to 1e-6 (float64) while they push each other apart."""
    pytest.importorskip("genesis_mpm", reason="the MPM plugin (genesis-mpm) is not installed")
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=1e-3, substeps=4, gravity=(0, 0, 0)),
                     mpm_options=gs.options.MPMOptions(lower_bound=(0, 0, 0), upper_bound=(0.6, 0.3, 0.3),
                                                       grid_density=40),
                     fem_options=gs.options.FEMOptions(floor_height=-1.0))
    block = scene.add_entity(gs.morphs.Box(pos=(0.35, 0.15, 0.15), size=(0.1, 0.1, 0.1)),
                             material=gs.materials.MPM.Elastic(E=5e4))
    cube = scene.add_entity(gs.morphs.Box(pos=(0.2, 0.15, 0.15), size=(0.08, 0.08, 0.08), maxvolume=0.01 ** 3 / 3),
                            material=gs.materials.FEM.Elastic(E=5e4, nu=0.3, rho=1000.0))
    scene.build()
    cube.set_velocity(torch.tensor([1.5, 0.0, 0.2], dtype=torch.float64))
    m_mpm = scene.mpm_solver.p_mass.double()
    m_fem = scene.fem_solver.p_mass.double()

    def momentum():
        return ((block.get_particles_vel() * m_mpm[:, None]).sum(0), (cube.get_particles_vel() * m_fem[:, None]).sum(0))

    p_mpm0, p_fem0 = momentum()
    total0 = p_mpm0 + p_fem0
    for _ in range(40):
        scene.step()
        p_mpm, p_fem = momentum()
        assert torch.allclose(p_mpm + p_fem, total0, rtol=0, atol=1e-6 * float(total0.norm()))
    assert float(p_mpm[0]) > 0.2 * float(total0[0]), "the cube never pushed the block"
    # the cube did not pass through: its vertices stay behind the block's front face
    assert float(cube.get_particles_pos()[:, 0].max()) < float(block.get_particles_pos()[:, 0].max())


def test_fem_cube_rests_on_a_rigid_box_and_the_box_feels_it():
    """A soft cube dropped on a free rigid box standing on the ground comes to rest on the box's top face (its
    centre of mass at rest, no vertex inside the box), and the box stays standing where it was."""
    pytest.importorskip("genesis_rigid", reason="the rigid plugin (genesis-rigid) is not installed")
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=2e-3, substeps=10),
                     fem_options=gs.options.FEMOptions(damping=20.0))
    scene.add_entity(gs.morphs.Plane())
    box = scene.add_entity(gs.morphs.Box(pos=(0.0, 0.0, 0.05), size=(0.3, 0.3, 0.1)),
                           material=gs.materials.Rigid(rho=200.0))
    cube = scene.add_entity(gs.morphs.Box(pos=(0.0, 0.0, 0.16), size=(0.08, 0.08, 0.08), maxvolume=0.01 ** 3 / 3),
                            material=gs.materials.FEM.Elastic(E=3e4, nu=0.3, rho=500.0))
    scene.build()
    for _ in range(300):
        scene.step()
    p = cube.get_particles_pos()
    assert float(p[:, 2].min()) == pytest.approx(0.1, abs=1e-3)
    com_vel = (cube.get_particles_vel() * scene.fem_solver.p_mass.double()[:, None]).sum(0) / cube.get_mass()
    assert float(com_vel.norm()) < 0.01
    assert abs(float(box.get_pos()[2]) - 0.05) < 2e-3  # the box still stands where it was
