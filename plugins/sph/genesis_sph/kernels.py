"""The SPH kernels: densities and neighbour lists, boundaries, WCSPH forces, DFSPH's two solves, reactions.

Notation. h: the support radius (2 * particle_size); W: the cubic spline of support h (Monaghan), whose sum over
a cubic lattice of spacing h / 2 is 1 / spacing^3 to 3e-5, so a particle of mass rho * spacing^3 inside a lattice
liquid sees its rest density. Arrays are [B, N] per particle (environment b, particle i), pos and vel
[frames, B, N, 3]; a substep reads frame f and writes frame fn.

Boundaries (the domain's walls and every collider's geoms) enter as the volume of solid inside a particle's
support: for a solid whose surface lies at signed distance d from the particle (d > 0 outside the solid), treated
as a half-space, Psi(d) = integral of W over the solid (1/2 at d = 0, 0 beyond h, 1 deep inside), a closed-form
polynomial; its gradient is -A(d) n, A the integral of W over the plane at distance d and n the solid's outward
normal. The boundary adds rho0 Psi to the particle's density and pushes the particle with -rho0 (p_i / rho_i^2)
grad Psi, the derivative of the liquid's internal energy through that share of its density (so the boundary
does no work of its own over a closed path: an inviscid liquid at rest stays at rest); its reaction goes to the
geom's body, at the nearest point of the geom's surface: momentum is exchanged, not created.

Sums over neighbours run over each particle's list (built with the density, at most MAX_NEIGHBOURS entries, in
the neighbour grid's fixed visiting order): bitwise repeatable, independent of the thread schedule and of other
environments.
"""

import math

import taichi as ti

from genesis_core.particles.collider import (add_impulse, body_of, body_surface, clear_impulse_rows, distance_to,
                                            mat_vec, signed_distance)
from genesis_core.particles.neighbours import grid_cell_range, grid_particle_cell
from genesis_core.particles.reduce import part_range
from genesis_core.ti_math import quat_to_mat

V3 = ti.types.vector(3, float)
V4 = ti.types.vector(4, float)
M3 = ti.types.matrix(3, 3, float)
nd = ti.types.ndarray

MAX_NEIGHBOURS = 56  # a lattice liquid has 32 neighbours within h; 56 holds 75% compression of the support
MIN_DIVERGENCE_NEIGHBOURS = 20  # fewer: a surface particle, left out of the divergence solve (Bender & Koschier)
PSI_MAX = 0.999  # a solid's fraction in the union, at most (its share then stays finite)
MAX_LAYERS = 4  # boundary layers below a solid's surface (2 reach a particle outside it)
ERROR_PARTS = 64  # per-environment partial sums of the DFSPH errors (fixed order)

# params [P_N]
P_DT, P_H, P_GX, P_GY, P_GZ, P_LO, P_HI, P_WALLS, P_S, P_BVISC, P_N = 0, 1, 2, 3, 4, 5, 8, 11, 17, 18, 19
# material rows per particle [N, M_N]
M_RHO, M_STIFF, M_EXP, M_MU, M_GAMMA, M_N = range(6)
# solve modes
DIVERGENCE, DENSITY = 0, 1


# The functions a loop over neighbours calls are written without branches or reassigned locals (ti.select), so
# that the reverse of a loop of any length needs no stack of intermediate values.


@ti.func
def w_cubic(r, h):
    k = 8.0 / (math.pi * h * h * h)
    q = r / h
    t = 1.0 - q
    return ti.select(q <= 0.5, k * (6.0 * q * q * q - 6.0 * q * q + 1.0), ti.select(q <= 1.0, 2.0 * k * t * t * t, 0.0))


@ti.func
def grad_w(d, r, h):
    """The gradient of W at x_i - x_j = d (|d| = r), with respect to x_i."""
    k = 8.0 / (math.pi * h * h * h)
    q = r / h
    t = 1.0 - q
    dw = ti.select(q <= 0.5, k / h * (18.0 * q * q - 12.0 * q), ti.select(q <= 1.0, -6.0 * k / h * t * t, 0.0))
    return (ti.select(r > 1e-9 * h, dw, 0.0) / ti.max(r, 1e-12 * h)) * d


