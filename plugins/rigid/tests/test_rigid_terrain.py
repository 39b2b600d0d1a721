"""Height-field terrain (gs.morphs.Terrain) in the rigid solver: bodies resting, sliding and rolling on slopes at
the closed-form heights and accelerations, a box across a stair's edge, every primitive kind at rest on it, contacts
in the pool, snapshots and checkpoints of a scene with terrain, and refusals."""

import math

import numpy as np
import pytest
import torch

import genesis_core as gs
from genesis_core.terrain import height_at

G = 9.81
HS = 0.1  # the test fields' cell size, m


def slope(theta, n=41):
    """Heights (m) of a plane rising along x at angle theta, n x n vertices HS apart."""
    return np.repeat((np.arange(n) * HS * math.tan(theta))[:, None], n, axis=1)


def scene_on(heights, dt=0.005, friction=None, pos=(-2.0, -2.0, 0.0), n_envs=0, bodies=()):
    """A scene of the height field `heights` (metres, vertical_scale 1) with its corner at pos, and `bodies`
    (morph, friction) on it; returns (scene, terrain, [entities])."""
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=dt))
    mat = gs.materials.Rigid(friction=friction) if friction is not None else gs.materials.Rigid()
    terrain = scene.add_entity(gs.morphs.Terrain(horizontal_scale=HS, vertical_scale=1.0, height_field=heights,
                                                 pos=pos), material=mat)
    ents = [scene.add_entity(m, material=gs.materials.Rigid(friction=mu) if mu is not None else gs.materials.Rigid())
            for m, mu in bodies]
    scene.build(n_envs=n_envs)
    return scene, terrain, ents


def tilt_y(theta):
    """The quaternion turning +z onto the upward normal of a slope rising along +x at angle theta."""
    return (math.cos(-theta / 2), 0.0, math.sin(-theta / 2), 0.0)


def on_slope(theta, x, half_height):
    """The centre of a body whose bottom rests on the slope (corner at (-2, -2, 0)) at world x."""
    n = np.array([-math.sin(theta), 0.0, math.cos(theta)])
    foot = np.array([x, 0.0, (x + 2.0) * math.tan(theta)])
    return foot + n * half_height


def test_a_box_rests_on_a_slope_where_friction_holds_it_at_the_analytic_height():
    theta = math.radians(20)  # tan 0.36 < mu 1
    centre = on_slope(theta, 0.0, 0.1)
    scene, _, (box,) = scene_on(slope(theta), bodies=[(gs.morphs.Box(size=(0.2, 0.2, 0.2), pos=tuple(centre + [0, 0, 1e-4]),
                                                                   quat=tilt_y(theta)), None)])
    for _ in range(200):
        scene.step()
    p = box.get_pos().numpy()
    n = np.array([-math.sin(theta), 0.0, math.cos(theta)])
    # at rest where it was put, its centre 0.1 m above the surface along the normal (penetration < 1 mm)
    assert np.linalg.norm(p - centre) < 2e-3, p - centre
    assert abs(float((p - on_slope(theta, float(p[0]), 0.0)) @ n) - 0.1) < 1e-3
    assert np.linalg.norm(box.get_vel().numpy()) < 1e-3


@pytest.mark.parametrize("mu", [0.1, 0.25])
def test_a_box_slides_down_a_slope_at_the_friction_limited_acceleration(mu):
    """a = g (sin theta - mu cos theta) along the slope, from the velocity gained over 0.3 s of sliding."""
    theta = math.radians(25)
    centre = on_slope(theta, 1.0, 0.1)
    scene, _, (box,) = scene_on(slope(theta), friction=mu, bodies=[(gs.morphs.Box(
        size=(0.2, 0.2, 0.2), pos=tuple(centre + [0, 0, 1e-4]), quat=tilt_y(theta)), mu)])
    down = np.array([-math.cos(theta), 0.0, -math.sin(theta)])
    for _ in range(20):
        scene.step()
    v0 = float(box.get_vel().numpy() @ down)
    for _ in range(60):
        scene.step()
    a = (float(box.get_vel().numpy() @ down) - v0) / (60 * 0.005)
    want = G * (math.sin(theta) - mu * math.cos(theta))
    assert abs(a - want) < 0.02 * want, (a, want)
    assert abs(float(box.get_vel()[1])) < 1e-6  # straight down the slope


