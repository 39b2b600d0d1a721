"""Particle to grid (MLS-MPM, Hu et al. 2018, with APIC momentum): update F and the plastic state, then scatter
mass and momentum + (stress + APIC) affine terms with quadratic B-spline weights.

Each environment's particles are split into `K` contiguous partitions; one thread scatters a partition, in index
order, into its own copy of the grid (no atomics): the grid stage sums the copies in a fixed order, so the result
is bitwise repeatable however the threads are scheduled.
"""

import sys

import taichi as ti

from genesis_core.particles.reduce import TASK_STRIDE  # a few (environment, partition) tasks spread over threads

from .kernels_material import particle_update
from .layout import PF_DT, PF_DX, PF_INV_DX, PF_ORIGIN

HIGH_WORD = 1 if sys.byteorder == "little" else 0  # of a float64 seen as two int32

V3 = ti.types.vector(3, float)
V4 = ti.types.vector(4, float)
M3 = ti.types.matrix(3, 3, float)
nd = ti.types.ndarray


@ti.func
def bspline_weights(fx):
    """Quadratic B-spline weights of the 3 nodes from base, fx = x / dx - base in [0.5, 1.5)."""
    return [0.5 * (1.5 - fx) ** 2, 0.75 - (fx - 1.0) ** 2, 0.5 * (fx - 0.5) ** 2]


@ti.func
def grid_base(xl, size):
    """The lowest node of the 3x3x3 stencil of a particle at xl (cells from the lower bound) in a grid of `size`
    nodes per axis, clamped so that the stencil lies inside the grid whatever xl is (NaN and +-1e30 included):
    an index computed from a position never leaves the grid. In the domain (g2p keeps particles in
    [1, size - 2) cells) the clamp never acts."""
    xc = ti.min(ti.max(xl - 0.5, 0.0), ti.cast(size - 3, float))
    return ti.min(ti.max(ti.cast(xc, ti.i32), 0), size - 3)


@ti.func
def out_of_range(pos_bits: ti.template(), f, b, p):
    """Whether particle p's position has a coordinate of magnitude 2^64 or more, infinite or NaN, read from its bits
    (pos_bits: pos viewed as int32, [frames, B, n, 3 or 6] for float32 or float64): fast math lets the compiler
    assume that floating point is never NaN or infinite, so no floating-point test is reliable here."""
    out = False
    words = pos_bits.shape[3] // 3
    for c in ti.static(range(3)):
        if words == 1:
            out = out or (pos_bits[f, b, p, c] & 0x7F800000) >= (127 + 64) << 23
        else:  # the exponent is in the high word
            w = pos_bits[f, b, p, 2 * c + HIGH_WORD]
            out = out or (w & 0x7FF00000) >= (1023 + 64) << 20
    return out


@ti.kernel
def p2g(f: ti.i32, fn: ti.i32, params_f: nd(ndim=1), pos: nd(dtype=V3, ndim=3), vel: nd(dtype=V3, ndim=3),
        C: nd(dtype=M3, ndim=3), F: nd(dtype=M3, ndim=3), Jp: nd(ndim=3), active: nd(ndim=2), p_mass: nd(ndim=1),
        p_vol: nd(ndim=1), p_kind: nd(ndim=1), p_entity: nd(ndim=1), p_params: nd(ndim=2), E: nd(ndim=2),
        nu: nd(ndim=2), actu: nd(ndim=2), mdir: nd(dtype=V3, ndim=2), grid_mv: nd(dtype=V4, ndim=5),
        touched: nd(dtype=ti.i32, ndim=3), pos_bits: nd(dtype=ti.i32, ndim=4)):
    """Reads frame f of the particles, writes F and Jp of frame fn and the partitioned grid momentum/mass.
    E and nu are [B, n_entities]; p_entity maps a particle to its entity; actu [B, n] and mdir [B, n, 3] are the
    muscles' actuation and fibre direction. touched [K, B, 6] receives the box of
    nodes each copy was scattered to (lowest node, one past the highest, per axis; empty: lowest > highest), from
    which the grid update bounds its work; pos_bits is pos viewed as int32 (out_of_range)."""
    dt = params_f[PF_DT]
    dx = params_f[PF_DX]
    inv_dx = params_f[PF_INV_DX]
    lower = ti.Vector([params_f[PF_ORIGIN], params_f[PF_ORIGIN + 1], params_f[PF_ORIGIN + 2]])
    n_part = grid_mv.shape[0]
    n = pos.shape[2]
    size = ti.Vector([grid_mv.shape[2], grid_mv.shape[3], grid_mv.shape[4]])
    for t in range(pos.shape[1] * n_part * TASK_STRIDE):
        if t % TASK_STRIDE != 0:
            continue
        b = t // (n_part * TASK_STRIDE)
        k = t // TASK_STRIDE % n_part
        # the box of the stencils this copy receives, in a pass of its own: tracking it inside the scatter changed
        # how the compiler (fast math) arranged the scatter's floating point, and so its rounding. One node of
        # margin on each side covers a base rounded differently here; a position that is not finite, or so large
        # that its arithmetic could overflow (its base could then be any node), widens the box to the whole grid.
        lo = size
        hi = ti.Vector([0, 0, 0])
        for p in range(k * n // n_part, (k + 1) * n // n_part):
            if active[b, p] != 0:
                base = grid_base((pos[f, b, p] - lower) * inv_dx, size)
                lo = ti.min(lo, base - 1)
                hi = ti.max(hi, base + 4)
                if out_of_range(pos_bits, f, b, p):
                    lo = ti.Vector([0, 0, 0])
                    hi = size
        lo = ti.max(lo, 0)
        hi = ti.min(hi, size)
        for p in range(k * n // n_part, (k + 1) * n // n_part):
            if active[b, p] == 0:
                F[fn, b, p] = F[f, b, p]
                Jp[fn, b, p] = Jp[f, b, p]
                continue
            Cp, tau = particle_update(f, fn, b, p, dt, C, F, Jp, p_kind, p_entity, p_params, E, nu, actu,
                                       mdir)
            m = p_mass[p]
            xl = (pos[f, b, p] - lower) * inv_dx
            base = grid_base(xl, size)
            fx = xl - base
            w = bspline_weights(fx)
            affine = -dt * p_vol[p] * 4.0 * inv_dx * inv_dx * tau + m * Cp
            mv = m * vel[f, b, p]
            for i, j, l in ti.static(ti.ndrange(3, 3, 3)):
                offset = ti.Vector([i, j, l])
                dpos = (offset - fx) * dx
                weight = w[i][0] * w[j][1] * w[l][2]
                node = base + offset
                mom = weight * (mv + affine @ dpos)
                # a plain read-modify-write: this thread owns grid copy k, so no atomic is needed
                grid_mv[k, b, node[0], node[1], node[2]] = grid_mv[k, b, node[0], node[1], node[2]] + \
                    ti.Vector([mom[0], mom[1], mom[2], weight * m])
        for d in ti.static(range(3)):
            touched[k, b, d] = lo[d]
            touched[k, b, 3 + d] = hi[d]
