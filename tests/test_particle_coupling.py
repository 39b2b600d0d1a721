"""Particles against colliders through the particle kit (genesis_core.particles.coupling), driven by a particle
solver package registered by hand here (tests/pellets/genesis_pellets: point pellets under gravity) against the
rigid solver's geoms; and the kit's signed distances against numpy references for every geom kind."""

import numpy as np
import pytest
import taichi as ti
import torch

import genesis_core as gs
from genesis_core import plugins
from genesis_core.coupler import GEOM_MESH
from genesis_core.particles import collider as kit
from genesis_core.particles.coupling import ParticleColliderCoupling, n_chunks
from genesis_core.testing import assert_states_equal, check_momentum_exchange, flat_state
from genesis_core.ti_math import quat_to_mat

from .pellets.genesis_pellets import plugin as pellets_plugin

SIZE = 0.02  # the pellets' lattice spacing, m: a Sphere of radius SIZE / 2 holds one pellet, of that radius


@pytest.fixture(scope="module", autouse=True)
def pellets():
    """The pellet plugin, registered for this module's tests only (other tests see the installed plugins)."""
    name = plugins.register_plugin(pellets_plugin, name="pellets")
    yield pellets_plugin
    plugins.unregister_plugin(name)
    assert "PelletSolver" not in plugins.registry().solvers


def pellet_scene(gravity=(0, 0, 0), restitution=1.0, dt=1e-3, substeps=1):
    return gs.Scene(sim_options=gs.options.SimOptions(dt=dt, substeps=substeps, gravity=gravity),
                    pellet_options=gs.options.PelletOptions(lower_bound=(-1, -1, -1), upper_bound=(1, 1, 1.5),
                                                            particle_size=SIZE, restitution=restitution))


def one_pellet(scene, pos, mass):
    """A single pellet of `mass` kg at `pos`."""
    return scene.add_entity(gs.morphs.Sphere(pos=pos, radius=SIZE / 2),
                            material=gs.materials.Pellet(rho=mass / SIZE ** 3))


def kinetic_energy(m, v, M, V):
    """Of a pellet (m, v) and a body translating at V (the tests check that it does not spin)."""
    return 0.5 * m * float((v ** 2).sum()) + 0.5 * M * float((V ** 2).sum())


# -- two bodies ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("restitution, pellet_after, box_after", [(1.0, -0.6, 0.4), (0.0, 0.2, 0.2)])
def test_a_pellet_and_a_free_box_exchange_momentum_as_two_bodies(restitution, pellet_after, box_after):
    """No gravity: a 0.2 kg pellet at v0 hits a free 0.8 kg box head-on, along x through its centre of mass. As
    two point bodies: elastic, the box leaves at 2m/(m+M) v0 = 0.4 v0 and the pellet at (m-M)/(m+M) v0 = -0.6 v0,
    kinetic energy conserved; plastic, both at m/(m+M) v0 = 0.2 v0, keeping m/(m+M) of the energy. Momentum is
    conserved either way. One pellet against one body is the exact case of the kit's shared inertia, so float64
    rounding is the only error (the box takes the impulse as a force over one substep: J/h, times h)."""
    v0 = 0.7
    scene = pellet_scene(restitution=restitution)
    box = scene.add_entity(gs.morphs.Box(pos=(0, 0, 0.5), size=(0.2, 0.2, 0.2)),
                           material=gs.materials.Rigid(rho=100.0, friction=0.0))  # 0.8 kg
    pellet = one_pellet(scene, (-0.15, 0, 0.5), 0.2)
    scene.build()
    assert [type(c).__name__ for c in scene.coupler.couplings] == ["ParticleColliderCoupling"]
    assert pellet.n_particles == 1
    m, M = float(pellet.get_mass()), 0.8
    assert m == pytest.approx(0.2, rel=1e-12)
    pellet.set_velocity([v0, 0, 0])
    p0, e0 = m * v0, 0.5 * m * v0 ** 2
    gap = []
    for _ in range(100):
        scene.step()
        gap.append(float(box.get_pos()[0] - 0.1 - pellet.get_particles_pos()[0, 0]) - SIZE / 2)
    v, V = pellet.get_particles_vel()[0], box.get_vel()
    assert min(gap) > -1e-12, f"the pellet sank {-min(gap):.3g} m into the box"
    if restitution:
        assert gap[-1] > 0.01, "they did not separate"
    else:
        assert abs(gap[-1]) < 1e-12 and float(box.get_pos()[0]) > 0.004, "they did not move on together"
    p1 = m * float(v[0]) + M * float(V[0])
    e1 = kinetic_energy(m, v, M, V)
    u, U = float(v[0]) / v0, float(V[0]) / v0
    print(f"restitution {restitution}: pellet {u:.15f} v0 (off by {u - pellet_after:.1e}), box {U:.15f} v0 (off by "
          f"{U - box_after:.1e}), momentum error {abs(p1 - p0) / p0:.1e}, energy ratio {e1 / e0:.15f}")
    assert float(v[0]) == pytest.approx(pellet_after * v0, rel=1e-9)
    assert float(V[0]) == pytest.approx(box_after * v0, rel=1e-9)
    assert float(v[1:].abs().max()) < 1e-12 and float(V[1:].abs().max()) < 1e-12
    assert float(box.get_ang().abs().max()) < 1e-12, "a head-on hit through the centre of mass set the box spinning"
    assert abs(p1 - p0) < 1e-9 * p0
    assert e1 / e0 == pytest.approx(1.0 if restitution else m / (m + M), rel=1e-6)


