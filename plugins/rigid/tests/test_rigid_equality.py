"""Equality constraints: MJCF <equality> (connect, weld, joint, tendon) against MuJoCo, and the welds added and
removed at run time (add_weld_constraint), per environment, through snapshots and checkpoints.

MuJoCo's equalities are soft (solref, solimp); ours are exact (bilateral rows, drift undone by the position pass).
Both are first-order discretisations of the same closed-loop dynamics, so the difference between the two engines'
trajectories shrinks in proportion to the step: that is what the comparison checks (measured over 0.5 s, Euler in
both, MuJoCo at its stiffest solref: 2.8e-3 / 1.1e-3 / 4.4e-4 rad for the four-bar at dt = 2, 1, 0.5 ms; 1.2e-2 /
6.0e-3 / 3.0e-3 for the welded box; 2.3e-3 / 1.2e-3 / 5.8e-4 for the joint coupling; 3.6e-5 / 9.0e-6 / 2.3e-6 for
the tendon coupling)."""

import os

import numpy as np
import pytest
import torch

import genesis_core as gs
from genesis_core.rotations import quat_to_mat

mujoco = pytest.importorskip("mujoco")

XML = os.path.join(os.path.dirname(__file__), "data", "equalities.xml")
# qpos entries of each mechanism of equalities.xml
BLOCKS = {"connect": [0, 1, 2], "weld": list(range(3, 11)), "joint": [11, 12], "tendon": [13, 14]}
DURATION = 0.5


def _differences(dt):
    """The largest |q - q_mujoco| of each mechanism over DURATION at step dt, and the largest violation of the
    connect (m) and of the weld's point (m) in our run."""
    model = mujoco.MjModel.from_xml_path(XML)
    data = mujoco.MjData(model)
    model.opt.timestep = dt
    model.opt.integrator = mujoco.mjtIntegrator.mjINT_EULER
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=dt))
    robot = scene.add_entity(gs.morphs.MJCF(default_armature=None, file=XML))
    scene.build()
    solver = scene.rigid_solver
    data_eq = solver.state.at("eq_data", 0)[0].double().numpy()
    links = {name: robot.get_link(name).idx for name in ("coupler", "rocker", "box", "arm")}
    diff = dict.fromkeys(BLOCKS, 0.0)
    violation = 0.0
    for _ in range(int(round(DURATION / dt))):
        mujoco.mj_step(model, data)
        scene.step()
        q = robot.get_qpos().numpy()
        for name, idx in BLOCKS.items():
            diff[name] = max(diff[name], float(np.abs(q[idx] - data.qpos[idx]).max()))
        pos, quat = solver.get_links_pos().double().numpy(), solver.get_links_quat().double().numpy()
        for slot, (a, b) in enumerate((("coupler", "rocker"), ("box", "arm"))):
            p1 = pos[links[a]] + quat_to_mat(quat[links[a]]) @ data_eq[slot, 0:3]
            p2 = pos[links[b]] + quat_to_mat(quat[links[b]]) @ data_eq[slot, 3:6]
            violation = max(violation, float(np.linalg.norm(p1 - p2)))
    return diff, violation


def test_mjcf_equalities_follow_mujoco_closer_as_the_step_shrinks():
    """A four-bar linkage (connect), a free box welded off-axis to a pendulum (weld), a hinge driving another
    through a quadratic (joint) and a slide tied to a hinge (tendon), from rest under gravity: each mechanism's
    difference from MuJoCo halves when the step halves (first order: at most 0.6 of it), and is small at 2 ms;
    the loop and the weld stay closed to 1e-3 m (a row holds the constraint's tangent: the drift of a point
    swinging at v on a radius r is about (v dt)^2 / r a step, undone by a fifth a step: 2.4e-4 m measured; MuJoCo's
    own violation at its stiffest solref, 2e-4 m)."""
    coarse, violation = _differences(2e-3)
    fine, _ = _differences(1e-3)
    bound = {"connect": 1e-2, "weld": 3e-2, "joint": 1e-2, "tendon": 1e-3}
    for name in BLOCKS:
        assert coarse[name] < bound[name], (name, coarse)
        assert fine[name] < 0.6 * coarse[name], (name, coarse, fine)
    assert violation < 1e-3


