"""MPM physics against analytic results and experiment.

Free fall is exact to the integrator: a uniformly translating body keeps its velocity through the APIC transfers
(the B-spline weights sum to one), the grid adds g dt, and the particles advect with the new velocity, so
z_n = z0 - g h^2 n (n + 1) / 2 up to rounding.
"""

import math

import numpy as np
import pytest
import torch

import genesis_core as gs

G = 9.81


def make(entities, dt=1e-3, substeps=1, n_envs=0, gravity=(0, 0, -G), **mpm):
    opts = dict(lower_bound=(0, 0, 0), upper_bound=(1, 1, 1), grid_density=32)
    opts.update(mpm)
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=dt, substeps=substeps, gravity=gravity),
                     mpm_options=gs.options.MPMOptions(**opts))
    out = [scene.add_entity(m, material=mat) for m, mat in entities]
    scene.build(n_envs=n_envs)
    return scene, out


def test_elastic_cube_free_fall_mass_and_momentum():
    h, n = 1e-3, 150
    scene, (cube,) = make([(gs.morphs.Box(pos=(0.5, 0.5, 0.7), size=(0.2, 0.2, 0.2)), gs.materials.MPM.Elastic())])
    mass = cube.get_mass()
    z0 = float(cube.get_pos()[2])
    for _ in range(n):
        scene.step()
    assert float(cube.get_pos()[2]) == pytest.approx(z0 - G * h * h * n * (n + 1) / 2, abs=1e-9)
    assert cube.get_mass() == mass  # particles carry their mass; it is never recomputed
    # linear momentum = m v_com: exactly gravity's impulse
    vel = cube.get_particles_vel()
    momentum = (vel * scene.mpm_solver.p_mass[:, None]).sum(0)
    assert torch.allclose(momentum, torch.tensor([0.0, 0.0, -G * h * n * mass], dtype=torch.float64), atol=1e-9)


def test_momentum_is_conserved_in_free_flight_while_the_cube_deforms():
    """No gravity, a spinning and stretching throw: total linear momentum is conserved to rounding while the
    elastic cube oscillates (MLS-MPM with APIC conserves linear momentum exactly)."""
    scene, (cube,) = make([(gs.morphs.Box(pos=(0.5, 0.5, 0.5), size=(0.2, 0.2, 0.2)), gs.materials.MPM.Elastic())],
                          gravity=(0, 0, 0))
    pos = cube.get_particles_pos()
    centre = pos.mean(0)
    spin = torch.tensor([0.0, 0.0, 3.0], dtype=torch.float64)
    vel = torch.linalg.cross(spin.expand_as(pos), pos - centre) + 0.2 * (pos - centre) + torch.tensor([0.3, 0, 0])
    cube.set_velocity(vel)
    m = scene.mpm_solver.p_mass[:, None]
    p0 = (cube.get_particles_vel() * m).sum(0)
    for _ in range(200):
        scene.step()
    p1 = (cube.get_particles_vel() * m).sum(0)
    assert torch.allclose(p1, p0, atol=1e-10)
    assert (cube.get_particles_pos() - pos).abs().max() > 0.05  # it moved and deformed


def test_elastic_cube_bounces_and_comes_to_rest():
    """Dropped from 0.23 m above the floor: it rebounds (upward centre-of-mass speed > 0.3 m/s after the first
    contact), then loses its energy to the transfers' dissipation and rests on the floor at half its height
    (less a little compression under its weight)."""
    scene, (cube,) = make([(gs.morphs.Box(pos=(0.5, 0.5, 0.305), size=(0.15, 0.15, 0.15)),
                            gs.materials.MPM.Elastic(E=5e4))], dt=1e-3, substeps=2)
    heights, speeds = [], []
    for _ in range(4000):
        scene.step()
        heights.append(float(cube.get_pos()[2]))
        speeds.append(float(cube.get_particles_vel()[:, 2].mean()))
    first_contact = next(i for i in range(1, len(speeds)) if speeds[i] > speeds[i - 1] + 1e-3)
    assert max(speeds[first_contact:]) > 0.3, "no bounce"
    assert max(abs(v) for v in speeds[-300:]) < 0.05, "not at rest"
    floor = 0.0  # the floor wall's plane is the domain's lower bound
    assert heights[-1] == pytest.approx(floor + 0.075, abs=0.02)


