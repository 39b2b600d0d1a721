"""The SPH solver in differentiable mode (WCSPH, the domain's walls): gradients against central finite
differences in float64.

A small block of water is thrown at the floor of a box, so that the pressure, the walls' boundary, viscosity
and cohesion all shape where it ends up; the loss weighs the final positions and velocities. The gradient comes
from one forward and backward run of a scene built with SimOptions(requires_grad=True), the finite differences
from a plain scene built the same way.
"""

import pytest
import torch

import genesis_core as gs
from genesis_core.testing import assert_close_rel, central_differences

F64 = torch.float64
W_POS = torch.tensor([0.7, -1.3, 2.0], dtype=F64)
W_VEL = torch.tensor([0.2, 0.5, -0.3], dtype=F64)


def block_scene(requires_grad, substeps=12, pressure_solver="WCSPH"):
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=1e-3 * substeps, substeps=substeps,
                                                       requires_grad=requires_grad),
                     sph_options=gs.options.SPHOptions(lower_bound=(0, 0, 0), upper_bound=(0.2, 0.2, 0.2),
                                                       particle_size=0.025, pressure_solver=pressure_solver))
    block = scene.add_entity(gs.morphs.Box(pos=(0.1, 0.1, 0.06), size=(0.075, 0.075, 0.075)),
                             material=gs.materials.SPH.Liquid(mu=0.01, gamma=0.05))
    scene.build()
    return scene, block


def rollout(scene, block, v0, dx):
    """Thrown with v0 (plus a spin), its particles displaced by dx [N, 3]; one step; the loss."""
    pos = block.get_particles_pos().detach()
    r = pos - pos.mean(0)
    spin = torch.linalg.cross(torch.tensor([0.3, 0.5, 1.0], dtype=F64).expand_as(r), r)
    block.set_particles_pos(pos + dx)
    block.set_velocity(v0 + 4.0 * spin)
    scene.step()
    p, v = block.get_particles_pos(), block.get_particles_vel()
    return (p.mean(0) * W_POS).sum() + (v.mean(0) * W_VEL).sum() + 0.5 * (p[:, 2] ** 2).mean()


def test_gradients_to_the_initial_velocity_and_positions_match_finite_differences():
    scene, block = block_scene(requires_grad=True)
    n = block.n_particles
    v0 = torch.tensor([0.3, -0.2, -1.2], dtype=F64, requires_grad=True)
    dx = torch.zeros((n, 3), dtype=F64, requires_grad=True)
    loss = rollout(scene, block, v0, dx)
    assert isinstance(loss, gs.Tensor)
    loss.backward()
    g_v0, g_dx = v0.grad.clone(), dx.grad.clone()

    plain, pblock = block_scene(requires_grad=False)
    start = plain.get_state()

    def f_v0(x):
        plain.reset(start)
        return float(rollout(plain, pblock, x, torch.zeros((n, 3), dtype=F64)))

    def f_dx(x):
        plain.reset(start)
        return float(rollout(plain, pblock, v0.detach(), x))

    fd_v0 = central_differences(f_v0, v0.detach().clone(), eps=1e-6)
    assert_close_rel(g_v0, fd_v0, tol=1e-5)
    rows = torch.tensor([0, n // 3, n - 1])  # three particles' displacements (every one costs six rollouts)
    fd_dx = torch.zeros((len(rows), 3), dtype=F64)
    for k, i in enumerate(rows.tolist()):
        def f_row(x, i=i):
            d = torch.zeros((n, 3), dtype=F64)
            d[i] = x
            return f_dx(d)
        fd_dx[k] = central_differences(f_row, torch.zeros(3, dtype=F64), eps=1e-7)
    assert_close_rel(g_dx[rows], fd_dx, tol=1e-5)
    # the forward of the differentiable scene is the plain one's physics
    plain.reset(start)
    assert float(rollout(plain, pblock, v0.detach(), torch.zeros((n, 3), dtype=F64))) == pytest.approx(float(loss),
                                                                                                      rel=1e-10)


PADDLE = """<mujoco model="paddle">
  <worldbody>
    <body name="paddle">
      <joint name="x" type="slide" axis="1 0 0"/>
      <joint name="y" type="slide" axis="0 1 0"/>
      <geom type="box" size="0.025 0.06 0.025" mass="1.0"/>
    </body>
  </worldbody>
</mujoco>"""


def paddle_scene(requires_grad, model, substeps=10):
    """A paddle on two slide joints (1 kg, its face 2 cm from a block of water resting on the floor)."""
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=1e-3 * substeps, substeps=substeps,
                                                       requires_grad=requires_grad),
                     sph_options=gs.options.SPHOptions(lower_bound=(0, 0, 0), upper_bound=(0.3, 0.2, 0.2),
                                                       particle_size=0.025))
    paddle = scene.add_entity(gs.morphs.MJCF(file=str(model), pos=(0.095, 0.1, 0.05)))
    water = scene.add_entity(gs.morphs.Box(pos=(0.16, 0.1, 0.04), size=(0.075, 0.075, 0.075)),
                             material=gs.materials.SPH.Liquid(mu=0.01))
    scene.build()
    return scene, paddle, water


