"""Genesis World's sensor options (`gs.sensors.IMU`, `Contact`, `ContactForce`, their bases and mixins), as frozen
attrs classes validated on construction: a bad value raises an `OptionError` naming the class, the field, the value
and the accepted range. `scene.add_sensor(options)` checks what needs the scene (the entity, the link)."""

from __future__ import annotations

import math
from numbers import Real
from types import MappingProxyType

import attrs
import numpy as np

from .. import validators as v
from ..bases import Options
from ..errors import OptionError


def _fail(inst, attr, value, expect):
    raise OptionError(f"{type(inst).__name__}.{attr.name}={value!r} is not accepted: expected {expect}.")


def _is_real(x):
    return isinstance(x, (Real, np.floating, np.integer)) and not isinstance(x, (bool, np.bool_))


def _floats(value):
    """A number or a flat sequence of numbers as a float or a tuple of floats (other values unchanged, for the
    validator to refuse)."""
    if _is_real(value):
        return float(value)
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        return value
    if arr.ndim == 1:
        return tuple(float(x) for x in arr)
    if arr.ndim == 2:
        return tuple(tuple(float(x) for x in row) for row in arr)
    return value


def _per_channel(lo=None, allow_inf=False):
    """A number or a 1-D sequence of numbers (one per channel; the sensor checks the length), finite (or +inf
    where allow_inf), each >= lo when lo is given."""

    def check(inst, attr, value):
        items = (value,) if _is_real(value) else value
        expect = ("a number or a sequence of numbers" + (f" >= {lo}" if lo is not None else "")
                  + (" (inf allowed)" if allow_inf else ", finite"))
        if not isinstance(items, tuple) or not items or not all(_is_real(x) for x in items):
            _fail(inst, attr, value, expect)
        for x in items:
            if math.isnan(x) or (math.isinf(x) and not (allow_inf and x > 0)) or (lo is not None and x < lo):
                _fail(inst, attr, value, expect)

    return check


def _vec3_lax(lo=None, allow_inf=False):
    """Genesis World's lax 3-vector: one number (used for the 3 axes) or 3 numbers; stored as 3 floats."""
    inner = _per_channel(lo, allow_inf)

    def check(inst, attr, value):
        inner(inst, attr, value)
        if not isinstance(value, tuple) or len(value) != 3:
            _fail(inst, attr, value, "one number or 3 numbers (x, y, z)")

    return check


def _lax3(value):
    value = _floats(value)
    return (value,) * 3 if isinstance(value, float) else value


def _rgba(inst, attr, value):
    if (not isinstance(value, tuple) or len(value) != 4 or not all(_is_real(x) for x in value)
            or not all(0 <= x <= 1 for x in value)):
        _fail(inst, attr, value, "4 numbers (r, g, b, a) in [0, 1]")


def _entity_idx(inst, attr, value):
    if value is None:
        return
    if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < -1:
        _fail(inst, attr, value, "an int >= -1 (an index in scene.entities), or None")


def _cross_axis(inst, attr, value):
    """Genesis World's cross-axis coupling: a number (every off-diagonal entry), 3 numbers (the off-diagonal
    entries of each column), or a 3x3 matrix used as is."""
    expect = "a number in [0, 1], 3 numbers in [0, 1], or a 3x3 matrix of finite numbers"
    if _is_real(value):
        if not 0 <= value <= 1:
            _fail(inst, attr, value, expect)
        return
    if isinstance(value, tuple) and len(value) == 3 and all(_is_real(x) for x in value):
        if not all(0 <= x <= 1 for x in value):
            _fail(inst, attr, value, expect)
        return
    if (isinstance(value, tuple) and len(value) == 3 and all(isinstance(r, tuple) and len(r) == 3 for r in value)
            and all(_is_real(x) and math.isfinite(x) for r in value for x in r)):
        return
    _fail(inst, attr, value, expect)


