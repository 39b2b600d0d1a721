"""Differentiable mode: the tape a scene records while it steps, and the physics backward that replays it.

While a scene built with `SimOptions(requires_grad=True)` steps, the tape keeps what backward needs:

- the frames: substep k reads frame slot `k % n_frames` and writes the next one. The ring holds the newest
  `substeps_local + 1` frames; before a slot is written again, the frame it holds moves to host memory.
- the frameless fields (controls, parameters) as they were during each step, and the gravity each step ran with
  (`scene.set_gravity` may change it between steps).
- inputs: every value a setter wrote that requires grad (and every value that did not, which cuts the gradient of
  what it overwrote), with the substep at which it was written.
- reads: a getter's result is a gs.Tensor whose torch backward deposits its gradient here, at the substep read.

`loss.backward()` on a scene-bound gs.Tensor runs the torch backward (the reads deposit), then `Tape.backward`:
for each substep in reverse it restores the substep's start frame (and the step's gravity, where it differs from the
solvers' current one) and runs `genesis_core.stepping.substep_grad`
(the substep's forward again, so that every solver's scratch is as it was, then the solvers' and the coupler's
`*_grad` methods in reverse order). The gradients that reach the recorded inputs are then handed to torch, which
carries them to the user's leaf tensors.
"""

from __future__ import annotations

import warnings

import torch

from .errors import SceneError
from .stepping import substep_grad


class _Read(torch.autograd.Function):
    """A getter's result in the autograd graph; its backward deposits the gradient on the tape."""

    @staticmethod
    def forward(ctx, anchor, value, tape, key):
        ctx.tape, ctx.key = tape, key
        return value.clone()

    @staticmethod
    def backward(ctx, grad):
        ctx.tape.deposit(ctx.key, grad)
        return None, None, None, None


def rows_add(dst_all: torch.Tensor, envs_idx, item: tuple, value: torch.Tensor, batched: bool):
    """dst_all[envs_idx][:, *item] += value, for value shaped like what `StateStore.get_rows` returns."""
    if not batched:
        value = value.unsqueeze(0)
    rows = dst_all if envs_idx is None else dst_all[envs_idx]
    key = (slice(None),) + tuple(item)
    rows[key] += value.to(rows.dtype)
    if envs_idx is not None:
        dst_all[envs_idx] = rows


def rows_take(src_all: torch.Tensor, envs_idx, item: tuple, batched: bool) -> torch.Tensor:
    rows = src_all if envs_idx is None else src_all[envs_idx]
    out = rows[(slice(None),) + tuple(item)] if item != () else rows
    return out.clone() if batched else out[0].clone()


def rows_zero(dst_all: torch.Tensor, envs_idx, item: tuple):
    rows = dst_all if envs_idx is None else dst_all[envs_idx]
    rows[(slice(None),) + tuple(item)] = 0
    if envs_idx is not None:
        dst_all[envs_idx] = rows


