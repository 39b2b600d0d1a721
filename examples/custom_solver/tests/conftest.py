"""The engine's fixtures for this package's tests: one runtime per test process (CPU, float64, seeded)."""

from genesis_core.testing import gs_runtime  # noqa: F401
