"""The MPM solver in differentiable mode: gradients against central finite differences in float64.

Each scene is a small block thrown at the sticky floor, so that its stiffness shapes where it ends up. The
gradient of a loss on the final particles comes from one forward and backward run of a scene built with
`SimOptions(requires_grad=True)`; the finite differences from a plain scene built the same way, reset before
each run. The constitutive models' reverse is also checked on its own, at the points where differentiating the
SVD fails (F = I, two equal singular values).
"""

import pytest
import torch

import genesis_core as gs
from genesis_core.testing import assert_close_rel, central_differences
from genesis_mpm import kernels_grad
from genesis_mpm.materials import ELASTIC, ELASTOPLASTIC, LIQUID, NEOHOOKEAN, SAND, SNOW

F64 = torch.float64
SUBSTEPS = 24


def block_scene(material, requires_grad, substeps=SUBSTEPS, size=0.08):
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=2e-3 * substeps, substeps=substeps,
                                                       requires_grad=requires_grad),
                     mpm_options=gs.options.MPMOptions(lower_bound=(0, 0, 0), upper_bound=(0.4, 0.4, 0.4),
                                                       grid_density=32, boundary="sticky"))
    block = scene.add_entity(gs.morphs.Box(pos=(0.2, 0.2, 0.056), size=(size,) * 3), material=material)
    scene.build()
    return scene, block


def throw(block, v0, spin):
    """Every particle: v0, plus a spin and an anisotropic stretch about the centre (scaled by `spin`)."""
    pos = block.get_particles_pos().detach()
    r = pos - pos.mean(0)
    axis = torch.tensor([0.3, 0.5, 1.0], dtype=F64)
    return v0 + spin * (torch.linalg.cross(axis.expand_as(r), r) + 2.0 * r * torch.tensor([1.0, -0.5, 0.2], dtype=F64))


WEIGHTS = torch.tensor([0.7, -1.3, 2.0], dtype=F64)


def rollout(scene, block, v0, spin, E=None, nu=None):
    block.set_velocity(throw(block, v0, spin))
    if E is not None or nu is not None:
        block.set_material_params(E=E, nu=nu)
    scene.step()
    com = block.get_particles_pos().mean(0)
    return (com * WEIGHTS).sum() + 0.5 * (block.get_particles_pos()[:, 2] ** 2).mean()


def check_gradients(material, spin=1.0, wrt=("v0", "E", "nu")):
    E0 = torch.tensor(material.E, dtype=F64, requires_grad=True)
    nu0 = torch.tensor(material.nu, dtype=F64, requires_grad=True)
    v0 = torch.tensor([0.3, -0.2, -1.0], dtype=F64, requires_grad=True)
    scene, block = block_scene(material, requires_grad=True)
    loss = rollout(scene, block, v0, spin, E=E0, nu=nu0)
    assert isinstance(loss, gs.Tensor) and loss.scene is scene
    loss.backward()

    ref, ref_block = block_scene(material, requires_grad=False)

    def f(v=v0, E=E0, nu=nu0):
        ref.reset()
        return float(rollout(ref, ref_block, v.detach(), spin, E=E.detach(), nu=nu.detach()))

    plain = f()
    assert abs(plain - float(loss.detach())) < 1e-9 * abs(plain), "the differentiable forward is not the plain one"
    if "v0" in wrt:
        assert_close_rel(v0.grad, central_differences(lambda v: f(v=v), v0.detach(), 1e-6))
    if "E" in wrt:
        assert_close_rel(E0.grad, central_differences(lambda E: f(E=E), E0.detach(), 1e-6 * material.E))
    if "nu" in wrt:
        assert_close_rel(nu0.grad, central_differences(lambda nu: f(nu=nu), nu0.detach(), 1e-6))


def test_elastic_cube_centre_of_mass_gradient_wrt_initial_velocity_and_stiffness():
    check_gradients(gs.materials.MPM.Elastic(E=2e4))


@pytest.mark.parametrize("material", [
    gs.materials.MPM.ElastoPlastic(E=2e4, yield_stress=300.0),
    gs.materials.MPM.Liquid(E=2e4, viscosity=1.0),
    gs.materials.MPM.Sand(E=2e4),
    gs.materials.MPM.Snow(E=2e4),
], ids=lambda m: type(m).__name__)
def test_every_material_gives_gradients(material):
    check_gradients(material)


