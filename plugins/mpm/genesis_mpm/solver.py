"""MPMSolver: MLS-MPM with APIC transfers, batched over environments (Hu et al. 2018, "A moving least squares
material point method with displacement discontinuity and two-way rigid body coupling")."""

from __future__ import annotations

import attrs
import numpy as np
import torch

import genesis_core as gs
from genesis_core.launch import Launcher
from genesis_core.particles.reduce import n_parts
from genesis_core.particles.solver import ParamsGravity, ParticleSolver

from . import kernels_g2p, kernels_grad, kernels_grid, kernels_hybrid, kernels_p2g
from .layout import PF_DT, PF_DX, PF_FLOOR, PF_FRICTION, PF_GRAVITY, PF_INV_DX, PF_N, PF_ORIGIN
from .entity import MPMEntity
from .materials import Base
from .options import MPMOptions

PAD = kernels_grid.BOUND  # grid cells beyond each bound: the walls
BOUNDARY = {"sticky": kernels_grid.STICKY, "slip": kernels_grid.SLIP, "separate": kernels_grid.SEPARATE}


@attrs.define
class GridView:
    """MPMSolver.grid_view(f): the grid's velocity (writable) and mass, and where its nodes lie."""

    velocity: torch.Tensor
    mass: torch.Tensor
    origin: tuple
    dx: float


