"""Rigid-body physics against analytic results and MuJoCo.

Tolerances: semi-implicit Euler is first order in h, but exact for constant acceleration in velocity and
off by h^2 n(n+1)/2 g in position, which the free-fall test uses exactly; periods and energies of oscillators
carry an O(h) phase error, small at the steps used.
"""

import math
import warnings

import numpy as np
import pytest
import torch

import genesis_core as gs
from genesis_rigid import assets

G = 9.81


def make(dt=1e-2, substeps=1, n_envs=0, entities=(), **rigid):
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=dt, substeps=substeps),
                     rigid_options=gs.options.RigidOptions(**rigid))
    out = [scene.add_entity(m, material=mat) if mat is not None else scene.add_entity(m) for m, mat in entities]
    scene.build(n_envs=n_envs)
    return scene, out


def test_small_angle_pendulum_period():
    """T = 2 pi sqrt(L/g) for a point bob on a 1 m massless rod; 0.05 rad amplitude (the finite-amplitude
    correction is theta^2/16 = 1.6e-4), dt = 1 ms: within 0.5%."""
    scene, (pend,) = make(dt=1e-3, entities=[(gs.morphs.MJCF(default_armature=None, file=assets.path("pendulum.xml")), None)])
    pend.set_dofs_position([0.05])
    angles = []
    for _ in range(4100):
        scene.step()
        angles.append(float(pend.get_dofs_position()[0]))
    up = [i for i in range(1, len(angles)) if angles[i - 1] < 0 <= angles[i]]
    period = (up[-1] - up[0]) / (len(up) - 1) * 1e-3
    assert period == pytest.approx(2 * math.pi * math.sqrt(1.0 / G), rel=5e-3)


def test_free_fall_and_projectile_are_exact_to_the_integrator():
    """Semi-implicit Euler: v_n = v0 - g h n exactly; z_n = z0 + h sum v_k = z0 - g h^2 n (n + 1) / 2."""
    h, n = 1e-2, 60
    scene, (box,) = make(dt=h, entities=[(gs.morphs.Box(pos=(0, 0, 30), size=(0.2, 0.3, 0.4)), None)])
    box.set_dofs_velocity([1.5, -0.5, 4.0, 0, 0, 0])
    for _ in range(n):
        scene.step()
    expected = torch.tensor([1.5 * h * n, -0.5 * h * n, 30 + 4.0 * h * n - G * h * h * n * (n + 1) / 2],
                            dtype=torch.float64)
    assert torch.allclose(box.get_pos(), expected, rtol=0, atol=1e-12)
    assert torch.allclose(box.get_vel(), torch.tensor([1.5, -0.5, 4.0 - G * h * n], dtype=torch.float64), atol=1e-12)
    assert torch.allclose(box.get_quat(), torch.tensor([1.0, 0, 0, 0], dtype=torch.float64), atol=1e-14)


def test_torque_free_spinning_box_conserves_angular_momentum():
    """A free box spinning about a tilted axis, no gravity: world angular momentum R I R^T omega is constant
    (to the integrator's first-order error over 2 s at h = 1 ms)."""
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=1e-3, gravity=(0, 0, 0)))
    box = scene.add_entity(gs.morphs.Box(pos=(0, 0, 1), size=(0.1, 0.3, 0.5)))
    scene.build()
    box.set_dofs_velocity([0, 0, 0, 2.0, 0.3, 1.0])
    inertia = torch.diag(torch.tensor([0.3 ** 2 + 0.5 ** 2, 0.1 ** 2 + 0.5 ** 2, 0.1 ** 2 + 0.3 ** 2],
                                      dtype=torch.float64)) * (200 * 0.015 / 12)

    def momentum():
        from genesis_rigid.entity import _quat_to_mat

        rot = _quat_to_mat(box.get_quat())
        return rot @ inertia @ rot.T @ box.get_ang()

    start = momentum()
    for _ in range(2000):
        scene.step()
    assert torch.allclose(momentum(), start, rtol=2e-3, atol=0)


