"""The FEM strain energies, probed pointwise (kernels.probe) and in a stretched bar: stress = dpsi/dF, the
Hessian = dP/dF where its projection does not act, the projected Hessian positive semi-definite everywhere,
rest stability, frame indifference, the shared small-strain response, and Neo-Hookean uniaxial tension."""

import numpy as np
import pytest
import torch

import genesis_core as gs
from genesis_fem import kernels as K

MODELS = {"linear": K.LINEAR, "linear_corotated": K.COROTATED, "stable_neohookean": K.NEOHOOKEAN}
MU, LAM = 1.0, 2.0  # nu = 1/3; the energies are linear in (mu, lam), so unit scale loses nothing
K_A = 0.7  # the muscle term's stiffness * actuation


def probe(F, dF=None, model=K.LINEAR, mu=MU, lam=LAM, k_a=0.0, m=None):
    """(psi [n], P [n, 3, 3], dP [n, 3, 3]) at the deformation gradients F [n, 3, 3]; dP = H(F) : dF."""
    F = np.asarray(F, dtype=np.float64).reshape(-1, 3, 3)
    n = len(F)
    dF = np.zeros_like(F) if dF is None else np.broadcast_to(np.asarray(dF, dtype=np.float64), F.shape)
    m = np.tile([0.0, 0.0, 1.0], (n, 1)) if m is None else np.broadcast_to(np.asarray(m, np.float64), (n, 3))

    def t(x):
        return torch.as_tensor(np.ascontiguousarray(x), dtype=torch.float64)

    psi, P, dP = torch.zeros(n, dtype=torch.float64), t(np.zeros((n, 3, 3))), t(np.zeros((n, 3, 3)))
    K.probe(t(F), t(dF), int(model), float(mu), float(lam), float(k_a), t(m), psi, P, dP,
            torch.zeros(1, n, K.HD_N, dtype=torch.float64))
    return psi.numpy(), P.numpy(), dP.numpy()


def rotations(rng, n):
    q, r = np.linalg.qr(rng.standard_normal((n, 3, 3)))
    q = q * np.sign(np.diagonal(r, axis1=1, axis2=2))[:, None, :]
    q[np.linalg.det(q) < 0, :, 0] *= -1
    return q


