"""Projected Gauss-Seidel for the differentiable substep, and its adjoint, one environment per loop iteration.

The rows are those of kernels_constraint.solve_constraints, solved in impulse space: with the Delassus matrix
A = J M~^-1 J^T and b0 = J v_free, the velocity of row r after impulses lambda is J_r v = b0_r + A_r . lambda, so
a sweep updates each row in turn exactly as the fast path's velocity-space sweep does (the same numbers, up to
round-off):

    normal, limit:  lambda_r <- max(lambda_r + (target_r - J_r v) dinv_r, 0)
    friction:       lambda_r <- clamp(lambda_r - J_r v dinv_r, -mu_r lambda_n, mu_r lambda_n)

for a fixed number of sweeps (no early stop), from the warm start lambda0. `hist[b, i]` keeps the impulses after
sweep i (0: the warm start): the state before the update of row r in sweep i is hist[i + 1, :r], hist[i, r:].

The adjoint runs the updates backwards. For an update u = lambda_r + (target_r - b0_r - A_r . s) dinv_r (friction:
target 0) projected to P(u), with gbar the adjoint of the new lambda_r: ubar = gbar P'(u); the state's adjoint
gains ubar (e_r - dinv_r A_r); target, b0, dinv and A_r gain ubar dinv_r, -ubar dinv_r, ubar (target_r - J_r v),
-ubar dinv_r s; a friction bound that is active passes +-mu_r gbar to its normal row. Taichi's autodiff is not
used: a sweep reads what the previous updates wrote (see docs/rigid.md).
"""

import taichi as ti
import torch

from .layout import ROW_FRICTION, ROW_LIMIT, ROW_NONE, ROW_NORMAL  # noqa: F401

nd = ti.types.ndarray


@ti.kernel
def pgs_forward(A: nd(ndim=3), b0: nd(ndim=2), target: nd(ndim=2), dinv: nd(ndim=2), mu: nd(ndim=2),
                kind: nd(ndim=2), normal_row: nd(ndim=2), n_rows: nd(ndim=1), lam0: nd(ndim=2), hist: nd(ndim=3),
                iterations: ti.i32):
    ti.loop_config(serialize=True)  # run on the caller's thread: no thread-pool dispatch per substep
    for b in range(A.shape[0]):
        n = n_rows[b]
        for r in range(n):
            hist[b, 0, r] = lam0[b, r]
        for it in range(iterations):
            for r in range(n):
                hist[b, it + 1, r] = hist[b, it, r]
            for r in range(n):
                jv = b0[b, r]
                for j in range(n):
                    jv += A[b, r, j] * hist[b, it + 1, j]
                lam = hist[b, it + 1, r]
                new = 0.0
                if kind[b, r] == ROW_FRICTION:
                    bound = mu[b, r] * hist[b, it + 1, normal_row[b, r]]
                    new = ti.min(ti.max(lam - jv * dinv[b, r], -bound), bound)
                else:
                    new = ti.max(lam + (target[b, r] - jv) * dinv[b, r], 0.0)
                hist[b, it + 1, r] = new


