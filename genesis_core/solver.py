"""The solver protocol, and a base class that derives state handling from the solver's field declaration.

A step of the scene runs, for each of its `substeps` substeps at frame f::

    for solver in active solvers: solver.substep_pre_coupling(f)
    coupler.couple(f)
    for solver in active solvers: solver.substep_post_coupling(f)

A substep reads frame f and writes frame `self.frames.next(f)`. Backward runs the `*_grad` methods in reverse.
The recipe is written once, in genesis_core.stepping.
"""

from __future__ import annotations

from typing import ClassVar, Protocol, runtime_checkable

import torch

from ._runtime import runtime
from .errors import GenesisError, OptionError, SceneError
from .state import FieldSpec, FrameRing, SolverState, StateStore, dense_real


@runtime_checkable
class Solver(Protocol):
    """What the scene needs of a solver. Subclassing `SolverBase` provides everything but the physics."""

    short_name: ClassVar[str]  # "rigid": scene.rigid_solver, Scene(rigid_options=...)
    options_class: ClassVar[type | None]
    material_class: ClassVar[type]  # entities whose material is an instance of it go to this solver
    state_fields: ClassVar[tuple[FieldSpec, ...]]
    supports_grad: ClassVar[bool]

    @property
    def name(self) -> str: ...

    @property
    def is_active(self) -> bool: ...

    def add_entity(self, idx: int, morph, material): ...

    def build(self, n_envs: int, n_frames: int) -> None: ...

    def process_input(self) -> None: ...

    def substep_pre_coupling(self, f: int) -> None: ...

    def substep_post_coupling(self, f: int) -> None: ...

    def substep_pre_coupling_grad(self, f: int) -> None: ...

    def substep_post_coupling_grad(self, f: int) -> None: ...

    def get_state(self, f: int) -> SolverState: ...

    def check_state(self, state: SolverState, where: str) -> None: ...

    def set_state(self, f: int, state: SolverState, envs_idx: torch.Tensor | None) -> None: ...

    def signature(self) -> dict: ...


class Entity:
    """Base of every entity: what was added to the scene, and the solver that simulates it."""

    def __init__(self, scene, solver, idx: int, morph, material):
        self.scene = scene
        self.solver = solver
        self.idx = idx  # index in scene.entities
        self.morph = morph
        self.material = material

    def _envs_idx(self, envs_idx):
        self.scene._require_built(f"{type(self).__name__} accessor")
        return self.scene._sanitize_envs_idx(envs_idx)

    def __repr__(self):
        return f"<{type(self).__name__} {self.idx}: {type(self.morph).__name__} in {self.solver.name}>"


