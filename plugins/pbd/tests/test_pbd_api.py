"""The PBD solver's API (options, materials, entities, fixing particles), its coupling with rigid bodies and its
internal momentum balance (float64)."""

import numpy as np
import pytest
import torch

import genesis_core as gs
from genesis_core.testing import (LINK_REFUSALS, assert_unchanged, check_link_reference_rule,
                                  check_momentum_exchange, scene_fields, solver_state)

import pbd_meshes


def test_options_and_materials_have_genesis_names_and_are_validated():
    o = gs.options.PBDOptions()
    assert (o.particle_size, o.max_stretch_solver_iterations, o.max_bending_solver_iterations,
            o.max_volume_solver_iterations, o.max_density_solver_iterations,
            o.max_viscosity_solver_iterations) == (1e-2, 4, 1, 1, 1, 1)
    assert o.lower_bound == (-100.0, -100.0, 0.0) and o.upper_bound == (100.0, 100.0, 100.0)
    c = gs.materials.PBD.Cloth()
    assert (c.rho, c.static_friction, c.kinetic_friction, c.stretch_compliance, c.bending_compliance,
            c.air_resistance) == (4.0, 0.15, 0.15, 1e-7, 1e-5, 1e-3)
    assert gs.materials.PBD.Liquid(sampler="pbs").sampler == "pbs"
    for bad in (dict(particle_size=0), dict(max_stretch_solver_iterations=-1), dict(hash_grid_cell_size=1e-3),
                dict(lower_bound=(0, 0, 0), upper_bound=(0.01, 1, 1))):
        with pytest.raises(gs.OptionError):
            gs.options.PBDOptions(**bad)
    for cls, bad in ((gs.materials.PBD.Cloth, dict(rho=0)), (gs.materials.PBD.Cloth, dict(stretch_compliance=-1)),
                     (gs.materials.PBD.Cloth, dict(bending_relaxation=2.5)),
                     (gs.materials.PBD.Elastic, dict(volume_compliance=float("nan"))),
                     (gs.materials.PBD.Liquid, dict(sampler="grid")), (gs.materials.PBD.Particle, dict(rho=-1))):
        with pytest.raises(gs.OptionError, match=cls.__name__):
            cls(**bad)


def test_cloth_needs_a_mesh_and_elastic_bodies_their_tets(tmp_path):
    scene = gs.Scene(pbd_options=gs.options.PBDOptions(lower_bound=(-1, -1, 0), upper_bound=(1, 1, 1)))
    with pytest.raises(gs.OptionError, match="Mesh"):
        scene.add_entity(gs.morphs.Box(pos=(0, 0, 0.5), size=(0.1, 0.1, 0.1)), material=gs.materials.PBD.Cloth())
    with pytest.raises(gs.OptionError, match="domain"):
        scene.add_entity(gs.morphs.Mesh(file=pbd_meshes.flat(tmp_path / "c.obj", 5, 0.5), pos=(0, 0, 2.0)),
                         material=gs.materials.PBD.Cloth())
    cloth = scene.add_entity(gs.morphs.Mesh(file=pbd_meshes.flat(tmp_path / "c.obj", 5, 0.5), pos=(0, 0, 0.5)),
                             material=gs.materials.PBD.Cloth(rho=2.0))
    body = scene.add_entity(gs.morphs.Box(pos=(0, 0, 0.2), size=(0.1, 0.1, 0.1), maxvolume=1e-4),
                            material=gs.materials.PBD.Elastic(rho=500.0))
    water = scene.add_entity(gs.morphs.Sphere(pos=(0.5, 0.5, 0.5), radius=0.05), material=gs.materials.PBD.Liquid())
    scene.build()
    # lumped masses add up to the material's
    assert cloth.get_mass() == pytest.approx(2.0 * 0.25, rel=1e-12)
    assert body.get_mass() == pytest.approx(500.0 * 1e-3, rel=1e-9)
    assert water.get_mass() == pytest.approx(1000.0 * 0.01 ** 3 * water.n_particles, rel=1e-12)
    assert cloth.n_particles == 25 and cloth.n_edges == 56 and cloth.faces.shape == (32, 3)
    assert len(cloth.mesh.faces) == 32 and body.mesh.is_watertight and water.mesh is None
    assert body.n_elems > 0 and body.n_edges > 0
    assert scene.pbd_solver.n_bending == 40  # interior edges of the 4 x 4-cell grid


