"""The scene's recorders: `scene.start_recording(data_func, options)` adds one, `scene.step()` samples them (after
the sensors measured the step's state), `scene.stop_recording()` writes their files and closes their figures.

Recorders are I/O, not simulation state: nothing of theirs is in `scene.get_state()`, a reset's state or a
checkpoint. A recording started before `scene.build()` begins with the first step; one started after build begins
with the next step. Any recorder still recording when the scene is destroyed or the interpreter exits is stopped
then (its file written).
"""

from __future__ import annotations

import atexit
import weakref

from .._runtime import logger
from ..errors import OptionError
from .base_recorder import Recorder
from .options import RecorderOptions

_live_managers = weakref.WeakSet()  # the managers with recorders that have not been stopped


@atexit.register
def _stop_at_exit():
    for manager in list(_live_managers):
        try:
            manager.stop()
        except Exception as e:  # noqa: BLE001 - at exit, one recorder's failure must not keep the others' files
            logger.warning("a recorder could not be stopped at exit: %s", e)


class RecorderManager:
    """The recorders of one scene (`scene._recorder_manager`), in the order they were started.

    step_dt: the scene's dt, seconds per step (the sampling period of a recorder is a whole number of steps)."""

    RECORDER_TYPES_MAP: dict = {}  # options class -> recorder class (register_recording)

    def __init__(self, step_dt: float):
        self._step_dt = float(step_dt)
        self._recorders: list[Recorder] = []
        self._is_built = False

    @property
    def recorders(self) -> list:
        return list(self._recorders)

    @property
    def is_recording(self) -> bool:
        return bool(self._recorders)

    @property
    def is_built(self) -> bool:
        return self._is_built

    def add_recorder(self, data_func, rec_options) -> Recorder:
        """A recorder of `data_func()` (a callable without arguments) as `rec_options` (a gs.recorders.* options
        object) says; built and started at once when the scene is built, else at build."""
        if not isinstance(rec_options, RecorderOptions):
            known = ", ".join(sorted(f"gs.recorders.{c.__name__}" for c in self.RECORDER_TYPES_MAP))
            raise OptionError(f"start_recording: rec_options must be a recorder's options ({known}), got "
                              f"{type(rec_options).__name__}.")
        cls = self.RECORDER_TYPES_MAP.get(type(rec_options))
        if cls is None:
            raise OptionError(f"start_recording: {type(rec_options).__name__} is not a recorder of this engine "
                              "(no recorder class is registered for it with register_recording).")
        if not callable(data_func):
            raise OptionError(f"start_recording: data_func={data_func!r} must be a callable without arguments that "
                              "returns the data to record.")
        cls.check_available(rec_options)
        recorder = cls(self, rec_options, data_func)
        if self._is_built:
            recorder.build()
            recorder.start()
        self._recorders.append(recorder)
        _live_managers.add(self)
        return recorder

    def build(self):
        """Build and start every recorder added so far (the scene was just built). One that fails to build (labels
        that do not fit its data, say) is dropped, and its error raised once the others are built."""
        self._is_built = True
        errors = []
        for recorder in list(self._recorders):
            try:
                recorder.build()
            except Exception as e:  # noqa: BLE001 - the others still record; the first error is raised below
                self._recorders.remove(recorder)
                errors.append(e)
                continue
            recorder.start()
        if not self._recorders:
            _live_managers.discard(self)
        if errors:
            raise errors[0]

    def stop(self):
        """Stop every recorder: each writes its file / closes its figure. Nothing to stop: a warning."""
        if not self._recorders:
            logger.warning("scene.stop_recording(): no recording was started (scene.start_recording or "
                           "sensor.start_recording); nothing to stop.")
            return
        recorders, self._recorders = self._recorders, []
        _live_managers.discard(self)
        errors = []
        for recorder in recorders:
            try:
                recorder.stop()
            except Exception as e:  # noqa: BLE001 - every other recorder still writes its file
                errors.append(e)
        if errors:
            raise errors[0]

    def reset(self, envs_idx=None):
        for recorder in self._recorders:
            if recorder.is_built:
                recorder.reset(envs_idx)

    def step(self, global_step: int):
        """After the scene's step `global_step` (scene.t): every recorder whose sample is due takes it."""
        for recorder in self._recorders:
            recorder.step(global_step)


def register_recording(options_cls):
    """Class decorator: the recorder class that `scene.start_recording` makes for `options_cls`."""

    def _impl(recorder_cls):
        RecorderManager.RECORDER_TYPES_MAP[options_cls] = recorder_cls
        return recorder_cls

    return _impl


__all__ = ["RecorderManager", "register_recording"]
