"""The PBD kernels: XPBD (Macklin, Mueller & Chentanez 2016) with small steps (Macklin et al. 2019).

A PBD step (frame f -> fn; a substep is one or several, `PBDOptions.small_step_dt`), all in place on frame fn:

1. `predict`: free particles take gravity and the cloth's air drag into their velocity and move with it;
   fixed particles (free = 0) move with their own velocity (zero after `fix_particles`); `w` gets each
   particle's inverse mass in the solve (0 for fixed and inactive ones; an attached particle is solved as a free
   one, then put back on its link by `attach`, which hands the link the momentum).
2. `solve_topology`: Gauss-Seidel sweeps over the stretch (edge length), bending (dihedral angle) and volume
   (tetrahedron) constraints, each accumulating its Lagrange multiplier lambda over the substep's sweeps:
   d_lambda = (-C - alpha~ lambda) / (sum w |grad C|^2 + alpha~), alpha~ = compliance / dt^2, dx = w grad C
   d_lambda. Groups of constraints on disjoint particles are swept in parallel (see topology.py), each in a
   fixed order: bitwise repeatable.
3. `density_iteration` (position-based fluids, Macklin & Mueller 2013): lambda_i per liquid particle, then each
   particle's correction from its neighbours' (Jacobi, as published), in the neighbour search's fixed order.
4. `collide`: particles closer than the sum of their radii push apart (shared by inverse mass, divided by the larger
   contact count of the pair, so momentum is kept), with Coulomb friction on the relative displacement (Macklin et al. 2014, eqs. 23-24); pairs of one
   entity that were that close at rest, liquid pairs and free particles (PBD.Particle) are left out.
5. `finish`: v = (x_fn - x_f) / dt; then `viscosity` (XSPH) for liquids.

Arrays: pos, vel [frames, B, N] of 3-vectors; per-environment scratch [B, N]; constraints' particles as int32
rows; compliances per entity [B, n_entities] (declared state).
"""

import math

import taichi as ti

from genesis_core.particles.collider import add_body_impulse, body_point_offset, n_bodies_of
from genesis_core.particles.neighbours import grid_cell_range, grid_cell_reaches, grid_particle_cell
from genesis_core.particles.reduce import TASK_STRIDE

V3 = ti.types.vector(3, float)
nd = ti.types.ndarray

# SERIAL: read as True by the serial copies of the per-particle kernels (`serial`), which a small scene takes: a
# parallel loop costs 50-70 us a launch on a 2-core CPU (the thread pool's wake-up), more than its work there
SERIAL = False

# params (a float array)
P_DT, P_GX, P_GY, P_GZ, P_SIZE, P_H, P_G0, P_LO, P_HI = 0, 1, 2, 3, 4, 5, 6, 7, 10
P_N = 13
# per-particle material columns (p_mat [N, 5]): friction static, kinetic, air resistance, density relaxation,
# viscosity relaxation
M_MUS, M_MUK, M_AIR, M_DRELAX, M_VRELAX = range(5)
LIQUID = 3
PARTICLE = 0
EPS = 1e-12


@ti.func
def spline(r, h):
    """The cubic spline kernel of support h (3D)."""
    q = r / h
    s = 8.0 / (math.pi * h * h * h)
    w = 0.0
    if q <= 0.5:
        w = s * (6.0 * (q * q * q - q * q) + 1.0)
    elif q <= 1.0:
        w = s * 2.0 * (1.0 - q) ** 3
    return w


@ti.func
def spline_grad(d, r, h):
    """grad W at offset d (|d| = r > 0)."""
    q = r / h
    s = 48.0 / (math.pi * h * h * h * h)
    g = 0.0
    if q <= 0.5:
        g = s * q * (3.0 * q - 2.0)
    elif q <= 1.0:
        g = -s * (1.0 - q) ** 2
    out = ti.Vector([0.0, 0.0, 0.0])
    if r > EPS:
        out = (g / r) * d
    return out


# -- 1. prediction -------------------------------------------------------------------------------------------------


