"""SPHSolver: liquids by smoothed particle hydrodynamics, batched over environments, on the particle kit.

A substep (frame f -> fn), run in the solver's post-coupling part, when every collider's view of the substep is
final:

1. the neighbour grid of frame f's positions (`genesis_core.particles.neighbours`), the boundaries' solid
   fractions (the domain's walls and every collider's geoms, `kernels.boundary_terms`), the densities and each
   particle's neighbour list (`kernels.density`);
2. WCSPH: Tait's pressure and one explicit step (`kernels.wcsph_step`). DFSPH (Bender & Koschier 2015, 2017):
   the divergence-free solve, the non-pressure forces, the constant-density solve, then the positions; each
   solve is warm-started with half the total of the previous substep (declared state, so a restored state
   resumes bitwise) and iterates until each environment's own mean error is below the tolerance;
3. the boundaries' reactions to the geoms' bodies (`kernels.reactions`), then the kit's contact with every
   collider (`ParticleColliderCoupling`: a particle whose centre entered a geom is put back on its surface, the
   momentum it loses handed to the body), then the walls (`ParticleSolver.keep_inside`).

Gravity is applied once per substep, in the non-pressure acceleration, whatever the substep's place in a step.
"""

from __future__ import annotations

import warnings

import numpy as np
import torch

import genesis_core as gs
from genesis_core.coupler import GEOM_MESH, GEOM_PLANE
from genesis_core.errors import GenesisError
from genesis_core.rotations import quat_to_mat
from genesis_core.launch import Launcher
from genesis_core.particles import grid_exchange
from genesis_core.particles.coupling import ParticleColliderCoupling, ParticleView, ViewExtras, check_view, n_chunks
from genesis_core.particles.neighbours import NeighbourGrid
from genesis_core.particles.pair_exchange import ExchangeView
from genesis_core.particles.reduce import sum_parts
from genesis_core.particles.solver import ParamsGravity, ParticleSolver

from . import kernels as K
from .materials import Liquid
from .options import SPHOptions

# the ColliderView arrays gradients flow into, in differentiable mode
POSE_ARRAYS = ("geom_pos", "geom_quat", "body_com", "body_lin_vel", "body_ang_vel")
WARM_START = 0.5  # the share of the last substep's pressure a solve starts from
CHECK_EVERY_GPU = 8  # iterations between two looks at the convergence flags where a launch is asynchronous


