"""The sensors of a rigid link's motion and contacts: IMU, Contact and ContactForce. Their ground truth comes from
the rigid entities' public accessors (get_links_quat, get_links_ang, get_links_acc, get_links_acc_ang,
get_links_net_contact_force, get_contacts), gathered for all sensors of a kind at once with batched torch ops."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import torch

from ..rotations import quat_to_mat
from ..errors import OptionError
from .base import MAX_COUPLING, MAX_OFFSET, Sensor, gather_links, link_groups, register
from .options import IMU, Contact, ContactForce, alignment_matrix, per_channel

NOISY = ("resolution", "bias", "noise", "random_walk")


class IMUData(NamedTuple):
    """What an IMU reads: each `([n_envs,] 3)`, in the sensor frame."""

    lin_acc: torch.Tensor  # m/s^2, proper acceleration (a - g)
    ang_vel: torch.Tensor  # rad/s
    mag: torch.Tensor  # the unit of IMU(magnetic_field=...)


def _noisy_model(sensor) -> dict:
    """The generic measurement model of a NoisySensorOptionsMixin sensor (one number or one per channel)."""
    o, n = sensor.options, sensor.n_channels
    model = {k: np.asarray(per_channel(o, k, n), dtype=np.float64) for k in NOISY}
    model["jitter"] = o.jitter
    return model


def _pose_rows(sensors) -> slice:
    """The sensors' rows of the manager's pose fields (pos_offset, quat_offset): one kind's rows are contiguous."""
    first = sensors[0]._pose_row
    assert [s._pose_row for s in sensors] == list(range(first, first + len(sensors)))
    return slice(first, first + len(sensors))


class _NoisySensor(Sensor):
    """A sensor with the generic measurement model (NoisySensorOptionsMixin), its per-environment setters, and
    per-environment offsets (pos_offset, quat_offset: the manager's state, read at every step)."""

    noisy = True
    per_env_offsets = True

    @classmethod
    def check(cls, manager, options, entity):
        for key in NOISY:
            per_channel(options, key, cls.n_channels)
        if any(abs(c) > MAX_OFFSET for c in options.pos_offset):
            raise OptionError(f"add_sensor: {type(options).__name__}.pos_offset={options.pos_offset!r} is not "
                              f"accepted: expected entries within +-{MAX_OFFSET:g} m of the link.")


@register(IMU)
class IMUSensor(_NoisySensor):
    n_channels = 9

    def _format(self, x):
        return IMUData(x[..., 0:3], x[..., 3:6], x[..., 6:9])

    @classmethod
    def check(cls, manager, options, entity):
        super().check(manager, options, entity)
        for part in ("acc", "gyro", "mag"):
            coupling = getattr(options, f"{part}_cross_axis_coupling")
            if np.abs(alignment_matrix(coupling)).max() > MAX_COUPLING:
                raise OptionError(f"add_sensor: IMU.{part}_cross_axis_coupling={coupling!r} is not accepted: "
                                  f"expected matrix entries within +-{MAX_COUPLING:g}.")

    def channel_model(self) -> dict:
        model = _noisy_model(self)
        model["align"] = [(3 * k, alignment_matrix(getattr(self.options, f"{part}_cross_axis_coupling")))
                          for k, part in enumerate(("acc", "gyro", "mag"))]
        return model

    # -- the cross-axis coupling per environment (Genesis World's IMU setters) ---------------------------------------

    def _set_coupling(self, part, value, envs_idx):
        self._manager.set_alignment(self, ("acc", "gyro", "mag").index(part), value, envs_idx,
                                    what=f"set_{part}_cross_axis_coupling")

    def set_acc_cross_axis_coupling(self, cross_axis_coupling, envs_idx=None):
        """The accelerometer's alignment matrix M (the reading is M a) in the environments envs_idx, as the option:
        a number in [0, 1] (every off-diagonal entry; 1 on the diagonal), 3 numbers in [0, 1] (column j's
        off-diagonal entries are the j-th), or a 3x3 matrix used as is; or an (n, 3, 3) array of matrices, one
        per environment written."""
        self._set_coupling("acc", cross_axis_coupling, envs_idx)

    def set_gyro_cross_axis_coupling(self, cross_axis_coupling, envs_idx=None):
        """The gyroscope's alignment matrix (as set_acc_cross_axis_coupling)."""
        self._set_coupling("gyro", cross_axis_coupling, envs_idx)

    def set_mag_cross_axis_coupling(self, cross_axis_coupling, envs_idx=None):
        """The magnetometer's alignment matrix (as set_acc_cross_axis_coupling)."""
        self._set_coupling("mag", cross_axis_coupling, envs_idx)

    @classmethod
    def build_kind(cls, manager, sensors):
        dev, fl = manager.device, manager.float_dtype
        o = [s.options for s in sensors]
        groups, perm = link_groups(sensors, dev)
        # a rigid solver that gives angular velocity and both accelerations from one kinematics run
        fused = all(hasattr(e.solver, "links_inertial_motion") for e, _ in groups)
        solver_links = [(e, torch.as_tensor([e.link_start + l for l in links], dtype=torch.long, device=dev))
                        for e, links in groups]
        return dict(groups=groups, perm=perm, fused=fused, solver_links=solver_links, pose_rows=_pose_rows(sensors),
                    mag=torch.as_tensor([x.magnetic_field for x in o], dtype=fl, device=dev))

    @classmethod
    def measure_kind(cls, manager, sensors, ctx):
        """[B, n * 9]: proper acceleration, angular velocity and magnetic field in each IMU's frame."""
        g, perm = ctx["groups"], ctx["perm"]
        quat = gather_links(manager, g, perm, lambda e, l: e.get_links_quat(l))
        if ctx["fused"]:  # one run of the rigid solver's kinematics for all three
            omega, acc, alpha = (torch.cat(x, dim=1) if len(x) > 1 else x[0] for x in zip(*(
                e.solver.links_inertial_motion(ids) for e, ids in ctx["solver_links"])))
            if perm is not None:
                omega, acc, alpha = omega[:, perm], acc[:, perm], alpha[:, perm]
        else:
            omega = gather_links(manager, g, perm, lambda e, l: e.get_links_ang(l))
            acc = gather_links(manager, g, perm, lambda e, l: e.get_links_acc(l))
        rot_link = quat_to_mat(quat.to(manager.float_dtype))  # [B, n, 3, 3]: link to world
        offset_pos, offset_rot, moved = manager.offsets(ctx["pose_rows"])  # each environment's
        if moved:
            # the sensor point's acceleration: a_o + alpha x r + omega x (omega x r), r world
            if not ctx["fused"]:
                alpha = gather_links(manager, g, perm, lambda e, l: e.get_links_acc_ang(l))
            r = torch.einsum("bnij,bnj->bni", rot_link, offset_pos)
            acc = acc + torch.cross(alpha, r, dim=-1) + torch.cross(omega, torch.cross(omega, r, dim=-1), dim=-1)
        rot = rot_link @ offset_rot  # sensor to world
        world = torch.stack([acc - cls._gravity(manager, sensors, ctx), omega, ctx["mag"].expand_as(acc)],
                            dim=2)  # [B, n, 3, 3]
        local = torch.einsum("bnji,bnkj->bnki", rot, world)  # R^T v for each of the 3 vectors
        return local.reshape(local.shape[0], -1)


    @staticmethod
    def _gravity(manager, sensors, ctx):
        """[n, 3]: the gravity each IMU's body falls with (its solver's own, RigidOptions.gravity, where it has
        one; else the scene's), made again only when one changes."""
        g = tuple(tuple(getattr(s.entity.solver, "gravity", None) or manager.scene.sim_options.gravity)
                  for s in sensors)
        if ctx.get("gravity_key") != g:
            ctx["gravity_key"] = g
            ctx["gravity"] = torch.as_tensor(g, dtype=manager.float_dtype, device=manager.device)
        return ctx["gravity"]