@ti.kernel
def predict(f: ti.i32, fo: ti.i32, prm: nd(ndim=1), pos: nd(dtype=V3, ndim=3), vel: nd(dtype=V3, ndim=3),
            active: nd(ndim=2), free: nd(ndim=2), p_invm: nd(ndim=1), p_mat: nd(ndim=2), ext_dv: nd(dtype=V3, ndim=2),
            xout: nd(dtype=V3, ndim=3), w: nd(ndim=2)):
    """xout[fo] [B, N]: the predicted positions (plain mode: xout = pos, fo = f + 1; differentiable mode: a
    scratch array [1, B, N], fo = 0). The velocities follow from the positions at the end of the substep
    (`finish`)."""
    ti.loop_config(serialize=SERIAL)
    for b, i in ti.ndrange(pos.shape[1], pos.shape[2]):  # (no statement outside the loop: Taichi's reverse)
        dt = prm[P_DT]
        g = ti.Vector([prm[P_GX], prm[P_GY], prm[P_GZ]])
        x = pos[f, b, i]
        v = vel[f, b, i]
        wi = 0.0
        if active[b, i] != 0:
            if free[b, i] != 0:
                v = v + dt * g + ext_dv[b, i]
                air = p_mat[i, M_AIR]
                if air > 0:  # -air |v| v, implicit in |v|: stable at any step (|v| smoothed at 0: differentiable)
                    v = v / (1.0 + dt * air * p_invm[i] * ti.sqrt(v.norm_sqr() + EPS * EPS))
                wi = p_invm[i]
            x = x + dt * v
        xout[fo, b, i] = x
        w[b, i] = wi


# -- 2. constraints on the topology ----------------------------------------------------------------------------------


# The sweeps read and write flat views of the arrays (positions [F * B * N * 3], multipliers [B * C], constraint
# particles [C * 2] or [C * 4]). Every update of global memory is written as a load and a store: Taichi compiles
# `a[i] += x` to an atomic add, which made a stretch projection three times slower on the CPU (measured: 47 ns
# against 17 ns).


@ti.func
def _p(pos: ti.template(), base, i):
    return ti.Vector([pos[base + 3 * i], pos[base + 3 * i + 1], pos[base + 3 * i + 2]])


@ti.func
def _set(pos: ti.template(), base, i, x):
    for a in ti.static(range(3)):
        pos[base + 3 * i + a] = x[a]


@ti.func
def stretch_step(xi, xj, wi, wj, rest, at, relax, lam):
    """One XPBD projection of the distance constraint C = |xi - xj| - rest: (xi', xj', d_lambda)."""
    d = xi - xj
    r = ti.sqrt(d.norm_sqr() + EPS * EPS)
    n = d / r
    dl = relax * (-(r - rest) - at * lam) / ti.max(wi + wj + at, EPS)
    return xi + (wi * dl) * n, xj - (wj * dl) * n, dl


@ti.func
def bend_step(p0, p1, p2, p3, w0, w1, w2, w3, rest, at, relax, lam):
    """One XPBD projection of the dihedral constraint C = theta - rest across edge (p0, p1), triangles (p0, p1, p2)
    and (p1, p0, p3): (p0', p1', p2', p3', d_lambda); nothing moves where a triangle is degenerate."""
    e = p1 - p0
    na = e.cross(p2 - p0)
    nb = (p3 - p0).cross(e)
    la2, lb2, le2 = na.norm_sqr(), nb.norm_sqr(), e.norm_sqr()
    dl = 0.0
    g0 = ti.Vector([0.0, 0.0, 0.0])
    g1, g2, g3 = g0, g0, g0
    if la2 > EPS * le2 and lb2 > EPS * le2 and le2 > EPS:
        le = ti.sqrt(le2)
        ha, hb = na / ti.sqrt(la2), nb / ti.sqrt(lb2)
        theta = ti.atan2(ha.cross(hb).dot(e) / le, ha.dot(hb))
        C = theta - rest
        if C > math.pi:
            C -= 2.0 * math.pi
        elif C < -math.pi:
            C += 2.0 * math.pi
        g2 = -le / la2 * na
        g3 = -le / lb2 * nb
        t2 = (p2 - p0).dot(e) / le2
        t3 = (p3 - p0).dot(e) / le2
        g0 = -(1.0 - t2) * g2 - (1.0 - t3) * g3
        g1 = -t2 * g2 - t3 * g3
        den = w0 * g0.norm_sqr() + w1 * g1.norm_sqr() + w2 * g2.norm_sqr() + w3 * g3.norm_sqr()
        if den + at > EPS:
            dl = relax * (-C - at * lam) / (den + at)
    return p0 + (w0 * dl) * g0, p1 + (w1 * dl) * g1, p2 + (w2 * dl) * g2, p3 + (w3 * dl) * g3, dl


@ti.func
def volume_step(p0, p1, p2, p3, w0, w1, w2, w3, rest, at, relax, lam):
    """One XPBD projection of the volume constraint C = V - rest of the tet (p0, p1, p2, p3)."""
    a, bb, cc = p1 - p0, p2 - p0, p3 - p0
    C = a.cross(bb).dot(cc) / 6.0 - rest
    g1 = bb.cross(cc) / 6.0
    g2 = cc.cross(a) / 6.0
    g3 = a.cross(bb) / 6.0
    g0 = -(g1 + g2 + g3)
    den = w0 * g0.norm_sqr() + w1 * g1.norm_sqr() + w2 * g2.norm_sqr() + w3 * g3.norm_sqr()
    dl = 0.0
    if den + at > EPS:
        dl = relax * (-C - at * lam) / (den + at)
    return p0 + (w0 * dl) * g0, p1 + (w1 * dl) * g1, p2 + (w2 * dl) * g2, p3 + (w3 * dl) * g3, dl