def test_a_rigidly_translating_block_at_rest_deformation():
    """No spin: F stays I to rounding, where every singular value is the same."""
    check_gradients(gs.materials.MPM.Elastic(E=2e4), spin=0.0, wrt=("v0", "E"))


def test_environments_are_differentiated_independently():
    """Two environments with their own throw and stiffness: each one's gradients are those of a scene that holds
    only it."""
    material = gs.materials.MPM.Snow(E=2e4)

    def grads(n_envs, v0, E):
        scene = gs.Scene(sim_options=gs.options.SimOptions(dt=2e-3 * 8, substeps=8, requires_grad=True),
                         mpm_options=gs.options.MPMOptions(lower_bound=(0, 0, 0), upper_bound=(0.4, 0.4, 0.4),
                                                           grid_density=32, boundary="sticky"))
        block = scene.add_entity(gs.morphs.Box(pos=(0.2, 0.2, 0.056), size=(0.08,) * 3), material=material)
        scene.build(n_envs=n_envs)
        v0 = v0.clone().requires_grad_(True)
        E = E.clone().requires_grad_(True)
        block.set_velocity(v0)
        block.set_material_params(E=E)
        scene.step()
        pos = block.get_particles_pos()
        loss = ((pos.mean(-2) * WEIGHTS).sum(-1) + (pos[..., 2] ** 2).mean(-1)).sum()
        loss.backward()
        return v0.grad, E.grad

    v0 = torch.tensor([[0.3, -0.2, -1.0], [-0.4, 0.1, -0.6]], dtype=F64)
    E = torch.tensor([2e4, 5e3], dtype=F64)
    g_v0, g_E = grads(2, v0, E)
    for b in range(2):
        gb_v0, gb_E = grads(0, v0[b], E[b])
        assert torch.allclose(g_v0[b], gb_v0, rtol=1e-9, atol=0) and torch.allclose(g_E[b], gb_E, rtol=1e-9, atol=0)


def test_backward_is_bitwise_repeatable_and_leaves_the_final_state():
    scene, block = block_scene(gs.materials.MPM.Sand(E=2e4), requires_grad=True, substeps=8)
    grads = []
    for _ in range(2):
        scene.reset()
        v0 = torch.tensor([0.3, -0.2, -1.0], dtype=F64, requires_grad=True)
        E = torch.tensor(2e4, dtype=F64, requires_grad=True)
        loss = rollout(scene, block, v0, 1.0, E=E)
        final = scene.get_state()
        loss.backward()
        after = scene.get_state()
        for a, b in zip(final.solvers_state[scene.solvers.index(scene.mpm_solver)].fields.values(),
                        after.solvers_state[scene.solvers.index(scene.mpm_solver)].fields.values()):
            assert torch.equal(a.detach(), b.detach())
        grads.append((v0.grad.clone(), E.grad.clone()))
    assert torch.equal(grads[0][0], grads[1][0]) and torch.equal(grads[0][1], grads[1][1])


# -- the constitutive models' reverse on its own ----------------------------------------------------------------


def rotation(axis, angle):
    axis = torch.tensor(axis, dtype=F64)
    axis = axis / axis.norm()
    K = torch.tensor([[0, -axis[2], axis[1]], [axis[2], 0, -axis[0]], [-axis[1], axis[0], 0]], dtype=F64)
    return torch.eye(3, dtype=F64) + torch.sin(torch.tensor(angle)) * K + (1 - torch.cos(torch.tensor(angle))) * K @ K


def deformations():
    """F of frame f: the identity, a rotation, two equal singular values (stretched and compressed), generic."""
    R1, R2 = rotation([1, 2, 3], 0.4), rotation([-2, 1, 0.5], 0.9)
    gen = torch.eye(3, dtype=F64) + 0.03 * torch.tensor([[0.3, -1.0, 0.2], [0.5, 0.1, 0.7], [-0.4, 0.8, -0.6]])
    return [torch.eye(3, dtype=F64), R1,
            R1 @ torch.diag(torch.tensor([1.01, 1.01, 0.985], dtype=F64)) @ R2.T,
            R2 @ torch.diag(torch.tensor([0.93, 0.93, 0.9], dtype=F64)) @ R1.T,
            R1 @ torch.diag(torch.tensor([1.3, 1.3, 0.62], dtype=F64)) @ R2.T, gen]


