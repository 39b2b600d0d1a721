"""Particles of any particle solver against an MPM grid (the MPM solver's `grid_view(f)`: node velocities and
masses after its grid update), momentum-conserving: the SPH-MPM and FEM-MPM couplings. A particle moving into the
grid's mass (relative to the mass-weighted velocity of its quadratic B-spline stencil, along the outward normal of
the mass field) and that mass exchange the momentum of a perfectly inelastic normal collision; the particle's
velocity change is returned, the nodes' is applied to the grid in place. Deterministic: the impulses are computed
from the unchanged grid in parallel, then handed to the nodes by one thread per environment in particle order."""

import taichi as ti

from ..errors import GenesisError

V3 = ti.types.vector(3, float)
nd = ti.types.ndarray


@ti.func
def _stencil(x, origin, inv_dx, size):
    """(base node, weights [3] per axis as a 3x3 matrix w[a, k], their derivatives in x) of the quadratic
    B-spline stencil of x in a grid of `size` nodes per axis, and whether the stencil lies inside it."""
    xl = (x - origin) * inv_dx
    base = ti.Vector([0, 0, 0])
    inside = 1
    for a in ti.static(range(3)):
        c = xl[a] - 0.5
        if not (c >= 0.0 and c < size[a] - 3.0):  # NaN too
            inside = 0
            c = 0.0
        base[a] = ti.cast(c, ti.i32)
    w = ti.Matrix.zero(float, 3, 3)
    dw = ti.Matrix.zero(float, 3, 3)
    for a in ti.static(range(3)):
        fx = xl[a] - base[a]
        if inside == 0:
            fx = 1.0
        w[a, 0] = 0.5 * (1.5 - fx) ** 2
        w[a, 1] = 0.75 - (fx - 1.0) ** 2
        w[a, 2] = 0.5 * (fx - 0.5) ** 2
        dw[a, 0] = (fx - 1.5) * inv_dx
        dw[a, 1] = -2.0 * (fx - 1.0) * inv_dx
        dw[a, 2] = (fx - 0.5) * inv_dx
    return base, w, dw, inside


@ti.kernel
def mpm_exchange(fp: ti.i32, fv: ti.i32, pos: nd(dtype=V3, ndim=3), vel: nd(dtype=V3, ndim=3), active: nd(ndim=2),
                 mass: nd(ndim=1), ox: float, oy: float, oz: float, inv_dx: float, grid_v: nd(dtype=V3, ndim=4),
                 grid_m: nd(ndim=4), impulse: nd(dtype=V3, ndim=2), ext: nd(dtype=V3, ndim=2)):
    """Particles (positions of frame fp, velocities of frame fv) against an MPM grid (after its update): where the grid holds mass around a
    particle (its B-spline stencil) and the particle moves into it (relative to the mass-weighted grid velocity,
    along the outward normal of the grid's mass field), the normal approach is removed in a perfectly inelastic
    two-body exchange between the particle (m) and the stencil's mass (M = sum w m_n): J = m M / (m + M) (-v_n) n.
    The particle's velocity change J / m goes to ext; the nodes lose J in proportion to w m_n (each node's
    velocity by -J w / M), so that the momentum the particle gains the grid loses, exactly. The first loop computes
    every J from the unchanged grid (parallel); the second hands them to the nodes, one thread per environment in
    particle order (deterministic)."""
    origin = ti.Vector([ox, oy, oz])
    size = ti.Vector([grid_m.shape[1], grid_m.shape[2], grid_m.shape[3]])
    for b, i in ti.ndrange(pos.shape[1], pos.shape[2]):
        J = ti.Vector([0.0, 0.0, 0.0])
        if active[b, i] != 0:
            x = pos[fp, b, i]
            base, w, dw, inside = _stencil(x, origin, inv_dx, size)
            if inside != 0:
                M = 0.0
                p = ti.Vector([0.0, 0.0, 0.0])
                grad = ti.Vector([0.0, 0.0, 0.0])
                for o in ti.static(ti.grouped(ti.ndrange(3, 3, 3))):
                    n = base + o
                    wn = w[0, o[0]] * w[1, o[1]] * w[2, o[2]]
                    gn = ti.Vector([dw[0, o[0]] * w[1, o[1]] * w[2, o[2]], w[0, o[0]] * dw[1, o[1]] * w[2, o[2]],
                                    w[0, o[0]] * w[1, o[1]] * dw[2, o[2]]])
                    mn = grid_m[b, n[0], n[1], n[2]]
                    M += wn * mn
                    p += wn * mn * grid_v[b, n[0], n[1], n[2]]
                    grad += mn * gn
                g2 = grad.dot(grad)
                if M > 0 and g2 > 0:
                    nrm = -grad / ti.sqrt(g2)
                    vn = (vel[fv, b, i] - p / M).dot(nrm)
                    if vn < 0:
                        m = mass[i]
                        J = (m * M / (m + M)) * (-vn) * nrm
                        ext[b, i] = ext[b, i] + J / m
        impulse[b, i] = J
    for b in range(pos.shape[1]):
        for i in range(pos.shape[2]):
            J = impulse[b, i]
            if J.dot(J) > 0:
                base, w, dw, inside = _stencil(pos[fp, b, i], origin, inv_dx, size)
                M = 0.0
                for o in ti.static(ti.grouped(ti.ndrange(3, 3, 3))):
                    n = base + o
                    M += w[0, o[0]] * w[1, o[1]] * w[2, o[2]] * grid_m[b, n[0], n[1], n[2]]
                for o in ti.static(ti.grouped(ti.ndrange(3, 3, 3))):
                    n = base + o
                    wn = w[0, o[0]] * w[1, o[1]] * w[2, o[2]]
                    if grid_m[b, n[0], n[1], n[2]] > 0:
                        grid_v[b, n[0], n[1], n[2]] = grid_v[b, n[0], n[1], n[2]] - (wn / M) * J