def small_cloth(tmp_path, n_envs=0, **kw):
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=2e-3, substeps=2, **kw),
                     pbd_options=gs.options.PBDOptions(lower_bound=(-1, -1, 0), upper_bound=(1, 1, 1)))
    cloth = scene.add_entity(gs.morphs.Mesh(file=pbd_meshes.flat(tmp_path / "c.obj", 6, 0.5), pos=(0, 0, 0.5)),
                             material=gs.materials.PBD.Cloth())
    scene.build(n_envs=n_envs)
    return scene, cloth


def test_fixed_particles_hold_and_release_per_environment(tmp_path):
    scene, cloth = small_cloth(tmp_path, n_envs=3)
    corner = int(cloth.find_closest_particle((-0.25, -0.25, 0.5))[0])
    assert corner == 0
    cloth.fix_particles([corner], envs_idx=[1])
    assert cloth.get_particles_free()[:, corner].tolist() == [1, 0, 1]
    for _ in range(20):
        scene.step()
    x = cloth.get_particles_pos()
    assert torch.equal(x[1, corner], torch.tensor([-0.25, -0.25, 0.5], dtype=torch.float64))
    assert float(x[0, corner, 2]) < 0.495 and torch.equal(x[0], x[2])  # the others fell, alike
    cloth.release_particle(corner, envs_idx=[1])
    for _ in range(5):
        scene.step()
    assert float(cloth.get_particles_pos()[1, corner, 2]) < 0.5
    with pytest.raises(gs.OptionError):
        cloth.fix_particles([99])
    with pytest.raises(gs.OptionError):
        cloth.fix_particles([0], envs_idx=[5])


def test_a_fixed_particle_with_a_velocity_drives_the_cloth(tmp_path):
    scene, cloth = small_cloth(tmp_path, gravity=(0, 0, 0))
    cloth.fix_particles([0])
    cloth.set_particles_vel(torch.tensor([[0.5, 0.0, 0.0]], dtype=torch.float64), particles_idx_local=[0])
    for _ in range(50):  # 0.1 s
        scene.step()
    assert float(cloth.get_particles_pos()[0, 0]) == pytest.approx(-0.25 + 0.05, abs=1e-12)
    assert float(cloth.get_pos()[0]) > 0.01  # it pulled the rest along


def test_compliances_are_state_per_environment(tmp_path):
    scene, cloth = small_cloth(tmp_path, n_envs=2)
    cloth.fix_particles([0, 5])
    cloth.set_compliances(stretch=[1e-7, 1e-1], envs_idx=None)
    for _ in range(200):
        scene.step()
    s, b, v = cloth.get_compliances()
    assert s.tolist() == [1e-7, 1e-1] and b.tolist() == [1e-5, 1e-5]
    x = cloth.get_particles_pos()
    assert float(x[1, :, 2].min()) < float(x[0, :, 2].min()) - 0.01  # the softer cloth sags further
    with pytest.raises(gs.InvalidStateError):
        cloth.set_compliances(stretch=-1.0)


