"""PBD physics against analytic results (float64)."""

import math

import numpy as np
import pytest
import torch

import genesis_core as gs

import pbd_meshes

G = 9.81


def rope_scene(tmp_path, n, length, rho, compliance, dt, substeps=1, iterations=1, gravity=(0.0, 0.0, -G)):
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=dt, substeps=substeps, gravity=gravity),
                     pbd_options=gs.options.PBDOptions(lower_bound=(-1, -1, -3), upper_bound=(1, 1, 1),
                                                       max_stretch_solver_iterations=iterations))
    rope = scene.add_entity(gs.morphs.Mesh(file=pbd_meshes.rope(tmp_path / f"rope{n}.obj", n, length)),
                            material=gs.materials.PBD.Cloth(rho=rho, stretch_compliance=compliance, air_resistance=0.0))
    scene.build()
    rope.fix_particles([0])
    return scene, rope


@pytest.mark.parametrize("iterations", [1, 20])
def test_hanging_chain_extension_follows_the_compliance_not_the_iterations(tmp_path, iterations):
    """A chain of N equal beads (the rope's end bead weighs half) hanging from its first: spring j carries the
    weight below it, so it stretches by alpha g M_j; the chain's total extension is alpha g sum_j M_j
    (m g alpha N(N-1)/2 for equal beads). Started at that shape, the chain stays there: its mean extension over
    0.5 s is that within 1%, at 1 sweep a substep and at 20."""
    n, seg, m, alpha = 10, 0.1, 0.1, 1e-3
    scene, rope = rope_scene(tmp_path, n, seg * (n - 1), rho=m / seg, compliance=alpha, dt=1e-3,
                             iterations=iterations)
    masses = rope.solver.p_mass.numpy()
    below = np.array([masses[j:].sum() for j in range(1, n)])  # the mass below spring j (particles j..n-1)
    stretch = alpha * G * below
    z = -np.concatenate([[0.0], np.cumsum(seg + stretch)])
    want = stretch.sum()
    assert want == pytest.approx(alpha * G * m * (n * (n - 1) / 2 - (n - 1) / 2), rel=1e-12)
    pos = rope.get_particles_pos().clone()
    pos[:, 2] = torch.as_tensor(z)
    rope.set_particles_pos(pos)
    ext = []
    for _ in range(500):
        scene.step()
        ext.append(float(-rope.get_particles_pos()[-1, 2]) - seg * (n - 1))
    assert np.mean(ext) == pytest.approx(want, rel=0.01)
    assert np.max(np.abs(np.array(ext) - want)) < 0.02 * want


def test_hanging_chain_released_from_rest_length_settles_at_the_same_extension(tmp_path):
    """Released unstretched, the chain oscillates about the same equilibrium: its mean over the last 2 s of 6 s
    (the slow modes damped by the rope's air drag) is within 2% of the analytic extension."""
    n, seg, m, alpha = 6, 0.1, 0.1, 1e-3
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=2e-3, substeps=2),
                     pbd_options=gs.options.PBDOptions(lower_bound=(-1, -1, -3), upper_bound=(1, 1, 1),
                                                       max_stretch_solver_iterations=2))
    rope = scene.add_entity(gs.morphs.Mesh(file=pbd_meshes.rope(tmp_path / "r.obj", n, seg * (n - 1))),
                            material=gs.materials.PBD.Cloth(rho=m / seg, stretch_compliance=alpha, air_resistance=0.05))
    scene.build()
    rope.fix_particles([0])
    masses = rope.solver.p_mass.numpy()
    want = alpha * G * sum(masses[j:].sum() for j in range(1, n))
    ext = []
    for i in range(3000):
        scene.step()
        if i >= 2000:
            ext.append(float(-rope.get_particles_pos()[-1, 2]) - seg * (n - 1))
    assert np.mean(ext) == pytest.approx(want, rel=0.02)


def test_single_spring_period(tmp_path):
    """One XPBD spring (compliance alpha) under a bead of mass m: period 2 pi sqrt(m alpha) within 2% at dt 1 ms."""
    m, alpha, seg = 0.1, 1e-2, 0.2
    scene, rope = rope_scene(tmp_path, 2, seg, rho=2 * m / seg, compliance=alpha, dt=1e-3)
    assert float(rope.solver.p_mass[1]) == pytest.approx(m)
    z = []
    for _ in range(1000):
        scene.step()
        z.append(float(rope.get_particles_pos()[1, 2]))
    z = np.array(z) - np.mean(z)
    ups = np.flatnonzero((z[:-1] < 0) & (z[1:] >= 0))
    # linear interpolation of each upward zero crossing
    t = (ups + (-z[ups]) / (z[ups + 1] - z[ups])) * 1e-3
    period = np.mean(np.diff(t))
    assert len(t) >= 4
    assert period == pytest.approx(2 * math.pi * math.sqrt(m * alpha), rel=0.02)


