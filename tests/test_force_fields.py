"""Force fields (`scene.add_force_field`, gs.force_fields.*) on rigid links and on particles, against their
analytic accelerations; per-environment activation, snapshots and checkpoints; bad input; the differentiable mode.

Rigid links take each field at the pose a substep starts from (semi-implicit Euler, as gravity): under a constant
acceleration a, after N substeps of h, v = N h a and x - x0 = a h^2 N (N + 1) / 2 exactly (a t^2 / 2 + O(h)).
Particles take the field at the substep's start in the velocity of its end, which the next substep moves them with:
v = N h a, x - x0 = a h^2 N (N - 1) / 2. Gravity is off in these scenes, so the fields alone act (to rounding)."""

import numpy as np
import pytest
import taichi as ti
import torch

import genesis_core as gs
from genesis_core.testing import assert_close_rel, assert_unchanged, central_differences, scene_fields

F64 = torch.float64
H = 0.005  # substep, s
A = 2.0  # the constant field's strength, m/s^2
K_DRAG = 3.0  # 1/s
V0 = 0.8  # the dragged box's starting speed, m/s


def rigid_scene():
    """A free box in three environments, no gravity: a Constant field acting in env 0 only, a Drag field in env 1
    only, a Noise field in env 2 only (switched per environment after build)."""
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=2 * H, substeps=2, gravity=(0, 0, 0)))
    box = scene.add_entity(gs.morphs.Box(pos=(0, 0, 1), size=(0.1, 0.1, 0.1)))
    const = scene.add_force_field(gs.force_fields.Constant(direction=(2, 0, 0), strength=A))
    drag = scene.add_force_field(gs.force_fields.Drag(linear=K_DRAG))
    noise = scene.add_force_field(gs.force_fields.Noise(strength=0.5, seed=7))
    scene.build(n_envs=3)
    box.set_dofs_velocity(torch.tensor([[V0, 0, 0, 0, 0, 0]], dtype=F64), envs_idx=[1])
    const.activate(envs_idx=[0])
    drag.activate(envs_idx=[1])
    noise.activate(envs_idx=[2])
    return scene, box, (const, drag, noise)


def test_fields_on_a_free_rigid_body_follow_their_analytic_motion_per_environment(tmp_path):
    """Env 0 (Constant): x = a h^2 N (N + 1) / 2, v = N h a, to 1e-12; within a t h of a t^2 / 2. Env 1 (Drag):
    v = v0 (1 - k h)^N, within 1% of v0 exp(-k t). Env 2 (Noise) moves, reproducibly: get_state, N steps,
    reset(state), N steps gives bitwise the same state; a checkpoint written mid-run resumes bitwise. Fields
    switched off in an environment leave it alone; a field switched in env 0 only leaves the others bitwise
    untouched."""
    scene, box, (const, drag, noise) = rigid_scene()
    assert const.active.tolist() == [True, False, False] and noise.active.tolist() == [False, False, True]
    steps = 10
    N = 2 * steps
    start = scene.get_state()
    for _ in range(steps):
        scene.step()
    pos, vel = box.get_pos().to(F64), box.get_dofs_velocity().to(F64)
    t = N * H
    assert abs(float(pos[0, 0]) - A * H * H * N * (N + 1) / 2) < 1e-12
    assert abs(float(vel[0, 0]) - A * t) < 1e-12
    assert abs(float(pos[0, 0]) - A * t * t / 2) <= A * t * H
    assert torch.equal(pos[0, 1:], torch.tensor([0.0, 1.0], dtype=F64)) and float(vel[0, 1:].abs().max()) == 0
    v_drag = float(vel[1, 0])
    assert abs(v_drag - V0 * (1 - K_DRAG * H) ** N) < 1e-12
    assert abs(v_drag / (V0 * np.exp(-K_DRAG * t)) - 1) < 0.01
    assert float((pos[2] - torch.tensor([0, 0, 1.0], dtype=F64)).abs().max()) > 1e-6  # the noise moved it
    end = scene.get_state()
    # reproducible: the same steps from the same state give the same bits (the noise included)
    scene.reset(start)
    for _ in range(steps):
        scene.step()
    for k, x in end.fields_by_key().items():
        assert torch.equal(scene.get_state().fields_by_key()[k], x), k
    # a checkpoint carries the fields' state: written, then the fields switched, loaded, resumed bitwise
    path = tmp_path / "ff.ckpt"
    scene.save_checkpoint(path)
    for _ in range(3):
        scene.step()
    after = scene.get_state().fields_by_key()
    const.deactivate()
    drag.activate()
    scene.load_checkpoint(path)
    assert const.active.tolist() == [True, False, False] and drag.active.tolist() == [False, True, False]
    for _ in range(3):
        scene.step()
    for k, x in after.items():
        assert torch.equal(scene.get_state().fields_by_key()[k], x), k
    # envs_idx: switching the drag on in env 0 alone changes env 0 only, from the next substep
    ref = scene.get_state()
    drag.activate(envs_idx=[0])
    assert drag.active.tolist() == [True, True, False]
    scene.step()
    vel_b = box.get_dofs_velocity().to(F64)
    scene.reset(ref)
    assert drag.active.tolist() == [False, True, False]
    scene.step()
    vel_a = box.get_dofs_velocity().to(F64)
    assert torch.equal(vel_a[1:], vel_b[1:])
    dv = float(vel_b[0, 0] - vel_a[0, 0])  # the drag's share of env 0's two substeps
    v = float(ref.solvers_state[scene.solvers.index(scene.rigid_solver)].dofs_vel[0, 0])
    expect = (v + 2 * H * A) - ((v * (1 - K_DRAG * H) + H * A) * (1 - K_DRAG * H) + H * A)
    assert abs(-dv - expect) < 1e-12