def test_a_sphere_rolls_down_a_slope_at_five_sevenths_of_g_sin_theta():
    """Rolling without slipping across the cells' edges and diagonals (coplanar triangles): a = 5/7 g sin theta,
    and the sphere stays on the surface (its centre r above it along the normal)."""
    theta = math.radians(15)
    r = 0.1
    centre = on_slope(theta, 1.2, r)
    scene, _, (ball,) = scene_on(slope(theta), bodies=[(gs.morphs.Sphere(radius=r, pos=tuple(centre + [0, 0, 1e-4])),
                                                        None)])
    down = np.array([-math.cos(theta), 0.0, -math.sin(theta)])
    n = np.array([-math.sin(theta), 0.0, math.cos(theta)])
    for _ in range(20):
        scene.step()
    v0 = float(ball.get_vel().numpy() @ down)
    gap = []
    for _ in range(100):
        scene.step()
        p = ball.get_pos().numpy()
        gap.append(float((p - on_slope(theta, float(p[0]), 0.0)) @ n) - r)
    a = (float(ball.get_vel().numpy() @ down) - v0) / (100 * 0.005)
    want = 5 / 7 * G * math.sin(theta)
    assert abs(a - want) < 0.02 * want, (a, want)
    assert max(abs(x) for x in gap) < 1e-3
    assert abs(float(ball.get_vel()[1])) < 1e-6


def test_a_box_across_a_stair_edge_rests_flat_on_the_upper_step():
    """A 10 cm step (the riser one cell wide); a box whose centre of mass is over the upper step and whose other
    end overhangs the lower one rests level at the step's height: the edge's grid vertices under its bottom hold
    it."""
    z = np.zeros((41, 21))
    z[20:] = 0.1  # x >= 0 (the riser between x = -0.1 and 0)
    scene, _, (box,) = scene_on(z, bodies=[(gs.morphs.Box(size=(0.3, 0.2, 0.1), pos=(0.05, -1.0, 0.1501)), None)])
    for _ in range(200):
        scene.step()
    p, q = box.get_pos().numpy(), box.get_quat().numpy()
    assert abs(p[2] - 0.15) < 1e-3 and abs(p[0] - 0.05) < 1e-3
    assert 2 * math.degrees(math.acos(min(1.0, abs(q[0])))) < 0.5  # level
    # over the lower step alone it would fall: moved 0.2 m back, its centre of mass overhangs the edge and it tips
    box.set_pos([-0.15, -1.0, 0.1501])
    box.set_quat([1.0, 0.0, 0.0, 0.0])
    for _ in range(200):
        scene.step()
    assert box.get_pos()[2] < 0.12


@pytest.mark.parametrize("kind", ["sphere", "capsule", "cylinder", "box"])
def test_every_primitive_rests_on_flat_terrain_at_its_height(kind):
    morph, h = {"sphere": (gs.morphs.Sphere(radius=0.07, pos=(0.03, 0.02, 0.0701)), 0.07),
                "capsule": (gs.morphs.Capsule(radius=0.05, height=0.3, pos=(0.0, 0.0, 0.0501),
                                              euler=(0.0, 90.0, 30.0)), 0.05),
                "cylinder": (gs.morphs.Cylinder(radius=0.05, height=0.2, pos=(0.0, 0.0, 0.1001)), 0.1),
                "box": (gs.morphs.Box(size=(0.3, 0.2, 0.1), pos=(0.0, 0.0, 0.0501), euler=(0.0, 0.0, 33.0)),
                        0.05)}[kind]
    scene, _, (body,) = scene_on(np.full((41, 41), 0.0), bodies=[(morph, None)])
    q0 = body.get_quat().clone()
    for _ in range(100):
        scene.step()
    assert abs(float(body.get_pos()[2]) - h) < 1e-3
    assert float(body.get_vel().norm()) < 1e-3 and torch.allclose(body.get_quat(), q0, atol=1e-3)
    n = int(scene.sim.rigid_solver.scratch["s_con_i"][0, 7, 0])  # (CI_META: the pool's entries)
    assert 1 <= n <= 5  # at most the pair's five slots


