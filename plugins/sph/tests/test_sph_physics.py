"""SPH physics against analytic results and experiment (float64, small scenes: particle_size 0.02 unless said)."""

import math

import numpy as np
import pytest
import torch

import genesis_core as gs

import sph_scene

G = 9.81


make = sph_scene.make


def test_boundary_integrals_match_their_definitions():
    """The closed forms the boundaries rest on, against numerical integration of the cubic spline."""
    import taichi as ti

    from genesis_sph import kernels as K

    h, s = 2.0, 1.0

    @ti.kernel
    def probe(d: ti.types.ndarray(), out: ti.types.ndarray()):
        for i in range(d.shape[0]):
            out[i, 0] = K.plane_integral(d[i], h)
            psi, slope = K.solid_terms(d[i], s, h)
            out[i, 1] = psi
            out[i, 2] = slope

    d = torch.linspace(-0.6, 2.2, 57, dtype=torch.float64)
    out = torch.zeros((57, 3), dtype=torch.float64)
    probe(d, out)
    k = 8 / (math.pi * h ** 3)

    def w(r):
        q = r / h
        return np.where(q <= 0.5, k * (6 * q ** 3 - 6 * q ** 2 + 1), np.where(q <= 1, 2 * k * (1 - q) ** 3, 0.0))

    r = np.linspace(0, h, 20001)

    def plane(z):  # 2 pi int_{|z|}^{h} W(r) r dr
        rr = r[r >= abs(z)]
        return 2 * np.pi * np.trapezoid(w(rr) * rr, rr) if len(rr) > 1 else 0.0

    for i, z in enumerate(d.numpy()):
        assert out[i, 0] == pytest.approx(plane(z), abs=1e-4)
        layers = [z + (m + 0.5) * s for m in range(4)]
        assert out[i, 1] == pytest.approx(sum(s * plane(zl) for zl in layers if abs(zl) < h), abs=1e-4)
    # the slope is the derivative of Psi
    psi = out[:, 1].numpy()
    dd = float(d[1] - d[0])
    assert np.allclose(np.gradient(psi, dd)[2:-2], out[2:-2, 2].numpy(), atol=2e-3)
    # a lattice liquid at a wall: the first layer sees exactly the lattice sum of a mirrored liquid
    lattice = np.arange(-3, 4)
    X, Y, Z = np.meshgrid(lattice, lattice, lattice, indexing="ij")
    dist = np.sqrt(X ** 2 + Y ** 2 + Z ** 2)
    assert w(dist).sum() == pytest.approx(1.0, abs=1e-4)  # rest density on the lattice
    missing = w(dist)[Z <= -1].sum()  # the particle half a spacing from the wall
    assert float(out[int(np.argmin(np.abs(d.numpy() - 0.5))), 1]) == pytest.approx(missing, abs=2e-3)


@pytest.mark.parametrize("solver", ["WCSPH", "DFSPH"])
def test_droplet_in_free_fall_follows_g(solver):
    """A droplet far from every wall: its centre of mass falls exactly as g dictates (gravity once a substep)."""
    h, n = 5e-4, 60
    scene, (drop,) = make([(gs.morphs.Sphere(pos=(0.3, 0.3, 0.7), radius=0.06), gs.materials.SPH.Liquid())],
                          dt=4 * h, substeps=4, upper_bound=(0.6, 0.6, 1.0), pressure_solver=solver)
    z0 = float(drop.get_particles_pos()[:, 2].mean())
    for _ in range(n // 4):
        scene.step()
    k = n
    fall = z0 - float(drop.get_particles_pos()[:, 2].mean())
    expect = G * h * h * k * (k + 1) / 2  # symplectic Euler
    assert fall == pytest.approx(expect, rel=5e-3)
    vz = float(drop.get_particles_vel()[:, 2].mean())
    assert vz == pytest.approx(-G * h * k, rel=5e-3)


def _column(solver, seconds, **material):
    scene, (liq,) = make([(gs.morphs.Box(pos=(0.1, 0.1, 0.2), size=(0.2, 0.2, 0.4)),
                           gs.materials.SPH.Liquid(**material))], pressure_solver=solver)
    sol = scene.sph_solver
    n = int(round(seconds / 2e-3))
    fits, tops, errs = [], [], []
    for i in range(n):
        scene.step()
        if i >= n // 2:
            p = liq.get_particles_pos().numpy()
            pr = sol.pressures()[0].numpy()
            rho = sol.densities()[0].numpy()
            inner = ((p[:, :2] > 0.04) & (p[:, :2] < 0.16)).all(1) & (p[:, 2] > 0.04) & (p[:, 2] < 0.3)
            fits.append(np.polyfit(p[inner, 2], pr[inner], 1))
            tops.append(np.sort(p[:, 2])[-100:].mean())
            errs.append(np.abs(rho[inner] / 1000 - 1).mean())
    return np.mean(fits, 0), tops, np.mean(errs)


def test_resting_column_dfsph_pressure_density_and_height():
    """A 0.4 m column at rest (DFSPH, default tolerances): the hydrostatic pressure extrapolated to the floor is
    rho g H within 2%, the interior's mean density error under 0.1%, and the height holds (averages over the
    last 0.75 s of 1.5 s)."""
    (slope, p0), tops, err = _column("DFSPH", 1.5)
    assert p0 == pytest.approx(1000 * G * 0.4, rel=0.02)
    assert slope == pytest.approx(-1000 * G, rel=0.05)
    assert err < 1e-3
    # the lattice packs at the walls at first (the top settles by 5 mm in the first second, 0.45 mm in the next
    # half): from 1 s to 1.5 s it moves less than 0.25% of H
    assert abs(tops[-1] - tops[len(tops) // 3]) < 0.0025 * 0.4
    assert tops[-1] > 0.37  # the column keeps its height (the top layer started at 0.39)


def test_resting_column_wcsph_pressure():
    """WCSPH's Tait pressure holds the same column up. An inviscid liquid without cohesion: the hydrostatic
    pressure extrapolated to the floor within 2% of rho g H (measured 0.6%), its slope within 5% (1.2%), the column
    stays at its height (the weakly compressible column rings at its acoustic period: the means over the last
    0.5 s of 1 s are compared). Nothing damps it, so a boundary doing work of its own would lift it off the floor
    (a mirrored boundary pressure did). The default liquid (viscosity 0.005 m^2/s, cohesion): within 10% (its
    surface layer sinks 1.3 cm into the column, and the profile with it: measured 6.4% below)."""
    (slope, p0), tops, err = _column("WCSPH", 1.0, mu=0.0, gamma=0.0)
    assert p0 == pytest.approx(1000 * G * 0.4, rel=0.02)
    assert slope == pytest.approx(-1000 * G, rel=0.05)
    assert err < 0.02  # compression of a few tenths of a percent
    assert min(tops) > 0.38 and max(tops) < 0.392  # the top layer started at 0.39
    (slope, p0), tops, err = _column("WCSPH", 0.6)
    assert p0 == pytest.approx(1000 * G * 0.4, rel=0.1)
    assert slope == pytest.approx(-1000 * G, rel=0.15)
    assert tops[-1] > 0.36


# The dam break against Martin & Moyce and the floating box are examples (examples/sph_dam_break.py,
# examples/sph_floating_box.py), checked by tests/test_examples.py.