class Tape:
    """What one forward run of a differentiable scene recorded, from its start (build or reset) to now."""

    def __init__(self, scene):
        self.scene = scene
        self.anchor = torch.zeros((), requires_grad=True)  # makes getter results require grad
        self.clear()

    # -- recording -------------------------------------------------------------------------------------------------

    def clear(self):
        self.k0 = self.scene._substep
        self.host_frames = {}  # k -> {solver name: [(field names, their values flat, one tensor)]}: frames that left the ring
        self.frameless = {}  # step index -> {solver name: {field: tensor}}
        self.gravity = {}  # step index -> SimOptions.gravity (m/s^2) when it ran (one tuple shared while unchanged)
        self._kept = {}  # solver name -> (versions of its frameless fields when kept, {field: copy})
        self._layouts = {}  # solver name -> (its store, what _layout returns)
        self.events = {}  # k -> [(store, name, envs_idx, item, value or None)], in the order they happened
        self.deposits = {}  # k -> [(store, name, envs_idx, item, grad)]
        self.records = {}  # solver name -> {k: what the solver kept of substep k for its backward (keep / take)}
        self.rerun_k = None  # the substep the backward is re-running
        self.consumed = False
        self.invalid_envs = set()  # environments the forward left non-finite: backward drops their gradient

    @property
    def k(self) -> int:
        return self.scene._substep

    def _stores(self):
        if self.__dict__.get("_active_stores") is None:  # (which solvers are active is settled at build)
            self._active_stores = [s.state for s in self.scene.active_solvers]
        return self._active_stores

    def check_live(self, what: str):
        if self.consumed:
            raise SceneError(f"{what}: this forward run was already differentiated (one backward per forward); "
                             "call scene.reset() to start the next forward run.")

    def on_set(self, store, name, envs_idx, item, value):
        """A setter wrote rows of a field that carries gradients; `value` is the user's tensor, or None for a
        constant (which cuts the gradient of what it overwrote)."""
        self.check_live("setting state")
        if value is not None and not value.requires_grad:
            value = None
        self.events.setdefault(self.k, []).append((store, name, envs_idx, tuple(item), value))

    def mark(self):
        """Where the record of setter writes stands now (for undo_to)."""
        return self.k, len(self.events.get(self.k, ()))

    def undo_to(self, mark):
        """Forget the setter writes recorded since `mark` (a write that was refused and taken back)."""
        k, n = mark
        if k in self.events:
            del self.events[k][n:]

    def read(self, store, name, envs_idx, item, value):
        """The getter result `value` (a copy) put into the autograd graph."""
        key = (store, name, self.k, envs_idx, tuple(item))
        return _Read.apply(self.anchor, value, self, key)

    def deposit(self, key, grad):
        store, name, k, envs_idx, item = key
        if self.consumed:
            return
        self.deposits.setdefault(k, []).append((store, name, envs_idx, item, grad.detach()))

    def begin_step(self, t: int):
        """Before step t: keep the frameless fields and the gravity it will run with."""
        self.check_live("scene.step()")
        self.gravity[t] = self.scene.sim_options.gravity
        snap = {}
        for st in self._stores():
            # a store whose frameless fields were not written since the last step's copy shares that copy (copies are
            # never written); otherwise each unwritten field shares its own
            names, tensors = self._layout(st)[0]
            versions = tuple(x._version for x in tensors)
            kept = self._kept.get(st.owner)
            if kept is None or kept[0] != versions:
                fields = {n: (kept[1][n] if kept is not None and kept[0][i] == v else x.detach().clone())
                          for i, (n, x, v) in enumerate(zip(names, tensors, versions))}
                kept = self._kept[st.owner] = (versions, fields)
            snap[st.owner] = kept[1]
        self.frameless[t] = snap

    def _layout(self, st):
        """(frameless field names, their tensors), and per slot of the ring, per dtype of the frame fields: (names,
        flat views of that slot), for the one copy per dtype that keeps a slot."""
        lay = self._layouts.get(st.owner)
        if lay is None or lay[0] is not st:  # (a store's tensors are made once, at build)
            frameless = [(n, x) for n, x in st.tensors.items() if not st.specs[n].frames]
            framed = [(n, x.detach()) for n, x in st.tensors.items() if st.specs[n].frames]
            slots = []
            for slot in range(st.frames.n_frames):
                groups = {}
                for n, x in framed:
                    groups.setdefault(x.dtype, ([], []))
                    groups[x.dtype][0].append(n)
                    groups[x.dtype][1].append(x[slot].reshape(-1))
                slots.append([(tuple(names), views, [v.numel() for v in views]) for names, views in groups.values()])
            lay = self._layouts[st.owner] = (st, ([n for n, _ in frameless], [x for _, x in frameless]), slots)
        return lay[1], lay[2]

    def begin_substep(self, k: int, n_frames: int):
        """Before substep k writes its slot: the frame that slot holds leaves the ring if backward needs it, one
        copy per store and dtype ((names, flat copy) pairs)."""
        old = k + 1 - n_frames
        if old >= self.k0:
            slot = (k + 1) % n_frames
            self.host_frames[old] = {
                st.owner: [(names, torch.cat(views).cpu()) for names, views, _ in self._layout(st)[1][slot]]
                for st in self._stores()
            }

    def keep(self, owner: str, record):
        """A solver's own record of the substep under way, for its backward of that substep (a tuple of tensors,
        counted in grad_memory): `take` hands it back when the backward re-runs the substep."""
        self.records.setdefault(owner, {})[self.k] = record

    def take(self, owner: str):
        """During the backward's re-run of a substep: what `keep` recorded for it (None if nothing was)."""
        return self.records.get(owner, {}).pop(self.rerun_k, None)

    def mark_invalid(self, envs):
        """Environments a step of this run left non-finite: their Jacobians hold NaN, and 0 * NaN would spread
        NaN into the gradient of every input they share with the other environments."""
        self.invalid_envs.update(int(e) for e in envs)

    def host_bytes(self) -> int:
        seen = {}  # (a frameless copy shared by several steps counts once)
        for per_solver in self.host_frames.values():
            for packs in per_solver.values():
                seen.update((id(x), x.numel() * x.element_size()) for _, x in packs)
        for per_solver in self.frameless.values():
            for fields in per_solver.values():
                seen.update((id(x), x.numel() * x.element_size()) for x in fields.values())
        for per_substep in self.records.values():
            for record in per_substep.values():
                seen.update((id(x), x.numel() * x.element_size()) for x in record if isinstance(x, torch.Tensor))
        return sum(seen.values())

    # -- backward --------------------------------------------------------------------------------------------------

    def backward(self):
        scene = self.scene
        self.check_live("backward")
        self.consumed = True
        n = scene._n_frames
        S = scene.sim_options.substeps
        K = scene._substep
        stores = self._stores()
        active = scene.active_solvers
        final_gravity = scene.sim_options.gravity
        final = {st.owner: {nm: t.detach().clone() for nm, t in st.tensors.items()} for st in stores}
        final_slot = K % n
        results = {}  # id(value) -> [value, grad]
        self._held = {}  # solver name -> {frameless field: (the copy it was restored from, its version then)}
        dropped = torch.as_tensor(sorted(self.invalid_envs), dtype=torch.long)
        if len(dropped):
            warnings.warn(f"backward: environments {dropped.tolist()} went non-finite during this run; "
                          "their gradients are dropped (zero), the other environments' are exact.", stacklevel=3)
        try:
            with torch.no_grad():
                for st in stores:
                    st.zero_grads()
                for k in range(K, self.k0 - 1, -1):
                    slot = k % n
                    for store, name, envs_idx, item, g in self.deposits.get(k, ()):
                        rows_add(store.grad_at(name, slot), envs_idx, item, g, store.n_envs > 0)
                    for store, name, envs_idx, item, value in reversed(self.events.get(k, ())):
                        gbuf = store.grad_at(name, slot)
                        if value is not None:
                            g = rows_take(gbuf, envs_idx, item, store.n_envs > 0)
                            if tuple(g.shape) != tuple(value.shape):
                                g = g.sum_to_size(value.shape)
                            entry = results.setdefault(id(value), [value, None])
                            g = g.to(value.dtype)
                            entry[1] = g if entry[1] is None else entry[1] + g
                        rows_zero(gbuf, envs_idx, item)
                    if k == self.k0:
                        break
                    self._substep_backward(k - 1, n, S, active, stores, dropped)
        finally:
            if scene.sim_options.gravity != final_gravity:  # a step before the last set_gravity was re-run
                scene._apply_gravity(final_gravity)
            with torch.no_grad():
                for st in stores:
                    for nm, t in st.tensors.items():
                        if st.specs[nm].frames:
                            t[final_slot] = final[st.owner][nm][final_slot]
                        else:
                            t.copy_(final[st.owner][nm])
                    st.zero_grads()
            self.host_frames.clear()
            self.deposits.clear()
            self.records.clear()
            self.rerun_k = None
        if results:
            values = [v for v, _ in results.values()]
            grads = [g for _, g in results.values()]
            torch.autograd.backward(values, grads)

    def _substep_backward(self, k, n, S, active, stores, dropped):
        scene = self.scene
        f = k % n
        fn = (k + 1) % n
        frames = self.host_frames.get(k)
        for st in stores:
            if frames is not None:
                for (_, views, sizes), (_, flat) in zip(self._layout(st)[1][f], frames[st.owner]):
                    torch._foreach_copy_(views, flat.to(views[0].device).split(sizes))
            # the frameless fields of the step, except those that still hold them since the last substep's restore
            held = self._held.setdefault(st.owner, {})
            for nm, x in self.frameless[k // S][st.owner].items():
                t, h = st.tensors[nm], held.get(nm)
                if h is None or h[0] is not x or h[1] != t._version:
                    t.copy_(x)
                    held[nm] = (x, t._version)
        gravity = self.gravity.get(k // S, scene.sim_options.gravity)
        if gravity != scene.sim_options.gravity:  # set_gravity between steps: re-run with the step's own
            scene._apply_gravity(gravity)
        self.rerun_k = k
        substep_grad(active, scene.coupler, f)  # (runs substep k's forward again first)
        for st in stores:
            st.zero_grads(frame=fn)
            if len(dropped):  # the environments that went non-finite (Tape.mark_invalid)
                for nm, t in st.tensors.items():
                    if t.grad is not None:  # (index assignment: an indexed view would be a copy)
                        if st.specs[nm].frames:
                            t.grad[:, dropped.to(t.device)] = 0
                        else:
                            t.grad[dropped.to(t.device)] = 0


def require_grad_support(solvers):
    for s in solvers:
        if not getattr(s, "supports_grad", False):
            raise SceneError(f"requires_grad=True: {s.name} does not support differentiable mode.")


__all__ = ["Tape", "require_grad_support", "rows_add", "rows_take", "rows_zero"]
