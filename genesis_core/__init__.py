"""genesis-core: batched, checkpointed and differentiable physics on Taichi.

    import genesis_core as gs
    gs.init(backend=gs.cpu)
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=0.01))
    ...

The core holds the scene, the solver protocol, the state registry, the coupler and the checkpoint format; the
solvers come from plugin distributions found through the entry-point group ``genesis_core.plugins``.
"""

from importlib.metadata import PackageNotFoundError, version as _version

from . import coupler, errors, materials, morphs, options, plugins, renderers, surfaces, utils, validators
from ._runtime import cpu, destroy, gpu, init, runtime
from .constants import constraint_solver, integrator
from .coupler import ColliderView, Coupling
from .errors import (
    CheckpointError,
    CheckpointMismatchError,
    DamagedCheckpointError,
    GenesisError,
    InvalidCheckpointStateError,
    InvalidEnvError,
    InvalidStateError,
    ModelFileError,
    OptionError,
    PluginNotInstalledError,
    SceneError,
    UnsafeCheckpointError,
)
from .plugins import hookimpl
from .scene import Scene
from .solver import Entity, Solver, SolverBase
from .state import FieldSpec, SimState, SolverState
from .tensor import Tensor, arange, from_torch, full, ones, ones_like, rand, randn, tensor, zeros, zeros_like

try:
    __version__ = _version("genesis-core")
except PackageNotFoundError:  # running from a source tree without installing
    __version__ = "0.0.0+unknown"


# Genesis World's dtype names (`dtype=gs.tc_float`): set by gs.init from its precision.
_PRECISION_DTYPES = ("tc_float", "np_float", "ti_float", "tc_int", "np_int", "ti_int")


def __getattr__(name):
    if name == "device":
        return runtime.device  # torch.device of the active backend
    if name == "precision":
        return runtime.precision
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
    "GenesisError", "OptionError", "PluginNotInstalledError", "Scene", "SceneError", "SimState", "Solver",
    "SolverBase", "SolverState", "UnsafeCheckpointError", "coupler", "cpu", "destroy", "errors", "gpu",
    "hookimpl", "init", "constraint_solver", "integrator", "materials", "morphs", "options", "plugins", "renderers", "surfaces", "utils", "validators", "Tensor", "arange", "from_torch", "full", "ones",
    "ones_like", "rand", "randn", "tensor", "zeros", "zeros_like",
]
