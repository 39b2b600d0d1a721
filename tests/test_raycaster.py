"""Ray-cast sensors (gs.sensors.Raycaster / Lidar, DepthCamera, the ray patterns) against analytic distances: a
height scan over a plane, a box and a sphere, a lidar facing a wall, a depth camera looking down at a plane, the
range rule, both frames of the points, links moved and turned per environment, and the sensors' state in
snapshots and resets.

One scene serves most tests (built once: the rigid kernels' and the ray cast's compilation dominate). Gravity is
off, so the free "carrier" boxes that hold the sensors stay where `set_pos` / `set_quat` put them; every test
places the carriers it reads, then steps once (the sensors measure after a step). The ray cast works in float32
(as the cameras): distances of about a metre carry ~1e-7 m of rounding, hence TOL."""

import math

import attrs
import numpy as np
import pytest
import torch

import genesis_core as gs

TOL = 1e-5  # m
N_ENVS = 3
HEIGHT = 1.0  # the carriers' height above the plane, m
BELOW = 0.1  # the height scans start this far below their carrier (outside it)
CARRIER = 0.05  # the carriers' edge, m
BOX_AT, BOX_SIZE = (2.0, 0.0), (0.5, 0.5, 0.3)  # a box lying on the plane: top at 0.3
SPHERE_AT, RADIUS = (-2.0, 0.0), 0.25  # a sphere lying on the plane: centre at z = RADIUS
PLANE_AT = (0.0, 5.0)  # a carrier above the bare plane
LIDAR_AT = (0.0, -5.0, 3.0)  # a carrier facing a wall
LIDAR_AHEAD = 0.1  # the lidar sits this far ahead (+x) of its carrier
WALL_X = 1.1  # the wall's face (x), so that the lidar faces it at 1.0 m
NO_HIT_FAR, NO_HIT_NEAR = -1.0, -2.0
SCAN = dict(resolution=0.1, size=(0.6, 0.6))  # 7 x 7 rays, x and y in -0.3 .. 0.3
MESH_AT, MESH_SIZE = (4.0, 0.0), (0.5, 0.5, 0.4)  # a box given as a triangle mesh, on the plane: top at 0.4
PEBBLES = 8  # small spheres out of the way, so that the cast walks the primitives' BVH (16 bounded primitives)


