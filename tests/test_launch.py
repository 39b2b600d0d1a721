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


def test_one_filled_context_serves_every_launch_on_the_cpu():
    """On the CPU a prepared launch fills its context once (every array a host pointer, Taichi ndarrays of vectors
    included) and each launch sets only the scalars: a run of launches gives Taichi's own results, step by step."""
    launch = Launcher()
    x = ti.ndarray(ti.f32, (3, 4, 5))
    x.from_numpy(torch.rand(3, 4, 5).numpy())
    y = ti.Vector.ndarray(3, ti.f32, (4, 5))  # V3's element type
    y.from_numpy(torch.rand(4, 5, 3).numpy())
    out, expected = torch.zeros(4, 5), torch.zeros(4, 5)
    for k in range(8):
        f, a = k % 3, 0.5 * k - 1.0
        launch(_axpy, f, a, x, y, out)
        _axpy(f, a, x, y, expected)  # Taichi's path
        assert torch.equal(out, expected)
        assert torch.allclose(out, _reference(f, a, torch.from_numpy(x.to_numpy()), torch.from_numpy(y.to_numpy())))
    prepared = launch._prepared[_axpy]
    assert prepared is not False and prepared.ctx is not None and not prepared.ndarrays


def test_arrays_that_change_at_every_call_go_back_to_taichis_path():
    launch = Launcher()
    x = torch.rand(3, 4, 5, dtype=torch.float64)
    y = torch.rand(4, 5, 3, dtype=torch.float64)
    out = torch.zeros(4, 5, dtype=torch.float64)
    for k in range(Launcher.MAX_REBINDS + 3):
        view = x[:]  # a new tensor object each time: a new set of arrays
        launch(_axpy, k % 3, 2.0, view, y, out)
        assert torch.equal(out, _reference(k % 3, 2.0, x, y))
        assert (launch._prepared[_axpy] is False) == (k >= Launcher.MAX_REBINDS)


def test_alternating_between_two_sets_of_arrays_reuses_both_launches():
    """A caller switching between two sets of arrays (the rigid substep's external impulses, with and without
    applied wrenches) prepares each once and keeps the fast path, however many switches."""
    launch = Launcher()
    x, x2 = torch.rand(3, 4, 5, dtype=torch.float64), torch.rand(3, 4, 5, dtype=torch.float64)
    y = torch.rand(4, 5, 3, dtype=torch.float64)
    out = torch.zeros(4, 5, dtype=torch.float64)
    for k in range(3 * Launcher.MAX_REBINDS):
        arr = x if k % 2 else x2
        launch(_axpy, k % 3, 1.5, arr, y, out)
        assert torch.equal(out, _reference(k % 3, 1.5, arr, y))
    assert launch._prepared[_axpy] is not False and launch._rebinds[_axpy] == 1


def test_requires_grad_or_a_new_grad_prepares_again():
    """requires_grad selects Taichi's compiled kernel and .grad the gradient pointer passed: either changing
    means another launch."""
    launch = Launcher()
    x = torch.rand(3, 4, 5, dtype=torch.float64)
    y = torch.rand(4, 5, 3, dtype=torch.float64)
    out = torch.zeros(4, 5, dtype=torch.float64)
    launch(_axpy, 0, 1.0, x, y, out)
    first = launch._prepared[_axpy]
    x.requires_grad_(True)
    launch(_axpy, 1, 1.0, x, y, out)
    second = launch._prepared[_axpy]
    assert second is not first and torch.equal(out, _reference(1, 1.0, x.detach(), y))
    x.grad = torch.ones_like(x)
    launch(_axpy, 2, 1.0, x, y, out)
    assert launch._prepared[_axpy] is not second and torch.equal(out, _reference(2, 1.0, x.detach(), y))


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


_ACROSS_RESETS = r"""
import gc
import taichi as ti
import torch
import genesis_core as gs
from genesis_core.launch import Launcher

@ti.kernel
def double(x: ti.types.ndarray(), out: ti.types.ndarray()):
    for i in range(x.shape[0]):
        out[i] = 2 * x[i]

def box_scene():
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=1e-2))
    scene.add_entity(gs.morphs.Plane())
    scene.add_entity(gs.morphs.Box(pos=(0, 0, 0.1), size=(0.2, 0.2, 0.2)))
    scene.build()
    for _ in range(3):
        scene.step()
    return scene

gc.disable()  # the scenes of an earlier runtime are collected while a later one runs
kept, launch = [], Launcher()
x, out = torch.arange(5.0, dtype=torch.float64), torch.zeros(5, dtype=torch.float64)
for i in range(4):
    gs.init(backend=gs.cpu, precision="64" if i % 2 else "32", logging_level="warning")
    before = launch._prepared.get(double)
    launch(double, x, out)  # one launcher across resets: prepared again for this runtime's compiled kernel
    launch(double, x, out)
    assert torch.equal(out, 2 * x) and (before is None or launch._prepared[double] is not before)
    kept.append(box_scene())
    scene = box_scene()
    del kept[:-1]
    gc.collect()
    for _ in range(10):
        scene.step()
    z = float(scene.entities[1].get_pos()[2])
    assert 0.09 < z < 0.11, z
    gs.destroy()
    arrays = [a for a in kept[-1].rigid_solver.scratch.values() if isinstance(a, ti.lang._ndarray.Ndarray)]
    assert arrays and all(type(a).__module__ == "genesis_core._runtime" for a in arrays)  # detached
print("ok")
"""


