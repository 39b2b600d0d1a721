"""Convex-mesh collision: hulls, inertia from hulls, resting contacts against analytic heights, penetration depths
against the separating-axis minimum, and the panda's mesh links (floor, grasp and lift).

Tolerances: a resting contact settles at the solver's penetration slop (1e-4 m), so resting heights are checked to
1 mm; depths of random overlaps are checked against the exact separating-axis result.
"""

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import genesis_core as gs
from genesis_rigid import assets
from genesis_rigid.entity import _quat_to_mat
from genesis_rigid.hull import MAX_HULL_VERTICES, box_hull, hull_of_points, mesh_hull
from genesis_rigid.kernels_collision import CI_ACTIVE, CI_KEY, CI_META, CM_SETTLED, KEY_SPAN
from genesis_rigid.kernels_convex import FACE_COS
from genesis_rigid.model import MESH
from genesis_core.rotations import quat_to_mat

CUBE_V = [(-1, -1, -1), (1, -1, -1), (1, 1, -1), (-1, 1, -1), (-1, -1, 1), (1, -1, 1), (1, 1, 1), (-1, 1, 1)]
CUBE_F = [(1, 3, 2), (1, 4, 3), (5, 6, 7), (5, 7, 8), (1, 2, 6), (1, 6, 5), (2, 3, 7), (2, 7, 6), (3, 4, 8),
          (3, 8, 7), (4, 1, 5), (4, 5, 8)]
TET_V = [(0, 0, 0), (1, 0, 0), (0, 1, 0), (0, 0, 1)]
TET_F = [(1, 3, 2), (1, 2, 4), (1, 4, 3), (2, 3, 4)]
PANDA = "mjcf/franka_emika_panda/scene.xml"
PANDA_ARM = "mjcf/franka_emika_panda/panda.xml"  # the arm alone, without scene.xml's floor
HOME = [0, 0, 0, -1.57079, 0, 1.57079, -0.7853, 0.04, 0.04]


def write_obj(path, vertices, faces):
    path.write_text("".join(f"v {x} {y} {z}\n" for x, y, z in vertices) +
                    "".join(f"f {a} {b} {c}\n" for a, b, c in faces))
    return str(path)


@pytest.fixture
def meshes(tmp_path):
    """An MJCF writer whose assets are a unit cube ("cube", scaled to a 10 cm cube), a unit right tetrahedron
    ("tet", scaled to 10 cm legs) and a 40 x 40 x 10 cm slab made of the cube ("slab")."""
    write_obj(tmp_path / "cube.obj", CUBE_V, CUBE_F)
    write_obj(tmp_path / "tet.obj", TET_V, TET_F)

    def mjcf(name, worldbody):
        path = tmp_path / name
        path.write_text(f"""<mujoco><asset>
  <mesh name="cube" file="cube.obj" scale="0.05 0.05 0.05"/>
  <mesh name="tet" file="tet.obj" scale="0.1 0.1 0.1"/>
  <mesh name="slab" file="cube.obj" scale="0.2 0.2 0.05"/>
</asset><worldbody>{worldbody}</worldbody></mujoco>""")
        return gs.morphs.MJCF(file=str(path))

    return mjcf


def build(morphs, dt=1e-2, n_envs=0, **sim):
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=dt, **sim))
    ents = [scene.add_entity(m) for m in morphs]
    scene.build(n_envs=n_envs)
    return scene, ents


def hull_points(entity):
    """World vertices of every colliding mesh geom's hull, per link name."""
    rot = _quat_to_mat(entity.get_links_quat())
    pos = entity.get_links_pos()
    out = {}
    for i, body in enumerate(entity.robot.bodies):
        for g in body.geoms:
            if g.type == MESH and (g.contype or g.conaffinity):
                local = np.asarray(g.hull().vertices) @ quat_to_mat(g.quat).T + g.pos
                world = torch.as_tensor(local) @ rot[i].T + pos[i]
                out[body.name] = torch.cat([out[body.name], world]) if body.name in out else world
    return out


def lowest(entity, skip=()):
    return min(float(v[:, 2].min()) for name, v in hull_points(entity).items() if name not in skip)


def active_contacts(scene):
    return int(scene.rigid_solver.scratch["s_con_i"][0, 0].sum())


# -- hulls and inertia --------------------------------------------------------------------------------------------

