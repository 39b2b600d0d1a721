"""Genesis World's rigid API that scripts use: joints, the dofs' parameters per environment, the control force and
its range, link velocities (float64)."""

import math
import warnings

import numpy as np
import pytest
import torch

import genesis_core as gs
from genesis_rigid import assets

F64 = torch.float64


def build(morphs, n_envs=0, dt=1e-3, gravity=(0, 0, -9.81)):
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=dt, gravity=gravity))
    ents = [scene.add_entity(m) for m in morphs]
    scene.build(n_envs=n_envs)
    return scene, ents


def pendulum(n_envs=0, **kw):
    scene, (p,) = build([gs.morphs.MJCF(default_armature=None, file=assets.path("pendulum.xml"))], n_envs=n_envs, **kw)
    return scene, p


def test_joints_name_their_dofs_and_qpos():
    scene, (box, arm) = build([gs.morphs.Box(pos=(0, 0, 0.5), size=(0.1, 0.1, 0.1)),
                               gs.morphs.URDF(default_armature=None, file=assets.path("arm.urdf"), fixed=True, pos=(1, 0, 0))])
    assert box.n_joints == 1 and box.joints[0].type_name == "FREE"
    free = box.joints[0]
    assert (free.n_dofs, free.n_qs, free.dofs_idx_local, free.qs_idx_local) == (6, 7, list(range(6)), list(range(7)))
    assert [j.name for j in arm.joints] == ["yaw", "shoulder_pitch", "elbow_pitch"]
    elbow = arm.get_joint("elbow_pitch")
    assert elbow.type_name == "REVOLUTE" and elbow.dofs_idx_local == [2] and elbow.dof_idx_local == 2
    assert elbow.dof_start == arm.dof_start + 2 == elbow.dof_idx and elbow.qs_idx_local == [2]
    assert elbow.link.name == "forearm" and arm.get_link("forearm").joints == [elbow]
    assert arm.get_link("forearm").parent_idx == arm.get_link("upper_arm").idx
    # the joint's indices address the entity's arrays (a slice of them as well, as Genesis World's scripts pass)
    arm.set_dofs_position([0.3], [elbow.dof_idx_local], skip_forward=True)
    assert torch.equal(arm.get_dofs_position(slice(1, 3)), arm.get_dofs_position([1, 2]))
    assert scene.rigid_solver.get_error_envs_mask().tolist() == [False]
    assert float(arm.get_qpos()[elbow.q_idx_local]) == pytest.approx(0.3)
    with pytest.raises(gs.OptionError, match="no joint 'knee'"):
        arm.get_joint("knee")


def test_position_velocity_control_is_position_and_velocity_control():
    """kp (q* - q) + kv (v* - v): with kv = 0 it is position control, with kp = 0 velocity control, bitwise."""
    def run(setup):
        scene, p = pendulum()
        setup(p)
        for _ in range(200):
            scene.step()
        return p.get_dofs_position(), p.get_dofs_velocity()

    def pos_vel(kp, kv):
        def f(p):
            p.set_dofs_kp([kp])
            p.set_dofs_kv([kv])
            p.control_dofs_position_velocity([0.7], [0.4])
        return f

    def pos(p):
        p.set_dofs_kp([30.0])
        p.set_dofs_kv([0.0])
        p.control_dofs_position([0.7])

    def vel(p):
        p.set_dofs_kp([0.0])
        p.set_dofs_kv([5.0])
        p.control_dofs_velocity([0.4])

    for a, b in ((run(pos_vel(30.0, 0.0)), run(pos)), (run(pos_vel(0.0, 5.0)), run(vel))):
        assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    q, v = run(pos_vel(30.0, 5.0))
    assert float(q) > 0.2 and not torch.equal(q, run(pos)[0])  # both terms act


