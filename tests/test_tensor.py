"""gs.Tensor: scene tracking through torch operations, sceneless/detach semantics, creation ops."""

import pickle

import pytest
import torch

import genesis_core as gs


@pytest.fixture
def scenes():
    return gs.Scene(), gs.Scene()


def test_operations_keep_the_scene(scenes):
    a, _ = scenes
    x = gs.tensor([1.0, 2.0, 3.0], scene=a)
    plain = torch.ones(3, dtype=x.dtype)
    for y in (x * 2, x + plain, plain - x, torch.sin(x), x.sum(), x[1:], x.reshape(3, 1) @ x.reshape(1, 3),
              torch.cat([x, plain]), torch.nn.functional.mse_loss(x, plain)):
        assert isinstance(y, gs.Tensor) and y.scene is a
    free = gs.tensor([1.0, 1.0, 1.0])
    assert (free * plain).scene is None and isinstance(free * plain, gs.Tensor)
    assert (x + free).scene is a  # a sceneless tensor does not change the scene
    parts = torch.split(x, 1)
    assert all(p.scene is a for p in parts)


def test_two_scenes_do_not_mix(scenes):
    a, b = scenes
    x, y = gs.tensor([1.0], scene=a), gs.tensor([2.0], scene=b)
    with pytest.raises(gs.GenesisError, match="two scenes") as info:
        x + y
    assert repr(a) in str(info.value) and repr(b) in str(info.value)
    assert (x + y.sceneless()).scene is a


def test_sceneless_keeps_autograd_and_detach_drops_it(scenes):
    a, _ = scenes
    leaf = gs.tensor([1.0, 2.0], requires_grad=True, scene=a)
    y = leaf * 3
    free = y.sceneless()
    assert free.scene is None and free.requires_grad and free.grad_fn is not None
    free.sum().backward()
    assert leaf.grad.tolist() == [3.0, 3.0]
    d = y.detach()
    assert d.scene is None and not d.requires_grad
    kept = y.detach(sceneless=False)
    assert kept.scene is a and not kept.requires_grad


def test_creation_ops():
    x = gs.zeros(2, 3, requires_grad=True)
    assert x.shape == (2, 3) and x.dtype == torch.float64 and x.requires_grad and x.device == gs.device
    assert gs.ones(4).sum().item() == 4 and gs.full((2,), 7.0).tolist() == [7.0, 7.0]
    assert gs.rand(5).shape == (5,) and gs.randn(2, 2).shape == (2, 2) and gs.arange(3).tolist() == [0, 1, 2]
    assert gs.tensor([1, 2]).dtype == torch.int64 and gs.tensor([1.5]).dtype == torch.float64
    t = torch.tensor([1.0], requires_grad=True) * 2
    assert not gs.from_torch(t).requires_grad and gs.from_torch(t, detach=False).grad_fn is not None
    assert gs.zeros_like(x).shape == (2, 3) and gs.ones_like(x).sum() == 6
    with pytest.raises(gs.GenesisError, match="torch.Tensor"):
        gs.from_torch([1, 2])


def test_pickling_drops_the_scene(scenes):
    a, _ = scenes
    x = gs.tensor([1.0, 2.0], scene=a)
    y = pickle.loads(pickle.dumps(x))
    assert torch.equal(y, torch.tensor([1.0, 2.0], dtype=torch.float64)) and getattr(y, "scene", None) is None
    assert "scene=" in repr(x) and repr(gs.tensor([1.0])).startswith("gs.tensor")


def test_deepcopy_keeps_scene_and_leaf_grad(scenes):
    import copy

    a, _ = scenes
    x = gs.tensor([1.0, 2.0], requires_grad=True, scene=a)
    y = copy.deepcopy({"x": x})["x"]
    assert isinstance(y, gs.Tensor) and y.scene is a and y.requires_grad and torch.equal(y, x)