@ti.func
def _stretch(pb, wb, lb, c, pos: ti.template(), w: ti.template(), ij: ti.template(), rest: ti.template(),
             at, relax, lam: ti.template()):
    i, j = ij[2 * c], ij[2 * c + 1]
    wi, wj = w[wb + i], w[wb + j]
    if wi + wj > 0:
        lc = lam[lb + c]
        xi, xj, dl = stretch_step(_p(pos, pb, i), _p(pos, pb, j), wi, wj, rest[c], at, relax, lc)
        lam[lb + c] = lc + dl
        _set(pos, pb, i, xi)
        _set(pos, pb, j, xj)


@ti.func
def _four(pb, wb, lb, c, kind: ti.template(), pos: ti.template(), w: ti.template(), idx: ti.template(),
          rest: ti.template(), at, relax, lam: ti.template()):
    """A bending (kind 1) or volume (kind 2) projection in place."""
    i0, i1, i2, i3 = idx[4 * c], idx[4 * c + 1], idx[4 * c + 2], idx[4 * c + 3]
    w0, w1, w2, w3 = w[wb + i0], w[wb + i1], w[wb + i2], w[wb + i3]
    if w0 + w1 + w2 + w3 > 0:
        lc = lam[lb + c]
        p0, p1, p2, p3 = _p(pos, pb, i0), _p(pos, pb, i1), _p(pos, pb, i2), _p(pos, pb, i3)
        q0, q1, q2, q3, dl = p0, p1, p2, p3, 0.0
        if ti.static(kind == 1):
            q0, q1, q2, q3, dl = bend_step(p0, p1, p2, p3, w0, w1, w2, w3, rest[c], at, relax, lc)
        else:
            q0, q1, q2, q3, dl = volume_step(p0, p1, p2, p3, w0, w1, w2, w3, rest[c], at, relax, lc)
        lam[lb + c] = lc + dl
        _set(pos, pb, i0, q0)
        _set(pos, pb, i1, q1)
        _set(pos, pb, i2, q2)
        _set(pos, pb, i3, q3)


@ti.func
def _sweep_group(pb, wb, b, k, its: ti.template(), pos: ti.template(), w: ti.template(), s_ij: ti.template(),
                 s_rest: ti.template(), s_ent: ti.template(), s_relax: ti.template(), s_off: ti.template(),
                 s_comp: ti.template(), s_lam: ti.template(), q_idx: ti.template(), q_rest: ti.template(),
                 q_ent: ti.template(), q_relax: ti.template(), q_off: ti.template(), q_comp: ti.template(),
                 q_lam: ti.template(), t_idx: ti.template(), t_rest: ti.template(), t_ent: ti.template(),
                 t_relax: ti.template(), t_off: ti.template(), t_comp: ti.template(), t_lam: ti.template(),
                 inv_dt2):
    """Group k's sweeps in environment b (positions from pb, inverse masses from wb in the flat arrays):
    stretch, then bending, then volume, each its own count of sweeps, alternating direction (symmetric
    Gauss-Seidel: a correction travels the whole group both ways)."""
    s0, s1, q0, q1, t0, t1 = s_off[k], s_off[k + 1], q_off[k], q_off[k + 1], t_off[k], t_off[k + 1]
    sl, ql, tl = b * s_rest.shape[0], b * q_rest.shape[0], b * t_rest.shape[0]
    for c in range(s0, s1):
        s_lam[sl + c] = 0.0
    for c in range(q0, q1):
        q_lam[ql + c] = 0.0
    for c in range(t0, t1):
        t_lam[tl + c] = 0.0
    for it in range(its[0]):
        for m in range(s1 - s0):
            c = s0 + m if it % 2 == 0 else s1 - 1 - m
            _stretch(pb, wb, sl, c, pos, w, s_ij, s_rest, s_comp[b, s_ent[c]] * inv_dt2, s_relax[c], s_lam)
    for it in range(its[1]):
        for m in range(q1 - q0):
            c = q0 + m if it % 2 == 0 else q1 - 1 - m
            _four(pb, wb, ql, c, 1, pos, w, q_idx, q_rest, q_comp[b, q_ent[c]] * inv_dt2, q_relax[c], q_lam)
    for it in range(its[2]):
        for m in range(t1 - t0):
            c = t0 + m if it % 2 == 0 else t1 - 1 - m
            _four(pb, wb, tl, c, 2, pos, w, t_idx, t_rest, t_comp[b, t_ent[c]] * inv_dt2, t_relax[c], t_lam)


