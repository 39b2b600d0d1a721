"""Sensors (gs.sensors.IMU, Contact, ContactForce): what each measures against an analytic reference, the
measurement model's statistics, and the sensor state's part in snapshots, resets and checkpoints.

The scenes are small and built once per module (the rigid kernels' compilation dominates). Float64 on the CPU
(genesis_core.testing.RUNTIME), dt = 0.01 s, g = 9.81 m/s^2."""

import math
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

import genesis_core as gs

from .conftest import REPO, python_env

G = 9.81
DT = 0.01
N_ENVS = 4
SIDE = 0.1  # the boxes' edge, m
OMEGA = 2.0  # rad/s, the spinning box's rate
R_OFF = 0.3  # m, the spinning IMU's offset from the box's centre
MAG = (0.3, 0.0, 0.5)
DELAY_STEPS = 3
ACC_BIAS = (0.1, -0.2, 0.3)
ACC_NOISE = 0.05
WALK = 0.01
RES = 0.5


def _rest_scene():
    """A box resting on a plane, a box in free fall far above it, and sensors on both."""
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=DT))
    scene.add_entity(gs.morphs.Plane())
    box = scene.add_entity(gs.morphs.Box(pos=(0, 0, SIDE / 2), size=(SIDE,) * 3))
    falling = scene.add_entity(gs.morphs.Box(pos=(0, 0, 300.0), size=(SIDE,) * 3))
    s = dict(
        imu=scene.add_sensor(gs.sensors.IMU(entity_idx=box.idx)),
        force=scene.add_sensor(gs.sensors.ContactForce(entity_idx=box.idx)),
        touch=scene.add_sensor(gs.sensors.Contact(entity_idx=box.idx)),
        imu_fall=scene.add_sensor(gs.sensors.IMU(entity_idx=falling.idx)),
        force_fall=scene.add_sensor(gs.sensors.ContactForce(entity_idx=falling.idx)),
        touch_fall=scene.add_sensor(gs.sensors.Contact(entity_idx=falling.idx)),
        noisy=scene.add_sensor(gs.sensors.IMU(entity_idx=box.idx, acc_bias=ACC_BIAS, acc_noise=ACC_NOISE,
                                              gyro_noise=0.01)),
        walk=scene.add_sensor(gs.sensors.ContactForce(entity_idx=box.idx, random_walk=WALK)),
        quantised=scene.add_sensor(gs.sensors.ContactForce(entity_idx=box.idx, resolution=RES, bias=0.2)),
    )
    scene.build(n_envs=N_ENVS)
    for _ in range(20):  # the resting contact settles
        scene.step()
    return scene, box, falling, s


@pytest.fixture(scope="module")
def rest():
    return _rest_scene()


def _spin_scene():
    """A cube without gravity spinning about world z at OMEGA (a cube's inertia is isotropic: the rate stays)."""
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=DT, gravity=(0.0, 0.0, 0.0)))
    box = scene.add_entity(gs.morphs.Box(pos=(0, 0, 1.0), size=(SIDE,) * 3))
    s = dict(
        rotated=scene.add_sensor(gs.sensors.IMU(entity_idx=box.idx, euler_offset=(90.0, 0.0, 0.0))),
        offset=scene.add_sensor(gs.sensors.IMU(entity_idx=box.idx, pos_offset=(R_OFF, 0.0, 0.0),
                                               magnetic_field=MAG)),
        delayed=scene.add_sensor(gs.sensors.IMU(entity_idx=box.idx, pos_offset=(R_OFF, 0.0, 0.0),
                                                magnetic_field=MAG, delay=DELAY_STEPS * DT)),
        jittered=scene.add_sensor(gs.sensors.IMU(entity_idx=box.idx, magnetic_field=MAG, delay=2 * DT, jitter=DT,
                                                 interpolate=True)),
    )
    scene.build(n_envs=2)
    box.set_dofs_velocity([0.0, 0.0, OMEGA], dofs_idx_local=[3, 4, 5])
    scene.step()
    return scene, box, s


@pytest.fixture(scope="module")
def spin():
    return _spin_scene()


def _close(x, ref, tol):
    ref = torch.as_tensor(ref, dtype=x.dtype).expand_as(x)
    assert torch.allclose(x, ref, atol=tol, rtol=0), f"max |x - ref| = {float((x - ref).abs().max()):.3g} > {tol}"


# -- what the sensors measure ------------------------------------------------------------------------------------


