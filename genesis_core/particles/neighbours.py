"""Neighbour search for particle solvers: a per-environment cell list in a hash table, visited in a fixed order.

Space is cut into cubic cells of side `cell_size` (the search radius, enlarged by 2^-20 relative: see "Exactness"
below). Each environment keeps its own table; nothing about the domain's extent enters the memory:

    table  int32 [B, T, 5]   one slot per occupied cell: its integer coordinates (3), `first` (where its
                             particles start in `order`) and `count` (0: an empty slot). T = the smallest power of
                             two >= 2 N, so at most half the slots are ever occupied and every probe sequence ends.
    order  int32 [B, N]      the active particles' indices grouped by cell, in increasing index within a cell
                             (entries past the environment's active count are -1).
    cells  int32 [B, N, 4]   each particle's cell coordinates (3; computed for inactive particles too) and slot
                             (-1: inactive).
    occupied int32 [B, N]    the slots of the occupied cells, in the order their first particle comes in (the first
                             `n_cells` entries; a kernel can loop over cells through them).
    stats  int32 [B, 3]      active particles, occupied cells, longest probe sequence of the last build.

That is 40-80 bytes of table and 24 bytes of the rest a particle, whether the particles span a metre or a kilometre.

A build (one kernel, two parallel loops) computes every particle's cell in parallel over (environment, particle),
then, one thread per environment, empties the slots the last build occupied, inserts the cells into the table by
linear probing in particle-index order, counts, takes the prefix sum over the occupied cells and places the
particles in index order: a stable counting sort, without atomics, so the buffers are a function of that
environment's positions and mask only (and the work O(particles + occupied cells), not O(table size)).

Visiting order. A kernel loops over the 27 cells around a point, `o = 0..26` with x varying fastest
(offset `(o % 3 - 1, o // 3 % 3 - 1, o // 9 - 1)`), and within a cell over its particles in increasing index.
The order a particle's neighbours are visited in therefore depends on the positions alone (not on the table's
size, the hash, the other environments or the thread schedule): a sum over neighbours is bitwise repeatable. The
27 cells are distinct and a slot holds exactly one cell, so no particle is visited twice.

Using it from a solver kernel (an SPH density, m: particle mass, W: a kernel of support h = radius):

    from genesis_core.particles.neighbours import NeighbourGrid, grid_particle_cell, grid_cell_range
    nd = ti.types.ndarray

    @ti.kernel
    def density(f: ti.i32, pos: nd(ndim=4), active: nd(ndim=2), table: nd(ndim=3), order: nd(ndim=2),
                cells: nd(ndim=3), h: ti.f64, m: ti.f64, rho: nd(ndim=2)):
        for b, i in ti.ndrange(pos.shape[1], pos.shape[2]):
            acc = 0.0
            if active[b, i] != 0:
                xi = ti.Vector([pos[f, b, i, 0], pos[f, b, i, 1], pos[f, b, i, 2]])
                c = grid_particle_cell(cells, b, i)
                for o in range(27):
                    r = grid_cell_range(table, b, c, o)
                    for k in range(r[0], r[1]):
                        j = order[b, k]                    # active, j == i included
                        d = ti.Vector([pos[f, b, j, 0], pos[f, b, j, 1], pos[f, b, j, 2]]) - xi
                        r2 = d.dot(d)
                        if r2 <= h * h:
                            acc += m * W(ti.sqrt(r2), h)
            rho[b, i] = acc

    grid = NeighbourGrid(n_envs, n_particles, radius=h, dtype=torch.float64, device="cpu")
    grid.build(state.pos, state.active, f)          # pos [F, B, N, 3] with frame f, or [B, N, 3]
    launch(density, f, state.pos, state.active, grid.table, grid.order, grid.cells, h, m, rho)

Candidates come from whole cells: the distance test is the caller's. A point that is not a particle finds its cell
with `grid_cell(x, cell_size)` (x a 3-vector) and loops the same way. The ranges refer to the positions of the last
build: rebuild after the particles move (a solver that moves them less than a margin per step may build with a
larger radius and rebuild less often).

Exactness. Cell coordinates are floor(x / cell_size) computed in float64 and clamped to +-2^29 (NaN and +-inf
included), so no coordinate overflows and every slot index is masked into the table: no position, however wild,
makes an index leave an array. Clamping keeps cells that were adjacent adjacent, so it costs speed, never
neighbours. The 2^-20 margin on the cell size covers rounding: every pair whose distance, computed in float32 or
float64, is <= radius lies in adjacent cells. A NaN position lands in some cell and is within radius of nothing.

Cost. A build is one launch; its per-environment stage is serial within an environment, and Taichi's CPU backend
runs an outer loop of fewer than about a thousand iterations on one thread (benchmarks/README.md), so below that
many environments it uses one core. On a GPU it is one thread per environment: slow for a few large environments.
"""

