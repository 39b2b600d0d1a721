"""Non-convex meshes: a mesh far from convex (closed or not) is decomposed into convex parts (CoACD), cached by
content as .npz; a ball dropped into a tank lands on its floor, not on the lid its convex hull would put over
it."""

import os

import numpy as np
import pytest

import genesis_core as gs
from genesis_rigid import decompose


def write_tank(path, outer=1.0, inner=0.8, height=0.6, floor=0.1):
    """A closed, open-topped tank: outer walls, the rim, inner walls and the floor of the cavity."""
    o, i = outer / 2, inner / 2

    def square(h, z):
        return [(-h, -h, z), (h, -h, z), (h, h, z), (-h, h, z)]

    v = square(o, 0) + square(o, height) + square(i, height) + square(i, floor)
    f = [(0, 2, 1), (0, 3, 2)]
    for k in range(4):
        a, b = k, (k + 1) % 4
        f += [(a, b, 4 + b), (a, 4 + b, 4 + a), (4 + a, 4 + b, 8 + b), (4 + a, 8 + b, 8 + a),
              (8 + a, 8 + b, 12 + b), (8 + a, 12 + b, 12 + a)]
    f += [(12, 13, 14), (12, 14, 15)]
    with open(path, "w") as fh:
        fh.writelines(f"v {x} {y} {z}\n" for x, y, z in v)
        fh.writelines(f"f {a + 1} {b + 1} {c + 1}\n" for a, b, c in f)
    return path


@pytest.fixture
def tank(tmp_path, monkeypatch):
    monkeypatch.setenv(decompose.CACHE_ENV, str(tmp_path / "cache"))
    return str(write_tank(tmp_path / "tank.obj"))


def drop_ball(tank_file, **mesh_options):
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=5e-3),
                     rigid_options=gs.options.RigidOptions(max_contacts=128))
    tank = scene.add_entity(gs.morphs.Mesh(file=tank_file, fixed=True, **mesh_options))
    ball = scene.add_entity(gs.morphs.Sphere(radius=0.05, pos=(0.1, 0.05, 1.0)))
    scene.build()
    for _ in range(300):
        scene.step()
    return scene, tank, ball


def test_a_ball_dropped_into_a_tank_lands_on_its_floor(tank):
    scene, _, ball = drop_ball(tank)
    n_parts = sum(g["type"] == 5 for g in scene.rigid_solver.compiled.geoms)  # MESH
    assert n_parts > 4, "the tank should be several convex parts"
    pos = ball.get_pos()
    assert float(pos[2]) == pytest.approx(0.1 + 0.05, abs=5e-3), pos
    assert float(pos[:2].abs().max()) < 0.35 and float(ball.get_vel().norm()) < 1e-2
    # as its convex hull (never decomposed), the tank has a lid: the ball rests on top
    _, _, on_hull = drop_ball(tank, decompose_object_error_threshold=float("inf"))
    assert float(on_hull.get_pos()[2]) == pytest.approx(0.6 + 0.05, abs=5e-3)


def test_parts_are_cached_by_content_as_npz(tank, monkeypatch):
    parts = decompose.convex_parts(tank, np.ones(3), 0.15, None)
    files = os.listdir(decompose.cache_dir())
    assert len(files) == 1 and files[0].endswith(".npz")
    with np.load(os.path.join(decompose.cache_dir(), files[0]), allow_pickle=False) as data:
        assert int(data["n_parts"]) == len(parts)

    def no_coacd(*args, **kwargs):
        raise AssertionError("decomposed again")

    import coacd

    monkeypatch.setattr(coacd, "run_coacd", no_coacd)
    again = decompose.convex_parts(tank, np.ones(3), 0.15, None)
    assert len(again) == len(parts) and all(np.array_equal(a, b) for a, b in zip(parts, again))
    # other options or another scale are another entry
    with pytest.raises(AssertionError, match="decomposed again"):
        decompose.convex_parts(tank, np.full(3, 2.0), 0.15, None)


def test_convex_meshes_keep_their_hull_and_the_parts_give_the_mass(tank):
    from genesis_rigid import assets

    assert decompose.convex_parts(assets.path("pebble.obj"), np.ones(3), 0.15, None) is None
    vertices, faces, closed = decompose.load_mesh(tank, np.ones(3))
    assert closed and decompose.concavity(vertices, faces) > 0.5
    scene = gs.Scene()
    body = scene.add_entity(gs.morphs.Mesh(file=tank), material=gs.materials.Rigid(rho=1000.0))
    # the parts fill the tank's 0.28 m^3 (CoACD's parts may overlap or miss slivers), not its hull's 0.6
    mass = body.robot.bodies[0].mass
    assert 0.2 * 1000 < mass < 0.4 * 1000, mass


