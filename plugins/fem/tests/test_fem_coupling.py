"""FEM coupled with other solvers: rigid bodies (the kit's contact), MPM (the kit's grid exchange)."""

import pytest
import torch

import genesis_core as gs
from genesis_core.testing import (LINK_REFUSALS, assert_unchanged, check_link_reference_rule,
                                  check_momentum_exchange, scene_fields, solver_state)


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
    got = check_momentum_exchange(scene, lambda: (block.get_particles_vel() * m_mpm[:, None]).sum(0),
                                  lambda: (cube.get_particles_vel() * m_fem[:, None]).sum(0), 40, rtol=1e-6)
    assert float(got.a[0]) > 0.2 * float(got.total0[0]), "the cube never pushed the block"
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


def link_scene(n_envs=2):
    """A rigid box (the rigid solver's one link) and a soft FEM cube below it, gravity off."""
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=1e-3, substeps=2, gravity=(0, 0, 0)),
                     fem_options=gs.options.FEMOptions(damping=0.0))
    box = scene.add_entity(gs.morphs.Box(pos=(0.0, 0.0, 0.5), size=(0.1, 0.1, 0.1)))
    cube = scene.add_entity(gs.morphs.Box(pos=(0.0, 0.0, 0.4), size=(0.08, 0.08, 0.08), maxvolume=2e-5),
                            material=gs.materials.FEM.Elastic(E=2e4, nu=0.3))
    scene.build(n_envs=n_envs)
    return scene, box, cube


@pytest.mark.parametrize("n_envs", [0, 2])
def test_vertices_follow_a_rigid_link(n_envs):
    """set_vertex_constraints(link=...): a soft cube's top vertices keep their place relative to a spinning,
    drifting rigid box (gravity off), to round-off, every step; the box is not affected (one-way: its
    angular momentum stays its own); remove_vertex_constraints lets them go."""
    scene, box, cube = link_scene(n_envs)
    x0 = cube.get_state().pos.reshape(-1, 3)[: cube.n_vertices] if n_envs == 0 else cube.get_state().pos[0]
    top = torch.nonzero(x0[:, 2] > x0[:, 2].max() - 1e-9).flatten()
    assert len(top) >= 4
    link = box.links[0]
    cube.set_vertex_constraints(top, link=link)
    v = torch.tensor([0.3, -0.2, 0.1, 1.0, 2.0, 3.0], dtype=torch.float64)
    box.set_dofs_velocity(v if n_envs == 0 else v.expand(n_envs, 6))
    x_top0 = x0[top] if n_envs == 0 else cube.get_state().pos[:, top]
    com0, quat0 = box.get_pos(), box.get_quat()

    def local(x, com, quat):
        return gs.utils.geom.inv_transform_by_quat(x - com[..., None, :], quat[..., None, :])

    ref = local(x_top0, com0, quat0)
    for _ in range(40):
        scene.step()
        pos = cube.get_state().pos
        x_top = pos[..., top, :] if n_envs else pos.reshape(-1, 3)[top]
        assert torch.allclose(local(x_top, box.get_pos(), box.get_quat()), ref, atol=1e-12)
    # the box moved and turned as a free box does (its linear velocity unchanged)
    assert torch.allclose(box.get_vel(), v[:3].expand_as(box.get_vel()), atol=1e-12)
    assert float((box.get_pos() - com0).norm()) > 0.01
    cube.remove_vertex_constraints()
    for _ in range(5):
        scene.step()
    pos = cube.get_state().pos
    x_top = pos[..., top, :] if n_envs else pos.reshape(-1, 3)[top]
    assert (local(x_top, box.get_pos(), box.get_quat()) - ref).abs().max() > 1e-4  # they no longer follow


def test_following_a_link_needs_a_rigid_scene_and_a_link():
    scene = gs.Scene(fem_options=gs.options.FEMOptions())
    cube = scene.add_entity(gs.morphs.Box(pos=(0.0, 0.0, 0.4), size=(0.08, 0.08, 0.08), maxvolume=2e-5),
                            material=gs.materials.FEM.Elastic())
    scene.build()
    with pytest.raises(gs.OptionError, match="no rigid bodies"):
        cube.set_vertex_constraints([0], link=0)
    with pytest.raises(gs.OptionError, match="RigidLink or a link index"):
        cube.set_vertex_constraints([0], link="hand")
    # a state naming a link is refused too: without rigid bodies only -1 is a link reference
    assert scene.fem_solver.link_count() == 0
    state = scene.get_state()
    fem = solver_state(state, "FEMSolver")
    fem.cons[3], fem.cons_link[3] = 1, 0
    before = scene_fields(scene)
    with pytest.raises(gs.InvalidStateError, match=r"reset: FEMSolver\.cons_link\[index \[3\]\] = 0 is not accepted: "
                       r"expected -1 \(no link\): the scene has no rigid links to follow\. Nothing was changed\."):
        scene.reset(state=state)
    assert_unchanged(scene_fields(scene), before)
    fem.cons_link[3] = -1
    scene.reset(state=state)
    scene.step()


@pytest.mark.parametrize("link, expected", LINK_REFUSALS, ids=["link-10**6", "link-count", "link-minus-2"])
def test_a_state_naming_no_rigid_link_is_refused(tmp_path, link, expected):
    """cons_link names a link of the rigid solver or -1: a state or a checkpoint (valid checksum) naming another
    is refused, naming the entry, with the scene bitwise unchanged, and the scene then steps; a valid link and -1
    are accepted."""
    scene, box, cube = link_scene()
    assert scene.fem_solver.link_count() == 1
    cube.set_vertex_constraints([0, 1], link=box.links[0])
    scene.step()
    check_link_reference_rule(scene, "FEMSolver", "cons_link", link, expected, str(tmp_path), cube)
