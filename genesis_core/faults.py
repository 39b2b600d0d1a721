"""Per-environment faults: after every `scene.step()`, which environments' state went non-finite.

The check is one pass over each solver's sentinel fields (`FieldSpec(sentinel=True)`, or every float frame field
of a solver that declares none) at the current frame, folded into a single number per step: the dot product of
each field with zeros is 0 when every entry is finite and NaN otherwise (0 * inf is NaN), and it never overflows.
Only that one number is read on the host. When it is NaN, the per-environment pass says which environments.

Environments never share state in any solver, so a non-finite environment changes no other environment's
numbers; the check only reports it, and `SimOptions(on_invalid_env="reset")` puts it back to the registered
initial state.
"""

from __future__ import annotations

import numpy as np
import torch

POLICIES = ("warn", "reset", "raise", "ignore")  # SimOptions.on_invalid_env


class FaultMonitor:
    def __init__(self, solvers):
        self.fields = []  # (solver name, field name, storage tensor, frames?)
        for s in solvers:
            specs = s.state.specs
            sentinels = [n for n, sp in specs.items() if sp.sentinel and sp.dtype == "float"]
            if not sentinels:
                sentinels = [n for n, sp in specs.items() if sp.frames and sp.dtype == "float"]
            for name in sentinels:
                self.fields.append((s.name, name, s.state.tensors[name], specs[name].frames))
        self._cpu = all(t.device.type == "cpu" for *_, t, _ in self.fields)
        if self._cpu:  # NumPy views of the storage: a small array's dot costs ~1 us, a torch op several
            self._views = [(t.detach().numpy(), fr) for _, _, t, fr in self.fields]
            self._zeros = [np.zeros((v[0] if fr else v).size, dtype=v.dtype) for v, fr in self._views]

    def any_invalid(self, f: int) -> bool:
        """True if some entry of a sentinel field at frame f is not finite (one number read on the host)."""
        if self._cpu:
            total = 0.0
            for (v, fr), z in zip(self._views, self._zeros):
                total += float(np.dot((v[f] if fr else v).reshape(-1), z))
            return total != total
        acc = None
        for _, _, t, fr in self.fields:
            x = (t[f] if fr else t).detach()
            term = (x.reshape(-1) * 0).sum()
            acc = term if acc is None else acc + term
        return acc is not None and bool(torch.isnan(acc))

    def invalid_envs(self, f: int, batch: int) -> tuple[list[int], dict]:
        """The environments with a non-finite sentinel entry, and per environment the first field found."""
        bad = torch.zeros(batch, dtype=torch.bool)
        first = {}
        for solver, name, t, fr in self.fields:
            x = (t[f] if fr else t).detach().reshape(batch, -1)
            env_bad = (~torch.isfinite(x)).any(dim=1).cpu()
            for b in torch.nonzero(env_bad & ~bad).flatten().tolist():
                first[b] = f"{solver}.{name}"
            bad |= env_bad
        return torch.nonzero(bad).flatten().tolist(), first
