"""The rigid solver in differentiable mode: gradients against central finite differences in float64.

Each gradient comes from one forward and backward run of a scene built with `SimOptions(requires_grad=True)`;
the finite differences from a plain scene built the same way (the fast path), reset before each run, so the
tests also check that the differentiable substep's forward is the fast path's. Relative errors are required
under 1e-3 (they measure ~1e-8: the differences' own truncation and round-off).
"""

import pytest
import torch

import genesis_core as gs
from genesis_core.testing import assert_close_rel, central_differences, grads_match_differences
from genesis_rigid import assets
from genesis_rigid.kernels_collision import CI_KEY, CI_META
from genesis_rigid.plugin import _test_scene

F64 = torch.float64


def scene_pair(build, n_envs=0, **sim):
    """The same scene twice: differentiable, and plain (the reference of the finite differences)."""
    out = []
    for requires_grad in (True, False):
        scene = gs.Scene(sim_options=gs.options.SimOptions(requires_grad=requires_grad, **sim),
                         rigid_options=gs.options.RigidOptions(iterations=30))
        entities = build(scene)
        scene.build(n_envs=n_envs)
        out.append((scene, entities))
    return out



def test_pendulum_gradient_wrt_control_forces_and_initial_velocity():
    """A torque-driven pendulum, one force per step: the gradient of its final angle, velocity and orientation
    with respect to every force and to the initial angular velocity."""
    n = 40
    weights = torch.tensor([1.0, 0.5, 2.0, -1.0, 0.7, 0.3], dtype=F64)

    def build(scene):
        return scene.add_entity(gs.morphs.MJCF(file=assets.path("pendulum.xml")))

    (scene, pend), (ref, ref_pend) = scene_pair(build, dt=1e-2)

    def rollout(scene, pend, forces, v0):
        pend.set_dofs_velocity(v0)
        for i in range(n):
            pend.control_dofs_force(forces[i:i + 1])
            scene.step()
        return (torch.cat([pend.get_links_quat()[0], pend.get_dofs_position(), pend.get_dofs_velocity()]) *
                weights).sum()

    forces0 = torch.linspace(-1.0, 1.5, n, dtype=F64)
    v00 = torch.tensor([0.3], dtype=F64)
    forces, v0 = forces0.clone().requires_grad_(True), v00.clone().requires_grad_(True)
    loss = rollout(scene, pend, forces, v0)
    assert isinstance(loss, gs.Tensor) and loss.scene is scene
    loss.backward()

    def f(forces=forces0, v0=v00):
        ref.reset()
        return float(rollout(ref, ref_pend, forces, v0))

    assert abs(f() - float(loss.detach())) < 1e-9
    assert_close_rel(v0.grad, central_differences(lambda v: f(v0=v), v00))
    assert_close_rel(forces.grad, central_differences(lambda x: f(forces=x), forces0))


def test_arm_gradient_through_a_joint_limit():
    """The three-joint arm falls onto its elbow limit under gravity and constant torques: the gradient of the
    tip's final position with respect to the initial joint angles and the torques."""
    n = 40
    weights = torch.tensor([1.0, -0.5, 2.0], dtype=F64)

    def build(scene):
        return scene.add_entity(gs.morphs.URDF(file=assets.path("arm.urdf"), fixed=True))

    (scene, arm), (ref, ref_arm) = scene_pair(build, dt=1e-2)
    hi = torch.tensor([3.0, 2.0, 2.5], dtype=F64)

    def rollout(scene, arm, q0, torques, record=None):
        arm.set_dofs_position(q0)
        arm.control_dofs_force(torques)
        for _ in range(n):
            scene.step()
            if record is not None:
                record.append(arm.get_dofs_position().detach())
        return (arm.get_links_pos()[-1] * weights).sum()

    q00 = torch.tensor([0.2, -0.5, 2.2], dtype=F64)
    torques0 = torch.tensor([0.5, -1.0, 2.0], dtype=F64)
    q0, torques = q00.clone().requires_grad_(True), torques0.clone().requires_grad_(True)
    path = []
    loss = rollout(scene, arm, q0, torques, path)
    loss.backward()
    assert max(float(q[2]) for q in path) > float(hi[2]), "the elbow never reaches its limit"

    def f(q0=q00, torques=torques0):
        ref.reset()
        return float(rollout(ref, ref_arm, q0, torques))

    assert abs(f() - float(loss.detach())) < 1e-9
    assert_close_rel(q0.grad, central_differences(lambda q: f(q0=q), q00))
    assert_close_rel(torques.grad, central_differences(lambda t: f(torques=t), torques0))


