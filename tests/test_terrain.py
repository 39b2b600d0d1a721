"""genesis_core.terrain and gs.morphs.Terrain: the subterrain generators against Genesis World's own height fields
(figures recorded from genesis-world 1.4.5 with the same options), the surface's triangles and heights, a height
field from a mesh, the particle kit's signed distance to a height field, and particles landing on terrain."""

import math

import numpy as np
import pytest
import taichi as ti
import torch

import genesis_core as gs
from genesis_core import plugins
from genesis_core import terrain as T
from genesis_core.coupler import GEOM_HFIELD
from genesis_core.utils.terrain import mesh_to_heightfield

from .pellets.genesis_pellets import plugin as pellets_plugin
from .test_particle_coupling import kit_distances

# (options, shape, sum, sum of |h|, h[7, 30]) of Genesis World 1.4.5's parse_terrain with the same options
GENESIS_WORLD = [
    (dict(n_subterrains=(2, 2), subterrain_size=(6.0, 6.0),
          subterrain_types=[["flat_terrain", "random_uniform_terrain"],
                            ["pyramid_sloped_terrain", "discrete_obstacles_terrain"]]), (49, 49), -7962.11, 20064.11,
     3.0),
    (dict(), (145, 145), -3207367.77, 3328726.23, 0.0),
]


@pytest.mark.parametrize("case", range(len(GENESIS_WORLD)))
def test_subterrains_are_genesis_worlds_with_the_same_options(case):
    """With randomize=False Genesis World draws each subterrain from seed 0; the same kinds, parameters and draws
    give its height fields (to its float32 rounding) and leave NumPy's generator as it was."""
    kw, shape, total, total_abs, h730 = GENESIS_WORLD[case]
    state = np.random.get_state()[1].copy()
    H = gs.morphs.Terrain(**kw).raw_heights()
    assert np.array_equal(np.random.get_state()[1], state)
    assert H.shape == shape
    assert abs(H.sum() - total) < 0.05 and abs(np.abs(H).sum() - total_abs) < 0.05 and H[7, 30] == h730


def test_each_subterrain_kind_has_its_shape():
    """Figures of each kind on a 4 m subterrain (17 x 17 vertices of 0.25 m, vertical scale 5 mm)."""
    def one(kind, **params):
        return gs.morphs.Terrain(n_subterrains=(1, 1), subterrain_size=(4.0, 4.0), subterrain_types=kind,
                                 subterrain_parameters={kind: params} if params else None).raw_heights() * 0.005

    assert not one("flat_terrain").any()
    s = one("sloped_terrain", slope=0.5)  # rises 0.5 m per m along x, over the subterrain's width
    assert np.allclose(np.diff(s, axis=0), 0.125, atol=1e-12) and not np.diff(s, axis=1).any()
    st = one("stairs_terrain", step_width=1.0, step_height=0.1)  # 4 cells a step
    assert st[0, 0] == pytest.approx(0.1) and st[4, 0] == pytest.approx(0.2) and st[12, 0] == pytest.approx(0.4)
    ps = one("pyramid_stairs_terrain", step_width=0.5, step_height=0.05)
    assert ps[8, 8] == ps.max() and ps[0, 0] == 0 and ps[2, 8] == pytest.approx(0.05)
    w = one("wave_terrain", num_waves=1.0, amplitude=0.2)
    assert abs(w.max() - 0.2) < 0.03 and abs(w.min() + 0.2) < 0.03
    r = one("random_uniform_terrain", min_height=-0.05, max_height=0.05, step=0.025)
    assert -0.1 <= r.min() < 0 < r.max() <= 0.1 and len(np.unique(r)) > 5  # (the spline overshoots its knots)
    stones = one("stepping_stones_terrain", stone_size=1.0, stone_distance=0.5, max_height=0.0, platform_size=0.0)
    # holes 10 m deep between stones at one height (max_height 0: the range -1..-1 raw, as Genesis World draws it)
    assert stones.min() == pytest.approx(-10.0) and np.isin(stones, [-10.0, -0.005]).all()


