"""Kinematic entities (gs.materials.Kinematic): moved only by their configuration, drawn, never touched.

The forward kinematics that places a kinematic entity's links (torch, genesis_rigid.kinematic) is checked bit for
bit against the solver's own on a simulated copy of the same robot; the entity has no effect on the simulation;
its configuration and link poses are state (snapshot, reset with envs_idx, checkpoint); dynamics are refused."""

import math

import pytest
import torch

import genesis_core as gs
from genesis_rigid import assets

F64 = torch.float64


def arm_pair(n_envs=2, quadruped=False):
    """A simulated model and its kinematic twin at the same pose."""
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=0.01))
    if quadruped:
        morph = lambda: gs.morphs.MJCF(file=assets.path("quadruped.xml"), pos=(0.3, -0.2, 0.6),  # noqa: E731
                                       euler=(0, 0, 30))
    else:
        morph = lambda: gs.morphs.URDF(file=assets.path("arm.urdf"), fixed=True, pos=(0.3, -0.2, 0.1),  # noqa: E731
                                       euler=(0, 0, 30))
    real = scene.add_entity(morph())
    ghost = scene.add_entity(morph(), material=gs.materials.Kinematic())
    scene.build(n_envs=n_envs)
    return scene, real, ghost


@pytest.mark.parametrize("quadruped", [False, True])
def test_forward_kinematics_is_the_solvers(quadruped):
    """The same configuration set on both: every link pose of the twin equals the simulated model's (bit for bit
    at the initial pose; to float64 rounding, 1e-13, at random ones: the two compute in other orders), before any
    step and after."""
    scene, real, ghost = arm_pair(quadruped=quadruped)
    assert (ghost.n_dofs, ghost.n_qs, [j.name for j in ghost.joints]) == (
        real.n_dofs, real.n_qs, [j.name for j in real.joints])
    assert torch.equal(ghost.get_links_pos(), real.get_links_pos())
    gen = torch.Generator().manual_seed(0)
    q = real.get_qpos().clone()
    q += 0.4 * torch.randn(q.shape, generator=gen, dtype=F64)
    if quadruped:
        q[:, 3:7] = q[:, 3:7] / q[:, 3:7].norm(dim=-1, keepdim=True)
    real.set_qpos(q)
    ghost.set_qpos(q)
    assert torch.equal(ghost.get_qpos(), real.get_qpos())
    assert torch.allclose(ghost.get_links_pos(), real.get_links_pos(), rtol=0, atol=1e-13)
    assert torch.allclose(ghost.get_links_quat(), real.get_links_quat(), rtol=0, atol=1e-13)
    assert torch.equal(ghost.get_dofs_position(), real.get_dofs_position())
    # the twin does not move with time; its velocities read zero
    held = ghost.get_qpos().clone(), ghost.get_links_pos().clone()
    scene.step()
    assert torch.equal(ghost.get_qpos(), held[0]) and torch.equal(ghost.get_links_pos(), held[1])
    assert not ghost.get_dofs_velocity().any()
    assert not ghost.get_links_vel().any()


def test_nothing_touches_it():
    """A ball dropped through a kinematic box falls as if the box were absent, bit for bit."""
    def run(with_ghost):
        scene = gs.Scene(sim_options=gs.options.SimOptions(dt=0.01))
        scene.add_entity(gs.morphs.Plane())
        ball = scene.add_entity(gs.morphs.Sphere(radius=0.05, pos=(0.0, 0.0, 1.0)))
        if with_ghost:
            scene.add_entity(gs.morphs.Box(size=(0.5, 0.5, 0.2), pos=(0.0, 0.0, 0.5)),
                             material=gs.materials.Kinematic())
        scene.build(n_envs=2)
        zs = []
        for _ in range(60):
            scene.step()
            zs.append(ball.get_pos().clone())
        return torch.stack(zs)

    with_ghost, without = run(True), run(False)
    assert torch.equal(with_ghost, without)
    assert abs(float(with_ghost[-1, 0, 2]) - 0.05) < 2e-3  # (it reached the ground, through the box)


def test_state_round_trips_and_envs_idx(tmp_path):
    scene, real, ghost = arm_pair(n_envs=3)
    before = {k: scene.rigid_solver.state.tensors[k].clone() for k in ("kinematic_qpos", "fixed_base_pos")}
    ghost.set_dofs_position([[0.3, -0.5, 1.0]], envs_idx=[1])
    st = scene.rigid_solver.state.tensors
    for k, v in before.items():  # environments 0 and 2 untouched
        assert torch.equal(st[k][[0, 2]], v[[0, 2]])
    assert torch.allclose(ghost.get_dofs_position()[1], torch.tensor([0.3, -0.5, 1.0], dtype=F64))
    snap = scene.get_state()
    pose = ghost.get_links_pos().clone()
    path = tmp_path / "k.ckpt"
    scene.save_checkpoint(str(path))
    ghost.set_dofs_position([0.0, 0.0, 0.0])
    ghost.set_pos([1.0, 1.0, 1.0])
    scene.reset(snap, envs_idx=[1])
    assert torch.equal(ghost.get_links_pos()[1], pose[1])
    assert ghost.get_pos()[0].tolist() == [1.0, 1.0, 1.0]
    scene.load_checkpoint(str(path))
    assert torch.equal(ghost.get_links_pos(), pose)


def test_dynamics_and_bad_values_are_refused():
    scene, real, ghost = arm_pair(n_envs=2)
    st = scene.rigid_solver.state
    before = st.tensors["kinematic_qpos"].clone()
    for call in (lambda: ghost.control_dofs_position([0.1, 0.2, 0.3]), lambda: ghost.set_dofs_kp([1.0] * 3),
                 lambda: ghost.set_dofs_velocity([1.0, 0.0, 0.0]),
                 lambda: ghost.apply_links_external_force([[0.0, 0.0, 1.0]], links_idx_local=[1]),
                 lambda: ghost.inverse_kinematics(ghost.links[-1], pos=(0.3, 0.0, 0.5))):
        with pytest.raises(gs.OptionError, match="kinematic"):
            call()
    with pytest.raises(gs.OptionError, match="finite"):
        ghost.set_dofs_position([0.1, float("nan"), 0.3])
    with pytest.raises(gs.OptionError, match="shape"):
        ghost.set_qpos([0.1, 0.2])
    assert torch.equal(st.tensors["kinematic_qpos"], before)
    ghost.set_dofs_velocity([0.0, 0.0, 0.0])  # zero: what it reads anyway
    with pytest.raises(gs.OptionError, match="one morph"):
        s2 = gs.Scene()
        s2.add_entity(morph=[gs.morphs.Box(), gs.morphs.Sphere()], material=gs.materials.Kinematic())