def alignment_matrix(coupling) -> np.ndarray:
    """The 3x3 matrix that a cross-axis coupling option stands for (applied to the true vector: m = M v).

    A number s: 1 on the diagonal, s off it. 3 numbers (a, b, c): column j's off-diagonal entries are the j-th
    number, as Genesis World fills them. A 3x3 matrix: itself."""
    if isinstance(coupling, float):
        m = np.full((3, 3), coupling)
        np.fill_diagonal(m, 1.0)
        return m
    arr = np.asarray(coupling, dtype=np.float64)
    if arr.shape == (3, 3):
        return arr
    m = np.eye(3)
    for j in range(3):
        for i in range(3):
            if i != j:
                m[i, j] = arr[j]
    return m


@attrs.define(frozen=True, kw_only=True, slots=False)
class SensorOptions(Options):
    """Base of every sensor's options.

    delay: seconds by which `read()` lags the physics (>= 0); applied as a whole number of steps,
        round(delay / dt) (a warning says so when delay is not a multiple of dt). `read_ground_truth()` is never
        delayed.
    update_ground_truth_only: True: only the ground truth is computed each step; `read()` keeps returning zeros
        (saves the measurement model's work where only the ground truth is used).
    draw_debug: accepted for Genesis World's scripts; the viewer here draws no sensor shapes.
    """

    delay: float = attrs.field(default=0.0, converter=_floats, validator=v.non_negative)
    update_ground_truth_only: bool = attrs.field(default=False, validator=v.is_bool)
    draw_debug: bool = attrs.field(default=False, validator=v.is_bool)


@attrs.define(frozen=True, kw_only=True, slots=False)
class RigidSensorOptionsMixin(SensorOptions):
    """Options of a sensor attached to a link of a rigid entity.

    entity_idx: the entity's index in `scene.entities` (`entity.idx`); the sensors here need one (Genesis World's
        default, -1, a sensor attached to nothing, is refused by add_sensor).
    link_idx_local: the link's index within the entity (0: the base link).
    pos_offset: the sensor's position in the link frame, m.
    euler_offset: the sensor frame's rotation from the link frame, degrees (roll, pitch, yaw about the link's
        fixed x, y, z axes: R = Rz(yaw) Ry(pitch) Rx(roll), as Genesis World's euler angles).
    """

    entity_idx: int | None = attrs.field(default=-1, validator=_entity_idx)
    link_idx_local: int = attrs.field(default=0, validator=v.int_at_least(0))
    pos_offset: tuple = attrs.field(default=(0.0, 0.0, 0.0), converter=v.to_float_tuple, validator=v.vec(3))
    euler_offset: tuple = attrs.field(default=(0.0, 0.0, 0.0), converter=v.to_float_tuple, validator=v.vec(3))


@attrs.define(frozen=True, kw_only=True, slots=False)
class NoisySensorOptionsMixin(SensorOptions):
    """The measurement model of an analog sensor (applied to the delayed ground truth, in this order: bias, white
    noise and random walk added, then the sensor's own clipping, then quantisation). Each of resolution, bias,
    noise and random_walk is one number (every channel) or one number per channel of the sensor.

    resolution: the quantum of the reading (>= 0; 0: none): the reading is rounded to a multiple of it.
    bias: a constant added to the reading.
    noise: the standard deviation of the white noise added each step (>= 0).
    random_walk: the standard deviation of the step added each step to the drift (>= 0): the drift is a random
        walk, its standard deviation after n steps random_walk * sqrt(n) (per step, not per sqrt(second), as
        Genesis World).
    jitter: seconds (<= delay) of random extra read delay: each step, each environment reads the sensor
        delay + u * jitter seconds late, u uniform in [0, 1) (as Genesis World 1.4.5), interpolated linearly
        between the two buffered steps around that time.
    interpolate: must be True when jitter > 0 (Genesis World's rule); without jitter the delay is a whole number
        of steps and nothing is interpolated.
    """

    resolution: float | tuple = attrs.field(default=0.0, converter=_floats, validator=_per_channel(lo=0.0))
    bias: float | tuple = attrs.field(default=0.0, converter=_floats, validator=_per_channel())
    noise: float | tuple = attrs.field(default=0.0, converter=_floats, validator=_per_channel(lo=0.0))
    random_walk: float | tuple = attrs.field(default=0.0, converter=_floats, validator=_per_channel(lo=0.0))
    jitter: float = attrs.field(default=0.0, converter=_floats, validator=v.non_negative)
    interpolate: bool = attrs.field(default=False, validator=v.is_bool)

    def __attrs_post_init__(self):
        name = type(self).__name__
        if self.jitter > 0 and not self.interpolate:
            raise OptionError(f"{name}: interpolate=True is needed when jitter > 0 (got jitter={self.jitter!r}).")
        if self.jitter > self.delay:
            raise OptionError(f"{name}: jitter={self.jitter!r} must be <= delay={self.delay!r} (Genesis World's "
                              "rule); raise delay or lower jitter.")


