"""Recorders (gs.recorders, scene.start_recording / stop_recording, sensor.start_recording): what each writes or
draws is what the scene produced step by step, sampled at the asked rate, with simulation-time stamps.

A box falls from rest onto a plane (dt = 0.01 s, float64 on the CPU): before it lands its height follows the
integrator's free fall, z_n = z_0 - g dt^2 n (n + 1) / 2 (semi-implicit Euler, exact for constant gravity) and
its IMU, in free fall, reads no proper acceleration. The scenes are built once per module (the rigid kernels'
compilation dominates); each test starts its recordings on a built scene reset to step 0."""

import csv
import logging
import os
import warnings

import numpy as np
import pytest
import torch

import genesis_core as gs
from genesis_core.recorders.plotters import IS_MATPLOTLIB_AVAILABLE, IS_PYQTGRAPH_AVAILABLE

DT = 0.01
G = 9.81
Z0 = 2.0  # m: the box's height at rest, high enough not to land within a test's steps (20 steps fall 0.2 m)
SIDE = 0.1
STEPS = 10

needs_matplotlib = pytest.mark.skipif(not IS_MATPLOTLIB_AVAILABLE, reason="needs matplotlib >= 3.7: pip install "
                                                                          "matplotlib (or genesis-core[plot])")


def _falling_box_scene(n_envs=0, recordings=()):
    """A box at rest at height Z0 above a plane, an IMU on it; `recordings(scene, box, imu)` is called before
    build."""
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=DT))
    scene.add_entity(gs.morphs.Plane())
    box = scene.add_entity(gs.morphs.Box(pos=(0.0, 0.0, Z0), size=(SIDE,) * 3))
    imu = scene.add_sensor(gs.sensors.IMU(entity_idx=box.idx))
    out = [start(scene, box, imu) for start in recordings]
    scene.build(n_envs=n_envs)
    return scene, box, imu, out


@pytest.fixture(scope="module")
def falling():
    scene, box, imu, _ = _falling_box_scene()
    return scene, box, imu


@pytest.fixture(scope="module")
def falling_batched():
    scene, box, imu, _ = _falling_box_scene(n_envs=2)
    return scene, box, imu


@pytest.fixture
def fresh(falling):
    """The unbatched scene back at step 0, with no recording left over."""
    scene, box, imu = falling
    scene.reset()
    yield scene, box, imu
    if scene._recorder_manager.is_recording:
        scene.stop_recording()


def _free_fall_z(n):
    return Z0 - G * DT**2 * n * (n + 1) / 2


# -- NPZFile ----------------------------------------------------------------------------------------------------


def test_npz_holds_every_other_step_of_the_fall_as_the_script_saw_it(tmp_path):
    """Recordings started before build at hz = 1 / (2 dt): the files hold steps 2, 4, ..., 10 stamped t dt, the
    box's positions exactly as the script read them after those steps (the free fall's heights), and the IMU's
    readings (no proper acceleration in free fall, the default magnetic field (0, 0, 0.5))."""
    hz = 1.0 / (2 * DT)
    imu_file, pos_file = tmp_path / "imu.npz", tmp_path / "out" / "pos.npz"  # a folder that does not exist yet
    scene, box, imu, _ = _falling_box_scene(recordings=(
        lambda s, b, i: s.start_recording(lambda: i.read()._asdict(), gs.recorders.NPZFile(filename=imu_file, hz=hz)),
        lambda s, b, i: s.start_recording(lambda: {"pos": b.get_pos()}, gs.recorders.NPZFile(filename=str(pos_file),
                                                                                            hz=hz)),
    ))
    seen_pos, seen_acc = [], []
    for _ in range(STEPS):
        scene.step()
        if scene.t % 2 == 0:
            seen_pos.append(box.get_pos().numpy().copy())
            seen_acc.append(imu.read().lin_acc.numpy().copy())
    assert not imu_file.exists()  # written at stop
    scene.stop_recording()

    steps = np.arange(2, STEPS + 1, 2)
    with np.load(pos_file) as data:
        assert sorted(data.files) == ["pos", "timestamp"]
        np.testing.assert_array_equal(data["timestamp"], steps * DT)
        np.testing.assert_array_equal(data["pos"], np.stack(seen_pos))
        np.testing.assert_allclose(data["pos"][:, 2], _free_fall_z(steps), atol=1e-9)
    with np.load(imu_file) as data:
        assert sorted(data.files) == ["ang_vel", "lin_acc", "mag", "timestamp"]
        assert data["lin_acc"].shape == (len(steps), 3)
        np.testing.assert_array_equal(data["lin_acc"], np.stack(seen_acc))
        np.testing.assert_allclose(data["lin_acc"], 0.0, atol=1e-9)
        np.testing.assert_allclose(data["mag"], np.tile([0.0, 0.0, 0.5], (len(steps), 1)), atol=1e-12)