@ti.func
def spring(pos, vel, t, i):
    """A Custom field: a = -4 pos (m/s^2)."""
    return -4.0 * pos


def particle_scene(requires_grad=False, n_envs=4):
    """Free PBD particles (a 3 x 3 x 3 lattice), no gravity; four fields, each switched on in one environment:
    Point (env 0), Vortex (env 1), Custom (env 2), Constant (env 3)."""
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=H, substeps=1, gravity=(0, 0, 0),
                                                       requires_grad=requires_grad),
                     pbd_options=gs.options.PBDOptions(lower_bound=(-0.5, -0.5, -0.5), upper_bound=(0.5, 0.5, 0.5),
                                                       particle_size=0.02, small_step_dt=H))
    ent = scene.add_entity(gs.morphs.Box(pos=(0.05, 0.02, 0.1), size=(0.06,) * 3), material=gs.materials.PBD.Particle())
    fields = (gs.force_fields.Point(strength=2.0, position=(0.0, 0.0, -0.1), falloff_pow=2.0, flow=0.0),
              gs.force_fields.Vortex(center=(0.01, 0.0, 0.0), strength_perpendicular=3.0, strength_radial=1.5,
                                     falloff_min=0.02, falloff_pow=2.0),
              gs.force_fields.Custom(spring),
              gs.force_fields.Constant(direction=(0, 0, 1), strength=A))
    for ff in fields:
        scene.add_force_field(ff)
    if not n_envs:  # one environment: the Point field
        fields[0].activate()
    scene.build(n_envs=n_envs)
    for e, ff in enumerate(fields[:n_envs]):
        ff.activate(envs_idx=[e])
    return scene, ent, fields


def point_acc(x):
    rel = x - np.array([0.0, 0.0, -0.1])
    r = np.linalg.norm(rel, axis=1, keepdims=True)
    return 2.0 * rel / r / (r + 1.0) ** 2


def vortex_acc(x):
    rel = x - np.array([0.01, 0.0, 0.0])
    rel[:, 2] = 0.0
    r = np.linalg.norm(rel, axis=1, keepdims=True)
    falloff = np.where(r < 0.02, 1.0, 1.0 / (r - 0.02 + 1.0) ** 2)
    tangential = np.stack([-rel[:, 1], rel[:, 0], np.zeros(len(rel))], 1)
    return falloff * (3.0 * tangential - 1.5 * rel)


def test_fields_on_particles_give_their_analytic_accelerations():
    """After one substep from rest each particle's velocity is h times the field's acceleration at its starting
    position (to 1e-12): Point's (x - p) / r / (r + 1)^2 falloff, Vortex's tangential (-y, x) and radial pulls
    with its falloff, the Custom Taichi function's -4 x; under Constant, after N substeps v = N h a and
    x - x0 = a h^2 N (N - 1) / 2."""
    scene, ent, _ = particle_scene()
    x0 = ent.get_particles_pos()[0].to(F64).numpy()
    scene.step()
    vel = ent.get_particles_vel().to(F64).numpy()
    for env, acc in ((0, point_acc(x0)), (1, vortex_acc(x0)), (2, -4.0 * x0), (3, np.array([0.0, 0.0, A]))):
        np.testing.assert_allclose(vel[env], H * np.broadcast_to(acc, x0.shape), rtol=0, atol=1e-12)
    assert np.abs(vortex_acc(x0)).max() > 0.01 and np.abs(point_acc(x0)).max() > 0.1
    for _ in range(9):
        scene.step()
    N = 10
    pos, vel = ent.get_particles_pos()[3].to(F64).numpy(), ent.get_particles_vel()[3].to(F64).numpy()
    np.testing.assert_allclose(vel, np.broadcast_to([0, 0, N * H * A], vel.shape), rtol=0, atol=1e-12)
    np.testing.assert_allclose(pos - x0, np.broadcast_to([0, 0, A * H * H * N * (N - 1) / 2], pos.shape), rtol=0,
                               atol=1e-12)