def test_box_sliding_on_the_plane_with_friction():
    """A box launched along the plane, spinning about the vertical: Coulomb friction slows it down. The gradient
    of its position and orientation while it still slides with respect to its initial velocity."""
    n = 15
    weights = torch.tensor([1.0, -0.5, 2.0, 0.3, -0.7, 0.2, 0.9], dtype=F64)

    def build(scene):
        scene.add_entity(gs.morphs.Plane())
        return scene.add_entity(gs.morphs.Box(pos=(0, 0, 0.1), size=(0.2, 0.2, 0.2), euler=(0, 0, 20)),
                                material=gs.materials.Rigid(friction=0.5))

    (scene, box), (ref, ref_box) = scene_pair(build, dt=1e-2)

    def rollout(scene, box, v0):
        box.set_dofs_velocity(v0)
        for _ in range(n):
            scene.step()
        return (torch.cat([box.get_pos(), box.get_quat()]) * weights).sum()

    v00 = torch.tensor([1.0, 0.3, 0.0, 0.0, 0.0, 0.5], dtype=F64)
    v0 = v00.clone().requires_grad_(True)
    loss = rollout(scene, box, v0)
    loss.backward()
    speed = float(box.get_vel()[:2].norm())
    assert 0.1 < speed < 0.8, f"the box should still slide, slower than its initial 1.04 m/s: {speed:.3f} m/s"

    def f(v):
        ref.reset()
        return float(rollout(ref, ref_box, v))

    assert abs(f(v00) - float(loss.detach())) < 1e-9
    assert_close_rel(v0.grad, central_differences(f, v00))


PAIRS = {
    "plane-sphere": [gs.morphs.Sphere(pos=(0, 0, 0.099), radius=0.1)],
    "plane-capsule": [gs.morphs.Capsule(pos=(0, 0, 0.049), radius=0.05, height=0.3, euler=(0, 90, 10))],
    "plane-cylinder": [gs.morphs.Cylinder(pos=(0, 0, 0.058), radius=0.1, height=0.1, euler=(5, 0, 0))],
    "box-box": [gs.morphs.Box(pos=(0, 0, 0.1), size=(0.4, 0.4, 0.2), fixed=True),
                gs.morphs.Box(pos=(0.05, 0, 0.249), size=(0.1, 0.2, 0.1), euler=(0, 0, 10))],
    # beams crossing: the contacts are where the upper beam's edges cross the lower one's sides
    "box-box crossed": [gs.morphs.Box(pos=(0, 0, 0.05), size=(0.6, 0.1, 0.1), fixed=True),
                        gs.morphs.Box(pos=(0.01, 0, 0.149), size=(0.15, 0.6, 0.1), euler=(0, 0, 5))],
    # a wide box on a pedestal: the pedestal's top corners, projected onto the wide box's bottom face
    "box-box pedestal": [gs.morphs.Box(pos=(0, 0, 0.1), size=(0.1, 0.12, 0.2), fixed=True),
                         gs.morphs.Box(pos=(0.01, 0, 0.249), size=(0.4, 0.3, 0.1), euler=(0, 0, 10))],
    # edge on edge: both boxes turned 45 degrees, about x and about y
    "box-box edge": [gs.morphs.Box(pos=(0, 0, 0.2), size=(0.2, 0.2, 0.2), euler=(45, 0, 0), fixed=True),
                     gs.morphs.Box(pos=(0.01, 0.005, 0.4818), size=(0.2, 0.2, 0.2), euler=(0, 45, 0))],
    "sphere-box": [gs.morphs.Box(pos=(0, 0, 0.1), size=(0.4, 0.4, 0.2), fixed=True),
                   gs.morphs.Sphere(pos=(0.05, 0, 0.249), radius=0.05)],
    "capsule-box": [gs.morphs.Box(pos=(0, 0, 0.1), size=(0.4, 0.4, 0.2), fixed=True),
                    gs.morphs.Capsule(pos=(0.0, 0, 0.249), radius=0.05, height=0.2, euler=(0, 90, 0))],
    "sphere-sphere": [gs.morphs.Sphere(pos=(0, 0, 0.1), radius=0.1, fixed=True),
                      gs.morphs.Sphere(pos=(0.05, 0.02, 0.28), radius=0.1)],
    "capsule-capsule": [gs.morphs.Capsule(pos=(0, 0, 0.1), radius=0.05, height=0.3, euler=(0, 90, 0), fixed=True),
                        gs.morphs.Capsule(pos=(0.0, 0.02, 0.198), radius=0.05, height=0.3, euler=(90, 0, 20))],
}


