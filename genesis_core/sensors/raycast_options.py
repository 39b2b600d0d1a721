"""Genesis World's ray-cast sensor options: the ray patterns (`gs.sensors.GridPattern`, `SphericalPattern`,
`DepthCameraPattern`, their base `RaycastPattern`) and the sensors (`gs.sensors.Raycaster`, also reached as
`gs.sensors.Lidar`, and `gs.sensors.DepthCamera`), as frozen attrs classes validated on construction: a bad value
raises an `OptionError` naming the class, the field, the value and the accepted range.

A pattern gives its rays in the sensor frame: `ray_starts` and `ray_dirs`, each `(*return_shape, 3)`. The frames are
Genesis World's: the sensor looks along +x with +y to its left and +z up (a depth camera's pixel (row i, column j)
looks along (1, (cx - u) / fx, (cy - v) / fy) at the pixel centre (u, v) = (j + 0.5, i + 0.5)); a grid's rays start
on the sensor's x-y plane and run along `direction` (down by default)."""

from __future__ import annotations

import math
from numbers import Integral

import attrs
import numpy as np
import torch

from .. import validators as v
from ..bases import Options
from ..errors import OptionError
from .options import NoisySensorOptionsMixin, RigidSensorOptionsMixin, _fail, _floats, _is_real, _rgba

# a grid's last point is kept when it lies within this share of a step past size / 2 (rounding of size/resolution)
GRID_ENDPOINT_TOL = 1e-6
# Genesis World's bound on a grid's spacing (m)
MIN_GRID_RESOLUTION = 1e-3


@attrs.define(frozen=True, slots=False)
class RaycastPattern(Options):
    """Base of the ray patterns: `return_shape` (the reading's shape per environment), `ray_starts` and
    `ray_dirs` (float64 tensors `(*return_shape, 3)`, the rays' starts (m) and unit directions in the sensor
    frame)."""

    @property
    def return_shape(self) -> tuple:
        return self._rays()[1].shape[:-1]

    @property
    def ray_starts(self) -> torch.Tensor:
        return torch.as_tensor(self._rays()[0])

    @property
    def ray_dirs(self) -> torch.Tensor:
        return torch.as_tensor(self._rays()[1])

    def _rays(self) -> tuple[np.ndarray, np.ndarray]:
        """(starts, unit directions), float64 NumPy `(*return_shape, 3)`, sensor frame."""
        raise NotImplementedError(f"{type(self).__name__} gives no rays.")


def _positive_resolution(inst, attr, value):
    if not _is_real(value) or not math.isfinite(value) or value < MIN_GRID_RESOLUTION:
        _fail(inst, attr, value, f"a finite number >= {MIN_GRID_RESOLUTION} m (Genesis World's bound)")


def _sizes(inst, attr, value):
    if (not isinstance(value, tuple) or len(value) != 2
            or not all(_is_real(x) and math.isfinite(x) and x >= 0 for x in value)):
        _fail(inst, attr, value, "2 finite numbers >= 0 (length along x, width along y, m)")


def _direction(inst, attr, value):
    v.vec(3)(inst, attr, value)
    if math.hypot(*value) < 1e-12:
        _fail(inst, attr, value, "3 finite numbers, not all 0 (a direction)")


@attrs.define(frozen=True, slots=False)
class GridPattern(RaycastPattern):
    """A grid of parallel rays: starts at (x_i, y_j, 0) in the sensor frame, x_i = -size[0] / 2 + i resolution up
    to size[0] / 2 (and y_j likewise along size[1]), all along `direction` (normalised). return_shape: (number of
    x_i, number of y_j); Genesis World's height scan of a legged robot is GridPattern(resolution=0.1,
    size=(1.6, 1.0)): 17 x 11 rays pointing down.

    resolution: the spacing, m (>= 1e-3). size: (length, width), m (>= 0). direction: the rays' direction (any
    length but 0).
    """

    resolution: float = attrs.field(default=0.1, converter=_floats, validator=_positive_resolution)
    size: tuple = attrs.field(default=(2.0, 2.0), converter=v.to_float_tuple, validator=_sizes)
    direction: tuple = attrs.field(default=(0.0, 0.0, -1.0), converter=v.to_float_tuple, validator=_direction)

    def coords(self) -> tuple[np.ndarray, np.ndarray]:
        """The grid's x and y coordinates (m): -size / 2 + k resolution while <= size / 2 (the end point kept when
        size / resolution is whole up to rounding)."""
        out = []
        for s in self.size:
            n = math.floor(s / self.resolution + GRID_ENDPOINT_TOL) + 1
            out.append(-s / 2 + self.resolution * np.arange(n, dtype=np.float64))
        return tuple(out)

    def _rays(self):
        x, y = self.coords()
        starts = np.zeros((len(x), len(y), 3))
        starts[..., 0] = x[:, None]
        starts[..., 1] = y[None, :]
        d = np.asarray(self.direction) / np.linalg.norm(self.direction)
        return starts, np.broadcast_to(d, starts.shape).copy()


