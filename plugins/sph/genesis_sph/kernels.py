"""The SPH kernels: densities and neighbour lists, boundaries, WCSPH forces, DFSPH's two solves, reactions.

Notation. h: the support radius (2 * particle_size); W: the cubic spline of support h (Monaghan), whose sum over
a cubic lattice of spacing h / 2 is 1 / spacing^3 to 3e-5, so a particle of mass rho * spacing^3 inside a lattice
liquid sees its rest density. Arrays are [B, N] per particle (environment b, particle i), pos and vel
[frames, B, N, 3]; a substep reads frame f and writes frame fn.

Boundaries (the domain's walls and every collider's geoms) enter as the volume of solid inside a particle's
support: for a solid whose surface lies at signed distance d from the particle (d > 0 outside the solid), treated
as a half-space, Psi(d) = integral of W over the solid (1/2 at d = 0, 0 beyond h, 1 deep inside), a closed-form
polynomial; its gradient is -A(d) n, A the integral of W over the plane at distance d and n the solid's outward
normal. The boundary adds rho0 Psi to the particle's density and acts with the particle's own pressure
(mirrored), so the liquid cannot pass it; its reaction goes to the geom's body, at the nearest point of the
geom's surface: momentum is exchanged, not created.

Sums over neighbours run over each particle's list (built with the density, at most MAX_NEIGHBOURS entries, in
the neighbour grid's fixed visiting order): bitwise repeatable, independent of the thread schedule and of other
environments.
"""

import math

import taichi as ti

from genesis_core.particles.collider import add_impulse, body_of, body_surface, clear_impulse_rows, distance_to
from genesis_core.particles.neighbours import grid_cell_range, grid_particle_cell
from genesis_core.particles.reduce import part_range

V3 = ti.types.vector(3, float)
V4 = ti.types.vector(4, float)
nd = ti.types.ndarray

MAX_NEIGHBOURS = 56  # a lattice liquid has 32 neighbours within h; 56 holds 75% compression of the support
MIN_DIVERGENCE_NEIGHBOURS = 20  # fewer: a surface particle, left out of the divergence solve (Bender & Koschier)
PSI_MAX = 0.999  # a solid's fraction in the union, at most (its share then stays finite)
MAX_LAYERS = 4  # boundary layers below a solid's surface (2 reach a particle outside it)
ERROR_PARTS = 64  # per-environment partial sums of the DFSPH errors (fixed order)

# params [P_N]
P_DT, P_H, P_GX, P_GY, P_GZ, P_LO, P_HI, P_WALLS, P_S, P_N = 0, 1, 2, 3, 4, 5, 8, 11, 17, 18
# material rows per particle [N, M_N]
M_RHO, M_STIFF, M_EXP, M_MU, M_GAMMA, M_N = range(6)
# solve modes
DIVERGENCE, DENSITY = 0, 1


@ti.func
def w_cubic(r, h):
    k = 8.0 / (math.pi * h * h * h)
    q = r / h
    res = 0.0
    if q <= 0.5:
        res = k * (6.0 * q * q * q - 6.0 * q * q + 1.0)
    elif q <= 1.0:
        res = 2.0 * k * (1.0 - q) ** 3
    return res


@ti.func
def grad_w(d, r, h):
    """The gradient of W at x_i - x_j = d (|d| = r), with respect to x_i."""
    k = 8.0 / (math.pi * h * h * h)
    q = r / h
    dw = 0.0
    if r > 1e-9 * h:
        if q <= 0.5:
            dw = k / h * (18.0 * q * q - 12.0 * q)
        elif q <= 1.0:
            dw = -6.0 * k / h * (1.0 - q) ** 2
    return (dw / ti.max(r, 1e-12 * h)) * d


@ti.func
def cohesion(r, h, k, h6):
    """Akinci et al. 2013's cohesion spline C(r); k = 32 / (pi h^9), h6 = h^6."""
    res = 0.0
    if r <= h and r > 0:
        a = (h - r) * (h - r) * (h - r) * r * r * r
        if 2.0 * r > h:
            res = k * a
        else:
            res = k * (2.0 * a - h6 / 64.0)
    return res


