"""The state registry: each solver declares its dynamic fields once, as `FieldSpec`s; storage, `get_state`,
`reset`, checkpoints (`StateStore.checkpoint_layout` and the methods beside it; keys by `field_key`) and gradients
are all derived from that one declaration.

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

from .errors import GenesisError, InvalidStateError, OptionError, SceneError

DTYPES = ("float", "int")


def field_key(solver: str, field: str) -> str:
    """The key of a solver's field, ``"MPMSolver.pos"``: the checkpoint's array key, and how errors and
    flattened states name the field. Built here only."""
    return f"{solver}.{field}"


QUAT_TOL = 1e-3  # |norm - 1| accepted for a unit quaternion (the solvers renormalise what they integrate)


def _bounds(value):
    if value is None:
        return None
    lo, hi = value
    return (None if lo is None else float(lo), None if hi is None else float(hi))


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

    What a valid value is (checked by the core on every way into state: entity setters, `reset(state=...)`, a
    pickled state, `load_checkpoint`; a value outside it is refused with a `gs.InvalidStateError` naming the key,
    the environment, the index and the bound, and nothing is written):

    finite: float fields: every entry finite (default True).
    bounds: ``(lo, hi)``, either None for unbounded: every entry in the interval, closed unless `bounds_open`
        says ``(True, False)`` and so on.
    codes: int fields: the allowed values (flags, modes).
    quat: True: the last axis (length 4) is a unit quaternion (w, x, y, z); or the name of an entry of the
        solver's `state_dims()` listing the offsets along the last axis where a unit quaternion starts (a
        robot's `qpos`). Accepted within `QUAT_TOL` of unit norm.
    domain: the last axis (length 3) is a position that must lie inside the solver's `domain_bounds()`.
    sentinel: the per-step fault check (`scene.invalid_envs`) scans this field: declare it on the fields that
        any non-finite value in an environment's state reaches within one substep (positions and velocities).
        A solver that declares no sentinel has all its float frame fields scanned.
    """

    name: str
    shape: tuple
    dtype: str = attrs.field(default="float", validator=attrs.validators.in_(DTYPES))
    frames: bool = True
    checkpoint: bool = True
    grad: bool = False
    doc: str = ""
    finite: bool = True
    bounds: tuple | None = attrs.field(default=None, converter=_bounds)
    bounds_open: tuple = (False, False)
    codes: tuple | None = attrs.field(default=None, converter=attrs.converters.optional(tuple))
    quat: bool | str = False
    domain: bool = False
    sentinel: bool = False

    @property
    def structural(self) -> bool:
        """True if validity depends on several entries together (a quaternion, a position)."""
        return bool(self.quat) or self.domain

    def bound_text(self) -> str:
        lo, hi = self.bounds
        return (("(" if self.bounds_open[0] else "[") + ("-inf" if lo is None else repr(lo)) + ", "
                + ("inf" if hi is None else repr(hi)) + (")" if self.bounds_open[1] else "]"))

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
                 float_dtype: torch.dtype, device: torch.device, requires_grad: bool = False, domain=None):
        self.owner = owner
        # rules across fields or entries (the owner's): rules(rows: {name: [R, ...]}) -> None, a message, or one
        # entry that breaks them, (name, row, index, value, expected), refused as the fields' own rules refuse one;
        # `check` applies it to the rows a write would take, after each field passed its own rules
        self.rules = None
        # (lo, hi) of the positions of `domain=True` fields, metres, float64 on the CPU; None: not checked
        self.domain = None if domain is None else tuple(torch.as_tensor(b, dtype=torch.float64) for b in domain)
        self.scene = None  # set by the solver: getters return gs.Tensors bound to it
        self.tape = None  # differentiable mode: the scene's genesis_core.grad.Tape
        self.requires_grad = requires_grad
        self.specs = {s.name: s for s in specs}
        self.n_envs = n_envs
        self.batch = max(n_envs, 1)
        self.frames = FrameRing(n_frames)
        self.shapes = {}
        self.tensors = {}
        self._quat_offsets = {}
        for name, spec in self.specs.items():
            shape = spec.resolve_shape(dims)
            if spec.quat:
                offsets = [0] if spec.quat is True else [int(o) for o in dims.get(spec.quat, ())]
                if spec.quat is not True and spec.quat not in dims:
                    raise GenesisError(f"field {name!r}: quat={spec.quat!r} was not given by the solver's state_dims().")
                if not shape or any(o < 0 or o + 4 > shape[-1] for o in offsets):
                    raise GenesisError(f"field {name!r}: quaternion offsets {offsets} do not fit shape {shape}.")
                self._quat_offsets[name] = torch.as_tensor(offsets, dtype=torch.long)
            if spec.domain and (not shape or shape[-1] != 3):
                raise GenesisError(f"field {name!r}: domain=True needs a last axis of length 3, the shape is {shape}.")
            dtype = float_dtype if spec.dtype == "float" else torch.int32
            lead = (n_frames, self.batch) if spec.frames else (self.batch,)
            self.shapes[name] = shape
            t = torch.zeros(lead + shape, dtype=dtype, device=device)
            if requires_grad and spec.grad:
                if spec.dtype != "float":
                    raise GenesisError(f"{field_key(owner, name)}: only float fields can carry gradients.")
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
            raise GenesisError(f"{field_key(self.owner, name)} carries no gradient (declare it with grad=True).")
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
        from .launch import torch_one_thread
        from .tensor import _wrap

        with torch_one_thread():
            x = rows_take(self.at(name, f), envs_idx, tuple(item), self.n_envs > 0)
        if self.tape is None:
            return x
        if self.has_grad(name):
            x = self.tape.read(self, name, envs_idx, item, x)
        return _wrap(x, self.scene)

    def set_rows(self, name: str, f: int, value, envs_idx=None, item=(), what: str | None = None):
        """Write `value` into `field[f][envs_idx][:, *item]`; rows outside envs_idx are untouched.

        `value` is shaped `([len(envs_idx) or n_envs,] ...)`, or broadcastable to it; anything else raises an
        OptionError naming `what` and the expected shape, before anything is written. (Small tensors: on one torch
        thread, genesis_core.launch.torch_one_thread.)
        """
        from .launch import torch_one_thread

        with torch_one_thread():
            self._set_rows(name, f, value, envs_idx, item, what)

    def _set_rows(self, name, f, value, envs_idx, item, what):
        dst_all = self.at(name, f)
        rows = dst_all if envs_idx is None else dst_all[envs_idx]
        target = rows[(slice(None),) + tuple(item)] if item != () else rows
        want = tuple(target.shape) if self.n_envs else tuple(target.shape[1:])
        # detached: solver storage never joins an autograd graph (in differentiable mode the tape records `value`
        # and hands it its gradient after the physics backward)
        source = value if torch.is_tensor(value) else None
        value = to_tensor(value, dst_all.dtype, dst_all.device, what or name).detach()
        try:
            value = value.expand(want)
        except RuntimeError:
            raise OptionError(f"{what or name}: expected a value of shape {want}, got {tuple(value.shape)}.") from None
        if not self.n_envs:
            value = value.unsqueeze(0)
        key = (slice(None),) + tuple(item)
        spec = self.specs[name]
        if spec.structural or not self._entries_ok(spec, value):
            # locate the first invalid entry in the rows as they would be after the write (or check a quaternion
            # or a position whose entries are written in parts)
            candidate = rows.clone()
            candidate[key] = value
            self.validate(name, candidate, what or name, envs_idx)
        if envs_idx is None:
            dst_all[key] = value
        else:
            rows[key] = value
            dst_all[envs_idx] = rows
        if self.tape is not None and self.has_grad(name):
            self.tape.on_set(self, name, envs_idx, item, source)

    # -- validation ----------------------------------------------------------------------------------------------

    @staticmethod
    def _entries_ok(spec: FieldSpec, x: torch.Tensor) -> bool:
        """The cheap check of the entry-wise rules (finite, bounds, codes) on a value about to be written."""
        if spec.dtype == "float":
            if spec.finite and not bool(np.isfinite(x.numpy()).all() if x.device.type == "cpu"  # ~3x cheaper
                                        else torch.isfinite(x).all()):
                return False
        elif spec.codes is not None and bool(_not_a_code(spec, x).any()):
            return False
        return spec.bounds is None or not bool(_outside(spec, x).any())

    def violation(self, name: str, x: torch.Tensor):
        """The first entry of `x` (storage rows `[R, *shape]`) that breaks field `name`'s declaration, as
        ``(row, index, value, expected)``, or None."""
        spec = self.specs[name]
        x = x.detach()
        if spec.dtype == "float" and spec.finite:
            bad = ~torch.isfinite(x)
            if bad.any():
                return first_entry(bad, x) + ("a finite value",)
        if spec.bounds is not None:
            bad = _outside(spec, x)
            if bad.any():
                return first_entry(bad, x) + (f"a value in {spec.bound_text()}",)
        if spec.dtype != "float" and spec.codes is not None:
            bad = _not_a_code(spec, x)
            if bad.any():
                return first_entry(bad, x) + (f"one of {list(spec.codes)}",)
        if spec.quat:
            offsets = self._quat_offsets[name]
            if offsets.numel():
                xd = x.double().cpu()
                q = torch.stack([xd[..., offsets + k] for k in range(4)], dim=-1)  # [..., n_quats, 4]
                norm = q.norm(dim=-1)
                bad = ~((norm - 1).abs() <= QUAT_TOL)
                if bad.any():
                    where = bad.nonzero()[0].tolist()
                    where[-1] = int(offsets[where[-1]])
                    row, *index = where
                    quat = [float(v) for v in xd[tuple(where[:-1])][where[-1]:where[-1] + 4]]
                    return row, tuple(index), quat, f"a unit quaternion (w, x, y, z) (|norm - 1| <= {QUAT_TOL})"
        if spec.domain and self.domain is not None:
            lo, hi = self.domain
            xd = x.double().cpu()
            bad = (xd < lo) | (xd > hi)  # NaN compares False: finite=False fields keep NaN
            if bad.any():
                row, *index = bad.nonzero()[0].tolist()
                axis = index[-1]
                return (row, tuple(index), float(xd[tuple([row] + index)]),
                        f"a position inside the solver's domain, [{float(lo[axis])!r}, {float(hi[axis])!r}] m on "
                        f"axis {'xyz'[axis]}")
        return None

    def validate(self, name: str, x: torch.Tensor, where: str, envs_idx=None, error=InvalidStateError):
        """Raise `error` naming the key, the environment, the index and the bound unless every entry of `x`
        (storage rows `[R, *shape]`; row r is environment `envs_idx[r]`, or r) is valid for field `name`."""
        found = self.violation(name, x)
        if found is not None:
            raise error(self.entry_message(where, name, *found, envs_idx))

    def entry_message(self, where, name, row, index, value, expected, envs_idx=None) -> str:
        """The refusal of one entry: the key, the environment (storage row `row` is environment `envs_idx[row]`,
        or `row`), the index, the value and what was expected."""
        env = ""
        if self.n_envs:
            env = f"env {int(envs_idx[row]) if envs_idx is not None else row}, "
        return (f"{where}: {field_key(self.owner, name)}[{env}index {list(index)}] = {value!r} is not accepted: "
                f"expected {expected}. Nothing was changed.")

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

    def check(self, values: dict, where: str, names=None, envs_idx=None, error=InvalidStateError):
        """Raise unless `values` has every field (or `names`) with the right shape and dtype, and valid values
        in the environments `envs_idx` (default: all), the ones a write would take."""
        for name in names if names is not None else self.specs:
            if name not in values:
                raise SceneError(f"{where}: {field_key(self.owner, name)} is missing.")
            x = values[name]
            want = self.public_shape(name)
            if tuple(x.shape) != want:
                raise SceneError(f"{where}: {field_key(self.owner, name)} has shape {tuple(x.shape)}, this scene needs {want}.")
            dtype = self.tensors[name].dtype
            if x.dtype != dtype:
                raise SceneError(f"{where}: {field_key(self.owner, name)} has dtype {x.dtype}, this scene needs {dtype}.")
            rows = x if self.n_envs else x.unsqueeze(0)
            if envs_idx is not None:
                rows = rows[envs_idx.to(rows.device)]
            self.validate(name, rows, where, envs_idx, error)
        if self.rules is not None:
            rows = {}
            for name, x in values.items():
                r = x if self.n_envs else x.unsqueeze(0)
                rows[name] = r[envs_idx.to(r.device)] if envs_idx is not None else r
            found = self.rules(rows)
            if isinstance(found, tuple):  # one entry: (name, row, index, value, expected), named as above
                raise error(self.entry_message(where, *found, envs_idx))
            if found is not None:
                raise error(f"{where}: {found} Nothing was changed.")

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

    # -- checkpoints ---------------------------------------------------------------------------------------------
    #
    # A checkpoint holds, per solver, every field declared `checkpoint=True`, under `field_key(owner, name)`, as a
    # NumPy array of the storage dtype shaped `([n_envs,] *shape)` (the public layout, C-contiguous). Restoring
    # writes those fields into one frame; the fields kept out of checkpoints restart from given values (the
    # scene passes its build-time state). genesis_core.checkpoint owns the file around these arrays.

    def checkpoint_names(self) -> list:
        """The fields a checkpoint holds, in declaration order."""
        return [name for name, spec in self.specs.items() if spec.checkpoint]

    def numpy_dtype(self, name: str) -> np.dtype:
        return torch.empty(0, dtype=self.tensors[name].dtype).numpy().dtype

    def checkpoint_layout(self) -> dict:
        """``{key: (shape, NumPy dtype)}`` of the arrays a checkpoint of this store holds."""
        return {field_key(self.owner, name): (self.public_shape(name), self.numpy_dtype(name))
                for name in self.checkpoint_names()}

    def checkpoint_arrays(self, f: int, where: str) -> dict:
        """``{key: np.ndarray}``: copies of the checkpointed fields at frame f. A value `from_checkpoint` would
        refuse raises (naming `where`) instead, so that no file is written that cannot be loaded."""
        out = {}
        for name in self.checkpoint_names():
            x = self.at(name, f)
            self.validate(name, x, where)
            out[field_key(self.owner, name)] = (x if self.n_envs else x[0]).detach().cpu().numpy().copy()
        return out

    def from_checkpoint(self, arrays: dict, where: str, error=InvalidStateError) -> dict:
        """This store's fields among a checkpoint's `arrays` (``{key: np.ndarray}``, already matched to
        `checkpoint_layout()`), as tensors ``{name: tensor}`` checked against the declaration (`error` naming
        the key, the environment and the index otherwise). Writes nothing: `restore` does."""
        values = {name: torch.from_numpy(arrays[field_key(self.owner, name)].copy())
                  for name in self.checkpoint_names()}
        self.check(values, where, names=list(values), error=error)
        return values

    def restore(self, f: int, values: dict, others: dict):
        """Write what `from_checkpoint` returned into frame f of every environment, and `others` (``{name:
        tensor}``, shaped `([n_envs,] ...)`) into the fields a checkpoint does not hold."""
        self.write(f, {**others, **values}, None)