@pytest.mark.parametrize("pair", list(PAIRS))
def test_primitive_contact_gradients(pair):
    """Each primitive narrowphase pair, in contact from the start with friction: the gradient of the moving
    body's final pose with respect to its initial velocity (linear and angular)."""
    n = 15
    weights = torch.tensor([1.0, -0.5, 2.0, 0.3, -0.7, 0.2, 0.9], dtype=F64)

    def build(scene):
        scene.add_entity(gs.morphs.Plane())
        return [scene.add_entity(m, material=gs.materials.Rigid(friction=0.4)) for m in PAIRS[pair]][-1]

    (scene, body), (ref, ref_body) = scene_pair(build, dt=5e-3)
    in_contact = []

    def rollout(scene, body, v0):
        body.set_dofs_velocity(v0)
        for _ in range(n):
            scene.step()
            in_contact.append(bool((scene.rigid_solver.scratch["s_con_i"][:, 0] == 1).any()))
        return (torch.cat([body.get_pos(), body.get_quat()]) * weights).sum()

    v00 = torch.tensor([0.4, 0.2, -0.1, 0.5, -0.3, 1.0], dtype=F64)
    v0 = v00.clone().requires_grad_(True)
    loss = rollout(scene, body, v0)
    loss.backward()
    assert sum(in_contact) >= n // 3, f"in contact in {sum(in_contact)} of {n} steps"

    def f(v):
        ref.reset()
        return float(rollout(ref, ref_body, v))

    assert abs(f(v00) - float(loss.detach())) < 1e-9
    assert_close_rel(v0.grad, central_differences(f, v00))


class SpringCoupling:
    """A coupling through the ColliderView: every body is pulled toward a target and damped, by impulses
    k h (target - com) - c h v (linear) and -d omega (angular) handed to the next substep; couple_grad is its
    exact adjoint."""

    def __init__(self, solver, k=30.0, c=2.0, d=2e-3):
        self.solver, self.k, self.c, self.d = solver, k, c, d
        self.h = solver.sim_options.substep_dt
        self.target = torch.tensor([0.3, -0.2, 0.6], dtype=F64)

    def couple(self, f):
        v = self.view = self.solver.collider_view(f)
        with torch.no_grad():
            v.body_impulse[..., :3] += self.k * self.h * (self.target - v.body_com) - self.c * self.h * v.body_lin_vel
            v.body_impulse[..., 3:] -= self.d * v.body_ang_vel

    def couple_grad(self, f):
        v, g = self.view, self.view.body_impulse.grad
        if v.body_com.grad is not None:
            v.body_com.grad -= self.k * self.h * g[..., :3]
            v.body_lin_vel.grad -= self.c * self.h * g[..., :3]
            v.body_ang_vel.grad -= self.d * g[..., 3:]


@pytest.mark.parametrize("coupled", [False, True])
def test_batched_environments_and_coupling_through_the_collider_view(coupled):
    """Two environments, two substeps per step, a box tumbling onto the plane; with a coupling, its impulses go
    through `links_ext_impulse` (frame by frame) and its gradients through the view's `.grad` arrays. The
    gradient of both environments' final poses with respect to both initial velocities."""
    n = 25
    weights = torch.tensor([[1.0, -0.5, 2.0, 0.3, -0.7, 0.2, 0.9], [0.2, 0.4, -1.0, 1.0, 0.5, 0.1, -0.3]], dtype=F64)
    pair = []
    for requires_grad in (True, False):
        scene = gs.Scene(sim_options=gs.options.SimOptions(dt=1e-2, substeps=2, requires_grad=requires_grad))
        scene.add_entity(gs.morphs.Plane())
        box = scene.add_entity(gs.morphs.Box(pos=(0, 0, 0.3), size=(0.2, 0.3, 0.1), euler=(20, 30, 0)))
        scene.build(n_envs=2)
        if coupled:
            scene.coupler.couplings.append(SpringCoupling(scene.rigid_solver))
        pair.append((scene, box))
    (scene, box), (ref, ref_box) = pair

    def rollout(scene, box, v0):
        box.set_dofs_velocity(v0)
        for _ in range(n):
            scene.step()
        return (torch.cat([box.get_pos(), box.get_quat()], -1) * weights).sum()

    v00 = torch.tensor([[0.4, 0.2, -0.1, 0.5, -0.3, 1.0], [0.0, -0.3, 0.5, 2.0, 0.3, -1.0]], dtype=F64)
    v0 = v00.clone().requires_grad_(True)
    loss = rollout(scene, box, v0)
    loss.backward()

    def f(v):
        ref.reset()
        return float(rollout(ref, ref_box, v))

    assert abs(f(v00) - float(loss.detach())) < 1e-9
    assert_close_rel(v0.grad, central_differences(f, v00))


