"""The live plots: MPLLinePlot, MPLImagePlot and MPLVectorFieldPlot drawn with matplotlib, PyQtLinePlot with
pyqtgraph (Genesis World's plotters, ported).

A plot is updated at each sample. It shows a window when a display is connected and matplotlib's backend can
(`show_window`); otherwise it draws off-screen (matplotlib's Agg canvas, without pyplot: nothing blocks and no
global figure is left behind), so that `get_image_array()` and `save_to_filename` (a video of the figure, a frame
per sample) work headless. Neither matplotlib nor pyqtgraph is imported before a plot is started; a plot whose
package is missing is refused at `start_recording` with the pip command that installs it.

`IS_MATPLOTLIB_AVAILABLE` and `IS_PYQTGRAPH_AVAILABLE` tell a script which it may use (Genesis World's names).
"""

from __future__ import annotations

import io
import itertools
import os
import sys
import warnings
from collections import defaultdict
from importlib import metadata
from importlib.util import find_spec

import numpy as np

from ..errors import OptionError, RecordingError, SceneError
from .base_recorder import Recorder, to_array
from .file_writers import VideoFileWriter
from .options import MPLImagePlot, MPLLinePlot, MPLVectorFieldPlot, PyQtLinePlot, VideoFile
from .recorder_manager import register_recording

MIN_MATPLOTLIB = (3, 7)  # figure legends placed "outside" (constrained layout)
QT_BINDINGS = ("PyQt6", "PySide6", "PyQt5", "PySide2")


def _version_at_least(dist: str, least: tuple) -> bool:
    try:
        parts = metadata.version(dist).split(".")[: len(least)]
        return tuple(int("".join(c for c in p if c.isdigit()) or 0) for p in parts) >= least
    except metadata.PackageNotFoundError:
        return False


IS_MATPLOTLIB_AVAILABLE = find_spec("matplotlib") is not None and _version_at_least("matplotlib", MIN_MATPLOTLIB)
IS_PYQTGRAPH_AVAILABLE = find_spec("pyqtgraph") is not None and any(find_spec(q) is not None for q in QT_BINDINGS)

# how far past the data a line plot's axes reach when they grow (fractions of the data's span; x at least 0.5 s)
RESCALE_MIN_X = 0.5
RESCALE_RATIO_X = 0.15
RESCALE_RATIO_Y = 0.15
COLORS = ("r", "g", "b", "c", "m", "y")
NON_INTERACTIVE_BACKENDS = ("agg", "cairo", "pdf", "pgf", "ps", "svg", "template")
_EPS = 1e-12


def has_display() -> bool:
    """Whether a window can be opened: a display on Linux (X11 or Wayland); always on macOS and Windows."""
    if sys.platform.startswith("linux"):
        return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))
    return True


def _values(x, what: str) -> np.ndarray:
    """A line plot's sample: a number, or the entries of a sequence / tensor (flattened), as float64."""
    return to_array(x, what).astype(np.float64).reshape(-1)