def cloth_scene(path, rigid=(), pbd=None, dt=4e-3, substeps=10, material=None, gravity=(0, 0, -G), pos=(0, 0, 0.5)):
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=dt, substeps=substeps, gravity=gravity),
                     pbd_options=pbd or gs.options.PBDOptions(lower_bound=(-1, -1, -0.5), upper_bound=(1, 1, 1.5)))
    for morph in rigid:
        scene.add_entity(morph)
    cloth = scene.add_entity(gs.morphs.Mesh(file=path, pos=pos), material=material or gs.materials.PBD.Cloth())
    return scene, cloth


def edge_stretch(cloth):
    x = cloth.get_particles_pos().numpy()
    e = cloth.edges
    rest = np.linalg.norm(cloth._points[e[:, 0]] - cloth._points[e[:, 1]], axis=1)
    return np.linalg.norm(x[e[:, 0]] - x[e[:, 1]], axis=1) / rest - 1.0


def test_cloth_held_at_two_corners_does_not_overstretch(tmp_path):
    """A 1 m cloth of 21 x 21 vertices held at its two upper corners hangs for 2 s: no edge longer than 1.1 of its
    rest length (the default compliance 1e-7 m/N, 4 sweeps)."""
    scene, cloth = cloth_scene(pbd_meshes.flat(tmp_path / "c.obj", 21, 1.0))
    scene.build()
    corners = [cloth.find_closest_particle((-0.5, 0.5, 0.5)), cloth.find_closest_particle((0.5, 0.5, 0.5))]
    cloth.fix_particles([int(c) for c in corners])
    for _ in range(500):
        scene.step()
    x = cloth.get_particles_pos()
    assert float(x[:, 2].min()) < 0.5 - 0.8  # it hangs (the far edge most of a metre below the corners)
    assert edge_stretch(cloth).max() < 0.10
    assert torch.equal(x[[int(c) for c in corners]], torch.as_tensor(cloth._points[[int(c) for c in corners]]))


def test_cloth_dropped_on_a_sphere_rests_on_it(tmp_path):
    """A soft 0.8 m cloth dropped on a fixed rigid sphere of radius 0.2 m drapes over it: after 1.5 s it is at rest,
    no particle's centre ever entered the sphere, its middle lies on the sphere's top (the skirt still swings:
    nothing damps it but the air), and the edges hang over its sides."""
    r, centre = 0.2, np.array([0.0, 0.0, 0.3])
    scene, cloth = cloth_scene(pbd_meshes.flat(tmp_path / "c.obj", 25, 0.8),
                               rigid=[gs.morphs.Plane(), gs.morphs.Sphere(pos=tuple(centre), radius=r, fixed=True)],
                               pos=(0, 0, 0.6), material=gs.materials.PBD.Cloth(bending_compliance=1e-2))
    scene.build()
    closest = []
    for _ in range(375):
        scene.step()
        d = np.linalg.norm(cloth.get_particles_pos().numpy() - centre, axis=1)
        closest.append(d.min())
    assert min(closest) >= r - 1e-3
    x = cloth.get_particles_pos().numpy()
    assert x[:, 2].min() < centre[2] + r - 0.1  # draped: the edges hang well below the top
    top = np.argmin(np.linalg.norm(x[:, :2], axis=1))
    assert x[top, 2] == pytest.approx(centre[2] + r + 0.005, abs=0.01)  # the middle lies on the top


