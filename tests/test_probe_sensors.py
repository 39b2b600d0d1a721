"""The probe sensors (gs.sensors.Proximity, KinematicContactProbe, ElastomerDisplacement) against analytic
geometry: distances to a sphere, a box and a plane computed in closed form from the bodies' poses; the depth of a
sphere's cap and of a box's face pressed into a sensor pad; the elastomer's fields (dilation, shear, twist) from
those depths and the touching body's velocity. Float64 on the CPU, so the references hold to rounding (1e-12 m)
whatever the contact solver did to the poses: each reference is evaluated at the pose the step left.

Three small scenes built once per module (proximity, tactile, one body of each geom kind) and three tiny ones; the
rigid kernels' loading dominates (their serial copies only: launch_mode="serial" skips the timing trial), the
sensors' one kernel is compiled once for all three kinds."""

import math

import numpy as np
import pytest
import torch

import genesis_core as gs
from genesis_core.rotations import quat_to_mat

DT = 0.01
TOL = 1e-12  # m: float64 geometry, a few roundings

# -- the proximity scene: a holder at HOLDER, a sphere, a box and the ground plane, no gravity (nothing moves unless
# told to)
HOLDER = np.array([0.0, 0.0, 1.0])
R_SPHERE = 0.1
SPHERE_AT = (0.5, 0.0, 1.0)
BOX_AT = (0.0, -0.6, 1.0)
BOX_HALF = np.array([0.1, 0.2, 0.3])
PROBES = ((0.0, 0.0, 0.0), (0.1, 0.0, 0.0), (0.0, 0.0, -0.5))
SHORT_RANGE = 0.35
BIAS = (0.05, 0.0, -0.05)
OFFSET_POS, OFFSET_EULER, OFFSET_PROBE = (0.0, 0.0, 0.2), (0.0, 0.0, 90.0), (0.1, 0.0, 0.0)


def _proximity_scene():
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=DT, gravity=(0.0, 0.0, 0.0)))
    plane = scene.add_entity(gs.morphs.Plane())
    sphere = scene.add_entity(gs.morphs.Sphere(pos=SPHERE_AT, radius=R_SPHERE))
    box = scene.add_entity(gs.morphs.Box(pos=BOX_AT, size=tuple(2 * BOX_HALF)))
    holder = scene.add_entity(gs.morphs.Box(pos=tuple(HOLDER), size=(0.02,) * 3, fixed=True))

    def prox(track, **kw):
        return scene.add_sensor(gs.sensors.Proximity(entity_idx=holder.idx, probe_local_pos=kw.pop("probes", PROBES),
                                                     track_link_idx=[e.base_link_idx for e in track], **kw))

    s = dict(sphere=prox([sphere]), box=prox([box]), plane=prox([plane]), all=prox([sphere, box, plane]),
             short=prox([sphere], max_range=SHORT_RANGE), biased=prox([sphere], bias=BIAS),
             offset=prox([sphere], probes=(OFFSET_PROBE,), pos_offset=OFFSET_POS, euler_offset=OFFSET_EULER),
             noisy=prox([sphere, box], noise=0.01, delay=DT))
    scene.build(n_envs=2)
    scene.rigid_solver.launch_mode = "serial"  # no timing trial: one copy of the rigid kernels to compile
    # environment 1: the sphere elsewhere, the box turned 30 degrees about z
    sphere.set_pos([[*SPHERE_AT], [0.3, 0.25, 1.15]])
    half = math.radians(30.0) / 2
    box.set_quat([[1.0, 0.0, 0.0, 0.0], [math.cos(half), 0.0, 0.0, math.sin(half)]])
    scene.step()
    return scene, dict(plane=plane, sphere=sphere, box=box, holder=holder), s


@pytest.fixture(scope="module")
def prox():
    return _proximity_scene()


def _to_sphere(x, centre):
    v = x - centre
    r = np.linalg.norm(v)
    return r - R_SPHERE, centre + R_SPHERE * v / r


def _to_box(x, centre, quat):
    rot = quat_to_mat(np.asarray(quat, dtype=np.float64))
    p = rot.T @ (x - centre)
    q = np.clip(p, -BOX_HALF, BOX_HALF)
    assert not np.array_equal(p, q), "the references take probes outside the box"
    return np.linalg.norm(p - q), centre + rot @ q


def _to_plane(x):
    return abs(x[2]), np.array([x[0], x[1], 0.0])


def _expected(bodies, track, probes_world, env, max_range=10.0):
    """The nearest tracked surface of each probe: distances [n], points [n, 3]."""
    sphere = bodies["sphere"].get_pos()[env].numpy()
    box, box_q = bodies["box"].get_pos()[env].numpy(), bodies["box"].get_quat()[env].numpy()
    dist, points = [], []
    for x in probes_world:
        cands = [(max_range, x)]
        if "sphere" in track:
            cands.append(_to_sphere(x, sphere))
        if "box" in track:
            cands.append(_to_box(x, box, box_q))
        if "plane" in track:
            cands.append(_to_plane(x))
        d, p = min(cands, key=lambda c: c[0])
        dist.append(d)
        points.append(p)
    return np.array(dist), np.array(points)


