"""The particle kit's neighbour search against brute force.

The reference is an all-pairs test in float64 numpy, |x_j - x_i|^2 <= radius^2 with the squares summed in x, y, z
order as the kernels do; positions given in float32 are compared through their exact float64 values. A test
kernel written the way a solver writes one (`collect`) records every candidate a particle's loop visits, in
visiting order, and whether it lies within the radius: the candidates must be exactly the active particles of the
27 surrounding cells, each once, in the documented order (cells by offset, x fastest; particles by index), and the
neighbours exactly brute force's.
"""

import numpy as np
import pytest
import taichi as ti
import torch
from hypothesis import given
from hypothesis import strategies as st

from genesis_core.errors import OptionError
from genesis_core.particles import neighbours as nb
from genesis_core.particles.neighbours import NeighbourGrid, grid_cell, grid_cell_range, grid_particle_cell

DTYPES = (torch.float64, torch.float32)
MAX_CANDIDATES = 512
nd = ti.types.ndarray


@ti.kernel
def collect(pos: nd(ndim=4), active: nd(ndim=2), queries: nd(ndim=4), of_particles: ti.i32, table: nd(ndim=3),
            order: nd(ndim=2), cells: nd(ndim=3), radius: ti.f64, cell_size: ti.f64, candidate: nd(ndim=3),
            within: nd(ndim=3), n_candidates: nd(ndim=2)):
    """Every candidate j of each query in visiting order, and 1 where |x_j - x_query| <= radius. of_particles: the
    queries are the particles (pos itself, inactive ones skipped) and start from their cells of the build; else
    they are points (frame 0 of `queries`) whose cells grid_cell finds."""
    for b, i in ti.ndrange(queries.shape[1], queries.shape[2]):
        n = 0
        query = 1
        if of_particles != 0:
            query = active[b, i]
        if query != 0:
            xi = ti.Vector([ti.cast(queries[0, b, i, a], ti.f64) for a in range(3)])
            c = grid_cell(xi, cell_size)
            if of_particles != 0:
                c = grid_particle_cell(cells, b, i)
            for o in range(27):
                r = grid_cell_range(table, b, c, o)
                for k in range(r[0], r[1]):
                    j = order[b, k]
                    d = ti.Vector([ti.cast(pos[0, b, j, a], ti.f64) for a in range(3)]) - xi
                    r2 = d[0] * d[0] + d[1] * d[1] + d[2] * d[2]
                    if n < candidate.shape[2]:
                        candidate[b, i, n] = j
                        within[b, i, n] = 1 if r2 <= radius * radius else 0
                    n += 1
        n_candidates[b, i] = n


def run_collect(grid, pos, active, queries=None):
    """(candidates, within, counts) of the particles (queries None) or of the points `queries` [B, M, 3]."""
    B = grid.n_envs
    M = grid.n_particles if queries is None else queries.shape[1]
    cand = torch.full((B, M, MAX_CANDIDATES), -1, dtype=torch.int32)
    within = torch.zeros((B, M, MAX_CANDIDATES), dtype=torch.int32)
    n = torch.zeros((B, M), dtype=torch.int32)
    pos4 = pos[None].contiguous()
    q4 = pos4 if queries is None else queries[None].contiguous()
    grid.launch(collect, pos4, active, q4, int(queries is None), grid.table, grid.order, grid.cells, grid.radius,
                grid.cell_size, cand, within, n)
    assert int(n.max()) <= MAX_CANDIDATES, "the test's candidate buffer is too small for this point set"
    return cand.numpy(), within.numpy(), n.numpy()


def reference_cells(x, cell_size):
    """floor(x / cell_size) clamped as the grid does (x float64 [N, 3])."""
    with np.errstate(invalid="ignore"):
        q = np.clip(np.floor(np.clip(x / cell_size, -nb.CELL_LIMIT, nb.CELL_LIMIT)), -nb.CELL_LIMIT, nb.CELL_LIMIT)
    return np.where(np.isnan(q), -nb.CELL_LIMIT, q).astype(np.int64)