@ti.func
def cohesion(r, h, k, h6):
    """Akinci et al. 2013's cohesion spline C(r); k = 32 / (pi h^9), h6 = h^6."""
    a = (h - r) * (h - r) * (h - r) * r * r * r
    c = ti.select(2.0 * r > h, k * a, k * (2.0 * a - h6 / 64.0))
    return ti.select((r <= h) & (r > 0), c, 0.0)


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
def wall_viscosity(d, vtab: ti.template(), prm: ti.template()):
    """(T, N): a solid's no-slip viscosity at signed distance d, per unit of viscosity: the layers' sum of
    Monaghan's viscosity term integrated over each layer's plane, a_i = 10 nu_b (T v_t + N v_n n) for the
    particle's velocity v relative to the solid's surface (T, N <= 0; tabulated in vtab [2, K] over d in
    [-MAX_LAYERS spacing, h] by `viscosity_table`, read linearly)."""
    h = prm[P_H]
    lo = -MAX_LAYERS * prm[P_S]
    n = vtab.shape[1]
    u = (ti.min(ti.max(d, lo), h) - lo) / (h - lo) * (n - 1)
    k = ti.min(ti.cast(ti.floor(u), ti.i32), n - 2)
    t = u - k
    return ((1.0 - t) * vtab[0, k] + t * vtab[0, k + 1], (1.0 - t) * vtab[1, k] + t * vtab[1, k + 1])


@ti.func
def viscosity_matrix(T, N, nrm):
    """T (I - n n^T) + N n n^T."""
    return T * ti.Matrix.identity(float, 3) + (N - T) * nrm.outer_product(nrm)


@ti.func
def _wall_terms(x, prm: ti.template(), vtab: ti.template()):
    """(P, grad Psi, 0, viscosity matrix) of the domain's six walls (each on where prm[P_WALLS + k] != 0), see
    _union and wall_viscosity (the walls are at rest)."""
    h = prm[P_H]
    P = 1.0
    gp = ti.Vector([0.0, 0.0, 0.0])
    vg = 0.0
    vm = ti.Matrix.zero(float, 3, 3)
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
                    T, N = wall_viscosity(d, vtab, prm)
                    nrm = ti.Vector([0.0, 0.0, 0.0])
                    nrm[a] = sgn
                    vm += viscosity_matrix(T, N, nrm)
    return P, gp, vg, vm


@ti.kernel
def boundary_terms(f: ti.i32, accumulate: ti.i32, n_geoms: ti.i32, prm: nd(ndim=1), pos: nd(dtype=V3, ndim=3),
                   active: nd(ndim=2), geom_type: nd(ndim=1), geom_size: nd(dtype=V3, ndim=1),
                   geom_body: nd(ndim=1), geom_hull: nd(ndim=2), hull_planes: nd(ndim=2),
                   geom_pos: nd(dtype=V3, ndim=2), geom_quat: nd(dtype=V4, ndim=2), body_com: nd(dtype=V3, ndim=2),
                   body_lin_vel: nd(dtype=V3, ndim=2), body_ang_vel: nd(dtype=V3, ndim=2), psi: nd(ndim=2),
                   gpsi: nd(dtype=V3, ndim=2), vgpsi: nd(ndim=2), vtab: nd(ndim=2), vm: nd(dtype=M3, ndim=2),
                   vc: nd(dtype=V3, ndim=2)):
    """The union of the walls (accumulate 0) and of the first n_geoms geoms of one collider with what psi, gpsi,
    vgpsi hold (accumulate 1), see _union: psi [B, N]: P = prod (1 - Psi_k), the union's solid fraction is 1 - P;
    gpsi [B, N]: the union's gradient; vgpsi [B, N]: its rate of change from the bodies' motion (sum of the
    velocity of each body's surface . its share of the gradient); vm [B, N], vc [B, N]: the no-slip viscosity,
    a_i = 10 nu_b (vm v_i - vc) (each solid's wall_viscosity, summed)."""
    h = prm[P_H]
    n_bodies = ti.min(body_com.shape[1], ti.min(body_lin_vel.shape[1], body_ang_vel.shape[1]))
    for b, i in ti.ndrange(pos.shape[1], pos.shape[2]):
        if active[b, i] != 0:
            x = pos[f, b, i]
            P = 1.0
            gp = ti.Vector([0.0, 0.0, 0.0])
            vg = 0.0
            M = ti.Matrix.zero(float, 3, 3)
            c = ti.Vector([0.0, 0.0, 0.0])
            if accumulate == 0:
                P, gp, vg, M = _wall_terms(x, prm, vtab)
            else:
                P, gp, vg, M, c = psi[b, i], gpsi[b, i], vgpsi[b, i], vm[b, i], vc[b, i]
            for g in range(n_geoms):
                d, nrm = distance_to(g, b, x, geom_type, geom_size, geom_hull, hull_planes, geom_pos, geom_quat)
                if d < h:
                    ps, slope = solid_terms(d, prm[P_S], h)
                    gg = slope * nrm
                    vk = 0.0
                    T, N = wall_viscosity(d, vtab, prm)
                    Mk = viscosity_matrix(T, N, nrm)
                    body = body_of(geom_body, g, n_bodies)
                    if body >= 0:
                        _com, v_body = body_surface(b, body, x - d * nrm, body_com, body_lin_vel, body_ang_vel)
                        vk = v_body.dot(gg)
                        c += Mk @ v_body
                    M += Mk
                    P, gp, vg = _union(P, gp, vg, ps, gg, vk)
            psi[b, i] = P
            gpsi[b, i] = gp
            vgpsi[b, i] = vg
            vm[b, i] = M
            vc[b, i] = c


