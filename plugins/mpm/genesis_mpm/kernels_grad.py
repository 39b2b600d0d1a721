"""The substep of the differentiable mode and its reverse.

Forward (frame f to fn):

1. `stress`: F and Jp of frame fn and each particle's Kirchhoff stress (scratch `tau`), by the same constitutive
   models as the plain substep.
2. `p2g_scatter`: mass and momentum into a zeroed grid, one private copy per partition of the particles, each
   filled by one thread in index order (so the sum is bitwise repeatable, as in the plain substep).
3. `grid_update`: the copies summed in a fixed order, momentum to velocity, gravity and walls, into a separate
   velocity grid (nothing is updated in place: Taichi's global data access rules for autodiff).
4. grid-to-particle: `kernels_g2p.g2p`, which writes frame fn from frame f and the grid.

Reverse, in the opposite order: `g2p_reverse` and `p2g_scatter_reverse` are written by hand (Taichi's autodiff of
the 27-node stencils compiles for about a minute); `grid_update.grad` is Taichi's autodiff; `stress_reverse` is
below. Every reverse kernel gathers per particle or accumulates into per-partition copies summed in a fixed order,
so a gradient is bitwise repeatable too.

The stress's reverse does not differentiate through the SVD, which is wrong where singular values coincide (at
F = I, every particle at rest): the derivatives of U and V alone blow up there although F_new and tau are smooth.
With x = U^T dF V split into its symmetric part p and antisymmetric part q, a spectral map
F_new = U diag(h(s)) V^T, tau = U diag(t(s)) U^T has (i != j)

    (U^T dF_new V)_ij = p_ij (h_j - h_i) / (s_j - s_i) + q_ij (h_i + h_j) / (s_i + s_j)
    (U^T dtau U)_ij   = p_ij (t_j - t_i) / (s_j - s_i) + q_ij (t_j - t_i) / (s_i + s_j)

and diagonal dh, dt. The divided differences have closed forms for every model (`divided_differences`) that stay
exact as s_i -> s_j; the diagonal part (the reduced map s, Jp, E, nu -> h, t, Jp_new) goes through Taichi's
autodiff of `spectral_reduced`. The liquid's and the neo-Hookean solid's reverses (no SVD) are written out, and
so is the muscles' fibre stress (`fibre_stress_reverse`), to the actuation, E and F. Gradients assume uninverted
particles (det F > 0).
"""

import taichi as ti

from .kernels_grid import wall_condition
from .kernels_p2g import grid_base
from .kernels_material import (CLAMP, IDENTITY, J_MIN, coefficients, diag3, fibre_gain, particle_update, spectral,
                               spectral_return)
from .materials import LIQUID, NEOHOOKEAN, SAND
from .layout import PF_DT, PF_DX, PF_FLOOR, PF_FRICTION, PF_GRAVITY, PF_INV_DX, PF_ORIGIN

V3 = ti.types.vector(3, float)
V4 = ti.types.vector(4, float)
M3 = ti.types.matrix(3, 3, float)
nd = ti.types.ndarray

MAX_PARTITIONS = 8


@ti.kernel
def stress(f: ti.i32, fn: ti.i32, params_f: nd(ndim=1), C: nd(dtype=M3, ndim=3), F: nd(dtype=M3, ndim=3),
           Jp: nd(ndim=3), active: nd(ndim=2), p_kind: nd(ndim=1), p_entity: nd(ndim=1), p_params: nd(ndim=2),
           E: nd(ndim=2), nu: nd(ndim=2), actu: nd(ndim=2), mdir: nd(dtype=V3, ndim=2), tau: nd(dtype=M3, ndim=2)):
    dt = params_f[PF_DT]
    for b, p in ti.ndrange(F.shape[1], F.shape[2]):
        if active[b, p] == 0:
            F[fn, b, p] = F[f, b, p]
            Jp[fn, b, p] = Jp[f, b, p]
            tau[b, p] = ti.Matrix.zero(float, 3, 3)
        else:
            _, tau_p = particle_update(f, fn, b, p, dt, C, F, Jp, p_kind, p_entity, p_params, E, nu, actu, mdir)
            tau[b, p] = tau_p


