"""The sensor manager: a solver of the core that owns every sensor of a scene and their state.

It sits last in `scene.solvers` and is active only when the scene has sensors, so that the state registry applies
to the sensors unchanged: their state (the ground-truth history that the read delay needs, the last measurement,
the random-walk drift and each environment's random-number key and counter) is declared once as `FieldSpec`s and
takes part in `scene.get_state()`, `scene.reset(state, envs_idx)`, checkpoints and their validation like any
solver's. It simulates no entity (its substeps do nothing); the scene calls `update()` once per `scene.step()`,
after the physics.

Every sensor is a run of channels in one `[B, n_channels]` layout (IMU 9: lin_acc, ang_vel, mag; ContactForce 3;
Contact 1, 0.0 or 1.0; the other kinds as their modules say). A step computes the ground truth of all channels,
kind by kind, each kind for all its sensors at once (base.Sensor.measure_kind), then the measurement of all
channels at once:

    history <- [ground truth, history[:-1]]            (slot k: k steps ago)
    delayed  = history[delay steps of the channel]    (+ u * jitter steps, u ~ U[0, 1): linear interpolation)
    aligned  = M delayed                              (IMU cross-axis coupling, block-diagonal)
    drift   += random_walk * N(0, 1)
    value    = aligned + drift + bias + noise * N(0, 1)
    value    = clip to [-max_abs, max_abs], 0 below min_abs          (ContactForce's max_force, min_force)
    measured = round(value / resolution) * resolution (where resolution > 0)

No value is read on the host in a step.
"""

from __future__ import annotations

import math
import secrets
import warnings

import numpy as np
import torch

