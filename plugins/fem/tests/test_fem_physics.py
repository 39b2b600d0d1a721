"""FEM physics against exact and analytic results (float64, Box meshes: structured cells of 6 tets each, so that
the faces' vertices are known): the patch test, the bar's wave speed, a cantilever's sag and first frequency
(Euler-Bernoulli), free fall (the integrators' discrete formulas), momentum, the floor, vertex constraints, and
batched environments against single ones (bitwise)."""

import math

import numpy as np
import pytest
import torch

import genesis_core as gs

G = 9.81


def make(size, cells_across, model="linear", E=1e6, nu=0.0, rho=1000.0, pos=(0.0, 0.0, 0.0), n_envs=0,
         dt=1e-3, substeps=1, gravity=(0.0, 0.0, 0.0), **fem):
    """One Box entity meshed in cubic cells of edge min(size) / cells_across (maxvolume = h^3 / 3)."""
    h = min(size) / cells_across
    opts = dict(floor_height=-10.0)
    opts.update(fem)
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=dt, substeps=substeps, gravity=gravity),
                     fem_options=gs.options.FEMOptions(**opts))
    ent = scene.add_entity(gs.morphs.Box(pos=pos, size=size, maxvolume=h ** 3 / 3),
                           material=gs.materials.FEM.Elastic(E=E, nu=nu, rho=rho, model=model))
    scene.build(n_envs=n_envs)
    return scene, ent


def implicit(**kw):
    """Implicit options for static solves: no Rayleigh damping, tight Newton and CG tolerances."""
    base = dict(use_implicit_solver=True, n_newton_iterations=4, n_pcg_iterations=3000, pcg_threshold=1e-12,
                newton_dx_threshold=1e-10, damping_alpha=0.0, damping_beta=0.0)
    base.update(kw)
    return base


def rest(ent):
    return ent.get_particles_pos().numpy().copy()


def face(X, axis, side):
    """Indices of the vertices on the box face where coordinate `axis` is its min (side -1) or max (+1)."""
    c = X[:, axis]
    v = c.max() if side > 0 else c.min()
    return np.nonzero(np.abs(c - v) < 1e-9)[0]


def boundary_mask(X):
    lo, hi = X.min(0), X.max(0)
    return ((np.abs(X - lo) < 1e-9) | (np.abs(X - hi) < 1e-9)).any(1)


def affine(rng, X):
    A = np.eye(3) + 0.05 * rng.standard_normal((3, 3))
    assert np.linalg.det(A) > 0
    c = 0.01 * rng.standard_normal(3)
    return X @ A.T + c


# -- the patch test ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("model", ["linear", "linear_corotated", "stable_neohookean"])
def test_affine_field_exerts_no_force_inside(model):
    """Every vertex at A X + c, at rest, gravity off: one explicit substep leaves the interior vertices where they
    are (their elastic forces cancel), while the boundary ones, pulled by the unbalanced surface traction, move.
    Measured: interior displacement / boundary displacement <= 1e-13 (all three models)."""
    scene, ent = make((0.1, 0.1, 0.1), 4, model=model, E=1e5, nu=0.3, dt=1e-4)
    X = rest(ent)
    Y = affine(np.random.default_rng(0), X)
    ent.set_particles_pos(Y)
    scene.step()
    d = np.linalg.norm(ent.get_particles_pos().numpy() - Y, axis=1)
    inner = ~boundary_mask(X)
    assert inner.sum() == 27
    ratio = d[inner].max() / d[~inner].max()
    print(f"{model}: interior / boundary displacement {ratio:.2e}, boundary {d[~inner].max():.2e} m")
    assert d[~inner].max() > 1e-6
    assert ratio < 1e-10


@pytest.mark.parametrize("model", ["linear", "linear_corotated", "stable_neohookean"])
def test_patch_test_interior_reaches_the_affine_field(model):
    """The boundary held hard at A X + c, the interior started 1 mm off it, gravity off: the implicit solver
    (dt 1 s, quasi-static) brings the interior to A X + c to round-off (81 unknowns: CG is exact in <= 81
    iterations). Measured: max error / box size 6e-13 (all three models) after 3 steps."""
    scene, ent = make((0.1, 0.1, 0.1), 4, model=model, E=1e5, nu=0.3, dt=1.0,
                      **implicit(n_newton_iterations=4, n_pcg_iterations=120, pcg_threshold=1e-20,
                                 newton_dx_threshold=1e-12))
    X = rest(ent)
    Y = affine(np.random.default_rng(1), X)
    bnd = np.nonzero(boundary_mask(X))[0]
    inner = ~boundary_mask(X)
    start = Y.copy()
    start[inner] += 1e-3 * np.random.default_rng(2).standard_normal((inner.sum(), 3))
    ent.set_particles_pos(start)
    ent.set_vertex_constraints(bnd, Y[bnd])
    for _ in range(3):
        scene.step()
    x = ent.get_particles_pos().numpy()
    err = np.abs(x - Y).max() / 0.1
    print(f"{model}: patch test error {err:.2e}")
    assert np.array_equal(x[bnd], Y[bnd])
    assert err < 1e-8


