"""`gs.Tensor`: a torch.Tensor that remembers the scene it came from, and the creation ops that make one.

A result of any torch operation on gs.Tensors is a gs.Tensor; it belongs to the scene of its scene-bound inputs
(plain tensors and sceneless gs.Tensors do not change that). Mixing tensors of two different scenes raises:
a gradient cannot flow back into two simulations.
"""

from __future__ import annotations

import torch

from ._runtime import runtime
from .errors import GenesisError


def _scenes_of(obj, found: list):
    if isinstance(obj, Tensor):
        scene = obj.__dict__.get("_scene")
        if scene is not None and all(scene is not s for s in found):
            found.append(scene)
    elif isinstance(obj, (list, tuple)):
        for item in obj:
            _scenes_of(item, found)
    elif isinstance(obj, dict):
        for item in obj.values():
            _scenes_of(item, found)
    return found


def _wrap(obj, scene):
    if isinstance(obj, torch.Tensor) and not isinstance(obj, torch.nn.Parameter):
        out = obj if type(obj) is Tensor else obj.as_subclass(Tensor)
        out._scene = scene
        return out
    if isinstance(obj, (list, tuple)) and not hasattr(obj, "_fields"):
        return type(obj)(_wrap(o, scene) for o in obj)
    return obj


class Tensor(torch.Tensor):
    """A torch.Tensor bound to a scene (or to none). `.scene` is that scene; `sceneless()` drops it and keeps
    autograd; `detach(sceneless=True)` drops both."""

    @property
    def scene(self):
        return self.__dict__.get("_scene")

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        scenes = _scenes_of(args, [])
        _scenes_of(kwargs, scenes)
        if len(scenes) > 1:
            raise GenesisError(
                f"an operation ({getattr(func, '__name__', func)}) mixes tensors of two scenes, {scenes[0]!r} and "
                f"{scenes[1]!r}: gradients cannot flow into both. Call .sceneless() on one of them first."
            )
        with torch._C.DisableTorchFunctionSubclass():
            out = func(*args, **kwargs)
        if func in _RETURNS_AS_IS:
            return out
        return _wrap(out, scenes[0] if scenes else None)

    def backward(self, gradient=None, retain_graph=None, create_graph=False, inputs=None):
        """torch's backward, then, for a tensor bound to a differentiable scene, the physics backward through every
        step that scene recorded, down to the tensors passed to its setters (and on to their leaves)."""
        scene = self.scene
        physics = scene is not None and getattr(scene, "_tape", None) is not None
        if physics:
            scene._check_backward()
            # the graph stays for the physics backward, which may pass through tensors this one was made from
            retain_graph = True
        with torch._C.DisableTorchFunctionSubclass():
            torch.Tensor.backward(self, gradient, retain_graph=retain_graph, create_graph=create_graph,
                                  inputs=inputs)
        if physics:
            scene._backward()

    def sceneless(self) -> "Tensor":
        """The same values, still in the autograd graph, bound to no scene."""
        with torch._C.DisableTorchFunctionSubclass():
            out = torch.Tensor.view_as(self, self)
        return _wrap(out, None)

    def detach(self, sceneless: bool = True) -> "Tensor":
        """Out of the autograd graph; also out of the scene unless sceneless=False."""
        with torch._C.DisableTorchFunctionSubclass():
            out = torch.Tensor.detach(self)
        return _wrap(out, None if sceneless else self.scene)

    def __deepcopy__(self, memo):
        with torch._C.DisableTorchFunctionSubclass():
            data = torch.Tensor.clone(torch.Tensor.detach(self))
        out = _wrap(data, self.scene)
        if self.requires_grad and self.is_leaf:
            out.requires_grad_(True)
        memo[id(self)] = out
        return out

    def __reduce_ex__(self, protocol):
        # a pickled gs.Tensor is a plain tensor's data: the scene does not travel
        return torch.Tensor.__reduce_ex__(self.as_subclass(torch.Tensor), protocol)

    def __repr__(self, *, tensor_contents=None):
        with torch._C.DisableTorchFunctionSubclass():
            body = torch.Tensor.__repr__(self.as_subclass(torch.Tensor))
        return f"gs.{body}" if self.scene is None else f"gs.{body[:-1]}, scene={self.scene!r})"


_RETURNS_AS_IS = {torch.Tensor.__repr__, torch.Tensor.__format__, torch.Tensor.tolist, torch.Tensor.item,
                  torch.Tensor.numpy, torch.Tensor.__reduce_ex__}


def _make(data: torch.Tensor, requires_grad: bool, scene) -> Tensor:
    out = data.as_subclass(Tensor)
    out._scene = scene
    if requires_grad:
        out.requires_grad_(True)
    return out


def _float(dtype):
    return runtime.tc_float if dtype is None else dtype


def tensor(data, *, dtype=None, requires_grad=False, scene=None) -> Tensor:
    """A gs.Tensor of `data` on gs.device; floats default to the precision chosen in gs.init."""
    base = torch.as_tensor(data, device=runtime.device)
    if dtype is None and base.is_floating_point():
        dtype = runtime.tc_float
    return _make(base.to(dtype=dtype or base.dtype).clone(), requires_grad, scene)


def from_torch(t: torch.Tensor, *, detach=True, requires_grad=False, scene=None) -> Tensor:
    """Wrap a torch tensor (moved to gs.device); `detach=False` keeps it in its autograd graph."""
    if not isinstance(t, torch.Tensor):
        raise GenesisError(f"gs.from_torch expects a torch.Tensor, got {type(t).__name__}.")
    base = t.detach() if detach else t
    return _make(base.to(runtime.device), requires_grad, scene)


def zeros(*size, dtype=None, requires_grad=False, scene=None) -> Tensor:
    return _make(torch.zeros(*size, dtype=_float(dtype), device=runtime.device), requires_grad, scene)


def ones(*size, dtype=None, requires_grad=False, scene=None) -> Tensor:
    return _make(torch.ones(*size, dtype=_float(dtype), device=runtime.device), requires_grad, scene)


def full(size, fill_value, *, dtype=None, requires_grad=False, scene=None) -> Tensor:
    return _make(torch.full(size, fill_value, dtype=_float(dtype), device=runtime.device), requires_grad, scene)


def rand(*size, dtype=None, requires_grad=False, scene=None) -> Tensor:
    return _make(torch.rand(*size, dtype=_float(dtype), device=runtime.device), requires_grad, scene)


def randn(*size, dtype=None, requires_grad=False, scene=None) -> Tensor:
    return _make(torch.randn(*size, dtype=_float(dtype), device=runtime.device), requires_grad, scene)


def arange(*args, dtype=None, requires_grad=False, scene=None) -> Tensor:
    return _make(torch.arange(*args, dtype=dtype, device=runtime.device), requires_grad, scene)


def zeros_like(t, *, requires_grad=False, scene=None) -> Tensor:
    return _make(torch.zeros_like(torch.Tensor.as_subclass(t, torch.Tensor)), requires_grad, scene)


def ones_like(t, *, requires_grad=False, scene=None) -> Tensor:
    return _make(torch.ones_like(torch.Tensor.as_subclass(t, torch.Tensor)), requires_grad, scene)


__all__ = ["Tensor", "arange", "from_torch", "full", "ones", "ones_like", "rand", "randn", "tensor", "zeros",
           "zeros_like"]
