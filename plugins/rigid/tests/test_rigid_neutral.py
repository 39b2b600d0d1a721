"""Self-collision pairs that overlap in the neutral configuration (RigidOptions.enable_neutral_collision)."""

import warnings

import numpy as np
import pytest
import torch

import genesis_core as gs
from genesis_core.rotations import mat_to_quat, quat_to_mat
from genesis_rigid import assets
from genesis_rigid.model import BOX, CAPSULE, SPHERE, GeomDesc
from genesis_rigid.neutral import neutral_link_poses, penetration_depth, world_shape

# a fixed base box; a hinged upper link; a hinged lower link (the base's grandchild, so not adjacent to it) whose
# box "overlap" sinks 3 cm into the base's top and whose box "touch" only touches the base's +x face
ARM = """
<mujoco>
  <worldbody>
    <body name="base" pos="0 0 1">
      <geom name="base_box" type="box" size="0.1 0.1 0.1"/>
      <body name="upper" pos="0 0 0.3">
        <joint name="j1" type="hinge" axis="0 1 0"/>
        <geom type="sphere" size="0.05" mass="1"/>
        <body name="lower" pos="0 0 -0.3">
          <joint name="j2" type="hinge" axis="1 0 0"/>
          <geom name="overlap" type="box" size="0.05 0.05 0.05" pos="0 0 0.12" mass="1"/>
          <geom name="touch" type="box" size="0.05 0.05 0.05" pos="0.15 0 0" mass="1"/>
        </body>
      </body>
    </body>
  </worldbody>
</mujoco>
"""


REF_ARM = """
<mujoco>
  <worldbody>
    <body name="r0" pos="0 2 1" euler="0 0 30">
      <geom type="box" size="0.1 0.1 0.1"/>
      <body name="r1" pos="0.3 0 0" euler="20 0 0">
        <joint name="h" type="hinge" axis="0 1 1" ref="30"/>
        <geom type="capsule" size="0.03 0.1" mass="1"/>
        <body name="r2" pos="0 0.2 0">
          <joint name="s" type="slide" axis="1 0 0" ref="0.1"/>
          <geom type="sphere" size="0.04" mass="1"/>
        </body>
      </body>
    </body>
  </worldbody>
</mujoco>
"""


def build_arm(tmp_path, **rigid):
    path = tmp_path / "arm.xml"
    path.write_text(ARM)
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=1e-2, gravity=(0.0, 0.0, 0.0)),
                     rigid_options=gs.options.RigidOptions(**rigid))
    arm = scene.add_entity(gs.morphs.MJCF(file=str(path)))
    scene.build()
    return scene, arm


def pair_names(scene):
    solver = scene.sim.rigid_solver
    pairs = solver.compiled.arrays["pair_i"][:solver.n_pairs, :2]
    return {frozenset(solver.compiled.geoms[g]["desc"].name for g in p) for p in pairs}


def shape(kind, size, pos, mat=np.eye(3)):
    """A geom as penetration_depth takes it, in the world frame."""
    desc = GeomDesc(name="g", type=kind, size=np.asarray(size, dtype=np.float64))
    return world_shape(desc, np.asarray(pos, dtype=np.float64), mat_to_quat(mat))


def box(half, pos, mat):
    return shape(BOX, half, pos, mat)