def test_force_range_clamps_a_pd_law_as_a_saturated_motor():
    """A stiff position servo asked for a far angle, its torque limited to 2 N m: while saturated it is exactly a
    2 N m motor (bitwise); the reported control force is the clamped one; a lower > upper range is refused."""
    def run(control):
        scene, p = pendulum()
        p.set_dofs_force_range([-2.0], [2.0])
        control(p)
        forces = []
        for _ in range(100):
            forces.append(float(p.get_dofs_control_force()))
            scene.step()
        return p.get_dofs_position(), p.get_dofs_velocity(), forces

    def servo(p):
        p.set_dofs_kp([1e4])
        p.set_dofs_kv([10.0])
        p.control_dofs_position([math.pi])

    q1, v1, f1 = run(servo)
    q2, v2, f2 = run(lambda p: p.control_dofs_force([5.0]))  # clamped to 2
    assert torch.equal(q1, q2) and torch.equal(v1, v2)
    assert f1 == f2 == [2.0] * 100
    scene, p = pendulum()
    assert [float(x) for x in p.get_dofs_force_range()] == [-1e30, 1e30] or float(p.get_dofs_force_range()[1]) > 1e9
    with pytest.raises(gs.OptionError, match="lower must not exceed upper"):
        p.set_dofs_force_range([1.0], [-1.0])


def test_dof_parameters_are_per_environment_state():
    """Damping, armature and stiffness set in environment 1 change it alone (environment 0 bitwise as an unchanged
    scene); they are state: get_state / reset carries them, and a restored run repeats bitwise."""
    def swing(scene, p):
        p.set_dofs_position(torch.tensor([[0.5], [0.5]], dtype=F64))
        for _ in range(100):
            scene.step()
        return p.get_dofs_position()

    ref_scene, ref = pendulum(n_envs=2)
    q_ref = swing(ref_scene, ref)
    scene, p = pendulum(n_envs=2)
    p.set_dofs_damping([[3.0]], envs_idx=[1])
    p.set_dofs_armature([[0.5]], envs_idx=[1])
    p.set_dofs_stiffness([[20.0]], envs_idx=[1])
    assert p.get_dofs_damping().tolist() == [[0.0], [3.0]]
    assert p.get_dofs_armature(envs_idx=[1]).tolist() == [[0.5]]
    start = scene.get_state()
    q = swing(scene, p)
    assert torch.equal(q[0], q_ref[0]) and not torch.equal(q[1], q_ref[1])
    # a restored state carries the parameters
    p.set_dofs_damping([[0.0], [0.0]])
    scene.reset(start)
    assert p.get_dofs_damping().tolist() == [[0.0], [3.0]]
    assert torch.equal(swing(scene, p), q)
    with pytest.raises(gs.InvalidStateError):
        p.set_dofs_damping([[-1.0]], envs_idx=[0])


def test_stiffness_and_damping_are_the_joint_spring():
    """A pendulum without gravity on a joint spring (k = 4 N m/rad, I = 1 kg m^2) oscillates at sqrt(k / I);
    get_dofs_force reports -k q - d v (no control)."""
    scene, p = pendulum(gravity=(0, 0, 0), dt=1e-3)
    p.set_dofs_stiffness([4.0])
    p.set_dofs_damping([0.0])
    p.set_dofs_position([0.1])
    crossings, prev = [], 0.1
    for k in range(4000):
        scene.step()
        q = float(p.get_dofs_position())
        if prev > 0 >= q:
            crossings.append(k * 1e-3)
        prev = q
    period = crossings[1] - crossings[0]
    inertia = 1.0 + 1e-6  # the bob at 1 m, and its own
    assert period == pytest.approx(2 * math.pi / math.sqrt(4.0 / inertia), rel=5e-3)
    p.set_dofs_damping([0.3])
    q, v = float(p.get_dofs_position()), float(p.get_dofs_velocity())
    assert float(p.get_dofs_force()) == pytest.approx(-4.0 * q - 0.3 * v, rel=1e-12)