def test_setters_pd_targets_and_gains():
    """set_qpos, PD position targets and gains of the arm, set_pos and set_quat of a free box: gradients of the
    final state with respect to each."""
    weights = torch.tensor([1.0, -0.5, 2.0, 0.3, -0.7, 0.2, 0.9], dtype=F64)

    def arm(scene):
        return scene.add_entity(gs.morphs.URDF(file=assets.path("arm.urdf"), fixed=True))

    def run_arm(scene, a, q, target, kp):
        a.set_qpos(q)
        a.set_dofs_kp(kp)
        a.set_dofs_kv(torch.tensor([2.0, 2.0, 1.0], dtype=F64))
        a.control_dofs_position(target)
        for _ in range(30):
            scene.step()
        return (a.get_links_pos()[-1] * weights[:3]).sum() + (a.get_dofs_velocity() * weights[3:6]).sum()

    grads_match_differences(run_arm, scene_pair(arm, dt=1e-2), [
        torch.tensor([0.1, 0.5, -0.3], dtype=F64), torch.tensor([0.5, -0.2, 0.8], dtype=F64),
        torch.tensor([30.0, 50.0, 20.0], dtype=F64)])

    def box(scene):
        scene.add_entity(gs.morphs.Plane())
        return scene.add_entity(gs.morphs.Box(pos=(0, 0, 0.3), size=(0.2, 0.3, 0.1)))

    (scene, b), (ref, ref_b) = scene_pair(box, dt=1e-2)

    def run_box(scene, b, pos, quat):
        b.set_pos(pos)
        b.set_quat(quat)
        for _ in range(30):
            scene.step()
        return (torch.cat([b.get_pos(), b.get_quat()]) * weights).sum() + (b.get_ang() * weights[:3]).sum()

    p0, q0 = torch.tensor([0.1, 0.0, 0.2], dtype=F64), torch.tensor([0.9, 0.2, 0.3, 0.1], dtype=F64)
    p, q = p0.clone().requires_grad_(True), q0.clone().requires_grad_(True)
    run_box(scene, b, p, q).backward()
    assert_close_rel(p.grad, central_differences(lambda x: (ref.reset(), float(run_box(ref, ref_b, x, q0)))[1], p0))
    assert_close_rel(q.grad, central_differences(lambda x: (ref.reset(), float(run_box(ref, ref_b, p0, x)))[1], q0))


FRAME_FIELDS = ("qpos", "dofs_vel", "dofs_acc", "links_pos", "links_quat", "contact_impulse", "contact_key",
                "limit_impulse")


def trajectories_equal_bitwise(build, steps, precision, check_backward=True):
    """Run `build(requires_grad)` -> (scene, drive, loss) plain and in differentiable mode at `precision`; every
    frame field equal bit for bit after each step; then a backward of the differentiable run leaves its state as it
    was and gives a finite gradient."""
    gs.destroy()
    gs.init(backend=gs.cpu, precision=precision, seed=0, logging_level="warning")
    try:
        runs = []
        for requires_grad in (False, True):
            scene, drive, loss = build(requires_grad)
            states = []
            for i in range(steps):
                drive(i)
                scene.step()
                st = scene.rigid_solver.get_state(scene._frame).fields
                states.append({n: st[n].detach().clone() for n in FRAME_FIELDS})
            runs.append((scene, loss, states))
        (_, _, plain), (scene, loss, diff) = runs
        for i, (a, b) in enumerate(zip(plain, diff)):
            for name in FRAME_FIELDS:
                assert torch.equal(a[name], b[name]), f"step {i}: {name} differs by {(a[name] - b[name]).abs().max()}"
        if check_backward:
            value, wrt = loss()
            value.backward()
            assert wrt.grad is not None and bool(torch.isfinite(wrt.grad).all()) and float(wrt.grad.abs().max()) > 0
            st = scene.rigid_solver.get_state(scene._frame).fields
            for name in FRAME_FIELDS:
                assert torch.equal(st[name].detach(), diff[-1][name]), f"backward changed {name}"
    finally:
        gs.destroy()
        gs.init(backend=gs.cpu, precision="64", seed=0, logging_level="warning")


@pytest.mark.parametrize("precision", ["32", "64"])
def test_differentiable_forward_is_the_plain_trajectory_bitwise(precision):
    """The plugin's test scene (a force-driven cart-pole, a box tumbling onto the plane, a rolling sphere, a
    convex mesh falling onto the box), two environments, 40 steps: the forward of differentiable mode runs the
    plain kernels, so every frame is the plain one bit for bit; its backward re-runs each substep through the
    torch graph and puts the state back."""
    def build(requires_grad):
        scene, drive = _test_scene(2, requires_grad=requires_grad)
        cart = scene.entities[1]
        v0 = torch.tensor([[0.3], [-0.2]], dtype=gs.tc_float, requires_grad=requires_grad)

        def drive_with_start(i):
            drive(scene, i)
            if i == 0:
                cart.set_dofs_velocity(v0, dofs_idx_local=[0])

        return scene, drive_with_start, lambda: (cart.get_dofs_position().pow(2).sum(), v0)

    trajectories_equal_bitwise(build, 40, precision)