def _check(sensor, bodies, track, probes_world, max_range=10.0):
    got, points = sensor.read_ground_truth().numpy(), sensor.nearest_points.numpy()
    assert got.shape == (2, len(probes_world)) and points.shape == (2, len(probes_world), 3)
    for env in range(2):
        dist, near = _expected(bodies, track, probes_world, env, max_range)
        np.testing.assert_allclose(got[env], dist, rtol=0, atol=TOL)
        np.testing.assert_allclose(points[env], near, rtol=0, atol=TOL)


# -- Proximity --------------------------------------------------------------------------------------------------


def test_proximity_reads_the_distance_to_a_sphere_a_box_and_a_plane_per_environment(prox):
    """Each probe reads |x - c| - r to the sphere, the Euclidean distance to the (turned, in env 1) box, |z| to the
    plane, and the nearest of the three when it tracks all; nearest_points are those surface points (world)."""
    scene, bodies, s = prox
    world = HOLDER + np.array(PROBES)
    for name, track in (("sphere", ["sphere"]), ("box", ["box"]), ("plane", ["plane"]),
                        ("all", ["sphere", "box", "plane"])):
        _check(s[name], bodies, track, world)
    assert torch.equal(s["sphere"].read(), s["sphere"].read_ground_truth())  # no delay, no noise
    np.testing.assert_allclose(s["sphere"].read()[0].numpy(), [0.4, 0.3, math.sqrt(0.5) - R_SPHERE], atol=TOL)
    assert not torch.equal(s["sphere"].read()[0], s["sphere"].read()[1])  # the environments' own poses


def test_proximity_beyond_max_range_reads_max_range_at_the_probe(prox):
    """max_range 0.35: the probe 0.4 m from the sphere reads 0.35 and its own position; the one 0.3 m away reads
    0.3 and the sphere's surface."""
    _, bodies, s = prox
    got, points = s["short"].read()[0].numpy(), s["short"].nearest_points[0].numpy()
    assert got[0] == SHORT_RANGE and np.array_equal(points[0], HOLDER)
    np.testing.assert_allclose(got[1], 0.3, atol=TOL)
    _check(s["short"], bodies, ["sphere"], HOLDER + np.array(PROBES), max_range=SHORT_RANGE)


def test_proximity_probes_are_in_the_sensor_frame(prox):
    """pos_offset (0, 0, 0.2) and euler_offset yaw 90 degrees: probe (0.1, 0, 0) sits at holder + (0, 0.1, 0.2)."""
    _, bodies, s = prox
    _check(s["offset"], bodies, ["sphere"], [HOLDER + np.array([0.0, 0.1, 0.2])])


def test_proximity_bias_applies_per_probe_to_the_distance_only(prox):
    _, _, s = prox
    truth = s["biased"].read_ground_truth()
    assert torch.equal(s["biased"].read(), truth + torch.as_tensor(BIAS, dtype=truth.dtype))
    assert torch.equal(s["biased"].nearest_points, s["sphere"].nearest_points)


def test_proximity_follows_a_moving_tracked_body(prox):
    """The sphere moving at -2 m/s along x in env 0 (no gravity, no contact: it keeps its velocity): after each step
    the reading is the distance to where it is then; env 1's sphere, at rest, reads the same as before."""
    scene, bodies, s = prox
    before = s["sphere"].read()
    bodies["sphere"].set_dofs_velocity([-2.0, 0.0, 0.0], dofs_idx_local=[0, 1, 2], envs_idx=[0])
    for _ in range(3):
        scene.step()
        _check(s["sphere"], bodies, ["sphere"], HOLDER + np.array(PROBES))
    np.testing.assert_allclose(bodies["sphere"].get_pos()[0, 0].item(), SPHERE_AT[0] - 3 * 2.0 * DT, atol=1e-12)
    assert torch.equal(s["sphere"].read()[1], before[1])
    bodies["sphere"].set_dofs_velocity([0.0, 0.0, 0.0], dofs_idx_local=[0, 1, 2], envs_idx=[0])
    bodies["sphere"].set_pos([list(SPHERE_AT)], envs_idx=[0])
    scene.step()


