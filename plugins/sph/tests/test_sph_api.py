"""The SPH solver's options, materials, entities, batching and coupling contract."""

import numpy as np
import pytest
import torch

import genesis_core as gs
from genesis_core.testing import check_momentum_exchange

import sph_scene


def make(entities, n_envs=0, gravity=(0, 0, -9.81), dt=2e-3, substeps=2, **sph):
    opts = dict(upper_bound=(0.3, 0.3, 0.3), particle_size=0.03)
    opts.update(sph)
    return sph_scene.make(entities, n_envs=n_envs, dt=dt, substeps=substeps, gravity=gravity, **opts)


def test_options_and_material_defaults_are_genesis_worlds():
    o = gs.options.SPHOptions()
    assert (o.particle_size, o.pressure_solver, o.lower_bound, o.upper_bound) == (0.02, "WCSPH", (-100.0, -100.0, 0.0),
                                                                                   (100.0, 100.0, 100.0))
    assert (o.max_divergence_error, o.max_density_error_percent) == (0.1, 0.05)
    assert (o.max_divergence_solver_iterations, o.max_density_solver_iterations) == (100, 100)
    assert o.support_radius == pytest.approx(0.04)
    m = gs.materials.SPH.Liquid()
    assert (m.rho, m.stiffness, m.exponent, m.mu, m.gamma, m.sampler) == (1000.0, 5e4, 7.0, 0.005, 0.01, "regular")


@pytest.mark.parametrize("kwargs", [dict(pressure_solver="PCISPH"), dict(particle_size=0.0),
                                    dict(particle_size=0.02, hash_grid_cell_size=0.03),
                                    dict(max_density_solver_iterations=0), dict(lower_bound=(0, 0, 0),
                                                                                 upper_bound=(0.05, 1, 1))])
def test_bad_options_are_refused_by_name(kwargs):
    with pytest.raises(gs.OptionError, match="SPHOptions|pressure_solver|particle_size|iterations"):
        gs.options.SPHOptions(**kwargs)


@pytest.mark.parametrize("kwargs", [dict(rho=0.0), dict(stiffness=-1.0), dict(mu=-0.1), dict(gamma=float("nan")),
                                    dict(sampler="pbs")])
def test_bad_materials_are_refused(kwargs):
    with pytest.raises(gs.OptionError):
        gs.materials.SPH.Liquid(**kwargs)


def test_liquid_outside_the_domain_is_refused_before_build():
    scene = gs.Scene(sph_options=gs.options.SPHOptions(lower_bound=(0, 0, 0), upper_bound=(0.3, 0.3, 0.3),
                                                       particle_size=0.03))
    with pytest.raises(gs.OptionError, match="SPH domain"):
        scene.add_entity(gs.morphs.Box(pos=(0.3, 0.15, 0.15), size=(0.1, 0.1, 0.1)), material=gs.materials.SPH.Liquid())


def test_a_mesh_collider_in_differentiable_mode_is_refused_with_a_reason(tmp_path):
    """Primitive geoms are boundaries in differentiable mode (test_sph_grad.py); a mesh geom is refused at the
    first step, before the liquid's state changes."""
    obj = tmp_path / "tetra.obj"
    obj.write_text("v 0 0 0\nv 0.05 0 0\nv 0 0.05 0\nv 0 0 0.05\nf 1 3 2\nf 1 2 4\nf 1 4 3\nf 2 3 4\n")
    scene = gs.Scene(sim_options=gs.options.SimOptions(requires_grad=True),
                     sph_options=gs.options.SPHOptions(lower_bound=(0, 0, 0), upper_bound=(0.3, 0.3, 0.3),
                                                       particle_size=0.03))
    liquid = scene.add_entity(gs.morphs.Box(pos=(0.15, 0.15, 0.15), size=(0.1, 0.1, 0.1)),
                              material=gs.materials.SPH.Liquid())
    scene.add_entity(gs.morphs.Mesh(file=str(obj), pos=(0.15, 0.15, 0.25), fixed=True))
    scene.build()
    before = liquid.get_particles_pos().detach().clone()
    with pytest.raises(gs.GenesisError, match="mesh geoms"):
        scene.step()
    assert torch.equal(liquid.get_particles_pos().detach(), before)


def test_particle_mass_is_rho_times_the_lattice_cell():
    scene, (liq,) = make([(gs.morphs.Box(pos=(0.15, 0.15, 0.15), size=(0.12, 0.12, 0.12)),
                           gs.materials.SPH.Liquid(rho=800.0))])
    assert liq.n_particles == 64
    assert liq.get_mass() == pytest.approx(800.0 * 0.12 ** 3)