@ti.func
def _tait(i, mat: ti.template(), r):
    """p / rho^2 with Tait's p = stiffness ((rho / rho0)^exponent - 1), clamped at 0."""
    ratio = ti.max(r / mat[i, M_RHO], 1.0)
    return mat[i, M_STIFF] * (ti.pow(ratio, mat[i, M_EXP]) - 1.0) / (r * r)


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
                aux[b, i] = _tait(i, mat, r_i)


@ti.func
def _pair(b, i, j, f: ti.template(), fv: ti.template(), prm: ti.template(), pos: ti.template(),
          vel: ti.template(), mass: ti.template(), mat: ti.template(), rho: ti.template(), pr: ti.template(),
          PRESSURE: ti.template()):
    """The acceleration of particle i from its neighbour j: viscosity (Monaghan: 2 (d + 2)
    mu m_j / rho_ij (v_ij . x_ij) / (r^2 + 0.01 h^2) grad W), cohesion (Akinci et al. 2013, with their density
    correction) and, with PRESSURE, the symmetric pressure force -m_j (p_i / rho_i^2 + p_j / rho_j^2) grad W
    (pr: p / rho^2). Velocities of frame fv."""
    h = prm[P_H]
    d = pos[f, b, i] - pos[f, b, j]  # read here, not passed in: the reverse then needs no copy per neighbour
    r = ti.sqrt(d.dot(d))
    gw = grad_w(d, r, h)
    vij = vel[fv, b, i] - vel[fv, b, j]
    # symmetric in i and j (the pair's mean density, viscosity, cohesion and rest density): the force on i is
    # minus the force on j, so the liquid's internal forces conserve momentum exactly
    rho_ij = 0.5 * (rho[b, i] + rho[b, j])
    visc = 5.0 * (mat[i, M_MU] + mat[j, M_MU]) * (mass[j] / rho_ij) * vij.dot(d) / (r * r + 0.01 * h * h) * gw
    h3 = h * h * h
    h6 = h3 * h3
    corr = 0.5 * (mat[i, M_RHO] + mat[j, M_RHO]) / rho_ij
    coh = (0.5 * (mat[i, M_GAMMA] + mat[j, M_GAMMA]) * corr * mass[j] * cohesion(r, h, 32.0 / (math.pi * h6 * h3), h6)
           / ti.max(r, 1e-9 * h))
    press = ti.static(1.0 if PRESSURE else 0.0) * mass[j] * (pr[b, i] + pr[b, j])
    return visc - coh * d - press * gw


@ti.func
def _gravity(prm: ti.template()):
    return ti.Vector([prm[P_GX], prm[P_GY], prm[P_GZ]])


@ti.func
def _boundary_coef(b, i, pr: ti.template()):
    """WCSPH's boundary coefficient, p_i / rho_i^2: the boundary's force, -m_i rho0 c grad Psi, is minus the
    gradient of the particle's internal energy m_i e(rho_i) (de / drho = p / rho^2) through the boundary's share
    of rho_i, rho0 Psi, as DFSPH's kappa_i / rho_i is. (A mirrored pressure, p_i / rho_i^2 + p_i / rho0^2, pushes
    twice that, is not such a gradient, and feeds the column's acoustic ringing until an inviscid column leaves
    the floor.)"""
    return pr[b, i]