def brute_force(x, act, radius):
    """within [N, N]: active i and j (i == j included) with |x_j - x_i|^2 <= radius^2, float64, x-y-z order."""
    with np.errstate(invalid="ignore"):
        d = x[None, :, :] - x[:, None, :]
        r2 = d[..., 0] * d[..., 0] + d[..., 1] * d[..., 1] + d[..., 2] * d[..., 2]
        within = r2 <= radius * radius
    return within & (act[:, None] != 0) & (act[None, :] != 0), r2


def documented_order(x, act, cell_size, cell):
    """The active particles of the 27 cells around `cell`: cells by offset (x fastest), then index."""
    off = reference_cells(x, cell_size) - cell
    js = np.nonzero((act != 0) & (np.abs(off) <= 1).all(axis=1))[0]
    key = (off[js, 2] + 1) * 9 + (off[js, 1] + 1) * 3 + (off[js, 0] + 1)
    return js[np.lexsort((js, key))]


def check_against_brute_force(grid, pos, active, sums=True):
    """Every env's candidates, neighbour sets, counts and fixed-order sums against the references."""
    grid.build(pos, active)
    cand, within, n = run_collect(grid, pos, active)
    count, wsum = grid.neighbour_sums(pos, active)
    x_all = pos.double().numpy()
    act_all = active.numpy()
    for b in range(grid.n_envs):
        x, act = x_all[b], act_all[b]
        ref, r2 = brute_force(x, act, grid.radius)
        assert int(grid.n_active[b]) == int(act.sum())
        assert int(grid.n_cells[b]) == len({tuple(c) for c in reference_cells(x, grid.cell_size)[act != 0]})
        np.testing.assert_array_equal(grid.cells[b, :, :3].numpy(), reference_cells(x, grid.cell_size))
        for i in range(grid.n_particles):
            if act[i] == 0:
                assert n[b, i] == 0 and count[b, i] == 0 and wsum[b, i] == 0
                continue
            expected = documented_order(x, act, grid.cell_size, reference_cells(x[i], grid.cell_size))
            got = cand[b, i, : n[b, i]]
            np.testing.assert_array_equal(got, expected, err_msg=f"env {b} particle {i}: candidates or their order")
            neighbours = got[within[b, i, : n[b, i]] == 1]
            np.testing.assert_array_equal(np.sort(neighbours), np.nonzero(ref[i])[0],
                                          err_msg=f"env {b} particle {i}: neighbour set")
            assert count[b, i] == len(neighbours)
            if sums:
                # the visiting order was checked above; Taichi compiles with fast math (contractions, reciprocals),
                # so the float64 sum agrees with numpy's to a few ulps, and its bits are checked kernel against kernel
                # (test_sums_are_bitwise_repeatable_and_env_independent)
                q = 1.0 - r2[i, neighbours] / (grid.radius * grid.radius)
                rtol = 1e-13 if grid.dtype == torch.float64 else 1e-6
                np.testing.assert_allclose(float(wsum[b, i]), (q * q * q).sum(), rtol=rtol, err_msg=f"{b}, {i}")
    return count, wsum


def make_active(rng, B, N, p_active=0.8):
    return torch.from_numpy((rng.random((B, N)) < p_active).astype(np.int32))


# -- neighbour sets ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES, ids=["f64", "f32"])
def test_random_clouds_match_brute_force_in_every_env(dtype):
    """Four environments with different clouds (dense, sparse, a thin slab, one with negative coordinates) and
    masks: each env's neighbour sets and fixed-order sums are brute force's."""
    rng = np.random.default_rng(1)
    B, N, radius = 4, 300, 0.1
    x = np.stack([rng.random((N, 3)) * 0.4, rng.random((N, 3)) * 2.0,
                  rng.random((N, 3)) * [1.0, 1.0, 0.02], rng.random((N, 3)) * 0.8 - 0.7])
    pos = torch.from_numpy(x).to(dtype)
    grid = NeighbourGrid(B, N, radius, dtype)
    count, _ = check_against_brute_force(grid, pos, make_active(rng, B, N))
    assert count.max() > 20  # the dense env has crowded neighbourhoods, the sparse one isolated particles
    assert (count[1] == 1).any()