class MPMSolver(ParamsGravity, ParticleSolver):
    """Substep: p2g (F, plasticity, stress, scatter) -> grid (gravity, walls) -> g2p (gather, advect).

    In differentiable mode (SimOptions.requires_grad) the substep runs the kernels of `kernels_grad`, whose
    reverse is exact, and gradients reach the particles' state, the entities' E and nu and the muscles'
    actuation."""

    short_name = "mpm"
    gravity_param = PF_GRAVITY  # set_gravity after build writes params_f there (kernels_grid, kernels_grad)
    order = 20
    options_class = MPMOptions
    material_class = Base
    entity_class = MPMEntity
    supports_grad = True
    _pos, _vel, _active = ParticleSolver.particle_fields
    state_fields = (
        _pos, _vel,
        # C and F are sentinels too: a huge but finite velocity can leave pos and vel finite and overflow F
        gs.FieldSpec("C", ("n_particles", 3, 3), grad=True, sentinel=True, doc="APIC affine velocity matrix, 1/s"),
        gs.FieldSpec("F", ("n_particles", 3, 3), grad=True, sentinel=True, doc="deformation gradient"),
        gs.FieldSpec("Jp", ("n_particles",), grad=True, bounds=(0, None),
                     doc="plastic volume ratio (sand, snow); >= 0 (extreme compression may round it to 0)"),
        _active,
        gs.FieldSpec("E", ("n_entities",), frames=False, grad=True, bounds=(0, None), bounds_open=(True, False),
                     doc="Young's modulus of each entity, Pa"),
        gs.FieldSpec("nu", ("n_entities",), frames=False, grad=True, bounds=(0, 0.5), bounds_open=(False, True),
                     doc="Poisson's ratio of each entity"),
        gs.FieldSpec("actu", ("n_particles",), frames=False, grad=True,
                     doc="muscle actuation of each particle (its group's; read by MPM.Muscle particles only), "
                         "dimensionless"),
        gs.FieldSpec("mdir", ("n_particles", 3), frames=False, bounds=(-1.0, 1.0),
                     doc="muscle fibre direction of each particle (a unit vector in the rest shape)"),
        gs.FieldSpec("attach_link", ("n_particles",), dtype="int", frames=False, bounds=(-1, None),
                     doc="the rigid link a hybrid's skin particle follows (gs.materials.Hybrid), -1: none"),
        gs.FieldSpec("attach_local", ("n_particles", 3), frames=False,
                     doc="a skin particle's point in its link's frame (about the link's centre of mass), m"),
    )
    del _pos, _vel, _active
    link_fields = ("attach_link",)  # checked against the scene's rigid links (ParticleSolver.link_rule)

    def __init__(self, scene, sim_options, options=None):
        super().__init__(scene, sim_options, options)
        self.dx = self.options.dx
        # the grid covers the bounds and PAD cells beyond each: the walls (kernels_grid) are the padding, so their
        # planes lie on the bounds and a body may start anywhere inside them
        self.grid_shape = tuple(n + 2 * PAD for n in self.options.grid_shape)
        self.origin = self.lower - PAD * self.dx
        # SimOptions.floor_height inside the domain raises the lower z wall to it (whole cells)
        floor = (sim_options.floor_height - self.lower[2]) / self.dx
        self.floor_cells = int(min(max(round(floor), 0), self.options.grid_shape[2] - 8))

    def default_particle_size(self):
        return self.options.dx / 2

    # -- hybrid skins (genesis_mpm.hybrid) -------------------------------------------------------------------------

    skins = ()  # the hybrids' skins (hybrid.Skin), in the order they were added

    def sample_entity(self, idx, morph, material):
        """The kit's sampling, or the points a hybrid placed around its skeleton (hybrid.skin_points)."""
        points = self.__dict__.get("_pending_points")
        return points if points is not None else super().sample_entity(idx, morph, material)

    def add_skin(self, skin):
        self.skins = (*self.skins, skin)

    def takes_links_from(self, collider) -> bool:
        """Whether a hybrid's skeleton is simulated by `collider` (its skin then follows that solver's links)."""
        return any(s.follows and s.part_rigid.solver is collider for s in self.skins)

    def add_link_source(self, coupling):
        """The collider whose links the skins follow (ColliderMPMCoupling, at build): each skin particle is attached
        to its link where it is now, in every environment (attach_link, attach_local)."""
        super().add_link_source(coupling)
        import genesis_core.rotations as rot

        st = self.state
        with torch.no_grad():
            for skin in self.skins:
                if not skin.follows or skin.part_rigid.solver is not coupling.collider:
                    continue
                e = skin.entity
                links = np.array([link.idx for link in skin.part_rigid.links])[skin.link_local]
                x = st.at("pos", self.frame)[:, e._range].detach().double()  # [B, n, 3]
                local = torch.empty_like(x)
                for link in np.unique(links):
                    com, quat = self.link_pose(int(link), "gs.materials.Hybrid")
                    R = torch.as_tensor(np.stack([rot.quat_to_mat(q) for q in quat.double().cpu().numpy()]))
                    rows = torch.as_tensor(np.nonzero(links == link)[0])
                    local[:, rows] = torch.einsum("bji,bnj->bni", R, x[:, rows] - com.double()[:, None, :])
                st.at("attach_local", self.frame)[:, e._range] = local.to(self.float_dtype)
                st.at("attach_link", self.frame)[:, e._range] = torch.as_tensor(links, dtype=st.at(
                    "attach_link", self.frame).dtype)

    def inside_bounds(self):
        """The domain (above the floor where SimOptions.floor_height lies inside it)."""
        lo = self.lower.copy()
        lo[2] += self.floor_cells * self.dx
        return lo, self.upper

    def build_particles(self):
        fl, dev = self.float_dtype, self.device
        kind, params = [], []
        for e in self.entities:
            k, *prm = e.material.kernel_params()
            kind.append(np.full(e.n_particles, k, dtype=np.int32))
            params.append(np.tile(np.asarray(prm, dtype=np.float64), (e.n_particles, 1)))
        self.p_vol = torch.full((self.n_particles,), self.particle_volume, dtype=fl, device=dev)
        self.p_kind = torch.as_tensor(np.concatenate(kind), device=dev)
        self.p_params = torch.as_tensor(np.concatenate(params), dtype=fl, device=dev).contiguous()
        params = np.zeros(PF_N)
        params[[PF_DT, PF_DX, PF_INV_DX, PF_FRICTION, PF_FLOOR]] = (self.substep_dt, self.dx, 1 / self.dx,
                                                                    self.options.wall_friction, self.floor_cells)
        params[PF_ORIGIN:PF_ORIGIN + 3] = self.origin
        gravity = self.options.gravity
        params[PF_GRAVITY:PF_GRAVITY + 3] = self.sim_options.gravity if gravity is None else gravity
        follow = np.zeros((self.n_particles, 2))  # kernels_hybrid.FOLLOW_DECAY, FOLLOW_COEF
        step = self.substep_dt * self.sim_options.substeps  # the MPM solver's dt
        for skin in self.skins:
            if skin.follows:
                m = skin.material
                follow[skin.entity._range] = (np.exp(-step * m.damping), m.soft_dv_coef)
        self.p_follow = torch.as_tensor(follow, dtype=fl, device=dev).contiguous()
        self.params_f = torch.tensor(params, dtype=fl, device=dev)
        if self.options.partitions:
            self.n_partitions = max(1, min(self.options.partitions, self.n_particles))
        else:
            self.n_partitions = n_parts(self.batch, self.n_particles)
        self.requires_grad = bool(self.sim_options.requires_grad)
        self._allocate_scratch()

    def _allocate_scratch(self):
        fl, dev = self.float_dtype, self.device
        shape = self.grid_shape
        if self.requires_grad:
            self.n_partitions = min(self.n_partitions, kernels_grad.MAX_PARTITIONS)

        def scratch(*dims, grad=False):
            x = torch.zeros(dims, dtype=fl, device=dev)
            if grad and self.requires_grad:
                x.requires_grad_(True)
                x.grad = torch.zeros_like(x)
            return x

        self.grid_mv = scratch(self.n_partitions, self.batch, *shape, 4, grad=True)
        self.grid_v = scratch(self.batch, *shape, 3, grad=True)
        self.grid_m = scratch(self.batch, *shape, grad=True)
        # the grid velocity grid-to-particle reads: grid_v, or the output of the couplings that ran after it
        self.g2p_grid_v = self.grid_v
        # the boxes of nodes that hold something (kernels_grid.grid_update): each copy's box from the scatter, and
        # the box the last grid update left mass in (empty: the grid starts at zero) with the span it updated
        if self.batch * self.n_partitions * kernels_p2g.TASK_STRIDE >= 2 ** 31:
            raise gs.GenesisError(f"MPM: {self.batch} environments x {self.n_partitions} partitions is too many for "
                                  f"one particle-to-grid launch (at most {2 ** 31 // kernels_p2g.TASK_STRIDE - 1}); "
                                  "use fewer environments or MPMOptions(partitions=1).")
        idx = dict(dtype=torch.int32, device=dev)
        self.grid_touched = torch.zeros((self.n_partitions, self.batch, 6), **idx)
        self.grid_region = torch.zeros((2, self.batch, 6), **idx)
        self.grid_region[:, :, :3] = torch.tensor(shape, **idx)
        self._grid_update = kernels_grid.grid_update_serial if self.batch == 1 else kernels_grid.grid_update
        self._pos_bits = (None, None)  # (state pos, the same memory as int32), for the scatter's box
        if self.requires_grad:
            n = self.n_particles
            self.tau = scratch(self.batch, n, 3, 3, grad=True)
            self._stress_scratch = {
                "svd_u": scratch(self.batch, n, 3, 3), "svd_v": scratch(self.batch, n, 3, 3),
                "off_grad": scratch(self.batch, n, 3, 3), "svd_s": scratch(self.batch, n, 3, grad=True),
                "reduced_h": scratch(self.batch, n, 3, grad=True), "reduced_t": scratch(self.batch, n, 3, grad=True),
            }
            self.E_p = scratch(self.batch, n, grad=True)
            self.nu_p = scratch(self.batch, n, grad=True)
            self.grid_v_grad_parts = scratch(self.n_partitions, self.batch, *shape, 3)
            # flat views of the grid arrays the substep clears (kernels_grad.clear), each with its own launcher
            self._flat = {"grid_mv": self.grid_mv.detach().view(-1), "grid_mv.grad": self.grid_mv.grad.view(-1),
                          "grid_v.grad": self.grid_v.grad.view(-1), "grid_m.grad": self.grid_m.grad.view(-1)}
            self._clear_launch = {name: Launcher() for name in self._flat}

    def domain_bounds(self):
        """Where grid-to-particle keeps every particle: from one cell above the grid's lower end (PAD cells below
        the lower bound) to two cells below its upper end (a particle's 3x3x3 stencil then never leaves the grid),
        with a rounding margin. Positions set from outside may lie in the walls, but a body starts inside the
        bounds (inside_bounds)."""
        size = np.asarray(self.grid_shape, dtype=np.float64)
        # rounding: the kernels compute origin + x dx in the solver's precision, far from the origin too
        eps = float(torch.finfo(self.float_dtype).eps)
        slack = 1e-3 * self.dx + 8 * eps * float(np.abs(np.concatenate([self.lower, self.upper])).max() + PAD * self.dx)
        return self.origin + self.dx - slack, self.origin + (size - 2) * self.dx + slack

    def init_state(self, f):
        super().init_state(f)
        st, fl = self.state, self.float_dtype
        with torch.no_grad():
            st.at("F", f)[:] = torch.eye(3, dtype=fl)
            st.at("Jp", f)[:] = 1.0
            st.at("E", f)[:] = torch.tensor([e.material.E for e in self.entities], dtype=fl)
            st.at("nu", f)[:] = torch.tensor([e.material.nu for e in self.entities], dtype=fl)
            st.at("mdir", f)[:] = torch.tensor([0.0, 0.0, 1.0], dtype=fl)  # Genesis World's default fibre
            st.at("attach_link", f)[:] = -1

    # -- substep ---------------------------------------------------------------------------------------------------

    @property
    def _launch(self):
        if "_launcher" not in self.__dict__:
            self._launcher = Launcher()  # the arrays are converted once, not at every substep
        return self._launcher

    def substep_pre_coupling(self, f):
        st, launch = self.state, self._launch
        fn = self.frames.next(f)
        boundary = BOUNDARY[self.options.boundary]
        if self.requires_grad:
            self._clear("grid_mv")
            launch(kernels_grad.stress, f, fn, self.params_f, st.C, st.F, st.Jp, st.active, self.p_kind,
                   self.p_entity, self.p_params, st.E, st.nu, st.actu, st.mdir, self.tau)
            launch(kernels_grad.p2g_scatter, f, self.params_f, st.pos, st.vel, st.C, self.tau, st.active,
                   self.p_mass, self.p_vol, self.grid_mv)
            launch(kernels_grad.grid_update, self.params_f, boundary, self.grid_mv, self.grid_v, self.grid_m)
        else:
            if self._pos_bits[0] is not st.pos:
                self._pos_bits = (st.pos, st.pos.detach().view(torch.int32))  # the same memory (kernels_p2g)
            launch(kernels_p2g.p2g, f, fn, self.params_f, st.pos, st.vel, st.C, st.F, st.Jp, st.active, self.p_mass,
                   self.p_vol, self.p_kind, self.p_entity, self.p_params, st.E, st.nu, st.actu, st.mdir, self.grid_mv,
                   self.grid_touched, self._pos_bits[1])
            launch(self._grid_update, self.params_f, boundary, self.grid_touched, self.grid_region, self.grid_mv,
                   self.grid_v, self.grid_m)
        self.g2p_grid_v = self.grid_v

    def substep_post_coupling(self, f):
        st = self.state
        fn = self.frames.next(f)
        self._launch(kernels_g2p.g2p, f, fn, self.params_f, st.pos, st.vel, st.C, st.active, self.g2p_grid_v)
        if self._link_source is not None and self.any_linked("attach_link"):
            # the hybrids' skins follow their links (after grid-to-particle, as Genesis World's), whose impulses
            # the rigid solver applies in its next substep
            view = self._link_source.collider.collider_view(f)
            dt = self.sim_options.dt  # the rigid solver's step (RigidOptions.dt is SimOptions')
            self._launch(kernels_hybrid.follow_links, fn, 1.0 / dt, self.sim_options.substep_dt / dt, st.pos,
                         st.vel, st.active, self.p_mass, self.p_follow, st.attach_link, st.attach_local,
                         view.body_com, view.body_quat, view.body_impulse)

    def grid_view(self, f):
        """The grid as a coupling with another particle solver sees it at coupling time of substep f (after the
        grid update, before grid-to-particle): `velocity` [B, X, Y, Z, 3] (m/s), which the coupling may change in
        place (grid-to-particle reads it), `mass` [B, X, Y, Z] (kg; read only), node (i, j, k) at `origin` +
        (i, j, k) * `dx` (m). Plain mode only."""
        if self.requires_grad:
            raise gs.GenesisError(f"{self.name}.grid_view: couplings through the grid are not differentiable.")
        return GridView(velocity=self.g2p_grid_v, mass=self.grid_m, origin=tuple(float(x) for x in self.origin),
                        dx=float(self.dx))

    # -- reverse ---------------------------------------------------------------------------------------------------

    def _clear(self, name):
        self._clear_launch[name](kernels_grad.clear, self._flat[name])

    def substep_post_coupling_grad(self, f):
        """The reverse of grid-to-particle, into the adjoint of the grid velocity it read (written, not added);
        the other grid adjoints are cleared for the couplings' backward, which adds into them."""
        st, launch = self.state, self._launch
        launch(kernels_grad.g2p_reverse, f, self.frames.next(f), self.params_f, st.pos, st.active, self.g2p_grid_v,
               st.pos.grad, st.vel.grad, st.C.grad, self.grid_v_grad_parts)
        launch(kernels_grad.sum_parts, self.grid_v_grad_parts, self.g2p_grid_v.grad)
        if self.g2p_grid_v is not self.grid_v:
            self._clear("grid_v.grad")
        self._clear("grid_m.grad")

    def substep_pre_coupling_grad(self, f):
        st, launch = self.state, self._launch
        self._clear("grid_mv.grad")
        launch(kernels_grad.grid_update.grad, self.params_f, BOUNDARY[self.options.boundary], self.grid_mv,
               self.grid_v, self.grid_m)
        launch(kernels_grad.p2g_scatter_reverse, f, self.params_f, st.pos, st.vel, st.C, self.tau, st.active,
               self.p_mass, self.p_vol, self.grid_mv.grad, st.pos.grad, st.vel.grad, st.C.grad, self.tau.grad)
        self._stress_grad(f, self.frames.next(f))

    def _stress_grad(self, f, fn):
        """The reverse of kernels_grad.stress: dL/d(F, Jp of frame fn, tau) to dL/d(F, C, Jp of frame f, E, nu,
        actu).
        E and nu are gathered per particle, so that their gradients are summed per entity in a fixed order."""
        st = self.state
        with torch.no_grad():
            for x, field in ((self.E_p, st.E), (self.nu_p, st.nu)):
                x.copy_(field.detach()[:, self.p_entity])
            kernels_grad.stress_reverse(self._launch, f, fn, self.params_f, st.C, st.F, st.Jp, st.active,
                                        self.p_kind, self.p_params, self.E_p, self.nu_p, st.actu, st.mdir,
                                        self.tau, self._stress_scratch)
            for i, e in enumerate(self.entities):
                st.E.grad[:, i] += self.E_p.grad[:, e._range].sum(-1)
                st.nu.grad[:, i] += self.nu_p.grad[:, e._range].sum(-1)