def test_imu_at_rest_reads_plus_g_up_and_no_rotation(rest):
    """At rest the proper acceleration is -g = (0, 0, +9.81) in the (unrotated) box frame; the resting contact is
    solved to the rigid solver's tolerance, hence 1e-6."""
    scene, box, _, s = rest
    data = s["imu"].read()
    assert data.lin_acc.shape == (N_ENVS, 3) and data.ang_vel.shape == (N_ENVS, 3)
    _close(data.lin_acc, (0.0, 0.0, G), 1e-6)
    _close(data.ang_vel, (0.0, 0.0, 0.0), 1e-8)
    _close(data.mag, (0.0, 0.0, 0.5), 1e-8)  # Genesis World's default field, box unrotated
    assert torch.equal(data.lin_acc, s["imu"].read_ground_truth().lin_acc)  # no delay, no noise


def test_imu_in_free_fall_reads_zero_acceleration(rest):
    """In free fall a = g, so a - g = 0 (to rounding: the dof accelerations are g exactly)."""
    _, _, _, s = rest
    _close(s["imu_fall"].read().lin_acc, (0.0, 0.0, 0.0), 1e-9)


def test_contact_force_at_rest_is_m_g_along_the_link_z_and_contact_flags(rest):
    """A box resting on a plane receives m g upward from it (static equilibrium), along its own +z."""
    _, box, _, s = rest
    mass = float(box.get_mass())
    force = s["force"].read()
    assert force.shape == (N_ENVS, 3)
    _close(force, (0.0, 0.0, mass * G), 1e-6 * mass * G)
    touch, air = s["touch"].read(), s["touch_fall"].read()
    assert touch.dtype == torch.bool and touch.shape == (N_ENVS, 1)
    assert bool(touch.all()) and not bool(air.any())
    assert torch.equal(s["force_fall"].read(), torch.zeros(N_ENVS, 3, dtype=force.dtype))


def test_gyro_reads_the_spin_rate_in_a_rotated_sensor_frame(spin):
    """euler_offset (90, 0, 0) rolls the sensor frame about the link's x: world z is the sensor's +y."""
    _, _, s = spin
    _close(s["rotated"].read().ang_vel, (0.0, OMEGA, 0.0), 1e-9)
    _close(s["offset"].read().ang_vel, (0.0, 0.0, OMEGA), 1e-9)


def test_pos_offset_on_a_spinning_body_reads_the_centripetal_term(spin):
    """At r = (R_OFF, 0, 0) on a body turning at a constant rate omega about z (no gravity), a = -omega^2 r."""
    _, _, s = spin
    _close(s["offset"].read().lin_acc, (-OMEGA**2 * R_OFF, 0.0, 0.0), 1e-9)
    _close(s["rotated"].read().lin_acc, (0.0, 0.0, 0.0), 1e-9)  # at the centre: nothing


def test_magnetometer_turns_with_the_body(spin):
    """The world field read in a frame turned by theta about z: (B_x cos theta, -B_x sin theta, B_z)."""
    scene, box, s = spin
    q = box.get_quat()[0].double()
    theta = 2 * math.atan2(float(q[3]), float(q[0]))
    _close(s["offset"].read().mag, (MAG[0] * math.cos(theta), -MAG[0] * math.sin(theta), MAG[2]), 1e-9)


def test_delay_returns_the_ground_truth_of_k_steps_before(spin):
    """delay = 3 dt: read() after step n is exactly read_ground_truth() after step n - 3 (the magnetometer turns,
    so the values differ from step to step and a wrong slot cannot pass)."""
    scene, _, s = spin
    truth = []
    for _ in range(DELAY_STEPS + 3):
        scene.step()
        truth.append(s["delayed"].read_ground_truth())
        if len(truth) > DELAY_STEPS:
            got, want = s["delayed"].read(), truth[-1 - DELAY_STEPS]
            for name in ("lin_acc", "ang_vel", "mag"):
                assert torch.equal(getattr(got, name), getattr(want, name)), name
            assert not torch.equal(got.mag, truth[-1].mag)


def test_jitter_reads_between_the_buffered_steps_around_delay_plus_jitter(spin):
    """delay 2 dt, jitter dt: each step each environment reads 2 + u steps back (u uniform in [0, 1)),
    interpolated: every component lies between the ground truths of 2 and 3 steps before, strictly inside for the
    turning field, with another u per environment and step."""
    scene, _, s = spin
    truth, fractions = [], []
    for _ in range(8):
        scene.step()
        truth.append(s["jittered"].read_ground_truth().mag)
        if len(truth) > 3:
            got, near, far = s["jittered"].read().mag, truth[-3], truth[-4]
            lo, hi = torch.minimum(near, far), torch.maximum(near, far)
            assert bool(((got >= lo - 1e-12) & (got <= hi + 1e-12)).all())
            # x turns (as cos): the fraction of the way from 2 to 3 steps back is the environment's u
            fractions.append((got[:, 0] - near[:, 0]) / (far[:, 0] - near[:, 0]))
    fractions = torch.cat(fractions)
    assert bool(((fractions > 0) & (fractions < 1)).all())
    assert len(set(np.round(fractions.numpy(), 9).tolist())) == len(fractions)  # a new u per environment and step