@pytest.mark.parametrize("integrator, bound", [("rk4", 1e-6), ("euler", 0.05)])
def test_double_pendulum_energy_drift(integrator, bound):
    """Frictionless double pendulum released from 90 degrees, 10 s at dt = 1 ms: with RK4 the energy stays within
    1e-6 of its scale (measured 2e-9: fourth order); semi-implicit Euler, first order and not symplectic in
    generalized coordinates with a configuration-dependent mass matrix, drifts by O(h) (measured 2.7%)."""
    scene, (dp,) = make(dt=1e-3, entities=[(gs.morphs.MJCF(default_armature=None, file=assets.path("double_pendulum.xml")), None)],
                        integrator=integrator)
    dp.set_dofs_position([math.pi / 2, 0.3])
    m, l, ic = 1.0, 1.0, 1.0 / 12

    def energy():
        q1, q2 = dp.get_dofs_position().tolist()
        w1, w2 = dp.get_dofs_velocity().tolist()
        # centres of the rods (x, z) below the shoulder, and their velocities
        c1 = np.array([0.5 * math.sin(q1), -0.5 * math.cos(q1)])
        v1 = 0.5 * w1 * np.array([math.cos(q1), math.sin(q1)])
        c2 = np.array([math.sin(q1) + 0.5 * math.sin(q1 + q2), -math.cos(q1) - 0.5 * math.cos(q1 + q2)])
        v2 = w1 * np.array([math.cos(q1), math.sin(q1)]) + 0.5 * (w1 + w2) * np.array([math.cos(q1 + q2),
                                                                                         math.sin(q1 + q2)])
        kinetic = 0.5 * m * (v1 @ v1 + v2 @ v2) + 0.5 * ic * (w1 ** 2 + (w1 + w2) ** 2)
        return kinetic + m * G * (c1[1] + c2[1])

    scale = 3 * m * G * l  # the potential-energy range of the system
    e0 = energy()
    worst = 0.0
    for i in range(10000):
        scene.step()
        if i % 50 == 0:
            worst = max(worst, abs(energy() - e0))
    assert worst < bound * scale, f"energy drift {worst / scale:.2e} of 3 m g l"
    assert integrator != "euler" or worst > 1e-3 * scale  # the first-order drift is real, and measured


def mujoco_rollout(path, qpos0, dt, n, disable=0, integrator="euler", qvel0=None):
    mujoco = pytest.importorskip("mujoco")
    model = mujoco.MjModel.from_xml_path(path)
    data = mujoco.MjData(model)
    model.opt.timestep = dt
    model.opt.integrator = {"euler": mujoco.mjtIntegrator.mjINT_EULER, "rk4": mujoco.mjtIntegrator.mjINT_RK4}[integrator]
    model.opt.disableflags |= disable
    data.qpos[:] = qpos0
    if qvel0 is not None:
        data.qvel[:] = qvel0
    out = []
    for _ in range(n):
        mujoco.mj_step(model, data)
        out.append(data.qpos.copy())
    return np.array(out)


def our_rollout(path, qpos0, dt, n, qvel0=None, equality=True, **rigid):
    scene, (robot,) = make(dt=dt, entities=[(gs.morphs.MJCF(default_armature=None, file=path), None)], **rigid)
    if not equality:  # the file's equality constraints off (MuJoCo's mjDSBL_EQUALITY)
        scene.rigid_solver.state.at("eq_active", 0)[:] = 0
    robot.set_qpos(qpos0)
    if qvel0 is not None:
        robot.set_dofs_velocity(qvel0)
    out = []
    for _ in range(n):
        scene.step()
        out.append(robot.get_qpos().numpy().copy())
    return np.array(out)


