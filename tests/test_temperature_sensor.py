"""TemperatureGrid (gs.sensors.TemperatureGrid, TemperatureProperties) against analytic heat transfer: Newton cooling
of a lumped body, the first conduction mode of a bar, the Stefan-Boltzmann rate, heat exchange between two touching
bodies (energy conserved, capacity-weighted equilibrium), the sensing element's first-order lag; its state in
snapshots, per-environment resets and checkpoints; stability at a step far beyond every explicit limit; refusals.

Scenes are small and built once per module (the rigid kernels' compilation dominates). Float64 on the CPU
(genesis_core.testing.RUNTIME). The bodies that must not touch anything are fixed boxes far apart; the convection
coefficient and the ambient temperature are shared by every TemperatureGrid of a scene (Genesis World's rule), hence
one scene without convection (A) and one with (B)."""

import math

import numpy as np
import pytest
import torch

import genesis_core as gs
from genesis_core.sensors.temperature import KELVIN, STEFAN_BOLTZMANN

P = gs.sensors.TemperatureProperties
DT = 0.01
SIDE = 0.1  # m, the cubes' edge
RHO_C = 1000.0  # J/(m^3 K): density 1000 kg/m^3, specific heat 1 J/(kg K) (Genesis World's defaults)
AMBIENT = 20.0
H = 10.0  # W/(m^2 K), scene B's convection coefficient
BAR = (0.4, 0.05, 0.05)  # m, the conduction bar
BAR_CELLS = 16
TAU = 0.05  # s, the lag sensor's time constant
Q_GEN = (2000.0, 500.0)  # W/m^2, the heated cube's two cells
N_ENVS = 2


def _cube_capacity(rho_c=RHO_C):
    return rho_c * SIDE**3  # J/K


def _scene_a():
    """No convection (h = 0). A radiating cube, a conduction bar, a cube with a lagging sensor element, and a hot
    cube on a fixed cold cube (its lumped temperature simulated), all but the pair far apart."""
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=DT))
    hot_rad = scene.add_entity(gs.morphs.Box(pos=(5, 0, 0), size=(SIDE,) * 3, fixed=True))
    bar = scene.add_entity(gs.morphs.Box(pos=(0, 5, 0), size=BAR, fixed=True))
    lag = scene.add_entity(gs.morphs.Box(pos=(-5, 0, 0), size=(SIDE,) * 3, fixed=True))
    gen = scene.add_entity(gs.morphs.Box(pos=(0, -5, 0), size=(SIDE,) * 3, fixed=True))
    cold = scene.add_entity(gs.morphs.Box(pos=(0, 0, 0), size=(SIDE,) * 3, fixed=True))
    hot = scene.add_entity(gs.morphs.Box(pos=(0, 0, SIDE), size=(SIDE,) * 3))
    props = {
        hot_rad.base_link_idx: P(base_temperature=200.0, conductivity=50.0, emissivity=0.8),
        bar.base_link_idx: P(base_temperature=50.0, conductivity=20.0, density=2000.0, specific_heat=2.0,
                             emissivity=0.0),
        lag.base_link_idx: P(base_temperature=30.0, emissivity=0.0),
        gen.base_link_idx: P(base_temperature=25.0, conductivity=5.0, emissivity=0.0),
        cold.base_link_idx: P(base_temperature=20.0, conductivity=100.0, density=2000.0, emissivity=0.0),
        hot.base_link_idx: P(base_temperature=80.0, conductivity=200.0, emissivity=0.0),
    }
    common = dict(properties_dict=props, ambient_temperature=AMBIENT, convection_coefficient=0.0)
    s = dict(
        rad=scene.add_sensor(gs.sensors.TemperatureGrid(entity_idx=hot_rad.idx, sensor_time_constant=0.0, **common)),
        bar=scene.add_sensor(gs.sensors.TemperatureGrid(entity_idx=bar.idx, grid_size=(BAR_CELLS, 1, 1),
                                                        sensor_time_constant=0.0, **common)),
        lag=scene.add_sensor(gs.sensors.TemperatureGrid(entity_idx=lag.idx, sensor_time_constant=TAU, **common)),
        gen=scene.add_sensor(gs.sensors.TemperatureGrid(entity_idx=gen.idx, grid_size=(1, 1, 2),
                                                        heat_generation=[[[Q_GEN[0], Q_GEN[1]]]],
                                                        sensor_time_constant=0.0, **common)),
        cold=scene.add_sensor(gs.sensors.TemperatureGrid(entity_idx=cold.idx, grid_size=(2, 2, 1),
                                                         simulate_all_link_temperatures=True, **common)),
    )
    scene.build(n_envs=N_ENVS)
    return scene, dict(hot_rad=hot_rad, bar=bar, lag=lag, gen=gen, cold=cold, hot=hot), s