def test_an_applied_force_leaves_the_couplings_impulses_as_they_are():
    """The elastic hit above while a force lifts the box (apply_links_external_force at every step, no gravity):
    momentum along x is conserved to rounding and the box leaves at 0.4 v0 (to 1e-4: it rose 0.5 mm before the
    hit, which now sets it turning a little), and it gains F t / M upwards. The substep adds the applied impulse to
    the couplings' in a copy of the accumulator; the state's next frame must still start empty for the couplings
    to fill, or each substep's impulse returns one ring later (the box left at 8.4 v0)."""
    v0, F, m, M = 0.7, 0.5, 0.2, 0.8
    scene = pellet_scene(restitution=1.0)
    box = scene.add_entity(gs.morphs.Box(pos=(0, 0, 0.5), size=(0.2, 0.2, 0.2)),
                           material=gs.materials.Rigid(rho=100.0, friction=0.0))
    pellet = one_pellet(scene, (-0.15, 0, 0.5), m)
    scene.build()
    pellet.set_velocity([v0, 0, 0])
    for _ in range(100):
        box.apply_links_external_force([0.0, 0.0, F])
        scene.step()
    v, V = pellet.get_particles_vel()[0], box.get_vel()
    assert m * float(v[0]) + M * float(V[0]) == pytest.approx(m * v0, rel=1e-9)
    assert float(V[0]) == pytest.approx(0.4 * v0, rel=1e-4)
    assert float(V[2]) == pytest.approx(F * 100 * 1e-3 / M, rel=1e-9)


def octahedron_obj(path, a):
    """|x| + |y| + |z| <= a, faces wound outwards."""
    verts = [(a, 0, 0), (-a, 0, 0), (0, a, 0), (0, -a, 0), (0, 0, a), (0, 0, -a)]
    faces = []
    for x in (0, 1):
        for y in (2, 3):
            for z in (4, 5):
                sign = (1 if x == 0 else -1) * (1 if y == 2 else -1) * (1 if z == 4 else -1)
                faces.append((x, y, z) if sign > 0 else (x, z, y))
    with open(path, "w") as f:
        f.writelines(f"v {x} {y} {z}\n" for x, y, z in verts)
        f.writelines(f"f {i + 1} {j + 1} {k + 1}\n" for i, j, k in faces)
    return str(path)


