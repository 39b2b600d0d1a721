"""PD position control of ball and free joints' dofs (control_dofs_position on every dof of a free body, as
Genesis World's scripts drive a floating pusher): the translation dofs servo the base position, the rotation dofs
the orientation, their targets being the intrinsic x-y-z Euler angles get_dofs_position reads. Checked against
the closed-form period of a servoed body, a static balance against gravity, convergence the short way round from
near half a turn, and gradients against finite differences."""

import math

import numpy as np
import pytest
import torch

import genesis_core as gs
from genesis_core.testing import assert_close_rel, grads_match_differences
from genesis_core.utils.geom import inv_quat, quat_mul, quat_to_rotvec, xyz_to_quat

F64 = torch.float64
SIZE = (0.2, 0.4, 0.6)
RHO = 200.0  # Rigid's default density


def box_inertia():
    m = RHO * math.prod(SIZE)
    a, b, c = SIZE
    return m, np.array([b * b + c * c, a * a + c * c, a * a + b * b]) * m / 12


def free_box(n_envs=2, dt=0.002, requires_grad=False, gravity=(0, 0, 0), size=SIZE):
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=dt, gravity=gravity, requires_grad=requires_grad))
    box = scene.add_entity(gs.morphs.Box(size=size, pos=(0, 0, 1)))
    scene.build(n_envs=n_envs)
    return scene, box


def rotation_left(box, target_xyz):
    """The rotation vector from each environment's orientation to its target's."""
    return quat_to_rotvec(quat_mul(inv_quat(box.get_quat()), xyz_to_quat(target_xyz)))


def test_servo_period_per_axis_and_translation():
    """Small rotations about each principal axis oscillate with the period 2 pi sqrt(I / kp) of the linearised
    servo; the translation dofs with 2 pi sqrt(m / kp). Implicit integration at dt = 2 ms shifts it by < 0.3%."""
    scene, box = free_box(n_envs=4)
    m, inertia = box_inertia()
    kp = torch.tensor([500.0] * 3 + [50.0] * 3, dtype=F64)
    box.set_dofs_kp(kp)
    box.set_dofs_kv(0.0)
    amp = 0.05
    target = torch.zeros(4, 6, dtype=F64)
    target[:, 2] = 1.0
    for e in range(3):
        target[e, 3 + e] = amp  # env e: about axis e
    target[3, 0] = amp  # env 3: along x
    box.control_dofs_position(target)
    xs = []
    for _ in range(1500):
        scene.step()
        xs.append(box.get_dofs_position().clone())
    xs = torch.stack(xs).numpy()
    for e in range(4):
        col = 3 + e if e < 3 else 0
        x = xs[:, e, col] - amp
        up = np.flatnonzero((x[:-1] < 0) & (x[1:] >= 0))
        # the crossing times, each interpolated within its step
        t = (up + (-x[up]) / (x[up + 1] - x[up]) + 1) * 0.002
        period = float(np.diff(t).mean())
        expected = 2 * math.pi * math.sqrt((inertia[e] if e < 3 else m) / float(kp[col]))
        assert abs(period - expected) / expected < 3e-3, (e, period, expected)
        # the other rotation dofs stay still (the small-angle coupling is second order)
        others = [c for c in (3, 4, 5) if c != col]
        assert np.abs(xs[:, e, others]).max() < 1e-3 * amp + 1e-9


def test_converges_the_short_way_from_near_half_a_turn():
    """A cube (isotropic inertia) 170 degrees from its target about a skew axis, critically damped: the remaining
    rotation's angle falls without ever growing and its axis stays the initial one (the error is the rotation vector
    the short way round, exact at large angles: the torque stays on that axis), and the cube ends at the target."""
    scene, box = free_box(n_envs=2, size=(0.3, 0.3, 0.3))
    inertia = RHO * 0.3 ** 5 / 6
    kp = 20.0
    box.set_dofs_kp(kp)
    box.set_dofs_kv(2 * math.sqrt(kp * inertia))
    axis = torch.tensor([0.3, -0.5, 0.8], dtype=F64)
    axis = axis / axis.norm()
    from genesis_core.utils.geom import quat_to_xyz, rotvec_to_quat

    goal = quat_to_xyz(rotvec_to_quat(axis * math.radians(170)))
    target = torch.cat([torch.tensor([0.0, 0.0, 1.0], dtype=F64), goal]).expand(2, 6).clone()
    box.control_dofs_position(target[:1], envs_idx=[1])  # env 0 stays free, untouched
    before0 = box.get_quat()[0].clone()
    angles = []
    for _ in range(2500):
        scene.step()
        left = rotation_left(box, target[:, 3:])[1]
        angles.append(float(left.norm()))
        if angles[-1] > 1e-3:
            assert float(torch.dot(left / left.norm(), axis)) > 1 - 1e-9
    assert angles[0] > math.radians(165)
    assert all(b <= a + 1e-12 for a, b in zip(angles, angles[1:]))
    assert angles[-1] < 1e-6
    assert torch.equal(box.get_quat()[0], before0)
    assert float(box.get_pos()[1].sub(torch.tensor([0, 0, 1.0], dtype=F64)).abs().max()) < 1e-9