@pytest.mark.parametrize("kind, params, Jp", [
    (ELASTIC, (0.0, 0.0, 0.0), 1.0),
    (ELASTOPLASTIC, (400.0, 0.0, 0.0), 1.0),  # yield stress: the strongly stretched F yields, the others not
    (LIQUID, (2.0, 0.0, 0.0), 1.0),  # viscosity
    (SAND, (0.5, 0.0, 0.0), 1.0),  # alpha; compressed: back onto the cone
    (SAND, (0.5, 0.0, 0.0), 1.2),  # gained volume: tension
    (SNOW, (0.025, 0.0045, 10.0), 0.97),
    (NEOHOOKEAN, (0.0, 0.0, 0.0), 1.0),
    (ELASTIC, (1.0, 0.0, 0.0), 1.0),  # x0 = 1: a muscle (fibre stiffness E)
    (NEOHOOKEAN, (1.0, 0.0, 0.0), 1.0),
], ids=["elastic", "elastoplastic", "liquid", "sand", "sand-tension", "snow", "neohookean", "muscle-corotated",
        "muscle-neohookean"])
def test_stress_reverse_matches_finite_differences(kind, params, Jp):
    """L = <W1, F_new> + <W2, tau> + w3 Jp_new for each particle, against central differences of `stress` in
    F, C, Jp, E, nu and the muscle actuation; at F = I and at equal singular values included. Every particle has
    an actuation and a fibre: only the muscles (elastic kinds with x0 != 0) may depend on them."""
    Fs = deformations()
    n = len(Fs)
    gen = torch.Generator().manual_seed(kind)
    C0 = 0.5 * torch.randn(1, n, 3, 3, generator=gen, dtype=F64)
    F = torch.zeros(2, 1, n, 3, 3, dtype=F64)
    F[0, 0] = torch.stack(Fs)
    C = torch.zeros(2, 1, n, 3, 3, dtype=F64)
    C[0] = C0
    Jp_t = torch.full((2, 1, n), Jp, dtype=F64)
    E = torch.full((1, n), 3e3, dtype=F64)
    nu = torch.full((1, n), 0.3, dtype=F64)
    actu = 0.2 + torch.rand(1, n, generator=gen, dtype=F64)
    mdir = torch.randn(1, n, 3, generator=gen, dtype=F64)
    mdir /= mdir.norm(dim=-1, keepdim=True)
    W1 = torch.randn(n, 3, 3, generator=gen, dtype=F64)
    W2 = torch.randn(n, 3, 3, generator=gen, dtype=F64) / 3e3
    w3 = torch.randn(n, generator=gen, dtype=F64)
    active = torch.ones(1, n, dtype=torch.int32)
    kinds = torch.full((n,), kind, dtype=torch.int32)
    entity = torch.arange(n, dtype=torch.int32)
    p_params = torch.tensor([params] * n, dtype=F64)
    params_f = torch.tensor([1e-3, 1 / 32, 32.0, 0, 0, 0, 0, 0, 0, 0, 0], dtype=F64)

    def losses(F, C, Jp_t, E, nu, actu):
        tau = torch.zeros(1, n, 3, 3, dtype=F64)
        F, Jp_t = F.clone(), Jp_t.clone()
        kernels_grad.stress(0, 1, params_f, C, F, Jp_t, active, kinds, entity, p_params, E, nu, actu, mdir, tau)
        return (W1 * F[1, 0]).sum((-1, -2)) + (W2 * tau[0]).sum((-1, -2)) + w3 * Jp_t[1, 0]

    def leaf(x):
        x = x.clone().requires_grad_(True)
        x.grad = torch.zeros_like(x)
        return x

    Fg, Cg, Jg, Eg, nug, ag = leaf(F), leaf(C), leaf(Jp_t), leaf(E), leaf(nu), leaf(actu)
    tau = leaf(torch.zeros(1, n, 3, 3, dtype=F64))
    with torch.no_grad():
        kernels_grad.stress(0, 1, params_f, Cg, Fg, Jg, active, kinds, entity, p_params, Eg, nug, ag, mdir, tau)
        Fg.grad[1, 0] = W1
        tau.grad[0] = W2
        Jg.grad[1, 0] = w3
        scratch = {k: torch.zeros(1, n, 3, 3, dtype=F64) for k in ("svd_u", "svd_v", "off_grad")}
        scratch.update({k: leaf(torch.zeros(1, n, 3, dtype=F64)) for k in ("svd_s", "reduced_h", "reduced_t")})
        kernels_grad.stress_reverse(lambda kernel, *args: kernel(*args), 0, 1, params_f, Cg, Fg, Jg, active, kinds,
                                    p_params, Eg, nug, ag, mdir, tau, scratch)

    eps = 1e-7
    for p in range(n):
        for name, x, grad, idx_list in [
            ("F", F, Fg.grad, [(0, 0, p, i, j) for i in range(3) for j in range(3)]),
            ("C", C, Cg.grad, [(0, 0, p, i, j) for i in range(3) for j in range(3)]),
            ("Jp", Jp_t, Jg.grad, [(0, 0, p)]),
            ("E", E, Eg.grad, [(0, p)]),
            ("nu", nu, nug.grad, [(0, p)]),
            ("actu", actu, ag.grad, [(0, p)]),
        ]:
            if name == "Jp" and kind in (ELASTIC, ELASTOPLASTIC, LIQUID, NEOHOOKEAN):
                continue  # the identity (checked by the scenes)
            fd, got = [], []
            for idx in idx_list:
                h = eps * (3e3 if name == "E" else 1.0)
                args = {"F": F, "C": C, "Jp_t": Jp_t, "E": E, "nu": nu, "actu": actu}
                key = "Jp_t" if name == "Jp" else name
                plus, minus = args[key].clone(), args[key].clone()
                plus[idx] += h
                minus[idx] -= h
                lp = losses(**{**args, key: plus})[p]
                lm = losses(**{**args, key: minus})[p]
                fd.append(float(lp - lm) / (2 * h))
                got.append(float(grad[idx]))
            fd, got = torch.tensor(fd), torch.tensor(got)
            scale = max(float(fd.norm()), 1e-8)
            assert float((fd - got).norm()) / scale < 1e-4, \
                f"particle {p} ({name}): grad {got.tolist()}, fd {fd.tolist()}"