@pytest.mark.parametrize("integrator, dt", [("euler", 1e-3), ("rk4", 1e-2)])
def test_double_pendulum_matches_mujoco(integrator, dt):
    """Contact-free chain, MuJoCo with the same integrator and step: joint angles within 1e-3 rad over 1 s
    (measured agreement is ~1e-8: same equations, same integrator)."""
    path = assets.path("double_pendulum.xml")
    n = round(1.0 / dt)
    ours = our_rollout(path, [0.7, -0.4], dt, n, integrator=integrator)
    ref = mujoco_rollout(path, [0.7, -0.4], dt, n, integrator=integrator)
    assert np.abs(ours - ref).max() < 1e-3


def test_panda_under_gravity_matches_mujoco(shared_assets):
    """The panda from MJCF (armature, damping, full inertias) falling from its home pose with contacts, limits,
    the finger equality and the actuators off in both engines: within 1e-3 rad over 1 s."""
    mujoco = pytest.importorskip("mujoco")
    path = f"{shared_assets}/mjcf/franka_emika_panda/panda.xml"
    home = [0, 0, 0, -1.57079, 0, 1.57079, -0.7853, 0.04, 0.04]
    off = (mujoco.mjtDisableBit.mjDSBL_CONTACT | mujoco.mjtDisableBit.mjDSBL_LIMIT
           | mujoco.mjtDisableBit.mjDSBL_EQUALITY | mujoco.mjtDisableBit.mjDSBL_ACTUATION)
    ref = mujoco_rollout(path, home, 1e-3, 1000, off)
    ours = our_rollout(path, home, 1e-3, 1000, equality=False, enable_collision=False, enable_joint_limit=False)
    assert np.abs(ours - ref).max() < 1e-3
    assert np.abs(ref[-1] - ref[0]).max() > 0.1  # it really moved


BRANCHING = """<mujoco>
  <worldbody>
    <body name="torso" pos="0 0 1">
      <freejoint/>
      <inertial pos="0.01 0 0.02" mass="4" diaginertia="0.06 0.05 0.03"/>
      <body name="l1" pos="0 0.2 0.1">
        <joint name="a1" type="hinge" axis="1 0 0"/>
        <inertial pos="0 0.15 0" mass="1" diaginertia="0.008 0.001 0.008"/>
        <body name="l2" pos="0 0.3 0">
          <joint name="a2" type="hinge" axis="0 0 1"/>
          <inertial pos="0.12 0 0" mass="0.5" diaginertia="0.0005 0.003 0.003"/>
        </body>
      </body>
      <body name="r1" pos="0 -0.2 0.1">
        <joint name="b1" type="hinge" axis="0 1 0"/>
        <inertial pos="0 -0.15 0" mass="1" diaginertia="0.008 0.001 0.008"/>
        <body name="r2" pos="0 -0.3 0">
          <joint name="b2" type="slide" axis="0 1 0"/>
          <inertial pos="0 -0.05 0" mass="0.7" diaginertia="0.001 0.001 0.001"/>
        </body>
        <body name="r3" pos="0 -0.1 -0.05">
          <joint name="b3" type="ball"/>
          <inertial pos="0.05 0 -0.05" mass="0.3" diaginertia="0.0008 0.0006 0.0004"/>
        </body>
      </body>
    </body>
  </worldbody>
</mujoco>
"""


def test_branching_tree_with_a_free_base_matches_mujoco(tmp_path):
    """A free torso with two limbs, one of them forked (hinges, a slide and a ball joint): the mass matrix couples
    every branch through the base, which the tree-structured factorisation must get right. Limbs launched with
    joint velocities, contacts off: within 1e-3 over 1 s of MuJoCo with the same integrator and step."""
    pytest.importorskip("mujoco")
    path = tmp_path / "branching.xml"
    path.write_text(BRANCHING)
    qpos0 = [0, 0, 1, 1, 0, 0, 0, 0.3, -0.2, 0.4, 0.05, 0.9, 0.1, 0.3, -0.2]
    qpos0[11:15] = list(np.array(qpos0[11:15]) / np.linalg.norm(qpos0[11:15]))
    qvel0 = [0, 0, 0, 0, 0, 0, 2.0, -3.0, 1.5, 0.4, 1.0, -2.0, 0.5]
    ours = our_rollout(str(path), qpos0, 1e-3, 1000, qvel0=qvel0, enable_collision=False)
    ref = mujoco_rollout(str(path), qpos0, 1e-3, 1000, qvel0=qvel0,
                         disable=__import__("mujoco").mjtDisableBit.mjDSBL_CONTACT)
    assert np.abs(ours - ref).max() < 1e-3
    assert np.abs(ref[-1, 3:7] - ref[0, 3:7]).max() > 0.05  # the limbs turned the base