@attrs.define(frozen=True, kw_only=True, slots=False)
class Contact(RigidSensorOptionsMixin):
    """Whether the link touches anything (a contact of the last substep involves it): `read()` gives a bool
    tensor `([n_envs,] 1)`.

    debug_sphere_radius, debug_color: Genesis World's debug drawing (accepted, not drawn here).
    """

    debug_sphere_radius: float = attrs.field(default=0.05, converter=_floats, validator=v.positive)
    debug_color: tuple = attrs.field(default=(1.0, 0.0, 1.0, 0.5), converter=v.to_float_tuple, validator=_rgba)


@attrs.define(frozen=True, kw_only=True, slots=False)
class ContactForce(RigidSensorOptionsMixin, NoisySensorOptionsMixin):
    """The net contact force on the link (N), in the sensor frame (the link frame rotated by euler_offset):
    `read()` gives `([n_envs,] 3)`.

    min_force: per axis (one number or 3, >= 0): a measured component whose magnitude is below it reads 0.
    max_force: per axis (one number or 3, > min_force, inf allowed): measured components are clipped to
        [-max_force, max_force].
    resolution, bias, noise, random_walk: one number or 3 (x, y, z).
    debug_color, debug_scale: Genesis World's debug drawing (accepted, not drawn here).
    """

    resolution: tuple = attrs.field(default=0.0, converter=_lax3, validator=_vec3_lax(lo=0.0))
    min_force: tuple = attrs.field(default=0.0, converter=_lax3, validator=_vec3_lax(lo=0.0))
    max_force: tuple = attrs.field(default=math.inf, converter=_lax3, validator=_vec3_lax(lo=0.0, allow_inf=True))
    debug_color: tuple = attrs.field(default=(1.0, 0.0, 1.0, 0.5), converter=v.to_float_tuple, validator=_rgba)
    debug_scale: float = attrs.field(default=0.01, converter=_floats, validator=v.positive)

    def __attrs_post_init__(self):
        if any(hi <= lo for lo, hi in zip(self.min_force, self.max_force)):
            raise OptionError(f"ContactForce: max_force={self.max_force!r} must exceed min_force={self.min_force!r} "
                              "on every axis.")
        NoisySensorOptionsMixin.__attrs_post_init__(self)


_IMU_PARTS = ("acc", "gyro", "mag")


