"""Process-wide runtime: the Taichi backend, the float precision and the torch device.

`gs.init` sets it once per process; `gs.destroy` tears it down so that `gs.init` may be called again (tests use
this to switch precision). Scenes built under one runtime refuse to run after it is destroyed.
"""

from __future__ import annotations

import gc
import logging
import random
import warnings
import weakref

import numpy as np
import torch

from .errors import GenesisError

cpu = "cpu"
gpu = "gpu"
BACKENDS = (cpu, gpu)
PRECISIONS = ("32", "64")

logger = logging.getLogger("genesis_core")


class _Runtime:
    def __init__(self):
        self.initialized = False
        self.generation = 0  # bumped by every init; a scene remembers the one it was built under
        self.backend = None
        self.arch = None  # the Taichi arch actually in use
        self.precision = None
        self.device = torch.device("cpu")
        self.seed = None

    def track_taichi_array(self, array):
        """Register a Taichi ndarray a solver allocated, and return it. `gs.destroy()` detaches those still alive
        then (a scene kept past the reset): Taichi frees an ndarray by its address in the program current at
        collection time, which after a reset is the next program, where the address may belong to a live array."""
        _taichi_arrays.add(array)
        if getattr(type(array), "__del__", None) is None:  # Taichi frees only scalar ndarrays when they are collected
            weakref.finalize(array, _free_taichi_array, array.arr, self.generation).atexit = False
        return array

    # The dtypes of the chosen precision, Genesis World's names (gs.tc_float, ...): floats follow `precision`,
    # integers are 32-bit in both (Taichi's default_ip).
    @property
    def tc_float(self) -> torch.dtype:
        return torch.float64 if self.precision == "64" else torch.float32

    @property
    def np_float(self):
        return np.float64 if self.precision == "64" else np.float32

    @property
    def ti_float(self):
        import taichi as ti

        return ti.f64 if self.precision == "64" else ti.f32

    tc_int = torch.int32
    np_int = np.int32

    @property
    def ti_int(self):
        import taichi as ti

        return ti.i32


runtime = _Runtime()
_taichi_arrays = weakref.WeakSet()
_detached_classes = {}


def _free_taichi_array(arr, generation):
    """Free a collected vector or matrix ndarray (Taichi's own classes never do): in the program that made it."""
    if runtime.initialized and runtime.generation == generation:
        from taichi.lang import impl

        impl.get_runtime().prog.delete_ndarray(arr)


def _detach(array):
    """From now on, collecting `array` frees nothing: its program, and the memory with it, is gone."""
    cls = type(array)
    if cls not in _detached_classes:
        _detached_classes[cls] = type(cls.__name__, (cls,), {"__del__": lambda self: None})
    array.__class__ = _detached_classes[cls]


def _check_choice(name, value, choices):
    if value not in choices:
        raise GenesisError(f"gs.init: {name}={value!r} is not accepted; choose one of {', '.join(map(repr, choices))}.")


def _add_log_handler():
    """The engine's messages to standard error, once per process, unless the application has set up logging (a
    handler on the root logger or on the engine's)."""
    if logger.handlers or logging.getLogger().handlers:
        return
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("[genesis-core] %(levelname)s: %(message)s"))
    logger.addHandler(handler)


