"""MPM muscles (`gs.materials.MPM.Muscle`): Genesis World's active stress k a (F m)(F m)^T along each particle's
fibre m, with k = E and a its group's actuation, in float64.

The equilibrium test is the analytic one: a free block whose fibres all point one way, under a uniform
actuation, deforms uniformly into F = Q diag(l, s, s) Q^T (Q taking x to the fibre), where the total Kirchhoff
stress vanishes; l and s solve the model's two stress equations (along and across the fibre), found here by
Newton's method. The rest checks what the state declaration promises: an idle muscle is its elastic material
bitwise, actuation reaches only its group and its environments, checkpoints carry it, gradients reach it, bad
input is refused with nothing changed.
"""

import numpy as np
import pytest
import torch

import genesis_core as gs
from genesis_core.testing import assert_close_rel, assert_unchanged, central_differences, scene_fields

F64 = torch.float64


def block(material, n_envs=0, dt=2e-3, substeps=4, gravity=(0, 0, 0), size=0.1, requires_grad=False, density=40):
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=dt, substeps=substeps, gravity=gravity,
                                                       requires_grad=requires_grad),
                     mpm_options=gs.options.MPMOptions(lower_bound=(0, 0, 0), upper_bound=(0.4, 0.4, 0.4),
                                                       grid_density=density))
    body = scene.add_entity(gs.morphs.Box(pos=(0.2, 0.2, 0.2), size=(size,) * 3), material=material)
    scene.build(n_envs=n_envs)
    return scene, body


def equilibrium(model, E, nu, gain):
    """(l, s): the stretch along and across the fibre where tau = 0 for F = diag(l, s, s), fibre x, k a = gain."""
    mu, lam = E / (2 * (1 + nu)), E * nu / ((1 + nu) * (1 - 2 * nu))

    def residual(x):
        l, s = x
        J = l * s * s
        if model == "neohooken":  # tau = mu (F F^T - I) + lam log(J) I
            vol = lam * np.log(J)
            return np.array([mu * (l * l - 1) + vol + gain * l * l, mu * (s * s - 1) + vol])
        vol = lam * J * (J - 1)  # corotation: tau = 2 mu (F - R) F^T + lam J (J - 1) I
        return np.array([2 * mu * (l - 1) * l + vol + gain * l * l, 2 * mu * (s - 1) * s + vol])

    x = np.array([1.0, 1.0])
    for _ in range(60):
        r = residual(x)
        jac = np.stack([(residual(x + h) - residual(x - h)) / 2e-7 for h in np.eye(2) * 1e-7], 1)
        x = x - np.linalg.solve(jac, r)
    assert np.abs(residual(x)).max() < 1e-6 * E
    return x


@pytest.mark.parametrize("model", ["neohooken", "corotation"])
def test_free_muscle_reaches_the_closed_form_stretch_along_and_across_its_fibre(model):
    """Actuation ramped over 0.3 s, then held: the particles' mean F over the last 0.1 s (it still rings by
    about 0.4%) against the uniform equilibrium; environment 0's fibres along x, environment 1's along the
    diagonal (1, 1, 0) / sqrt(2), which rotates the same stretches. The block contracts 20% along its fibre and
    thickens across it."""
    E, nu, a = 1e4, 0.3, 0.3
    l, s = equilibrium(model, E, nu, E * a)
    scene, muscle = block(gs.materials.MPM.Muscle(E=E, nu=nu, model=model), n_envs=2)
    d = np.array([1.0, 1.0, 0.0]) / np.sqrt(2)
    muscle.set_muscle(muscle_direction=[1.0, 0.0, 0.0], envs_idx=[0])
    muscle.set_muscle(muscle_direction=d, envs_idx=[1])
    mpm, F_sum, n = scene.mpm_solver, torch.zeros(2, 3, 3, dtype=F64), 0
    for i in range(250):
        muscle.set_actuation(a * min(1.0, i / 150))
        scene.step()
        if i >= 200:
            F_sum += mpm.state.at("F", mpm.frame).mean(1)
            n += 1
    F = (F_sum / n).numpy()
    Q = np.array([d, [-d[1], d[0], 0.0], [0.0, 0.0, 1.0]]).T  # x -> d
    want = [np.diag([l, s, s]), Q @ np.diag([l, s, s]) @ Q.T]
    assert l < 0.85 and s > 1.03
    for env in range(2):
        assert np.abs(F[env] - want[env]).max() < 5e-3 * l, (model, env, F[env], want[env])