def test_equalities_change_the_motion_and_hold_their_relations():
    """Without its equalities the same model moves elsewhere (the loop opens, the box falls); with them the joint
    and tendon relations hold: q5 = 1.5 q4 + 0.5 q4^2 to 2e-3 rad (the rows hold the relation's tangent: the
    curvature leaves a drift of about a2 (v dt)^2 a step, which the position pass undoes by a fifth a step: 5e-4
    measured at 10 rad/s) and the linear L1 = -0.4 L2 (L1 = q6, L2 = 0.5 q7) to 1e-5."""
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=2e-3))
    robot = scene.add_entity(gs.morphs.MJCF(default_armature=None, file=XML))
    scene.build()
    solver = scene.rigid_solver
    assert solver.n_equalities == 4 and robot.n_equalities == 4
    for _ in range(100):
        scene.step()
    q = robot.get_qpos().double().numpy()
    assert abs(q[12] - (1.5 * q[11] + 0.5 * q[11] ** 2)) < 2e-3
    assert abs(q[13] - (-0.4 * 0.5 * q[14])) < 1e-5
    assert abs(q[11]) > 0.05  # (it moved)
    box_z = q[5]
    solver.state.at("eq_active", solver.frame)[:] = 0  # all off (MuJoCo's eq_active)
    for _ in range(100):
        scene.step()
    q2 = robot.get_qpos().double().numpy()
    assert q2[5] < box_z - 0.1  # the box falls freely: 0.2 s of free fall from rest on the arm's motion
    assert abs(q2[12] - (1.5 * q2[11] + 0.5 * q2[11] ** 2)) > 1e-2


def _weld_scene(n_envs):
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=1e-2),
                     rigid_options=gs.options.RigidOptions(max_dynamic_constraints=2))
    arm = scene.add_entity(gs.morphs.Box(pos=(0, 0, 1), size=(0.4, 0.05, 0.05), fixed=True))
    box = scene.add_entity(gs.morphs.Box(pos=(0.3, 0, 0.9), size=(0.1, 0.1, 0.1), euler=(0, 0, 20)))
    scene.build(n_envs=n_envs)
    return scene, arm, box


def test_run_time_weld_holds_a_box_in_the_chosen_environments_only():
    """add_weld_constraint(arm, box, envs_idx=[1]): environment 1's box stays where it was welded (within the
    slop, 1e-4 m, below which an equality's drift does not set the position pass going), the
    others fall freely (z - z0 = -g t^2 / 2 at dt = 10 ms: Euler's -g t (t + dt) / 2), bitwise as a scene never
    welded; a snapshot carries the weld (reset to it and step: the same bits); deleting it lets the box fall; a
    weld refused in one environment of several changes none of them."""
    scene, arm, box = _weld_scene(3)
    plain, _, plain_box = _weld_scene(3)
    solver = scene.rigid_solver
    la, lb = arm.links[0].idx, box.links[0].idx
    solver.add_weld_constraint(la, lb, envs_idx=[1])
    with pytest.raises(gs.OptionError, match="already welded"):
        solver.add_weld_constraint(lb, la, envs_idx=[1])
    start = box.get_pos().clone()
    snapshot = scene.get_state()
    for _ in range(30):
        scene.step()
        plain.step()
    pos = box.get_pos()
    assert float((pos[1] - start[1]).norm()) < 1.5e-4
    t = 30 * 1e-2
    expected = start[0, 2] - 9.81 * t * (t + 1e-2) / 2
    assert abs(float(pos[0, 2]) - float(expected)) < 1e-4
    assert torch.equal(pos[[0, 2]], plain_box.get_pos()[[0, 2]])
    welds = solver.get_weld_constraints()
    assert welds["link_a"].tolist() == [[-1], [la], [-1]] and welds["link_b"].tolist() == [[-1], [lb], [-1]]
    # (the force on link_a, the arm: the box's weight)
    assert float(welds["force"][1, 0, 2]) == pytest.approx(-float(box.get_mass()) * 9.81, rel=1e-3)
    end = scene.get_state()
    scene.reset(state=snapshot)
    for _ in range(30):
        scene.step()
    assert torch.equal(box.get_pos(), pos)
    scene.reset(state=end)
    solver.delete_weld_constraint(la, lb)
    for _ in range(10):
        scene.step()
    assert float(box.get_pos()[1, 2]) < float(start[1, 2]) - 0.04
    solver.add_weld_constraint(la, lb, envs_idx=[0])
    before = {k: solver.state.at(k, 0).clone() for k in ("eq_type", "eq_obj", "eq_data", "eq_active")}
    with pytest.raises(gs.OptionError, match="already welded"):
        solver.add_weld_constraint(la, lb, envs_idx=[0, 2])
    for k, v in before.items():
        assert torch.equal(solver.state.at(k, 0), v)