def test_proximity_state_resets_per_environment(prox):
    """snapshot -> 2 steps (noisy, delayed readings A) -> 2 more -> reset(snapshot, envs [1]): env 0's sensor state
    is untouched bit for bit; env 1 reads the snapshot's readings, then A again, noise included."""
    scene, bodies, s = prox
    snap = scene.get_state()
    at_snap = s["noisy"].read()
    first = []
    for _ in range(2):
        scene.step()
        first.append((s["noisy"].read(), s["noisy"].nearest_points))
    scene.step()
    scene.step()
    manager = scene.solvers.index(scene.sensor_manager)
    before = {k: x.clone() for k, x in scene.get_state().solvers_state[manager].fields.items()}
    scene.reset(snap, envs_idx=[1])
    after = scene.get_state().solvers_state[manager].fields
    for k, x in before.items():
        assert torch.equal(after[k][0], x[0]), k
    assert torch.equal(s["noisy"].read()[1], at_snap[1])
    for reading, points in first:
        scene.step()
        assert torch.equal(s["noisy"].read()[1], reading[1])
        assert torch.equal(s["noisy"].nearest_points[1], points[1])
    assert not torch.equal(s["noisy"].read(), s["noisy"].read_ground_truth())  # noise and delay are on


# -- the tactile probes -------------------------------------------------------------------------------------------

R_BALL = 0.1
PAD_TOP = 0.1  # both pads: 0.1 m thick boxes on the ground, their link frames at their centres
PAD2_X = 2.0
BLOCK = 0.1
STIFFNESS = 2000.0
RADIUS = 0.005
XS = (-0.06, -0.045, -0.03, 0.0, 0.03, 0.045, 0.06)
BALL_PROBES = tuple((x, 0.0, PAD_TOP / 2) for x in XS) + ((0.0, 0.03, PAD_TOP / 2),)
GAP = 0.003  # the height of the pad-2 probes above the block's top face at build
BLOCK_PROBES = ((0.0, 0.0, PAD_TOP / 2), (0.03, 0.02, PAD_TOP / 2), (0.053, 0.0, PAD_TOP / 2))
LAMBDA_D, H_MAX = 100.0, 0.01
LAMBDA_S, LAMBDA_T = 50.0, 50.0
BALL_VEL, BALL_SPIN = 0.5, 3.0


def _tactile_scene():
    """Two fixed pads; a ball pressed 2 cm into pad 1 in env 0 (in env 1 it is far above), sliding and spinning;
    a block resting on pad 2 in both environments."""
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=DT))
    scene.add_entity(gs.morphs.Plane())
    pad = scene.add_entity(gs.morphs.Box(pos=(0, 0, PAD_TOP / 2), size=(0.4, 0.4, PAD_TOP), fixed=True))
    ball = scene.add_entity(gs.morphs.Sphere(pos=(0, 0, PAD_TOP + R_BALL - 0.02), radius=R_BALL))
    pad2 = scene.add_entity(gs.morphs.Box(pos=(PAD2_X, 0, PAD_TOP / 2), size=(0.4, 0.4, PAD_TOP), fixed=True))
    block = scene.add_entity(gs.morphs.Box(pos=(PAD2_X, 0, PAD_TOP + BLOCK / 2 - 0.002), size=(BLOCK,) * 3))
    above = PAD_TOP / 2 + BLOCK - 0.002 + GAP  # pad-2 frame: GAP above the block's top as built
    common = dict(entity_idx=pad.idx, probe_local_pos=BALL_PROBES, probe_radius=RADIUS)
    s = dict(
        ball=scene.add_sensor(gs.sensors.KinematicContactProbe(stiffness=STIFFNESS, **common)),
        block=scene.add_sensor(gs.sensors.KinematicContactProbe(
            entity_idx=pad2.idx, stiffness=STIFFNESS,
            probe_local_pos=BLOCK_PROBES + ((0.0, 0.0, above),) * 3,
            probe_local_normal=((0, 0, 1),) * 4 + ((0, 0, -1), (0, 0, 1)),
            probe_radius=(RADIUS,) * 5 + (GAP / 2,))),
        dilate=scene.add_sensor(gs.sensors.ElastomerDisplacement(
            dilate_coefficient=LAMBDA_D, dilate_max_delta=H_MAX, shear_max_delta=0.0, twist_max_delta=0.0, **common)),
        shear=scene.add_sensor(gs.sensors.ElastomerDisplacement(
            dilate_max_delta=0.0, shear_coefficient=LAMBDA_S, shear_max_delta=1.0, twist_max_delta=0.0, **common)),
        twist=scene.add_sensor(gs.sensors.ElastomerDisplacement(
            dilate_max_delta=0.0, shear_max_delta=0.0, twist_coefficient=LAMBDA_T, **common)),
    )
    scene.build(n_envs=2)
    scene.rigid_solver.launch_mode = "serial"
    ball.set_pos([[0, 0, PAD_TOP + R_BALL - 0.02], [0, 0, 2.0]])
    ball.set_dofs_velocity([BALL_VEL, 0, 0, 0, 0, BALL_SPIN], envs_idx=[0])
    scene.step()
    return scene, dict(ball=ball, block=block, pad=pad, pad2=pad2), s


@pytest.fixture(scope="module")
def touch():
    return _tactile_scene()