class SolverBase:
    """Defaults for the protocol. A subclass provides:

    - class attributes `short_name`, `options_class`, `material_class`, `state_fields`, `entity_class`;
    - `build_model()`: turn the entities into static arrays; `state_dims()`: sizes named in the field shapes;
    - `init_state(f)`: write the initial state of every environment into frame f of `self.state`;
    - the substep methods (and their `_grad` twins if `supports_grad`).
    """

    short_name: ClassVar[str] = ""
    options_class: ClassVar[type | None] = None
    material_class: ClassVar[type] = type(None)
    entity_class: ClassVar[type] = Entity
    state_fields: ClassVar[tuple[FieldSpec, ...]] = ()
    supports_grad: ClassVar[bool] = False
    order: ClassVar[int] = 100  # position in scene.solvers (first-party: rigid 10, mpm 20, sph 30, pbd 40, fem 50)

    def __init__(self, scene, sim_options, options=None):
        if self.options_class is not None:
            if options is None:
                options = self.options_class()
            elif not isinstance(options, self.options_class):
                raise OptionError(
                    f"{self.short_name}_options must be a gs.options.{self.options_class.__name__}, "
                    f"got {type(options).__name__}."
                )
        self.scene = scene
        self.sim_options = sim_options
        self.options = options
        self.entities = []
        self.n_envs = 0
        self._state: StateStore | None = None
        self.frames: FrameRing | None = None

    @property
    def name(self) -> str:
        return type(self).__name__

    @property
    def is_active(self) -> bool:
        return bool(self.entities)

    @property
    def state(self) -> StateStore:
        """The storage of the declared fields (after build)."""
        if self._state is None:
            raise SceneError(f"{self.name}: its state exists after scene.build(); build the scene first.")
        return self._state

    @property
    def frame(self) -> int:
        """The frame that holds the current state (what get_state reads and entity setters write)."""
        return self.scene._frame

    @property
    def batch(self) -> int:
        return max(self.n_envs, 1)

    @property
    def float_dtype(self) -> torch.dtype:
        return runtime.tc_float

    @property
    def device(self) -> torch.device:
        return runtime.device

    def add_entity(self, idx, morph, material):
        entity = self.entity_class(self.scene, self, idx, morph, material)
        self.entities.append(entity)
        return entity

    def build(self, n_envs: int, n_frames: int):
        self.n_envs = n_envs
        self.build_model()
        self._state = StateStore(self.name, self.state_fields, self.state_dims(), n_envs, n_frames,
                                self.float_dtype, self.device, requires_grad=self.sim_options.requires_grad,
                                domain=self.domain_bounds())
        self._state.scene = self.scene
        self.frames = self.state.frames
        with torch.no_grad():
            self.init_state(0)

    def build_model(self):
        pass

    def state_dims(self) -> dict:
        """Sizes named in the field shapes (``{"n_particles": 1000}``), and the quaternion offsets named by a
        field's `quat` (``{"qpos_quats": [3, 10]}``)."""
        return {}

    def domain_bounds(self):
        """``(lower, upper)``, metres: where the positions of the fields declared `domain=True` must lie (the
        region the kernels can hold); None: no domain (called at build, after build_model)."""
        return None

    def init_state(self, f: int):
        pass

    def process_input(self):
        pass

    def substep_pre_coupling(self, f):
        pass

    def substep_post_coupling(self, f):
        pass

    def substep_pre_coupling_grad(self, f):
        raise GenesisError(f"{self.name} does not support differentiable mode.")

    def substep_post_coupling_grad(self, f):
        raise GenesisError(f"{self.name} does not support differentiable mode.")

    def get_state(self, f: int) -> SolverState:
        return SolverState(self.name, self.state.read(f), scene=self.scene)

    def check_state(self, state, where: str, envs_idx=None):
        """Raise unless `state` fits this solver: every field present, shaped and typed as declared, and valid
        (FieldSpec's rules) in the environments `envs_idx` (default: all) that a write would take."""
        if not isinstance(state, SolverState) or state.solver != self.name:
            got = getattr(state, "solver", type(state).__name__)
            raise SceneError(f"{where}: expected a state of {self.name}, got {got}.")
        fields = {}
        for name in self.state.specs:
            x = getattr(state, name, None)
            if x is not None and not torch.is_tensor(x):
                raise SceneError(f"{where}: {self.name}.{name} is a {type(x).__name__}, not a torch tensor.")
            if x is not None and not dense_real(x):
                raise SceneError(f"{where}: {self.name}.{name} is a {x.layout} tensor on {x.device}; a state holds "
                                 "dense real tensors.")
            if x is not None:
                fields[name] = x
        self.state.check(fields, where, envs_idx=envs_idx)

    def set_state(self, f: int, state: SolverState, envs_idx=None):
        """Write a state that passed `check_state` (the scene checks every solver's before writing any)."""
        self.state.write(f, {name: getattr(state, name) for name in self.state.specs}, envs_idx)

    def signature(self) -> dict:
        """What a checkpoint must match besides its arrays: the options and the entities."""
        return {
            "options": self.options.as_dict() if self.options is not None else None,
            "entities": [{"morph": e.morph.as_dict(), "material": e.material.as_dict(),
                          **({"variants": [m.as_dict() for m in e.variants]} if getattr(e, "variants", None) else {}),
                          **({"attached": [e._attached[0].idx, e._attached[1]]}
                             if getattr(e, "_attached", None) else {})}
                         for e in self.entities],
        }