@pytest.mark.parametrize("precision", ["32", "64"])
def test_panda_folding_onto_the_floor_is_the_plain_trajectory_bitwise(precision, shared_assets):
    """The panda (MJCF, meshes) on a plane with no control folds onto the floor, two environments started apart:
    60 steps of the differentiable forward equal the plain ones bit for bit, contacts included."""
    path = f"{shared_assets}/mjcf/franka_emika_panda/panda.xml"

    def build(requires_grad):
        scene = gs.Scene(sim_options=gs.options.SimOptions(dt=0.01, requires_grad=requires_grad))
        scene.add_entity(gs.morphs.Plane())
        panda = scene.add_entity(gs.morphs.MJCF(file=path))
        scene.build(n_envs=2)
        q0 = torch.zeros((2, panda.n_dofs), dtype=gs.tc_float)
        q0[1, :7] = torch.tensor([0.3, -0.4, 0.2, -1.8, 0.1, 1.2, 0.5])

        def drive(i):
            if i == 0:
                panda.set_dofs_position(q0)

        return scene, drive, None

    trajectories_equal_bitwise(build, 60, precision, check_backward=False)


def test_gradients_to_the_dofs_and_links_parameters():
    """The arm under PD control toward a target and gravity: the gradient of where its tip ends with respect to
    each dof's damping, armature and spring stiffness and each moving link's inertial mass and mass shift (per
    environment parameters, set with the setters: the state), against central differences; a shift that takes a
    mass under its floor (a tenth of the inertial mass) has a zero gradient and moves the inertial mass's."""
    weights = torch.tensor([1.0, -0.5, 2.0, 0.3, -0.7, 0.2], dtype=F64)

    def arm(scene):
        return scene.add_entity(gs.morphs.URDF(file=assets.path("arm.urdf"), fixed=True))

    moving = [1, 2, 3]

    def run_arm(scene, a, damping, armature, stiffness, mass, shift):
        a.set_dofs_damping(damping)
        a.set_dofs_armature(armature)
        a.set_dofs_stiffness(stiffness)
        a.set_links_inertial_mass(mass, links_idx_local=moving)
        a.set_mass_shift(shift, links_idx_local=moving)
        a.set_qpos(torch.tensor([0.1, 0.5, -0.3], dtype=F64))
        a.set_dofs_kp(torch.tensor([30.0, 50.0, 20.0], dtype=F64))
        a.set_dofs_kv(torch.tensor([2.0, 2.0, 1.0], dtype=F64))
        a.control_dofs_position(torch.tensor([0.5, -0.2, 0.8], dtype=F64))
        for _ in range(30):
            scene.step()
        return (a.get_links_pos()[-1] * weights[:3]).sum() + (a.get_dofs_velocity() * weights[3:6]).sum()

    xs = grads_match_differences(run_arm, scene_pair(arm, dt=1e-2), [
        torch.tensor([0.3, 0.5, 0.2], dtype=F64), torch.tensor([0.02, 0.05, 0.01], dtype=F64),
        torch.tensor([1.0, 3.0, 2.0], dtype=F64), torch.tensor([1.2, 0.9, 0.6], dtype=F64),
        torch.tensor([0.1, -0.2, -0.58], dtype=F64)], moves=1e-4)  # the forearm's 0.6 - 0.58: under its floor
    assert float(xs[4].grad[2]) == 0.0 and float(xs[3].grad[2]) != 0.0


def test_gradients_to_each_environments_parameters():
    """Two environments of the arm with their own damping, armature, gains and link masses (the per-environment
    parameters): the gradient of a loss over both with respect to every environment's entries, against central
    differences; each environment's parameters move only its own part of the loss."""
    weights = torch.tensor([[1.0, -0.5, 2.0], [0.3, -0.7, 0.2]], dtype=F64)

    def arm(scene):
        return scene.add_entity(gs.morphs.URDF(file=assets.path("arm.urdf"), fixed=True))

    def run_arm(scene, a, damping, armature, kp, mass):
        a.set_dofs_damping(damping)
        a.set_dofs_armature(armature)
        a.set_links_inertial_mass(mass, links_idx_local=[1, 2, 3])
        a.set_qpos(torch.tensor([[0.1, 0.5, -0.3], [-0.2, 0.3, 0.4]], dtype=F64))
        a.set_dofs_kp(kp)
        a.set_dofs_kv(torch.tensor([2.0, 2.0, 1.0], dtype=F64).expand(2, 3))
        a.control_dofs_position(torch.tensor([0.5, -0.2, 0.8], dtype=F64).expand(2, 3))
        for _ in range(30):
            scene.step()
        return (a.get_links_pos()[:, -1] * weights).sum()

    xs = grads_match_differences(run_arm, scene_pair(arm, n_envs=2, dt=1e-2), [
        torch.tensor([[0.3, 0.5, 0.2], [0.1, 0.4, 0.6]], dtype=F64),
        torch.tensor([[0.02, 0.05, 0.01], [0.04, 0.01, 0.03]], dtype=F64),
        torch.tensor([[30.0, 50.0, 20.0], [40.0, 20.0, 35.0]], dtype=F64),
        torch.tensor([[1.2, 0.9, 0.6], [0.8, 1.1, 0.7]], dtype=F64)], moves=1e-4)
    assert all(bool((x.grad[0] != x.grad[1]).any()) for x in xs)


