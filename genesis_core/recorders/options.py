"""Genesis World's recorder options (`gs.recorders.NPZFile`, `CSVFile`, `VideoFile`, `MPLLinePlot`,
`MPLImagePlot`, `MPLVectorFieldPlot`, `PyQtLinePlot` and their bases), as frozen attrs classes validated on
construction: a bad value raises an `OptionError` naming the class, the field, the value and the accepted range.
`scene.start_recording(data_func, options)` makes the recorder that an options class stands for
(genesis_core.recorders.recorder_manager)."""

from __future__ import annotations

import math
import os
from importlib.util import find_spec
from numbers import Integral, Real

import attrs
import numpy as np

from .. import validators as v
from ..bases import Options
from ..errors import OptionError

# Genesis World's flag of whether VideoFile can write (it needs PyAV there). VideoFile writes through imageio and
# the ffmpeg of imageio-ffmpeg here (dependencies of genesis-core), so the flag says whether that ffmpeg is there.
IS_PYAV_AVAILABLE = find_spec("imageio_ffmpeg") is not None

VIDEO_EXTENSIONS = (".mp4", ".gif")


def _fail(inst, attr, value, expect):
    raise OptionError(f"{type(inst).__name__}.{attr.name}={value!r} is not accepted: expected {expect}.")


def _is_real(x):
    return isinstance(x, (Real, np.floating, np.integer)) and not isinstance(x, (bool, np.bool_))


def _is_int(x):
    return isinstance(x, (Integral, np.integer)) and not isinstance(x, (bool, np.bool_))


def _path(value):
    """A str or os.PathLike as a str (other values unchanged, for the validator to refuse)."""
    return os.fspath(value) if isinstance(value, os.PathLike) else value


def _optional_positive(inst, attr, value):
    if value is not None and not (_is_real(value) and math.isfinite(value) and value > 0):
        _fail(inst, attr, value, "None (every step) or a finite number > 0 (samples per second)")


def _positive_number(inst, attr, value):
    if not (_is_real(value) and math.isfinite(value) and value > 0):
        _fail(inst, attr, value, "a finite number > 0")


def _is_str(inst, attr, value):
    if not isinstance(value, str):
        _fail(inst, attr, value, "a str")


def _file(*extensions, required=True):
    """A path (str or os.PathLike) whose name ends in one of `extensions` (case ignored); None only when not
    required."""
    names = " or ".join(extensions)

    def check(inst, attr, value):
        if value is None:
            if required:
                raise OptionError(f"{type(inst).__name__}.{attr.name} is required: give the path of the {names} "
                                  "file to write.")
            return
        if not isinstance(value, str) or not value.lower().endswith(extensions) or not os.path.basename(value)[:1]:
            _fail(inst, attr, value, f"a path ending in {names}" + ("" if required else ", or None"))

    return check


def _window_size(inst, attr, value):
    if not (isinstance(value, tuple) and len(value) == 2 and all(_is_int(x) and x > 0 for x in value)):
        _fail(inst, attr, value, "two ints > 0 (width, height in pixels)")


def _to_tuple(value):
    if value is None or isinstance(value, (str, bytes, dict)):
        return value
    try:
        return tuple(value)
    except TypeError:
        return value


def _strings(inst, attr, value):
    if value is not None and not (isinstance(value, tuple) and all(isinstance(x, str) for x in value)):
        _fail(inst, attr, value, "None or a sequence of str")


def _labels(value):
    """Genesis World's labels: None, a sequence of str, or {subplot: sequence of str}; kept as tuples (a str is
    the sequence of its characters there: "xyz" gives ("x", "y", "z"))."""
    def seq(x):
        return tuple(x) if isinstance(x, str) else _to_tuple(x)

    if isinstance(value, dict):
        return {k: seq(x) for k, x in value.items()}
    return seq(value)


def _check_labels(inst, attr, value):
    expect = "None, a sequence of str (one per plotted value) or a dict {key of the data: sequence of str}"
    if value is None:
        return
    if isinstance(value, dict):
        if not all(isinstance(k, str) and isinstance(x, tuple) and x and all(isinstance(s, str) for s in x)
                   for k, x in value.items()) or not value:
            _fail(inst, attr, value, expect)
        return
    if not (isinstance(value, tuple) and value and all(isinstance(s, str) for s in value)):
        _fail(inst, attr, value, expect)


def _codec_options(value):
    return dict(value) if isinstance(value, dict) else value


def _check_codec_options(inst, attr, value):
    if not (isinstance(value, dict) and all(isinstance(k, str) and isinstance(x, str) for k, x in value.items())):
        _fail(inst, attr, value, "a dict of str to str (ffmpeg options such as {'preset': 'veryfast'})")