def _cap_depth(probes, centre):
    """How far below each pad-1 probe (pad frame at height PAD_TOP / 2, unrotated) the ball's lower surface is,
    where the probe is inside the ball: sqrt(R^2 - rho^2) - (z_c - PAD_TOP), rho the probe's distance from the
    vertical through the centre; 0 outside (the nearest surface point is then above the probe)."""
    out = []
    for p in probes:
        x = np.array([p[0], p[1], PAD_TOP])
        rho2 = (x[0] - centre[0]) ** 2 + (x[1] - centre[1]) ** 2
        inside = rho2 + (x[2] - centre[2]) ** 2 < R_BALL ** 2
        out.append(math.sqrt(R_BALL ** 2 - rho2) - (centre[2] - PAD_TOP) if inside else 0.0)
    return np.array(out)


def test_contact_probe_reads_the_depth_of_a_pressed_sphere_cap_and_its_spring_force(touch):
    """Env 0: each probe inside the ball reads the depth of its lower surface along -normal, sqrt(R^2 - rho^2) -
    (z_c - top); the others 0; force = -stiffness * depth * normal. Env 1 (the ball far away): zero everywhere."""
    _, bodies, s = touch
    data = s["ball"].read()
    n = len(BALL_PROBES)
    assert data.penetration.shape == (2, n) and data.force.shape == (2, n, 3)
    depth = _cap_depth(BALL_PROBES, bodies["ball"].get_pos()[0].numpy())
    assert (depth > 0).sum() >= 5 and (depth == 0).sum() >= 2  # both cases are exercised
    np.testing.assert_allclose(data.penetration[0].numpy(), depth, rtol=0, atol=TOL)
    expected_force = np.zeros((n, 3))
    expected_force[:, 2] = -STIFFNESS * depth
    np.testing.assert_allclose(data.force[0].numpy(), expected_force, rtol=0, atol=STIFFNESS * TOL)
    assert not data.penetration[1].any() and not data.force[1].any()


def _block_depth(bodies, env, probe_world):
    """How far the ray down from a point inside the (slightly tilted, after the step) block runs before it leaves
    the block through its bottom face: min over the axes of (+-half - p_i) / u_i in the block's frame."""
    centre, rot = bodies["block"].get_pos()[env].numpy(), quat_to_mat(bodies["block"].get_quat()[env].numpy())
    p, u = rot.T @ (probe_world - centre), rot.T @ np.array([0.0, 0.0, -1.0])
    assert (np.abs(p) < BLOCK / 2).all()
    return min((math.copysign(BLOCK / 2, ui) - pi) / ui for pi, ui in zip(p, u) if abs(ui) > 1e-12)


def test_contact_probe_reads_a_box_face_inside_and_a_surface_within_its_radius(touch):
    """The block on pad 2: the probes under its footprint read its bottom face's depth; the one 3 mm outside the
    footprint reads 0 (the block's side face passes through it: nothing below); above the block's top, a probe
    whose radius reaches the top face reads the gap below it along its normal (Genesis World's sphere test), with
    the normal turned away 0, and with a radius short of the gap 0."""
    _, bodies, s = touch
    pen = s["block"].read().penetration
    for env in range(2):
        under = [_block_depth(bodies, env, np.array([PAD2_X + x, y, PAD_TOP])) for x, y, _ in BLOCK_PROBES[:2]]
        bottom = bodies["block"].get_pos()[env, 2].item() - BLOCK / 2
        gap = GAP - (bottom - (PAD_TOP - 0.002))  # the block's tilt is ~1e-10 rad: the top face at x = 0 is flat
        assert 0 < min(under) and max(under) < RADIUS and 0 < gap < RADIUS
        np.testing.assert_allclose(pen[env].numpy(), [*under, 0.0, gap, 0.0, 0.0], rtol=0, atol=TOL)


def _marker_geometry(bodies):
    """The pad-1 probes' contact depths h (analytic), the markers M (pad frame) and the ball's centre G projected
    on the pad's xy plane, in the pad frame (origin at the pad's centre)."""
    centre = bodies["ball"].get_pos()[0].numpy()
    h = _cap_depth(BALL_PROBES, centre)
    markers = np.array(BALL_PROBES)
    g = np.array([centre[0], centre[1], 0.0])
    return h, markers, g


def test_elastomer_dilation_spreads_the_markers_outward(touch):
    """The FOTS dilation sum_j min(h_max, h_j) (M - C_j) exp(-lambda |M - C_j|^2), C_j = M_j - h_j n, in the pad
    frame; z = min(h_max, h): every marker moves away from the indentation's centre (the ball's, which has slid a
    little along +x): along x on the x line, and that line and the marker off it (at +y) apart along y."""
    _, bodies, s = touch
    disp = s["dilate"].read()
    assert disp.shape == (2, len(BALL_PROBES), 3)
    h, m, _ = _marker_geometry(bodies)
    n = np.array([0.0, 0.0, 1.0])
    c = m - h[:, None] * n
    want = np.zeros_like(m)
    for i in range(len(m)):
        for j in range(len(m)):
            hc = min(H_MAX, h[j])
            if hc > 0:
                diff = m[i] - c[j]
                want[i] += diff * hc * math.exp(-LAMBDA_D * diff @ diff)
    want[:, 2] = np.minimum(h, H_MAX)
    np.testing.assert_allclose(disp[0].numpy(), want, rtol=0, atol=TOL)
    assert want[:, 2].max() == H_MAX and h.max() > H_MAX  # the cap on the depth is exercised
    centre = bodies["ball"].get_pos()[0, 0].item()
    assert (np.sign(disp[0, :len(XS), 0].numpy()) == np.sign(np.array(XS) - centre)).all()
    assert disp[0, -1, 1] > 0 and (disp[0, :len(XS), 1] < 0).all()  # the x line and the marker off it: apart
    assert not disp[1].any()