@pytest.fixture(scope="module")
def a():
    scene, e, s = _scene_a()
    return scene, e, s, scene.get_state()


def _scene_b():
    """Convection h = H, no radiation: a cooling cube (1x1x1) and a noisy, delayed cube sensor (2x1x1) on a box
    resting on a fixed one, for the state tests."""
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=DT))
    cube = scene.add_entity(gs.morphs.Box(pos=(5, 0, 0), size=(SIDE,) * 3, fixed=True))
    base = scene.add_entity(gs.morphs.Box(pos=(0, 0, 0), size=(SIDE,) * 3, fixed=True))
    top = scene.add_entity(gs.morphs.Box(pos=(0, 0, SIDE), size=(SIDE,) * 3))
    props = {-1: P(base_temperature=AMBIENT, emissivity=0.0),
             cube.base_link_idx: P(base_temperature=90.0, emissivity=0.0),
             top.base_link_idx: P(base_temperature=70.0, conductivity=300.0, emissivity=0.0)}
    common = dict(properties_dict=props, ambient_temperature=AMBIENT, convection_coefficient=H)
    s = dict(
        cube=scene.add_sensor(gs.sensors.TemperatureGrid(entity_idx=cube.idx, sensor_time_constant=0.0, **common)),
        noisy=scene.add_sensor(gs.sensors.TemperatureGrid(entity_idx=base.idx, grid_size=(2, 1, 1), noise=0.1,
                                                          delay=2 * DT, simulate_all_link_temperatures=True,
                                                          **common)),
    )
    scene.build(n_envs=3)
    return scene, dict(cube=cube, base=base, top=top), s


@pytest.fixture(scope="module")
def b():
    scene, e, s = _scene_b()
    return scene, e, s, scene.get_state()


def _set_aux(state, scene, sensor, values, part=0):
    """A copy of `state` whose sensor's cells (part 0) or sensing elements (part 1) hold `values` ([n_envs,
    n_cells]). (reset(state) makes the state the scene's initial one: each test resets to the build state or to
    such a copy of it.)"""
    state = state.clone()
    sub = state.solvers_state[scene.solvers.index(scene.sensor_manager)]
    n = sensor.options.n_cells
    start = sensor.aux.start + part * n
    sub.aux[:, start:start + n] = torch.as_tensor(values, dtype=sub.aux.dtype)
    return state


# -- analytic references -----------------------------------------------------------------------------------------


def test_convection_cools_a_lumped_cube_exponentially(b):
    """One cell, convection only: rho c V dT/dt = -h A (T - T_amb), so T = T_amb + (T0 - T_amb) exp(-h A t / (rho c
    V)). The update multiplies T - T_amb by exp(-dt h A / C) each step: exact for this linear law at any dt, so
    the tolerance is rounding (1e-10 K over 100 steps); explicit Euler would be off by ~ (h A dt / C)^2 / 2 per
    step, 1.8e-5 relative each step here, 5e-3 K after 100 steps."""
    scene, _, s, fresh = b
    scene.reset(fresh)
    rate = H * 6 * SIDE**2 / _cube_capacity()
    for n in range(1, 101):
        scene.step()
        want = AMBIENT + (90.0 - AMBIENT) * math.exp(-rate * n * DT)
        got = s["cube"].read_ground_truth()
        assert got.shape == (3, 1, 1, 1)
        assert torch.allclose(got, torch.full_like(got, want), atol=1e-10, rtol=0), (n, got.flatten(), want)
    assert torch.equal(s["cube"].read(), s["cube"].read_ground_truth())  # tau = 0, no noise: the same