def _fov_pair(value):
    """(horizontal, vertical): each a number (centred on 0) or a (min, max) pair, degrees."""
    if not isinstance(value, (tuple, list)):
        return value
    return tuple(_floats(x) for x in value)


def _fov(inst, attr, value):
    expect = ("(horizontal, vertical), each a number in [0, 360] (centred on 0) or a (min, max) pair of numbers "
              "with 0 <= max - min <= 360, degrees")
    if not isinstance(value, tuple) or len(value) != 2:
        _fail(inst, attr, value, expect)
    for f in value:
        if _is_real(f):
            if not 0 <= f <= 360:
                _fail(inst, attr, value, expect)
        elif not (isinstance(f, tuple) and len(f) == 2 and all(_is_real(x) and math.isfinite(x) for x in f)
                  and 0 <= f[1] - f[0] <= 360):
            _fail(inst, attr, value, expect)


def _counts(inst, attr, value):
    if (not isinstance(value, tuple) or len(value) != 2
            or not all(isinstance(n, Integral) and not isinstance(n, bool) and n >= 1 for n in value)):
        _fail(inst, attr, value, "(horizontal, vertical): 2 ints >= 1")


def _opt_pair(value):
    return tuple(value) if isinstance(value, (tuple, list)) else value


def _resolutions(inst, attr, value):
    if not isinstance(value, tuple) or len(value) != 2 or not all(
            x is None or (_is_real(x) and math.isfinite(x) and x > 0) for x in value):
        _fail(inst, attr, value, "(horizontal, vertical): each None or a finite number > 0, degrees")


def _angle_lists(value):
    if not isinstance(value, (tuple, list)):
        return value
    return tuple(None if a is None else _floats(a) if not _is_real(a) else (float(a),) for a in value)


def _angles(inst, attr, value):
    if not isinstance(value, tuple) or len(value) != 2 or not all(
            a is None or (isinstance(a, tuple) and a and all(_is_real(x) and math.isfinite(x) for x in a))
            for a in value):
        _fail(inst, attr, value, "(horizontal, vertical): each None or a non-empty sequence of finite numbers, "
                                 "degrees")


@attrs.define(frozen=True, slots=False)
class SphericalPattern(RaycastPattern):
    """Rays from the sensor's origin at every (azimuth theta, elevation phi) of a grid of angles, along
    (cos theta cos phi, sin theta cos phi, sin phi) in the sensor frame (azimuth 0: +x; 90: +y; elevation up +z).
    return_shape: (horizontal lines, vertical lines).

    Per axis (horizontal, vertical), the first of: `angles` (the angles themselves, degrees); `fov` with
    `angular_resolution` (ceil(span / resolution) + 1 angles evenly over the span, or ceil(span / resolution)
    for a full 360-degree turn); `fov` with `n_points` (n_points angles evenly over the span; over a full turn
    they are spaced 360 / n, the last short of the first). fov: a number (centred on 0) or (min, max), degrees.
    Defaults (Genesis World's): fov (360, 60), n_points (128, 64).
    """

    fov: tuple = attrs.field(default=(360.0, 60.0), converter=_fov_pair, validator=_fov)
    n_points: tuple = attrs.field(default=(128, 64), converter=_opt_pair, validator=_counts)
    angular_resolution: tuple = attrs.field(default=(None, None), converter=_opt_pair, validator=_resolutions)
    angles: tuple = attrs.field(default=(None, None), converter=_angle_lists, validator=_angles)

    def angles_deg(self) -> tuple[np.ndarray, np.ndarray]:
        """The horizontal and vertical angles, degrees (Genesis World 1.4.5's rule)."""
        out = []
        for n, fov, res, given in zip(self.n_points, self.fov, self.angular_resolution, self.angles):
            if given is not None:
                out.append(np.asarray(given, dtype=np.float64))
                continue
            lo, hi = (fov[0], fov[1]) if isinstance(fov, tuple) else (-fov / 2.0, fov / 2.0)
            span = hi - lo
            full = span >= 360.0 - 1e-9
            if res is not None:
                n = math.ceil(span / res) + (0 if full else 1)
            if full:
                hi -= span / n
            out.append(np.linspace(lo, hi, n))
        return tuple(out)

    def _rays(self):
        h, e = (np.radians(a) for a in self.angles_deg())
        theta, phi = np.meshgrid(h, e, indexing="ij")
        dirs = np.stack([np.cos(theta) * np.cos(phi), np.sin(theta) * np.cos(phi), np.sin(phi)], axis=-1)
        return np.zeros_like(dirs), dirs