def test_elastomer_shear_follows_the_sliding_body(touch):
    """The ball slides at v along x: each marker in contact moves by min(|v dt|, max) along v, decaying as
    exp(-lambda_s |M - G|^2) from the ball's centre G projected on the pad; markers out of contact stay; z, the
    depth capped at dilate_max_delta, is 0 here (dilate_max_delta=0, as Genesis World)."""
    _, bodies, s = touch
    h, m, g = _marker_geometry(bodies)
    v = bodies["ball"].get_vel()[0].numpy()
    ds = v[:2] * DT
    decay = np.exp(-LAMBDA_S * ((m - g) ** 2).sum(-1))
    want = np.where((h > 0)[:, None], ds[None, :] * decay[:, None], 0.0)
    got = s["shear"].read()[0].numpy()
    assert v[0] > 0.1  # still sliding
    np.testing.assert_allclose(got[:, :2], want, rtol=0, atol=1e-15)
    assert not got[:, 2].any()


def test_elastomer_twist_turns_the_markers_about_the_normal(touch):
    """The ball spins at w about z: each marker in contact moves by (R_z(w dt) - 1) (M - G) in the pad plane,
    decaying as exp(-lambda_t |M - G|^2): perpendicular to M - G, opposite on the two sides of the centre."""
    _, bodies, s = touch
    h, m, g = _marker_geometry(bodies)
    theta = bodies["ball"].get_ang()[0, 2].item() * DT
    mg = m - g
    turn = np.stack([(math.cos(theta) - 1) * mg[:, 0] - math.sin(theta) * mg[:, 1],
                     math.sin(theta) * mg[:, 0] + (math.cos(theta) - 1) * mg[:, 1]], axis=-1)
    want = np.where((h > 0)[:, None], turn * np.exp(-LAMBDA_T * (mg ** 2).sum(-1))[:, None], 0.0)
    got = s["twist"].read()[0].numpy()
    assert abs(theta) > 1e-3
    np.testing.assert_allclose(got[:, :2], want, rtol=0, atol=1e-15)
    assert np.abs(got[:, :2]).max() > 1e-5


def test_contact_probe_settles_to_the_resting_contact_depth(touch):
    """After the ball leaves and the block settles: the block's probes read its resting penetration (nonzero:
    the soft contact's equilibrium), the same in both environments to the solver's tolerance."""
    scene, bodies, s = touch
    for _ in range(30):
        scene.step()
    pen = s["block"].read().penetration
    for env in range(2):
        depth = [_block_depth(bodies, env, np.array([PAD2_X + x, y, PAD_TOP])) for x, y, _ in BLOCK_PROBES[:2]]
        assert min(depth) > 1e-6
        np.testing.assert_allclose(pen[env, :2].numpy(), depth, rtol=0, atol=TOL)
        np.testing.assert_allclose(s["block"].read().force[env, 0].numpy(), [0, 0, -STIFFNESS * depth[0]],
                                   rtol=0, atol=STIFFNESS * TOL)


# -- every geom kind's depth ---------------------------------------------------------------------------------------

R_ROUND = 0.05  # the lying cylinder's and capsule's radius
HALF_LEN = 0.1  # their half-length along y
SEMI = (0.08, 0.05, 0.04)  # the ellipsoid's semi-axes
PRESS = 0.01  # how deep each body starts in its pad
KIND_XS = (-0.03, 0.0, 0.02, 0.04)


