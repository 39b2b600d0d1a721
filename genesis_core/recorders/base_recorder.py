"""The base of every recorder, and the conversion of recorded data to host arrays.

A recorder samples `data_func()` after every `steps_per_sample`-th `scene.step()` (the step index `scene.t` a
multiple of it) and hands the value and the simulation time, `scene.t * dt` seconds, to `process`. Sampling
copies the data to host memory (that is what recording is); a step that samples nothing costs nothing.
Recorders are I/O, not simulation state: nothing of theirs is in `scene.get_state()` or a checkpoint.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping

import numpy as np
import torch

from ..errors import RecordingError, SceneError


def is_namedtuple(x) -> bool:
    return isinstance(x, tuple) and hasattr(x, "_asdict") and hasattr(x, "_fields")


def to_array(x, what: str) -> np.ndarray:
    """`x` (a tensor, an array, a number or bool, or a sequence of them) as a numpy array the caller owns (a copy:
    the data_func may hand out a buffer it later changes)."""
    if isinstance(x, torch.Tensor):
        return x.detach().to("cpu", copy=True).numpy()
    if isinstance(x, np.ndarray):
        return x.copy()
    try:
        if isinstance(x, (list, tuple)) and any(isinstance(e, torch.Tensor) for e in x):
            return np.stack([to_array(e, what) for e in x])
        arr = np.array(x)
    except (TypeError, ValueError) as e:
        raise RecordingError(f"{what}: a {type(x).__name__} cannot be recorded as an array ({e}); return tensors, "
                             "arrays or numbers.") from None
    if arr.dtype == object:
        raise RecordingError(f"{what}: a {type(x).__name__} cannot be recorded as an array of numbers; return "
                             "tensors, arrays or numbers.")
    return arr


def to_fields(data, what: str, prefix: str | None = None) -> dict:
    """The data as {name: array}: a dict's keys (a nested dict's as "key.sub"), a named tuple's fields, anything
    else under "data"."""
    if is_namedtuple(data):
        data = data._asdict()
    if not isinstance(data, Mapping):
        return {prefix or "data": to_array(data, what)}
    out = {}
    for k, x in data.items():
        if not isinstance(k, str):
            raise RecordingError(f"{what}: the data's keys must be str, got {k!r}.")
        name = k if prefix is None else f"{prefix}.{k}"
        if is_namedtuple(x) or isinstance(x, Mapping):
            out.update(to_fields(x, what, name))
        else:
            out[name] = to_array(x, f"{what} (key {name!r})")
    return out


class Recorder:
    """What `scene.start_recording(data_func, options)` returns: it samples `data_func()` every
    `steps_per_sample` steps once the scene is built, until `scene.stop_recording()`.

    Subclasses implement `process(data, cur_time)` (one sample: the data_func's value and the simulation time,
    s) and `cleanup()` (write and release what the recorder holds; called by stop()), and may extend `build()`
    (called once, when the scene is built or at start_recording on a built scene) and `reset(envs_idx)` (called
    by `scene.reset()`)."""

    def __init__(self, manager, options, data_func):
        self._options = options
        self._manager = manager
        self._data_func = data_func
        self._is_built = False
        self._is_recording = False
        self._steps_per_sample = 1
        dt = manager._step_dt
        if options.hz is not None:
            exact = 1.0 / (options.hz * dt)
            self._steps_per_sample = max(1, round(exact))
            if not math.isclose(exact, self._steps_per_sample, rel_tol=1e-9, abs_tol=1e-9):
                warnings.warn(f"{type(options).__name__}(hz={options.hz}): a sample every {exact:g} steps of dt={dt} "
                              f"s is not a whole number of steps; sampling every {self._steps_per_sample} steps "
                              f"(hz={1.0 / (self._steps_per_sample * dt):g}) instead.", stacklevel=4)

    @classmethod
    def check_available(cls, options):
        """Raise an error naming what to install when a package this recorder needs (for `options`) is
        missing."""

    @property
    def options(self):
        return self._options

    @property
    def steps_per_sample(self) -> int:
        """A sample is taken after each step whose index `scene.t` is a multiple of this."""
        return self._steps_per_sample

    @property
    def is_built(self) -> bool:
        return self._is_built

    @property
    def is_recording(self) -> bool:
        return self._is_recording

    @property
    def run_in_thread(self) -> bool:
        """Genesis World runs some recorders in a background thread; here every recorder processes its sample in
        the step's thread (the copy to host memory, the costly part, happens there in Genesis World too)."""
        return False

    def sync(self, timeout: float | None = None):
        """Genesis World's wait for the background thread's queue: nothing is queued here."""

    def build(self):
        """Prepare what the recorder needs (files, figures); called once, with the scene built."""
        if self._is_built:
            raise SceneError(f"{type(self).__name__}: already built.")
        self._is_built = True

    def start(self):
        self._is_recording = True

    def stop(self):
        """Stop sampling and write / release what the recorder holds (cleanup)."""
        self._is_recording = False
        if self._is_built:
            self.cleanup()

    def reset(self, envs_idx=None):
        """Called by `scene.reset(envs_idx=...)` (envs_idx None: a full reset)."""

    def step(self, global_step: int):
        """After the scene's step `global_step` (scene.t): a sample if one is due."""
        if not self._is_recording or global_step % self._steps_per_sample != 0:
            return
        self.process(self._data_func(), global_step * self._manager._step_dt)

    def process(self, data, cur_time: float):
        raise NotImplementedError(f"{type(self).__name__}.process() is not implemented.")

    def cleanup(self):
        raise NotImplementedError(f"{type(self).__name__}.cleanup() is not implemented.")

    def _what(self) -> str:
        return f"{type(self._options).__name__} recorder"

    def __repr__(self):
        state = "recording" if self._is_recording else ("stopped" if self._is_built else "waiting for build")
        return (f"<{type(self).__name__} ({type(self._options).__name__}), every {self._steps_per_sample} steps, "
                f"{state}>")


__all__ = ["Recorder", "is_namedtuple", "to_array", "to_fields"]