def test_randomize_draws_a_new_terrain_once_per_morph():
    kw = dict(n_subterrains=(1, 1), subterrain_size=(3.0, 3.0), subterrain_types="random_uniform_terrain")
    a, b = gs.morphs.Terrain(randomize=True, **kw), gs.morphs.Terrain(randomize=True, **kw)
    assert a.raw_heights() is a.raw_heights() and not np.array_equal(a.raw_heights(), b.raw_heights())
    assert a.as_dict()["height_field"] != b.as_dict()["height_field"]
    assert np.array_equal(gs.morphs.Terrain(**kw).raw_heights(), gs.morphs.Terrain(**kw).raw_heights())


def test_triangles_and_heights_agree_and_the_cubic_spline_is_not_a_knot():
    rng = np.random.default_rng(3)
    H = rng.normal(size=(6, 5))
    verts, faces = T.triangles(H, 0.5)
    assert faces.shape == (2 * 5 * 4, 3)
    n = np.cross(verts[faces[:, 1]] - verts[faces[:, 0]], verts[faces[:, 2]] - verts[faces[:, 0]])
    assert (n[:, 2] > 0).all()  # counter-clockwise from above
    # height_at on each triangle's centroid is the centroid's height
    c = verts[faces].mean(axis=1)
    assert np.allclose(T.height_at(H, 0.5, c[:, 0], c[:, 1]), c[:, 2], atol=1e-12)
    assert np.isnan(T.height_at(H, 0.5, np.array([-0.1]), np.array([0.0]))).all()
    # the spline reproduces a cubic exactly (not-a-knot), and passes through its knots
    x = np.array([0.0, 0.4, 1.0, 1.3, 2.0, 2.2])
    f = lambda t: 2 * t ** 3 - t ** 2 + 0.5 * t - 1  # noqa: E731
    xv = np.linspace(0, 2.2, 37)
    assert np.allclose(T.cubic_spline(x, f(x), xv), f(xv), atol=1e-10)


def test_mesh_to_heightfield_samples_the_top_of_a_mesh(tmp_path):
    """A 45-degree ramp (Genesis World's terrain_45.obj) and a box on a floor: heights of the highest surface."""
    ramp = tmp_path / "ramp.obj"
    ramp.write_text("v 5 10 0\nv 15 10 10\nv 5 20 0\nv 15 20 10\nf 1 2 4\nf 1 4 3\n")
    h, xs, ys = mesh_to_heightfield(str(ramp), spacing=2.0)
    assert h.shape == (6, 6) and xs.tolist() == [5, 7, 9, 11, 13, 15] and ys[0] == 10
    assert np.allclose(h, (xs - 5)[:, None] * np.ones(6), atol=1e-5)
    h3, _, _ = mesh_to_heightfield(str(ramp), spacing=1.5, oversample=3)  # each vertex its cell's highest hit
    assert h3.shape == (8, 8) and np.allclose(h3[:, 0], [0.8695652 + k * 1.3043478 for k in range(7)] + [10.0])
    with pytest.raises(gs.OptionError, match="spacing"):
        mesh_to_heightfield(str(ramp), spacing=0.0)