def test_prepared_launches_survive_runtime_resets(tmp_path):
    """A scene of an earlier runtime, collected while a later one runs, must not tear down the later one (a
    prepared launch holding the Taichi program did: the old program's destruction crashed the next launch), its
    Taichi arrays are detached at the reset, and a launcher that outlives a reset prepares its launches again."""
    import subprocess
    import sys

    script = tmp_path / "resets.py"
    script.write_text(_ACROSS_RESETS)
    env = {**__import__("os").environ, "GENESIS_CORE_BOUND_LAUNCH": "1"}
    run = subprocess.run([sys.executable, "-X", "faulthandler", str(script)], capture_output=True, text=True,
                         env=env, timeout=600)
    assert run.returncode == 0 and run.stdout.strip().endswith("ok"), run.stdout[-2000:] + run.stderr[-4000:]


SERIAL = False


@ti.kernel
def _count_up(x: ti.types.ndarray()):
    if ti.static(SERIAL):
        ti.loop_config(serialize=True)
    for b in range(x.shape[0]):
        for i in range(x.shape[1]):
            x[b, i] += b * 10 + i


def test_serial_variant_is_the_same_kernel_on_the_calling_thread():
    """serial_variant copies a kernel with its module's SERIAL read as True: a separate compiled kernel with the
    same results, through Taichi's path and through a bound launch."""
    serial = launch.serial_variant(_count_up)
    assert serial is not _count_up and serial._primal.func.__globals__["SERIAL"] is True and SERIAL is False
    a, b = torch.zeros((3, 4)), torch.zeros((3, 4))
    _count_up(a)
    serial(b)
    Launcher()(serial, b)
    assert torch.equal(2 * a, b)


@ti.kernel
def _cancel_fast(a: ti.f32, b: ti.f32) -> ti.f32:
    return (a + b) - b


@ti.kernel
def _cancel_exact(a: ti.f32, b: ti.f32) -> ti.f32:
    return (a + b) - b


launch.exact_math(_cancel_exact)


def test_exact_math_kernels_compile_without_fast_math_and_the_others_keep_it(gs_runtime):
    """(1 + 1e30) - 1e30 rounds to 0 in float32; fast math's reassociation folds it to 1. Taichi's default flag
    stays on for the process and for other kernels."""
    assert ti.lang.impl.current_cfg().fast_math
    assert _cancel_exact(1.0, 1e30) == 0.0
    assert _cancel_fast(1.0, 1e30) == 1.0
    assert ti.lang.impl.current_cfg().fast_math
    assert _cancel_exact(1.0, 1e30) == 0.0  # launched again (compiled once)


@ti.kernel
def _axpy_named(f: ti.i32, a: float, x: ti.types.ndarray(ndim=3), y: ti.types.ndarray(dtype=V3, ndim=2),
                out: ti.types.ndarray(ndim=2)):
    for b, i in ti.ndrange(x.shape[1], x.shape[2]):
        out[b, i] = a * x[f, b, i] + y[b, i][f % 3]


def test_a_kernel_bound_by_parameter_name_launches_as_a_positional_call():
    """Launcher.bind takes each array parameter from a mapping by its name (extra entries ignored), the call gives
    the scalars by name and may pass another array for one launch; the results are the positional launch's."""
    x = torch.rand(3, 4, 5, dtype=torch.float64)
    y = torch.rand(4, 5, 3, dtype=torch.float64)
    out, other = torch.zeros(4, 5, dtype=torch.float64), torch.zeros(4, 5, dtype=torch.float64)
    launcher = Launcher()
    bound = launcher.bind(_axpy_named, {"out": out, "y": y, "x": x, "unused": torch.zeros(1)})
    for f, a in ((0, 1.0), (2, -0.5), (1, 2.0)):
        bound(f=f, a=a)
        assert torch.equal(out, _reference(f, a, x, y))
    bound(f=1, a=3.0, out=other)  # this launch only
    assert torch.equal(other, _reference(1, 3.0, x, y))
    bound(f=0, a=1.5)
    assert torch.equal(out, _reference(0, 1.5, x, y))


def test_a_binding_by_name_names_what_is_missing_or_misshapen():
    """A missing array, an array of another number of dimensions than its parameter's (a vector element's own not
    counted), and a scalar not given are refused by name before anything runs."""
    x, y, out = torch.rand(3, 4, 5), torch.rand(4, 5, 3), torch.zeros(4, 5)
    assert launch.binding_problems(_axpy_named, {"x": x, "y": y, "out": out}) == []
    with pytest.raises(ValueError, match="no array named 'out'"):
        Launcher().bind(_axpy_named, {"x": x, "y": y})
    with pytest.raises(ValueError, match="'x' has 2 dimensions, the parameter 3"):
        Launcher().bind(_axpy_named, {"x": x[0], "y": y, "out": out})
    with pytest.raises(ValueError, match="'y' has 3 dimensions, the parameter 2"):
        Launcher().bind(_axpy_named, {"x": x, "y": y[None], "out": out})
    bound = Launcher().bind(_axpy_named, {"x": x, "y": y, "out": out})
    with pytest.raises(TypeError, match="_axpy_named: no value for a"):
        bound(f=0)
    assert not out.any()  # nothing ran


def test_leading_parameters_given_positionally_launch_as_by_name():
    """Bound.leading: the kernel's first parameters at each call, positionally, the rest bound; it must name the
    first parameters in order, every scalar among them."""
    x, y = torch.rand(3, 4, 5, dtype=torch.float64), torch.rand(4, 5, 3, dtype=torch.float64)
    out = torch.zeros(4, 5, dtype=torch.float64)
    bound = Launcher().bind(_axpy_named, {"x": x, "y": y, "out": out})
    fast = bound.leading("f", "a")
    for f, a in ((0, 1.0), (2, -0.5)):
        fast(f, a)
        assert torch.equal(out, _reference(f, a, x, y))
    with pytest.raises(TypeError, match="must name its first parameters"):
        bound.leading("a", "f")
    with pytest.raises(TypeError, match="every scalar"):
        bound.leading("f")
