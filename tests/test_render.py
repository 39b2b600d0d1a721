"""Cameras and the ray caster: images checked against analytic geometry computed here in float64 NumPy.

Every scene is small (64 x 48 pixels, at most 3 environments): the one render kernel compiles once per process
and each render then takes milliseconds. The kernel works in float32, so depths are compared to 1e-4 m at a few
metres (float32 carries ~7 digits); pixels whose ray grazes a silhouette within 1e-3 m are left out of the
hit/miss comparison, where float32 and float64 may honestly disagree.
"""

import itertools
import os

import numpy as np
import pytest
import torch

import genesis_core as gs
from genesis_core.errors import OptionError

W, H = 64, 48
DEPTH_TOL = 1e-4  # m


def entity_ids(scene, seg):
    """The entity index behind each segmentation index (the first element of its key in
    scene.segmentation_idx_dict; -1 on the background)."""
    table = scene.segmentation_idx_dict
    assert table[0] == -1 and sorted(table) == list(range(len(table)))
    lut = torch.tensor([key if isinstance(key, int) else key[0] for _, key in sorted(table.items())],
                       dtype=torch.int32)
    return lut[seg.long()]


def pixel_rays(pos, lookat, up, fov, w=W, h=H):
    """Unit ray directions [H, W, 3] (float64) through the pixel centres of a pinhole camera, and its forward
    axis: a look-at frame written independently of the engine's."""
    pos, lookat, up = (np.asarray(x, dtype=np.float64) for x in (pos, lookat, up))
    fwd = (lookat - pos) / np.linalg.norm(lookat - pos)
    right = np.cross(fwd, up)
    right /= np.linalg.norm(right)
    cam_up = np.cross(right, fwd)
    tan = np.tan(np.radians(fov) / 2)
    x = (2 * (np.arange(w) + 0.5) / w - 1) * tan * w / h
    y = (1 - 2 * (np.arange(h) + 0.5) / h) * tan
    d = fwd + x[None, :, None] * right + y[:, None, None] * cam_up
    return d / np.linalg.norm(d, axis=-1, keepdims=True), fwd


def sphere_depth(pos, rays, fwd, centre, radius):
    """Analytic depth (along fwd) of the sphere per pixel (inf: missed), and each ray's distance to the centre."""
    oc = np.asarray(pos, dtype=np.float64) - np.asarray(centre, dtype=np.float64)
    b = rays @ oc
    disc = b * b - (oc @ oc - radius ** 2)
    t = -b - np.sqrt(np.maximum(disc, 0))
    depth = np.where(disc >= 0, t * (rays @ fwd), np.inf)
    miss_dist = np.sqrt(np.maximum(oc @ oc - b * b, 0))
    return depth, miss_dist


def test_sphere_depth_matches_the_analytic_depth():
    """Every pixel's depth is the distance to the image plane of the ray's first intersection with the sphere."""
    scene = gs.Scene()
    centre, radius = (0.1, -0.05, 0.6), 0.4
    ball = scene.add_entity(gs.morphs.Sphere(pos=centre, radius=radius, fixed=True))
    pose = dict(pos=(2.5, 1.0, 1.4), lookat=(0.0, 0.0, 0.5), up=(0, 0, 1), fov=35)
    cam = scene.add_camera(res=(W, H), **pose)  # before build, as Genesis World allows
    scene.build()
    rgb, depth, seg, normal = cam.render(rgb=False, depth=True)
    assert rgb is None and seg is None and normal is None
    assert depth.shape == (H, W) and depth.dtype == torch.float32
    rays, fwd = pixel_rays(pose["pos"], pose["lookat"], pose["up"], pose["fov"])
    ref, dist = sphere_depth(pose["pos"], rays, fwd, centre, radius)
    clear = np.abs(dist - radius) > 1e-3
    got = depth.numpy().astype(np.float64)
    hit = np.isfinite(ref)
    assert hit.sum() > 200 and (~hit).sum() > 200  # the sphere fills part of the image
    assert np.array_equal(np.isfinite(got)[clear], hit[clear])
    both = hit & np.isfinite(got)
    np.testing.assert_allclose(got[both], ref[both], atol=DEPTH_TOL, rtol=0)
    assert ball.idx == 0


def test_segmentation_gives_each_entity_its_index_and_rgb_its_surface_colour():
    scene = gs.Scene()
    plane = scene.add_entity(gs.morphs.Plane())
    ball = scene.add_entity(gs.morphs.Sphere(pos=(0, 0.5, 0.3), radius=0.3, fixed=True),
                            surface=gs.surfaces.Default(color=(0.0, 0.0, 1.0)))
    box = scene.add_entity(gs.morphs.Box(pos=(0, -0.5, 0.25), size=(0.4, 0.4, 0.5), fixed=True))
    pose = dict(pos=(3.0, 0.0, 0.9), lookat=(0, 0, 0.4), up=(0, 0, 1), fov=40)
    cam = scene.add_camera(res=(W, H), **pose)
    scene.build()
    rgb, depth, seg, _ = cam.render(rgb=True, depth=True, segmentation=True)
    seg = entity_ids(scene, seg)
    assert seg.dtype == torch.int32 and rgb.dtype == torch.uint8 and rgb.shape == (H, W, 3)
    rays, fwd = pixel_rays(pose["pos"], pose["lookat"], pose["up"], pose["fov"])
    ref, dist = sphere_depth(pose["pos"], rays, fwd, (0, 0.5, 0.3), 0.3)
    on_ball = np.isfinite(ref) & (dist < 0.29)
    assert on_ball.sum() > 20
    assert (seg.numpy()[on_ball] == ball.idx).all()
    # the ball's surface colour is pure blue: lit or in shadow, a blue pixel has no red or green
    assert (rgb.numpy()[on_ball][:, :2] == 0).all() and (rgb.numpy()[on_ball][:, 2] > 0).all()
    # the box's centre projects onto the box; the sky (rays going up) is background
    ids = set(torch.unique(seg).tolist())
    assert ids == {plane.idx, ball.idx, box.idx, -1}
    up_rays = rays[..., 2] > 0.05
    assert up_rays.sum() > 50
    assert (seg.numpy()[up_rays] == -1).all() and np.isinf(depth.numpy()[up_rays]).all()
    late = scene.add_camera(res=(W, H), **pose)  # a camera added after build sees the same
    assert torch.equal(entity_ids(scene, late.render(segmentation=True)[2]), seg)
    _, _, colored, _ = cam.render(rgb=False, segmentation=True, colorize_seg=True)
    assert colored.shape == (H, W, 3) and colored.dtype == torch.uint8