def test_scene_without_envs_reads_without_a_batch_dimension():
    """n_envs=0: no batch dimension anywhere; envs_idx is refused as everywhere else."""
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=DT))
    scene.add_entity(gs.morphs.Plane())
    box = scene.add_entity(gs.morphs.Box(pos=(0, 0, SIDE / 2), size=(SIDE,) * 3))
    imu = scene.add_sensor(gs.sensors.IMU(entity_idx=box.idx, acc_noise=0.01, delay=DT))
    force = scene.add_sensor(gs.sensors.ContactForce(entity_idx=box.idx))
    touch = scene.add_sensor(gs.sensors.Contact(entity_idx=box.idx))
    scene.build()
    for _ in range(5):
        scene.step()
    assert imu.read().lin_acc.shape == (3,) and imu.read_ground_truth().mag.shape == (3,)
    assert force.read().shape == (3,) and touch.read().shape == (1,) and bool(touch.read())
    _close(force.read(), (0.0, 0.0, float(box.get_mass()) * G), 1e-6)
    with pytest.raises(gs.SceneError, match="without environments"):
        imu.read(envs_idx=[0])
    imu.set_delay(0.0)
    imu.set_pos_offset((0.0, 0.0, 0.0))
    imu.set_quat_offset((1.0, 0.0, 0.0, 0.0))
    imu.set_gyro_cross_axis_coupling(0.0)
    scene.step()
    assert torch.equal(imu.read().mag, imu.read_ground_truth().mag)
    with pytest.raises(gs.OptionError, match="add_sensor"):
        imu.set_delay(2 * DT)
    with pytest.raises(gs.SceneError, match="without environments"):
        imu.set_delay(0.0, envs_idx=[0])


# -- the measurement model ---------------------------------------------------------------------------------------


def _record(scene, sensor, n, what=lambda x: x):
    out = []
    for _ in range(n):
        scene.step()
        out.append((what(sensor.read()), what(sensor.read_ground_truth())))
    return torch.stack([m for m, _ in out]), torch.stack([t for _, t in out])


def test_bias_and_white_noise_statistics(rest):
    """read - ground truth - bias is N(0, noise^2): over 100 steps x 4 envs x 3 axes (1200 draws) the mean lies
    within 5 sigma / sqrt(1200) of 0 and the standard deviation within 12% (5 times the estimator's 2%)."""
    scene, _, _, s = rest
    measured, truth = _record(scene, s["noisy"], 100, lambda d: d.lin_acc)
    residual = measured - truth - torch.as_tensor(ACC_BIAS, dtype=measured.dtype)
    n = residual.numel()
    assert abs(float(residual.mean())) < 5 * ACC_NOISE / math.sqrt(n)
    assert abs(float(residual.std()) / ACC_NOISE - 1) < 0.12
    per_axis_mean = (measured - truth).mean(dim=(0, 1))
    assert torch.allclose(per_axis_mean, torch.as_tensor(ACC_BIAS, dtype=measured.dtype), atol=0.02)
    assert not torch.equal(residual[:, 0], residual[:, 1])  # each environment draws its own noise


def test_random_walk_accumulates_with_the_given_step_deviation(rest):
    """read - ground truth is the drift; its increments are N(0, random_walk^2) (300 draws: std within 25%),
    and the drift persists: after 100 steps its spread is ~ random_walk * sqrt(steps), far above one step's."""
    scene, _, _, s = rest
    measured, truth = _record(scene, s["walk"], 100)
    drift = measured - truth  # [steps, envs, 3]
    steps = drift[1:] - drift[:-1]
    assert abs(float(steps.std()) / WALK - 1) < 0.25
    assert float(drift[-1].abs().max()) > 2 * WALK  # accumulated, not redrawn
    assert float(s["walk"]._manager.state.at("drift", 0)[:, s["walk"].channels].abs().max()) > 0


def test_resolution_quantises_the_reading(rest):
    """resolution 0.5 N: the reading is the multiple of 0.5 nearest the biased ground truth."""
    scene, _, _, s = rest
    scene.step()
    got, truth = s["quantised"].read(), s["quantised"].read_ground_truth()
    assert torch.equal(got, torch.round((truth + 0.2) / RES) * RES)
    assert torch.equal(got / RES, torch.round(got / RES))
    assert not torch.equal(got, truth + 0.2)