def test_cloth_folded_onto_itself_does_not_pass_through(tmp_path):
    """A strip folded over itself: a bottom layer held in place (fixed particles: a table of cloth), a top layer
    4 cm above it, soft bending. The top layer falls onto the bottom one; self-collision keeps every top-layer
    particle at least half a particle size above the bottom layer beneath it (without it, it falls through)."""
    spacing = size = 0.02  # the particles as wide as the mesh spacing: no gaps between them
    path, layer = pbd_meshes.hairpin(tmp_path / "h.obj", 16, 6, spacing, 0.04)
    pbd = gs.options.PBDOptions(lower_bound=(-1, -1, -0.5), upper_bound=(1, 1, 1.5), particle_size=size)
    scene, cloth = cloth_scene(path, pbd=pbd, pos=(0, 0, 0.2), material=gs.materials.PBD.Cloth(bending_compliance=1.0))
    scene.build()
    cloth.fix_particles(np.flatnonzero(layer == 0))
    for _ in range(250):
        scene.step()
    x = cloth.get_particles_pos().numpy()
    top, bottom = x[layer == 2], x[layer == 0]
    assert top[:, 2].mean() < 0.2 + 0.03  # it fell onto the bottom layer (from 4 cm above)
    checked = 0
    for p in top:
        q = bottom[np.argmin(np.linalg.norm(bottom[:, :2] - p[:2], axis=1))]
        if np.linalg.norm(q[:2] - p[:2]) < spacing / 2:
            assert p[2] - q[2] > 0.5 * size
            checked += 1
    assert checked > len(top) // 2


def test_cloth_folded_onto_itself_on_a_floor_does_not_pass_through(tmp_path):
    """The same folded strip lying on a rigid floor, nothing held, particle_size 0.01 (half the mesh spacing: the
    cloth's particles are as wide as its edges): the top layer collapses onto the bottom one and stays at least a
    particle size above it everywhere."""
    spacing, size = 0.02, 0.01
    path, layer = pbd_meshes.hairpin(tmp_path / "h.obj", 16, 6, spacing, 0.04)
    pbd = gs.options.PBDOptions(lower_bound=(-1, -1, -0.5), upper_bound=(1, 1, 1.5), particle_size=size)
    scene, cloth = cloth_scene(path, rigid=[gs.morphs.Plane()], pbd=pbd, pos=(0, 0, 0.006),
                               material=gs.materials.PBD.Cloth(bending_compliance=1.0))
    scene.build()
    for _ in range(250):
        scene.step()
    x = cloth.get_particles_pos().numpy()
    top, bottom = x[layer == 2], x[layer == 0]
    assert top[:, 2].mean() < 0.04  # it collapsed (from 4.6 cm)
    gaps = [p[2] - bottom[np.argmin(np.linalg.norm(bottom[:, :2] - p[:2], axis=1))][2] for p in top
            if np.linalg.norm(bottom[:, :2] - p[:2], axis=1).min() < spacing / 2]
    assert len(gaps) > len(top) // 2 and min(gaps) > size


def test_pre_folded_cloth_keeps_its_fold_without_gravity(tmp_path):
    """A cloth folded at 60 degrees along its middle, gravity off, after 1 s: its rest angle is the mesh's own,
    so the fold stays within 1 degree (a flat rest angle would open it)."""
    scene, cloth = cloth_scene(pbd_meshes.folded(tmp_path / "f.obj", 11, 0.5, 60.0), gravity=(0, 0, 0),
                               material=gs.materials.PBD.Cloth(bending_compliance=1e-3))
    scene.build()
    rng = np.random.default_rng(0)
    cloth.set_particles_vel(torch.as_tensor(rng.normal(0, 0.05, (cloth.n_particles, 3))))
    for _ in range(250):
        scene.step()
    x = cloth.get_particles_pos().numpy()
    n = 11
    grid = x.reshape(n, n, 3)
    # the angle between the two halves' mean planes, from the rows' end points
    left = grid[:, 0] - grid[:, n // 2]
    right = grid[:, -1] - grid[:, n // 2]
    cosang = (left * right).sum(1) / np.linalg.norm(left, axis=1) / np.linalg.norm(right, axis=1)
    angle = np.degrees(np.arccos(np.clip(cosang, -1, 1)))
    assert np.abs(angle - 120.0).max() < 1.0  # the opening between the halves: 180 - 60


def test_pbf_block_at_rest_keeps_its_density(tmp_path):
    """A 0.2 m block of position-based fluid in a closed box of its size settles under gravity in 1 s: the mean
    density of its interior particles stays within 1% of rho."""
    s = 0.02
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=4e-3, substeps=4),
                     pbd_options=gs.options.PBDOptions(lower_bound=(0, 0, 0), upper_bound=(0.2, 0.2, 0.4),
                                                       particle_size=s, max_density_solver_iterations=4))
    water = scene.add_entity(gs.morphs.Box(pos=(0.1, 0.1, 0.1), size=(0.2, 0.2, 0.2)),
                             material=gs.materials.PBD.Liquid())
    scene.build()
    for _ in range(250):
        scene.step()
    rho = scene.pbd_solver.densities()[0].numpy()
    x = water.get_particles_pos().numpy()
    interior = (x[:, 2] < 0.1) & (np.abs(x[:, 0] - 0.1) < 0.05) & (np.abs(x[:, 1] - 0.1) < 0.05)
    assert interior.sum() > 10
    assert rho[interior].mean() == pytest.approx(1000.0, rel=0.01)
    assert float(water.get_particles_vel().norm(dim=1).max()) < 0.2


