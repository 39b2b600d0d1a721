"""The viewer (`gs.Scene(show_viewer=True)`): options, what it sends, and a real headless browser's picture.

The scene-graph tests read what the viewer holds on the server side (the poses and points every browser is sent)
and compare it to the scene's own state. The browser test loads the page in Chromium (Debian's package; `.ci/run`
installs it) and screenshots it; it skips with the reason when no Chromium is installed.
"""

import gc
import json
import logging
import os
import shutil
import subprocess
import threading
import time
import urllib.request

import numpy as np
import pytest
import torch

import genesis_core as gs
from genesis_core.errors import OptionError
from genesis_core.render.viewer import convex_mesh, env_offsets

QUIET = dict(port=0, realtime_factor=None)  # a free port, steps as fast as they compute
GREY = gs.surfaces.Default(color=(0.6, 0.6, 0.6))


def _box_scene(n_envs=0, vis=None, spacing=(0.0, 0.0), z=0.3, **viewer):
    scene = gs.Scene(show_viewer=True, viewer_options=gs.options.ViewerOptions(**{**QUIET, **viewer}),
                     vis_options=vis)
    scene.add_entity(gs.morphs.Plane(), surface=GREY)
    box = scene.add_entity(gs.morphs.Box(pos=(0.0, 0.0, z), size=(0.4, 0.4, 0.4)),
                           surface=gs.surfaces.Default(color=(1.0, 0.0, 0.0)))
    scene.build(n_envs=n_envs, env_spacing=spacing)
    return scene, box


def _geom_nodes(scene):
    return [h for kind, h, _, _ in scene.viewer._nodes if kind == "geom"]


def _serves(url):
    try:
        with urllib.request.urlopen(url, timeout=5) as page:
            return page.status == 200 and b"<html" in page.read().lower()
    except OSError:
        return False


# -- options ---------------------------------------------------------------------------------------------------


def test_viewer_and_vis_options_are_validated_and_keep_genesis_names():
    o = gs.options.ViewerOptions(max_FPS=30, camera_pos=(1, 2, 3), res=[640, 480])
    assert o.refresh_rate == 30 and o.camera_pos == (1.0, 2.0, 3.0) and o.res == (640, 480)
    v = gs.options.VisOptions(n_rendered_envs=3, env_separate_rigid=True, background_color=(0.2, 0.2, 0.2))
    assert v.rendered_envs_idx == (0, 1, 2) and v.split_envs is True
    assert gs.options.VisOptions(rendered_envs_idx=np.array([4, 1])).rendered_envs_idx == (4, 1)
    for bad, name in [(dict(camera_fov=180), "camera_fov"), (dict(res=(640, 0)), "res"), (dict(port=70000), "port"),
                      (dict(refresh_rate=0), "refresh_rate"), (dict(camera_pos=(0, 0, 0.5)), "camera_lookat"),
                      (dict(realtime_factor=-1.0), "realtime_factor"), (dict(run_in_thread="yes"), "run_in_thread"),
                      (dict(max_FPS=30, refresh_rate=30), "max_FPS")]:
        with pytest.raises(OptionError, match=name):
            gs.options.ViewerOptions(**bad)
    for bad, name in [(dict(background_color=(1.5, 0, 0)), "background_color"), (dict(show_world_frame=1), "show_world"),
                      (dict(rendered_envs_idx=[0, 0]), "rendered_envs_idx"), (dict(rendered_envs_idx=[-1]), "rendered"),
                      (dict(segmentation_level="pixel"), "segmentation_level"), (dict(particle_size_scale=0), "particle"),
                      (dict(lights=[{"type": "spot", "color": (1, 1, 1), "intensity": 1}]), "lights"),
                      (dict(lights=[{"type": "directional", "dir": (0, 0, 0), "color": (1, 1, 1), "intensity": 1}]),
                       "lights"),
                      (dict(n_rendered_envs=2, rendered_envs_idx=[0]), "n_rendered_envs")]:
        with pytest.raises(OptionError, match=name):
            gs.options.VisOptions(**bad)
    with pytest.raises(OptionError, match="show_viewer"):
        gs.Scene(show_viewer="yes")
    with pytest.raises(OptionError, match="vis_options"):
        gs.Scene(vis_options=gs.options.ViewerOptions())