def test_box_normals_are_its_face_normals():
    """A camera on the box's +x axis, above its top: each pixel on the box sees the +x face or the top face, and
    the normal image holds (n + 1) / 2 of that face."""
    scene = gs.Scene()
    box = scene.add_entity(gs.morphs.Box(pos=(0, 0, 0), size=(0.6, 0.6, 0.6), fixed=True))
    pose = dict(pos=(2.0, 0.0, 1.2), lookat=(0, 0, 0), up=(0, 0, 1), fov=40)
    cam = scene.add_camera(res=(W, H), **pose)
    scene.build()
    _, depth, seg, normal = cam.render(rgb=False, depth=True, segmentation=True, normal=True)
    seg = entity_ids(scene, seg)
    rays, fwd = pixel_rays(pose["pos"], pose["lookat"], pose["up"], pose["fov"])
    o = np.asarray(pose["pos"])
    # the +x face x = 0.3 (|y|, |z| <= 0.3) and the top z = 0.3 (|x|, |y| <= 0.3): which one each ray meets first
    t_side = (0.3 - o[0]) / rays[..., 0]
    p_side = o + t_side[..., None] * rays
    side = (np.abs(p_side[..., 1]) < 0.29) & (np.abs(p_side[..., 2]) < 0.29)
    t_top = (0.3 - o[2]) / rays[..., 2]
    p_top = o + t_top[..., None] * rays
    top = (np.abs(p_top[..., 0]) < 0.29) & (np.abs(p_top[..., 1]) < 0.29) & (t_top > 0)
    n = normal.numpy()
    assert side.sum() > 30 and top.sum() > 30
    np.testing.assert_allclose(n[side], np.broadcast_to([1.0, 0.5, 0.5], n[side].shape), atol=1e-5)
    np.testing.assert_allclose(n[top], np.broadcast_to([0.5, 0.5, 1.0], n[top].shape), atol=1e-5)
    np.testing.assert_allclose(depth.numpy()[side], (t_side * (rays @ fwd))[side], atol=DEPTH_TOL)
    assert (seg.numpy()[side | top] == box.idx).all()
    assert (n[seg.numpy() == -1] == 0).all()


def test_batched_render_equals_the_one_environment_renders_bitwise():
    """Three environments with the box at different places and the camera at different poses: each image of the
    batched render is bitwise the one-environment scene's image with that environment's box pose and camera."""
    box_pos = [(0.0, 0.0, 0.4), (0.3, -0.2, 0.5), (-0.2, 0.3, 0.7)]
    cam_pos = [(2.0, 1.0, 1.5), (2.5, -1.0, 1.0), (1.5, 2.0, 2.0)]

    def make(n_envs):
        scene = gs.Scene()
        scene.add_entity(gs.morphs.Plane())
        box = scene.add_entity(gs.morphs.Box(pos=(0, 0, 0.4), size=(0.3, 0.2, 0.4)))
        scene.add_entity(gs.morphs.Sphere(pos=(0.5, 0.5, 0.2), radius=0.2, fixed=True))
        cam = scene.add_camera(res=(W, H), pos=(2, 1, 1.5), lookat=(0, 0, 0.3), fov=45)
        scene.build(n_envs=n_envs)
        return scene, box, cam

    scene, box, cam = make(3)
    box.set_pos(torch.tensor(box_pos, dtype=gs.tc_float))
    cam.set_pose(pos=torch.tensor(cam_pos))
    batched = cam.render(rgb=True, depth=True, segmentation=True, normal=True)
    assert batched[0].shape == (3, H, W, 3) and batched[1].shape == (3, H, W)
    one_scene, one_box, one_cam = make(0)
    for b in range(3):
        one_box.set_pos(torch.tensor(box_pos[b], dtype=gs.tc_float))
        one_cam.set_pose(pos=cam_pos[b])
        single = one_cam.render(rgb=True, depth=True, segmentation=True, normal=True)
        for name, x, y in zip(("rgb", "depth", "seg", "normal"), batched, single):
            assert torch.equal(x[b], y), f"environment {b}: {name} differs"
    assert not torch.equal(batched[0][0], batched[0][1])  # the environments do differ