class LinePlotHelper:
    """The lines of a line plot: their subplots and labels (from the first sample and the options' labels) and the
    last `history_length` samples of each."""

    def __init__(self, options, data, what: str):
        self.x_data: list = []
        self.y_data = defaultdict(lambda: defaultdict(list))  # subplot -> label -> values
        self._history_length = options.history_length
        self._what = what
        labels = options.labels
        if isinstance(data, dict) or hasattr(data, "_asdict"):
            data = data._asdict() if hasattr(data, "_asdict") else data
            self._is_dict_data = True
            if labels is not None and not isinstance(labels, dict):
                raise OptionError(f"{what}: labels={labels!r} is a sequence, but data_func returns a dict (keys "
                                  f"{list(data)}); give labels as a dict {{key: labels}}.")
            if labels is not None and set(labels) != set(data):
                raise OptionError(f"{what}: the keys of labels ({sorted(labels)}) must be the data's "
                                  f"({sorted(data)}).")
            self._subplot_structure = {}
            for key, value in data.items():
                n = len(_values(value, f"{what} (key {key!r})"))
                names = labels[key] if labels is not None else tuple(f"{key}_{i}" for i in range(n))
                if len(names) != n:
                    raise OptionError(f"{what}: labels[{key!r}] has {len(names)} labels for {n} values.")
                self._subplot_structure[key] = tuple(names)
        else:
            self._is_dict_data = False
            if isinstance(labels, dict):
                raise OptionError(f"{what}: labels is a dict, but data_func returns no dict; give one label per "
                                  "value.")
            n = len(_values(data, what))
            names = labels if labels is not None else tuple(f"data_{i}" for i in range(n))
            if len(names) != n:
                raise OptionError(f"{what}: labels has {len(names)} labels for {n} values ({names!r}).")
            self._subplot_structure = {"main": tuple(names)}

    @property
    def history_length(self) -> int:
        return self._history_length

    @property
    def is_dict_data(self) -> bool:
        return self._is_dict_data

    @property
    def subplot_structure(self) -> dict:
        return self._subplot_structure

    def clear_data(self):
        self.x_data.clear()
        self.y_data.clear()

    def process(self, data, cur_time: float):
        if self._is_dict_data:
            data = data._asdict() if hasattr(data, "_asdict") else data
            if not isinstance(data, dict):
                raise RecordingError(f"{self._what}: data_func returned a dict at first, now a "
                                     f"{type(data).__name__}.")
            samples = {k: _values(data[k], f"{self._what} (key {k!r})") for k in self._subplot_structure
                       if k in data}
        else:
            samples = {"main": _values(data, self._what)}
        for key, values in samples.items():
            if len(values) != len(self._subplot_structure[key]):
                raise RecordingError(f"{self._what}: {len(values)} values for the plot's "
                                     f"{len(self._subplot_structure[key])} lines" +
                                     (f" of key {key!r}" if self._is_dict_data else "") + ".")
        self.x_data.append(cur_time)
        for key, values in samples.items():
            for label, y in zip(self._subplot_structure[key], values):
                self.y_data[key][label].append(float(y))
        if len(self.x_data) > self._history_length:
            del self.x_data[0]
            for lines in self.y_data.values():
                for ys in lines.values():
                    if ys:
                        del ys[0]


class BasePlotter(Recorder):
    """A plot updated at each sample; with save_to_filename, a video of it (a frame per sample)."""

    def build(self):
        super().build()
        self.video_writer = None
        if self._options.save_to_filename:
            fps = max(1, round(1.0 / (self._steps_per_sample * self._manager._step_dt)))
            self.video_writer = VideoFileWriter(self._manager, VideoFile(filename=self._options.save_to_filename,
                                                                         fps=fps), None)
            self.video_writer.build()
            self.video_writer.start()

    def process(self, data, cur_time):
        self._update(data, cur_time)
        if self.video_writer is not None:
            self.video_writer.process(self.get_image_array(), cur_time)

    def cleanup(self):
        if self.video_writer is not None:
            self.video_writer.stop()
            self.video_writer = None

    def _update(self, data, cur_time):
        raise NotImplementedError(f"{type(self).__name__}._update() is not implemented.")

    def get_image_array(self) -> np.ndarray:
        """The figure as it is now, an RGB image [height, width, 3] (uint8) of window_size."""
        raise NotImplementedError(f"{type(self).__name__}.get_image_array() is not implemented.")


# -- matplotlib ---------------------------------------------------------------------------------------------------