def test_conduction_relaxes_the_first_mode_of_a_bar_at_pi2_alpha_over_L2(a):
    """A bar of 16 cells along x, insulated (h = 0, emissivity 0): T = mean + A cos(pi x / L) keeps its shape and
    its amplitude decays as exp(-lambda alpha t). The finite-volume eigenvalue is (2 n / L)^2 sin^2(pi / (2 n)),
    integrated exactly in time, so the measured rate matches it to rounding (1e-9), and the continuum's pi^2 / L^2
    within its spatial error (pi / (2 n))^2 / 3 = 0.32%; the mean (the energy) stays to 1e-12."""
    scene, _, s, fresh = a
    L, n = BAR[0], BAR_CELLS
    alpha = 20.0 / (2000.0 * 2.0)  # k / (rho c), m^2/s
    x = (np.arange(n) + 0.5) / n
    mode = np.cos(np.pi * x)
    amp = np.array([10.0, -4.0])  # per environment
    scene.reset(_set_aux(fresh, scene, s["bar"], 50.0 + amp[:, None] * mode[None, :]))
    steps = 50
    for _ in range(steps):
        scene.step()
    cells = s["bar"].read_ground_truth().reshape(N_ENVS, n).numpy()
    assert np.allclose(cells.mean(1), 50.0, atol=1e-12, rtol=0)
    got_amp = (cells - 50.0) @ mode / (mode @ mode)
    rate = -np.log(got_amp / amp) / (steps * DT)
    discrete = alpha * (2 * n / L) ** 2 * math.sin(math.pi / (2 * n)) ** 2
    continuum = alpha * math.pi**2 / L**2
    assert np.allclose(rate, discrete, rtol=1e-9, atol=0), (rate, discrete)
    assert np.all(np.abs(rate / continuum - 1) < (math.pi / (2 * n)) ** 2 / 3 * 1.05), (rate, continuum)
    shape = cells - 50.0 - got_amp[:, None] * mode[None, :]
    assert np.abs(shape).max() < 1e-10  # still the first mode
    # a single cell of the bar's neighbour test: conduction leaves a uniform bar alone
    scene.reset(fresh)
    scene.step()
    assert torch.allclose(s["bar"].read_ground_truth(), torch.tensor(50.0, dtype=torch.float64), atol=1e-12, rtol=0)


def test_radiation_rate_at_t0_is_stefan_boltzmann(a):
    """Emissivity 0.8, h = 0, a 200 C cube in a 20 C ambient: dT/dt(0) = -eps sigma A (T_K^4 - T_amb,K^4) / (rho c
    V). The step integrates with h_r frozen at T0, T - T_amb <- (T0 - T_amb) exp(-dt k0), k0 = A h_r / C, so the
    first step's mean rate is the exact initial rate times (1 - exp(-dt k0)) / (dt k0): relative error <= dt k0 / 2
    (0.46% here); tolerance dt k0 / 2 + 1e-9, and the rate is below the exact one (the body cools more slowly as
    it cools)."""
    scene, _, s, fresh = a
    scene.reset(fresh)
    scene.step()
    t0, tk, ak = 200.0, 200.0 + KELVIN, AMBIENT + KELVIN
    area, cap = 6 * SIDE**2, _cube_capacity()
    exact = -0.8 * STEFAN_BOLTZMANN * area * (tk**4 - ak**4) / cap
    rate = (s["rad"].read_ground_truth().flatten() - t0) / DT
    k0 = 0.8 * STEFAN_BOLTZMANN * (tk**2 + ak**2) * (tk + ak) * area / cap
    rel = (rate / exact - 1).abs()
    assert bool((rel < DT * k0 / 2 + 1e-9).all()), (rate, exact)
    assert bool((rate.abs() < abs(exact)).all())
    assert float(rel.max()) > DT * k0 / 4  # the first-order error is there (the test sees the scheme)