from .._runtime import runtime
from ..errors import OptionError
from ..launch import torch_one_thread
from ..solver import SolverBase
from ..state import FieldSpec
from . import noise as rng
from .base import SENSOR_CLASSES, Sensor, check_rigid_link
from .kinematic import ContactForceSensor, ContactSensor, IMUData, IMUSensor  # noqa: F401  (registers the kinds)


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
        entity = check_rigid_link(self, options, None, name) if cls.requires_rigid_link else None
        cls.check(self, options, entity)
        steps = options.delay / self.sim_options.dt
        if not math.isclose(steps, round(steps), rel_tol=0, abs_tol=1e-9):
            warnings.warn(f"{name}: delay={options.delay} s is not a multiple of dt={self.sim_options.dt} s; the "
                          f"read delay will be {round(steps)} steps ({round(steps) * self.sim_options.dt} s).",
                          stacklevel=3)
        sensor = cls(self, len(self.sensors), options, entity)
        sensor._start = self._n_channels
        self._n_channels += sensor.n_channels
        self.sensors.append(sensor)
        return sensor

    # -- build -----------------------------------------------------------------------------------------------------

    def build_model(self):
        dev, fl, C = self.device, self.float_dtype, self._n_channels
        dt = self.sim_options.dt

        # per channel: the delay (steps), jitter (steps), owning sensor, measurement-model parameters
        delay, sensor_of = np.zeros(C, dtype=np.int64), np.zeros(C, dtype=np.int64)
        param = {k: np.zeros(C) for k in ("jitter", "bias", "noise", "random_walk", "resolution", "min_abs")}
        param["max_abs"] = np.full(C, np.inf)
        measure = np.ones(C, dtype=bool)
        align = []  # (first channel, 3x3)
        for s in self.sensors:
            ch, o = s.channels, s.options
            delay[ch] = round(o.delay / dt)
            sensor_of[ch] = s.idx
            measure[ch] = not o.update_ground_truth_only
            model = s.channel_model()
            for key, values in model.items():
                if key == "align":
                    align += [(s._start + first, m) for first, m in values]
                elif key == "jitter":
                    param["jitter"][ch] = values / dt
                else:
                    param[key][ch] = values
        jitter = param["jitter"]
        self._n_history = int((delay + np.ceil(jitter)).max()) + 1 if C else 1

        def t(x, dtype=fl):
            return torch.as_tensor(x, dtype=dtype, device=dev)

        self._delay = t(delay, torch.long)
        self._channel = torch.arange(C, device=dev)
        self._bias, self._noise, self._walk = t(param["bias"]), t(param["noise"]), t(param["random_walk"])
        self._res = t(param["resolution"])
        self._res_safe = torch.where(self._res > 0, self._res, torch.ones_like(self._res))
        self._min_abs, self._max_abs = t(param["min_abs"]), t(param["max_abs"])
        self._measure = t(measure, torch.bool)
        self._all_measured = bool(measure.all())
        # the cross-axis coupling: 3x3 blocks applied to their channels (none: the identity)
        blocks = [(a, m) for a, m in align if not np.array_equal(m, np.eye(3))]
        self._align_idx = t([[a + i for i in range(3)] for a, _ in blocks], torch.long) if blocks else None
        self._align_m = t(np.stack([m for _, m in blocks])) if blocks else None
        self._jitter, self._sensor_of = t(jitter, torch.float64), t(sensor_of, torch.long)
        self._has_jitter = bool((jitter > 0).any())
        self._has_noise, self._has_walk = bool((param["noise"] > 0).any()), bool((param["random_walk"] > 0).any())
        self._has_bias, self._has_res = bool((param["bias"] != 0).any()), bool((param["resolution"] > 0).any())
        self._has_clip = bool((param["min_abs"] > 0).any() or np.isfinite(param["max_abs"]).any())
        self._build_kinds()

    def _build_kinds(self):
        """Each kind's sensors, the context its measure_kind needs, and where its channels go."""
        by_kind = {}
        for s in self.sensors:
            by_kind.setdefault(type(s), []).append(s)
        self._kinds = []
        for cls, sensors in by_kind.items():
            cols = [c for s in sensors for c in range(s.channels.start, s.channels.stop)]
            if cols == list(range(cols[0], cols[0] + len(cols))):
                where = slice(cols[0], cols[0] + len(cols))  # contiguous: a view, no gather
            else:
                where = torch.as_tensor(cols, dtype=torch.long, device=self.device)
            self._kinds.append((cls, sensors, cls.build_kind(self, sensors), where))
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

    # -- what the kinds use ----------------------------------------------------------------------------------------

    def batched(self, x):
        """x with the environment axis that a scene without environments lacks ([B, ...], B = 1 there)."""
        return x if self.n_envs else x.unsqueeze(0)

    def gravity(self):
        g = self.scene.sim_options.gravity
        if self._gravity_key != g:
            self._gravity_key = g
            self._gravity_t = torch.as_tensor(g, dtype=self.float_dtype, device=self.device)
        return self._gravity_t

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
        # (torch's small ops on one thread: beside Taichi's thread pool, its own pool made them wait for a core,
        # 3-5 times slower on the 2-core CPU after the ray cast's parallel launch)
        with torch.no_grad(), torch_one_thread():
            if self._n_history > 1:
                history[:, 1:] = history[:, :-1].clone()
            gt = history[:, 0]
            for cls, sensors, ctx, where in self._kinds:
                gt[:, where] = cls.measure_kind(self, sensors, ctx).to(gt.dtype)
            value = history[:, self._delay, self._channel] if self._n_history > 1 else gt.clone()
            draws = self._has_noise or self._has_walk or self._has_jitter
            if draws:
                key, counter = st.at("rng_key", f), st.at("rng_counter", f)
            if self._has_jitter:
                value = self._jittered(history, value, rng.uniforms(key, counter, len(self.sensors),
                                                                    4 * self._n_channels))
            if self._align_idx is not None:
                block = value[:, self._align_idx]  # [B, n_blocks, 3]
                value[:, self._align_idx] = torch.einsum("kij,bkj->bki", self._align_m, block)
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
                value = torch.maximum(torch.minimum(value, self._max_abs), -self._max_abs)
                value = torch.where(value.abs() < self._min_abs, torch.zeros_like(value), value)
            if self._has_res:
                value = torch.where(self._res > 0, torch.round(value / self._res_safe) * self._res, value)
            if self._all_measured:
                measured.copy_(value)
            else:
                measured.copy_(torch.where(self._measure, value, measured))


__all__ = ["ContactForceSensor", "ContactSensor", "IMUData", "IMUSensor", "Sensor", "SensorManager"]
