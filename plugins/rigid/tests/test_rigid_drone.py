"""Drones (gs.morphs.Drone, genesis_rigid.drone.DroneEntity) on the shipped Crazyflie 2.x (Genesis World's
urdf/drones/cf2x.urdf): thrust KF rpm^2 along each propeller link's z axis at its centre of mass, drag torque KM rpm^2
spin about it, for one step. The references are analytic: one step of the semi-implicit integrator from rest gives
the velocity a dt exactly (float64: 1e-9 relative), with a the acceleration Newton-Euler gives for the forces the
propellers apply at that pose."""

import math
import pickle

import pytest
import torch

import genesis_core as gs
from genesis_core.testing import assert_states_equal

F64 = torch.float64
DT = 0.01
G = 9.81
# the cf2x file's figures: <properties kf km>, the base's mass and inertia, the propellers' inertial origins
KF, KM, MASS, IXX, IZZ = 3.16e-10, 7.94e-12, 0.027, 1.4e-5, 2.17e-5
ARM = 0.028  # prop0 at (ARM, -ARM, 0), prop1 (-ARM, -ARM, 0), prop2 (-ARM, ARM, 0), prop3 (ARM, ARM, 0)
HOVER = math.sqrt(MASS * G / (4 * KF))


def drone_scene(n_envs=0, plane=False, **morph):
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=DT))
    if plane:
        scene.add_entity(gs.morphs.Plane())
    drone = scene.add_entity(gs.morphs.Drone(file="urdf/drones/cf2x.urdf", pos=(0.0, 0.0, 1.0), **morph))
    scene.build(n_envs=n_envs)
    return scene, drone


@pytest.fixture(scope="module")
def hovering():
    """One unbatched cf2x without base damping (default_base_ang_damping_scale=None: the angular references are
    then exact), reset before each use."""
    return drone_scene(default_base_ang_damping_scale=None)


def one_step(scene, drone, rpm, quat=None):
    """(linear, angular) acceleration of the base over one step from rest at `quat`, with the propellers at rpm."""
    scene.reset()
    if quat is not None:
        drone.set_quat(quat)
    drone.set_propellers_rpm(torch.as_tensor(rpm, dtype=F64))
    scene.step()
    return drone.get_vel() / DT, drone.get_ang() / DT


def test_the_shipped_cf2x_reads_genesis_worlds_coefficients(hovering):
    scene, drone = hovering
    assert (drone.KF, drone.KM, drone.model, drone.n_propellers) == (KF, KM, "CF2X", 4)
    assert abs(drone.get_mass() - MASS) < 1e-15
    assert [l.name for l in drone.propellers_link] == ["prop0_link", "prop1_link", "prop2_link", "prop3_link"]
    assert drone.propellers_idx.tolist() == [l.idx for l in drone.propellers_link]
    assert drone.propellers_spin.tolist() == [-1.0, 1.0, -1.0, 1.0]
    assert drone.COM_link_idx == drone.base_link.idx


def test_hover_speed_holds_the_drone_and_more_thrust_lifts_it_at_the_analytic_rate(hovering):
    scene, drone = hovering
    acc, ang = one_step(scene, drone, [HOVER] * 4)
    assert float(acc.abs().max()) < 1e-9 and float(ang.abs().max()) == 0.0
    for factor in (1.1, 0.5, 0.0):
        acc, _ = one_step(scene, drone, [factor * HOVER] * 4)
        want = 4 * KF * (factor * HOVER) ** 2 / MASS - G
        assert abs(float(acc[2]) - want) < 1e-9 * G and float(acc[:2].abs().max()) == 0.0


def test_unbalanced_drag_torques_yaw_the_drone_with_genesis_worlds_sign(hovering):
    """Props 0 and 2 spin clockwise (spin -1): faster, their drag torque KM rpm^2 spin turns the drone clockwise
    (negative yaw) at sum(KM rpm_i^2 spin_i) / I_zz, while the total thrust lifts it; no roll or pitch (the faster
    pair sits on a diagonal)."""
    scene, drone = hovering
    rpm = [1.1 * HOVER, HOVER, 1.1 * HOVER, HOVER]
    acc, ang = one_step(scene, drone, rpm)
    spin = [-1, 1, -1, 1]
    yaw = sum(KM * r * r * s for r, s in zip(rpm, spin)) / IZZ
    assert yaw < 0 and abs(float(ang[2]) - yaw) < 1e-9 * abs(yaw)
    assert float(ang[:2].abs().max()) < 1e-9 * abs(yaw)
    assert abs(float(acc[2]) - (KF * sum(r * r for r in rpm) / MASS - G)) < 1e-9 * G