def test_constraints_and_collisions_keep_momentum(tmp_path):
    """Gravity off, far from the walls, no air drag: a cloth thrown at an elastic cube; the stretch, bending, volume
    and collision corrections keep the total linear momentum to 1e-9 relative."""
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=2e-3, substeps=4, gravity=(0, 0, 0)),
                     pbd_options=gs.options.PBDOptions(lower_bound=(-1, -1, -1), upper_bound=(1, 1, 1),
                                                       particle_size=0.02))
    cloth = scene.add_entity(gs.morphs.Mesh(file=pbd_meshes.flat(tmp_path / "c.obj", 11, 0.2), pos=(0, 0, 0.1),
                                            euler=(0, 90, 0)), material=gs.materials.PBD.Cloth(air_resistance=0.0))
    cube = scene.add_entity(gs.morphs.Box(pos=(0.12, 0, 0.1), size=(0.1, 0.1, 0.1), maxvolume=1e-4),
                            material=gs.materials.PBD.Elastic(stretch_compliance=1e-5, volume_compliance=1e-6))
    scene.build()
    cloth.set_velocity(torch.tensor([1.5, 0.0, 0.1], dtype=torch.float64))
    m = scene.pbd_solver.p_mass

    def momentum():
        return torch.cat([cloth.get_particles_vel(), cube.get_particles_vel()]).mul(m[:, None]).sum(0)

    p0 = momentum()
    for _ in range(40):
        scene.step()
        assert torch.allclose(momentum(), p0, rtol=0, atol=1e-9 * float(p0.norm()))
    assert float(cube.get_particles_vel()[:, 0].mean()) > 0.2  # the cloth pushed the cube


def test_rigid_pbd_coupling_conserves_momentum_without_gravity(tmp_path):
    """A cloth thrown at a free rigid box, gravity off: the cloth's and the box's momentum (with the impulses the
    box has yet to apply) sum to the initial one to 1e-6."""
    pytest.importorskip("genesis_rigid", reason="the rigid plugin (genesis-rigid) is not installed")
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=1e-3, substeps=2, gravity=(0, 0, 0)),
                     pbd_options=gs.options.PBDOptions(lower_bound=(-1, -1, -1), upper_bound=(1, 1, 1)))
    cloth = scene.add_entity(gs.morphs.Mesh(file=pbd_meshes.flat(tmp_path / "c.obj", 11, 0.2), pos=(-0.1, 0, 0),
                                            euler=(0, 90, 0)), material=gs.materials.PBD.Cloth(rho=1.0, air_resistance=0.0))
    box = scene.add_entity(gs.morphs.Box(pos=(0.0, 0.0, 0.0), size=(0.1, 0.1, 0.1)), material=gs.materials.Rigid(rho=50))
    scene.build()
    cloth.set_velocity(torch.tensor([2.0, 0.0, 0.3], dtype=torch.float64))
    m = scene.pbd_solver.p_mass
    moved = []
    check_momentum_exchange(scene, lambda: (cloth.get_particles_vel() * m[:, None]).sum(0),
                            lambda: box_momentum(scene, box, 50 * 0.1 ** 3), 60, rtol=1e-6,
                            after_step=lambda i: moved.append(float(box.get_vel()[0]) > 0.05))
    assert any(moved), "the cloth never pushed the box"


def test_rope_from_line_segments(tmp_path):
    path = pbd_meshes.rope(tmp_path / "r.obj", 5, 0.4)
    scene = gs.Scene(pbd_options=gs.options.PBDOptions(lower_bound=(-1, -1, -1), upper_bound=(1, 1, 1)))
    rope = scene.add_entity(gs.morphs.Mesh(file=path, pos=(0, 0, 0.5)), material=gs.materials.PBD.Cloth(rho=0.5))
    scene.build()
    assert rope.n_particles == 5 and rope.n_edges == 4 and rope.faces.shape == (0, 3) and rope.mesh is None
    assert rope.get_mass() == pytest.approx(0.5 * 0.4)
    assert scene.pbd_solver.p_mass.tolist() == pytest.approx([0.025, 0.05, 0.05, 0.05, 0.025])


