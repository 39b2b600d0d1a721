"""The FEM solver in differentiable mode (explicit): gradients against central finite differences in float64.

A small soft cube is thrown at the floor, its elements stretched, sheared and (at the floor) compressed, so that
the elastic forces, the floor and the damping all shape where it ends; the loss weighs the final positions and
velocities. Gradients to the initial velocity and vertex positions, to an external vertex force, to E and nu, and
to a muscle's actuation, for the linear and stable Neo-Hookean models.
"""

import pytest
import torch

import genesis_core as gs
from genesis_core.testing import assert_close_rel, central_differences

F64 = torch.float64
W_POS = torch.tensor([0.7, -1.3, 2.0], dtype=F64)
W_VEL = torch.tensor([0.2, 0.5, -0.3], dtype=F64)


def cube_scene(requires_grad, model="linear", muscle=False, implicit=False, substeps=8):
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=2e-4 * substeps, substeps=substeps,
                                                       requires_grad=requires_grad),
                     fem_options=gs.options.FEMOptions(damping=2.0, use_implicit_solver=implicit))
    material = (gs.materials.FEM.Muscle(E=3e4, nu=0.3, rho=800.0, model=model) if muscle else
                gs.materials.FEM.Elastic(E=3e4, nu=0.3, rho=800.0, model=model))
    cube = scene.add_entity(gs.morphs.Box(pos=(0.0, 0.0, 0.0305), size=(0.06, 0.06, 0.06), maxvolume=4e-5),
                            material=material)
    scene.build()
    return scene, cube


def rollout(scene, cube, v0, dx, force=None, E=None, nu=None, actu=None):
    pos = cube.get_particles_pos().detach()
    r = pos - pos.mean(0)
    spin = torch.linalg.cross(torch.tensor([0.3, 0.5, 1.0], dtype=F64).expand_as(r), r)
    shear = torch.stack([r[:, 2], torch.zeros_like(r[:, 0]), -r[:, 0]], 1)
    cube.set_particles_pos(pos + dx + 0.2 * shear)
    cube.set_velocity(v0 + 4.0 * spin)
    if force is not None:
        cube.set_vertex_forces(force, verts_idx_local=[0])
    if E is not None or nu is not None:
        cube.set_material_params(E=E, nu=nu)
    if actu is not None:
        cube.set_actuation(actu)
    scene.step()
    p, v = cube.get_particles_pos(), cube.get_particles_vel()
    return (p.mean(0) * W_POS).sum() + (v.mean(0) * W_VEL).sum() + 3.0 * (p[:, 2] ** 2).mean() + (p[:, 0] ** 3).mean()


@pytest.mark.parametrize("model", ["linear", "stable_neohookean"])
def test_gradients_to_velocity_positions_force_and_material_match_finite_differences(model):
    scene, cube = cube_scene(True, model)
    n = cube.n_vertices
    v0 = torch.tensor([0.3, -0.2, -0.8], dtype=F64, requires_grad=True)
    dx = torch.zeros((n, 3), dtype=F64, requires_grad=True)
    force = torch.tensor([[0.5, -0.3, 0.2]], dtype=F64, requires_grad=True)
    E = torch.tensor(3e4, dtype=F64, requires_grad=True)
    nu = torch.tensor(0.3, dtype=F64, requires_grad=True)
    loss = rollout(scene, cube, v0, dx, force, E, nu)
    assert isinstance(loss, gs.Tensor)
    loss.backward()
    grads = {"v0": v0.grad.clone(), "force": force.grad.clone(), "E": E.grad.clone(), "nu": nu.grad.clone()}
    g_dx = dx.grad.clone()

    plain, pcube = cube_scene(False, model)
    start = plain.get_state()
    base = dict(v0=v0.detach(), dx=torch.zeros((n, 3), dtype=F64), force=force.detach(), E=E.detach(),
                nu=nu.detach())

    def f(**kw):
        plain.reset(start)
        a = {**base, **kw}
        return float(rollout(plain, pcube, a["v0"], a["dx"], a["force"], a["E"], a["nu"]))

    assert f() == pytest.approx(float(loss.detach()), rel=1e-12)  # the differentiable forward is the plain physics
    fd = {"v0": central_differences(lambda x: f(v0=x), base["v0"].clone(), eps=1e-6),
          "force": central_differences(lambda x: f(force=x), base["force"].clone(), eps=1e-5),
          "E": central_differences(lambda x: f(E=x), base["E"].clone(), eps=1.0),
          "nu": central_differences(lambda x: f(nu=x), base["nu"].clone(), eps=1e-6)}
    for name in fd:
        assert float(fd[name].abs().max()) > 0, name  # the loss depends on it
        assert_close_rel(grads[name], fd[name], tol=1e-5)
    rows = [0, n // 2, n - 1]
    fd_dx = torch.zeros((len(rows), 3), dtype=F64)
    for k, i in enumerate(rows):
        def f_row(x, i=i):
            d = torch.zeros((n, 3), dtype=F64)
            d[i] = x
            return f(dx=d)
        fd_dx[k] = central_differences(f_row, torch.zeros(3, dtype=F64), eps=1e-7)
    assert_close_rel(g_dx[rows], fd_dx, tol=1e-5)


def test_gradient_to_muscle_actuation_matches_finite_differences():
    scene, cube = cube_scene(True, "stable_neohookean", muscle=True)
    n = cube.n_vertices
    v0 = torch.tensor([0.1, 0.0, -0.5], dtype=F64)
    actu = torch.tensor(0.2, dtype=F64, requires_grad=True)
    loss = rollout(scene, cube, v0, torch.zeros((n, 3), dtype=F64), actu=actu)
    loss.backward()
    plain, pcube = cube_scene(False, "stable_neohookean", muscle=True)
    start = plain.get_state()

    def f(x):
        plain.reset(start)
        return float(rollout(plain, pcube, v0, torch.zeros((n, 3), dtype=F64), actu=x))

    fd = central_differences(f, actu.detach().clone(), eps=1e-6)
    assert float(fd.abs()) > 0
    assert_close_rel(actu.grad.reshape(1), fd.reshape(1), tol=1e-5)


def test_implicit_and_corotated_in_differentiable_mode_are_refused_with_the_reason():
    with pytest.raises(gs.GenesisError, match="explicit"):
        cube_scene(True, implicit=True)
    with pytest.raises(gs.GenesisError, match="linear_corotated"):
        cube_scene(True, model="linear_corotated")
