"""The FEM kernels: linear tetrahedra, the three strain energies, the explicit substep and the implicit one's
Newton / conjugate-gradient / line-search stages.

Notation. An element e has vertices (v0, v1, v2, v3); Ds = [x1 - x0, x2 - x0, x3 - x0], Dm the same at rest,
F = Ds Dm^-1 its deformation gradient, W = |det Dm| / 6 its rest volume. Its elastic energy is W psi(F), so the
force on v1..v3 is the columns of -W P Dm^-T (P = dpsi/dF, the first Piola-Kirchhoff stress) and v0 takes minus
their sum. Arrays: pos, vel [frames, B, V, 3] (environment b, vertex i); per element [B, E, ...].

Forces are computed per element into `ef` [B, 4 E] and gathered per vertex over its incident elements in a fixed
order: the (element, corner) pair 4 e + k writes row `slot[4 e + k]`, and the rows are laid out vertex by vertex
(vertex i's are v_start[i] .. v_start[i + 1] - 1, in element order), so each gather reads contiguous rows: no
atomics, so results are bitwise repeatable and independent of the thread
schedule and of other environments; the same kernels serve differentiable mode (their reverse is Taichi's).

Every model is one function, `energy_stress`, that returns psi and P together; the implicit solver's Hessian
is the derivative of that P, written in the frame of F's singular vectors (Smith et al. 2019, "Analytic
eigensystems for isotropic distortion energies": three scaling modes and a twist and a flip mode per pair of
axes), with its eigenvalues clamped at zero so that every Newton system is positive definite.
"""

import taichi as ti


# SERIAL: the element and vertex loops run on one thread. A parallel loop costs about 70 us a launch on a 2-core
# CPU (the thread pool's wake-up), more than a small mesh's whole work: for small meshes the solver takes the
# kernels' serial copies (`load(serial=True)`, genesis_core.launch.serial_variant), otherwise the same.
SERIAL = False

V3 = ti.types.vector(3, float)
M3 = ti.types.matrix(3, 3, float)
nd = ti.types.ndarray

LINEAR, COROTATED, NEOHOOKEAN = 0, 1, 2
MODEL_CODES = {"linear": LINEAR, "linear_corotated": COROTATED, "stable_neohookean": NEOHOOKEAN}
FREE, HARD, SOFT = 0, 1, 2  # vertex constraint kinds

# params [P_N]
P_DT, P_GX, P_GY, P_GZ, P_DAMP, P_FLOOR, P_FLOOR_ON, P_ALPHA, P_BETA, P_N = range(10)
# element info (int) [E, EI_N]; e_k [E]: the muscle stiffness (0: not a muscle); mdir [B, E, 3]: fibre directions
EI_ENTITY, EI_MODEL, EI_N = 0, 1, 2
# Hessian data per element [B, E, HD_N]: U (9), V (9), A (6: xx yy zz xy xz yz), twist (3), flip (3) for pairs
# (0 1), (0 2), (1 2); the muscle's unit fibre image u (3) and k a / |F m| (1)
HD_U, HD_V, HD_A, HD_TW, HD_FL, HD_MU, HD_MK, HD_N = 0, 9, 18, 24, 27, 30, 33, 34
PAIRS = ((0, 1, 2), (0, 2, 1), (1, 2, 0))  # (i, j, the third axis k)

EPS = 1e-12


# -- the strain energies --------------------------------------------------------------------------------------------

@ti.func
def lame(E, nu):
    return E / (2.0 * (1.0 + nu)), E * nu / ((1.0 + nu) * (1.0 - 2.0 * nu))


@ti.func
def neohookean_params(mu, lam):
    """Smith et al. 2018's parameters with the small-strain response of the Lame pair (mu, lam)."""
    mu_s = 4.0 / 3.0 * mu
    lam_s = lam + 5.0 / 6.0 * mu
    return mu_s, lam_s, 1.0 + 0.75 * mu_s / lam_s


@ti.func
def cofactor(F):
    """dJ/dF: its columns are the cross products of F's other two columns."""
    c0 = F[:, 1].cross(F[:, 2])
    c1 = F[:, 2].cross(F[:, 0])
    c2 = F[:, 0].cross(F[:, 1])
    return ti.Matrix.cols([c0, c1, c2])


@ti.func
def svd_rv(F):
    """F = U diag(s) V^T with U, V rotations (det +1); the last singular value carries a reflection's sign."""
    U, S, V = ti.svd(F)
    s = ti.Vector([S[0, 0], S[1, 1], S[2, 2]])
    if U.determinant() < 0.0:
        for r in ti.static(range(3)):
            U[r, 2] = -U[r, 2]
        s[2] = -s[2]
    if V.determinant() < 0.0:
        for r in ti.static(range(3)):
            V[r, 2] = -V[r, 2]
        s[2] = -s[2]
    return U, s, V


@ti.func
def energy_stress(F, model: ti.template(), mu, lam):
    """(psi, P): the energy per unit rest volume (J/m^3, zero at rest) and its derivative dpsi/dF (Pa)."""
    psi = 0.0
    P = ti.Matrix.zero(float, 3, 3)
    I = ti.Matrix.identity(float, 3)
    if ti.static(model == LINEAR):
        eps = 0.5 * (F + F.transpose()) - I
        tr = eps.trace()
        psi = mu * (eps * eps).sum() + 0.5 * lam * tr * tr
        P = 2.0 * mu * eps + lam * tr * I
    elif ti.static(model == NEOHOOKEAN):
        mu_s, lam_s, a = neohookean_params(mu, lam)
        ic = (F * F).sum()
        J = F.determinant()
        psi = (0.5 * mu_s * (ic - 3.0) + 0.5 * lam_s * (J - a) ** 2 - 0.5 * mu_s * ti.log((ic + 1.0) / 4.0)
               - 0.5 * lam_s * (1.0 - a) ** 2)
        P = mu_s * (1.0 - 1.0 / (ic + 1.0)) * F + lam_s * (J - a) * cofactor(F)
    else:
        U, s, V = svd_rv(F)
        R = U @ V.transpose()
        d = s - ti.Vector([1.0, 1.0, 1.0])
        tr = d.sum()
        psi = mu * d.dot(d) + 0.5 * lam * tr * tr
        P = 2.0 * mu * (F - R) + lam * tr * R
    return psi, P


