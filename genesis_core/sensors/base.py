"""What every sensor kind shares: the `Sensor` base class (reading, the per-channel measurement model, the hooks a
kind implements), the registry that maps an options class to its sensor class, and helpers to gather link
quantities of several sensors at once.

A sensor kind is a subclass of `Sensor` registered for its options class with `@register(OptionsClass)`. It says
how many channels a sensor of it has (`channel_count`), what `scene.add_sensor` must check beyond the options'
own validation (`check`), and how to measure the ground truth of all its sensors of a scene at once, batched over
environments (`build_kind` once at build, `measure_kind` every step). The manager (manager.py) owns the channels'
state and applies the measurement model (delay, jitter, noise, drift, bias, clipping, quantisation) to every
channel of every kind alike."""

from __future__ import annotations

import numpy as np
import torch

from ..errors import OptionError

SENSOR_CLASSES: dict = {}  # options class -> sensor class

# the largest |entry| of a per-environment pos_offset (m) and of a cross-axis coupling matrix: generous for any
# sensor, and small enough that no finite ground truth of a physical scene overflows through them
MAX_OFFSET = 1e6
MAX_COUPLING = 1e6

# what a rigid entity must offer for a sensor to be attached to one of its links (Genesis World's RigidEntity names)
RIGID_ACCESSORS = ("n_links", "link_start", "get_links_pos", "get_links_quat", "get_links_ang", "get_links_acc",
                   "get_links_acc_ang", "get_links_net_contact_force", "get_contacts")


def register(options_cls):
    """Class decorator: the sensor class that `scene.add_sensor(options_cls(...))` creates."""

    def deco(sensor_cls):
        SENSOR_CLASSES[options_cls] = sensor_cls
        sensor_cls.options_class = options_cls
        return sensor_cls

    return deco