def rope_on_box(tmp_path, gravity, n_envs=0):
    pytest.importorskip("genesis_rigid", reason="the rigid plugin (genesis-rigid) is not installed")
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=1e-3, substeps=2, gravity=gravity),
                     pbd_options=gs.options.PBDOptions(lower_bound=(-2, -2, -2), upper_bound=(2, 2, 2)))
    box = scene.add_entity(gs.morphs.Box(pos=(0.0, 0.0, 0.5), size=(0.1, 0.1, 0.1)), material=gs.materials.Rigid(rho=200))
    rope = scene.add_entity(gs.morphs.Mesh(file=pbd_meshes.rope(tmp_path / "r.obj", 6, 0.25), pos=(0.07, 0, 0.5)),
                            material=gs.materials.PBD.Cloth(rho=0.4, air_resistance=0.0, stretch_compliance=1e-6))
    scene.build(n_envs=n_envs)
    rope.fix_particles_to_link(box.base_link_idx, [0])
    return scene, box, rope


def box_momentum(scene, box, mass, env=None):
    """A free rigid box's linear momentum (in environment `env` of a batched scene), counting the impulses the
    coupling handed it (it applies them in its next substep)."""
    vel = box.get_vel() if env is None else box.get_vel()[env]
    pending = scene.rigid_solver.state.at("links_ext_impulse", scene.rigid_solver.frame)[env or 0, :, :3].sum(0)
    return mass * vel.double() + pending.double()


def total_momentum(scene, box, rope, m_box):
    return (rope.get_particles_vel() * scene.pbd_solver.p_mass[:, None]).sum(-2) + box_momentum(scene, box, m_box)


def test_particles_attached_to_a_link_follow_it_and_it_carries_them(tmp_path):
    """A rope hanging 2 cm off the side of a free rigid box, its first particle attached to the box: box and rope
    fall together, the total momentum grows as (M + m) g t (to 1e-6: the link takes exactly the momentum its
    particles lose), and the attached particle stays on its point of the box."""
    scene, box, rope = rope_on_box(tmp_path, (0, 0, -9.81))
    m_box, m_rope = 200 * 0.1 ** 3, rope.get_mass()
    p0 = total_momentum(scene, box, rope, m_box)
    for i in range(1, 101):
        scene.step()
        want = p0 + torch.tensor([0, 0, -(m_box + m_rope) * 9.81 * i * 1e-3], dtype=torch.float64)
        assert torch.allclose(total_momentum(scene, box, rope, m_box), want, rtol=0, atol=1e-6 * float(want.norm()))
    from genesis_core.rotations import quat_to_mat

    top = rope.get_particles_pos()[0]
    R = torch.as_tensor(quat_to_mat(box.get_quat().double().numpy()))
    assert torch.allclose(top, box.get_pos().double() + R @ torch.tensor([0.07, 0.0, 0.0], dtype=torch.float64),
                          atol=1e-9)
    rope.release_particle([0])
    assert int(scene.pbd_solver.state.at("attach_link", 0)[0, 0]) == -1


def test_a_thrown_attached_rope_pulls_its_box_without_gravity(tmp_path):
    """Gravity off, the rope thrown sideways while its first particle is attached to a box in environment 1 only:
    there the box is pulled along and the momentum is kept (1e-6); in environment 0 the rope flies off alone."""
    scene, box, rope = rope_on_box(tmp_path, (0, 0, 0), n_envs=2)
    rope.release_particle([0], envs_idx=[0])
    rope.set_velocity(torch.tensor([0.0, 1.0, 0.0], dtype=torch.float64))
    m = scene.pbd_solver.p_mass
    check_momentum_exchange(scene, lambda: (rope.get_particles_vel()[1] * m[:, None]).sum(0),
                            lambda: box_momentum(scene, box, 200 * 0.1 ** 3, env=1), 100, rtol=1e-6)
    v = box.get_vel()
    assert float(v[1, 1]) > 0.05 and float(v[0].norm()) == 0.0