@ti.func
def plane_integral(d, h):
    """A(d): the integral of W over the plane at distance |d| from its centre (1/m)."""
    q = ti.abs(d) / h
    res = 0.0
    if q <= 1.0:
        q2 = q * q
        q3 = q2 * q
        if q <= 0.5:
            res = 0.0875 - (1.2 * q3 * q2 - 1.5 * q2 * q2 + 0.5 * q2)
        else:
            res = 0.1 - (q2 - 2.0 * q3 + 1.5 * q2 * q2 - 0.4 * q3 * q2)
        res *= 16.0 / h
    return res


@ti.func
def plane_integral_slope(z, h):
    """dA/dz = -2 pi z W(|z|)."""
    return -2.0 * math.pi * z * w_cubic(ti.abs(z), h)


@ti.func
def solid_terms(d, spacing, h):
    """(Psi, dPsi/dd) of a solid whose surface lies at signed distance d (d > 0: outside): the solid as layers
    of boundary particles at depths (m + 1/2) spacing below its surface, smeared over each layer's plane, Psi(d) =
    spacing sum_m A(d + (m + 1/2) spacing). On the lattice of that spacing it equals the sum of W over the
    particles a mirrored liquid would put there (a lattice liquid at a wall starts at its rest density); 0 for
    d >= h. Layers down to MAX_LAYERS deep: a particle deeper inside is the contact's to put back."""
    psi = 0.0
    slope = 0.0
    for m in ti.static(range(MAX_LAYERS)):
        z = d + (m + 0.5) * spacing
        if ti.abs(z) < h:
            psi += spacing * plane_integral(z, h)
            slope += spacing * plane_integral_slope(z, h)
    return psi, slope


@ti.func
def _union(P, gp, vg, psi_k, gpsi_k, vgpsi_k):
    """Adds solid k to the union of the solids so far: P = prod (1 - Psi_l) over them, gp = grad (1 - P), vg = sum_l
    (v_l . grad Psi_l) prod_{m != l} (1 - Psi_m). Exact for perpendicular half-spaces under a separable kernel; for
    the cubic spline it counts the edge of two walls to within 0.4% of the rest density on the lattice (their plain
    sum: 2%)."""
    q = 1.0 - ti.min(psi_k, PSI_MAX)
    return P * q, gp * q + P * gpsi_k, vg * q + P * vgpsi_k


@ti.func
def solid_share(P, psi_k):
    """prod_{l != k} (1 - Psi_l): the weight of solid k's gradient in the union's (see _union)."""
    return P / (1.0 - ti.min(psi_k, PSI_MAX))


@ti.func
def _wall_terms(x, prm: ti.template()):
    """(P, grad Psi, 0) of the domain's six walls (each on where prm[P_WALLS + k] != 0), see _union."""
    h = prm[P_H]
    P = 1.0
    gp = ti.Vector([0.0, 0.0, 0.0])
    vg = 0.0
    for a in ti.static(range(3)):
        for side in ti.static(range(2)):
            if prm[P_WALLS + 2 * a + side] != 0:
                d = x[a] - prm[P_LO + a]
                sgn = 1.0
                if side == 1:
                    d = prm[P_HI + a] - x[a]
                    sgn = -1.0
                if d < h:
                    ps, slope = solid_terms(d, prm[P_S], h)
                    g = ti.Vector([0.0, 0.0, 0.0])
                    g[a] = sgn * slope
                    P, gp, vg = _union(P, gp, vg, ps, g, 0.0)
    return P, gp, vg