@ti.func
def muscle_energy_stress(F, k_a, m):
    """The fibre's energy k a |F m| and its stress k a / |F m| F m m^T."""
    u = F @ m
    length = ti.sqrt(u.dot(u) + EPS * EPS)
    return k_a * length, (k_a / length) * u.outer_product(m)


@ti.func
def psd_projection(A):
    """The symmetric 3x3 matrix A with its negative eigenvalues set to zero. Cyclic Jacobi rotations (six sweeps:
    converged to round-off), robust where eigenvalues repeat."""
    D = A
    Q = ti.Matrix.identity(float, 3)
    for _sweep in range(6):
        for p, q in ti.static(((0, 1), (0, 2), (1, 2))):
            apq = D[p, q]
            rotate = ti.abs(apq) > 1e-300
            theta = (D[q, q] - D[p, p]) / ti.select(rotate, 2.0 * apq, 1.0)
            t = ti.select(rotate, ti.select(theta >= 0.0, 1.0, -1.0) / (ti.abs(theta) + ti.sqrt(theta * theta + 1.0)),
                          0.0)
            c = 1.0 / ti.sqrt(t * t + 1.0)
            R = ti.Matrix.identity(float, 3)
            R[p, p] = c
            R[q, q] = c
            R[p, q] = t * c
            R[q, p] = -t * c
            Dn = R.transpose() @ D @ R
            Qn = Q @ R
            for i, j in ti.static(ti.ndrange(3, 3)):
                D[i, j] = Dn[i, j]
                Q[i, j] = Qn[i, j]
    L = ti.Matrix.zero(float, 3, 3)
    for i in ti.static(range(3)):
        L[i, i] = ti.max(D[i, i], 0.0)
    return Q @ L @ Q.transpose()


@ti.func
def hessian_data(F, model: ti.template(), mu, lam, k_a, m, hd: ti.template(), b, e):
    """Write what `hessian_apply` needs at F into hd[b, e, :], projected to positive semi-definite: the twist and
    flip eigenvalues clamped at zero, the scaling block's eigenvalues too (stable Neo-Hookean; the corotated
    block 2 mu I + lam 1 1^T is positive semi-definite already)."""
    U = ti.Matrix.identity(float, 3)
    V = ti.Matrix.identity(float, 3)
    A = ti.Matrix.zero(float, 3, 3)
    tw = ti.Vector([0.0, 0.0, 0.0])
    fl = ti.Vector([0.0, 0.0, 0.0])
    # (element-wise writes throughout: a name re-bound inside a static branch would not reach the code after it)
    if ti.static(model != LINEAR):
        Us, s, Vs = svd_rv(F)
        for r, c in ti.static(ti.ndrange(3, 3)):
            U[r, c] = Us[r, c]
            V[r, c] = Vs[r, c]
        if ti.static(model == NEOHOOKEAN):
            mu_s, lam_s, a = neohookean_params(mu, lam)
            ic = s.dot(s)
            J = s[0] * s[1] * s[2]
            c1 = mu_s * (1.0 - 1.0 / (ic + 1.0))
            c2 = 2.0 * mu_s / (ic + 1.0) ** 2
            Jd = ti.Vector([s[1] * s[2], s[0] * s[2], s[0] * s[1]])
            g = lam_s * (J - a)
            for i, j in ti.static(ti.ndrange(3, 3)):
                A[i, j] = c2 * s[i] * s[j] + lam_s * Jd[i] * Jd[j]
                if ti.static(i == j):
                    A[i, j] += c1
                else:
                    A[i, j] += g * s[3 - i - j]
            for q in ti.static(range(3)):
                k = PAIRS[q][2]
                tw[q] = ti.max(c1 + g * s[k], 0.0)
                fl[q] = ti.max(c1 - g * s[k], 0.0)
            Ap = psd_projection(A)
            for i, j in ti.static(ti.ndrange(3, 3)):
                A[i, j] = Ap[i, j]
        else:
            tr = s.sum() - 3.0
            for i, j in ti.static(ti.ndrange(3, 3)):
                A[i, j] = lam
                if ti.static(i == j):
                    A[i, j] += 2.0 * mu
            for q in ti.static(range(3)):
                i, j = PAIRS[q][0], PAIRS[q][1]
                tw[q] = ti.max(2.0 * mu + (2.0 * lam * tr - 4.0 * mu) / ti.max(s[i] + s[j], 1e-6), 0.0)
                fl[q] = 2.0 * mu
    u = F @ m
    length = ti.sqrt(u.dot(u) + EPS * EPS)
    for r, c in ti.static(ti.ndrange(3, 3)):
        hd[b, e, HD_U + 3 * r + c] = U[r, c]
        hd[b, e, HD_V + 3 * r + c] = V[r, c]
    for q in ti.static(range(3)):
        hd[b, e, HD_A + q] = A[q, q]
        hd[b, e, HD_TW + q] = tw[q]
        hd[b, e, HD_FL + q] = fl[q]
        hd[b, e, HD_MU + q] = u[q] / length
    hd[b, e, HD_A + 3] = A[0, 1]
    hd[b, e, HD_A + 4] = A[0, 2]
    hd[b, e, HD_A + 5] = A[1, 2]
    hd[b, e, HD_MK] = ti.max(k_a, 0.0) / length


