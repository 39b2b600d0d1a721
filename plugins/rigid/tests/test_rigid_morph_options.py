"""Genesis World's morph options for robot files and meshes: `default_armature` (the rotor inertia every joint of
a file gets where the file gives none), `convexify` and the decomposition thresholds on URDF and MJCF meshes, and
the options accepted with no effect (`batch_fixed_verts`, `requires_jac_and_IK`)."""

import numpy as np
import pytest
import torch

import genesis_core as gs
from genesis_rigid import assets, decompose

from test_rigid_decompose import write_tank

# A hinge without armature, one whose default class gives one, one that gives its own, a ball without, and a free
# root: what default_armature fills in and what it leaves.
ARMS = """<mujoco model="arms">
  <compiler angle="radian"/>
  <default>
    <default class="geared"><joint armature="0.03"/></default>
  </default>
  <worldbody>
    <body name="base" pos="0 0 1">
      <freejoint name="root"/>
      <geom type="box" size="0.1 0.1 0.05" mass="2" contype="0" conaffinity="0"/>
      <body name="a" pos="0.1 0 0">
        <joint name="plain" type="hinge" axis="0 1 0"/>
        <geom type="capsule" fromto="0 0 0 0.2 0 0" size="0.02" mass="0.5" contype="0" conaffinity="0"/>
        <body name="b" pos="0.2 0 0">
          <joint name="by_class" class="geared" type="hinge" axis="0 1 0"/>
          <geom type="capsule" fromto="0 0 0 0.2 0 0" size="0.02" mass="0.4" contype="0" conaffinity="0"/>
          <body name="c" pos="0.2 0 0">
            <joint name="own" type="slide" axis="1 0 0" armature="0.007"/>
            <geom type="sphere" size="0.03" mass="0.2" contype="0" conaffinity="0"/>
            <body name="d" pos="0.05 0 0">
              <joint name="wrist" type="ball"/>
              <geom type="sphere" size="0.02" mass="0.1" contype="0" conaffinity="0"/>
            </body>
          </body>
        </body>
      </body>
    </body>
  </worldbody>
</mujoco>
"""


@pytest.fixture(scope="module")
def arms_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("arms") / "arms.xml"
    path.write_text(ARMS)
    return str(path)


def dof_armature(entity):
    return [float(x) for x in entity.get_dofs_armature()]


def test_default_armature_fills_the_joints_whose_file_gives_none(arms_file):
    scene = gs.Scene()
    default = scene.add_entity(gs.morphs.MJCF(file=arms_file))
    as_file = scene.add_entity(gs.morphs.MJCF(file=arms_file, default_armature=None, pos=(2, 0, 0)))
    other = scene.add_entity(gs.morphs.MJCF(file=arms_file, default_armature=0.25, pos=(4, 0, 0)))
    arm = scene.add_entity(gs.morphs.URDF(file=assets.path("arm.urdf"), fixed=True, pos=(6, 0, 0)))
    bare_arm = scene.add_entity(gs.morphs.URDF(file=assets.path("arm.urdf"), fixed=True, pos=(8, 0, 0),
                                               default_armature=None))
    scene.build()
    free = [0.0] * 6  # (the free root's dofs: a floating base has no rotor)
    # dofs: root (6), plain, by_class, own, wrist (3)
    assert dof_armature(default) == pytest.approx(free + [0.1, 0.03, 0.007] + [0.1] * 3, abs=1e-7)
    assert dof_armature(as_file) == pytest.approx(free + [0.0, 0.03, 0.007] + [0.0] * 3, abs=1e-7)
    assert dof_armature(other) == pytest.approx(free + [0.25, 0.03, 0.007] + [0.25] * 3, abs=1e-7)
    # a URDF has no armature field: every joint's dofs take the default
    assert dof_armature(arm) == pytest.approx([0.1] * arm.n_dofs, abs=1e-7) and arm.n_dofs > 0
    assert dof_armature(bare_arm) == pytest.approx([0.0] * arm.n_dofs, abs=1e-12)


def test_the_armature_is_rotor_inertia_on_the_mass_matrix_diagonal(arms_file):
    """M(default_armature=a) - M(None) = a on the diagonal of the dofs the default fills, 0 elsewhere: the same
    model otherwise (float64, the same pose)."""
    scene = gs.Scene(sim_options=gs.options.SimOptions(gravity=(0, 0, 0)))
    with_rotor = scene.add_entity(gs.morphs.MJCF(file=arms_file, default_armature=0.2))
    without = scene.add_entity(gs.morphs.MJCF(file=arms_file, default_armature=None, pos=(2, 0, 0)))
    scene.build()
    q = torch.tensor([0.3, -0.4, 0.05, 0.9, 0.1, 0.2], dtype=torch.float64)  # plain, by_class, own, wrist (3)
    for e in (with_rotor, without):
        e.set_dofs_position(q, dofs_idx_local=list(range(6, 12)))
    difference = (with_rotor.get_mass_mat() - without.get_mass_mat()).cpu().numpy()
    expected = np.diag([0.0] * 6 + [0.2, 0.0, 0.0] + [0.2] * 3)
    assert np.abs(difference - expected).max() < 1e-9, difference
    # and the motion differs: a torque on the plain hinge accelerates it less with the rotor
    for e in (with_rotor, without):
        e.control_dofs_force(torch.tensor([1.0], dtype=torch.float64), dofs_idx_local=[6])
    scene.step()
    speed = [float(e.get_dofs_velocity()[6]) for e in (with_rotor, without)]
    assert 0 < speed[0] < speed[1], speed


