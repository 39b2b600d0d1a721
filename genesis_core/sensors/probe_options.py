"""Genesis World's options of the probe sensors, which read the geometry around points ("probes") fixed on a link:
`gs.sensors.Proximity`, `gs.sensors.KinematicContactProbe` and `gs.sensors.ElastomerDisplacement` (with their
mixin `KinematicTactileSensorMixin`). Frozen attrs classes validated on construction, as the other sensors'
options (genesis_core.sensors.options); `scene.add_sensor` checks what needs the scene (the links tracked, the
length of per-channel noise options). The sensors themselves are in genesis_core.sensors.probes."""

from __future__ import annotations

import math

import attrs
import numpy as np

from .. import validators as v
from ..errors import OptionError
from .options import NoisySensorOptionsMixin, RigidSensorOptionsMixin, SensorOptions, _fail, _floats, _is_real, _rgba


def _array(value):
    """A nested sequence of numbers as nested tuples of floats (other values unchanged, for the validator)."""
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        return value
    return arr.tolist() if arr.ndim == 0 else _tuples(arr)


def _tuples(arr):
    return tuple(_tuples(x) for x in arr) if arr.ndim > 1 else tuple(float(x) for x in arr)


def _points(grid: bool):
    """Probe positions: (N, 3) finite numbers, N >= 1; with grid, also (M, N, 3) (a grid of probes)."""
    expect = "a sequence of (x, y, z) points, at least one" + (", or an (M, N, 3) grid of them" if grid else "")

    def check(inst, attr, value):
        try:
            arr = np.asarray(value, dtype=np.float64)
        except (TypeError, ValueError):
            _fail(inst, attr, value, expect)
        if arr.ndim not in ((2, 3) if grid else (2,)) or arr.shape[-1] != 3 or arr.size == 0:
            _fail(inst, attr, value, expect)
        if not np.isfinite(arr).all():
            _fail(inst, attr, value, expect + " (finite)")

    return check


def _unit(value):
    """A 3-vector or a sequence of 3-vectors, each divided by its norm (Genesis World's unit vectors); a zero or
    non-finite vector is left for the validator to refuse."""
    value = _array(value)
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        return value
    if arr.ndim not in (1, 2) or arr.shape[-1] != 3 or not np.isfinite(arr).all():
        return value
    norm = np.linalg.norm(arr, axis=-1, keepdims=True)
    if (norm <= 0).any():
        return value
    return _tuples(arr / norm)


def _normals(inst, attr, value):
    expect = "one non-zero (x, y, z) direction, or one per probe"
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        _fail(inst, attr, value, expect)
    if arr.ndim not in (1, 2) or arr.shape[-1] != 3 or arr.size == 0 or not np.isfinite(arr).all():
        _fail(inst, attr, value, expect)
    if (np.linalg.norm(arr, axis=-1) <= 0).any():
        _fail(inst, attr, value, expect)


def _radii(inst, attr, value):
    items = (value,) if _is_real(value) else value
    if (not isinstance(items, tuple) or not items
            or not all(_is_real(x) and math.isfinite(x) and x > 0 for x in items)):
        _fail(inst, attr, value, "a finite number > 0, or one per probe")


def _link_indices(inst, attr, value):
    if (not isinstance(value, tuple)
            or not all(isinstance(x, (int, np.integer)) and not isinstance(x, bool) and x >= 0 for x in value)):
        _fail(inst, attr, value, "a sequence of ints >= 0 (global link indices, link.idx)")


def _ints(value):
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return (int(value),)
    try:
        items = tuple(value)
    except TypeError:
        return value
    return tuple(int(x) if isinstance(x, (int, np.integer)) and not isinstance(x, bool) else x for x in items)


def n_probes(options) -> int:
    """The number of probes of a probe sensor's options (a grid counts M N)."""
    shape = np.shape(options.probe_local_pos)
    return int(np.prod(shape[:-1]))


@attrs.define(frozen=True, kw_only=True, slots=False)
class Proximity(RigidSensorOptionsMixin, NoisySensorOptionsMixin):
    """For each probe, the distance (m) to the nearest surface of the tracked links' collision geoms, clamped to
    max_range: `read()` gives `([n_envs,] n_probes)`; `sensor.nearest_points` the nearest surface points, world,
    `([n_envs,] n_probes, 3)` (the probe itself where nothing is within max_range).

    probe_local_pos: the probes, (x, y, z) each, in the sensor frame (the link frame moved by pos_offset and
        rotated by euler_offset; with no offsets, the link frame, as Genesis World).
    track_link_idx: the links whose geoms are measured, as global link indices (`link.idx`,
        `entity.base_link_idx`); add_sensor checks them against the rigid solver's links.
    max_range: m, > 0: the reading where no tracked surface is nearer.
    resolution, bias, noise, random_walk: one number, or one per probe.
    debug_sphere_radius, debug_color: Genesis World's debug drawing (accepted, not drawn here).
    """

    probe_local_pos: tuple = attrs.field(default=((0.0, 0.0, 0.0),), converter=_array, validator=_points(False))
    track_link_idx: tuple = attrs.field(default=(), converter=_ints, validator=_link_indices)
    max_range: float = attrs.field(default=10.0, converter=_floats, validator=v.positive)
    debug_sphere_radius: float = attrs.field(default=0.008, converter=_floats, validator=v.positive)
    debug_color: tuple = attrs.field(default=(0.2, 0.6, 1.0, 0.6), converter=v.to_float_tuple, validator=_rgba)