class GridExchange:
    """What a particle solver that steps in its pre-coupling part needs for `exchange_with_mpm`: the exchange of
    its frame f + 1 (positions of frame f, velocities after its step) with the MPM grid, the velocity change
    applied to frame f + 1 and its positions moved with it (dt * dv). One per solver:

        def exchange_with_mpm(self, f, grid):
            self._grid_exchange(self, f, grid, active)        # active: int32 [B, N], the particles that take part
    """

    def __init__(self):
        self._dv = self._impulse = None

    def __call__(self, solver, f, grid, active):
        import torch

        st = solver.state
        fn = solver.frames.next(f)
        if self._dv is None:
            self._dv = torch.zeros_like(st.at("vel", fn))
            self._impulse = torch.zeros_like(self._dv)
        with torch.no_grad():
            self._dv.zero_()
        solver._launch(mpm_exchange, f, fn, st.pos, st.vel, active, solver.p_mass, *grid.origin, 1.0 / grid.dx,
                       grid.velocity, grid.mass, self._impulse, self._dv)
        with torch.no_grad():
            st.at("vel", fn).add_(self._dv)
            st.at("pos", fn).add_(self._dv, alpha=solver.substep_dt)


class MPMGridCoupling:
    """The coupling of the MPM solver with a particle solver that has `exchange_with_mpm(f, grid)` (it launches
    `mpm_exchange` with its own frames and applies its share): registered as ("MPMSolver", "<its name>")."""

    def __init__(self, mpm, particles, sim_options):
        if sim_options.requires_grad:
            raise GenesisError(f"the coupling of {mpm.name} with {particles.name} is not differentiable; build the "
                               "scene with SimOptions(requires_grad=False).")
        if not callable(getattr(mpm, "grid_view", None)):
            raise GenesisError(f"{mpm.name} has no grid_view(f); it cannot couple with {particles.name}.")
        if not callable(getattr(particles, "exchange_with_mpm", None)):
            raise GenesisError(f"{particles.name} has no exchange_with_mpm(f, grid); it cannot couple with "
                               f"{mpm.name}.")
        self.mpm, self.particles = mpm, particles

    def couple(self, f: int):
        self.particles.exchange_with_mpm(f, self.mpm.grid_view(f))

    def couple_grad(self, f: int):
        raise GenesisError(f"the coupling of {self.mpm.name} with {self.particles.name} is not differentiable.")