@ti.func
def hessian_apply(dF, model: ti.template(), mu, lam, m, hd: ti.template(), b, e):
    """d2psi/dF2 : dF at the F that `hessian_data` saw (the projected Hessian for the non-linear models)."""
    dP = ti.Matrix.zero(float, 3, 3)
    if ti.static(model == LINEAR):
        dP = mu * (dF + dF.transpose()) + lam * dF.trace() * ti.Matrix.identity(float, 3)
    else:
        U = ti.Matrix.zero(float, 3, 3)
        V = ti.Matrix.zero(float, 3, 3)
        for r, c in ti.static(ti.ndrange(3, 3)):
            U[r, c] = hd[b, e, HD_U + 3 * r + c]
            V[r, c] = hd[b, e, HD_V + 3 * r + c]
        A = ti.Matrix([[hd[b, e, HD_A + 0], hd[b, e, HD_A + 3], hd[b, e, HD_A + 4]],
                       [hd[b, e, HD_A + 3], hd[b, e, HD_A + 1], hd[b, e, HD_A + 5]],
                       [hd[b, e, HD_A + 4], hd[b, e, HD_A + 5], hd[b, e, HD_A + 2]]])
        G = U.transpose() @ dF @ V
        diag = A @ ti.Vector([G[0, 0], G[1, 1], G[2, 2]])
        H = ti.Matrix.zero(float, 3, 3)
        for q in ti.static(range(3)):
            H[q, q] = diag[q]
        for q in ti.static(range(3)):
            i, j = PAIRS[q][0], PAIRS[q][1]
            sym = 0.5 * (G[i, j] + G[j, i]) * hd[b, e, HD_FL + q]
            skw = 0.5 * (G[i, j] - G[j, i]) * hd[b, e, HD_TW + q]
            H[i, j] = sym + skw
            H[j, i] = sym - skw
        dP = U @ H @ V.transpose()
    u = ti.Vector([hd[b, e, HD_MU], hd[b, e, HD_MU + 1], hd[b, e, HD_MU + 2]])
    w = dF @ m
    dP += hd[b, e, HD_MK] * (w - u * u.dot(w)).outer_product(m)
    return dP


def per_model(make):
    """{model code: the kernel make(model) compiled for it}: each kernel runs one model on a range [e0, e1) of
    elements, the model a compile-time constant (no branch, and the reverse of each is Taichi's)."""
    return {code: make(code) for code in (LINEAR, COROTATED, NEOHOOKEAN)}


# -- element geometry ---------------------------------------------------------------------------------------------

@ti.func
def element_F(pos: ti.template(), fr, b, el2v: ti.template(), Dm_inv: ti.template(), e):
    x0 = pos[fr, b, el2v[e, 0]]
    Ds = ti.Matrix.cols([pos[fr, b, el2v[e, 1]] - x0, pos[fr, b, el2v[e, 2]] - x0, pos[fr, b, el2v[e, 3]] - x0])
    return Ds @ Dm_inv[e]


@ti.func
def element_dF(x: ti.template(), b, el2v: ti.template(), Dm_inv: ti.template(), e):
    """The deformation-gradient change of a displacement field x [B, V, 3]."""
    x0 = x[b, el2v[e, 0]]
    Ds = ti.Matrix.cols([x[b, el2v[e, 1]] - x0, x[b, el2v[e, 2]] - x0, x[b, el2v[e, 3]] - x0])
    return Ds @ Dm_inv[e]


@ti.func
def store_forces(out: ti.template(), slot: ti.template(), b, e, H):
    """H = -W P Dm^-T: columns are the forces on v1..v3; v0 takes minus their sum. out [B, 4 E]: corner k of
    element e in row slot[4 e + k]."""
    f1, f2, f3 = H[:, 0], H[:, 1], H[:, 2]
    out[b, slot[4 * e]] = -(f1 + f2 + f3)
    out[b, slot[4 * e + 1]] = f1
    out[b, slot[4 * e + 2]] = f2
    out[b, slot[4 * e + 3]] = f3


@ti.func
def element_material(e, b, e_info: ti.template(), e_k: ti.template(), mdir: ti.template(), E: ti.template(),
                     nu: ti.template(), actu: ti.template()):
    mu, lam = lame(E[b, e_info[e, EI_ENTITY]], nu[b, e_info[e, EI_ENTITY]])
    return mu, lam, e_k[e] * actu[b, e], mdir[b, e]


@ti.func
def element_energy(model: ti.template(), e, b, f, pos: ti.template(), el2v: ti.template(), Dm_inv: ti.template(),
                   e_info: ti.template(), e_k: ti.template(), mdir: ti.template(), E: ti.template(),
                   nu: ti.template(), actu: ti.template()):
    """(psi, P) of element e at frame f, the muscle's fibre term included."""
    mu, lam = lame(E[b, e_info[e, EI_ENTITY]], nu[b, e_info[e, EI_ENTITY]])
    F = element_F(pos, f, b, el2v, Dm_inv, e)
    psi, P = energy_stress(F, model, mu, lam)
    if e_k[e] != 0.0:  # a muscle's element (the others' fibre term is exactly zero: skipped)
        psi_m, P_m = muscle_energy_stress(F, e_k[e] * actu[b, e], mdir[b, e])
        psi += psi_m
        P += P_m
    return psi, P


# -- the explicit substep ------------------------------------------------------------------------------------------

def _element_forces(model):
    @ti.kernel
    def element_forces(e0: ti.i32, e1: ti.i32, f: ti.i32, pos: nd(dtype=V3, ndim=3), el2v: nd(ndim=2),
                       Dm_inv: nd(dtype=M3, ndim=1), vol: nd(ndim=1), e_info: nd(ndim=2), e_k: nd(ndim=1),
                       mdir: nd(dtype=V3, ndim=2), E: nd(ndim=2), nu: nd(ndim=2), actu: nd(ndim=2),
                       slot: nd(ndim=1), ef: nd(dtype=V3, ndim=2)):
        """ef[b, slot[4 e + corner]] = the elastic (and muscle) forces of element e on its four vertices at frame
        f."""
        ti.loop_config(serialize=SERIAL)
        for b, j in ti.ndrange(pos.shape[1], e1 - e0):
            e = e0 + j
            _psi, P = element_energy(model, e, b, f, pos, el2v, Dm_inv, e_info, e_k, mdir, E, nu, actu)
            store_forces(ef, slot, b, e, -vol[e] * P @ Dm_inv[e].transpose())

    return element_forces


element_forces = per_model(_element_forces)




@ti.kernel
def gather_ad(v_start: nd(ndim=1), ef: nd(dtype=V3, ndim=2), out: nd(dtype=V3, ndim=2)):
    """gather for differentiable mode (out zeroed before): the same sums in the same order, accumulated in the
    output so that the reverse needs no stack of the running sum."""
    ti.loop_config(serialize=SERIAL)
    for b, i in ti.ndrange(out.shape[0], out.shape[1]):
        for j in range(v_start[i], v_start[i + 1]):
            out[b, i] += ef[b, j]