def test_attaching_needs_a_rigid_link(tmp_path):
    scene, cloth = small_cloth(tmp_path)
    with pytest.raises(gs.OptionError, match="no rigid bodies"):
        cloth.fix_particles_to_link(0, [0])
    # a state naming a link is refused too: without rigid bodies only -1 is a link reference
    assert scene.pbd_solver.link_count() == 0
    state = scene.get_state()
    solver_state(state, "PBDSolver").attach_link[3] = 0
    before = scene_fields(scene)
    with pytest.raises(gs.InvalidStateError, match=r"reset: PBDSolver\.attach_link\[index \[3\]\] = 0 is not "
                       r"accepted: expected -1 \(no link\): the scene has no rigid links to follow\. Nothing was "
                       r"changed\."):
        scene.reset(state=state)
    assert_unchanged(scene_fields(scene), before)
    solver_state(state, "PBDSolver").attach_link[3] = -1
    scene.reset(state=state)
    if pytest.importorskip("genesis_rigid", reason="the rigid plugin is not installed"):
        scene, box, rope = rope_on_box(tmp_path, (0, 0, 0))
        with pytest.raises(gs.OptionError, match="link_idx=7"):
            rope.fix_particles_to_link(7, [1])
        with pytest.raises(gs.InvalidStateError):
            scene.pbd_solver.state.set_rows("attach_link", 0, -2, None, (slice(0, 1),), what="attach_link")


@pytest.mark.parametrize("link, expected", LINK_REFUSALS, ids=["link-10**6", "link-count", "link-minus-2"])
def test_a_state_naming_no_rigid_link_is_refused(tmp_path, link, expected):
    """attach_link names a link of the rigid solver or -1: a state or a checkpoint (valid checksum) naming another
    is refused, naming the entry, with the scene bitwise unchanged, and the scene then steps; a valid link and -1
    are accepted."""
    scene, box, rope = rope_on_box(tmp_path, (0, 0, 0), n_envs=2)
    assert scene.pbd_solver.link_count() == 1
    scene.step()
    check_link_reference_rule(scene, "PBDSolver", "attach_link", link, expected, str(tmp_path), rope)


def test_pbd_mpm_coupling_conserves_momentum_without_gravity(tmp_path):
    """A PBD elastic cube thrown into an MPM block, gravity off: the total linear momentum of both stays the
    initial one to 1e-6 while they push each other apart."""
    pytest.importorskip("genesis_mpm", reason="the MPM plugin (genesis-mpm) is not installed")
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=1e-3, substeps=4, gravity=(0, 0, 0)),
                     mpm_options=gs.options.MPMOptions(lower_bound=(0, 0, 0), upper_bound=(0.6, 0.3, 0.3),
                                                       grid_density=40),
                     pbd_options=gs.options.PBDOptions(lower_bound=(-1, -1, -1), upper_bound=(1, 1, 1)))
    block = scene.add_entity(gs.morphs.Box(pos=(0.35, 0.15, 0.15), size=(0.1, 0.1, 0.1)),
                             material=gs.materials.MPM.Elastic(E=5e4))
    cube = scene.add_entity(gs.morphs.Box(pos=(0.2, 0.15, 0.15), size=(0.08, 0.08, 0.08), maxvolume=0.01 ** 3 / 3),
                            material=gs.materials.PBD.Elastic(stretch_compliance=1e-6, volume_compliance=1e-7))
    scene.build()
    cube.set_velocity(torch.tensor([1.5, 0.0, 0.2], dtype=torch.float64))
    m_mpm, m_pbd = scene.mpm_solver.p_mass.double(), scene.pbd_solver.p_mass
    got = check_momentum_exchange(scene, lambda: (block.get_particles_vel() * m_mpm[:, None]).sum(0),
                                  lambda: (cube.get_particles_vel() * m_pbd[:, None]).sum(0), 40, rtol=1e-6)
    assert float(got.a[0]) > 0.2 * float(got.total0[0]), "the cube never pushed the block"
