"""pytest fixtures for solver packages (the core's tests, the first-party plugins', a third party's):

    # conftest.py
    from genesis_core.testing import gs_runtime, shared_assets  # noqa: F401

gs_runtime: one engine runtime per test process (CPU, float64, seeded), started once and torn down at the end.
shared_assets: the path of ../shared/assets beside the repository, or a skip that says it is absent.
central_differences, assert_close_rel: checking a gradient against finite differences.
"""

import os
import sys

import pytest

SHARED_ASSETS_ENV = "GENESIS_SHARED_ASSETS"


@pytest.fixture(scope="session", autouse=True)
def gs_runtime():
    import genesis_core as gs

    started = not gs.runtime.initialized
    if started:
        gs.init(backend=gs.cpu, precision="64", seed=0, logging_level="warning")
    yield gs
    if started:
        gs.destroy()


def shared_assets_path(start: str) -> str:
    """$GENESIS_SHARED_ASSETS, or the first `shared/assets` found beside a parent folder of `start`."""
    if os.environ.get(SHARED_ASSETS_ENV):
        return os.environ[SHARED_ASSETS_ENV]
    folder = os.path.abspath(start)
    while True:
        candidate = os.path.join(os.path.dirname(folder), "shared", "assets")
        if os.path.isdir(candidate) or os.path.dirname(folder) == folder:
            return candidate
        folder = os.path.dirname(folder)


@pytest.fixture
def shared_assets(request):
    path = shared_assets_path(str(request.config.rootpath))
    if not os.path.isdir(path):
        pytest.skip(f"robot models of ../shared/assets are absent ({path}); they exist beside CI's clone")
    return path


def python_env(**extra):
    """Environment for a child Python process that sees the same packages as this one."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([p for p in sys.path if p] + [env.get("PYTHONPATH", "")])
    env.update(extra)
    return env


def central_differences(fn, x, eps=1e-6):
    """The gradient of the scalar function `fn` at tensor `x` by central differences, one entry at a time."""
    import torch

    out = torch.zeros_like(x)
    for i in range(x.numel()):
        d = torch.zeros_like(x).view(-1)
        d[i] = eps
        d = d.view_as(x)
        out.view(-1)[i] = (fn(x + d) - fn(x - d)) / (2 * eps)
    return out


def assert_close_rel(grad, fd, tol=1e-3):
    """|grad - fd| / |fd| < tol, with both printed when it is not."""
    err = float((grad - fd).norm() / fd.norm())
    assert err < tol, f"relative error {err:.2e}\ngrad {grad}\nfd   {fd}"