import taichi as ti
import torch

from ..errors import OptionError
from ..launch import Launcher

nd = ti.types.ndarray

# table [B, T, TB_N]: the slot's cell coordinates, first row in `order`, particle count (0: empty slot)
TB_CELL, TB_FIRST, TB_COUNT, TB_N = 0, 3, 4, 5
# cells [B, N, PC_N]: the particle's cell coordinates, its slot (-1: inactive)
PC_CELL, PC_SLOT, PC_N = 0, 3, 4
# stats [B, ST_N]: active particles, occupied cells, longest probe sequence (slots looked at by one insertion)
ST_ACTIVE, ST_CELLS, ST_LONGEST_PROBE, ST_N = range(4)

# |cell coordinate| <= CELL_LIMIT: a neighbour's coordinate (+-1) stays far from the int32 range
CELL_LIMIT = 1 << 29
# relative enlargement of the cell over the radius: larger than the rounding of a float32 distance (3 * 2^-24) plus
# that of floor(x / cell_size) in float64 for |x / cell_size| <= 2^29 (2^-23)
CELL_MARGIN = 2.0 ** -20


@ti.func
def grid_cell(x, cell_size):
    """The integer cell (int32 3-vector) of the point x (a 3-vector of any float type), the same function the build
    uses: floor(x / cell_size) in float64, clamped to +-CELL_LIMIT whatever x is (NaN and +-inf included)."""
    c = ti.Vector([0, 0, 0], ti.i32)
    for a in ti.static(range(3)):
        q = ti.cast(x[a], ti.f64) / cell_size
        q = ti.min(ti.max(q, -CELL_LIMIT * 1.0), CELL_LIMIT * 1.0)
        ca = ti.cast(ti.floor(q), ti.i32)
        # a NaN survives the float clamp and casts to an arbitrary integer: clamp again
        c[a] = ti.min(ti.max(ca, -CELL_LIMIT), CELL_LIMIT)
    return c


@ti.func
def grid_particle_cell(cells: ti.template(), b, i):
    """The cell of particle i of environment b at the last build (int32 3-vector)."""
    return ti.Vector([cells[b, i, PC_CELL], cells[b, i, PC_CELL + 1], cells[b, i, PC_CELL + 2]], ti.i32)


