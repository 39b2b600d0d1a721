"""scene.set_gravity on the particle solvers (MPM, SPH, PBD, FEM). After build each writes the new gravity into
the parameter array its kernels read at run time (the kit's `ParamsGravity`): a small body in free flight, far
from the walls and the floor, changes its centre-of-mass velocity by exactly g t under the gravity in force, in
plain and differentiable mode, and the backward of a run that changed gravity re-runs each substep with the
gravity it ran with. Set before build, the gravity is the one the solvers build with. A particle solver of a third
party without `set_gravity` is still refused after build, naming it, with nothing changed.

(The internal forces of every solver here sum to zero: each substep changes the total momentum by m g dt exactly,
up to rounding.)"""

import pytest
import torch

import genesis_core as gs
from genesis_core import plugins

from .pellets.genesis_pellets import plugin as pellets_plugin

F64 = torch.float64
DT, SUBSTEPS = 2e-3, 2  # s per step, substeps per step
G_BUILD = (0.0, 0.0, -9.81)
G_NEW = (1.5, -0.5, -2.0)  # sideways and weaker, m/s^2
SOLVERS = ("mpm", "sph", "pbd", "fem")


def falling_body(kind, requires_grad=False, build=True):
    """A small body of `kind` at rest in the middle of its domain (a few dozen particles), far from every wall and
    from the floor for the few steps of a test: (scene, entity, solver). "sph_dfsph" and "fem_implicit": the
    other pressure solver and the other integrator."""
    so = gs.options.SimOptions(dt=DT, substeps=SUBSTEPS, gravity=G_BUILD, requires_grad=requires_grad)
    variant = kind.partition("_")[2]
    kind = kind.partition("_")[0]
    if kind == "mpm":
        scene = gs.Scene(sim_options=so, mpm_options=gs.options.MPMOptions(
            lower_bound=(0, 0, 0), upper_bound=(0.4, 0.4, 0.4), grid_density=32))
        ent = scene.add_entity(gs.morphs.Box(pos=(0.2, 0.2, 0.2), size=(0.06,) * 3),
                               material=gs.materials.MPM.Elastic())
    elif kind == "sph":
        scene = gs.Scene(sim_options=so, sph_options=gs.options.SPHOptions(
            lower_bound=(0, 0, 0), upper_bound=(0.3, 0.3, 0.3), particle_size=0.02,
            pressure_solver="DFSPH" if variant == "dfsph" else "WCSPH"))
        ent = scene.add_entity(gs.morphs.Sphere(pos=(0.15, 0.15, 0.15), radius=0.035),
                               material=gs.materials.SPH.Liquid())
    elif kind == "pbd":
        scene = gs.Scene(sim_options=so, pbd_options=gs.options.PBDOptions(
            lower_bound=(-0.2, -0.2, 0), upper_bound=(0.2, 0.2, 0.4), particle_size=0.02))
        ent = scene.add_entity(gs.morphs.Box(pos=(0, 0, 0.2), size=(0.06,) * 3),
                               material=gs.materials.PBD.Particle())
    else:
        implicit = dict(use_implicit_solver=True, damping_alpha=0.0, damping_beta=0.0)  # (no Rayleigh damping)
        scene = gs.Scene(sim_options=so, fem_options=gs.options.FEMOptions(
            floor_height=-10.0, **(implicit if variant == "implicit" else {})))
        ent = scene.add_entity(gs.morphs.Box(pos=(0, 0, 0.5), size=(0.04,) * 3, maxvolume=0.02 ** 3 / 3),
                               material=gs.materials.FEM.Elastic(E=1e5, nu=0.3))
    if build:
        scene.build()
    return scene, ent, getattr(scene, f"{kind}_solver")


def com_vel(ent, solver):
    """The body's centre-of-mass velocity (m/s): its particles' velocities weighed by their masses."""
    m = solver.p_mass[ent.particle_start:ent.particle_end].to(F64)
    return (ent.get_particles_vel().to(F64) * m[:, None]).sum(0) / m.sum()


def run(scene, n):
    for _ in range(n):
        scene.step()


@pytest.mark.parametrize("kind, requires_grad", [(k, False) for k in SOLVERS + ("sph_dfsph", "fem_implicit")]
                         + [(k, True) for k in SOLVERS],
                         ids=lambda x: {False: "plain", True: "differentiable"}.get(x, x))
def test_gravity_set_after_build_is_the_one_the_next_substeps_apply(kind, requires_grad):
    """2 steps under the build's gravity, then set_gravity(G_NEW), then 3 steps: the centre-of-mass velocity changes
    by G_BUILD * 2 dt, then by G_NEW * 3 dt, to 1e-12 m/s (measured: 1e-17 for MPM, SPH and explicit FEM; 1e-14 for
    PBD and implicit FEM, whose velocities are position differences over dt). SimOptions and the solver's
    parameters hold G_NEW from then on."""
    scene, ent, solver = falling_body(kind, requires_grad)
    g_build, g_new = (torch.tensor(g, dtype=F64) for g in (G_BUILD, G_NEW))
    v0 = com_vel(ent, solver).detach()
    torch.testing.assert_close(v0, torch.zeros(3, dtype=F64), atol=0, rtol=0)
    run(scene, 2)
    v1 = com_vel(ent, solver).detach()
    torch.testing.assert_close(v1 - v0, g_build * 2 * DT, atol=1e-12, rtol=0)
    scene.set_gravity(G_NEW)
    assert scene.sim_options.gravity == G_NEW and solver.sim_options.gravity == G_NEW
    i = solver.gravity_param
    assert tuple(solver.params_f[i:i + 3].tolist()) == pytest.approx(G_NEW, abs=0)
    run(scene, 3)
    v2 = com_vel(ent, solver).detach()
    torch.testing.assert_close(v2 - v1, g_new * 3 * DT, atol=1e-12, rtol=0)