def test_liquid_block_spreads_to_a_level_layer():
    """A column of viscous water released in a tank spreads into a layer whose surface is level within two
    cells after 3 s (viscosity 5 Pa s damps the sloshing of a thin layer in about a second)."""
    scene, (water,) = make([(gs.morphs.Box(pos=(0.12, 0.25, 0.15), size=(0.12, 0.36, 0.18)),
                             gs.materials.MPM.Liquid(E=1e5, viscosity=5.0))], dt=2e-3, substeps=2, boundary="slip",
                           upper_bound=(0.5, 0.5, 0.4), grid_density=48)
    for _ in range(1500):
        scene.step()
    pos = water.get_particles_pos()
    tops = []
    for lo in np.arange(0.08, 0.42, 0.06):
        sel = (pos[:, 0] >= lo) & (pos[:, 0] < lo + 0.06)
        tops.append(float(torch.quantile(pos[sel, 2], 0.98)))
    assert max(tops) - min(tops) < 2 / 48, f"surface heights {np.round(tops, 3)}"
    assert float(pos[:, 0].max()) > 0.4, "it did not spread across the tank"
    assert water.get_particles_vel().norm(dim=1).mean() < 0.05


def test_snow_compacts_under_impact():
    scene, (snow,) = make([(gs.morphs.Box(pos=(0.5, 0.5, 0.45), size=(0.2, 0.2, 0.2)), gs.materials.MPM.Snow())],
                          dt=5e-4, substeps=2)
    top0 = float(snow.get_particles_pos()[:, 2].max() - snow.get_particles_pos()[:, 2].min())
    for _ in range(800):
        scene.step()
    jp = scene.mpm_solver.state.at("Jp", scene._frame)[0]
    assert float(jp.min()) < 0.95, "no plastic compression"
    assert float(jp.mean()) < 1.0
    height = float(snow.get_particles_pos()[:, 2].max() - snow.get_particles_pos()[:, 2].min())
    assert height < 0.95 * top0, "the block did not compact"


def test_sand_column_collapses_to_its_angle_of_repose():
    """A sand column (friction angle 35 degrees) collapses on a sticky floor into a pile whose flank slope, fitted
    over its middle part, lies within 10 degrees of the friction angle; the pile is at rest after 0.6 s."""
    phi = 35.0
    scene, (sand,) = make([(gs.morphs.Cylinder(pos=(0.25, 0.25, 0.053), radius=0.09, height=0.11),
                            gs.materials.MPM.Sand(friction_angle=phi))], dt=1e-3, substeps=4, boundary="sticky",
                          upper_bound=(0.5, 0.5, 0.4), grid_density=48)
    for _ in range(600):
        scene.step()
    pos = sand.get_particles_pos().numpy()
    floor = 0.0  # the floor wall's plane is the domain's lower bound
    r = np.hypot(pos[:, 0] - 0.25, pos[:, 1] - 0.25)
    edges = np.linspace(0, r.max(), 16)
    heights = np.array([np.quantile(pos[(r >= a) & (r < b), 2], 0.95) - floor if ((r >= a) & (r < b)).sum() > 10
                        else np.nan for a, b in zip(edges[:-1], edges[1:])])
    centres = (edges[:-1] + edges[1:]) / 2
    ok = np.isfinite(heights)
    top = np.nanmax(heights)
    flank = ok & (heights < 0.8 * top) & (heights > 0.2 * top)
    slope = -np.polyfit(centres[flank], heights[flank], 1)[0]
    angle = math.degrees(math.atan(slope))
    assert abs(angle - phi) < 10, f"pile slope {angle:.1f} degrees"
    assert float(sand.get_particles_vel().norm(dim=1).mean()) < 0.02, "still flowing"