@pytest.fixture(scope="module")
def kinds(tmp_path_factory):
    """One fixed pad per kind (1 m apart along x), a body of that kind pressed PRESS into each (no gravity), and a
    free slab pressed into the ground plane with probes on its bottom face; one step."""
    import trimesh

    folder = tmp_path_factory.mktemp("probe_kinds")
    mesh = str(folder / "cube.obj")
    trimesh.creation.box(extents=(0.1, 0.1, 0.1)).export(mesh)
    egg = folder / "egg.xml"
    egg.write_text('<mujoco><worldbody><body name="egg" pos="3 0 {:.6f}"><freejoint/><geom type="ellipsoid" '
                   'size="{} {} {}"/></body></worldbody></mujoco>'.format(PAD_TOP + SEMI[2] - PRESS, *SEMI))
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=DT, gravity=(0.0, 0.0, 0.0)))
    scene.add_entity(gs.morphs.Plane())
    at = PAD_TOP + R_ROUND - PRESS
    bodies = dict(
        cylinder=scene.add_entity(gs.morphs.Cylinder(pos=(0, 0, at), radius=R_ROUND, height=2 * HALF_LEN,
                                                     euler=(90.0, 0.0, 0.0))),
        capsule=scene.add_entity(gs.morphs.Capsule(pos=(1, 0, at), radius=R_ROUND, height=2 * HALF_LEN,
                                                   euler=(90.0, 0.0, 0.0))),
        mesh=scene.add_entity(gs.morphs.Mesh(file=mesh, pos=(2, 0, PAD_TOP + 0.05 - PRESS))),
        ellipsoid=scene.add_entity(gs.morphs.MJCF(file=str(egg))),
        slab=scene.add_entity(gs.morphs.Box(pos=(0, 3, 0.05 - PRESS), size=(0.2, 0.2, 0.1))),
    )
    probes = tuple((x, 0.0, PAD_TOP / 2) for x in KIND_XS)
    sensors = {}
    for k, name in enumerate(("cylinder", "capsule", "mesh", "ellipsoid")):
        pad = scene.add_entity(gs.morphs.Box(pos=(k, 0, PAD_TOP / 2), size=(0.3, 0.3, PAD_TOP), fixed=True))
        # the capsule's pad also probes its hemispherical end (y beyond the segment)
        extra = ((0.01, HALF_LEN + 0.02, PAD_TOP / 2),) if name == "capsule" else ()
        sensors[name] = scene.add_sensor(gs.sensors.KinematicContactProbe(
            entity_idx=pad.idx, probe_local_pos=probes + extra, probe_radius=RADIUS))
    sensors["slab"] = scene.add_sensor(gs.sensors.KinematicContactProbe(
        entity_idx=bodies["slab"].idx, probe_local_pos=[(x, 0.05, -0.05) for x in KIND_XS],
        probe_local_normal=(0.0, 0.0, -1.0), probe_radius=RADIUS))
    scene.build()
    scene.step()
    return scene, bodies, sensors


def _round_depth(x, y, centre, end_y=None):
    """Depth below the pad's top of the lower surface of a horizontal round body (axis along y) over (x, y): the
    cylinder's (or capsule's) circle of radius R_ROUND about its axis, or past end_y the capsule's end sphere."""
    dx = x - centre[0]
    if end_y is not None and abs(y - centre[1]) > end_y:
        dy = abs(y - centre[1]) - end_y
        r2 = R_ROUND ** 2 - dx ** 2 - dy ** 2
    else:
        r2 = R_ROUND ** 2 - dx ** 2
    return max(math.sqrt(r2) - (centre[2] - PAD_TOP), 0.0) if r2 > 0 else 0.0


def test_contact_probe_depth_for_every_geom_kind(kinds):
    """A lying cylinder and capsule (the circle's depth sqrt(R^2 - dx^2) - (z_c - top); past the capsule's
    segment, its end sphere's), a convex mesh cube (its bottom face's depth), an ellipsoid (sqrt(1 - (dx/a)^2) c -
    (z_c - top)), and the ground plane under a slab's bottom probes (normal -z: the depth is -z of the probe).
    The bodies barely turn in one step (their references use the centre's position alone): 1e-9 m."""
    _, bodies, s = kinds
    tol = 1e-9
    for k, name in enumerate(("cylinder", "capsule")):
        centre = bodies[name].get_pos().numpy() - np.array([k, 0.0, 0.0])
        pts = [(x, 0.0) for x in KIND_XS] + ([(0.01, HALF_LEN + 0.02)] if name == "capsule" else [])
        want = [_round_depth(x, y, centre, HALF_LEN if name == "capsule" else None) for x, y in pts]
        assert sum(w > 0 for w in want) >= 2 and min(want) == 0.0
        np.testing.assert_allclose(s[name].read().penetration.numpy(), want, rtol=0, atol=tol)
    depth = PAD_TOP - (bodies["mesh"].get_pos()[2].item() - 0.05)
    np.testing.assert_allclose(s["mesh"].read().penetration.numpy(), [depth] * len(KIND_XS), rtol=0, atol=tol)
    a, _, c = SEMI
    centre = bodies["ellipsoid"].get_pos().numpy() - np.array([3.0, 0.0, 0.0])
    want = [max(c * math.sqrt(1 - ((x - centre[0]) / a) ** 2) - (centre[2] - PAD_TOP), 0.0) for x in KIND_XS]
    assert min(want) > 0
    np.testing.assert_allclose(s["ellipsoid"].read().penetration.numpy(), want, rtol=0, atol=tol)
    slab = bodies["slab"]
    rot = quat_to_mat(slab.get_quat().numpy())
    z = [(slab.get_pos().numpy() + rot @ np.array([x, 0.05, -0.05]))[2] for x in KIND_XS]
    assert max(z) < 0
    np.testing.assert_allclose(s["slab"].read().penetration.numpy(), -np.array(z), rtol=0, atol=TOL)


