"""Shared test set-up: the fixtures every solver package uses, and the hypothesis profiles."""

import os

from genesis_core.testing import gs_runtime, python_env, shared_assets  # noqa: F401

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _hypothesis_profiles():
    from hypothesis import HealthCheck, settings

    common = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
    settings.register_profile("default", max_examples=15, **common)
    settings.register_profile("thorough", max_examples=200, **common)
    settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


_hypothesis_profiles()
