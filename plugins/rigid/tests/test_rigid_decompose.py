"""Non-convex meshes: a closed mesh far from convex is decomposed into convex parts (CoACD), cached by content as
.npz; a ball dropped into a tank lands on its floor, not on the lid its convex hull would put over it."""

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


def test_convexify_false_is_refused(tank):
    scene = gs.Scene()
    with pytest.raises(gs.OptionError, match=r"convexify=False\) is not supported"):
        scene.add_entity(gs.morphs.Mesh(file=tank, convexify=False))


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