def surface_distance(H, hs, p, reach=0.25, step=0.005):
    """The distance from point p to the height field's surface, from its samples every `step` metres within
    `reach` of p horizontally (an overestimate by at most step / 2 on these gentle slopes)."""
    x, y = np.meshgrid(np.arange(p[0] - reach, p[0] + reach, step), np.arange(p[1] - reach, p[1] + reach, step))
    z = height_at(H, hs, x, y)
    return float(np.nanmin(np.sqrt((x - p[0]) ** 2 + (y - p[1]) ** 2 + (z - p[2]) ** 2)))


def test_balls_dropped_on_random_terrain_roll_on_its_surface_in_every_environment():
    """Uniform-noise terrain from Genesis World's subterrain kind; three environments drop the ball at three
    places. At every step after landing each ball touches the surface and never sinks into it: its centre's
    distance to the surface is its radius within 3 mm (a ball on bumps rolls on; it never flies off nor sinks)."""
    morph = gs.morphs.Terrain(n_subterrains=(1, 1), subterrain_size=(3.0, 3.0), horizontal_scale=0.1,
                              vertical_scale=0.005, subterrain_types="random_uniform_terrain")
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=0.005))
    scene.add_entity(morph)
    ball = scene.add_entity(gs.morphs.Sphere(radius=0.15, pos=(1.5, 1.5, 0.6)))
    scene.build(n_envs=3)
    ball.set_pos(torch.tensor([[1.0, 1.0, 0.4], [1.5, 1.5, 0.4], [2.0, 1.3, 0.4]], dtype=torch.float64))
    H = morph.raw_heights() * morph.vertical_scale
    gaps = []
    for k in range(160):
        scene.step()
        if k >= 100 and k % 4 == 0:
            gaps += [surface_distance(H, 0.1, p) - 0.15 for p in ball.get_pos().numpy()]
    assert min(gaps) > -3e-3 and max(gaps) < 3e-3, (min(gaps), max(gaps))
    assert len({tuple(p) for p in ball.get_pos().numpy().round(3)}) == 3  # three different paths


def test_snapshots_and_checkpoints_of_a_scene_with_terrain_resume_exactly(tmp_path):
    H = np.sin(np.arange(31)[:, None] * 0.4) * np.cos(np.arange(31)[None, :] * 0.3) * 0.1

    def make():
        return scene_on(H, pos=(-1.5, -1.5, 0.0), n_envs=2, bodies=[
            (gs.morphs.Box(size=(0.2, 0.15, 0.1), pos=(0.1, 0.0, 0.4), euler=(10, 20, 30)), None),
            (gs.morphs.Sphere(radius=0.08, pos=(-0.4, 0.3, 0.4)), None)])

    scene, _, (box, ball) = make()
    for _ in range(30):
        scene.step()
    snap = scene.get_state()
    scene.save_checkpoint(str(tmp_path / "t.ckpt"))
    for _ in range(40):
        scene.step()
    want = box.get_pos().clone(), ball.get_pos().clone()
    # a fresh scene from the checkpoint follows bit for bit
    scene2, _, (box2, ball2) = make()
    scene2.load_checkpoint(str(tmp_path / "t.ckpt"))
    for _ in range(40):
        scene2.step()
    assert torch.equal(box2.get_pos(), want[0]) and torch.equal(ball2.get_pos(), want[1])
    # reset environment 1 to the snapshot: it replays, environment 0 is left as it was
    before = box.get_pos().clone()
    scene.reset(snap, envs_idx=[1])
    assert torch.equal(box.get_pos()[0], before[0])
    for _ in range(40):
        scene.step()
    assert torch.equal(box.get_pos()[1], want[0][1])
    # another terrain is another scene
    other = scene_on(H + 0.01, pos=(-1.5, -1.5, 0.0), n_envs=2, bodies=[
        (gs.morphs.Box(size=(0.2, 0.15, 0.1), pos=(0.1, 0.0, 0.4), euler=(10, 20, 30)), None),
        (gs.morphs.Sphere(radius=0.08, pos=(-0.4, 0.3, 0.4)), None)])[0]
    with pytest.raises(gs.CheckpointMismatchError, match="height_field"):
        other.load_checkpoint(str(tmp_path / "t.ckpt"))