@ti.kernel
def boundary_terms(f: ti.i32, accumulate: ti.i32, n_geoms: ti.i32, prm: nd(ndim=1), pos: nd(dtype=V3, ndim=3),
                   active: nd(ndim=2), geom_type: nd(ndim=1), geom_size: nd(dtype=V3, ndim=1),
                   geom_body: nd(ndim=1), geom_hull: nd(ndim=2), hull_planes: nd(ndim=2),
                   geom_pos: nd(dtype=V3, ndim=2), geom_quat: nd(dtype=V4, ndim=2), body_com: nd(dtype=V3, ndim=2),
                   body_lin_vel: nd(dtype=V3, ndim=2), body_ang_vel: nd(dtype=V3, ndim=2), psi: nd(ndim=2),
                   gpsi: nd(dtype=V3, ndim=2), vgpsi: nd(ndim=2)):
    """The union of the walls (accumulate 0) and of the first n_geoms geoms of one collider with what psi, gpsi,
    vgpsi hold (accumulate 1), see _union: psi [B, N]: P = prod (1 - Psi_k), the union's solid fraction is 1 - P;
    gpsi [B, N]: the union's gradient; vgpsi [B, N]: its rate of change from the bodies' motion (sum of the
    velocity of each body's surface . its share of the gradient)."""
    h = prm[P_H]
    n_bodies = ti.min(body_com.shape[1], ti.min(body_lin_vel.shape[1], body_ang_vel.shape[1]))
    for b, i in ti.ndrange(pos.shape[1], pos.shape[2]):
        if active[b, i] != 0:
            x = pos[f, b, i]
            P = 1.0
            gp = ti.Vector([0.0, 0.0, 0.0])
            vg = 0.0
            if accumulate == 0:
                P, gp, vg = _wall_terms(x, prm)
            else:
                P, gp, vg = psi[b, i], gpsi[b, i], vgpsi[b, i]
            for g in range(n_geoms):
                d, nrm = distance_to(g, b, x, geom_type, geom_size, geom_hull, hull_planes, geom_pos, geom_quat)
                if d < h:
                    ps, slope = solid_terms(d, prm[P_S], h)
                    gg = slope * nrm
                    vk = 0.0
                    body = body_of(geom_body, g, n_bodies)
                    if body >= 0:
                        _com, v_body = body_surface(b, body, x - d * nrm, body_com, body_lin_vel, body_ang_vel)
                        vk = v_body.dot(gg)
                    P, gp, vg = _union(P, gp, vg, ps, gg, vk)
            psi[b, i] = P
            gpsi[b, i] = gp
            vgpsi[b, i] = vg


@ti.kernel
def density(f: ti.i32, dfsph: ti.i32, prm: nd(ndim=1), pos: nd(dtype=V3, ndim=3), active: nd(ndim=2),
            table: nd(ndim=3), order: nd(ndim=2), cells: nd(ndim=3), mass: nd(ndim=1), mat: nd(ndim=2),
            psi: nd(ndim=2), gpsi: nd(dtype=V3, ndim=2), nbr: nd(ndim=3), nbr_n: nd(ndim=2), overflow: nd(ndim=1),
            rho: nd(ndim=2), aux: nd(ndim=2)):
    """The neighbour lists (nbr [B, N, MAX_NEIGHBOURS], nbr_n [B, N]; overflow [B]: the largest count that did
    not fit, 0 if none) and the densities rho [B, N] (fluid and boundary). aux [B, N]: WCSPH (dfsph 0): the
    pressure over rho^2, p / rho^2 with Tait's p (clamped at 0); DFSPH: the factor rho / (|sum m grad W|^2 +
    sum |m grad W|^2) (0 for a particle without neighbours or boundary)."""
    h = prm[P_H]
    h2 = h * h
    cap = nbr.shape[2]
    for b, i in ti.ndrange(pos.shape[1], pos.shape[2]):
        if active[b, i] != 0:
            xi = pos[f, b, i]
            c = grid_particle_cell(cells, b, i)
            acc = mass[i] * w_cubic(0.0, h)
            gsum = ti.Vector([0.0, 0.0, 0.0])
            gsq = 0.0
            n = 0
            for o in range(27):
                rg = grid_cell_range(table, b, c, o)
                for k in range(rg[0], rg[1]):
                    j = order[b, k]
                    if j != i:
                        d = xi - pos[f, b, j]
                        r2 = d.dot(d)
                        if r2 <= h2:
                            r = ti.sqrt(r2)
                            acc += mass[j] * w_cubic(r, h)
                            if n < cap:
                                nbr[b, i, n] = j
                            n += 1
                            if dfsph != 0:
                                gw = mass[j] * grad_w(d, r, h)
                                gsum += gw
                                gsq += gw.dot(gw)
            if n > cap:
                ti.atomic_max(overflow[b], n)
            nbr_n[b, i] = ti.min(n, cap)
            rho0 = mat[i, M_RHO]
            r_i = acc + rho0 * (1.0 - psi[b, i])
            rho[b, i] = r_i
            if dfsph != 0:
                gsum += rho0 * gpsi[b, i]
                denom = gsum.dot(gsum) + gsq
                a = 0.0
                scale = mass[i] / (h2 * h2)
                if denom > 1e-9 * scale * scale:
                    a = r_i / denom
                aux[b, i] = a
            else:
                ratio = ti.max(r_i / rho0, 1.0)
                p = mat[i, M_STIFF] * (ti.pow(ratio, mat[i, M_EXP]) - 1.0)
                aux[b, i] = p / (r_i * r_i)