# -- scenes without environments, refusals --------------------------------------------------------------------------


def test_scene_without_envs_reads_without_a_batch_dimension():
    """n_envs=0: Proximity ([n], nearest_points [n, 3]), KinematicContactProbe ([n], [n, 3]), ElastomerDisplacement
    given as a 2 x 3 grid ([6, 3]); a box resting on a sensor pad reads its depth under the probes."""
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=DT))
    pad = scene.add_entity(gs.morphs.Box(pos=(0, 0, PAD_TOP / 2), size=(0.4, 0.4, PAD_TOP), fixed=True))
    block = scene.add_entity(gs.morphs.Box(pos=(0, 0, PAD_TOP + BLOCK / 2 - 0.002), size=(BLOCK,) * 3))
    grid = [[(x, y, PAD_TOP / 2) for x in (-0.02, 0.0, 0.02)] for y in (-0.01, 0.01)]
    near = scene.add_sensor(gs.sensors.Proximity(entity_idx=pad.idx, probe_local_pos=[(0, 0, 0.3)],
                                                 track_link_idx=[block.base_link_idx]))
    probe = scene.add_sensor(gs.sensors.KinematicContactProbe(entity_idx=pad.idx, probe_local_pos=grid[0]))
    skin = scene.add_sensor(gs.sensors.ElastomerDisplacement(entity_idx=pad.idx, probe_local_pos=grid))
    scene.build()
    scene.step()
    assert near.read().shape == (1,) and near.nearest_points.shape == (1, 3)
    top = block.get_pos()[2].item() + BLOCK / 2
    np.testing.assert_allclose(near.read().numpy(), [PAD_TOP / 2 + 0.3 - top], atol=TOL)
    data = probe.read()
    assert data.penetration.shape == (3,) and data.force.shape == (3, 3)
    depth = PAD_TOP - (block.get_pos()[2].item() - BLOCK / 2)
    np.testing.assert_allclose(data.penetration.numpy(), [depth] * 3, atol=TOL)
    assert skin.read().shape == (6, 3) and skin.n_probes == 6
    np.testing.assert_allclose(skin.read()[:, 2].numpy(), [depth] * 6, atol=TOL)
    assert skin.probe_local_pos.shape == (6, 3)
    with pytest.raises(gs.SceneError, match="without environments"):
        probe.read(envs_idx=[0])


def test_a_solver_without_geoms_reads_empty_space(tmp_path):
    """A robot whose one link has no collision geom (a URDF without <collision>): Proximity reads max_range at the
    probe, the tactile probes nothing; no kernel indexes the empty geom arrays."""
    urdf = tmp_path / "bare.urdf"
    urdf.write_text('<robot name="bare"><link name="base"><inertial><mass value="1"/><inertia ixx="0.1" iyy="0.1" '
                    'izz="0.1" ixy="0" ixz="0" iyz="0"/></inertial></link></robot>')
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=DT, gravity=(0.0, 0.0, 0.0)))
    bare = scene.add_entity(gs.morphs.URDF(file=str(urdf), pos=(0, 0, 1)))
    near = scene.add_sensor(gs.sensors.Proximity(entity_idx=bare.idx, probe_local_pos=[(0.1, 0, 0)],
                                                 track_link_idx=[bare.base_link_idx], max_range=2.0))
    probe = scene.add_sensor(gs.sensors.KinematicContactProbe(entity_idx=bare.idx))
    skin = scene.add_sensor(gs.sensors.ElastomerDisplacement(entity_idx=bare.idx))
    scene.build(n_envs=2)
    scene.rigid_solver.launch_mode = "serial"
    scene.step()
    assert bare.solver.n_geoms == 0
    assert torch.equal(near.read(), torch.full((2, 1), 2.0, dtype=near.read().dtype))
    np.testing.assert_allclose(near.nearest_points.numpy(), [[[0.1, 0.0, 1.0]]] * 2, atol=TOL)
    assert not probe.read().penetration.any() and not skin.read().any()