def test_convexify_false_collides_as_the_mesh_itself(tank):
    """convexify=False: the mesh's own shape (its convex parts), whatever the error threshold says."""
    _, _, ball = drop_ball(tank, convexify=False, decompose_object_error_threshold=float("inf"))
    assert float(ball.get_pos()[2]) == pytest.approx(0.1 + 0.05, abs=5e-3)


# CoACD settings that decompose the boxes' tank in seconds (its defaults take about a minute on 2 cores)
FAST = {"mcts_iterations": 10, "mcts_max_depth": 2, "mcts_nodes": 10, "resolution": 300,
        "preprocess_resolution": 30, "threshold": 0.1}


def write_box_tank(path):
    """An open tank of five overlapping boxes (a floor 2 cm thick, walls 35 cm high) in one OBJ: each box is closed,
    but once trimesh merges the coincident vertices on load the surface is not (edges shared by four faces),
    as CAD exports and scans often are."""
    import trimesh

    boxes = [trimesh.creation.box((0.4, 0.4, 0.02), trimesh.transformations.translation_matrix((0, 0, 0.01)))]
    for x, y, sx, sy in ((0.19, 0, 0.02, 0.4), (-0.19, 0, 0.02, 0.4), (0, 0.19, 0.4, 0.02), (0, -0.19, 0.4, 0.02)):
        boxes.append(trimesh.creation.box((sx, sy, 0.35), trimesh.transformations.translation_matrix((x, y, 0.175))))
    trimesh.util.concatenate(boxes).export(str(path))
    return str(path)


def test_a_mesh_that_is_not_closed_is_decomposed_not_hulled(tmp_path, monkeypatch):
    monkeypatch.setenv(decompose.CACHE_ENV, str(tmp_path / "cache"))
    path = write_box_tank(tmp_path / "boxes.obj")
    vertices, faces, closed = decompose.load_mesh(path, np.ones(3))
    assert not closed
    # its volume from the filled voxel grid: the boxes' union, 0.4 x 0.4 x 0.02 + 4 walls (0.0192 m^3), within a
    # layer of cells; its hull's is 0.056 m^3
    assert decompose.solid_volume(vertices, faces, closed) == pytest.approx(0.0192, rel=0.25)
    assert decompose.concavity(vertices, faces, closed) > 0.5
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=5e-3),
                     rigid_options=gs.options.RigidOptions(max_contacts=128))
    scene.add_entity(gs.morphs.Plane())
    tank = scene.add_entity(gs.morphs.Mesh(file=path, fixed=True, coacd_options=FAST))
    ball = scene.add_entity(gs.morphs.Sphere(radius=0.04, pos=(0.0, 0.0, 0.6)))
    assert len(tank.robot.bodies[0].geoms) > 4
    scene.build()
    for _ in range(200):
        scene.step()
    # on the floor (2 cm; CoACD's parts at these fast settings are up to a centimetre fuller than the boxes), not
    # on the hull's lid at the rim (35 cm)
    assert float(ball.get_pos()[2]) == pytest.approx(0.02 + 0.04, abs=1e-2)
    assert float(ball.get_pos()[:2].abs().max()) < 0.17


def test_a_decomposition_without_parts_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv(decompose.CACHE_ENV, str(tmp_path / "cache"))
    import coacd

    monkeypatch.setattr(coacd, "run_coacd", lambda *a, **k: [])
    scene = gs.Scene()
    with pytest.raises(gs.ModelFileError, match="gave no part"):
        scene.add_entity(gs.morphs.Mesh(file=write_box_tank(tmp_path / "boxes.obj")))
    assert not scene.entities


def test_a_damaged_cache_entry_is_decomposed_again(tank):
    parts = decompose.convex_parts(tank, np.ones(3), 0.15, None)
    (entry,) = os.listdir(decompose.cache_dir())
    path = os.path.join(decompose.cache_dir(), entry)
    with open(path, "r+b") as fh:
        fh.truncate(40)  # a truncated zip
    again = decompose.convex_parts(tank, np.ones(3), 0.15, None)
    assert len(again) == len(parts)
    open(path, "wb").close()  # an empty file
    assert len(decompose.convex_parts(tank, np.ones(3), 0.15, None)) == len(parts)