def _scene(mesh_file):
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=0.01, gravity=(0.0, 0.0, 0.0)))
    scene.add_entity(gs.morphs.Plane())
    scene.add_entity(gs.morphs.Box(pos=(*BOX_AT, BOX_SIZE[2] / 2), size=BOX_SIZE, fixed=True))
    scene.add_entity(gs.morphs.Mesh(file=mesh_file, pos=(*MESH_AT, MESH_SIZE[2] / 2), fixed=True))
    for k in range(PEBBLES):  # far from every ray: with them the scene has enough primitives for a BVH
        scene.add_entity(gs.morphs.Sphere(pos=(10.0 + k, 10.0, 0.05), radius=0.05, fixed=True))
    scene.add_entity(gs.morphs.Sphere(pos=(*SPHERE_AT, RADIUS), radius=RADIUS, fixed=True))
    scene.add_entity(gs.morphs.Box(pos=(WALL_X + 0.05, LIDAR_AT[1], LIDAR_AT[2]), size=(0.1, 6.0, 4.0), fixed=True))
    carrier = {name: scene.add_entity(gs.morphs.Box(pos=pos, size=(CARRIER,) * 3)) for name, pos in (
        ("plane", (*PLANE_AT, HEIGHT)), ("box", (*BOX_AT, HEIGHT)), ("sphere", (*SPHERE_AT, HEIGHT)),
        ("lidar", LIDAR_AT), ("mesh", (*MESH_AT, HEIGHT)))}
    down = dict(pos_offset=(0.0, 0.0, -BELOW))
    grid = gs.sensors.GridPattern(**SCAN)
    one_ray = gs.sensors.GridPattern(size=(0.0, 0.0))
    s = dict(
        plane=scene.add_sensor(gs.sensors.Raycaster(
            pattern=gs.sensors.GridPattern(resolution=0.1, size=(0.4, 0.2)), entity_idx=carrier["plane"].idx,
            return_world_frame=True, **down)),
        box=scene.add_sensor(gs.sensors.Lidar(pattern=grid, entity_idx=carrier["box"].idx, **down)),
        box_world=scene.add_sensor(gs.sensors.Raycaster(pattern=grid, entity_idx=carrier["box"].idx,
                                                        return_world_frame=True, **down)),
        far=scene.add_sensor(gs.sensors.Raycaster(pattern=grid, entity_idx=carrier["box"].idx, max_range=0.7,
                                                  no_hit_value=NO_HIT_FAR, **down)),
        near=scene.add_sensor(gs.sensors.Raycaster(pattern=grid, entity_idx=carrier["box"].idx, min_range=0.65,
                                                   no_hit_value=NO_HIT_NEAR, **down)),
        sphere=scene.add_sensor(gs.sensors.Raycaster(pattern=grid, entity_idx=carrier["sphere"].idx,
                                                     return_world_frame=True, **down)),
        mesh=scene.add_sensor(gs.sensors.Raycaster(pattern=grid, entity_idx=carrier["mesh"].idx, **down)),
        lidar=scene.add_sensor(gs.sensors.Lidar(
            pattern=gs.sensors.SphericalPattern(fov=(60.0, 30.0), n_points=(7, 5)), entity_idx=carrier["lidar"].idx,
            pos_offset=(LIDAR_AHEAD, 0.0, 0.0))),
        depth=scene.add_sensor(gs.sensors.DepthCamera(
            pattern=gs.sensors.DepthCameraPattern(res=(8, 6), fov_horizontal=60.0), entity_idx=carrier["plane"].idx,
            euler_offset=(0.0, 90.0, 0.0), **down)),
        own=scene.add_sensor(gs.sensors.Raycaster(pattern=one_ray, entity_idx=carrier["plane"].idx)),
        sky=scene.add_sensor(gs.sensors.Raycaster(pattern=gs.sensors.GridPattern(size=(0.0, 0.0),
                                                                                 direction=(0.0, 0.0, 1.0)),
                                                  entity_idx=carrier["plane"].idx, pos_offset=(0.0, 0.0, BELOW))),
        fixed=scene.add_sensor(gs.sensors.Raycaster(pattern=one_ray,
                                                    pos_offset=(BOX_AT[0] + 0.1, BOX_AT[1], HEIGHT))),
        noisy=scene.add_sensor(gs.sensors.Raycaster(
            pattern=gs.sensors.GridPattern(resolution=0.1, size=(0.4, 0.2)), entity_idx=carrier["plane"].idx,
            return_points=False, noise=0.01, **down)),
    )
    scene.build(n_envs=N_ENVS)
    scene.rigid_solver.launch_mode = "parallel"  # no timing trial: its serial copy of the kernels would compile too
    return scene, carrier, s


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    import trimesh

    path = str(tmp_path_factory.mktemp("raycaster") / "box.obj")
    trimesh.creation.box(extents=MESH_SIZE).export(path)
    return _scene(path)


def place(scene, carrier, moved=None):
    """Every carrier at its build pose in every environment, but for moved = {name: (env, pos, quat)}; then one
    step, after which the sensors have measured."""
    for name, body in carrier.items():
        pos = torch.as_tensor(np.asarray(body.morph.pos), dtype=gs.tc_float).repeat(N_ENVS, 1)
        quat = torch.tensor([[1.0, 0.0, 0.0, 0.0]] * N_ENVS, dtype=gs.tc_float)
        for env, p, q in (moved or {}).get(name, []):
            pos[env] = torch.as_tensor(p, dtype=gs.tc_float)
            quat[env] = torch.as_tensor(q, dtype=gs.tc_float)
        body.set_pos(pos)
        body.set_quat(quat)
    scene.step()


