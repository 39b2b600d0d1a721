"""Hybrid bodies (`gs.materials.Hybrid`): an MPM skin in a shell of `thickness` around a rigid skeleton's
collision geoms, each particle attached to the link of the nearest geom and pulled after it every substep (Genesis
World's rule), the link taking the reaction. In float64, on a one-link arm (a 10 x 2 x 2 cm box on a hinge about
z) and Genesis World's two-link arm where its assets are found.

What the tests check: the skin's geometry (every particle outside the geoms, within thickness of its link's geom,
the groups of a muscle skin one per link); that it follows its link (the follow law's steady lag, derived below);
that a hybrid left alone stays where it is; that its attachments are state (envs_idx, checkpoints, the link rule);
that bad input is refused with the scene unchanged.
"""

import os

import numpy as np
import pytest
import torch

import genesis_core as gs
from genesis_core.testing import (assert_unchanged, check_checkpoint_round_trip, check_link_reference_rule,
                                  check_reset_envs_idx, scene_fields)

ARM = """<?xml version="1.0"?>
<robot name="arm">
  <link name="base"/>
  <link name="arm">
    <inertial><origin xyz="0.05 0 0"/><mass value="0.5"/>
      <inertia ixx="1e-4" ixy="0" ixz="0" iyy="1e-3" iyz="0" izz="1e-3"/></inertial>
    <collision><origin xyz="0.05 0 0"/><geometry><box size="0.1 0.02 0.02"/></geometry></collision>
  </link>
  <joint name="hinge" type="continuous">
    <parent link="base"/><child link="arm"/><axis xyz="0 0 1"/><origin xyz="0 0 0"/>
  </joint>
</robot>
"""
HALF = np.array([0.05, 0.01, 0.01])  # the arm's box, centred 5 cm along the link's x
ORIGIN = (0.15, 0.2, 0.2)  # the hinge
THICKNESS = 0.03


@pytest.fixture(scope="module")
def arm_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("hybrid") / "arm.urdf"
    path.write_text(ARM)
    return str(path)


def arm_scene(arm_file, n_envs=0, dt=1e-2, substeps=10, soft=None, build=True, **hybrid):
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=dt, substeps=substeps),
                     mpm_options=gs.options.MPMOptions(lower_bound=(0, 0, 0), upper_bound=(0.4, 0.4, 0.4),
                                                       grid_density=32, gravity=(0, 0, 0)))
    material = gs.materials.Hybrid(material_rigid=gs.materials.Rigid(gravity_compensation=1.0),
                                   material_soft=soft or gs.materials.MPM.Elastic(E=1e4, nu=0.3),
                                   **{"thickness": THICKNESS, **hybrid})
    robot = scene.add_entity(gs.morphs.URDF(file=arm_file, pos=ORIGIN, fixed=True), material=material)
    if build:
        scene.build(n_envs=n_envs)
    return scene, robot


def box_distance(p):
    """Signed distance of points in the box's frame to the box."""
    q = np.abs(p) - HALF
    return np.linalg.norm(np.maximum(q, 0), axis=-1) + np.minimum(q.max(-1), 0)


def in_link_frame(robot, x):
    """Skin points x [n, 3] (environment 0) in the frame of the arm's box."""
    link = robot.part_rigid.links[1]
    R = gs.utils.geom.quat_to_R(link.get_quat().double()).numpy()
    return (x - link.get_pos().double().numpy()) @ R - np.array([0.05, 0, 0])