def test_a_pellet_bounces_off_a_free_rigid_mesh_as_off_a_body_of_its_mass(tmp_path):
    """No gravity: a pellet sent at a free convex mesh (an octahedron, collided through the kit's mesh distance,
    the hull's planes) along a face normal through its centre of mass: the elastic two-body exchange with the mesh's
    mass M, 2m/(m+M) v0 for the mesh and (m-M)/(m+M) v0 for the pellet, energy and momentum conserved, and the
    pellet never inside the face."""
    a, v0 = 0.1, 0.5
    scene = pellet_scene(restitution=1.0)
    mesh = scene.add_entity(gs.morphs.Mesh(file=octahedron_obj(tmp_path / "octahedron.obj", a), pos=(0, 0, 0.5)),
                            material=gs.materials.Rigid(rho=500.0, friction=0.0))
    normal = np.ones(3) / np.sqrt(3)  # of the face x + y + z = a
    face = a / np.sqrt(3)  # its distance from the centre
    pellet = one_pellet(scene, tuple(np.array([0, 0, 0.5]) + (face + 0.05) * normal), 0.05)
    scene.build()
    view = scene.rigid_solver.collider_view(scene.rigid_solver.frame)
    assert view.geom_type.tolist() == [GEOM_MESH] and int(view.geom_hull[0, 1]) >= 8
    m, M = float(pellet.get_mass()), 1.0 / float(view.body_inv_mass[0])
    assert M == pytest.approx(500.0 * 4 / 3 * a ** 3, rel=1e-6)
    direction = torch.as_tensor(-normal)
    pellet.set_velocity(v0 * direction)
    centre0 = mesh.get_pos()
    gap = []
    for _ in range(150):
        scene.step()
        gap.append(float(((pellet.get_particles_pos()[0] - mesh.get_pos()) * torch.as_tensor(normal)).sum()) - face
                   - SIZE / 2)
    v, V = pellet.get_particles_vel()[0], mesh.get_vel()
    print(f"mesh of {M:.6f} kg: pellet {float(v @ direction) / v0:.12f} v0, mesh {float(V @ direction) / v0:.12f} "
          f"v0 (expected {(m - M) / (m + M):.12f}, {2 * m / (m + M):.12f}), energy ratio "
          f"{kinetic_energy(m, v, M, V) / (0.5 * m * v0 ** 2):.15f}, min gap {min(gap):.1e} m")
    assert min(gap) > -1e-9, f"the pellet went {-min(gap):.3g} m into the face"
    assert float(((mesh.get_pos() - centre0) @ direction)) > 0.003, "the mesh was not pushed"
    assert torch.allclose(v, (m - M) / (m + M) * v0 * direction, atol=1e-9)
    assert torch.allclose(V, 2 * m / (m + M) * v0 * direction, atol=1e-9)
    assert float(mesh.get_ang().abs().max()) < 1e-9
    assert torch.allclose(m * v + M * V, m * v0 * direction, atol=1e-12)
    assert kinetic_energy(m, v, M, V) == pytest.approx(0.5 * m * v0 ** 2, rel=1e-6)


def test_frozen_pellets_take_no_part():
    """A frozen pellet left inside a free box is neither pushed out nor pushes it; once active, it is pushed out
    to the surface and the box recoils."""
    scene = pellet_scene(restitution=0.0)
    box = scene.add_entity(gs.morphs.Box(pos=(0, 0, 0.5), size=(0.2, 0.2, 0.2)), material=gs.materials.Rigid(rho=100.0))
    pellet = one_pellet(scene, (-0.095, 0, 0.5), 0.2)
    scene.build()
    pellet.set_velocity([0.5, 0, 0])
    pellet.deactivate()
    start = pellet.get_particles_pos().clone()
    for _ in range(10):
        scene.step()
    assert torch.equal(pellet.get_particles_pos(), start)
    assert float(box.get_vel().abs().max()) == 0.0 and float(box.get_ang().abs().max()) == 0.0
    pellet.activate()
    scene.step()
    scene.step()
    assert float(pellet.get_particles_pos()[0, 0]) <= float(box.get_pos()[0]) - 0.1 - SIZE / 2 + 1e-12
    assert float(box.get_vel()[0]) > 0.0