def paddle_rollout(scene, paddle, water, force, v0, steps=3):
    """The paddle launched with v0 and driven with the force command `force` at every step into the water."""
    paddle.set_dofs_velocity(v0)
    for _ in range(steps):
        paddle.control_dofs_force(force)
        scene.step()
    p, v = water.get_particles_pos(), water.get_particles_vel()
    q, dq = paddle.get_dofs_position(), paddle.get_dofs_velocity()
    return p[:, 0].mean() + 0.3 * p[:, 1].mean() + 0.5 * v[:, 0].mean() + 2.0 * q[0] + 0.2 * dq[0] + 0.1 * dq[1]


def test_gradients_to_a_coupled_paddles_force_commands_and_launch_velocity(tmp_path):
    """Through the boundary on the paddle's box (the liquid's pressure and the reaction on the paddle, two-way)
    and the rigid solver: the gradient of a loss on the water and the paddle with respect to the paddle's force
    command and launch velocity, against central differences (float64)."""
    from genesis_core.plugins import registry

    if "RigidSolver" not in registry().solvers:
        pytest.skip("the rigid solver plugin is not installed")
    model = tmp_path / "paddle.xml"
    model.write_text(PADDLE)
    scene, paddle, water = paddle_scene(True, model)
    force = torch.tensor([3.0, 0.5], dtype=F64, requires_grad=True)
    v0 = torch.tensor([0.4, 0.05], dtype=F64, requires_grad=True)
    loss = paddle_rollout(scene, paddle, water, force, v0)
    loss.backward()

    ref = paddle_scene(False, model)

    def f(F=force, v=v0):
        ref[0].reset()
        return float(paddle_rollout(*ref, F.detach(), v.detach()))

    assert f() == pytest.approx(float(loss), rel=1e-12)  # the forward is the plain one's physics
    # the water acts on the paddle: with no coupling d(2 q_x + 0.2 dq_x)/dF_x would be 2 t^2 / 2 + 0.2 t = 0.0069
    # for t = 0.03 s, and d/dv_x 2 t + 0.2 = 0.26
    assert abs(float(force.grad[0]) - 0.0069) > 1e-3 and abs(float(v0.grad[0]) - 0.26) > 0.1
    assert_close_rel(force.grad, central_differences(lambda x: f(F=x), force.detach(), 1e-6), tol=1e-5)
    assert_close_rel(v0.grad, central_differences(lambda x: f(v=x), v0.detach(), 1e-6), tol=1e-5)


def test_dfsph_in_differentiable_mode_is_refused_with_the_reason():
    with pytest.raises(gs.GenesisError, match="WCSPH"):
        block_scene(requires_grad=True, pressure_solver="DFSPH")