@attrs.define(frozen=True, kw_only=True, slots=False)
class IMU(RigidSensorOptionsMixin, NoisySensorOptionsMixin):
    """A 9-axis inertial measurement unit on a link, read in the sensor frame (the link frame rotated by
    euler_offset, at pos_offset): `read()` gives Genesis World's named tuple `IMUData(lin_acc, ang_vel, mag)`,
    each `([n_envs,] 3)`.

    lin_acc (accelerometer, m/s^2): the proper acceleration of the sensor point, a - g (at rest on the ground:
        +|g| along the up axis; in free fall: 0), a including the link's angular acceleration and centripetal
        terms at pos_offset. ang_vel (gyroscope, rad/s): the link's angular velocity. mag (magnetometer, the unit
        of magnetic_field): the world's magnetic field vector.

    For each of acc_, gyro_, mag_: resolution, noise, bias, random_walk (one number or 3, as the generic
    NoisySensorOptionsMixin fields, which the IMU takes from these: give these, not the generic ones), and
    cross_axis_coupling: a number in [0, 1] (every off-diagonal entry of the axes' alignment matrix), 3 numbers
    in [0, 1] (the off-diagonal entries of column x, y, z) or a 3x3 matrix; the measurement is M v.
    magnetic_field: the world's magnetic field (one number or 3; Genesis World's default (0, 0, 0.5)).
    debug_*: Genesis World's debug drawing (accepted, not drawn here).
    """

    acc_resolution: tuple = attrs.field(default=0.0, converter=_lax3, validator=_vec3_lax(lo=0.0))
    acc_cross_axis_coupling: float | tuple = attrs.field(default=0.0, converter=_floats, validator=_cross_axis)
    acc_noise: tuple = attrs.field(default=0.0, converter=_lax3, validator=_vec3_lax(lo=0.0))
    acc_bias: tuple = attrs.field(default=0.0, converter=_lax3, validator=_vec3_lax())
    acc_random_walk: tuple = attrs.field(default=0.0, converter=_lax3, validator=_vec3_lax(lo=0.0))
    gyro_resolution: tuple = attrs.field(default=0.0, converter=_lax3, validator=_vec3_lax(lo=0.0))
    gyro_cross_axis_coupling: float | tuple = attrs.field(default=0.0, converter=_floats, validator=_cross_axis)
    gyro_noise: tuple = attrs.field(default=0.0, converter=_lax3, validator=_vec3_lax(lo=0.0))
    gyro_bias: tuple = attrs.field(default=0.0, converter=_lax3, validator=_vec3_lax())
    gyro_random_walk: tuple = attrs.field(default=0.0, converter=_lax3, validator=_vec3_lax(lo=0.0))
    mag_resolution: tuple = attrs.field(default=0.0, converter=_lax3, validator=_vec3_lax(lo=0.0))
    mag_cross_axis_coupling: float | tuple = attrs.field(default=0.0, converter=_floats, validator=_cross_axis)
    mag_noise: tuple = attrs.field(default=0.0, converter=_lax3, validator=_vec3_lax(lo=0.0))
    mag_bias: tuple = attrs.field(default=0.0, converter=_lax3, validator=_vec3_lax())
    mag_random_walk: tuple = attrs.field(default=0.0, converter=_lax3, validator=_vec3_lax(lo=0.0))
    magnetic_field: tuple = attrs.field(default=(0.0, 0.0, 0.5), converter=_lax3, validator=_vec3_lax())
    debug_acc_color: tuple = attrs.field(default=(1.0, 0.0, 0.0, 0.6), converter=v.to_float_tuple, validator=_rgba)
    debug_acc_scale: float = attrs.field(default=0.01, converter=_floats, validator=v.positive)
    debug_gyro_color: tuple = attrs.field(default=(0.0, 1.0, 0.0, 0.6), converter=v.to_float_tuple, validator=_rgba)
    debug_gyro_scale: float = attrs.field(default=0.01, converter=_floats, validator=v.positive)
    debug_mag_color: tuple = attrs.field(default=(0.0, 0.0, 1.0, 0.6), converter=v.to_float_tuple, validator=_rgba)
    debug_mag_scale: float = attrs.field(default=0.5, converter=_floats, validator=v.positive)

    def __attrs_post_init__(self):
        given = [k for k in ("resolution", "bias", "noise", "random_walk") if getattr(self, k) != 0.0]
        if given:
            raise OptionError(f"IMU: {', '.join(given)} are set from the acc_, gyro_ and mag_ fields; give "
                              f"{', '.join('acc_' + k for k in given)} (and gyro_..., mag_...) instead.")
        NoisySensorOptionsMixin.__attrs_post_init__(self)

    def channel_values(self, name: str) -> tuple:
        """The 9 per-channel values (acc x y z, gyro x y z, mag x y z) of resolution, bias, noise or random_walk."""
        return tuple(x for part in _IMU_PARTS for x in getattr(self, f"{part}_{name}"))


def per_channel(options, name: str, n: int) -> tuple:
    """The n per-channel values of a noisy option (`name`: resolution, bias, noise, random_walk), or an
    OptionError when a sequence of another length was given."""
    if isinstance(options, IMU):
        return options.channel_values(name)
    value = getattr(options, name)
    if isinstance(value, float):
        return (value,) * n
    if len(value) != n:
        raise OptionError(f"{type(options).__name__}.{name}={value!r}: expected one number or {n} (one per channel "
                          f"of the reading).")
    return tuple(value)


# -- the temperature grid ------------------------------------------------------------------------------------------

