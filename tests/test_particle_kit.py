"""The particle kit's sampling and entity API (genesis_core.particles), on the MPM solver where a solver is needed."""

import numpy as np
import pytest
import torch

import genesis_core as gs
from genesis_core.particles import sampling
from genesis_core.rotations import quat_to_mat


def test_lattice_sampling_fills_each_shape_with_the_pose_applied_once():
    size = 0.02
    cases = [
        (gs.morphs.Box(size=(0.2, 0.1, 0.06)), 0.2 * 0.1 * 0.06, lambda p: np.all(np.abs(p) <= [0.1, 0.05, 0.03], 1)),
        (gs.morphs.Sphere(radius=0.1), 4 / 3 * np.pi * 0.1 ** 3, lambda p: np.linalg.norm(p, axis=1) <= 0.1),
        (gs.morphs.Cylinder(radius=0.05, height=0.2), np.pi * 0.05 ** 2 * 0.2,
         lambda p: (np.linalg.norm(p[:, :2], axis=1) <= 0.05) & (np.abs(p[:, 2]) <= 0.1)),
        (gs.morphs.Capsule(radius=0.05, height=0.2), np.pi * 0.05 ** 2 * 0.2 + 4 / 3 * np.pi * 0.05 ** 3,
         lambda p: np.linalg.norm(p - np.stack([0 * p[:, 2], 0 * p[:, 2], np.clip(p[:, 2], -0.1, 0.1)], 1), axis=1)
         <= 0.05),
    ]
    pose = dict(pos=(0.3, -0.2, 0.5), euler=(30.0, 10.0, -45.0))
    for morph, volume, inside in cases:
        local = sampling.sample(morph, size)
        placed = sampling.sample(type(morph)(**{**_shape_args(morph), **pose}), size)
        rot = quat_to_mat(type(morph)(**pose | _shape_args(morph)).quat)
        np.testing.assert_allclose((placed - np.asarray(pose["pos"])) @ rot, local, atol=1e-12)
        assert inside(local).all()
        assert len(local) * size ** 3 == pytest.approx(volume, rel=0.2), type(morph).__name__


def _shape_args(morph):
    return {k: getattr(morph, k) for k in ("size", "radius", "height") if hasattr(morph, k)}


def test_random_sampling_is_seeded_inside_the_shape_and_as_dense_as_the_lattice():
    morph = gs.morphs.Capsule(radius=0.05, height=0.1)
    a, b = sampling.sample(morph, 0.01, "random", seed=3), sampling.sample(morph, 0.01, "random", seed=3)
    c = sampling.sample(morph, 0.01, "random", seed=4)
    assert np.array_equal(a, b) and not np.array_equal(a, c)
    assert len(a) == len(sampling.sample(morph, 0.01))
    axial = np.clip(a[:, 2], -0.05, 0.05)
    assert (np.linalg.norm(a - np.stack([0 * axial, 0 * axial, axial], 1), axis=1) <= 0.05 + 1e-9).all()
    with pytest.raises(gs.OptionError, match="sampler"):
        sampling.sample(morph, 0.01, "poisson")


def _scene(n_envs=2):
    scene = gs.Scene(mpm_options=gs.options.MPMOptions(lower_bound=(0, 0, 0), upper_bound=(0.5, 0.5, 0.5),
                                                       grid_density=32))
    a = scene.add_entity(gs.morphs.Box(pos=(0.2, 0.25, 0.2), size=(0.1, 0.1, 0.1)), material=gs.materials.MPM.Elastic())
    b = scene.add_entity(gs.morphs.Capsule(pos=(0.35, 0.25, 0.2), radius=0.04, height=0.06),
                         material=gs.materials.MPM.Elastic())
    scene.build(n_envs=n_envs)
    return scene, a, b


def test_the_entity_api_reads_and_writes_only_what_it_names():
    scene, a, b = _scene()
    n = a.n_particles
    assert (a.particle_start, a.particle_end, b.particle_start) == (0, n, n)
    assert a.get_particles_pos().shape == (2, n, 3) and a.get_particles_active().shape == (2, n)
    before_b = b.get_particles_pos().clone()
    pos = a.get_particles_pos()
    idx = [0, 5, n - 1]
    target = pos[1, idx] + 0.01
    a.set_particles_pos(target.unsqueeze(0), particles_idx_local=idx, envs_idx=[1])
    after = a.get_particles_pos()
    assert torch.equal(after[1, idx], target) and torch.equal(after[0], pos[0])
    rest = [i for i in range(n) if i not in idx]
    assert torch.equal(after[1, rest], pos[1, rest]) and torch.equal(b.get_particles_pos(), before_b)
    a.set_particles_active([0, 0], particles_idx_local=[2, 3], envs_idx=[0])
    act = a.get_particles_active()
    assert act[0, 2] == 0 and act[0, 3] == 0 and act[0].sum() == n - 2 and act[1].sum() == n
    a.set_active(False, envs_idx=[1])
    assert a.get_particles_active()[1].sum() == 0 and b.get_particles_active().sum() == 2 * b.n_particles
    a.activate()
    assert a.get_particles_active().sum() == 2 * n
    with pytest.raises(gs.OptionError, match="particles_idx_local"):
        a.set_particles_vel(torch.zeros(2, 1, 3), particles_idx_local=[n])
    with pytest.raises(gs.InvalidStateError, match="inside the solver's domain"):
        a.set_particles_pos(torch.full((2, 1, 3), 0.9), particles_idx_local=[0])