@ti.kernel
def solve_topology(fn: ti.i32, n_groups: ti.i32, n_envs: ti.i32, prm: nd(ndim=1), its: nd(ndim=1),
                   pos: nd(ndim=1), w: nd(ndim=1),
                   s_ij: nd(ndim=1), s_rest: nd(ndim=1), s_ent: nd(ndim=1), s_relax: nd(ndim=1), s_off: nd(ndim=1),
                   s_comp: nd(ndim=2), s_lam: nd(ndim=1),
                   q_idx: nd(ndim=1), q_rest: nd(ndim=1), q_ent: nd(ndim=1), q_relax: nd(ndim=1), q_off: nd(ndim=1),
                   q_comp: nd(ndim=2), q_lam: nd(ndim=1),
                   t_idx: nd(ndim=1), t_rest: nd(ndim=1), t_ent: nd(ndim=1), t_relax: nd(ndim=1), t_off: nd(ndim=1),
                   t_comp: nd(ndim=2), t_lam: nd(ndim=1)):
    """its: (stretch, bending, volume) sweeps; pos: the flat [F, B, N, 3] positions, w [B, N], the multipliers
    [B, C] and the constraints' particles flat. The K = n_groups slab groups of every environment in parallel,
    then each environment's straddling group (index K)."""
    inv_dt2 = 1.0 / (prm[P_DT] * prm[P_DT])
    n = w.shape[0] // n_envs
    for t in range(n_envs * n_groups * TASK_STRIDE):
        if t % TASK_STRIDE == 0:
            b, k = t // (n_groups * TASK_STRIDE), t // TASK_STRIDE % n_groups
            _sweep_group(3 * (fn * n_envs + b) * n, b * n, b, k, its, pos, w, s_ij, s_rest, s_ent, s_relax, s_off,
                         s_comp, s_lam, q_idx, q_rest, q_ent, q_relax, q_off, q_comp, q_lam, t_idx, t_rest, t_ent,
                         t_relax, t_off, t_comp, t_lam, inv_dt2)
    for t in range(n_envs * TASK_STRIDE):
        if t % TASK_STRIDE == 0:
            b = t // TASK_STRIDE
            _sweep_group(3 * (fn * n_envs + b) * n, b * n, b, n_groups, its, pos, w, s_ij, s_rest, s_ent, s_relax,
                         s_off, s_comp, s_lam, q_idx, q_rest, q_ent, q_relax, q_off, q_comp, q_lam, t_idx, t_rest,
                         t_ent, t_relax, t_off, t_comp, t_lam, inv_dt2)


# -- 2b. the same sweeps, differentiable ----------------------------------------------------------------------------
# In differentiable mode the sweeps run as a schedule of projections fixed at build (the plain mode's order: the
# slab groups one after the other, then the straddling one): projection p reads its particles' positions from the
# slots of the projections that last moved them (or from the prediction) and writes its results into its own
# slots, written once. Taichi's reverse of that kernel is then exact (every value is read after its only write),
# and it runs the same projection functions as plain mode, in the same order: the same numbers.

KIND_STRETCH, KIND_BEND, KIND_VOLUME = 0, 1, 2