def _positions(value):
    """An (N, 3) array-like (a torch tensor too) as a tuple of N 3-tuples of floats (other values unchanged)."""
    if hasattr(value, "detach"):
        value = value.detach().cpu().numpy()
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        return value
    if arr.ndim != 2 or arr.shape[1] != 3:
        return value
    return tuple(tuple(float(x) for x in row) for row in arr)


def _check_positions(inst, attr, value):
    if value is None:
        raise OptionError(f"{type(inst).__name__}.positions is required: give the (N, 3) positions of the vectors "
                          "to draw.")
    if not (isinstance(value, tuple) and value and all(isinstance(p, tuple) and len(p) == 3 for p in value)
            and all(math.isfinite(x) for p in value for x in p)):
        _fail(inst, attr, value, "an (N, 3) array of finite numbers, N >= 1")


def _check_normal(inst, attr, value):
    v.vec(3)(inst, attr, value)
    if math.hypot(*value) < 1e-12:
        _fail(inst, attr, value, "a non-zero vector (the axis the plot looks along)")


@attrs.define(frozen=True, kw_only=True, slots=False)
class RecorderOptions(Options):
    """Base of every recorder's options: what `scene.start_recording(data_func, options)` records, and how often.

    hz: samples per second of simulated time; the data is sampled every round(1 / (hz dt)) steps (at least 1; a
        warning says so when 1 / (hz dt) is not a whole number). None (default): every step.
    buffer_size, buffer_full_wait_time: Genesis World's queue to a recorder's background thread (size, 0 without
        bound; seconds to wait when full). Accepted and validated: recorders here run in the step's thread, so
        they have no effect.
    """

    hz: float | None = attrs.field(default=None, validator=_optional_positive)
    buffer_size: int = attrs.field(default=0, validator=v.int_at_least(0))
    buffer_full_wait_time: float = attrs.field(default=0.1, validator=_positive_number)


@attrs.define(frozen=True, kw_only=True, slots=False)
class BaseFileWriterOptions(RecorderOptions):
    """Base of the recorders that write a file.

    filename: the file's path (its folder is made when missing); required.
    save_on_reset: each full `scene.reset()` (envs_idx=None) writes the data recorded so far and starts the next
        file; the files are then named `<stem>_0<ext>`, `<stem>_1<ext>`, ... (Genesis World's counter).
    """

    filename: str = attrs.field(default=None, converter=_path, validator=_file(""))
    save_on_reset: bool = attrs.field(default=False, validator=v.is_bool)


@attrs.define(frozen=True, kw_only=True, slots=False)
class VideoFile(BaseFileWriterOptions):
    """Frames to a video file, streamed as they come: `data_func` returns a uint8 (any integer dtype, cast to uint8)
    image, grayscale [H, W] or colour [H, W, 3], a numpy array or a tensor; every frame of one size.

    filename: ending in .mp4 (H.264 through the ffmpeg of imageio-ffmpeg) or .gif (Genesis World: .mp4 only).
    fps: the video's frames per second (an int >= 1); None: the sampling rate, 1 / (steps per sample x dt), so
        that the video plays in real time.
    name: the video's title (MP4 metadata); "" uses the file's stem.
    codec: the ffmpeg encoder (MP4; "" gives libx264, the encoder imageio-ffmpeg's ffmpeg carries).
    bitrate: the MP4's bitrate in units of 8 Mibit/s (Genesis World's scale: 1.0 is 8 * 1024^2 bits/s).
    codec_options: more encoder options, {name: value} (MP4), passed to ffmpeg as `-name value`.
    """

    filename: str = attrs.field(default=None, converter=_path, validator=_file(*VIDEO_EXTENSIONS))
    fps: int | None = attrs.field(default=None, validator=attrs.validators.optional(v.int_at_least(1)))
    name: str = attrs.field(default="", validator=_is_str)
    codec: str = attrs.field(default="", validator=_is_str)
    bitrate: float = attrs.field(default=1.0, validator=_positive_number)
    codec_options: dict = attrs.field(factory=dict, converter=_codec_options, validator=_check_codec_options,
                                      eq=False)


@attrs.define(frozen=True, kw_only=True, slots=False)
class CSVFile(BaseFileWriterOptions):
    """One row per sample to a .csv file, written as it comes: the simulation time, then every value of the data
    (a tensor, an array, a number, a sequence of them, or a dict / named tuple of them; each flattened).

    filename: ending in .csv.
    header: the column names after "timestamp", one per value; None: the dict's keys (`key_0`, `key_1`, ... for a
        value of several entries) or `data_0`, `data_1`, ...
    save_every_write: flush the file after each row.
    """

    filename: str = attrs.field(default=None, converter=_path, validator=_file(".csv"))
    header: tuple | None = attrs.field(default=None, converter=_to_tuple, validator=_strings)
    save_every_write: bool = attrs.field(default=False, validator=v.is_bool)


