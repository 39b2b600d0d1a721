"""Constitutive models: from the trial deformation gradient F (after (I + dt C) F), the plastic volume ratio Jp
and the affine velocity C, return the projected F, the new Jp and the Kirchhoff stress tau = P F^T.

Notation: F = U diag(s) V^T (SVD), eps = log(s) the Hencky strain, mu and lambda the Lame parameters, p0..p2
the model parameters. E and nu are read per particle (each entity's differentiable state fields); x0..x2 are the
static parameters the material classes pack (`Material.kernel_params`).

Every model but the liquid and the neo-Hookean solid is spectral: the return mapping acts on the singular values
only, s -> h(s), and the stress is tau = U diag(t) U^T with t a function of h. `spectral_return` is that reduced
map; the backward (kernels_grad) differentiates it with Taichi's autodiff and carries the rotations U, V by closed
forms. The liquid and the neo-Hookean solid need no SVD; their reverses are written out.

Muscles (an elastic particle whose x0, its fibre stiffness in units of E, is not zero) add Genesis World's active
stress along the fibre, k a (F m) (F m)^T, to tau (`fibre_stress`).
"""

import taichi as ti

from .materials import ELASTIC, ELASTOPLASTIC, LIQUID, NEOHOOKEAN, SAND, SNOW

J_MIN = 1e-6  # the volume ratio the neo-Hookean log(J) and the liquid's J^(1/3) see at least (an inverted particle)

# how h follows s: h = s; h = exp(alpha log|s| + beta) with alpha, beta the same for every axis; h = clamp(s)
IDENTITY, LOG_AFFINE, CLAMP = 0, 1, 2


@ti.func
def coefficients(kind, E, nu, x0, x1, x2):
    """(mu, lambda, p0, p1, p2) of a particle: Lame parameters from E and nu, and the model parameters."""
    mu = E / (2.0 * (1.0 + nu))
    lam = E * nu / ((1.0 + nu) * (1.0 - 2.0 * nu))
    p0 = x0
    if kind == LIQUID:
        # no shear modulus; lambda is the bulk modulus K = E / (3 (1 - 2 nu)); p0 the viscosity
        mu = 0.0
        lam = E / (3.0 * (1.0 - 2.0 * nu))
    elif kind == ELASTOPLASTIC:
        p0 = x0 / (2.0 * mu)  # the yield stress as a bound on |dev(eps)|
    return mu, lam, p0, x1, x2


@ti.func
def spectral(kind):
    """Whether the model goes through the SVD of F (`spectral_return`)."""
    return kind != LIQUID and kind != NEOHOOKEAN


@ti.func
def fibre_gain(kind, E, x0, actu):
    """A muscle particle's k a (Pa): stiffness k = x0 E times its actuation a; 0 for every other particle (the
    other kinds use x0 for their own parameters)."""
    g = 0.0
    if kind == ELASTIC or kind == NEOHOOKEAN:
        g = x0 * E * actu
    return g


@ti.func
def fibre_stress(F, m, gain):
    """Genesis World's active stress of a muscle (Kirchhoff): gain (F m) (F m)^T, m the fibre direction in the
    rest shape, F the trial deformation gradient: a tension gain |F m|^2 along the deformed fibre."""
    Fm = F @ m
    return gain * Fm.outer_product(Fm)


@ti.func
def prod3(v):
    return v[0] * v[1] * v[2]