def test_setters_change_the_model_per_environment_and_are_state(rest, tmp_path):
    """set_bias / set_noise / set_resolution / set_random_walk write each environment's parameters (state): the
    falling box's force sensor (ground truth 0) reads exactly the bias set in its environment; noise switched on
    after build appears; a snapshot taken before restores the old parameters, as does a checkpoint; bad values
    and sensors without a measurement model are refused with nothing written."""
    scene, _, _, s = rest
    snap = scene.get_state()
    path = tmp_path / "before.ckpt"
    scene.save_checkpoint(path)
    force = s["force_fall"]
    force.set_bias([0.5, -0.25, 2.0], envs_idx=[1])
    force.set_bias(torch.tensor([[1.0, 1.0, 1.0], [3.0, 3.0, 3.0]]), envs_idx=[2, 3])
    scene.step()
    got = force.read()
    want = torch.tensor([[0.0, 0.0, 0.0], [0.5, -0.25, 2.0], [1.0, 1.0, 1.0], [3.0, 3.0, 3.0]], dtype=got.dtype)
    assert torch.equal(got, want)
    force.set_noise(0.1, envs_idx=[0])
    scene.step()
    got = force.read()
    assert bool((got[0] != 0).all()) and torch.equal(got[1:], want[1:])
    force.set_resolution(1.0)
    scene.step()
    assert torch.equal(force.read()[1:], torch.round(want[1:]))
    before = scene.get_state().fields_by_key()
    for bad, match in [(lambda: force.set_noise(-1.0), "noise"), (lambda: force.set_bias([1.0, 2.0]), "set_bias"),
                       (lambda: s["touch"].set_bias(1.0), "not a noisy sensor"),
                       (lambda: force.set_random_walk(float("nan")), "random_walk")]:
        with pytest.raises(gs.GenesisError, match=match):
            bad()
    for k, x in scene.get_state().fields_by_key().items():
        assert torch.equal(x, before[k]), k
    scene.reset(snap)
    scene.step()
    assert torch.equal(force.read(), torch.zeros_like(got))  # the parameters of the snapshot: none
    force.set_bias(7.0)
    scene.load_checkpoint(path)
    scene.step()
    assert torch.equal(force.read(), torch.zeros_like(got))
    scene.reset(snap)


def _sensor_state(scene):
    return scene.get_state().solvers_state[scene.solvers.index(scene.sensor_manager)]


def _unchanged(scene, before):
    for k, x in scene.get_state().fields_by_key().items():
        assert torch.equal(x, before[k]), k


def test_set_delay_is_exact_in_steps_per_environment_and_state(spin):
    """set_delay(3 dt) in env 1 only, on an IMU built without delay: env 1 then reads the ground truth of exactly 3
    steps before (the turning field tells the slots apart); env 0 reads bit for bit what it reads without the
    call (the same steps replayed from a snapshot, where the reset restores delay 0); a delay beyond the history
    built (3 steps: the largest delay + jitter of the options) is refused, naming the way to a longer one."""
    scene, _, s = spin
    imu = s["offset"]
    snap = scene.get_state()
    imu.set_delay(DELAY_STEPS * DT, envs_idx=[1])
    assert _sensor_state(scene).delay_steps[:, imu.idx].tolist() == [0, DELAY_STEPS]
    truth, reads = [], []
    for _ in range(DELAY_STEPS + 3):
        scene.step()
        truth.append(imu.read_ground_truth())
        reads.append(_reads(scene))
        if len(truth) > DELAY_STEPS:
            got, want = imu.read(), truth[-1 - DELAY_STEPS]
            for name in ("lin_acc", "ang_vel", "mag"):
                assert torch.equal(getattr(got, name)[1], getattr(want, name)[1]), name
            assert not torch.equal(got.mag[1], truth[-1].mag[1])
            assert torch.equal(got.mag[0], truth[-1].mag[0])  # env 0: no delay
    before = scene.get_state().fields_by_key()
    for bad, match in [(lambda: imu.set_delay((DELAY_STEPS + 1) * DT, envs_idx=[1]), "add_sensor"),
                       (lambda: s["delayed"].set_jitter(DT), "needs 4 steps of history"),
                       (lambda: imu.set_delay(-DT), r"delay=-0.01 s .*>= 0"),
                       (lambda: imu.set_delay([DT, float("inf")]), "finite"),
                       (lambda: imu.set_delay([DT, DT, DT]), "shape")]:
        with pytest.raises(gs.OptionError, match=match):
            bad()
    _unchanged(scene, before)
    scene.reset(snap)
    assert _sensor_state(scene).delay_steps[:, imu.idx].tolist() == [0, 0]
    for want in reads:
        scene.step()
        assert torch.equal(_reads(scene)[0], want[0])  # env 0 untouched by env 1's delay
    assert torch.equal(imu.read().mag, imu.read_ground_truth().mag)
    scene.reset(snap)