@register(Contact)
class ContactSensor(Sensor):
    n_channels = 1

    def _format(self, x):
        return x > 0.5

    @classmethod
    def build_kind(cls, manager, sensors):
        groups, perm = link_groups(sensors, manager.device)
        return dict(groups=groups, perm=perm)

    @classmethod
    def measure_kind(cls, manager, sensors, ctx):
        """[B, n]: 1.0 where a valid contact of the last substep involves the link, else 0.0."""
        parts = []
        for entity, links in ctx["groups"]:
            c = entity.get_contacts()
            link_a, link_b = manager.batched(c["link_a"]), manager.batched(c["link_b"])
            valid = c["valid_mask"] if manager.n_envs else torch.ones_like(link_a, dtype=torch.bool)
            target = entity.link_start + torch.as_tensor(links, device=link_a.device)  # [n]
            hit = (link_a[:, None, :] == target[None, :, None]) | (link_b[:, None, :] == target[None, :, None])
            parts.append((hit & valid[:, None, :]).any(dim=-1))
        touch = parts[0] if len(parts) == 1 else torch.cat(parts, dim=1)
        if ctx["perm"] is not None:
            touch = touch[:, ctx["perm"]]
        return touch.to(manager.float_dtype)


@register(ContactForce)
class ContactForceSensor(_NoisySensor):
    n_channels = 3

    def channel_model(self) -> dict:
        model = _noisy_model(self)
        model["min_abs"] = np.asarray(self.options.min_force, dtype=np.float64)
        model["max_abs"] = np.asarray(self.options.max_force, dtype=np.float64)
        return model

    @classmethod
    def build_kind(cls, manager, sensors):
        groups, perm = link_groups(sensors, manager.device)
        return dict(groups=groups, perm=perm, pose_rows=_pose_rows(sensors))

    @classmethod
    def measure_kind(cls, manager, sensors, ctx):
        """[B, n * 3]: the net contact force on each link in its sensor frame."""
        parts = []
        for entity, links in ctx["groups"]:
            net = manager.batched(entity.get_links_net_contact_force())
            parts.append(net[:, torch.as_tensor(links, device=manager.device)])
        force = parts[0] if len(parts) == 1 else torch.cat(parts, dim=1)
        if ctx["perm"] is not None:
            force = force[:, ctx["perm"]]
        quat = gather_links(manager, ctx["groups"], ctx["perm"], lambda e, l: e.get_links_quat(l))
        rot = quat_to_mat(quat.to(manager.float_dtype)) @ manager.offsets(ctx["pose_rows"])[1]
        return torch.einsum("bnji,bnj->bni", rot, force.to(manager.float_dtype)).reshape(force.shape[0], -1)