# -- waves and beams ------------------------------------------------------------------------------------------------

def test_bar_wave_speed():
    """A bar 1.0 x 0.05 x 0.05 m (2 cells across: 960 tets), linear, nu = 0 (1-D wave speed c = sqrt(E / rho) =
    31.6 m/s), moving at v0 = 0.1 m/s along its axis when its x-min face is stopped (hard constraints): the
    compression front reaches the free far end, whose velocity reverses from v0 to -v0; the half-way crossing
    (v = 0, interpolated) is at L / c within 3%. Measured: 0.03218 s against 0.03162 s (+1.8%)."""
    E, rho, L = 1e6, 1000.0, 1.0
    dt = 5e-5
    scene, ent = make((L, 0.05, 0.05), 2, E=E, rho=rho, dt=2 * dt, substeps=2)
    X = rest(ent)
    ent.set_velocity(torch.tensor([0.1, 0.0, 0.0], dtype=torch.float64))
    ent.set_vertex_constraints(face(X, 0, -1))
    far = face(X, 0, 1)
    c = math.sqrt(E / rho)
    ts, vs = [0.0], [0.1]
    while ts[-1] < 1.3 * L / c:
        scene.step()
        ts.append(ts[-1] + 2 * dt)
        vs.append(float(ent.get_particles_vel().numpy()[far, 0].mean()))
    vs = np.array(vs)
    k = int(np.argmax(vs < 0.0))
    assert k > 0, "the front never arrived"
    t_half = ts[k - 1] + (ts[k] - ts[k - 1]) * vs[k - 1] / (vs[k - 1] - vs[k])
    print(f"wave: arrival {t_half:.5f} s, L / c = {L / c:.5f} s ({t_half * c / L - 1:+.2%})")
    assert t_half == pytest.approx(L / c, rel=0.03)
    assert vs[-1] < -0.05  # reflected: the end moves back


CANT = dict(L=0.4, b=0.04, E=4e7, rho=1000.0)


def cantilever_sag_ratio():
    L, b, E, rho = CANT["L"], CANT["b"], CANT["E"], CANT["rho"]
    return rho * G * b * b * L ** 4 / (8 * E * b ** 4 / 12)


def cantilever(cells, model="linear", **kw):
    L, b = CANT["L"], CANT["b"]
    scene, ent = make((L, b, b), cells, model=model, E=CANT["E"], rho=CANT["rho"], pos=(L / 2, 0, 0),
                      gravity=(0, 0, -G), **kw)
    X = rest(ent)
    ent.set_vertex_constraints(face(X, 0, -1))
    return scene, ent, X, face(X, 0, 1)


def tip_sag(ent, X, tip):
    return -float((ent.get_particles_pos().numpy()[tip, 2] - X[tip, 2]).mean())


def static_sag(cells):
    """The beam's static tip sag: one implicit step of dt 100 s (the inertia term, M / dt^2, is 1e-8 of the
    softest mode's stiffness), the linear model's Newton step solved by CG to r.z < 1e-16 of the first."""
    scene, ent, X, tip = cantilever(cells, dt=100.0, **implicit(n_newton_iterations=2, n_pcg_iterations=20000,
                                                                pcg_threshold=1e-16))
    scene.step()
    return tip_sag(ent, X, tip), ent.n_elements