@ti.func
def _nonpressure(b, i, f: ti.template(), fv: ti.template(), prm: ti.template(), pos: ti.template(),
                 vel: ti.template(), mass: ti.template(), mat: ti.template(), rho: ti.template(),
                 nbr: ti.template(), nbr_n: ti.template()):
    """Gravity, viscosity and cohesion on particle i (_pair without pressure); velocities of frame fv."""
    a = _gravity(prm)
    for k in range(nbr_n[b, i]):
        a += _pair(b, i, nbr[b, i, k], f, fv, prm, pos, vel, mass, mat, rho, rho, False)
    return a


@ti.func
def _no_slip(b, i, v, prm: ti.template(), vm: ti.template(), vc: ti.template()):
    """The boundaries' no-slip viscosity on particle i moving at v: 10 nu_b (vm v - vc), nu_b the solver's
    boundary_viscosity (0: the boundaries slip)."""
    return 10.0 * prm[P_BVISC] * (vm[b, i] @ v - vc[b, i])


@ti.func
def _wcsph_particle(b, i, f: ti.template(), prm: ti.template(), pos: ti.template(), vel: ti.template(),
                    mass: ti.template(), mat: ti.template(), rho: ti.template(), pr: ti.template(),
                    nbr: ti.template(), nbr_n: ti.template(), gpsi: ti.template(), vm: ti.template(),
                    vc: ti.template()):
    """(acceleration, boundary coefficient) of active particle i: gravity, _pair with pressure over its
    neighbours, the boundary's -rho0 c grad Psi with c = _boundary_coef and its no-slip viscosity."""
    a = _gravity(prm) + _no_slip(b, i, vel[f, b, i], prm, vm, vc)
    for k in range(nbr_n[b, i]):
        a += _pair(b, i, nbr[b, i, k], f, f, prm, pos, vel, mass, mat, rho, pr, True)
    c = _boundary_coef(b, i, pr)
    a -= mat[i, M_RHO] * c * gpsi[b, i]
    return a, c


@ti.kernel
def wcsph_step(f: ti.i32, fn: ti.i32, prm: nd(ndim=1), pos: nd(dtype=V3, ndim=3), vel: nd(dtype=V3, ndim=3),
               active: nd(ndim=2), mass: nd(ndim=1), mat: nd(ndim=2), rho: nd(ndim=2), pr: nd(ndim=2),
               nbr: nd(ndim=3), nbr_n: nd(ndim=2), gpsi: nd(dtype=V3, ndim=2), vm: nd(dtype=M3, ndim=2),
               vc: nd(dtype=V3, ndim=2), coef: nd(ndim=2), v_used: nd(dtype=V3, ndim=2), ext: nd(dtype=V3, ndim=2)):
    """Symplectic Euler (_wcsph_particle); coef [B, N]: the boundary's coefficient and v_used [B, N] the velocity
    the viscosity saw, for the reactions; ext
    [B, N]: velocity changes couplings handed in this substep (added, then cleared). Frozen particles keep their
    state."""
    dt = prm[P_DT]
    for b, i in ti.ndrange(pos.shape[1], pos.shape[2]):
        x, v = pos[f, b, i], vel[f, b, i]
        if active[b, i] != 0:
            a, c = _wcsph_particle(b, i, f, prm, pos, vel, mass, mat, rho, pr, nbr, nbr_n, gpsi, vm, vc)
            coef[b, i] = c
            v_used[b, i] = v
            v = v + ext[b, i] + dt * a
            x = x + dt * v
        ext[b, i] = ti.Vector([0.0, 0.0, 0.0])
        pos[fn, b, i] = x
        vel[fn, b, i] = v


@ti.kernel
def accel_ad(f: ti.i32, prm: nd(ndim=1), pos: nd(dtype=V3, ndim=3), vel: nd(dtype=V3, ndim=3), active: nd(ndim=2),
             mass: nd(ndim=1), mat: nd(ndim=2), rho: nd(ndim=2), pr: nd(ndim=2), nbr: nd(ndim=3),
             nbr_n: nd(ndim=2), acc: nd(dtype=V3, ndim=2)):
    """Differentiable mode: acc [B, N] (zero before) += _pair with pressure over each particle's neighbours,
    accumulated into the array rather than a local (so the reverse needs no stack per neighbour)."""
    for b, i in ti.ndrange(pos.shape[1], pos.shape[2]):
        if active[b, i] != 0:
            for k in range(nbr_n[b, i]):
                acc[b, i] += _pair(b, i, nbr[b, i, k], f, f, prm, pos, vel, mass, mat, rho, pr, True)