def random_F(rng, n=24, spread=0.3, min_det=0.5):
    """Well-conditioned gradients: I + noise with det > min_det, and rotated-and-stretched R1 diag(s) R2^T."""
    F = np.eye(3) + spread * rng.standard_normal((4 * n, 3, 3))
    F = F[np.linalg.det(F) > min_det][: n - n // 3]
    s = rng.uniform(0.7, 1.5, (n // 3, 3))
    R1, R2 = rotations(rng, n // 3), rotations(rng, n // 3)
    return np.concatenate([F, R1 @ (s[:, :, None] * np.swapaxes(R2, 1, 2))])


def unit(rng, n):
    m = rng.standard_normal((n, 3))
    return m / np.linalg.norm(m, axis=1, keepdims=True)


def hessian_matrices(F, model, k_a=0.0, m=None):
    """[n, 9, 9]: the projected Hessian, column j its action on the j-th unit dF (row-major)."""
    H = np.zeros((len(F), 9, 9))
    for j in range(9):
        dF = np.zeros(9)
        dF[j] = 1.0
        H[:, :, j] = probe(F, dF.reshape(3, 3), model, k_a=k_a, m=m)[2].reshape(-1, 9)
    return H


def fd_hessian(F, model, k_a=0.0, m=None, h=1e-6):
    """[n, 9, 9]: central differences of P."""
    H = np.zeros((len(F), 9, 9))
    for j in range(9):
        E = np.zeros(9)
        E[j] = h
        E = E.reshape(3, 3)
        H[:, :, j] = ((probe(F + E, model=model, k_a=k_a, m=m)[1] - probe(F - E, model=model, k_a=k_a, m=m)[1])
                      .reshape(-1, 9) / (2 * h))
    return H


@pytest.mark.parametrize("k_a", [0.0, K_A], ids=["elastic", "muscle"])
@pytest.mark.parametrize("model", list(MODELS))
def test_stress_is_the_energy_gradient(model, k_a):
    """P = dpsi/dF against central differences (h = 1e-6) at 24 well-conditioned F, 8 of them rotated and
    stretched. Measured: relative error at most 1.3e-9 (corotated, whose SVD sets it), 3e-10 otherwise."""
    rng = np.random.default_rng(1)
    F = random_F(rng)
    m = unit(rng, len(F))
    code = MODELS[model]
    psi, P, _ = probe(F, model=code, k_a=k_a, m=m)
    h = 1e-6
    P_fd = np.zeros_like(P)
    for a in range(3):
        for b in range(3):
            E = np.zeros((3, 3))
            E[a, b] = h
            P_fd[:, a, b] = (probe(F + E, model=code, k_a=k_a, m=m)[0] - probe(F - E, model=code, k_a=k_a, m=m)[0]) / (2 * h)
    err = np.abs(P - P_fd).max(axis=(1, 2)) / np.abs(P).max(axis=(1, 2))
    assert err.max() < 1e-6, err.max()
    assert np.isfinite(psi).all() and (psi >= -1e-12).all()  # none of the energies is negative (muscle: k a |Fm|)


def _stretches(rng, n=12):
    """F = R1 diag(s) R2^T with s in [1.08, 1.14]: moderate stretch, where no eigenvalue of the Hessian is
    negative for these models at nu = 1/3 (near rest the twist modes of corotated and SNH are ~0 and compression
    makes them negative; SNH's flip modes turn negative past J ~ 1.5 here, with s in [1.02, 1.3])."""
    s = rng.uniform(1.08, 1.14, (n, 3))
    R1, R2 = rotations(rng, n), rotations(rng, n)
    return R1 @ (s[:, :, None] * np.swapaxes(R2, 1, 2))




def _check_hessian(F, code, k_a, m, rng, positive=True):
    H_fd = fd_hessian(F, code, k_a, m)
    ev = np.linalg.eigvalsh(0.5 * (H_fd + np.swapaxes(H_fd, 1, 2)))
    # the regime is the intended one: no negative eigenvalue, so the projection has nothing to clamp (a muscle
    # adds a zero mode along F m; SNH's twist modes are exactly 0 at rest)
    assert (ev[:, 0] > (0.01 if positive else -1e-6) * ev[:, -1]).all(), (ev[:, 0] / ev[:, -1]).min()
    H = hessian_matrices(F, code, k_a, m)
    scale = np.abs(H_fd).max(axis=(1, 2))
    err = (np.abs(H - H_fd).max(axis=(1, 2)) / scale).max()
    assert err < 1e-6, err
    dF = rng.standard_normal(F.shape)
    _, _, dP = probe(F, dF, code, k_a=k_a, m=m)
    h = 1e-6
    dP_fd = (probe(F + h * dF, model=code, k_a=k_a, m=m)[1] - probe(F - h * dF, model=code, k_a=k_a, m=m)[1]) / (2 * h)
    assert (np.abs(dP - dP_fd).max(axis=(1, 2)) / np.abs(dP_fd).max(axis=(1, 2))).max() < 1e-6


@pytest.mark.parametrize("k_a", [0.0, K_A], ids=["elastic", "muscle"])
@pytest.mark.parametrize("model", list(MODELS))
def test_hessian_is_the_stress_derivative_where_unprojected(model, k_a):
    """Where the exact Hessian is positive definite (moderate stretch, distinct singular values; any F for the
    constant linear one) the projected Hessian is the exact one: its 9x9 matrix equals central differences of P,
    and it applied to random dF equals the directional difference of P. Measured: <= 1.8e-10 relative (linear, SNH);
    SNH's smallest eigenvalue over the largest >= 0.05 (no muscle). Corotated: 1e-7 (its differences of P, through ti.svd)."""
    rng = np.random.default_rng(2)
    F = _stretches(rng) if model != "linear" else random_F(rng, 12)
    m = unit(rng, len(F))
    _check_hessian(F, MODELS[model], k_a, m, rng, positive=k_a == 0.0 and model != "linear")


def test_neohookean_hessian_at_repeated_singular_values():
    """The same check for stable Neo-Hookean at F with repeated singular values, where its exact Hessian is still
    positive semi-definite (min eigenvalue / max >= -1e-10 measured): rest (F = I, a rotation), and uniaxial /
    biaxial stretch R diag(1.2, 1.1, 1.1) Q^T, R diag(1.15, 1.15, 1.05) Q^T. Measured: 1e-10 (an eigensolver that is not robust to
    repeated eigenvalues, Taichi's sym_eig, gave 0.70 relative); the differences of P agree with each other to 1.6e-10 for h in 1e-5..1e-6.
    (Corotated is left out here: ti.svd's singular vectors at repeated singular values make its P's differences
    noisy, 1e-3 relative.)"""
    model = "stable_neohookean"
    rng = np.random.default_rng(8)
    R, Q = rotations(rng, 3), rotations(rng, 3)
    F = np.stack([np.eye(3), R[0], R[1] @ np.diag([1.2, 1.1, 1.1]) @ Q[1].T,
                  R[2] @ np.diag([1.15, 1.15, 1.05]) @ Q[2].T])
    _check_hessian(F, MODELS[model], 0.0, unit(rng, len(F)), rng, positive=False)


@pytest.mark.parametrize("model", list(MODELS))
def test_projected_hessian_is_positive_semidefinite(model):
    """At 64 random F, a third of them inverted (det < 0), with a muscle term: the 9x9 projected Hessian is
    symmetric and has no negative eigenvalue (measured: min eigenvalue / max >= -1.5e-16, asymmetry <= 5e-16)."""
    rng = np.random.default_rng(3)
    F = np.eye(3) + 0.8 * rng.standard_normal((64, 3, 3))
    assert (np.linalg.det(F) < 0).sum() >= 10
    m = unit(rng, len(F))
    H = hessian_matrices(F, MODELS[model], K_A, m)
    scale = np.abs(H).max(axis=(1, 2))
    assert (np.abs(H - np.swapaxes(H, 1, 2)).max(axis=(1, 2)) / scale).max() < 1e-10
    ev = np.linalg.eigvalsh(0.5 * (H + np.swapaxes(H, 1, 2)))
    assert (ev[:, 0] / ev[:, -1]).min() > -1e-10, (ev[:, 0] / ev[:, -1]).min()
    if model != "linear":
        # the projection acts here: the exact Hessian has negative eigenvalues at some of these F
        H_fd = fd_hessian(F, MODELS[model], K_A, m)
        ev_fd = np.linalg.eigvalsh(0.5 * (H_fd + np.swapaxes(H_fd, 1, 2)))
        assert (ev_fd[:, 0] < -0.01 * ev_fd[:, -1]).sum() >= 5


@pytest.mark.parametrize("model", list(MODELS))
def test_rest_is_energy_and_stress_free(model):
    """psi(I) = 0 and P(I) = 0 (exactly, to round-off), and the energy grows away from rest."""
    psi, P, _ = probe(np.eye(3)[None], model=MODELS[model], mu=3e5, lam=7e5)
    assert abs(psi[0]) < 1e-9 and np.abs(P).max() < 1e-9, (psi, P)
    rng = np.random.default_rng(4)
    psi, _, _ = probe(np.eye(3) + 0.05 * rng.standard_normal((16, 3, 3)), model=MODELS[model])
    assert (psi > 0).all()


@pytest.mark.parametrize("model", ["linear_corotated", "stable_neohookean"])
def test_energy_is_rotation_invariant(model):
    """psi(R F) = psi(F) and P(R F) = R P(F) for random rotations R (measured: 1e-15 / 1.6e-15 relative for SNH,
    2e-15 / 6e-15 for corotated); the linear model, which is not, fails the same check (by 1.3 relative)."""
    rng = np.random.default_rng(5)
    F = random_F(rng, 16)
    R = rotations(rng, len(F))
    for name, code in MODELS.items():
        if name not in (model, "linear"):
            continue
        psi, P, _ = probe(F, model=code)
        psi_r, P_r, _ = probe(R @ F, model=code)
        err_psi = np.abs(psi_r - psi).max() / np.abs(psi).max()
        err_P = (np.abs(P_r - R @ P).max(axis=(1, 2)) / np.abs(P).max(axis=(1, 2))).max()
        if name == "linear":
            assert err_psi > 1e-2
        else:
            assert err_psi < 1e-10 and err_P < 1e-7, (err_psi, err_P)


def test_small_strain_response_is_shared():
    """At F = I + 1e-6 G the three models' stresses agree with 2 mu eps + lam tr(eps) I (the small-strain response
    of (mu, lam) that they share)."""
    rng = np.random.default_rng(6)
    G = rng.standard_normal((16, 3, 3))
    F = np.eye(3) + 1e-6 * G
    eps = 0.5 * (G + np.swapaxes(G, 1, 2)) * 1e-6
    expect = 2 * MU * eps + LAM * np.trace(eps, axis1=1, axis2=2)[:, None, None] * np.eye(3)
    scale = np.abs(expect).max(axis=(1, 2))
    # measured: linear 2.3e-10, SNH 4.4e-6 (the second-order terms), corotated 5.1e-5: ti.svd's rotation near
    # the identity (three equal singular values) is accurate to ~1e-10 only, against F - R ~ 1e-6
    tolerance = {"linear": 1e-8, "linear_corotated": 2e-4, "stable_neohookean": 1e-4}
    for name, code in MODELS.items():
        P = probe(F, model=code)[1]
        err = (np.abs(P - expect).max(axis=(1, 2)) / scale).max()
        assert err < tolerance[name], (name, err)


def _snh_params(mu, lam):
    mu_s = 4 * mu / 3
    lam_s = lam + 5 * mu / 6
    return mu_s, lam_s, 1 + 3 * mu_s / (4 * lam_s)


def snh_uniaxial(stretch, mu, lam):
    """(lateral stretch s, P_xx) of psi = mu'/2 (I_C - 3) + lam'/2 (J - a)^2 - mu'/2 log(I_C + 1) at
    F = diag(l, s, s) with P_yy = 0: dpsi/dF = mu' (1 - 1 / (I_C + 1)) F + lam' (J - a) cof(F), cof = diag(s^2,
    l s, l s); P_yy / s = mu' (1 - 1 / (I_C + 1)) + lam' (l s^2 - a) l, increasing in s: bisection."""
    mu_s, lam_s, a = _snh_params(mu, lam)
    lo, hi = 1e-3, 3.0

    def pyy(s):
        ic = stretch ** 2 + 2 * s * s
        return mu_s * (1 - 1 / (ic + 1)) + lam_s * (stretch * s * s - a) * stretch

    assert pyy(lo) < 0 < pyy(hi)
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if pyy(mid) < 0 else (lo, mid)
    s = 0.5 * (lo + hi)
    ic = stretch ** 2 + 2 * s * s
    pxx = mu_s * (1 - 1 / (ic + 1)) * stretch + lam_s * (stretch * s * s - 1 - 3 * mu_s / (4 * lam_s)) * s * s
    return s, pxx


def test_neohookean_uniaxial_stress_matches_the_formula():
    """F = diag(l, s, s) with s the analytic lateral stretch of free uniaxial tension/compression: the probed
    P_xx is the analytic one and the lateral stresses vanish (measured: <= 6e-15 relative); rotated,
    P(R F Q^T) = R P(F) Q^T."""
    E, nu = 1e6, 0.3
    mu, lam = E / (2 * (1 + nu)), E * nu / ((1 + nu) * (1 - 2 * nu))
    rng = np.random.default_rng(7)
    for stretch in (0.7, 0.95, 1.05, 1.3, 1.8):
        s, pxx = snh_uniaxial(stretch, mu, lam)
        F = np.diag([stretch, s, s])[None]
        P = probe(F, model=K.NEOHOOKEAN, mu=mu, lam=lam)[1][0]
        assert P[0, 0] == pytest.approx(pxx, rel=1e-10)
        assert np.abs(P - np.diag([pxx, 0, 0])).max() < 1e-10 * abs(pxx)
        # small strains: the lateral stretch is 1 - nu (l - 1) and the stress E (l - 1) to first order
        if abs(stretch - 1) < 0.1:
            assert s - 1 == pytest.approx(-nu * (stretch - 1), rel=0.1)
            assert pxx == pytest.approx(E * (stretch - 1), rel=0.1)
        R, Q = rotations(rng, 2)
        P_rot = probe(R @ F[0] @ Q.T, model=K.NEOHOOKEAN, mu=mu, lam=lam)[1][0]
        assert np.abs(P_rot - R @ P @ Q.T).max() < 1e-9 * abs(pxx)


def test_neohookean_bar_stretched_contracts_as_analytic():
    """A stable Neo-Hookean bar 0.4 x 0.05 x 0.05 m (cells 1/60 m: 1296 tets), the x-min face held, the x-max
    face pulled by hard constraints to a stretch of 1.3 in 2 implicit steps (dt 1 s: quasi-static), gravity off,
    then relaxed 2 more steps: the middle cross-section's lateral stretch is the analytic uniaxial s (0.91554 at
    nu = 0.3) within 1%, its axial stretch 1.3 within 1%. Measured: lateral 0.91390 (-0.18%; -0.15% with cells
    of 1/80 m), the Newton iterations 6, 4, 6, 3 with 1191, 486, 620, 414 CG iterations."""
    E, nu, L, w = 1e5, 0.3, 0.4, 0.05
    h = w / 3
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=1.0, substeps=1, gravity=(0, 0, 0)),
                     fem_options=gs.options.FEMOptions(use_implicit_solver=True, n_newton_iterations=6,
                                                       n_linesearch_iterations=8, n_pcg_iterations=400,
                                                       pcg_threshold=1e-8, newton_dx_threshold=1e-9,
                                                       damping_alpha=0.0, damping_beta=0.0, floor_height=-10.0))
    bar = scene.add_entity(gs.morphs.Box(pos=(0, 0, 0), size=(L, w, w), maxvolume=h ** 3 / 3),
                           material=gs.materials.FEM.Elastic(E=E, nu=nu, rho=1000.0, model="stable_neohookean"))
    scene.build()
    X = bar.get_particles_pos().numpy().copy()
    assert bar.n_elements == 24 * 3 * 3 * 6
    left = np.nonzero(X[:, 0] < -L / 2 + 1e-9)[0]
    right = np.nonzero(X[:, 0] > L / 2 - 1e-9)[0]
    ends = np.concatenate([left, right])
    bar.set_vertex_constraints(ends, X[ends])
    stretch = 1.3
    for k in (1, 2, 2, 2):
        target = X[ends].copy()
        target[:, 0] = -L / 2 + (1 + (stretch - 1) * k / 2) * (target[:, 0] + L / 2)
        bar.update_constraint_targets(ends, target)
        scene.step()
    x = bar.get_particles_pos().numpy()
    assert np.array_equal(x[ends], target)  # the hard constraints hold exactly
    mid = np.abs(X[:, 0]) < 1e-9
    assert mid.sum() == 16
    s_analytic, _ = snh_uniaxial(stretch, E / (2 * (1 + nu)), E * nu / ((1 + nu) * (1 - 2 * nu)))
    # lateral stretch: the cross-section's vertices around its centre, against their rest offsets
    r0 = X[mid][:, 1:]
    r = x[mid][:, 1:] - x[mid][:, 1:].mean(0)
    lateral = (np.linalg.norm(r, axis=1) / np.linalg.norm(r0, axis=1)).mean()
    print(f"lateral stretch {lateral:.5f}, analytic {s_analytic:.5f}")
    assert lateral == pytest.approx(s_analytic, rel=0.01)
    assert abs(lateral - 1) > 0.05  # it did contract (a bar that stayed 1 fails the check above by 9%)
    # axial: the spacing of the cross-sections a cell on each side of the middle
    near = [np.abs(X[:, 0] - d) < 1e-9 for d in (-h, h)]
    axial = (x[near[1], 0].mean() - x[near[0], 0].mean()) / (2 * h)
    assert axial == pytest.approx(stretch, rel=0.01)
    assert x[mid, 0].mean() == pytest.approx(-L / 2 + stretch * L / 2, abs=1e-4)