@ti.kernel
def pgs_adjoint(A: nd(ndim=3), b0: nd(ndim=2), target: nd(ndim=2), dinv: nd(ndim=2), mu: nd(ndim=2),
                kind: nd(ndim=2), normal_row: nd(ndim=2), n_rows: nd(ndim=1), hist: nd(ndim=3), iterations: ti.i32,
                g_lam: nd(ndim=2), g_A: nd(ndim=3), g_b0: nd(ndim=2), g_target: nd(ndim=2), g_dinv: nd(ndim=2),
                g_mu: nd(ndim=2)):
    """g_lam holds the adjoint of the final impulses on entry and that of the warm start on exit; the other g_*
    arrays (zeroed by the caller) receive the adjoints of the inputs."""
    ti.loop_config(serialize=True)
    for b in range(A.shape[0]):
        n = n_rows[b]
        for it_ in range(iterations):
            it = iterations - 1 - it_
            for r_ in range(n):
                r = n - 1 - r_
                jv = b0[b, r]
                for j in range(n):
                    s = hist[b, it, j]
                    if j < r:
                        s = hist[b, it + 1, j]
                    jv += A[b, r, j] * s
                lam = hist[b, it, r]
                g = g_lam[b, r]
                g_lam[b, r] = 0.0
                u_bar = 0.0
                free = 0.0  # target_r - J_r v (friction: -J_r v)
                if kind[b, r] == ROW_FRICTION:
                    nr = normal_row[b, r]
                    bound = mu[b, r] * hist[b, it + 1, nr]
                    u = lam - jv * dinv[b, r]
                    free = -jv
                    if u > bound:  # sliding: new = +-mu lambda_normal
                        g_lam[b, nr] += mu[b, r] * g
                        g_mu[b, r] += hist[b, it + 1, nr] * g
                    elif u < -bound:
                        g_lam[b, nr] -= mu[b, r] * g
                        g_mu[b, r] -= hist[b, it + 1, nr] * g
                    else:
                        u_bar = g
                else:
                    free = target[b, r] - jv
                    if lam + free * dinv[b, r] > 0.0:
                        u_bar = g
                        g_target[b, r] += u_bar * dinv[b, r]
                if u_bar != 0.0:
                    g_lam[b, r] += u_bar
                    g_dinv[b, r] += u_bar * free
                    jv_bar = -u_bar * dinv[b, r]
                    g_b0[b, r] += jv_bar
                    for j in range(n):
                        s = hist[b, it, j]
                        if j < r:
                            s = hist[b, it + 1, j]
                        g_A[b, r, j] += jv_bar * s
                        g_lam[b, j] += jv_bar * A[b, r, j]


class ProjectedGaussSeidel(torch.autograd.Function):
    """lambda = PGS(A, b0, target, dinv, mu; kind, normal_row, n_rows; lambda0), differentiable in A, b0, target,
    dinv, mu (the friction coefficient of each friction row) and lambda0."""

    @staticmethod
    def forward(ctx, A, b0, target, dinv, lam0, mu, kind, normal_row, n_rows, iterations):
        B, R = b0.shape
        A, b0, target, dinv, lam0, mu = (x.detach().contiguous() for x in (A, b0, target, dinv, lam0, mu))
        kind, normal_row, n_rows = kind.contiguous(), normal_row.contiguous(), n_rows.contiguous()
        hist = torch.zeros((B, iterations + 1, R), dtype=b0.dtype, device=b0.device)
        pgs_forward(A, b0, target, dinv, mu, kind, normal_row, n_rows, lam0, hist, iterations)
        ctx.save_for_backward(A, b0, target, dinv, mu, kind, normal_row, n_rows, hist)
        ctx.iterations = iterations
        return hist[:, iterations].clone()

    @staticmethod
    def backward(ctx, g_out):
        A, b0, target, dinv, mu, kind, normal_row, n_rows, hist = ctx.saved_tensors
        g_lam = g_out.detach().clone().contiguous()
        g_A, g_b0, g_target, g_dinv, g_mu = (torch.zeros_like(x) for x in (A, b0, target, dinv, mu))
        pgs_adjoint(A, b0, target, dinv, mu, kind, normal_row, n_rows, hist, ctx.iterations, g_lam, g_A, g_b0,
                    g_target, g_dinv, g_mu)
        return g_A, g_b0, g_target, g_dinv, g_lam, g_mu, None, None, None, None


def pgs(A, b0, target, dinv, mu, kind, normal_row, n_rows, lam0, iterations):
    """The impulses [B, R] after `iterations` sweeps (rows past n_rows[b] stay 0)."""
    return ProjectedGaussSeidel.apply(A, b0, target, dinv, lam0, mu, kind, normal_row, n_rows, int(iterations))