@ti.func
def _nonpressure(b, i, f: ti.template(), fv: ti.template(), prm: ti.template(), pos: ti.template(),
                 vel: ti.template(), mass: ti.template(), mat: ti.template(), rho: ti.template(),
                 nbr: ti.template(), nbr_n: ti.template()):
    """Gravity, viscosity (Monaghan: 2 (d + 2) nu sum m_j / rho_j (v_ij . x_ij) / (r^2 + 0.01 h^2) grad W) and
    cohesion (Akinci et al. 2013, with their density correction) on particle i; velocities of frame fv."""
    h = prm[P_H]
    xi = pos[f, b, i]
    vi = vel[fv, b, i]
    nu = mat[i, M_MU]
    gamma = mat[i, M_GAMMA]
    rho0 = mat[i, M_RHO]
    a = ti.Vector([prm[P_GX], prm[P_GY], prm[P_GZ]])
    h3 = h * h * h
    h6 = h3 * h3
    kc = 32.0 / (math.pi * h6 * h3)
    for k in range(nbr_n[b, i]):
        j = nbr[b, i, k]
        d = xi - pos[f, b, j]
        r = ti.sqrt(d.dot(d))
        gw = grad_w(d, r, h)
        vij = vi - vel[fv, b, j]
        a += 10.0 * nu * (mass[j] / rho[b, j]) * vij.dot(d) / (r * r + 0.01 * h * h) * gw
        if gamma > 0 and r > 1e-9 * h:
            corr = 2.0 * rho0 / (rho[b, i] + rho[b, j])
            a -= gamma * corr * mass[j] * cohesion(r, h, kc, h6) / r * d
    return a


@ti.kernel
def wcsph_step(f: ti.i32, fn: ti.i32, prm: nd(ndim=1), pos: nd(dtype=V3, ndim=3), vel: nd(dtype=V3, ndim=3),
               active: nd(ndim=2), mass: nd(ndim=1), mat: nd(ndim=2), rho: nd(ndim=2), pr: nd(ndim=2),
               nbr: nd(ndim=3), nbr_n: nd(ndim=2), gpsi: nd(dtype=V3, ndim=2), coef: nd(ndim=2)):
    """Symplectic Euler with the symmetric pressure force -sum m_j (p_i / rho_i^2 + p_j / rho_j^2) grad W and the
    boundary's -rho0 (p_i / rho_i^2 + p_i / rho0^2) grad Psi; coef [B, N]: the boundary's coefficient, for the
    reactions. Frozen particles keep their state."""
    dt = prm[P_DT]
    h = prm[P_H]
    for b, i in ti.ndrange(pos.shape[1], pos.shape[2]):
        x, v = pos[f, b, i], vel[f, b, i]
        if active[b, i] != 0:
            a = _nonpressure(b, i, f, f, prm, pos, vel, mass, mat, rho, nbr, nbr_n)
            xi = pos[f, b, i]
            pi = pr[b, i]
            for k in range(nbr_n[b, i]):
                j = nbr[b, i, k]
                d = xi - pos[f, b, j]
                r = ti.sqrt(d.dot(d))
                a -= mass[j] * (pi + pr[b, j]) * grad_w(d, r, h)
            rho0 = mat[i, M_RHO]
            c = pi + pi * rho[b, i] * rho[b, i] / (rho0 * rho0)
            a -= rho0 * c * gpsi[b, i]
            coef[b, i] = c
            v = v + dt * a
            x = x + dt * v
        pos[fn, b, i] = x
        vel[fn, b, i] = v