def _close(x, ref, tol=TOL):
    ref = torch.as_tensor(np.asarray(ref), dtype=x.dtype).expand_as(x)
    assert torch.allclose(x, ref, atol=tol, rtol=0), f"max |x - ref| = {float((x - ref).abs().max()):.3g} > {tol}"


def grid_xy():
    """The scan's x and y offsets [7, 7] (ij)."""
    c = np.arange(-0.3, 0.3 + 1e-9, 0.1)
    return np.meshgrid(c, c, indexing="ij")


# -- what the rays see -------------------------------------------------------------------------------------------


def test_height_scan_over_a_plane_reads_the_height_and_points_on_the_plane(world):
    """A 5 x 3 grid pointing down from HEIGHT - BELOW: every distance is that height; the hit points (world frame)
    are the grid's points on z = 0."""
    scene, carrier, s = world
    place(scene, carrier)
    data = s["plane"].read()
    assert data.distances.shape == (N_ENVS, 5, 3) and data.points.shape == (N_ENVS, 5, 3, 3)
    _close(data.distances, HEIGHT - BELOW)
    x, y = np.meshgrid(np.arange(-0.2, 0.2 + 1e-9, 0.1), np.arange(-0.1, 0.1 + 1e-9, 0.1), indexing="ij")
    _close(data.points, np.stack([x + PLANE_AT[0], y + PLANE_AT[1], np.zeros_like(x)], axis=-1))


def test_height_scan_over_a_box_reads_its_top_and_the_plane_around_it(world):
    """Rays over the 0.5 x 0.5 box (|x|, |y| <= 0.2) hit its top at 0.3, the others the plane; local points are
    the hit relative to each ray's start, in the link's axes: (0, 0, -distance) for a ray pointing down."""
    scene, carrier, s = world
    place(scene, carrier)
    x, y = grid_xy()
    on_box = (np.abs(x) < BOX_SIZE[0] / 2) & (np.abs(y) < BOX_SIZE[1] / 2)
    top = np.where(on_box, BOX_SIZE[2], 0.0)
    start = HEIGHT - BELOW
    data = s["box"].read()
    assert on_box.sum() == 25 and (~on_box).sum() == 24
    _close(data.distances, start - top)
    _close(data.points, np.stack([0 * x, 0 * y, top - start], axis=-1))
    world_points = s["box_world"].read().points
    _close(world_points, np.stack([x + BOX_AT[0], y + BOX_AT[1], top], axis=-1))


def test_height_scan_over_a_triangle_mesh_reads_its_top(world):
    """A box given as a Mesh morph (an OBJ file's 12 triangles, traced as triangles through their BVH): the rays
    over it (|x|, |y| <= 0.2) stop at its top, 0.4, the others at the plane."""
    scene, carrier, s = world
    place(scene, carrier)
    x, y = grid_xy()
    on_top = (np.abs(x) < MESH_SIZE[0] / 2) & (np.abs(y) < MESH_SIZE[1] / 2)
    _close(s["mesh"].read().distances, HEIGHT - BELOW - np.where(on_top, MESH_SIZE[2], 0.0))


def test_height_scan_over_a_sphere_reads_its_surface(world):
    """A ray at (dx, dy) from the sphere's axis (dx^2 + dy^2 < r^2) meets it at z = r + sqrt(r^2 - dx^2 - dy^2);
    the others reach the plane."""
    scene, carrier, s = world
    place(scene, carrier)
    x, y = grid_xy()
    rho2 = x ** 2 + y ** 2
    z = np.where(rho2 < RADIUS ** 2, RADIUS + np.sqrt(np.maximum(RADIUS ** 2 - rho2, 0.0)), 0.0)
    assert 0 < (rho2 < RADIUS ** 2).sum() < 49 and np.abs(rho2 - RADIUS ** 2).min() > 0.01  # no grazing ray
    data = s["sphere"].read()
    _close(data.distances, HEIGHT - BELOW - z)
    _close(data.points[..., 2], z)