def test_penetration_depth_is_the_separating_axis_depth():
    """Face overlap: the depth along the face normal; crossed bars (edge against edge, as the tower's boxes):
    the overlap along the cross product of the edges; apart: negative (the gap)."""
    eye = np.eye(3)
    a = box([0.5, 0.5, 0.5], [0, 0, 0], eye)
    for d in (0.01, 0.2):
        assert penetration_depth(a, box([0.5, 0.5, 0.5], [1.0 - d, 0.3, 0.1], eye)) == pytest.approx(d, abs=1e-12)
    assert penetration_depth(a, box([0.5, 0.5, 0.5], [1.1, 0, 0], eye)) == pytest.approx(-0.1, abs=1e-12)
    # a bar along x and a bar along y, both turned 45 degrees about z, crossed 0.02 deep
    rot = quat_to_mat([np.cos(np.pi / 8), 0.0, 0.0, np.sin(np.pi / 8)])
    bar_x = box([1.0, 0.1, 0.1], [0, 0, 0], rot)
    bar_y = box([0.1, 1.0, 0.1], [0, 0, 0.18], rot)
    assert penetration_depth(bar_x, bar_y) == pytest.approx(0.02, abs=1e-12)
    # two bars standing on an edge (turned 45 degrees about their length), crossed: edge against edge, 3 cm deep;
    # no face normal separates them by that little, only the cross product of the two edges (z)
    diamond = quat_to_mat([np.cos(np.pi / 8), np.sin(np.pi / 8), 0.0, 0.0])
    turn = quat_to_mat([np.cos(np.pi / 4), 0.0, 0.0, np.sin(np.pi / 4)])
    lower = box([1.0, 0.1, 0.1], [0, 0, 0], diamond)
    upper = box([1.0, 0.1, 0.1], [0, 0, 0.2 * np.sqrt(2) - 0.03], turn @ diamond)
    assert penetration_depth(lower, upper) == pytest.approx(0.03, abs=1e-12)


def test_penetration_depth_of_spheres_and_capsules_is_exact():
    """Swept shapes: two spheres (the centre line), a sphere at a box's corner (the corner's direction: apart by
    2 mm, or 2 mm deep), a capsule lying across a box's edge (the edge's perpendicular) and two parallel capsules
    side by side (the perpendicular between their segments), each against the distance computed by hand."""
    r, h = 0.05, 0.1
    assert penetration_depth(shape(SPHERE, [r, 0, 0], [0, 0, 0]), shape(SPHERE, [0.03, 0, 0], [0.07, 0, 0])) == \
        pytest.approx(0.01, abs=1e-12)
    corner = np.array([h, h, h])
    u = np.ones(3) / np.sqrt(3)
    cube = box([h, h, h], [0, 0, 0], np.eye(3))
    for gap in (0.002, -0.002):
        ball = shape(SPHERE, [r, 0, 0], corner + (r + gap) * u)
        assert penetration_depth(cube, ball) == pytest.approx(-gap, abs=1e-12)
        assert penetration_depth(ball, cube) == pytest.approx(-gap, abs=1e-12)
    # a capsule along y over the box's top edge at x = h (the edge along y): its axis 45 degrees out, 3 mm deep
    w = np.array([1.0, 0.0, 1.0]) / np.sqrt(2)
    along_y = quat_to_mat([np.cos(np.pi / 4), np.sin(np.pi / 4), 0.0, 0.0])
    cap = shape(CAPSULE, [r, 0.3, 0], np.array([h, 0, h]) + (r - 0.003) * w, along_y)
    assert penetration_depth(cube, cap) == pytest.approx(0.003, abs=1e-12)
    a = shape(CAPSULE, [r, 0.2, 0], [0, 0, 0])
    b = shape(CAPSULE, [0.02, 0.1, 0], [0.06, 0.0, 0.05])
    assert penetration_depth(a, b) == pytest.approx(0.01, abs=1e-12)


def test_neutral_link_poses_are_the_built_scene_poses(tmp_path):
    """The poses the filter reads are those the kinematics gives the built scene at qpos0: a placed fixed base
    (the arm, moved and turned), a free base (the quadruped, placed by its morph) and a hinge and a slide with a
    ref (at qpos0 = ref the body is where the file puts it)."""
    scene = gs.Scene()
    arm = scene.add_entity(gs.morphs.URDF(file=assets.path("arm.urdf"), fixed=True, pos=(0.3, -0.2, 0.5),
                                          euler=(10.0, 20.0, 30.0)))
    quad = scene.add_entity(gs.morphs.MJCF(file=assets.path("quadruped.xml"), pos=(1.0, 2.0, 0.7)))
    path = tmp_path / "ref.xml"
    path.write_text(REF_ARM)
    ref = scene.add_entity(gs.morphs.MJCF(file=str(path)))
    scene.build()
    assert ref.get_qpos().tolist() == pytest.approx([np.radians(30), 0.1]), "qpos0 of a joint is its ref"
    solver = scene.sim.rigid_solver
    poses = neutral_link_poses(solver.compiled.links, solver.compiled.joints, solver.compiled.qpos0)
    for ent in (arm, quad, ref):
        pos, quat = ent.get_links_pos().double().numpy(), ent.get_links_quat().double().numpy()
        for i in range(ent.n_links):
            p, q = poses[ent.link_start + i]
            np.testing.assert_allclose(p, pos[i], atol=1e-6)
            np.testing.assert_allclose(quat_to_mat(q), quat_to_mat(quat[i]), atol=1e-6)