def test_cantilever_sag_converges_to_euler_bernoulli():
    """A beam L = 0.4, h = b = 0.04 m, E = 4e7 Pa, nu = 0, clamped at x = 0, under gravity: the static tip sag
    against Euler-Bernoulli q L^4 / (8 E I) = 5.886 mm on three meshes, 2, 4 and 8 cells across (480, 3840 and
    30720 tets). Linear tets lock in bending; the error falls as h^2. Measured: sag / EB = 0.555, 0.831, 0.955
    (the finest within 5%; shear adds 0.8% for L / h = 10)."""
    delta = cantilever_sag_ratio()
    ratios = []
    for cells in (2, 4, 8):
        sag, n = static_sag(cells)
        ratios.append(sag / delta)
        print(f"cantilever {cells} cells across ({n} tets): sag {sag * 1e3:.4f} mm, EB {delta * 1e3:.4f} mm, "
              f"ratio {ratios[-1]:.4f}")
    assert ratios[0] < ratios[1] < ratios[2] < 1.0
    assert ratios[2] == pytest.approx(1.0, abs=0.05)
    # the error falls as h^2: a quarter from one mesh to the next, within measurement
    assert 3.0 < (1 - ratios[1]) / (1 - ratios[2]) < 5.0


def test_cantilever_explicit_static_sag_matches_implicit():
    """The coarsest beam (2 cells across) settled by the explicit solver with damping (40 / s for 0.3 s: the first
    mode's amplitude decays by exp(-6)) sags as the implicit static solve, within 2%. Measured: 3.2692 mm against
    3.2655 mm (+0.11%)."""
    scene, ent, X, tip = cantilever(2, dt=4e-4, substeps=10, damping=40.0)
    for _ in range(750):
        scene.step()
    explicit_sag = tip_sag(ent, X, tip)
    scene, ent, X, tip = cantilever(2, dt=0.5, **implicit())
    for _ in range(4):
        scene.step()
    implicit_sag = tip_sag(ent, X, tip)
    print(f"explicit {explicit_sag * 1e3:.4f} mm, implicit {implicit_sag * 1e3:.4f} mm")
    assert explicit_sag == pytest.approx(implicit_sag, rel=0.02)


def test_cantilever_first_frequency():
    """The finest beam (8 cells across, 30720 tets) released straight under gravity and left to vibrate: the
    implicit solver with no Rayleigh damping at dt 4 ms (30 steps a period; backward Euler slows the frequency by
    atan(w dt) / (w dt) = 1.5% there and halves the amplitude each period, which the zero crossings do not mind;
    one Newton step solves the linear model). The tip's frequency against Euler-Bernoulli's (1.875^2 / (2 pi L^2))
    sqrt(E I / (rho A)) = 8.076 Hz, within 5%; the locked mesh is stiffer by 1 / sqrt(0.956) (its static sag),
    2.3%. Measured: 8.12 Hz (+0.6%); 8.210 Hz (+1.65%) at dt 2 ms with a tighter CG."""
    L, b, E, rho = CANT["L"], CANT["b"], CANT["E"], CANT["rho"]
    f_eb = 1.875 ** 2 / (2 * math.pi * L ** 2) * math.sqrt(E * b ** 2 / 12 / rho)
    dt = 4e-3
    scene, ent, X, tip = cantilever(8, dt=dt, **implicit(n_newton_iterations=1, n_pcg_iterations=5000,
                                                         pcg_threshold=1e-10))
    zs = []
    for _ in range(int(0.28 / dt)):
        scene.step()
        zs.append(tip_sag(ent, X, tip))
    zs = np.array(zs)
    t = dt * np.arange(1, len(zs) + 1)
    s = zs - cantilever_sag_ratio() * 0.956  # about the static sag (0.956 of Euler-Bernoulli's on this mesh)
    up = np.nonzero((s[:-1] < 0) & (s[1:] >= 0))[0]
    crossings = t[up] + dt * (-s[up] / (s[up + 1] - s[up]))
    assert len(crossings) >= 2
    f = (len(crossings) - 1) / (crossings[-1] - crossings[0])
    print(f"first frequency {f:.3f} Hz, EB {f_eb:.3f} Hz, ratio {f / f_eb:.4f}, amplitude {zs.max() - zs.min():.2e}")
    assert f == pytest.approx(f_eb, rel=0.05)


