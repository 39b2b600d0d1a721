"""The MPM entity API, option validation and envs_idx isolation."""

import pytest
import torch

import genesis_core as gs


def scene_with(n_envs=0, **mpm):
    opts = dict(lower_bound=(0, 0, 0), upper_bound=(0.5, 0.5, 0.5), grid_density=32)
    opts.update(mpm)
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=2e-3), mpm_options=gs.options.MPMOptions(**opts))
    cube = scene.add_entity(gs.morphs.Box(pos=(0.25, 0.25, 0.3), size=(0.1, 0.1, 0.1)),
                            material=gs.materials.MPM.Elastic())
    ball = scene.add_entity(gs.morphs.Sphere(pos=(0.25, 0.25, 0.15), radius=0.05),
                            material=gs.materials.MPM.Snow())
    scene.build(n_envs=n_envs)
    return scene, cube, ball


@pytest.mark.parametrize("make, field", [
    (lambda: gs.materials.MPM.Elastic(E=-1), "Elastic.E"),
    (lambda: gs.materials.MPM.Elastic(nu=0.5), "Elastic.nu"),
    (lambda: gs.materials.MPM.Sand(friction_angle=95), "Sand.friction_angle"),
    (lambda: gs.materials.MPM.Snow(theta_c=0), "Snow.theta_c"),
    (lambda: gs.materials.MPM.Liquid(rho=0), "Liquid.rho"),
    (lambda: gs.materials.MPM.ElastoPlastic(yield_stress=-3), "ElastoPlastic.yield_stress"),
    (lambda: gs.options.MPMOptions(grid_density=0), "MPMOptions.grid_density"),
    (lambda: gs.options.MPMOptions(boundary="bouncy"), "MPMOptions.boundary"),
    (lambda: gs.options.MPMOptions(lower_bound=(0, 0, 0), upper_bound=(0.1, 1, 1), grid_density=32), "8 grid cells"),
])
def test_bad_values_name_the_field(make, field):
    with pytest.raises(gs.OptionError, match=field):
        make()


def test_entities_outside_the_domain_or_of_unsupported_shape_are_refused():
    scene = gs.Scene(mpm_options=gs.options.MPMOptions(lower_bound=(0, 0, 0), upper_bound=(1, 1, 1)))
    with pytest.raises(gs.OptionError, match="inside the MPM domain"):
        scene.add_entity(gs.morphs.Box(pos=(0.5, 0.5, 0.02), size=(0.2, 0.2, 0.2)), material=gs.materials.MPM.Elastic())
    with pytest.raises(gs.OptionError, match="Box, Sphere, Cylinder, Capsule or Mesh"):
        scene.add_entity(gs.morphs.Plane(pos=(0.5, 0.5, 0.5)), material=gs.materials.MPM.Elastic())
    assert scene.entities == []


def test_shapes_counts_and_setters():
    scene, cube, ball = scene_with(n_envs=3)
    n = cube.n_particles
    assert n == 6 ** 3 and cube.get_particles_pos().shape == (3, n, 3)  # 0.1 m on a 1/64 m lattice: 6 per edge
    assert cube.get_mass() == pytest.approx(1000 * n * (1 / 64) ** 3)
    assert cube.get_pos().shape == (3, 3)
    with pytest.raises(gs.InvalidStateError, match=r"MPMSolver.pos\[env 0, index \[0, 0\]\] = 2.0.*inside the solver's domain"):
        cube.set_pos(torch.full((3, n, 3), 2.0, dtype=torch.float64))
    with pytest.raises(gs.InvalidStateError, match=r"MPMSolver.pos\[env 0, index \[0, 0\]\] = nan.*finite"):
        cube.set_pos(torch.full((3, n, 3), float("nan"), dtype=torch.float64))
    cube.set_velocity([[1.0, 0, 0]], envs_idx=[1])
    vel = cube.get_particles_vel()
    assert (vel[1, :, 0] == 1).all() and (vel[0] == 0).all() and (vel[2] == 0).all()


def test_deactivated_particles_freeze_and_others_move():
    scene, cube, ball = scene_with(n_envs=2)
    cube.deactivate(envs_idx=[0])
    before = cube.get_particles_pos()
    for _ in range(20):
        scene.step()
    after = cube.get_particles_pos()
    assert torch.equal(after[0], before[0]), "inactive particles moved"
    assert (after[1, :, 2] < before[1, :, 2]).all(), "active particles did not fall"
    cube.activate(envs_idx=[0])
    for _ in range(5):
        scene.step()
    assert (cube.get_particles_pos()[0, :, 2] < before[0, :, 2]).all()