def to_tensor(value, dtype: torch.dtype, device, what: str) -> torch.Tensor:
    """`value` (a number, a nested sequence, a NumPy array or a tensor) as a tensor of `dtype` on
    `device`, or an OptionError naming `what`. A Python float goes straight to the dtype, never via float32."""
    if torch.is_tensor(value):
        if value.dtype == torch.bool or not dense_real(value):
            raise OptionError(f"{what}: expected a dense tensor of real numbers, got a {value.dtype} "
                              f"{value.layout} tensor on {value.device}.")
        if not dtype.is_floating_point:
            _check_integral(value.detach().cpu().numpy(), dtype, what)
        return value.to(dtype=dtype, device=device)  # keeps autograd: the tape records setter inputs
    try:
        arr = np.asarray(value)
        if arr.dtype.kind not in "iuf":
            raise TypeError(f"a value of NumPy kind {arr.dtype.kind!r}")
    except (TypeError, ValueError, OverflowError) as exc:
        raise OptionError(f"{what}: expected numbers (a number, a sequence, an array or a tensor), got "
                          f"{type(value).__name__} ({exc}).") from None
    if not dtype.is_floating_point:
        _check_integral(arr, dtype, what)
    return torch.as_tensor(arr.astype(torch.empty(0, dtype=dtype).numpy().dtype), device=device)