def test_lidar_facing_a_wall_reads_d_over_cos(world):
    """A wall at d = 1 m ahead (x): the ray at azimuth theta, elevation phi meets it after d / (cos theta
    cos phi); its local point is that distance times (cos theta cos phi, sin theta cos phi, sin phi)."""
    scene, carrier, s = world
    place(scene, carrier)
    theta, phi = np.meshgrid(np.radians(np.linspace(-30, 30, 7)), np.radians(np.linspace(-15, 15, 5)), indexing="ij")
    d = WALL_X - (LIDAR_AT[0] + LIDAR_AHEAD)
    ref = d / (np.cos(theta) * np.cos(phi))
    data = s["lidar"].read()
    assert data.distances.shape == (N_ENVS, 7, 5)
    _close(data.distances, ref)
    unit = np.stack([np.cos(theta) * np.cos(phi), np.sin(theta) * np.cos(phi), np.sin(phi)], axis=-1)
    _close(data.points, ref[..., None] * unit)


def test_depth_camera_image_is_the_range_along_each_pixel_ray(world):
    """A camera looking straight down from h = 0.9 m at a plane: pixel (i, j) reads h |(1, a, b)|, a = (j + 0.5 -
    W / 2) / f, b = (i + 0.5 - H / 2) / f (Genesis World's depth is the range along the ray, not the distance to
    the image plane, which would be h everywhere)."""
    scene, carrier, s = world
    place(scene, carrier)
    w, h = 8, 6
    f = (w / 2) / math.tan(math.radians(30.0))  # fov_horizontal 60; square pixels
    a = (np.arange(w) + 0.5 - w / 2) / f
    b = (np.arange(h) + 0.5 - h / 2) / f
    ref = (HEIGHT - BELOW) * np.sqrt(1 + a[None, :] ** 2 + b[:, None] ** 2)
    image = s["depth"].read_image()
    assert image.shape == (N_ENVS, h, w)
    _close(image, ref)
    assert torch.equal(image, s["depth"].read().distances)
    assert float(image.min()) > HEIGHT - BELOW + 1e-3


def test_range_limits_and_misses_read_no_hit_value_and_a_zero_point(world):
    """max_range 0.7: the rays that reach the plane (0.9 m) read no_hit_value and point (0, 0, 0), those on the
    box (0.6 m) their hit; min_range 0.65: the reverse. A ray that meets nothing reads no_hit_value, by default
    max_range (20 m)."""
    scene, carrier, s = world
    place(scene, carrier)
    x, y = grid_xy()
    on_box = torch.as_tensor((np.abs(x) < 0.25) & (np.abs(y) < 0.25)).expand(N_ENVS, 7, 7)
    far, near = s["far"].read(), s["near"].read()
    box = HEIGHT - BELOW - BOX_SIZE[2]
    _close(far.distances[on_box], box)
    assert bool((far.distances[~on_box] == NO_HIT_FAR).all()) and bool((far.points[~on_box] == 0).all())
    _close(far.points[on_box][:, 2], -box)
    _close(near.distances[~on_box], HEIGHT - BELOW)
    assert bool((near.distances[on_box] == NO_HIT_NEAR).all()) and bool((near.points[on_box] == 0).all())
    sky = s["sky"].read()
    assert bool((sky.distances == 20.0).all()) and bool((sky.points == 0).all())


def test_a_ray_starting_inside_its_own_link_meets_that_link(world):
    """As in Genesis World, the sensor's link is not left out: a ray from the carrier's centre leaves through its
    bottom face, CARRIER / 2 below."""
    scene, carrier, s = world
    place(scene, carrier)
    _close(s["own"].read().distances, CARRIER / 2)


def test_a_sensor_fixed_in_the_world_casts_from_its_offset(world):
    """entity_idx=-1: pos_offset is the ray's world start; above the box (beside its carrier) it reads HEIGHT - its
    top."""
    scene, carrier, s = world
    place(scene, carrier)
    _close(s["fixed"].read().distances, HEIGHT - BOX_SIZE[2])