ABSOLUTE_ZERO_C = -273.15


def _celsius(inst, attr, value):
    if not _is_real(value) or not math.isfinite(value) or value < ABSOLUTE_ZERO_C:
        _fail(inst, attr, value, f"a finite temperature in Celsius >= {ABSOLUTE_ZERO_C}")


def _optional(check):
    def wrapped(inst, attr, value):
        if value is not None:
            check(inst, attr, value)

    return wrapped


@attrs.define(frozen=True, kw_only=False, slots=False)
class TemperatureProperties(Options):
    """A link's thermal material, for `TemperatureGrid(properties_dict={link index: TemperatureProperties(...)})`
    (Genesis World's fields, order and defaults; positional arguments are accepted as for its NamedTuple).

    base_temperature: the link's temperature at build and after a bare reset, Celsius (>= -273.15); a link whose
        temperature is not simulated stays at it.
    conductivity: thermal conductivity k, W/(m K) (>= 0).
    density: rho, kg/m^3 (> 0).
    specific_heat: c, J/(kg K) (> 0); the heat capacity of a volume V is rho c V.
    emissivity: in [0, 1], for the radiation to the ambient.
    """

    base_temperature: float = attrs.field(default=21.0, converter=_floats, validator=_celsius)
    conductivity: float = attrs.field(default=50.0, converter=_floats, validator=v.non_negative)
    density: float = attrs.field(default=1000.0, converter=_floats, validator=v.positive)
    specific_heat: float = attrs.field(default=1.0, converter=_floats, validator=v.positive)
    emissivity: float = attrs.field(default=0.9, converter=_floats, validator=v.unit_interval)


def _properties_dict(inst, attr, value):
    expect = "a dict {link index (an int >= -1; -1: every link not listed): TemperatureProperties}"
    if not isinstance(value, MappingProxyType):
        _fail(inst, attr, value, expect)
    for key, props in value.items():
        if not isinstance(key, (int, np.integer)) or isinstance(key, bool) or key < -1:
            _fail(inst, attr, dict(value), expect + f" (key {key!r})")
        if not isinstance(props, TemperatureProperties):
            _fail(inst, attr, dict(value), expect + f" (the value of key {key} is a {type(props).__name__})")


def _read_only_dict(value):
    if isinstance(value, dict):
        return MappingProxyType({int(k) if isinstance(k, np.integer) else k: p for k, p in value.items()})
    return value


def _grid_size(inst, attr, value):
    if (not isinstance(value, tuple) or len(value) != 3
            or not all(isinstance(n, (int, np.integer)) and not isinstance(n, bool) and n >= 1 for n in value)):
        _fail(inst, attr, value, "3 ints >= 1 (cells along the link's x, y, z)")


def _int_tuple(value):
    try:
        items = tuple(value)
    except TypeError:
        return value
    return tuple(int(n) if isinstance(n, np.integer) else n for n in items)


def _grid_values(value):
    """None, a number, or an array of numbers as nested tuples of floats (other values unchanged, for the validator
    to refuse)."""
    if value is None or _is_real(value):
        return None if value is None else float(value)
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        return value
    return _nested_tuple(arr) if arr.ndim == 3 else value


def _nested_tuple(arr):
    return tuple(_nested_tuple(a) for a in arr) if arr.ndim > 1 else tuple(float(x) for x in arr)


def _heat_generation(inst, attr, value):
    expect = "None, a finite number (every cell) or an array of finite numbers shaped grid_size"
    if value is None:
        return
    arr = np.asarray(value, dtype=np.float64) if isinstance(value, (tuple, float)) else None
    if arr is None or not np.isfinite(arr).all() or (arr.ndim and arr.shape != tuple(inst.grid_size)):
        _fail(inst, attr, value if arr is None or arr.size < 16 else f"<array {arr.shape}>",
              expect + f" {tuple(inst.grid_size)}")


def _range(inst, attr, value):
    if (not isinstance(value, tuple) or len(value) != 2 or not all(_is_real(x) and math.isfinite(x) for x in value)
            or not value[0] < value[1]):
        _fail(inst, attr, value, "2 finite numbers (low, high), low < high")