@pytest.mark.parametrize("kw, words", [
    (dict(height_field=np.zeros(5)), "2-D array"),
    (dict(height_field=np.array([[0.0, np.nan], [0.0, 0.0]])), "finite"),
    (dict(height_field=[[0.0, 1.0]]), "at least 2 x 2"),
    (dict(subterrain_types="lava"), "not a subterrain type"),
    (dict(subterrain_types=[["flat_terrain"]]), "shape n_subterrains"),
    (dict(subterrain_size=(12.1, 12.0)), "whole number"),
    (dict(horizontal_scale=0.0), "horizontal_scale"),
    (dict(vertical_scale=float("nan")), "vertical_scale"),
    (dict(n_subterrains=(0, 3)), "n_subterrains"),
    (dict(subterrain_parameters={"wave_terrain": {"num_waves": "two"}}), "finite"),
    (dict(subterrain_parameters={"wave_terrain": {"waves": 2}}), "unknown parameters"),
])
def test_bad_terrain_options_are_refused_by_name(kw, words):
    with pytest.raises(gs.OptionError, match=words):
        gs.morphs.Terrain(**kw)


def test_terrain_is_refused_in_differentiable_mode_with_the_reason():
    scene = gs.Scene(sim_options=gs.options.SimOptions(requires_grad=True))
    scene.add_entity(gs.morphs.Terrain(height_field=np.zeros((3, 3))))
    scene.add_entity(gs.morphs.Sphere(radius=0.1, pos=(0.2, 0.2, 0.5)))
    with pytest.raises(gs.OptionError, match="requires_grad"):
        scene.build()


def test_an_mjcf_hfield_is_mujocos_surface_and_a_ball_rolls_straight_down_it():
    """An <hfield> asset (elevation given, normalised and scaled as MuJoCo does, its rows from +y) on a posed geom:
    the surface heights equal MuJoCo's (mj_ray straight down at 40 points, 1e-7 m); a ball rolls down its planar
    part along the fall line (the x axis of the geom turned 20 degrees) at 5/7 g sin(theta)."""
    import os

    mujoco = pytest.importorskip("mujoco")
    path = os.path.join(os.path.dirname(__file__), "data", "hfield.xml")
    m = mujoco.MjModel.from_xml_path(path)
    d = mujoco.MjData(m)
    mujoco.mj_forward(m, d)
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=0.002))
    ent = scene.add_entity(gs.morphs.MJCF(file=path))
    scene.build()
    (g,) = [g for g in ent.geoms if g.desc.heights is not None]
    pos, R = g.get_pos().numpy().reshape(3), None
    from genesis_core.rotations import quat_to_mat

    R = quat_to_mat(g.get_quat().numpy().reshape(4))
    hx, hy = g.desc.size[0], g.desc.size[1]
    rng = np.random.default_rng(0)
    for _ in range(40):
        x, y = rng.uniform(-0.8, 1.0), rng.uniform(-0.6, 0.6)
        dist = mujoco.mj_ray(m, d, np.array([x, y, 5.0]), np.array([0.0, 0.0, -1.0]), None, 1, -1,
                             np.zeros(1, np.int32))
        lo, hi = -1.0, 2.0  # ours: where the vertical line meets the surface (bisection in the geom's frame)
        for _ in range(60):
            p = R.T @ (np.array([x, y, (lo + hi) / 2]) - pos)
            h = height_at(g.desc.heights, hx, np.array([p[0]]), np.array([p[1] * hx / hy]))[0]
            lo, hi = ((lo + hi) / 2, hi) if p[2] <= h else (lo, (lo + hi) / 2)
        assert abs((5.0 - dist) - lo) < 1e-7
    for _ in range(300):  # landed and rolling
        scene.step()
    p0, v0 = ent.get_pos().numpy(), ent.get_vel().numpy()
    for _ in range(200):
        scene.step()
    p1, v1 = ent.get_pos().numpy(), ent.get_vel().numpy()
    fall = R @ np.array([-1.0, 0.0, 0.0])
    theta = math.atan(0.4 / 0.9 * 0.1 / hx)  # the planar rows: 0.1 of the 0.9 range per column
    down = np.array([fall[0] * math.cos(theta), fall[1] * math.cos(theta), -math.sin(theta)])
    move = p1 - p0
    assert np.linalg.norm(move - (move @ down) * down) < 1e-4 * np.linalg.norm(move)  # along the fall line
    a = ((v1 - v0) @ down) / (200 * 0.002)
    assert abs(a - 5 / 7 * G * math.sin(theta)) < 0.02 * 5 / 7 * G * math.sin(theta)