def test_set_jitter_per_environment_and_in_checkpoints(spin, tmp_path):
    """set_jitter(dt) in env 0 of an IMU without delay: env 0 reads between the ground truths of 0 and 1 steps
    before (strictly inside for the turning field), env 1 the current one; a checkpoint saved before the call
    restores jitter 0."""
    scene, _, s = spin
    imu = s["offset"]
    snap = scene.get_state()
    path = tmp_path / "before.ckpt"
    scene.save_checkpoint(path)
    imu.set_jitter(DT, envs_idx=[0])
    assert _sensor_state(scene).jitter_steps[:, imu.idx].tolist() == [1.0, 0.0]
    prev = imu.read_ground_truth().mag
    for _ in range(4):
        scene.step()
        now, got = imu.read_ground_truth().mag, imu.read().mag
        lo, hi = torch.minimum(now[0], prev[0]), torch.maximum(now[0], prev[0])
        assert bool(((got[0] >= lo - 1e-12) & (got[0] <= hi + 1e-12)).all())
        assert 0 < float((got[0, 0] - now[0, 0]) / (prev[0, 0] - now[0, 0])) < 1
        assert torch.equal(got[1], now[1])
        prev = now
    scene.load_checkpoint(path)
    assert _sensor_state(scene).jitter_steps[:, imu.idx].tolist() == [0.0, 0.0]
    scene.step()
    assert torch.equal(imu.read().mag, imu.read_ground_truth().mag)
    scene.reset(snap)


def test_set_pos_offset_reads_the_centripetal_term_of_each_environment(spin):
    """On the body turning at OMEGA about z (no gravity), an IMU at r reads -OMEGA^2 r (r in the plane of the
    turn), with r set per environment; on the axis nothing. set_quat_offset turns the sensor frame: (2, 2, 0, 0),
    normalised, is a roll of 90 degrees, and the gyroscope then reads the spin along its +y."""
    scene, _, s = spin
    imu = s["offset"]
    snap = scene.get_state()
    r = torch.tensor([[0.2, 0.0, 0.0], [0.0, 0.5, 0.0]], dtype=torch.float64)
    imu.set_pos_offset(r)
    scene.step()
    _close(imu.read().lin_acc, -OMEGA**2 * r, 1e-9)
    imu.set_pos_offset((0.0, 0.0, 0.4), envs_idx=[1])  # on the axis of the turn
    imu.set_quat_offset(torch.tensor([2.0, 2.0, 0.0, 0.0]), envs_idx=[1])
    h = math.sqrt(0.5)
    assert torch.allclose(_sensor_state(scene).quat_offset[1, imu._pose_row],
                          torch.tensor([h, h, 0.0, 0.0], dtype=torch.float64), atol=1e-15)
    scene.step()
    data = imu.read()
    _close(data.lin_acc[0], -OMEGA**2 * r[0], 1e-9)
    _close(data.lin_acc[1], (0.0, 0.0, 0.0), 1e-9)
    _close(data.ang_vel, torch.tensor([[0.0, 0.0, OMEGA], [0.0, OMEGA, 0.0]]), 1e-9)
    before = scene.get_state().fields_by_key()
    for bad, match in [(lambda: imu.set_quat_offset((0.0, 0.0, 0.0, 0.0)), "zero quaternion"),
                       (lambda: imu.set_quat_offset((1.0, float("nan"), 0.0, 0.0)), "finite"),
                       (lambda: imu.set_pos_offset((1.0, 2.0)), "shape"),
                       (lambda: imu.set_pos_offset(torch.zeros(3, 3)), "shape"),
                       (lambda: imu.set_pos_offset((2e6, 0.0, 0.0), envs_idx=[0]), r"pos_offset\[env 0.*1000000")]:
        with pytest.raises(gs.OptionError, match=match):
            bad()
    _unchanged(scene, before)
    scene.reset(snap)
    assert torch.equal(_sensor_state(scene).pos_offset[:, imu._pose_row],
                       torch.tensor([[R_OFF, 0.0, 0.0]] * 2, dtype=torch.float64))


