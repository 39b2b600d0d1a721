"""The PBD solver in differentiable mode: gradients through XPBD's sweeps (fixed counts) against central finite
differences in float64, to the initial state, to the compliances and to the motion of fixed (driven) particles.

A 5 x 5 cloth hangs from one fixed corner, which is driven with a velocity (the handle), and swings for a few
substeps under gravity and air drag: stretch, bending and the multipliers' accumulation over the sweeps all shape
the loss, which weighs the final positions and velocities. The cloth does not touch itself, so the plain scene's
particle collisions (left out in differentiable mode) do not act either.
"""

import pytest
import torch

import genesis_core as gs
from genesis_core.testing import assert_close_rel, central_differences

import pbd_meshes

F64 = torch.float64
W_POS = torch.tensor([0.7, -1.3, 2.0], dtype=F64)
W_VEL = torch.tensor([0.2, 0.5, -0.3], dtype=F64)


def cloth_scene(tmp_path, requires_grad, substeps=6, small_step_dt=2e-3):
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=2e-3 * substeps, substeps=substeps,
                                                       requires_grad=requires_grad),
                     pbd_options=gs.options.PBDOptions(lower_bound=(-1, -1, 0), upper_bound=(1, 1, 1),
                                                       small_step_dt=small_step_dt,
                                                       max_stretch_solver_iterations=3,
                                                       max_bending_solver_iterations=2))
    cloth = scene.add_entity(gs.morphs.Mesh(file=pbd_meshes.folded(tmp_path / "c.obj", 5, 0.2, 20.0),
                                            pos=(0, 0, 0.5)),
                             material=gs.materials.PBD.Cloth(stretch_compliance=1e-4, bending_compliance=1e-2,
                                                             air_resistance=0.02))
    scene.build()
    cloth.fix_particles([0])
    return scene, cloth


def rollout(scene, cloth, v0, handle, comp, steps=2):
    """The cloth thrown with v0, its fixed corner driven at `handle` (m/s), compliances comp = (stretch,
    bending); `steps` steps; the loss."""
    cloth.set_compliances(stretch=comp[0], bending=comp[1])
    n = cloth.n_particles
    vel = v0.expand(n, 3)
    mask = torch.zeros((n, 1), dtype=F64)
    mask[0] = 1.0
    cloth.set_particles_vel(vel * (1 - mask) + handle * mask)
    for _ in range(steps):
        scene.step()
    p, v = cloth.get_particles_pos(), cloth.get_particles_vel()
    return (p.mean(0) * W_POS).sum() + (v.mean(0) * W_VEL).sum() + 0.5 * (p[:, 2] ** 2).mean() + (p[-1] ** 2).sum()


@pytest.mark.parametrize("small_step_dt", [2e-3, 1e-3], ids=["one_step", "two_small_steps"])
def test_gradients_match_finite_differences(tmp_path, small_step_dt):
    """(With small_step_dt 1 ms each 2 ms substep is two PBD steps, the reverse running through both.)"""
    with pytest.warns(UserWarning, match="do not collide"):
        scene, cloth = cloth_scene(tmp_path, requires_grad=True, small_step_dt=small_step_dt)
    assert scene.pbd_solver.n_small == round(2e-3 / small_step_dt)
    v0 = torch.tensor([0.3, -0.2, 0.4], dtype=F64, requires_grad=True)
    handle = torch.tensor([0.5, 0.1, 0.2], dtype=F64, requires_grad=True)
    comp = torch.tensor([1e-4, 1e-2], dtype=F64, requires_grad=True)
    loss = rollout(scene, cloth, v0, handle, comp)
    assert isinstance(loss, gs.Tensor)
    loss.backward()
    grads = (v0.grad.clone(), handle.grad.clone(), comp.grad.clone())

    plain, pcloth = cloth_scene(tmp_path, requires_grad=False, small_step_dt=small_step_dt)
    start = plain.get_state()

    def make(which):
        def f(x):
            plain.reset(start)
            args = [v0.detach(), handle.detach(), comp.detach()]
            args[which] = x
            return float(rollout(plain, pcloth, *args))
        return f

    for which, (x, g, eps) in enumerate(zip((v0, handle, comp), grads, (1e-6, 1e-6, 1e-9))):
        fd = central_differences(make(which), x.detach().clone(), eps=eps)
        assert_close_rel(g, fd, tol=1e-5)
    assert float(comp.grad.abs().min()) > 0  # both compliances shape the loss
    # the differentiable scene's forward is the plain one's physics: the same projections in the same order (the
    # compiler's fused arithmetic differs between the two kernels in the last bits)
    plain.reset(start)
    assert float(rollout(plain, pcloth, v0.detach(), handle.detach(), comp.detach())) == pytest.approx(float(loss),
                                                                                                    rel=1e-12)