def test_sampling_is_every_round_1_over_hz_dt_steps(fresh, tmp_path):
    """hz None samples every step; 1 / (k dt) every k-th step, exactly; a rate that is no whole number of steps
    warns and rounds (hz = 30 at dt = 0.01: every 3 steps)."""
    scene, box, imu = fresh
    n = 12
    counts = {}
    recorders = {}
    for label, hz in (("every", None), ("k2", 1 / (2 * DT)), ("k4", 1 / (4 * DT)), ("k12", 1 / (12 * DT))):
        counts[label] = []
        recorders[label] = scene.start_recording(lambda c=counts[label]: c.append(scene.t) or 0.0,
                                                 gs.recorders.NPZFile(filename=tmp_path / f"{label}.npz", hz=hz))
    with pytest.warns(UserWarning, match="not a whole number of steps"):
        counts["k3"] = []
        recorders["k3"] = scene.start_recording(lambda: counts["k3"].append(scene.t) or 0.0,
                                                gs.recorders.NPZFile(filename=tmp_path / "k3.npz", hz=30.0))
    for _ in range(n):
        scene.step()
    assert counts == {"every": list(range(1, n + 1)), "k2": [2, 4, 6, 8, 10, 12], "k4": [4, 8, 12], "k12": [12],
                      "k3": [3, 6, 9, 12]}
    assert {k: r.steps_per_sample for k, r in recorders.items()} == {"every": 1, "k2": 2, "k4": 4, "k12": 12, "k3": 3}
    scene.stop_recording()
    with np.load(tmp_path / "k3.npz") as data:
        np.testing.assert_array_equal(data["timestamp"], np.array([3, 6, 9, 12]) * DT)


def test_batched_scene_records_every_environment(falling_batched, tmp_path):
    """n_envs = 2: each field is [n_samples, n_envs, ...]; a CSV row holds every value, flattened."""
    scene, box, imu = falling_batched
    scene.reset()
    scene.start_recording(lambda: {"pos": box.get_pos(), "z": box.get_pos()[:, 2]},
                          gs.recorders.NPZFile(filename=tmp_path / "pos.npz"))
    imu.start_recording(gs.recorders.NPZFile(filename=tmp_path / "imu.npz", hz=1 / (2 * DT)))
    imu.start_recording(gs.recorders.CSVFile(filename=tmp_path / "imu.csv"))
    for _ in range(4):
        scene.step()
    scene.stop_recording()
    with np.load(tmp_path / "pos.npz") as data:
        assert data["pos"].shape == (4, 2, 3) and data["z"].shape == (4, 2)
        np.testing.assert_allclose(data["z"], np.repeat(_free_fall_z(np.arange(1, 5))[:, None], 2, 1), atol=1e-9)
    with np.load(tmp_path / "imu.npz") as data:
        assert {k: data[k].shape for k in data.files} == {"timestamp": (2,), "lin_acc": (2, 2, 3),
                                                          "ang_vel": (2, 2, 3), "mag": (2, 2, 3)}
    with open(tmp_path / "imu.csv") as f:
        rows = list(csv.reader(f))
    assert len(rows) == 5 and all(len(r) == 1 + 2 * 9 for r in rows)
    assert rows[0][:3] == ["timestamp", "lin_acc_0", "lin_acc_1"]
    assert [float(r[0]) for r in rows[1:]] == pytest.approx([1 * DT, 2 * DT, 3 * DT, 4 * DT])