def test_cross_axis_coupling_setters_apply_the_matrix_per_environment(spin):
    """Each reading is M times the ground truth with M set per environment: a 3x3 matrix (gyroscope, env 1), a
    number (accelerometer, env 0), 3 numbers (magnetometer, every environment), and one matrix per environment;
    the other environments read the ground truth exactly; bad values are refused with nothing written."""
    from genesis_core.sensors.options import alignment_matrix

    scene, _, s = spin
    imu = s["offset"]
    snap = scene.get_state()
    m = np.array([[1.0, 0.1, -0.2], [0.05, 0.9, 0.3], [0.0, -0.1, 1.1]])
    imu.set_gyro_cross_axis_coupling(m, envs_idx=[1])
    imu.set_acc_cross_axis_coupling(0.1, envs_idx=[0])
    imu.set_mag_cross_axis_coupling((0.1, 0.2, 0.3))
    scene.step()
    got, truth = imu.read(), imu.read_ground_truth()

    def applied(matrix, v):
        return torch.as_tensor(matrix, dtype=v.dtype) @ v

    _close(got.ang_vel[1], applied(m, truth.ang_vel[1]), 1e-12)
    assert torch.equal(got.ang_vel[0], truth.ang_vel[0])
    _close(got.lin_acc[0], applied(alignment_matrix(0.1), truth.lin_acc[0]), 1e-12)
    assert torch.equal(got.lin_acc[1], truth.lin_acc[1])
    for b in range(2):
        _close(got.mag[b], applied(alignment_matrix((0.1, 0.2, 0.3)), truth.mag[b]), 1e-12)
    assert not torch.equal(got.mag, truth.mag)
    imu.set_gyro_cross_axis_coupling(torch.tensor(np.stack([m.T, np.eye(3)])))
    scene.step()
    got, truth = imu.read(), imu.read_ground_truth()
    _close(got.ang_vel[0], applied(m.T, truth.ang_vel[0]), 1e-12)
    assert torch.equal(got.ang_vel[1], truth.ang_vel[1])
    before = scene.get_state().fields_by_key()
    for bad in [lambda: imu.set_acc_cross_axis_coupling(1.5), lambda: imu.set_acc_cross_axis_coupling((0.1, 2.0, 0.3)),
                lambda: imu.set_gyro_cross_axis_coupling(np.ones((2, 2))),
                lambda: imu.set_mag_cross_axis_coupling(np.full((3, 3), np.nan)),
                lambda: imu.set_mag_cross_axis_coupling(np.ones((3, 3, 3))),
                lambda: imu.set_mag_cross_axis_coupling(np.eye(3) * 1e7)]:
        with pytest.raises(gs.OptionError, match="cross_axis_coupling"):
            bad()
    _unchanged(scene, before)
    scene.reset(snap)
    scene.step()
    got, truth = imu.read(), imu.read_ground_truth()
    assert torch.equal(got.mag, truth.mag) and torch.equal(got.ang_vel, truth.ang_vel)  # the snapshot's: none
    scene.reset(snap)


def test_setters_of_kinds_without_them_are_refused(rest):
    """A contact flag has no measurement model to set and a fixed frame: refused, naming the setter."""
    scene, _, _, s = rest
    before = scene.get_state().fields_by_key()
    for bad, match in [(lambda: s["touch"].set_delay(0.0), "set_delay: a Contact sensor"),
                       (lambda: s["touch"].set_jitter(0.0), "set_jitter: a Contact sensor"),
                       (lambda: s["touch"].set_pos_offset((0.0, 0.0, 0.1)), "set_pos_offset: a Contact sensor"),
                       (lambda: s["touch"].set_quat_offset((1.0, 0.0, 0.0, 0.0)), "set_quat_offset"),
                       (lambda: s["imu"].set_delay(DT), "add_sensor")]:  # (this scene keeps no history)
        with pytest.raises(gs.OptionError, match=match):
            bad()
    _unchanged(scene, before)


# -- sensor state in snapshots, resets and checkpoints -----------------------------------------------------------


def _reads(scene):
    """Every sensor's reading (measured and ground truth) as one [n_envs, n] tensor."""
    parts = []
    for sensor in scene.sensors:
        for x in (sensor.read(), sensor.read_ground_truth()):
            x = torch.cat(list(x), dim=-1) if isinstance(x, tuple) else x
            parts.append(x.to(torch.float64))
    return torch.cat(parts, dim=-1)


def test_sensor_state_is_declared_and_in_the_scene_state(rest):
    scene, _, _, _ = rest
    manager = scene.sensor_manager
    assert scene.solvers[-1] is manager and manager in scene.active_solvers
    sub = scene.get_state().solvers_state[scene.solvers.index(manager)]
    assert set(sub.fields) == {"history", "measured", "drift", "aux", "rng_key", "rng_counter", "bias", "noise",
                               "random_walk", "resolution", "delay_steps", "jitter_steps", "pos_offset",
                               "quat_offset", "alignment"}
    n_imus = sum(isinstance(x, gs.sensors.IMUSensor) for x in scene.sensors)
    n_posed = sum(isinstance(x, (gs.sensors.IMUSensor, gs.sensors.ContactForceSensor)) for x in scene.sensors)
    assert sub.delay_steps.shape == (N_ENVS, len(scene.sensors)) and sub.delay_steps.dtype == torch.int32
    assert sub.pos_offset.shape == (N_ENVS, n_posed, 3) and sub.quat_offset.shape == (N_ENVS, n_posed, 4)
    assert sub.alignment.shape == (N_ENVS, 3 * n_imus, 3, 3)
    assert sub.rng_counter.shape == (N_ENVS,) and sub.rng_counter.dtype == torch.int32


