"""Differentiable mode in the core, on the spring-chain solver (a third-party package whose one kernel is its
own exact adjoint under Taichi's autodiff): gradients against central finite differences in float64, inputs
given as torch expressions and as slices of one tensor, frames moved to host memory, the one-backward rule,
sceneless losses, partial resets and the memory per step."""

import pytest
import torch

import genesis_core as gs
from genesis_core import plugins
from genesis_core.testing import assert_close_rel, central_differences

from . import toy_plugin

N_NODES = 5


def chain_scene(requires_grad=True, n_envs=2, substeps=4, substeps_local=None):
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=0.01, substeps=substeps, requires_grad=requires_grad,
                                                       substeps_local=substeps_local))
    chain = scene.add_entity(gs.morphs.Cylinder(pos=(0, 0, 1), height=0.5),
                             material=gs.materials.SpringChain(n_nodes=N_NODES, anchored=True))
    scene.build(n_envs=n_envs)
    return scene, chain


def rollout(scene, chain, v0, anchors):
    """Loss on the final node positions after len(anchors) steps; v0 sets the initial velocities (scaled along the
    chain), anchors[t] moves the anchor before step t."""
    chain.set_nodes_vel(v0 * torch.linspace(0, 1, N_NODES, dtype=torch.float64)[:, None])
    for t in range(len(anchors)):
        chain.set_anchor(anchors[t])
        scene.step()
    p = chain.get_nodes_pos()
    return (p[..., 0] ** 2).sum() + 0.3 * p[..., 2].sum() + p[..., -1, 1].sum()


@pytest.mark.parametrize("substeps_local", [None, 8])
def test_gradients_match_finite_differences(substeps_local):
    """Initial velocities through a torch expression, and per-step controls given as slices anchors[t] of one
    leaf; with substeps_local=8 most frames live in host memory during the run."""
    n_steps = 12
    scene, chain = chain_scene(substeps_local=substeps_local)
    v0 = torch.tensor([0.3, -0.2, 0.1], dtype=torch.float64, requires_grad=True)
    start = torch.tensor([0.0, 0.0, 1.25], dtype=torch.float64)
    anchors = (start + 0.02 * torch.arange(n_steps, dtype=torch.float64)[:, None]).requires_grad_(True)
    loss = rollout(scene, chain, v0, anchors)
    assert isinstance(loss, gs.Tensor) and loss.scene is scene
    if substeps_local is not None:
        assert scene.grad_memory > 0
    loss.backward()

    ref, ref_chain = chain_scene(requires_grad=False)

    def f_v0(v):
        ref.reset()
        return float(rollout(ref, ref_chain, v, anchors.detach()))

    def f_anchors(a):
        ref.reset()
        return float(rollout(ref, ref_chain, v0.detach(), a))

    assert_close_rel(v0.grad, central_differences(f_v0, v0.detach()), tol=1e-6)
    assert_close_rel(anchors.grad, central_differences(f_anchors, anchors.detach()), tol=1e-6)


def test_forward_in_differentiable_mode_is_the_plain_forward():
    a, ca = chain_scene(requires_grad=True, substeps_local=4)
    b, cb = chain_scene(requires_grad=False)
    for scene, chain in ((a, ca), (b, cb)):
        chain.set_nodes_vel(torch.ones(N_NODES, 3, dtype=torch.float64))
        for _ in range(20):
            scene.step()
    assert torch.equal(ca.get_nodes_pos().detach(), cb.get_nodes_pos())


def test_one_backward_per_forward_and_reset_starts_the_next():
    scene, chain = chain_scene()
    v0 = torch.zeros(3, dtype=torch.float64, requires_grad=True)
    anchors = torch.tensor([[0.0, 0.0, 1.25]] * 3, dtype=torch.float64)
    loss = rollout(scene, chain, v0, anchors)
    loss.backward()
    first = v0.grad.clone()
    with pytest.raises(gs.SceneError, match="one backward per forward"):
        loss.backward()
    with pytest.raises(gs.SceneError, match="scene.reset"):
        scene.step()
    with pytest.raises(gs.SceneError, match="scene.reset"):
        chain.set_nodes_vel(torch.zeros(N_NODES, 3))
    # the final state survives the backward, and the next forward run gives the same gradient again
    scene.reset()
    v0.grad = None
    rollout(scene, chain, v0, anchors).backward()
    assert torch.equal(v0.grad, first)