@ti.func
def _slot_or(X: ti.template(), xp: ti.template(), b, src, i):
    """The position a projection reads: slot src = 4 p + k of projection p's k-th particle, or (src < 0) particle
    i's predicted position (xp [1, B, N])."""
    x = xp[0, b, i]
    if src >= 0:
        x = X[b, src // 4, src % 4]
    return x


@ti.kernel
def sweep_schedule(prm: nd(ndim=1), xp: nd(dtype=V3, ndim=3), w: nd(ndim=2), sched: nd(ndim=2),
                   s_ij: nd(ndim=1), s_rest: nd(ndim=1), s_ent: nd(ndim=1), s_relax: nd(ndim=1), s_comp: nd(ndim=2),
                   q_idx: nd(ndim=1), q_rest: nd(ndim=1), q_ent: nd(ndim=1), q_relax: nd(ndim=1), q_comp: nd(ndim=2),
                   t_idx: nd(ndim=1), t_rest: nd(ndim=1), t_ent: nd(ndim=1), t_relax: nd(ndim=1), t_comp: nd(ndim=2),
                   X: nd(dtype=V3, ndim=3), L: nd(ndim=2)):
    """sched [P, 7]: per projection (kind, constraint, lambda source slot or -1, 4 position sources); X [B, P, 4]
    and L [B, P]: each projection's particles and multiplier after it. One thread per environment."""
    for b in range(xp.shape[1]):
        inv_dt2 = 1.0 / (prm[P_DT] * prm[P_DT])
        for p in range(sched.shape[0]):
            kind, c, ls = sched[p, 0], sched[p, 1], sched[p, 2]
            lam = 0.0
            if ls >= 0:
                lam = L[b, ls]
            if kind == KIND_STRETCH:
                i, j = s_ij[2 * c], s_ij[2 * c + 1]
                xi, xj = _slot_or(X, xp, b, sched[p, 3], i), _slot_or(X, xp, b, sched[p, 4], j)
                wi, wj = w[b, i], w[b, j]
                dl = 0.0
                if wi + wj > 0:
                    xi, xj, dl = stretch_step(xi, xj, wi, wj, s_rest[c], s_comp[b, s_ent[c]] * inv_dt2, s_relax[c],
                                              lam)
                X[b, p, 0] = xi
                X[b, p, 1] = xj
                L[b, p] = lam + dl
            else:
                i0, i1, i2, i3 = q_idx[4 * c], q_idx[4 * c + 1], q_idx[4 * c + 2], q_idx[4 * c + 3]
                if kind == KIND_VOLUME:
                    i0, i1, i2, i3 = t_idx[4 * c], t_idx[4 * c + 1], t_idx[4 * c + 2], t_idx[4 * c + 3]
                p0, p1 = _slot_or(X, xp, b, sched[p, 3], i0), _slot_or(X, xp, b, sched[p, 4], i1)
                p2, p3 = _slot_or(X, xp, b, sched[p, 5], i2), _slot_or(X, xp, b, sched[p, 6], i3)
                w0, w1, w2, w3 = w[b, i0], w[b, i1], w[b, i2], w[b, i3]
                dl = 0.0
                if w0 + w1 + w2 + w3 > 0:
                    if kind == KIND_BEND:
                        p0, p1, p2, p3, dl = bend_step(p0, p1, p2, p3, w0, w1, w2, w3, q_rest[c],
                                                       q_comp[b, q_ent[c]] * inv_dt2, q_relax[c], lam)
                    else:
                        p0, p1, p2, p3, dl = volume_step(p0, p1, p2, p3, w0, w1, w2, w3, t_rest[c],
                                                         t_comp[b, t_ent[c]] * inv_dt2, t_relax[c], lam)
                X[b, p, 0] = p0
                X[b, p, 1] = p1
                X[b, p, 2] = p2
                X[b, p, 3] = p3
                L[b, p] = lam + dl


@ti.kernel
def gather_schedule(fn: ti.i32, xp: nd(dtype=V3, ndim=3), last: nd(ndim=1), X: nd(dtype=V3, ndim=3),
                    pos: nd(dtype=V3, ndim=3)):
    """Frame fn's positions: each particle's last slot (last [N], 4 p + k, or -1: never moved by a constraint)."""
    for b, i in ti.ndrange(xp.shape[1], xp.shape[2]):
        pos[fn, b, i] = _slot_or(X, xp, b, last[i], i)


# -- 3. position-based fluids ------------------------------------------------------------------------------------


@ti.func
def _wall(prm: ti.template(), k):
    """(axis, coordinate) of the domain's wall k in [0, 6): the lower then the upper face of x, y, z."""
    a = k // 2
    return a, prm[P_LO + a] if k % 2 == 0 else prm[P_HI + a]


@ti.func
def _image(prm: ti.template(), k, xi, xj, h):
    """(xi - g, |xi - g|) for g the mirror image of xj across the domain's wall k, or (0, h) when xi is not within
    h of that wall."""
    a, at = _wall(prm, k)
    dg = ti.Vector([0.0, 0.0, 0.0])
    dgl = h
    if ti.abs(xi[a] - at) < h:
        g = xj
        g[a] = 2.0 * at - xj[a]
        dg = xi - g
        dgl = dg.norm()
    return dg, dgl


@ti.kernel
def density_iteration(fn: ti.i32, prm: nd(ndim=1), cell_size: ti.f64, pos: nd(dtype=V3, ndim=3), active: nd(ndim=2),
                      w: nd(ndim=2), p_kind: nd(ndim=1), p_mass: nd(ndim=1), p_rho: nd(ndim=1), p_mat: nd(ndim=2),
                      table: nd(ndim=3), order: nd(ndim=2), cells: nd(ndim=3), lam: nd(ndim=2), rho: nd(ndim=2),
                      dx: nd(dtype=V3, ndim=2)):
    """One Jacobi iteration of the density constraints C_i = rho_i / rho0_i - 1 <= 0 (a liquid does not pull).
    The domain's walls count as the liquid's mirror image: each neighbour j within reach of a wall near i adds
    its reflection across that wall (with j's multiplier), so a liquid at a wall has its full density there and
    is pushed off it as off more liquid."""
    h = prm[P_H]
    g0 = prm[P_G0]
    for b, i in ti.ndrange(pos.shape[1], pos.shape[2]):
        li = 0.0
        dens = 0.0
        if active[b, i] != 0 and p_kind[i] == LIQUID:
            xi = pos[fn, b, i]
            grad_i = ti.Vector([0.0, 0.0, 0.0])
            sum_g2 = 0.0
            c = grid_particle_cell(cells, b, i)
            for o in range(27):
                r = ti.Vector([0, 0], ti.i32)
                if grid_cell_reaches(xi, c, o, h, cell_size):
                    r = grid_cell_range(table, b, c, o)
                for kk in range(r[0], r[1]):
                    j = order[b, kk]
                    if p_kind[j] == LIQUID:
                        xj = pos[fn, b, j]
                        d = xi - xj
                        dist = d.norm()
                        if dist < h:
                            dens += p_mass[j] * spline(dist, h)
                            if j != i:
                                gj = (p_mass[j] / p_rho[i]) * spline_grad(d, dist, h)
                                grad_i += gj
                                sum_g2 += gj.norm_sqr()
                            for k in ti.static(range(6)):
                                dg, dgl = _image(prm, k, xi, xj, h)
                                if dgl < h:
                                    dens += p_mass[j] * spline(dgl, h)
                                    grad_i += (p_mass[j] / p_rho[i]) * spline_grad(dg, dgl, h)
            C = dens / p_rho[i] - 1.0
            if C > 0:
                li = -C / (sum_g2 + grad_i.norm_sqr() + p_mat[i, M_DRELAX] * g0)
        lam[b, i] = li
        rho[b, i] = dens
    for b, i in ti.ndrange(pos.shape[1], pos.shape[2]):
        corr = ti.Vector([0.0, 0.0, 0.0])
        if active[b, i] != 0 and p_kind[i] == LIQUID and w[b, i] > 0:
            xi = pos[fn, b, i]
            c = grid_particle_cell(cells, b, i)
            for o in range(27):
                r = ti.Vector([0, 0], ti.i32)
                if grid_cell_reaches(xi, c, o, h, cell_size):
                    r = grid_cell_range(table, b, c, o)
                for kk in range(r[0], r[1]):
                    j = order[b, kk]
                    if p_kind[j] == LIQUID:
                        xj = pos[fn, b, j]
                        d = xi - xj
                        dist = d.norm()
                        s = p_mass[j] / p_rho[i] * (lam[b, i] + lam[b, j])
                        if j != i and dist < h:
                            corr += s * spline_grad(d, dist, h)
                        if dist < h:
                            for k in ti.static(range(6)):
                                dg, dgl = _image(prm, k, xi, xj, h)
                                if dgl < h:
                                    corr += s * spline_grad(dg, dgl, h)
            # at most half a particle a iteration: a particle pressed onto a wall meets its own image there, where
            # the kernel's slope vanishes, and its multiplier is bounded by the mixing alone
            cl = corr.norm()
            if cl > 0.5 * prm[P_SIZE]:
                corr *= 0.5 * prm[P_SIZE] / cl
        dx[b, i] = corr
    for b, i in ti.ndrange(pos.shape[1], pos.shape[2]):
        if active[b, i] != 0 and p_kind[i] == LIQUID and w[b, i] > 0:
            pos[fn, b, i] = pos[fn, b, i] + dx[b, i]


@ti.kernel
def viscosity(fn: ti.i32, prm: nd(ndim=1), cell_size: ti.f64, pos: nd(dtype=V3, ndim=3), vel: nd(dtype=V3, ndim=3),
              active: nd(ndim=2), w: nd(ndim=2), p_kind: nd(ndim=1), p_mass: nd(ndim=1), p_rho: nd(ndim=1),
              p_mat: nd(ndim=2), table: nd(ndim=3), order: nd(ndim=2), cells: nd(ndim=3), dv: nd(dtype=V3, ndim=2)):
    """One XSPH pass: v_i += c sum_j (m_j / rho0_j) (v_j - v_i) W_ij (pair terms symmetric: momentum kept)."""
    h = prm[P_H]
    for b, i in ti.ndrange(pos.shape[1], pos.shape[2]):
        acc = ti.Vector([0.0, 0.0, 0.0])
        if active[b, i] != 0 and p_kind[i] == LIQUID and w[b, i] > 0:
            xi, vi = pos[fn, b, i], vel[fn, b, i]
            c = grid_particle_cell(cells, b, i)
            for o in range(27):
                r = ti.Vector([0, 0], ti.i32)
                if grid_cell_reaches(xi, c, o, h, cell_size):
                    r = grid_cell_range(table, b, c, o)
                for kk in range(r[0], r[1]):
                    j = order[b, kk]
                    if j != i and p_kind[j] == LIQUID and w[b, j] > 0:
                        dist = (xi - pos[fn, b, j]).norm()
                        if dist < h:
                            acc += (p_mass[j] / p_rho[j] * spline(dist, h)) * (vel[fn, b, j] - vi)
            acc *= p_mat[i, M_VRELAX]
        dv[b, i] = acc
    for b, i in ti.ndrange(pos.shape[1], pos.shape[2]):
        if active[b, i] != 0 and p_kind[i] == LIQUID and w[b, i] > 0:
            vel[fn, b, i] = vel[fn, b, i] + dv[b, i]


# -- 4. particle collisions ------------------------------------------------------------------------------------------


@ti.func
def _touching(b, i, j, fn, pos: ti.template(), p_kind: ti.template(), p_entity: ti.template(),
              p_rest: ti.template(), p_radius: ti.template()):
    """(contact distance r_i + r_j, 1 if particles i and j of environment b collide: closer than that and not left
    out: pairs of one entity that were that close at rest, liquid pairs, free particles)."""
    s = p_radius[i] + p_radius[j]
    hit = 0
    dist2 = (pos[fn, b, i] - pos[fn, b, j]).norm_sqr()
    if dist2 < s * s and dist2 > EPS * EPS:  # then the pairs left out (j == i is at distance 0)
        hit = 1
        if p_kind[j] == PARTICLE or (p_kind[i] == LIQUID and p_kind[j] == LIQUID):
            hit = 0
        elif p_entity[i] == p_entity[j]:
            if (p_rest[i] - p_rest[j]).norm_sqr() <= s * s:
                hit = 0
    return s, hit


@ti.kernel
def collide(f: ti.i32, fn: ti.i32, cell_size: ti.f64, reach: ti.f64, pos: nd(dtype=V3, ndim=3),
            active: nd(ndim=2), w: nd(ndim=2), p_kind: nd(ndim=1), p_entity: nd(ndim=1), p_rest: nd(dtype=V3, ndim=1),
            p_radius: nd(ndim=1), p_mat: nd(ndim=2), table: nd(ndim=3), order: nd(ndim=2), cells: nd(ndim=3),
            count: nd(ndim=2), contacts: nd(ndim=3), dx: nd(dtype=V3, ndim=2)):
    """Each colliding pair (closer than the sum of their radii, p_radius) moves apart by its penetration, shared
    by inverse mass and divided by the larger of the two particles' contact counts (symmetric in the pair:
    momentum is kept). A particle's first MAX_CONTACTS contacts (in the search's fixed order) are kept from the
    search for the correction pass. reach: the largest contact distance (the search radius)."""
    for b, i in ti.ndrange(pos.shape[1], pos.shape[2]):
        n_contacts = 0
        if active[b, i] != 0 and p_kind[i] != PARTICLE:
            xi = pos[fn, b, i]
            c = grid_particle_cell(cells, b, i)
            for o in range(27):
                if grid_cell_reaches(xi, c, o, reach, cell_size):
                    r = grid_cell_range(table, b, c, o)
                    for kk in range(r[0], r[1]):
                        j = order[b, kk]
                        _s, hit = _touching(b, i, j, fn, pos, p_kind, p_entity, p_rest, p_radius)
                        if hit != 0:
                            if n_contacts < contacts.shape[2]:
                                contacts[b, i, n_contacts] = j
                            n_contacts += 1
        count[b, i] = n_contacts
    for b, i in ti.ndrange(pos.shape[1], pos.shape[2]):
        corr = ti.Vector([0.0, 0.0, 0.0])
        wi = w[b, i]
        if count[b, i] > 0 and wi > 0:
            xi = pos[fn, b, i]
            di = xi - pos[f, b, i]
            for m in range(ti.min(count[b, i], contacts.shape[2])):
                j = contacts[b, i, m]
                d = xi - pos[fn, b, j]
                dist = d.norm()
                n = d / dist
                share = wi / (wi + w[b, j]) / ti.max(count[b, i], count[b, j])
                pen = p_radius[i] + p_radius[j] - dist
                corr += (share * pen) * n
                # Coulomb friction on the pair's relative displacement over the substep
                rel = di - (pos[fn, b, j] - pos[f, b, j])
                tang = rel - rel.dot(n) * n
                tl = tang.norm()
                mu_s = ti.max(p_mat[i, M_MUS], p_mat[j, M_MUS])
                mu_k = ti.max(p_mat[i, M_MUK], p_mat[j, M_MUK])
                if tl < mu_s * pen:
                    corr -= share * tang
                elif tl > EPS:
                    corr -= (share * ti.min(1.0, mu_k * pen / tl)) * tang
        dx[b, i] = corr
    for b, i in ti.ndrange(pos.shape[1], pos.shape[2]):
        pos[fn, b, i] = pos[fn, b, i] + dx[b, i]


# -- attachments ---------------------------------------------------------------------------------------------------


@ti.func
def _attach_point(b, link, i, x, inv_dt, p_mass: ti.template(), attach_local: ti.template(), body_com: ti.template(),
                  body_quat: ti.template()):
    """(target, linear impulse, angular impulse about the link's centre of mass) of particle i of environment b,
    at x after the solve, attached to `link`: it goes to its point of the link, body_com + R(body_quat) local, and
    the link takes the momentum that move takes from it, m (x - target) / dt, at that point."""
    arm = body_point_offset(b, link, attach_local[b, i], body_com, body_quat)
    target = body_com[b, link] + arm
    dp = p_mass[i] * (x - target) * inv_dt
    return target, dp, arm.cross(dp)


@ti.kernel
def attach(fn: ti.i32, prm: nd(ndim=1), pos: nd(dtype=V3, ndim=3), active: nd(ndim=2), p_mass: nd(ndim=1),
           attach_link: nd(ndim=2), attach_local: nd(dtype=V3, ndim=2), body_com: nd(dtype=V3, ndim=2),
           body_quat: nd(ndim=3), body_impulse: nd(ndim=3)):
    """Particles attached to a link go to their point of the link after the solve, and the link takes the
    momentum that move takes from them (`_attach_point`): it carries their weight and the cloth's pull. One thread
    per environment, particles in index order: the impulses add up in a fixed order. A link index outside the
    view's bodies is ignored."""
    inv_dt = 1.0 / prm[P_DT]
    n_bodies = n_bodies_of(body_com, body_quat, body_impulse)
    for t in range(pos.shape[1] * TASK_STRIDE):
        if t % TASK_STRIDE == 0:
            b = t // TASK_STRIDE
            for i in range(pos.shape[2]):
                link = attach_link[b, i]
                if active[b, i] != 0 and link >= 0 and link < n_bodies:
                    target, dp, tau = _attach_point(b, link, i, pos[fn, b, i], inv_dt, p_mass, attach_local,
                                                    body_com, body_quat)
                    add_body_impulse(b, link, dp, tau, body_impulse)
                    pos[fn, b, i] = target


@ti.kernel
def gather_attached(fn: ti.i32, prm: nd(ndim=1), xp: nd(dtype=V3, ndim=3), last: nd(ndim=1), X: nd(dtype=V3, ndim=3),
                    pos: nd(dtype=V3, ndim=3), active: nd(ndim=2), p_mass: nd(ndim=1), attach_link: nd(ndim=2),
                    attach_local: nd(dtype=V3, ndim=2), body_com: nd(dtype=V3, ndim=2), body_quat: nd(ndim=3),
                    body_impulse: nd(ndim=3)):
    """Differentiable mode with attachments: `gather_schedule` and `attach` in one pass, each position written
    once (Taichi's reverse is exact): a particle's last slot, or its point of the link it is attached to, the link
    taking the momentum (`_attach_point`). One thread per environment, particles in index order, as `attach`."""
    for b in range(xp.shape[1]):  # (no statement outside the loop: Taichi's reverse)
        inv_dt = 1.0 / prm[P_DT]
        n_bodies = n_bodies_of(body_com, body_quat, body_impulse)
        for i in range(xp.shape[2]):
            x = _slot_or(X, xp, b, last[i], i)
            link = attach_link[b, i]
            if active[b, i] != 0 and link >= 0 and link < n_bodies:
                target, dp, tau = _attach_point(b, link, i, x, inv_dt, p_mass, attach_local, body_com, body_quat)
                for a in ti.static(range(3)):
                    body_impulse[b, link, a] += dp[a]
                    body_impulse[b, link, 3 + a] += tau[a]
                pos[fn, b, i] = target
            else:
                pos[fn, b, i] = x


# -- 5. velocities -----------------------------------------------------------------------------------------------


@ti.kernel
def finish(f: ti.i32, fn: ti.i32, prm: nd(ndim=1), pos: nd(dtype=V3, ndim=3), vel: nd(dtype=V3, ndim=3),
           active: nd(ndim=2)):
    ti.loop_config(serialize=SERIAL)
    for b, i in ti.ndrange(pos.shape[1], pos.shape[2]):
        if active[b, i] != 0:
            vel[fn, b, i] = (pos[fn, b, i] - pos[f, b, i]) / prm[P_DT]
        else:
            vel[fn, b, i] = vel[f, b, i]


_SERIAL_COPIES = {}


def serial(kernel):
    """The kernel's copy with SERIAL read as True (genesis_core.launch.serial_variant), made once."""
    from genesis_core.launch import serial_variant

    if kernel not in _SERIAL_COPIES:
        _SERIAL_COPIES[kernel] = serial_variant(kernel)
    return _SERIAL_COPIES[kernel]
