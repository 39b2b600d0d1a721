"""The MPM grid's contact with colliders at the grid's resolution (nodes within half a cell of a geom are in
contact), its bodies' shared inertia (no energy made against light bodies), both modes running the same contact;
and the entity's mass per environment (float64)."""

import numpy as np
import pytest
import torch

import genesis_core as gs
from genesis_core.coupler import GEOM_PLANE, ColliderView
from genesis_core.testing import check_momentum_exchange

F64 = torch.float64


def _rigid_installed():
    from genesis_core.plugins import registry

    return "RigidSolver" in registry().solvers


needs_rigid = pytest.mark.skipif(not _rigid_installed(), reason="the rigid solver plugin (genesis-rigid) is needed")


@needs_rigid
def test_sand_on_a_plane_lying_on_a_node_layer_stays_above_it():
    """A 6 cm sand cube dropped from 1 cm onto a plane at z = 0, the domain's bottom at -5 cm and 100 cells per
    metre, so that the plane lies on a layer of grid nodes (d = 0 there; the MPM floor, SimOptions.floor_height,
    lies there too). It settles on the plane: its lowest particle never goes below it, and rests less than half a
    cell above it. Measured: 2.8 mm above (nodes inside the plane alone in contact: 10.1 mm below it)."""
    dx = 0.01
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=1e-3, substeps=1),
                     mpm_options=gs.options.MPMOptions(lower_bound=(-0.12, -0.12, -0.05), upper_bound=(0.12, 0.12, 0.1),
                                                       grid_density=1 / dx))
    scene.add_entity(gs.morphs.Plane())
    sand = scene.add_entity(gs.morphs.Box(pos=(0, 0, 0.04), size=(0.06, 0.06, 0.06)), material=gs.materials.MPM.Sand())
    scene.build()
    assert abs(scene.mpm_solver.origin[2] + 8 * dx) < 1e-12  # a node layer at z = 0
    lowest = []
    for _ in range(200):
        scene.step()
        lowest.append(float(sand.get_particles_pos()[:, 2].min()))
    print(f"lowest particle: {min(lowest) * 1e3:.2f} mm over the run, {lowest[-1] * 1e3:.2f} mm at the end")
    assert min(lowest) > 0.0, f"the sand went {-min(lowest) * 1e3:.2f} mm into the plane"
    assert lowest[-1] < 0.5 * dx, f"the sand rests {lowest[-1] * 1e3:.2f} mm above the plane"
    assert abs(lowest[-1] - lowest[-20]) < 1e-4, "not at rest"


def block_and_box(gap, rho, v0):
    """No gravity: a 10 cm liquid block (1.05 kg) moving at v0 along x toward a free 4 cm box of density rho whose
    face lies `gap` beyond the block's (64 cells per metre, dx = 15.6 mm)."""
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=1e-3, substeps=10, gravity=(0, 0, 0)),
                     mpm_options=gs.options.MPMOptions(lower_bound=(0, 0, 0), upper_bound=(0.5, 0.4, 0.3),
                                                       grid_density=64))
    block = scene.add_entity(gs.morphs.Box(pos=(0.2106, 0.2, 0.15), size=(0.1, 0.1, 0.1)),
                             material=gs.materials.MPM.Liquid())
    face = 0.2606 + gap
    box = scene.add_entity(gs.morphs.Box(pos=(face + 0.02, 0.2, 0.15), size=(0.04, 0.04, 0.04)),
                           material=gs.materials.Rigid(rho=rho))
    scene.build()
    block.set_velocity([v0, 0.0, 0.0])
    return scene, block, box, face, rho * 0.04 ** 3


@needs_rigid
@pytest.mark.parametrize("gap, rho, v0", [(0.0055, 100.0, 0.5), (-0.03, 10.0, 1.0)])
def test_a_light_box_is_pushed_by_a_liquid_block_at_the_grid_resolution(gap, rho, v0):
    """A liquid block moving at v0 toward a light free box, over 100 substeps.

    5.5 mm apart (a 6.4 g box, 0.5 m/s): the block's outermost grid nodes lie 0.03 cells short of the box's face,
    within half a cell: the box is pushed from the first substep and rides with the block (nodes inside the box
    alone in contact: it stayed in place to the last bit). Engulfed, 3 cm into the block (a 0.64 g box, 1 m/s): the
    nodes moving into it share its inertia, so that it rides with the block, no faster than an elastic hit would
    send it, 2 v0 (each node seeing the whole box: 25.6 m/s, the kinetic energy up 56%). Both: momentum conserved
    (1e-4 of the block's: the box applies the last substep's impulse in the next) and kinetic energy not made."""
    scene, block, box, face, M = block_and_box(gap, rho, v0)
    dx = 1 / 64
    xp = float(block.get_particles_pos()[:, 0].max())
    outer = (np.floor(xp / dx - 0.5) + 2) * dx  # the block's outermost grid node along x (its stencil's last)
    assert (0.0 < face - outer < 0.5 * dx) if gap > 0 else (outer > face)
    m = scene.mpm_solver.p_mass[:, None]
    x0 = float(box.get_pos()[0])

    def energy():
        v = block.get_particles_vel()
        return float(0.5 * (m * v * v).sum() + 0.5 * M * (box.get_vel() ** 2).sum())

    k0 = energy()
    check_momentum_exchange(scene, lambda: (block.get_particles_vel() * m).sum(0), lambda: M * box.get_vel(), 10,
                            rtol=1e-4, every_step=False)
    moved, v_box = float(box.get_pos()[0]) - x0, float(box.get_vel()[0])
    print(f"box {M * 1e3:.2f} g: moved {moved * 1e3:.2f} mm, at {v_box:.4f} m/s; kinetic energy {k0:.6f} -> "
          f"{energy():.6f} J")
    assert moved > 0.5 * v0 * 0.01, f"the box moved {moved * 1e3:.3f} mm in 10 ms"
    assert 0.9 * v0 < v_box < 2.0 * v0
    assert energy() <= k0