@ti.func
def spectral_return(kind, s, Jp, mu, lam, p0, p1, p2):
    """The return mapping on the singular values and the stress's eigenvalues (every model but the liquid).

    Returns h (the projected singular values), t (tau = U diag(t) U^T), the new Jp, the effective mu (Snow's
    hardening scales it), and how h follows s: (mode, alpha, beta) with mode one of IDENTITY, LOG_AFFINE, CLAMP.
    """
    h = s
    Jp_new = Jp
    mu_eff = mu
    lam_eff = lam
    mode = IDENTITY
    alpha = 1.0
    beta = 0.0
    if kind == ELASTOPLASTIC:
        eps = ti.log(ti.max(ti.abs(s), 1e-4))
        mean = eps.sum() / 3.0
        dev = eps - mean
        n2 = dev.norm_sqr()
        if n2 > p0 * p0:  # von Mises: back to the yield surface along the deviator
            mode = LOG_AFFINE
            alpha = p0 / ti.sqrt(n2)
            beta = (1.0 - alpha) * mean
            h = ti.exp(alpha * eps + beta)
    elif kind == SAND:
        # Jp holds the volume gained in tension (Klar et al. 2016, volume correction): a particle that separated
        # must recompress that much before it carries load again. The correction is volumetric, log(Jp) / 3 on
        # each principal strain; the projection acts on the deviator of the corrected strain (which is the
        # deviator of eps itself).
        mode = LOG_AFFINE
        eps = ti.log(ti.max(ti.abs(s), 1e-4))
        log_jp = ti.log(Jp)
        tr = eps.sum() + log_jp
        if tr >= 0.0:  # expansion: the cohesionless material cannot carry tension (the cone's tip)
            alpha = 0.0
            h = ti.Vector([1.0, 1.0, 1.0])
            Jp_new = ti.exp(tr)
        else:
            Jp_new = 1.0
            mean = eps.sum() / 3.0
            dev = eps - mean
            norm = ti.sqrt(dev.norm_sqr() + 1e-40)
            delta_gamma = norm + (3.0 * lam + 2.0 * mu) / (2.0 * mu) * tr * p0
            k = 0.0
            if delta_gamma > 0.0:  # outside the cone: back onto it
                k = delta_gamma / norm
            # log h = eps + log(Jp) / 3 - k dev
            alpha = 1.0 - k
            beta = k * mean + log_jp / 3.0
            h = ti.exp(alpha * eps + beta)
    elif kind == SNOW:
        mode = CLAMP
        h = ti.min(ti.max(s, 1.0 - p0), 1.0 + p1)
        Jp_new = Jp * prod3(s) / prod3(h)
        hardening = ti.min(ti.max(ti.exp(p2 * (1.0 - Jp_new)), 0.1), 5.0)
        mu_eff = mu * hardening
        lam_eff = lam * hardening
    t = ti.Vector([0.0, 0.0, 0.0])
    if kind == SAND:
        # St. Venant-Kirchhoff on the Hencky strain: tau = U (2 mu eps + lambda tr(eps) I) U^T
        eps_h = alpha * ti.log(ti.max(ti.abs(s), 1e-4)) + beta
        t = 2.0 * mu_eff * eps_h + lam_eff * eps_h.sum()
    else:
        # fixed-corotated (Stomakhin et al. 2012): tau = 2 mu (F - R) F^T + lambda (J - 1) J I, R = U V^T
        J = prod3(h)
        t = 2.0 * mu_eff * (h - 1.0) * h + lam_eff * J * (J - 1.0)
    return h, t, Jp_new, mu_eff, mode, alpha, beta


@ti.func
def diag3(d):
    return ti.Matrix([[d[0], 0.0, 0.0], [0.0, d[1], 0.0], [0.0, 0.0, d[2]]])


@ti.func
def constitutive(kind, E, nu, x0, x1, x2, F, Jp, C):
    mu, lam, p0, p1, p2 = coefficients(kind, E, nu, x0, x1, x2)
    I3 = ti.Matrix.identity(float, 3)
    tau = ti.Matrix.zero(float, 3, 3)
    Jp_new = Jp
    if kind == LIQUID:
        # pressure only (mu = 0, lam = bulk modulus), plus Newtonian viscosity p0 on sym(C) ~ sym(grad v)
        J = F.determinant()
        F = I3 * ti.pow(ti.max(J, J_MIN), 1.0 / 3.0)
        tau = I3 * lam * J * (J - 1) + p0 * J * (C + C.transpose())
    elif kind == NEOHOOKEAN:
        # F is kept as it is (no return mapping)
        tau = mu * (F @ F.transpose() - I3) + lam * ti.log(ti.max(F.determinant(), J_MIN)) * I3
    else:
        U, sig, V = ti.svd(F)
        s = ti.Vector([sig[0, 0], sig[1, 1], sig[2, 2]])
        h, t, Jp_new, _, _, _, _ = spectral_return(kind, s, Jp, mu, lam, p0, p1, p2)
        F = U @ diag3(h) @ V.transpose()
        tau = U @ diag3(t) @ U.transpose()
    return F, Jp_new, tau


@ti.func
def particle_update(f, fn, b, p, dt, C: ti.template(), F: ti.template(), Jp: ti.template(), p_kind: ti.template(),
                    p_entity: ti.template(), p_params: ti.template(), E: ti.template(), nu: ti.template(),
                    actu: ti.template(), mdir: ti.template()):
    """An active particle's F and Jp of frame fn from frame f: the trial F = (I + dt C) F through its material's
    model, and a muscle's fibre stress (actu [B, n] its actuation, mdir [B, n] its fibre direction). Returns its
    C (frame f) and the Kirchhoff stress."""
    Cp = C[f, b, p]
    F_trial = (ti.Matrix.identity(float, 3) + dt * Cp) @ F[f, b, p]
    e = p_entity[p]
    kind = p_kind[p]
    E_p = E[b, e]
    x0 = p_params[p, 0]
    F_new, Jp_new, tau = constitutive(kind, E_p, nu[b, e], x0, p_params[p, 1], p_params[p, 2], F_trial,
                                      Jp[f, b, p], Cp)
    gain = fibre_gain(kind, E_p, x0, actu[b, p])
    if gain != 0.0:  # (no term at all otherwise: an idle muscle is its elastic material, bitwise)
        tau += fibre_stress(F_trial, mdir[b, p], gain)
    F[fn, b, p] = F_new
    Jp[fn, b, p] = Jp_new
    return Cp, tau