def test_contact_conserves_energy_and_settles_at_the_capacity_weighted_mean(a):
    """A hot (80 C) cube resting on a cold (20 C) fixed one, no convection or radiation: their heat (the cold
    cube's grid, rho c V_cell per cell, and the hot cube's lumped temperature) is conserved at every step (to
    rounding, 1e-9 J), and both reach (C_hot T_hot + C_cold T_cold) / (C_hot + C_cold) = 40 C (C_cold = 2 C_hot)."""
    scene, e, s, fresh = a
    scene.reset(fresh)
    c_hot, c_cell = _cube_capacity(), 2 * _cube_capacity() / 4
    hot_link = e["hot"].base_link_idx

    def energy():
        cells = s["cold"].read_ground_truth().reshape(N_ENVS, -1).sum(1) * c_cell
        return cells + c_hot * s["cold"].link_temperatures[:, hot_link]

    e0 = energy()
    assert torch.allclose(e0, torch.tensor(80.0 * c_hot + 20.0 * 2 * c_hot, dtype=torch.float64))
    moved = False
    for _ in range(300):
        scene.step()
        assert torch.allclose(energy(), e0, atol=1e-9, rtol=0)
        moved = moved or bool((s["cold"].link_temperatures[:, hot_link] < 79.0).all())
    assert moved
    want = (c_hot * 80.0 + 2 * c_hot * 20.0) / (3 * c_hot)
    temps = s["cold"].link_temperatures
    assert torch.allclose(temps[:, hot_link], torch.tensor(want, dtype=torch.float64), atol=1e-6, rtol=0)
    assert torch.allclose(s["cold"].read_ground_truth(), torch.tensor(want, dtype=torch.float64), atol=1e-6, rtol=0)
    assert torch.allclose(temps[:, e["cold"].base_link_idx], torch.tensor(want, dtype=torch.float64), atol=1e-6)


def test_heat_generation_adds_its_power_and_conduction_spreads_it(a):
    """An insulated cube of 2 cells along z, generating q_k W/m^2 over each cell's x-y face (Genesis World's unit):
    the total heat rises by dt sum_k q_k dx dy each step, so the mean temperature by dt mean(q) / (rho c dz)
    exactly (conduction moves heat, creates none); the cell generating more stays the warmer one."""
    scene, _, s, fresh = a
    scene.reset(fresh)
    dz = SIDE / 2
    per_step = DT * (Q_GEN[0] + Q_GEN[1]) / 2 / (RHO_C * dz)
    for n in range(1, 31):
        scene.step()
        cells = s["gen"].read_ground_truth().reshape(N_ENVS, 2)
        assert torch.allclose(cells.mean(1), torch.tensor(25.0 + n * per_step, dtype=torch.float64), atol=1e-10,
                              rtol=0)
        assert bool((cells[:, 0] > cells[:, 1]).all())


def test_sensing_element_lags_with_its_time_constant(a):
    """The cube is insulated at 30 C; its sensing element starts at 20 C: read() = 30 - 10 exp(-t / tau) at every
    step (the update is exact for a temperature constant over the step), while read_ground_truth() stays 30."""
    scene, _, s, fresh = a
    scene.reset(_set_aux(fresh, scene, s["lag"], [[20.0], [20.0]], part=1))
    for n in range(1, 21):
        scene.step()
        want = 30.0 - 10.0 * math.exp(-n * DT / TAU)
        assert torch.allclose(s["lag"].read(), torch.tensor(want, dtype=torch.float64), atol=1e-12, rtol=0)
        assert torch.allclose(s["lag"].read_ground_truth(), torch.tensor(30.0, dtype=torch.float64), atol=1e-12,
                              rtol=0)


def test_get_contacts_reports_the_depth_as_penetration(a):
    """Genesis World's get_contacts key `penetration` (m), which the contact area reads: the resting cube's
    contacts overlap by about the solver's slop (positive, below a millimetre); invalid entries read 0."""
    scene, e, _, fresh = a
    scene.reset(fresh)
    for _ in range(5):
        scene.step()
    c = e["hot"].get_contacts(with_entity=e["cold"])
    depth, valid = c["penetration"], c["valid_mask"]
    assert depth.shape == valid.shape and bool(valid.any(dim=1).all())
    assert bool((depth[valid] > 0).all() and (depth[valid] < 1e-3).all()) and bool((depth[~valid] == 0).all())