def test_a_refused_parameter_write_takes_no_part_in_the_gradient():
    """In a differentiable run, a setter's write that the parameter rules refuse is taken back from the tape too:
    the mass set before it keeps its whole gradient, the refused tensor gets none."""
    def run(refuse):
        scene = gs.Scene(sim_options=gs.options.SimOptions(dt=1e-2, requires_grad=True))
        a = scene.add_entity(gs.morphs.URDF(file=assets.path("arm.urdf"), fixed=True))
        scene.build()
        good = torch.tensor([1.2, 0.9, 0.6], dtype=F64, requires_grad=True)
        bad = torch.tensor([1.0, -1.0, 0.5], dtype=F64, requires_grad=True)
        a.set_links_inertial_mass(good, links_idx_local=[1, 2, 3])
        if refuse:
            with pytest.raises(gs.InvalidStateError, match="Nothing was changed"):
                a.set_links_inertial_mass(bad, links_idx_local=[1, 2, 3])
        a.control_dofs_force(torch.tensor([0.5, 1.0, -0.3], dtype=F64))
        for _ in range(10):
            scene.step()
        a.get_links_pos()[-1].sum().backward()
        return good.grad, bad.grad

    clean, _ = run(False)
    kept, refused = run(True)
    assert refused is None and float(clean.abs().max()) > 0 and torch.equal(kept, clean)


def test_gradient_to_the_friction_ratio():
    """A box sliding on a plane of lower friction (a contact takes the larger product of its geoms' friction and
    ratio): the gradient of where it ends with respect to its friction ratio, against central differences."""
    weights = torch.tensor([1.0, -0.5, 2.0, 0.3, -0.7, 0.2, 0.9], dtype=F64)

    def build(scene):
        scene.add_entity(gs.morphs.Plane(), material=gs.materials.Rigid(friction=0.1))
        return scene.add_entity(gs.morphs.Box(pos=(0, 0, 0.1), size=(0.2, 0.2, 0.2), euler=(0, 0, 20)),
                                material=gs.materials.Rigid(friction=0.5))

    def rollout(scene, box, ratio):
        box.set_friction_ratio(ratio)
        box.set_dofs_velocity(torch.tensor([1.0, 0.3, 0.0, 0.0, 0.0, 0.5], dtype=F64))
        for _ in range(15):
            scene.step()
        return (torch.cat([box.get_pos(), box.get_quat()]) * weights).sum()

    pair = scene_pair(build, dt=1e-2)
    grads_match_differences(rollout, pair, [torch.tensor([0.8], dtype=F64)], moves=1e-3)
    ref, box = pair[1]
    ref.reset()
    rollout(ref, box, torch.tensor([0.8], dtype=F64))
    assert 0.1 < float(box.get_vel()[:2].norm()) < 0.9, "the box should still slide"


@pytest.mark.parametrize("under", ["plane", "box"])
def test_convex_mesh_contact_gradients(under):
    """A convex mesh (the plugin's pebble) resting on the plane or on a fixed box, launched sideways and spinning:
    it slides and tumbles on its hull's vertices and faces. The narrowphase decides its contacts; the gradient
    re-reads each contact frame through the poses. The gradient of where it ends with respect to its initial
    velocity and its start height (1 mm into the support), against central differences, to 1e-2: the contact frame
    is carried by the bodies, while the narrowphase's own points slide over the hull as it turns (measured 2e-3 on
    the plane; the contact geometry taken as constants, as before, is 1.4e-1 off for the velocity on both). On the
    box (GJK / EPA and clipping) the start height's gradient is 4.0e-2 off, so 5e-2 there."""
    weights = torch.tensor([1.0, -0.5, 2.0, 0.3, -0.7, 0.2, 0.9], dtype=F64)

    def build(scene):
        if under == "plane":
            scene.add_entity(gs.morphs.Plane())
        else:
            scene.add_entity(gs.morphs.Box(pos=(0, 0, -0.1), size=(1.0, 1.0, 0.2), fixed=True))
        return scene.add_entity(gs.morphs.Mesh(file=assets.path("pebble.obj"), pos=(0, 0, 0.2), euler=(10, 40, 0)),
                                material=gs.materials.Rigid(friction=0.4))

    pair = scene_pair(build, dt=1e-2)
    scene, pebble = pair[1]
    for _ in range(60):  # settle it on the support, then start both scenes from there
        scene.step()
    rest = pebble.get_qpos().clone()
    lowest = float(pebble.get_AABB()[0, 2])
    assert abs(lowest) < 5e-3, f"the pebble should rest on the support: lowest point {lowest:.4f}"

    def rollout(scene, pebble, v0, dz):
        pebble.set_qpos(rest + torch.cat([torch.zeros(2, dtype=F64), dz, torch.zeros(4, dtype=F64)]))
        pebble.set_dofs_velocity(v0)
        for _ in range(12):
            scene.step()
        return (torch.cat([pebble.get_pos(), pebble.get_quat()]) * weights).sum()

    grads_match_differences(rollout, pair, [torch.tensor([0.3, 0.1, 0.0, 0.0, 0.0, 0.5], dtype=F64),
                                            torch.tensor([-1e-3], dtype=F64)], moves=1e-4,
                            tol=[1e-2, 1e-2 if under == "plane" else 5e-2])