BALL_PENDULUM = """<mujoco>
  <worldbody>
    <body name="rod" pos="0 0 1">
      <joint name="ball" type="ball" damping="0"/>
      <geom type="sphere" pos="0 0 -0.5" size="0.05" mass="2"/>
    </body>
  </worldbody>
</mujoco>"""


def test_ball_joint_holds_a_tilt_against_gravity(tmp_path):
    """A 2 kg point mass on a 0.5 m ball joint servoed to a 0.4 rad tilt about x settles where the servo's torque
    balances gravity's: kp (target - theta) = m g L sin(theta)."""
    path = tmp_path / "ball.xml"
    path.write_text(BALL_PENDULUM)
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=0.005))
    rod = scene.add_entity(gs.morphs.MJCF(file=str(path), default_armature=None))
    scene.build()
    kp, m, g, length, target = 40.0, 2.0, 9.81, 0.5, 0.4
    inertia = m * length ** 2 + 0.4 * m * 0.05 ** 2
    rod.set_dofs_kp(kp)
    rod.set_dofs_kv(2 * math.sqrt(kp * inertia))
    rod.control_dofs_position(torch.tensor([target, 0.0, 0.0], dtype=F64))
    for _ in range(1500):
        scene.step()
    theta = float(rod.get_dofs_position()[0])
    # the balance, solved by bisection
    lo, hi = 0.0, target
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if kp * (target - mid) > m * g * length * math.sin(mid) else (lo, mid)
    assert abs(theta - lo) < 1e-6, (theta, lo)
    assert abs(float(rod.get_dofs_position()[1])) < 1e-9 and abs(float(rod.get_dofs_position()[2])) < 1e-9
    # the control force reads the servo's torque at the balance
    assert abs(float(rod.get_dofs_control_force()[0]) - m * g * length * math.sin(theta)) < 1e-5


def test_control_force_matches_the_step():
    """get_dofs_control_force's rotation error is the step's: with gravity off and no damping, the body's angular
    acceleration after one step equals I^-1 times it (to the implicit step's O(h) part)."""
    scene, box = free_box(n_envs=1, dt=1e-4)
    _, inertia = box_inertia()
    box.set_dofs_kp(30.0)
    box.set_dofs_kv(0.0)
    box.control_dofs_position(torch.tensor([[0.0, 0.0, 1.0, 0.4, -0.3, 1.2]], dtype=F64))
    force = box.get_dofs_control_force()[0]
    expected = rotation_left(box, torch.tensor([[0.4, -0.3, 1.2]], dtype=F64))[0] * 30.0
    assert_close_rel(force[3:], expected, tol=1e-12)
    scene.step()
    acc = box.get_dofs_velocity()[0, 3:] / 1e-4
    assert_close_rel(acc, force[3:] / torch.as_tensor(inertia), tol=2e-3)


@pytest.mark.parametrize("dt", [1e-2])
def test_gradients_to_rotation_targets_gains_and_pose(dt):
    """The loss after 25 servoed steps of a free box (contacts off, gravity on): its gradient with respect to the
    six targets, the six gains and the initial orientation against central differences of the plain run."""
    pair = [free_box(n_envs=0, dt=dt, requires_grad=rg, gravity=(0, 0, -9.81)) for rg in (True, False)]
    w = torch.tensor([1.0, -0.5, 2.0, 0.3, -0.7, 0.2, 0.9], dtype=F64)

    def run(scene, box, target, kp, quat):
        box.set_quat(quat)
        box.set_dofs_kp(kp)
        box.set_dofs_kv(torch.full((6,), 3.0, dtype=F64))
        box.control_dofs_position(target)
        for _ in range(25):
            scene.step()
        return (torch.cat([box.get_pos(), box.get_quat()]) * w).sum() + (box.get_ang() * w[:3]).sum()

    x0 = [torch.tensor([0.1, -0.2, 1.1, 0.7, -0.4, 2.5], dtype=F64),
          torch.tensor([40.0, 30.0, 60.0, 8.0, 5.0, 9.0], dtype=F64),
          torch.tensor([0.9, 0.2, -0.3, 0.1], dtype=F64)]
    grads_match_differences(run, pair, x0, moves=1e-3, tol=1e-4)