class BaseMPLPlotter(BasePlotter):
    """A matplotlib figure of window_size pixels: in a pyplot window when one is shown, else on an Agg canvas of
    its own (no pyplot)."""

    @classmethod
    def check_available(cls, options):
        if not IS_MATPLOTLIB_AVAILABLE:
            raise OptionError(f"{type(options).__name__} draws with matplotlib >= "
                              f"{'.'.join(map(str, MIN_MATPLOTLIB))}, which is not installed: pip install "
                              "matplotlib (or pip install genesis-core[plot]).")

    def build(self):
        super().build()
        import matplotlib as mpl

        self.fig = None
        self._pyplot = False
        self.dpi = float(mpl.rcParams.get("figure.dpi", 100))
        self.figsize = (self._options.window_size[0] / self.dpi, self._options.window_size[1] / self.dpi)
        self.show_window = self._window_wanted()

    def _window_wanted(self) -> bool:
        import matplotlib as mpl

        wanted = self._options.show_window
        if wanted is False:
            return False
        backend = str(mpl.get_backend()).lower()
        interactive = backend not in NON_INTERACTIVE_BACKENDS and not backend.startswith("module://")
        if wanted is None:
            return interactive and has_display()
        if not interactive:
            warnings.warn(f"{type(self._options).__name__}(show_window=True): matplotlib's backend {backend!r} "
                          "shows no window; the figure is drawn off-screen.", stacklevel=2)
            return False
        return True

    def _figure(self, **subplots):
        """A figure and its axes (`fig.subplots(**subplots)`)."""
        if self.show_window:
            import matplotlib.pyplot as plt

            self.fig = plt.figure(figsize=self.figsize, dpi=self.dpi, layout=subplots.pop("layout", None))
            self._pyplot = True
        else:
            from matplotlib.backends.backend_agg import FigureCanvasAgg
            from matplotlib.figure import Figure

            self.fig = Figure(figsize=self.figsize, dpi=self.dpi, layout=subplots.pop("layout", None))
            FigureCanvasAgg(self.fig)
        return self.fig.subplots(**subplots)

    def _show_fig(self):
        if self.show_window:
            self.fig.show()

    def cleanup(self):
        super().cleanup()
        if self.fig is not None:
            if self._pyplot:
                import matplotlib.pyplot as plt

                plt.close(self.fig)
            self.fig = None

    def get_image_array(self) -> np.ndarray:
        from matplotlib.backends.backend_agg import FigureCanvasAgg

        if getattr(self, "fig", None) is None:
            raise SceneError(f"{type(self).__name__}.get_image_array(): the figure is drawn from scene.build() (or "
                             "start_recording on a built scene) until scene.stop_recording().")
        canvas = self.fig.canvas
        if isinstance(canvas, FigureCanvasAgg):
            width, height = canvas.get_width_height(physical=True)
            rgb = np.frombuffer(canvas.buffer_rgba(), dtype=np.uint8).reshape(height, width, 4)[..., :3].copy()
        else:  # a canvas without a pixel buffer: through a PNG
            from PIL import Image

            buf = io.BytesIO()
            canvas.print_figure(buf, format="png", dpi="figure")
            buf.seek(0)
            rgb = np.asarray(Image.open(buf).convert("RGB"))
        size = tuple(self._options.window_size)
        if (rgb.shape[1], rgb.shape[0]) != size:
            from PIL import Image

            rgb = np.asarray(Image.fromarray(rgb).resize(size, resample=Image.BILINEAR))
        return rgb