@ti.kernel
def integrate_ad(f: ti.i32, fn: ti.i32, prm: nd(ndim=1), pos: nd(dtype=V3, ndim=3), vel: nd(dtype=V3, ndim=3),
                 active: nd(ndim=2), mat: nd(ndim=2), rho: nd(ndim=2), pr: nd(ndim=2), gpsi: nd(dtype=V3, ndim=2),
                 vm: nd(dtype=M3, ndim=2), vc: nd(dtype=V3, ndim=2), acc: nd(dtype=V3, ndim=2)):
    """Differentiable mode: wcsph_step's symplectic Euler from accel_ad's sums (gravity and the boundary added
    as in _wcsph_particle)."""
    for b, i in ti.ndrange(pos.shape[1], pos.shape[2]):
        dt = prm[P_DT]
        x, v = pos[f, b, i], vel[f, b, i]
        if active[b, i] != 0:
            a = (acc[b, i] + _gravity(prm) + _no_slip(b, i, v, prm, vm, vc)
                 - mat[i, M_RHO] * _boundary_coef(b, i, pr) * gpsi[b, i])
            v = v + dt * a
            x = x + dt * v
        pos[fn, b, i] = x
        vel[fn, b, i] = v


@ti.kernel
def walls_ad(f: ti.i32, prm: nd(ndim=1), pos: nd(dtype=V3, ndim=3), active: nd(ndim=2), psi: nd(ndim=2),
             gpsi: nd(dtype=V3, ndim=2), vtab: nd(ndim=2), vm: nd(dtype=M3, ndim=2)):
    """boundary_terms with the walls alone, differentiable: psi (the union's P), gpsi, vm from frame f."""
    for b, i in ti.ndrange(pos.shape[1], pos.shape[2]):
        if active[b, i] != 0:
            P, gp, _vg, M = _wall_terms(pos[f, b, i], prm, vtab)
            psi[b, i] = P
            gpsi[b, i] = gp
            vm[b, i] = M


@ti.kernel
def density_ad(f: ti.i32, prm: nd(ndim=1), pos: nd(dtype=V3, ndim=3), active: nd(ndim=2), mass: nd(ndim=1),
               mat: nd(ndim=2), psi: nd(ndim=2), nbr: nd(ndim=3), nbr_n: nd(ndim=2), rho: nd(ndim=2)):
    """Differentiable mode: the densities of `density` from its neighbour lists, accumulated into rho (which
    this kernel writes first with the particle's own and the boundary's share)."""
    for b, i in ti.ndrange(pos.shape[1], pos.shape[2]):
        if active[b, i] != 0:
            rho[b, i] = mass[i] * w_cubic(0.0, prm[P_H]) + mat[i, M_RHO] * (1.0 - psi[b, i])
    for b, i in ti.ndrange(pos.shape[1], pos.shape[2]):
        if active[b, i] != 0:
            h = prm[P_H]
            xi = pos[f, b, i]
            for k in range(nbr_n[b, i]):
                j = nbr[b, i, k]
                d = xi - pos[f, b, j]
                rho[b, i] += mass[j] * w_cubic(ti.sqrt(d.dot(d)), h)


@ti.kernel
def pressure_ad(active: nd(ndim=2), mat: nd(ndim=2), rho: nd(ndim=2), pr: nd(ndim=2)):
    """Differentiable mode: p / rho^2 from Tait's equation (`density`'s WCSPH branch)."""
    for b, i in ti.ndrange(rho.shape[0], rho.shape[1]):
        if active[b, i] != 0:
            pr[b, i] = _tait(i, mat, rho[b, i])