def test_sceneless_loss_stays_out_of_the_physics():
    scene, chain = chain_scene()
    v0 = torch.zeros(3, dtype=torch.float64, requires_grad=True)
    w = torch.tensor(2.0, dtype=torch.float64, requires_grad=True)
    rollout(scene, chain, v0, torch.tensor([[0.0, 0.0, 1.25]] * 3, dtype=torch.float64))
    pos = chain.get_nodes_pos()
    loss = (w * pos.sceneless()).sum()
    assert loss.scene is None
    loss.backward()
    assert v0.grad is None  # no physics backward ran
    assert torch.allclose(w.grad, pos.detach().sum())
    scene.step()  # the forward run is still live


def test_partial_reset_cuts_the_gradient_of_the_reset_environments():
    scene, chain = chain_scene(n_envs=3)
    v0 = torch.tensor([0.3, -0.2, 0.1], dtype=torch.float64, requires_grad=True)
    chain.set_nodes_vel(v0.expand(3, N_NODES, 3))
    for _ in range(3):
        scene.step()
    scene.reset(envs_idx=[1])
    for _ in range(3):
        scene.step()
    pos = chain.get_nodes_pos()
    loss = pos[1].sum()
    loss.backward()
    assert torch.equal(v0.grad, torch.zeros(3, dtype=torch.float64))
    scene.reset()
    v0.grad = None
    chain.set_nodes_vel(v0.expand(3, N_NODES, 3))
    for _ in range(6):
        scene.step()
    chain.get_nodes_pos()[1].sum().backward()
    assert v0.grad.abs().sum() > 0


def test_host_memory_grows_linearly_with_the_horizon():
    sizes = []
    for n_steps in (10, 20, 40):
        scene, chain = chain_scene(substeps_local=4)
        for _ in range(n_steps):
            scene.step()
        sizes.append(scene.grad_memory)
    per_step = (sizes[2] - sizes[1]) / 20
    assert per_step > 0 and sizes[1] - sizes[0] == 10 * per_step
    # 4 substeps of pos and vel (5 nodes, 2 envs, float64); the frameless anchor, never written during the run, is
    # kept once and shared by every step's record
    assert per_step == 4 * 2 * (2 * N_NODES * 3 * 8)


@pytest.fixture
def toy():
    name = plugins.register_plugin(toy_plugin, name="toy")
    yield toy_plugin
    plugins.unregister_plugin(name)


def test_a_solver_without_gradients_refuses_differentiable_mode(toy):
    scene = gs.Scene(sim_options=gs.options.SimOptions(requires_grad=True))
    scene.add_entity(gs.morphs.Sphere(radius=0.1), material=toy.ToyBall())
    with pytest.raises(gs.SceneError, match="ToyBallSolver does not support differentiable mode"):
        scene.build()


def test_getters_of_a_differentiable_scene_return_its_tensors():
    scene, chain = chain_scene()
    other, other_chain = chain_scene()
    pos = chain.get_nodes_pos()
    assert isinstance(pos, gs.Tensor) and pos.scene is scene and pos.requires_grad
    with pytest.raises(gs.GenesisError, match="two scenes"):
        pos + other_chain.get_nodes_pos()
    plain, plain_chain = chain_scene(requires_grad=False)
    assert not isinstance(plain_chain.get_nodes_pos(), gs.Tensor)  # a plain scene keeps plain tensors


def test_a_solver_record_kept_in_the_tape_comes_back_at_its_substep(monkeypatch):
    """Tape.keep during a recording forward's substep, Tape.take during the backward's re-run of that substep: each
    re-run gets its own substep's record, grad_memory counts the records, and the backward frees them."""
    v0 = torch.ones(3, dtype=torch.float64, requires_grad=True)

    def run(scene, chain):
        for _ in range(3):
            chain.set_nodes_vel(v0 * torch.linspace(0, 1, N_NODES, dtype=torch.float64)[:, None])
            scene.step()
        return scene.grad_memory

    plain_memory = run(*chain_scene(substeps=2))
    scene, chain = chain_scene(substeps=2)
    kept, taken = [], []
    forward = type(chain.solver).substep_pre_coupling

    def pre_coupling(self, f):
        tape = self.state.tape
        if tape.rerun_k is None:
            tape.keep(self.state.owner, (torch.full((3, 4), float(tape.k), dtype=torch.float64),))
            kept.append(tape.k)
        else:
            taken.append((tape.rerun_k, tape.take(self.state.owner)))
        forward(self, f)

    monkeypatch.setattr(type(chain.solver), "substep_pre_coupling", pre_coupling)
    assert run(scene, chain) == plain_memory + 6 * 12 * 8
    chain.get_nodes_pos()[..., 0].sum().backward()
    assert kept == list(range(6))
    assert [k for k, _ in taken] == list(range(5, -1, -1))
    assert all(record is not None and float(record[0][0, 0]) == k for k, record in taken)
    assert scene._tape.records == {}