def init(backend=cpu, precision="32", seed=None, logging_level=None, debug=False, offline_cache=True, eps=1e-15,
         theme="dark", logger_verbose_time=False, performance_mode=False, use_deterministic_algorithms=None):
    """Start the engine in this process.

    backend: ``gs.cpu`` or ``gs.gpu`` (CUDA, Vulkan or Metal, whichever Taichi finds; the CPU with one warning
    when none is present). precision: ``"32"`` or ``"64"``, the float width of every solver field.
    seed: seeds Python's, NumPy's, torch's and Taichi's generators. debug: Taichi bounds checks (slow).
    logging_level: the engine's logger ("genesis_core"): "debug", "info" (None, the default, as in Genesis World),
    "warning", "error" or "critical". At "info" and below, on a terminal, long work shows its progress
    (genesis_core.progress); Taichi's own log stays at "warning" unless the level is "debug". Without a handler
    of the application's, the engine's messages go to standard error.
    Genesis World's eps (a positive float), theme, logger_verbose_time, performance_mode and
    use_deterministic_algorithms (bools or None) are validated and have no effect: every solver here is
    deterministic, and kernels are compiled the same way whatever the mode.
    """
    import taichi as ti

    _check_choice("backend", backend, BACKENDS)
    precision = str(precision)
    _check_choice("precision", precision, PRECISIONS)
    if seed is not None and (not isinstance(seed, int) or isinstance(seed, bool) or seed < 0):
        raise GenesisError(f"gs.init: seed={seed!r} must be a non-negative int or None.")
    if isinstance(eps, bool) or not isinstance(eps, (int, float)) or not eps > 0:
        raise GenesisError(f"gs.init: eps={eps!r} must be a positive float.")
    if not isinstance(theme, str):
        raise GenesisError(f"gs.init: theme={theme!r} must be a string.")
    for name, value in (("logger_verbose_time", logger_verbose_time), ("performance_mode", performance_mode),
                        ("use_deterministic_algorithms", use_deterministic_algorithms)):
        if value is not None and not isinstance(value, bool):
            raise GenesisError(f"gs.init: {name}={value!r} must be a bool.")
    levels = {"DEBUG": "debug", "INFO": "warn", "WARNING": "warn", "ERROR": "error", "CRITICAL": "critical"}
    level = "INFO" if logging_level is None else logging_level.upper() if isinstance(logging_level, str) else None
    if level not in levels:
        raise GenesisError(f"gs.init: logging_level={logging_level!r} is not accepted; choose one of "
                           f"{', '.join(repr(k.lower()) for k in levels)} or None (info).")
    if runtime.initialized:
        raise GenesisError("gs.init was already called in this process; call gs.destroy() first to re-initialise.")

    logger.setLevel(level)
    _add_log_handler()
    ti_level = levels[level]

    fp = ti.f64 if precision == "64" else ti.f32
    kwargs = dict(default_fp=fp, default_ip=ti.i32, log_level=ti_level, debug=debug, offline_cache=offline_cache)
    if seed is not None:
        kwargs["random_seed"] = seed
    if backend == gpu:
        # An explicit list: Taichi's own gpu probe also tries OpenGL, which crashes on a headless machine.
        ti.init(arch=[ti.cuda, ti.vulkan, ti.metal], **{**kwargs, "log_level": "error"})
        ti.set_logging_level(ti_level)
        arch = ti.lang.impl.current_cfg().arch
        if arch == ti.x64 or arch == ti.arm64:
            warnings.warn("gs.init(backend=gs.gpu): no GPU backend is available, running on the CPU.", stacklevel=2)
    else:
        ti.init(arch=ti.cpu, **kwargs)
    arch = ti.lang.impl.current_cfg().arch

    runtime.backend = backend
    runtime.arch = arch
    runtime.precision = precision
    runtime.device = torch.device("cuda") if arch == ti.cuda else torch.device("cpu")
    runtime.seed = seed
    if seed is not None:
        random.seed(seed)
        np.random.seed(seed)
        torch.manual_seed(seed)
    runtime.generation += 1
    runtime.initialized = True


def destroy():
    """Tear the runtime down; scenes built before become unusable. `gs.init` may then be called again."""
    import taichi as ti

    if runtime.initialized:
        # Scenes dropped but not yet collected release their Taichi arrays now, to the program that made them; the
        # arrays of scenes still referenced are detached (see track_taichi_array).
        gc.collect()
        for array in list(_taichi_arrays):
            _detach(array)
        _taichi_arrays.clear()
        ti.reset()
    runtime.initialized = False
    runtime.backend = runtime.arch = runtime.precision = None
    runtime.device = torch.device("cpu")


def require_init(what: str):
    if not runtime.initialized:
        raise GenesisError(f"{what} needs the engine started: call gs.init() first.")
