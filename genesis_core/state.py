"""The state registry: each solver declares its dynamic fields once, as `FieldSpec`s; storage, `get_state`,
`reset`, checkpoint keys and gradients are all derived from that one declaration.

Storage layout. A field of per-environment shape `S` is a torch tensor of shape `[B, *S]` (B = max(n_envs, 1)),
or `[n_frames, B, *S]` when the field is declared `frames=True`: kernels advance it from frame `f` to frame
`frames.next(f)`, so that the differentiable mode can keep the frames backward needs. Torch tensors are passed to
Taichi kernels as ndarray arguments (zero copy on the CPU): kernels compile once per dtype and rank, not once per
scene, and a scene's memory goes away with the scene.
"""

from __future__ import annotations

import copy
from typing import Iterable

import attrs
import numpy as np
import torch

from .errors import GenesisError, OptionError, SceneError

DTYPES = ("float", "int")


@attrs.define(frozen=True)
class FieldSpec:
    """Declaration of one dynamic field of a solver.

    name: attribute name in the solver state and the checkpoint key suffix (``"MPMSolver.<name>"``).
    shape: per-environment shape; each entry an int or the name of a dimension the solver resolves at build
        (``("n_particles", 3)``).
    dtype: ``"float"`` (the precision chosen in gs.init) or ``"int"`` (int32; also used for flags).
    frames: True if kernels advance the field from frame f to the next one (integrated state).
    checkpoint: False for a field that is part of the in-memory state but not written to disk.
    grad: True if gradients flow through the field in differentiable mode.
    doc: units and meaning.
    """

    name: str
    shape: tuple
    dtype: str = attrs.field(default="float", validator=attrs.validators.in_(DTYPES))
    frames: bool = True
    checkpoint: bool = True
    grad: bool = False
    doc: str = ""

    def resolve_shape(self, dims: dict) -> tuple:
        out = []
        for d in self.shape:
            if isinstance(d, str):
                if d not in dims:
                    raise GenesisError(f"field {self.name!r}: dimension {d!r} was not given by the solver's state_dims().")
                d = dims[d]
            out.append(int(d))
        return tuple(out)


class FrameRing:
    """Frame indexing: frames live in a ring of `n_frames` slots; frame f is followed by `next(f)`."""

    def __init__(self, n_frames: int):
        self.n_frames = n_frames

    def next(self, f: int) -> int:
        return (f + 1) % self.n_frames

    def prev(self, f: int) -> int:
        return (f - 1) % self.n_frames


