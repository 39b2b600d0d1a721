"""genesis-core: batched, checkpointed and differentiable physics on Taichi.

    import genesis_core as gs
    gs.init(backend=gs.cpu)
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=0.01))
    ...

The core holds the scene, the solver protocol, the state registry, the coupler and the checkpoint format; the
solvers come from plugin distributions found through the entry-point group ``genesis_core.plugins``.
"""

import functools as _functools
import inspect as _inspect
from importlib.metadata import PackageNotFoundError, version as _version

import sys as _sys

import numpy as _np

from . import _runtime
from . import (constants, coupler, errors, force_fields, materials, morphs, options, plugins, recorders, renderers,
               sensors, surfaces, textures, utils, validators)

# Genesis World's scripts import the sensor options from `genesis.options.sensors` too
options.sensors = sensors
_sys.modules.setdefault(__name__ + ".options.sensors", sensors)
from ._runtime import cpu, destroy, gpu, logger, runtime
from .constants import constraint_solver, integrator
from .coupler import ColliderView, Coupling
from .errors import (
    CheckpointError,
    CheckpointMismatchError,
    DamagedCheckpointError,
    GenesisError,
    GenesisException,
    InvalidCheckpointStateError,
    InvalidEnvError,
    InvalidStateError,
    ModelFileError,
    OptionError,
    PluginNotInstalledError,
    RecordingError,
    SceneError,
    UnsafeCheckpointError,
)
from .plugins import hookimpl
from .scene import UID, Scene
from .solver import Entity, Solver, SolverBase
from .state import FieldSpec, SimState, SolverState
from .tensor import Tensor, arange, from_torch, full, ones, ones_like, rand, randn, tensor, zeros, zeros_like
from .utils import geom as _geom
from .utils.geom import *  # noqa: F401,F403  (Genesis World's scripts call gs.inv_quat, gs.quat_to_rotvec, ...)

try:
    __version__ = _version("genesis-core")
except PackageNotFoundError:  # running from a source tree without installing
    __version__ = "0.0.0+unknown"


# Genesis World's dtype names (`dtype=gs.tc_float`): set by gs.init from its precision.
_PRECISION_DTYPES = ("tc_float", "np_float", "ti_float", "tc_int", "np_int", "ti_int")

_DEFAULT_EPS = _inspect.signature(_runtime.init).parameters["eps"].default
_init_eps = {}  # runtime generation -> the eps given to the gs.init that started it


@_functools.wraps(_runtime.init)
def init(*args, **kwargs):
    _runtime.init(*args, **kwargs)
    eps = _inspect.signature(_runtime.init).bind(*args, **kwargs).arguments.get("eps", _DEFAULT_EPS)
    _init_eps.clear()
    _init_eps[runtime.generation] = float(eps)


def _eps():
    """Genesis World's `gs.EPS`: the smallest float taken as non-zero, max(gs.init's eps, the machine epsilon of
    the precision): 1.19e-7 in float32, 1e-15 (the default eps) in float64. None before gs.init, as there."""
    if not runtime.initialized:
        return None
    return float(max(_init_eps.get(runtime.generation, _DEFAULT_EPS), _np.finfo(runtime.np_float).eps))


def __getattr__(name):
    if name == "device":
        return runtime.device  # torch.device of the active backend
    if name == "precision":
        return runtime.precision
    if name == "EPS":
        return _eps()
    if name in _PRECISION_DTYPES:
        if not runtime.initialized:
            raise AttributeError(f"gs.{name} is set by gs.init(precision=...), from the precision it is given: "
                                 f"call gs.init() first.")
        return getattr(runtime, name)
    if name == "distributed":  # imported on first use: torch.distributed only when a sharded run asks for it
        import importlib

        return importlib.import_module(".distributed", __name__)
    if name == "tc_bool":
        import torch

        return torch.bool
    raise AttributeError(f"module 'genesis_core' has no attribute {name!r}")


__all__ = [
    "CheckpointError", "CheckpointMismatchError", "DamagedCheckpointError", "InvalidCheckpointStateError",
    "InvalidEnvError", "InvalidStateError", "ModelFileError", "ColliderView", "Coupling", "Entity", "FieldSpec",
    "GenesisError", "GenesisException", "OptionError", "PluginNotInstalledError", "RecordingError", "Scene",
    "SceneError", "SimState", "Solver", "SolverBase", "SolverState", "UnsafeCheckpointError", "coupler", "cpu",
    "destroy", "errors", "force_fields", "gpu", "logger",
    "hookimpl", "init", "constants", "constraint_solver", "integrator", "materials", "morphs", "options", "plugins",
    "recorders", "renderers", "sensors", "surfaces", "textures", "utils", "validators", "Tensor", "UID", "arange", "from_torch",
    "full", "ones", "ones_like", "rand", "randn", "tensor", "zeros", "zeros_like",
] + list(_geom.__all__)