@register_recording(MPLLinePlot)
class MPLLinePlotter(BaseMPLPlotter):
    """Lines of the last history_length samples over simulation time, a subplot per key of dict data. Calls
    data_func once at build to learn the lines (as Genesis World)."""

    def build(self):
        super().build()
        self.line_plot = LinePlotHelper(self._options, self._data_func(), self._what())
        structure = self.line_plot.subplot_structure
        n = len(structure)
        axes = self._figure(nrows=n, ncols=1, sharex=True, squeeze=False, layout="constrained")
        self.axes = list(axes[:, 0])
        self.fig.suptitle(self._options.title)
        self.lines = {}
        for ax, (key, labels) in zip(self.axes, structure.items()):
            ax.set_xlabel(self._options.x_label)
            ax.set_ylabel(self._options.y_label)
            ax.grid(True, alpha=0.3)
            if self.line_plot.is_dict_data and n > 1:
                ax.set_title(key)
            self.lines[key] = [ax.plot([], [], color=c, label=label, linewidth=2)[0]
                               for c, label in zip(itertools.cycle(COLORS), labels)]
        # the legend outside the axes, so that blitting an axes' lines leaves it alone
        self.fig.legend(ncol=sum(map(len, self.lines.values())), loc="outside lower center")
        self.fig.canvas.draw()
        self.caches_bbox = [self.fig.canvas.copy_from_bbox(ax.bbox) for ax in self.axes]
        self.cache_xmax = -1.0
        self._show_fig()

    def _update(self, data, cur_time):
        self.line_plot.process(data, cur_time)
        x = self.line_plot.x_data
        limits_changed = False
        if len(x) > 1:
            # the axes grow (with margins) when the data leaves them, then the whole figure is drawn again
            y_ranges, grow_y = [], False
            for ax, key in zip(self.axes, self.lines):
                ys = [y for line in self.line_plot.y_data[key].values() for y in line]
                if ys:
                    lo, hi = min(ys), max(ys)
                    y_lo, y_hi = ax.get_ylim()
                    grow_y |= lo < y_lo or y_hi < hi
                    y_ranges.append((lo, hi))
                else:
                    y_ranges.append(None)
            ax = self.axes[-1]
            x_lo, x_hi = ax.get_xlim()
            if grow_y or x_lo < 0.0 or x_hi < x[-1]:
                ax.set_xlim(max(0.0, x[0]) - _EPS, x[-1] + max(RESCALE_RATIO_X * (x[-1] - x[0]), RESCALE_MIN_X) + _EPS)
                for ax, span in zip(self.axes, y_ranges):
                    if span is not None:
                        lo, hi = span
                        pad = RESCALE_RATIO_Y * (hi - lo)
                        ax.set_ylim(lo - pad - _EPS, hi + pad + _EPS)
                limits_changed = True
        if limits_changed:
            self.fig.canvas.draw()
        if limits_changed or (len(x) > 1 and self.cache_xmax < x[0] + _EPS):
            self.caches_bbox = [self.fig.canvas.copy_from_bbox(ax.bbox) for ax in self.axes]
            self.cache_xmax = x[-2]
        for ax, cache, (key, lines) in zip(self.axes, self.caches_bbox, self.lines.items()):
            self.fig.canvas.restore_region(cache)
            for line, label in zip(lines, self.line_plot.subplot_structure[key]):
                line.set_data(x, self.line_plot.y_data[key][label])
                ax.draw_artist(line)
            self.fig.canvas.blit(ax.bbox)
        if self.show_window:
            self.fig.canvas.flush_events()

    def cleanup(self):
        super().cleanup()
        self.line_plot.clear_data()
        self.lines.clear()
        self.caches_bbox.clear()
        self.cache_xmax = -1.0


@register_recording(MPLImagePlot)
class MPLImagePlotter(BaseMPLPlotter):
    """The last sample's image filling the figure; a grey image [H, W] through the "plasma" colour map, scaled to
    its finite values' range."""

    def build(self):
        super().build()
        self.ax = self._figure()
        self.fig.subplots_adjust(left=0, right=1, top=1, bottom=0)
        self.ax.set_axis_off()
        self.image_plot = self.ax.imshow(np.zeros((1, 1)), cmap="plasma", origin="upper", aspect="auto")
        self.fig.canvas.draw()
        self.background = self.fig.canvas.copy_from_bbox(self.ax.bbox)
        self._show_fig()

    def _update(self, data, cur_time):
        img = to_array(data, self._what())
        if img.ndim == 3 and img.shape[-1] == 1:
            img = img[..., 0]
        if not (img.ndim == 2 or (img.ndim == 3 and img.shape[-1] in (3, 4))) or 0 in img.shape:
            batched = " (a batched scene's images have a leading n_envs dimension: plot one environment's, img[0])" \
                if img.ndim == 4 else ""
            raise RecordingError(f"{self._what()}: an image must be [H, W], [H, W, 1], [H, W, 3] or [H, W, 4], got "
                                 f"shape {tuple(img.shape)}{batched}.")
        if img.dtype == np.bool_:
            img = img.astype(np.uint8)
        if img.ndim == 2:
            finite = img[np.isfinite(img)] if np.issubdtype(img.dtype, np.floating) else img
            lo, hi = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 1.0)
            if (lo, hi) != tuple(self.image_plot.get_clim()):
                self.image_plot.set_clim(lo, hi)
                self.fig.canvas.draw()
                self.background = self.fig.canvas.copy_from_bbox(self.ax.bbox)
        self.fig.canvas.restore_region(self.background)
        self.image_plot.set_data(img)
        self.ax.draw_artist(self.image_plot)
        self.fig.canvas.blit(self.ax.bbox)
        if self.show_window:
            self.fig.canvas.flush_events()

    def cleanup(self):
        super().cleanup()
        self.ax = self.image_plot = self.background = None