def test_env_layout_is_genesis_worlds_and_build_checks_it():
    off = env_offsets(4, (2.0, 3.0), None, False)  # rows of ceil(sqrt(4)) = 2
    assert np.array_equal(off, [[0, 0, 0], [0, 3, 0], [2, 0, 0], [2, 3, 0]])
    assert np.array_equal(env_offsets(4, (2.0, 3.0), None, True)[0], [-1.0, -1.5, 0])
    scene = gs.Scene()
    scene.add_entity(gs.morphs.Box(pos=(0, 0, 0.5), size=(0.2, 0.2, 0.2)))
    with pytest.raises(OptionError, match="env_spacing"):
        scene.build(n_envs=2, env_spacing=(1.0,))
    with pytest.raises(OptionError, match="n_envs_per_row"):
        scene.build(n_envs=2, n_envs_per_row=0)
    assert not scene.is_built


def test_a_convex_piece_from_its_planes_is_its_closed_outward_mesh():
    """The unit cube [-1, 1]^3 cut by the plane x + y + z <= 2 (a corner off): 10 vertices, a closed mesh whose
    volume is 8 - 1/6 and whose faces point outwards (the divergence theorem gives a positive volume)."""
    n = np.array([[1, 0, 0], [-1, 0, 0], [0, 1, 0], [0, -1, 0], [0, 0, 1], [0, 0, -1], [1, 1, 1]], float)
    d = np.array([1, 1, 1, 1, 1, 1, 2.0])
    planes = np.concatenate([n / np.linalg.norm(n, axis=1, keepdims=True),
                             (d / np.linalg.norm(n, axis=1))[:, None]], axis=1)
    verts, faces = convex_mesh(planes)
    assert len(verts) == 10
    tri = verts[faces].astype(np.float64)
    volume = np.einsum("ij,ij->i", tri[:, 0], np.cross(tri[:, 1], tri[:, 2])).sum() / 6.0
    assert volume == pytest.approx(8 - 1 / 6, rel=1e-6)
    edges = np.sort(np.concatenate([faces[:, [0, 1]], faces[:, [1, 2]], faces[:, [2, 0]]]), axis=1)
    _, count = np.unique(edges, axis=0, return_counts=True)
    assert (count == 2).all()  # closed: every edge between exactly two triangles
    assert convex_mesh(planes[:5]) is None  # open on one side: unbounded


# -- what the viewer sends -------------------------------------------------------------------------------------


def test_the_viewer_follows_the_physics_in_every_shown_environment(capsys):
    """Two environments, side by side (env_spacing): after steps, every instance of the box sits where the physics
    has it plus its environment's offset, env 1 having been moved alone, as of the last step (sent within
    1 / refresh_rate, without another step); its address is printed once."""
    scene, box = _box_scene(n_envs=2, spacing=(2.0, 0.0), z=0.6)
    out = capsys.readouterr().out
    assert out.count("http://127.0.0.1:") == 1 and scene.viewer.url in out
    try:
        box.set_pos(torch.tensor([[0.0, 0.0, 0.6], [0.3, 0.2, 0.8]], dtype=gs.tc_float))
        for _ in range(5):
            scene.step()
        time.sleep(0.3)  # the last step came within 1 / refresh_rate of a send: it is sent by then
        (node,) = _geom_nodes(scene)
        off = env_offsets(2, (2.0, 0.0))
        want = box.get_pos().detach().cpu().numpy() + off
        assert np.allclose(node.batched_positions, want, atol=1e-5)
        assert np.allclose(node.batched_wxyzs, box.get_quat().detach().cpu().numpy(), atol=1e-6)
        assert not np.allclose(want[0] - off[0], want[1] - off[1])
        # a reset is shown at once
        scene.reset()
        assert np.allclose(node.batched_positions, box.get_pos().detach().cpu().numpy() + off, atol=1e-5)
    finally:
        scene.viewer.stop()