def test_moved_and_turned_links_per_environment(world):
    """Three environments, three poses of the carriers (set_pos / set_quat per environment): env 1's plane carrier
    0.5 m higher reads 0.5 m more; the lidar's carrier 0.5 m back (env 1) reads d = 1.5 / (cos theta cos phi),
    turned by 20 degrees about z (env 2) d' / (cos(theta + 20) cos phi) with d' the distance of its turned offset
    to the wall; the other environments are unchanged. read(envs_idx) gives those environments."""
    scene, carrier, s = world
    yaw = math.radians(20.0)
    turned = (math.cos(yaw / 2), 0.0, 0.0, math.sin(yaw / 2))
    place(scene, carrier, {
        "plane": [(1, (*PLANE_AT, HEIGHT + 0.5), (1, 0, 0, 0))],
        "lidar": [(1, (LIDAR_AT[0] - 0.5, *LIDAR_AT[1:]), (1, 0, 0, 0)), (2, LIDAR_AT, turned)]})
    try:
        plane = s["plane"].read().distances
        _close(plane[[0, 2]], HEIGHT - BELOW)
        _close(plane[1], HEIGHT + 0.5 - BELOW)
        _close(s["plane"].read(envs_idx=[1]).distances, HEIGHT + 0.5 - BELOW)
        theta, phi = np.meshgrid(np.radians(np.linspace(-30, 30, 7)), np.radians(np.linspace(-15, 15, 5)),
                                 indexing="ij")
        lidar = s["lidar"].read().distances
        d = WALL_X - LIDAR_AT[0] - LIDAR_AHEAD
        _close(lidar[0], d / (np.cos(theta) * np.cos(phi)))
        _close(lidar[1], (d + 0.5) / (np.cos(theta) * np.cos(phi)))
        d_turned = WALL_X - LIDAR_AT[0] - LIDAR_AHEAD * math.cos(yaw)
        _close(lidar[2], d_turned / (np.cos(theta + yaw) * np.cos(phi)))
        # local points turn with the link: the hit relative to the start, in the link's axes
        unit = np.stack([np.cos(theta) * np.cos(phi), np.sin(theta) * np.cos(phi), np.sin(phi)], axis=-1)
        _close(s["lidar"].read().points[2], lidar[2][..., None].numpy() * unit)
    finally:
        place(scene, carrier)


def test_particles_are_seen_through_the_renderer_s_grid(world):
    """A solver's particles (here a sphere of radius 0.05 added to the rigid solver's render view at (0, 5, 0.3)
    in env 0 and 0.4 in env 2, none in env 1) stop the ray that passes through its centre, at its top: the ray
    cast sees what the cameras draw, particles included, per environment."""
    scene, carrier, s = world
    solver = scene.rigid_solver
    shown = solver.render_view
    centre_z = torch.tensor([0.3, 0.3, 0.4], dtype=torch.float32)
    pos = torch.stack([torch.full((N_ENVS,), PLANE_AT[0]), torch.full((N_ENVS,), PLANE_AT[1]), centre_z], -1)

    def with_particle(f):
        return attrs.evolve(shown(f), particle_pos=pos[:, None], particle_radius=torch.tensor([0.05]),
                            particle_active=torch.tensor([[1], [0], [1]]),
                            particle_entity=torch.tensor([-1], dtype=torch.int32))

    solver.render_view = with_particle
    try:
        place(scene, carrier)
        d = s["plane"].read().distances  # [3, 5, 3]; ray (2, 1) is the centre's
        start = HEIGHT - BELOW
        _close(d[:, 2, 1], [start - 0.35, start, start - 0.45])
        others = torch.ones(5, 3, dtype=torch.bool)
        others[2, 1] = False
        _close(d[:, others], start)
    finally:
        del solver.render_view
        place(scene, carrier)
    _close(s["plane"].read().distances, HEIGHT - BELOW)


# -- the measurement model and the state -------------------------------------------------------------------------