def test_weld_slots_run_out_with_a_clear_error():
    """With max_dynamic_constraints=0 a run-time weld is refused, naming the option."""
    scene = gs.Scene(rigid_options=gs.options.RigidOptions(max_dynamic_constraints=0))
    a = scene.add_entity(gs.morphs.Box(pos=(0, 0, 1), size=(0.1,) * 3))
    b = scene.add_entity(gs.morphs.Box(pos=(0, 0, 2), size=(0.1,) * 3))
    scene.build()
    with pytest.raises(gs.OptionError, match="max_dynamic_constraints"):
        scene.rigid_solver.add_weld_constraint(a.links[0].idx, b.links[0].idx)
    with pytest.raises(gs.OptionError, match="link2_idx"):
        scene.rigid_solver.add_weld_constraint(0, 99)


def test_equality_state_is_validated_on_the_way_in():
    """A state whose slot names a link the model lacks, or a kind the engine lacks, is refused by reset, naming
    the key, with nothing changed."""
    scene, arm, box = _weld_scene(2)
    state = scene.get_state()
    rigid = state.solvers_state[scene.solvers.index(scene.rigid_solver)]
    bad = rigid.eq_obj.clone()
    bad[1, 0] = torch.tensor([0, 7])
    rigid.eq_type[1, 0] = 2
    rigid.eq_obj = bad
    before = scene.rigid_solver.state.at("eq_obj", 0).clone()
    with pytest.raises(gs.GenesisError, match="eq_obj"):
        scene.reset(state=state)
    assert torch.equal(scene.rigid_solver.state.at("eq_obj", 0), before)


@pytest.mark.parametrize("element, message", [
    ('<connect body1="nope" body2="rocker"/>', "body1"),
    ('<weld body1="box" body2="nope"/>', "unknown body"),
    ('<joint joint1="j4" joint2="nope"/>', "unknown joint"),
    ('<flex flex="x"/>', "not modelled"),
    ('<joint joint1="j4" polycoef="0 1 2 3 4 5"/>', "polycoef"),
])
def test_bad_equalities_are_refused_by_name(tmp_path, element, message):
    text = open(XML).read().replace('<connect body1="coupler" body2="rocker" anchor="0.3 0 0.3"/>', element)
    path = tmp_path / "bad.xml"
    path.write_text(text)
    scene = gs.Scene()
    with pytest.raises(gs.ModelFileError, match=message):
        scene.add_entity(gs.morphs.MJCF(default_armature=None, file=str(path)))


