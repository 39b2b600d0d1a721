"""Particles of one particle solver against the particles of another (PBD against SPH, or any two solvers that
expose `exchange_view(f)`), momentum-conserving.

Two particles i (solver A) and j (solver B) touch when their centres are closer than r_i + r_j. If they approach
(normal relative velocity v_n = (v_i - v_j) . n < 0, n = (x_i - x_j) / |x_i - x_j|), they exchange the momentum
of a perfectly inelastic normal collision, J = (-v_n) n / (w_i + w_j) (w = 1 / m, zero for a particle held in
place), divided by the larger of the two particles' contact counts (a particle touched by k others shares its
mass among them). i gains w_i J, j loses w_j J: the momentum one side gains the other loses, pair by pair. Their
overlap is then removed by moving both apart along n, shared by inverse mass (and divided by the same count): a
position projection, which changes no velocity, hence no momentum; without it a heavy liquid particle on a light
cloth particle, which the cloth's constraints pull back, would work its way through. Normal only: a liquid does
not grip (no friction).

Each solver says, through its `ExchangeView`, which of its frames take part and where the velocity change goes:
a solver that steps after the coupling (SPH: its frame f, the change added to the velocity its step starts from,
the projection applied to the positions its step starts from) names an accumulator; a solver that has already stepped (PBD: its frame f + 1) has the change applied to its
velocities and its positions moved by dt times it (as `grid_exchange.GridExchange` does), so that no approach
is left in the positions either.

Deterministic: the contacts are found from a neighbour grid over B's particles in its fixed visiting order; the
counts and B's share are accumulated by one thread per environment in A's particle order; A's share in
parallel, each particle summing its own contacts in order. Not differentiable (the contact set changes
discontinuously): a differentiable scene with both solvers is refused at build.
"""

import typing

import attrs
import taichi as ti
import torch

from ..errors import GenesisError
from ..launch import Launcher
from .neighbours import NeighbourGrid, grid_cell, grid_cell_range, grid_cell_reaches
from .reduce import TASK_STRIDE

V3 = ti.types.vector(3, float)
nd = ti.types.ndarray

MAX_CONTACTS = 16  # contacts kept per particle of A (the first ones in the search's fixed order)
EPS = 1e-12


@attrs.define
class ExchangeView:
    """What a particle solver exposes to `ParticlePairCoupling` at the coupling time of substep f.

    pos, vel: [B, N, 3] contiguous (frames of the solver's state): the positions and velocities that meet the other
    solver's; the positions take the projection in place. inv_mass: [B, N] (1/kg): each particle's inverse mass,
    0 for one that does not move (a fixed particle); radius: [N] (m), its contact radius. active: int32 [B, N]
    (only active particles touch). ext_dv: [B, N, 3] or None: where the velocity change is added, when the solver applies
    it in its own step after the coupling; None: it is added to `vel` at once and `pos` moves by `dt` times it
    (a solver whose frame f + 1 is already stepped)."""

    pos: torch.Tensor
    vel: torch.Tensor
    inv_mass: torch.Tensor
    radius: torch.Tensor
    active: torch.Tensor
    ext_dv: typing.Optional[torch.Tensor] = None


@ti.func
def _pair(xi, vi, wi, ri, xj, vj, wj, rj, scale):
    """(J, P): the impulse particle i takes from j, J = (-v_n) n / (w_i + w_j) when they approach (zero
    otherwise), and the position correction per unit inverse mass, P = pen n / (w_i + w_j) for the overlap
    pen = r_i + r_j - |x_i - x_j|, both times scale = 1 / max(count_i, count_j). i changes by w_i J and w_i P,
    j by -w_j J and -w_j P."""
    d = xi - xj
    r = ti.sqrt(d.norm_sqr())
    J = ti.Vector([0.0, 0.0, 0.0])
    P = ti.Vector([0.0, 0.0, 0.0])
    if r > EPS and wi + wj > 0:
        n = d / r
        vn = (vi - vj).dot(n)
        k = scale / (wi + wj)
        if vn < 0:
            J = (k * -vn) * n
        pen = ri + rj - r
        if pen > 0:
            P = (k * pen) * n
    return J, P