def test_rendered_envs_idx_shows_those_environments_only():
    scene, box = _box_scene(n_envs=3, vis=gs.options.VisOptions(rendered_envs_idx=[2]))
    try:
        (node,) = _geom_nodes(scene)
        assert node.batched_positions.shape == (1, 3)
        assert np.allclose(node.batched_positions[0], box.get_pos()[2].numpy() + env_offsets(3)[2], atol=1e-5)
    finally:
        scene.viewer.stop()
    scene = gs.Scene(show_viewer=True, viewer_options=gs.options.ViewerOptions(**QUIET),
                     vis_options=gs.options.VisOptions(rendered_envs_idx=[0, 5]))
    scene.add_entity(gs.morphs.Box(pos=(0, 0, 0.5), size=(0.2, 0.2, 0.2)))
    with pytest.raises(OptionError, match="rendered_envs_idx"):
        scene.build(n_envs=2)


def test_particles_are_sent_as_points_and_the_sph_boundary_as_a_wire_box():
    scene = gs.Scene(show_viewer=True, viewer_options=gs.options.ViewerOptions(**QUIET),
                     vis_options=gs.options.VisOptions(visualize_sph_boundary=True, particle_size_scale=2.0),
                     sph_options=gs.options.SPHOptions(particle_size=0.05, lower_bound=(-0.5, -0.5, 0.0),
                                                       upper_bound=(0.5, 0.5, 1.0)))
    liquid = scene.add_entity(gs.morphs.Box(pos=(0, 0, 0.3), size=(0.2, 0.2, 0.2)), material=gs.materials.SPH.Liquid())
    scene.build(n_envs=2)
    try:
        for _ in range(3):
            scene.step()
        scene.viewer.update(force=True)
        (cloud,) = [h for kind, h, _, _ in scene.viewer._nodes if kind == "particles"]
        pos = liquid.get_particles_pos().detach().cpu().numpy()
        assert cloud.points.shape == (2 * liquid.n_particles, 3)
        assert np.allclose(cloud.points, pos.reshape(-1, 3) + np.repeat(env_offsets(2), liquid.n_particles, 0),
                           atol=1e-5)
        assert cloud.point_size == pytest.approx(2 * 0.05)  # particle_size (twice the radius), scaled by 2
        wire = scene.viewer.server.scene._handle_from_node_name["/boundary/sph"]
        assert wire.points.shape == (2 * 12, 2, 3)
        assert np.allclose(wire.points.reshape(-1, 3).min(0), [-0.5, -0.5, 0.0])
    finally:
        scene.viewer.stop()


def test_show_fps_logs_the_step_rate(caplog, monkeypatch):
    clock = iter(np.arange(0.0, 100.0, 0.3))
    monkeypatch.setattr(time, "perf_counter", lambda: float(next(clock)))
    scene = gs.Scene(show_FPS=True)
    scene.add_entity(gs.morphs.Box(pos=(0, 0, 0.5), size=(0.2, 0.2, 0.2)))
    scene.build()
    with caplog.at_level(logging.INFO, logger="genesis_core"):
        for _ in range(6):
            scene.step()
    rates = [r.getMessage() for r in caplog.records if "steps/s" in r.getMessage()]
    assert rates and rates[0].startswith("Running at 3.3 steps/s")  # a step each 0.3 s of the clock


def test_a_collected_scene_closes_its_viewer():
    """The page is served while the scene lives; once the scene is collected its server is closed."""
    scene = _box_scene()[0]
    url = scene.viewer.url
    assert _serves(url)
    del scene
    gc.collect()
    assert not _serves(url)


# -- a real browser --------------------------------------------------------------------------------------------


def _chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    pytest.skip("no Chromium installed (Debian: apt-get install chromium; .ci/run installs it)")


def _red_pixels(img):
    """Red pixels, outside the page's axes gizmo in the bottom-left corner (its x axis is red)."""
    red = (img[..., 0] > 150) & (img[..., 1] < 90) & (img[..., 2] < 90)
    red[400:, :100] = False
    return red