@attrs.define(frozen=True, kw_only=True, slots=False)
class KinematicTactileSensorMixin(SensorOptions):
    """What the tactile probes share.

    probe_local_normal: the probes' sensing directions (outward from the sensing surface), in the sensor frame:
        one direction for every probe or one per probe; each is normalised. Penetration is measured along it.
    probe_radius: m, > 0 (one, or one per probe): a surface within this distance of a probe is sensed.
    debug_sphere_color, debug_contact_color: Genesis World's debug drawing (accepted, not drawn here).
    """

    probe_local_normal: tuple = attrs.field(default=(0.0, 0.0, 1.0), converter=_unit, validator=_normals)
    probe_radius: float | tuple = attrs.field(default=0.005, converter=_floats, validator=_radii)
    debug_sphere_color: tuple = attrs.field(default=(1.0, 0.5, 0.0, 0.4), converter=v.to_float_tuple,
                                            validator=_rgba)
    debug_contact_color: tuple = attrs.field(default=(1.0, 0.2, 0.0, 0.8), converter=v.to_float_tuple,
                                             validator=_rgba)

    def _check_probe_lengths(self):
        n = n_probes(self)
        name = type(self).__name__
        normals = np.asarray(self.probe_local_normal)
        if normals.ndim == 2 and len(normals) != n:
            raise OptionError(f"{name}: probe_local_normal has {len(normals)} directions for {n} probes "
                              "(probe_local_pos); give one direction, or one per probe.")
        if isinstance(self.probe_radius, tuple) and len(self.probe_radius) != n:
            raise OptionError(f"{name}: probe_radius has {len(self.probe_radius)} radii for {n} probes "
                              "(probe_local_pos); give one radius, or one per probe.")


@attrs.define(frozen=True, kw_only=True, slots=False)
class KinematicContactProbe(RigidSensorOptionsMixin, NoisySensorOptionsMixin, KinematicTactileSensorMixin):
    """Tactile probes on a link: how deep the geoms touching the link reach into each probe, along its normal, and
    a spring-like force from it. `read()` gives `KinematicContactProbeData(penetration ([n_envs,] n_probes), m;
    force ([n_envs,] n_probes, 3), N, sensor frame)`, force = stiffness * penetration * (-probe_local_normal) (a
    kinematic estimate, not the solver's contact force).

    probe_local_pos: the probes, (x, y, z) each, in the sensor frame.
    stiffness: N/m, >= 0.
    resolution, bias, noise, random_walk: one number, or one per channel (n_probes penetrations, then the
        3 n_probes force components, probe after probe).
    Only geoms in a contact of the last substep with the sensor's link are sensed (as Genesis World: a sensor on
    a fixed entity senses no other fixed entity).
    """

    probe_local_pos: tuple = attrs.field(default=((0.0, 0.0, 0.0),), converter=_array, validator=_points(False))
    stiffness: float = attrs.field(default=1000.0, converter=_floats, validator=v.non_negative)

    def __attrs_post_init__(self):
        self._check_probe_lengths()
        NoisySensorOptionsMixin.__attrs_post_init__(self)


@attrs.define(frozen=True, kw_only=True, slots=False)
class ElastomerDisplacement(RigidSensorOptionsMixin, NoisySensorOptionsMixin, KinematicTactileSensorMixin):
    """The displacement of the markers (the probes) of an elastomer skin on a link, in the sensor frame: `read()`
    gives `([n_envs,] n_probes, 3)`, m: x, y the markers' in-plane displacement (dilation by the penetrations
    around them, shear by the touching body's sliding, twist by its turning about the sensor's normal; the FOTS
    model, https://arxiv.org/pdf/2404.19217, as Genesis World writes it), z the marker's own penetration depth,
    at most dilate_max_delta. The penetration is the KinematicContactProbe's.

    probe_local_pos: (N, 3) probes, or an (M, N, 3) grid of them (read in row-major order: n_probes = M N).
    dilate_coefficient, shear_coefficient, twist_coefficient: 1/m^2, >= 0: the decay rates lambda of the three
        fields with the squared distance from their source.
    dilate_max_delta: m, >= 0: the largest penetration a probe contributes (0: no dilation).
    shear_max_delta: m, >= 0: the largest slip per step (0: no shear).
    twist_max_delta: degrees, >= 0: the largest turn per step (0: no twist).
    resolution, bias, noise, random_walk: one number, or one per channel (3 per probe).
    """

    probe_local_pos: tuple = attrs.field(default=((0.0, 0.0, 0.0),), converter=_array, validator=_points(True))
    dilate_coefficient: float = attrs.field(default=1e-2, converter=_floats, validator=v.non_negative)
    shear_coefficient: float = attrs.field(default=1e-2, converter=_floats, validator=v.non_negative)
    twist_coefficient: float = attrs.field(default=1e-2, converter=_floats, validator=v.non_negative)
    dilate_max_delta: float = attrs.field(default=0.1, converter=_floats, validator=v.non_negative)
    shear_max_delta: float = attrs.field(default=0.1, converter=_floats, validator=v.non_negative)
    twist_max_delta: float = attrs.field(default=50.0, converter=_floats, validator=v.non_negative)

    def __attrs_post_init__(self):
        self._check_probe_lengths()
        NoisySensorOptionsMixin.__attrs_post_init__(self)