@ti.func
def floor_under(z, prm: ti.template()):
    """The lowest height a vertex at height z may reach in this substep: the floor (no restitution, no friction),
    or z itself for a vertex that lies below it. As Genesis World's floor, which only takes away a vertex's
    downward velocity, it stops whatever is below it from descending without lifting it (a body may start below
    the floor)."""
    return ti.min(prm[P_FLOOR], z)


@ti.func
def vertex_update(f, fn, b, i, fe, prm: ti.template(), pos: ti.template(), vel: ti.template(), active: ti.template(),
                  mass: ti.template(), force: ti.template(), cons: ti.template(), cons_target: ti.template(),
                  cons_k: ti.template()):
    """Symplectic Euler for vertex i of environment b under the elastic force fe: v' = (v + dt f / m)
    exp(-damping dt) + dt g, x' = x + dt v'; then the floor (`floor_height`) and the hard constraints
    (x' = target, v' = 0)."""
    x0 = pos[f, b, i]
    v0 = vel[f, b, i]
    dt = prm[P_DT]
    g = ti.Vector([prm[P_GX], prm[P_GY], prm[P_GZ]])
    m = mass[i]
    k = ti.select(cons[b, i] == SOFT, cons_k[b, i], 0.0)
    fs = fe + force[b, i] - k * (x0 - cons_target[b, i]) - 2.0 * ti.sqrt(k * m) * v0
    v1 = (v0 + dt * fs / m) * ti.exp(-dt * prm[P_DAMP]) + dt * g
    x1 = x0 + dt * v1
    lowest = floor_under(x0[2], prm)
    on_floor = prm[P_FLOOR_ON] > 0.0 and x1[2] < lowest
    x2 = ti.Vector([x1[0], x1[1], ti.select(on_floor, lowest, x1[2])])
    v2 = ti.Vector([v1[0], v1[1], ti.select(on_floor, ti.max(v1[2], 0.0), v1[2])])
    hard = cons[b, i] == HARD
    x3 = ti.select(hard, cons_target[b, i], x2)
    v3 = ti.select(hard, ti.Vector([0.0, 0.0, 0.0]), v2)
    moving = active[b, i] != 0
    pos[fn, b, i] = ti.select(moving, x3, x0)
    vel[fn, b, i] = ti.select(moving, v3, v0)


@ti.kernel
def explicit_update(f: ti.i32, fn: ti.i32, prm: nd(ndim=1), pos: nd(dtype=V3, ndim=3), vel: nd(dtype=V3, ndim=3),
                    active: nd(ndim=2), mass: nd(ndim=1), vforce: nd(dtype=V3, ndim=2), force: nd(dtype=V3, ndim=2),
                    cons: nd(ndim=2), cons_target: nd(dtype=V3, ndim=2), cons_k: nd(ndim=2)):
    """The update of differentiable mode, under the gathered forces vforce (`gather_ad`)."""
    ti.loop_config(serialize=SERIAL)
    for b, i in ti.ndrange(pos.shape[1], pos.shape[2]):
        vertex_update(f, fn, b, i, vforce[b, i], prm, pos, vel, active, mass, force, cons, cons_target, cons_k)


@ti.kernel
def gather_update(f: ti.i32, fn: ti.i32, prm: nd(ndim=1), pos: nd(dtype=V3, ndim=3), vel: nd(dtype=V3, ndim=3),
                  active: nd(ndim=2), mass: nd(ndim=1), v_start: nd(ndim=1),
                  ef: nd(dtype=V3, ndim=2), force: nd(dtype=V3, ndim=2), cons: nd(ndim=2),
                  cons_target: nd(dtype=V3, ndim=2), cons_k: nd(ndim=2)):
    """The plain update in one pass: each vertex's elastic force is the sum of ef [B, 4 E] over its incident
    (element, corner) rows in their fixed order (the same sums as `gather_ad`), then `vertex_update`."""
    ti.loop_config(serialize=SERIAL)
    for b, i in ti.ndrange(pos.shape[1], pos.shape[2]):
        acc = ti.Vector([0.0, 0.0, 0.0])
        for j in range(v_start[i], v_start[i + 1]):
            acc += ef[b, j]
        vertex_update(f, fn, b, i, acc, prm, pos, vel, active, mass, force, cons, cons_target, cons_k)


# -- the implicit substep ------------------------------------------------------------------------------------------
# Backward Euler as a minimisation (Martin et al. 2011): x' = argmin E(x),
#   E(x) = sum_i m_i / (2 dt^2) |x_i - xhat_i|^2 + alpha / (2 dt) sum_i m_i |x_i - x_i^n|^2 + sum_e W_e psi(F_e(x))
#          + beta / (2 dt) (x - x^n)^T K (x - x^n) + sum_soft (k / 2 |x_i - t_i|^2 + c / (2 dt) |x_i - x_i^n|^2)
#          - sum_i f_i . x_i,
# xhat = x^n + dt v^n + dt^2 g, K the (projected) stiffness at the Newton iterate, c = 2 sqrt(k m); v' = (x' - x^n)
# / dt. Vertices held (hard constraints, inactive) are not unknowns. Newton: H d = -grad E by Jacobi-preconditioned
# (3x3 blocks) conjugate gradients, then x += s d with s from Armijo backtracking.

@ti.func
def vertex_coefficients(prm: ti.template(), mass: ti.template(), cons: ti.template(), cons_k: ti.template(), b,
                        i):
    """(the diagonal coefficient of the inertia, damping and soft-spring terms, the soft spring's k, its c)."""
    dt = prm[P_DT]
    m = mass[i]
    k = ti.select(cons[b, i] == SOFT, cons_k[b, i], 0.0)
    c = 2.0 * ti.sqrt(k * m)
    return m / (dt * dt) * (1.0 + prm[P_ALPHA] * dt) + k + c / dt, k, c


@ti.func
def held(active: ti.template(), cons: ti.template(), b, i):
    return active[b, i] == 0 or cons[b, i] == HARD