@pytest.mark.parametrize("kind", SOLVERS)
def test_the_backward_reruns_each_substep_with_the_gravity_it_ran_with(kind):
    """Differentiable mode: a thrown body, 2 steps under the build's gravity, then 2 under G_NEW; the backward
    re-runs every substep (stepping.substep_grad) with the gravity that substep ran with in the forward (read from
    the solver's parameters as each substep starts), and leaves G_NEW set. The loss, w . (centre-of-mass
    velocity), has gradient w with respect to the throw's velocity (free flight: v_end = v0 + sum g dt)."""
    scene, ent, solver = falling_body(kind, requires_grad=True)
    i = solver.gravity_param
    seen = []
    pre = solver.substep_pre_coupling

    def spy(f):  # an instance attribute: the scene's loop and the backward's re-run call it
        seen.append(tuple(solver.params_f[i:i + 3].tolist()))
        pre(f)

    solver.substep_pre_coupling = spy
    v_throw = torch.tensor([0.1, -0.2, 0.3], dtype=F64, requires_grad=True)
    ent.set_velocity(v_throw)
    run(scene, 2)
    scene.set_gravity(G_NEW)
    run(scene, 2)
    forward = list(seen)
    assert forward == [G_BUILD] * 2 * SUBSTEPS + [G_NEW] * 2 * SUBSTEPS
    w = torch.tensor([0.7, -1.3, 2.0], dtype=F64)
    loss = (com_vel(ent, solver) * w).sum()
    expected = v_throw.detach() + (torch.tensor(G_BUILD, dtype=F64) + torch.tensor(G_NEW, dtype=F64)) * 2 * DT
    assert float(loss.detach()) == pytest.approx(float((expected * w).sum()), abs=1e-12)
    seen.clear()
    loss.backward()
    assert seen == forward[::-1]
    torch.testing.assert_close(v_throw.grad, w, atol=1e-10, rtol=0)
    assert scene.sim_options.gravity == G_NEW
    assert tuple(solver.params_f[i:i + 3].tolist()) == pytest.approx(G_NEW, abs=0)


@pytest.mark.parametrize("kind", SOLVERS)
def test_gravity_set_before_build_is_the_one_the_solver_builds_with(kind):
    """set_gravity before build: the solver builds with G_NEW, and the body's centre-of-mass velocity after 3 steps
    is G_NEW * 3 dt."""
    scene, ent, solver = falling_body(kind, build=False)
    scene.set_gravity(G_NEW)
    scene.build()
    assert scene.sim_options.gravity == G_NEW
    run(scene, 3)
    torch.testing.assert_close(com_vel(ent, solver), torch.tensor(G_NEW, dtype=F64) * 3 * DT, atol=1e-12, rtol=0)


def test_sph_keeps_a_gravity_set_before_its_first_step_where_a_plane_is_a_wall():
    """SPH turns off the wall a static plane lies on at its first substep (rewriting those switches in its
    parameters): gravity set between build and that substep survives it. A droplet over a ground plane on the
    domain's floor, set_gravity(G_NEW) right after build: 3 steps change its centre-of-mass velocity by G_NEW * 3 dt."""
    pytest.importorskip("genesis_rigid")
    scene, ent, solver = falling_body("sph", build=False)
    scene.add_entity(gs.morphs.Plane())
    scene.build()
    scene.set_gravity(G_NEW)
    run(scene, 3)
    from genesis_sph.kernels import P_WALLS

    assert float(solver.params_f[P_WALLS + 4]) == 0.0  # the floor's wall is off: the plane is that wall
    torch.testing.assert_close(com_vel(ent, solver), torch.tensor(G_NEW, dtype=F64) * 3 * DT, atol=1e-12, rtol=0)


def test_a_particle_solver_without_set_gravity_is_refused_after_build_naming_it():
    """The kit's ParticleSolver has no set_gravity of its own (a solver opts in through ParamsGravity): the test
    pellets (tests/pellets) have none, so set_gravity after build names PelletSolver and changes nothing."""
    name = plugins.register_plugin(pellets_plugin, name="pellets")
    try:
        scene = gs.Scene(sim_options=gs.options.SimOptions(dt=DT, gravity=G_BUILD),
                         pellet_options=gs.options.PelletOptions(lower_bound=(-1, -1, -1), upper_bound=(1, 1, 1),
                                                                 particle_size=0.02))
        scene.add_entity(gs.morphs.Sphere(pos=(0, 0, 0), radius=0.01), material=gs.materials.Pellet(rho=1000.0))
        scene.build()
        assert not hasattr(scene.pellet_solver, "set_gravity")
        with pytest.raises(gs.SceneError, match="PelletSolver.*before scene.build"):
            scene.set_gravity(G_NEW)
        assert scene.sim_options.gravity == G_BUILD and scene.pellet_solver.sim_options.gravity == G_BUILD
    finally:
        plugins.unregister_plugin(name)