def test_contacts_read_through_entities_match_the_solver_pool(a):
    """The contacts come from the rigid solver's pool in one call, or (a solver without one) from each entity's
    get_contacts with each contact taken once: both give the same temperatures."""
    scene, _, s, fresh = a
    ctx = s["cold"]._ctx
    runs = []
    for pooled in (True, False):
        scene.reset(fresh)
        ctx["solver_contacts"] = pooled
        try:
            for _ in range(30):
                scene.step()
        finally:
            ctx["solver_contacts"] = True
        runs.append((s["cold"].read_ground_truth(), s["cold"].link_temperatures))
    assert torch.allclose(runs[0][0], runs[1][0], atol=1e-12, rtol=0)
    assert torch.allclose(runs[0][1], runs[1][1], atol=1e-12, rtol=0)
    assert not torch.allclose(runs[0][0], torch.tensor(20.0, dtype=torch.float64))  # heat did flow


def test_contact_area_is_genesis_worlds_per_pair_share():
    """Four corners of a 0.1 m square between links 0 and 1 (listed out of angular order) share its area, 0.01 / 4
    each; two contacts of depths 2 and 4 mm between links 0 and 2 share pi (2 + 4) mm / 2; an invalid entry: 0."""
    from genesis_core.sensors.temperature import _contact_areas

    pos = torch.tensor([[[0.05, -0.05, 0], [-0.05, 0.05, 0], [0.05, 0.05, 0], [-0.05, -0.05, 0], [1, 1, 1],
                         [1.1, 1, 1], [9, 9, 9]]], dtype=torch.float64)
    normal = torch.tensor([0.0, 0.0, 1.0], dtype=torch.float64).expand(1, 7, 3)
    la, lb = torch.tensor([[0, 0, 0, 0, 0, 0, 3]]), torch.tensor([[1, 1, 1, 1, 2, 2, 3]])
    depth = torch.tensor([[1e-3] * 4 + [2e-3, 4e-3, 0.0]], dtype=torch.float64)
    valid = torch.tensor([[True] * 6 + [False]])
    area = _contact_areas(la, lb, pos, normal, depth, valid, 3)
    want = torch.tensor([[0.0025] * 4 + [math.pi * 3e-3] * 2 + [0.0]], dtype=torch.float64)
    assert torch.allclose(area, want, atol=1e-15, rtol=1e-12)


def test_link_bounds_are_the_geoms_box_in_the_link_frame():
    """A box turned 90 degrees about z swaps its x and y extents, a cylinder lying along x reaches its half-height
    along x and its radius along y and z, a sphere offset in z, a mesh by its vertices, a plane not at all."""
    from types import SimpleNamespace

    from genesis_core.geoms import GeomKind
    from genesis_core.sensors.temperature import link_bounds

    s2 = math.sqrt(0.5)

    def geom(kind, size, pos=(0, 0, 0), quat=(1, 0, 0, 0), verts=None):
        return SimpleNamespace(type=kind, size=size, init_pos=pos, init_quat=quat, init_verts=verts)

    cases = [
        (geom(GeomKind.BOX, (0.1, 0.2, 0.3), quat=(s2, 0, 0, s2)), ([-0.2, -0.1, -0.3], [0.2, 0.1, 0.3])),
        (geom(GeomKind.CYLINDER, (0.05, 0.4, 0), quat=(s2, 0, s2, 0)), ([-0.4, -0.05, -0.05], [0.4, 0.05, 0.05])),
        (geom(GeomKind.SPHERE, (0.1, 0, 0), pos=(0, 0, 1.0)), ([-0.1, -0.1, 0.9], [0.1, 0.1, 1.1])),
        (geom(GeomKind.MESH, (1, 1, 1), pos=(1, 0, 0), verts=np.array([[0, 0, 0], [0.1, 0.2, 0.3]])),
         ([1.0, 0.0, 0.0], [1.1, 0.2, 0.3])),
    ]
    for g, (lo, hi) in cases:
        got = link_bounds(SimpleNamespace(geoms=[g, geom(GeomKind.PLANE, (1, 1, 1))]))
        assert np.allclose(got[0], lo, atol=1e-12) and np.allclose(got[1], hi, atol=1e-12), (g.type, got)
    assert link_bounds(SimpleNamespace(geoms=[geom(GeomKind.PLANE, (1, 1, 1))])) is None


