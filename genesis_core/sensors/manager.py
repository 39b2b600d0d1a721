"""The sensor manager: a solver of the core that owns every sensor of a scene and their state.

It sits last in `scene.solvers` and is active only when the scene has sensors, so that the state registry applies
to the sensors unchanged: their state (the ground-truth history that the read delay needs, the last measurement,
the random-walk drift and each environment's random-number key and counter) is declared once as `FieldSpec`s and
takes part in `scene.get_state()`, `scene.reset(state, envs_idx)`, checkpoints and their validation like any
solver's. It simulates no entity (its substeps do nothing); the scene calls `update()` once per `scene.step()`,
after the physics.

Every sensor is a run of channels in one `[B, n_channels]` layout (IMU 9: lin_acc, ang_vel, mag; ContactForce 3;
Contact 1, 0.0 or 1.0). A step computes the ground truth of all channels with batched torch ops on the rigid
entities' public accessors (get_links_quat, get_links_ang, get_links_acc, get_links_acc_ang,
get_links_net_contact_force, get_contacts), then the measurement of all channels at once:

    history <- [ground truth, history[:-1]]            (slot k: k steps ago)
    delayed  = history[delay steps of the channel]    (+ u * jitter steps, u ~ U[0, 1): linear interpolation)
    aligned  = M delayed                              (IMU cross-axis coupling, block-diagonal)
    drift   += random_walk * N(0, 1)
    value    = aligned + drift + bias + noise * N(0, 1)
    value    = clip to [-max_force, max_force], 0 below min_force   (ContactForce)
    measured = round(value / resolution) * resolution (where resolution > 0)

No value is read on the host in a step.
"""

from __future__ import annotations

import math
import secrets
import warnings
from typing import NamedTuple

import numpy as np
import torch

from .._runtime import runtime
from ..errors import OptionError, SceneError
from ..rotations import quat_to_mat, rpy_to_quat
from ..solver import SolverBase
from ..state import FieldSpec
from . import noise as rng
from .options import IMU, Contact, ContactForce, alignment_matrix, per_channel


class IMUData(NamedTuple):
    """What an IMU reads: each `([n_envs,] 3)`, in the sensor frame."""

    lin_acc: torch.Tensor  # m/s^2, proper acceleration (a - g)
    ang_vel: torch.Tensor  # rad/s
    mag: torch.Tensor  # the unit of IMU(magnetic_field=...)


# what a rigid entity must offer for a sensor to be attached to it (Genesis World's RigidEntity names)
RIGID_ACCESSORS = ("n_links", "link_start", "get_links_quat", "get_links_ang", "get_links_acc", "get_links_acc_ang",
                   "get_links_net_contact_force", "get_contacts")


class Sensor:
    """A sensor of the scene (`scene.add_sensor(options)`): `read()` gives the measurement, `read_ground_truth()`
    the exact value of the current step, both torch tensors on gs.device shaped `([n_envs,] ...)`."""

    n_channels = 0

    def __init__(self, manager, idx: int, options, entity):
        self._manager = manager
        self.idx = idx  # index in scene.sensors
        self.options = options
        self.entity = entity
        self.link_idx_local = options.link_idx_local
        self._start = 0  # first channel (set at add)

    @property
    def channels(self) -> slice:
        return slice(self._start, self._start + self.n_channels)

    @property
    def is_built(self) -> bool:
        return self._manager.scene.is_built

    def read(self, envs_idx=None):
        """The measured value (delay, noise and the rest of the measurement model applied) of the last step."""
        return self._format(self._manager.read_channels("measured", self.channels, envs_idx))

    def read_ground_truth(self, envs_idx=None):
        """The exact value at the current step (no delay, no noise)."""
        return self._format(self._manager.read_channels("ground_truth", self.channels, envs_idx))

    def _format(self, x):
        return x

    def start_recording(self, rec_options):
        """Record `read()` as the scene steps with the recorder `rec_options` (a gs.recorders.* options object):
        `scene.start_recording(lambda: sensor.read(), rec_options)`, see there."""
        return self._manager.scene.start_recording(lambda: self.read(), rec_options)

    def __repr__(self):
        return (f"<{type(self).__name__} {self.idx}: entity {self.options.entity_idx}, link "
                f"{self.options.link_idx_local}>")


