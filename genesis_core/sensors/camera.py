"""Cameras as sensors (Genesis World's `gs.sensors.RasterizerCameraOptions`, `RaytracerCameraOptions`,
`BatchRendererCameraOptions`): `scene.add_sensor(options)` gives a camera that `read()` renders, fixed in the world
or attached to a rigid link, returning Genesis World's `CameraData(rgb)`.

All three draw with the engine's one renderer (genesis_core.render: the ray-traced pinhole camera of
`scene.add_camera`, on the CPU and on CUDA, every environment at once). A camera sensor has no state: it renders
the current state when read, once per step however often it is read (as Genesis World caches its image per step),
so it has no channels in the sensor store, no delay and no noise."""

from __future__ import annotations

import math
from typing import NamedTuple

import attrs
import numpy as np
import torch

from .. import validators as v
from ..errors import OptionError
from .base import Sensor, check_rigid_link, register
from .options import RigidSensorOptionsMixin, _fail, _floats


class CameraData(NamedTuple):
    """What a camera sensor reads: rgb, uint8 `([n_envs,] H, W, 3)`."""

    rgb: torch.Tensor


def _res(inst, attr, value):
    if (not isinstance(value, tuple) or len(value) != 2
            or not all(isinstance(x, (int, np.integer)) and not isinstance(x, bool) and 0 < x <= 16384
                       for x in value)):
        _fail(inst, attr, value, "(width, height), two ints in [1, 16384]")


def _fov(inst, attr, value):
    if not isinstance(value, float) or not 0.0 < value < 180.0:
        _fail(inst, attr, value, "a number of degrees in (0, 180)")


def _lights(inst, attr, value):
    if not isinstance(value, (list, tuple)) or not all(isinstance(x, dict) for x in value):
        _fail(inst, attr, value, "a list of dicts (one per light)")


def _offset_T(inst, attr, value):
    if value is None:
        return
    arr = np.asarray(value, dtype=np.float64) if not isinstance(value, str) else None
    if arr is None or arr.shape != (4, 4) or not np.isfinite(arr).all():
        _fail(inst, attr, value, "None or a finite 4x4 matrix")


def _one_of(*choices):
    def check(inst, attr, value):
        if value not in choices:
            _fail(inst, attr, value, f"one of {choices}")
    return check


def _to_tuple(x):
    return tuple(x) if isinstance(x, (list, np.ndarray)) else x


@attrs.define(frozen=True, kw_only=True, slots=False)
class BaseCameraOptions(RigidSensorOptionsMixin):
    """A camera sensor's options (Genesis World's BaseCameraOptions).

    res: (width, height) pixels. fov: the vertical field of view, degrees in (0, 180).
    pos, lookat, up: the camera's pose, world (m), or, attached to a link (entity_idx >= 0), in the link's frame:
        the camera's pose is the link's times the pose that pos, lookat and up give (Genesis World's
        move_to_attach).
    offset_T: a 4x4 camera-to-link matrix (OpenGL axes) used instead of pos, lookat and up when attached.
    entity_idx: -1 or None: a camera fixed in the world; else the rigid entity it is attached to (link_idx_local).
    lights: accepted; the renderer here has one directional light of its own (the lights listed are not added).
    """

    entity_idx: int | None = attrs.field(default=None)
    res: tuple = attrs.field(default=(512, 512), converter=_to_tuple, validator=_res)
    pos: tuple = attrs.field(default=(3.5, 0.0, 1.5), converter=v.to_float_tuple, validator=v.vec(3))
    lookat: tuple = attrs.field(default=(0.0, 0.0, 0.0), converter=v.to_float_tuple, validator=v.vec(3))
    up: tuple = attrs.field(default=(0.0, 0.0, 1.0), converter=v.to_float_tuple, validator=v.vec(3))
    fov: float = attrs.field(default=60.0, converter=_floats, validator=_fov)
    lights: list = attrs.field(factory=list, validator=_lights)
    offset_T: object = attrs.field(default=None, validator=_offset_T)

    def __attrs_post_init__(self):
        if self.entity_idx is not None and (not isinstance(self.entity_idx, (int, np.integer))
                                            or isinstance(self.entity_idx, bool) or self.entity_idx < -1):
            raise OptionError(f"{type(self).__name__}.entity_idx={self.entity_idx!r} is not accepted: expected None, "
                              "-1 (a camera fixed in the world) or an entity index.")

    def as_dict(self) -> dict:
        d = super().as_dict()
        if d.get("offset_T") is not None:
            d["offset_T"] = np.asarray(d["offset_T"], dtype=np.float64).tolist()
        return d


@attrs.define(frozen=True, kw_only=True, slots=False)
class RasterizerCameraOptions(BaseCameraOptions):
    """Genesis World's rasterizer camera. near, far: accepted; the ray tracer here clips nothing (every hit at any
    distance is drawn)."""

    near: float = attrs.field(default=0.01, converter=_floats, validator=v.positive)
    far: float = attrs.field(default=100.0, converter=_floats, validator=v.positive)
    update_ground_truth_only: bool = attrs.field(default=True, validator=v.is_bool)