def test_one_faster_propeller_tips_the_drone_about_its_arm(hovering):
    """The thrust acts at the propeller's centre of mass (the URDF's inertial origin, ARM from the base's): prop0
    at (ARM, -ARM, 0) pushing up by dF gives the torque (-ARM dF, -ARM dF, 0), and its drag torque yaws."""
    scene, drone = hovering
    rpm = [1.1 * HOVER, HOVER, HOVER, HOVER]
    _, ang = one_step(scene, drone, rpm)
    extra = KF * (rpm[0] ** 2 - HOVER ** 2)
    want = torch.tensor([-ARM * extra / IXX, -ARM * extra / IXX, -KM * (rpm[0] ** 2 - HOVER ** 2) / IZZ], dtype=F64)
    assert float((ang - want).abs().max()) < 1e-9 * float(want.abs().max())


def test_a_tilted_drone_accelerates_along_its_thrust(hovering):
    """Rolled by 10 degrees at the hover speed, the thrust m g along the body's z axis (0, -sin, cos) leaves the
    acceleration g (0, -sin 10, cos 10 - 1)."""
    scene, drone = hovering
    half = math.radians(10) / 2
    acc, ang = one_step(scene, drone, [HOVER] * 4, quat=[math.cos(half), math.sin(half), 0.0, 0.0])
    want = torch.tensor([0.0, -G * math.sin(2 * half), G * (math.cos(2 * half) - 1)], dtype=F64)
    assert float((acc - want).abs().max()) < 1e-9 * G and float(ang.abs().max()) < 1e-9


def test_speeds_last_one_step_and_a_second_call_before_it_is_refused(hovering):
    """Genesis World's rule: set once per step; a step without a call has no thrust (free fall)."""
    scene, drone = hovering
    scene.reset()
    drone.set_propellers_rpm([HOVER] * 4)
    before = scene.get_state()
    with pytest.raises(gs.SceneError, match="once per step"):
        drone.set_propellers_rpm([HOVER] * 4)
    assert_states_equal(before, scene.get_state(), what="a refused second call changed the state")
    scene.step()
    assert float(drone.get_vel().abs().max()) < 1e-12
    scene.step()  # no call: gravity alone
    assert abs(float(drone.get_vel()[2]) + G * DT) < 1e-12
    drone.set_propellels_rpm([HOVER] * 4)  # (the spelling of Genesis World's earlier releases)
    with pytest.raises(gs.SceneError):
        drone.set_propellers_rpm([HOVER] * 4)


@pytest.mark.parametrize("bad, match", [
    ([HOVER] * 3, "shape"), ([[HOVER] * 4] * 2, "shape"), ([-1.0, HOVER, HOVER, HOVER], ">= 0"),
    ([math.nan, HOVER, HOVER, HOVER], "finite"), ([HOVER, math.inf, HOVER, HOVER], "finite"), ("fast", "numbers"),
])
def test_bad_speeds_are_refused_with_nothing_changed(hovering, bad, match):
    scene, drone = hovering
    scene.reset()
    before = scene.get_state()
    with pytest.raises(gs.OptionError, match=match):
        drone.set_propellers_rpm(bad)
    assert_states_equal(before, scene.get_state(), what="a refused call changed the state")
    drone.set_propellers_rpm([HOVER] * 4)  # (the refused call used up nothing: the step's call still goes through)


def test_envs_idx_sets_only_the_environments_listed():
    scene, drone = drone_scene(n_envs=3)
    applied = scene.rigid_solver.state.tensors["links_applied_wrench"]
    drone.set_propellers_rpm([2 * HOVER] * 4, envs_idx=[1])
    assert not applied[[0, 2]].any() and applied[1].any()
    drone.set_propellers_rpm(torch.full((2, 4), HOVER, dtype=F64), envs_idx=[0, 2])  # the others, same step
    row1 = applied[1].clone()
    with pytest.raises(gs.SceneError, match=r"environments \[2, 1\]"):
        drone.set_propellers_rpm([HOVER] * 4, envs_idx=[2, 1])
    assert torch.equal(applied[1], row1)
    scene.step()
    vz = drone.get_vel()[:, 2]
    assert abs(float(vz[1]) - 3 * G * DT) < 1e-9 and float(vz[[0, 2]].abs().max()) < 1e-12
    # a batched call: one row per environment, or one row for all
    drone.set_propellers_rpm([HOVER] * 4)
    scene.step()
    with pytest.raises(gs.OptionError, match="shape"):
        drone.set_propellers_rpm(torch.full((2, 4), HOVER, dtype=F64))


