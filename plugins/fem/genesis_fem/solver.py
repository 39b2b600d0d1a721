"""FEMSolver: tetrahedral soft bodies (linear tetrahedra), explicit or implicit, batched over environments, on the
particle kit (the mesh's vertices are its particles: the entity API, the contacts with every collider and the
domain's walls come from the kit).

A substep (frame f -> fn) runs in the pre-coupling part, so that the kit's contact with the colliders acts on its
result:

- explicit (symplectic Euler): each element's forces (`kernels.element_forces`), gathered per vertex in a fixed
  order, then `kernels.explicit_update` (external and soft-constraint forces, damping, gravity, the floor, hard
  constraints);
- implicit (backward Euler, `use_implicit_solver=True`): `n_newton_iterations` Newton iterations on the
  incremental potential (see kernels.py), each a block-Jacobi preconditioned conjugate-gradient solve of at most
  `n_pcg_iterations` iterations and a backtracking line search of at most `n_linesearch_iterations` trials; every
  loop is masked per environment (an environment that converged stops changing while others iterate).

The vertices' lumped masses are rho W / 4 from each incident element (Genesis World divides each element's force
by the whole element's mass instead).
"""

from __future__ import annotations

import numpy as np
import torch

import genesis_core as gs
from genesis_core.errors import GenesisError
from genesis_core.launch import Launcher
from genesis_core.particles.coupling import ParticleView
from genesis_core.particles.solver import ParamsGravity, ParticleSolver

from . import kernels as K
from .entity import FEMEntity
from .materials import Elastic
from .options import FEMOptions

CHECK_EVERY = 8  # conjugate-gradient iterations between two looks at the environments' convergence flags
SERIAL_BELOW = 4000  # element-environments below which the kernels run serial (kernels.SERIAL)