# -- resting contact -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("restitution", [0.0, 0.5])
def test_pellets_rest_on_a_plane_and_on_a_fixed_box_without_sinking(restitution):
    """Under gravity, pellets dropped onto the ground plane and onto a fixed box never get deeper than rounding
    (each substep's penetration, g h^2, is projected out in the same substep) and come to rest on the surfaces:
    a bounce of speed u rises u^2 / 2g, and the last ones are of the order of a substep's g h."""
    dt, substeps = 2e-3, 2
    scene = pellet_scene(gravity=(0, 0, -9.81), restitution=restitution, dt=dt, substeps=substeps)
    scene.add_entity(gs.morphs.Plane())
    scene.add_entity(gs.morphs.Box(pos=(0.5, 0, 0.1), size=(0.2, 0.2, 0.2), fixed=True))
    on_plane = one_pellet(scene, (-0.5, 0, 0.05), 0.01)
    on_box = one_pellet(scene, (0.5, 0.05, 0.25), 0.01)
    scene.build()
    r = SIZE / 2
    lowest = [1.0, 1.0]
    for _ in range(400):
        scene.step()
        lowest[0] = min(lowest[0], float(on_plane.get_particles_pos()[0, 2]) - r)
        lowest[1] = min(lowest[1], float(on_box.get_particles_pos()[0, 2]) - 0.2 - r)
    assert min(lowest) > -1e-12, f"sank: {lowest}"
    h = dt / substeps
    for pellet, top in ((on_plane, 0.0), (on_box, 0.2)):
        height = float(pellet.get_particles_pos()[0, 2]) - top - r
        assert -1e-12 < height < 1e-4, f"not at rest on its surface: {height:.3g} m above it"
        assert float(pellet.get_particles_vel()[0].abs().max()) < 2 * 9.81 * h + 1e-12
        assert float(pellet.get_particles_pos()[0, 0]) == pytest.approx(pellet.morph.pos[0], abs=1e-12)


def test_a_static_world_skips_its_substeps_with_the_same_result(monkeypatch):
    """A rigid world without dofs (a plane and a fixed box) writes the same frame every substep: once its frames
    hold it, the rigid solver skips its kernels (and the collider view its geometry) until something it reads
    changes. Pellets falling on it move bitwise as with the full substeps, and so after a reset to an earlier state
    (which must bring the full substeps back)."""
    from genesis_rigid.solver import RigidSolver

    def run(full):
        if full:
            monkeypatch.setattr(RigidSolver, "_static_world", lambda self, f: False)
        scene = pellet_scene(gravity=(0, 0, -9.81), restitution=0.5, dt=2e-3, substeps=2)
        scene.add_entity(gs.morphs.Plane())
        scene.add_entity(gs.morphs.Box(pos=(0.3, 0, 0.1), size=(0.2, 0.2, 0.2), fixed=True))
        heap = scene.add_entity(gs.morphs.Box(pos=(0.25, 0.0, 0.3), size=(4 * SIZE,) * 3),
                                material=gs.materials.Pellet())
        scene.build(n_envs=2)
        heap.set_velocity(THROWS[:2])
        states = []
        for k in range(60):
            scene.step()
            if k == 20:
                early = scene.get_state()
        states.append(flat_state(scene.get_state()))
        scene.reset(state=early)
        for k in range(39):
            scene.step()
        states.append(flat_state(scene.get_state()))
        skipped = scene.rigid_solver._static[1] >= scene.rigid_solver.frames.n_frames
        monkeypatch.undo()
        return states, skipped

    fast, skipped = run(full=False)
    full, _ = run(full=True)
    assert skipped, "the static world never skipped a substep"
    for a, b in zip(fast, full):
        assert_states_equal(b, a, n_envs=2)
    assert_states_equal(fast[0], fast[1], n_envs=2)  # the reset run retraces the first


# -- determinism and environments ----------------------------------------------------------------------------------


THROWS = torch.tensor([[0.0, 0.0, -1.0], [0.4, 0.0, -0.5], [-0.3, 0.2, -2.0]], dtype=torch.float64)  # per env
BOX_MASS = 50.0 * 0.2 ** 3