@attrs.define(frozen=True, kw_only=True, slots=False)
class TemperatureGrid(RigidSensorOptionsMixin, NoisySensorOptionsMixin):
    """The temperatures of a rigid link on a grid of cells over its bounding box in the link frame, Celsius:
    `read()` gives `([n_envs,] nx, ny, nz)` (the sensing element's temperatures: the first-order lag of
    `sensor_time_constant`, then the measurement model), `read_ground_truth()` the cells' temperatures.

    properties_dict: {link index: TemperatureProperties}, the solver's link index (`entity.base_link_idx`,
        `link.idx`); key -1: every link not listed. A link without properties takes no part in heat exchange.
        Shared by every TemperatureGrid of the scene (the dicts are merged, later sensors' entries winning); the
        sensor's own link must have properties (its own key, or -1).
    ambient_temperature: Celsius (>= -273.15) of the air and the surroundings (convection, radiation); None:
        another sensor's, or 21. Shared: the last sensor that gives one sets it.
    convection_coefficient: Newton's h, W/(m^2 K) (>= 0) on the link's surface; None: another sensor's, or 1.
        Shared: the last sensor that gives one sets it.
    simulate_all_link_temperatures: True: every other link with properties carries one (lumped) temperature that
        contacts, convection and radiation change; False: other links stay at their base temperature. Shared: True
        for one sensor makes it true for all.
    grid_size: cells along the link's x, y, z (3 ints >= 1).
    heat_generation: W/m^2 per cell (Genesis World's unit: the power of a cell is this times its x-y face area),
        one number for every cell or an array shaped grid_size; None: none.
    sensor_time_constant: the sensing element's first-order time constant, s (>= 0; 0: no lag).
    contact_depth_weight: a contact's conduction area is at least pi * contact_depth_weight * its depth (>= 0).
    debug_temperature_range: (low, high) Celsius of Genesis World's debug colouring (accepted, not drawn here).
    resolution, bias, noise, random_walk: one number (every cell) or one per cell, in the order of
        `read().reshape(-1)`; Celsius.
    """

    properties_dict: MappingProxyType = attrs.field(factory=lambda: MappingProxyType({}), converter=_read_only_dict,
                                                    validator=_properties_dict, eq=False)
    ambient_temperature: float | None = attrs.field(default=None, converter=attrs.converters.optional(_floats),
                                                    validator=_optional(_celsius))
    convection_coefficient: float | None = attrs.field(default=None, converter=attrs.converters.optional(_floats),
                                                       validator=_optional(v.non_negative))
    simulate_all_link_temperatures: bool = attrs.field(default=False, validator=v.is_bool)
    grid_size: tuple = attrs.field(default=(1, 1, 1), converter=_int_tuple, validator=_grid_size)
    heat_generation: float | tuple | None = attrs.field(default=None, converter=_grid_values,
                                                        validator=_heat_generation)
    sensor_time_constant: float = attrs.field(default=0.01, converter=_floats, validator=v.non_negative)
    contact_depth_weight: float = attrs.field(default=1.0, converter=_floats, validator=v.non_negative)
    debug_temperature_range: tuple = attrs.field(default=(0.0, 100.0), converter=_floats, validator=_range)

    @property
    def n_cells(self) -> int:
        nx, ny, nz = self.grid_size
        return nx * ny * nz

    def as_dict(self) -> dict:
        """Plain data (str keys) for the scene signature: properties_dict as {str(link): fields}, heat_generation
        as a flat list."""
        d = attrs.asdict(self, recurse=False, filter=lambda a, _x: a.name not in ("properties_dict",
                                                                                    "heat_generation"),
                         value_serializer=lambda _i, _a, x: list(x) if isinstance(x, tuple) else x)
        d["properties_dict"] = {str(k): p.as_dict() for k, p in sorted(self.properties_dict.items())}
        hg = self.heat_generation
        d["heat_generation"] = (None if hg is None else hg if isinstance(hg, float)
                                else np.asarray(hg, dtype=np.float64).reshape(-1).tolist())
        return d

    def __eq__(self, other):
        return type(other) is type(self) and self.as_dict() == other.as_dict()

    def __hash__(self):
        return hash(repr(self.as_dict()))