@ti.kernel
def dfsph_begin(f: ti.i32, fn: ti.i32, warm: ti.f64, vel: nd(dtype=V3, ndim=3), active: nd(ndim=2),
                kap_in: nd(ndim=3), kap: nd(ndim=2), ksum: nd(ndim=3), conv: nd(ndim=1), iters: nd(ndim=1),
                copy_vel: ti.i32):
    """Starts a solve: kap = warm * the solve's total of the last substep (frame f of kap_in), the total of this
    one (frame fn of ksum) zero, every environment unconverged; copy_vel: vel(fn) = vel(f) first."""
    for b in range(conv.shape[0]):
        conv[b] = 0
        iters[b] = 0
    for b, i in ti.ndrange(kap.shape[0], kap.shape[1]):
        if copy_vel != 0:
            vel[fn, b, i] = vel[f, b, i]
        k = 0.0
        if active[b, i] != 0:
            k = warm * kap_in[f, b, i]
        kap[b, i] = k
        ksum[fn, b, i] = 0.0


@ti.kernel
def dfsph_accel(f: ti.i32, fn: ti.i32, prm: nd(ndim=1), pos: nd(dtype=V3, ndim=3), vel: nd(dtype=V3, ndim=3),
                active: nd(ndim=2), mass: nd(ndim=1), mat: nd(ndim=2), rho: nd(ndim=2), nbr: nd(ndim=3),
                nbr_n: nd(ndim=2), acc: nd(dtype=V3, ndim=2)):
    """acc [B, N]: the non-pressure acceleration of every active particle, with the velocities of frame fn."""
    for b, i in ti.ndrange(pos.shape[1], pos.shape[2]):
        a = ti.Vector([0.0, 0.0, 0.0])
        if active[b, i] != 0:
            a = _nonpressure(b, i, f, fn, prm, pos, vel, mass, mat, rho, nbr, nbr_n)
        acc[b, i] = a


