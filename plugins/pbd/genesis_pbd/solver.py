"""PBDSolver: position-based dynamics (XPBD) for cloth, ropes, elastic bodies, position-based fluids and free
particles, batched over environments, on the particle kit.

A substep (frame f -> fn) runs in the pre-coupling part (see kernels.py for each stage): prediction, the
Gauss-Seidel sweeps over the stretch, bending and volume constraints (multipliers accumulated over the substep:
XPBD as published), the fluid's density iterations, the particle collisions, the velocities, XSPH viscosity.
Then the kit's contact with every collider (`ParticleColliderCoupling`, particles of radius particle_size / 2)
and, in the post-coupling part, the domain's walls.

Masses are lumped: a cloth particle weighs a third of its triangles' mass (rho per area), a rope's half of its
segments', an elastic body's a quarter of its tets', a liquid's or free particle's rho * particle_size^3.
"""

from __future__ import annotations

import math

import numpy as np
import torch

import genesis_core as gs
from genesis_core.errors import GenesisError
from genesis_core.launch import Launcher
from genesis_core.particles.coupling import ParticleView
from genesis_core.particles.neighbours import NeighbourGrid
from genesis_core.particles.pair_exchange import ExchangeView
from genesis_core.particles.solver import ParamsGravity, ParticleSolver

from . import kernels as K
from . import topology as T
from .entity import PBDEntity
from .materials import CLOTH, ELASTIC, LIQUID, PARTICLE, Cloth, Elastic, _Base
from .options import PBDOptions

SERIAL_BELOW = 2048  # particle-environments below which the per-particle prediction and velocities run serial
MAX_CONTACTS = 16  # contacts per particle kept between the collision search and its correction pass