@ti.func
def node_weight(o, fx):
    """Node o (0..26) of the 3x3x3 stencil: its offset, B-spline weight and the weight's gradient in fx."""
    offset = ti.Vector([o // 9, o // 3 % 3, o % 3])
    w = ti.Vector([0.0, 0.0, 0.0])
    dw = ti.Vector([0.0, 0.0, 0.0])
    for d in ti.static(range(3)):
        x = fx[d]
        if offset[d] == 0:
            w[d] = 0.5 * (1.5 - x) ** 2
            dw[d] = x - 1.5
        elif offset[d] == 1:
            w[d] = 0.75 - (x - 1.0) ** 2
            dw[d] = -2.0 * (x - 1.0)
        else:
            w[d] = 0.5 * (x - 0.5) ** 2
            dw[d] = x - 0.5
    weight = w[0] * w[1] * w[2]
    dweight = ti.Vector([dw[0] * w[1] * w[2], w[0] * dw[1] * w[2], w[0] * w[1] * dw[2]])
    return offset, weight, dweight


@ti.kernel
def p2g_scatter(f: ti.i32, params_f: nd(ndim=1), pos: nd(dtype=V3, ndim=3), vel: nd(dtype=V3, ndim=3),
                C: nd(dtype=M3, ndim=3), tau: nd(dtype=M3, ndim=2), active: nd(ndim=2), p_mass: nd(ndim=1),
                p_vol: nd(ndim=1), grid_mv: nd(dtype=V4, ndim=5)):
    """grid_mv [K, B, nx, ny, nz, 4] must be zero: partition k of each environment accumulates into copy k."""
    for b, k in ti.ndrange(pos.shape[1], grid_mv.shape[0]):
        n_part = grid_mv.shape[0]
        n = pos.shape[2]
        for p in range(k * n // n_part, (k + 1) * n // n_part):
            if active[b, p] != 0:
                dt = params_f[PF_DT]
                dx = params_f[PF_DX]
                inv_dx = params_f[PF_INV_DX]
                lower = ti.Vector([params_f[PF_ORIGIN], params_f[PF_ORIGIN + 1], params_f[PF_ORIGIN + 2]])
                m = p_mass[p]
                Cp = C[f, b, p]
                xl = (pos[f, b, p] - lower) * inv_dx
                base = grid_base(xl, ti.Vector([grid_mv.shape[2], grid_mv.shape[3], grid_mv.shape[4]]))
                fx = xl - base
                affine = -dt * p_vol[p] * 4.0 * inv_dx * inv_dx * tau[b, p] + m * Cp
                mv = m * vel[f, b, p]
                for o in range(27):
                    offset, weight, _ = node_weight(o, fx)
                    mom = weight * (mv + affine @ ((offset - fx) * dx))
                    node = base + offset
                    grid_mv[k, b, node[0], node[1], node[2]] += ti.Vector([mom[0], mom[1], mom[2], weight * m])


@ti.func
def split_momentum(acc):
    return ti.Vector([acc[0], acc[1], acc[2]]), acc[3]


@ti.kernel
def grid_update(params_f: nd(ndim=1), boundary: ti.i32, grid_mv: nd(dtype=V4, ndim=5), grid_v: nd(dtype=V3, ndim=4),
                grid_m: nd(ndim=4)):
    """kernels_grid.grid_update without the in-place updates: reads grid_mv (at most MAX_PARTITIONS copies),
    writes grid_v and grid_m."""
    for b, i, j, l in ti.ndrange(grid_v.shape[0], grid_v.shape[1], grid_v.shape[2], grid_v.shape[3]):
        dt = params_f[PF_DT]
        gravity = ti.Vector([params_f[PF_GRAVITY], params_f[PF_GRAVITY + 1], params_f[PF_GRAVITY + 2]])
        friction = params_f[PF_FRICTION]
        floor_cells = ti.cast(params_f[PF_FLOOR], ti.i32)
        n_part = grid_mv.shape[0]
        size = ti.Vector([grid_v.shape[1], grid_v.shape[2], grid_v.shape[3]])
        acc = grid_mv[0, b, i, j, l]
        for k in ti.static(range(1, MAX_PARTITIONS)):
            if k < n_part:
                acc += grid_mv[k, b, i, j, l]
        mv, m = split_momentum(acc)
        v = ti.Vector([0.0, 0.0, 0.0])
        if m > 0:
            v = mv / m + dt * gravity
            node = ti.Vector([i, j, l])
            for d in ti.static(range(3)):
                v = wall_condition(v, node, d, size, floor_cells, boundary, friction)
        grid_v[b, i, j, l] = v
        grid_m[b, i, j, l] = m


# -- hand-written reverses of the transfers (Taichi's autodiff of them takes a minute to compile) ----------------


@ti.kernel
def p2g_scatter_reverse(f: ti.i32, params_f: nd(ndim=1), pos: nd(dtype=V3, ndim=3), vel: nd(dtype=V3, ndim=3),
                        C: nd(dtype=M3, ndim=3), tau: nd(dtype=M3, ndim=2), active: nd(ndim=2), p_mass: nd(ndim=1),
                        p_vol: nd(ndim=1), grid_mv_grad: nd(dtype=V4, ndim=5), pos_grad: nd(dtype=V3, ndim=3),
                        vel_grad: nd(dtype=V3, ndim=3), C_grad: nd(dtype=M3, ndim=3), tau_grad: nd(dtype=M3, ndim=2)):
    """The reverse of `p2g_scatter`, a gather per particle; writes tau_grad (the stress is read nowhere else). The
    grid stage sums the partition copies, so their adjoints are equal: copy 0's is read."""
    dt = params_f[PF_DT]
    dx = params_f[PF_DX]
    inv_dx = params_f[PF_INV_DX]
    lower = ti.Vector([params_f[PF_ORIGIN], params_f[PF_ORIGIN + 1], params_f[PF_ORIGIN + 2]])
    for b, p in ti.ndrange(pos.shape[1], pos.shape[2]):
        tau_grad[b, p] = ti.Matrix.zero(float, 3, 3)
        if active[b, p] != 0:
            m = p_mass[p]
            Cp = C[f, b, p]
            xl = (pos[f, b, p] - lower) * inv_dx
            base = grid_base(xl, ti.Vector([grid_mv_grad.shape[2], grid_mv_grad.shape[3], grid_mv_grad.shape[4]]))
            fx = xl - base
            stress_scale = -dt * p_vol[p] * 4.0 * inv_dx * inv_dx
            affine = stress_scale * tau[b, p] + m * Cp
            mv = m * vel[f, b, p]
            g_mv = ti.Vector([0.0, 0.0, 0.0])
            g_affine = ti.Matrix.zero(float, 3, 3)
            g_fx = ti.Vector([0.0, 0.0, 0.0])
            for o in range(27):
                offset, weight, dweight = node_weight(o, fx)
                dpos = (offset - fx) * dx
                node = base + offset
                G = grid_mv_grad[0, b, node[0], node[1], node[2]]
                g_mom = ti.Vector([G[0], G[1], G[2]])
                g_weight = g_mom.dot(mv + affine @ dpos) + G[3] * m
                g_mv += weight * g_mom
                g_affine += weight * g_mom.outer_product(dpos)
                g_fx += g_weight * dweight - dx * weight * (affine.transpose() @ g_mom)
            vel_grad[f, b, p] += m * g_mv
            C_grad[f, b, p] += m * g_affine
            tau_grad[b, p] = stress_scale * g_affine
            pos_grad[f, b, p] += inv_dx * g_fx


@ti.kernel
def g2p_reverse(f: ti.i32, fn: ti.i32, params_f: nd(ndim=1), pos: nd(dtype=V3, ndim=3), active: nd(ndim=2),
                grid_v: nd(dtype=V3, ndim=4), pos_grad: nd(dtype=V3, ndim=3), vel_grad: nd(dtype=V3, ndim=3),
                C_grad: nd(dtype=M3, ndim=3), grid_v_grad_parts: nd(dtype=V3, ndim=5)):
    """The reverse of kernels_g2p.g2p. Partition k of each environment's particles is run in index order by one
    thread, accumulating into copy k of the grid adjoint (`sum_parts` then adds the copies in a fixed order): the
    gradient is bitwise repeatable."""
    dt = params_f[PF_DT]
    dx = params_f[PF_DX]
    inv_dx = params_f[PF_INV_DX]
    lower = ti.Vector([params_f[PF_ORIGIN], params_f[PF_ORIGIN + 1], params_f[PF_ORIGIN + 2]])
    hi = ti.Vector([grid_v.shape[1], grid_v.shape[2], grid_v.shape[3]]) - 2.0 - 1e-4
    n_part = grid_v_grad_parts.shape[0]
    n = pos.shape[2]
    for b, k in ti.ndrange(pos.shape[1], n_part):
        for p in range(k * n // n_part, (k + 1) * n // n_part):
            g_pos = pos_grad[fn, b, p]
            g_vel = vel_grad[fn, b, p]
            g_C = C_grad[fn, b, p]
            if active[b, p] == 0:
                pos_grad[f, b, p] += g_pos
                vel_grad[f, b, p] += g_vel
                C_grad[f, b, p] += g_C
            else:
                xl = (pos[f, b, p] - lower) * inv_dx
                base = grid_base(xl, ti.Vector([grid_v.shape[1], grid_v.shape[2], grid_v.shape[3]]))
                fx = xl - base
                new_v = ti.Vector([0.0, 0.0, 0.0])
                for o in range(27):
                    offset, weight, _ = node_weight(o, fx)
                    node = base + offset
                    new_v += weight * grid_v[b, node[0], node[1], node[2]]
                x = xl + dt * new_v * inv_dx
                g_x = g_pos * dx
                for d in ti.static(range(3)):  # the clamp inside the grid passes no gradient where it acts
                    if x[d] < 1.0 or x[d] > hi[d]:
                        g_x[d] = 0.0
                g_new_v = g_vel + dt * inv_dx * g_x
                g_fx = g_x
                for o in range(27):
                    offset, weight, dweight = node_weight(o, fx)
                    dpos = offset - fx
                    node = base + offset
                    g = grid_v[b, node[0], node[1], node[2]]
                    gC_dpos = 4.0 * inv_dx * (g_C @ dpos)
                    grid_v_grad_parts[k, b, node[0], node[1], node[2]] += weight * (g_new_v + gC_dpos)
                    g_weight = g.dot(g_new_v + gC_dpos)
                    g_fx += g_weight * dweight - 4.0 * inv_dx * weight * (g_C.transpose() @ g)
                pos_grad[f, b, p] += inv_dx * g_fx


@ti.kernel
def sum_parts(parts: nd(dtype=V3, ndim=5), out: nd(dtype=V3, ndim=4)):
    """out = the sum of the copies parts[k] in a fixed order; the copies are left zero."""
    for b, i, j, l in ti.ndrange(out.shape[0], out.shape[1], out.shape[2], out.shape[3]):
        acc = ti.Vector([0.0, 0.0, 0.0])
        for k in range(parts.shape[0]):
            acc += parts[k, b, i, j, l]
            parts[k, b, i, j, l] = ti.Vector([0.0, 0.0, 0.0])
        out[b, i, j, l] = acc


@ti.kernel
def clear(x: nd(ndim=1)):
    """Zero a (flattened) array: torch's own zero_ of a large array stalls when its threads meet Taichi's."""
    for i in range(x.shape[0]):
        x[i] = 0.0


# -- the reverse of `stress` ------------------------------------------------------------------------------------


@ti.func
def dlog(a, b):
    """(log b - log a) / (b - a) for a, b > 0, exact as b -> a."""
    d = b - a
    r = 0.0
    if ti.abs(d) > 1e-6 * a:
        r = (ti.log(b) - ti.log(a)) / d
    else:
        x = d / a
        r = (1.0 - x * (0.5 - x / 3.0)) / a
    return r


@ti.func
def dexp(a, b):
    """(exp b - exp a) / (b - a), exact as b -> a."""
    d = b - a
    r = 0.0
    if ti.abs(d) > 1e-6:
        r = (ti.exp(b) - ti.exp(a)) / d
    else:
        r = ti.exp(a) * (1.0 + d * (0.5 + d / 6.0))
    return r


@ti.func
def divided_differences(kind, mode, alpha, beta, mu_eff, lo, hi, s, h, i, j):
    """(h_j - h_i) / (s_j - s_i) and (t_j - t_i) / (s_j - s_i) for the reduced map of `spectral_return`."""
    Dh = 1.0
    if mode == CLAMP:
        d = s[j] - s[i]
        if ti.abs(d) > 1e-9 * (ti.abs(s[i]) + ti.abs(s[j])):
            Dh = (h[j] - h[i]) / d
        else:
            Dh = 0.0
            if lo < s[i] and s[i] < hi:
                Dh += 0.5
            if lo < s[j] and s[j] < hi:
                Dh += 0.5
    elif mode != IDENTITY:
        # log h = alpha log|s| + beta, alpha and beta alike on every axis
        ai = ti.max(ti.abs(s[i]), 1e-4)
        aj = ti.max(ti.abs(s[j]), 1e-4)
        Dh = ti.exp(beta) * alpha * dexp(alpha * ti.log(ai), alpha * ti.log(aj)) * dlog(ai, aj)
    Dt = 0.0
    if kind == SAND:
        ai = ti.max(ti.abs(s[i]), 1e-4)
        aj = ti.max(ti.abs(s[j]), 1e-4)
        Dt = 2.0 * mu_eff * alpha * dlog(ai, aj)
    else:
        Dt = 2.0 * mu_eff * (h[i] + h[j] - 1.0) * Dh
    return Dh, Dt


@ti.func
def safe_sum(a, b):
    d = a + b
    if ti.abs(d) < 1e-12:
        d = 1e-12
    return d


@ti.func
def cofactor(A):
    """d det(A) / dA."""
    c0 = ti.Vector([A[0, 1], A[1, 1], A[2, 1]]).cross(ti.Vector([A[0, 2], A[1, 2], A[2, 2]]))
    c1 = ti.Vector([A[0, 2], A[1, 2], A[2, 2]]).cross(ti.Vector([A[0, 0], A[1, 0], A[2, 0]]))
    c2 = ti.Vector([A[0, 0], A[1, 0], A[2, 0]]).cross(ti.Vector([A[0, 1], A[1, 1], A[2, 1]]))
    return ti.Matrix([[c0[0], c1[0], c2[0]], [c0[1], c1[1], c2[1]], [c0[2], c1[2], c2[2]]])


@ti.func
def fibre_stress_reverse(F, m, gain, G):
    """The reverse of kernels_material.fibre_stress, tau = gain (F m) (F m)^T: dL/dF and dL/dgain from
    G = dL/dtau."""
    Fm = F @ m
    return gain * (G + G.transpose()) @ Fm.outer_product(m), Fm.dot(G @ Fm)


@ti.func
def lame_derivatives(E, nu):
    """d(mu, lambda)/dE and d(mu, lambda)/dnu: mu = E / (2 (1 + nu)), lambda = E nu / ((1 + nu) (1 - 2 nu))."""
    d = (1.0 + nu) * (1.0 - 2.0 * nu)
    return 0.5 / (1.0 + nu), nu / d, -0.5 * E / (1.0 + nu) ** 2, E * (1.0 + 2.0 * nu * nu) / (d * d)


@ti.func
def trial_deformation(f, b, p, dt, C: ti.template(), F: ti.template()):
    """C and F of frame f, the trial deformation gradient A = (I + dt C) F and det(A)."""
    Cp = C[f, b, p]
    Fp = F[f, b, p]
    A = (ti.Matrix.identity(float, 3) + dt * Cp) @ Fp
    return Cp, Fp, A, A.determinant()


@ti.kernel
def stress_reverse_rotations(f: ti.i32, fn: ti.i32, params_f: nd(ndim=1), C: nd(dtype=M3, ndim=3),
                             F: nd(dtype=M3, ndim=3), Jp: nd(ndim=3), active: nd(ndim=2), p_kind: nd(ndim=1),
                             p_params: nd(ndim=2), E_p: nd(ndim=2), nu_p: nd(ndim=2), actu: nd(ndim=2),
                             mdir: nd(dtype=V3, ndim=2), F_grad: nd(dtype=M3, ndim=3), C_grad: nd(dtype=M3, ndim=3),
                             Jp_grad: nd(ndim=3), E_p_grad: nd(ndim=2), nu_p_grad: nd(ndim=2), actu_grad: nd(ndim=2),
                             tau_grad: nd(dtype=M3, ndim=2),
                             U_s: nd(dtype=M3, ndim=2), s_s: nd(dtype=V3, ndim=2), V_s: nd(dtype=M3, ndim=2),
                             s_grad: nd(dtype=V3, ndim=2), h_grad: nd(dtype=V3, ndim=2), t_grad: nd(dtype=V3, ndim=2),
                             off_grad: nd(dtype=M3, ndim=2)):
    """First part of the reverse of `stress`. Inactive, liquid and neo-Hookean particles: their whole adjoint. The
    others: the SVD (U_s, s_s, V_s), the adjoints of the reduced map's outputs h and t (h_grad, t_grad, for the
    autodiff of `spectral_reduced`), and the part of dL/dF_trial outside the reduced map (off_grad: the SVD's
    rotations and a muscle's fibre stress). E_p, nu_p: [B, n] per particle; their adjoints and s_grad are written
    here (the autodiff of `spectral_reduced` then adds to them). actu_grad [B, n] (the actuation, a frameless
    field) is added to."""
    dt = params_f[PF_DT]
    I3 = ti.Matrix.identity(float, 3)
    for b, p in ti.ndrange(F.shape[1], F.shape[2]):
        kind = p_kind[p]
        E_p_grad[b, p] = 0.0
        nu_p_grad[b, p] = 0.0
        s_grad[b, p] = ti.Vector([0.0, 0.0, 0.0])
        if active[b, p] == 0:
            F_grad[f, b, p] += F_grad[fn, b, p]
            Jp_grad[f, b, p] += Jp_grad[fn, b, p]
        elif kind == LIQUID:
            E_ = E_p[b, p]
            nu_ = nu_p[b, p]
            mu, lam, visc, p1, p2 = coefficients(kind, E_, nu_, p_params[p, 0], p_params[p, 1], p_params[p, 2])
            Cp, Fp, A, J = trial_deformation(f, b, p, dt, C, F)
            g_new = F_grad[fn, b, p]
            g_tau = tau_grad[b, p]
            gJ = 0.0
            if J > 1e-6:  # F_new = J^(1/3) I
                gJ += g_new.trace() * ti.pow(J, 1.0 / 3.0) / (3.0 * J)
            sym = Cp + Cp.transpose()
            tr_g = g_tau.trace()
            gJ += lam * (2.0 * J - 1.0) * tr_g + visc * (g_tau * sym).sum()
            g_lam = J * (J - 1.0) * tr_g
            gA = gJ * cofactor(A)
            F_grad[f, b, p] += (I3 + dt * Cp).transpose() @ gA
            C_grad[f, b, p] += dt * gA @ Fp.transpose() + visc * J * (g_tau + g_tau.transpose())
            Jp_grad[f, b, p] += Jp_grad[fn, b, p]
            # lambda = E / (3 (1 - 2 nu))
            E_p_grad[b, p] = g_lam / (3.0 * (1.0 - 2.0 * nu_))
            nu_p_grad[b, p] = g_lam * 2.0 * E_ / (3.0 * (1.0 - 2.0 * nu_) ** 2)
        elif kind == NEOHOOKEAN:
            # tau = mu (A A^T - I) + lambda log(J) I + gain (A m) (A m)^T, F_new = A
            E_ = E_p[b, p]
            nu_ = nu_p[b, p]
            mu, lam, _, _, _ = coefficients(kind, E_, nu_, p_params[p, 0], p_params[p, 1], p_params[p, 2])
            Cp, Fp, A, J = trial_deformation(f, b, p, dt, C, F)
            g_tau = tau_grad[b, p]
            gA = F_grad[fn, b, p] + mu * (g_tau + g_tau.transpose()) @ A
            if J > J_MIN:
                gA += lam * g_tau.trace() / J * cofactor(A)
            g_mu = (g_tau * (A @ A.transpose() - I3)).sum()
            g_lam = g_tau.trace() * ti.log(ti.max(J, J_MIN))
            x0 = p_params[p, 0]
            a = actu[b, p]
            gain = fibre_gain(kind, E_, x0, a)
            g_E = 0.0
            if gain != 0.0:
                g_fibre, g_gain = fibre_stress_reverse(A, mdir[b, p], gain, g_tau)
                gA += g_fibre
                g_E = x0 * a * g_gain
                actu_grad[b, p] += x0 * E_ * g_gain
            F_grad[f, b, p] += (I3 + dt * Cp).transpose() @ gA
            C_grad[f, b, p] += dt * gA @ Fp.transpose()
            Jp_grad[f, b, p] += Jp_grad[fn, b, p]
            dmu_dE, dlam_dE, dmu_dnu, dlam_dnu = lame_derivatives(E_, nu_)
            E_p_grad[b, p] = g_E + g_mu * dmu_dE + g_lam * dlam_dE
            nu_p_grad[b, p] = g_mu * dmu_dnu + g_lam * dlam_dnu
        else:
            mu, lam, p0, p1, p2 = coefficients(kind, E_p[b, p], nu_p[b, p], p_params[p, 0], p_params[p, 1],
                                               p_params[p, 2])
            A = (I3 + dt * C[f, b, p]) @ F[f, b, p]
            U, sig, V = ti.svd(A)
            s = ti.Vector([sig[0, 0], sig[1, 1], sig[2, 2]])
            h, t, _, mu_eff, mode, alpha, beta = spectral_return(kind, s, Jp[f, b, p], mu, lam, p0, p1, p2)
            Gf = U.transpose() @ F_grad[fn, b, p] @ V
            Gt = U.transpose() @ tau_grad[b, p] @ U
            gx = ti.Matrix.zero(float, 3, 3)
            for i, j in ti.static([(0, 1), (0, 2), (1, 2)]):
                Dh, Dt = divided_differences(kind, mode, alpha, beta, mu_eff, 1.0 - p0, 1.0 + p1, s, h, i, j)
                den = safe_sum(s[i], s[j])
                Eh = (h[i] + h[j]) / den
                Et = (t[j] - t[i]) / den
                gf_sym = Gf[i, j] + Gf[j, i]
                gf_skew = Gf[i, j] - Gf[j, i]
                gt_sym = Gt[i, j] + Gt[j, i]
                gx[i, j] = 0.5 * (gf_sym * Dh + gf_skew * Eh + gt_sym * (Dt + Et))
                gx[j, i] = 0.5 * (gf_sym * Dh - gf_skew * Eh + gt_sym * (Dt - Et))
            off = U @ gx @ V.transpose()
            x0 = p_params[p, 0]
            a = actu[b, p]
            gain = fibre_gain(kind, E_p[b, p], x0, a)
            if gain != 0.0:
                g_fibre, g_gain = fibre_stress_reverse(A, mdir[b, p], gain, tau_grad[b, p])
                off += g_fibre
                E_p_grad[b, p] = x0 * a * g_gain
                actu_grad[b, p] += x0 * E_p[b, p] * g_gain
            U_s[b, p] = U
            s_s[b, p] = s
            V_s[b, p] = V
            h_grad[b, p] = ti.Vector([Gf[0, 0], Gf[1, 1], Gf[2, 2]])
            t_grad[b, p] = ti.Vector([Gt[0, 0], Gt[1, 1], Gt[2, 2]])
            off_grad[b, p] = off


@ti.kernel
def spectral_reduced(f: ti.i32, fn: ti.i32, s_s: nd(dtype=V3, ndim=2), Jp: nd(ndim=3), active: nd(ndim=2),
                     p_kind: nd(ndim=1), p_params: nd(ndim=2), E_p: nd(ndim=2), nu_p: nd(ndim=2),
                     h_s: nd(dtype=V3, ndim=2), t_s: nd(dtype=V3, ndim=2)):
    """The reduced map (s, Jp, E, nu) -> (h, t, Jp of frame fn) of the active spectral particles; only its
    autodiff (`spectral_reduced.grad`) runs, after `stress_reverse_rotations`."""
    for b, p in ti.ndrange(s_s.shape[0], s_s.shape[1]):
        kind = p_kind[p]
        if active[b, p] != 0 and spectral(kind):
            mu, lam, p0, p1, p2 = coefficients(kind, E_p[b, p], nu_p[b, p], p_params[p, 0], p_params[p, 1],
                                               p_params[p, 2])
            h, t, Jp_new, _, _, _, _ = spectral_return(kind, s_s[b, p], Jp[f, b, p], mu, lam, p0, p1, p2)
            h_s[b, p] = h
            t_s[b, p] = t
            Jp[fn, b, p] = Jp_new


@ti.kernel
def stress_reverse_finish(f: ti.i32, params_f: nd(ndim=1), C: nd(dtype=M3, ndim=3), F: nd(dtype=M3, ndim=3),
                          active: nd(ndim=2), p_kind: nd(ndim=1), U_s: nd(dtype=M3, ndim=2),
                          s_grad: nd(dtype=V3, ndim=2), V_s: nd(dtype=M3, ndim=2), off_grad: nd(dtype=M3, ndim=2),
                          F_grad: nd(dtype=M3, ndim=3), C_grad: nd(dtype=M3, ndim=3)):
    """dL/dF_trial = U (diag(dL/ds) + off-diagonal part) V^T, then through F_trial = (I + dt C) F."""
    dt = params_f[PF_DT]
    for b, p in ti.ndrange(F.shape[1], F.shape[2]):
        if active[b, p] != 0 and spectral(p_kind[p]):
            gA = U_s[b, p] @ diag3(s_grad[b, p]) @ V_s[b, p].transpose() + off_grad[b, p]
            Cp = C[f, b, p]
            F_grad[f, b, p] += (ti.Matrix.identity(float, 3) + dt * Cp).transpose() @ gA
            C_grad[f, b, p] += dt * gA @ F[f, b, p].transpose()


def stress_reverse(launch, f, fn, params_f, C, F, Jp, active, p_kind, p_params, E_p, nu_p, actu, mdir, tau,
                   scratch):
    """The reverse of `stress`: from F.grad[fn], Jp.grad[fn] and tau.grad, accumulates into F.grad[f],
    C.grad[f], Jp.grad[f], actu.grad and writes the per-particle E_p.grad, nu_p.grad ([B, n]). `scratch` holds svd_u, svd_v,
    off_grad ([B, n, 3, 3]) and svd_s, reduced_h, reduced_t ([B, n, 3], requiring grad). `launch(kernel, *args)`
    launches a kernel (a genesis_core.launch.Launcher, or a plain call)."""
    sc = scratch
    launch(stress_reverse_rotations, f, fn, params_f, C, F, Jp, active, p_kind, p_params, E_p, nu_p, actu, mdir,
           F.grad, C.grad, Jp.grad, E_p.grad, nu_p.grad, actu.grad, tau.grad, sc["svd_u"], sc["svd_s"], sc["svd_v"], sc["svd_s"].grad,
           sc["reduced_h"].grad, sc["reduced_t"].grad, sc["off_grad"])
    launch(spectral_reduced.grad, f, fn, sc["svd_s"], Jp, active, p_kind, p_params, E_p, nu_p, sc["reduced_h"],
           sc["reduced_t"])
    launch(stress_reverse_finish, f, params_f, C, F, active, p_kind, sc["svd_u"], sc["svd_s"].grad, sc["svd_v"],
           sc["off_grad"], F.grad, C.grad)
