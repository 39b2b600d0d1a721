"""The sensor manager: a solver of the core that owns every sensor of a scene and their state.

It sits last in `scene.solvers` and is active only when the scene has sensors, so that the state registry applies
to the sensors unchanged: their state (the ground-truth history that the read delay needs, the last measurement,
the random-walk drift, each environment's random-number key and counter, the measurement model's parameters that
the setters change per environment, and the evolving state of sensors that keep one, `aux`) is declared once as
`FieldSpec`s and takes part in `scene.get_state()`, `scene.reset(state, envs_idx)`, checkpoints and their
validation like any solver's. It simulates no entity (its substeps do nothing); the scene calls `update()` once per
`scene.step()`, after the physics.

Every sensor is a run of channels in one `[B, n_channels]` layout (IMU 9: lin_acc, ang_vel, mag; ContactForce 3;
Contact 1, 0.0 or 1.0; the other kinds as their modules say). A step computes the ground truth of all channels,
kind by kind, each kind for all its sensors at once (base.Sensor.measure_kind), then the measurement of all
channels at once:

    history <- [ground truth, history[:-1]]            (slot k: k steps ago)
    delayed  = history[delay steps of the sensor]     (+ u * jitter steps, u ~ U[0, 1): linear interpolation)
    aligned  = M delayed                              (IMU cross-axis coupling, block-diagonal)
    drift   += random_walk * N(0, 1)
    value    = aligned + drift + bias + noise * N(0, 1)
    value    = clip to [-max_abs, max_abs], 0 below min_abs          (ContactForce's max_force, min_force)
    measured = round(value / resolution) * resolution (where resolution > 0)

The delay and jitter (steps), the bias, noise, random walk and resolution, the IMU's coupling matrices M and the
offsets of the IMU and ContactForce sensors are per-environment state (the options' values at build, then what the
sensors' setters write). No value is read on the host in a step: which parts of the model some environment needs
(bias, noise, ..., a per-environment delay, a coupling) is read from the state once after each write to it.
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
from ..rotations import quat_to_mat, rpy_to_quat
from ..state import FieldSpec, first_entry
from . import noise as rng
from .base import MAX_COUPLING, MAX_OFFSET, SENSOR_CLASSES, Sensor, check_rigid_link
from .kinematic import ContactForceSensor, ContactSensor, IMUData, IMUSensor  # noqa: F401  (registers the kinds)
from .options import alignment_matrix


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
        FieldSpec("delay_steps", ("n_sensors",), dtype="int", frames=False, bounds=(0, None),
                  doc="each sensor's read delay, whole steps (options' round(delay / dt); sensor.set_delay); with "
                      "ceil(jitter_steps), at most the history's n_history - 1"),
        FieldSpec("jitter_steps", ("n_sensors",), frames=False, bounds=(0.0, None),
                  doc="each sensor's largest extra read delay, steps (options' jitter / dt; sensor.set_jitter)"),
        FieldSpec("pos_offset", ("n_posed", 3), frames=False, bounds=(-MAX_OFFSET, MAX_OFFSET),
                  doc="the sensor frame's origin in the link frame, m, of each sensor with per-environment offsets "
                      "(IMU, ContactForce; options' pos_offset; sensor.set_pos_offset)"),
        FieldSpec("quat_offset", ("n_posed", 4), frames=False, quat=True,
                  doc="the sensor frame's rotation from the link frame, (w, x, y, z), of each sensor with "
                      "per-environment offsets (options' euler_offset; sensor.set_quat_offset)"),
        FieldSpec("alignment", ("n_align", 3, 3), frames=False, bounds=(-MAX_COUPLING, MAX_COUPLING),
                  doc="each 3-axis block's cross-axis coupling matrix M, the measurement M v (IMU: acc, gyro, mag "
                      "of each IMU; options' *_cross_axis_coupling; imu.set_*_cross_axis_coupling)"),
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
        dev, fl, C, S = self.device, self.float_dtype, self._n_channels, len(self.sensors)
        dt = self.sim_options.dt
        # each sensor's run of `aux`, laid out now that the whole scene is known (Sensor.aux_count_at_build)
        self._n_aux = 0
        for s in self.sensors:
            s.n_aux = s.aux_count_at_build()
            s._aux_start, self._n_aux = self._n_aux, self._n_aux + s.n_aux

        # per sensor: the delay and jitter (steps); per channel: the owning sensor, measurement-model parameters
        delay, jitter = np.zeros(S, dtype=np.int64), np.zeros(S)
        sensor_of = np.zeros(C, dtype=np.int64)
        param = {k: np.zeros(C) for k in ("bias", "noise", "random_walk", "resolution", "min_abs")}
        param["max_abs"] = np.full(C, np.inf)
        measure = np.ones(C, dtype=bool)
        align = []  # (first channel, 3x3): every block a sensor declares, the identity included
        for s in self.sensors:
            ch, o = s.channels, s.options
            model = s.channel_model()
            s._align_start = len(align)
            if s.n_channels:  # (a sensor without channels, a camera, measures nothing each step: no delay)
                delay[s.idx] = round(o.delay / dt)
                jitter[s.idx] = model.get("jitter", 0.0) / dt
            sensor_of[ch] = s.idx
            measure[ch] = not o.update_ground_truth_only
            for key, values in model.items():
                if key == "align":
                    align += [(s._start + first, np.asarray(m, dtype=np.float64)) for first, m in values]
                elif key != "jitter":
                    param[key][ch] = values
        # the history's length is fixed here: the setters may not ask for more (set_delay, set_jitter)
        self._n_history = int((delay + np.ceil(jitter)).max(initial=0)) + 1

        def t(x, dtype=fl):
            return torch.as_tensor(x, dtype=dtype, device=dev)

        # the delays of the options per channel (the step's path while every environment keeps them)
        self._delay = t(delay[sensor_of], torch.long)
        self._channel = torch.arange(C, device=dev)
        self._sensor_of = t(sensor_of, torch.long)
        # the options' values: each environment's starting values of the state's parameter fields
        self._delay0, self._jitter0 = t(delay, torch.int32), t(jitter)
        self._param0 = {k: t(param[k]) for k in MODEL_FIELDS}
        self._min_abs, self._max_abs = t(param["min_abs"]), t(param["max_abs"])
        self._measure = t(measure, torch.bool)
        self._all_measured = bool(measure.all())
        # the cross-axis coupling: each block's channels, and the options' matrices (padded with one identity)
        self._align_idx = t([[a + i for i in range(3)] for a, _ in align], torch.long) if align else None
        self._n_align = max(len(align), 1)
        self._align0 = t(np.stack([m for _, m in align]) if align else np.eye(3)[None])
        self._eye3 = t(np.eye(3))
        # the sensors whose offsets are per-environment state, kind after kind (each kind's rows contiguous)
        by_kind = {}
        for s in self.sensors:
            by_kind.setdefault(type(s), []).append(s)
        posed = [s for group in by_kind.values() for s in group if s.per_env_offsets]
        self._n_posed = max(len(posed), 1)
        pos0, quat0 = np.zeros((self._n_posed, 3)), np.tile([1.0, 0.0, 0.0, 0.0], (self._n_posed, 1))
        for row, s in enumerate(posed):
            s._pose_row = row
            pos0[row] = s.options.pos_offset
            quat0[row] = rpy_to_quat(np.radians(s.options.euler_offset))
        self._pos0, self._quat0 = t(pos0), t(quat0)
        self._rot0 = t(np.stack([quat_to_mat(q) for q in quat0]))  # the options' rotations, as the kinds made them
        self._flags = None  # what the state's parameter fields need, read from them at the next update
        self._has_clip = bool((param["min_abs"] > 0).any() or np.isfinite(param["max_abs"]).any())
        self._build_kinds()

    def build(self, n_envs: int, n_frames: int):
        super().build(n_envs, n_frames)
        self.state.rules = self._state_rules  # reset(state) and checkpoints meet the history's length too

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
        return {"n_history": self._n_history, "n_channels": self._n_channels, "n_aux": max(self._n_aux, 1),
                "n_sensors": len(self.sensors), "n_posed": self._n_posed, "n_align": self._n_align}

    def init_state(self, f: int):
        """Zero readings, history and drift (as Genesis World: readings are zero until the first step); each
        environment's noise key from gs.init(seed=...) (a random seed when none was given) and its counter 0; the
        model's parameters, delays, offsets and coupling matrices of the options."""
        seed = runtime.seed if runtime.seed is not None else secrets.randbits(63)
        st = self.state
        st.at("rng_key", f).copy_(rng.env_keys(seed, self.batch, self.device))
        for k in MODEL_FIELDS:
            st.at(k, f).copy_(self._param0[k].expand(self.batch, -1))
        for k, x in (("delay_steps", self._delay0), ("jitter_steps", self._jitter0), ("pos_offset", self._pos0),
                     ("quat_offset", self._quat0), ("alignment", self._align0)):
            st.at(k, f).copy_(x.expand_as(st.at(k, f)))
        self._flags = None
        aux = st.at("aux", f)
        for s in self.sensors:
            if s.n_aux:
                s.init_aux(aux[:, s.aux])

    def set_state(self, f: int, state, envs_idx=None):
        super().set_state(f, state, envs_idx)
        self._flags = None

    def state_restored(self):
        """The scene wrote the state wholesale (load_checkpoint): read the parameter fields' flags again."""
        self._flags = None

    def _state_rules(self, rows):
        """The rule across fields (StateStore.rules, on rows {name: [R, ...]}): each sensor's delay plus its jitter
        rounded up fits the history built (delay_steps + ceil(jitter_steps) <= n_history - 1)."""
        d = rows.get("delay_steps")
        if d is None or not d.numel():
            return None
        j = rows.get("jitter_steps")
        need = d.double() + (torch.ceil(j.double()) if j is not None else 0.0)
        bad = need > self._n_history - 1
        if bad.any():
            # the entry named: the delay where it does not fit alone, else the jitter that takes it past the end
            delay_alone = bad & (d.double() > self._n_history - 1)
            name, where, x = ("delay_steps", delay_alone, d) if delay_alone.any() or j is None else (
                "jitter_steps", bad, j)
            row, index, value = first_entry(where, x)
            return (name, row, index, value,
                    f"delay_steps + ceil(jitter_steps) <= {self._n_history - 1}, the steps of history this scene "
                    f"keeps (fixed at build by the largest delay + jitter of its sensors' options)")
        return None

    # -- what the state's parameter fields ask of a step (read once after each write) ------------------------------

    def _model_flags(self, f):
        """Which steps of the measurement model some channel of some environment needs, and what the kinds read
        of the per-environment offsets, from the state's parameter fields, once after each write to them (host
        reads then, none in the steps between): a dict of bias, noise, walk, res (bools), env_delay (some delay
        differs from the options'), jitter (some jitter > 0), align (the coupling blocks that differ from the
        identity in some environment: (channels [k, 3], rows [k]) or None), offset_rot ([B, n_posed, 3, 3]) and
        offset_moved ([n_posed] bools: a nonzero pos_offset in some environment)."""
        if self._flags is None:
            st = self.state
            align = st.at("alignment", f)
            moved = (align != self._eye3).flatten(2).any(dim=2).any(dim=0)  # [n_align]
            rows = moved.nonzero()[:, 0] if self._align_idx is not None else moved[:0].nonzero()[:, 0]
            quat = st.at("quat_offset", f)
            # each environment's rotation matrices; bitwise the options' ones where the quaternion is the options'
            rot = quat_to_mat(quat.double()).to(self.float_dtype)
            same = (quat == self._quat0).all(dim=-1)[..., None, None]
            self._flags = dict(
                bias=bool((st.at("bias", f) != 0).any()), noise=bool((st.at("noise", f) > 0).any()),
                walk=bool((st.at("random_walk", f) > 0).any()), res=bool((st.at("resolution", f) > 0).any()),
                env_delay=bool((st.at("delay_steps", f) != self._delay0).any()),
                jitter=bool((st.at("jitter_steps", f) > 0).any()),
                align=(self._align_idx[rows], rows) if rows.numel() else None,
                offset_rot=torch.where(same, self._rot0, rot),
                offset_moved=(st.at("pos_offset", f) != 0).any(dim=2).any(dim=0).tolist())
        return self._flags

    def offsets(self, rows: slice):
        """What a kind with per-environment offsets (Sensor.per_env_offsets) reads for its sensors' rows of the
        pose fields: (pos_offset [B, n, 3], the sensor-to-link rotations [B, n, 3, 3], whether some pos_offset
        is nonzero in some environment)."""
        fl = self._model_flags(self.frame)
        return (self.state.at("pos_offset", self.frame)[:, rows], fl["offset_rot"][:, rows],
                any(fl["offset_moved"][rows]))

    # -- the setters (Sensor.set_*) ----------------------------------------------------------------------------------

    def _setter_envs(self, what: str, envs_idx):
        """The environments a setter writes (None: all) and how many, after the checks every setter makes."""
        self.scene._require_built(what)
        envs = self.scene._sanitize_envs_idx(envs_idx)
        if not self.n_envs:
            return None, 1
        return envs, self.n_envs if envs is None else len(envs)

    def _per_env(self, what: str, name: str, value, n: int, shape: tuple, unit: str = "", lo=None,
                 nonzero: bool = False) -> np.ndarray:
        """`value` (a number, an array-like or a tensor) of per-environment entries shaped `shape`: one for every
        environment written, or one each ([n, *shape]); checked as given (finite, each entry >= lo when given, each
        entry of norm > 0 where nonzero) and returned as a float64 [n, *shape] (and as given, checked), or an
        OptionError naming the argument, before anything is written."""
        try:
            x = np.asarray(value.detach().cpu() if torch.is_tensor(value) else value, dtype=np.float64)
        except (TypeError, ValueError, RuntimeError):
            raise OptionError(f"{what}: {name}={value!r:.200} is not accepted: expected numbers.") from None
        per = f"{shape} or {(n,) + shape}" if shape else f"one number or ({n},)"
        if shape == () and (x.size == 1 and x.ndim <= 1 or x.shape == (n, 1)):
            x = x.reshape(-1) if x.ndim == 2 else x.reshape(())
        if x.shape != shape and x.shape != (n,) + shape:
            raise OptionError(f"{what}: {name} has shape {x.shape}; expected {per} (one value for every "
                              f"environment written, or one each: {n}). Nothing was changed.")
        if not np.isfinite(x).all():
            raise OptionError(f"{what}: {name}={value!r:.200} is not accepted: expected finite numbers. Nothing "
                              "was changed.")
        if lo is not None and (x < lo).any():
            raise OptionError(f"{what}: {name}={value!r:.200}{unit} is not accepted: expected values >= {lo}. "
                              "Nothing was changed.")
        if nonzero:
            norm = np.linalg.norm(x.reshape(-1, shape[-1]), axis=-1)
            if (norm < 1e-12).any():
                raise OptionError(f"{what}: {name}={value!r:.200} has a zero quaternion (norm {float(norm.min()):.3g}),"
                                  " which is no rotation; give (w, x, y, z) of nonzero norm (it is normalised). "
                                  "Nothing was changed.")
        return np.array(np.broadcast_to(x, (n,) + shape), dtype=np.float64), x  # (a writable copy)

    def _write(self, name: str, x, envs, item, what: str):
        x = torch.as_tensor(x)
        self.state.set_rows(name, self.frame, x if self.n_envs else x[0], envs, item, what=what)
        self._flags = None

    def set_model_field(self, sensor, name: str, value, envs_idx=None):
        """Write `value` (one number, one per channel of the sensor, or one row per environment) into the sensor's
        channels of the parameter field `name` in the environments envs_idx (None: all); checked like every
        write into state (refused, nothing written, where it breaks the field's bounds)."""
        self.scene._require_built(f"set_{name}")
        envs = self.scene._sanitize_envs_idx(envs_idx)
        n = sensor.n_channels
        try:
            x = np.asarray(value.detach().cpu() if torch.is_tensor(value) else value, dtype=np.float64)
        except (TypeError, ValueError, RuntimeError):
            raise OptionError(f"set_{name}: {name}={value!r:.200} is not accepted: expected numbers.") from None
        x = torch.as_tensor(x)
        if x.dim() == 0 or (x.dim() == 1 and x.shape[0] == 1):
            x = x.reshape(()).expand(n)
        self.state.set_rows(name, self.frame, x, envs, (sensor.channels,), what=f"set_{name}")
        self._flags = None

    def set_timing(self, sensor, name: str, value, envs_idx=None):
        """sensor.set_delay / set_jitter: `value` seconds (>= 0; one number, or one per environment written) into
        the sensor's `delay_steps` (rounded to whole steps) or `jitter_steps`, where the history built holds it."""
        what = f"set_{name}"
        envs, n = self._setter_envs(what, envs_idx)
        x, given = self._per_env(what, name, value, n, (), unit=" s", lo=0.0)
        dt, f, st, keep = self.sim_options.dt, self.frame, self.state, self._n_history - 1

        def refuse(seconds, steps, env=""):
            raise OptionError(
                f"{what}: {name}={seconds!r} s{env} needs {steps} steps of history (delay + jitter, rounded up, at "
                f"dt={dt} s), but this scene keeps {keep} (fixed at build by the largest delay + jitter among its "
                f"sensors' options: {keep * dt:.6g} s). To set larger values, give the largest delay (and jitter) "
                "the run will use in the options at scene.add_sensor, then lower it with set_delay / set_jitter. "
                "Nothing was changed.")

        # the value alone (also where it writes nothing, envs_idx=[]), then with the sensor's other part per env
        alone = np.round(given / dt) if name == "delay" else np.ceil(given / dt)
        if (alone > keep).any():
            i = int(np.argmax(alone > keep))
            refuse(float(given.reshape(-1)[i]), f"{float(alone.reshape(-1)[i]):.0f}")
        rows = slice(None) if envs is None else envs
        if name == "delay":
            steps = x / dt
            if not np.allclose(steps, np.round(steps), rtol=0, atol=1e-9):
                warnings.warn(f"{what}: delay={value!r:.200} s is not a multiple of dt={dt} s; the read delay is a "
                              f"whole number of steps, round(delay / dt) ({np.round(steps).tolist()!r:.200}).",
                              stacklevel=4)
            new = torch.as_tensor(np.round(steps), dtype=torch.int32, device=self.device)
            need = new.double() + torch.ceil(st.at("jitter_steps", f)[rows, sensor.idx].double())
        else:
            new = torch.as_tensor(x / dt, dtype=self.float_dtype, device=self.device)
            need = st.at("delay_steps", f)[rows, sensor.idx].double() + torch.ceil(new.double())
        bad = (need > keep).nonzero()
        if bad.numel():
            i = int(bad[0, 0])
            refuse(float(x[i]), int(need[i]), f" in env {int(envs[i]) if envs is not None else i}" if self.n_envs
                   else "")
        self._write(f"{name}_steps", new, envs, (sensor.idx,), what)

    def set_offset(self, sensor, name: str, value, envs_idx=None):
        """sensor.set_pos_offset (m, link frame) / set_quat_offset ((w, x, y, z), normalised here; a zero one is
        refused): one for every environment written, or one each."""
        what = f"set_{name}"
        envs, n = self._setter_envs(what, envs_idx)
        quat = name == "quat_offset"
        x, _ = self._per_env(what, name, value, n, (4,) if quat else (3,), nonzero=quat)
        if quat:
            x = x / np.linalg.norm(x, axis=-1, keepdims=True)
        self._write(name, x, envs, (sensor._pose_row,), what)

    def set_alignment(self, sensor, block: int, value, envs_idx=None, what="set_cross_axis_coupling"):
        """IMU.set_*_cross_axis_coupling: the coupling matrix of the sensor's 3-axis block `block`, from a
        number in [0, 1] (every off-diagonal entry), 3 numbers in [0, 1] (column j's off-diagonal entries: the
        j-th) or a 3x3 matrix, for every environment written, or a [n, 3, 3] of matrices, one each."""
        envs, n = self._setter_envs(what, envs_idx)
        try:
            arr = np.asarray(value.detach().cpu() if torch.is_tensor(value) else value, dtype=np.float64)
        except (TypeError, ValueError, RuntimeError):
            raise OptionError(f"{what}: cross_axis_coupling={value!r:.200} is not accepted: expected "
                              "numbers.") from None
        expect = (f"a number in [0, 1], 3 numbers in [0, 1], a 3x3 matrix of finite numbers, or one 3x3 matrix for "
                  f"each environment written ({n}, 3, 3)")
        if arr.shape in ((), (1,), (3,)):
            if not (np.isfinite(arr).all() and (arr >= 0).all() and (arr <= 1).all()):
                raise OptionError(f"{what}: cross_axis_coupling={value!r:.200} is not accepted: expected {expect}. "
                                  "Nothing was changed.")
            m = alignment_matrix(float(arr.reshape(-1)[0]) if arr.size == 1 else tuple(arr.tolist()))
        elif arr.shape in ((3, 3), (n, 3, 3)):
            if not np.isfinite(arr).all():
                raise OptionError(f"{what}: cross_axis_coupling={value!r:.200} is not accepted: expected {expect}. "
                                  "Nothing was changed.")
            m = arr
        else:
            raise OptionError(f"{what}: cross_axis_coupling has shape {arr.shape}; expected {expect}. Nothing was "
                              "changed.")
        m = np.array(np.broadcast_to(m, (n, 3, 3)), dtype=np.float64)
        self._write("alignment", m, envs, (sensor._align_start + block,), what)

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

    def _delayed(self, f, history, gt, flags, u):
        """The channels read delay_steps + u * jitter_steps back ([B, n_sensors] u in (0, 1), one per sensor),
        linearly interpolated between the two buffered steps around it where the jitter is > 0. While every
        environment keeps the options' delays and no jitter is set: one indexing with the options' delays."""
        if not flags["env_delay"] and not flags["jitter"]:
            return history[:, self._delay, self._channel] if self._n_history > 1 else gt.clone()
        st = self.state
        steps = st.at("delay_steps", f).to(torch.float64)  # [B, n_sensors]
        if flags["jitter"]:
            jitter = st.at("jitter_steps", f).to(torch.float64)
            steps = steps + u * jitter
        steps = steps[:, self._sensor_of]  # [B, C]
        lo = steps.floor().long()
        at_lo = torch.gather(history, 1, lo[:, None, :])[:, 0]
        if not flags["jitter"]:
            return at_lo
        frac = (steps - lo).to(self.float_dtype)
        hi = torch.clamp(lo + 1, max=self._n_history - 1)
        at_hi = torch.gather(history, 1, hi[:, None, :])[:, 0]
        return torch.where(jitter[:, self._sensor_of] > 0, torch.lerp(at_lo, at_hi, frac), at_lo)

    def update(self):
        """Measure every sensor of every environment after a step (batched; nothing read on the host)."""
        f, st = self.frame, self.state
        history, measured, drift = st.at("history", f), st.at("measured", f), st.at("drift", f)
        flags = self._model_flags(f)
        # (torch's small ops on one thread: beside Taichi's thread pool, its own pool made them wait for a core,
        # 3-5 times slower on the 2-core CPU after the ray cast's parallel launch)
        with torch.no_grad(), torch_one_thread():
            if self._n_history > 1:
                history[:, 1:] = history[:, :-1].clone()
            gt = history[:, 0]
            for cls, sensors, ctx, where in self._kinds:
                gt[:, where] = cls.measure_kind(self, sensors, ctx).to(gt.dtype)
            draws = flags["noise"] or flags["walk"] or flags["jitter"]
            if draws:
                key, counter = st.at("rng_key", f), st.at("rng_counter", f)
            u = (rng.uniforms(key, counter, len(self.sensors), 4 * self._n_channels) if flags["jitter"] else None)
            value = self._delayed(f, history, gt, flags, u)
            if flags["align"] is not None:
                idx, rows = flags["align"]
                block = value[:, idx]  # [B, n_blocks, 3]
                value[:, idx] = torch.einsum("bkij,bkj->bki", st.at("alignment", f)[:, rows], block)
            if draws:
                z = rng.normals(key, counter, 2 * self._n_channels, self.float_dtype)
                counter.copy_((counter.to(torch.int64) + 1) % (rng.COUNTER_MAX + 1))
                if flags["walk"]:
                    drift += st.at("random_walk", f) * z[:, self._n_channels:]
                    value = value + drift
                if flags["noise"]:
                    value = value + st.at("noise", f) * z[:, :self._n_channels]
            if flags["bias"]:
                value = value + st.at("bias", f)
            if self._has_clip:
                value = torch.maximum(torch.minimum(value, self._max_abs), -self._max_abs)
                value = torch.where(value.abs() < self._min_abs, torch.zeros_like(value), value)
            if flags["res"]:
                res = st.at("resolution", f)
                value = torch.where(res > 0, torch.round(value / torch.where(res > 0, res, torch.ones_like(res))) * res,
                                    value)
            if self._all_measured:
                measured.copy_(value)
            else:
                measured.copy_(torch.where(self._measure, value, measured))


__all__ = ["ContactForceSensor", "ContactSensor", "IMUData", "IMUSensor", "Sensor", "SensorManager"]