@attrs.define(frozen=True, kw_only=True, slots=False)
class RaytracerCameraOptions(BaseCameraOptions):
    """Genesis World's path-traced camera (LuisaRender). Drawn here by the same pinhole ray tracer as the others:
    model, spp, denoise, aperture, focal_len, focus_dist and the environment surface are accepted without effect
    (no depth of field, no global illumination)."""

    model: str = attrs.field(default="pinhole", validator=_one_of("pinhole", "thinlens"))
    spp: int = attrs.field(default=256, validator=v.int_at_least(1))
    denoise: bool = attrs.field(default=False, validator=v.is_bool)
    aperture: float = attrs.field(default=2.8, converter=_floats, validator=v.positive)
    focal_len: float = attrs.field(default=0.05, converter=_floats, validator=v.positive)
    focus_dist: float = attrs.field(default=3.0, converter=_floats, validator=v.positive)
    env_surface: object = attrs.field(default=None)
    env_radius: float = attrs.field(default=15.0, converter=_floats, validator=v.positive)
    env_pos: tuple = attrs.field(default=(0.0, 0.0, 0.0), converter=v.to_float_tuple, validator=v.vec(3))
    env_quat: tuple = attrs.field(default=(1.0, 0.0, 0.0, 0.0), converter=v.to_float_tuple, validator=v.vec(4))
    update_ground_truth_only: bool = attrs.field(default=True, validator=v.is_bool)

    def as_dict(self) -> dict:
        d = super().as_dict()
        d["env_surface"] = None if self.env_surface is None else repr(self.env_surface)
        return d


@attrs.define(frozen=True, kw_only=True, slots=False)
class BatchRendererCameraOptions(BaseCameraOptions):
    """Genesis World's batch renderer (Madrona, CUDA only). Here the same ray tracer draws every environment at
    once on any backend: model must be "pinhole" (the others are refused), near, far and use_rasterizer are
    accepted without effect."""

    model: str = attrs.field(default="pinhole", validator=_one_of("pinhole", "thinlens", "fisheye"))
    near: float = attrs.field(default=0.01, converter=_floats, validator=v.positive)
    far: float = attrs.field(default=100.0, converter=_floats, validator=v.positive)
    use_rasterizer: bool = attrs.field(default=True, validator=v.is_bool)
    update_ground_truth_only: bool = attrs.field(default=True, validator=v.is_bool)


def _look_T(pos, lookat, up) -> torch.Tensor:
    """The camera-to-parent matrix (OpenGL axes: looking along -z, +y up) of a camera at pos looking at lookat.
    Where up is parallel to the view direction (Genesis World's own attached-camera example looks straight down
    with up = +z, for which its matrix has a zero x axis), the parent's +y is the up hint instead (+x if that is
    parallel too: render.camera._frame)."""
    from ..render.camera import _frame

    p, l, u = (torch.as_tensor(x, dtype=torch.float64)[None] for x in (pos, lookat, up))
    right, cam_up, back = _frame(p, l, u, "camera sensor")
    T = torch.eye(4, dtype=torch.float64)
    T[:3, 0], T[:3, 1], T[:3, 2], T[:3, 3] = right[0], cam_up[0], back[0], p[0]
    return T


class _CameraSensor(Sensor):
    """A camera sensor: rendered when read (once per step), no channels."""

    requires_rigid_link = False

    @classmethod
    def check(cls, manager, options, entity):
        name = type(options).__name__
        if options.entity_idx is not None and options.entity_idx >= 0:
            check_rigid_link(manager, options, None, name)
        if getattr(options, "model", "pinhole") == "fisheye":
            raise OptionError(f"add_sensor: {name}(model='fisheye') is not drawn by this engine's pinhole camera; "
                              "use model='pinhole'.")
        if options.offset_T is None:
            _look_T(options.pos, options.lookat, options.up)  # (raises on a degenerate pose)

    def __init__(self, manager, idx, options, entity):
        if options.entity_idx is not None and options.entity_idx >= 0:
            entity = manager.scene.entities[options.entity_idx]
        super().__init__(manager, idx, options, entity)
        self._camera = None
        self._rgb_t = None  # scene.t of the cached image
        self._rgb = None

    @classmethod
    def build_kind(cls, manager, sensors):
        from ..render import Camera

        for s in sensors:
            o = s.options
            attached = s.entity is not None
            T = (torch.as_tensor(np.asarray(o.offset_T, dtype=np.float64)) if attached and o.offset_T is not None
                 else _look_T(o.pos, o.lookat, o.up))
            cam = Camera(manager.scene, -1, res=o.res, fov=o.fov, transform=T)
            if attached:
                cam.attach(s.entity.links[o.link_idx_local], T)
            s._camera = cam
        return None

    @classmethod
    def measure_kind(cls, manager, sensors, ctx):
        return torch.zeros((manager.batch, 0), dtype=manager.float_dtype, device=manager.device)

    @property
    def camera(self):
        """The `genesis_core.render.Camera` that draws this sensor (after build)."""
        return self._camera

    def _image(self):
        scene = self._manager.scene
        scene._require_built("sensor.read()")
        if self._rgb is None or self._rgb_t != scene.t:
            self._rgb = self._camera.render(rgb=True)[0]
            self._rgb_t = scene.t
        return self._rgb

    def read(self, envs_idx=None) -> CameraData:
        """The camera's image of the current state, `CameraData(rgb)`, rgb uint8 `([n_envs,] H, W, 3)`."""
        envs = self._manager.scene._sanitize_envs_idx(envs_idx)
        rgb = self._image()
        return CameraData(rgb=rgb.clone() if envs is None else rgb[envs])

    read_ground_truth = read

    def start_recording(self, rec_options):
        return self._manager.scene.start_recording(lambda: self.read().rgb, rec_options)


@register(RasterizerCameraOptions)
class RasterizerCameraSensor(_CameraSensor):
    pass


@register(RaytracerCameraOptions)
class RaytracerCameraSensor(_CameraSensor):
    pass


@register(BatchRendererCameraOptions)
class BatchRendererCameraSensor(_CameraSensor):
    pass