def dense_real(x: torch.Tensor) -> bool:
    """A strided tensor of real numbers with storage (not sparse, complex or on the meta device)."""
    return x.layout == torch.strided and x.device.type != "meta" and not x.is_complex()


def _check_integral(arr: np.ndarray, dtype: torch.dtype, what: str):
    """Integers for an int field: whole numbers inside its range (a cast would wrap 2**32 + 1 to 1)."""
    info = torch.iinfo(dtype)
    with np.errstate(invalid="ignore"):
        whole = arr.dtype.kind in "iu" or bool(np.all(np.isfinite(arr) & (np.floor(arr) == arr)))
        inside = arr.size == 0 or (int(arr.min()) >= info.min and int(arr.max()) <= info.max) if whole else False
    if not (whole and inside):
        raise OptionError(f"{what}: expected whole numbers in [{info.min}, {info.max}] for an integer field.")


def to_index(idx, n: int, what: str) -> torch.Tensor:
    """`idx` (an int, a sequence, a NumPy array or a tensor of ints in [0, n), each once, a slice of range(n), or a
    boolean mask of length n) as a 1-D long tensor on the CPU, or an OptionError naming `what` and the accepted
    range."""
    if isinstance(idx, slice):
        try:
            return torch.arange(n)[idx]
        except (TypeError, ValueError) as exc:
            raise OptionError(f"{what}: the slice {idx!r} does not select from range({n}): {exc}.") from None
    if isinstance(idx, (bool, np.bool_)) or not (
            torch.is_tensor(idx) or isinstance(idx, (list, tuple, range, np.ndarray, int, np.integer))):
        raise OptionError(f"{what}: expected indices (an int or a 1-D sequence of ints), got {type(idx).__name__}.")
    try:
        arr = np.asarray(idx.detach().cpu() if torch.is_tensor(idx) else idx)
    except (TypeError, ValueError, OverflowError, RuntimeError):
        arr = None
    if arr is None or not (arr.dtype.kind in "iub" or (arr.size == 0 and arr.dtype.kind == "f")):
        raise OptionError(f"{what}: expected integer indices in [0, {n}), got {idx!r:.200}.")
    if arr.dtype.kind == "b":
        if arr.shape != (n,):
            raise OptionError(f"{what}: a boolean mask must have shape ({n},), got {arr.shape}.")
        arr = np.nonzero(arr)[0]
    if arr.ndim == 0:
        arr = arr.reshape(1)
    if arr.ndim != 1:
        raise OptionError(f"{what}: expected a 1-D sequence of indices, got shape {arr.shape}.")
    if arr.size and (int(arr.min()) < 0 or int(arr.max()) >= n):
        raise OptionError(f"{what}: indices must lie in [0, {n}), got {arr.tolist()!r:.200}.")
    t = torch.as_tensor(arr.astype(np.int64))
    if t.unique().numel() != t.numel():
        raise OptionError(f"{what}: an index appears twice in {t.tolist()!r:.200}.")
    return t