def test_rigid_convex_mesh_renders_where_its_triangles_are():
    """The rigid plugin's pebble (a convex icosahedron), scaled 10x: its silhouette and depth match a ray-triangle
    test against the OBJ file's own triangles."""
    from genesis_rigid import assets

    path = assets.path("pebble.obj")
    scale, centre = 10.0, np.array([0.0, 0.0, 0.5])
    scene = gs.Scene()
    scene.add_entity(gs.morphs.Sphere(pos=(0.0, 1.2, 0.3), radius=0.3, fixed=True))
    pebble = scene.add_entity(gs.morphs.Mesh(file=path, scale=scale, pos=tuple(centre), fixed=True))
    pose = dict(pos=(1.5, -1.2, 1.5), lookat=(0, 0, 0.5), up=(0, 0, 1), fov=40)
    cam = scene.add_camera(res=(W, H), **pose)
    scene.build()
    _, depth, seg, _ = cam.render(rgb=False, depth=True, segmentation=True)
    seg = entity_ids(scene, seg)
    verts, faces = [], []
    for line in open(path):
        if line.startswith("v "):
            verts.append([float(x) for x in line.split()[1:4]])
        elif line.startswith("f "):
            faces.append([int(x.split("/")[0]) - 1 for x in line.split()[1:4]])
    tri = np.asarray(verts)[np.asarray(faces)] * scale + centre  # [F, 3, 3]
    rays, fwd = pixel_rays(pose["pos"], pose["lookat"], pose["up"], pose["fov"])
    # Moller-Trumbore over every triangle, the nearest hit per pixel
    o = np.asarray(pose["pos"], dtype=np.float64)
    e1, e2 = tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0]
    pvec = np.cross(rays[:, :, None, :], e2)  # [H, W, F, 3]
    det = np.einsum("fk,hwfk->hwf", e1, pvec)
    tvec = o - tri[:, 0]
    u = np.einsum("fk,hwfk->hwf", tvec, pvec) / det
    qvec = np.cross(tvec, e1)
    v = np.einsum("hwk,fk->hwf", rays, qvec) / det
    t = np.einsum("fk,fk->f", e2, qvec)[None, None] / det
    inside = (u >= 0) & (v >= 0) & (u + v <= 1) & (t > 0)
    margin = np.minimum(np.minimum(u, v), 1 - u - v)  # how far inside its triangle the hit is
    t_hit = np.where(inside, t, np.inf).min(axis=-1)
    ref = t_hit * (rays @ fwd)
    # pixels whose ray crosses the silhouette edge closely are left out
    best = np.take_along_axis(margin, np.where(inside, t, np.inf).argmin(axis=-1)[..., None], -1)[..., 0]
    edge = np.isfinite(t_hit) & (best < 2e-3)
    hit = np.isfinite(ref)
    s = seg.numpy()
    assert hit.sum() > 50
    assert (s[hit & ~edge] == pebble.idx).all()
    d = depth.numpy().astype(np.float64)
    np.testing.assert_allclose(d[hit & ~edge], ref[hit & ~edge], atol=1e-3)  # a hull stored in float32
    # outside the triangles the pebble shows nowhere, except on pixels whose ray grazes its outline
    stray = (s == pebble.idx) & ~hit
    assert stray.sum() <= 3, np.argwhere(stray)


def test_bad_camera_arguments_are_refused():
    scene = gs.Scene()
    scene.add_entity(gs.morphs.Sphere(pos=(0, 0, 0.5), radius=0.2, fixed=True))
    with pytest.raises(OptionError, match="res"):
        scene.add_camera(res=(0, 48))
    with pytest.raises(OptionError, match="res"):
        scene.add_camera(res=(64,))
    with pytest.raises(OptionError, match="fov"):
        scene.add_camera(res=(W, H), fov=180)
    with pytest.raises(OptionError, match="fov"):
        scene.add_camera(res=(W, H), fov=0)
    with pytest.raises(OptionError, match="pos and lookat coincide"):
        scene.add_camera(res=(W, H), pos=(1, 1, 1), lookat=(1, 1, 1))
    with pytest.raises(OptionError, match="up=.* is zero"):
        scene.add_camera(res=(W, H), pos=(0, 0, 3), lookat=(0, 0, 0), up=(0, 0, 0))
    # up parallel to the view direction is Genesis World's camera looking straight down: taken (test_api_tail)
    scene.add_camera(res=(W, H), pos=(0, 0, 3), lookat=(0, 0, 0), up=(0, 0, 1))
    with pytest.raises(OptionError, match="GUI"):
        scene.add_camera(res=(W, H), GUI="window")
    assert scene.add_camera(res=(W, H), GUI=True).GUI  # shown in the viewer's panel when there is one
    with pytest.raises(OptionError, match="fvo"):
        scene.add_camera(res=(W, H), fvo=40)
    scene.add_camera(res=(W, H), spp=64, near=0.05, far=10.0, denoise=False)  # Genesis World's, without effect
    cam = scene.add_camera(res=(W, H), pos=(2, 0, 1), lookat=(0, 0, 0.5))
    with pytest.raises(gs.errors.SceneError, match="build"):
        cam.render()
    scene.build()
    with pytest.raises(OptionError, match="coincide"):
        cam.set_pose(pos=(0, 0, 0.5), lookat=(0, 0, 0.5))
    with pytest.raises(OptionError, match="shape"):
        cam.set_pose(pos=[(1, 0, 0), (2, 0, 0)])  # per-environment poses on a scene without environments
    rgb, *_ = cam.render()  # the refused set_pose changed nothing
    assert rgb.shape == (H, W, 3)


