"""Shared test set-up: one engine runtime per test process (CPU, float64, seeded)."""

import os
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED_ASSETS = os.path.join(os.path.dirname(REPO), "shared", "assets")


@pytest.fixture(scope="session", autouse=True)
def gs_runtime():
    import genesis_core as gs

    if not gs.runtime.initialized:
        gs.init(backend=gs.cpu, precision="64", seed=0, logging_level="warning")
    yield gs
    gs.destroy()


@pytest.fixture
def shared_assets():
    if not os.path.isdir(SHARED_ASSETS):
        pytest.skip(f"robot models of ../shared/assets are absent ({SHARED_ASSETS}); they exist beside CI's clone")
    return SHARED_ASSETS


def python_env(**extra):
    """Environment for a child Python process that sees the same packages as this one."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([p for p in sys.path if p] + [env.get("PYTHONPATH", "")])
    env.update(extra)
    return env


def _hypothesis_profiles():
    from hypothesis import HealthCheck, settings

    common = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
    settings.register_profile("default", max_examples=15, **common)
    settings.register_profile("thorough", max_examples=200, **common)
    settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


_hypothesis_profiles()
