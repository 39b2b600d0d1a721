import os

import pytest

SHARED_ASSETS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "..", "shared", "assets")


@pytest.fixture(scope="session", autouse=True)
def gs_runtime():
    import genesis_core as gs

    if not gs.runtime.initialized:
        gs.init(backend=gs.cpu, precision="64", seed=0)
    yield gs


@pytest.fixture
def shared_assets():
    path = os.path.abspath(SHARED_ASSETS)
    if not os.path.isdir(path):
        pytest.skip(f"robot models of ../shared/assets are absent ({path}); they exist beside CI's clone")
    return path