def test_a_height_scan_reads_the_terrain_under_it():
    """A downward ray-cast grid (Genesis World's height scan) over a 17-degree slope: each ray hits the surface at
    its analytic height (the ray casters see the terrain's triangles, as the cameras draw them)."""
    theta = 0.3
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=0.01))
    scene.add_entity(gs.morphs.Terrain(horizontal_scale=HS, vertical_scale=1.0, height_field=slope(theta),
                                       pos=(-2.0, -2.0, 0.0)))
    mount = scene.add_entity(gs.morphs.Box(size=(0.1, 0.1, 0.1), pos=(0.0, 0.0, 3.0), fixed=True))
    scan = scene.add_sensor(gs.sensors.Raycaster(
        pattern=gs.sensors.GridPattern(resolution=0.25, size=(1.0, 1.0), direction=(0.0, 0.0, -1.0)),
        entity_idx=mount.idx, pos_offset=(0.0, 0.0, -0.06), max_range=10.0, return_world_frame=True))
    scene.build()
    scene.step()
    p = scan.read().points.reshape(-1, 3).numpy()
    assert len(p) == 25
    np.testing.assert_allclose(p[:, 2], (p[:, 0] + 2.0) * math.tan(theta), atol=1e-6)


def test_the_go2_stands_on_stairs():
    """Genesis World's go2, PD-held at its standing pose, across the edge of 5 cm stairs (stairs_terrain): its front
    feet on the higher step, its rear feet on the lower. After 2 s it stands still and level along the stairs'
    pitch, each foot (a 2.2 cm sphere) resting on its step (its centre 2.2 cm above the surface, 3 mm), the base
    above the feet. Needs Genesis World's go2 (urdf/go2/urdf/go2.urdf) on the asset path."""
    if gs.morphs.find_file("urdf/go2/urdf/go2.urdf")[0] is None:
        pytest.skip("Genesis World's go2 (urdf/go2/urdf/go2.urdf) is not on the asset path (GENESIS_CORE_ASSETS)")
    morph = gs.morphs.Terrain(n_subterrains=(1, 1), subterrain_size=(3.0, 2.0), horizontal_scale=0.05,
                              vertical_scale=0.005, subterrain_types="stairs_terrain", pos=(-1.5, -1.0, 0.0),
                              subterrain_parameters={"stairs_terrain": {"step_width": 0.5, "step_height": 0.05}})
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=0.005))
    scene.add_entity(morph)
    # the step edge at x = 0 (10 cells of 0.05 m a step from x = -1.5): the hips are 0.19 m either side of the base
    robot = scene.add_entity(gs.morphs.URDF(file="urdf/go2/urdf/go2.urdf", pos=(0.0, 0.0, 0.55),
                                            links_to_keep=[f"{leg}_foot" for leg in ("FR", "FL", "RR", "RL")]))
    scene.build()
    names = [f"{leg}_{j}_joint" for leg in ("FR", "FL", "RR", "RL") for j in ("hip", "thigh", "calf")]
    dofs = [robot.get_joint(n).dofs_idx_local[0] for n in names]
    stand = torch.tensor([0.0, 0.8, -1.5, 0.0, 0.8, -1.5, 0.0, 1.0, -1.5, 0.0, 1.0, -1.5], dtype=torch.float64)
    robot.set_dofs_kp([60.0] * 12, dofs)
    robot.set_dofs_kv([2.0] * 12, dofs)
    robot.set_dofs_position(stand, dofs)
    robot.control_dofs_position(stand, dofs)
    for _ in range(400):
        scene.step()
    H = morph.raw_heights() * morph.vertical_scale
    feet = np.stack([robot.get_link(f"{leg}_foot").get_pos().numpy() for leg in ("FR", "FL", "RR", "RL")])
    local = feet - np.array([-1.5, -1.0, 0.0])
    ground = height_at(H, 0.05, local[:, 0], local[:, 1])
    assert np.all(np.abs(feet[:, 2] - 0.022 - ground) < 3e-3), feet[:, 2] - 0.022 - ground
    assert ground[0] == ground[1] and ground[2] == ground[3] and ground[0] - ground[2] == pytest.approx(0.05)
    assert float(robot.get_vel().norm()) < 0.01 and float(robot.get_ang().norm()) < 0.05
    assert float(robot.get_pos()[2]) > feet[:, 2].max() + 0.15