@ti.kernel
def implicit_begin(f: ti.i32, fn: ti.i32, prm: nd(ndim=1), pos: nd(dtype=V3, ndim=3), vel: nd(dtype=V3, ndim=3),
                   active: nd(ndim=2), cons: nd(ndim=2), cons_target: nd(dtype=V3, ndim=2),
                   xhat: nd(dtype=V3, ndim=2), newton_done: nd(ndim=1)):
    ti.loop_config(serialize=SERIAL)
    for b, i in ti.ndrange(pos.shape[1], pos.shape[2]):
        dt = prm[P_DT]
        g = ti.Vector([prm[P_GX], prm[P_GY], prm[P_GZ]])
        x = pos[f, b, i]
        xh = x + dt * vel[f, b, i] + dt * dt * g
        xhat[b, i] = xh
        if active[b, i] == 0:
            xh = x
        elif cons[b, i] == HARD:
            xh = cons_target[b, i]
        pos[fn, b, i] = xh
    ti.loop_config(serialize=SERIAL)
    for b in range(newton_done.shape[0]):
        newton_done[b] = 0


def _newton_elements(model):
    @ti.kernel
    def newton_elements(e0: ti.i32, e1: ti.i32, f: ti.i32, fn: ti.i32, prm: nd(ndim=1), pos: nd(dtype=V3, ndim=3),
                        el2v: nd(ndim=2), Dm_inv: nd(dtype=M3, ndim=1), vol: nd(ndim=1), e_info: nd(ndim=2),
                        e_k: nd(ndim=1), mdir: nd(dtype=V3, ndim=2),
                        E: nd(ndim=2), nu: nd(ndim=2), actu: nd(ndim=2), done: nd(ndim=1), hd: nd(ndim=3),
                        slot: nd(ndim=1), ef: nd(dtype=V3, ndim=2), eblk: nd(dtype=M3, ndim=2),
                        eng: nd(ndim=2)):
        """At the iterate x = pos[fn]: each element's Hessian data, its forces -dE_e/dx (elastic, muscle, stiffness
        damping) into ef, the diagonal 3x3 blocks of its Hessian into eblk, and its energy into eng."""
        ti.loop_config(serialize=SERIAL)
        for b, j in ti.ndrange(pos.shape[1], e1 - e0):
            e = e0 + j
            if done[b] == 0:
                mu, lam, k_a, m = element_material(e, b, e_info, e_k, mdir, E, nu, actu)
                F = element_F(pos, fn, b, el2v, Dm_inv, e)
                psi, P = energy_stress(F, model, mu, lam)
                psi_m, P_m = muscle_energy_stress(F, k_a, m)
                hessian_data(F, model, mu, lam, k_a, m, hd, b, e)
                bd = prm[P_BETA] / prm[P_DT]
                dF = F - element_F(pos, f, b, el2v, Dm_inv, e)
                dP = hessian_apply(dF, model, mu, lam, m, hd, b, e)
                W = vol[e]
                D = Dm_inv[e]
                store_forces(ef, slot, b, e, -W * (P + P_m + bd * dP) @ D.transpose())
                eng[b, e] = W * (psi + psi_m + 0.5 * bd * (dF * dP).sum())
                # diagonal blocks: corner a, direction c -> dF = e_c gr^T, gr the gradient of the corner's shape
                # function (runtime loops: one copy of hessian_apply in the code, not twelve)
                r0 = ti.Vector([D[0, 0], D[0, 1], D[0, 2]])
                r1 = ti.Vector([D[1, 0], D[1, 1], D[1, 2]])
                r2 = ti.Vector([D[2, 0], D[2, 1], D[2, 2]])
                for a in range(4):
                    gr = ti.select(a == 1, r0, ti.select(a == 2, r1, ti.select(a == 3, r2, -(r0 + r1 + r2))))
                    blk = ti.Matrix.zero(float, 3, 3)
                    for c in range(3):
                        ec = ti.Vector([ti.select(c == 0, 1.0, 0.0), ti.select(c == 1, 1.0, 0.0),
                                        ti.select(c == 2, 1.0, 0.0)])
                        dPc = hessian_apply(ec.outer_product(gr), model, mu, lam, m, hd, b, e)
                        blk += ((1.0 + bd) * W * dPc @ gr).outer_product(ec)
                    eblk[b, slot[4 * e + a]] = blk

    return newton_elements


newton_elements = per_model(_newton_elements)


@ti.kernel
def newton_vertices(f: ti.i32, fn: ti.i32, prm: nd(ndim=1), pos: nd(dtype=V3, ndim=3), active: nd(ndim=2),
                    mass: nd(ndim=1), cons: nd(ndim=2), cons_target: nd(dtype=V3, ndim=2), cons_k: nd(ndim=2),
                    force: nd(dtype=V3, ndim=2), xhat: nd(dtype=V3, ndim=2), v_start: nd(ndim=1),
                    ef: nd(dtype=V3, ndim=2), eblk: nd(dtype=M3, ndim=2), done: nd(ndim=1),
                    r: nd(dtype=V3, ndim=2), z: nd(dtype=V3, ndim=2), p: nd(dtype=V3, ndim=2),
                    d: nd(dtype=V3, ndim=2), pinv: nd(dtype=M3, ndim=2), nr: nd(dtype=V3, ndim=2),
                    vdot: nd(ndim=2), veng: nd(ndim=2)):
    """The gradient's negative r = -grad E (also kept in nr), the block-Jacobi preconditioner, z = P r, p = z,
    d = 0; vdot = r.z
    and veng = the vertex terms of E, per vertex (summed per environment in a fixed order by env_sums)."""
    ti.loop_config(serialize=SERIAL)
    for b, i in ti.ndrange(pos.shape[1], pos.shape[2]):
        if done[b] == 0:
            zero = ti.Vector([0.0, 0.0, 0.0])
            if held(active, cons, b, i):
                r[b, i], z[b, i], p[b, i], d[b, i], nr[b, i] = zero, zero, zero, zero, zero
                pinv[b, i] = ti.Matrix.zero(float, 3, 3)
                vdot[b, i] = 0.0
                veng[b, i] = 0.0
            else:
                dt = prm[P_DT]
                m = mass[i]
                x = pos[fn, b, i]
                xn = pos[f, b, i]
                diag, k, c = vertex_coefficients(prm, mass, cons, cons_k, b, i)
                fel = zero
                blk = ti.Matrix.zero(float, 3, 3)
                for j in range(v_start[i], v_start[i + 1]):
                    fel += ef[b, j]
                    blk += eblk[b, j]
                t = cons_target[b, i]
                grad = (m / (dt * dt) * (x - xhat[b, i]) + (prm[P_ALPHA] * m + c) / dt * (x - xn) + k * (x - t)
                        - fel - force[b, i])
                blk += diag * ti.Matrix.identity(float, 3)
                pi = blk.inverse()
                ri = -grad
                zi = pi @ ri
                r[b, i], z[b, i], p[b, i], d[b, i], nr[b, i] = ri, zi, zi, zero, ri
                pinv[b, i] = pi
                vdot[b, i] = ri.dot(zi)
                veng[b, i] = (0.5 * m / (dt * dt) * (x - xhat[b, i]).norm_sqr()
                              + 0.5 * (prm[P_ALPHA] * m + c) / dt * (x - xn).norm_sqr()
                              + 0.5 * k * (x - t).norm_sqr() - force[b, i].dot(x))