def orthogonals(normal: np.ndarray) -> tuple:
    """Two unit vectors (u, v) orthogonal to the unit vector `normal` and to each other, (u, v, normal)
    right-handed: Genesis World's utils.geom.orthogonals, so that a vector field plot looks as it does there."""
    a_x, a_y, a_z = normal
    if abs(a_y) < 0.5:
        b = np.array([-a_x * a_y, 1.0 - a_y**2, -a_z * a_y])
    else:
        b = np.array([-a_x * a_z, -a_y * a_z, 1.0 - a_z**2])
    b /= np.linalg.norm(b)
    return np.cross(b, normal), b


@register_recording(MPLVectorFieldPlot)
class MPLVectorFieldPlotter(BaseMPLPlotter):
    """Arrows at the options' positions, the samples' vectors (N, 3), both projected on the plane normal to
    `normal`, coloured by the vectors' magnitude on [0, max_magnitude]."""

    def build(self):
        super().build()
        o = self._options
        self._positions = np.asarray(o.positions, dtype=np.float64)
        self._normal = np.asarray(o.normal, dtype=np.float64) / np.linalg.norm(o.normal)
        self._uv = np.stack(orthogonals(self._normal), axis=1)  # [3, 2]: world -> plane
        xy = self._positions @ self._uv
        (x_min, y_min), (x_max, y_max) = xy.min(axis=0), xy.max(axis=0)
        span = float(np.max(np.ptp(xy, axis=0)))
        margin = 0.1 * span if span > 1e-9 else 0.5  # one point (or all at one place): a unit-wide view
        self.ax = self._figure()
        self.fig.suptitle(o.title)
        self.ax.set_xlim(x_min - margin, x_max + margin)
        self.ax.set_ylim(y_min - margin, y_max + margin)
        self.ax.set_aspect("equal")
        self.ax.set_axis_off()
        n = len(xy)
        self._scatter = self.ax.scatter(xy[:, 0], xy[:, 1], s=8, c=np.zeros(n), cmap="plasma", vmin=0,
                                        vmax=o.max_magnitude, zorder=0)
        self._quiver = self.ax.quiver(xy[:, 0], xy[:, 1], np.zeros(n), np.zeros(n), np.zeros(n), cmap="plasma",
                                      clim=(0, o.max_magnitude), zorder=1, scale_units="xy", scale=1)
        self.fig.colorbar(self._quiver, ax=self.ax, label="Magnitude")
        self.fig.canvas.draw()
        self._background = self.fig.canvas.copy_from_bbox(self.ax.bbox)
        self._show_fig()
        self.fig.canvas.mpl_connect("resize_event", self._on_resize)

    def _on_resize(self, event):
        if self.fig is not None:
            self.fig.canvas.draw()
            self._background = self.fig.canvas.copy_from_bbox(self.ax.bbox)

    def _update(self, data, cur_time):
        vectors = to_array(data, self._what()).astype(np.float64)
        n = len(self._positions)
        if vectors.shape != (n, 3):
            raise RecordingError(f"{self._what()}: data_func must return the {n} vectors at the options' positions, "
                                 f"({n}, 3); got shape {tuple(vectors.shape)}.")
        magnitudes = np.linalg.norm(vectors, axis=-1)
        xy, uv = self._positions @ self._uv, vectors @ self._uv
        self._scatter.set_offsets(xy)
        self._scatter.set_array(magnitudes)
        self._quiver.set_offsets(xy)
        self._quiver.set_UVC(*(uv * self._options.scale_factor).T)
        self._quiver.set_array(magnitudes)
        self.fig.canvas.restore_region(self._background)
        self.ax.draw_artist(self._scatter)
        self.ax.draw_artist(self._quiver)
        self.fig.canvas.blit(self.ax.bbox)
        if self.show_window:
            self.fig.canvas.flush_events()

    def cleanup(self):
        super().cleanup()
        self.ax = self._scatter = self._quiver = self._background = None


