"""Small models shipped with the plugin, for examples and tests that run without any other files."""

import os

FOLDER = os.path.dirname(os.path.abspath(__file__))


def path(name: str) -> str:
    """Absolute path of a shipped model: pendulum.xml, double_pendulum.xml, cartpole.xml, quadruped.xml, arm.urdf,
    and the convex mesh pebble.obj."""
    full = os.path.join(FOLDER, name)
    if not os.path.isfile(full):
        raise FileNotFoundError(f"no shipped model {name!r}; available: {sorted(os.listdir(FOLDER))}")
    return full