@ti.func
def env_sum(a: ti.template(), b, n):
    s = 0.0
    for i in range(n):
        s += a[b, i]
    return s


@ti.kernel
def cg_start(vdot: nd(ndim=2), done: nd(ndim=1), rz: nd(ndim=1), rz0: nd(ndim=1), conv: nd(ndim=1),
             iters: nd(ndim=1)):
    """Per environment (fixed order): rz = r.z of the first residual; an environment whose Newton loop is done,
    or whose residual is zero, does not iterate."""
    ti.loop_config(serialize=True)  # per environment: tiny work, no thread pool
    for b in range(vdot.shape[0]):
        s = env_sum(vdot, b, vdot.shape[1])
        rz[b] = s
        rz0[b] = s
        conv[b] = ti.select(done[b] != 0 or s <= 0.0, 1, 0)
        iters[b] = 0


def _cg_elements(model):
    @ti.kernel
    def cg_elements(e0: ti.i32, e1: ti.i32, prm: nd(ndim=1), el2v: nd(ndim=2), Dm_inv: nd(dtype=M3, ndim=1),
                    vol: nd(ndim=1), e_info: nd(ndim=2), e_k: nd(ndim=1), mdir: nd(dtype=V3, ndim=2), E: nd(ndim=2),
                    nu: nd(ndim=2), hd: nd(ndim=3),
                    p: nd(dtype=V3, ndim=2), conv: nd(ndim=1), slot: nd(ndim=1), eq: nd(dtype=V3, ndim=2)):
        """eq[b, e, :] = minus the element's stiffness (with the stiffness damping's factor) applied to p."""
        ti.loop_config(serialize=SERIAL)
        for b, j in ti.ndrange(p.shape[0], e1 - e0):
            e = e0 + j
            if conv[b] == 0:
                mu, lam = lame(E[b, e_info[e, EI_ENTITY]], nu[b, e_info[e, EI_ENTITY]])
                m = mdir[b, e]
                dF = element_dF(p, b, el2v, Dm_inv, e)
                dP = hessian_apply(dF, model, mu, lam, m, hd, b, e)
                store_forces(eq, slot, b, e, -(1.0 + prm[P_BETA] / prm[P_DT]) * vol[e] * dP @ Dm_inv[e].transpose())

    return cg_elements


cg_elements = per_model(_cg_elements)


@ti.kernel
def cg_q(prm: nd(ndim=1), active: nd(ndim=2), mass: nd(ndim=1), cons: nd(ndim=2), cons_k: nd(ndim=2),
         v_start: nd(ndim=1), eq: nd(dtype=V3, ndim=2), p: nd(dtype=V3, ndim=2),
         conv: nd(ndim=1), q: nd(dtype=V3, ndim=2), vdot: nd(ndim=2)):
    """q = H p; vdot = p.q per vertex."""
    ti.loop_config(serialize=SERIAL)
    for b, i in ti.ndrange(p.shape[0], p.shape[1]):
        if conv[b] == 0:
            qi = ti.Vector([0.0, 0.0, 0.0])
            if not held(active, cons, b, i):
                diag, _k, _c = vertex_coefficients(prm, mass, cons, cons_k, b, i)
                qi = diag * p[b, i]
                for j in range(v_start[i], v_start[i + 1]):
                    qi -= eq[b, j]
            q[b, i] = qi
            vdot[b, i] = p[b, i].dot(qi)


@ti.kernel
def cg_alpha(vdot: nd(ndim=2), rz: nd(ndim=1), conv: nd(ndim=1), alpha: nd(ndim=1)):
    ti.loop_config(serialize=True)  # per environment: tiny work, no thread pool
    for b in range(vdot.shape[0]):
        if conv[b] == 0:
            pq = env_sum(vdot, b, vdot.shape[1])
            alpha[b] = ti.select(pq > 0.0, rz[b] / ti.max(pq, 1e-300), 0.0)


@ti.kernel
def cg_update(alpha: nd(ndim=1), conv: nd(ndim=1), p: nd(dtype=V3, ndim=2), q: nd(dtype=V3, ndim=2),
              pinv: nd(dtype=M3, ndim=2), d: nd(dtype=V3, ndim=2), r: nd(dtype=V3, ndim=2),
              z: nd(dtype=V3, ndim=2), vdot: nd(ndim=2)):
    ti.loop_config(serialize=SERIAL)
    for b, i in ti.ndrange(p.shape[0], p.shape[1]):
        if conv[b] == 0:
            a = alpha[b]
            d[b, i] += a * p[b, i]
            ri = r[b, i] - a * q[b, i]
            zi = pinv[b, i] @ ri
            r[b, i] = ri
            z[b, i] = zi
            vdot[b, i] = ri.dot(zi)