def test_the_speeds_set_are_state_snapshots_resets_and_checkpoints_carry(tmp_path):
    """The step's wrenches sit in the state's links_applied_wrench: a snapshot taken after set_propellers_rpm
    and restored steps as the original did, bit for bit, in every environment or in the ones reset; the "once
    per step" rule starts again after a restore; a checkpoint carries them to another scene."""
    scene, drone = drone_scene(n_envs=2, plane=True)
    rpm = torch.tensor([[1.2 * HOVER, HOVER, 0.9 * HOVER, HOVER], [HOVER, 1.05 * HOVER, HOVER, 0.97 * HOVER]],
                       dtype=F64)
    drone.set_propellers_rpm(rpm)
    snap = scene.get_state()
    path = tmp_path / "drone.pkl"
    scene.save_checkpoint(path)
    trajectory = []
    for k in range(5):
        scene.step()
        trajectory.append(scene.get_state())
        drone.set_propellers_rpm(rpm)
    scene.reset(snap)
    again = []
    for k in range(5):
        scene.step()
        again.append(scene.get_state())
        drone.set_propellers_rpm(rpm)
    for a, b in zip(trajectory, again):
        assert_states_equal(a, b, what="stepping from the restored snapshot")
    # one environment restored: it steps as before (its snapshot holds its speeds), the other keeps its course
    scene.reset(trajectory[3])
    scene.reset(snap, envs_idx=[1])
    drone.set_propellers_rpm(torch.zeros(4, dtype=F64), envs_idx=[0])
    scene.step()
    qpos, vel = drone.get_qpos(), drone.get_dofs_velocity()
    rigid = scene.solvers.index(scene.rigid_solver)
    first = trajectory[0].solvers_state[rigid]
    assert torch.equal(qpos[1], first.qpos[1]) and torch.equal(vel[1], first.dofs_vel[1])
    assert not torch.equal(qpos[0], first.qpos[0])
    # the checkpoint, in a scene built the same way
    scene2, drone2 = drone_scene(n_envs=2, plane=True)
    scene2.load_checkpoint(path)
    scene2.step()
    assert_states_equal(trajectory[0], scene2.get_state(), what="stepping from the checkpoint")
    pickle.loads(pickle.dumps(snap.serializable()))


def test_base_damping_and_the_race_model_follow_genesis_world():
    """default_base_ang_damping_scale (1e-5) times the mass damps the free joint's rotation dofs only; a "RACE"
    drone's drag torque has the opposite sign."""
    scene, drone = drone_scene(n_envs=0, model="RACE")
    damping = drone.get_dofs_damping()
    assert damping[:3].tolist() == [0.0] * 3 and torch.allclose(damping[3:], torch.full((3,), MASS * 1e-5, dtype=F64))
    drone.set_propellers_rpm([1.1 * HOVER, HOVER, 1.1 * HOVER, HOVER])
    scene.step()
    assert float(drone.get_ang()[2]) > 0  # (clockwise pair faster: a CF2X yaws negative)


def test_drone_morph_and_file_errors(tmp_path):
    with pytest.raises(gs.OptionError, match="propellers_spin"):
        gs.morphs.Drone(file="urdf/drones/cf2x.urdf", propellers_spin=(1, -1, 1))
    with pytest.raises(gs.OptionError, match="propellers_spin"):
        gs.morphs.Drone(file="urdf/drones/cf2x.urdf", propellers_spin=(1, 0, 1, -1))
    with pytest.raises(gs.OptionError, match="model"):
        gs.morphs.Drone(file="urdf/drones/cf2x.urdf", model="X500")
    morph = gs.morphs.Drone(file="urdf/drones/cf2x.urdf", links_to_keep=["base_link"])
    assert morph.links_to_keep == ("base_link", "prop0_link", "prop1_link", "prop2_link", "prop3_link")
    with pytest.warns(UserWarning, match="deprecated"):
        old = gs.morphs.Drone(file="urdf/drones/cf2x.urdf", propellers_link_names=("prop1_link", "prop0_link"),
                              propellers_spin=(1, -1))
    assert old.propellers_link_name == ("prop1_link", "prop0_link")
    scene = gs.Scene()
    with pytest.raises(gs.OptionError, match="propellers_link_name names links"):
        scene.add_entity(gs.morphs.Drone(file="urdf/drones/cf2x.urdf", propellers_link_name=("rotor",),
                                         propellers_spin=(1,)))
    source = gs.morphs.Drone(file="urdf/drones/cf2x.urdf").file
    text = open(source).read()
    bare = tmp_path / "bare.urdf"
    bare.write_text(text.replace("<properties", "<notes"))
    with pytest.raises(gs.ModelFileError, match="no <properties"):
        scene.add_entity(gs.morphs.Drone(file=str(bare)))
    negative = tmp_path / "negative.urdf"
    negative.write_text(text.replace('kf="3.16e-10"', 'kf="-1"'))
    with pytest.raises(gs.ModelFileError, match="kf"):
        scene.add_entity(gs.morphs.Drone(file=str(negative)))
    with pytest.raises(gs.OptionError, match="heterogeneous"):
        cf2x = gs.morphs.Drone(file="urdf/drones/cf2x.urdf")
        scene.add_entity([cf2x, cf2x])
    assert not scene.entities