@pytest.mark.parametrize("solver", ["WCSPH", "DFSPH"])
def test_each_environment_is_its_own_simulation(solver):
    """A batch of two: one block at rest, one thrown at the floor. The quiet one steps bitwise as it does
    alone, and DFSPH iterates for the thrown one only (convergence is judged per environment)."""
    box = (gs.morphs.Box(pos=(0.15, 0.15, 0.15), size=(0.12, 0.12, 0.12)), gs.materials.SPH.Liquid(gamma=0.0))
    opts = dict(pressure_solver=solver, gravity=(0, 0, 0), max_density_error_percent=1e-3, max_divergence_error=1e-3)
    scene, (liq,) = make([box], n_envs=2, **opts)
    liq.set_particles_vel(torch.tensor([3.0, 0.0, -3.0], dtype=torch.float64).expand(liq.n_particles, 3).clone(),
                          envs_idx=[1])
    alone, (liq1,) = make([box], n_envs=0, **opts)
    iters = []
    for _ in range(25):  # the thrown block reaches the floor's support radius at step 15
        scene.step()
        alone.step()
        if solver == "DFSPH":
            iters.append(scene.sph_solver.last_iterations.clone())
    assert torch.equal(liq.get_particles_pos()[0], liq1.get_particles_pos())
    assert torch.equal(liq.get_particles_vel()[0], liq1.get_particles_vel())
    assert not torch.equal(liq.get_particles_pos()[1], liq1.get_particles_pos())
    if solver == "DFSPH":
        total = torch.stack(iters).sum(0)  # [env, (divergence, density)]
        assert total[1, 1] > total[0, 1] + 5, total


def box_momentum(scene, box, mass):
    """A free rigid box's linear momentum, counting the impulses the coupling handed it (it applies them in its next
    substep)."""
    pending = scene.rigid_solver.state.at("links_ext_impulse", scene.rigid_solver.frame)[0, :, :3].sum(0)
    return mass * box.get_vel().double() + pending.double()


def test_rigid_sph_coupling_conserves_momentum_without_gravity():
    """A block of water thrown at a free box, gravity off, far from the walls: the liquid's and the box's
    momentum sum to the initial one to 1e-6 (float64) while they push each other."""
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=1e-3, substeps=2, gravity=(0, 0, 0)),
                     sph_options=gs.options.SPHOptions(lower_bound=(-1, -1, -1), upper_bound=(1, 1, 1),
                                                       particle_size=0.02, pressure_solver="WCSPH"))
    liq = scene.add_entity(gs.morphs.Box(pos=(-0.12, 0.0, 0.0), size=(0.1, 0.1, 0.1)), material=gs.materials.SPH.Liquid())
    box = scene.add_entity(gs.morphs.Box(pos=(0.0, 0.0, 0.0), size=(0.1, 0.1, 0.1)), material=gs.materials.Rigid(rho=500))
    scene.build()
    liq.set_velocity(torch.tensor([2.0, 0.0, 0.3], dtype=torch.float64))
    m = scene.sph_solver.p_mass.double()
    moved = []
    check_momentum_exchange(scene, lambda: (liq.get_particles_vel() * m[:, None]).sum(0),
                            lambda: box_momentum(scene, box, 500 * 0.1 ** 3), 60, rtol=1e-6,
                            after_step=lambda i: moved.append(float(box.get_vel()[0]) > 0.05))
    assert any(moved), "the liquid never pushed the box"


def test_no_liquid_enters_a_closed_rigid_cup():
    """A hollow closed box (five fixed walls and a lid) under a falling block of water: no particle inside."""
    s = 0.02
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=2e-3, substeps=4),
                     sph_options=gs.options.SPHOptions(lower_bound=(0, 0, 0), upper_bound=(0.4, 0.4, 0.6),
                                                       particle_size=s, pressure_solver="DFSPH"))
    c, half, t = 0.2, 0.08, 0.02  # the cup's centre (x, y), inner half-width, wall thickness
    walls = [((c, c, t / 2), (2 * half + 2 * t, 2 * half + 2 * t, t)),  # floor
             ((c, c, 2 * half + 1.5 * t), (2 * half + 2 * t, 2 * half + 2 * t, t))]  # lid
    for dx, dy in ((1, 0), (-1, 0), (0, 1), (0, -1)):
        size = (t, 2 * half + 2 * t, 2 * half) if dx else (2 * half + 2 * t, t, 2 * half)
        walls.append(((c + dx * (half + t / 2), c + dy * (half + t / 2), half + t), size))
    for pos, size in walls:
        scene.add_entity(gs.morphs.Box(pos=pos, size=size, fixed=True))
    liq = scene.add_entity(gs.morphs.Box(pos=(0.2, 0.2, 0.45), size=(0.3, 0.3, 0.12)), material=gs.materials.SPH.Liquid())
    scene.build()
    for _ in range(1000):
        scene.step()
    p = liq.get_particles_pos().numpy()
    inside = (np.abs(p[:, 0] - c) < half) & (np.abs(p[:, 1] - c) < half) & (p[:, 2] > t) & (p[:, 2] < 2 * half + t)
    assert not inside.any(), f"{int(inside.sum())} particles inside the cup"
    assert p[:, 2].max() < 0.35  # the water came down around it