@ti.kernel
def cg_direction(vdot: nd(ndim=2), threshold: float, max_it: ti.i32, rz: nd(ndim=1), rz0: nd(ndim=1),
                 alpha: nd(ndim=1), conv: nd(ndim=1), iters: nd(ndim=1), z: nd(dtype=V3, ndim=2),
                 p: nd(dtype=V3, ndim=2)):
    """Per environment: the new r.z, convergence (r.z below threshold times the first, or the cap), p = z + beta p."""
    ti.loop_config(serialize=True)  # per environment: tiny work, no thread pool
    for b in range(vdot.shape[0]):
        if conv[b] == 0:
            s = env_sum(vdot, b, vdot.shape[1])
            iters[b] += 1
            if s <= threshold * rz0[b] or iters[b] >= max_it or alpha[b] == 0.0:
                conv[b] = 1
            beta = s / ti.max(rz[b], 1e-300)
            rz[b] = s
            for i in range(p.shape[1]):
                p[b, i] = z[b, i] + beta * p[b, i]


@ti.kernel
def line_start(vdot: nd(ndim=2), veng: nd(ndim=2), eng: nd(ndim=2), nr: nd(dtype=V3, ndim=2),
               d: nd(dtype=V3, ndim=2), done: nd(ndim=1), e0: nd(ndim=1), slope: nd(ndim=1), step: nd(ndim=1),
               searching: nd(ndim=1)):
    """Per environment: E at the iterate, the slope grad E . d, a first step of 1."""
    ti.loop_config(serialize=SERIAL)
    for b, i in ti.ndrange(nr.shape[0], nr.shape[1]):
        vdot[b, i] = -nr[b, i].dot(d[b, i])
    ti.loop_config(serialize=True)  # per environment: tiny work, no thread pool
    for b in range(nr.shape[0]):
        e0[b] = env_sum(veng, b, veng.shape[1]) + env_sum(eng, b, eng.shape[1])
        slope[b] = env_sum(vdot, b, vdot.shape[1])
        step[b] = 1.0
        searching[b] = ti.select(done[b] == 0, 1, 0)


@ti.kernel
def line_trial(fn: ti.i32, pos: nd(dtype=V3, ndim=3), d: nd(dtype=V3, ndim=2), step: nd(ndim=1),
               searching: nd(ndim=1), trial: nd(dtype=V3, ndim=3)):
    """trial[0] = x + s d for the environments still searching."""
    ti.loop_config(serialize=SERIAL)
    for b, i in ti.ndrange(d.shape[0], d.shape[1]):
        if searching[b] != 0:
            trial[0, b, i] = pos[fn, b, i] + step[b] * d[b, i]


def _line_energy(model):
    @ti.kernel
    def line_energy(e0: ti.i32, e1: ti.i32, f: ti.i32, prm: nd(ndim=1), pos: nd(dtype=V3, ndim=3),
                    trial: nd(dtype=V3, ndim=3),
                    el2v: nd(ndim=2), Dm_inv: nd(dtype=M3, ndim=1), vol: nd(ndim=1), e_info: nd(ndim=2),
                    e_k: nd(ndim=1), mdir: nd(dtype=V3, ndim=2), E: nd(ndim=2), nu: nd(ndim=2), actu: nd(ndim=2),
                    hd: nd(ndim=3), searching: nd(ndim=1), eng: nd(ndim=2)):
        """E's element terms at the trial positions (the stiffness damping with the iterate's K)."""
        ti.loop_config(serialize=SERIAL)
        for b, j in ti.ndrange(trial.shape[1], e1 - e0):
            e = e0 + j
            if searching[b] != 0:
                mu, lam, k_a, m = element_material(e, b, e_info, e_k, mdir, E, nu, actu)
                x0 = trial[0, b, el2v[e, 0]]
                Ds = ti.Matrix.cols([trial[0, b, el2v[e, 1]] - x0, trial[0, b, el2v[e, 2]] - x0,
                                     trial[0, b, el2v[e, 3]] - x0])
                F = Ds @ Dm_inv[e]
                psi, _P = energy_stress(F, model, mu, lam)
                psi_m, _Pm = muscle_energy_stress(F, k_a, m)
                dF = F - element_F(pos, f, b, el2v, Dm_inv, e)
                dP = hessian_apply(dF, model, mu, lam, m, hd, b, e)
                eng[b, e] = vol[e] * (psi + psi_m + 0.5 * prm[P_BETA] / prm[P_DT] * (dF * dP).sum())

    return line_energy


line_energy = per_model(_line_energy)


@ti.kernel
def line_energy_vertices(f: ti.i32, prm: nd(ndim=1), pos: nd(dtype=V3, ndim=3), trial: nd(dtype=V3, ndim=3),
                         active: nd(ndim=2), mass: nd(ndim=1), cons: nd(ndim=2), cons_target: nd(dtype=V3, ndim=2),
                         cons_k: nd(ndim=2), force: nd(dtype=V3, ndim=2), xhat: nd(dtype=V3, ndim=2),
                         searching: nd(ndim=1), veng: nd(ndim=2)):
    """E's vertex terms at the trial positions."""
    ti.loop_config(serialize=SERIAL)
    for b, i in ti.ndrange(trial.shape[1], trial.shape[2]):
        if searching[b] != 0:
            v = 0.0
            if not held(active, cons, b, i):
                dt = prm[P_DT]
                m = mass[i]
                x = trial[0, b, i]
                _diag, k, c = vertex_coefficients(prm, mass, cons, cons_k, b, i)
                v = (0.5 * m / (dt * dt) * (x - xhat[b, i]).norm_sqr()
                     + 0.5 * (prm[P_ALPHA] * m + c) / dt * (x - pos[f, b, i]).norm_sqr()
                     + 0.5 * k * (x - cons_target[b, i]).norm_sqr() - force[b, i].dot(x))
            veng[b, i] = v