def _resolution(inst, attr, value):
    if (not isinstance(value, tuple) or len(value) != 2
            or not all(isinstance(n, Integral) and not isinstance(n, bool) and n >= 1 for n in value)):
        _fail(inst, attr, value, "(width, height): 2 ints >= 1, pixels")


def _opt_positive(inst, attr, value):
    if value is not None and not (_is_real(value) and math.isfinite(value) and value > 0):
        _fail(inst, attr, value, "None or a finite number > 0")


def _opt_finite(inst, attr, value):
    if value is not None and not (_is_real(value) and math.isfinite(value)):
        _fail(inst, attr, value, "None or a finite number (pixels)")


def _opt_fov(inst, attr, value):
    if value is not None and not (_is_real(value) and 0 < value < 180):
        _fail(inst, attr, value, "None or a number in (0, 180), degrees")


def _opt_float(value):
    return None if value is None else _floats(value)


@attrs.define(frozen=True, slots=False)
class DepthCameraPattern(RaycastPattern):
    """A pinhole camera's rays, one per pixel, from the sensor's origin: pixel (row i, column j) looks along
    (1, -(u - cx) / fx, -(v - cy) / fy) (normalised) in the sensor frame, (u, v) = (j + 0.5, i + 0.5): the camera
    looks along +x, image right is -y, image up is +z. return_shape: (height, width).

    res: (width, height), pixels. fx, fy: focal lengths, pixels; unless both are given they come from the fields of
    view: fov_horizontal alone (the vertical one keeps the pixels square), fov_vertical alone (likewise), or both
    (degrees, in (0, 180)). cx, cy: the principal point, pixels (default: the image centre). Defaults (Genesis
    World's): 128 x 96 pixels, fov_horizontal 90.
    """

    res: tuple = attrs.field(default=(128, 96), converter=_opt_pair, validator=_resolution)
    fx: float | None = attrs.field(default=None, converter=_opt_float, validator=_opt_positive)
    fy: float | None = attrs.field(default=None, converter=_opt_float, validator=_opt_positive)
    cx: float | None = attrs.field(default=None, converter=_opt_float, validator=_opt_finite)
    cy: float | None = attrs.field(default=None, converter=_opt_float, validator=_opt_finite)
    fov_horizontal: float | None = attrs.field(default=90.0, converter=_opt_float, validator=_opt_fov)
    fov_vertical: float | None = attrs.field(default=None, converter=_opt_float, validator=_opt_fov)

    def __attrs_post_init__(self):
        if (self.fx is None or self.fy is None) and self.fov_horizontal is None and self.fov_vertical is None:
            raise OptionError("DepthCameraPattern: give fov_horizontal or fov_vertical (degrees), or both fx and fy "
                              f"(pixels); got fx={self.fx!r}, fy={self.fy!r} and no field of view.")

    @property
    def width(self) -> int:
        return self.res[0]

    @property
    def height(self) -> int:
        return self.res[1]

    def intrinsics(self) -> tuple[float, float, float, float]:
        """(fx, fy, cx, cy), pixels (Genesis World's rule)."""
        w, h = self.res
        fx, fy = self.fx, self.fy
        if fx is None or fy is None:
            if self.fov_vertical is None:
                fh = math.radians(self.fov_horizontal)
                fv = 2.0 * math.atan(h / w * math.tan(fh / 2.0))
            elif self.fov_horizontal is None:
                fv = math.radians(self.fov_vertical)
                fh = 2.0 * math.atan(w / h * math.tan(fv / 2.0))
            else:
                fh, fv = math.radians(self.fov_horizontal), math.radians(self.fov_vertical)
            fx, fy = w / (2.0 * math.tan(fh / 2.0)), h / (2.0 * math.tan(fv / 2.0))
        cx = w * 0.5 if self.cx is None else self.cx
        cy = h * 0.5 if self.cy is None else self.cy
        return fx, fy, cx, cy

    def _rays(self):
        w, h = self.res
        fx, fy, cx, cy = self.intrinsics()
        u, vv = np.meshgrid(np.arange(w) + 0.5, np.arange(h) + 0.5, indexing="xy")  # (h, w)
        dirs = np.stack([np.ones_like(u), -(u - cx) / fx, -(vv - cy) / fy], axis=-1)
        dirs /= np.linalg.norm(dirs, axis=-1, keepdims=True)
        return np.zeros_like(dirs), dirs