def test_gradients_through_an_elastic_body_match_finite_differences():
    """A PBD elastic cube (tet edges and volumes) thrown at the floor's wall in 2 environments: gradients to its
    initial velocity and to its volume compliance, per environment."""

    def scene_of(requires_grad):
        scene = gs.Scene(sim_options=gs.options.SimOptions(dt=1e-2, substeps=5, requires_grad=requires_grad),
                         pbd_options=gs.options.PBDOptions(lower_bound=(-1, -1, 0), upper_bound=(1, 1, 1)))
        cube = scene.add_entity(gs.morphs.Box(pos=(0, 0, 0.3), size=(0.1, 0.1, 0.1), maxvolume=2e-4),
                                material=gs.materials.PBD.Elastic(stretch_compliance=1.0, volume_compliance=1e-2))
        scene.build(n_envs=2)
        return scene, cube

    def run(scene, cube, v0, vc):
        cube.set_compliances(volume=vc)
        cube.set_velocity(v0)
        r = cube.get_particles_pos().detach()[0] - torch.tensor([0.0, 0.0, 0.3], dtype=F64)
        spin = torch.linalg.cross(torch.tensor([20.0, -10.0, 30.0], dtype=F64).expand_as(r), r)
        cube.set_particles_vel(cube.get_particles_vel().detach() * 0 + v0[:, None, :] + spin)
        for _ in range(3):
            scene.step()
        p = cube.get_particles_pos()
        return ((p.mean(1) * W_POS).sum(-1) + (p[:, :, 2] ** 2).mean(-1) * 3.0 + p[:, -1, 0] ** 2).sum()

    with pytest.warns(UserWarning):
        scene, cube = scene_of(True)
    v0 = torch.tensor([[0.3, -0.2, -1.0], [0.0, 0.5, 0.2]], dtype=F64, requires_grad=True)
    vc = torch.tensor([1e-2, 3e-2], dtype=F64, requires_grad=True)
    loss = run(scene, cube, v0, vc)
    loss.backward()
    plain, pcube = scene_of(False)
    start = plain.get_state()

    def f_v(x):
        plain.reset(start)
        return float(run(plain, pcube, x, vc.detach()))

    def f_c(x):
        plain.reset(start)
        return float(run(plain, pcube, v0.detach(), x))

    assert_close_rel(v0.grad, central_differences(f_v, v0.detach().clone(), eps=1e-6), tol=1e-5)
    # the compliance moves the loss by ~1e-7 per unit: finite differences carry ~1e-10 of rounding, hence 1e-3
    assert_close_rel(vc.grad, central_differences(f_c, vc.detach().clone(), eps=1e-5), tol=1e-3)


def test_gradients_through_an_attached_link_match_finite_differences(tmp_path):
    """A rope attached by its first particle to a free rigid box, both thrown under gravity: the gradient of a
    loss on the rope's and the box's final positions to the box's initial velocity (its 6 dofs: the link's motion)
    and to the rope's, through the attachment both ways (the rope follows the link, the link takes the rope's
    pull), against central differences of the plain scene. Each 1 ms substep is two PBD steps (small_step_dt)."""
    pytest.importorskip("genesis_rigid", reason="the rigid plugin (genesis-rigid) is not installed")

    def scene_of(requires_grad):
        scene = gs.Scene(sim_options=gs.options.SimOptions(dt=4e-3, substeps=4, requires_grad=requires_grad),
                         pbd_options=gs.options.PBDOptions(lower_bound=(-2, -2, -2), upper_bound=(2, 2, 2),
                                                           max_stretch_solver_iterations=3, small_step_dt=5e-4))
        box = scene.add_entity(gs.morphs.Box(pos=(0.0, 0.0, 0.5), size=(0.1, 0.1, 0.1)),
                               material=gs.materials.Rigid(rho=200))
        rope = scene.add_entity(gs.morphs.Mesh(file=pbd_meshes.rope(tmp_path / "r.obj", 5, 0.2), pos=(0.07, 0, 0.5)),
                                material=gs.materials.PBD.Cloth(rho=2.0, air_resistance=0.0, stretch_compliance=1e-5))
        scene.build()
        rope.fix_particles_to_link(box.base_link_idx, [0])
        return scene, box, rope

    def run(scene, box, rope, vb, vr):
        box.set_dofs_velocity(vb)
        rope.set_velocity(vr)
        for _ in range(3):
            scene.step()
        p = rope.get_particles_pos()
        return (p.mean(0) * W_POS).sum() + (p[-1] ** 2).sum() + (box.get_pos() * W_VEL).sum()

    with pytest.warns(UserWarning, match="do not collide"):
        scene, box, rope = scene_of(True)
    assert scene.pbd_solver.n_small == 2
    vb = torch.tensor([0.3, -0.2, 0.5, 2.0, -1.0, 3.0], dtype=F64, requires_grad=True)
    vr = torch.tensor([0.1, 0.4, -0.3], dtype=F64, requires_grad=True)
    loss = run(scene, box, rope, vb, vr)
    loss.backward()
    assert float(vb.grad[3:].abs().max()) > 0  # the box's spin moves the rope
    plain, pbox, prope = scene_of(False)
    start = plain.get_state()

    def f_b(x):
        plain.reset(start)
        return float(run(plain, pbox, prope, x, vr.detach()))

    def f_r(x):
        plain.reset(start)
        return float(run(plain, pbox, prope, vb.detach(), x))

    assert_close_rel(vb.grad, central_differences(f_b, vb.detach().clone(), eps=1e-6), tol=1e-5)
    assert_close_rel(vr.grad, central_differences(f_r, vr.detach().clone(), eps=1e-6), tol=1e-5)
    plain.reset(start)
    assert float(run(plain, pbox, prope, vb.detach(), vr.detach())) == pytest.approx(float(loss), rel=1e-12)