def test_gradients_through_every_kind_of_equality_match_differences():
    """Differentiable mode: the forward with the equalities is the plain one (the same loss to 1e-12), and the
    gradient of a weighted sum of the final positions and velocities w.r.t. the initial velocities (connect, weld,
    joint and tendon rows, the position pass on their drift, and their warm starts, over 20 steps) matches central
    differences to 1e-4 (measured ~1e-8)."""
    from genesis_core.testing import assert_close_rel, central_differences

    def build(requires_grad):
        scene = gs.Scene(sim_options=gs.options.SimOptions(dt=5e-3, requires_grad=requires_grad),
                         rigid_options=gs.options.RigidOptions(iterations=30))
        robot = scene.add_entity(gs.morphs.MJCF(default_armature=None, file=XML))
        scene.build()
        return scene, robot

    (scene, robot), (ref, ref_robot) = build(True), build(False)
    weights = torch.as_tensor(np.random.default_rng(3).normal(size=2 * robot.n_dofs))

    def rollout(scene, robot, v0):
        robot.set_dofs_velocity(v0)
        for _ in range(20):
            scene.step()
        return (torch.cat([robot.get_dofs_position(), robot.get_dofs_velocity()]) * weights).sum()

    v00 = torch.as_tensor(np.random.default_rng(4).normal(size=robot.n_dofs)) * 0.5
    v0 = v00.clone().requires_grad_(True)
    loss = rollout(scene, robot, v0)
    loss.backward()

    def f(v=v00):
        ref.reset()
        return float(rollout(ref, ref_robot, v))

    assert abs(f() - float(loss.detach())) < 1e-12
    assert_close_rel(v0.grad, central_differences(f, v00), tol=1e-4)


def test_disable_constraint_switches_the_equalities_off():
    """RigidOptions(disable_constraint=True), Genesis World's switch for every constraint row: the file's
    equalities load inactive and a run-time weld is refused."""
    scene = gs.Scene(rigid_options=gs.options.RigidOptions(disable_constraint=True))
    robot = scene.add_entity(gs.morphs.MJCF(default_armature=None, file=XML))
    scene.build()
    solver = scene.rigid_solver
    assert solver.n_equalities == 4 and not bool(solver.state.at("eq_active", 0).any())
    with pytest.raises(gs.OptionError, match="disable_constraint"):
        solver.add_weld_constraint(robot.get_link("box").idx, robot.get_link("arm").idx)


def test_equality_objects_name_the_files_constraints_and_switch_per_environment():
    """RigidEntity.equalities: Genesis World's RigidEquality attributes (type codes, the objects as solver
    indices: links, joints, tendons), before and after build; set_active switches one constraint in the
    environments named and no other."""
    scene = gs.Scene()
    scene.add_entity(gs.morphs.Box(size=(0.1, 0.1, 0.1), pos=(3, 0, 1)))  # (so that solver indices are offset)
    robot = scene.add_entity(gs.morphs.MJCF(default_armature=None, file=XML))
    eqs = robot.equalities
    assert [e.type for e in eqs] == [0, 1, 2, 3] and len(eqs) == robot.n_equalities == 4
    assert not eqs[0].is_built and eqs[0].eq_data is None
    scene.build(n_envs=3)
    connect, weld, joint, tendon = eqs
    assert (connect.eq_obj1id, connect.eq_obj2id) == (robot.get_link("coupler").idx, robot.get_link("rocker").idx)
    assert (weld.eq_obj1id, weld.eq_obj2id) == (robot.get_link("box").idx, robot.get_link("arm").idx)
    assert (joint.eq_obj1id, joint.eq_obj2id) == (robot.get_joint("j5").idx, robot.get_joint("j4").idx)
    assert [e.idx for e in eqs] == [0, 1, 2, 3] and robot.equality_start == 0
    assert torch.allclose(joint.eq_data[11:16].double(), torch.tensor([0, 1.5, 0.5, 0, 0], dtype=torch.float64))
    assert weld.get_active().tolist() == [True, True, True]
    weld.set_active(False, envs_idx=[1])
    assert weld.get_active().tolist() == [True, False, True] and connect.get_active().tolist() == [True] * 3
    with pytest.raises(gs.OptionError, match="bool"):
        weld.set_active(1)
    for _ in range(20):
        scene.step()
    box, arm = robot.get_link("box"), robot.get_link("arm")
    gap = (box.get_pos() - arm.get_pos()).norm(dim=-1)
    # the weld holds the box's offset from the arm where it is active; released, the box falls away
    assert abs(float(gap[0] - gap[2])) < 1e-9 and float(gap[1]) > float(gap[0]) + 1e-3, gap