@pytest.mark.parametrize("model", ["neohooken", "corotation"])
def test_an_idle_muscle_is_its_elastic_material_bitwise(model):
    """A muscle thrown at the floor with its actuation zero (set, with fibres set too) moves bitwise as the
    Elastic material of the same model."""
    runs = []
    for material in (gs.materials.MPM.Muscle(E=2e4, model=model, n_groups=2),
                     gs.materials.MPM.Elastic(E=2e4, model=model)):
        scene, body = block(material, gravity=(0, 0, -9.81), substeps=2)
        body.set_velocity([0.5, 0.2, -1.0])
        if isinstance(material, gs.materials.MPM.Muscle):
            body.set_muscle(muscle_group=(torch.arange(body.n_particles) % 2), muscle_direction=(0.0, 0.6, 0.8))
            body.set_actuation(0.0)
        for _ in range(40):
            scene.step()
        runs.append(scene.get_state().fields_by_key())
    for key in ("MPMSolver.pos", "MPMSolver.vel", "MPMSolver.C", "MPMSolver.F"):
        assert torch.equal(runs[0][key], runs[1][key]), key
    assert not torch.equal(runs[0]["MPMSolver.mdir"], runs[1]["MPMSolver.mdir"])


def test_actuation_reaches_only_its_group():
    """A bar along x in three groups (its thirds), fibres along y: each particle's actuation is its group's; with
    only the last third actuated, the first third, 6.7 cells from it, is after one substep bitwise where it is
    without actuation, still at rest (a substep carries momentum at most 3 cells: 1.5 cells from particle to
    node, 1.5 back), while the last third contracts along y."""
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=1e-3, substeps=1, gravity=(0, 0, 0)),
                     mpm_options=gs.options.MPMOptions(lower_bound=(0, 0, 0), upper_bound=(0.6, 0.3, 0.3),
                                                       grid_density=40))
    bar = scene.add_entity(gs.morphs.Box(pos=(0.3, 0.15, 0.15), size=(0.5, 0.05, 0.05)),
                           material=gs.materials.MPM.Muscle(E=1e4, n_groups=3))
    scene.build()
    x = bar.get_particles_pos()[:, 0]
    group = ((x - 0.05) / (0.5 / 3)).long().clamp(0, 2)
    bar.set_muscle(muscle_group=group, muscle_direction=(0.0, 1.0, 0.0))
    assert torch.equal(bar.get_muscle_group(), group.int())
    start = scene.get_state()
    scene.step()
    idle = bar.get_particles_pos()
    scene.reset(start)
    bar.set_actuation([0.0, 0.0, 0.8])
    assert torch.equal(bar.get_actuation(), 0.8 * (group == 2).double())
    scene.step()
    p = bar.get_particles_pos()
    first, last = group == 0, group == 2
    assert torch.equal(p[first], idle[first])
    assert not bar.get_particles_vel()[first].any()
    width = lambda q: float((q[:, 1] - 0.15).abs().max())  # noqa: E731
    assert width(p[last]) < width(idle[last]) - 1e-4


def test_actuation_per_environment_leaves_the_others_bitwise_untouched():
    """Three environments; actuation set in environment 1 only: environments 0 and 2 are bitwise what they are
    without any actuation, environment 1 contracts along the fibre."""
    scene, muscle = block(gs.materials.MPM.Muscle(E=1e4), n_envs=3, substeps=2, gravity=(0, 0, -9.81))
    start = scene.get_state()

    def run():
        for _ in range(20):
            scene.step()
        return muscle.get_particles_pos()

    idle = run()
    scene.reset(start)
    muscle.set_actuation([0.5], envs_idx=[1])
    assert torch.equal(muscle.get_actuation()[[0, 2]], torch.zeros(2, muscle.n_particles, dtype=F64))
    moved = run()
    assert torch.equal(moved[[0, 2]], idle[[0, 2]])
    height = lambda p: float(p[:, 2].max() - p[:, 2].min())  # noqa: E731 (the default fibre is +z)
    assert height(moved[1]) < height(idle[1]) - 1e-3


def test_checkpoint_and_reset_carry_actuation_and_fibres(tmp_path):
    """Fibres and actuation set, a checkpoint saved, 10 steps; a freshly built scene that never set them loads the
    checkpoint and repeats those 10 steps bitwise. A bare reset() keeps the fibres (they are the body's), and
    returns the actuation to the registered initial state's."""
    def make():
        return block(gs.materials.MPM.Muscle(E=1e4, n_groups=2), n_envs=2, substeps=2, gravity=(0, 0, -9.81))

    scene, muscle = make()
    half = (muscle.get_particles_pos()[0, :, 0] > 0.2).long()
    muscle.set_muscle(muscle_group=half, muscle_direction=[0.0, 0.0, -1.0], envs_idx=[1])
    muscle.set_actuation([[0.2, 0.4], [0.6, 0.1]])
    path = tmp_path / "muscle.ckpt"
    scene.save_checkpoint(path)
    for _ in range(10):
        scene.step()
    want = scene.get_state().fields_by_key()

    other, _ = make()
    other.load_checkpoint(path)
    for _ in range(10):
        other.step()
    for key, x in other.get_state().fields_by_key().items():
        assert torch.equal(x, want[key]), key

    scene.reset()
    assert torch.equal(muscle.get_muscle_direction()[1], torch.tensor([[0.0, 0.0, -1.0]], dtype=F64).expand(
        muscle.n_particles, 3))
    assert not muscle.get_actuation().any()


