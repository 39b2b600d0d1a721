"""MPMSolver: MLS-MPM with APIC transfers, batched over environments (Hu et al. 2018, "A moving least squares
material point method with displacement discontinuity and two-way rigid body coupling")."""

from __future__ import annotations

import numpy as np
import torch

import genesis_core as gs

from . import kernels_g2p, kernels_grid, kernels_p2g, sampling
from .entity import MPMEntity
from .materials import Base
from .options import MPMOptions

BOUNDARY = {"sticky": kernels_grid.STICKY, "slip": kernels_grid.SLIP, "separate": kernels_grid.SEPARATE}


class MPMSolver(gs.SolverBase):
    """Substep: p2g (F, plasticity, stress, scatter) -> grid (gravity, walls) -> g2p (gather, advect)."""

    short_name = "mpm"
    order = 20
    options_class = MPMOptions
    material_class = Base
    entity_class = MPMEntity
    state_fields = (
        gs.FieldSpec("pos", ("n_particles", 3), grad=True, doc="particle positions, m"),
        gs.FieldSpec("vel", ("n_particles", 3), grad=True, doc="particle velocities, m/s"),
        gs.FieldSpec("C", ("n_particles", 3, 3), grad=True, doc="APIC affine velocity matrix, 1/s"),
        gs.FieldSpec("F", ("n_particles", 3, 3), grad=True, doc="deformation gradient"),
        gs.FieldSpec("Jp", ("n_particles",), grad=True, doc="plastic volume ratio (sand, snow)"),
        gs.FieldSpec("active", ("n_particles",), dtype="int", frames=False, doc="1: simulated, 0: frozen"),
    )

    def __init__(self, scene, sim_options, options=None):
        super().__init__(scene, sim_options, options)
        opts = self.options
        self.dx = opts.dx
        self.particle_size = opts.particle_size or self.dx / 2
        self.lower = np.asarray(opts.lower_bound)
        self.upper = np.asarray(opts.upper_bound)
        # SimOptions.floor_height inside the domain raises the lower z wall to it (whole cells)
        floor = (sim_options.floor_height - self.lower[2]) / self.dx
        self.floor_cells = int(min(max(round(floor), 0), opts.grid_shape[2] - 8))

    def add_entity(self, idx, morph, material):
        points = sampling.sample(morph, self.particle_size)  # fails here, before build, on a bad morph
        self.check_inside(torch.as_tensor(points), f"{type(morph).__name__} entity")
        entity = super().add_entity(idx, morph, material)
        entity._points = points
        return entity

    def check_inside(self, pos: torch.Tensor, what: str):
        """Refuse positions outside the domain (less two cells at each wall) or non-finite, before any kernel."""
        pos = pos.detach().cpu().double()
        lo = torch.as_tensor(self.lower) + 2 * self.dx
        lo[2] += self.floor_cells * self.dx
        hi = torch.as_tensor(self.upper) - 2 * self.dx
        if not torch.isfinite(pos).all() or (pos < lo).any() or (pos > hi).any():
            raise gs.OptionError(f"{what}: particles must lie inside the MPM domain {tuple(self.lower)} - "
                                 f"{tuple(self.upper)} (two cells from each wall); widen MPMOptions' bounds.")

    def build_model(self):
        vol = sampling.volume_per_particle(self.particle_size)
        points, mass, kind, params = [], [], [], []
        for e in self.entities:
            start = sum(len(p) for p in points)
            points.append(e._points)
            e._setup(start, start + len(e._points))
            k, *prm = e.material.params()
            mass.append(np.full(len(e._points), e.material.rho * vol))
            kind.append(np.full(len(e._points), k, dtype=np.int32))
            params.append(np.tile(np.asarray(prm, dtype=np.float64), (len(e._points), 1)))
        fl, dev = self.float_dtype, self.device
        self._points = np.concatenate(points)
        self.n_particles = len(self._points)
        self.p_mass = torch.as_tensor(np.concatenate(mass), dtype=fl, device=dev)
        self.p_vol = torch.full((self.n_particles,), vol, dtype=fl, device=dev)
        self.p_kind = torch.as_tensor(np.concatenate(kind), device=dev)
        self.p_params = torch.as_tensor(np.concatenate(params), dtype=fl, device=dev).contiguous()
        g = self.sim_options.gravity
        lo = self.options.lower_bound
        self.params_f = torch.tensor([self.sim_options.substep_dt, self.dx, 1 / self.dx, *lo, *g,
                                      self.options.wall_friction, self.floor_cells], dtype=fl, device=dev)
        parts = self.options.partitions or max(1, min(8, 2 // self.batch))
        self.n_partitions = max(1, min(parts, self.n_particles))
        shape = self.options.grid_shape
        self.grid_mv = torch.zeros((self.n_partitions, self.batch, *shape, 4), dtype=fl, device=dev)
        self.grid_v = torch.zeros((self.batch, *shape, 3), dtype=fl, device=dev)
        self.grid_m = torch.zeros((self.batch, *shape), dtype=fl, device=dev)

    def state_dims(self):
        return {"n_particles": self.n_particles}

    def init_state(self, f):
        st = self.state
        st.at("pos", f)[:] = torch.as_tensor(self._points, dtype=self.float_dtype)
        st.at("F", f)[:] = torch.eye(3, dtype=self.float_dtype)
        st.at("Jp", f)[:] = 1.0
        st.active[:] = 1

    def substep_pre_coupling(self, f):
        st = self.state
        kernels_p2g.p2g(f, self.frames.next(f), self.params_f, st.pos, st.vel, st.C, st.F, st.Jp, st.active,
                        self.p_mass, self.p_vol, self.p_kind, self.p_params, self.grid_mv)
        kernels_grid.grid_update(self.params_f, BOUNDARY[self.options.boundary], self.grid_mv, self.grid_v, self.grid_m)

    def substep_post_coupling(self, f):
        st = self.state
        kernels_g2p.g2p(f, self.frames.next(f), self.params_f, st.pos, st.vel, st.C, st.active, self.grid_v)