class Floor:
    """A collider of one static plane at z = 0 (ColliderView), for scenes without the rigid solver."""

    def __init__(self):
        z = torch.zeros
        self.view = ColliderView(
            geom_type=torch.tensor([GEOM_PLANE], dtype=torch.int32), geom_size=z(1, 3, dtype=F64),
            geom_friction=torch.tensor([0.5], dtype=F64), geom_body=torch.tensor([-1], dtype=torch.int32),
            geom_pos=z(1, 1, 3, dtype=F64), geom_quat=torch.tensor([[[1.0, 0.0, 0.0, 0.0]]], dtype=F64),
            body_com=z(1, 1, 3, dtype=F64), body_lin_vel=z(1, 1, 3, dtype=F64), body_ang_vel=z(1, 1, 3, dtype=F64),
            body_impulse=z(1, 1, 6, dtype=F64))

    def collider_view(self, f):
        return self.view


def test_both_modes_hold_a_cube_on_a_plane_lying_on_a_node_layer():
    """An elastic cube dropped from 1 cm onto a plane at z = 0 that lies on a node layer (a stand-in collider,
    100 cells per metre; the MPM floor moved to the domain's bottom, so that the plane alone holds it): in plain
    and in differentiable mode it lands on the plane and stays above it, and the two modes give the same particles
    (1e-9 m: they run the same contact). Measured: its lowest particle 9.6 mm above the plane after 0.1 s (the
    cube bounces on it), the modes 3e-16 m apart."""
    from genesis_mpm.coupling import ColliderMPMCoupling

    def run(requires_grad):
        scene = gs.Scene(sim_options=gs.options.SimOptions(dt=1e-3 * 10, substeps=10, requires_grad=requires_grad,
                                                           floor_height=-0.05),
                         mpm_options=gs.options.MPMOptions(lower_bound=(-0.05, -0.05, -0.05),
                                                           upper_bound=(0.05, 0.05, 0.08), grid_density=100))
        cube = scene.add_entity(gs.morphs.Box(pos=(0, 0, 0.025), size=(0.03, 0.03, 0.03)),
                                material=gs.materials.MPM.Elastic(E=2e4))
        scene.build()
        scene.coupler.couplings.append(ColliderMPMCoupling(Floor(), scene.mpm_solver, scene.sim_options))
        for _ in range(10):
            scene.step()
        return cube.get_particles_pos().detach().clone()

    plain, differentiable = run(False), run(True)
    print(f"lowest particle {float(plain[:, 2].min()) * 1e3:.2f} mm; modes differ by "
          f"{float((plain - differentiable).abs().max()):.2e} m")
    assert float(plain[:, 2].min()) > 0.0
    assert torch.allclose(plain, differentiable, rtol=0, atol=1e-9)


@pytest.mark.parametrize("n_envs", [0, 2])
def test_get_mass_is_per_environment(n_envs):
    """get_mass gives the entity's mass (rho times its particles' volume) per environment, `([n_envs,])`, as
    Genesis World's MPMEntity does, and for the environments envs_idx."""
    scene = gs.Scene(mpm_options=gs.options.MPMOptions(lower_bound=(0, 0, 0), upper_bound=(0.5, 0.5, 0.5),
                                                       grid_density=32))
    cube = scene.add_entity(gs.morphs.Box(pos=(0.25, 0.25, 0.25), size=(0.1, 0.1, 0.1)),
                            material=gs.materials.MPM.Elastic(rho=500.0))
    scene.build(n_envs=n_envs)
    mass = cube.get_mass()
    assert torch.is_tensor(mass) and tuple(mass.shape) == ((n_envs,) if n_envs else ())
    np.testing.assert_allclose(mass.numpy(), 500.0 * cube.n_particles * (1 / 64) ** 3, rtol=1e-12)
    if n_envs:
        assert tuple(cube.get_mass(envs_idx=[0]).shape) == (1,)