def test_mpm_sph_coupling_conserves_momentum_without_gravity():
    """An elastic MPM cube thrown into a block of water, gravity off, far from the walls: the total linear
    momentum of both stays the initial one to 1e-6 (float64) while they push each other apart."""
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=1e-3, substeps=2, gravity=(0, 0, 0)),
                     mpm_options=gs.options.MPMOptions(lower_bound=(0, 0, 0), upper_bound=(0.6, 0.3, 0.3),
                                                       grid_density=40),
                     sph_options=gs.options.SPHOptions(lower_bound=(0, 0, 0), upper_bound=(0.6, 0.3, 0.3),
                                                       particle_size=0.02, pressure_solver="DFSPH"))
    cube = scene.add_entity(gs.morphs.Box(pos=(0.2, 0.15, 0.15), size=(0.08, 0.08, 0.08)),
                            material=gs.materials.MPM.Elastic(E=5e4))
    liq = scene.add_entity(gs.morphs.Box(pos=(0.33, 0.15, 0.15), size=(0.1, 0.1, 0.1)), material=gs.materials.SPH.Liquid())
    scene.build()
    cube.set_velocity(torch.tensor([1.5, 0.0, 0.2], dtype=torch.float64))
    m_mpm = scene.mpm_solver.p_mass.double()
    m_sph = scene.sph_solver.p_mass.double()
    got = check_momentum_exchange(scene, lambda: (cube.get_particles_vel() * m_mpm[:, None]).sum(0),
                                  lambda: (liq.get_particles_vel() * m_sph[:, None]).sum(0), 40, rtol=1e-6)
    assert float(got.b[0]) > 0.2 * float(got.total0[0]), "the cube never pushed the water"


def test_boundary_viscosity_holds_a_sliding_liquid_back_and_conserves_momentum_with_a_body():
    """A block sliding over the floor keeps its speed on slipping walls and slows on no-slip ones; thrown at a
    free box (gravity off) with the no-slip boundary, momentum is still exchanged exactly."""
    speeds = []
    for nu_b in (0.0, 0.01):
        scene, (liq,) = make([(gs.morphs.Box(pos=(0.1, 0.15, 0.045), size=(0.09, 0.09, 0.09)),
                               gs.materials.SPH.Liquid(mu=0.0, gamma=0.0))], boundary_viscosity=nu_b,
                             upper_bound=(0.6, 0.3, 0.3))
        liq.set_velocity(torch.tensor([1.0, 0.0, 0.0], dtype=torch.float64))
        for _ in range(20):
            scene.step()
        speeds.append(float(liq.get_particles_vel()[:, 0].mean()))
    assert speeds[0] > 0.95 and speeds[1] < 0.9 * speeds[0], speeds

    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=1e-3, substeps=2, gravity=(0, 0, 0)),
                     sph_options=gs.options.SPHOptions(lower_bound=(-1, -1, -1), upper_bound=(1, 1, 1),
                                                       particle_size=0.02, boundary_viscosity=0.02))
    liq = scene.add_entity(gs.morphs.Box(pos=(-0.12, 0.0, 0.03), size=(0.1, 0.1, 0.1)), material=gs.materials.SPH.Liquid())
    box = scene.add_entity(gs.morphs.Box(pos=(0.0, 0.0, -0.02), size=(0.1, 0.1, 0.1)), material=gs.materials.Rigid(rho=500))
    scene.build()
    liq.set_velocity(torch.tensor([2.0, 0.0, 0.0], dtype=torch.float64))
    m = scene.sph_solver.p_mass.double()
    check_momentum_exchange(scene, lambda: (liq.get_particles_vel() * m[:, None]).sum(0),
                            lambda: box_momentum(scene, box, 500 * 0.1 ** 3), 40, rtol=1e-6)