def test_rk4_is_refused_in_differentiable_mode():
    scene = gs.Scene(sim_options=gs.options.SimOptions(requires_grad=True),
                     rigid_options=gs.options.RigidOptions(integrator="rk4"))
    scene.add_entity(gs.morphs.MJCF(file=assets.path("pendulum.xml")))
    with pytest.raises(gs.OptionError, match="integrator='euler'"):
        scene.build()


def test_the_cg_constraint_solver_is_refused_in_differentiable_mode():
    """The backward differentiates plain Gauss-Seidel sweeps; a CG forward is refused at build, and an unknown
    constraint solver when the options are made."""
    scene = gs.Scene(sim_options=gs.options.SimOptions(requires_grad=True),
                     rigid_options=gs.options.RigidOptions(constraint_solver=gs.constraint_solver.CG))
    scene.add_entity(gs.morphs.MJCF(file=assets.path("pendulum.xml")))
    with pytest.raises(gs.OptionError, match="constraint_solver"):
        scene.build()
    with pytest.raises(gs.OptionError, match="constraint_solver"):
        gs.options.RigidOptions(constraint_solver="newton-raphson")


MJCF_FEATURES = """<mujoco>
  <option density="400" viscosity="0.3" wind="1 0 -0.5"/>
  <worldbody>
    <body name="a" pos="0 0 1">
      <joint name="j1" type="hinge" axis="0 1 0" ref="15" damping="0.05"/>
      <geom type="ellipsoid" size="0.15 0.05 0.03" pos="0.15 0 0"/>
      <body name="b" pos="0.3 0 0">
        <joint name="j2" type="slide" axis="1 0 0" ref="0.05"/>
        <geom type="box" size="0.04 0.04 0.04"/>
      </body>
    </body>
  </worldbody>
  <tendon><fixed name="t" stiffness="6" damping="0.2" springlength="-0.1 0.1">
    <joint joint="j1" coef="1"/><joint joint="j2" coef="-3"/></fixed></tendon>
</mujoco>"""


def test_mjcf_ref_tendon_and_fluid_gradients(tmp_path):
    """Joint ref, a fixed tendon's spring-damper and the fluid forces in differentiable mode: the forward is the
    fast path's, and the gradient of the final state w.r.t. the initial velocities matches finite differences."""
    path = tmp_path / "features.xml"
    path.write_text(MJCF_FEATURES)
    n = 30
    weights = torch.tensor([1.0, -2.0, 0.5, 0.3], dtype=F64)

    def build(scene):
        return scene.add_entity(gs.morphs.MJCF(file=str(path)))

    (scene, arm), (ref, ref_arm) = scene_pair(build, dt=5e-3)

    def rollout(scene, arm, v0):
        arm.set_dofs_velocity(v0)
        for _ in range(n):
            scene.step()
        return (torch.cat([arm.get_dofs_position(), arm.get_dofs_velocity()]) * weights).sum()

    v00 = torch.tensor([1.5, -0.4], dtype=F64)
    v0 = v00.clone().requires_grad_(True)
    loss = rollout(scene, arm, v0)
    loss.backward()

    def f(v0=v00):
        ref.reset()
        return float(rollout(ref, ref_arm, v0))

    assert abs(f() - float(loss.detach())) < 1e-9
    assert_close_rel(v0.grad, central_differences(f, v00))


def test_a_limited_tendon_gradient(tmp_path):
    """A fixed tendon with a range, driven past it by the initial velocities: its limit row (two dofs, one of them a
    slide) and the position pass's correction of the violation carry the gradient, against finite differences."""
    path = tmp_path / "limited.xml"
    path.write_text(MJCF_FEATURES.replace('springlength="-0.1 0.1"', 'range="-0.2 0.2"'))
    weights = torch.tensor([1.0, -2.0, 0.5, 0.3], dtype=F64)

    def build(scene):
        return scene.add_entity(gs.morphs.MJCF(file=str(path)))

    lengths = []

    def run(scene, arm, v0):
        arm.set_dofs_velocity(v0)
        for _ in range(30):
            scene.step()
            q = arm.get_dofs_position().detach()
            lengths.append(float(q[0] - 3.0 * q[1]))
        return (torch.cat([arm.get_dofs_position(), arm.get_dofs_velocity()]) * weights).sum()

    grads_match_differences(run, scene_pair(build, dt=5e-3), [torch.tensor([1.5, -0.4], dtype=F64)])
    assert max(lengths[:30]) > 0.2, f"the tendon should pass its range's end (longest {max(lengths[:30]):.3f})"