# Martin & Moyce (1952), square column (height = width = a): front Z = x / a against T = t sqrt(2 g / a)
MM_T = [0.41, 0.84, 1.19, 1.43, 1.63, 1.83, 1.98, 2.20, 2.32, 2.51, 2.65, 2.83, 2.98, 3.11, 3.33]
MM_Z = [1.11, 1.22, 1.44, 1.67, 1.89, 2.11, 2.33, 2.56, 2.78, 3.00, 3.22, 3.44, 3.67, 3.89, 4.11]


def test_dam_break_front_follows_martin_and_moyce():
    """Collapse of a square water column (a = 0.15 m) on a frictionless floor, in a slab one column wide: the
    surge front, taken as the furthest point where the water layer is at least one particle deep, is within 10% of
    Martin & Moyce's measurements from T = 0.8 on (before that, the experiment's gate opening dominates)."""
    a, dens = 0.15, 64
    dx = 1 / dens
    wall = 0.0  # the walls' planes are the domain's bounds
    width = 10 * dx
    scene, (water,) = make([(gs.morphs.Box(pos=(wall + a / 2, width / 2, wall + a / 2), size=(a, width - 2 * wall, a)),
                             gs.materials.MPM.Liquid(E=1e6))], dt=2e-3, substeps=10, boundary="slip",
                           upper_bound=(1.0, width, 0.3), grid_density=dens)
    x_wall = float(water.get_particles_pos()[:, 0].min()) - dx / 4
    per_row = round((width - 2 * wall) / (dx / 2))  # particles across the slab in one layer
    times, fronts = [], []
    for i in range(150):
        scene.step()
        counts, edges = np.histogram(water.get_particles_pos()[:, 0].numpy(), bins=np.arange(0, 1.0, dx / 2))
        deep = np.nonzero(counts >= per_row)[0]
        times.append((i + 1) * 2e-3 * math.sqrt(2 * G / a))
        fronts.append((edges[deep[-1] + 1] - x_wall) / a)
    for t, z in zip(MM_T, MM_Z):
        if t >= 0.8:
            ours = float(np.interp(t, times, fronts))
            assert ours == pytest.approx(z, rel=0.10), f"T = {t}: front {ours:.2f}, measured {z}"


def test_floor_height_inside_the_domain_is_a_floor():
    """SimOptions.floor_height = 0.3 in a domain starting at z = 0: the cube lands on the floor there (its lowest
    particles within a cell of the floor's plane), not on the domain's bottom."""
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=1e-3, substeps=2, floor_height=0.3),
                     mpm_options=gs.options.MPMOptions(lower_bound=(0, 0, 0), upper_bound=(1, 1, 1), grid_density=32))
    cube = scene.add_entity(gs.morphs.Box(pos=(0.5, 0.5, 0.6), size=(0.15, 0.15, 0.15)),
                            material=gs.materials.MPM.Elastic(E=5e4))
    scene.build()
    lowest = 1.0
    for _ in range(600):
        scene.step()
        lowest = min(lowest, float(cube.get_particles_pos()[:, 2].min()))
    floor = round(0.3 * 32) / 32
    assert floor - 1 / 32 < lowest < floor + 1 / 32
    with pytest.raises(gs.OptionError, match="inside the MPM domain"):
        scene2 = gs.Scene(sim_options=gs.options.SimOptions(floor_height=0.5),
                          mpm_options=gs.options.MPMOptions(lower_bound=(0, 0, 0), upper_bound=(1, 1, 1)))
        scene2.add_entity(gs.morphs.Box(pos=(0.5, 0.5, 0.3), size=(0.1, 0.1, 0.1)), material=gs.materials.MPM.Elastic())
