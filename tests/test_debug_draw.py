"""scene.draw_debug_* (Genesis World's debug markers): each call checks its arguments (a bad one is refused with
the argument named and nothing added), returns an object kept in scene.debug_objects until cleared, and is drawn
in the viewer when one is open; ProfilingOptions is accepted and turns the FPS log on as Genesis World's."""

import numpy as np
import pytest

import genesis_core as gs


@pytest.fixture(scope="module")
def scene():
    scene = gs.Scene(profiling_options=gs.options.ProfilingOptions(show_FPS=False))
    scene.add_entity(gs.morphs.Plane())
    scene.build()
    return scene


def test_markers_are_kept_until_cleared(scene):
    T = np.eye(4)
    objs = [scene.draw_debug_sphere((0, 0, 1), radius=0.05), scene.draw_debug_spheres(np.zeros((3, 3))),
            scene.draw_debug_line((0, 0, 0), (1, 1, 1)), scene.draw_debug_arrow((0, 0, 0), (0, 0, 1)),
            scene.draw_debug_frame(T), scene.draw_debug_frames(np.stack([T, T])),
            scene.draw_debug_box(((0, 0, 0), (1, 1, 1))), scene.draw_debug_points(np.zeros((5, 3)))]
    assert scene.debug_objects == objs
    assert objs[1].params["pos"].shape == (3, 3)
    assert np.array_equal(objs[3].params["end"], [0.0, 0.0, 1.0])
    assert np.array_equal(objs[0].params["color"], [1.0, 0.0, 0.0, 0.5])  # Genesis World's default colour
    scene.clear_debug_object(objs[0])
    assert scene.debug_objects == objs[1:]
    with pytest.raises(gs.SceneError, match="not a debug object"):
        scene.clear_debug_object(objs[0])
    scene.clear_debug_objects()
    assert scene.debug_objects == []


def test_visualizer_context_moves_markers(scene):
    """scene.visualizer.context.update_debug_objects (Genesis World's): a frame goes to the pose, other markers
    move rigidly by it; a pose that is not a rigid transform, or an object of no scene, is refused unchanged."""
    T = np.eye(4)
    T[:3, 3] = (0.1, 0.2, 0.3)
    frame, ball = scene.draw_debug_frame(T), scene.draw_debug_sphere((1.0, 0.0, 0.0))
    turn = np.eye(4)
    turn[:3, :3] = [[0, -1, 0], [1, 0, 0], [0, 0, 1]]  # a quarter turn about z
    turn[:3, 3] = (0.0, 0.0, 0.5)
    scene.visualizer.context.update_debug_objects((frame, ball), (turn, turn))
    assert np.allclose(frame.params["T"][0], turn)
    assert np.allclose(ball.params["pos"], [[0.0, 1.0, 0.5]])
    for poses, match in (((np.zeros((4, 4)),), "rotation"), ((turn, turn), "1 objects for 2")):
        with pytest.raises(gs.OptionError, match=match):
            scene.visualizer.context.update_debug_objects((frame,), poses)
    assert np.allclose(frame.params["T"][0], turn)
    scene.clear_debug_objects()
    with pytest.raises(gs.OptionError, match="not a debug object"):
        scene.visualizer.context.update_debug_objects((frame,), (turn,))
    assert scene.visualizer.viewer is scene.viewer


@pytest.mark.parametrize("call, match", [
    (lambda s: s.draw_debug_sphere((0, 0)), "pos"),
    (lambda s: s.draw_debug_sphere((0, 0, float("nan"))), "pos"),
    (lambda s: s.draw_debug_sphere((0, 0, 0), radius=-1.0), "radius"),
    (lambda s: s.draw_debug_line((0, 0, 0), (1, 1, 1), color=(2.0, 0, 0)), "color"),
    (lambda s: s.draw_debug_box(((1, 1, 1), (0, 0, 0))), "upper corner"),
    (lambda s: s.draw_debug_frame(np.eye(3)), "T"),
])
def test_bad_markers_are_refused(scene, call, match):
    n = len(scene.debug_objects)
    with pytest.raises(gs.OptionError, match=match):
        call(scene)
    assert len(scene.debug_objects) == n


def test_profiling_options():
    assert gs.options.ProfilingOptions().show_FPS is True  # Genesis World's default
    with pytest.raises(gs.OptionError, match="FPS_tracker_alpha"):
        gs.options.ProfilingOptions(FPS_tracker_alpha=1.5)
    with pytest.raises(gs.OptionError, match="profiling_options"):
        gs.Scene(profiling_options=gs.options.SimOptions())
    assert gs.Scene(profiling_options=gs.options.ProfilingOptions()).show_FPS is True


def test_keybinds_are_buttons_of_the_browser_viewer():
    """Genesis World's keybindings: each is a button in the viewer's panel; a click runs its callback."""
    from genesis_core.vis.keybindings import Key, KeyAction, Keybind

    scene = gs.Scene(show_viewer=True, viewer_options=gs.options.ViewerOptions(port=0))
    scene.add_entity(gs.morphs.Plane())
    scene.build()
    try:
        hits = []
        scene.viewer.register_keybinds(Keybind("up", Key.UP, KeyAction.HOLD, callback=hits.append, args=(1,)))
        with pytest.raises(gs.OptionError, match="exists"):
            scene.viewer.register_keybinds(Keybind("up", Key.K, KeyAction.PRESS, callback=hits.append, args=(2,)))
        scene.viewer.register_keybinds(Keybind("up", Key.K, callback=hits.append, args=(3,)), overwrite=True)
        scene.viewer.keybinds["up"].run()
        assert hits == [3] and str(Key.UP) == "up" and int(Key.J) == 0x6a
        with pytest.raises(gs.OptionError, match="callback"):
            Keybind("bad", Key.J, callback=5)
    finally:
        scene.viewer.stop()
