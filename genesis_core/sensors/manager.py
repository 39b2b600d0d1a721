"""The sensor manager: a solver of the core that owns every sensor of a scene and their state.

It sits last in `scene.solvers` and is active only when the scene has sensors, so that the state registry applies
to the sensors unchanged: their state (the ground-truth history that the read delay needs, the last measurement,
the random-walk drift, each environment's random-number key and counter, and the evolving state of sensors that
keep one, `aux`) is declared once as `FieldSpec`s and
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


# the measurement model's parameters that are per-environment state (sensor.set_bias, set_noise, ...)
MODEL_FIELDS = ("bias", "noise", "random_walk", "resolution")


class SensorManager(SolverBase):
    """The sensors of a scene and their state (see the module's docstring). Reached as `scene.sensor_manager`."""

    short_name = "sensor"
    order = 2**31  # after every physics solver
    state_fields = (
        FieldSpec("history", ("n_history", "n_channels"), frames=False,
                  doc="the ground truth of every channel, slot k taken k steps ago (slot 0: the current step)"),
        FieldSpec("measured", ("n_channels",), frames=False, doc="the last measurement of every channel"),
        FieldSpec("drift", ("n_channels",), frames=False, doc="the random walk's accumulated offset per channel"),
        FieldSpec("bias", ("n_channels",), frames=False,
                  doc="each channel's constant offset (the options' bias; sensor.set_bias per environment)"),
        FieldSpec("noise", ("n_channels",), frames=False, bounds=(0.0, None),
                  doc="each channel's white-noise standard deviation (options' noise; sensor.set_noise)"),
        FieldSpec("random_walk", ("n_channels",), frames=False, bounds=(0.0, None),
                  doc="each channel's random-walk step deviation (options' random_walk; sensor.set_random_walk)"),
        FieldSpec("resolution", ("n_channels",), frames=False, bounds=(0.0, None),
                  doc="each channel's quantum, 0: none (options' resolution; sensor.set_resolution)"),
        FieldSpec("aux", ("n_aux",), frames=False,
                  doc="each sensor's own evolving state beyond its readings, a run per sensor (Sensor.aux_count)"),
        FieldSpec("rng_key", (), dtype="int", frames=False, doc="the environment's noise key (from the seed)"),
        FieldSpec("rng_counter", (), dtype="int", frames=False, bounds=(0, rng.COUNTER_MAX),
                  doc="how many noise draws the environment made: its next draw is a function of key and counter"),
    )

    def __init__(self, scene, sim_options, options=None):
        super().__init__(scene, sim_options, options)
        self.sensors = []
        self._n_channels = 0
        self._n_aux = 0

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
        sensor._start, sensor._aux_start = self._n_channels, self._n_aux
        self._n_channels += sensor.n_channels
        self._n_aux += sensor.n_aux
        self.sensors.append(sensor)
        return sensor

    # -- build -----------------------------------------------------------------------------------------------------

    def build_model(self):
        self._n_channels = max(self._n_channels, 1)  # (sensors without channels only: one channel left at zero)
        dev, fl, C = self.device, self.float_dtype, self._n_channels
        dt = self.sim_options.dt
        # each sensor's run of `aux`, laid out now that the whole scene is known (Sensor.aux_count_at_build)
        self._n_aux = 0
        for s in self.sensors:
            s.n_aux = s.aux_count_at_build()
            s._aux_start, self._n_aux = self._n_aux, self._n_aux + s.n_aux

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
        # the options' per-channel values: each environment's starting values of the state's parameter fields
        self._param0 = {k: t(param[k]) for k in MODEL_FIELDS}
        self._min_abs, self._max_abs = t(param["min_abs"]), t(param["max_abs"])
        self._measure = t(measure, torch.bool)
        self._all_measured = bool(measure.all())
        # the cross-axis coupling: 3x3 blocks applied to their channels (none: the identity)
        blocks = [(a, m) for a, m in align if not np.array_equal(m, np.eye(3))]
        self._align_idx = t([[a + i for i in range(3)] for a, _ in blocks], torch.long) if blocks else None
        self._align_m = t(np.stack([m for _, m in blocks])) if blocks else None
        self._jitter, self._sensor_of = t(jitter, torch.float64), t(sensor_of, torch.long)
        self._has_jitter = bool((jitter > 0).any())
        self._params_seen = None  # the parameter fields' flags are read from the state at the next update
        self._has_clip = bool((param["min_abs"] > 0).any() or np.isfinite(param["max_abs"]).any())
        self._build_kinds()

    def _build_kinds(self):
        """Each kind's sensors, the context its measure_kind needs, and where its channels go."""
        by_kind = {}
        for s in self.sensors:
            by_kind.setdefault(type(s), []).append(s)
        self._kinds = []
        for cls, sensors in by_kind.items():
            ctx = cls.build_kind(self, sensors)
            cols = [c for s in sensors for c in range(s.channels.start, s.channels.stop)]
            if not cols:  # (cameras: rendered when read, nothing measured each step)
                continue
            if cols == list(range(cols[0], cols[0] + len(cols))):
                where = slice(cols[0], cols[0] + len(cols))  # contiguous: a view, no gather
            else:
                where = torch.as_tensor(cols, dtype=torch.long, device=self.device)
            self._kinds.append((cls, sensors, ctx, where))

    def state_dims(self) -> dict:
        return {"n_history": self._n_history, "n_channels": self._n_channels, "n_aux": max(self._n_aux, 1)}

    def init_state(self, f: int):
        """Zero readings, history and drift (as Genesis World: readings are zero until the first step); each
        environment's noise key from gs.init(seed=...) (a random seed when none was given) and its counter 0."""
        seed = runtime.seed if runtime.seed is not None else secrets.randbits(63)
        self.state.at("rng_key", f).copy_(rng.env_keys(seed, self.batch, self.device))
        for k in MODEL_FIELDS:
            self.state.at(k, f).copy_(self._param0[k].expand(self.batch, -1))
        self._params_seen = None
        aux = self.state.at("aux", f)
        for s in self.sensors:
            if s.n_aux:
                s.init_aux(aux[:, s.aux])

    def set_state(self, f: int, state, envs_idx=None):
        super().set_state(f, state, envs_idx)
        self._params_seen = None

    def state_restored(self):
        """The scene wrote the state wholesale (load_checkpoint): read the parameter fields' flags again."""
        self._params_seen = None

    def _model_flags(self, f):
        """Which steps of the measurement model some channel of some environment needs (bias, noise, random walk,
        resolution), read from the state's parameter fields once after each write to them (one host read then,
        none in the steps between)."""
        if self._params_seen is None:
            st = self.state
            self._params_seen = (bool((st.at("bias", f) != 0).any()), bool((st.at("noise", f) > 0).any()),
                                 bool((st.at("random_walk", f) > 0).any()), bool((st.at("resolution", f) > 0).any()))
        return self._params_seen

    def set_model_field(self, sensor, name: str, value, envs_idx=None):
        """Write `value` (one number, one per channel of the sensor, or one row per environment) into the sensor's
        channels of the parameter field `name` in the environments envs_idx (None: all); checked like every
        write into state (refused, nothing written, where it breaks the field's bounds)."""
        self.scene._require_built(f"set_{name}")
        envs = self.scene._sanitize_envs_idx(envs_idx)
        n = sensor.n_channels
        x = torch.as_tensor(np.asarray(value.detach().cpu() if torch.is_tensor(value) else value, dtype=np.float64))
        if x.dim() == 0 or (x.dim() == 1 and x.shape[0] == 1):
            x = x.reshape(()).expand(n)
        self.state.set_rows(name, self.frame, x, envs, (sensor.channels,), what=f"set_{name}")
        self._params_seen = None

    def signature(self) -> dict:
        return {"sensors": [{"kind": type(s.options).__name__, "options": s.options.as_dict()} for s in self.sensors]}

    def set_gravity(self, gravity):
        """The IMUs read their rigid solver's gravity (which scene.set_gravity sets) at every step: nothing to
        update here."""

    # -- what the kinds use ----------------------------------------------------------------------------------------

    def batched(self, x):
        """x with the environment axis that a scene without environments lacks ([B, ...], B = 1 there)."""
        return x if self.n_envs else x.unsqueeze(0)

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
            has_bias, has_noise, has_walk, has_res = self._model_flags(f)
            draws = has_noise or has_walk or self._has_jitter
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
                if has_walk:
                    drift += st.at("random_walk", f) * z[:, self._n_channels:]
                    value = value + drift
                if has_noise:
                    value = value + st.at("noise", f) * z[:, :self._n_channels]
            if has_bias:
                value = value + st.at("bias", f)
            if self._has_clip:
                value = torch.maximum(torch.minimum(value, self._max_abs), -self._max_abs)
                value = torch.where(value.abs() < self._min_abs, torch.zeros_like(value), value)
            if has_res:
                res = st.at("resolution", f)
                value = torch.where(res > 0, torch.round(value / torch.where(res > 0, res, torch.ones_like(res))) * res,
                                    value)
            if self._all_measured:
                measured.copy_(value)
            else:
                measured.copy_(torch.where(self._measure, value, measured))


__all__ = ["ContactForceSensor", "ContactSensor", "IMUData", "IMUSensor", "Sensor", "SensorManager"]