def test_duplicates_faces_and_empty_cells():
    """A lattice with spacing radius / 2 on cell faces (x = k * cell_size, exactly representable multiples), a
    lattice of spacing exactly radius (neighbours at distance radius are found: <= radius), 6 copies of one point,
    and two clusters with empty cells between them."""
    radius = 0.25
    grid_probe = NeighbourGrid(1, 1, radius)
    cs = grid_probe.cell_size
    faces = np.array([[i, j, k] for i in range(3) for j in range(3) for k in range(2)], float) * cs
    spaced = np.array([[i, j, k] for i in range(3) for j in range(3) for k in range(3)], float) * radius + 5.0
    dup = np.repeat([[2.0, 2.0, 2.0]], 6, axis=0)
    far = np.array([[-3.0, -3.0, -3.0], [-3.0 + 0.1, -3.0, -3.0], [9.0, 9.0, 9.0]])
    x = np.concatenate([faces, spaced, dup, far])
    N = len(x)
    pos = torch.from_numpy(x)[None].contiguous()
    grid = NeighbourGrid(1, N, radius)
    count, wsum = check_against_brute_force(grid, pos, torch.ones((1, N), dtype=torch.int32))
    dup_rows = slice(len(faces) + len(spaced), len(faces) + len(spaced) + 6)
    assert (count[0, dup_rows] == 6).all() and (wsum[0, dup_rows] == 6.0).all()
    # the centre of the spaced lattice: itself and its 6 face neighbours at exactly `radius`
    assert count[0, len(faces) + 13] == 7
    assert count[0, -1] == 1


@pytest.mark.parametrize("dtype", DTYPES, ids=["f64", "f32"])
def test_pairs_at_the_radius_across_two_faces(dtype):
    """x_i = -t just below the face at 0 (t tiny) and x_j = fl(x_i + radius) = radius along one axis: their distance
    rounds to exactly the radius, so they are neighbours, though floor(x / radius) puts them in cells -1 and 1. A cell
    of side exactly the radius would lose them; the grid's cells are 2^-20 larger than the radius, and find them."""
    radius = 0.25
    tiny = [2.0 ** -60, 2.0 ** -80, 2.0 ** -100, 1e-30]
    x = []
    for row, (t, axis) in enumerate((t, axis) for t in tiny for axis in range(3)):
        xi = np.zeros(3)
        xi[(axis + 1) % 3] = 10.0 * row  # one pair a row, far from the others
        xi[axis] = -t
        xj = xi.copy()
        xj[axis] = float(torch.tensor(-t, dtype=dtype) + radius)
        x += [xi, xj]
    x = torch.tensor(np.array(x), dtype=dtype).double().numpy()
    d = x[1::2] - x[0::2]
    assert ((d * d).sum(axis=1) <= radius * radius).all()
    assert ((np.floor(x[1::2] / radius) - np.floor(x[0::2] / radius)).max(axis=1) == 2).all()
    pos = torch.from_numpy(x).to(dtype)[None].contiguous()
    grid = NeighbourGrid(1, len(x), radius, dtype)
    count, _ = check_against_brute_force(grid, pos, torch.ones((1, len(x)), dtype=torch.int32))
    assert (count == 2).all()


def test_inactive_particles_are_left_out_and_a_rebuild_forgets_the_last():
    """Inactive particles are nobody's neighbour, have no neighbours, and are not in `order`; a build after one
    over other positions (all active) leaves nothing of the old cells in the table."""
    rng = np.random.default_rng(2)
    B, N = 2, 200
    grid = NeighbourGrid(B, N, 0.05)
    everyone = torch.ones((B, N), dtype=torch.int32)
    check_against_brute_force(grid, torch.from_numpy(rng.random((B, N, 3)) * 0.5 - 0.1), everyone)
    pos = torch.from_numpy(rng.random((B, N, 3)) * 0.3)
    active = make_active(rng, B, N, 0.5)
    active[1] = 0
    active[1, 7] = 1
    count, _ = check_against_brute_force(grid, pos, active)
    assert int((grid.table[:, :, nb.TB_COUNT] > 0).sum()) == int(grid.n_cells.sum())
    for b in range(B):
        n_act = int(active[b].sum())
        np.testing.assert_array_equal(np.sort(grid.order[b, :n_act].numpy()), np.nonzero(active[b].numpy())[0])
        assert (grid.order[b, n_act:] == -1).all()
    assert count[1, 7] == 1 and count[1].sum() == 1