def heap_scene(n_envs, gravity):
    """A block of 4 x 4 x 4 pellets (never colliding with each other) thrown down at a box, off its centre,
    differently in each environment: with gravity onto a box on the ground, where they come to rest; without,
    at a free box, which they push and set spinning."""
    scene = pellet_scene(gravity=(0, 0, -9.81) if gravity else (0, 0, 0), restitution=0.3, dt=2e-3, substeps=2)
    z = 0.1 if gravity else 0.5
    if gravity:
        scene.add_entity(gs.morphs.Plane())
    box = scene.add_entity(gs.morphs.Box(pos=(0, 0, z), size=(0.2, 0.2, 0.2)), material=gs.materials.Rigid(rho=50.0))
    heap = scene.add_entity(gs.morphs.Box(pos=(0.04, 0.02, z + 0.16), size=(4 * SIZE,) * 3),
                            material=gs.materials.Pellet())
    scene.build(n_envs=n_envs)
    heap.set_velocity(THROWS[:n_envs])
    return scene, box, heap


def pellets_momentum(scene):
    """[B, 3]: the linear momentum of the pellets now."""
    pellets = scene.get_state().solvers_state[scene.solvers.index(scene.pellet_solver)]
    return (pellets.vel * scene.pellet_solver.p_mass[:, None]).sum(-2)


def box_momentum(scene):
    """[B, 3]: the linear momentum of the box now, counting the impulses the coupling handed it in the last substep
    (the rigid solver applies them in the next one)."""
    rigid = scene.get_state().solvers_state[scene.solvers.index(scene.rigid_solver)]
    # a free box: dofs_vel holds the linear velocity of its origin, its centre of mass
    return BOX_MASS * rigid.dofs_vel[..., :3] + rigid.links_ext_impulse[..., 0, :3]


def test_many_pellets_hitting_one_box_conserve_momentum():
    """No gravity: 64 pellets hit a free box together (their contacts share its inertia, and their impulses are
    summed over two private rows per environment, in a fixed order); the linear momentum of pellets and box is
    what it was, to rounding, in every environment."""
    n_envs = 2
    scene, box, heap = heap_scene(n_envs, gravity=False)
    assert heap.n_particles == 64 and n_chunks(64, n_envs) == 2
    got = check_momentum_exchange(scene, lambda: pellets_momentum(scene), lambda: box_momentum(scene), 80, rtol=0,
                                  atol=1e-12, every_step=False)
    print(f"momentum {got.total0.tolist()} -> {(got.a + got.b).tolist()}, largest change {got.drift:.2e} N s")
    vel, ang = box.get_vel(), box.get_ang()
    assert float(vel[:, 2].max()) < -0.1 and float(ang.norm(dim=1).min()) > 0.1, "the pellets did not push the box"


def test_two_runs_are_bitwise_equal_and_resetting_one_environment_leaves_the_others_untouched():
    """Under gravity, pellets thrown differently in three environments come to rest on a box on the ground
    (resting contacts: every substep each environment's pellets press on the box). A second scene runs bitwise as
    the first; restoring a state and stepping repeats the steps bitwise; resetting environment 1 restores it alone,
    and environments 0 and 2 go on bitwise as if nothing had happened."""
    n_envs = 3
    scene, box, heap = heap_scene(n_envs, gravity=True)
    assert heap.n_particles == 64 and n_chunks(64, n_envs) == 2  # the impulses are summed over two private rows
    start = scene.get_state()
    for _ in range(40):
        scene.step()
    mid = scene.get_state()
    for _ in range(40):
        scene.step()
    end = scene.get_state()
    pos = heap.get_particles_pos()
    on_top = (pos[..., 0].abs() < 0.1) & (pos[..., 1].abs() < 0.1)
    assert bool(on_top.any(dim=1).all()), "no pellet on the box in some environment"
    # above the box's top face (the box, pressed ~10 um into the ground, is not quite where it started)
    height = (pos[..., 2] - box.get_pos()[:, 2:] - 0.1 - SIZE / 2)[on_top]
    assert float(height.min()) > -1e-9, "pellets sank into the box"
    assert float(height.max()) < 1e-3, "pellets on the box are not at rest on it"
    assert not torch.equal(pos[0], pos[1]) and not torch.equal(pos[1], pos[2])

    other, _, _ = heap_scene(n_envs, gravity=True)
    for _ in range(80):
        other.step()
    assert_states_equal(end, other.get_state(), what="a second scene built the same way ran differently")

    scene.reset(state=start)
    for _ in range(40):
        scene.step()
    assert_states_equal(mid, scene.get_state(), what="restored and stepped again")
    scene.reset(state=start, envs_idx=[1])
    after = scene.get_state()
    assert_states_equal(mid, after, envs=[0, 2], what="resetting env 1 changed envs 0 and 2")
    # (compared without the step index, which the environments share)
    assert_states_equal(flat_state(start), flat_state(after), n_envs, envs=[1], what="env 1 was not reset")
    for _ in range(40):
        scene.step()
    final = scene.get_state()
    assert_states_equal(end, final, envs=[0, 2], what="envs 0 and 2 after env 1 was reset")
    assert_states_equal(flat_state(mid), flat_state(final), n_envs, envs=[1], what="env 1 restarted from its start")


