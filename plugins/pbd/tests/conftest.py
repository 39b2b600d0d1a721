from genesis_core.testing import gs_runtime, shared_assets  # noqa: F401