def test_sensor_start_recording_records_its_reads(fresh, tmp_path):
    """sensor.start_recording(options) records sensor.read(): an IMU's named tuple gives one array per field."""
    scene, box, imu = fresh
    recorder = imu.start_recording(gs.recorders.NPZFile(filename=tmp_path / "imu.npz"))
    assert isinstance(recorder, gs.recorders.Recorder) and recorder.is_recording
    reads = []
    for _ in range(3):
        scene.step()
        reads.append(imu.read())
    scene.stop_recording()
    with np.load(tmp_path / "imu.npz") as data:
        for field in ("lin_acc", "ang_vel", "mag"):
            np.testing.assert_array_equal(data[field], np.stack([getattr(r, field).numpy() for r in reads]))


def test_samples_are_copies_of_what_data_func_hands_out(fresh, tmp_path):
    """A data_func that refills one buffer each step (numpy or torch) records each step's values, not the last
    ones n times; a nested dict's fields are "key.sub"."""
    scene, box, imu = fresh
    np_buf, torch_buf = np.zeros(2), torch.zeros(2, dtype=torch.float64)

    def data():
        np_buf[:] = scene.t
        torch_buf.fill_(-scene.t)
        return {"np": np_buf, "torch": torch_buf, "box": {"z": box.get_pos()[2]}}

    scene.start_recording(data, gs.recorders.NPZFile(filename=tmp_path / "a.npz"))
    for _ in range(3):
        scene.step()
    scene.stop_recording()
    with np.load(tmp_path / "a.npz") as saved:
        assert sorted(saved.files) == ["box.z", "np", "timestamp", "torch"]
        np.testing.assert_array_equal(saved["np"], [[1, 1], [2, 2], [3, 3]])
        np.testing.assert_array_equal(saved["torch"], [[-1, -1], [-2, -2], [-3, -3]])
        np.testing.assert_allclose(saved["box.z"], _free_fall_z(np.arange(1, 4)), atol=1e-9)


def test_stop_recording_without_start_warns_and_changes_nothing(fresh, tmp_path, caplog):
    """Nothing started (or everything already stopped): a warning, no error (Genesis World's scripts call it in
    `finally:`); a recording started after that one records from the next step on."""
    scene, box, imu = fresh
    with caplog.at_level(logging.WARNING, logger="genesis_core"):
        scene.stop_recording()
    assert "no recording was started" in caplog.text
    scene.step()
    scene.start_recording(lambda: box.get_pos(), gs.recorders.NPZFile(filename=tmp_path / "a.npz"))
    scene.step()
    scene.stop_recording()
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="genesis_core"):
        scene.stop_recording()
    assert "no recording was started" in caplog.text
    with np.load(tmp_path / "a.npz") as data:  # data not in a dict: the key "data"
        np.testing.assert_array_equal(data["timestamp"], [2 * DT])
        assert data["data"].shape == (1, 3)


def test_save_on_reset_starts_a_file_per_full_reset(falling_batched, tmp_path):
    """save_on_reset: each full reset writes `<stem>_<k>` and starts the next; a reset of some environments does
    not; sample times follow scene.t back to 0. Nothing a recorder holds is in the scene's state."""
    scene, box, imu = falling_batched
    scene.reset()
    keys = set(scene.get_state().solvers_state[-1].fields)
    scene.start_recording(lambda: box.get_pos(), gs.recorders.NPZFile(filename=tmp_path / "run.npz",
                                                                       save_on_reset=True))
    scene.start_recording(lambda: box.get_pos()[:, 2], gs.recorders.CSVFile(filename=tmp_path / "run.csv",
                                                                             save_on_reset=True))
    for _ in range(3):
        scene.step()
    scene.reset(envs_idx=[1])
    scene.step()
    scene.reset()
    for _ in range(2):
        scene.step()
    assert set(scene.get_state().solvers_state[-1].fields) == keys
    scene.stop_recording()
    with np.load(tmp_path / "run_0.npz") as first, np.load(tmp_path / "run_1.npz") as second:
        np.testing.assert_array_equal(first["timestamp"], np.array([1, 2, 3, 4]) * DT)
        np.testing.assert_array_equal(second["timestamp"], np.array([1, 2]) * DT)
        np.testing.assert_allclose(second["data"][:, :, 2], first["data"][:2, :, 2], atol=0)  # same fall again
    assert sorted(os.listdir(tmp_path)) == ["run_0.csv", "run_0.npz", "run_1.csv", "run_1.npz"]