class Sensor:
    """A sensor of the scene (`scene.add_sensor(options)`): `read()` gives the measurement, `read_ground_truth()`
    the exact value of the current step, both torch tensors on gs.device shaped `([n_envs,] ...)`.

    A kind's channels are a flat run of `n_channels` floats per environment in the manager's state; `_format`
    gives them the kind's shape (a named tuple, a bool tensor, an image)."""

    n_channels = 0  # a kind with a fixed count sets it; others override channel_count
    options_class = None
    requires_rigid_link = True  # entity_idx must name a rigid entity and link_idx_local one of its links

    def __init__(self, manager, idx: int, options, entity):
        self._manager = manager
        self.idx = idx  # index in scene.sensors
        self.options = options
        self.entity = entity
        self.link_idx_local = getattr(options, "link_idx_local", None)
        self.n_channels = self.channel_count(options)
        self.n_aux = self.aux_count(options)
        self._start = 0  # first channel (set by the manager)
        self._aux_start = 0  # first entry of its own state in the manager's `aux` field (set by the manager)

    # -- what a kind implements ------------------------------------------------------------------------------------

    @classmethod
    def channel_count(cls, options) -> int:
        return cls.n_channels

    @classmethod
    def aux_count(cls, options) -> int:
        """How many floats per environment of evolving state of its own the sensor keeps beyond its readings (a
        temperature grid's cells, a filter's memory): its run `aux` of the manager's declared `aux` field, which
        snapshots, resets and checkpoints carry like every state. 0 by default."""
        return 0

    def aux_count_at_build(self) -> int:
        """The size of the sensor's run of `aux`, asked again at build, when the whole scene is known (a kind whose
        state depends on other entities, such as the temperatures of every link, sizes it here); the manager lays
        the runs out from these. aux_count(options) by default."""
        return self.n_aux

    def init_aux(self, aux: torch.Tensor):
        """Fill the sensor's run of the `aux` field ([B, aux_count], zeros on entry) with its initial state."""

    @classmethod
    def check(cls, manager, options, entity):
        """Kind-specific checks of `scene.add_sensor` (raise OptionError naming the option); nothing by default."""

    def channel_model(self) -> dict:
        """The measurement model of this sensor's channels: a dict of per-channel arrays (length n_channels) among
        resolution, bias, noise, random_walk, min_abs, max_abs, plus `jitter` (seconds, one number) and `align` (a
        list of (first channel, 3x3 matrix) blocks, the starting values of per-environment coupling matrices).
        Absent entries: no effect. Default: exact readings."""
        return {}

    @classmethod
    def build_kind(cls, manager, sensors: list):
        """At build, once for all sensors of this kind in the scene: whatever `measure_kind` needs (returned)."""
        return None

    @classmethod
    def measure_kind(cls, manager, sensors: list, ctx) -> torch.Tensor:
        """The ground truth of every channel of `sensors` (in their order), [B, sum of their n_channels], batched
        over environments (B = max(n_envs, 1)), without reading values on the host."""
        raise NotImplementedError

    # -- reading ---------------------------------------------------------------------------------------------------

    @property
    def channels(self) -> slice:
        return slice(self._start, self._start + self.n_channels)

    @property
    def aux(self) -> slice:
        return slice(self._aux_start, self._aux_start + self.n_aux)

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

    # -- the measurement model's parameters per environment (Genesis World's setters; noisy kinds only) ------------

    noisy = False  # a kind whose channel_model gives resolution, bias, noise and random_walk

    def _set_model(self, name, value, envs_idx):
        if not self.noisy:
            raise OptionError(f"set_{name}: a {type(self.options).__name__} sensor has no per-environment {name} "
                              "(it is not a noisy sensor with a setter: IMU and ContactForce have them).")
        self._manager.set_model_field(self, name, value, envs_idx)

    def set_resolution(self, resolution, envs_idx=None):
        """Each channel's quantum (>= 0; 0: none) in the environments envs_idx: one number, one per channel, or a
        row per environment."""
        self._set_model("resolution", resolution, envs_idx)

    def set_bias(self, bias, envs_idx=None):
        """Each channel's constant offset in the environments envs_idx (shapes as set_resolution)."""
        self._set_model("bias", bias, envs_idx)

    def set_noise(self, noise, envs_idx=None):
        """Each channel's white-noise standard deviation (>= 0) in the environments envs_idx."""
        self._set_model("noise", noise, envs_idx)

    def set_random_walk(self, random_walk, envs_idx=None):
        """Each channel's random-walk step deviation (>= 0) in the environments envs_idx."""
        self._set_model("random_walk", random_walk, envs_idx)

    def _set_timing(self, name, value, envs_idx):
        if not self.noisy:
            raise OptionError(f"set_{name}: a {type(self.options).__name__} sensor has no per-environment {name} "
                              "(it is not a noisy sensor with a setter: IMU, ContactForce and TemperatureGrid have "
                              f"them); give {name} in its options.")
        self._manager.set_timing(self, name, value, envs_idx)

    def set_delay(self, delay, envs_idx=None):
        """The read delay, seconds (>= 0), in the environments envs_idx: one number, or one per environment
        written. Applied as round(delay / dt) whole steps (a warning says so when delay is not a multiple of dt).
        The history was sized at build by the largest delay + jitter among the sensors' options: a delay (plus
        this sensor's jitter, in steps rounded up) beyond it is refused; give the largest delay in the options."""
        self._set_timing("delay", delay, envs_idx)

    def set_jitter(self, jitter, envs_idx=None):
        """The jitter, seconds (>= 0), in the environments envs_idx: each step the sensor reads u * jitter later
        than its delay, u uniform in [0, 1), interpolated linearly between the two buffered steps around that time
        (whatever the options' `interpolate`). delay + jitter, in steps rounded up, must fit the history built."""
        self._set_timing("jitter", jitter, envs_idx)

    # -- the sensor frame per environment (Genesis World's RigidSensorMixin setters) ----------------------------------

    per_env_offsets = False  # a kind that reads its offsets from the state at every step (IMU, ContactForce)
    _pose_row = None  # its row in the manager's pos_offset / quat_offset fields (set at build)
    _align_start = 0  # its first block in the manager's alignment field (set at build)

    def _set_offset(self, name, value, envs_idx):
        if not self.per_env_offsets:
            raise OptionError(f"set_{name}: a {type(self.options).__name__} sensor's frame is fixed at build (its "
                              "options' pos_offset and euler_offset); IMU and ContactForce sensors have "
                              "per-environment offsets.")
        self._manager.set_offset(self, name, value, envs_idx)

    def set_pos_offset(self, pos_offset, envs_idx=None):
        """The sensor frame's origin in the link frame, m, in the environments envs_idx: 3 numbers, or one row
        of 3 per environment written."""
        self._set_offset("pos_offset", pos_offset, envs_idx)

    def set_quat_offset(self, quat_offset, envs_idx=None):
        """The sensor frame's rotation from the link frame as a quaternion (w, x, y, z), normalised here (a zero
        quaternion is refused), in the environments envs_idx: 4 numbers, or one row of 4 per environment
        written."""
        self._set_offset("quat_offset", quat_offset, envs_idx)

    def start_recording(self, rec_options):
        """Record `read()` as the scene steps, with a `gs.recorders` option (Genesis World's sensor hook)."""
        return self._manager.scene.start_recording(lambda: self.read(), rec_options)

    def __repr__(self):
        return (f"<{type(self).__name__} {self.idx}: entity {getattr(self.options, 'entity_idx', None)}, link "
                f"{self.link_idx_local}>")