@attrs.define(frozen=True, kw_only=True, slots=False)
class NPZFile(BaseFileWriterOptions):
    """Every sample kept in host memory, written at `scene.stop_recording()` to a .npz file: "timestamp" (the
    simulation time of each sample, s) and each field of the data stacked over time, `[n_samples, ...]`. The data
    is a tensor or array (key "data"), a dict of them (its keys; a nested dict gives "key.sub") or a named tuple
    (its fields, as `IMUData`'s lin_acc, ang_vel, mag).

    filename: ending in .npz.
    """

    filename: str = attrs.field(default=None, converter=_path, validator=_file(".npz"))


@attrs.define(frozen=True, kw_only=True, slots=False)
class BasePlotterOptions(RecorderOptions):
    """Base of the live plots.

    title: the figure's title.
    window_size: (width, height) of the figure in pixels.
    save_to_filename: None, or a .mp4 / .gif file that gets a frame of the figure per sample (Genesis World: any
        path, written as .mp4).
    show_window: True: show the figure in a window (when matplotlib's backend can); False: draw it off-screen only;
        None: a window when a display is connected and the backend is interactive (headless, under
        MPLBACKEND=Agg: off-screen).
    """

    title: str = attrs.field(default="", validator=_is_str)
    window_size: tuple = attrs.field(default=(800, 600), converter=_to_tuple, validator=_window_size)
    save_to_filename: str | None = attrs.field(default=None, converter=_path,
                                               validator=_file(*VIDEO_EXTENSIONS, required=False))
    show_window: bool | None = attrs.field(default=None, validator=attrs.validators.optional(v.is_bool))


@attrs.define(frozen=True, kw_only=True, slots=False)
class LinePlotterMixinOptions(Options):
    """Options of a line plot of scalar data over simulation time: `data_func` returns a number, a sequence or
    tensor of numbers (flattened: each entry a line), or a dict of them (a subplot per key).

    labels: one str per line; for dict data a dict {key: labels of that key's lines}, whose keys must be the
        data's. None: `data_0`, ... or `<key>_0`, ...
    x_label, y_label: the axes' labels.
    history_length: how many of the last samples are drawn (an int >= 1).
    """

    labels: tuple | dict | None = attrs.field(default=None, converter=_labels, validator=_check_labels, eq=False)
    x_label: str = attrs.field(default="", validator=_is_str)
    y_label: str = attrs.field(default="", validator=_is_str)
    history_length: int = attrs.field(default=100, validator=v.int_at_least(1))


@attrs.define(frozen=True, kw_only=True, slots=False)
class PyQtLinePlot(BasePlotterOptions, LinePlotterMixinOptions):
    """A live line plot drawn with pyqtgraph (needs `pip install pyqtgraph` and a Qt binding such as PyQt6). See
    BasePlotterOptions and LinePlotterMixinOptions for the fields."""


@attrs.define(frozen=True, kw_only=True, slots=False)
class MPLLinePlot(BasePlotterOptions, LinePlotterMixinOptions):
    """A live line plot drawn with matplotlib (`pip install matplotlib`). See BasePlotterOptions and
    LinePlotterMixinOptions for the fields."""


@attrs.define(frozen=True, kw_only=True, slots=False)
class MPLImagePlot(BasePlotterOptions):
    """A live image drawn with matplotlib: `data_func` returns [H, W] (drawn with a colour map, scaled to the
    image's range), [H, W, 1], [H, W, 3] or [H, W, 4]. See BasePlotterOptions for the fields."""


@attrs.define(frozen=True, kw_only=True, slots=False)
class MPLVectorFieldPlot(BasePlotterOptions):
    """3-D vectors at fixed points, projected on the plane normal to `normal` and drawn as arrows coloured by
    magnitude with matplotlib: `data_func` returns the N vectors, (N, 3).

    positions: the N points, (N, 3) (a sensor's probe positions, say); required.
    normal: the axis the plot looks along (3 numbers, not all zero).
    scale_factor: the arrows' length per unit of the vectors (> 0).
    max_magnitude: the top of the colour scale (> 0), from 0.
    """

    positions: tuple = attrs.field(default=None, converter=_positions, validator=_check_positions, eq=False)
    normal: tuple = attrs.field(default=(0.0, 0.0, 1.0), converter=v.to_float_tuple, validator=_check_normal)
    scale_factor: float = attrs.field(default=1.0, validator=_positive_number)
    max_magnitude: float = attrs.field(default=1.0, validator=_positive_number)


__all__ = [
    "IS_PYAV_AVAILABLE", "BaseFileWriterOptions", "BasePlotterOptions", "CSVFile", "LinePlotterMixinOptions",
    "MPLImagePlot", "MPLLinePlot", "MPLVectorFieldPlot", "NPZFile", "Options", "PyQtLinePlot", "RecorderOptions",
    "VideoFile",
]