def test_link_velocities_match_finite_differences():
    """get_links_vel (the link frame's origin, and its centre of mass) and get_links_ang of a swinging arm equal
    the finite differences of the link poses over a 1e-5 s step (to 1e-4 of the speed)."""
    scene, (arm,) = build([gs.morphs.URDF(default_armature=None, file=assets.path("arm.urdf"), fixed=True)], dt=1e-5)
    arm.set_dofs_position([0.3, 0.8, -0.5])
    arm.set_dofs_velocity([1.0, -2.0, 1.5])
    v, w = arm.get_links_vel(), arm.get_links_ang()
    v_com = arm.get_links_vel(ref="link_com")
    x0, q0 = arm.get_links_pos(), arm.get_links_quat()
    scene.step()
    x1, q1 = arm.get_links_pos(), arm.get_links_quat()
    fd_v = (x1 - x0) / 1e-5
    # angular velocity from the quaternion change: 2 (q1 - q0) / dt * conj(q0), vector part
    dq = (q1 - q0) / 1e-5
    w0, x, y, z = q0.unbind(-1)
    dw, dx, dy, dz = dq.unbind(-1)
    fd_w = 2 * torch.stack([-dw * x + dx * w0 - dy * z + dz * y, -dw * y + dx * z + dy * w0 - dz * x,
                            -dw * z - dx * y + dy * x + dz * w0], -1)
    scale = float(v.norm(dim=-1).max())
    assert scale > 0.5
    assert float((v.double() - fd_v).norm(dim=-1).max()) < 1e-4 * scale * 10
    assert float((w.double() - fd_w).norm(dim=-1).max()) < 1e-3 * float(w.norm(dim=-1).max())
    assert not torch.allclose(v_com, v)
    with pytest.raises(gs.OptionError, match="ref="):
        arm.get_links_vel(ref="root")


def test_applied_force_and_torque_act_for_one_step():
    """Gravity off, a free 1 kg box (0.1 m cube, I = m a^2 / 6): a force of (2, 0, 0) N for one 10 ms step of 4
    substeps gives it 0.02 m/s, in environment 1 only; a torque of (0, 0, 1e-3) N m spins it at tau dt / I; the
    next step adds nothing; a force given in the box's own axes (local) turns with it; a pending force is state."""
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=1e-2, substeps=4, gravity=(0, 0, 0)))
    box = scene.add_entity(gs.morphs.Box(pos=(0, 0, 1), size=(0.1, 0.1, 0.1), euler=(0, 0, 90)),
                           material=gs.materials.Rigid(rho=1000))
    scene.build(n_envs=2)
    start = scene.get_state()
    box.apply_links_external_force([[2.0, 0.0, 0.0]], envs_idx=[1])
    box.apply_links_external_torque([[0.0, 0.0, 1e-3]], envs_idx=[1])
    pending = scene.get_state()
    scene.step()
    v, w = box.get_vel(), box.get_ang()
    assert float(v[1, 0]) == pytest.approx(0.02, rel=1e-9) and float(v[0].abs().max()) == 0.0
    assert float(w[1, 2]) == pytest.approx(1e-3 * 1e-2 / (1.0 * 0.01 / 6), rel=1e-6)
    scene.step()
    assert float(box.get_vel()[1, 0]) == pytest.approx(0.02, rel=1e-9)  # gone after its step
    # the pending force is state: a restore applies it again
    scene.reset(pending)
    scene.step()
    assert torch.equal(box.get_vel(), v)
    # local axes: the box is turned 90 degrees about z, so its x axis is the world's y
    scene.reset(start)
    box.apply_links_external_force([2.0, 0.0, 0.0], local=True)
    scene.step()
    assert box.get_vel()[:, 1].tolist() == pytest.approx([0.02, 0.02], rel=1e-9)
    with pytest.raises(gs.OptionError, match="ref="):
        box.apply_links_external_force([1.0, 0, 0], ref="root_com")


def test_a_force_at_the_link_origin_also_turns_the_link():
    """On the arm's forearm, whose frame origin is the elbow (not its centre of mass), the same force applied at
    the origin and at the centre of mass moves the arm differently; scene.rigid_solver takes global link indices."""
    out = []
    for ref in ("link_origin", "link_com"):
        scene, (arm,) = build([gs.morphs.URDF(default_armature=None, file=assets.path("arm.urdf"), fixed=True)], gravity=(0, 0, 0))
        link = arm.get_link("forearm")
        assert torch.equal(scene.sim.rigid_solver.get_links_pos([link.idx]), arm.get_links_pos([link.idx_local]))
        scene.rigid_solver.apply_links_external_force([[5.0, 0.0, 0.0]], links_idx=[link.idx], ref=ref)
        scene.step()
        out.append(arm.get_dofs_velocity())
    assert float(out[0].abs().max()) > 0 and not torch.allclose(out[0], out[1])