@ti.kernel
def dfsph_begin(f: ti.i32, fn: ti.i32, warm: ti.f64, vel: nd(dtype=V3, ndim=3), active: nd(ndim=2),
                kap_in: nd(ndim=3), kap: nd(ndim=2), ksum: nd(ndim=3), conv: nd(ndim=1), iters: nd(ndim=1),
                copy_vel: ti.i32, ext: nd(dtype=V3, ndim=2)):
    """Starts a solve: kap = warm * the solve's total of the last substep (frame f of kap_in), the total of this
    one (frame fn of ksum) zero, every environment unconverged; copy_vel: vel(fn) = vel(f) + ext first (ext: the
    couplings' velocity changes of this substep, then cleared)."""
    for b in range(conv.shape[0]):
        conv[b] = 0
        iters[b] = 0
    for b, i in ti.ndrange(kap.shape[0], kap.shape[1]):
        if copy_vel != 0:
            dv = ti.Vector([0.0, 0.0, 0.0])
            if active[b, i] != 0:
                dv = ext[b, i]
            vel[fn, b, i] = vel[f, b, i] + dv
            ext[b, i] = ti.Vector([0.0, 0.0, 0.0])
        k = 0.0
        if active[b, i] != 0:
            k = warm * kap_in[f, b, i]
        kap[b, i] = k
        ksum[fn, b, i] = 0.0


@ti.kernel
def dfsph_accel(f: ti.i32, fn: ti.i32, prm: nd(ndim=1), pos: nd(dtype=V3, ndim=3), vel: nd(dtype=V3, ndim=3),
                active: nd(ndim=2), mass: nd(ndim=1), mat: nd(ndim=2), rho: nd(ndim=2), nbr: nd(ndim=3),
                nbr_n: nd(ndim=2), vm: nd(dtype=M3, ndim=2), vc: nd(dtype=V3, ndim=2), acc: nd(dtype=V3, ndim=2),
                v_used: nd(dtype=V3, ndim=2)):
    """acc [B, N]: the non-pressure acceleration of every active particle (the boundaries' no-slip viscosity
    included), with the velocities of frame fn; v_used: those velocities, for the reactions."""
    for b, i in ti.ndrange(pos.shape[1], pos.shape[2]):
        a = ti.Vector([0.0, 0.0, 0.0])
        if active[b, i] != 0:
            v = vel[fn, b, i]
            a = _nonpressure(b, i, f, fn, prm, pos, vel, mass, mat, rho, nbr, nbr_n) + _no_slip(b, i, v, prm, vm, vc)
            v_used[b, i] = v
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
              mass: nd(ndim=1), mat: nd(ndim=2), coef: nd(ndim=2), psi: nd(ndim=2), v_used: nd(dtype=V3, ndim=2),
              vtab: nd(ndim=2), geom_type: nd(ndim=1), geom_size: nd(dtype=V3, ndim=1), geom_body: nd(ndim=1),
              geom_hull: nd(ndim=2), hull_planes: nd(ndim=2), geom_pos: nd(dtype=V3, ndim=2),
              geom_quat: nd(dtype=V4, ndim=2), body_com: nd(dtype=V3, ndim=2), body_lin_vel: nd(dtype=V3, ndim=2),
              body_ang_vel: nd(dtype=V3, ndim=2), chunk_impulse: nd(ndim=4)):
    """What each moving geom's boundary did to the particles near it this substep, handed back to the geom's
    body with the opposite sign at the nearest point of its surface: the pressure push, dt rho0 coef (its share
    of) grad Psi, and the no-slip viscosity, dt 10 nu_b M_k (v_used - v_surface), each of the particle's mass;
    chunk_impulse [K, B, L, 6]: each chunk of particles' sum (linear, angular about the body's centre of mass)."""
    dt = prm[P_DT]
    h = prm[P_H]
    n_chunks = chunk_impulse.shape[0]
    n_bodies = ti.min(ti.min(chunk_impulse.shape[2], body_com.shape[1]),
                      ti.min(body_lin_vel.shape[1], body_ang_vel.shape[1]))
    n = pos.shape[2]
    for b, k in ti.ndrange(pos.shape[1], n_chunks):
        clear_impulse_rows(k, b, chunk_impulse)
        i0, i1 = part_range(k, n, n_chunks)
        for i in range(i0, i1):
            if active[b, i] != 0:
                x = pos[f, b, i]
                w = dt * mass[i] * mat[i, M_RHO] * coef[b, i]
                wv = dt * mass[i] * 10.0 * prm[P_BVISC]
                for g in range(n_geoms):
                    body = body_of(geom_body, g, n_bodies)
                    if body >= 0:
                        d, nrm = distance_to(g, b, x, geom_type, geom_size, geom_hull, hull_planes, geom_pos,
                                             geom_quat)
                        if d < h:
                            ps, slope = solid_terms(d, prm[P_S], h)
                            at = x - d * nrm
                            com, v_body = body_surface(b, body, at, body_com, body_lin_vel, body_ang_vel)
                            T, N = wall_viscosity(d, vtab, prm)
                            dp = (w * solid_share(psi[b, i], ps) * slope * nrm
                                  - wv * (viscosity_matrix(T, N, nrm) @ (v_used[b, i] - v_body)))
                            add_impulse(dp, at, com, k, b, body, chunk_impulse)