def test_bad_force_fields_are_refused_with_nothing_changed():
    """Wrong shapes, NaN, a zero direction, negative radii, a bad seed, a function that is not a Taichi function,
    something else than a field: OptionError at the call. Adding after build, adding a field twice, envs_idx
    before build: refused. A state whose field parameters break the kind's rules, or whose flags are not 0/1, is
    refused by reset with nothing changed."""
    ff = gs.force_fields
    bad = [lambda: ff.Constant(direction=(1, 0)), lambda: ff.Constant(direction=(0, 0, 0)),
           lambda: ff.Constant(strength=float("nan")), lambda: ff.Wind(center=(0, np.nan, 0)),
           lambda: ff.Wind(radius=-1.0), lambda: ff.Drag(linear=-0.1), lambda: ff.Vortex(falloff_min=-1),
           lambda: ff.Vortex(falloff_min=1.0, falloff_max=0.5), lambda: ff.Turbulence(frequency=0),
           lambda: ff.Noise(seed=-1), lambda: ff.Noise(strength="1"), lambda: ff.Custom(lambda p, v, t, i: p),
           lambda: ff.Custom(3)]
    for make in bad:
        with pytest.raises(gs.OptionError):
            make()
    scene, box, (const, drag, noise) = rigid_scene()
    with pytest.raises(gs.SceneError, match="after scene.build"):
        scene.add_force_field(ff.Constant())
    other = gs.Scene()
    with pytest.raises(gs.OptionError, match="already added"):
        other.add_force_field(const)
    with pytest.raises(gs.OptionError, match="gs.force_fields"):
        other.add_force_field("wind")
    unbuilt = other.add_force_field(ff.Wind())
    with pytest.raises(gs.SceneError, match="envs_idx"):
        unbuilt.activate(envs_idx=[0])
    before = scene_fields(scene)
    with pytest.raises(gs.OptionError, match="envs_idx"):
        const.activate(envs_idx=[5])
    state = scene.get_state()
    i = scene.solvers.index(scene.force_field_manager)
    sub = state.solvers_state[i]
    sub.params[1, 1, 10] = -1.0  # a negative linear drag in env 1
    with pytest.raises(gs.InvalidStateError, match=r"ForceFieldManager.params\[env 1, index \[1, 10\]\]"):
        scene.reset(state)
    sub.params[1, 1, 10] = K_DRAG
    sub.params[0, 0, 0] = 0.5  # a direction that is not a unit vector
    with pytest.raises(gs.InvalidStateError, match="unit direction"):
        scene.reset(state)
    sub.params[0, 0, 0] = 1.0
    sub.active[1, 2] = 2
    with pytest.raises(gs.InvalidStateError, match="ForceFieldManager.active"):
        scene.reset(state)
    sub.active[1, 2] = 0
    sub.params[0, 2, 6] = float("inf")
    with pytest.raises(gs.InvalidStateError, match="finite"):
        scene.reset(state)
    assert_unchanged(scene_fields(scene), before)


def test_gradients_through_a_position_dependent_field_match_finite_differences():
    """Differentiable mode, PBD particles under the Point field (env 0 of particle_scene, one environment): the
    gradient of a loss on the final positions and velocities with respect to the starting velocity, through the
    field's reverse (Taichi's, of the same kernel), against central differences in float64."""
    w_pos, w_vel = torch.tensor([0.7, -1.3, 2.0], dtype=F64), torch.tensor([0.2, 0.5, -0.3], dtype=F64)

    def rollout(scene, ent, v0):
        ent.set_particles_vel(v0.expand(ent.n_particles, 3))
        for _ in range(3):
            scene.step()
        p, v = ent.get_particles_pos(), ent.get_particles_vel()
        return (p.mean(0) * w_pos).sum() + (v.mean(0) * w_vel).sum() + (p[-1] ** 2).sum()

    scene, ent, _ = particle_scene(requires_grad=True, n_envs=0)
    v0 = torch.tensor([0.3, -0.2, 0.4], dtype=F64, requires_grad=True)
    rollout(scene, ent, v0).backward()
    plain, pent, _ = particle_scene(n_envs=0)
    start = plain.get_state()

    def f(x):
        plain.reset(start)
        return float(rollout(plain, pent, x))

    fd = central_differences(f, v0.detach().clone())
    assert_close_rel(v0.grad, fd, tol=1e-6)


@pytest.mark.parametrize("kind", ["mpm", "sph", "fem"])
def test_a_constant_field_adds_its_acceleration_on_every_particle_solver(kind):
    """A small body in free flight (tests/test_set_gravity_particles.falling_body: gravity on, far from the walls)
    under a Constant field: its centre-of-mass velocity changes by (g + a) t, to 1e-12 m/s (the solvers' internal
    forces sum to zero)."""
    from .test_set_gravity_particles import DT, G_BUILD, SUBSTEPS, com_vel, falling_body, run

    scene, ent, solver = falling_body(kind, build=False)
    scene.add_force_field(gs.force_fields.Constant(direction=(1, -1, 0), strength=A)).activate()
    scene.build()
    v0 = com_vel(ent, solver)
    run(scene, 3)
    a = torch.tensor(G_BUILD, dtype=F64) + A * torch.tensor([1, -1, 0], dtype=F64) / np.sqrt(2)
    assert float((com_vel(ent, solver) - v0 - a * 3 * DT).abs().max()) < 1e-12
    assert SUBSTEPS > 1