def test_the_coupling_refuses_differentiable_mode_and_malformed_views(monkeypatch):
    """Differentiable mode is refused when the coupling is built; a particle view whose arrays disagree with each
    other is refused at the step, naming the array, before a kernel indexes it."""
    scene = pellet_scene()
    scene.add_entity(gs.morphs.Box(pos=(0, 0, 0.5), size=(0.2, 0.2, 0.2)))
    one_pellet(scene, (-0.15, 0, 0.5), 0.2)
    scene.build()
    with pytest.raises(gs.GenesisError, match="not differentiable"):
        ParticleColliderCoupling(scene.rigid_solver, scene.pellet_solver, gs.options.SimOptions(requires_grad=True))
    solver = scene.pellet_solver
    good = solver.particle_view

    def short_mass(f):
        view = good(f)
        return type(view)(pos=view.pos, vel=view.vel, mass=view.mass[:0], active=view.active, radius=view.radius)

    monkeypatch.setattr(solver, "particle_view", short_mass)
    with pytest.raises(gs.GenesisError, match=r"PelletSolver: mass has shape \(0,\); .* needs \(1,\)"):
        scene.step()
    monkeypatch.setattr(solver, "particle_view", lambda f: (good(f).pos, good(f).vel))
    with pytest.raises(gs.GenesisError, match="not a genesis_core.particles.coupling.ParticleView"):
        scene.step()


# -- signed distances ----------------------------------------------------------------------------------------------

V3 = ti.types.vector(3, float)


@ti.kernel
def kit_distances(gtype: ti.i32, size: ti.types.ndarray(ndim=1), centre: ti.types.ndarray(ndim=1),
                  quat: ti.types.ndarray(ndim=1), hull_planes: ti.types.ndarray(ndim=2),
                  points: ti.types.ndarray(dtype=V3, ndim=1), d_out: ti.types.ndarray(ndim=1),
                  n_out: ti.types.ndarray(dtype=V3, ndim=1)):
    for i in range(points.shape[0]):
        rot = quat_to_mat(ti.Vector([quat[0], quat[1], quat[2], quat[3]]))
        d, n = kit.signed_distance(gtype, ti.Vector([size[0], size[1], size[2]]),
                                   ti.Vector([centre[0], centre[1], centre[2]]), rot, 0, hull_planes.shape[0],
                                   hull_planes, points[i], True)
        d_out[i] = d
        n_out[i] = n


def np_rotation(q):
    w, x, y, z = q
    return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
                     [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
                     [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)]])