class _Browser:
    """Headless Chromium driven over the DevTools protocol (its websocket, through the `websockets` package viser
    already needs): the page is screenshot every half second, in real time, until the picture holds what is looked
    for or the deadline passes. (A one-shot `--screenshot` with a virtual-time budget does not wait for the
    viewer's websocket, and on a slow machine it took a blank page.)"""

    def __init__(self, exe, url, home):
        import re

        self.proc = subprocess.Popen(
            [exe, "--headless", "--no-sandbox", "--use-angle=swiftshader", "--enable-unsafe-swiftshader",
             "--hide-scrollbars", "--window-size=640,480", "--remote-debugging-port=0", "--no-first-run",
             f"--user-data-dir={home}", url],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env={**os.environ, "HOME": str(home)})
        self.log, endpoint = [], None
        deadline = time.monotonic() + 60
        while endpoint is None and time.monotonic() < deadline:
            line = self.proc.stderr.readline()
            if not line:
                break
            self.log.append(line)
            m = re.search(r"DevTools listening on ws://([^/]+)/", line)
            endpoint = m and m.group(1)
        assert endpoint, "Chromium did not start its DevTools endpoint:\n" + "".join(self.log[-30:])
        threading.Thread(target=lambda: [None for _ in self.proc.stderr], daemon=True).start()  # keep it drained
        page = None
        while page is None and time.monotonic() < deadline:
            with urllib.request.urlopen(f"http://{endpoint}/json/list", timeout=10) as r:
                page = next((t for t in json.load(r) if t.get("type") == "page"), None)
            time.sleep(0.2)
        assert page is not None, "Chromium opened no page"
        from websockets.sync.client import connect

        self.ws, self.n = connect(page["webSocketDebuggerUrl"], max_size=None, open_timeout=30), 0
        self.call("Emulation.setDeviceMetricsOverride", width=640, height=480, deviceScaleFactor=1, mobile=False)

    def call(self, method, **params):
        self.n += 1
        self.ws.send(json.dumps({"id": self.n, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv(timeout=120))
            if msg.get("id") == self.n:
                assert "error" not in msg, msg
                return msg["result"]

    def webgl(self):
        code = "(() => { const c = document.createElement('canvas'); return !!(c.getContext('webgl2') || c.getContext('webgl')); })()"
        return self.call("Runtime.evaluate", expression=code, returnByValue=True)["result"].get("value") is True

    def screenshot(self, path):
        import base64

        import imageio.v3 as iio

        path.write_bytes(base64.b64decode(self.call("Page.captureScreenshot", format="png")["data"]))
        return iio.imread(path)[..., :3].astype(np.int32)

    def wait_for(self, path, done, seconds):
        """Screenshots until done(image) or `seconds` have passed; the last image."""
        deadline = time.monotonic() + seconds
        while True:
            img = self.screenshot(path)
            if done(img) or time.monotonic() > deadline:
                return img
            time.sleep(0.5)

    def close(self):
        try:
            self.ws.close()
        finally:
            self.proc.kill()
            self.proc.wait(timeout=30)


def test_a_headless_browser_shows_the_scene(tmp_path):
    """Chromium loads the viewer's page and draws the red box (it fell from out of view onto the plane: what the
    page shows is the scene after the steps); the same page without the box has no red pixel. Software WebGL on a
    busy machine may take a while to draw its first frame: the page is screenshot until the box shows, for up to
    90 s, and the box-free page is looked at, once connected, for twice as long as the box took to show."""
    exe = _chromium()
    view = dict(camera_pos=(2.0, -2.0, 1.5), camera_lookat=(0, 0, 0.2))
    scene, box = _box_scene(z=3.0, **view)
    try:
        for _ in range(120):
            scene.step()
        assert float(box.get_pos()[2]) < 0.25
        browser = _Browser(exe, scene.viewer.url, tmp_path / "home")
        try:
            if not browser.webgl():
                pytest.skip("this Chromium has no WebGL (software GL, SwiftShader, is missing): the viewer's page "
                            "cannot draw")
            start = time.monotonic()
            red = _red_pixels(browser.wait_for(tmp_path / "box.png", lambda img: _red_pixels(img).sum() > 1500, 90))
            shown_after = time.monotonic() - start
        finally:
            browser.close()
    finally:
        scene.viewer.stop()
    rows, cols = np.nonzero(red)
    assert len(rows) > 1500, len(rows)  # the box, about 0.4 m wide at 2.9 m, covers thousands of pixels
    assert 160 < rows.mean() < 400 and 120 < cols.mean() < 420  # low in the middle: on the plane, in view
    scene = gs.Scene(show_viewer=True, viewer_options=gs.options.ViewerOptions(**QUIET, **view))
    scene.add_entity(gs.morphs.Plane(), surface=GREY)
    scene.build()
    try:
        browser = _Browser(exe, scene.viewer.url, tmp_path / "home2")
        try:  # once the page is connected, given twice the time the box took to show (at least 5 s): no red
            deadline = time.monotonic() + 60
            while not scene.viewer.server.get_clients() and time.monotonic() < deadline:
                time.sleep(0.2)
            assert scene.viewer.server.get_clients(), "the box-free page never connected"
            time.sleep(max(5.0, 2 * shown_after))
            assert _red_pixels(browser.screenshot(tmp_path / "no_box.png")).sum() < 50
        finally:
            browser.close()
    finally:
        scene.viewer.stop()


def test_link_frames_and_cameras_follow_the_scene():
    """show_link_frame: one frame per link of the pendulum, at the link's pose; show_cameras: each camera as a
    frustum at its position, moved by set_pose."""
    from genesis_rigid import assets

    scene = gs.Scene(show_viewer=True, viewer_options=gs.options.ViewerOptions(**QUIET),
                     vis_options=gs.options.VisOptions(show_link_frame=True, show_cameras=True))
    pendulum = scene.add_entity(gs.morphs.MJCF(file=assets.path("double_pendulum.xml")))
    cam = scene.add_camera(res=(32, 24), pos=(2.0, 0.0, 1.0), lookat=(0, 0, 1.0))
    scene.build()
    try:
        for _ in range(10):
            scene.step()
        cam.set_pose(pos=(0.0, 2.0, 1.5))
        scene.viewer.update(force=True)
        nodes = {kind: h for kind, h, _, _ in scene.viewer._nodes}
        links = nodes["links"]
        want = np.stack([link.get_pos().detach().cpu().numpy() for link in pendulum.links])
        assert links.batched_positions.shape == (len(pendulum.links), 3)
        assert np.allclose(links.batched_positions, want, atol=1e-5)
        assert np.allclose(links.batched_wxyzs, np.stack([l.get_quat().numpy() for l in pendulum.links]), atol=1e-5)
        assert np.allclose(nodes["camera"].position, (0.0, 2.0, 1.5))
    finally:
        scene.viewer.stop()


def test_a_gui_camera_shows_its_images_in_the_viewer_panel():
    scene, _ = _box_scene()
    cam = scene.add_camera(res=(32, 24), pos=(2.0, 0.0, 1.0), lookat=(0, 0, 0.3), GUI=True)
    try:
        rgb = cam.render()[0]
        shown = scene.viewer._images[cam.idx]
        assert np.array_equal(shown.image, rgb.numpy())
        scene.step()
        rgb = cam.render()[0]
        assert np.array_equal(scene.viewer._images[cam.idx].image, rgb.numpy())
    finally:
        scene.viewer.stop()


def test_visual_meshes_and_cloth_surfaces_follow_the_scene(tmp_path):
    """A Mesh morph (drawn as its file's triangles, instanced per environment at the body's pose) and a PBD cloth
    (its triangles' vertices per environment, with the layout's offsets): what the viewer holds after steps is the
    scene's state."""
    import trimesh

    box = trimesh.creation.box(extents=(0.2, 0.2, 0.2))
    box_path = str(tmp_path / "box.obj")
    box.export(box_path)
    n = 5
    xs = np.linspace(-0.2, 0.2, n)
    X, Y = np.meshgrid(xs, xs)
    faces = [(j * n + i, j * n + i + 1, (j + 1) * n + i) for j in range(n - 1) for i in range(n - 1)]
    faces += [(j * n + i + 1, (j + 1) * n + i + 1, (j + 1) * n + i) for j in range(n - 1) for i in range(n - 1)]
    cloth_path = str(tmp_path / "cloth.obj")
    trimesh.Trimesh(np.stack([X, Y, 0 * X], -1).reshape(-1, 3), faces, process=False).export(cloth_path)
    scene = gs.Scene(show_viewer=True, viewer_options=gs.options.ViewerOptions(**QUIET),
                     pbd_options=gs.options.PBDOptions(lower_bound=(-1, -1, 0), upper_bound=(1, 1, 1)))
    scene.add_entity(gs.morphs.Plane(), surface=GREY)
    body = scene.add_entity(gs.morphs.Mesh(file=box_path, pos=(0.5, 0.0, 0.6)))
    cloth = scene.add_entity(gs.morphs.Mesh(file=cloth_path, pos=(0.0, 0.0, 0.5)), material=gs.materials.PBD.Cloth())
    scene.build(n_envs=2, env_spacing=(2.0, 0.0))
    try:
        for _ in range(15):
            scene.step()
        scene.viewer.update(force=True)
        offsets = scene.viewer.offsets
        meshes = [(h, item) for kind, h, _, item in scene.viewer._nodes if kind == "mesh"]
        surfaces = [(h, item) for kind, h, _, item in scene.viewer._nodes if kind == "surface"]
        assert len(meshes) == 1 and len(surfaces) == 2  # the box; the cloth in each of the 2 environments
        h, _ = meshes[0]
        assert len(h.faces) == 12  # the file's triangles, not a primitive box
        want = body.get_pos().numpy() + offsets[:2]
        assert float(want[0, 2]) < 0.55  # it fell
        np.testing.assert_allclose(h.batched_positions, want, atol=1e-5)
        np.testing.assert_allclose(h.batched_wxyzs, body.get_quat().numpy(), atol=1e-5)
        pos = cloth.get_particles_pos().detach().cpu().numpy().astype(np.float64)  # [2, 25, 3]
        for h, (_, k) in surfaces:
            assert len(h.faces) == len(faces)
            got = np.sort(np.asarray(h.vertices, dtype=np.float64), axis=0)
            np.testing.assert_allclose(got, np.sort(pos[k] + offsets[k], axis=0), atol=1e-5)
        assert float(pos[:, :, 2].max()) < 0.5  # it fell too
    finally:
        scene.viewer.stop()


def test_the_camera_follows_an_entity_as_genesis_worlds_follow_entity():
    """follow_entity (called before build, as Genesis World's scripts do): after each step the pages' camera sits
    at the entity's position plus ViewerOptions.camera_pos and aims at the entity; a fixed axis holds the camera's
    coordinate; bad arguments are refused."""
    scene = gs.Scene(show_viewer=True, viewer_options=gs.options.ViewerOptions(
        **QUIET, camera_pos=(0.0, -2.0, 1.0), refresh_rate=1000))
    scene.add_entity(gs.morphs.Plane(), surface=GREY)
    box = scene.add_entity(gs.morphs.Box(pos=(0.5, 0.2, 1.0), size=(0.2, 0.2, 0.2)))
    with pytest.raises(OptionError, match="fixed_axis"):
        scene.viewer.follow_entity(box, fixed_axis=(None, 1.0))
    with pytest.raises(OptionError, match="smoothing"):
        scene.viewer.follow_entity(box, smoothing=1.5)
    scene.viewer.follow_entity(box, fixed_axis=(None, None, 3.0))
    scene.build()
    try:
        for _ in range(3):
            scene.step()
        time.sleep(0.1)
        p = box.get_pos().detach().cpu().numpy().astype(np.float64)
        cam = scene.viewer.server.initial_camera
        assert np.allclose(cam.position, [p[0], p[1] - 2.0, 3.0], atol=1e-6)
        assert np.allclose(cam.look_at, p, atol=1e-6)
    finally:
        scene.viewer.stop()
