"""Bound kernel launches (genesis_core.launch): the same results as Taichi's own path, new arrays rebind, and
what the fast path cannot hold keeps using Taichi's path."""

import pytest
import taichi as ti
import torch

from genesis_core import launch
from genesis_core.launch import Launcher


@pytest.fixture(autouse=True)
def bound_launches(monkeypatch):
    monkeypatch.setattr(launch, "ENABLED", True)

V3 = ti.types.vector(3, float)


@ti.kernel
def _axpy(f: ti.i32, a: float, x: ti.types.ndarray(), y: ti.types.ndarray(dtype=V3, ndim=2), out: ti.types.ndarray()):
    for b, i in ti.ndrange(x.shape[1], x.shape[2]):
        out[b, i] = a * x[f, b, i] + y[b, i][f % 3]


def _reference(f, a, x, y):
    return a * x[f] + y[..., f % 3]


def test_bound_launch_matches_taichi_and_rebinds_new_arrays():
    launch = Launcher()
    x = torch.rand(3, 4, 5, dtype=torch.float64)
    y = torch.rand(4, 5, 3, dtype=torch.float64)
    out = torch.zeros(4, 5, dtype=torch.float64)
    for f, a in ((0, 1.0), (1, -2.5), (2, 0.5), (1, 3.0)):  # the first call prepares, the others reuse
        launch(_axpy, f, a, x, y, out)
        assert torch.equal(out, _reference(f, a, x, y))
    assert launch._prepared[_axpy] is not False
    x2 = torch.rand(3, 4, 5, dtype=torch.float64)
    launch(_axpy, 2, 1.5, x2, y, out)  # another array: prepared again, never the stale pointer
    assert torch.equal(out, _reference(2, 1.5, x2, y))
    launch(_axpy, 0, 1.5, x, y, out)
    assert torch.equal(out, _reference(0, 1.5, x, y))


@ti.kernel
def _scaled(scale: ti.template(), x: ti.types.ndarray(), out: ti.types.ndarray()):
    for i in range(x.shape[0]):
        out[i] = scale * x[i]


def test_what_the_fast_path_cannot_hold_uses_taichis_path():
    launch = Launcher()
    x = torch.rand(6, dtype=torch.float64)
    out = torch.zeros(6, dtype=torch.float64)
    for scale in (2, 3):
        launch(_scaled, scale, x, out)
        assert torch.equal(out, scale * x)
    assert launch._prepared[_scaled] is False
