"""Every script in examples/ runs small and shows the physics it is about."""

import importlib.util
import math
import os

import pytest
import torch

from .conftest import REPO


def load(name):
    spec = importlib.util.spec_from_file_location(f"example_{name}", os.path.join(REPO, "examples", f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_pendulum_period():
    period, expected = load("pendulum").main(seconds=4.0)
    assert period == pytest.approx(expected, rel=5e-3)


def test_cartpole_control_keeps_the_pole_up_only_with_gain():
    angles = load("cartpole").main(n_envs=3, seconds=2.0)
    assert float(angles[0]) > 1.0, "without control the pole falls"
    assert float(angles[2]) < 0.05, "the strongest controller keeps it up"


def test_batched_boxes_come_to_rest_flat():
    z, speed = load("box_drop").main(n_envs=6, seconds=2.5)
    assert torch.allclose(z, torch.full_like(z, 0.1), atol=1e-3)
    assert float(speed.max()) < 1e-2