def test_gravity_compensation_holds_the_share_of_the_weight():
    """A free box with gravity_compensation 0.5 falls at g / 2; at 1.0 it floats; the arm compensated fully stays
    where it is put."""
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=1e-2))
    half = scene.add_entity(gs.morphs.Box(pos=(0, 0, 1), size=(0.1, 0.1, 0.1)),
                            material=gs.materials.Rigid(gravity_compensation=0.5))
    full = scene.add_entity(gs.morphs.Box(pos=(1, 0, 1), size=(0.1, 0.1, 0.1)),
                            material=gs.materials.Rigid(gravity_compensation=1.0))
    arm = scene.add_entity(gs.morphs.URDF(default_armature=None, file=assets.path("arm.urdf"), fixed=True, pos=(3, 0, 0)),
                           material=gs.materials.Rigid(gravity_compensation=1.0))
    scene.build()
    arm.set_dofs_position([0.3, 0.8, -0.5])
    q0 = arm.get_dofs_position()
    for _ in range(10):
        scene.step()
    assert float(half.get_vel()[2]) == pytest.approx(-0.5 * 9.81 * 0.1, rel=1e-9)
    assert float(full.get_vel().abs().max()) < 1e-12
    assert float((arm.get_dofs_position() - q0).abs().max()) < 1e-9
    with pytest.raises(Exception, match="gravity_compensation"):
        gs.materials.Rigid(gravity_compensation=-1.0)


def test_coupling_material_options_are_validated():
    """Genesis World's coupling options of the rigid material: coup_friction is used (the grasp example shows its
    effect), the others are accepted with their ranges checked; needs_coup must be a bool, and False hides the
    entity's geoms from the particle solvers (no geometry in the collider view)."""
    m = gs.materials.Rigid(coup_friction=0.5, coup_softness=0.01, coup_restitution=0.2, sdf_cell_size=0.01)
    assert m.coup_friction == 0.5 and gs.materials.Rigid().coup_friction is None
    for bad in (dict(coup_friction=-0.1), dict(coup_restitution=1.5), dict(sdf_cell_size=0.0),
                dict(coup_softness=-1.0)):
        with pytest.raises(Exception, match=next(iter(bad))):
            gs.materials.Rigid(**bad)
    with pytest.raises(Exception, match="needs_coup"):
        gs.materials.Rigid(needs_coup=1)
    # what the particle solvers see: coup_friction where given, else the geom's friction; no geometry where
    # needs_coup=False
    scene = gs.Scene()
    scene.add_entity(gs.morphs.Plane(), material=gs.materials.Rigid(friction=0.3))
    scene.add_entity(gs.morphs.Box(pos=(0, 0, 1), size=(0.1, 0.1, 0.1)),
                     material=gs.materials.Rigid(friction=0.7, coup_friction=0.05))
    scene.add_entity(gs.morphs.Sphere(pos=(0, 1, 1), radius=0.1), material=gs.materials.Rigid(needs_coup=False))
    scene.build()
    view = scene.rigid_solver.collider_view(0)
    assert view.geom_friction.tolist()[:2] == pytest.approx([0.3, 0.05])
    assert view.geom_type.tolist() == [gs.coupler.GEOM_PLANE, gs.coupler.GEOM_BOX, -1]