def test_separable_conduction_of_large_grids_equals_the_dense_operator():
    """Grids above DENSE_CELLS conduct axis by axis (_along_axes); on a 4 x 3 x 5 grid that must equal the dense
    D^T exp(-dt Lambda) D, keep the mean, and damp the rest."""
    from genesis_core.sensors.temperature import _along_axes, _dct_basis

    grid, voxel, rate = (4, 3, 5), (0.1, 0.2, 0.05), 0.3  # dt alpha
    bases = [_dct_basis(n, d) for n, d in zip(grid, voxel)]
    decay = np.exp(-rate * (bases[0][1][:, None, None] + bases[1][1][None, :, None] + bases[2][1][None, None, :]))
    d = np.kron(np.kron(bases[0][0], bases[1][0]), bases[2][0])
    dense = d.T @ (decay.reshape(-1)[:, None] * d)
    temp = torch.rand(2, *grid, dtype=torch.float64)
    dx, dy, dz = (torch.as_tensor(b[0]) for b in bases)
    separable = _along_axes(_along_axes(temp, dx, dy, dz) * torch.as_tensor(decay), dx.T, dy.T, dz.T)
    want = temp.reshape(2, -1) @ torch.as_tensor(dense).T
    assert torch.allclose(separable.reshape(2, -1), want, atol=1e-13, rtol=0)
    assert torch.allclose(want.mean(1), temp.reshape(2, -1).mean(1), atol=1e-14, rtol=0)
    assert float(want.std(1).max()) < float(temp.reshape(2, -1).std(1).min())


# -- stability ---------------------------------------------------------------------------------------------------


def test_a_step_far_beyond_the_explicit_limits_stays_bounded_and_converges():
    """dt = 0.5 s (50 rigid substeps of 0.01 s): conduction alpha dt / dx^2 = 1250 in the 10-cell bar, contact
    G dt / C ~ 10^4 at the cold cube's cells (G ~ 120 W/K, C = 5.6e-3 J/K), convection h A dt / C ~ 3 at the
    surfaces (explicit Euler diverges beyond 2 for each). Every temperature stays within [20, 80] C, the initial and
    ambient range (each stage is a convex combination), and after 40 steps everything is at the ambient."""
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=0.5, substeps=50))
    bar = scene.add_entity(gs.morphs.Box(pos=(0, 5, 0), size=(0.2, 0.02, 0.02), fixed=True))
    cold = scene.add_entity(gs.morphs.Box(pos=(0, 0, 0), size=(SIDE,) * 3, fixed=True))
    hot = scene.add_entity(gs.morphs.Box(pos=(0, 0, SIDE), size=(SIDE,) * 3))
    props = {bar.base_link_idx: P(base_temperature=80.0, conductivity=1000.0, emissivity=0.0),
             cold.base_link_idx: P(base_temperature=20.0, conductivity=1e4, density=100.0, emissivity=0.0),
             hot.base_link_idx: P(base_temperature=80.0, conductivity=1e4, density=100.0, emissivity=0.0)}
    common = dict(properties_dict=props, ambient_temperature=20.0, convection_coefficient=10.0)
    sb = scene.add_sensor(gs.sensors.TemperatureGrid(entity_idx=bar.idx, grid_size=(10, 1, 1), **common))
    sc = scene.add_sensor(gs.sensors.TemperatureGrid(entity_idx=cold.idx, grid_size=(3, 3, 2),
                                                     simulate_all_link_temperatures=True, **common))
    scene.build(n_envs=1)
    scene.reset(_set_aux(scene.get_state(), scene, sb, [np.linspace(20.0, 80.0, 10)]))
    scene.step()
    assert float(sc.read_ground_truth().max()) > 20.5  # the hot cube heated the cold one's top cells
    for _ in range(39):
        for x in (sb.read_ground_truth(), sc.read_ground_truth(), sc.link_temperatures, sb.read(), sc.read()):
            assert bool(((x >= 20.0 - 1e-9) & (x <= 80.0 + 1e-9)).all()), x
        scene.step()
    for x in (sb.read_ground_truth(), sc.read_ground_truth(), sc.link_temperatures):
        assert torch.allclose(x, torch.tensor(20.0, dtype=torch.float64), atol=1e-3, rtol=0)