@ti.func
def grid_offset(o):
    """The o-th of the 27 cell offsets, o in [0, 27), x varying fastest: (o % 3 - 1, o // 3 % 3 - 1, o // 9 - 1)."""
    return ti.Vector([o % 3 - 1, o // 3 % 3 - 1, o // 9 - 1], ti.i32)


@ti.func
def _u32_mul(a, k: ti.template()):
    """a * k modulo 2^32 for a, k < 2^32, in uint64 (a 32-bit product that wraps reads as an overflow in debug)."""
    return (a * ti.u64(k)) & ti.u64(0xFFFFFFFF)


@ti.func
def _home_slot(c, mask):
    """The first slot probed for cell c: the coordinates mixed into 32 bits (odd multipliers, then the murmur3
    finaliser, so that neighbouring cells, which differ in low bits, scatter over the whole table)."""
    h = _u32_mul(ti.cast(ti.cast(c[0], ti.u32), ti.u64), 0x9E3779B1)
    h ^= _u32_mul(ti.cast(ti.cast(c[1], ti.u32), ti.u64), 0x85EBCA77)
    h ^= _u32_mul(ti.cast(ti.cast(c[2], ti.u32), ti.u64), 0xC2B2AE3D)
    h ^= h >> 16
    h = _u32_mul(h, 0x85EBCA6B)
    h ^= h >> 13
    h = _u32_mul(h, 0xC2B2AE35)
    h ^= h >> 16
    return ti.cast(h & ti.cast(mask, ti.u64), ti.i32)


@ti.func
def _slot_holds(table: ti.template(), b, s, c):
    return table[b, s, TB_CELL] == c[0] and table[b, s, TB_CELL + 1] == c[1] and table[b, s, TB_CELL + 2] == c[2]


@ti.func
def grid_find(table: ti.template(), b, c):
    """The slot of cell c in environment b's table, or -1 if no active particle lies in it."""
    n_slots = table.shape[1]
    mask = n_slots - 1
    s = _home_slot(c, mask)
    found = -1
    probes = 0
    # ends at an empty slot: at most half the slots are occupied (the bound only guards a malformed table)
    while probes < n_slots:
        if table[b, s, TB_COUNT] == 0:
            break
        if _slot_holds(table, b, s, c):
            found = s
            break
        s = (s + 1) & mask
        probes += 1
    return found


@ti.func
def grid_cell_range(table: ti.template(), b, c, o):
    """[begin, end) (an int32 2-vector) of the rows of `order` that hold the particles of the cell c + offset o
    (o in [0, 27), see grid_offset) in environment b; empty (0, 0) when that cell holds none."""
    s = grid_find(table, b, c + grid_offset(o))
    r = ti.Vector([0, 0], ti.i32)
    if s >= 0:
        r[0] = table[b, s, TB_FIRST]
        r[1] = r[0] + table[b, s, TB_COUNT]
    return r


@ti.func
def grid_cell_reaches(x, c, o, radius, cell_size):
    """Whether the cell c + offset o (o in [0, 27)) can hold a point within `radius` of x (x in cell c, the cells
    of side `cell_size`, the grid's): a kernel skips the others before it looks them up. With cells twice the
    radius, 8 of the 27 are visited on average instead of 27."""
    d = grid_offset(o)
    ok = True
    for a in ti.static(range(3)):
        lo = ti.cast(c[a], ti.f64) * cell_size
        xa = ti.cast(x[a], ti.f64)
        if d[a] < 0 and xa - lo >= radius:
            ok = False
        if d[a] > 0 and lo + cell_size - xa >= radius:
            ok = False
    return ok


@ti.kernel
def grid_build(f: ti.i32, pos: nd(ndim=4), active: nd(ndim=2), cell_size: ti.f64, table: nd(ndim=3),
               order: nd(ndim=2), cells: nd(ndim=3), occupied: nd(ndim=2), stats: nd(ndim=2)):
    """Frame f of pos [F, B, N, 3], active [B, N] -> table, order, cells, occupied, stats (see the module doc).
    table, occupied and stats must come from the previous build of the same grid (or be zero)."""
    n_envs = pos.shape[1]
    n = pos.shape[2]
    for b, i in ti.ndrange(n_envs, n):
        c = grid_cell(ti.Vector([pos[f, b, i, 0], pos[f, b, i, 1], pos[f, b, i, 2]]), cell_size)
        for a in ti.static(range(3)):
            cells[b, i, PC_CELL + a] = c[a]
        cells[b, i, PC_SLOT] = -1
    # one thread per environment, particles in index order: the table and `order` do not depend on the schedule
    for b in range(n_envs):
        n_slots = table.shape[1]
        mask = n_slots - 1
        # only the slots of the last build hold counts (the table starts zeroed): empty those
        for m in range(ti.min(ti.max(stats[b, ST_CELLS], 0), n)):
            table[b, occupied[b, m] & mask, TB_COUNT] = 0
        n_active = 0
        n_cells = 0
        longest = 0
        for i in range(n):
            if active[b, i] != 0:
                c = grid_particle_cell(cells, b, i)
                s = _home_slot(c, mask)
                probes = 1
                while probes <= n_slots:
                    if table[b, s, TB_COUNT] == 0:
                        for a in ti.static(range(3)):
                            table[b, s, TB_CELL + a] = c[a]
                        occupied[b, n_cells] = s
                        n_cells += 1
                        break
                    if _slot_holds(table, b, s, c):
                        break
                    s = (s + 1) & mask
                    probes += 1
                longest = ti.max(longest, probes)
                table[b, s, TB_COUNT] = table[b, s, TB_COUNT] + 1
                cells[b, i, PC_SLOT] = s
                n_active += 1
        # exclusive prefix sum of the counts; the counts restart from 0 and are rebuilt by the placement below
        start = 0
        for m in range(n_cells):
            s = occupied[b, m]
            count = table[b, s, TB_COUNT]
            table[b, s, TB_FIRST] = start
            table[b, s, TB_COUNT] = 0
            start += count
        for i in range(n):
            s = cells[b, i, PC_SLOT]
            if s >= 0:
                k = table[b, s, TB_FIRST] + table[b, s, TB_COUNT]
                order[b, k] = i
                table[b, s, TB_COUNT] = table[b, s, TB_COUNT] + 1
        for k in range(n_active, n):
            order[b, k] = -1
        stats[b, ST_ACTIVE] = n_active
        stats[b, ST_CELLS] = n_cells
        stats[b, ST_LONGEST_PROBE] = longest


@ti.func
def _point(pos: ti.template(), f, b, i):
    return ti.Vector([ti.cast(pos[f, b, i, 0], ti.f64), ti.cast(pos[f, b, i, 1], ti.f64),
                      ti.cast(pos[f, b, i, 2], ti.f64)])


@ti.kernel
def neighbour_sums(f: ti.i32, pos: nd(ndim=4), active: nd(ndim=2), table: nd(ndim=3), order: nd(ndim=2),
                   cells: nd(ndim=3), radius: ti.f64, count: nd(ndim=2), weight_sum: nd(ndim=2)):
    """For each active particle i: the number of active particles j (i included) with |x_j - x_i| <= radius, and
    the sum over them, in the grid's visiting order, of w = (1 - r^2 / radius^2)^3 (float64 geometry and sum)."""
    r2_max = radius * radius
    for b, i in ti.ndrange(pos.shape[1], pos.shape[2]):
        n_found = 0
        acc = ti.cast(0.0, ti.f64)
        if active[b, i] != 0:
            xi = _point(pos, f, b, i)
            c = grid_particle_cell(cells, b, i)
            for o in range(27):
                r = grid_cell_range(table, b, c, o)
                for k in range(r[0], r[1]):
                    d = _point(pos, f, b, order[b, k]) - xi
                    r2 = d[0] * d[0] + d[1] * d[1] + d[2] * d[2]
                    if r2 <= r2_max:
                        n_found += 1
                        q = 1.0 - r2 / r2_max
                        acc += q * q * q
        count[b, i] = n_found
        weight_sum[b, i] = ti.cast(acc, weight_sum.get_type().element_type)  # the grid's dtype


class NeighbourGrid:
    """The cell list of `n_envs` environments of `n_particles` particles each, for the search radius `radius` (m),
    positions of `dtype` (torch.float32 or torch.float64) on `device`. Owns `table`, `order`, `cells`, `occupied`
    and `stats` (torch int32 tensors, see the module doc), sized by n_envs and n_particles only. `build` fills
    them; solver kernels read them through grid_particle_cell / grid_cell_range; `neighbour_sums` is a ready-made
    query. `cell_size` is what a kernel passes to grid_cell for a point that is not a particle.

    `launcher`: the solver's `Launcher` (one of its own otherwise)."""

    def __init__(self, n_envs: int, n_particles: int, radius: float, dtype=torch.float64, device="cpu",
                 launcher: Launcher | None = None):
        for name, value in (("n_envs", n_envs), ("n_particles", n_particles)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise OptionError(f"NeighbourGrid({name}={value!r}) is not accepted: expected an int >= 1.")
        if n_particles > 2 ** 29:
            raise OptionError(f"NeighbourGrid(n_particles={n_particles}) is not accepted: expected at most 2^29 "
                              f"(the table's int32 indices).")
        try:
            radius = float(radius)
        except (TypeError, ValueError):
            radius = float("nan")
        if not (radius > 0 and radius < float("inf")):
            raise OptionError(f"NeighbourGrid(radius={radius!r}) is not accepted: expected a finite number > 0 (m).")
        if dtype not in (torch.float32, torch.float64):
            raise OptionError(f"NeighbourGrid(dtype={dtype!r}) is not accepted: expected torch.float32 or "
                              f"torch.float64.")
        self.n_envs, self.n_particles, self.radius, self.dtype = n_envs, n_particles, radius, dtype
        self.device = torch.device(device)
        self.cell_size = radius * (1.0 + CELL_MARGIN)
        self.n_slots = max(2, 1 << (2 * n_particles - 1).bit_length())  # the smallest power of two >= 2 N
        if n_envs * self.n_slots * TB_N >= 2 ** 31:
            raise OptionError(f"NeighbourGrid(n_envs={n_envs}, n_particles={n_particles}) is not accepted: its table "
                              f"would hold {n_envs * self.n_slots * TB_N} int32 values; Taichi 1.7 indexes an ndarray "
                              f"with 32-bit offsets, so at most 2^31 - 1 (fewer environments per grid).")
        opts = dict(dtype=torch.int32, device=self.device)
        self.table = torch.zeros((n_envs, self.n_slots, TB_N), **opts)
        self.order = torch.full((n_envs, n_particles), -1, **opts)
        self.cells = torch.zeros((n_envs, n_particles, PC_N), **opts)
        self.cells[:, :, PC_SLOT] = -1
        self.occupied = torch.zeros((n_envs, n_particles), **opts)
        self.stats = torch.zeros((n_envs, ST_N), **opts)
        self.launch = launcher if launcher is not None else Launcher()
        self._all_active = None
        self._framed = (None, None)  # (a [B, N, 3] tensor, its [1, B, N, 3] view): the launch sees the same view
        self._sums = None

    # -- arguments -------------------------------------------------------------------------------------------------

    def _frame(self, pos, f):
        """(pos as [F, B, N, 3], frame index) for pos [B, N, 3] (f None) or [F, B, N, 3] (f in [0, F))."""
        B, N = self.n_envs, self.n_particles
        if not isinstance(pos, torch.Tensor):
            raise OptionError(f"NeighbourGrid: pos must be a torch tensor [B, N, 3] or [F, B, N, 3], got "
                              f"{type(pos).__name__}.")
        if pos.dtype != self.dtype or pos.device != self.device:
            raise OptionError(f"NeighbourGrid: pos has dtype {pos.dtype} on {pos.device}; this grid was made for "
                              f"{self.dtype} on {self.device}.")
        if not pos.is_contiguous() or pos.numel() >= 2 ** 31:
            raise OptionError(f"NeighbourGrid: pos must be contiguous and hold fewer than 2^31 values (Taichi's "
                              f"32-bit ndarray offsets); got {tuple(pos.shape)}, contiguous={pos.is_contiguous()}.")
        if pos.dim() == 3 and tuple(pos.shape) == (B, N, 3) and f is None:
            src, view = self._framed
            if src is not pos:
                view = pos.unsqueeze(0)
                self._framed = (pos, view)
            return view, 0
        if pos.dim() == 4 and tuple(pos.shape[1:]) == (B, N, 3) and f is not None:
            if not isinstance(f, int) or not 0 <= f < pos.shape[0]:
                raise OptionError(f"NeighbourGrid: frame f={f!r} is not accepted: expected an int in "
                                  f"[0, {pos.shape[0]}).")
            return pos, f
        raise OptionError(f"NeighbourGrid: pos of shape {tuple(pos.shape)} with f={f!r} is not accepted: expected "
                          f"[{B}, {N}, 3] without f, or [F, {B}, {N}, 3] with a frame f.")

    def _active(self, active):
        if active is None:
            if self._all_active is None:
                self._all_active = torch.ones((self.n_envs, self.n_particles), dtype=torch.int32, device=self.device)
            return self._all_active
        if (not isinstance(active, torch.Tensor) or active.dtype != torch.int32 or active.device != self.device
                or tuple(active.shape) != (self.n_envs, self.n_particles) or not active.is_contiguous()):
            desc = (f"{active.dtype} {tuple(active.shape)} on {active.device}" if isinstance(active, torch.Tensor)
                    else type(active).__name__)
            raise OptionError(f"NeighbourGrid: active ({desc}) is not accepted: expected a contiguous torch.int32 "
                              f"tensor [{self.n_envs}, {self.n_particles}] on {self.device}, or None (all active).")
        return active

    # -- kernels ---------------------------------------------------------------------------------------------------

    def build(self, pos, active=None, f=None):
        """Sorts the active particles into cells. pos: [B, N, 3], or [F, B, N, 3] with a frame index f (the
        solver's `state.pos`); active: int32 [B, N] (0: left out), None: all particles."""
        pos4, f = self._frame(pos, f)
        self.launch(grid_build, f, pos4, self._active(active), self.cell_size, self.table, self.order, self.cells,
                    self.occupied, self.stats)

    def neighbour_sums(self, pos, active=None, f=None):
        """(count int32 [B, N], weight_sum [B, N] of the grid's dtype) over the neighbours within radius of each
        active particle (itself included), w = (1 - r^2 / radius^2)^3 summed in the visiting order (the module
        doc); 0 for inactive particles. The grid must have been built on the same positions and mask. The two
        tensors are the grid's own, overwritten by the next call."""
        pos4, f = self._frame(pos, f)
        if self._sums is None:
            self._sums = (torch.zeros((self.n_envs, self.n_particles), dtype=torch.int32, device=self.device),
                          torch.zeros((self.n_envs, self.n_particles), dtype=self.dtype, device=self.device))
        count, weight_sum = self._sums
        self.launch(neighbour_sums, f, pos4, self._active(active), self.table, self.order, self.cells, self.radius,
                    count, weight_sum)
        return count, weight_sum

    # -- inspection ------------------------------------------------------------------------------------------------

    def buffers(self) -> dict:
        """The tensors the grid owns, by name (their sizes depend on n_envs and n_particles only)."""
        return {"table": self.table, "order": self.order, "cells": self.cells, "occupied": self.occupied,
                "stats": self.stats}

    @property
    def nbytes(self) -> int:
        return sum(t.element_size() * t.nelement() for t in self.buffers().values())

    @property
    def n_active(self) -> torch.Tensor:
        """Active particles of each environment at the last build, int32 [B]."""
        return self.stats[:, ST_ACTIVE]

    @property
    def n_cells(self) -> torch.Tensor:
        """Occupied cells of each environment at the last build, int32 [B]."""
        return self.stats[:, ST_CELLS]

    @property
    def longest_probe(self) -> torch.Tensor:
        """Slots looked at by the longest insertion of the last build (1: no collision), int32 [B]."""
        return self.stats[:, ST_LONGEST_PROBE]