def closest_on_triangles(p, tri):
    """Distances [P] from points p [P, 3] to the nearest of the triangles tri [T, 3, 3] (Ericson, Real-Time
    Collision Detection 5.1.5, per Voronoi region of the triangle)."""
    a, b, c = (tri[None, :, i, :] for i in range(3))
    p = p[:, None, :]
    ab, ac, ap = b - a, c - a, p - a
    d1, d2 = (ab * ap).sum(-1), (ac * ap).sum(-1)
    bp, cp = p - b, p - c
    d3, d4 = (ab * bp).sum(-1), (ac * bp).sum(-1)
    d5, d6 = (ab * cp).sum(-1), (ac * cp).sum(-1)
    va, vb, vc = d3 * d6 - d5 * d4, d5 * d2 - d1 * d6, d1 * d4 - d3 * d2
    with np.errstate(divide="ignore", invalid="ignore"):
        denom = 1.0 / (va + vb + vc)
        v, w = vb * denom, vc * denom
        q = a + ab * v[..., None] + ac * w[..., None]  # inside the face
        t_ab = d1 / (d1 - d3)
        t_ac = d2 / (d2 - d6)
        t_bc = (d4 - d3) / ((d4 - d3) + (d5 - d6))
    regions = [  # (condition, closest point), the first that holds wins
        ((d1 <= 0) & (d2 <= 0), a + 0 * p),
        ((d3 >= 0) & (d4 <= d3), b + 0 * p),
        ((d6 >= 0) & (d5 <= d6), c + 0 * p),
        ((vc <= 0) & (d1 >= 0) & (d3 <= 0), a + ab * t_ab[..., None]),
        ((vb <= 0) & (d2 >= 0) & (d6 <= 0), a + ac * t_ac[..., None]),
        ((va <= 0) & (d4 - d3 >= 0) & (d5 - d6 >= 0), b + (c - b) * t_bc[..., None]),
    ]
    for cond, point in reversed(regions):
        q = np.where(cond[..., None], point, q)
    return np.linalg.norm(p - q, axis=-1).min(axis=1)


def reference(kind, size, planes=None):
    """The signed distance (negative inside) in the geom's frame, from each shape's closest point outside and its
    nearest face inside; vectorised over points [P, 3]."""
    r, h = size[0], size[1]

    def plane(p):
        return p[:, 2]

    def sphere(p):
        return np.linalg.norm(p, axis=1) - r

    def capsule(p):
        axial = np.clip(p[:, 2], -h, h)
        return np.linalg.norm(p - np.stack([0 * axial, 0 * axial, axial], 1), axis=1) - r

    def cylinder(p):
        rho = np.linalg.norm(p[:, :2], axis=1)
        clamp = np.minimum(rho, r) / np.maximum(rho, 1e-300)
        closest = np.stack([p[:, 0] * clamp, p[:, 1] * clamp, np.clip(p[:, 2], -h, h)], 1)
        outside = np.linalg.norm(p - closest, axis=1)
        inside = -np.minimum(r - rho, h - np.abs(p[:, 2]))
        return np.where(outside > 0, outside, inside)

    def box(p):
        half = np.asarray(size)
        outside = np.linalg.norm(p - np.clip(p, -half, half), axis=1)
        inside = -np.min(half - np.abs(p), axis=1)
        return np.where(outside > 0, outside, inside)

    def mesh(p):  # exact inside a convex polytope: the nearest face plane
        return (p @ planes[:, :3].T - planes[:, 3]).max(axis=1)

    return {"plane": plane, "sphere": sphere, "capsule": capsule, "cylinder": cylinder, "box": box, "mesh": mesh}[kind]


def gradient(fn, p, eps=1e-6):
    return np.stack([(fn(p + eps * e) - fn(p - eps * e)) / (2 * eps) for e in np.eye(3)], 1)


KINDS = {"plane": (gs.coupler.GEOM_PLANE, (0.0, 0.0, 0.0)), "sphere": (gs.coupler.GEOM_SPHERE, (0.3, 0.0, 0.0)),
         "capsule": (gs.coupler.GEOM_CAPSULE, (0.15, 0.25, 0.0)),
         "cylinder": (gs.coupler.GEOM_CYLINDER, (0.2, 0.3, 0.0)), "box": (gs.coupler.GEOM_BOX, (0.3, 0.2, 0.12)),
         "mesh": (gs.coupler.GEOM_MESH, (0.0, 0.0, 0.0))}