def test_noise_is_added_per_channel_around_the_ground_truth(world):
    """noise 0.01 on a distances-only scan (return_points=False: points None): read - ground truth over 20 steps
    x 3 envs x 15 rays (900 draws) has mean ~0 and standard deviation 0.01 (within 15%, 3 times the estimator's
    spread)."""
    scene, carrier, s = world
    place(scene, carrier)
    residual = []
    for _ in range(20):
        scene.step()
        got, truth = s["noisy"].read(), s["noisy"].read_ground_truth()
        assert got.points is None and got.distances.shape == (N_ENVS, 5, 3)
        _close(truth.distances, HEIGHT - BELOW)
        residual.append(got.distances - truth.distances)
    residual = torch.stack(residual)
    assert abs(float(residual.mean())) < 5 * 0.01 / math.sqrt(residual.numel())
    assert abs(float(residual.std()) / 0.01 - 1) < 0.15


def _readings(scene):
    """Every sensor's measured and true readings, one [n_envs, n] tensor."""
    parts = []
    for sensor in scene.sensors:
        for data in (sensor.read(), sensor.read_ground_truth()):
            parts += [x.reshape(N_ENVS, -1) for x in data if x is not None]
    return torch.cat(parts, dim=1)


def test_reset_restores_readings_in_the_reset_envs_and_leaves_the_others(world):
    """Snapshot (readings A) -> move every carrier in every env and step (readings B != A) -> reset(snapshot,
    envs [1]): env 1 reads A bit for bit (the sensors' state is restored with the rest, noise generator included),
    envs 0 and 2 read B; one step more: env 1 reads what a step from the snapshot reads (its noise replays)."""
    scene, carrier, s = world
    place(scene, carrier)
    snap = scene.get_state()
    at_snap = _readings(scene)
    scene.step()
    after_snap = _readings(scene)
    place(scene, carrier, {name: [(env, (*np.asarray(body.morph.pos)[:2], np.asarray(body.morph.pos)[2] + 0.2),
                                   (1, 0, 0, 0)) for env in range(N_ENVS)] for name, body in carrier.items()})
    moved = _readings(scene)
    assert not torch.equal(moved[1], at_snap[1])
    scene.reset(snap, envs_idx=[1])
    now = _readings(scene)
    assert torch.equal(now[1], at_snap[1])
    assert torch.equal(now[[0, 2]], moved[[0, 2]])
    scene.step()
    assert torch.equal(_readings(scene)[1], after_snap[1])
    scene.reset(snap)
    place(scene, carrier)


def test_checkpoint_resumes_the_readings_exactly(world, tmp_path):
    """save, 3 steps (readings A, the noisy sensor's draws among them), load, 3 steps: A again, bit for bit; the
    sensors' options (pattern included) are part of the checkpoint's signature."""
    scene, carrier, s = world
    place(scene, carrier)
    path = tmp_path / "raycaster.ckpt"
    scene.save_checkpoint(path)
    want = []
    for _ in range(3):
        scene.step()
        want.append(_readings(scene))
    scene.load_checkpoint(path)
    for w in want:
        scene.step()
        assert torch.equal(_readings(scene), w)
    options = [x.options.as_dict() for x in scene.sensors]
    assert options[1]["pattern"] == {"resolution": 0.1, "size": [0.6, 0.6], "direction": [0.0, 0.0, -1.0]}


# -- shapes and refusals -----------------------------------------------------------------------------------------