def viscosity_table(h: float, spacing: float, n: int = 513):
    """vtab [2, n] for wall_viscosity: T(d) and N(d) per unit mu at n distances from -MAX_LAYERS spacing to h,
    each the sum over the layers z = d + (m + 1/2) spacing of spacing * pi int_{|z|}^{h} (r^2 - z^2) W'(r) /
    (r^2 + 0.01 h^2) dr (tangential) and spacing * 2 pi z^2 int_{|z|}^{h} W'(r) / (r^2 + 0.01 h^2) dr (normal),
    by the trapezoidal rule on 4001 points per integral."""
    import numpy as np

    k = 8.0 / (math.pi * h ** 3)
    d = np.linspace(-MAX_LAYERS * spacing, h, n)
    out = np.zeros((2, n))
    u = np.linspace(0.0, 1.0, 4001)
    for m in range(MAX_LAYERS):
        z = np.abs(d + (m + 0.5) * spacing)
        inside = z < h
        r = z[:, None] + (h - z[:, None]) * u[None, :]  # [n, 4001] from |z| to h
        q = r / h
        dw = np.where(q <= 0.5, k / h * (18 * q * q - 12 * q), np.where(q <= 1, -6 * k / h * (1 - q) ** 2, 0.0))
        den = r * r + 0.01 * h * h
        integrate = lambda y: np.trapezoid(y, r, axis=1)  # noqa: E731
        t = spacing * math.pi * integrate((r * r - z[:, None] ** 2) * dw / den)
        nn = spacing * 2 * math.pi * z ** 2 * integrate(dw / den)
        out[0] += np.where(inside, t, 0.0)
        out[1] += np.where(inside, nn, 0.0)
    return out


# -- differentiable mode: the boundaries on colliders' geoms ---------------------------------------------------------
# boundary_terms and reactions for one geom g per launch (no loop over geoms carries a value through Taichi's
# autodiff), primitives only, from arrays into new arrays. The geom and body arrays are [K, B, ...]: one copy per
# chunk of particles (part_range), so that their adjoints are summed per chunk thread, in a fixed order.


@ti.func
def _chunk_geom(k, b, g, x, prm: ti.template(), geom_type: ti.template(), geom_size: ti.template(),
                geom_pos: ti.template(), geom_quat: ti.template()):
    """(d, n) of point x to primitive geom g of environment b, read from chunk k's copy of the poses."""
    return signed_distance(geom_type[g], geom_size[g], geom_pos[k, b, g], quat_to_mat(geom_quat[k, b, g]), 0, 0,
                           prm, x, False)


@ti.func
def _chunk_surface(k, b, body, at, body_com: ti.template(), body_lin_vel: ti.template(),
                   body_ang_vel: ti.template()):
    """(com, the velocity of body's surface at `at`), read from chunk k's copy of the bodies' arrays."""
    com = body_com[k, b, body]
    return com, body_lin_vel[k, b, body] + body_ang_vel[k, b, body].cross(at - com)