def rollout(scene, muscle, actu):
    """Five steps, the actuation of the two groups changing at each (as Genesis World's scripts set it)."""
    for i in range(5):
        muscle.set_actuation(actu * (1.0 + 0.2 * i))
        scene.step()
    p = muscle.get_particles_pos()
    return (p[:, 0] ** 2).mean() + 0.5 * (p[:, 2] * p[:, 1]).mean()


@pytest.mark.parametrize("model", ["neohooken", "corotation"])
def test_gradient_wrt_actuation_matches_finite_differences(model):
    """dL/d(actuation of each group), one backward through 5 steps of 6 substeps, against central differences
    of the plain scene: the same physics, one implementation."""
    material = gs.materials.MPM.Muscle(E=1e4, model=model, n_groups=2)

    def make(requires_grad):
        scene, muscle = block(material, substeps=6, dt=6e-3, size=0.08, density=32, requires_grad=requires_grad)
        pos = muscle.get_particles_pos().detach()
        muscle.set_muscle(muscle_group=(pos[:, 2] > 0.2).long(), muscle_direction=[0.6, 0.0, 0.8])
        return scene, muscle

    a0 = torch.tensor([0.3, 0.7], dtype=F64)
    scene, muscle = make(True)
    a = a0.clone().requires_grad_(True)
    loss = rollout(scene, muscle, a)
    loss.backward()
    ref, ref_muscle = make(False)

    def f(x):
        ref.reset()
        return float(rollout(ref, ref_muscle, x))

    assert abs(f(a0) - float(loss.detach())) < 1e-12 * abs(f(a0))
    fd = central_differences(f, a0, 1e-5)
    assert float(fd.abs().min()) > 1e-6
    assert_close_rel(a.grad, fd, tol=1e-5)


def test_bad_muscle_input_is_refused_and_changes_nothing():
    scene, muscle = block(gs.materials.MPM.Muscle(E=1e4, n_groups=2), n_envs=2)
    n = muscle.n_particles
    before = scene_fields(scene)
    group = muscle.get_muscle_group()
    cases = [
        (lambda: muscle.set_actuation([0.1, 0.2, 0.3]), "set_actuation: expected a value of shape"),
        (lambda: muscle.set_actuation(torch.ones(3, 2)), "set_actuation: expected a value of shape"),
        (lambda: muscle.set_actuation([0.1, float("nan")]), r"actuation\[env 0, group 1\] = nan is not accepted"),
        (lambda: muscle.set_actuation([0.1, float("inf")], envs_idx=[1]), r"actuation\[env 1, group 1\] = inf"),
        (lambda: muscle.set_actuation("strong"), "set_actuation"),
        (lambda: muscle.set_actuation([0.1, 0.2], envs_idx=[2]), "envs_idx"),
        (lambda: muscle.set_muscle(muscle_group=torch.full((n,), 2)), r"muscle_group\[0\] = 2 .* \[0, 2\)"),
        (lambda: muscle.set_muscle(muscle_group=-1), r"muscle_group\[0\] = -1"),
        (lambda: muscle.set_muscle(muscle_group=torch.zeros(n + 1, dtype=torch.long)), "muscle_group must be"),
        (lambda: muscle.set_muscle(muscle_group=torch.full((n,), 0.5)), "whole numbers"),
        (lambda: muscle.set_muscle(muscle_direction=[0.0, 0.0, 0.0]), "norm 0.0: expected unit vectors"),
        (lambda: muscle.set_muscle(muscle_direction=[float("nan"), 0.0, 1.0]), "expected unit vectors"),
        (lambda: muscle.set_muscle(muscle_direction=[0.0, 2.0, 0.0]), "norm 2.0"),
        (lambda: muscle.set_muscle(muscle_direction=torch.ones(n, 2)), "muscle_direction must be shaped"),
        # nothing is written when either part is refused
        (lambda: muscle.set_muscle(muscle_group=torch.ones(n, dtype=torch.long), muscle_direction=[0, 0, 0]),
         "expected unit vectors"),
    ]
    for call, message in cases:
        with pytest.raises(gs.OptionError, match=message):
            call()
        assert_unchanged(scene_fields(scene), before)
        assert torch.equal(muscle.get_muscle_group(), group)
    scene2, elastic = block(gs.materials.MPM.Elastic())
    with pytest.raises(gs.OptionError, match="not a muscle material"):
        elastic.set_actuation(0.5)
    with pytest.raises(gs.OptionError, match="Muscle.n_groups"):
        gs.materials.MPM.Muscle(n_groups=0)
    with pytest.raises(gs.OptionError, match="Muscle.model"):
        gs.materials.MPM.Muscle(model="stable_neohookean")
