"""Ray-cast sensors: `Raycaster` (a lidar, a height scan; `gs.sensors.Lidar` is the same class) and `DepthCamera`.

Every ray-cast sensor of a scene is measured at once, each step: one launch of `render.kernels.cast_rays` over
(environment, ray) traces each ray through `render.kernels._trace` against what the cameras draw (the solvers'
render views, packed by `render.renderer.TraceScene`: rigid geoms and visual meshes, planes included, and the
particle solvers' particles), from the pose of its sensor's link in that environment. The distances come back as
one [B, rays] tensor; the range rule and the points are torch operations on the device. Nothing is read back on
the host: the geometry's static part is packed once, its poses at every step.

The sensor's own link is not left out (as in Genesis World): a ray that starts inside a body meets that body's
surface on its way out.

Channels per sensor (the measurement model applies to each): the points' coordinates (x, y, z of ray 0, then of
ray 1, ...), then the distances (one per ray); only the distances with return_points=False.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
import torch

from ..errors import OptionError, SceneError
from ..launch import Launcher, torch_one_thread
from ..rotations import quat_to_mat, rpy_to_quat
from .base import Sensor, check_rigid_link, gather_links, link_groups, register
from .kinematic import NOISY, _noisy_model
from .options import per_channel
from .raycast_options import DepthCamera, DepthCameraPattern, Raycaster

F32 = torch.float32


class RaycasterData(NamedTuple):
    """What a ray-cast sensor reads (Genesis World's `RaycasterData`; 1.4.5 names it `RaycasterReturnType`)."""

    points: torch.Tensor | None  # ([n_envs,] *return_shape, 3), m; None with return_points=False
    distances: torch.Tensor  # ([n_envs,] *return_shape), m


RaycasterReturnType = RaycasterData


def _attached(options) -> bool:
    return options.entity_idx is not None and options.entity_idx >= 0


@register(DepthCamera)
@register(Raycaster)
class RaycasterSensor(Sensor):
    """A Raycaster or a DepthCamera (see the module's docstring): `read()` gives RaycasterData(points,
    distances); a DepthCamera's `read_image()` the distances as its depth image."""

    requires_rigid_link = False  # entity_idx=-1: a sensor fixed in the world (checked in `check` otherwise)

    def __init__(self, manager, idx, options, entity):
        super().__init__(manager, idx, options, entity)
        if self.entity is None and _attached(options):
            self.entity = manager.scene.entities[options.entity_idx]
        if not _attached(options):
            self.link_idx_local = None
        self.return_shape = tuple(int(n) for n in options.pattern.return_shape)
        self.n_rays = math.prod(self.return_shape)

    # -- the kind's hooks ------------------------------------------------------------------------------------------

    @classmethod
    def channel_count(cls, options) -> int:
        rays = math.prod(options.pattern.return_shape)
        return 4 * rays if options.return_points else rays

    @classmethod
    def check(cls, manager, options, entity):
        name = type(options).__name__
        if _attached(options):
            check_rigid_link(manager, options, entity, name)
        for key in NOISY:
            per_channel(options, key, cls.channel_count(options))

    def channel_model(self) -> dict:
        return _noisy_model(self)

    @classmethod
    def build_kind(cls, manager, sensors):
        """The rays of every sensor in its link's frame, each ray's sensor, range and frame, the channels' order,
        and the scene's geometry packer."""
        from ..render.renderer import TraceScene

        dev, fl = manager.device, manager.float_dtype
        starts, dirs, owner, lo, hi, miss = [], [], [], [], [], []
        for k, s in enumerate(sensors):
            o = s.options
            start, direction = (x.reshape(-1, 3) for x in o.pattern._rays())
            rot = quat_to_mat(rpy_to_quat(np.radians(o.euler_offset)))  # sensor frame -> link frame
            starts.append(start @ rot.T + np.asarray(o.pos_offset))
            dirs.append(direction @ rot.T)
            n = s.n_rays
            owner.append(np.full(n, k))
            lo.append(np.full(n, o.min_range))
            hi.append(np.full(n, o.max_range))
            miss.append(np.full(n, o.no_hit_value))
        start, direction = np.concatenate(starts), np.concatenate(dirs)
        n_rays = len(start)
        if manager.batch * n_rays * 4 >= 2 ** 31 or n_rays * 6 >= 2 ** 31:
            raise OptionError(f"the ray-cast sensors have {n_rays} rays in all, {manager.batch * n_rays} in "
                              f"{manager.batch} environments: beyond what one cast's 32-bit indices address (2^31 "
                              "values per array, 4 a ray); use fewer rays or environments.")
        # the channels of sensor after sensor: its points (x y z per ray), then its distances, as columns of the
        # [B, 3 R + R] tensor [points of every ray, distances of every ray]
        cols, first = [], 0
        for s in sensors:
            if s.options.return_points:
                cols.append(np.arange(3 * first, 3 * (first + s.n_rays)))
            cols.append(3 * n_rays + np.arange(first, first + s.n_rays))
            first += s.n_rays
        cols = np.concatenate(cols)
        points = any(s.options.return_points for s in sensors)
        if not points:
            cols = cols - 3 * n_rays
        same = np.array_equal(cols, np.arange(len(cols))) and len(cols) == (4 if points else 1) * n_rays
        attached = [k for k, s in enumerate(sensors) if _attached(s.options)]
        groups, perm = link_groups([sensors[k] for k in attached], dev) if attached else (None, None)
        identity = torch.zeros(12, dtype=fl, device=dev)
        identity[[3, 7, 11]] = 1.0

        def t(x, dtype=fl):
            return torch.as_tensor(np.asarray(x), dtype=dtype, device=dev)

        world_sensors = [k for k, s in enumerate(sensors) if s.options.return_world_frame and s.options.return_points]
        spans = np.cumsum([0] + [s.n_rays for s in sensors])
        B = manager.batch
        return dict(
            geometry=TraceScene(manager.scene), n_sensors=len(sensors), n_rays=n_rays, launch=Launcher(),
            pose=torch.zeros((B, len(sensors), 12), dtype=F32, device=dev),
            hit=torch.empty((B, n_rays), dtype=F32, device=dev),
            ray_local=t(np.concatenate([start, direction], axis=1), F32).contiguous(),
            ray_sensor=t(np.concatenate(owner), torch.int32).contiguous(),
            start=t(start), direction=t(direction / np.linalg.norm(direction, axis=1, keepdims=True)),
            min_range=t(np.concatenate(lo)), max_range=t(np.concatenate(hi)), no_hit=t(np.concatenate(miss)),
            world_spans=[(k, int(spans[k]), int(spans[k + 1])) for k in world_sensors],
            points=points, cols=None if same else t(cols, torch.long),
            attached=None if len(attached) == len(sensors) else t(attached, torch.long),
            groups=groups, perm=perm, identity=identity)

    @classmethod
    def measure_kind(cls, manager, sensors, ctx):
        """[B, channels]: every ray of every sensor cast in every environment (one kernel launch)."""
        from ..render import kernels as K
        from ..render.view import solver_render_views

        dev, fl, B = manager.device, manager.float_dtype, manager.batch
        with torch.no_grad(), torch_one_thread():
            pose = cls._link_poses(manager, ctx)  # [B, S, 12]
            views = solver_render_views(manager.scene)
            prims, parts, _, n_parts = ctx["geometry"].pack(views, B, dev, refit=False)  # (cast_rays refits)
            for name, x in (*prims.items(), *parts.items()):  # (sizes only: nothing is read)
                if torch.is_tensor(x) and x.numel() >= 2 ** 31:
                    raise SceneError(f"ray-cast sensors: the scene's {name} would hold {x.numel()} values, beyond "
                                     "the 2^31 - 1 that one cast addresses; use fewer environments.")
            ctx["pose"].copy_(pose)
            hit = ctx["hit"]
            # (the pack's arrays are the same tensors from step to step: the launch is prepared once)
            ctx["launch"](K.cast_rays, ctx["pose"], ctx["ray_local"], ctx["ray_sensor"], prims["prim_i"],
                          prims["prim_f"], prims["prim_pose"], prims["hull_planes"], parts["part_f"],
                          parts["grid_f"], parts["grid_i"], parts["cell_start"], parts["cell_items"], prims["loose"],
                          prims["node_box"], prims["node_i"], prims["mesh_i"], prims["bnode_i"], prims["bnode_box"],
                          prims["tri_v"], prims["n_loose"], prims["n_nodes"], int(n_parts), hit)
            t = hit.to(fl)
            valid = (t >= ctx["min_range"]) & (t < ctx["max_range"])  # a miss (inf) is out of range
            distances = torch.where(valid, t, ctx["no_hit"])
            if not ctx["points"]:
                return distances if ctx["cols"] is None else distances[:, ctx["cols"]]
            along = torch.where(valid, t, torch.zeros_like(t))[..., None] * ctx["direction"]  # hit - start, link axes
            points = along
            if ctx["world_spans"]:
                points = along.clone()
                for k, a, b in ctx["world_spans"]:
                    rot = pose[:, k, 3:].reshape(B, 3, 3)
                    local = ctx["start"][a:b] + along[:, a:b]
                    points[:, a:b] = pose[:, k, None, :3] + torch.einsum("bij,brj->bri", rot, local)
            points = torch.where(valid[..., None], points, torch.zeros_like(points))
            flat = torch.cat([points.reshape(B, -1), distances], dim=1)
            return flat if ctx["cols"] is None else flat[:, ctx["cols"]]

    @staticmethod
    def _link_poses(manager, ctx) -> torch.Tensor:
        """[B, S, 12] (position, rotation matrix row-major) of each sensor's link; the identity for a sensor fixed
        in the world."""
        B, S, fl = manager.batch, ctx["n_sensors"], manager.float_dtype
        if ctx["groups"] is None:
            return ctx["identity"].expand(B, S, 12)
        pos = gather_links(manager, ctx["groups"], ctx["perm"], lambda e, l: e.get_links_pos(l)).to(fl)
        quat = gather_links(manager, ctx["groups"], ctx["perm"], lambda e, l: e.get_links_quat(l)).to(fl)
        rot = quat_to_mat(torch.nn.functional.normalize(quat, dim=-1))
        link = torch.cat([pos, rot.reshape(*rot.shape[:-2], 9)], dim=-1)
        if ctx["attached"] is None:
            return link
        pose = ctx["identity"].expand(B, S, 12).clone()
        pose[:, ctx["attached"]] = link
        return pose

    # -- reading ---------------------------------------------------------------------------------------------------

    def _format(self, x):
        lead = x.shape[:-1]
        if not self.options.return_points:
            return RaycasterData(None, x.reshape(*lead, *self.return_shape))
        n = self.n_rays
        return RaycasterData(x[..., :3 * n].reshape(*lead, *self.return_shape, 3),
                             x[..., 3 * n:].reshape(*lead, *self.return_shape))

    def read_image(self, envs_idx=None):
        """A DepthCamera's depth image `([n_envs,] height, width)`: the measured distance along each pixel's ray
        (m; no_hit_value where nothing is hit within range)."""
        if not isinstance(self.options.pattern, DepthCameraPattern):
            raise OptionError(f"read_image() is a DepthCamera's; this {type(self.options).__name__}'s pattern is a "
                              f"{type(self.options.pattern).__name__} (read() gives its distances).")
        return self.read(envs_idx).distances

    def __repr__(self):
        where = (f"entity {self.options.entity_idx}, link {self.link_idx_local}" if _attached(self.options)
                 else "fixed in the world")
        return f"<{type(self.options).__name__} {self.idx}: {where}, {self.n_rays} rays>"


DepthCameraSensor = RaycasterSensor

__all__ = ["DepthCameraSensor", "RaycasterData", "RaycasterReturnType", "RaycasterSensor"]