@ti.kernel
def pair_exchange(pa: nd(dtype=V3, ndim=2), va: nd(dtype=V3, ndim=2), wa: nd(ndim=2), ra: nd(ndim=1),
                  act_a: nd(ndim=2), pb: nd(dtype=V3, ndim=2), vb: nd(dtype=V3, ndim=2), wb: nd(ndim=2),
                  rb: nd(ndim=1), act_b: nd(ndim=2), reach: ti.f64, cell_size: ti.f64, table: nd(ndim=3),
                  order: nd(ndim=2), count_a: nd(ndim=2), count_b: nd(ndim=2), contacts: nd(ndim=3),
                  dva: nd(dtype=V3, ndim=2), dxa: nd(dtype=V3, ndim=2), dvb: nd(dtype=V3, ndim=2),
                  dxb: nd(dtype=V3, ndim=2)):
    """dva, dxa [B, Na], dvb, dxb [B, Nb]: the velocity changes and position corrections of A's and B's
    particles (overwritten). The grid (table, order) holds B's active particles, cells of `cell_size` >= reach,
    the largest r_i + r_j. wa, wb [B, N]: inverse masses (0: a particle that does not move, such as a fixed one)."""
    n_keep = contacts.shape[2]
    for b, i in ti.ndrange(pa.shape[0], pa.shape[1]):  # A's contacts, in the search's order
        n = 0
        if act_a[b, i] != 0:
            xi = pa[b, i]
            c = grid_cell(xi, cell_size)
            for o in range(27):
                if grid_cell_reaches(xi, c, o, reach, cell_size):
                    rg = grid_cell_range(table, b, c, o)
                    for kk in range(rg[0], rg[1]):
                        j = order[b, kk]
                        s = ra[i] + rb[j]
                        if (xi - pb[b, j]).norm_sqr() < s * s:
                            if n < n_keep:
                                contacts[b, i, n] = j
                            n += 1
        count_a[b, i] = ti.min(n, n_keep)
    for b, j in ti.ndrange(pb.shape[0], pb.shape[1]):
        count_b[b, j] = 0
        dvb[b, j] = ti.Vector([0.0, 0.0, 0.0])
        dxb[b, j] = ti.Vector([0.0, 0.0, 0.0])
    for t in range(pa.shape[0] * TASK_STRIDE):  # B's counts: one thread per environment, A's order
        if t % TASK_STRIDE == 0:
            b = t // TASK_STRIDE
            for i in range(pa.shape[1]):
                for m in range(count_a[b, i]):
                    j = contacts[b, i, m]
                    count_b[b, j] = count_b[b, j] + 1
    for b, i in ti.ndrange(pa.shape[0], pa.shape[1]):  # A's share
        dv = ti.Vector([0.0, 0.0, 0.0])
        dx = ti.Vector([0.0, 0.0, 0.0])
        for m in range(count_a[b, i]):
            j = contacts[b, i, m]
            J, P = _pair(pa[b, i], va[b, i], wa[b, i], ra[i], pb[b, j], vb[b, j], wb[b, j], rb[j],
                         1.0 / ti.max(count_a[b, i], count_b[b, j]))
            dv += J
            dx += P
        dva[b, i] = wa[b, i] * dv
        dxa[b, i] = wa[b, i] * dx
    for t in range(pa.shape[0] * TASK_STRIDE):  # B's share: one thread per environment, A's order
        if t % TASK_STRIDE == 0:
            b = t // TASK_STRIDE
            for i in range(pa.shape[1]):
                for m in range(count_a[b, i]):
                    j = contacts[b, i, m]
                    J, P = _pair(pa[b, i], va[b, i], wa[b, i], ra[i], pb[b, j], vb[b, j], wb[b, j], rb[j],
                                 1.0 / ti.max(count_a[b, i], count_b[b, j]))
                    dvb[b, j] = dvb[b, j] - wb[b, j] * J
                    dxb[b, j] = dxb[b, j] - wb[b, j] * P