def test_destroy_writes_what_is_recording(tmp_path):
    scene, box, imu, _ = _falling_box_scene(recordings=(
        lambda s, b, i: s.start_recording(b.get_pos, gs.recorders.NPZFile(filename=tmp_path / "a.npz")),))
    scene.step()
    scene.destroy()
    with np.load(tmp_path / "a.npz") as data:
        assert data["data"].shape == (1, 3)


# -- options and data that are refused ---------------------------------------------------------------------------


@pytest.mark.parametrize("cls, kwargs, named", [
    (gs.recorders.NPZFile, dict(filename="a.npz", hz=-1.0), "NPZFile.hz=-1.0"),
    (gs.recorders.NPZFile, dict(filename="a.npz", hz=0), "NPZFile.hz=0"),
    (gs.recorders.CSVFile, dict(filename="a.csv", hz=float("nan")), "CSVFile.hz=nan"),
    (gs.recorders.NPZFile, dict(), "NPZFile.filename is required"),
    (gs.recorders.VideoFile, dict(hz=10.0), "VideoFile.filename is required"),
    (gs.recorders.NPZFile, dict(filename="a.csv"), "ending in .npz"),
    (gs.recorders.VideoFile, dict(filename="a.avi"), "ending in .mp4 or .gif"),
    (gs.recorders.VideoFile, dict(filename="a.mp4", fps=0), "VideoFile.fps=0"),
    (gs.recorders.VideoFile, dict(filename="a.mp4", codec_options={"preset": 1}), "VideoFile.codec_options"),
    (gs.recorders.NPZFile, dict(filename="a.npz", save_on_reset="yes"), "NPZFile.save_on_reset='yes'"),
    (gs.recorders.NPZFile, dict(filename="a.npz", buffer_size=-1), "NPZFile.buffer_size=-1"),
    (gs.recorders.MPLLinePlot, dict(window_size=(0, 300)), "MPLLinePlot.window_size=(0, 300)"),
    (gs.recorders.MPLLinePlot, dict(history_length=0), "MPLLinePlot.history_length=0"),
    (gs.recorders.MPLLinePlot, dict(labels=[1, 2]), "MPLLinePlot.labels=(1, 2)"),
    (gs.recorders.MPLImagePlot, dict(save_to_filename="plot.png"), "MPLImagePlot.save_to_filename='plot.png'"),
    (gs.recorders.MPLVectorFieldPlot, dict(), "MPLVectorFieldPlot.positions is required"),
    (gs.recorders.MPLVectorFieldPlot, dict(positions=[[0, 0]]), "MPLVectorFieldPlot.positions"),
    (gs.recorders.MPLVectorFieldPlot, dict(positions=[[0, 0, 0]], normal=(0, 0, 0)), "MPLVectorFieldPlot.normal"),
    (gs.recorders.PyQtLinePlot, dict(show_window=1), "PyQtLinePlot.show_window=1"),
])
def test_bad_options_are_refused_naming_the_argument(cls, kwargs, named):
    with pytest.raises(gs.OptionError, match=named.replace("(", r"\(").replace(")", r"\)").replace(".", r"\.")):
        cls(**kwargs)