@pytest.mark.parametrize("flag", [1, 0])
def test_one_particle(flag):
    grid = NeighbourGrid(1, 1, 0.1)
    assert grid.n_slots == 2
    pos = torch.tensor([[[0.3, -0.2, 7.0]]], dtype=torch.float64)
    count, wsum = check_against_brute_force(grid, pos, torch.full((1, 1), flag, dtype=torch.int32))
    assert int(count[0, 0]) == flag and float(wsum[0, 0]) == float(flag)


def home_slot(cells, n_slots):
    """The grid's first probed slot for integer cells [M, 3] (the same mixing, in numpy uint32 arithmetic)."""
    c = cells.astype(np.int64).astype(np.uint32)
    h = c[:, 0] * np.uint32(0x9E3779B1) ^ c[:, 1] * np.uint32(0x85EBCA77) ^ c[:, 2] * np.uint32(0xC2B2AE3D)
    h ^= h >> np.uint32(16)
    h *= np.uint32(0x85EBCA6B)
    h ^= h >> np.uint32(13)
    h *= np.uint32(0xC2B2AE35)
    h ^= h >> np.uint32(16)
    return (h & np.uint32(n_slots - 1)).astype(np.int64)


def test_cells_that_collide_in_the_table():
    """Clusters in 24 cells that all start probing at the same slot (and their neighbours), so that insertions
    and look-ups walk long probe sequences and neighbour cells share slots' runs: still exact."""
    rng = np.random.default_rng(3)
    N, radius = 96, 0.5
    grid = NeighbourGrid(1, N, radius)
    candidates = rng.integers(-20, 20, size=(200000, 3))
    home = home_slot(candidates, grid.n_slots)
    target = np.bincount(home).argmax()
    colliding = np.unique(candidates[home == target], axis=0)[:24]
    assert len(colliding) == 24
    # 3 particles per colliding cell, at random places inside it: neighbours across cell boundaries
    x = (np.repeat(colliding, 3, axis=0) + rng.random((72, 3))) * grid.cell_size
    x = np.concatenate([x, rng.random((N - 72, 3)) * 6.0 - 3.0])
    pos = torch.from_numpy(x)[None].contiguous()
    check_against_brute_force(grid, pos, torch.ones((1, N), dtype=torch.int32))
    assert int(grid.longest_probe[0]) >= 24


@given(seed=st.integers(0, 2 ** 31 - 1), n=st.integers(1, 60), radius=st.sampled_from([0.01, 0.1, 0.37, 2.0]),
       spread=st.sampled_from([0.05, 1.0, 30.0]), lattice=st.booleans(), f32=st.booleans())
def test_property_any_cloud_matches_brute_force(seed, n, radius, spread, lattice, f32):
    """Any cloud of 1-60 points, two envs, random masks; on a lattice option the points snap to multiples of a
    quarter radius (faces, exact distances, duplicates)."""
    rng = np.random.default_rng(seed)
    x = (rng.random((2, n, 3)) - 0.5) * spread
    if lattice:
        x = np.round(x / (radius / 4)) * (radius / 4)
    dtype = torch.float32 if f32 else torch.float64
    grid = NeighbourGrid(2, n, radius, dtype)
    check_against_brute_force(grid, torch.from_numpy(x).to(dtype), make_active(rng, 2, n, 0.7), sums=False)