def test_skin_fills_the_shell_around_the_geoms(arm_file):
    """Every skin particle lies outside the box and within THICKNESS of it; the shell is filled (its lattice
    count matches the shell's volume, the rounded box's less the box's, to the lattice's surface error), and the
    skeleton's geom is hidden from the particle solvers (Genesis World's needs_coup=False)."""
    scene, robot = arm_scene(arm_file)
    x = robot.part_soft.get_particles_pos().double().numpy()
    d = box_distance(in_link_frame(robot, x))
    assert d.min() > 0 and d.max() <= THICKNESS + 1e-9
    a, b, c, t = *(2 * HALF), THICKNESS
    shell = a * b * c + 2 * t * (a * b + b * c + a * c) + np.pi * t * t * (a + b + c) + 4 / 3 * np.pi * t ** 3 - a * b * c
    n_expected = shell / scene.mpm_solver.particle_size ** 3
    assert abs(len(x) / n_expected - 1) < 0.1, (len(x), n_expected)
    view = scene.rigid_solver.collider_view(0)
    assert view.geom_type.tolist() == [-1]
    links = scene.mpm_solver.state.at("attach_link", scene.mpm_solver.frame)
    assert (links == robot.part_rigid.links[1].idx).all()


def test_skin_follows_its_link_with_the_follow_laws_lag(arm_file):
    """The arm spins about its hinge (no gravity, no control). With soft_dv_coef = 1 and damping = 0 a skin
    particle takes v = (x* - x) / dt after each grid-to-particle, x* its point of the link, then moves h v in the
    next substep (h = dt / substeps): the gap g to its target moving at u obeys g' = g (1 - h / dt) + u h, whose
    steady state is g = u dt. A rigid motion is an affine velocity field, which the APIC transfers carry
    unchanged and which strains nothing, so the skin is the link's motion delayed by dt: each particle's gap is
    omega r dt (r its distance from the hinge), here up to 1.2 mm, checked to 1% of the largest (measured:
    4e-7 m); the skin stays in its shell (pushed out by at most 2 mm by the lag)."""
    scene, robot = arm_scene(arm_file, soft_dv_coef=1.0, damping=0.0)
    omega = 1.0
    robot.part_rigid.set_dofs_velocity([omega])
    mpm = scene.mpm_solver
    st = mpm.state
    for _ in range(30):
        scene.step()
    f = mpm.frame
    x = st.at("pos", f)[0].double()
    com, quat = mpm.link_pose(robot.part_rigid.links[1].idx, "test")
    R = gs.utils.geom.quat_to_R(quat[0].double())
    target = com[0].double() + st.at("attach_local", f)[0].double() @ R.T
    w = float(robot.get_dofs_velocity()[0])
    r = torch.linalg.norm((x - torch.tensor(ORIGIN, dtype=torch.float64))[:, :2], dim=-1)
    gap = torch.linalg.norm(x - target, dim=-1)
    predicted = abs(w) * r * scene.sim_options.dt
    assert 0.5 < w <= omega  # the skin's pull slowed it, a little
    assert float((gap - predicted).abs().max()) < 0.01 * float(predicted.max()), (gap.max(), predicted.max())
    angle = float(robot.get_dofs_position()[0])
    assert angle > 0.2
    d = box_distance(in_link_frame(robot, x.numpy()))
    assert d.min() > -1e-3 and d.max() < THICKNESS + 2e-3


def test_hybrid_left_alone_stays_at_rest(arm_file):
    """No gravity on the skin, the skeleton's weight compensated, no control: after 20 steps every particle and
    the hinge are where they started, to rounding (the follow law's target is the particle itself, up to the
    rotation of its offset through the link's quaternion)."""
    scene, robot = arm_scene(arm_file, damping=1000.0)
    x0 = robot.part_soft.get_particles_pos().clone()
    for _ in range(20):
        scene.step()
    assert float((robot.part_soft.get_particles_pos() - x0).abs().max()) < 1e-12
    assert float(robot.get_dofs_position().abs().max()) < 1e-12


def _spinning(arm_file):
    def make(n_envs):
        scene, robot = arm_scene(arm_file, n_envs=n_envs, substeps=4, soft_dv_coef=0.5)

        def drive(scene, i):
            robot.control_dofs_velocity(torch.linspace(0.5, 1.5, n_envs)[:, None] * (1 + 0.1 * i))

        return scene, drive

    return make