# -- the coupling with a collider ---------------------------------------------------------------------------------


class FixedCollider:
    """A stand-in for a solver exposing rigid geoms: one body carrying boxes, spheres, capsules and a cylinder that
    overlap, and a static plane, held where they are (more geoms than one launch of the coupling visits); the
    impulses accumulate over the run."""

    def __init__(self, pose, requires_grad):
        from genesis_core.coupler import ColliderView

        def arr(x, grad=requires_grad):
            x = torch.as_tensor(x, dtype=F64).clone()
            if grad:
                x.requires_grad_(True)
                x.grad = torch.zeros_like(x)
            return x

        geom_pos, body_vel = pose
        n = len(geom_pos)
        self.view = ColliderView(
            geom_type=torch.tensor([3, 1, 2, 4, 0, 1, 3, 2], dtype=torch.int32),
            geom_size=arr([[0.03, 0.05, 0.02], [0.025, 0, 0], [0.015, 0.03, 0], [0.02, 0.02, 0], [0, 0, 0],
                           [0.02, 0, 0], [0.02, 0.015, 0.025], [0.01, 0.04, 0]], False),
            geom_friction=arr([0.3, 0.5, 0.0, 0.2, 0.4, 0.1, 0.6, 0.3], False),
            geom_body=torch.tensor([0, 0, 0, 0, -1, 0, 0, 0], dtype=torch.int32),
            geom_pos=arr(geom_pos.reshape(1, n, 3)),
            geom_quat=arr(torch.tensor([[0.96, 0.2, 0.1, 0.15], [1, 0, 0, 0], [0.9, 0, 0.43, 0], [0.8, 0.6, 0, 0],
                                        [1, 0, 0, 0], [1, 0, 0, 0], [0.9, 0.1, -0.3, 0.2], [0.7, 0, 0.7, 0.1]],
                                       dtype=F64).reshape(1, n, 4)),
            body_com=arr([[[0.2, 0.2, 0.08]]]),
            body_lin_vel=arr(body_vel.reshape(1, 1, 3)),
            body_ang_vel=arr([[[0.5, -1.0, 2.0]]]),
            body_impulse=arr(torch.zeros(1, 1, 6)))

    def collider_view(self, f):
        return self.view


def coupled_scene(requires_grad, pose):
    from genesis_mpm.coupling import ColliderMPMCoupling

    scene, block = block_scene(gs.materials.MPM.Elastic(E=2e4), requires_grad, substeps=12)
    collider = FixedCollider(pose, requires_grad)
    scene.coupler.couplings.append(ColliderMPMCoupling(collider, scene.mpm_solver, scene.sim_options))
    return scene, block, collider