def test_query_points_that_are_not_particles():
    """Points inside, between and outside two clouds (and a NaN) find their cells with grid_cell: their candidates
    are the active particles of the 27 cells around, in order, and their neighbours brute force's."""
    rng = np.random.default_rng(8)
    B, N, M, radius = 2, 300, 80, 0.08
    pos = torch.from_numpy(rng.random((B, N, 3)) * [[[0.5]], [[0.3]]])
    active = make_active(rng, B, N, 0.7)
    points = rng.random((B, M, 3)) * 0.8 - 0.15
    points[:, :10] = pos[:, :10].numpy()  # on particles, inactive ones included
    points[1, 11] = np.nan
    grid = NeighbourGrid(B, N, radius)
    grid.build(pos, active)
    cand, within, n = run_collect(grid, pos, active, torch.from_numpy(points))
    x_all, act_all = pos.numpy(), active.numpy()
    found_some = 0
    for b in range(B):
        x, act = x_all[b], act_all[b]
        for i in range(M):
            expected = documented_order(x, act, grid.cell_size, reference_cells(points[b, i], grid.cell_size))
            got = cand[b, i, : n[b, i]]
            np.testing.assert_array_equal(got, expected, err_msg=f"env {b} point {i}: candidates or their order")
            with np.errstate(invalid="ignore"):
                d = x - points[b, i]
                ref = (d[:, 0] * d[:, 0] + d[:, 1] * d[:, 1] + d[:, 2] * d[:, 2] <= radius * radius) & (act != 0)
            np.testing.assert_array_equal(np.sort(got[within[b, i, : n[b, i]] == 1]), np.nonzero(ref)[0])
            found_some += int(ref.sum() > 0)
    assert n[1, 11] == 0 or not within[1, 11].any()
    assert 20 < found_some < 2 * M


# -- fixed order ---------------------------------------------------------------------------------------------------


def test_sums_are_bitwise_repeatable_and_env_independent():
    """The fixed-order sum of a batch: the same bits on a rebuild, when the environments are permuted, and for an
    environment alone in a grid of its own (env b's result owes nothing to the others)."""
    rng = np.random.default_rng(4)
    B, N = 5, 400
    pos = torch.from_numpy(rng.random((B, N, 3)) * rng.uniform(0.2, 0.6, (B, 1, 1)))
    active = make_active(rng, B, N, 0.9)
    grid = NeighbourGrid(B, N, 0.07)
    grid.build(pos, active)
    first = [t.clone() for t in grid.neighbour_sums(pos, active)]
    buffers = {k: v.clone() for k, v in grid.buffers().items()}
    grid.build(pos, active)
    again = grid.neighbour_sums(pos, active)
    assert all(torch.equal(a, b) for a, b in zip(first, again))
    assert all(torch.equal(buffers[k], v) for k, v in grid.buffers().items())

    perm = torch.tensor([3, 0, 4, 2, 1])
    pos_p, active_p = pos[perm].contiguous(), active[perm].contiguous()
    grid.build(pos_p, active_p)
    count_p, wsum_p = grid.neighbour_sums(pos_p, active_p)
    assert torch.equal(count_p, first[0][perm]) and torch.equal(wsum_p, first[1][perm])

    alone = NeighbourGrid(1, N, 0.07)
    alone.build(pos[2:3].contiguous(), active[2:3].contiguous())
    _, wsum_alone = alone.neighbour_sums(pos[2:3].contiguous(), active[2:3].contiguous())
    assert torch.equal(wsum_alone[0], first[1][2])
    assert alone.n_slots == grid.n_slots


def test_frame_of_a_solver_state():
    """pos [F, B, N, 3] with a frame f is the same search as pos[f] alone."""
    rng = np.random.default_rng(5)
    F, B, N = 3, 2, 100
    pos = torch.from_numpy(rng.random((F, B, N, 3)) * 0.3)
    grid = NeighbourGrid(B, N, 0.05)
    grid.build(pos, None, f=2)
    ref = [t.clone() for t in grid.neighbour_sums(pos, None, f=2)]
    grid.build(pos[2].contiguous())
    assert all(torch.equal(a, b) for a, b in zip(ref, grid.neighbour_sums(pos[2].contiguous())))