def swinging_rope(tmp_path, small_step_dt, iterations):
    """A stiff rope (10 particles, 0.45 m, compliance 1e-6 m/N) fixed at one end, released horizontally at
    Genesis World's default step (dt 10 ms, one substep); after 1 s: (energy lost, J; total length / rest)."""
    n, seg, m = 10, 0.05, 0.05
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=1e-2),
                     pbd_options=gs.options.PBDOptions(lower_bound=(-1, -1, -3), upper_bound=(1, 1, 1),
                                                       small_step_dt=small_step_dt,
                                                       max_stretch_solver_iterations=iterations))
    rope = scene.add_entity(gs.morphs.Mesh(file=pbd_meshes.rope(tmp_path / "swing.obj", n, seg * (n - 1)),
                                           euler=(0, 90, 0)),
                            material=gs.materials.PBD.Cloth(rho=m / seg, stretch_compliance=1e-6, air_resistance=0.0))
    scene.build()
    rope.fix_particles([0])
    masses = rope.solver.p_mass.numpy()

    def energy():
        x, v = rope.get_particles_pos().numpy(), rope.get_particles_vel().numpy()
        return float((masses * (0.5 * (v ** 2).sum(1) + G * x[:, 2])).sum())

    e0 = energy()
    for _ in range(100):
        scene.step()
    x = rope.get_particles_pos().numpy()
    return e0 - energy(), np.linalg.norm(np.diff(x, axis=0), axis=1).sum() / (seg * (n - 1))


def test_small_steps_by_default_keep_a_swinging_rope_stiff_and_lively(tmp_path):
    """At Genesis World's default step of 10 ms, the default options split each substep into five PBD steps of
    2 ms with one stretch sweep each (PBDOptions.small_step_dt): the swinging rope stays within 0.5% of its length
    and loses less than 60% of the energy that one 10 ms step with as many sweeps (5) loses to XPBD's artificial
    damping (measured: 0.26% against 3.0% stretch, 0.33 J against 0.60 J lost)."""
    assert gs.options.PBDOptions().small_step_dt == 2e-3
    lost_small, length_small = swinging_rope(tmp_path, 2e-3, 4)
    lost_one, length_one = swinging_rope(tmp_path, None, 5)
    assert abs(length_small - 1.0) < 0.005
    assert abs(length_one - 1.0) > 0.01  # the comparison means something: one big step does stretch
    assert 0 < lost_small < 0.6 * lost_one, (lost_small, lost_one)


def test_small_steps_are_substeps_of_the_pbd_solver_alone(tmp_path):
    """A cloth at dt 10 ms in one substep split into five PBD steps (one stretch sweep each: ceil(4 / 5)) follows the
    same trajectory as five scene substeps of 2 ms with one sweep, bitwise."""
    runs = []
    for substeps, small, its in ((1, 2e-3, 4), (5, None, 1)):
        scene = gs.Scene(sim_options=gs.options.SimOptions(dt=1e-2, substeps=substeps),
                         pbd_options=gs.options.PBDOptions(lower_bound=(-1, -1, 0), upper_bound=(1, 1, 1),
                                                           small_step_dt=small, max_stretch_solver_iterations=its))
        cloth = scene.add_entity(gs.morphs.Mesh(file=pbd_meshes.folded(tmp_path / "f.obj", 6, 0.2, 30.0),
                                                pos=(0, 0, 0.5)), material=gs.materials.PBD.Cloth())
        scene.build()
        cloth.fix_particles([0])
        for _ in range(20):
            scene.step()
        assert scene.pbd_solver.n_small == 5 // substeps
        runs.append((cloth.get_particles_pos(), cloth.get_particles_vel()))
    assert torch.equal(runs[0][0], runs[1][0]) and torch.equal(runs[0][1], runs[1][1])
    assert float((runs[0][0][:, 2] - 0.5).abs().max()) > 0.05  # it moved