def test_an_ellipsoid_and_a_convex_mesh_rest_on_an_mjcf_height_field(tmp_path):
    """A flat <hfield> with a free ellipsoid (semi-axes 0.1, 0.08, 0.05, its short axis up) and a free convex mesh
    (a 0.2 m cube from an OBJ, turned 30 degrees about z): each rests at its half-height, level, within 1 mm."""
    cube = tmp_path / "cube.obj"
    cube.write_text("".join(f"v {x} {y} {z}\n" for x in (-0.1, 0.1) for y in (-0.1, 0.1) for z in (-0.1, 0.1))
                    + "f 1 3 4 2\nf 5 6 8 7\nf 1 2 6 5\nf 3 7 8 4\nf 1 5 7 3\nf 2 4 8 6\n")
    xml = tmp_path / "field.xml"
    xml.write_text(f"""<mujoco><asset><hfield name="f" nrow="9" ncol="9" size="1 1 0.1 0.05"/>
      <mesh name="cube" file="{cube}"/></asset>
      <worldbody><geom type="hfield" hfield="f"/>
        <body name="egg" pos="-0.4 0 0.0505"><freejoint/><geom type="ellipsoid" size="0.1 0.08 0.05"/></body>
        <body name="box" pos="0.4 0.1 0.1005" euler="0 0 30"><freejoint/><geom type="mesh" mesh="cube"/></body>
      </worldbody></mujoco>""")
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=0.005))
    ent = scene.add_entity(gs.morphs.MJCF(file=str(xml)))
    scene.build()
    for _ in range(150):
        scene.step()
    egg, box = ent.get_link("egg"), ent.get_link("box")
    assert abs(float(egg.get_pos()[2]) - 0.05) < 1e-3 and abs(float(box.get_pos()[2]) - 0.1) < 1e-3
    for link, q0 in ((egg, [1.0, 0.0, 0.0, 0.0]), (box, [math.cos(math.pi / 12), 0.0, 0.0, math.sin(math.pi / 12)])):
        assert torch.allclose(link.get_quat(), torch.tensor(q0, dtype=torch.float64), atol=2e-3)
        assert float(link.get_vel().norm()) < 1e-3