def test_recording_writes_a_gif_with_a_frame_per_step_at_its_rate(tmp_path):
    """Frames come from the steps, as in Genesis World 1.4.5: at fps = 1 / dt one a step (cam.render() adds none),
    each the ball where it was moved before that step (no gravity: it stays), the camera following it."""
    import imageio.v2 as imageio

    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=0.01, gravity=(0, 0, 0)))
    ball = scene.add_entity(gs.morphs.Sphere(pos=(0, 0, 1.0), radius=0.2))
    scene.add_entity(gs.morphs.Plane())
    cam = scene.add_camera(res=(W, H), pos=(3, 0, 1), lookat=(0, 0, 0.5), fov=40)
    scene.build()
    cam.follow_entity(ball, fixed_axis=(None, None, 1.0))
    cam.start_recording(fps=100)
    for k in range(4):
        ball.set_pos((0.1 * k, 0.2 * k, 1.0 - 0.1 * k))
        scene.step()
        cam.render()
    path = tmp_path / "fall.gif"
    assert cam.stop_recording(str(path), fps=20) == [str(path)]
    frames = imageio.mimread(str(path))
    assert len(frames) == 4 and frames[0].shape[:2] == (H, W)
    assert not np.array_equal(frames[0], frames[3])
    assert float(cam.pos[2]) == 1.0  # the fixed axis held while following
    np.testing.assert_allclose(cam.pos[:2].numpy(), [3.3, 0.6], atol=1e-6)  # the offset kept in x and y
    np.testing.assert_allclose(cam.lookat.numpy(), [0.3, 0.6, 0.7], atol=1e-6)  # looking at the ball


def test_particles_through_the_grid_match_a_brute_force_ray_cast():
    """An SPH liquid's particles, moved to a random cloud that differs per environment, drawn as spheres of radius
    particle_size / 2: depth and segmentation equal a brute-force nearest-sphere test in float64 over every
    particle (the renderer finds them through a uniform grid)."""
    size = 0.04
    scene = gs.Scene(sph_options=gs.options.SPHOptions(particle_size=size, lower_bound=(-1, -1, 0),
                                                       upper_bound=(1, 1, 1)))
    liquid = scene.add_entity(gs.morphs.Box(pos=(0, 0, 0.5), size=(0.3, 0.3, 0.3)), material=gs.materials.SPH.Liquid())
    pose = dict(pos=(1.2, 0.8, 1.0), lookat=(0, 0, 0.5), up=(0, 0, 1), fov=40)
    cam = scene.add_camera(res=(W, H), **pose)
    scene.build(n_envs=2)
    n = liquid.n_particles
    rng = np.random.default_rng(7)
    clouds = rng.uniform([-0.3, -0.3, 0.2], [0.3, 0.3, 0.8], size=(2, n, 3))
    liquid.set_particles_pos(torch.tensor(clouds, dtype=gs.tc_float))
    _, depth, seg, _ = cam.render(rgb=False, depth=True, segmentation=True)
    seg = entity_ids(scene, seg)
    rays, fwd = pixel_rays(pose["pos"], pose["lookat"], pose["up"], pose["fov"])
    o = np.asarray(pose["pos"], dtype=np.float64)
    r = size / 2
    for b in range(2):
        centres = np.asarray(torch.as_tensor(liquid.get_particles_pos())[b], dtype=np.float64)  # float32-rounded
        oc = o - centres  # [N, 3]
        bb = rays @ oc.T  # [H, W, N]
        disc = bb * bb - ((oc * oc).sum(-1) - r * r)
        t = np.where(disc >= 0, -bb - np.sqrt(np.maximum(disc, 0)), np.inf)
        ref = t.min(-1) * (rays @ fwd)
        # rays within 1e-4 m of grazing a sphere are left out of the hit/miss comparison
        clear = (np.abs(disc) > 2 * r * 1e-4).all(-1)
        got = depth[b].numpy().astype(np.float64)
        assert np.isfinite(ref).sum() > 300
        assert np.array_equal(np.isfinite(got)[clear], np.isfinite(ref)[clear])
        both = np.isfinite(got) & np.isfinite(ref)
        np.testing.assert_allclose(got[both], ref[both], atol=DEPTH_TOL)
        assert (seg[b].numpy()[np.isfinite(got)] == liquid.idx).all()