def test_domain_randomization_per_environment():
    """Mass shift, centre-of-mass shift, inertial mass and friction ratio set per environment change that
    environment alone (the others bitwise as an unrandomized scene) and travel with the state; get_AABB bounds the
    geoms."""
    def scene_of():
        scene = gs.Scene(sim_options=gs.options.SimOptions(dt=1e-2, substeps=2))
        scene.add_entity(gs.morphs.Plane(), material=gs.materials.Rigid(friction=0.1))
        box = scene.add_entity(gs.morphs.Box(pos=(0, 0, 0.049), size=(0.1, 0.1, 0.1)),
                               material=gs.materials.Rigid(rho=1000, friction=0.5))
        scene.build(n_envs=3)
        return scene, box

    def push(scene, box):
        for _ in range(30):
            box.apply_links_external_force([3.0, 0.0, 0.0])
            scene.step()
        return box.get_pos(), box.get_vel()

    ref, rbox = scene_of()
    p_ref, v_ref = push(ref, rbox)
    scene, box = scene_of()
    assert box.get_links_inertial_mass()[:, 0].tolist() == pytest.approx([1.0] * 3)
    assert box.get_mass() == pytest.approx(1.0)
    box.set_friction_ratio([[0.2]], envs_idx=[1])
    box.set_mass_shift([[1.0]], envs_idx=[2])
    start = scene.get_state()
    p, v = push(scene, box)
    assert torch.equal(p[0], p_ref[0]) and torch.equal(v[0], v_ref[0])
    # 3 N against mu m g (a contact takes the larger friction: the box's 0.5 times its ratio, the plane's 0.1):
    # 4.9 N holds it at ratio 1 (environment 0 stays); at ratio 0.2 (0.98 N) it slides; doubled in mass it stays
    assert float(v_ref[0].abs().max()) < 1e-6 and float(v[1, 0]) > 0.3 and float(v[2].abs().max()) < 1e-6
    assert box.get_friction_ratio().tolist() == [[1.0], [0.2], [1.0]]
    scene.reset(start)
    p2, _ = push(scene, box)
    assert torch.equal(p2, p)
    # a centre of mass shifted past the face it stands on (0.08 m against a half-width of 0.05 m) tips the box over
    scene.reset(start)
    box.set_COM_shift([[0.08, 0.0, 0.0]], envs_idx=[0])
    box.set_links_inertial_mass([[2.0]], envs_idx=[0])
    assert box.get_mass() == pytest.approx(2.0)
    for _ in range(30):
        scene.step()
    # (it lies on its next face after 0.3 s, turned 90 degrees about y, as MuJoCo has the same box)
    w = box.get_quat()[:, 0]
    assert float(w[0]) == pytest.approx(math.sqrt(0.5), abs=0.01) and float(w[2]) == 1.0
    scene.reset(start)
    aabb = box.get_AABB()
    assert aabb.shape == (3, 2, 3)
    assert aabb[0, 0].tolist() == pytest.approx([-0.05, -0.05, -0.001], abs=2e-3)
    with pytest.raises(gs.InvalidStateError):
        box.set_links_inertial_mass([[-1.0]], envs_idx=[0])


def test_genesis_rigid_option_names():
    """RigidOptions(dt=...) equal to the scene's is accepted, a different one refused naming SimOptions;
    max_collision_pairs (geom pairs, 5 contacts each) sizes the contact pool when max_contacts is not given; Genesis World's constants are
    accepted (its implicit integrators are this solver's "euler")."""
    opts = gs.options.RigidOptions(integrator=gs.integrator.implicitfast, constraint_solver=gs.constraint_solver.Newton)
    assert opts.integrator == "euler" and gs.options.RigidOptions(integrator=gs.integrator.RK4).integrator == "rk4"
    with pytest.raises(Exception, match="integrator"):
        gs.options.RigidOptions(integrator="verlet")
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=0.01),
                     rigid_options=gs.options.RigidOptions(dt=0.01, max_collision_pairs=7, batch_dofs_info=True))
    for k in range(4):
        scene.add_entity(gs.morphs.Box(pos=(0.3 * k, 0, 1), size=(0.1, 0.1, 0.1)))
    scene.add_entity(gs.morphs.Plane())
    scene.build()
    # pairs, as in Genesis World: 5 contacts each
    assert scene.rigid_solver.n_slots > 35 and scene.rigid_solver.max_contacts == 35
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=0.01), rigid_options=gs.options.RigidOptions(dt=0.02))
    scene.add_entity(gs.morphs.Box(pos=(0, 0, 1), size=(0.1, 0.1, 0.1)))
    with pytest.raises(gs.OptionError, match=r"SimOptions\(dt=\.\.\.\)"):
        scene.build()


def test_contacts_and_net_contact_force_carry_the_weight():
    """A 1 kg box resting on the plane (after settling): its contacts are with the plane (geoms and links of both),
    the forces on it point up and sum to m g (1e-6), the plane's are opposite; per environment, and the box alone
    in the air has none."""
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=1e-2, substeps=2))
    plane = scene.add_entity(gs.morphs.Plane())
    box = scene.add_entity(gs.morphs.Box(pos=(0, 0, 0.049), size=(0.1, 0.1, 0.1)),
                           material=gs.materials.Rigid(rho=1000))
    scene.build(n_envs=2)
    box.set_pos(torch.tensor([[0.0, 0.0, 0.049], [0.0, 0.0, 2.0]], dtype=F64))
    for _ in range(50):
        scene.step()
    c = box.get_contacts(with_entity=plane)
    mask = c["valid_mask"]
    assert int(mask[0].sum()) >= 3 and int(mask[1].sum()) == 0
    on_box = torch.where((c["link_b"] == box.base_link_idx)[..., None], c["force_b"], c["force_a"])[0][mask[0]]
    assert float(on_box.sum(0)[2]) == pytest.approx(9.81, rel=1e-6)
    assert float(on_box[:, 2].min()) >= 0.0
    net = box.get_links_net_contact_force()
    assert float(net[0, 0, 2]) == pytest.approx(9.81, rel=1e-6) and float(net[1].abs().max()) == 0.0
    assert float(plane.get_links_net_contact_force()[0, 0, 2]) == pytest.approx(-9.81, rel=1e-6)
    assert set(c["geom_a"][0][mask[0]].tolist()) | set(c["geom_b"][0][mask[0]].tolist()) == {0, 1}