def test_hulls_are_exact_within_the_budget_and_close_beyond_it():
    """A box's hull: 8 vertices, 6 square faces wound outward, volume and inertia of the box. 2000 points on a
    sphere of radius 1: at most MAX_HULL_VERTICES vertices, every point within `deviation` of the hull, and the
    deviation small (greedy farthest-point insertion: 64 vertices cover the sphere to a few per cent)."""
    h = box_hull([0.1, 0.2, 0.3])
    assert len(h.vertices) == 8 and sorted(len(loop) for loop in h.face_loops) == [4] * 6
    volume, centroid, inertia = h.mass_properties()
    assert volume == pytest.approx(0.048) and np.allclose(centroid, 0, atol=1e-15)
    assert np.allclose(inertia, np.diag([0.4 ** 2 + 0.6 ** 2, 0.2 ** 2 + 0.6 ** 2, 0.2 ** 2 + 0.4 ** 2]) * 0.048 / 12)
    for n, d, loop in zip(h.face_normals, h.face_offsets, h.face_loops):
        p = h.vertices[list(loop)]
        area = sum(np.cross(p[i], p[(i + 1) % len(p)]) for i in range(len(p)))
        assert area @ n > 0 and np.allclose(p @ n, d)  # counter-clockwise seen from outside, on the plane
    rng = np.random.default_rng(0)
    points = rng.normal(size=(2000, 3))
    points /= np.linalg.norm(points, axis=1, keepdims=True)
    s = hull_of_points(points)
    assert len(s.vertices) == MAX_HULL_VERTICES and 0 < s.deviation < 0.1
    assert (points @ s.face_normals.T - s.face_offsets).max() <= s.deviation + 1e-12
    assert (s.vertices @ s.face_normals.T - s.face_offsets).max() <= 1e-12  # the faces bound the hull


def test_mesh_bodies_without_inertial_take_mass_and_inertia_from_the_hull(meshes, tmp_path):
    """MJCF: density 500 on a 10 cm cube gives 0.5 kg and (m / 6) a^2 about every axis; the tetrahedron's mass is
    density x a^3 / 6 with its centroid at a / 4. URDF: the material's rho for a link with no <inertial>."""
    scene = gs.Scene()
    cube = scene.add_entity(meshes("cube.xml", '<body><freejoint/><geom type="mesh" mesh="cube" density="500"/>'
                                               '</body><body pos="1 0 0"><freejoint/>'
                                               '<geom type="mesh" mesh="tet" density="600"/></body>'))
    body, tet = cube.robot.bodies[:2]
    assert body.mass == pytest.approx(0.5) and np.allclose(body.inertia, np.eye(3) * 0.5 * 0.01 / 6)
    assert tet.mass == pytest.approx(600 * 0.1 ** 3 / 6) and np.allclose(tet.com, 0.025)
    urdf = tmp_path / "cube.urdf"
    urdf.write_text('<robot name="c"><link name="base"><collision><geometry>'
                    '<mesh filename="cube.obj" scale="0.05 0.05 0.05"/></geometry></collision></link></robot>')
    robot = gs.Scene().add_entity(gs.morphs.URDF(file=str(urdf)), material=gs.materials.Rigid(rho=300)).robot
    assert robot.bodies[0].mass == pytest.approx(0.3)
    pebble = gs.Scene().add_entity(gs.morphs.Mesh(file=assets.path("pebble.obj")),
                                   material=gs.materials.Rigid(rho=1000))
    volume = mesh_hull(assets.path("pebble.obj")).mass_properties()[0]
    assert pebble.robot.bodies[0].mass == pytest.approx(1000 * volume)


def test_bad_meshes_raise_option_error_at_add_entity(tmp_path):
    flat = write_obj(tmp_path / "flat.obj", [(0, 0, 0), (1, 0, 0), (0, 1, 0), (1, 1, 0)], [(1, 2, 3), (2, 4, 3)])
    scene = gs.Scene()
    with pytest.raises(gs.OptionError, match="coplanar"):
        scene.add_entity(gs.morphs.Mesh(file=flat))
    (tmp_path / "gone.xml").write_text('<mujoco><asset><mesh name="m" file="missing.obj"/></asset><worldbody>'
                                       '<body><freejoint/><geom type="mesh" mesh="m"/></body></worldbody></mujoco>')
    with pytest.raises(gs.OptionError, match="missing.obj"):
        scene.add_entity(gs.morphs.MJCF(file=str(tmp_path / "gone.xml")))


@given(seed=st.integers(0, 2 ** 31), n=st.integers(4, 40), flat=st.sampled_from([0.0, 1e-15, 1e-9, 1e-6, 1.0]),
       spoil=st.sampled_from([None, np.nan, np.inf, -np.inf]))