def test_scene_without_envs_reads_without_a_batch_dimension():
    """n_envs=0: points (*return_shape, 3), distances return_shape, the image (height, width)."""
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=0.01, gravity=(0.0, 0.0, 0.0)))
    scene.add_entity(gs.morphs.Plane())
    body = scene.add_entity(gs.morphs.Box(pos=(0, 0, HEIGHT), size=(CARRIER,) * 3))
    lidar = scene.add_sensor(gs.sensors.Lidar(pattern=gs.sensors.SphericalPattern(fov=(40.0, (0.0, 20.0)),
                                                                                  n_points=(3, 2)),
                                              entity_idx=body.idx, pos_offset=(0.1, 0.0, 0.0)))
    cam = scene.add_sensor(gs.sensors.DepthCamera(pattern=gs.sensors.DepthCameraPattern(res=(4, 3)),
                                                  entity_idx=body.idx, euler_offset=(0.0, 90.0, 0.0),
                                                  pos_offset=(0.0, 0.0, -BELOW)))
    scene.build()
    scene.rigid_solver.launch_mode = "parallel"  # the copy of the kernels the batched scene compiled
    scene.step()
    data = lidar.read()
    assert data.points.shape == (3, 2, 3) and data.distances.shape == (3, 2)
    assert bool((data.distances == 20.0).all())  # level and rising rays, nothing ahead: max_range
    image = cam.read_image()
    assert image.shape == (3, 4)
    assert float(image.min()) >= HEIGHT - BELOW - TOL
    with pytest.raises(gs.SceneError, match="without environments"):
        lidar.read(envs_idx=[0])
    with pytest.raises(gs.OptionError, match="DepthCamera"):
        lidar.read_image()


def test_patterns_follow_genesis_world():
    """The legged-robot height scan is 17 x 11; a full turn of n azimuths is spaced 360 / n (Genesis World 1.4.5);
    a depth camera's rays: (height, width), the centre pixel's along +x for an even-sized image's principal point
    between pixels."""
    scan = gs.sensors.GridPattern(resolution=0.1, size=(1.6, 1.0))
    assert scan.return_shape == (17, 11)
    np.testing.assert_allclose(scan.ray_starts[[0, -1], [0, -1]].numpy(), [[-0.8, -0.5, 0], [0.8, 0.5, 0]],
                               atol=1e-12)
    assert torch.equal(scan.ray_dirs[3, 4], torch.tensor([0.0, 0.0, -1.0], dtype=torch.float64))
    lidar = gs.sensors.SphericalPattern(n_points=(8, 3), fov=(360.0, (-10.0, 20.0)))
    h, v = lidar.angles_deg()
    np.testing.assert_allclose(h, np.arange(-180, 180, 45))
    np.testing.assert_allclose(v, [-10, 5, 20])
    by_res = gs.sensors.SphericalPattern(fov=(90.0, 10.0), angular_resolution=(30.0, 4.0))
    assert by_res.return_shape == (4, 4)
    assert gs.sensors.SphericalPattern(angles=((0.0, 10.0), (5.0,))).return_shape == (2, 1)
    cam = gs.sensors.DepthCameraPattern(res=(5, 3), fov_horizontal=90.0)
    dirs = cam.ray_dirs
    assert dirs.shape == (3, 5, 3)
    assert torch.allclose(dirs[1, 2], torch.tensor([1.0, 0.0, 0.0], dtype=torch.float64))
    assert dirs[1, 0, 1] > 0 and dirs[0, 2, 2] > 0  # left column looks left (+y), top row up (+z)
    assert gs.sensors.Lidar is gs.sensors.Raycaster and issubclass(gs.sensors.DepthCamera, gs.sensors.Raycaster)
    assert gs.sensors.Raycaster(pattern=scan, max_range=5.0).no_hit_value == 5.0