def test_reset_replays_noisy_readings_in_the_reset_envs_and_leaves_the_others(rest):
    """snapshot -> 3 steps (readings A) -> 2 more -> reset(snapshot, envs [1, 3]) -> 3 steps: envs 1 and 3 read A
    bit for bit (the noise generator's key and counter are restored with the rest), envs 0 and 2 are untouched by
    the reset."""
    scene, _, _, _ = rest
    snap = scene.get_state()
    at_snap = _reads(scene)
    first = []
    for _ in range(3):
        scene.step()
        first.append(_reads(scene))
    scene.step()
    scene.step()
    before = {k: x.clone() for k, x in scene.get_state().fields_by_key().items()}
    reads_before = _reads(scene)
    idx = [1, 3]
    scene.reset(snap, envs_idx=idx)
    after = scene.get_state().fields_by_key()
    for k, x in before.items():
        assert torch.equal(after[k][[0, 2]], x[[0, 2]]), k
    assert torch.equal(_reads(scene)[idx], at_snap[idx])  # the readings of the snapshot, before any step
    assert torch.equal(_reads(scene)[[0, 2]], reads_before[[0, 2]])
    for want in first:
        scene.step()
        assert torch.equal(_reads(scene)[idx], want[idx])
    scene.reset(snap)  # (the other tests' starting point)


def test_bad_sensor_state_is_refused(rest):
    scene, _, _, _ = rest
    state = scene.get_state()
    sub = state.solvers_state[-1]
    sub.rng_counter[2] = -1
    before = scene.get_state().fields_by_key()
    with pytest.raises(gs.InvalidStateError, match=r"SensorManager.rng_counter\[env 2"):
        scene.reset(state)
    _unchanged(scene, before)
    state = scene.get_state()
    state.solvers_state[-1].delay_steps[1, 0] = 1  # this scene keeps no history (no delay in its options)
    with pytest.raises(gs.InvalidStateError, match=r"SensorManager.delay_steps\[env 1.*ceil\(jitter_steps\) <= 0"):
        scene.reset(state)
    state = scene.get_state()
    state.solvers_state[-1].quat_offset[0, 0] = torch.tensor([0.5, 0.0, 0.0, 0.0])
    with pytest.raises(gs.InvalidStateError, match=r"SensorManager.quat_offset\[env 0.*unit quaternion"):
        scene.reset(state)
    _unchanged(scene, before)


def test_checkpoint_resumes_sensor_readings_exactly(rest, tmp_path):
    """save, 3 steps (readings A), load, 3 steps: A again, bit for bit; and in a fresh process too."""
    scene, _, _, _ = rest
    path = tmp_path / "sensors.ckpt"
    scene.save_checkpoint(path)
    want = []
    for _ in range(3):
        scene.step()
        want.append(_reads(scene))
    scene.load_checkpoint(path)
    for w in want:
        scene.step()
        assert torch.equal(_reads(scene), w)
    out = tmp_path / "child.pt"
    code = ("import torch, genesis_core as gs\n"
            "from genesis_core.testing import RUNTIME\n"
            "gs.init(backend=gs.cpu, **RUNTIME)\n"
            "from tests.test_sensors import _rest_scene, _reads\n"
            f"scene = _rest_scene()[0]\nscene.load_checkpoint({str(path)!r})\n"
            "reads = []\n"
            "for _ in range(3):\n    scene.step(); reads.append(_reads(scene))\n"
            f"torch.save(torch.stack(reads), {str(out)!r})\n")
    subprocess.run([sys.executable, "-c", code], cwd=REPO, env=python_env(), check=True, timeout=900)
    assert torch.equal(torch.load(out), torch.stack(want))


def test_checkpoint_of_other_sensors_is_refused(rest, tmp_path):
    scene, _, _, _ = rest
    other = gs.Scene(sim_options=gs.options.SimOptions(dt=DT))
    other.add_entity(gs.morphs.Plane())
    box = other.add_entity(gs.morphs.Box(pos=(0, 0, SIDE / 2), size=(SIDE,) * 3))
    other.add_entity(gs.morphs.Box(pos=(0, 0, 300.0), size=(SIDE,) * 3))
    other.add_sensor(gs.sensors.IMU(entity_idx=box.idx))
    other.build(n_envs=N_ENVS)
    other.save_checkpoint(tmp_path / "other.ckpt")
    before = scene.get_state().fields_by_key()
    with pytest.raises(gs.CheckpointMismatchError, match="SensorManager"):
        scene.load_checkpoint(tmp_path / "other.ckpt")
    for k, x in scene.get_state().fields_by_key().items():
        assert torch.equal(x, before[k]), k