# -- free motion, the floor -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("solver", ["explicit", "implicit"])
def test_free_fall_follows_the_discrete_formula(solver):
    """A box far from the floor, at rest, gravity on: its centre of mass after n substeps is at
    z0 - g dt^2 n (n + 1) / 2, the formula of both symplectic and backward Euler (no Rayleigh damping), and its
    velocity -g n dt; the box keeps its shape. Measured: 1e-16 relative (explicit and implicit)."""
    kw = implicit() if solver == "implicit" else {}
    dt, sub, steps = (2e-3, 5, 10) if solver == "implicit" else (2e-4, 10, 10)  # explicit: stable below ~1e-3
    scene, ent = make((0.05, 0.05, 0.05), 2, E=1e5, nu=0.3, pos=(0, 0, 1.0), dt=dt * sub, substeps=sub,
                      gravity=(0, 0, -G), **kw)
    X = rest(ent)
    for _ in range(steps):
        scene.step()
    n = steps * sub
    x = ent.get_particles_pos().numpy()
    fall = X[:, 2].mean() - x[:, 2].mean()
    assert fall == pytest.approx(G * dt * dt * n * (n + 1) / 2, rel=1e-12)
    assert float(ent.get_particles_vel().numpy()[:, 2].mean()) == pytest.approx(-G * n * dt, rel=1e-12)
    assert np.abs((x - x.mean(0)) - (X - X.mean(0))).max() < 1e-12


def test_explicit_conserves_momentum_and_energy():
    """Gravity off, a box thrown with random vertex velocities (it translates and deforms): the explicit solver
    keeps its linear momentum to round-off (each element's forces sum to zero) and its energy, kinetic plus
    elastic, within 1% over 200 substeps. Measured: momentum drift 8e-16 relative, energy spread 0.4%."""
    dt = 2e-5
    scene, ent = make((0.05, 0.05, 0.05), 3, E=1e5, nu=0.3, pos=(0, 0, 1.0), dt=dt * 10, substeps=10)
    rng = np.random.default_rng(3)
    v = 0.2 * rng.standard_normal((ent.n_vertices, 3)) + np.array([0.5, -0.2, 0.1])
    ent.set_velocity(torch.tensor(v))
    m = scene.fem_solver.p_mass.numpy()

    def totals():
        vel = ent.get_particles_vel().numpy()
        kinetic = 0.5 * (m[:, None] * vel ** 2).sum()
        return (m[:, None] * vel).sum(0), kinetic + float(scene.fem_solver.element_energies()[0].sum())

    p0, e0 = totals()
    energies = []
    for _ in range(20):
        scene.step()
        p, e = totals()
        energies.append(e)
    drift = np.abs(p - p0).max() / np.abs(p0).max()
    print(f"momentum drift {drift:.2e}, energy range {(max(energies) - min(energies)) / e0:.2e} of {e0:.3e} J")
    assert drift < 1e-12
    assert max(abs(e - e0) for e in energies) < 0.01 * e0
    assert max(energies[5:]) - min(energies[5:]) > 0 and float(scene.fem_solver.element_energies().sum()) > 0


@pytest.mark.parametrize("solver", ["explicit", "implicit"])
def test_dropped_box_rests_on_the_floor(solver):
    """A box dropped from 5 cm onto the floor (at 0.02 m here) comes to rest on it: no vertex below the floor,
    the bottom face's vertices at it exactly, the box at rest."""
    kw = implicit(n_newton_iterations=2, n_pcg_iterations=200, pcg_threshold=1e-8, damping_alpha=0.5)
    kw = kw if solver == "implicit" else dict(damping=20.0)
    dt, sub = (5e-3, 2) if solver == "implicit" else (2e-4, 10)
    scene, ent = make((0.05, 0.05, 0.05), 2, E=1e5, nu=0.3, pos=(0, 0, 0.02 + 0.075), dt=dt * sub, substeps=sub,
                      gravity=(0, 0, -G), **{**kw, "floor_height": 0.02})
    X = rest(ent)
    bottom = face(X, 2, -1)
    for _ in range(int(0.6 / (dt * sub))):
        scene.step()
    x = ent.get_particles_pos().numpy()
    assert x[:, 2].min() == 0.02
    assert (x[bottom, 2] == 0.02).all()
    assert np.abs(ent.get_particles_vel().numpy()).max() < 2e-2
    assert x[:, 2].max() == pytest.approx(0.07, abs=2e-3)


# -- vertex constraints ---------------------------------------------------------------------------------------------