def test_start_recording_refuses_what_it_cannot_record(fresh, tmp_path):
    scene, box, imu = fresh
    with pytest.raises(gs.OptionError, match="rec_options must be a recorder's options"):
        scene.start_recording(box.get_pos, gs.sensors.IMU(entity_idx=box.idx))
    with pytest.raises(gs.OptionError, match="data_func=.* must be a callable"):
        scene.start_recording(box.get_pos(), gs.recorders.NPZFile(filename=tmp_path / "a.npz"))
    assert not scene._recorder_manager.is_recording
    # data that changes its fields, or is no array of numbers: the step that samples it raises
    fields = iter([{"a": 1.0}, {"b": 1.0}])
    scene.start_recording(lambda: next(fields), gs.recorders.NPZFile(filename=tmp_path / "b.npz"))
    scene.step()
    with pytest.raises(gs.RecordingError, match=r"fields changed from \['a'\] .* to \['b'\]"):
        scene.step()
    scene.stop_recording()
    scene.start_recording(lambda: {"timestamp": 1.0}, gs.recorders.NPZFile(filename=tmp_path / "c.npz"))
    with pytest.raises(gs.RecordingError, match="'timestamp'"):
        scene.step()
    scene.stop_recording()
    scene.start_recording(lambda: object(), gs.recorders.CSVFile(filename=tmp_path / "d.csv"))
    with pytest.raises(gs.RecordingError, match="cannot be recorded"):
        scene.step()
    scene.stop_recording()
    assert not (tmp_path / "d.csv").exists()  # no row: no file


@pytest.mark.parametrize("options, flag, install", [
    (gs.recorders.PyQtLinePlot(), "IS_PYQTGRAPH_AVAILABLE", "pip install pyqtgraph PyQt6"),
    (gs.recorders.MPLLinePlot(), "IS_MATPLOTLIB_AVAILABLE", "pip install matplotlib"),
])
def test_a_plot_whose_package_is_missing_names_what_to_install(fresh, monkeypatch, options, flag, install):
    from genesis_core.recorders import plotters

    scene, box, imu = fresh
    monkeypatch.setattr(plotters, flag, False)
    with pytest.raises(gs.OptionError, match=install):
        scene.start_recording(box.get_pos, options)
    assert not scene._recorder_manager.is_recording


@pytest.mark.skipif(not IS_PYQTGRAPH_AVAILABLE, reason="needs pyqtgraph and a Qt binding: pip install pyqtgraph "
                                                       "PyQt6")
def test_pyqt_line_plot_draws_offscreen(fresh, tmp_path, monkeypatch):
    """PyQtLinePlot with Qt's offscreen platform: the last history_length samples, an upright image of
    window_size, a video frame per sample."""
    import imageio.v2 as imageio

    monkeypatch.setenv("QT_QPA_PLATFORM", "offscreen")
    scene, box, imu = fresh
    plot = imu.start_recording(gs.recorders.PyQtLinePlot(
        labels={"lin_acc": "xyz", "ang_vel": "xyz", "mag": "xyz"}, history_length=3, window_size=(320, 240),
        show_window=False, save_to_filename=tmp_path / "qt.mp4"))
    for _ in range(4):
        scene.step()
    assert plot.line_plot.x_data == pytest.approx([2 * DT, 3 * DT, 4 * DT])
    image = plot.get_image_array()
    assert image.shape == (240, 320, 3) and image.std() > 10
    scene.stop_recording()
    assert len(imageio.mimread(tmp_path / "qt.mp4")) == 4


# -- VideoFile --------------------------------------------------------------------------------------------------


def _frame(scene, box, h=24, w=30):
    """An image whose bright row is the box's height and bright column the step index, uint8 [h, w, 3] (each
    step's differs from the last: a GIF merges identical consecutive frames)."""
    img = np.zeros((h, w, 3), dtype=np.uint8)
    row = int((Z0 - float(box.get_pos()[2])) / 0.2 * (h - 1))
    img[row] = (255, 200, 0)
    img[:, scene.t % w] = (128, 128, 255)
    return img