def check_rigid_link(manager, options, entity, name: str):
    """add_sensor's check that `options.entity_idx` and `options.link_idx_local` name a link of a rigid entity;
    returns the entity."""
    entities = manager.scene.entities
    idx = options.entity_idx
    if idx is None or idx < 0:
        raise OptionError(f"add_sensor: {name}(entity_idx={idx!r}) is attached to no entity; give the index of a "
                          "rigid entity (entity.idx).")
    if idx >= len(entities):
        raise OptionError(f"add_sensor: {name}(entity_idx={idx}) is out of range: the scene has {len(entities)} "
                          "entities.")
    entity = entities[idx]
    if not all(hasattr(entity, a) for a in RIGID_ACCESSORS):
        raise OptionError(f"add_sensor: {name}(entity_idx={idx}) is a {type(entity).__name__} of the "
                          f"{entity.solver.name}; sensors attach to rigid entities (gs.materials.Rigid).")
    link = getattr(options, "link_idx_local", 0)
    if link >= entity.n_links:
        raise OptionError(f"add_sensor: {name}(link_idx_local={link}) is out of range: entity {idx} has "
                          f"{entity.n_links} links.")
    return entity


def link_groups(sensors: list, device):
    """Per entity, the distinct links the sensors are on: ([(entity, [link_local, ...])], perm) where perm (None
    when the identity) maps each sensor to its row among the links gathered entity after entity."""
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
    return out, None if same else torch.as_tensor(rows, dtype=torch.long, device=device)


def gather_links(manager, groups, perm, read):
    """`read(entity, links_local)` ([n_envs,] n, ...) per entity, batched ([B, ...]), concatenated, one row per
    sensor."""
    parts = [manager.batched(read(entity, links)) for entity, links in groups]
    x = parts[0] if len(parts) == 1 else torch.cat(parts, dim=1)
    return x if perm is None else x[:, perm]


def as_channels(values, n: int, what: str, name: str) -> np.ndarray:
    """One number or n numbers as an n-vector (an OptionError naming the option otherwise)."""
    arr = np.asarray(values, dtype=np.float64).reshape(-1)
    if arr.size == 1:
        return np.full(n, float(arr[0]))
    if arr.size != n:
        raise OptionError(f"{name}.{what}={values!r}: expected one number or {n} (one per channel of the reading).")
    return arr