def test_parameter_rules_hold_on_the_way_in():
    """A force range with lower > upper or a moving link without inertial mass is refused by the setters, by
    reset(state) and by a checkpoint, and nothing changes."""
    scene, p = pendulum(n_envs=2)
    state = scene.get_state()
    with pytest.raises(gs.InvalidStateError, match="mass"):
        p.set_links_inertial_mass([[0.0]], links_idx_local=[p.n_links - 1], envs_idx=[1])
    assert torch.equal(p.get_links_inertial_mass(), state.solvers_state[0].links_inertial_mass)
    bad = state.clone()
    bad.solvers_state[0].dofs_force_lo[1, 0] = 5.0
    bad.solvers_state[0].dofs_force_hi[1, 0] = 1.0
    with pytest.raises(gs.InvalidStateError, match="lower <= upper"):
        scene.reset(bad)
    bad = state.clone()
    bad.solvers_state[0].links_inertial_mass[0, -1] = -5.0
    with pytest.raises(gs.InvalidStateError, match="mass"):
        scene.reset(bad, envs_idx=[0])
    assert torch.equal(p.get_links_inertial_mass(), state.solvers_state[0].links_inertial_mass)
    scene.step()


def test_a_mass_shift_below_the_floor_moves_as_the_floor_mass():
    """Genesis World's domain randomization shifts light links' masses below zero. The shift is kept as set,
    and the dynamics use a tenth of the inertial mass (MIN_MASS_FRACTION): the pendulum swings bitwise as one
    whose inertial mass is that tenth, the other environment as an unshifted one; one warning says so."""
    from genesis_rigid.params import MIN_MASS_FRACTION

    def swing(scene, p, steps=40):
        p.set_dofs_position([[0.9]] * 2)
        for _ in range(steps):
            p.control_dofs_force([[2.0]] * 2)
            scene.step()
        return p.get_dofs_position(), p.get_dofs_velocity()

    ref, rp = pendulum(n_envs=2, dt=1e-2)
    last = rp.n_links - 1
    m = float(rp.get_links_inertial_mass([last])[0, 0])
    assert m > 0
    rp.set_links_inertial_mass([[MIN_MASS_FRACTION * m]], links_idx_local=[last], envs_idx=[1])
    q_ref, v_ref = swing(ref, rp)
    scene, p = pendulum(n_envs=2, dt=1e-2)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        p.set_mass_shift([[-2.0 * m]], links_idx_local=[last], envs_idx=[1])
        q, v = swing(scene, p)
        p.set_mass_shift([[-3.0 * m]], links_idx_local=[last], envs_idx=[1])
        scene.step()
    assert float(p.get_links_mass_shift([last])[1, 0]) == pytest.approx(-3.0 * m)
    assert torch.equal(q, q_ref) and torch.equal(v, v_ref)
    floor = [str(w.message) for w in caught if "links_mass_shift" in str(w.message)]
    assert len(floor) == 1 and "below 0.1 of their inertial mass" in floor[0]
    # the motor's 2 N m turns the light bob further than the unshifted one (the other environment is that one)
    plain, pp = pendulum(n_envs=2, dt=1e-2)
    q0, _ = swing(plain, pp)
    assert torch.equal(q0[0], q[0]) and float(q[1, 0] - q0[1, 0]) > 0.5