def test_box_rests_flat_on_the_plane():
    """A box dropped flat settles: penetration under 1 mm, horizontal drift under 1 mm over 5 s, no tilt."""
    scene, (_, box) = make(dt=1e-2, entities=[(gs.morphs.Plane(), None),
                                              (gs.morphs.Box(pos=(0, 0, 0.3), size=(0.4, 0.3, 0.2)), None)])
    for _ in range(100):
        scene.step()
    start = box.get_pos().clone()
    lowest = 1.0
    for _ in range(500):
        scene.step()
        lowest = min(lowest, float(box.get_pos()[2]))
    assert 0.1 - lowest < 1e-3, f"penetration {0.1 - lowest:.2e} m"
    assert (box.get_pos()[:2] - start[:2]).norm() < 1e-3
    assert abs(float(box.get_quat()[0])) > 1 - 1e-6
    assert box.get_vel().norm() < 1e-3


def test_penetration_is_undone_at_max_correction_velocity_however_slow():
    """A box started 5 mm into the plane rises at max_correction_velocity: the position pass's dead band
    (kernels_constraint.SLOP_DEADBAND) is a depth beyond the slop, not a target speed, which that option caps (here
    1e-4 m/s, below the dead band's 2e-4 m/s at dt 0.01): over 1 s the box rises 0.1 mm (within 5%)."""
    scene, (_, box) = make(dt=1e-2, max_correction_velocity=1e-4,
                           entities=[(gs.morphs.Plane(), None),
                                     (gs.morphs.Box(pos=(0, 0, 0.1 - 5e-3), size=(0.2, 0.2, 0.2)), None)])
    scene.step()
    start = float(box.get_pos()[2])
    for _ in range(100):
        scene.step()
    assert float(box.get_pos()[2]) - start == pytest.approx(1e-4, rel=0.05)


def test_sliding_box_decelerates_at_mu_g():
    """A box sliding on the plane with friction mu = 0.5 (the larger of the two materials', as in MuJoCo) loses
    speed at mu g (within 5%)."""
    scene, (_, box) = make(dt=1e-2, entities=[(gs.morphs.Plane(), gs.materials.Rigid(friction=0.5)),
                                              (gs.morphs.Box(pos=(0, 0, 0.1), size=(0.2, 0.2, 0.2)),
                                               gs.materials.Rigid(friction=0.5))])
    for _ in range(20):
        scene.step()
    box.set_dofs_velocity([3.0, 0, 0, 0, 0, 0])
    speeds = []
    for _ in range(40):
        scene.step()
        speeds.append(float(box.get_vel()[0]))
    decel = (speeds[5] - speeds[35]) / (30 * 1e-2)
    assert decel == pytest.approx(0.5 * G, rel=0.05)


def test_stack_of_five_boxes_stands():
    """Five boxes stacked on the plane stay stacked for 5 s: each within 1 cm of its initial xy and height."""
    entities = [(gs.morphs.Plane(), None)]
    entities += [(gs.morphs.Box(pos=(0, 0, 0.1 + 0.2 * i), size=(0.2, 0.2, 0.2)), None) for i in range(5)]
    scene, ents = make(dt=1e-2, substeps=2, entities=entities)
    boxes = ents[1:]
    for _ in range(500):
        scene.step()
    for i, box in enumerate(boxes):
        pos = box.get_pos()
        assert abs(float(pos[2]) - (0.1 + 0.2 * i)) < 1e-2, f"box {i} at height {float(pos[2]):.4f}"
        assert pos[:2].norm() < 1e-2, f"box {i} drifted to {pos[:2].tolist()}"