def test_set_position_moves_the_centre_of_mass_and_find_closest_particle_finds_it():
    scene, a, _ = _scene()
    a.set_position([0.25, 0.25, 0.25], envs_idx=[0])
    com = a.get_pos()
    np.testing.assert_allclose(com[0].numpy(), [0.25, 0.25, 0.25], atol=1e-12)
    np.testing.assert_allclose(com[1].numpy(), [0.2, 0.25, 0.2], atol=1e-12)
    pos = a.get_particles_pos()
    k = a.find_closest_particle(pos[1, 7] + 1e-4)
    assert k.tolist()[1] == 7
    per_env = a.find_closest_particle(torch.stack([pos[0, 3], pos[1, 11]]))
    assert per_env.tolist() == [3, 11]
    with pytest.raises(gs.OptionError, match="find_closest_particle"):
        a.find_closest_particle([0.0, 0.0])


def test_a_body_may_start_anywhere_inside_the_bounds():
    """MPM's grid reaches beyond the bounds (its walls are the padding), so a cube 5 mm above the floor and
    against a side wall is accepted, and one crossing a bound is refused."""
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=2e-3, substeps=4),
                     mpm_options=gs.options.MPMOptions(lower_bound=(0, 0, 0), upper_bound=(0.5, 0.5, 0.5),
                                                       grid_density=32))
    cube = scene.add_entity(gs.morphs.Box(pos=(0.05, 0.25, 0.055), size=(0.1, 0.1, 0.1)),
                            material=gs.materials.MPM.Elastic())
    with pytest.raises(gs.OptionError, match="inside the MPM domain"):
        scene.add_entity(gs.morphs.Sphere(pos=(0.25, 0.25, 0.02), radius=0.03), material=gs.materials.MPM.Elastic())
    scene.build()
    for _ in range(50):
        scene.step()
    pos = cube.get_particles_pos()
    assert float(pos[:, 2].min()) > -1 / 32 and float(pos[:, 0].min()) > -1 / 32, "it went through a wall"


def test_setters_take_every_form_genesis_scripts_use():
    scene, a, _ = _scene(n_envs=2)
    n = a.n_particles
    a.set_particles_active(True, particles_idx_local=[0])
    a.set_particles_active([False, True], particles_idx_local=[1, 2], envs_idx=[0])
    a.set_particles_active(np.array([False]), particles_idx_local=[3])
    a.set_active(np.bool_(True), envs_idx=[1])
    act = a.get_particles_active()
    assert act[0, 1] == 0 and act[0, 2] == 1 and act[0, 3] == 0 and act[0, 0] == 1 and act[1].sum() == n
    # one velocity for all, one per environment, one per particle (shared by the environments), per env and particle
    a.set_velocity([0.0, 0.0, 1.0])
    assert (a.get_particles_vel()[..., 2] == 1).all()
    a.set_velocity(torch.tensor([[1.0, 0, 0], [2.0, 0, 0]]))
    assert (a.get_particles_vel()[1, :, 0] == 2).all() and (a.get_particles_vel()[0, :, 0] == 1).all()
    per_particle = torch.rand(n, 3, dtype=torch.float64)
    a.set_velocity(per_particle)
    assert torch.equal(a.get_particles_vel()[0], per_particle) and torch.equal(a.get_particles_vel()[1], per_particle)
    pos = a.get_particles_pos()[0] + 0.01
    a.set_position(pos)  # (n_particles, 3) in a batched scene: every environment
    assert torch.equal(a.get_particles_pos()[1], pos)
    with pytest.raises(gs.OptionError, match="set_velocity: expected a value of shape"):
        a.set_velocity(torch.zeros(n + 1, 3))


def test_the_centre_of_mass_is_the_active_particles_for_setting_and_getting():
    scene, a, _ = _scene(n_envs=0)
    half = list(range(a.n_particles // 2))
    a.set_particles_active([0] * len(half), particles_idx_local=half)
    a.set_position([0.2, 0.2, 0.2])
    np.testing.assert_allclose(a.get_pos().numpy(), [0.2, 0.2, 0.2], atol=1e-12)
    a.deactivate()
    np.testing.assert_allclose(a.get_pos().numpy(), a.get_particles_pos().mean(0).numpy(), atol=1e-12)


def test_keep_inside_puts_strays_back_on_the_walls_so_the_state_restores():
    """Positions outside the solver's domain_bounds() (here written by hand into an MPM state) go back on the
    wall they crossed, with their velocity into it removed; the state then passes the check on the way in."""
    scene, a, _ = _scene(n_envs=2)
    solver = scene.mpm_solver
    lo, hi = (torch.as_tensor(b, dtype=torch.float64) for b in solver.domain_bounds())
    f = solver.frame
    with torch.no_grad():
        solver.state.at("pos", f)[1, 0] = torch.tensor([-5.0, 0.25, 7.0], dtype=torch.float64)
        solver.state.at("vel", f)[1, 0] = torch.tensor([-1.0, 0.5, 2.0], dtype=torch.float64)
        solver.state.at("pos", f)[0, 1] = torch.tensor([float("nan"), 0.25, 0.25], dtype=torch.float64)
    before = solver.state.at("pos", f)[:, 2:].clone()
    with pytest.raises(gs.InvalidStateError):
        scene.reset(state=scene.get_state())
    solver.keep_inside(f)
    pos, vel = solver.state.at("pos", f), solver.state.at("vel", f)
    assert pos[1, 0].tolist() == [float(lo[0]), 0.25, float(hi[2])] and vel[1, 0].tolist() == [0.0, 0.5, 0.0]
    assert pos[0, 1, 0] == lo[0] and torch.equal(pos[:, 2:], before)
    scene.reset(state=scene.get_state())