@ti.kernel
def dfsph_error(f: ti.i32, fn: ti.i32, mode: ti.i32, prm: nd(ndim=1), pos: nd(dtype=V3, ndim=3),
                vel: nd(dtype=V3, ndim=3), active: nd(ndim=2), mass: nd(ndim=1), mat: nd(ndim=2), rho: nd(ndim=2),
                alpha: nd(ndim=2), nbr: nd(ndim=3), nbr_n: nd(ndim=2), gpsi: nd(dtype=V3, ndim=2),
                vgpsi: nd(ndim=2), conv: nd(ndim=1), kap: nd(ndim=2), err: nd(ndim=2)):
    """For the unconverged environments: the rate of compression D rho / Dt of every active particle (fluid and
    boundary, velocities of frame fn), and from it kap (mode DIVERGENCE: (D rho / Dt) alpha / dt, only
    compression, none at the surface; DENSITY: (rho* - rho0) alpha / dt^2 with rho* = rho + dt D rho / Dt, only
    compression) and err, the particle's error relative to its rest density (per substep)."""
    dt = prm[P_DT]
    h = prm[P_H]
    for b, i in ti.ndrange(pos.shape[1], pos.shape[2]):
        if conv[b] == 0:
            k_i = 0.0
            e = 0.0
            if active[b, i] != 0:
                xi = pos[f, b, i]
                vi = vel[fn, b, i]
                rho0 = mat[i, M_RHO]
                s = rho0 * (vi.dot(gpsi[b, i]) - vgpsi[b, i])
                n = nbr_n[b, i]
                for k in range(n):
                    j = nbr[b, i, k]
                    d = xi - pos[f, b, j]
                    r = ti.sqrt(d.dot(d))
                    s += mass[j] * (vi - vel[fn, b, j]).dot(grad_w(d, r, h))
                if mode == DIVERGENCE:
                    if n < MIN_DIVERGENCE_NEIGHBOURS:
                        s = 0.0
                    s = ti.max(s, 0.0)
                    k_i = s * alpha[b, i] / dt
                    e = s * dt / rho0
                else:
                    excess = ti.max(rho[b, i] + dt * s - rho0, 0.0)
                    k_i = excess * alpha[b, i] / (dt * dt)
                    e = excess / rho0
            kap[b, i] = k_i
            err[b, i] = e


@ti.kernel
def dfsph_apply(f: ti.i32, fn: ti.i32, check: ti.i32, add_acc: ti.i32, it: ti.i32, min_it: ti.i32, max_it: ti.i32,
                eta: ti.f64, prm: nd(ndim=1), pos: nd(dtype=V3, ndim=3), vel: nd(dtype=V3, ndim=3),
                active: nd(ndim=2), mass: nd(ndim=1), mat: nd(ndim=2), rho: nd(ndim=2), nbr: nd(ndim=3),
                nbr_n: nd(ndim=2), gpsi: nd(dtype=V3, ndim=2), acc: nd(dtype=V3, ndim=2), kap: nd(ndim=2),
                ksum: nd(ndim=3), err: nd(ndim=2), err_parts: nd(ndim=2), n_active: nd(ndim=2),
                conv: nd(ndim=1), iters: nd(ndim=1), err_env: nd(ndim=1)):
    """One step of a solve. With check: each unconverged environment's mean error (err summed in ERROR_PARTS
    parts, in a fixed order, over its active particles n_active[b, 0]) decides whether it has converged (mean
    <= eta after at least min_it iterations, or max_it reached: conv[b] = 1); the others, and every environment
    without check (the warm start), apply kap: v -= dt (sum m_j (kap_i / rho_i + kap_j / rho_j) grad W + rho0
    kap_i / rho_i grad Psi) (+ dt acc with add_acc), and add kap into ksum (frame fn)."""
    dt = prm[P_DT]
    h = prm[P_H]
    n = pos.shape[2]
    n_parts = err_parts.shape[1]
    if check != 0:
        for b, c in ti.ndrange(pos.shape[1], n_parts):
            if conv[b] == 0:
                i0, i1 = part_range(c, n, n_parts)
                s = 0.0
                for i in range(i0, i1):
                    s += err[b, i]
                err_parts[b, c] = s
        for b in range(pos.shape[1]):
            if conv[b] == 0:
                s = 0.0
                for c in range(n_parts):
                    s += err_parts[b, c]
                e = s / ti.max(n_active[b, 0], 1)
                err_env[b] = e
                if (e <= eta and it >= min_it) or it >= max_it:
                    conv[b] = 1
                else:
                    iters[b] = it + 1
    for b, i in ti.ndrange(pos.shape[1], pos.shape[2]):
        if (check == 0 or conv[b] == 0) and active[b, i] != 0:
            xi = pos[f, b, i]
            rho_i = rho[b, i]
            ki = kap[b, i] / rho_i
            a = -mat[i, M_RHO] * ki * gpsi[b, i]
            if add_acc != 0:
                a += acc[b, i]
            if ki != 0 or check == 0:
                for k in range(nbr_n[b, i]):
                    j = nbr[b, i, k]
                    d = xi - pos[f, b, j]
                    r = ti.sqrt(d.dot(d))
                    a -= mass[j] * (ki + kap[b, j] / rho[b, j]) * grad_w(d, r, h)
            else:
                for k in range(nbr_n[b, i]):
                    j = nbr[b, i, k]
                    kj = kap[b, j]
                    if kj != 0:
                        d = xi - pos[f, b, j]
                        r = ti.sqrt(d.dot(d))
                        a -= mass[j] * (kj / rho[b, j]) * grad_w(d, r, h)
            vel[fn, b, i] = vel[fn, b, i] + dt * a
            ksum[fn, b, i] = ksum[fn, b, i] + kap[b, i]