def test_reset_envs_idx_on_mpm_leaves_other_envs_untouched():
    """The case Genesis World 1.4.5 got wrong: reset(state, envs_idx=[1]) overwrote every environment."""
    scene, cube, ball = scene_with(n_envs=3)
    s0 = scene.get_state()
    for _ in range(10):
        scene.step()
    before = {k: v.clone() for k, v in scene.mpm_solver.state.tensors.items()}
    scene.reset(state=s0, envs_idx=[1])
    after = scene.mpm_solver.state.tensors
    for name, x in after.items():
        per_frame = scene.mpm_solver.state.specs[name].frames
        for b in (0, 2):
            now, then = (x[:, b], before[name][:, b]) if per_frame else (x[b], before[name][b])
            assert torch.equal(now, then), f"{name}: environment {b} changed"
    assert torch.equal(cube.get_particles_pos()[1], s0.solvers_state[scene.solvers.index(scene.mpm_solver)].pos[1, :cube.n_particles])


def test_mesh_morphs_are_filled_with_particles(tmp_path):
    """Particles fill a closed mesh: their count times the particle volume is the mesh's volume (within the
    lattice's resolution); a mesh with holes is filled as if closed (its generalized winding number)."""
    import trimesh

    sphere = trimesh.creation.icosphere(subdivisions=3, radius=0.1)
    sphere.export(tmp_path / "ball.obj")
    scene = gs.Scene(mpm_options=gs.options.MPMOptions(lower_bound=(0, 0, 0), upper_bound=(1, 1, 1), grid_density=32))
    ball = scene.add_entity(gs.morphs.Mesh(file=str(tmp_path / "ball.obj"), pos=(0.5, 0.5, 0.5)),
                            material=gs.materials.MPM.Elastic())
    open_mesh = trimesh.Trimesh(sphere.vertices, sphere.faces[:-10])
    assert not open_mesh.is_watertight
    open_mesh.export(tmp_path / "open.obj")
    holed = scene.add_entity(gs.morphs.Mesh(file=str(tmp_path / "open.obj"), pos=(0.5, 0.5, 0.2)),
                             material=gs.materials.MPM.Elastic())
    scene.build()
    assert ball.n_particles * (1 / 64) ** 3 == pytest.approx(sphere.volume, rel=0.05)
    assert holed.n_particles == ball.n_particles
    assert torch.allclose(ball.get_pos(), torch.tensor([0.5, 0.5, 0.5], dtype=torch.float64), atol=1e-3)


def test_material_params_per_environment():
    """E and nu are state, one value per entity and environment: set, read back, validated before anything is
    written, and part of get_state / reset."""
    scene, cube, ball = scene_with(n_envs=3)
    E, nu = cube.get_material_params()
    assert torch.equal(E, torch.full((3,), 3e5, dtype=torch.float64)) and torch.equal(nu, torch.full((3,), 0.2,
                                                                                                      dtype=torch.float64))
    s0 = scene.get_state()
    cube.set_material_params(E=torch.tensor([1e4, 2e4], dtype=torch.float64), envs_idx=[0, 2])
    cube.set_material_params(nu=0.3)
    E, nu = cube.get_material_params()
    assert E.tolist() == [1e4, 3e5, 2e4] and nu.tolist() == [0.3, 0.3, 0.3]
    assert ball.get_material_params()[0].tolist() == [1.4e5] * 3  # the other entity keeps its own
    for bad, match in [(dict(E=-1.0), "E="), (dict(E=float("nan")), "E="), (dict(nu=0.5), "nu="),
                       (dict(E=[1e4, 2e4]), r"shaped \(3,\)"), (dict(E=True), "number"),
                       (dict(E=1e4, nu=0.7), "nu=")]:
        with pytest.raises(gs.OptionError, match=match):
            cube.set_material_params(**bad)
    assert cube.get_material_params()[0].tolist() == [1e4, 3e5, 2e4]  # a refused call writes nothing
    scene.reset(s0)
    assert cube.get_material_params()[0].tolist() == [3e5] * 3


def test_softer_environment_deforms_more():
    scene, cube, ball = scene_with(n_envs=2)
    cube.set_material_params(E=torch.tensor([3e5, 3e3], dtype=torch.float64))
    cube.set_velocity(torch.tensor([[0.0, 0.0, -2.0]] * 2, dtype=torch.float64))
    for _ in range(40):
        scene.step()
    spread = cube.get_particles_pos()[..., 2].std(-1)
    assert float(spread[1]) < 0.9 * float(spread[0]), "the soft cube was not squashed more by the ball"