def icosahedron_hull(rng):
    """A convex mesh (an icosahedron stretched along its axes): its triangles and their planes (n, offset)."""
    t = (1 + 5 ** 0.5) / 2
    verts = np.array([(-1, t, 0), (1, t, 0), (-1, -t, 0), (1, -t, 0), (0, -1, t), (0, 1, t), (0, -1, -t), (0, 1, -t),
                      (t, 0, -1), (t, 0, 1), (-t, 0, -1), (-t, 0, 1)], dtype=float)
    verts *= np.array([0.12, 0.09, 0.07]) * rng.uniform(0.8, 1.2, 3)
    faces = np.array([(0, 11, 5), (0, 5, 1), (0, 1, 7), (0, 7, 10), (0, 10, 11), (1, 5, 9), (5, 11, 4), (11, 10, 2),
                      (10, 7, 6), (7, 1, 8), (3, 9, 4), (3, 4, 2), (3, 2, 6), (3, 6, 8), (3, 8, 9), (4, 9, 5),
                      (2, 4, 11), (6, 2, 10), (8, 6, 7), (9, 8, 1)])
    tri = verts[faces]
    n = np.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0])
    n /= np.linalg.norm(n, axis=1, keepdims=True)
    offset = (n * tri[:, 0]).sum(1)
    flip = np.where(offset < 0, -1.0, 1.0)  # outward: the centre (origin) is inside
    return tri, np.concatenate([n * flip[:, None], (offset * flip)[:, None]], 1)


@pytest.mark.parametrize("kind", list(KINDS))
def test_signed_distances_match_numpy_for_every_geom_kind(kind):
    """4000 random points around a randomly posed geom: d and the outward normal n (world axes) from the kit's
    signed_distance, against the closest point outside and the nearest face inside (n: the distance's gradient,
    by central differences, where the distance is smooth). A mesh's distance is exact inside; outside it is the
    largest of its face planes' distances, a positive lower bound of the true one (points to triangles)."""
    rng = np.random.default_rng(list(KINDS).index(kind))
    gtype, size = KINDS[kind]
    tri, planes = icosahedron_hull(rng) if kind == "mesh" else (None, np.array([[0.0, 0.0, 1.0, 0.0]]))
    q = rng.normal(size=4)
    q /= np.linalg.norm(q)
    centre = rng.uniform(-1, 1, 3)
    R = np_rotation(q)
    r, h = size[0], size[1]
    half = {"plane": (0.5, 0.5, 0.5), "sphere": (r, r, r), "capsule": (r, r, r + h), "cylinder": (r, r, h),
            "box": size, "mesh": np.abs(tri).max(axis=(0, 1)) if tri is not None else None}[kind]
    local = rng.uniform(-1.6, 1.6, size=(4000, 3)) * np.asarray(half)
    points = local @ R.T + centre
    d_t, n_t = torch.zeros(len(points), dtype=torch.float64), torch.zeros((len(points), 3), dtype=torch.float64)
    kit_distances(gtype, *(torch.as_tensor(np.ascontiguousarray(x), dtype=torch.float64)
                           for x in (size, centre, q, planes, points)), d_t, n_t)
    d, n = d_t.numpy(), n_t.numpy()
    fn = reference(kind, size, planes)
    d_ref = fn(local)
    n_ref = gradient(fn, local) @ R.T
    inside = d_ref < 0
    assert inside.sum() > 400 and (~inside).sum() > 400
    if kind == "mesh":
        np.testing.assert_allclose(d[inside], d_ref[inside], rtol=0, atol=1e-12)
        true = closest_on_triangles(local[~inside], tri)
        assert np.all(d[~inside] > 0) and np.all(d[~inside] <= true + 1e-12)
        assert np.mean(d[~inside] > 0.5 * true) > 0.5  # a bound, not a blind positive number
    else:
        np.testing.assert_allclose(d, d_ref, rtol=0, atol=1e-12)
    # where the distance is smooth at the stencil's scale (away from edges, ridges and axes), n is its gradient
    smooth = np.linalg.norm(gradient(fn, local, 2e-6) - gradient(fn, local), axis=1) < 1e-8
    if kind == "mesh":
        smooth &= inside
    if kind == "cylinder":
        rim = (np.linalg.norm(local[:, :2], axis=1) > size[0]) & (np.abs(local[:, 2]) > size[1])
        assert rim.sum() > 100, "too few points beyond the rim"
    assert smooth.sum() > 0.9 * (inside.sum() if kind == "mesh" else len(local))
    np.testing.assert_allclose(n[smooth], n_ref[smooth], rtol=0, atol=1e-7)