# -- refusals ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("make, match", [
    (lambda: gs.sensors.IMU(acc_noise=-0.1), "acc_noise"),
    (lambda: gs.sensors.ContactForce(noise=-1.0), "noise"),
    (lambda: gs.sensors.ContactForce(random_walk=float("nan")), "random_walk"),
    (lambda: gs.sensors.IMU(delay=0.01, jitter=0.02, interpolate=True), "jitter"),
    (lambda: gs.sensors.IMU(delay=0.02, jitter=0.01), "interpolate"),
    (lambda: gs.sensors.IMU(noise=0.1), "acc_"),
    (lambda: gs.sensors.IMU(acc_cross_axis_coupling=1.5), "cross_axis"),
    (lambda: gs.sensors.ContactForce(min_force=2.0, max_force=1.0), "max_force"),
    (lambda: gs.sensors.Contact(link_idx_local=-1), "link_idx_local"),
    (lambda: gs.sensors.Contact(delay=-0.1), "delay"),
])
def test_bad_options_are_refused_on_construction(make, match):
    with pytest.raises(gs.OptionError, match=match):
        make()


def test_bad_attachment_is_refused_and_nothing_is_added():
    scene = gs.Scene()
    box = scene.add_entity(gs.morphs.Box(size=(SIDE,) * 3))
    chain = scene.add_entity(gs.morphs.Cylinder(height=0.5, radius=0.01), material=gs.materials.SpringChain())
    cases = [
        (gs.sensors.Contact(), "attached to no entity"),
        (gs.sensors.Contact(entity_idx=5), "out of range"),
        (gs.sensors.ContactForce(entity_idx=box.idx, link_idx_local=1), "link_idx_local=1"),
        (gs.sensors.IMU(entity_idx=chain.idx), "rigid entities"),
        (gs.sensors.ContactForce(entity_idx=box.idx, noise=(0.1, 0.2)), "one number or 3"),
        (gs.sensors.ContactForce(entity_idx=box.idx, pos_offset=(0.0, 2e6, 0.0)), "pos_offset"),
        (gs.sensors.IMU(entity_idx=box.idx, gyro_cross_axis_coupling=np.eye(3) * 1e7), "gyro_cross_axis_coupling"),
        (gs.options.SimOptions(), "not a sensor"),
    ]
    for options, match in cases:
        with pytest.raises(gs.OptionError, match=match):
            scene.add_sensor(options)
    assert scene.sensors == [] and not scene.sensor_manager.is_active
    with pytest.warns(UserWarning, match="not a multiple of dt"):
        imu = scene.add_sensor(gs.sensors.IMU(entity_idx=box.idx, delay=0.015))
    assert len(scene.sensors) == 1
    for setter in (lambda: imu.set_delay(0.01), lambda: imu.set_jitter(0.0), lambda: imu.set_pos_offset((0, 0, 1)),
                   lambda: imu.set_quat_offset((1, 0, 0, 0)), lambda: imu.set_acc_cross_axis_coupling(0.1)):
        with pytest.raises(gs.SceneError, match="before scene.build"):
            setter()


def test_cross_axis_coupling_matrix():
    from genesis_core.sensors.options import alignment_matrix

    assert np.array_equal(alignment_matrix(0.1), [[1, 0.1, 0.1], [0.1, 1, 0.1], [0.1, 0.1, 1]])
    assert np.array_equal(alignment_matrix((0.1, 0.2, 0.3)), [[1, 0.2, 0.3], [0.1, 1, 0.3], [0.1, 0.2, 1]])
    assert np.array_equal(alignment_matrix(((1, 2, 3), (4, 5, 6), (7, 8, 9))), [[1, 2, 3], [4, 5, 6], [7, 8, 9]])


def test_rigid_options_gravity_is_the_rigid_bodies_and_the_imus():
    """RigidOptions(gravity=(0, 0, -2)) with SimOptions' -9.81: the box falls at 2 m/s^2 (semi-implicit Euler:
    z_n = z0 - g dt^2 n (n + 1) / 2, exactly) and its IMU, which reads the solver's own gravity, reads 0 in that
    free fall (with the scene's -9.81 it would read -7.81 up); scene.set_gravity then sets the rigid solver's too."""
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=DT),
                     rigid_options=gs.options.RigidOptions(gravity=(0.0, 0.0, -2.0)))
    box = scene.add_entity(gs.morphs.Box(pos=(0, 0, 1.0), size=(SIDE,) * 3))
    imu = scene.add_sensor(gs.sensors.IMU(entity_idx=box.idx))
    scene.build()
    assert scene.rigid_solver.gravity == (0.0, 0.0, -2.0)
    n = 10
    for _ in range(n):
        scene.step()
    z = float(box.get_pos()[2])
    assert abs(z - (1.0 - 2.0 * DT**2 * n * (n + 1) / 2)) < 1e-9
    _close(imu.read().lin_acc, (0.0, 0.0, 0.0), 1e-9)
    scene.set_gravity((0.0, 0.0, -5.0))  # every solver's, the rigid one's included
    scene.step()
    assert scene.rigid_solver.gravity == (0.0, 0.0, -5.0)
    _close(imu.read().lin_acc, (0.0, 0.0, 0.0), 1e-9)