def test_a_pair_overlapping_at_qpos0_is_dropped_and_the_arm_stays_put(tmp_path):
    """By default the lower link's box sunk into the base is no collision pair (a warning names it) and, with no
    gravity, the arm stays exactly where it is; the box that only touches the base stays a pair. With
    enable_neutral_collision=True the sunk box is a pair and its contact pushes the arm."""
    with pytest.warns(UserWarning, match=r"1 geom pair\(s\) overlap in the neutral configuration.*'base_box'.*"
                                         r"'overlap'"):
        scene, arm = build_arm(tmp_path)
    names = pair_names(scene)
    assert frozenset({"base_box", "overlap"}) not in names and frozenset({"base_box", "touch"}) in names
    for _ in range(30):
        scene.step()
    assert arm.get_qpos().abs().max() == 0.0 and arm.get_dofs_velocity().abs().max() == 0.0

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        scene, arm = build_arm(tmp_path, enable_neutral_collision=True)
    assert {frozenset({"base_box", "overlap"}), frozenset({"base_box", "touch"})} <= pair_names(scene)
    for _ in range(30):
        scene.step()
    assert arm.get_qpos().abs().max() > 1e-3


def test_pairs_of_different_entities_and_without_self_collision_are_not_filtered(tmp_path):
    """Only pairs within one kinematic tree are filtered: two free boxes built overlapping push apart. Without
    self-collision there is nothing to filter and nothing is said."""
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=1e-2, gravity=(0.0, 0.0, 0.0)))
    a = scene.add_entity(gs.morphs.Box(size=(0.2, 0.2, 0.2), pos=(0.0, 0.0, 1.0)))
    b = scene.add_entity(gs.morphs.Box(size=(0.2, 0.2, 0.2), pos=(0.15, 0.0, 1.0)))
    scene.build()
    for _ in range(30):
        scene.step()
    assert b.get_pos()[0] - a.get_pos()[0] > 0.19
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        scene, _ = build_arm(tmp_path, enable_self_collision=False)
    assert not pair_names(scene)


def test_the_panda_drops_its_hand_against_link5_as_genesis_world_does(shared_assets):
    """The Franka's hand sits inside link5's hulls at qpos0: those two pairs go (Genesis World 1.4.5 drops the
    same two for this model); the finger pads, which touch at the closed neutral pose without overlapping, stay
    (Genesis World's voxel test drops them too). Held at its home pose the arm then keeps joint 6 on target."""
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=1e-2))
    with pytest.warns(UserWarning, match="overlap in the neutral configuration") as record:
        panda = scene.add_entity(gs.morphs.MJCF(file=f"{shared_assets}/mjcf/franka_emika_panda/panda.xml"))
        scene.build()
    message = str(next(w.message for w in record if "neutral" in str(w.message)))
    assert message.startswith("RigidSolver: 2 geom pair(s)")
    assert message.count("'link5'") == 2 and message.count("'hand'") == 2
    target = torch.tensor([0.0, 0.0, 0.0, -1.5, 0.0, 1.5, 0.8, 0.04, 0.04], dtype=torch.float64)
    panda.set_dofs_position(target)
    panda.control_dofs_position(target)
    for _ in range(100):
        scene.step()
    assert (panda.get_dofs_position()[:7] - target[:7]).abs().max() < 1e-2