# -- state ------------------------------------------------------------------------------------------------------


def _temps(s):
    return torch.cat([s["cube"].read_ground_truth().reshape(3, -1), s["noisy"].read_ground_truth().reshape(3, -1),
                      s["noisy"].read().reshape(3, -1), s["noisy"].link_temperatures], dim=1)


def test_reset_restores_the_temperatures_of_the_reset_envs_bitwise(b):
    """snapshot (envs at different temperatures) -> 5 steps (A) -> 5 more -> reset(snapshot, envs [0, 2]): envs 0
    and 2 hold the snapshot's temperatures bit for bit, env 1 keeps its own; 5 steps: envs 0 and 2 read A again
    bit for bit (noise included)."""
    scene, _, s, fresh = b
    scene.reset(_set_aux(fresh, scene, s["noisy"], [[30.0, 40.0], [50.0, 60.0], [70.0, 80.0]]))
    for _ in range(3):
        scene.step()
    snap = scene.get_state()
    at_snap = _temps(s)
    first = []
    for _ in range(5):
        scene.step()
        first.append(_temps(s))
    for _ in range(5):
        scene.step()
    before = _temps(s)
    manager = scene.solvers.index(scene.sensor_manager)
    aux_before = scene.get_state().solvers_state[manager].aux.clone()
    scene.reset(snap, envs_idx=[0, 2])
    aux_after = scene.get_state().solvers_state[manager].aux
    assert torch.equal(aux_after[[0, 2]], snap.solvers_state[manager].aux[[0, 2]])
    assert torch.equal(aux_after[1], aux_before[1])
    now = _temps(s)
    assert torch.equal(now[[0, 2]], at_snap[[0, 2]]) and torch.equal(now[1], before[1])
    for want in first:
        scene.step()
        assert torch.equal(_temps(s)[[0, 2]], want[[0, 2]])
    assert not torch.equal(first[-1][0], first[-1][1])  # the envs differ: a mix-up could not pass


def test_checkpoint_round_trip_resumes_the_temperatures_exactly(b, tmp_path):
    scene, _, s, fresh = b
    scene.reset(_set_aux(fresh, scene, s["cube"], [[60.0], [70.0], [80.0]]))
    for _ in range(4):
        scene.step()
    path = tmp_path / "temperature.ckpt"
    scene.save_checkpoint(path)
    want = []
    for _ in range(4):
        scene.step()
        want.append(_temps(s))
    scene.load_checkpoint(path)
    for w in want:
        scene.step()
        assert torch.equal(_temps(s), w)


def test_scene_without_envs_reads_grids_without_a_batch_dimension():
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=DT))
    box = scene.add_entity(gs.morphs.Box(pos=(0, 0, 0), size=(SIDE, SIDE, 2 * SIDE), fixed=True))
    top = scene.add_entity(gs.morphs.Box(pos=(0, 0, 1.5 * SIDE), size=(SIDE,) * 3))
    sensor = scene.add_sensor(gs.sensors.TemperatureGrid(
        entity_idx=box.idx, grid_size=(1, 2, 3), properties_dict={-1: P(), top.base_link_idx: P(base_temperature=90)},
        simulate_all_link_temperatures=True))
    scene.build()
    for _ in range(10):
        scene.step()
    assert sensor.read().shape == (1, 2, 3) and sensor.read_ground_truth().shape == (1, 2, 3)
    assert sensor.link_temperatures.shape == (2,)
    top_cells = sensor.read_ground_truth()[0, :, 2]  # the cells under the hot cube warm first
    assert bool((top_cells > sensor.read_ground_truth()[0, :, 0]).all())
    with pytest.raises(gs.SceneError, match="without environments"):
        sensor.read_ground_truth(envs_idx=[0])