class StateStore:
    """The storage of one solver's declared fields, allocated from the declaration at build."""

    def __init__(self, owner: str, specs: Iterable[FieldSpec], dims: dict, n_envs: int, n_frames: int,
                 float_dtype: torch.dtype, device: torch.device, requires_grad: bool = False):
        self.owner = owner
        self.scene = None  # set by the solver: getters return gs.Tensors bound to it
        self.tape = None  # differentiable mode: the scene's genesis_core.grad.Tape
        self.requires_grad = requires_grad
        self.specs = {s.name: s for s in specs}
        self.n_envs = n_envs
        self.batch = max(n_envs, 1)
        self.frames = FrameRing(n_frames)
        self.shapes = {}
        self.tensors = {}
        for name, spec in self.specs.items():
            shape = spec.resolve_shape(dims)
            dtype = float_dtype if spec.dtype == "float" else torch.int32
            lead = (n_frames, self.batch) if spec.frames else (self.batch,)
            self.shapes[name] = shape
            t = torch.zeros(lead + shape, dtype=dtype, device=device)
            if requires_grad and spec.grad:
                if spec.dtype != "float":
                    raise GenesisError(f"{owner}.{name}: only float fields can carry gradients.")
                # Taichi's kernel.grad reads and accumulates tensor.grad of a torch argument that requires grad
                t.requires_grad_(True)
                t.grad = torch.zeros_like(t)
            self.tensors[name] = t

    def __getattr__(self, name):
        try:
            return self.__dict__["tensors"][name]
        except KeyError:
            raise AttributeError(f"{self.__dict__.get('owner')} declares no state field {name!r}") from None

    def at(self, name: str, f: int) -> torch.Tensor:
        """The `[B, *shape]` view of a field at frame f (frame-less fields ignore f); outside the autograd graph."""
        t = self.tensors[name].detach()
        return t[f] if self.specs[name].frames else t

    def has_grad(self, name: str) -> bool:
        return self.tensors[name].grad is not None

    def grad_at(self, name: str, f: int) -> torch.Tensor:
        """Differentiable mode: the gradient buffer of a field at frame f, `[B, *shape]`."""
        g = self.tensors[name].grad
        if g is None:
            raise GenesisError(f"{self.owner}.{name} carries no gradient (declare it with grad=True).")
        return g[f] if self.specs[name].frames else g

    def zero_grads(self, frame: int | None = None):
        """Zero every gradient buffer (or only the one of frame `frame` of the frame fields)."""
        for name, t in self.tensors.items():
            if t.grad is not None:
                if frame is None:
                    t.grad.zero_()
                elif self.specs[name].frames:
                    t.grad[frame].zero_()

    def get_rows(self, name: str, f: int, envs_idx=None, item=()) -> torch.Tensor:
        """A copy of `field[f][envs_idx][:, *item]` shaped `([len(envs_idx) or n_envs,] ...)`. In differentiable
        mode it is a gs.Tensor of the scene, in the autograd graph: its gradient flows into the physics."""
        from .grad import rows_take
        from .tensor import _wrap

        x = rows_take(self.at(name, f), envs_idx, tuple(item), self.n_envs > 0)
        if self.tape is None:
            return x
        if self.has_grad(name):
            x = self.tape.read(self, name, envs_idx, item, x)
        return _wrap(x, self.scene)

    def set_rows(self, name: str, f: int, value, envs_idx=None, item=(), what: str | None = None):
        """Write `value` into `field[f][envs_idx][:, *item]`; rows outside envs_idx are untouched.

        `value` is shaped `([len(envs_idx) or n_envs,] ...)`, or broadcastable to it; anything else raises an
        OptionError naming `what` and the expected shape, before anything is written.
        """
        dst_all = self.at(name, f)
        rows = dst_all if envs_idx is None else dst_all[envs_idx]
        target = rows[(slice(None),) + tuple(item)] if item != () else rows
        want = tuple(target.shape) if self.n_envs else tuple(target.shape[1:])
        # detached: solver storage never joins an autograd graph (in differentiable mode the tape records `value`
        # and hands it its gradient after the physics backward)
        source = value if torch.is_tensor(value) else None
        if torch.is_tensor(value):
            value = value.detach().to(dtype=dst_all.dtype, device=dst_all.device)
        else:  # straight to the field's dtype: a Python float must not pass through float32
            value = torch.as_tensor(np.asarray(value, dtype=torch.empty(0, dtype=dst_all.dtype).numpy().dtype),
                                    device=dst_all.device)
        try:
            value = value.expand(want)
        except RuntimeError:
            raise OptionError(f"{what or name}: expected a value of shape {want}, got {tuple(value.shape)}.") from None
        if not torch.isfinite(value).all():
            raise OptionError(f"{what or name}: the value has non-finite entries.")
        if not self.n_envs:
            value = value.unsqueeze(0)
        key = (slice(None),) + tuple(item)
        if envs_idx is None:
            dst_all[key] = value
        else:
            rows[key] = value
            dst_all[envs_idx] = rows
        if self.tape is not None and self.has_grad(name):
            self.tape.on_set(self, name, envs_idx, item, source)

    def public_shape(self, name: str) -> tuple:
        """The shape users see: `([n_envs,] *shape)`."""
        return ((self.n_envs,) if self.n_envs else ()) + self.shapes[name]

    def read(self, f: int) -> dict:
        """Copies of every field at frame f, shaped `([n_envs,] ...)`."""
        out = {}
        for name in self.specs:
            x = self.at(name, f).clone()
            out[name] = x if self.n_envs else x[0]
        return out

    def check(self, values: dict, where: str, names=None):
        """Raise unless `values` has every field (or `names`) with the right shape and dtype."""
        for name in names if names is not None else self.specs:
            if name not in values:
                raise SceneError(f"{where}: {self.owner}.{name} is missing.")
            x = values[name]
            want = self.public_shape(name)
            if tuple(x.shape) != want:
                raise SceneError(f"{where}: {self.owner}.{name} has shape {tuple(x.shape)}, this scene needs {want}.")
            dtype = self.tensors[name].dtype
            if x.dtype != dtype:
                raise SceneError(f"{where}: {self.owner}.{name} has dtype {x.dtype}, this scene needs {dtype}.")

    def write(self, f: int, values: dict, envs_idx: torch.Tensor | None = None, names=None):
        """Write `values` (shaped `([n_envs,] ...)`) into frame f; only rows `envs_idx` when given.

        Rows not in envs_idx are not touched. Values must have passed `check`.
        """
        for name in names if names is not None else self.specs:
            dst = self.at(name, f)
            src = values[name].detach().to(dst.device)
            if not self.n_envs:
                dst[0] = src
            elif envs_idx is None:
                dst.copy_(src)
            else:
                dst[envs_idx] = src[envs_idx]


class SolverState:
    """A plain attribute holder of one solver's state: one torch tensor per declared field, shaped
    `([n_envs,] ...)`, e.g. ``state.qpos``. `solver` names the solver class; `scene` is dropped by
    `serializable()`."""

    def __init__(self, solver: str, fields: dict, scene=None):
        self.solver = solver
        self.scene = scene
        self._field_names = tuple(fields)
        for k, x in fields.items():
            setattr(self, k, x)

    @property
    def fields(self) -> dict:
        return {k: getattr(self, k) for k in self._field_names}

    def serializable(self):
        self.scene = None
        for k in self._field_names:
            setattr(self, k, getattr(self, k).detach())
        return self

    def clone(self):
        out = copy.copy(self)
        for k in self._field_names:
            setattr(out, k, getattr(self, k).detach().clone())
        return out

    def __repr__(self):
        inner = ", ".join(f"{k}={tuple(getattr(self, k).shape)}" for k in self._field_names)
        return f"SolverState({self.solver}: {inner})"


class SimState:
    """The state of a whole scene: `solvers_state` is aligned with `scene.solvers` (None for a solver with no
    entities); `t` is the step index at which it was taken."""

    def __init__(self, scene, solvers_state: list, t: int):
        self.scene = scene
        self.solvers_state = solvers_state
        self.t = t

    def serializable(self):
        """Detach every tensor and drop the references to the scene, so that the state pickles."""
        self.scene = None
        for s in self.solvers_state:
            if s is not None:
                s.serializable()
        return self

    def clone(self):
        return SimState(None, [None if s is None else s.clone() for s in self.solvers_state], self.t)

    def __repr__(self):
        return f"SimState(t={self.t}, solvers_state={self.solvers_state!r})"