def test_bad_option_values_are_refused_with_the_field_named():
    for bad in (-0.1, float("nan"), float("inf"), "0.1"):
        with pytest.raises(gs.OptionError, match="default_armature"):
            gs.morphs.URDF(file=assets.path("arm.urdf"), default_armature=bad)
    with pytest.raises(gs.OptionError, match="decompose_robot_error_threshold"):
        gs.morphs.MJCF(file=assets.path("pendulum.xml"), decompose_robot_error_threshold=-1)
    with pytest.raises(gs.OptionError, match="convexify"):
        gs.morphs.MJCF(file=assets.path("pendulum.xml"), convexify="yes")
    with pytest.raises(gs.OptionError, match="batch_fixed_verts"):
        gs.morphs.Box(batch_fixed_verts=1)


def test_options_accepted_with_no_effect():
    """batch_fixed_verts and requires_jac_and_IK are Genesis World's memory and feature switches; here every
    entity has Jacobians and fixed bodies sit at their morph's pose in every environment, so both are read and
    change nothing."""
    for morph in (gs.morphs.Box(fixed=True, batch_fixed_verts=False, requires_jac_and_IK=True),
                  gs.morphs.Plane(batch_fixed_verts=True, requires_jac_and_IK=True),
                  gs.morphs.URDF(file=assets.path("arm.urdf"), batch_fixed_verts=True, requires_jac_and_IK=False),
                  gs.morphs.Mesh(file=assets.path("pebble.obj"), batch_fixed_verts=True)):
        assert morph.batch_fixed_verts in (True, False)


TANK_BODY = """<mujoco model="tank">
  <asset><mesh name="tank" file="{tank}"/></asset>
  <worldbody>
    <body name="tank" pos="0 0 0">
      {joint}
      <geom type="mesh" mesh="tank" mass="5"/>
    </body>
  </worldbody>
</mujoco>
"""


@pytest.fixture
def tank_xml(tmp_path, monkeypatch):
    monkeypatch.setenv(decompose.CACHE_ENV, str(tmp_path / "cache"))
    tank = write_tank(tmp_path / "tank.obj")

    def write(joint=""):
        path = tmp_path / f"tank{len(joint)}.xml"
        path.write_text(TANK_BODY.format(tank=tank, joint=joint))
        return str(path)

    return write


def n_collision_geoms(entity):
    return len(entity.robot.bodies[0].geoms)


def test_file_meshes_are_decomposed_as_the_thresholds_say(tank_xml):
    """A one-body file (no articulation) is an object: its non-convex mesh is decomposed at the object threshold
    (0.15) as a Mesh morph's is. An articulated model's meshes keep their hulls (the robot threshold, inf) unless
    decompose_robot_error_threshold asks; convexify=False decomposes whatever the thresholds."""
    scene = gs.Scene()
    static = scene.add_entity(gs.morphs.MJCF(file=tank_xml()))
    assert n_collision_geoms(static) > 4
    hull = scene.add_entity(gs.morphs.MJCF(file=tank_xml(), decompose_object_error_threshold=float("inf")))
    assert n_collision_geoms(hull) == 1
    hinge = '<joint type="hinge" axis="0 0 1"/>'
    robot = scene.add_entity(gs.morphs.MJCF(file=tank_xml(hinge)))
    assert n_collision_geoms(robot) == 1
    robot_parts = scene.add_entity(gs.morphs.MJCF(file=tank_xml(hinge), decompose_robot_error_threshold=0.15))
    assert n_collision_geoms(robot_parts) == n_collision_geoms(static)
    no_convexify = scene.add_entity(gs.morphs.MJCF(file=tank_xml(hinge), convexify=False,
                                                   decompose_robot_error_threshold=float("inf")))
    assert n_collision_geoms(no_convexify) == n_collision_geoms(static)
    # drawn as the file's mesh, not as its parts
    assert [g.name for g in static.robot.bodies[0].visuals] == [static.robot.bodies[0].visuals[0].name]
    assert static.robot.bodies[0].visuals[0].mesh_file is not None


def test_a_ball_lands_on_the_floor_of_a_tank_loaded_from_mjcf(tank_xml):
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=5e-3),
                     rigid_options=gs.options.RigidOptions(max_contacts=128))
    scene.add_entity(gs.morphs.MJCF(file=tank_xml()))
    ball = scene.add_entity(gs.morphs.Sphere(radius=0.05, pos=(0.1, 0.05, 1.0)))
    scene.build()
    for _ in range(300):
        scene.step()
    assert float(ball.get_pos()[2]) == pytest.approx(0.1 + 0.05, abs=5e-3)