def test_attachments_are_state_envs_idx_and_checkpoints(arm_file, tmp_path):
    """attach_link / attach_local are declared MPM state: a partial reset restores only the environments asked
    for, a checkpoint resumes bitwise in a fresh scene, and a link index outside the scene's links is refused with
    nothing changed."""
    make = _spinning(arm_file)
    check_reset_envs_idx(make, 3, 3, 2, [1])
    check_checkpoint_round_trip(make, 2, 3, 2, str(tmp_path / "hybrid.ckpt"))
    scene, drive = make(2)
    drive(scene, 0)
    scene.step()
    state = scene.get_state()
    mpm = state.solvers_state[scene.solvers.index(scene.mpm_solver)]
    assert mpm.attach_link.shape == (2, scene.mpm_solver.n_particles) and mpm.attach_local.shape[-1] == 3
    robot_links = scene.rigid_solver.n_links
    check_link_reference_rule(scene, "MPMSolver", "attach_link", robot_links,
                              rf"-1 \(no link\) or a link of the rigid solver, 0 <= link < {robot_links}",
                              str(tmp_path), next(e for e in scene.entities if hasattr(e, "get_particles_pos")))


def test_muscle_skin_has_one_group_per_link_and_default_coupling_attaches_nothing(arm_file):
    """An MPM.Muscle skin gets one muscle group per link it wraps (Genesis World's); with use_default_coupling
    the skin is not attached and the skeleton's geoms stay colliders."""
    scene, robot = arm_scene(arm_file, soft=gs.materials.MPM.Muscle(E=1e4))
    assert robot.part_soft.material.n_groups == 1 and (robot.part_soft.get_muscle_group() == 0).all()
    scene, robot = arm_scene(arm_file, use_default_coupling=True)
    assert (scene.mpm_solver.state.at("attach_link", scene.mpm_solver.frame) == -1).all()
    assert scene.rigid_solver.collider_view(0).geom_type.tolist() == [gs.coupler.GEOM_BOX]


def test_bad_hybrid_input_is_refused_with_nothing_changed(arm_file):
    """Bad thickness, damping or soft_dv_coef, a soft material that is not MPM, a rigid material that is not
    Rigid, custom instantiation callbacks, a morph that is not a URDF or MJCF, a skin outside the MPM domain, a
    skin too thin for one particle, and differentiable mode are refused; the scene keeps the entities it had."""
    rigid, soft = gs.materials.Rigid(), gs.materials.MPM.Elastic()
    for bad in (dict(thickness=0.0), dict(thickness=-0.01), dict(thickness=float("nan")), dict(damping=-1.0),
                dict(soft_dv_coef=float("inf")), dict(material_soft=gs.materials.Rigid()),
                dict(material_rigid=soft), dict(func_instantiate_soft_from_rigid=lambda **kw: None)):
        with pytest.raises(gs.OptionError, match=next(iter(bad))):
            gs.materials.Hybrid(**{"material_rigid": rigid, "material_soft": soft, **bad})
    scene, _ = arm_scene(arm_file, build=False)
    entities = [e.name for e in scene.entities]
    per_solver = [len(s.entities) for s in scene.solvers]
    hybrid = gs.materials.Hybrid(material_rigid=rigid, material_soft=soft, thickness=0.02)
    cases = [(gs.morphs.Box(pos=(0.2, 0.2, 0.2), size=(0.1,) * 3), "URDF or gs.morphs.MJCF"),
             (gs.morphs.URDF(file=arm_file, pos=(0.0, 0.2, 0.2), fixed=True), "domain"),
             (gs.morphs.URDF(file=arm_file, pos=(0.2, 0.2, 0.2), fixed=True, scale=1.0), None)]
    thin = gs.materials.Hybrid(material_rigid=rigid, material_soft=soft, thickness=1e-4)
    for morph, match in cases:
        with pytest.raises(gs.OptionError, match=match or "holds no particle"):
            scene.add_entity(morph, material=hybrid if match else thin)
        assert [e.name for e in scene.entities] == entities
        assert [len(s.entities) for s in scene.solvers] == per_solver
    scene.build()
    scene.step()
    grad = gs.Scene(sim_options=gs.options.SimOptions(requires_grad=True),
                    mpm_options=gs.options.MPMOptions(lower_bound=(0, 0, 0), upper_bound=(0.4, 0.4, 0.4)))
    with pytest.raises(gs.OptionError, match="not differentiable"):
        grad.add_entity(gs.morphs.URDF(file=arm_file, pos=ORIGIN, fixed=True), material=hybrid)
    assert grad.entities == []