@pytest.mark.parametrize("make, match", [
    (lambda: gs.sensors.Proximity(probe_local_pos=[(0.0, 0.0)]), "probe_local_pos"),
    (lambda: gs.sensors.Proximity(probe_local_pos=[]), "probe_local_pos"),
    (lambda: gs.sensors.Proximity(probe_local_pos=[(0.0, 0.0, float("nan"))]), "probe_local_pos"),
    (lambda: gs.sensors.Proximity(max_range=0.0), "max_range"),
    (lambda: gs.sensors.Proximity(track_link_idx=(1, -1)), "track_link_idx"),
    (lambda: gs.sensors.Proximity(noise=-0.1), "noise"),
    (lambda: gs.sensors.KinematicContactProbe(probe_radius=-0.1), "probe_radius"),
    (lambda: gs.sensors.KinematicContactProbe(probe_local_normal=(0.0, 0.0, 0.0)), "probe_local_normal"),
    (lambda: gs.sensors.KinematicContactProbe(probe_local_pos=[(0, 0, 0), (1, 0, 0)],
                                              probe_local_normal=[(0, 0, 1)] * 3), "probe_local_normal"),
    (lambda: gs.sensors.KinematicContactProbe(probe_local_pos=[(0, 0, 0)], probe_radius=(0.1, 0.2)),
     "probe_radius"),
    (lambda: gs.sensors.KinematicContactProbe(stiffness=-1.0), "stiffness"),
    (lambda: gs.sensors.ElastomerDisplacement(probe_local_pos=[[(0, 0, 0)], [(0, 0, 0), (1, 0, 0)]]),
     "probe_local_pos"),
    (lambda: gs.sensors.ElastomerDisplacement(twist_max_delta=-1.0), "twist_max_delta"),
    (lambda: gs.sensors.ElastomerDisplacement(dilate_coefficient=float("inf")), "dilate_coefficient"),
])
def test_bad_probe_options_are_refused_on_construction(make, match):
    with pytest.raises(gs.OptionError, match=match):
        make()


def test_bad_probe_sensors_are_refused_and_nothing_is_added():
    scene = gs.Scene()
    box = scene.add_entity(gs.morphs.Box(size=(0.1,) * 3))
    other = scene.add_entity(gs.morphs.Sphere(pos=(1, 0, 0), radius=0.1))
    cases = [
        (gs.sensors.Proximity(entity_idx=box.idx, track_link_idx=(other.base_link_idx, 2)), r"track_link_idx\[1\]=2"),
        (gs.sensors.Proximity(entity_idx=box.idx), r"track_link_idx=\(\)"),
        (gs.sensors.Proximity(track_link_idx=(0,)), "attached to no entity"),
        (gs.sensors.Proximity(entity_idx=box.idx, link_idx_local=1, track_link_idx=(0,)), "link_idx_local=1"),
        (gs.sensors.Proximity(entity_idx=box.idx, track_link_idx=(1,), probe_local_pos=[(0, 0, 0)] * 2,
                              noise=(0.1, 0.2, 0.3)), "noise"),
        (gs.sensors.KinematicContactProbe(entity_idx=box.idx, bias=(0.1, 0.2)), "bias"),
        (gs.sensors.ElastomerDisplacement(entity_idx=box.idx, resolution=(0.1, 0.2)), "resolution"),
    ]
    for options, match in cases:
        with pytest.raises(gs.OptionError, match=match):
            scene.add_sensor(options)
    assert scene.sensors == [] and not scene.sensor_manager.is_active
    scene.add_sensor(gs.sensors.KinematicContactProbe(entity_idx=box.idx, bias=(0.1,) * 4))  # 4 channels: accepted
    assert len(scene.sensors) == 1


def test_proximity_to_a_mesh_is_exact_near_its_edges_and_corners(tmp_path):
    """A 10 cm cube as a mesh geom (its hull): probes in front of a face, beyond an edge and beyond a corner read
    the exact distances d, a sqrt(2) and c sqrt(3) (the hull planes' largest distance would give a and c), and the
    nearest points are the face point, the edge point and the corner."""
    import trimesh

    mesh = str(tmp_path / "cube.obj")
    trimesh.creation.box(extents=(0.1, 0.1, 0.1)).export(mesh)
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=DT, gravity=(0.0, 0.0, 0.0)))
    cube = scene.add_entity(gs.morphs.Mesh(file=mesh, pos=(0.0, 0.0, 1.0), fixed=True))
    holder = scene.add_entity(gs.morphs.Sphere(pos=(0.0, 0.0, 3.0), radius=0.01, fixed=True))
    d, a, c = 0.07, 0.03, 0.02
    probes = ((0.01, 0.02, 0.05 + d), (0.05 + a, 0.05 + a, 0.0), (0.05 + c, -0.05 - c, -0.05 - c))
    local = tuple((x, y, z - 2.0) for x, y, z in probes)  # in the holder's frame, 2 m above the cube's centre
    sensor = scene.add_sensor(gs.sensors.Proximity(entity_idx=holder.idx, probe_local_pos=local,
                                                   track_link_idx=(cube.base_link_idx,), max_range=1.0))
    scene.build()
    scene.step()
    got = sensor.read().double()
    want = torch.tensor([d, a * math.sqrt(2), c * math.sqrt(3)], dtype=torch.float64)
    assert torch.allclose(got, want, atol=1e-9, rtol=0), (got, want)
    near = sensor.nearest_points.double()
    expect = torch.tensor([(0.01, 0.02, 1.05), (0.05, 0.05, 1.0), (0.05, -0.05, 0.95)], dtype=torch.float64)
    assert torch.allclose(near, expect, atol=1e-9, rtol=0), near