# -- refusals ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("make, match", [
    (lambda: P(emissivity=1.2), r"TemperatureProperties\.emissivity=1\.2"),
    (lambda: P(density=0.0), r"TemperatureProperties\.density=0\.0.*> 0"),
    (lambda: P(specific_heat=-1.0), "specific_heat"),
    (lambda: P(conductivity=float("nan")), "conductivity"),
    (lambda: P(base_temperature=-300.0), r"base_temperature=-300\.0.*-273\.15"),
    (lambda: gs.sensors.TemperatureGrid(grid_size=(2, 0, 1)), r"TemperatureGrid\.grid_size=\(2, 0, 1\)"),
    (lambda: gs.sensors.TemperatureGrid(grid_size=(2, 2)), "grid_size"),
    (lambda: gs.sensors.TemperatureGrid(properties_dict={-2: P()}), "properties_dict.*key -2"),
    (lambda: gs.sensors.TemperatureGrid(properties_dict={0: 21.0}), "properties_dict"),
    (lambda: gs.sensors.TemperatureGrid(grid_size=(2, 1, 1), heat_generation=[[[1.0]]]), "heat_generation"),
    (lambda: gs.sensors.TemperatureGrid(heat_generation=float("inf")), "heat_generation"),
    (lambda: gs.sensors.TemperatureGrid(sensor_time_constant=-0.1), "sensor_time_constant"),
    (lambda: gs.sensors.TemperatureGrid(convection_coefficient=-1.0), "convection_coefficient"),
    (lambda: gs.sensors.TemperatureGrid(ambient_temperature=-280.0), "ambient_temperature"),
    (lambda: gs.sensors.TemperatureGrid(contact_depth_weight=-1.0), "contact_depth_weight"),
    (lambda: gs.sensors.TemperatureGrid(debug_temperature_range=(5.0, 1.0)), "debug_temperature_range"),
])
def test_bad_options_are_refused_on_construction(make, match):
    with pytest.raises(gs.OptionError, match=match):
        make()


def test_options_keep_genesis_defaults_and_fit_the_scene_signature():
    p = P()
    assert (p.base_temperature, p.conductivity, p.density, p.specific_heat, p.emissivity) == (21.0, 50.0, 1000.0,
                                                                                                1.0, 0.9)
    assert P(30.0, 10.0) == P(base_temperature=30.0, conductivity=10.0)  # positional, as its NamedTuple
    o = gs.sensors.TemperatureGrid(properties_dict={3: p}, grid_size=(2, 1, 1), heat_generation=[[[1.0]], [[2.0]]])
    assert (o.grid_size, o.sensor_time_constant, o.contact_depth_weight, o.ambient_temperature,
            o.convection_coefficient, o.simulate_all_link_temperatures) == ((2, 1, 1), 0.01, 1.0, None, None, False)
    d = o.as_dict()
    assert d["properties_dict"] == {"3": p.as_dict()} and d["heat_generation"] == [1.0, 2.0]
    with pytest.raises(TypeError):
        o.properties_dict[4] = p  # read-only, as the options are frozen


def test_bad_attachment_is_refused_and_nothing_is_added():
    scene = gs.Scene()
    plane = scene.add_entity(gs.morphs.Plane())
    box = scene.add_entity(gs.morphs.Box(size=(SIDE,) * 3))
    G = gs.sensors.TemperatureGrid
    cases = [
        (G(entity_idx=box.idx, properties_dict={plane.base_link_idx: P()}), "no properties for the sensor's link"),
        (G(entity_idx=plane.idx, properties_dict={-1: P()}), "no bounded collision geometry"),
        (G(entity_idx=box.idx, properties_dict={-1: P()}, noise=(0.1, 0.2)), "one number or 1"),
    ]
    for options, match in cases:
        with pytest.raises(gs.OptionError, match=match):
            scene.add_sensor(options)
    assert scene.sensors == []
    scene.add_sensor(G(entity_idx=box.idx, properties_dict={-1: P()}))
    with pytest.raises(gs.OptionError, match="already has a TemperatureGrid"):
        scene.add_sensor(G(entity_idx=box.idx, grid_size=(2, 2, 2)))
    assert len(scene.sensors) == 1


def test_a_properties_key_beyond_the_links_is_refused_at_build():
    scene = gs.Scene()
    box = scene.add_entity(gs.morphs.Box(size=(SIDE,) * 3))
    scene.add_sensor(gs.sensors.TemperatureGrid(entity_idx=box.idx, properties_dict={-1: P(), 7: P()}))
    with pytest.raises(gs.OptionError, match="link index 7, but the rigid solver has 1 links"):
        scene.build()