class IMUSensor(Sensor):
    n_channels = 9

    def _format(self, x):
        return IMUData(x[..., 0:3], x[..., 3:6], x[..., 6:9])


class ContactSensor(Sensor):
    n_channels = 1

    def _format(self, x):
        return x > 0.5


class ContactForceSensor(Sensor):
    n_channels = 3


SENSOR_CLASSES = {IMU: IMUSensor, Contact: ContactSensor, ContactForce: ContactForceSensor}
NOISY = ("resolution", "bias", "noise", "random_walk")


class SensorManager(SolverBase):
    """The sensors of a scene and their state (see the module's docstring). Reached as `scene.sensor_manager`."""

    short_name = "sensor"
    order = 2**31  # after every physics solver
    state_fields = (
        FieldSpec("history", ("n_history", "n_channels"), frames=False,
                  doc="the ground truth of every channel, slot k taken k steps ago (slot 0: the current step)"),
        FieldSpec("measured", ("n_channels",), frames=False, doc="the last measurement of every channel"),
        FieldSpec("drift", ("n_channels",), frames=False, doc="the random walk's accumulated offset per channel"),
        FieldSpec("rng_key", (), dtype="int", frames=False, doc="the environment's noise key (from the seed)"),
        FieldSpec("rng_counter", (), dtype="int", frames=False, bounds=(0, rng.COUNTER_MAX),
                  doc="how many noise draws the environment made: its next draw is a function of key and counter"),
    )

    def __init__(self, scene, sim_options, options=None):
        super().__init__(scene, sim_options, options)
        self.sensors = []
        self._n_channels = 0

    @property
    def is_active(self) -> bool:
        return bool(self.sensors)

    # -- before build ----------------------------------------------------------------------------------------------

    def add_sensor(self, options):
        """Check `options` against the scene and add the sensor (nothing is added on an error)."""
        cls = SENSOR_CLASSES.get(type(options))
        if cls is None:
            known = ", ".join(f"gs.sensors.{k.__name__}" for k in SENSOR_CLASSES)
            raise OptionError(f"add_sensor: {type(options).__name__} is not a sensor of this engine; the sensors are "
                              f"{known}.")
        name = type(options).__name__
        if self.sim_options.requires_grad:
            raise OptionError(f"add_sensor({name}): sensors are not differentiable; use a scene built with "
                              "SimOptions(requires_grad=False).")
        entities = self.scene.entities
        idx = options.entity_idx
        if idx is None or idx < 0:
            raise OptionError(f"add_sensor: {name}(entity_idx={idx!r}) is attached to no entity; give the index of a "
                              "rigid entity (entity.idx).")
        if idx >= len(entities):
            raise OptionError(f"add_sensor: {name}(entity_idx={idx}) is out of range: the scene has "
                              f"{len(entities)} entities.")
        entity = entities[idx]
        if not all(hasattr(entity, a) for a in RIGID_ACCESSORS):
            raise OptionError(f"add_sensor: {name}(entity_idx={idx}) is a {type(entity).__name__} of the "
                              f"{entity.solver.name}; sensors attach to rigid entities (gs.materials.Rigid).")
        if options.link_idx_local >= entity.n_links:
            raise OptionError(f"add_sensor: {name}(link_idx_local={options.link_idx_local}) is out of range: entity "
                              f"{idx} has {entity.n_links} links.")
        if isinstance(options, (IMU, ContactForce)):
            for key in NOISY:
                per_channel(options, key, cls.n_channels)
        steps = options.delay / self.sim_options.dt
        if not math.isclose(steps, round(steps), rel_tol=0, abs_tol=1e-9):
            warnings.warn(f"{name}: delay={options.delay} s is not a multiple of dt={self.sim_options.dt} s; the "
                          f"read delay will be {round(steps)} steps ({round(steps) * self.sim_options.dt} s).",
                          stacklevel=3)
        sensor = cls(self, len(self.sensors), options, entity)
        sensor._start = self._n_channels
        self._n_channels += cls.n_channels
        self.sensors.append(sensor)
        return sensor

    # -- build -----------------------------------------------------------------------------------------------------

    def build_model(self):
        dev, fl, C = self.device, self.float_dtype, self._n_channels
        dt = self.sim_options.dt

        # per channel: the delay (steps), jitter (steps), owning sensor, measurement-model parameters
        delay, sensor_of = np.zeros(C, dtype=np.int64), np.zeros(C, dtype=np.int64)
        jitter, bias, noise, walk, res, lo = (np.zeros(C) for _ in range(6))
        hi = np.full(C, np.inf)
        measure = np.ones(C, dtype=bool)
        align = np.eye(C)
        for s in self.sensors:
            ch, o = s.channels, s.options
            delay[ch] = round(o.delay / dt)
            sensor_of[ch] = s.idx
            measure[ch] = not o.update_ground_truth_only
            if isinstance(o, (IMU, ContactForce)):  # the noisy sensors
                jitter[ch] = o.jitter / dt
                res[ch], bias[ch], noise[ch], walk[ch] = (per_channel(o, k, s.n_channels) for k in NOISY)
            if isinstance(o, ContactForce):
                lo[ch], hi[ch] = o.min_force, o.max_force
            if isinstance(o, IMU):
                for k, part in enumerate(("acc", "gyro", "mag")):
                    a = s._start + 3 * k
                    align[a:a + 3, a:a + 3] = alignment_matrix(getattr(o, f"{part}_cross_axis_coupling"))
        self._n_history = int((delay + np.ceil(jitter)).max()) + 1 if C else 1

        def t(x, dtype=fl):
            return torch.as_tensor(x, dtype=dtype, device=dev)

        self._delay = t(delay, torch.long)
        self._channel = torch.arange(C, device=dev)
        self._bias, self._noise, self._walk, self._res = t(bias), t(noise), t(walk), t(res)
        self._res_safe = torch.where(self._res > 0, self._res, torch.ones_like(self._res))
        self._min_force, self._max_force = t(lo), t(hi)
        self._measure = t(measure, torch.bool)
        self._all_measured = bool(measure.all())
        self._align_t = None if np.array_equal(align, np.eye(C)) else t(align.T)
        self._jitter, self._sensor_of = t(jitter, torch.float64), t(sensor_of, torch.long)
        self._has_jitter = bool((jitter > 0).any())
        self._has_noise, self._has_walk = bool((noise > 0).any()), bool((walk > 0).any())
        self._has_bias, self._has_res = bool((bias != 0).any()), bool((res > 0).any())
        self._has_clip = bool((lo > 0).any() or np.isfinite(hi).any())
        self._build_groups()

    def _build_groups(self):
        """Per entity, the links whose quantities each sensor kind needs, and where they go."""
        dev = self.device
        self._imu = [s for s in self.sensors if isinstance(s, IMUSensor)]
        self._force = [s for s in self.sensors if isinstance(s, ContactForceSensor)]
        self._contact = [s for s in self.sensors if isinstance(s, ContactSensor)]

        def groups(sensors):
            """[(entity, its distinct links)], and for each sensor its row among the gathered links."""
            by_entity = {}
            for s in sensors:
                links = by_entity.setdefault(s.entity.idx, (s.entity, []))[1]
                if s.link_idx_local not in links:
                    links.append(s.link_idx_local)
            out, start = [], {}
            for key, (entity, links) in by_entity.items():
                start[key] = sum(len(l) for _, l in out)
                out.append((entity, links))
            rows = [start[s.entity.idx] + by_entity[s.entity.idx][1].index(s.link_idx_local) for s in sensors]
            same = rows == list(range(sum(len(l) for _, l in out)))
            return out, None if same else torch.as_tensor(rows, dtype=torch.long, device=dev)

        def cols(sensors):
            return torch.as_tensor([c for s in sensors for c in range(s.channels.start, s.channels.stop)],
                                   dtype=torch.long, device=dev)

        fl = self.float_dtype
        self._imu_groups, self._imu_perm = groups(self._imu)
        self._imu_cols = cols(self._imu)
        if self._imu:
            o = [s.options for s in self._imu]
            self._imu_offset_pos = torch.as_tensor([x.pos_offset for x in o], dtype=fl, device=dev)
            self._imu_offset_rot = torch.as_tensor(
                np.stack([quat_to_mat(rpy_to_quat(np.radians(x.euler_offset))) for x in o]), dtype=fl, device=dev)
            self._imu_mag = torch.as_tensor([x.magnetic_field for x in o], dtype=fl, device=dev)
            self._imu_has_offset = any(any(x != 0 for x in s.pos_offset) for s in o)
        self._force_groups, self._force_perm = groups(self._force)
        self._force_cols = cols(self._force)
        if self._force:
            self._force_offset_rot = torch.as_tensor(
                np.stack([quat_to_mat(rpy_to_quat(np.radians(s.options.euler_offset))) for s in self._force]),
                dtype=fl, device=dev)
        self._contact_groups, self._contact_perm = groups(self._contact)
        self._contact_cols = cols(self._contact)
        self._gravity_key = None

    def state_dims(self) -> dict:
        return {"n_history": self._n_history, "n_channels": self._n_channels}

    def init_state(self, f: int):
        """Zero readings, history and drift (as Genesis World: readings are zero until the first step); each
        environment's noise key from gs.init(seed=...) (a random seed when none was given) and its counter 0."""
        seed = runtime.seed if runtime.seed is not None else secrets.randbits(63)
        self.state.at("rng_key", f).copy_(rng.env_keys(seed, self.batch, self.device))

    def signature(self) -> dict:
        return {"sensors": [{"kind": type(s.options).__name__, "options": s.options.as_dict()} for s in self.sensors]}

    def set_gravity(self, gravity):
        """The IMUs read the scene's gravity (`scene.sim_options.gravity`) at every step: nothing to update."""

    # -- reading ---------------------------------------------------------------------------------------------------

    def read_channels(self, what: str, channels: slice, envs_idx=None) -> torch.Tensor:
        """A copy of channels `channels` of the measurement ("measured") or the current ground truth
        ("ground_truth"), `([n_envs or len(envs_idx),] n)`."""
        self.scene._require_built("sensor.read()")
        envs = self.scene._sanitize_envs_idx(envs_idx)
        f = self.frame
        x = self.state.at("history", f)[:, 0] if what == "ground_truth" else self.state.at("measured", f)
        x = x[:, channels]
        x = x.clone() if envs is None else x[envs]
        return x if self.n_envs else x[0]

    # -- stepping --------------------------------------------------------------------------------------------------

    def _batched(self, x):
        return x if self.n_envs else x.unsqueeze(0)

    def _gather(self, groups, perm, read):
        """`read(entity, links_local)` [B, n, ...] per entity, concatenated, a row per sensor."""
        parts = [self._batched(read(entity, links)) for entity, links in groups]
        x = parts[0] if len(parts) == 1 else torch.cat(parts, dim=1)
        return x if perm is None else x[:, perm]

    def _gravity(self):
        g = self.scene.sim_options.gravity
        if self._gravity_key != g:
            self._gravity_key = g
            self._gravity_t = torch.as_tensor(g, dtype=self.float_dtype, device=self.device)
        return self._gravity_t

    def _imu_ground_truth(self) -> torch.Tensor:
        """[B, n_imu * 9]: proper acceleration, angular velocity and magnetic field in each IMU's frame."""
        g = self._imu_groups
        quat = self._gather(g, self._imu_perm, lambda e, l: e.get_links_quat(l))
        omega = self._gather(g, self._imu_perm, lambda e, l: e.get_links_ang(l))
        acc = self._gather(g, self._imu_perm, lambda e, l: e.get_links_acc(l))
        rot_link = quat_to_mat(quat.to(self.float_dtype))  # [B, n, 3, 3]: link to world
        if self._imu_has_offset:
            # the sensor point's acceleration: a_o + alpha x r + omega x (omega x r), r world
            alpha = self._gather(g, self._imu_perm, lambda e, l: e.get_links_acc_ang(l))
            r = torch.einsum("bnij,nj->bni", rot_link, self._imu_offset_pos)
            acc = acc + torch.cross(alpha, r, dim=-1) + torch.cross(omega, torch.cross(omega, r, dim=-1), dim=-1)
        rot = rot_link @ self._imu_offset_rot  # sensor to world
        world = torch.stack([acc - self._gravity(), omega, self._imu_mag.expand_as(acc)], dim=2)  # [B, n, 3, 3]
        local = torch.einsum("bnji,bnkj->bnki", rot, world)  # R^T v for each of the 3 vectors
        return local.reshape(local.shape[0], -1)

    def _force_ground_truth(self) -> torch.Tensor:
        """[B, n_force * 3]: the net contact force on each link in its sensor frame."""
        parts = []
        for entity, links in self._force_groups:
            net = self._batched(entity.get_links_net_contact_force())
            parts.append(net[:, torch.as_tensor(links, device=self.device)])
        force = parts[0] if len(parts) == 1 else torch.cat(parts, dim=1)
        if self._force_perm is not None:
            force = force[:, self._force_perm]
        quat = self._gather(self._force_groups, self._force_perm, lambda e, l: e.get_links_quat(l))
        rot = quat_to_mat(quat.to(self.float_dtype)) @ self._force_offset_rot
        return torch.einsum("bnji,bnj->bni", rot, force.to(self.float_dtype)).reshape(force.shape[0], -1)

    def _contact_ground_truth(self) -> torch.Tensor:
        """[B, n_contact]: 1.0 where a valid contact of the last substep involves the link, else 0.0."""
        parts = []
        for entity, links in self._contact_groups:
            c = entity.get_contacts()
            link_a, link_b = self._batched(c["link_a"]), self._batched(c["link_b"])
            valid = c["valid_mask"] if self.n_envs else torch.ones_like(link_a, dtype=torch.bool)
            target = entity.link_start + torch.as_tensor(links, device=link_a.device)  # [n]
            hit = (link_a[:, None, :] == target[None, :, None]) | (link_b[:, None, :] == target[None, :, None])
            parts.append((hit & valid[:, None, :]).any(dim=-1))
        touch = parts[0] if len(parts) == 1 else torch.cat(parts, dim=1)
        if self._contact_perm is not None:
            touch = touch[:, self._contact_perm]
        return touch.to(self.float_dtype)

    def _jittered(self, history, value, u):
        """The channels read delay + u * jitter steps back ([B, n_sensors] u in (0, 1), one per sensor), linearly
        interpolated between the two buffered steps around it; channels without jitter keep `value`."""
        steps = self._delay.to(torch.float64) + u[:, self._sensor_of] * self._jitter  # [B, C]
        lo = steps.floor().long()
        frac = (steps - lo).to(self.float_dtype)
        hi = torch.clamp(lo + 1, max=self._n_history - 1)
        at_lo = torch.gather(history, 1, lo[:, None, :])[:, 0]
        at_hi = torch.gather(history, 1, hi[:, None, :])[:, 0]
        return torch.where(self._jitter > 0, torch.lerp(at_lo, at_hi, frac), value)

    def update(self):
        """Measure every sensor of every environment after a step (batched; nothing read on the host)."""
        f, st = self.frame, self.state
        history, measured, drift = st.at("history", f), st.at("measured", f), st.at("drift", f)
        with torch.no_grad():
            gt = torch.zeros((self.batch, self._n_channels), dtype=self.float_dtype, device=self.device)
            if self._imu:
                gt[:, self._imu_cols] = self._imu_ground_truth()
            if self._force:
                gt[:, self._force_cols] = self._force_ground_truth()
            if self._contact:
                gt[:, self._contact_cols] = self._contact_ground_truth()
            if self._n_history > 1:
                history[:, 1:] = history[:, :-1].clone()
            history[:, 0] = gt
            value = history[:, self._delay, self._channel] if self._n_history > 1 else gt
            draws = self._has_noise or self._has_walk or self._has_jitter
            if draws:
                key, counter = st.at("rng_key", f), st.at("rng_counter", f)
            if self._has_jitter:
                value = self._jittered(history, value, rng.uniforms(key, counter, len(self.sensors),
                                                                    4 * self._n_channels))
            if self._align_t is not None:
                value = value @ self._align_t
            if draws:
                z = rng.normals(key, counter, 2 * self._n_channels, self.float_dtype)
                counter.copy_((counter.to(torch.int64) + 1) % (rng.COUNTER_MAX + 1))
                if self._has_walk:
                    drift += self._walk * z[:, self._n_channels:]
                    value = value + drift
                if self._has_noise:
                    value = value + self._noise * z[:, :self._n_channels]
            if self._has_bias:
                value = value + self._bias
            if self._has_clip:
                value = torch.maximum(torch.minimum(value, self._max_force), -self._max_force)
                value = torch.where(value.abs() < self._min_force, torch.zeros_like(value), value)
            if self._has_res:
                value = torch.where(self._res > 0, torch.round(value / self._res_safe) * self._res, value)
            if self._all_measured:
                measured.copy_(value)
            else:
                measured.copy_(torch.where(self._measure, value, measured))