class ParticlePairCoupling:
    """Solver A's particles against solver B's (see the module doc): registered by a plugin as ("ASolver",
    "BSolver"); both must have `exchange_view(f)` returning an `ExchangeView`."""

    def __init__(self, solver_a, solver_b, sim_options):
        for s in (solver_a, solver_b):
            if not callable(getattr(s, "exchange_view", None)):
                raise GenesisError(f"{s.name} has no exchange_view(f); it cannot exchange momentum with the particles "
                                   f"of {(solver_b if s is solver_a else solver_a).name}.")
        if sim_options.requires_grad:
            raise GenesisError(f"the coupling of {solver_a.name} with {solver_b.name} (particle contacts) is not "
                               "differentiable; build the scene with SimOptions(requires_grad=False), or without one "
                               "of the two solvers' entities.")
        self.a, self.b = solver_a, solver_b
        self.dt = float(sim_options.substep_dt)
        self._scratch = None
        self._launch = Launcher()

    def _check(self, view, solver):
        if not isinstance(view, ExchangeView):
            raise GenesisError(f"{solver.name}.exchange_view(f) returned a {type(view).__name__}, not an ExchangeView.")
        B, N = view.pos.shape[0], view.pos.shape[1]
        want = {"pos": (B, N, 3), "vel": (B, N, 3), "inv_mass": (B, N), "radius": (N,), "active": (B, N)}
        if view.ext_dv is not None:
            want["ext_dv"] = (B, N, 3)
        for name, shape in want.items():
            x = getattr(view, name)
            if tuple(x.shape) != shape or not x.is_contiguous():
                raise GenesisError(f"{solver.name}.exchange_view(f).{name} has shape {tuple(x.shape)} "
                                   f"(contiguous={x.is_contiguous()}); the particle exchange needs {shape}, contiguous.")

    def _buffers(self, va, vb):
        B, Na, Nb = va.pos.shape[0], va.pos.shape[1], vb.pos.shape[1]
        reach = float(va.radius.max()) + float(vb.radius.max()) if Na and Nb else 0.0
        s = self._scratch
        if s is None or s["key"] != (B, Na, Nb, reach):
            opts = dict(dtype=torch.int32, device=va.pos.device)
            s = self._scratch = dict(
                key=(B, Na, Nb, reach), reach=reach,
                grid=NeighbourGrid(B, Nb, reach, dtype=vb.pos.dtype, device=vb.pos.device, launcher=self._launch)
                if reach > 0 else None,
                count_a=torch.zeros((B, Na), **opts), count_b=torch.zeros((B, Nb), **opts),
                contacts=torch.zeros((B, Na, MAX_CONTACTS), **opts),
                dva=torch.zeros_like(va.pos), dxa=torch.zeros_like(va.pos), dvb=torch.zeros_like(vb.pos),
                dxb=torch.zeros_like(vb.pos))
        return s

    def couple(self, f: int):
        va, vb = self.a.exchange_view(f), self.b.exchange_view(f)
        self._check(va, self.a)
        self._check(vb, self.b)
        if va.pos.shape[0] != vb.pos.shape[0]:
            raise GenesisError(f"{self.a.name} and {self.b.name} hold {va.pos.shape[0]} and {vb.pos.shape[0]} "
                               "environments; the particle exchange needs the same batch.")
        s = self._buffers(va, vb)
        if s["grid"] is None:
            return
        g = s["grid"]
        g.build(vb.pos, vb.active)
        self._launch(pair_exchange, va.pos, va.vel, va.inv_mass, va.radius, va.active, vb.pos, vb.vel, vb.inv_mass,
                     vb.radius, vb.active, s["reach"], g.cell_size, g.table, g.order, s["count_a"], s["count_b"],
                     s["contacts"], s["dva"], s["dxa"], s["dvb"], s["dxb"])
        with torch.no_grad():
            for view, dv, dx in ((va, s["dva"], s["dxa"]), (vb, s["dvb"], s["dxb"])):
                view.pos.add_(dx)
                if view.ext_dv is not None:
                    view.ext_dv.add_(dv)
                else:
                    view.vel.add_(dv)
                    view.pos.add_(dv, alpha=self.dt)

    def couple_grad(self, f: int):
        raise GenesisError(f"the coupling of {self.a.name} with {self.b.name} (particle contacts) is not "
                           "differentiable.")