def test_a_solver_that_gives_its_own_render_view_is_drawn_from_it():
    """`solver.render_view(f)` replaces the default drawn from collider_view: the solver's sphere is not drawn,
    the view's box (with its own colour) is."""
    from genesis_core.render import RenderView

    scene = gs.Scene()
    ball = scene.add_entity(gs.morphs.Sphere(pos=(0, 0, 0.5), radius=0.3, fixed=True))
    cam = scene.add_camera(res=(W, H), pos=(3, 0, 0.5), lookat=(0, 0, 0.5), fov=30)
    scene.build()
    solver = scene.rigid_solver
    view = RenderView(geom_type=torch.tensor([gs.coupler.GEOM_BOX], dtype=torch.int32),
                      geom_size=torch.tensor([[0.1, 0.1, 0.1]]), geom_pos=torch.tensor([[[0.0, 0.0, 0.5]]]),
                      geom_quat=torch.tensor([[[1.0, 0.0, 0.0, 0.0]]]),
                      geom_entity=torch.tensor([ball.idx], dtype=torch.int32),
                      geom_color=torch.tensor([[0.0, 1.0, 0.0]]))
    solver.render_view = lambda f: view  # what a third-party solver defines as a method
    rgb, depth, seg, normal = cam.render(depth=True, segmentation=True, normal=True)
    seg = entity_ids(scene, seg)
    centre = (H // 2, W // 2)
    assert seg[centre] == ball.idx and abs(float(depth[centre]) - 2.9) < DEPTH_TOL  # the box's face at x = 0.1
    assert rgb[centre][0] == 0 and rgb[centre][2] == 0 and rgb[centre][1] > 0
    assert torch.allclose(normal[centre], torch.tensor([1.0, 0.5, 0.5]))
    # the sphere (radius 0.3) would cover this pixel, 0.2 m off the axis; the box (0.1) does not
    rays, _ = pixel_rays((3, 0, 0.5), (0, 0, 0.5), (0, 0, 1), 30)
    col = int(np.argmin(np.abs(rays[H // 2, :, 1] / -rays[H // 2, :, 0] * 3 - 0.2)))
    assert seg[H // 2, col] == -1 and seg[H // 2, col - 2 if col > W // 2 else col + 2] == -1
    solver.render_view = lambda f: "not a view"
    with pytest.raises(gs.errors.SceneError, match="RenderView"):
        cam.render()
    del solver.render_view


def test_a_non_finite_environment_hides_its_geometry_there_only():
    """One environment's box pose and particle positions are NaN (as after a blow-up): nothing of it is drawn
    in that environment, the other environment still shows both; a view of the wrong shape is refused."""
    from genesis_core.render import RenderView

    scene = gs.Scene()
    scene.add_entity(gs.morphs.Sphere(pos=(0, 0, 0.5), radius=0.3, fixed=True))
    cam = scene.add_camera(res=(W, H), pos=(3, 0, 0.5), lookat=(0, 0, 0.5), fov=30)
    scene.build(n_envs=2)
    good = cam.render(rgb=True, depth=True, segmentation=True)
    pos = torch.tensor([[[0.0, 0.0, 0.5]], [[float("nan"), 0.0, 0.5]]])
    view = RenderView(geom_type=torch.tensor([gs.coupler.GEOM_BOX], dtype=torch.int32),
                      geom_size=torch.tensor([[0.2, 0.2, 0.2]]), geom_pos=pos,
                      geom_quat=torch.tensor([[1.0, 0, 0, 0]]).expand(2, 1, 4),
                      geom_entity=torch.tensor([0], dtype=torch.int32),
                      particle_pos=torch.tensor([[[0.5, 0.0, 0.5]], [[0.5, float("inf"), 0.5]]]),
                      particle_radius=torch.tensor([0.05]), particle_entity=torch.tensor([0], dtype=torch.int32))
    scene.rigid_solver.render_view = lambda f: view
    try:
        rgb, depth, seg, _ = cam.render(rgb=True, depth=True, segmentation=True)
        seg = entity_ids(scene, seg)
        assert (seg[0] == 0).sum() > 50 and (seg[1] == -1).all() and torch.isinf(depth[1]).all()
        assert (rgb[1] == 0).all()
        assert 2.45 < float(depth[0, H // 2, W // 2]) < 2.46  # env 0: the particle (r 0.05) before the box (2.8)
        view.geom_pos = pos[:1]
        with pytest.raises(gs.errors.SceneError, match="geom_pos has shape"):
            cam.render()
    finally:
        del scene.rigid_solver.render_view
    assert all(torch.equal(a, b) for a, b in zip(cam.render(rgb=True, depth=True, segmentation=True)[:3], good[:3]))


def test_many_primitives_through_the_bvh_match_a_brute_force_ray_cast():
    """60 spheres, boxes and capsules scattered differently in two environments (a view given by the solver):
    the BVH's nearest hits equal a brute-force nearest-sphere test over the spheres where only spheres are hit,
    and moving them after the first render (the tree's boxes refitted, its topology kept) still matches."""
    from genesis_core.render import RenderView

    scene = gs.Scene()
    scene.add_entity(gs.morphs.Sphere(pos=(0, 0, 0.5), radius=0.1, fixed=True))
    pose = dict(pos=(3.0, 1.0, 1.5), lookat=(0, 0, 0.5), up=(0, 0, 1), fov=40)
    cam = scene.add_camera(res=(W, H), **pose)
    scene.build(n_envs=2)
    rng = np.random.default_rng(3)
    G = 60
    radius = rng.uniform(0.05, 0.15, size=G)
    view = RenderView(geom_type=torch.full((G,), gs.coupler.GEOM_SPHERE, dtype=torch.int32),
                      geom_size=torch.tensor(np.stack([radius, radius, radius], 1), dtype=torch.float32),
                      geom_quat=torch.tensor([1.0, 0, 0, 0]).expand(2, G, 4),
                      geom_entity=torch.arange(G, dtype=torch.int32), geom_pos=None)
    scene.rigid_solver.render_view = lambda f: view
    rays, fwd = pixel_rays(pose["pos"], pose["lookat"], pose["up"], pose["fov"])
    o = np.asarray(pose["pos"], dtype=np.float64)
    try:
        for trial in range(2):
            centres = rng.uniform([-0.6, -0.6, 0.0], [0.6, 0.6, 1.0], size=(2, G, 3)).astype(np.float32)
            view.geom_pos = torch.tensor(centres)
            _, depth, seg, _ = cam.render(rgb=False, depth=True, segmentation=True)
            seg = entity_ids(scene, seg)
            for b in range(2):
                oc = o - centres[b].astype(np.float64)
                bb = rays @ oc.T
                disc = bb * bb - ((oc * oc).sum(-1) - radius ** 2)
                t = np.where(disc >= 0, -bb - np.sqrt(np.maximum(disc, 0)), np.inf)
                ref = t.min(-1) * (rays @ fwd)
                clear = (np.abs(disc) > 1e-4).all(-1)
                got = depth[b].numpy().astype(np.float64)
                assert np.isfinite(ref).sum() > 300
                assert np.array_equal(np.isfinite(got)[clear], np.isfinite(ref)[clear])
                both = np.isfinite(got) & np.isfinite(ref) & clear
                np.testing.assert_allclose(got[both], ref[both], atol=DEPTH_TOL)
                nearest = np.where(np.isfinite(ref), t.argmin(-1), -1)
                assert (seg[b].numpy()[both] == nearest[both]).mean() > 0.99  # ids: all but exact ties
    finally:
        del scene.rigid_solver.render_view


def test_a_convex_piece_of_many_planes_is_bounded_by_its_farthest_vertex():
    """A polytope of 80 planes tangent to a sphere of radius 0.3 (more planes than a brute-force search over plane
    triples would take each render): its bounding radius is its farthest vertex's distance, found here by
    intersecting every triple of planes in float64; a piece open on one side has no bound (-1, never culled)."""
    from genesis_core.render.renderer import convex_bound

    rng = np.random.default_rng(11)
    n = rng.normal(size=(80, 3))
    n /= np.linalg.norm(n, axis=1, keepdims=True)
    planes = np.concatenate([n, np.full((80, 1), 0.3)], axis=1)
    a, b, c = np.array(list(itertools.combinations(range(80), 3))).T
    A = np.stack([n[a], n[b], n[c]], axis=1)
    ok = np.abs(np.linalg.det(A)) > 1e-9
    p = np.linalg.solve(A[ok], np.full((ok.sum(), 3, 1), 0.3))[..., 0]
    inside = (p @ n.T <= 0.3 + 1e-9).all(-1)
    farthest = np.linalg.norm(p[inside], axis=1).max()
    bound = convex_bound(planes.astype(np.float32))
    assert farthest >= 0.3 and farthest <= bound <= farthest * (1 + 1e-3)
    upper = planes[n[:, 2] > 0.1]  # every normal points up: the piece is open downwards
    assert convex_bound(upper.astype(np.float32)) == -1.0


def test_set_pose_per_environment_env_idx_and_transform_follow_genesis_world():
    """set_pose(envs_idx=...) takes one pose or one per listed environment and moves those only; a camera made
    with env_idx shows that environment alone (no batch dimension), bitwise the batched camera's image of it; a
    pose given as cam.transform renders the same image; an env_idx outside the scene is refused."""
    scene = gs.Scene()
    scene.add_entity(gs.morphs.Plane())
    scene.add_entity(gs.morphs.Box(pos=(0, 0, 0.3), size=(0.4, 0.3, 0.6), fixed=True))
    pose = dict(pos=(2.0, 1.0, 1.5), lookat=(0, 0, 0.3), fov=45)
    cam = scene.add_camera(res=(W, H), **pose)
    solo = scene.add_camera(res=(W, H), env_idx=2, **pose)
    wrong = scene.add_camera(res=(W, H), env_idx=3, **pose)
    scene.build(n_envs=3)
    cam.set_pose(pos=(2.5, -1.0, 1.0), envs_idx=[1])
    cam.set_pose(pos=[(1.5, 2.0, 2.0), (1.0, 1.0, 2.5)], envs_idx=[0, 2])
    np.testing.assert_allclose(cam.pos.numpy(), [(1.5, 2.0, 2.0), (2.5, -1.0, 1.0), (1.0, 1.0, 2.5)])
    with pytest.raises(OptionError, match="shape"):
        cam.set_pose(pos=[(1, 0, 1)] * 3, envs_idx=[0, 1])
    solo.set_pose(pos=(1.0, 1.0, 2.5))
    rgb, depth, *_ = cam.render(rgb=True, depth=True)
    rgb2, depth2, *_ = solo.render(rgb=True, depth=True)
    assert rgb2.shape == (H, W, 3) and depth2.shape == (H, W) and solo.pos.shape == (3,)
    assert torch.equal(rgb2, rgb[2]) and torch.equal(depth2, depth[2])
    with pytest.raises(OptionError, match="envs_idx"):
        solo.set_pose(pos=(1, 1, 2), envs_idx=[0])
    with pytest.raises(OptionError, match="env_idx=3"):
        wrong.render()
    T = cam.transform
    assert T.shape == (3, 4, 4)
    cam.set_pose(transform=T)
    again = cam.render(rgb=True, depth=True)
    assert torch.equal(again[0], rgb) and torch.allclose(again[1], depth, atol=DEPTH_TOL, equal_nan=True)


def test_an_attached_camera_moves_with_its_link():
    """A camera attached to a box's link with the offset of its current pose: moving the box by (0.2, 0, 0.5) moves
    the camera by as much at the next render, and the image does not change (camera and box moved together)."""
    scene = gs.Scene()
    box = scene.add_entity(gs.morphs.Box(pos=(0, 0, 0.3), size=(0.4, 0.3, 0.6)))
    cam = scene.add_camera(res=(W, H), pos=(2.0, 1.0, 1.5), lookat=(0, 0, 0.3), fov=45)
    scene.build()
    before = cam.render(depth=True, segmentation=True)
    link_T = np.eye(4)
    link_T[2, 3] = 0.3  # the box's link at (0, 0, 0.3), unrotated
    offset = np.linalg.inv(link_T)
    cam.attach(box.get_link(box.links[0].name), offset @ cam.transform.numpy().astype(np.float64))
    box.set_pos((0.2, 0.0, 0.8))
    after = cam.render(depth=True, segmentation=True)
    np.testing.assert_allclose(cam.pos.numpy(), [2.2, 1.0, 2.0], atol=1e-5)
    assert torch.equal(after[2], before[2])
    torch.testing.assert_close(after[1], before[1], atol=1e-4, rtol=0)
    with pytest.raises(OptionError, match="attached"):
        cam.follow_entity(box)
    cam.detach()
    box.set_pos((0.0, 0.0, 0.3))
    assert float(cam.render()[0].float().sum()) > 0 and float(cam.pos[2]) == pytest.approx(2.0, abs=1e-5)


def test_two_scenes_in_one_process_keep_their_own_images():
    """Two scenes built one after the other, their cameras rendering in turn: each image equals the one its camera
    gave before the other scene existed or rendered."""
    def make(radius):
        scene = gs.Scene()
        scene.add_entity(gs.morphs.Sphere(pos=(0, 0, 0.5), radius=radius, fixed=True))
        cam = scene.add_camera(res=(W, H), pos=(3, 0, 0.5), lookat=(0, 0, 0.5), fov=30)
        scene.build()
        return cam

    cam_a = make(0.3)
    a = cam_a.render(depth=True)
    cam_b = make(0.5)
    b = cam_b.render(depth=True)
    assert not torch.equal(a[1], b[1])
    for _ in range(2):
        assert torch.equal(cam_a.render(depth=True)[1], a[1]) and torch.equal(cam_b.render(depth=True)[1], b[1])


def test_recording_to_mp4_named_at_start_and_an_odd_resolution(tmp_path):
    """Genesis World 1.4.5's form, start_recording(save_to_filename, fps) then stop_recording(): an MP4 with a
    frame every round(1 / (fps dt)) = 10 steps; an odd width and height (which H.264 in yuv420p cannot hold) are
    padded by one row and column, not written as an unreadable file. A surface colour that is not RGB(A) is
    refused at render."""
    import imageio.v2 as imageio

    scene = gs.Scene()
    scene.add_entity(gs.morphs.Sphere(pos=(0, 0, 0.5), radius=0.3, fixed=True))
    cam = scene.add_camera(res=(W + 1, H + 1), pos=(3, 0, 0.5), lookat=(0, 0, 0.5), fov=30)
    scene.build()
    path = str(tmp_path / "ball.mp4")
    cam.start_recording(save_to_filename=path, fps=10)
    for _ in range(35):
        scene.step()
    assert cam.stop_recording() == [path]
    frames = imageio.mimread(path)
    assert len(frames) == 3 and frames[0].shape == (H + 2, W + 2, 3)
    with pytest.raises(OptionError, match="must end in"):
        cam.start_recording("ball.avi")
    bad = gs.Scene()
    bad.add_entity(gs.morphs.Sphere(pos=(0, 0, 0.5), radius=0.3, fixed=True), surface=gs.surfaces.Default(color="red"))
    cam = bad.add_camera(res=(W, H), pos=(3, 0, 0.5), lookat=(0, 0, 0.5))
    bad.build()
    with pytest.raises(OptionError, match="color='red'"):
        cam.render()


def test_a_render_too_large_for_32_bit_indices_is_refused():
    """700 environments at 1024 x 1024 RGB are 2.2e9 values, past what the kernel's 32-bit indices address (it
    would write out of bounds): refused with the figures, before anything is allocated or launched."""
    scene = gs.Scene()
    scene.add_entity(gs.morphs.Sphere(pos=(0, 0, 0.5), radius=0.2, fixed=True))
    cam = scene.add_camera(res=(1024, 1024), pos=(3, 0, 0.5), lookat=(0, 0, 0.5))
    scene.build(n_envs=700)
    with pytest.raises(gs.errors.SceneError, match="2\\^31"):
        cam.render()


def test_the_floor_of_an_mjcf_file_is_that_file_s_entity(tmp_path):
    """A plane inside an MJCF file has no Plane entity to go to: the floor's pixels carry the MJCF entity's index,
    not the background's -1."""
    path = tmp_path / "floor.xml"
    path.write_text('<mujoco><worldbody><geom name="floor" type="plane" size="2 2 0.1"/>'
                    '<body pos="0 0 0.3"><geom type="box" size="0.1 0.1 0.1"/></body></worldbody></mujoco>')
    scene = gs.Scene()
    scene.add_entity(gs.morphs.Sphere(pos=(0, 1.0, 0.3), radius=0.2, fixed=True))
    model = scene.add_entity(gs.morphs.MJCF(file=str(path)))
    cam = scene.add_camera(res=(W, H), pos=(2.5, 0.0, 1.5), lookat=(0, 0, 0), fov=40)
    scene.build()
    _, _, seg, _ = cam.render(rgb=False, segmentation=True)
    seg = entity_ids(scene, seg)
    assert (seg[-1] == model.idx).all()  # the bottom row looks down at the floor, in front of everything


REFERENCE = os.path.join(os.path.dirname(__file__), "data", "render_known_scene.png")


def known_scene_rgb(pos=(2.2, -1.6, 1.5)):
    """A plane, a turned box, a sphere and a tilted capsule in surface colours, 96 x 72, shadows on."""
    scene = gs.Scene()
    scene.add_entity(gs.morphs.Plane(), surface=gs.surfaces.Default(color=(0.8, 0.8, 0.75)))
    scene.add_entity(gs.morphs.Box(pos=(0.0, 0.0, 0.2), size=(0.4, 0.3, 0.4), euler=(0, 0, 30), fixed=True),
                     surface=gs.surfaces.Default(color=(0.9, 0.2, 0.1)))
    scene.add_entity(gs.morphs.Sphere(pos=(0.5, 0.4, 0.3), radius=0.3, fixed=True),
                     surface=gs.surfaces.Default(color=(0.1, 0.5, 0.9)))
    scene.add_entity(gs.morphs.Capsule(pos=(-0.4, 0.5, 0.5), radius=0.1, height=0.4, euler=(60, 0, 0), fixed=True),
                     surface=gs.surfaces.Default(color=(0.2, 0.8, 0.2)))
    cam = scene.add_camera(res=(96, 72), pos=pos, lookat=(0.0, 0.1, 0.3), fov=40)
    scene.build()
    return cam.render()[0].cpu().numpy().astype(int)


def test_a_known_scene_matches_its_stored_reference_image():
    """The RGB image of a fixed scene against tests/data/render_known_scene.png (written by this engine): under
    0.5% of the pixels may differ by more than 16 of 255 in a channel (silhouette pixels whose rounding differs
    on another CPU) and the mean difference stays under 0.5. The same scene seen from 5 cm aside fails both
    (0.65% and 1.05, measured), so the comparison tells a changed image."""
    import imageio.v2 as imageio

    ref = imageio.imread(REFERENCE).astype(int)

    def off(img):
        d = np.abs(img - ref).max(-1)
        return float((d > 16).mean()), float(d.mean())

    frac, mean = off(known_scene_rgb())
    assert frac < 5e-3 and mean < 0.5, (frac, mean)
    frac, mean = off(known_scene_rgb(pos=(2.25, -1.6, 1.5)))
    assert frac > 5e-3 and mean > 0.5, (frac, mean)


def test_genesis_world_renderer_choices_are_accepted_and_checked():
    """gs.Scene(renderer=gs.renderers.Rasterizer()) (Genesis World's visualization tutorial) builds; the cameras
    ray-cast whichever renderer is named. Anything else is refused naming the keyword."""
    choices = (gs.renderers.Rasterizer(), gs.renderers.RayTracer(), gs.renderers.BatchRenderer(use_rasterizer=True))
    for renderer in choices:
        scene = gs.Scene(renderer=renderer)
        scene.add_entity(gs.morphs.Sphere(pos=(0, 0, 0.5), radius=0.2, fixed=True))
        scene.build()
    with pytest.raises(OptionError, match="renderer"):
        gs.Scene(renderer="rasterizer")


@pytest.mark.parametrize("level", ["entity", "link", "geom"])
def test_segmentation_indices_follow_genesis_world_s_levels(level, tmp_path):
    """Genesis World's segmentation: 0 is the background, scene.segmentation_idx_dict names the key of every other
    index: the entity at "entity", (entity, link) at "link" (its default), (entity, link, geom) at "geom". A
    two-link arm seen side on (two boxes on the upper link, one on the lower): each link's pixels carry its own key
    at "link", each box its own at "geom", one key for all at "entity"; the floor plane is its entity's."""
    path = tmp_path / "arm.xml"
    path.write_text(
        '<mujoco><worldbody><body name="upper" pos="0 0 2"><joint type="hinge" axis="0 1 0"/>'
        '<geom type="box" pos="0 0 -0.25" size="0.12 0.12 0.25"/><geom type="box" pos="0 0 -0.75" size="0.12 0.12 0.25"/>'
        '<body name="lower" pos="0 0 -1"><joint type="hinge" axis="0 1 0"/>'
        '<geom type="box" pos="0 0 -0.4" size="0.12 0.12 0.4"/></body></body></worldbody></mujoco>')
    scene = gs.Scene(vis_options=gs.options.VisOptions(segmentation_level=level))
    plane = scene.add_entity(gs.morphs.Plane())
    pendulum = scene.add_entity(gs.morphs.MJCF(file=str(path)))
    cam = scene.add_camera(res=(W, H), pos=(0.0, -4.0, 1.0), lookat=(0.0, 0.0, 1.0), up=(0, 0, 1), fov=60)
    scene.build()
    _, _, seg, _ = cam.render(rgb=False, segmentation=True)
    table = scene.segmentation_idx_dict
    assert table[0] == -1 and sorted(table) == list(range(len(table)))
    shown = {table[int(i)] for i in torch.unique(seg)}
    ent_of = lambda key: key if isinstance(key, int) else key[0]  # noqa: E731
    mine = {k for k in shown if k != -1 and ent_of(k) == pendulum.idx}
    links = {lk.idx for lk in pendulum.links}
    if level == "entity":
        assert mine == {pendulum.idx} and plane.idx in shown
    else:
        assert all(len(k) == (2 if level == "link" else 3) for k in mine)
        assert {k[1] for k in mine} == links  # both links
        assert len(mine) == (2 if level == "link" else 3)  # at "geom", the upper link's two boxes apart
    assert -1 in shown and (seg == 0).any()
    if level == "link":  # Genesis World's default
        assert gs.options.VisOptions().segmentation_level == "link"