# -- pyqtgraph ----------------------------------------------------------------------------------------------------


@register_recording(PyQtLinePlot)
class PyQtLinePlotter(BasePlotter):
    """MPLLinePlot's lines in a pyqtgraph window (hidden with show_window False, or None without a display)."""

    @classmethod
    def check_available(cls, options):
        if not IS_PYQTGRAPH_AVAILABLE:
            raise OptionError("PyQtLinePlot draws with pyqtgraph and a Qt binding, which are not installed: pip "
                              "install pyqtgraph PyQt6; or use gs.recorders.MPLLinePlot (matplotlib), as Genesis "
                              "World's scripts do when recorders.plotters.IS_PYQTGRAPH_AVAILABLE is False.")

    def build(self):
        super().build()
        import pyqtgraph as pg

        self.line_plot = LinePlotHelper(self._options, self._data_func(), self._what())
        self.show_window = self._options.show_window if self._options.show_window is not None else has_display()
        self.app = pg.QtWidgets.QApplication.instance() or pg.QtWidgets.QApplication([])
        self.widget = pg.GraphicsLayoutWidget(show=self.show_window, title=self._options.title)
        self.widget.resize(*self._options.window_size)
        self.plot_widgets, self.curves = [], {}
        for i, (key, labels) in enumerate(self.line_plot.subplot_structure.items()):
            if i > 0:
                self.widget.nextRow()
            plot = self.widget.addPlot(title=key if self.line_plot.is_dict_data else self._options.title)
            plot.setLabel("bottom", self._options.x_label)
            plot.setLabel("left", self._options.y_label)
            plot.showGrid(x=True, y=True, alpha=0.3)
            plot.addLegend()
            self.curves[key] = [plot.plot(pen=pg.mkPen(color=c, width=2), name=label)
                                for c, label in zip(itertools.cycle(COLORS), labels)]
            self.plot_widgets.append(plot)

    def _update(self, data, cur_time):
        self.line_plot.process(data, cur_time)
        for key, curves in self.curves.items():
            for curve, label in zip(curves, self.line_plot.subplot_structure[key]):
                curve.setData(x=self.line_plot.x_data, y=self.line_plot.y_data[key][label])
        self.app.processEvents()

    def get_image_array(self) -> np.ndarray:
        import pyqtgraph as pg

        bgra = pg.imageToArray(self.widget.grab().toImage(), copy=True, transpose=False)  # [height, width, BGRA]
        return np.ascontiguousarray(bgra[..., 2::-1])  # RGB

    def cleanup(self):
        super().cleanup()
        if self.widget is not None:
            self.widget.close()
            self.widget = None
        self.plot_widgets.clear()
        self.curves.clear()
        self.line_plot.clear_data()


__all__ = [
    "IS_MATPLOTLIB_AVAILABLE", "IS_PYQTGRAPH_AVAILABLE", "BaseMPLPlotter", "BasePlotter", "LinePlotHelper",
    "MPLImagePlotter", "MPLLinePlotter", "MPLVectorFieldPlotter", "PyQtLinePlotter", "has_display", "orthogonals",
]