@pytest.mark.parametrize("batched", [False, True])
def test_links_info_and_dofs_info_read_the_parameters_in_genesis_layout(batched):
    """scene.rigid_solver.links_info / dofs_info: Genesis World's field names over the state's per-environment
    parameters, [n] (the first environment) or [n, n_envs] with batch_*_info; read-only copies."""
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=1e-3),
                     rigid_options=gs.options.RigidOptions(batch_links_info=batched, batch_dofs_info=batched))
    arm = scene.add_entity(gs.morphs.URDF(default_armature=None, file=assets.path("arm.urdf"), fixed=True))
    scene.build(n_envs=2)
    arm.set_links_inertial_mass([[5.0]], links_idx_local=[1], envs_idx=[1])
    arm.set_dofs_damping([[0.3, 0.4, 0.5]], envs_idx=[1])
    solver = scene.rigid_solver
    mass = solver.links_info.inertial_mass.to_numpy()
    damping = solver.dofs_info.damping.to_numpy()
    if batched:
        assert mass.shape == (arm.n_links, 2) and damping.shape == (arm.n_dofs, 2)
        assert mass[1, 1] == 5.0 and mass[1, 0] == float(arm.get_links_inertial_mass([1])[0, 0])
        assert np.allclose(damping[:, 1], [0.3, 0.4, 0.5])
    else:
        assert mass.shape == (arm.n_links,) and damping.shape == (arm.n_dofs,)
        assert np.allclose(mass, arm.get_links_inertial_mass()[0].numpy())
    lo, hi = (x.numpy() for x in arm.get_dofs_force_range())
    force_range = solver.dofs_info.force_range.to_numpy()
    assert np.allclose(force_range[..., 0], (lo.T if batched else lo[0])) and force_range.shape[-1] == 2
    mass[...] = -1  # a copy
    assert solver.links_info.inertial_mass.to_numpy().min() >= 0
    assert solver.links_info.inertial_pos.to_numpy().shape[-1] == 3
    assert solver.links_info.inertial_i.to_numpy().shape[-2:] == (3, 3)
    assert np.all(np.isfinite(solver.dofs_info.limit.to_numpy()[..., 0]) | (solver.dofs_info.limit.to_numpy()[..., 0] == -np.inf))
    with pytest.raises(AttributeError, match="inertial_mass"):
        solver.links_info.no_such_field


def test_genesis_options_without_a_counterpart_name_the_replacement():
    """Genesis World's RigidOptions fields that mean nothing here raise an OptionError that says what to use;
    those that mean something are accepted."""
    with pytest.raises(gs.OptionError, match="ls_iterations.*set iterations"):
        gs.options.RigidOptions(ls_iterations=50)
    with pytest.raises(gs.OptionError, match="contact_resolve_time.*baumgarte"):
        gs.options.RigidOptions(contact_resolve_time=0.02)
    opts = gs.options.RigidOptions(dt=0.01, max_collision_pairs=20, constraint_solver=gs.constraint_solver.Newton,
                                   tolerance=1e-5, batch_dofs_info=True)
    assert opts.max_collision_pairs == 20 and opts.tolerance == 1e-5
    with pytest.raises(TypeError):
        gs.options.RigidOptions(no_such_option=1)


def test_a_position_setter_on_some_environments_leaves_the_others_bitwise():
    """set_dofs_position / set_pos with envs_idx recompute the link poses of those environments only: the other
    environment's whole state stays bit for bit what its step wrote (the standalone kinematics rounds the floating
    base's link quaternions differently from the step, by 1e-16, which used to leak into env 1 and its trajectory:
    33 of 40 steps of this scene differed)."""
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=0.02, substeps=4))
    scene.add_entity(gs.morphs.Plane())
    robot = scene.add_entity(gs.morphs.MJCF(default_armature=None, file=assets.path("quadruped.xml")))
    scene.build(n_envs=2)
    gen = torch.Generator().manual_seed(0)
    dofs = list(range(6, robot.n_dofs))
    for i in range(20):
        robot.control_dofs_position(torch.rand(2, len(dofs), generator=gen, dtype=F64) - 0.5, dofs)
        scene.step()
        before = scene.get_state().fields_by_key()
        robot.set_dofs_position(robot.get_dofs_position(dofs, envs_idx=[0]), dofs, envs_idx=[0])
        robot.set_pos(robot.get_pos(envs_idx=[0]), envs_idx=[0], zero_velocity=False)
        after = scene.get_state().fields_by_key()
        for key, a in before.items():
            if a.dim() and a.shape[0] == 2:  # a batched field: env 1's row
                assert torch.equal(a[1], after[key][1]), (i, key)