@settings(max_examples=40)
def test_the_hull_of_any_points_ends_in_a_hull_or_a_hull_error(seed, n, flat, spoil):
    """Near-degenerate clouds (points on a plane up to `flat`, duplicates, a line) and clouds with a point that is
    not finite: the hull is built within its N + 1 rounds or refused with a HullError, never a hang (a NaN vertex
    made the loop run forever) or another exception. A hull it builds holds every point within its deviation."""
    from genesis_rigid.hull import HullError

    rng = np.random.default_rng(seed)
    pts = rng.normal(size=(n, 3)) * np.array([1.0, 1.0, flat])
    pts[n // 2:] = pts[: n - n // 2]  # duplicates
    if spoil is not None:
        pts[rng.integers(n), rng.integers(3)] = spoil
    try:
        hull = hull_of_points(pts)
    except HullError:
        assert spoil is not None or flat <= 1e-6 or len(np.unique(pts, axis=0)) < 4
        return
    assert spoil is None and len(hull.face_loops) >= 4
    # (a polygon merged from triangles within COPLANAR_COS has their area-weighted normal: its vertices stay within
    # about 1.5e-3 of the extent of its plane)
    extent = np.ptp(pts, axis=0).max()
    assert (pts @ hull.face_normals.T - hull.face_offsets).max() <= hull.deviation + 2e-3 * extent


# -- resting contacts ---------------------------------------------------------------------------------------------

def test_convex_meshes_rest_flat_and_still_on_the_plane(meshes):
    """A tetrahedron and a cube dropped tilted settle on a face: penetration under 1 mm, the three (four) vertices
    of the resting face at the same height, at rest. The cube settles at the height of a primitive box of the
    same size to 1e-6 m (same contact points: the 4 corners)."""
    scene, (_, tet, cube, box) = build([
        gs.morphs.Plane(),
        meshes("tet.xml", '<body pos="0 0 0.15" euler="10 -15 30"><freejoint/><geom type="mesh" mesh="tet"/></body>'),
        meshes("cube.xml", '<body pos="0.5 0 0.2" euler="5 0 0"><freejoint/><geom type="mesh" mesh="cube"/></body>'),
        gs.morphs.Box(pos=(1.0, 0, 0.2), size=(0.1, 0.1, 0.1), euler=(5, 0, 0)),
    ])
    for _ in range(300):
        scene.step()
    for entity, n_face in ((tet, 3), (cube, 4)):
        z = hull_points(entity)[entity.robot.bodies[0].name][:, 2].sort().values
        assert -1e-3 < float(z[0]) <= 0, f"penetration {-float(z[0]):.2e} m"
        assert float(z[n_face - 1] - z[0]) < 1e-3, "not resting on a face"
        assert entity.get_vel().norm() < 1e-3 and entity.get_ang().norm() < 1e-2
    assert float(cube.get_pos()[2]) == pytest.approx(float(box.get_pos()[2]), abs=1e-6)
    assert float(cube.get_pos()[2]) == pytest.approx(0.05, abs=1e-3)


def test_mesh_contacts_with_boxes_spheres_capsules_and_meshes(meshes):
    """On a fixed 40 x 40 x 10 cm mesh slab (top at z = 0.1): a sphere (r 3 cm), a capsule lying flat (r 2 cm),
    a primitive box (4 cm) and a mesh cube (10 cm) come to rest at their analytic heights (within 1 mm), the
    capsule still horizontal; a mesh cube rests on a fixed primitive box and another on a mesh cube."""
    slab = meshes("slab.xml", '<geom type="mesh" mesh="slab" pos="0 0 0.05"/>'
                              '<body pos="-0.1 -0.1 0.2" euler="0 0 20"><freejoint/><geom type="mesh" mesh="cube"/>'
                              '</body>')
    stack = meshes("stack.xml", '<body pos="1 0 0.051"><freejoint/><geom type="mesh" mesh="cube"/></body>'
                                '<body pos="1.01 0.01 0.16" euler="0 0 25"><freejoint/><geom type="mesh" mesh="cube"/>'
                                '</body>')
    on_box = meshes("on_box.xml", '<body pos="0.53 1.02 0.3" euler="0 0 30"><freejoint/>'
                                  '<geom type="mesh" mesh="cube"/></body>')
    scene, (_, slab_scene, ball, capsule, box, _, _, high) = build([
        gs.morphs.Plane(), slab,
        gs.morphs.Sphere(pos=(0.1, 0.1, 0.2), radius=0.03),
        gs.morphs.Capsule(pos=(0.1, -0.1, 0.2), radius=0.02, height=0.1, euler=(0, 90, 0)),
        gs.morphs.Box(pos=(-0.1, 0.1, 0.2), size=(0.04, 0.04, 0.04), euler=(0, 0, 10)),
        stack,
        gs.morphs.Box(pos=(0.5, 1.0, 0.1), size=(0.3, 0.3, 0.2), fixed=True),
        on_box,
    ])
    for _ in range(300):
        scene.step()
    cube_on_slab = slab_scene.get_links_pos()[0]
    heights = {"sphere": (ball.get_pos(), 0.13), "capsule": (capsule.get_pos(), 0.12), "box": (box.get_pos(), 0.12),
               "cube on slab": (cube_on_slab, 0.15), "cube on box": (high.get_pos(), 0.25)}
    for name, (pos, z) in heights.items():
        assert float(pos[2]) == pytest.approx(z, abs=1e-3), name
    stacked = scene.entities[5].get_links_pos()[:2]
    assert float(stacked[0, 2]) == pytest.approx(0.05, abs=1e-3)
    assert float(stacked[1, 2]) == pytest.approx(0.15, abs=1e-3)
    axis = _quat_to_mat(capsule.get_quat())[:, 2]
    assert abs(float(axis[2])) < 1e-3, "the capsule tipped"
    for e in (ball, capsule, box, high):
        assert e.get_vel().norm() < 1e-3


def test_mesh_collision_filters(meshes):
    """MuJoCo's contype/conaffinity rule holds for meshes: a cube whose contype and conaffinity (2) share no bit
    with the floor's (1, set on the morph; its default 0xFFFF would touch it) falls through it, one with both 0 is
    in no pair; a plain cube lands."""
    scene, (_, ghosts, lander) = build([
        gs.morphs.Plane(contype=1, conaffinity=1),
        meshes("ghosts.xml", '<body pos="0 0 0.1"><freejoint/><geom type="mesh" mesh="cube" contype="2" '
                             'conaffinity="2"/></body><body pos="1 0 0.1"><freejoint/><geom type="mesh" mesh="cube" '
                             'contype="0" conaffinity="0"/></body>'),
        meshes("lander.xml", '<body pos="2 0 0.1"><freejoint/><geom type="mesh" mesh="cube"/></body>'),
    ])
    assert scene.rigid_solver.n_pairs == 1  # the floor and the lander
    for _ in range(50):
        scene.step()
    assert (ghosts.get_links_pos()[:, 2] < -0.5).all()
    assert float(lander.get_pos()[2]) == pytest.approx(0.05, abs=1e-3)


@pytest.fixture(scope="module")
def overlap_scene(tmp_path_factory):
    folder = tmp_path_factory.mktemp("overlap")
    write_obj(folder / "cube.obj", CUBE_V, CUBE_F)
    write_obj(folder / "tet.obj", TET_V, TET_F)
    (folder / "pair.xml").write_text("""<mujoco><asset><mesh name="cube" file="cube.obj" scale="0.05 0.05 0.05"/>
<mesh name="tet" file="tet.obj" scale="0.1 0.1 0.1"/></asset><worldbody>
<body><freejoint/><geom type="mesh" mesh="cube"/></body><body><freejoint/><geom type="mesh" mesh="tet"/></body>
</worldbody></mujoco>""")
    scene, (pair,) = build([gs.morphs.MJCF(file=str(folder / "pair.xml"))], dt=1e-9, gravity=(0, 0, 0))
    return scene, pair, mesh_hull(str(folder / "cube.obj"), 0.05), mesh_hull(str(folder / "tet.obj"), 0.1)


def separating_axis_depth(hull_a, hull_b, rot_a, rot_b, pos_b):
    """Exact penetration depth of two convex polytopes, and the unit axes (from a to b) that attain it: the least
    overlap over the face normals of both and the cross products of their edges (the axes that can separate
    convex polytopes; Gottschalk 1996)."""
    va, vb = hull_a.vertices @ rot_a.T, hull_b.vertices @ rot_b.T + pos_b
    ea = [va[j] - va[i] for i in range(len(va)) for j in range(i + 1, len(va))]
    eb = [vb[j] - vb[i] for i in range(len(vb)) for j in range(i + 1, len(vb))]
    axes = [*(hull_a.face_normals @ rot_a.T), *(hull_b.face_normals @ rot_b.T),
            *(np.cross(x, y) for x in ea for y in eb)]
    candidates = []
    for axis in axes:
        if np.linalg.norm(axis) > 1e-9:
            for u in (axis / np.linalg.norm(axis), -axis / np.linalg.norm(axis)):
                candidates.append(((va @ u).max() - (vb @ u).min(), u))
    depth = min(c[0] for c in candidates)
    return depth, [u for overlap, u in candidates if overlap <= depth + 1e-9]


unit_quat = st.lists(st.floats(-1, 1), min_size=4, max_size=4).filter(lambda q: sum(x * x for x in q) > 0.01)


@settings(max_examples=60, deadline=None)
@given(qa=unit_quat, qb=unit_quat, pos=st.lists(st.floats(-0.1, 0.1), min_size=3, max_size=3))
def test_mesh_pair_depth_matches_the_separating_axis_minimum(overlap_scene, qa, qb, pos):
    """A 10 cm cube and a tetrahedron (10 cm legs) in random poses: the deepest contact's depth is the exact
    separating-axis depth (EPA), or up to 2% more for a face contact, whose normal is that of a face within
    acos(FACE_COS) of a least-overlap axis (EPA's normal); no contact when the hulls are apart."""
    scene, pair, hull_a, hull_b = overlap_scene
    qa, qb = np.array(qa) / np.linalg.norm(qa), np.array(qb) / np.linalg.norm(qb)
    pair.set_qpos(torch.tensor(np.concatenate([[0, 0, 0], qa, pos, qb])))
    pair.set_dofs_velocity(torch.zeros(12, dtype=torch.float64))
    scene.step()  # contacts are found at the start of the step, at the poses set
    rot_a, rot_b = quat_to_mat(qa), quat_to_mat(qb)
    depth, axes = separating_axis_depth(hull_a, hull_b, rot_a, rot_b, np.array(pos))
    con_f = scene.rigid_solver.scratch["s_con_f"][0]
    con_i = scene.rigid_solver.scratch["s_con_i"][0, :, :len(con_f)]  # the pool's entries
    ours = con_f[con_i[0] == 1]
    if depth < -1e-9:
        assert len(ours) == 0
    elif depth > 1e-6:
        deepest = ours[int(ours[:, 6].argmax())]
        assert depth - 1e-9 <= float(deepest[6]) <= depth * 1.02 + 1e-9
        cosine = max(float(deepest[3:6].numpy() @ u) for u in axes)
        assert cosine >= FACE_COS - 1e-6


@pytest.mark.xfail(strict=True, reason="a cube and a tetrahedron 6.5 cm into each other give no contact in this pose "
                                       "(found by the property above; the pose 1.8 cm higher gives the exact depth)")
def test_mesh_pair_deep_overlap_known_counterexample(overlap_scene):
    scene, pair, hull_a, hull_b = overlap_scene
    q = np.array([0.43862616659141396, 0.0, 0.0, -0.8028277475421715])
    q /= np.linalg.norm(q)
    pos = np.array([0.0, 0.02734375, -0.078125])
    pair.set_qpos(torch.tensor(np.concatenate([[0, 0, 0], q, pos, q])))
    pair.set_dofs_velocity(torch.zeros(12, dtype=torch.float64))
    scene.step()
    depth, _ = separating_axis_depth(hull_a, hull_b, quat_to_mat(q), quat_to_mat(q), pos)
    assert depth > 0.06
    con_f = scene.rigid_solver.scratch["s_con_f"][0]
    ours = con_f[scene.rigid_solver.scratch["s_con_i"][0, CI_ACTIVE, :len(con_f)] == 1]
    assert len(ours) > 0 and float(ours[:, 6].max()) == pytest.approx(depth, rel=0.02)


# -- the panda ----------------------------------------------------------------------------------------------------

def test_panda_mesh_links_stop_at_the_floor(shared_assets):
    """The panda (MJCF, fixed base, floor from scene.xml) driven toward a pose whose hand is under the floor: its
    mesh links meet the floor (mesh-plane contacts), the arm stops short of the target, and no hull vertex goes
    more than 2 mm below the floor (1 mm once settled)."""
    scene, (panda,) = build([gs.morphs.MJCF(file=f"{shared_assets}/{PANDA}")])
    panda.set_dofs_kp([100.0, 100.0], dofs_idx_local=[7, 8])
    home = torch.tensor(HOME, dtype=torch.float64)
    down = torch.tensor([0, 1.7, 0, -0.3, 0, 1.5, -0.7853, 0.04, 0.04], dtype=torch.float64)
    panda.set_dofs_position(home)
    deepest = 0.0
    for i in range(400):  # over 3 s: contacts act once the hull is below the floor, so impact speed sets depth
        panda.control_dofs_position(home + (down - home) * min(1.0, i / 300))
        scene.step()
        deepest = min(deepest, lowest(panda, skip=("link0",)))
    assert deepest > -2e-3, f"a link went {-deepest * 1e3:.1f} mm into the floor"
    assert lowest(panda, skip=("link0",)) > -1e-3
    assert float(panda.get_dofs_position()[1]) < 1.7 - 0.05, "the arm reached its target through the floor"
    assert active_contacts(scene) > 0 and panda.get_dofs_velocity().abs().max() < 1e-2


def test_sweeps_stop_once_the_velocities_settle_in_float32(shared_assets):
    """The panda (panda.xml on a plane, no control) folding onto its floor, 80 steps. In float32 its nearly
    dependent rows (a contact on the hand beside joint limits, two contacts of one link) keep the impulses drifting
    by rounding, so a test on the impulses alone ran all 100 sweeps in 37 of the 80 substeps (a mean of 51); the
    test on the velocities ends them after 2-10 (a mean of 4.7). The float32 trajectory stays within 5e-3 rad of
    the float64 one, and the float64 sweeps stop before the limit too (the contacts() field `sweeps` counts
    them)."""
    runs = {}
    try:
        for precision in ("32", "64"):
            gs.destroy()
            gs.init(backend=gs.cpu, precision=precision, seed=0, logging_level="warning")
            scene = gs.Scene(sim_options=gs.options.SimOptions(dt=1e-2),
                             rigid_options=gs.options.RigidOptions(iterations=100))
            scene.add_entity(gs.morphs.Plane())
            panda = scene.add_entity(gs.morphs.MJCF(file=f"{shared_assets}/{PANDA_ARM}"))
            scene.build()
            sweeps = []
            for _ in range(80):
                scene.step()
                sweeps.append(scene.rigid_solver.contacts()["sweeps"][0].tolist())
            runs[precision] = (torch.tensor(sweeps), panda.get_dofs_position().double())
    finally:
        gs.destroy()
        gs.init(backend=gs.cpu, precision="64", seed=0, logging_level="warning")
    (sweeps32, q32), (sweeps64, q64) = runs["32"], runs["64"]
    assert int(sweeps32[:, 0].gt(0).sum()) > 60, "the arm should touch its floor or limits in most substeps"
    assert float(sweeps32[:, 0].float().mean()) < 15, sweeps32[:, 0].tolist()
    assert int(sweeps32[:, 0].max()) < 100 and int(sweeps64[:, 0].max()) < 100, (sweeps32.tolist(), sweeps64.tolist())
    assert float((q32 - q64).abs().max()) < 5e-3, (q32 - q64).tolist()


def test_folded_panda_follows_the_converged_solve_with_cg(shared_assets):
    """The panda folding onto its floor comes to rest sliding slowly on one contact (its friction at the pyramid's
    bound) beside two joint limits whose rows are correlated at 0.98. Plain Gauss-Seidel (the default) stops there
    by its tolerance short of the solution: the arm creeps away from a converged solve (3000 sweeps, tolerance
    1e-13), by 0.016 rad within 150 steps. constraint_solver=CG (the sweeps with conjugate-gradient steps) at the
    default tolerance (float64: 1e-9, at most 100 sweeps) stays within 1e-4 rad of it (measured: 1.3e-7).
    The arm's hand-link5 pairs are kept (enable_neutral_collision=True): that is the configuration described. With
    them dropped (the default) it comes to rest otherwise; measured there after 150 steps: plain 0.020 rad from the
    converged solve, CG 3.2e-3, CG with 1000 sweeps at tolerance 1e-12 2.5e-12."""
    def fold(**options):
        options["enable_neutral_collision"] = True
        scene = gs.Scene(sim_options=gs.options.SimOptions(dt=1e-2), rigid_options=gs.options.RigidOptions(**options))
        scene.add_entity(gs.morphs.Plane())
        panda = scene.add_entity(gs.morphs.MJCF(file=f"{shared_assets}/{PANDA_ARM}"))
        scene.build()
        assert scene.rigid_solver.float_dtype == torch.float64
        for _ in range(150):
            scene.step()
        return panda.get_dofs_position()

    converged = fold(iterations=3000, tolerance=1e-13)
    cg, plain = fold(constraint_solver=gs.constraint_solver.CG), fold()
    assert float((cg - converged).abs().max()) < 1e-4, (cg - converged).tolist()
    assert float((plain - converged).abs().max()) > 1e-3, "plain Gauss-Seidel was measured 0.016 rad away here"


def test_panda_urdf_stands_on_the_plane(shared_assets):
    """The bullet panda URDF (meshes only, fixed base on a plane): links joined by fixed joints (hand, link8) count
    as one for the adjacency filter, so the hand never collides with link7 or link6. Held at home by PD it stays
    there without a contact; released, it folds onto the floor and its links come to rest on it (within 1 mm),
    none having sunk deeper than one step's travel on impact."""
    scene, (_, panda) = build([gs.morphs.Plane(),
                               gs.morphs.URDF(file=f"{shared_assets}/urdf/panda_bullet/panda.urdf", fixed=True)])
    solver = scene.rigid_solver
    name = {panda.link_start + i: link.name for i, link in enumerate(panda.links)}
    geom_link = solver.model["geom_i"].to_numpy()[:, 1].tolist()
    link_pairs = {frozenset((name.get(geom_link[a]), name.get(geom_link[b])))
                  for a, b in solver.model["pair_i"].to_numpy()[:, :2].tolist()}
    assert frozenset(("panda_link3", "panda_link6")) in link_pairs
    for a, b in [("panda_hand", "panda_link7"), ("panda_hand", "panda_link6"), ("panda_leftfinger", "panda_hand")]:
        assert frozenset((a, b)) not in link_pairs
    home = torch.tensor(HOME, dtype=torch.float64)
    panda.set_dofs_kp([4500, 4500, 3500, 3500, 2000, 2000, 2000, 100, 100])
    panda.set_dofs_kv([450, 450, 350, 350, 200, 200, 200, 10, 10])
    panda.set_dofs_position(home)
    panda.control_dofs_position(home)
    for _ in range(100):
        scene.step()
    assert (panda.get_dofs_position() - home).abs().max() < 1e-2
    assert panda.get_dofs_velocity().abs().max() < 1e-3 and active_contacts(scene) == 0
    panda.control_dofs_force(torch.zeros(9, dtype=torch.float64))
    deepest, fastest = 0.0, 0.0
    for _ in range(300):
        before = hull_points(panda)
        scene.step()
        after = hull_points(panda)
        fastest = max(fastest, max(float((after[k] - before[k]).norm(dim=1).max()) for k in after))
        deepest = min(deepest, lowest(panda, skip=("panda_link0",)))
    assert torch.isfinite(panda.get_qpos()).all() and active_contacts(scene) > 0
    # a contact acts once a vertex is below the floor, so an impact can sink one step's travel, no more
    assert deepest > -fastest - 1e-3, f"{-deepest:.3f} m into the floor; the fastest vertex moved {fastest:.3f} m"
    assert lowest(panda, skip=("panda_link0",)) > -1e-3


def test_panda_grasps_and_lifts_a_box(shared_assets):
    """The panda (MJCF scene.xml, position control with the MJCF actuators' gains, fingers kp 200 kv 20) starts
    with its open fingers around a 4 cm box on the floor, closes them (finger meshes and pads against the box:
    mesh-box and box-box contacts), and raises the hand 10 cm: the box rises at least 9 cm and stays between the
    fingers."""
    scene, (panda, box) = build([gs.morphs.MJCF(file=f"{shared_assets}/{PANDA}"),
                                 gs.morphs.Box(pos=(0.5, 0, 0.02), size=(0.04, 0.04, 0.04))])
    hand = panda.get_link("hand")
    down = torch.tensor([[0.0, 1, 0], [1, 0, 0], [0, 0, -1]], dtype=torch.float64)  # fingers along world x
    start = scene.get_state()
    grasp = inverse_kinematics(panda, hand, [0, 0.5, 0, -2.3, 0, 2.8, -0.7853], [0.5, 0, 0.123], down)
    lift = inverse_kinematics(panda, hand, grasp, [0.5, 0, 0.223], down)
    scene.reset(start)
    panda.set_dofs_position(grasp + [0.04, 0.04])
    panda.set_dofs_kp([200.0, 200.0], dofs_idx_local=[7, 8])
    panda.set_dofs_kv([20.0, 20.0], dofs_idx_local=[7, 8])
    panda.control_dofs_position(grasp + [0.04, 0.04])
    for _ in range(30):
        scene.step()
    for i in range(250):  # close for 1 s, raise the hand over 0.8 s, hold
        arm = [g + (l - g) * min(1.0, max(0, i - 100) / 80) for g, l in zip(grasp, lift)]
        panda.control_dofs_position(arm + [0.0, 0.0])
        scene.step()
    z0 = 0.02
    assert float(box.get_pos()[2]) - z0 > 0.09, f"box lifted only {float(box.get_pos()[2]) - z0:.3f} m"
    left, right = panda.get_link("left_finger").get_pos(), panda.get_link("right_finger").get_pos()
    assert float(left[0]) > float(box.get_pos()[0]) > float(right[0]), "the box is not between the fingers"
    assert (box.get_pos()[:2] - (left[:2] + right[:2]) / 2).norm() < 5e-3
    assert 0.015 < float(panda.get_dofs_position()[7]) < 0.025, "the fingers are not on the box"


def inverse_kinematics(panda, link, q, pos, rot, iterations=40):
    """Joint angles of the 7 arm joints putting `link` at pos with orientation rot: damped least squares on
    finite-difference Jacobians of the solver's own forward kinematics, within the joint ranges."""
    lo = [-2.8973, -1.7628, -2.8973, -3.0718, -2.8973, -0.0175, -2.8973]
    hi = [2.8973, 1.7628, 2.8973, -0.0698, 2.8973, 3.7525, 2.8973]
    q = torch.tensor(q[:7], dtype=torch.float64)
    pos, rot = torch.tensor(pos, dtype=torch.float64), torch.as_tensor(rot)

    def error(q):
        panda.set_dofs_position(q, dofs_idx_local=list(range(7)))
        r = _quat_to_mat(link.get_quat())
        return torch.cat([pos - link.get_pos(), 0.5 * sum(torch.linalg.cross(r[:, i], rot[:, i]) for i in range(3))])

    for _ in range(iterations):
        e = error(q)
        if e.norm() < 1e-10:
            break
        jac = torch.stack([(e - error(q + 1e-6 * torch.eye(7, dtype=torch.float64)[j])) / 1e-6 for j in range(7)], 1)
        q = torch.clamp(q + torch.linalg.solve(jac.T @ jac + 1e-6 * torch.eye(7, dtype=torch.float64), jac.T @ e),
                        torch.tensor(lo, dtype=torch.float64), torch.tensor(hi, dtype=torch.float64))
    assert error(q).norm() < 1e-6
    return q.tolist()


def test_sweep_and_prune_finds_exactly_the_touching_pairs():
    """Sixty free spheres of two sizes scattered in a 0.6 m cube, many touching: after one step, the contact slots
    the narrowphase filled are those of the sphere pairs whose distance at the step's start was below the sum of
    their radii (a brute-force check over all 1770 pairs), in every environment."""
    rng = np.random.default_rng(3)
    n, n_envs = 60, 3
    radii = np.where(np.arange(n) % 2 == 0, 0.05, 0.08)
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=1e-3, gravity=(0, 0, 0)),
                     rigid_options=gs.options.RigidOptions(max_contacts=256))
    balls = [scene.add_entity(gs.morphs.Sphere(radius=float(r), pos=(0, 0, 0))) for r in radii]
    scene.build(n_envs=n_envs)
    centres = torch.as_tensor(rng.uniform(0, 0.6, size=(n_envs, n, 3)))
    for i, ball in enumerate(balls):
        ball.set_pos(centres[:, i])
    scene.step()
    solver = scene.rigid_solver
    con_i = solver.scratch["s_con_i"].clone()  # the contact pool of the step's start
    pair_i = solver.model["pair_i"].to_numpy()
    gap = torch.cdist(centres, centres) - torch.as_tensor(radii[:, None] + radii[None, :])
    geom_entity = [g["entity"] for g in solver.compiled.geoms]
    for b in range(n_envs):
        keys = con_i[b, CI_KEY][con_i[b, CI_ACTIVE] == 1]
        assert int(con_i[b, CI_META, 0]) == len(keys) == int(con_i[b, CI_META, 1])  # none dropped
        found = {(geom_entity[pair_i[p, 0]], geom_entity[pair_i[p, 1]]) for p in (keys // KEY_SPAN).tolist()}
        found = {tuple(sorted(p)) for p in found}
        expected = {(i, j) for i in range(n) for j in range(i + 1, n) if gap[b, i, j] < 0}
        assert len(expected) > 20 and found == expected


@pytest.mark.parametrize("n_envs", [0, 3])
def test_cached_separating_directions_change_no_contact(shared_assets, n_envs):
    """The mesh narrowphase keeps, per pair, the direction that last proved it apart (s_sep) and tries it first.
    The panda folding onto its floor (links near each other, then contacts) follows bitwise the same trajectory,
    contacts included, as when every substep starts without them (the cache cleared before each step), and the
    cache is used: directions are stored, and the narrowphase counts the pairs they settled without GJK."""
    def fold(clear):
        scene = gs.Scene(sim_options=gs.options.SimOptions(dt=1e-2))
        scene.add_entity(gs.morphs.Plane())
        panda = scene.add_entity(gs.morphs.MJCF(file=f"{shared_assets}/{PANDA_ARM}"))
        scene.build(n_envs=n_envs)
        if n_envs:
            panda.set_dofs_velocity(torch.tensor([[0.0] * 9, [0.3] * 9, [-0.3] * 9], dtype=torch.float64))
        qs, cached, settled = [], 0, 0
        for _ in range(120):
            if clear:
                scene.rigid_solver.scratch["s_sep"].fill(0.0)
            scene.step()
            qs.append(panda.get_qpos().clone())
            sep = scene.rigid_solver.scratch["s_sep"].to_numpy()
            cached = max(cached, int((np.abs(sep).sum(-1) > 0).sum()))
            settled += int(scene.rigid_solver.scratch["s_con_i"][:, CI_META, CM_SETTLED].sum())
        return torch.stack(qs), cached, settled, active_contacts(scene)

    q_cached, n_cached, n_settled, contacts = fold(False)
    q_fresh, _, n_settled_fresh, _ = fold(True)
    assert n_cached > 0 and n_settled > 0 and n_settled_fresh == 0 and contacts > 0
    assert torch.equal(q_cached, q_fresh)


def test_hull_box_bound_is_never_below_the_hull_support(meshes):
    """kernels_convex.support_bound, which settles a mesh pair as apart before any support query, is an upper
    bound of the hull's support along every direction (else it could call a touching pair apart): checked for the
    cube, the tetrahedron (its box not centred on the geom origin) and the slab, each rotated and moved, over 2000
    random directions; for the tetrahedron it is a box, looser than the hull."""
    import taichi as ti

    from genesis_rigid.kernels_convex import shape_support, support_bound
    from genesis_rigid.layout import GI_N_VERTS, GI_VERT

    scene, _ = build([meshes("three.xml", """
      <body pos="0 0 1" euler="10 20 30"><freejoint/><geom type="mesh" mesh="cube"/></body>
      <body pos="0.5 0 1" euler="-40 5 70"><freejoint/><geom type="mesh" mesh="tet"/></body>
      <body pos="0 0.8 1" euler="0 60 0"><freejoint/><geom type="mesh" mesh="slab"/></body>""")])
    solver = scene.rigid_solver
    geom_i = solver.model["geom_i"].to_numpy()
    hulls = [g for g in range(len(geom_i)) if geom_i[g, GI_N_VERTS] > 0]
    assert len(hulls) == 3
    rng = np.random.default_rng(0)
    dirs = rng.normal(size=(2000, 3))
    dirs /= np.linalg.norm(dirs, axis=1, keepdims=True)
    u_arr = ti.ndarray(ti.f64, (len(dirs), 3))
    u_arr.from_numpy(dirs)
    out = ti.ndarray(ti.f64, (len(dirs), 2))
    q = np.array([0.9, 0.1, -0.3, 0.2])
    rot_arr = ti.ndarray(ti.f64, (3, 3))
    rot_arr.from_numpy(quat_to_mat(q / np.linalg.norm(q)))

    @ti.kernel
    def supports(g: ti.i32, v0: ti.i32, nv: ti.i32, dirs: ti.types.ndarray(), rot_in: ti.types.ndarray(),
                 geom_f: ti.types.ndarray(), hull_f: ti.types.ndarray(), out: ti.types.ndarray()):
        for i in range(dirs.shape[0]):
            u = ti.Vector([dirs[i, 0], dirs[i, 1], dirs[i, 2]])
            c = ti.Vector([0.3, -0.2, 1.1])
            none = ti.Vector([0.0, 0.0, 0.0])  # (no ellipsoid)
            rot = ti.Matrix.zero(float, 3, 3)
            for r, k in ti.static(ti.ndrange(3, 3)):
                rot[r, k] = rot_in[r, k]
            out[i, 0] = shape_support(c, rot, 0.0, 0.0, none, v0, nv, u, hull_f).dot(u)
            out[i, 1] = support_bound(c, rot, 0.0, 0.0, none, nv, g, u, geom_f)

    for g in hulls:
        supports(g, int(geom_i[g, GI_VERT]), int(geom_i[g, GI_N_VERTS]), u_arr, rot_arr, solver.model["geom_f"],
                 solver.model["hull_f"], out)
        exact, bound = out.to_numpy().T
        assert (bound >= exact - 1e-12).all(), (g, float((exact - bound).max()))
        if g == hulls[1]:
            assert (bound - exact).max() > 1e-3  # the tetrahedron's box, not the tetrahedron