def _pattern(kind):
    def check(inst, attr, value):
        if not isinstance(value, kind):
            _fail(inst, attr, value, f"a gs.sensors.{kind.__name__}" + (
                " (GridPattern, SphericalPattern or DepthCameraPattern)" if kind is RaycastPattern else ""))

    return check


def _no_hit(inst, attr, value):
    if value is not None and not (_is_real(value) and math.isfinite(value)):
        _fail(inst, attr, value, "None (max_range) or a finite number: the readings are sensor state, which must be "
                                 "finite")


def _history_length(inst, attr, value):
    v.int_at_least(0)(inst, attr, value)
    if value > 0:
        _fail(inst, attr, value, "0: reading past values (Genesis World 1.4.5's history_length) is not supported; "
                                 "keep the readings of each step (sensor.read() after scene.step())")


@attrs.define(frozen=True, kw_only=True, slots=False)
class Raycaster(RigidSensorOptionsMixin, NoisySensorOptionsMixin):
    """A ray-cast range sensor (a lidar, a height scan): the rays of `pattern` cast from the sensor frame (the link
    frame moved by pos_offset and turned by euler_offset) against everything the cameras draw, every step.
    `read()` gives Genesis World's named tuple `RaycasterData(points, distances)`: distances `([n_envs,]
    *pattern.return_shape)` (m along each ray), points `([n_envs,] *pattern.return_shape, 3)` (m; None with
    return_points=False).

    A ray that hits nothing, or whose hit lies outside [min_range, max_range), reads distance `no_hit_value` and
    point (0, 0, 0). points: the hit in world coordinates with return_world_frame=True; otherwise the hit relative
    to the ray's start, in the axes of the link (Genesis World's local frame: distance times the ray's direction in
    the link frame).

    entity_idx, link_idx_local: the link that carries the sensor; entity_idx=-1 (or None): a sensor fixed in the
    world, pos_offset and euler_offset then its world pose (Genesis World 1.4.5's static sensor).
    min_range (m, >= 0), max_range (m, > min_range; default 20), no_hit_value (m, finite; default max_range).
    return_points: False reads distances only (points None; 1 channel a ray instead of 4).
    resolution, bias, noise, random_walk, delay, jitter: the measurement model of every channel (the points'
    coordinates, then the distances: 4 channels a ray, or 1 with return_points=False; one number for all or one
    per channel). history_length: 0 only (Genesis World 1.4.5's read of past steps is not supported).
    debug_*: Genesis World's debug drawing (accepted, not drawn here).
    """

    pattern: RaycastPattern | None = attrs.field(default=None, validator=_pattern(RaycastPattern))
    min_range: float = attrs.field(default=0.0, converter=_floats, validator=v.non_negative)
    max_range: float = attrs.field(default=20.0, converter=_floats, validator=v.positive)
    no_hit_value: float | None = attrs.field(default=None, converter=_opt_float, validator=_no_hit)
    return_world_frame: bool = attrs.field(default=False, validator=v.is_bool)
    return_points: bool = attrs.field(default=True, validator=v.is_bool)
    history_length: int = attrs.field(default=0, validator=_history_length)
    debug_sphere_radius: float = attrs.field(default=0.02, converter=_floats, validator=v.positive)
    debug_ray_start_color: tuple = attrs.field(default=(0.5, 0.5, 1.0, 1.0), converter=v.to_float_tuple,
                                               validator=_rgba)
    debug_ray_hit_color: tuple = attrs.field(default=(1.0, 0.5, 0.5, 1.0), converter=v.to_float_tuple,
                                             validator=_rgba)

    def __attrs_post_init__(self):
        name = type(self).__name__
        if self.max_range <= self.min_range:
            raise OptionError(f"{name}: max_range={self.max_range!r} must exceed min_range={self.min_range!r}.")
        if self.no_hit_value is None:
            object.__setattr__(self, "no_hit_value", self.max_range)
        NoisySensorOptionsMixin.__attrs_post_init__(self)


@attrs.define(frozen=True, kw_only=True, slots=False)
class DepthCamera(Raycaster):
    """A depth camera by ray casting: a Raycaster whose pattern is a DepthCameraPattern (default:
    DepthCameraPattern()); `read_image()` gives its distances as the image `([n_envs,] height, width)`: the range
    along each pixel's ray (Genesis World's depth here, not the distance to the image plane).
    """

    pattern: DepthCameraPattern = attrs.field(factory=DepthCameraPattern, validator=_pattern(DepthCameraPattern))


Lidar = Raycaster

__all__ = ["DepthCamera", "DepthCameraPattern", "GridPattern", "Lidar", "RaycastPattern", "Raycaster",
           "SphericalPattern"]