# -- memory and robustness -----------------------------------------------------------------------------------------


def test_memory_scales_with_particles_not_with_the_domain():
    """The buffers are sized by (B, N) alone, at most 120 bytes a particle, and a build over a kilometre keeps them
    (no reallocation) and stays exact: the same sizes as over a metre."""
    rng = np.random.default_rng(6)
    B, N, radius = 2, 500, 0.01
    sizes = {}
    for extent in (1.0, 1000.0):
        grid = NeighbourGrid(B, N, radius, torch.float32)
        before = {k: (v.data_ptr(), tuple(v.shape)) for k, v in grid.buffers().items()}
        pos = torch.from_numpy(rng.random((B, N, 3)) * extent).float()
        # a few close pairs, so that the kilometre-wide cloud has neighbours too
        pos[:, 1::2] = pos[:, 0::2] + 0.004
        check_against_brute_force(grid, pos, torch.ones((B, N), dtype=torch.int32), sums=False)
        assert {k: (v.data_ptr(), tuple(v.shape)) for k, v in grid.buffers().items()} == before
        sizes[extent] = {k: tuple(v.shape) for k, v in grid.buffers().items()}
        assert grid.nbytes <= 120 * B * N
    assert sizes[1.0] == sizes[1000.0]


def test_hostile_positions_stay_in_bounds_and_cost_no_neighbours():
    """NaN, +-inf and +-1e30 (clamped cells) next to ordinary particles: no index leaves an array, the ordinary
    particles' neighbourhoods are brute force's, the non-finite ones have none, and two particles 0.05 apart at
    1e12 (both beyond the clamp) still find each other."""
    rng = np.random.default_rng(7)
    x = rng.random((40, 3)) * 0.5
    x[3] = np.nan
    x[4] = [np.inf, 0.1, 0.1]
    x[5] = [-np.inf, np.nan, 1.0]
    x[6] = [1e30, -1e30, 0.0]
    x[7] = [1e12, 1e12, -1e12]
    x[8] = [1e12 + 0.05, 1e12, -1e12]
    pos = torch.from_numpy(x)[None].contiguous()
    grid = NeighbourGrid(1, len(x), 0.1)
    count, _ = check_against_brute_force(grid, pos, torch.ones((1, len(x)), dtype=torch.int32), sums=False)
    assert count[0, 3] == 0 and count[0, 4] == 0 and count[0, 5] == 0
    assert count[0, 7] == 2 and count[0, 8] == 2
    assert grid.cells[0, :, :3].abs().max() <= nb.CELL_LIMIT
    slots = grid.cells[0, :, nb.PC_SLOT]
    assert ((slots >= 0) & (slots < grid.n_slots)).all()


def test_bad_arguments_name_what_was_wrong():
    with pytest.raises(OptionError, match="radius"):
        NeighbourGrid(1, 10, 0.0)
    with pytest.raises(OptionError, match="n_particles"):
        NeighbourGrid(1, 0, 0.1)
    with pytest.raises(OptionError, match="dtype"):
        NeighbourGrid(1, 10, 0.1, torch.float16)
    with pytest.raises(OptionError, match="2\\^31"):
        NeighbourGrid(2 ** 20, 1000, 0.1)  # refused before anything is allocated
    grid = NeighbourGrid(2, 10, 0.1)
    with pytest.raises(OptionError, match="float32"):
        grid.build(torch.zeros((2, 10, 3), dtype=torch.float32))
    with pytest.raises(OptionError, match=r"\[2, 10, 3\]"):
        grid.build(torch.zeros((2, 11, 3), dtype=torch.float64))
    with pytest.raises(OptionError, match="frame"):
        grid.build(torch.zeros((3, 2, 10, 3), dtype=torch.float64), f=3)
    with pytest.raises(OptionError, match="active"):
        grid.build(torch.zeros((2, 10, 3), dtype=torch.float64), torch.ones((2, 10), dtype=torch.int64))