@ti.kernel
def line_check(last: ti.i32, c: float, tau: float, veng: nd(ndim=2), eng: nd(ndim=2), e0: nd(ndim=1),
               slope: nd(ndim=1), step: nd(ndim=1), searching: nd(ndim=1)):
    """Armijo: accept s where E(x + s d) <= E(x) + c s slope; else s *= tau (the last trial's s is kept anyway)."""
    ti.loop_config(serialize=True)  # per environment: tiny work, no thread pool
    for b in range(e0.shape[0]):
        if searching[b] != 0:
            e1 = env_sum(veng, b, veng.shape[1]) + env_sum(eng, b, eng.shape[1])
            if e1 <= e0[b] + c * step[b] * slope[b]:
                searching[b] = 0
            elif last == 0:
                step[b] *= tau


@ti.kernel
def newton_step(fn: ti.i32, threshold: float, pos: nd(dtype=V3, ndim=3), d: nd(dtype=V3, ndim=2),
                step: nd(ndim=1), done: nd(ndim=1), moved: nd(ndim=2)):
    """x += s d; an environment whose vertices all moved less than the threshold is done."""
    ti.loop_config(serialize=SERIAL)
    for b, i in ti.ndrange(d.shape[0], d.shape[1]):
        if done[b] == 0:
            dx = step[b] * d[b, i]
            pos[fn, b, i] += dx
            moved[b, i] = ti.max(ti.abs(dx[0]), ti.abs(dx[1]), ti.abs(dx[2]))
    ti.loop_config(serialize=True)  # per environment: tiny work, no thread pool
    for b in range(d.shape[0]):
        if done[b] == 0:
            mx = 0.0
            for i in range(d.shape[1]):
                mx = ti.max(mx, moved[b, i])
            if mx < threshold:
                done[b] = 1


@ti.kernel
def implicit_finish(f: ti.i32, fn: ti.i32, prm: nd(ndim=1), pos: nd(dtype=V3, ndim=3), vel: nd(dtype=V3, ndim=3),
                    active: nd(ndim=2), cons: nd(ndim=2)):
    """v' = (x' - x) / dt, then the floor and the hard constraints as in the explicit step."""
    ti.loop_config(serialize=SERIAL)
    for b, i in ti.ndrange(pos.shape[1], pos.shape[2]):
        if active[b, i] == 0:
            pos[fn, b, i] = pos[f, b, i]
            vel[fn, b, i] = vel[f, b, i]
        else:
            x = pos[fn, b, i]
            v = (x - pos[f, b, i]) / prm[P_DT]
            lowest = floor_under(pos[f, b, i][2], prm)
            if prm[P_FLOOR_ON] > 0.0 and x[2] < lowest:
                x[2] = lowest
                v[2] = ti.max(v[2], 0.0)
            if cons[b, i] == HARD:
                v = ti.Vector([0.0, 0.0, 0.0])
            pos[fn, b, i] = x
            vel[fn, b, i] = v


# -- inspection (tests, docs) ----------------------------------------------------------------------------------------

def _probe(model):
    @ti.kernel
    def probe(e0: ti.i32, e1: ti.i32, F_in: nd(dtype=M3, ndim=1), dF_in: nd(dtype=M3, ndim=1), mu: float, lam: float,
              k_a: float, m_in: nd(dtype=V3, ndim=1), psi_out: nd(ndim=1), P_out: nd(dtype=M3, ndim=1),
              dP_out: nd(dtype=M3, ndim=1), hd: nd(ndim=3)):
        """psi(F), P(F) and the (projected) Hessian applied to dF, for each F of F_in: the material functions alone."""
        ti.loop_config(serialize=SERIAL)
        for j in range(e1 - e0):
            n = e0 + j
            psi, P = energy_stress(F_in[n], model, mu, lam)
            psi_m, P_m = muscle_energy_stress(F_in[n], k_a, m_in[n])
            hessian_data(F_in[n], model, mu, lam, k_a, m_in[n], hd, 0, n)
            psi_out[n] = psi + psi_m
            P_out[n] = P + P_m
            dP_out[n] = hessian_apply(dF_in[n], model, mu, lam, m_in[n], hd, 0, n)

    return probe


_probes = per_model(_probe)


def probe(F_in, dF_in, model, mu, lam, k_a, m_in, psi_out, P_out, dP_out, hd):
    """psi(F), P(F) and the (projected) Hessian applied to dF for each F of F_in [n, 3, 3] (model: a MODEL_CODES
    value; hd [1, n, HD_N] scratch): the material functions alone, for tests and plots."""
    _probes[int(model)](0, F_in.shape[0], F_in, dF_in, mu, lam, k_a, m_in, psi_out, P_out, dP_out, hd)


def _energies(model):
    @ti.kernel
    def energies(e0: ti.i32, e1: ti.i32, f: ti.i32, pos: nd(dtype=V3, ndim=3), el2v: nd(ndim=2),
                 Dm_inv: nd(dtype=M3, ndim=1), vol: nd(ndim=1), e_info: nd(ndim=2), e_k: nd(ndim=1),
                 mdir: nd(dtype=V3, ndim=2), E: nd(ndim=2), nu: nd(ndim=2), actu: nd(ndim=2), out: nd(ndim=2)):
        """out[b, e] = W psi(F) at frame f (muscle energy included)."""
        ti.loop_config(serialize=SERIAL)
        for b, j in ti.ndrange(pos.shape[1], e1 - e0):
            e = e0 + j
            psi, _P = element_energy(model, e, b, f, pos, el2v, Dm_inv, e_info, e_k, mdir, E, nu, actu)
            out[b, e] = vol[e] * psi

    return energies


energies = per_model(_energies)


def load(serial: bool):
    """The kernels by name: this module's, or (serial=True) their copies with SERIAL read as True
    (`genesis_core.launch.serial_variant`; a per-model table becomes a table of copies), made once."""
    import sys
    import types

    from genesis_core.launch import serial_variant

    module = sys.modules[__name__]
    if not serial:
        return module
    if "_serial" not in module.__dict__:
        def is_kernel(x):
            return hasattr(x, "_primal")

        copies = {}
        for name, x in list(module.__dict__.items()):
            if is_kernel(x):
                copies[name] = serial_variant(x)
            elif isinstance(x, dict) and x and all(is_kernel(k) for k in x.values()):
                copies[name] = {code: serial_variant(k) for code, k in x.items()}
        module._serial = types.SimpleNamespace(**copies)
    return module._serial