def test_the_kits_signed_distance_to_a_height_field_is_along_the_triangle_normal():
    """Points around a posed height field: d the distance to the plane of the triangle under the point (along its
    upward normal), n that normal in world axes; off the grid, far."""
    rng = np.random.default_rng(7)
    H = rng.uniform(-0.2, 0.2, size=(7, 6))
    hs = 0.3
    q = np.array([math.cos(0.2), 0.0, 0.0, math.sin(0.2)])  # turned 23 degrees about z
    centre = np.array([0.5, -0.3, 0.1])
    w, x, y, z = q
    R = np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
                  [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
                  [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)]])
    local = np.stack([rng.uniform(-0.2, 6 * hs + 0.2, 3000), rng.uniform(-0.2, 5 * hs + 0.2, 3000),
                      rng.uniform(-0.5, 0.5, 3000)], 1)
    rows = np.zeros((H.size, 4))
    rows[:, 0] = H.ravel()
    d_t, n_t = torch.zeros(3000, dtype=torch.float64), torch.zeros((3000, 3), dtype=torch.float64)
    kit_distances(GEOM_HFIELD, *(torch.as_tensor(np.ascontiguousarray(a), dtype=torch.float64) for a in
                                 (np.array([hs, hs, 6.0]), centre, q, rows, local @ R.T + centre)), d_t, n_t)
    d, n = d_t.numpy(), n_t.numpy() @ R  # the normal back in the field's frame
    on = (local[:, 0] >= 0) & (local[:, 0] <= 6 * hs) & (local[:, 1] >= 0) & (local[:, 1] <= 5 * hs)
    assert (d[~on] > 1e8).all() and on.sum() > 1500
    p = local[on]
    h = T.height_at(H, hs, p[:, 0], p[:, 1])
    # the normal is the surface's (a finite-difference gradient of height_at, inside the triangles)
    e = 1e-6
    gx = (T.height_at(H, hs, p[:, 0] + e, p[:, 1]) - T.height_at(H, hs, p[:, 0] - e, p[:, 1])) / (2 * e)
    gy = (T.height_at(H, hs, p[:, 0], p[:, 1] + e) - T.height_at(H, hs, p[:, 0], p[:, 1] - e)) / (2 * e)
    k = 1 / np.sqrt(1 + gx ** 2 + gy ** 2)
    smooth = np.isfinite(gx) & np.isfinite(gy)
    inner = smooth & (np.abs(gx - np.round(gx, 6)) < 1)  # (all points; kinks are measure zero)
    np.testing.assert_allclose(d[on][inner], ((p[:, 2] - h) * k)[inner], atol=1e-6)
    np.testing.assert_allclose(n[on][inner], np.stack([-gx * k, -gy * k, k], 1)[inner], atol=1e-5)


@pytest.fixture()
def pellets():
    name = plugins.register_plugin(pellets_plugin, name="pellets")
    yield
    plugins.unregister_plugin(name)


def test_pellets_land_on_terrain_and_never_go_below_its_surface(pellets):
    """A block of pellets (the particle kit's collider, which MPM, SPH, PBD and FEM share) poured on a wave
    terrain, in two environments: after 0.6 s none is below the surface under it and all have settled."""
    size = 0.02
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=2e-3, substeps=1),
                     pellet_options=gs.options.PelletOptions(lower_bound=(-0.1, -0.1, -0.3), upper_bound=(1.1, 1.1, 1.0),
                                                             particle_size=size, restitution=0.0))
    terrain = scene.add_entity(gs.morphs.Terrain(n_subterrains=(1, 1), subterrain_size=(1.0, 1.0),
                                                 horizontal_scale=0.05, vertical_scale=0.001,
                                                 subterrain_types="wave_terrain",
                                                 subterrain_parameters={"wave_terrain": {"amplitude": 0.1}}))
    block = scene.add_entity(gs.morphs.Box(pos=(0.5, 0.5, 0.35), size=(0.3, 0.3, 0.1)),
                             material=gs.materials.Pellet(rho=1000.0))
    scene.build(n_envs=2)
    H = terrain.geoms[0].metadata["height_field"] * 0.001
    for _ in range(300):
        scene.step()
    pos = block.get_particles_pos()
    p = torch.as_tensor(pos).reshape(-1, 3).numpy()
    ground = T.height_at(H, 0.05, p[:, 0], p[:, 1])
    assert np.isfinite(ground).all() and p.shape[0] > 100
    assert (p[:, 2] - ground).min() > -2e-3
    assert (p[:, 2] - ground).max() < 0.2