def test_panda_gradients_to_controls_states_and_parameters(shared_assets):
    """The panda (MJCF) under PD control from its home pose, swinging toward a target for 20 steps (its joint limits
    and the floor under its base are in the scene): the gradient of its final joint positions and velocities with
    respect to the initial velocity, the PD targets and gains, the joints' damping and armature and the links'
    inertial masses, against central differences."""
    path = f"{shared_assets}/mjcf/franka_emika_panda/panda.xml"
    home = torch.tensor([0.0, -0.785, 0.0, -2.356, 0.0, 1.571, 0.785, 0.04, 0.04], dtype=F64)
    weights = torch.linspace(-1.0, 1.5, 18, dtype=F64)

    def build(scene):
        scene.add_entity(gs.morphs.Plane())
        return scene.add_entity(gs.morphs.MJCF(file=path))

    moving = list(range(1, 8))

    def run(scene, panda, vel, target, kp, kv, damping, armature, mass):
        panda.set_dofs_position(home)
        panda.set_dofs_velocity(vel)
        panda.set_dofs_kp(kp)
        panda.set_dofs_kv(kv)
        panda.set_dofs_damping(damping)
        panda.set_dofs_armature(armature)
        panda.set_links_inertial_mass(mass, links_idx_local=moving)
        panda.control_dofs_position(target)
        for _ in range(20):
            scene.step()
        return (torch.cat([panda.get_dofs_position(), panda.get_dofs_velocity()]) * weights).sum()

    n = 9
    ramp = torch.linspace(0.5, 1.5, n, dtype=F64)
    grads_match_differences(run, scene_pair(build, dt=1e-2), [
        0.3 * torch.sin(torch.arange(n, dtype=F64)), home + 0.2 * torch.cos(torch.arange(n, dtype=F64)),
        torch.tensor([400.0] * 7 + [100.0, 100.0], dtype=F64) * ramp, torch.tensor([40.0] * 7 + [10.0] * 2,
                                                                                    dtype=F64) * ramp,
        0.5 * ramp, 0.05 * ramp, torch.tensor([2.7, 2.7, 2.2, 2.4, 2.0, 1.5, 0.6], dtype=F64)], moves=1e-6)


def test_the_backward_reruns_find_the_forward_contacts_in_its_order():
    """Two stacks of three balls drifting apart sideways: the broadphase's sweep axis changes during the run, and
    its order carries over from substep to substep. The backward re-runs substeps last first; each must have the
    forward's contacts in the forward's order (the pool's order is the constraint rows', and the warm start's
    gradient is indexed by it): the forward keeps each substep's pool in the tape and the re-run puts it back."""
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=1e-2, requires_grad=True, gravity=(0, 0, 0)),
                     rigid_options=gs.options.RigidOptions(iterations=3))
    balls = [scene.add_entity(gs.morphs.Sphere(pos=(x, 0.0, z + 1.0), radius=0.1))
             for x in (-0.15, 0.15) for z in (0.0, 0.19, 0.38)]
    scene.build()
    s = scene.rigid_solver
    seen = {"forward": [], "rerun": [], "axes": []}
    collide, restore = s._collide, s._restore_contacts

    def keys():
        n = int(s.scratch["s_con_i"][0, CI_META, 0])
        return s.scratch["s_con_i"][0, CI_KEY, :n].tolist()

    def collided(f, fresh=0):
        collide(f, fresh)
        seen["forward"].append(keys())
        seen["axes"].append(int(s.scratch["s_sap_axis"].to_numpy()[0]))

    def restored():
        restore()
        seen["rerun"].append(keys())

    v0 = [torch.tensor([0.0, 0.9 * (1 if k < 3 else -1), 0.05 * (k - 2), 0.1, 0.0, 0.0], dtype=F64,
                       requires_grad=True) for k in range(6)]
    for ball, v in zip(balls, v0):  # a longer forward run first, reset without a backward: it leaves nothing behind
        ball.set_dofs_velocity(v.detach() * 1.1)
    for _ in range(40):
        scene.step()
    scene.reset()
    s._collide, s._restore_contacts = collided, restored
    for ball, v in zip(balls, v0):
        ball.set_dofs_velocity(v)
    for _ in range(30):
        scene.step()
    loss = sum((ball.get_pos() * (k + 1)).sum() for k, ball in enumerate(balls))
    loss.backward()
    assert len(set(seen["axes"])) > 1, "the sweep axis should change during the run"
    assert len({len(k) for k in seen["forward"]}) > 1, "the number of contacts should change during the run"
    assert seen["rerun"] == seen["forward"][::-1]