def test_vertex_constraints_hard_soft_update_remove():
    """Hard constraints hold vertices at their targets exactly (velocity 0) and follow update_constraint_targets;
    a soft one pulls toward its target; remove_vertex_constraints frees them (they fall)."""
    dt = 2e-4
    scene, ent = make((0.05, 0.05, 0.05), 2, E=1e5, nu=0.3, pos=(0, 0, 1.0), dt=dt * 10, substeps=10,
                      gravity=(0, 0, -G), damping=5.0)
    X = rest(ent)
    top = face(X, 2, 1)
    ent.set_vertex_constraints(top)
    for _ in range(20):
        scene.step()
    x, v = ent.get_particles_pos().numpy(), ent.get_particles_vel().numpy()
    assert np.array_equal(x[top], X[top]) and (v[top] == 0).all()
    assert x[:, 2].min() < X[:, 2].min() - 1e-6  # the rest hangs and sags
    target = X[top] + np.array([0.01, 0.0, 0.02])
    ent.update_constraint_targets(top, target)
    scene.step()
    assert np.array_equal(ent.get_particles_pos().numpy()[top], target)
    # soft: every vertex freed, then on a spring toward a target 2 cm along +x from where it is
    ent.remove_vertex_constraints()
    x = ent.get_particles_pos().numpy()
    ent.set_vertex_constraints(np.arange(ent.n_vertices), x + np.array([0.02, 0.0, 0.0]), is_soft_constraint=True,
                               stiffness=200.0)
    for _ in range(20):
        scene.step()
    moved = ent.get_particles_pos().numpy()[:, 0].mean() - x[:, 0].mean()
    assert 0.015 < moved < 0.0205, moved
    ent.remove_vertex_constraints()
    z0 = ent.get_particles_pos().numpy()[:, 2].mean()
    for _ in range(10):
        scene.step()
    assert ent.get_particles_pos().numpy()[:, 2].mean() < z0 - 0.5 * G * (10 * 10 * dt) ** 2 * 0.5


def test_soft_constraints_carry_the_weight():
    """Every vertex on a soft spring (stiffness k) to where it starts, gravity on: at rest the springs carry the
    weight, so the mean vertex displacement is M g / (n k) exactly (the elastic forces sum to zero). Measured:
    agreement to the 7 printed digits."""
    scene, ent = make((0.05, 0.05, 0.05), 2, E=1e5, nu=0.3, pos=(0, 0, 1.0), dt=0.05, substeps=1,
                      gravity=(0, 0, -G), **implicit(n_pcg_iterations=500))
    X = rest(ent)
    k = 50.0
    ent.set_vertex_constraints(np.arange(ent.n_vertices), X, is_soft_constraint=True, stiffness=k)
    for _ in range(40):
        scene.step()
    x = ent.get_particles_pos().numpy()
    M = float(scene.fem_solver.p_mass.sum())
    expect = M * G / (ent.n_vertices * k)
    print(f"soft: mean sag {X[:, 2].mean() - x[:, 2].mean():.6e}, M g / (n k) = {expect:.6e}")
    assert X[:, 2].mean() - x[:, 2].mean() == pytest.approx(expect, rel=1e-6)


# -- environments ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("solver", ["explicit", "implicit"])
def test_environments_match_single_runs_bitwise(solver):
    """Three environments thrown differently onto the floor (one vertex held hard, one soft) step exactly as
    three single-environment scenes with the same initial states: every position and velocity bitwise equal."""
    kw = implicit(n_newton_iterations=3, n_pcg_iterations=50, pcg_threshold=1e-6, n_linesearch_iterations=3,
                  damping_alpha=0.5, damping_beta=1e-3) if solver == "implicit" else dict(damping=1.0)
    dt, sub = (2e-3, 2) if solver == "implicit" else (2e-4, 5)
    vel = np.array([[0.5, 0.0, -1.0], [-0.3, 0.2, 0.0], [0.0, 0.0, -2.0]])

    def run(n_envs, v):
        scene, ent = make((0.05, 0.05, 0.05), 2, model="stable_neohookean", E=1e5, nu=0.3, pos=(0, 0, 0.04),
                          n_envs=n_envs, dt=dt * sub, substeps=sub, gravity=(0, 0, -G),
                          **{**kw, "floor_height": 0.0})
        ent.set_velocity(torch.tensor(v))
        ent.set_vertex_constraints([0], is_soft_constraint=True, stiffness=30.0)
        ent.set_vertex_constraints([5])
        for _ in range(15):
            scene.step()
        return ent.get_particles_pos().numpy(), ent.get_particles_vel().numpy()

    pos, v = run(3, vel)
    for b in range(3):
        p1, v1 = run(0, vel[b])
        assert np.array_equal(pos[b], p1) and np.array_equal(v[b], v1), b
    assert not np.array_equal(pos[0], pos[1])
