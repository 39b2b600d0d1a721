"""Constitutive models: from the trial deformation gradient F (after (I + dt C) F), the plastic volume ratio Jp
and the affine velocity C, return the projected F, the new Jp and the Kirchhoff stress tau = P F^T.

Notation: F = U diag(sigma) V^T (SVD), eps = log(sigma) the Hencky strain, mu and lambda the Lame parameters,
p0..p2 the model parameters packed by the material classes.
"""

import taichi as ti

from .materials import ELASTOPLASTIC, LIQUID, SAND, SNOW


@ti.func
def fixed_corotated(F, U, V, J, mu, lam):
    """tau = 2 mu (F - R) F^T + lambda (J - 1) J I, R = U V^T (Stomakhin et al. 2012)."""
    R = U @ V.transpose()
    return 2 * mu * (F - R) @ F.transpose() + ti.Matrix.identity(float, 3) * lam * J * (J - 1)


@ti.func
def constitutive(kind, mu, lam, p0, p1, p2, F, Jp, C):
    I3 = ti.Matrix.identity(float, 3)
    tau = ti.Matrix.zero(float, 3, 3)
    Jp_new = Jp
    if kind == LIQUID:
        # pressure only (mu = 0, lam = bulk modulus), plus Newtonian viscosity p0 on sym(C) ~ sym(grad v)
        J = F.determinant()
        F = I3 * ti.pow(ti.max(J, 1e-6), 1.0 / 3.0)
        tau = I3 * lam * J * (J - 1) + p0 * J * (C + C.transpose())
    else:
        U, sig, V = ti.svd(F)
        s = ti.Vector([sig[0, 0], sig[1, 1], sig[2, 2]])
        if kind == ELASTOPLASTIC:
            eps = ti.log(ti.max(ti.abs(s), 1e-4))
            dev = eps - eps.sum() / 3.0
            norm = dev.norm()
            if norm > p0:  # von Mises: back to the yield surface along the deviator
                eps -= (norm - p0) / norm * dev
                s = ti.exp(eps)
        elif kind == SAND:
            # Jp holds the volume gained in tension (Klar et al. 2016, volume correction): a particle that separated
            # must recompress that much before it carries load again. The correction is volumetric, log(Jp) / 3 on
            # each principal strain; the projection acts on the deviator of the corrected strain.
            eps = ti.log(ti.max(ti.abs(s), 1e-4)) + ti.log(Jp) / 3.0
            tr = eps.sum()
            dev = eps - tr / 3.0
            norm = dev.norm() + 1e-20
            if tr >= 0.0:  # expansion: the cohesionless material cannot carry tension (the cone's tip)
                s = ti.Vector([1.0, 1.0, 1.0])
                Jp_new = ti.exp(tr)
            else:
                Jp_new = 1.0
                delta_gamma = norm + (3.0 * lam + 2.0 * mu) / (2.0 * mu) * tr * p0
                s = ti.exp(eps - ti.max(delta_gamma, 0.0) / norm * dev)
        elif kind == SNOW:
            s_old = s
            for d in ti.static(range(3)):
                s[d] = ti.min(ti.max(s[d], 1.0 - p0), 1.0 + p1)
            Jp_new = Jp * (s_old[0] * s_old[1] * s_old[2]) / (s[0] * s[1] * s[2])
            h = ti.min(ti.max(ti.exp(p2 * (1.0 - Jp_new)), 0.1), 5.0)
            mu *= h
            lam *= h
        F = U @ ti.Matrix([[s[0], 0.0, 0.0], [0.0, s[1], 0.0], [0.0, 0.0, s[2]]]) @ V.transpose()
        J = s[0] * s[1] * s[2]
        if kind == SAND:
            # St. Venant-Kirchhoff on the Hencky strain: tau = U (2 mu eps + lambda tr(eps) I) U^T
            eps = ti.log(ti.max(ti.abs(s), 1e-4))
            d = 2.0 * mu * eps + lam * eps.sum()
            tau = U @ ti.Matrix([[d[0], 0.0, 0.0], [0.0, d[1], 0.0], [0.0, 0.0, d[2]]]) @ U.transpose()
        else:
            tau = fixed_corotated(F, U, V, J, mu, lam)
    return F, Jp_new, tau