@pytest.mark.parametrize("ext", [".mp4", ".gif"])
def test_video_file_holds_a_frame_per_sample(fresh, tmp_path, ext):
    """A frame every other step (numpy, a torch tensor, a grey [H, W] image: each a frame of [H, W, 3]): the file
    reads back with as many frames, of the image's size, at the sampling rate (fps None)."""
    import imageio.v2 as imageio

    scene, box, imu = fresh
    rgb = scene.start_recording(lambda: _frame(scene, box), gs.recorders.VideoFile(filename=tmp_path / f"rgb{ext}",
                                                                                   hz=1 / (2 * DT)))
    grey = scene.start_recording(lambda: torch.from_numpy(_frame(scene, box)[..., 0]),
                                 gs.recorders.VideoFile(filename=tmp_path / f"grey{ext}", fps=10))
    for _ in range(STEPS):
        scene.step()
    assert (rgb.n_frames, rgb.fps, grey.n_frames, grey.fps) == (STEPS // 2, 50, STEPS, 10)
    scene.stop_recording()
    for name, n in (("rgb", STEPS // 2), ("grey", STEPS)):
        frames = imageio.mimread(tmp_path / f"{name}{ext}")
        assert len(frames) == n
        assert frames[0].shape[:2] == (24, 30)


def test_video_file_refuses_frames_it_cannot_encode(fresh, tmp_path):
    scene, box, imu = fresh
    for bad, match in ((np.zeros((8, 8, 3), np.float32), "integers 0-255"),
                       (np.zeros((2, 8, 8, 3), np.uint8), r"shape \(2, 8, 8, 3\).*img\[0\]")):
        scene.start_recording(lambda b=bad: b, gs.recorders.VideoFile(filename=tmp_path / "bad.mp4"))
        with pytest.raises(gs.RecordingError, match=match):
            scene.step()
        scene.stop_recording()


# -- matplotlib plots -------------------------------------------------------------------------------------------


@needs_matplotlib
def test_line_plot_keeps_the_last_samples_and_films_itself(fresh, tmp_path):
    """Genesis World's test_plotter, here on the falling box: data_func is called once at build (the lines) and at
    each sample; the plot keeps history_length samples, the last stamped t dt; save_to_filename gets a frame per
    sample, of window_size, each different from the one before (the lines grew)."""
    import imageio.v2 as imageio

    scene, box, imu = fresh
    calls = []

    def data():
        calls.append(scene.t)
        return {"pos": box.get_pos(), "acc": imu.read().lin_acc}

    plot = scene.start_recording(data, gs.recorders.MPLLinePlot(
        labels={"pos": ("x", "y", "z"), "acc": ("x", "y", "z")}, title="falling box", history_length=3,
        window_size=(320, 240), hz=1 / (2 * DT), save_to_filename=tmp_path / "plot.mp4"))
    assert plot.show_window is False  # headless
    for _ in range(STEPS):
        scene.step()
    assert calls == [0, 2, 4, 6, 8, 10]
    assert plot.line_plot.x_data == pytest.approx([6 * DT, 8 * DT, 10 * DT])
    assert plot.line_plot.y_data["pos"]["z"] == pytest.approx(_free_fall_z(np.array([6, 8, 10])).tolist())
    image = plot.get_image_array()
    assert image.shape == (240, 320, 3) and image.dtype == np.uint8 and image.std() > 10
    scene.stop_recording()
    assert plot.fig is None
    frames = np.stack(imageio.mimread(tmp_path / "plot.mp4"))
    assert frames.shape == (5, 240, 320, 3)
    assert all(np.abs(np.diff(frames.astype(float), axis=0)).reshape(4, -1).max(axis=1) > 10)


@needs_matplotlib
def test_line_plot_labels_must_fit_the_data(fresh):
    scene, box, imu = fresh
    with pytest.raises(gs.OptionError, match="labels has 2 labels for 3 values"):
        scene.start_recording(box.get_pos, gs.recorders.MPLLinePlot(labels=("x", "y")))
    with pytest.raises(gs.OptionError, match=r"keys of labels \(\['a'\]\) must be the data's \(\['pos'\]\)"):
        scene.start_recording(lambda: {"pos": box.get_pos()}, gs.recorders.MPLLinePlot(labels={"a": ("x",)}))
    assert not scene._recorder_manager.is_recording


@needs_matplotlib
def test_a_plot_that_fails_at_build_is_dropped_and_the_others_record(tmp_path):
    """Started before build, labels that do not fit are found at scene.build(), which raises once the scene and
    the other recorders are built; the failed plot is dropped."""
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=DT))
    box = scene.add_entity(gs.morphs.Box(pos=(0.0, 0.0, Z0), size=(SIDE,) * 3))
    scene.start_recording(box.get_pos, gs.recorders.MPLLinePlot(labels=("x",)))
    scene.start_recording(box.get_pos, gs.recorders.NPZFile(filename=tmp_path / "a.npz"))
    with pytest.raises(gs.OptionError, match="labels has 1 labels for 3 values"):
        scene.build()
    assert scene.is_built and len(scene._recorder_manager.recorders) == 1
    scene.step()
    scene.stop_recording()
    with np.load(tmp_path / "a.npz") as saved:
        np.testing.assert_allclose(saved["data"][:, 2], [_free_fall_z(1)], atol=1e-9)


@needs_matplotlib
def test_image_and_vector_field_plots_draw_headless(fresh, tmp_path):
    """MPLImagePlot shows the last image (a depth-like float image with inf where nothing was hit, and an RGB one);
    MPLVectorFieldPlot draws arrows at fixed points, growing each step; both film themselves to a GIF."""
    import imageio.v2 as imageio

    scene, box, imu = fresh
    rng = np.random.default_rng(0)
    depth = rng.uniform(0.5, 2.0, size=(16, 20))
    depth[0, :5] = np.inf
    images = iter([depth, rng.integers(0, 255, size=(16, 20, 3), dtype=np.uint8)] * 2)
    image_plot = scene.start_recording(lambda: next(images), gs.recorders.MPLImagePlot(
        window_size=(200, 160), save_to_filename=tmp_path / "image.gif"))
    positions = [(x, y, 0.0) for x in (0.0, 0.1, 0.2) for y in (0.0, 0.1)]
    field = scene.start_recording(lambda: torch.tensor([(0.02 * scene.t, 0.01, 0.05)] * 6),
                                  gs.recorders.MPLVectorFieldPlot(positions=positions, normal=(0, 0, 1),
                                                                  max_magnitude=0.1, window_size=(200, 160),
                                                                  save_to_filename=tmp_path / "field.gif"))
    blank = field.get_image_array()
    for _ in range(4):
        scene.step()
    assert image_plot.get_image_array().shape == (160, 200, 3)
    assert np.abs(field.get_image_array().astype(float) - blank).max() > 50  # the arrows were drawn
    scene.stop_recording()
    assert len(imageio.mimread(tmp_path / "image.gif")) == 4 and len(imageio.mimread(tmp_path / "field.gif")) == 4


@needs_matplotlib
def test_vector_field_plot_refuses_another_number_of_vectors(fresh):
    scene, box, imu = fresh
    scene.start_recording(lambda: np.zeros((3, 3)), gs.recorders.MPLVectorFieldPlot(positions=[(0, 0, 0), (1, 0, 0)]))
    with pytest.raises(gs.RecordingError, match=r"the 2 vectors .* got shape \(3, 3\)"):
        scene.step()


def test_public_names_of_genesis_world():
    """The names Genesis World's scripts import: gs.recorders' classes and flags, recorders.plotters' flags."""
    from genesis_core.recorders import plotters

    for name in ("NPZFile", "CSVFile", "VideoFile", "MPLLinePlot", "MPLImagePlot", "MPLVectorFieldPlot",
                 "PyQtLinePlot", "RecorderOptions", "BasePlotterOptions", "BaseFileWriterOptions",
                 "LinePlotterMixinOptions", "RecorderManager", "register_recording", "IS_PYAV_AVAILABLE"):
        assert hasattr(gs.recorders, name), name
    assert isinstance(plotters.IS_MATPLOTLIB_AVAILABLE, bool) and isinstance(plotters.IS_PYQTGRAPH_AVAILABLE, bool)
    assert gs.recorders.MPLLinePlot(hz=25.0).hz == 25.0 and gs.recorders.VideoFile(filename="a.mp4").bitrate == 1.0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        gs.recorders.MPLVectorFieldPlot(positions=torch.zeros(4, 3))  # a sensor's probe positions, a tensor