@ti.kernel
def geom_terms_ad(f: ti.i32, g: ti.i32, prm: nd(ndim=1), pos: nd(dtype=V3, ndim=3), active: nd(ndim=2),
                  geom_type: nd(ndim=1), geom_size: nd(dtype=V3, ndim=1), geom_body: nd(ndim=1),
                  geom_pos: nd(dtype=V3, ndim=3), geom_quat: nd(dtype=V4, ndim=3), body_com: nd(dtype=V3, ndim=3),
                  body_lin_vel: nd(dtype=V3, ndim=3), body_ang_vel: nd(dtype=V3, ndim=3), vtab: nd(ndim=2),
                  psi_in: nd(ndim=2), gpsi_in: nd(dtype=V3, ndim=2), vm_in: nd(dtype=M3, ndim=2),
                  vc_in: nd(dtype=V3, ndim=2), psi: nd(ndim=2), gpsi: nd(dtype=V3, ndim=2), vm: nd(dtype=M3, ndim=2),
                  vc: nd(dtype=V3, ndim=2)):
    """boundary_terms' step for geom g: (psi, gpsi, vm, vc) = (psi_in, ...) joined with the geom's solid."""
    for b, k in ti.ndrange(pos.shape[1], geom_pos.shape[0]):
        h = prm[P_H]
        n = pos.shape[2]
        n_parts = geom_pos.shape[0]
        n_bodies = ti.min(body_com.shape[2], ti.min(body_lin_vel.shape[2], body_ang_vel.shape[2]))
        body = body_of(geom_body, g, n_bodies)
        for i in range(k * n // n_parts, (k + 1) * n // n_parts):
            P, gp, M, c = psi_in[b, i], gpsi_in[b, i], vm_in[b, i], vc_in[b, i]
            if active[b, i] != 0:
                x = pos[f, b, i]
                d, nrm = _chunk_geom(k, b, g, x, prm, geom_type, geom_size, geom_pos, geom_quat)
                if d < h:
                    ps, slope = solid_terms(d, prm[P_S], h)
                    T, N = wall_viscosity(d, vtab, prm)
                    Mk = viscosity_matrix(T, N, nrm)
                    if body >= 0:
                        _com, v_body = _chunk_surface(k, b, body, x - d * nrm, body_com, body_lin_vel, body_ang_vel)
                        c += mat_vec(Mk, v_body)
                    M += Mk
                    P, gp, _vg = _union(P, gp, 0.0, ps, slope * nrm, 0.0)
            psi[b, i] = P
            gpsi[b, i] = gp
            vm[b, i] = M
            vc[b, i] = c


@ti.kernel
def reactions_ad(f: ti.i32, g: ti.i32, prm: nd(ndim=1), pos: nd(dtype=V3, ndim=3), vel: nd(dtype=V3, ndim=3),
                 active: nd(ndim=2), mass: nd(ndim=1), mat: nd(ndim=2), rho: nd(ndim=2), pr: nd(ndim=2),
                 psi: nd(ndim=2), vtab: nd(ndim=2), geom_type: nd(ndim=1), geom_size: nd(dtype=V3, ndim=1),
                 geom_body: nd(ndim=1), geom_pos: nd(dtype=V3, ndim=3), geom_quat: nd(dtype=V4, ndim=3),
                 body_com: nd(dtype=V3, ndim=3), body_lin_vel: nd(dtype=V3, ndim=3),
                 body_ang_vel: nd(dtype=V3, ndim=3), chunk_impulse: nd(ndim=4)):
    """reactions' impulses of geom g (WCSPH: the boundary coefficient from rho and p / rho^2, the viscosity
    against frame f's velocity), added to chunk_impulse [K, B, L, 6] (zero before the first geom)."""
    for b, k in ti.ndrange(pos.shape[1], geom_pos.shape[0]):
        dt = prm[P_DT]
        h = prm[P_H]
        n = pos.shape[2]
        n_parts = geom_pos.shape[0]
        n_bodies = ti.min(ti.min(chunk_impulse.shape[2], body_com.shape[2]),
                          ti.min(body_lin_vel.shape[2], body_ang_vel.shape[2]))
        body = body_of(geom_body, g, n_bodies)
        if body >= 0:
            for i in range(k * n // n_parts, (k + 1) * n // n_parts):
                if active[b, i] != 0:
                    x = pos[f, b, i]
                    d, nrm = _chunk_geom(k, b, g, x, prm, geom_type, geom_size, geom_pos, geom_quat)
                    if d < h:
                        ps, slope = solid_terms(d, prm[P_S], h)
                        at = x - d * nrm
                        com, v_body = _chunk_surface(k, b, body, at, body_com, body_lin_vel, body_ang_vel)
                        T, N = wall_viscosity(d, vtab, prm)
                        w = dt * mass[i] * mat[i, M_RHO] * _boundary_coef(b, i, pr)
                        wv = dt * mass[i] * 10.0 * prm[P_BVISC]
                        dp = (w * solid_share(psi[b, i], ps) * slope * nrm
                              - wv * mat_vec(viscosity_matrix(T, N, nrm), vel[f, b, i] - v_body))
                        add_impulse(dp, at, com, k, b, body, chunk_impulse)