def test_mpm_options_gravity_and_cpic_are_explicit():
    """MPMOptions(gravity=...) is the particles' own gravity (a free-falling block accelerates at it, not at
    SimOptions'); enable_CPIC=True is accepted with a warning that it is not built."""
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=1e-3, substeps=2),
                     mpm_options=gs.options.MPMOptions(lower_bound=(0, 0, 0), upper_bound=(0.4, 0.4, 0.4),
                                                       grid_density=32, gravity=(0.0, 0.0, -2.0)))
    block = scene.add_entity(gs.morphs.Box(pos=(0.2, 0.2, 0.3), size=(0.06,) * 3), material=gs.materials.MPM.Elastic())
    scene.build()
    for _ in range(10):
        scene.step()
    vz = float(block.get_particles_vel()[:, 2].mean())
    assert vz == pytest.approx(-2.0 * 10 * 1e-3, rel=1e-6)
    with pytest.warns(UserWarning, match="CPIC is not built"):
        gs.options.MPMOptions(enable_CPIC=True)
    with pytest.raises(gs.OptionError, match="enable_CPIC"):
        gs.options.MPMOptions(enable_CPIC="yes")


TWO_LINK = "urdf/simple/two_link_arm.urdf"


def test_genesis_two_link_arm_skin_follows_velocity_commands():
    """Genesis World's tutorial arm (scaled 0.2, thickness 5 cm, damping 1000, the default soft_dv_coef) under a
    velocity command of 0.5 rad/s on both hinges for 0.15 s: both hinges turn with the command's sign, and every
    skin particle stays within its shell (outside its link's box by at most a particle spacing, within thickness
    plus 3 mm)."""
    from genesis_core.morphs import find_file

    if find_file(TWO_LINK)[0] is None:
        pytest.skip(f"{TWO_LINK} (Genesis World's assets) is not on the asset path")
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=3e-3, substeps=10),
                     mpm_options=gs.options.MPMOptions(lower_bound=(0.3, 0.2, 0.0), upper_bound=(1.0, 0.8, 0.6),
                                                       grid_density=32, gravity=(0, 0, 0)))
    robot = scene.add_entity(gs.morphs.URDF(file=TWO_LINK, pos=(0.5, 0.5, 0.3), scale=0.2, fixed=True),
                             material=gs.materials.Hybrid(material_rigid=gs.materials.Rigid(gravity_compensation=1.0),
                                                          material_soft=gs.materials.MPM.Muscle(E=1e4, nu=0.45),
                                                          thickness=0.05, damping=1000.0))
    scene.build()
    for _ in range(50):
        robot.control_dofs_velocity([0.5] * robot.n_dofs)
        scene.step()
    q, v = robot.get_dofs_position(), robot.get_dofs_velocity()
    assert (q > 0.01).all() and (v > 0.1).all() and (v < 0.6).all(), (q, v)
    x = robot.part_soft.get_particles_pos().double()
    group = robot.part_soft.get_muscle_group()
    for k, link in enumerate(robot.part_rigid.links[1:]):
        geom = link.geoms[0]
        R = gs.utils.geom.quat_to_R(geom.get_quat().double())
        p = (x[group == k] - geom.get_pos().double()) @ R
        qd = p.abs() - torch.as_tensor(geom.size, dtype=torch.float64)
        d = torch.linalg.norm(qd.clamp(min=0), dim=-1) + qd.max(-1).values.clamp(max=0)
        assert float(d.min()) > -scene.mpm_solver.particle_size and float(d.max()) < 0.05 + 3e-3, (k, d.min(), d.max())