class FEMSolver(ParamsGravity, ParticleSolver):
    """State: the kit's pos, vel, active (per vertex); the material (E, nu per entity), muscle actuation and
    fibre directions (per element), external vertex forces, and the vertex constraints."""

    short_name = "fem"
    gravity_param = K.P_GX  # set_gravity after build writes params_f there (the explicit and implicit kernels)
    order = 50
    options_class = FEMOptions
    material_class = Elastic
    entity_class = FEMEntity
    supports_grad = True  # the explicit solver (see docs/fem.md)
    _pos, _vel, _active = ParticleSolver.particle_fields
    state_fields = (
        _pos, _vel, _active,
        gs.FieldSpec("E", ("n_entities",), frames=False, grad=True, bounds=(0, None), bounds_open=(True, False),
                     doc="Young's modulus per entity, Pa"),
        gs.FieldSpec("nu", ("n_entities",), frames=False, grad=True, bounds=(0, 0.5), bounds_open=(False, True),
                     doc="Poisson's ratio per entity"),
        gs.FieldSpec("actu", ("n_elements",), frames=False, grad=True,
                     doc="muscle actuation per element (its group's), dimensionless"),
        gs.FieldSpec("mdir", ("n_elements", 3), frames=False, bounds=(-1.0, 1.0),
                     doc="muscle fibre direction per element (unit vector, rest frame)"),
        gs.FieldSpec("force", ("n_particles", 3), frames=False, grad=True, doc="external force per vertex, N"),
        gs.FieldSpec("cons", ("n_particles",), dtype="int", frames=False, codes=(K.FREE, K.HARD, K.SOFT),
                     doc="vertex constraint: 0 free, 1 hard (held at its target), 2 soft (a spring to it)"),
        gs.FieldSpec("cons_target", ("n_particles", 3), frames=False, domain=True,
                     doc="vertex constraint target, m"),
        gs.FieldSpec("cons_k", ("n_particles",), frames=False, bounds=(0, None),
                     doc="soft vertex constraint stiffness, N/m"),
        gs.FieldSpec("cons_link", ("n_particles",), dtype="int", frames=False, bounds=(-1, None),
                     doc="the rigid link (solver index) a constrained vertex follows, -1 none"),
        gs.FieldSpec("cons_local", ("n_particles", 3), frames=False,
                     doc="a link-following vertex's target in the link's centre-of-mass frame, m"),
    )
    del _pos, _vel, _active
    link_fields = ("cons_link",)  # checked against the scene's rigid links (ParticleSolver.link_rule)

    def __init__(self, scene, sim_options, options=None):
        super().__init__(scene, sim_options, options)
        o = self.options
        self.floor = sim_options.floor_height if o.floor_height is None else o.floor_height
        self.implicit = o.use_implicit_solver
        self.n_elements = 0

    def default_particle_size(self):
        return 0.01

    # -- entities --------------------------------------------------------------------------------------------------

    def sample_entity(self, idx, morph, material):
        from genesis_core.meshing import surface_faces, tetrahedralize

        verts, tets = tetrahedralize(morph)  # refuses a morph it cannot mesh, naming the kinds it can
        self._pending = (np.asarray(tets, dtype=np.int64), surface_faces(tets))
        return np.asarray(verts, dtype=np.float64)

    def add_entity(self, idx, morph, material):
        entity = super().add_entity(idx, morph, material)
        entity._tets, entity._faces = self._pending
        del self._pending
        return entity

    # -- build -----------------------------------------------------------------------------------------------------

    def build_model(self):
        fl, dev = self.float_dtype, self.device
        verts, tets, info, k_muscle = [], [], [], []
        v0 = e0 = 0
        for i, e in enumerate(self.entities):
            n, m = len(e._points), len(e._tets)
            e._setup(v0, v0 + n, i)
            e.element_start, e.element_end = e0, e0 + m
            verts.append(e._points)
            tets.append(e._tets + v0)
            info.append(np.tile([i, K.MODEL_CODES[e.material.model]], (m, 1)))
            k_muscle.append(np.full(m, e.material.muscle_stiffness))
            v0, e0 = v0 + n, e0 + m
        X = np.concatenate(verts)
        T = np.concatenate(tets).astype(np.int64)
        Dm = np.stack([X[T[:, 1]] - X[T[:, 0]], X[T[:, 2]] - X[T[:, 0]], X[T[:, 3]] - X[T[:, 0]]], axis=2)
        det = np.linalg.det(Dm)
        if not (det > 0).all():
            raise GenesisError(f"{self.name}: {int((det <= 0).sum())} elements have a non-positive rest volume.")
        vol = det / 6.0
        rho = np.concatenate([np.full(len(e._tets), e.material.rho) for e in self.entities])
        mass = np.zeros(len(X))
        np.add.at(mass, T.ravel(), np.repeat(rho * vol / 4.0, 4))
        # incidence, vertex by vertex, in (element, corner) order: the fixed order of every gather
        corner = np.argsort(T.ravel(), kind="stable")
        counts = np.bincount(T.ravel(), minlength=len(X))
        if (counts == 0).any():
            raise GenesisError(f"{self.name}: {int((counts == 0).sum())} vertices belong to no element.")
        self._points = X
        self.n_particles, self.n_elements = len(X), len(T)
        # runs of consecutive elements of one model: each runs its model's kernels (a compile-time constant)
        self.model_runs = []
        for e in self.entities:
            code = K.MODEL_CODES[e.material.model]
            if self.model_runs and self.model_runs[-1][0] == code:
                self.model_runs[-1][2] = e.element_end
            else:
                self.model_runs.append([code, e.element_start, e.element_end])
        self.model_runs = [tuple(r) for r in self.model_runs]

        def t(x, dtype=fl):
            return torch.as_tensor(np.ascontiguousarray(x), dtype=dtype, device=dev)

        self.p_mass = t(mass)
        self.p_entity = t(np.concatenate([np.full(len(e._points), i) for i, e in enumerate(self.entities)]),
                          torch.int64)
        self.el2v = t(T, torch.int32)
        self.Dm_inv = t(np.linalg.inv(Dm))
        self.vol = t(vol)
        self.e_info = t(np.concatenate(info), torch.int32)
        self.e_k = t(np.concatenate(k_muscle))
        self.v_start = t(np.concatenate([[0], np.cumsum(counts)]), torch.int32)
        # the per-corner rows (ef, eblk, eq) vertex by vertex: (element, corner) 4 e + k writes row slot[4 e + k],
        # so vertex i sums the contiguous rows v_start[i] .. v_start[i + 1] - 1 (in element order)
        slot = np.empty(len(corner), dtype=np.int32)
        slot[corner] = np.arange(len(corner), dtype=np.int32)
        self.e_slot = t(slot, torch.int32)
        surface = np.zeros(len(X), dtype=np.int32)
        for e in self.entities:
            surface[e._faces.ravel() + e.particle_start] = 1
        self.on_surface = t(surface, torch.int32)
        self.contact_active = torch.zeros((self.batch, len(X)), dtype=torch.int32, device=dev)
        self._build_params()
        self._build_scratch()

    def _build_params(self):
        o, so = self.options, self.sim_options
        prm = np.zeros(K.P_N)
        prm[[K.P_DT, K.P_GX, K.P_GY, K.P_GZ]] = (self.substep_dt, *so.gravity)
        prm[K.P_DAMP] = o.damping
        prm[K.P_FLOOR], prm[K.P_FLOOR_ON] = self.floor, 1.0
        prm[K.P_ALPHA], prm[K.P_BETA] = o.damping_alpha, o.damping_beta
        self.params_f = torch.tensor(prm, dtype=self.float_dtype, device=self.device)

    def _build_scratch(self):
        fl, dev, B, V, E = self.float_dtype, self.device, self.batch, self.n_particles, self.n_elements
        self._launch = Launcher()
        self.kern = K.load(serial=dev.type == "cpu" and B * E < SERIAL_BELOW)

        def z(*shape, dtype=fl):
            return torch.zeros(shape, dtype=dtype, device=dev)

        self.ef = z(B, 4 * E, 3)  # per (element, corner): row 4 e + corner
        self.vforce = z(B, V, 3)
        self.requires_grad = bool(self.sim_options.requires_grad)
        if self.requires_grad:
            if self.implicit:
                raise GenesisError(f"{self.name}: differentiable mode runs the explicit solver only (the implicit "
                                   "solver's Newton and CG loops stop on tolerances, and their adjoint is not "
                                   "written); use FEMOptions(use_implicit_solver=False) with "
                                   "SimOptions(requires_grad=True).")
            if any(e.material.model == "linear_corotated" for e in self.entities):
                raise GenesisError(f"{self.name}: differentiable mode does not take the linear_corotated model "
                                   "(its polar decomposition has no reverse here); use \"linear\" or "
                                   "\"stable_neohookean\".")
            for x in (self.ef, self.vforce):
                x.requires_grad_(True)
                x.grad = torch.zeros_like(x)
        if self.implicit:
            self.xhat, self.r, self.zv, self.p, self.d, self.q, self.nr = (z(B, V, 3) for _ in range(7))
            self.pinv = z(B, V, 3, 3)
            self.vdot, self.veng, self.moved = z(B, V), z(B, V), z(B, V)
            self.hd = z(B, E, K.HD_N)
            self.eq = z(B, 4 * E, 3)
            self.eblk = z(B, 4 * E, 3, 3)
            self.eng = z(B, E)
            self.trial = z(1, B, V, 3)
            self.rz, self.rz0, self.alpha = z(B), z(B), z(B)
            self.e0, self.slope, self.step = z(B), z(B), z(B)
            i32 = dict(dtype=torch.int32)
            self.done, self.conv, self.iters, self.searching = (z(B, **i32) for _ in range(4))
            # per environment, of the last substep: Newton iterations, CG iterations summed over them
            self.last_newton_iterations = z(B, **i32)
            self.last_cg_iterations = z(B, **i32)

    def state_dims(self):
        return {**super().state_dims(), "n_elements": self.n_elements}

    def init_state(self, f):
        super().init_state(f)
        st = self.state
        st.at("cons_link", f)[:] = -1
        for i, e in enumerate(self.entities):
            st.at("E", f)[:, i] = e.material.E
            st.at("nu", f)[:, i] = e.material.nu
        st.at("mdir", f)[:] = torch.tensor([0.0, 0.0, 1.0], dtype=self.float_dtype)

    # -- the substep -----------------------------------------------------------------------------------------------

    _linked = (None, False)  # (version of cons_link, whether a vertex follows a link)

    def _follow_links(self, f):
        """The targets of the vertices that follow a link: the link's pose at the end of this substep (the rigid
        solver's collider view of substep f) applied to their local points. One-way: the link does not feel them."""
        st = self.state
        t = st.tensors["cons_link"]
        if self._linked[0] != (id(t), t._version):
            self._linked = ((id(t), t._version), bool((t >= 0).any()))
        if not self._linked[1] or self._link_source is None:
            return
        from genesis_core.utils.geom import transform_by_quat

        view = self._link_source.collider.collider_view(f)
        link = st.cons_link.long()
        follow = (link >= 0) & (st.cons != K.FREE)
        safe = link.clamp(min=0)
        rows = torch.arange(self.batch, device=self.device)[:, None]
        com = view.body_com.detach()[rows, safe]
        quat = view.body_quat.detach()[rows, safe]
        with torch.no_grad():
            target = com + transform_by_quat(st.cons_local, quat)
            st.cons_target.copy_(torch.where(follow[..., None], target, st.cons_target))

    def substep_pre_coupling(self, f):
        fn = self.frames.next(f)
        self._follow_links(f)
        if self.implicit:
            self._implicit(f, fn)
        else:
            self._explicit(f, fn)

    def _explicit(self, f, fn):
        st, launch = self.state, self._launch
        for model, e0, e1 in self.model_runs:
            launch(self.kern.element_forces[model], e0, e1, f, st.pos, self.el2v, self.Dm_inv, self.vol, self.e_info,
                   self.e_k, st.mdir, st.E, st.nu, st.actu, self.e_slot, self.ef)
        if self.requires_grad:
            with torch.no_grad():
                self.vforce.zero_()
            launch(self.kern.gather_ad, self.v_start, self.ef, self.vforce)
            launch(self.kern.explicit_update, f, fn, self.params_f, st.pos, st.vel, st.active, self.p_mass,
                   self.vforce, st.force, st.cons, st.cons_target, st.cons_k)
        else:
            launch(self.kern.gather_update, f, fn, self.params_f, st.pos, st.vel, st.active, self.p_mass, self.v_start,
                   self.ef, st.force, st.cons, st.cons_target, st.cons_k)

    def _implicit(self, f, fn):
        st, launch, o = self.state, self._launch, self.options
        mat = (self.e_info, self.e_k, st.mdir, st.E, st.nu, st.actu)
        cons = (st.cons, st.cons_target, st.cons_k)
        launch(self.kern.implicit_begin, f, fn, self.params_f, st.pos, st.vel, st.active, st.cons, st.cons_target,
               self.xhat, self.done)
        self.last_cg_iterations.zero_()
        self.last_newton_iterations.zero_()
        for _newton in range(o.n_newton_iterations):
            for model, e0, e1 in self.model_runs:
                launch(self.kern.newton_elements[model], e0, e1, f, fn, self.params_f, st.pos, self.el2v, self.Dm_inv,
                       self.vol, *mat, self.done, self.hd, self.e_slot, self.ef, self.eblk, self.eng)
            launch(self.kern.newton_vertices, f, fn, self.params_f, st.pos, st.active, self.p_mass, *cons, st.force,
                   self.xhat, self.v_start, self.ef, self.eblk, self.done, self.r, self.zv, self.p,
                   self.d, self.pinv, self.nr, self.vdot, self.veng)
            self._cg()
            if o.n_linesearch_iterations:
                self._line_search(f, fn, mat, cons)
            else:
                self.step.fill_(1.0)
            self.last_newton_iterations += (self.done == 0).to(torch.int32)
            launch(self.kern.newton_step, fn, float(o.newton_dx_threshold), st.pos, self.d, self.step, self.done,
                   self.moved)
            if bool(self.done.all()):
                break
        launch(self.kern.implicit_finish, f, fn, self.params_f, st.pos, st.vel, st.active, st.cons)

    def _cg(self):
        st, launch, o = self.state, self._launch, self.options
        launch(self.kern.cg_start, self.vdot, self.done, self.rz, self.rz0, self.conv, self.iters)
        for it in range(o.n_pcg_iterations):
            for model, e0, e1 in self.model_runs:
                launch(self.kern.cg_elements[model], e0, e1, self.params_f, self.el2v, self.Dm_inv, self.vol,
                       self.e_info, self.e_k, st.mdir, st.E, st.nu, self.hd, self.p, self.conv, self.e_slot, self.eq)
            launch(self.kern.cg_q, self.params_f, st.active, self.p_mass, st.cons, st.cons_k, self.v_start,
                   self.eq, self.p, self.conv, self.q, self.vdot)
            launch(self.kern.cg_alpha, self.vdot, self.rz, self.conv, self.alpha)
            launch(self.kern.cg_update, self.alpha, self.conv, self.p, self.q, self.pinv, self.d, self.r, self.zv,
                   self.vdot)
            launch(self.kern.cg_direction, self.vdot, float(o.pcg_threshold), o.n_pcg_iterations, self.rz, self.rz0,
                   self.alpha, self.conv, self.iters, self.zv, self.p)
            if (it + 1) % CHECK_EVERY == 0 and bool(self.conv.all()):
                break
        self.last_cg_iterations += self.iters

    def _line_search(self, f, fn, mat, cons):
        st, launch, o = self.state, self._launch, self.options
        launch(self.kern.line_start, self.vdot, self.veng, self.eng, self.nr, self.d, self.done, self.e0, self.slope,
               self.step, self.searching)
        for it in range(o.n_linesearch_iterations):
            launch(self.kern.line_trial, fn, st.pos, self.d, self.step, self.searching, self.trial)
            for model, e0, e1 in self.model_runs:
                launch(self.kern.line_energy[model], e0, e1, f, self.params_f, st.pos, self.trial, self.el2v,
                       self.Dm_inv, self.vol, *mat, self.hd, self.searching, self.eng)
            launch(self.kern.line_energy_vertices, f, self.params_f, st.pos, self.trial, st.active, self.p_mass, *cons,
                   st.force, self.xhat, self.searching, self.veng)
            launch(self.kern.line_check, int(it == o.n_linesearch_iterations - 1), float(o.linesearch_c),
                   float(o.linesearch_tau), self.veng, self.eng, self.e0, self.slope, self.step, self.searching)
            if not bool(self.searching.any()):
                break

    def field_mask(self, f):
        """The vertices the force fields act on: the active ones not held by a hard constraint."""
        st = self.state
        return ((st.active != 0) & (st.cons != K.HARD)).to(torch.int32)

    def substep_post_coupling(self, f):
        self.keep_inside(self.frames.next(f))

    # -- differentiable mode (explicit) ----------------------------------------------------------------------------

    def substep_pre_coupling_grad(self, f):
        """The reverse of _explicit: Taichi's adjoint of its three kernels (each reads and writes distinct arrays)."""
        st, launch = self.state, self._launch
        fn = self.frames.next(f)
        with torch.no_grad():
            self.ef.grad.zero_()
            self.vforce.grad.zero_()
        launch(self.kern.explicit_update.grad, f, fn, self.params_f, st.pos, st.vel, st.active, self.p_mass, self.vforce,
               st.force, st.cons, st.cons_target, st.cons_k)
        launch(self.kern.gather_ad.grad, self.v_start, self.ef, self.vforce)
        for model, e0, e1 in reversed(self.model_runs):
            launch(self.kern.element_forces[model].grad, e0, e1, f, st.pos, self.el2v, self.Dm_inv, self.vol, self.e_info,
                   self.e_k, st.mdir, st.E, st.nu, st.actu, self.e_slot, self.ef)

    def substep_post_coupling_grad(self, f):
        pass  # keep_inside: the identity (it acts only on a vertex that left the domain)

    # -- coupling --------------------------------------------------------------------------------------------------

    def render_view(self, f):
        """What the cameras draw after this substep (frame f + 1): each entity's boundary triangles
        (`surface_triangles`) at its vertices' positions, per environment (genesis_core.render.RenderView)."""
        from genesis_core.render.view import kit_surface_view

        return kit_surface_view(self, self.frames.next(f), {e: e._faces for e in self.entities})

    def particle_view(self, f) -> ParticleView:
        """Frame f + 1 after this substep's FEM step: the kit's contact puts the surface's vertices back outside
        the geoms (interior vertices are left out of the contact: `contact_active` = active and on the surface)."""
        fn = self.frames.next(f)
        views = self.__dict__.setdefault("_views", {})
        st = self.state
        self._contact_mask(fn)
        if fn not in views:
            views[fn] = ParticleView(pos=st.at("pos", fn), vel=st.at("vel", fn), mass=self.p_mass,
                                     active=self.contact_active, radius=0.0, restitution=0.0)
        return views[fn]

    _mask_of = None  # (id, version) of the `active` tensor contact_active was computed from

    def _contact_mask(self, fn):
        """contact_active = active and on the surface, at frame fn: the vertices the couplings take (computed again
        only when `active`, which has no frames, was written)."""
        active = self.state.tensors["active"]
        key = (id(active), active._version)
        if key != self._mask_of:
            torch.mul(self.state.at("active", fn), self.on_surface, out=self.contact_active)
            self._mask_of = key

    def exchange_view(self, f):
        """Frame f + 1 after this substep's FEM step, against another solver's particles (`pair_exchange`, the SPH
        liquid): the surface's vertices, each of radius half the mean length of its surface edges (so that no
        particle slips between them), inverse mass 1 / its lumped mass, 0 if held by a hard constraint; the velocity
        change is applied at once and the positions move with it."""
        from genesis_core.particles.pair_exchange import ExchangeView

        fn = self.frames.next(f)
        st = self.state
        self._contact_mask(fn)
        if self.__dict__.get("_exchange") is None:
            from genesis_core.meshing import mean_edge_lengths

            radius = np.zeros(self.n_particles)
            for e in self.entities:
                tri = e._faces
                edges = np.concatenate([tri[:, [0, 1]], tri[:, [1, 2]], tri[:, [2, 0]]])
                radius[e.particle_start:e.particle_start + len(e._points)] = 0.5 * mean_edge_lengths(e._points, edges)
            self._exchange = (torch.as_tensor(radius, dtype=self.float_dtype, device=self.device),
                              torch.zeros((self.batch, self.n_particles), dtype=self.float_dtype, device=self.device))
        radius, inv_mass = self._exchange
        with torch.no_grad():  # held vertices do not move: infinite mass
            torch.where(st.cons == K.HARD, torch.zeros_like(inv_mass), 1.0 / self.p_mass, out=inv_mass)
        views = self.__dict__.setdefault("_exchange_views", {})  # the same views every time: the launches bind once
        if fn not in views:
            views[fn] = ExchangeView(pos=st.at("pos", fn), vel=st.at("vel", fn), inv_mass=inv_mass, radius=radius,
                                     active=self.contact_active)
        return views[fn]

    def exchange_with_mpm(self, f, grid):
        """Called by the MPM coupling (`grid_exchange.MPMGridCoupling`) at coupling time of substep f with the MPM
        solver's `grid_view(f)`: the surface's vertices (their frame f positions, their frame f + 1 velocities after this substep's FEM step)
        against the grid (genesis_core.particles.grid_exchange); their velocity change goes into frame f + 1 (and
        its position moves with it, dt * dv), the grid's into the MPM grid-to-particle."""
        from genesis_core.particles.grid_exchange import GridExchange

        self._contact_mask(self.frames.next(f))
        self.__dict__.setdefault("_grid_exchange", GridExchange())(self, f, grid, self.contact_active)

    # -- inspection ------------------------------------------------------------------------------------------------

    def element_energies(self, f=None) -> torch.Tensor:
        """[B, E]: each element's elastic energy W psi(F) (J) at frame f (default: the current one)."""
        out = torch.zeros(self.batch, self.n_elements, dtype=self.float_dtype, device=self.device)
        st = self.state
        fr = self.frame if f is None else f
        for model, e0, e1 in self.model_runs:
            self.kern.energies[model](e0, e1, fr, st.pos.detach(), self.el2v, self.Dm_inv, self.vol, self.e_info, self.e_k,
                              st.at("mdir", fr), st.at("E", fr), st.at("nu", fr), st.at("actu", fr), out)
        return out
