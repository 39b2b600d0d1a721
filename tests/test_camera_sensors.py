"""Cameras as sensors (gs.sensors.RasterizerCameraOptions, RaytracerCameraOptions, BatchRendererCameraOptions): the
image a camera sensor reads is the one `scene.add_camera` renders from the same pose (the same renderer), fixed in
the world or carried by a link (its pose the link's times the offset), rendered once per step however often it is
read, and bad options are refused."""

import numpy as np
import pytest
import torch

import genesis_core as gs

RES = (32, 24)


def _scene(n_envs):
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=0.01))
    scene.add_entity(gs.morphs.Plane())
    box = scene.add_entity(gs.morphs.Box(pos=(0.3, 0.0, 0.1), size=(0.2, 0.2, 0.2)))
    ball = scene.add_entity(gs.morphs.Sphere(pos=(-0.3, 0.2, 0.1), radius=0.1))
    fixed = scene.add_sensor(gs.sensors.RasterizerCameraOptions(res=RES, pos=(1.5, 0.5, 1.0), lookat=(0.0, 0.0, 0.1),
                                                                fov=50.0))
    traced = scene.add_sensor(gs.sensors.RaytracerCameraOptions(res=RES, pos=(1.5, 0.5, 1.0),
                                                                lookat=(0.0, 0.0, 0.1), fov=50.0, spp=16))
    riding = scene.add_sensor(gs.sensors.BatchRendererCameraOptions(res=RES, pos=(0.0, 0.0, 1.0),
                                                                    lookat=(0.0, 0.0, 0.0), fov=70.0,
                                                                    entity_idx=ball.idx))
    T = np.eye(4)
    T[:3, 3] = (0.0, -1.0, 0.3)
    T[:3, :3] = [[1, 0, 0], [0, 0, -1], [0, 1, 0]]  # looking along the link's +y (camera -z = link +y)
    offset = scene.add_sensor(gs.sensors.RasterizerCameraOptions(res=RES, entity_idx=box.idx, offset_T=T))
    reference = scene.add_camera(res=RES, pos=(1.5, 0.5, 1.0), lookat=(0.0, 0.0, 0.1), fov=50.0)
    follower = scene.add_camera(res=RES, pos=(0.0, 0.0, 2.0), lookat=(0.0, 0.0, 0.0), up=(0.0, 1.0, 0.0), fov=70.0)
    side = scene.add_camera(res=RES, pos=(0.0, 0.0, 2.0), lookat=(0.0, 0.0, 0.0), up=(0.0, 1.0, 0.0), fov=60.0)
    scene.build(n_envs=n_envs)
    return scene, box, ball, dict(fixed=fixed, traced=traced, riding=riding, offset=offset, reference=reference,
                                  follower=follower, side=side)


@pytest.fixture(scope="module")
def batched():
    return _scene(2)


def test_a_fixed_camera_sensor_reads_what_the_scene_camera_renders(batched):
    scene, _, _, c = batched
    scene.step()
    data = c["fixed"].read()
    assert isinstance(data, gs.sensors.CameraData)
    assert data.rgb.shape == (2, RES[1], RES[0], 3) and data.rgb.dtype == torch.uint8
    want = c["reference"].render(rgb=True)[0]
    assert torch.equal(data.rgb, want)
    assert torch.equal(c["traced"].read().rgb, want)  # (the same renderer draws every backend)
    assert float(data.rgb.float().std()) > 5.0  # the boxes and the floor, not a blank image
    assert torch.equal(c["fixed"].read(envs_idx=[1]).rgb, want[[1]])


def test_an_attached_camera_moves_with_its_link(batched):
    """The ball is moved to a different place in each environment: the sensor 1 m above its centre looking down
    sees what a scene camera placed there sees."""
    scene, _, ball, c = batched
    pos = torch.tensor([[-0.3, 0.2, 0.4], [0.5, -0.4, 0.6]], dtype=torch.float64)
    ball.set_pos(pos)
    follower = c["follower"]
    follower.set_pose(pos=pos + torch.tensor([0.0, 0.0, 1.0], dtype=torch.float64), lookat=pos,
                      up=torch.tensor([[0.0, 1.0, 0.0]] * 2, dtype=torch.float64))
    got = c["riding"].read().rgb
    assert torch.equal(got, follower.render(rgb=True)[0])
    assert not torch.equal(got[0], got[1])