class PBDSolver(ParamsGravity, ParticleSolver):
    """State: the kit's pos, vel, active; `free` per particle (0: fixed); the attachments to rigid links; the
    compliances per entity."""

    short_name = "pbd"
    gravity_param = K.P_GX  # set_gravity after build writes params_f there (kernels.predict)
    order = 40
    options_class = PBDOptions
    material_class = _Base
    entity_class = PBDEntity
    supports_grad = True  # cloth, ropes, elastic bodies and free particles (see docs/pbd.md)
    _pos, _vel, _active = ParticleSolver.particle_fields
    state_fields = (
        _pos, _vel, _active,
        gs.FieldSpec("free", ("n_particles",), dtype="int", frames=False, codes=(0, 1),
                     doc="1: moved by the solver, 0: fixed (moves with its own velocity)"),
        gs.FieldSpec("attach_link", ("n_particles",), dtype="int", frames=False, bounds=(-1, None),
                     doc="the rigid link a particle is attached to (fix_particles_to_link), -1: none"),
        gs.FieldSpec("attach_local", ("n_particles", 3), frames=False,
                     doc="an attached particle's point in its link's frame (about the link's centre of mass), m"),
        gs.FieldSpec("stretch_compliance", ("n_entities",), frames=False, grad=True, bounds=(0, None),
                     doc="stretch (edge length) compliance per entity, m/N"),
        gs.FieldSpec("bending_compliance", ("n_entities",), frames=False, grad=True, bounds=(0, None),
                     doc="bending (dihedral angle) compliance per entity, 1/(N m)"),
        gs.FieldSpec("volume_compliance", ("n_entities",), frames=False, grad=True, bounds=(0, None),
                     doc="volume compliance per entity, m^3/N"),
    )
    del _pos, _vel, _active
    link_fields = ("attach_link",)  # checked against the scene's rigid links (ParticleSolver.link_rule)

    def __init__(self, scene, sim_options, options=None):
        super().__init__(scene, sim_options, options)
        self.requires_grad = bool(sim_options.requires_grad)

    def default_particle_size(self):
        return self.options.particle_size

    # -- entities --------------------------------------------------------------------------------------------------

    def sample_entity(self, idx, morph, material):
        if not isinstance(material, _Base):
            raise GenesisError(f"{type(material).__name__} is not a PBD material.")
        self._pending = {}
        if isinstance(material, Cloth):
            verts, faces, segs = T.cloth_mesh(morph)
            if len(faces):
                edges, quads = T.triangle_edges(faces)
                mass = T.lumped_triangle_mass(verts, faces, material.rho)
            else:
                edges, quads = np.unique(np.sort(segs, axis=1), axis=0), np.zeros((0, 4), dtype=np.int64)
                mass = T.lumped_segment_mass(verts, segs, material.rho)
            if (mass <= 0).any():
                raise GenesisError(f"{type(morph).__name__}(file={morph.file!r}): {int((mass <= 0).sum())} vertices "
                                   "belong to no triangle or segment of non-zero size.")
            self._pending = dict(faces=faces, edges=edges, quads=quads, mass=mass)
            return verts
        if isinstance(material, Elastic):
            from genesis_core.meshing import tetrahedralize

            verts, tets = tetrahedralize(morph)
            tets = np.asarray(tets, dtype=np.int64)
            self._pending = dict(tets=tets, edges=T.tet_edges(tets), mass=T.lumped_tet_mass(verts, tets, material.rho))
            return np.asarray(verts, dtype=np.float64)
        return super().sample_entity(idx, morph, _Sampler(material))  # the kit's masses (particle_masses)

    def add_entity(self, idx, morph, material):
        entity = super().add_entity(idx, morph, material)
        p = self._pending
        del self._pending
        entity._mass = p.get("mass")
        entity._faces = p.get("faces", PBDEntity._faces)
        entity._edges = p.get("edges", PBDEntity._edges)
        entity._quads = p.get("quads", np.zeros((0, 4), dtype=np.int64))
        entity._tets = p.get("tets", PBDEntity._tets)
        return entity

    # -- build -----------------------------------------------------------------------------------------------------

    def particle_masses(self, entity):
        """A mesh's lumped masses (sample_entity); a sampled liquid's or free particles' from the kit."""
        return super().particle_masses(entity) if entity._mass is None else entity._mass

    def build_particles(self):
        """After the kit laid out the particles (ranges, p_mass, p_entity): per-particle parameters, the
        constraints, the kernels' scratch."""
        fl, dev = self.float_dtype, self.device

        def t(x, dtype=fl):
            return torch.as_tensor(np.ascontiguousarray(x), dtype=dtype, device=dev)

        self.p_invm = t(1.0 / np.concatenate([self.particle_masses(e) for e in self.entities]))
        self.p_kind = t(np.concatenate([np.full(e.n_particles, e.material.kind) for e in self.entities]),
                        torch.int32)
        self.p_rho = t(np.concatenate([np.full(e.n_particles, e.material.rho) for e in self.entities]))
        self.p_mat = t(np.concatenate([np.tile(e.material.kernel_params(), (e.n_particles, 1))
                                       for e in self.entities]))
        self.p_rest = t(self._points)
        radius = np.concatenate([_radii(e, 0.5 * self.particle_size) for e in self.entities])
        self.p_radius = t(radius)
        self.reach = float(2.0 * radius.max())  # the largest contact distance
        self.has_liquid = any(e.material.kind == LIQUID for e in self.entities)
        self.has_contacts = any(e.material.kind != PARTICLE for e in self.entities)
        self._build_constraints()
        self._build_params()
        self._build_scratch()
        if self.requires_grad:
            self._build_grad()

    def _build_constraints(self):
        """Stretch, bending and volume constraints of every entity, in the sweeps' group order."""
        fl, dev, B = self.float_dtype, self.device, self.batch
        pts = self._points
        kinds = {"s": [], "q": [], "t": []}
        for i, e in enumerate(self.entities):
            o = e.particle_start
            m = e.material
            if len(e._edges):
                ij = e._edges + o
                rest = np.linalg.norm(pts[ij[:, 0]] - pts[ij[:, 1]], axis=1)
                kinds["s"].append((ij, rest, i, m.stretch_relaxation))
            if len(e._quads):
                q = e._quads + o
                rest = T.dihedral(*(pts[q[:, k]] for k in range(4)))
                kinds["q"].append((q, rest, i, m.bending_relaxation))
            if len(e._tets):
                tt = e._tets + o
                kinds["t"].append((tt, T.tet_volume(pts, tt), i, m.volume_relaxation))
        n_total = sum(len(x[0]) for v in kinds.values() for x in v)
        self.n_groups = T.n_groups(B, n_total)
        labels = T.slab_labels(pts, self.n_groups)
        width = {"s": 2, "q": 4, "t": 4}
        self._cons = {}
        for key, parts in kinds.items():
            if parts:
                idx = np.concatenate([p[0] for p in parts])
                rest = np.concatenate([p[1] for p in parts])
                ent = np.concatenate([np.full(len(p[0]), p[2]) for p in parts])
                relax = np.concatenate([np.full(len(p[0]), p[3]) for p in parts])
            else:  # a one-row stand-in (the kernels take an array; the group offsets select nothing)
                idx = np.zeros((1, width[key]), dtype=np.int64)
                rest, ent, relax = np.zeros(1), np.zeros(1, dtype=np.int64), np.ones(1)
            order, off = T.group_order(idx if parts else idx[:0], labels, self.n_groups)
            if parts:
                idx, rest, ent, relax = idx[order], rest[order], ent[order], relax[order]
            i32 = dict(dtype=torch.int32, device=dev)
            # flat arrays (kernels.solve_topology): particles [C * width], multipliers [B * C]
            self._cons[key] = (torch.as_tensor(idx, **i32).reshape(-1).contiguous(),
                               torch.as_tensor(rest, dtype=fl, device=dev),
                               torch.as_tensor(ent, **i32), torch.as_tensor(relax, dtype=fl, device=dev),
                               torch.as_tensor(off, **i32), torch.zeros(B * len(rest), dtype=fl, device=dev))
        self.n_stretch = int(self._cons["s"][4][-1])
        self.n_bending = int(self._cons["q"][4][-1])
        self.n_volume = int(self._cons["t"][4][-1])

    def _build_params(self):
        o, so = self.options, self.sim_options
        self.n_small = n_small_steps(so.substep_dt, o.small_step_dt)
        prm = np.zeros(K.P_N)
        prm[[K.P_DT, K.P_GX, K.P_GY, K.P_GZ]] = (so.substep_dt / self.n_small, *so.gravity)
        prm[K.P_SIZE] = self.particle_size
        prm[K.P_H] = 2.0 * self.particle_size
        prm[K.P_G0] = _lattice_gradient_norm(self.particle_size)
        prm[K.P_LO:K.P_LO + 3] = self.lower
        prm[K.P_HI:K.P_HI + 3] = self.upper
        self.params_f = torch.tensor(prm, dtype=self.float_dtype, device=self.device)
        # each of a substep's n_small steps runs ceil(n / n_small) of every iteration count n (0 stays 0)
        its = {key: -(-getattr(o, f"max_{key}_solver_iterations") // self.n_small)
               for key in ("stretch", "bending", "volume", "density", "viscosity")}
        self.small_iterations = its
        self.iterations = torch.tensor([its["stretch"], its["bending"], its["volume"]], dtype=torch.int32)

    def _build_scratch(self):
        fl, dev, B, N = self.float_dtype, self.device, self.batch, self.n_particles
        self._launch = Launcher()
        small = dev.type == "cpu" and B * N < SERIAL_BELOW
        self._predict, self._finish = (K.serial(k) if small else k for k in (K.predict, K.finish))
        self.w = torch.zeros((B, N), dtype=fl, device=dev)
        self._flat_w = self.w.view(-1)
        self._flat_views = {}
        self._gather_args = []
        if self.n_small > 1:  # the substep's start and each small step's end (substep_pre_coupling)
            self._mid_pos = torch.zeros((self.n_small + 1, B, N, 3), dtype=fl, device=dev)
            self._mid_vel = torch.zeros_like(self._mid_pos)
        self.dx = torch.zeros((B, N, 3), dtype=fl, device=dev)
        self.ext_dv = torch.zeros((B, N, 3), dtype=fl, device=dev)
        self.grid = None
        if self.has_contacts:
            self.count = torch.zeros((B, N), dtype=torch.int32, device=dev)
            self.contacts = torch.zeros((B, N, MAX_CONTACTS), dtype=torch.int32, device=dev)
            # cells twice the contact distance: a particle's search visits 8 cells on average (grid_cell_reaches)
            radius = max(self.options.cell_size, 2.0 * self.particle_size, 2.0 * self.reach)
            self.grid = NeighbourGrid(B, N, radius, dtype=fl, device=dev, launcher=self._launch)
        if self.has_liquid:
            self.lam = torch.zeros((B, N), dtype=fl, device=dev)
            self.rho = torch.zeros((B, N), dtype=fl, device=dev)

    def _build_grad(self):
        """Differentiable mode: the sweeps' schedule and its slots (kernels.sweep_schedule); liquids are refused
        and particle collisions are left out (their contact sets change discontinuously; see docs/pbd.md)."""
        import warnings

        if self.has_liquid:
            raise GenesisError(f"{self.name}: differentiable mode does not take PBD.Liquid (the density solve's "
                               "neighbour sets are not differentiated); use requires_grad=False for liquids.")
        if any(e.material.kind != PARTICLE for e in self.entities):
            warnings.warn(f"{self.name}: in differentiable mode particles do not collide with each other (cloth "
                          "self-collision and collisions between PBD entities are off); the constraints, gravity, "
                          "air drag and fixed particles are differentiated.", stacklevel=3)
        self.grid = None
        fl, dev, B, N = self.float_dtype, self.device, self.batch, self.n_particles
        cons = {key: (v[0].cpu().numpy(), v[4].cpu().numpy()) for key, v in self._cons.items()}
        rows, last = T.schedule(cons, self.iterations.tolist(), self.n_groups, N)
        self.sched = torch.as_tensor(rows, device=dev) if len(rows) else torch.full((0, 7), -1, dtype=torch.int32)
        self.sched_last = torch.as_tensor(last, device=dev)
        P = max(len(rows), 1)

        def g(*shape):
            x = torch.zeros(shape, dtype=fl, device=dev, requires_grad=True)
            x.grad = torch.zeros_like(x)
            return x

        # per small step: the prediction, the projections' particles and multipliers
        n = self.n_small
        self.xp = [g(1, B, N, 3) for _ in range(n)]
        self.slots_x, self.slots_l = [g(B, P, 4, 3) for _ in range(n)], [g(B, P) for _ in range(n)]
        if n > 1:
            for x in (self._mid_pos, self._mid_vel):
                x.requires_grad_(True)
                x.grad = torch.zeros_like(x)

    def init_state(self, f):
        super().init_state(f)
        st = self.state
        st.at("free", f)[:] = 1
        st.at("attach_link", f)[:] = -1
        for i, e in enumerate(self.entities):
            m = e.material
            st.at("stretch_compliance", f)[:, i] = getattr(m, "stretch_compliance", 0.0)
            st.at("bending_compliance", f)[:, i] = getattr(m, "bending_compliance", 0.0)
            st.at("volume_compliance", f)[:, i] = getattr(m, "volume_compliance", 0.0)

    # -- the substep -----------------------------------------------------------------------------------------------

    def substep_pre_coupling(self, f):
        """The substep's n_small PBD steps (`PBDOptions.small_step_dt`): one, on the state's frames f -> f + 1,
        or several, through the solver's own frames (`_mid_pos`, `_mid_vel`: the substep's start, then each
        step's end), the last copied into frame f + 1."""
        st, fn = self.state, self.frames.next(f)
        if self.n_small == 1:
            steps, pos, vel = [(f, fn)], st.pos, st.vel
        else:
            steps, pos, vel = [(k, k + 1) for k in range(self.n_small)], self._mid_pos, self._mid_vel
            with torch.no_grad():
                pos[0].copy_(st.at("pos", f).detach())
                vel[0].copy_(st.at("vel", f).detach())
        view = None
        if self._link_source is not None and self.any_linked("attach_link"):
            view = self._link_source.collider.collider_view(f)
        self._gather_args = []
        for k, (a, b) in enumerate(steps):
            if self.requires_grad:
                self._step_ad(k, a, b, pos, vel, view)
            else:
                self._step(a, b, pos, vel, view)
        if self.n_small > 1:
            with torch.no_grad():
                st.at("pos", fn).copy_(pos[self.n_small].detach())
                st.at("vel", fn).copy_(vel[self.n_small].detach())

    def _step(self, f, fn, pos, vel, view):
        """One PBD step from frame f to frame fn of (pos, vel) [F, B, N, 3] (the state's or the solver's own)."""
        st, launch = self.state, self._launch
        launch(self._predict, f, fn, self.params_f, pos, vel, st.active, st.free, self.p_invm, self.p_mat,
               self.ext_dv, pos, self.w)
        if self.n_stretch + self.n_bending + self.n_volume:
            cs, cq, ct = self._cons["s"], self._cons["q"], self._cons["t"]
            launch(K.solve_topology, fn, self.n_groups, self.batch, self.params_f, self.iterations, self._flat(pos),
                   self._flat_w, *cs[:5], st.stretch_compliance, cs[5], *cq[:5], st.bending_compliance, cq[5],
                   *ct[:5], st.volume_compliance, ct[5])
        if self.grid is not None:
            g = self.grid
            g.build(pos, st.active, fn)
            if self.has_liquid:
                for _ in range(self.small_iterations["density"]):
                    launch(K.density_iteration, fn, self.params_f, g.cell_size, pos, st.active, self.w, self.p_kind,
                           self.p_mass, self.p_rho, self.p_mat, g.table, g.order, g.cells, self.lam, self.rho,
                           self.dx)
            launch(K.collide, f, fn, g.cell_size, self.reach, pos, st.active, self.w, self.p_kind, self.p_entity,
                   self.p_rest, self.p_radius, self.p_mat, g.table, g.order, g.cells, self.count, self.contacts,
                   self.dx)
        if view is not None:
            launch(K.attach, fn, self.params_f, pos, st.active, self.p_mass, st.attach_link, st.attach_local,
                   view.body_com, view.body_quat, view.body_impulse)
        launch(self._finish, f, fn, self.params_f, pos, vel, st.active)
        if self.has_liquid:
            g = self.grid
            for _ in range(self.small_iterations["viscosity"]):
                launch(K.viscosity, fn, self.params_f, g.cell_size, pos, vel, st.active, self.w, self.p_kind,
                       self.p_mass, self.p_rho, self.p_mat, g.table, g.order, g.cells, self.dx)

    # -- differentiable mode ---------------------------------------------------------------------------------------

    def _topology_ad(self, k):
        cs, cq, ct = self._cons["s"], self._cons["q"], self._cons["t"]
        st = self.state
        return (self.params_f, self.xp[k], self.w, self.sched, cs[0], cs[1], cs[2], cs[3], st.stretch_compliance,
                cq[0], cq[1], cq[2], cq[3], st.bending_compliance, ct[0], ct[1], ct[2], ct[3], st.volume_compliance,
                self.slots_x[k], self.slots_l[k])

    def _step_ad(self, k, f, fn, pos, vel, view):
        """PBD step k of the substep (frame f -> fn of pos, vel) as kernels whose reverse is Taichi's: the
        prediction into a scratch array, the sweeps' schedule, the gather into frame fn (with the attachments,
        `kernels.gather_attached`, where particles are attached to links: the view's arrays carry the gradient
        back to the rigid solver), the velocities: the same projection functions as `_step`, in the same order."""
        st, launch = self.state, self._launch
        launch(self._predict, f, 0, self.params_f, pos, vel, st.active, st.free, self.p_invm, self.p_mat,
               self.ext_dv, self.xp[k], self.w)
        if len(self.sched):
            launch(K.sweep_schedule, *self._topology_ad(k))
        if view is not None:
            gather = (K.gather_attached, fn, self.params_f, self.xp[k], self.sched_last, self.slots_x[k], pos,
                      st.active, self.p_mass, st.attach_link, st.attach_local, view.body_com, view.body_quat,
                      view.body_impulse)
        else:
            gather = (K.gather_schedule, fn, self.xp[k], self.sched_last, self.slots_x[k], pos)
        launch(*gather)
        launch(self._finish, f, fn, self.params_f, pos, vel, st.active)
        self._gather_args.append((f, fn, pos, vel, gather))

    def substep_pre_coupling_grad(self, f):
        """The reverse of the substep's PBD steps, newest first; with several, the adjoint of frame f + 1 enters
        the solver's last frame and leaves its first into frame f's."""
        st, launch = self.state, self._launch
        fn = self.frames.next(f)
        n = self.n_small
        with torch.no_grad():
            for x in (*self.xp, *self.slots_x, *self.slots_l):
                x.grad.zero_()
            if n > 1:
                self._mid_pos.grad.zero_()
                self._mid_vel.grad.zero_()
                self._mid_pos.grad[n] = st.grad_at("pos", fn)
                self._mid_vel.grad[n] = st.grad_at("vel", fn)
        for k in reversed(range(n)):
            a, b, pos, vel, (kernel, *args) = self._gather_args[k]
            launch(self._finish.grad, a, b, self.params_f, pos, vel, st.active)
            launch(kernel.grad, *args)
            if len(self.sched):
                launch(K.sweep_schedule.grad, *self._topology_ad(k))
            launch(self._predict.grad, a, 0, self.params_f, pos, vel, st.active, st.free, self.p_invm,
                   self.p_mat, self.ext_dv, self.xp[k], self.w)
        if n > 1:
            with torch.no_grad():
                st.grad_at("pos", f).add_(self._mid_pos.grad[0])
                st.grad_at("vel", f).add_(self._mid_vel.grad[0])

    def substep_post_coupling_grad(self, f):
        pass  # keep_inside: the identity (it acts only on a particle that left the domain)

    def _flat(self, pos):
        """A flat view of positions [F, B, N, 3] (the same memory), kept while the tensor is the same."""
        hit = self._flat_views.get(id(pos))
        if hit is None or hit[0] is not pos:
            hit = self._flat_views[id(pos)] = (pos, pos.detach().view(-1))
        return hit[1]

    def field_mask(self, f):
        """The particles the force fields act on: the active ones that are free (a fixed or attached particle keeps
        the velocity it was given)."""
        st = self.state
        return ((st.active != 0) & (st.free != 0)).to(torch.int32)

    def substep_post_coupling(self, f):
        self.keep_inside(self.frames.next(f))

    # -- coupling --------------------------------------------------------------------------------------------------

    def render_view(self, f):
        """What the cameras draw after this substep (frame f + 1): a cloth as its triangles (two-sided) at its
        particles' positions, per environment; every other entity (elastic bodies, ropes, liquids, free particles)
        as spheres of radius particle_size / 2 (genesis_core.render.RenderView)."""
        from genesis_core.render.view import kit_surface_view

        return kit_surface_view(self, self.frames.next(f), {e: e._faces for e in self.entities if len(e._faces)})

    def particle_view(self, f) -> ParticleView:
        """Frame f + 1 after this substep's PBD step; particles of radius particle_size / 2. Fixed particles take
        part as the others (the contact moves them like any particle)."""
        fn = self.frames.next(f)
        views = self.__dict__.setdefault("_views", {})
        if fn not in views:
            st = self.state
            views[fn] = ParticleView(pos=st.at("pos", fn), vel=st.at("vel", fn), mass=self.p_mass,
                                     active=st.at("active", fn), radius=0.5 * self.particle_size, restitution=0.0)
        return views[fn]

    def exchange_view(self, f):
        """Frame f + 1 after this substep's PBD step, against another solver's particles (`pair_exchange`: the
        velocity change is applied at once, the positions moved with it); each particle's collision radius and its
        inverse mass in this substep's solve (0 for fixed and attached particles: they are held)."""
        fn = self.frames.next(f)
        views = self.__dict__.setdefault("_exchange_views", {})  # the same views every time: the launches bind once
        if fn not in views:
            st = self.state
            views[fn] = ExchangeView(pos=st.at("pos", fn), vel=st.at("vel", fn), inv_mass=self.w,
                                     radius=self.p_radius, active=st.at("active", fn))
        return views[fn]

    def exchange_with_mpm(self, f, grid):
        """Called by the MPM coupling (`grid_exchange.MPMGridCoupling`) at coupling time of substep f with the MPM
        solver's `grid_view(f)`: every active particle (frame f positions, velocities after this substep's PBD
        step) exchanges momentum with the grid (genesis_core.particles.grid_exchange)."""
        from genesis_core.particles.grid_exchange import GridExchange

        active = self.state.at("active", self.frames.next(f))
        self.__dict__.setdefault("_grid_exchange", GridExchange())(self, f, grid, active)

    # -- inspection ------------------------------------------------------------------------------------------------

    def densities(self) -> torch.Tensor:
        """[B, N]: the liquid particles' densities (kg/m^3) at the last density iteration (0 for others)."""
        if not self.has_liquid:
            return torch.zeros((self.batch, self.n_particles), dtype=self.float_dtype, device=self.device)
        return self.rho


def _radii(entity, r0):
    """Each particle's collision radius: r0 (particle_size / 2); a cloth particle's at least half the mean rest
    length of its edges, so that no gap between a cloth's particles lets another particle through."""
    r = np.full(entity.n_particles, r0)
    if entity.material.kind == CLOTH and len(entity._faces):
        from genesis_core.meshing import mean_edge_lengths

        r = np.maximum(r, 0.5 * mean_edge_lengths(entity._points, entity._edges))
    return r


def n_small_steps(substep_dt: float, small_step_dt) -> int:
    """The PBD steps of a substep: the fewest equal steps no longer than small_step_dt (1 for None). A substep that
    is a whole multiple of it within rounding is not split once more."""
    if small_step_dt is None:
        return 1
    return max(1, math.ceil(substep_dt / small_step_dt * (1.0 - 1e-9)))


class _Sampler:
    """A material's sampler as the kit reads it ("pbs", Genesis World's default, is the lattice here)."""

    def __init__(self, material):
        s = getattr(material, "sampler", "regular")
        self.sampler = "regular" if s == "pbs" else s


def _lattice_gradient_norm(s: float) -> float:
    """sum_j |(m_j / rho0) grad W(x_i - x_j)|^2 over the lattice neighbours of a particle inside a liquid at rest
    (m / rho0 = s^3, support 2 s): the scale of the fluid's constraint-force mixing."""
    h = 2.0 * s
    r = np.arange(-2, 3)
    d = np.stack(np.meshgrid(r, r, r, indexing="ij"), -1).reshape(-1, 3) * s
    dist = np.linalg.norm(d, axis=1)
    keep = (dist > 0) & (dist < h)
    q = dist[keep] / h
    g = np.where(q <= 0.5, q * (3 * q - 2), -(1 - q) ** 2) * 48.0 / (np.pi * h ** 4)
    return float(np.sum((s ** 3 * g) ** 2))