def test_coupling_gradients_reach_the_geoms_bodies_and_grid():
    """A block thrown down onto geoms of a fixed body and a plane: the gradient of a loss on the particles and on
    the impulses handed to the body, with respect to the geoms' positions, the body's velocity and the throw."""
    geom_pos = torch.tensor([[0.2, 0.19, 0.085], [0.17, 0.23, 0.09], [0.23, 0.17, 0.095], [0.2, 0.24, 0.08],
                             [0.2, 0.2, 0.07], [0.19, 0.2, 0.09], [0.2137, 0.2061, 0.0871], [0.2, 0.18, 0.09]], dtype=F64)
    body_vel = torch.tensor([0.1, -0.2, 0.3], dtype=F64)
    w_impulse = torch.tensor([[[1.0, -2.0, 0.5, 3.0, 1.0, -1.0]]], dtype=F64)
    v0 = torch.tensor([0.2, -0.1, -1.5], dtype=F64, requires_grad=True)

    scene, block, collider = coupled_scene(True, (geom_pos, body_vel))
    view = collider.view
    view.body_impulse.grad.copy_(w_impulse)  # L = ... + <w, total impulse>: its adjoint at every substep
    loss = rollout(scene, block, v0, 0.5)
    impulse = view.body_impulse.detach().clone()
    loss.backward()
    assert float(impulse[0, 0, 2]) < 0, "no contact: the block pushes the body down"
    grads = {"geom_pos": view.geom_pos.grad.clone(), "geom_quat": view.geom_quat.grad.clone(),
             "body_lin_vel": view.body_lin_vel.grad.clone(), "body_com": view.body_com.grad.clone()}

    def f(v=v0, **pose_arrays):
        ref, ref_block, ref_collider = coupled_scene(False, (geom_pos, body_vel))
        with torch.no_grad():
            for name, x in pose_arrays.items():
                getattr(ref_collider.view, name).copy_(x)
        value = float(rollout(ref, ref_block, v.detach(), 0.5))
        return value + float((w_impulse * ref_collider.view.body_impulse).sum())

    assert abs(f() - float(loss.detach()) - float((w_impulse * impulse).sum())) < 1e-9
    assert_close_rel(v0.grad, central_differences(lambda v: f(v=v), v0.detach(), 1e-6))
    for name, g in grads.items():
        x0 = getattr(view, name).detach().clone()
        assert_close_rel(g, central_differences(lambda x, name=name: f(**{name: x}), x0, 1e-6))


def test_an_elastic_cube_pushing_a_rigid_box_end_to_end():
    """Through the rigid solver's collider view (when it is installed): a cube thrown at a free box without
    gravity; a loss on the box's final position and velocity and on the cube, against its throw and stiffness."""
    from genesis_core.plugins import registry

    if "RigidSolver" not in registry().solvers:
        pytest.skip("the rigid solver plugin is not installed")

    def make(requires_grad):
        scene = gs.Scene(sim_options=gs.options.SimOptions(dt=2e-3, substeps=4, requires_grad=requires_grad,
                                                           gravity=(0, 0, 0)),
                         mpm_options=gs.options.MPMOptions(lower_bound=(0, 0, 0), upper_bound=(0.5, 0.5, 0.5),
                                                           grid_density=32))
        box = scene.add_entity(gs.morphs.Box(pos=(0.33, 0.25, 0.25), size=(0.08, 0.12, 0.12)),
                               material=gs.materials.Rigid(rho=300))
        cube = scene.add_entity(gs.morphs.Box(pos=(0.2, 0.25, 0.25), size=(0.08,) * 3),
                                material=gs.materials.MPM.Elastic(E=2e4))
        scene.build()
        return scene, box, cube

    def run(scene, box, cube, v0, E):
        cube.set_velocity(v0)
        cube.set_material_params(E=E)
        for _ in range(15):
            scene.step()
        return 3 * box.get_pos()[0] + box.get_vel()[0] + cube.get_particles_pos()[:, 0].mean()

    scene, box, cube = make(True)
    v0 = torch.tensor([1.5, 0.1, -0.2], dtype=F64, requires_grad=True)
    E = torch.tensor(2e4, dtype=F64, requires_grad=True)
    loss = run(scene, box, cube, v0, E)
    loss.backward()

    ref = make(False)

    def f(v=v0, e=E):
        ref[0].reset()
        return float(run(*ref, v.detach(), e.detach()))

    assert float(box.get_vel()[0].detach()) > 0.02, "the box was not pushed"
    assert_close_rel(v0.grad, central_differences(lambda v: f(v=v), v0.detach(), 1e-6))
    assert_close_rel(E.grad, central_differences(lambda e: f(e=e), E.detach(), 1e-2))