def _outside(spec: FieldSpec, x: torch.Tensor) -> torch.Tensor:
    lo, hi = spec.bounds
    lo_open, hi_open = spec.bounds_open
    bad = torch.zeros(x.shape, dtype=torch.bool, device=x.device)
    if lo is not None:
        bad |= (x <= lo) if lo_open else (x < lo)
    if hi is not None:
        bad |= (x >= hi) if hi_open else (x > hi)
    return bad


def _not_a_code(spec: FieldSpec, x: torch.Tensor) -> torch.Tensor:
    return ~torch.isin(x, torch.as_tensor(spec.codes, dtype=x.dtype, device=x.device))


def first_entry(bad: torch.Tensor, x: torch.Tensor):
    """(row, index, value) of the first True entry of the mask `bad` over storage rows `[R, ...]`, its value read
    from `x`: what `StateStore.violation` and an owner's `rules` report of an entry."""
    row, *index = bad.nonzero()[0].tolist()
    return row, tuple(index), x[tuple([row] + index)].item()


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

    def fields_by_key(self) -> dict:
        """Every field of every solver entry, ``{"MPMSolver.pos": tensor, ...}`` (keys by `field_key`, the
        checkpoint's names), the tensors themselves, not copies."""
        return {field_key(s.solver, name): x for s in self.solvers_state if s is not None
                for name, x in s.fields.items()}

    def __repr__(self):
        return f"SimState(t={self.t}, solvers_state={self.solvers_state!r})"