@ti.kernel
def dfsph_finish(f: ti.i32, fn: ti.i32, prm: nd(ndim=1), pos: nd(dtype=V3, ndim=3), vel: nd(dtype=V3, ndim=3),
                 active: nd(ndim=2), rho: nd(ndim=2), kap_v: nd(ndim=3), kap_d: nd(ndim=3), coef: nd(ndim=2)):
    """x(fn) = x(f) + dt v(fn) for the active particles (the frozen ones keep frame f); coef: the boundary's
    coefficient of both solves, (kap_v + kap_d) / rho, for the reactions."""
    dt = prm[P_DT]
    for b, i in ti.ndrange(pos.shape[1], pos.shape[2]):
        if active[b, i] != 0:
            pos[fn, b, i] = pos[f, b, i] + dt * vel[fn, b, i]
            coef[b, i] = (kap_v[fn, b, i] + kap_d[fn, b, i]) / rho[b, i]
        else:
            pos[fn, b, i] = pos[f, b, i]
            vel[fn, b, i] = vel[f, b, i]
            coef[b, i] = 0.0


@ti.kernel
def reactions(f: ti.i32, n_geoms: ti.i32, prm: nd(ndim=1), pos: nd(dtype=V3, ndim=3), active: nd(ndim=2),
              mass: nd(ndim=1), mat: nd(ndim=2), coef: nd(ndim=2), psi: nd(ndim=2), geom_type: nd(ndim=1),
              geom_size: nd(dtype=V3, ndim=1), geom_body: nd(ndim=1), geom_hull: nd(ndim=2),
              hull_planes: nd(ndim=2), geom_pos: nd(dtype=V3, ndim=2), geom_quat: nd(dtype=V4, ndim=2),
              body_com: nd(dtype=V3, ndim=2), chunk_impulse: nd(ndim=4)):
    """The boundary's push on each particle near a moving geom, dt rho0 coef grad Psi of the particle's mass,
    handed back to the geom's body with the opposite sign at the nearest point of its surface; chunk_impulse
    [K, B, L, 6]: each chunk of particles' sum (linear, angular about the body's centre of mass)."""
    dt = prm[P_DT]
    h = prm[P_H]
    n_chunks = chunk_impulse.shape[0]
    n_bodies = ti.min(chunk_impulse.shape[2], body_com.shape[1])
    n = pos.shape[2]
    for b, k in ti.ndrange(pos.shape[1], n_chunks):
        clear_impulse_rows(k, b, chunk_impulse)
        i0, i1 = part_range(k, n, n_chunks)
        for i in range(i0, i1):
            c = coef[b, i]
            if active[b, i] != 0 and c != 0:
                x = pos[f, b, i]
                w = dt * mass[i] * mat[i, M_RHO] * c
                for g in range(n_geoms):
                    body = body_of(geom_body, g, n_bodies)
                    if body >= 0:
                        d, nrm = distance_to(g, b, x, geom_type, geom_size, geom_hull, hull_planes, geom_pos,
                                             geom_quat)
                        if d < h:
                            ps, slope = solid_terms(d, prm[P_S], h)
                            dp = w * solid_share(psi[b, i], ps) * slope * nrm
                            add_impulse(dp, x - d * nrm, body_com[b, body], k, b, body, chunk_impulse)