def test_ball_rolls_down_a_slope():
    """A solid ball rolling without slipping down a 20-degree slope accelerates at (5/7) g sin(theta) (within 5%);
    a box of the same friction on the same slope (tan 20 < mu) does not slide."""
    theta = math.radians(20)
    plane = gs.morphs.Plane(normal=(-math.sin(theta), 0, math.cos(theta)))
    r = 0.1
    scene, (_, ball, box) = make(dt=1e-3, entities=[
        (plane, gs.materials.Rigid(friction=0.8)),
        (gs.morphs.Sphere(pos=(-r * math.sin(theta), 0, r * math.cos(theta)), radius=r),
         gs.materials.Rigid(friction=0.8)),
        (gs.morphs.Box(pos=(-0.1 * math.sin(theta), 1.0, 0.1 * math.cos(theta)), size=(0.2, 0.2, 0.2),
                       euler=(0, -20, 0)), gs.materials.Rigid(friction=0.8)),
    ])
    for _ in range(100):
        scene.step()
    box_start = box.get_pos().clone()
    v0 = ball.get_vel().clone()
    for _ in range(400):
        scene.step()
    accel = (ball.get_vel() - v0).norm() / 0.4
    assert float(accel) == pytest.approx(5 / 7 * G * math.sin(theta), rel=0.05)
    assert (box.get_pos() - box_start).norm() < 2e-3


@pytest.mark.parametrize("e", [0.0, 0.5, 0.9])
def test_restitution_sets_the_bounce_height(e):
    """A ball dropped from 1 m onto the plane leaves it at e times its impact speed: it rebounds to e^2 h
    (within 5% of the drop height at dt = 1 ms: the impact is resolved in one substep)."""
    r = 0.05
    scene, (_, ball) = make(dt=1e-3, entities=[(gs.morphs.Plane(), gs.materials.Rigid(restitution=e)),
                                               (gs.morphs.Sphere(pos=(0, 0, 1 + r), radius=r),
                                                gs.materials.Rigid(restitution=e))])
    heights = []
    for _ in range(1000):
        scene.step()
        heights.append(float(ball.get_pos()[2]) - r)
    bottom = min(range(len(heights)), key=lambda i: heights[i])
    rebound = max(heights[bottom:])
    assert rebound == pytest.approx(e * e * 1.0, abs=0.05)


def test_more_contacts_than_max_contacts_keeps_the_deepest_and_warns_once():
    """A pool of max_contacts entries keeps the deepest contacts whatever the order they are found in (three
    spheres pressed 1, 3 and 2 mm into the floor, two entries: the 3 and 2 mm contacts), and says so once. Under
    gravity the sphere left out sinks until it is among the deepest: none falls through the floor."""

    def run(max_contacts, depths, gravity=(0, 0, -9.81), steps=50):
        spheres = [(gs.morphs.Sphere(radius=0.05, pos=(0.2 * i, 0, 0.05 - d)), None) for i, d in enumerate(depths)]
        scene = gs.Scene(sim_options=gs.options.SimOptions(dt=1e-2, gravity=gravity),
                         rigid_options=gs.options.RigidOptions(max_contacts=max_contacts))
        ents = [scene.add_entity(m) for m, _ in [(gs.morphs.Plane(), None)] + spheres]
        scene.build()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for _ in range(steps):
                scene.step()
        said = [str(w.message) for w in caught if "max_contacts" in str(w.message)]
        return scene, said, [float(e.get_pos()[2]) for e in ents[1:]]

    scene, said, _ = run(2, (1e-3, 3e-3, 2e-3), gravity=(0, 0, 0), steps=1)
    con_f = scene.rigid_solver.scratch["s_con_f"][0]
    con_i = scene.rigid_solver.scratch["s_con_i"][0, :, :len(con_f)]  # the pool's entries
    kept = sorted(float(con_f[i, 6]) for i in range(2) if con_i[0, i] == 1)
    assert kept == pytest.approx([2e-3, 3e-3], abs=1e-12)
    assert len(said) == 1 and "3 contacts in one environment, more than max_contacts=2; the deepest 2 are kept" \
        in said[0] and "max_contacts=6" in said[0]
    _, said, heights = run(2, (0, 0, 0))
    assert len(said) == 1 and all(z > 0.04 for z in heights)
    _, said, heights = run(3, (0, 0, 0))
    assert said == [] and all(abs(z - 0.05) < 1e-3 for z in heights)