@pytest.mark.parametrize("make, match", [
    (lambda: gs.sensors.Raycaster(), "pattern"),
    (lambda: gs.sensors.Raycaster(pattern=gs.sensors.GridPattern(), max_range=0.0), "max_range"),
    (lambda: gs.sensors.Raycaster(pattern=gs.sensors.GridPattern(), min_range=2.0, max_range=1.0), "min_range"),
    (lambda: gs.sensors.Raycaster(pattern=gs.sensors.GridPattern(), no_hit_value=float("inf")), "no_hit_value"),
    (lambda: gs.sensors.Raycaster(pattern=gs.sensors.GridPattern(), history_length=3), "history_length"),
    (lambda: gs.sensors.Raycaster(pattern=gs.sensors.GridPattern(), return_world_frame=1), "return_world_frame"),
    (lambda: gs.sensors.Raycaster(pattern=gs.sensors.GridPattern(), noise=-0.1), "noise"),
    (lambda: gs.sensors.DepthCamera(pattern=gs.sensors.GridPattern()), "pattern"),
    (lambda: gs.sensors.GridPattern(resolution=1e-4), "resolution"),
    (lambda: gs.sensors.GridPattern(size=(1.0, -1.0)), "size"),
    (lambda: gs.sensors.GridPattern(direction=(0.0, 0.0, 0.0)), "direction"),
    (lambda: gs.sensors.SphericalPattern(fov=(400.0, 30.0)), "fov"),
    (lambda: gs.sensors.SphericalPattern(n_points=(0, 4)), "n_points"),
    (lambda: gs.sensors.SphericalPattern(angular_resolution=(-1.0, None)), "angular_resolution"),
    (lambda: gs.sensors.SphericalPattern(angles=((), None)), "angles"),
    (lambda: gs.sensors.DepthCameraPattern(res=(0, 4)), "res"),
    (lambda: gs.sensors.DepthCameraPattern(fov_horizontal=180.0), "fov_horizontal"),
    (lambda: gs.sensors.DepthCameraPattern(fx=-1.0), "fx"),
    (lambda: gs.sensors.DepthCameraPattern(fov_horizontal=None), "fov_horizontal or fov_vertical"),
])
def test_bad_options_are_refused_on_construction(make, match):
    with pytest.raises(gs.OptionError, match=match):
        make()


def test_bad_attachment_is_refused_and_nothing_is_added():
    scene = gs.Scene()
    box = scene.add_entity(gs.morphs.Box(size=(0.1,) * 3))
    grid = gs.sensors.GridPattern(resolution=0.5, size=(1.0, 1.0))  # 3 x 3 rays: 36 channels
    for options, match in (
            (gs.sensors.Raycaster(pattern=grid, entity_idx=4), "out of range"),
            (gs.sensors.Raycaster(pattern=grid, entity_idx=box.idx, link_idx_local=2), "link_idx_local=2"),
            (gs.sensors.Raycaster(pattern=grid, entity_idx=box.idx, noise=(0.1, 0.2)), "36"),
            (gs.sensors.Raycaster(pattern=grid, entity_idx=box.idx, return_points=False, bias=(0.1,) * 36), "or 9 ")):
        with pytest.raises(gs.OptionError, match=match):
            scene.add_sensor(options)
    assert scene.sensors == []


def test_the_cast_refits_the_bvh_as_the_renderer_does(world):
    """The scene has 17 bounded primitives, so every ray above went through the primitives' BVH, whose boxes the
    ray cast refits in its kernel: they equal bitwise the renderer's refit (torch) of the same poses, and every
    node's box is the union of its primitives' bounding spheres, computed here directly."""
    scene, carrier, s = world
    place(scene, carrier)
    manager = scene.sensor_manager
    (_, _, ctx, _), = manager._kinds
    from genesis_core.render.view import solver_render_views

    geometry = ctx["geometry"]
    in_kernel = geometry.pack(solver_render_views(scene), N_ENVS, manager.device, refit=False)[0]["node_box"].clone()
    prims = geometry.pack(solver_render_views(scene), N_ENVS, manager.device, refit=True)[0]
    assert prims["n_nodes"] > 1 and prims["n_loose"] == 1  # the plane alone is tested apart
    assert torch.equal(in_kernel, prims["node_box"])
    node_i, pose, radius = prims["node_i"].numpy(), prims["prim_pose"].numpy(), prims["prim_f"][:, 3].numpy()
    for k in range(prims["n_nodes"]):
        members = [int(node_i[j, 0]) for j in range(k, node_i[k, 1]) if node_i[j, 0] >= 0]
        centres = pose[:, members, :3]
        lo = (centres - radius[members][None, :, None]).min(axis=1)
        hi = (centres + radius[members][None, :, None]).max(axis=1)
        assert np.array_equal(prims["node_box"][:, k].numpy(), np.concatenate([lo, hi], axis=-1)), k
    place(scene, carrier)  # (the sensors' own boxes again)