class SPHSolver(ParamsGravity, ParticleSolver):
    """State: the kit's pos, vel, active, and DFSPH's warm starts (zero under WCSPH)."""

    short_name = "sph"
    gravity_param = K.P_GX  # set_gravity after build writes params_f there (kernels._gravity)
    order = 30
    options_class = SPHOptions
    material_class = Liquid
    supports_grad = True  # WCSPH, against the domain's walls and colliders' primitive geoms (see docs/sph.md)
    _pos, _vel, _active = ParticleSolver.particle_fields
    state_fields = (
        _pos, _vel, _active,
        gs.FieldSpec("kappa_v", ("n_particles",), sentinel=True,
                     doc="DFSPH: the divergence solve's total pressure coefficient of the substep that led here "
                         "(its warm start), m^2/s^2; zero under WCSPH"),
        gs.FieldSpec("kappa", ("n_particles",), sentinel=True,
                     doc="DFSPH: the density solve's total pressure coefficient of the substep that led here (its "
                         "warm start), m^2/s^2; zero under WCSPH"),
    )
    del _pos, _vel, _active

    def __init__(self, scene, sim_options, options=None):
        super().__init__(scene, sim_options, options)
        self.support_radius = self.options.support_radius
        self.dfsph = self.options.pressure_solver == "DFSPH"
        self._boundaries = []  # (collider, its contact coupling), from SPHBoundaryCoupling

    def default_particle_size(self):
        return self.options.particle_size

    # -- build -----------------------------------------------------------------------------------------------------

    def add_boundary(self, collider, sim_options):
        """Called at build by `SPHBoundaryCoupling` for every collider in the scene."""
        contact = ParticleColliderCoupling(collider, self, sim_options, identity_grad=True)
        self._boundaries.append((collider, contact, ViewExtras()))

    def build_particles(self):
        fl, dev = self.float_dtype, self.device
        B, N = self.batch, self.n_particles
        mat = np.concatenate([np.tile(np.asarray(e.material.kernel_params(), dtype=np.float64), (e.n_particles, 1))
                              for e in self.entities])
        self.p_mat = torch.as_tensor(mat, dtype=fl, device=dev).contiguous()
        prm = np.zeros(K.P_N)
        g = self.sim_options.gravity
        prm[[K.P_DT, K.P_H, K.P_GX, K.P_GY, K.P_GZ]] = (self.sim_options.substep_dt, self.support_radius, *g)
        prm[K.P_LO:K.P_LO + 3] = self.lower
        prm[K.P_HI:K.P_HI + 3] = self.upper
        prm[K.P_WALLS:K.P_WALLS + 6] = 1.0
        prm[K.P_S] = self.particle_size
        prm[K.P_BVISC] = self.options.boundary_viscosity
        self._prm_np = prm
        self.params_f = torch.tensor(prm, dtype=fl, device=dev)
        cell = self.options.hash_grid_cell_size or self.support_radius
        self._launch = Launcher()
        self.grid = NeighbourGrid(B, N, cell, dtype=fl, device=dev, launcher=self._launch)

        def z(*shape, dtype=fl):
            return torch.zeros(shape, dtype=dtype, device=dev)

        self.rho, self.aux, self.coef = z(B, N), z(B, N), z(B, N)
        self.psi, self.gpsi, self.vgpsi = z(B, N), z(B, N, 3), z(B, N)
        self.vm, self.vc, self.v_used = z(B, N, 3, 3), z(B, N, 3), z(B, N, 3)  # the boundaries' no-slip viscosity
        self.vtab = torch.as_tensor(K.viscosity_table(self.support_radius, self.particle_size), dtype=fl,
                                    device=dev).contiguous()
        self.nbr = torch.full((B, N, K.MAX_NEIGHBOURS), -1, dtype=torch.int32, device=dev)
        self.nbr_n = z(B, N, dtype=torch.int32)
        self.overflow = z(B, dtype=torch.int32)
        self.ext_dv = z(B, N, 3)  # velocity changes from couplings (the MPM exchange), applied by the next step
        self.impulse = None
        self._warned_overflow = False
        self.requires_grad = bool(self.sim_options.requires_grad)
        if self.requires_grad:
            if self.dfsph:
                raise GenesisError(f"{self.name}: differentiable mode runs WCSPH only (DFSPH's iterations stop on "
                                   "a tolerance, which the reverse cannot follow); use SPHOptions("
                                   "pressure_solver=\"WCSPH\") with SimOptions(requires_grad=True).")
            for x in (self.rho, self.aux, self.psi, self.gpsi, self.vm, self.vc):
                x.requires_grad_(True)
                x.grad = torch.zeros_like(x)
            self.acc = z(B, N, 3).requires_grad_(True)
            self.acc.grad = torch.zeros_like(self.acc)
            self._stages = [(self.psi, self.gpsi, self.vm, self.vc)]  # the boundary after the walls, each geom
            self._copies = {}  # per collider: the view's pose arrays, one copy per chunk of particles
            self._ad_rows = {}  # per collider: the reactions' chunk rows
            self._ad_run = None  # what the last _substep_ad read of the colliders
        if self.dfsph:
            self.acc, self.kap, self.err = z(B, N, 3), z(B, N), z(B, N)
            self.err_parts = z(B, K.ERROR_PARTS)
            self.conv, self.iters = z(B, dtype=torch.int32), z(B, dtype=torch.int32)
            self.err_env = z(B)
            # per environment, of the last substep: iterations of the divergence and density solves, final errors
            self.last_iterations = z(B, 2, dtype=torch.int32)
            self.last_errors = z(B, 2)
        # stand-ins for a scene without colliders (the boundary kernels always take a collider's arrays)
        self._no_view = None
        self._impulse_rows = {}
        self._walls_deduped = False
        self._views = {}
        self._exchange = None  # (radii, inverse masses [B, N]) in the particle exchange (exchange_view)

    # -- the substep -----------------------------------------------------------------------------------------------

    def _empty_arrays(self):
        if self._no_view is None:
            fl, dev, B = self.float_dtype, self.device, self.batch
            i32 = dict(dtype=torch.int32, device=dev)
            self._no_view = (torch.zeros(1, **i32), torch.zeros((1, 3), dtype=fl, device=dev),
                             torch.full((1,), -1, **i32), torch.zeros((1, 2), **i32),
                             torch.zeros((1, 4), dtype=fl, device=dev), torch.zeros((B, 1, 3), dtype=fl, device=dev),
                             torch.zeros((B, 1, 4), dtype=fl, device=dev), torch.zeros((B, 1, 3), dtype=fl, device=dev),
                             torch.zeros((B, 1, 3), dtype=fl, device=dev), torch.zeros((B, 1, 3), dtype=fl, device=dev))
        return self._no_view

    def _views_of(self, f):
        """[(contact, view, arrays)] of every collider at substep f: its view, checked, and the arrays the
        boundary kernels read from it (the kit's stand-ins for what it leaves out), taken once per substep."""
        views = []
        for collider, contact, extras in self._boundaries:
            view = collider.collider_view(f)
            check_view(view, self.batch, collider.name, f"the boundary of {self.name}")
            _inv_mass, _inv_inertia, geom_hull, hull_planes = extras(view, self.batch, self.float_dtype, self.device)
            arrays = (view.geom_type, view.geom_size, view.geom_body, geom_hull, hull_planes, view.geom_pos,
                      view.geom_quat, view.body_com, view.body_lin_vel, view.body_ang_vel)
            views.append((contact, view, arrays))
        return views

    def _dedupe_walls(self, views):
        """A static plane geom on a domain face already is that wall: the wall's own term is turned off, so the
        boundary is not counted twice (Genesis's tutorial puts a Plane on the domain's floor)."""
        self._walls_deduped = True
        changed = False
        for _contact, view, _arrays in views:
            types = view.geom_type.detach().cpu().numpy()
            bodies = view.geom_body.detach().cpu().numpy()
            for g in np.flatnonzero((types == GEOM_PLANE) & (bodies < 0)):
                pos = view.geom_pos[:, g].detach().double().cpu().numpy()
                quat = view.geom_quat[:, g].detach().double().cpu().numpy()
                normals = np.stack([quat_to_mat(q)[:, 2] for q in quat])
                for a in range(3):
                    for side, bound in ((0, self.lower[a]), (1, self.upper[a])):
                        want = np.zeros(3)
                        want[a] = 1.0 if side == 0 else -1.0
                        if (np.allclose(normals, want, atol=1e-9)
                                and np.allclose(pos[:, a], bound, atol=1e-9 * max(1.0, abs(bound)))):
                            self._prm_np[K.P_WALLS + 2 * a + side] = 0.0
                            changed = True
        if changed:  # (the walls' switches alone: the gravity there may have been set since build)
            walls = slice(K.P_WALLS, K.P_WALLS + 6)
            with torch.no_grad():
                self.params_f[walls] = torch.as_tensor(self._prm_np[walls], dtype=self.float_dtype)

    def substep_post_coupling(self, f):
        if self.requires_grad:
            self._substep_ad(f)
            return
        st, launch = self.state, self._launch
        fn = self.frames.next(f)
        views = self._views_of(f)
        if not self._walls_deduped:
            self._dedupe_walls(views)
        self.grid.build(st.pos, st.active, f)
        # the boundaries: walls, then each collider's geoms
        if not views:
            launch(K.boundary_terms, f, 0, 0, self.params_f, st.pos, st.active, *self._empty_arrays(), self.psi,
                   self.gpsi, self.vgpsi, self.vtab, self.vm, self.vc)
        for n, (_contact, view, arrays) in enumerate(views):
            launch(K.boundary_terms, f, int(n > 0), view.geom_type.shape[0], self.params_f, st.pos, st.active,
                   *arrays, self.psi, self.gpsi, self.vgpsi, self.vtab, self.vm, self.vc)
        g = self.grid
        launch(K.density, f, int(self.dfsph), self.params_f, st.pos, st.active, g.table, g.order, g.cells,
               self.p_mass, self.p_mat, self.psi, self.gpsi, self.nbr, self.nbr_n, self.overflow, self.rho, self.aux)
        if self.dfsph:
            self._dfsph(f, fn)
        else:
            launch(K.wcsph_step, f, fn, self.params_f, st.pos, st.vel, st.active, self.p_mass, self.p_mat, self.rho,
                   self.aux, self.nbr, self.nbr_n, self.gpsi, self.vm, self.vc, self.coef, self.v_used, self.ext_dv)
        for contact, view, arrays in views:
            self._react(f, view, arrays)
            contact.couple(f)
        self.keep_inside(fn)
        if not self._warned_overflow:
            self._warn_overflow()

    # -- differentiable mode (WCSPH, the walls) ---------------------------------------------------------------------

    def _substep_ad(self, f):
        """The WCSPH substep with kernels whose `.grad` is exact (kernels.*_ad): the same physics functions as
        the plain step, sums accumulated into arrays, each collider's geoms one launch each (primitives: the
        boundary terms, then the reactions). The neighbour lists are the forward's (the core runs the forward of
        a substep again just before its reverse)."""
        st, launch, g = self.state, self._launch, self.grid
        fn = self.frames.next(f)
        views = self._views_of(f)
        if not self._walls_deduped:
            self._dedupe_walls(views)
        self.grid.build(st.pos.detach(), st.active, f)
        with torch.no_grad():
            self.acc.zero_()
        launch(K.walls_ad, f, self.params_f, st.pos, st.active, self.psi, self.gpsi, self.vtab, self.vm)
        run = []  # per collider: (view, its pose copies, its reaction rows, its first stage)
        stage = 0
        for n, (_contact, view, _arrays) in enumerate(views):
            n_geoms = view.geom_type.shape[0]
            if n_geoms == 0:
                continue
            if bool((view.geom_type == GEOM_MESH).any()):
                raise GenesisError(f"{self.name}: in differentiable mode the boundaries are primitives (planes, "
                                   "spheres, capsules, cylinders, boxes); a collider has mesh geoms.")
            copies = self._pose_copies(n, view)
            first = stage
            for geom in range(n_geoms):
                launch(K.geom_terms_ad, f, geom, self.params_f, st.pos, st.active, view.geom_type, view.geom_size,
                       view.geom_body, *copies, self.vtab, *self._stage(stage), *self._stage(stage + 1))
                stage += 1
            run.append((view, copies, self._reaction_rows(n, view), first))
        psi, gpsi, vm, vc = self._stage(stage)
        launch(K.density, f, 0, self.params_f, st.pos, st.active, g.table, g.order, g.cells, self.p_mass, self.p_mat,
               psi, gpsi, self.nbr, self.nbr_n, self.overflow, self.rho, self.aux)  # the lists
        launch(K.density_ad, f, self.params_f, st.pos, st.active, self.p_mass, self.p_mat, psi, self.nbr,
               self.nbr_n, self.rho)
        launch(K.pressure_ad, st.active, self.p_mat, self.rho, self.aux)
        launch(K.accel_ad, f, self.params_f, st.pos, st.vel, st.active, self.p_mass, self.p_mat, self.rho, self.aux,
               self.nbr, self.nbr_n, self.acc)
        launch(K.integrate_ad, f, fn, self.params_f, st.pos, st.vel, st.active, self.p_mat, self.rho, self.aux,
               gpsi, vm, vc, self.acc)
        for view, copies, rows, _first in run:
            with torch.no_grad():
                rows.zero_()
            for geom in range(view.geom_type.shape[0]):
                launch(K.reactions_ad, f, geom, self.params_f, st.pos, st.vel, st.active, self.p_mass, self.p_mat,
                       self.rho, self.aux, psi, self.vtab, view.geom_type, view.geom_size, view.geom_body, *copies,
                       rows)
            n_bodies = view.body_impulse.shape[1]
            if n_bodies:
                sum_parts(rows[:, :, :n_bodies], view.body_impulse, add=True)
        for contact, _view, _arrays in views:
            contact.couple(f)  # its reverse is the identity (it acts only on a particle that got into a geom)
        self.keep_inside(fn)  # its gradient is taken as the identity (it acts only on a particle that left)
        self._ad_run = (run, stage)
        if not self._warned_overflow:
            self._warn_overflow()

    def _stage(self, k):
        """The boundary's arrays (psi, gpsi, vm, vc) after the walls (k = 0) and after k geoms."""
        while len(self._stages) <= k:
            arrays = tuple(torch.zeros_like(x.detach()).requires_grad_(True) for x in self._stages[0])
            for x in arrays:
                x.grad = torch.zeros_like(x)
            self._stages.append(arrays)
        return self._stages[k]

    def _pose_copies(self, n, view):
        """Collider n's pose arrays, one copy per chunk of particles [K, B, ...] (their adjoints are summed over
        the chunks afterwards, in order)."""
        k = n_chunks(self.n_particles, self.batch)
        copies = self._copies.setdefault(n, {})
        out = []
        with torch.no_grad():
            for name in POSE_ARRAYS:
                src = getattr(view, name).detach()
                c = copies.get(name)
                if c is None or c.shape != (k, *src.shape):
                    c = copies[name] = torch.zeros((k, *src.shape), dtype=src.dtype, device=src.device)
                    c.requires_grad_(True)
                    c.grad = torch.zeros_like(c)
                c.copy_(src.unsqueeze(0).expand_as(c))
                out.append(c)
        return out

    def _reaction_rows(self, n, view):
        shape = (n_chunks(self.n_particles, self.batch), self.batch, max(view.body_impulse.shape[1], 1), 6)
        rows = self._ad_rows.get(n)
        if rows is None or rows.shape != shape:
            rows = self._ad_rows[n] = torch.zeros(shape, dtype=self.float_dtype, device=self.device)
            rows.requires_grad_(True)
            rows.grad = torch.zeros_like(rows)
        return rows

    def substep_pre_coupling_grad(self, f):
        pass

    def substep_post_coupling_grad(self, f):
        """The reverse of _substep_ad: the adjoint of frame fn (and of the impulses handed to the colliders'
        bodies, `view.body_impulse.grad`) into frame f's positions and velocities and the `.grad` of the views'
        pose arrays."""
        st, launch = self.state, self._launch
        fn = self.frames.next(f)
        run, n_stages = self._ad_run
        with torch.no_grad():
            for x in (self.rho, self.aux, self.acc, *[a for k in range(n_stages + 1) for a in self._stage(k)]):
                x.grad.zero_()
        psi, gpsi, vm, vc = self._stage(n_stages)
        for view, copies, rows, _first in run:
            n_bodies = view.body_impulse.shape[1]
            with torch.no_grad():
                rows.grad.zero_()
                for c in copies:
                    c.grad.zero_()
                if n_bodies and view.body_impulse.grad is not None:
                    rows.grad[:, :, :n_bodies] = view.body_impulse.grad.unsqueeze(0)
            for geom in reversed(range(view.geom_type.shape[0])):
                launch(K.reactions_ad.grad, f, geom, self.params_f, st.pos, st.vel, st.active, self.p_mass,
                       self.p_mat, self.rho, self.aux, psi, self.vtab, view.geom_type, view.geom_size,
                       view.geom_body, *copies, rows)
        launch(K.integrate_ad.grad, f, fn, self.params_f, st.pos, st.vel, st.active, self.p_mat, self.rho, self.aux,
               gpsi, vm, vc, self.acc)
        launch(K.accel_ad.grad, f, self.params_f, st.pos, st.vel, st.active, self.p_mass, self.p_mat, self.rho,
               self.aux, self.nbr, self.nbr_n, self.acc)
        launch(K.pressure_ad.grad, st.active, self.p_mat, self.rho, self.aux)
        launch(K.density_ad.grad, f, self.params_f, st.pos, st.active, self.p_mass, self.p_mat, psi, self.nbr,
               self.nbr_n, self.rho)
        for view, copies, _rows, first in reversed(run):
            for geom in reversed(range(view.geom_type.shape[0])):
                stage = first + geom
                launch(K.geom_terms_ad.grad, f, geom, self.params_f, st.pos, st.active, view.geom_type,
                       view.geom_size, view.geom_body, *copies, self.vtab, *self._stage(stage),
                       *self._stage(stage + 1))
            for name, c in zip(POSE_ARRAYS, copies):
                target = getattr(view, name)
                if target.grad is not None:
                    sum_parts(c.grad, target.grad, add=True)
        launch(K.walls_ad.grad, f, self.params_f, st.pos, st.active, self.psi, self.gpsi, self.vtab, self.vm)

    def _dfsph(self, f, fn):
        st, launch, o = self.state, self._launch, self.options
        common = (self.params_f, st.pos, st.vel, st.active, self.p_mass, self.p_mat, self.rho)
        n_active = self.grid.stats  # [B, 3]: the active particles in column ST_ACTIVE (0)
        solves = ((K.DIVERGENCE, st.kappa_v, o.max_divergence_solver_iterations, 1, o.max_divergence_error / 100),
                  (K.DENSITY, st.kappa, o.max_density_solver_iterations, 2, o.max_density_error_percent / 100))
        check_every = 1 if self.device.type == "cpu" else CHECK_EVERY_GPU
        for s, (mode, ksum, max_it, min_it, eta) in enumerate(solves):
            if mode == K.DENSITY:
                launch(K.dfsph_accel, f, fn, *common, self.nbr, self.nbr_n, self.vm, self.vc, self.acc, self.v_used)
            launch(K.dfsph_begin, f, fn, WARM_START, st.vel, st.active, ksum, self.kap, ksum, self.conv, self.iters,
                   int(mode == K.DIVERGENCE), self.ext_dv)
            apply_args = (self.params_f, st.pos, st.vel, st.active, self.p_mass, self.p_mat, self.rho, self.nbr,
                          self.nbr_n, self.gpsi, self.acc if mode == K.DENSITY else self.gpsi, self.kap, ksum,
                          self.err, self.err_parts, n_active, self.conv, self.iters, self.err_env)
            # the warm start (and, before the density solve, the non-pressure forces)
            launch(K.dfsph_apply, f, fn, 0, int(mode == K.DENSITY), 0, min_it, max_it, 0.0, *apply_args)
            for it in range(max_it + 1):
                launch(K.dfsph_error, f, fn, mode, *common, self.aux, self.nbr, self.nbr_n, self.gpsi, self.vgpsi,
                       self.conv, self.kap, self.err)
                launch(K.dfsph_apply, f, fn, 1, 0, it, min_it, max_it, float(eta), *apply_args)
                if (it + 1) % check_every == 0 and bool(self.conv.all()):
                    break
            with torch.no_grad():
                self.last_iterations[:, s] = self.iters
                self.last_errors[:, s] = self.err_env
        launch(K.dfsph_finish, f, fn, self.params_f, st.pos, st.vel, st.active, self.rho, st.kappa_v, st.kappa,
               self.coef)

    def _react(self, f, view, arrays):
        n_geoms, n_bodies = view.geom_type.shape[0], view.body_impulse.shape[1]
        if n_geoms == 0 or n_bodies == 0:
            return
        B, N = self.batch, self.n_particles
        k = n_chunks(N, B)
        key = id(view.body_impulse)
        rows = self._impulse_rows.get(key)
        if rows is None or rows.shape != (k, B, n_bodies, 6):
            rows = self._impulse_rows[key] = torch.zeros((k, B, n_bodies, 6), dtype=self.float_dtype,
                                                         device=self.device)
        st = self.state
        self._launch(K.reactions, f, n_geoms, self.params_f, st.pos, st.active, self.p_mass, self.p_mat, self.coef,
                     self.psi, self.v_used, self.vtab, *arrays, rows)
        sum_parts(rows, view.body_impulse, add=True)

    def _warn_overflow(self):
        """Warn once if a particle had more neighbours than its list holds."""
        if int(self.overflow.max()) > 0:
            self._warned_overflow = True
            warnings.warn(f"{self.name}: a particle had {int(self.overflow.max())} neighbours within the support "
                              f"radius, more than the {K.MAX_NEIGHBOURS} its list holds: the liquid is compressed "
                              "far beyond its rest density (a smaller substep, a stiffer liquid or DFSPH helps).", stacklevel=2)

    # -- coupling --------------------------------------------------------------------------------------------------

    def particle_view(self, f) -> ParticleView:
        """Frame f + 1 after this substep's SPH step: what the kit's contact puts back outside the geoms."""
        fn = self.frames.next(f)
        if fn not in self._views:
            st = self.state
            self._views[fn] = ParticleView(pos=st.at("pos", fn), vel=st.at("vel", fn), mass=self.p_mass,
                                           active=st.at("active", fn), radius=0.0, restitution=0.0)
        return self._views[fn]

    def exchange_view(self, f):
        """Frame f (the liquid meets other solvers' particles before its step; `pair_exchange`), particles of
        radius particle_size / 2; the velocity change goes into the step's external velocity change, the overlap's
        projection moves frame f's positions, which the step starts from."""
        if self._exchange is None:
            self._exchange = (torch.full((self.n_particles,), 0.5 * self.particle_size, dtype=self.float_dtype,
                                         device=self.device),
                              (1.0 / self.p_mass).expand(self.batch, -1).contiguous())
        radius, inv_mass = self._exchange
        views = self.__dict__.setdefault("_exchange_views", {})  # the same views every time: the launches bind once
        if f not in views:
            st = self.state
            views[f] = ExchangeView(pos=st.at("pos", f), vel=st.at("vel", f), inv_mass=inv_mass, radius=radius,
                                    active=st.at("active", f), ext_dv=self.ext_dv)
        return views[f]

    def exchange_with_mpm(self, f, grid):
        """Called by `MPMSPHCoupling` at coupling time of substep f with the MPM solver's `grid_view(f)`: the
        liquid's frame f against the grid (genesis_core.particles.grid_exchange); the particles' share is applied
        by this substep's step."""
        st = self.state
        if self.impulse is None:
            self.impulse = torch.zeros_like(self.ext_dv)
        self._launch(grid_exchange.mpm_exchange, f, f, st.pos, st.vel, st.active, self.p_mass, *grid.origin,
                     1.0 / grid.dx, grid.velocity, grid.mass, self.impulse, self.ext_dv)

    # -- inspection ------------------------------------------------------------------------------------------------

    def densities(self) -> torch.Tensor:
        """[B, N]: the densities (kg/m^3) of the last substep's start, fluid and boundary."""
        return self.rho

    def pressures(self) -> torch.Tensor:
        """[B, N]: the pressures (Pa) of the last substep: WCSPH: Tait's; DFSPH: (kappa_v + kappa) rho, the two
        solves' pressure (their p / rho^2 is kappa / rho)."""
        st = self.state
        if self.dfsph:
            return (st.kappa_v[self.frame] + st.kappa[self.frame]) * self.rho
        return self.aux * self.rho * self.rho