def test_offset_T_places_the_camera_in_the_link_frame(batched):
    scene, box, _, c = batched
    p = box.get_pos().double()
    side = c["side"]
    side.set_pose(pos=p + torch.tensor([0.0, -1.0, 0.3], dtype=torch.float64),
                  lookat=p + torch.tensor([0.0, 0.0, 0.3], dtype=torch.float64),
                  up=torch.tensor([[0.0, 0.0, 1.0]] * 2, dtype=torch.float64))
    assert torch.equal(c["offset"].read().rgb, side.render(rgb=True)[0])


def test_the_image_is_rendered_once_per_step(batched, monkeypatch):
    scene, _, _, c = batched
    scene.step()
    calls = []
    cam = c["fixed"].camera
    real = cam.render
    monkeypatch.setattr(cam, "render", lambda **kw: calls.append(1) or real(**kw))
    a, b = c["fixed"].read().rgb, c["fixed"].read().rgb
    assert torch.equal(a, b) and len(calls) == 1
    scene.step()
    c["fixed"].read()
    assert len(calls) == 2


def test_camera_sensors_have_no_state_channels(batched):
    scene, _, _, c = batched
    assert all(s.n_channels == 0 and s.n_aux == 0 for s in (c["fixed"], c["traced"], c["riding"], c["offset"]))
    scene.reset(scene.get_state())


@pytest.mark.parametrize("make, match", [
    (lambda: gs.sensors.RasterizerCameraOptions(fov=200.0), "fov"),
    (lambda: gs.sensors.RasterizerCameraOptions(res=(0, 10)), "res"),
    (lambda: gs.sensors.RasterizerCameraOptions(offset_T=np.eye(3)), "offset_T"),
    (lambda: gs.sensors.RaytracerCameraOptions(model="orthographic"), "model"),
    (lambda: gs.sensors.BatchRendererCameraOptions(near=-1.0), "near"),
    (lambda: gs.sensors.RasterizerCameraOptions(entity_idx=-3), "entity_idx"),
])
def test_bad_camera_options_are_refused(make, match):
    with pytest.raises(gs.OptionError, match=match):
        make()


def test_bad_camera_sensors_are_refused_at_add_sensor_and_nothing_is_added():
    scene = gs.Scene()
    box = scene.add_entity(gs.morphs.Box(size=(0.1, 0.1, 0.1)))
    cases = [
        (gs.sensors.BatchRendererCameraOptions(model="fisheye"), "fisheye"),
        (gs.sensors.RasterizerCameraOptions(entity_idx=4), "out of range"),
        (gs.sensors.RasterizerCameraOptions(entity_idx=box.idx, link_idx_local=2), "link_idx_local"),
        (gs.sensors.RasterizerCameraOptions(pos=(1.0, 1.0, 1.0), lookat=(1.0, 1.0, 1.0)), "coincide"),
    ]
    for options, match in cases:
        with pytest.raises(gs.OptionError, match=match):
            scene.add_sensor(options)
    assert scene.sensors == []


def test_a_scene_without_envs_reads_an_image_without_a_batch_dimension():
    scene = gs.Scene()
    scene.add_entity(gs.morphs.Plane())
    cam = scene.add_sensor(gs.sensors.RasterizerCameraOptions(res=RES, pos=(1.0, 1.0, 1.0), lookat=(0, 0, 0)))
    scene.build()
    scene.step()
    assert cam.read().rgb.shape == (RES[1], RES[0], 3)
    from genesis_core.options.sensors import RasterizerCameraOptions  # Genesis World's import path
    from genesis_core.utils.misc import tensor_to_array

    assert RasterizerCameraOptions is gs.sensors.RasterizerCameraOptions
    assert tensor_to_array(cam.read().rgb).shape == (RES[1], RES[0], 3)