FOLDED_ARM = """<mujoco>
  <compiler angle="radian"/>
  <worldbody>
    <body name="upper" pos="0 0 1">
      <joint name="shoulder" type="hinge" axis="0 1 0" range="-0.2 0.2"/>
      <geom type="capsule" fromto="0 0 0 0.5 0 0" size="0.03" mass="2"/>
      <body name="fore" pos="0.5 0 0">
        <joint name="elbow" type="hinge" axis="0 1 0" range="-0.3 0.3"/>
        <geom type="capsule" fromto="0 0 0 0.4 0 0.1" size="0.03" mass="1"/>
      </body>
    </body>
  </worldbody>
</mujoco>"""


def test_a_resting_arm_keeps_its_limits_impulses(tmp_path):
    """A two-link arm held up by both of its joint limits (gravity presses each joint into its range's end; the two
    limit rows are coupled through the arm's mass matrix): at rest, limit_impulse holds each limit's impulse, the
    weight's moment about the joint over the substep, and the sweeps start from it, so a substep at rest needs one
    sweep. Starting each substep's limits from zero instead (the warm start cleared before every step) needs more,
    and ends in the same rest."""
    path = tmp_path / "arm.xml"
    path.write_text(FOLDED_ARM)

    def rest(cold):
        scene = gs.Scene(sim_options=gs.options.SimOptions(dt=1e-2), rigid_options=gs.options.RigidOptions(
            enable_collision=False, tolerance=1e-9))
        arm = scene.add_entity(gs.morphs.MJCF(default_armature=None, file=str(path)))
        scene.build()
        s = scene.rigid_solver
        sweeps = []
        for _ in range(300):
            if cold:
                with torch.no_grad():
                    s.state.limit_impulse.zero_()
            scene.step()
            sweeps.append(int(s.contacts()["sweeps"][0][0]))
        return arm.get_dofs_position().numpy(), s.state.at("limit_impulse", scene._frame)[0].numpy(), sweeps

    q, impulse, sweeps = rest(cold=False)
    q_cold, _, sweeps_cold = rest(cold=True)
    # both joints at the end of their ranges that gravity presses them into
    assert np.abs(np.abs(q) - [0.2, 0.3]).max() < 2e-3, q
    assert np.abs(q - q_cold).max() < 1e-4
    # the impulses hold the weights over a substep: the elbow the forearm's moment (its centre at (0.2, 0.05) in its
    # frame, turned by 0.5 rad), the shoulder both links' (the upper arm's centre 0.25 m out, turned by 0.2 rad)
    gh, a, b = 9.81 * 1e-2, 0.2, 0.5
    fore = 0.2 * math.cos(b) + 0.05 * math.sin(b)
    assert impulse[1] == pytest.approx(1.0 * gh * fore, rel=1e-6)
    assert impulse[0] == pytest.approx(gh * (2.0 * 0.25 * math.cos(a) + 1.0 * (0.5 * math.cos(a) + fore)), rel=1e-6)
    assert max(sweeps[-100:]) <= 2, sweeps[-100:]
    assert sum(sweeps_cold[-100:]) > 2 * sum(sweeps[-100:]), (sweeps_cold[-100:], sweeps[-100:])
