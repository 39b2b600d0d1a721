"""SpringChainSolver: chains of point masses joined by damped springs, batched over environments."""

import math

import torch

import genesis_core as gs
from genesis_core.launch import Launcher
from genesis_core.rotations import rotate

from . import kernels_step
from .entity import SpringChainEntity
from .materials import SpringChain


class SpringChainSolver(gs.SolverBase):
    """Semi-implicit Euler on every node; springs act along the segment (Hooke + dashpot)."""

    short_name = "spring_chain"
    material_class = SpringChain
    entity_class = SpringChainEntity
    state_fields = (
        gs.FieldSpec("pos", ("n_nodes", 3), grad=True, sentinel=True, doc="node positions, m"),
        gs.FieldSpec("vel", ("n_nodes", 3), grad=True, sentinel=True, doc="node velocities, m/s"),
        gs.FieldSpec("anchor", ("n_anchors", 3), frames=False, grad=True,
                     doc="points the anchored top nodes are pinned to, m"),
    )
    supports_grad = True

    def add_entity(self, idx, morph, material):
        if not isinstance(morph, (gs.morphs.Cylinder, gs.morphs.Capsule)):
            raise gs.OptionError(
                f"SpringChain lays its nodes along a gs.morphs.Cylinder or Capsule, got {type(morph).__name__}."
            )
        return super().add_entity(idx, morph, material)

    def build_model(self):
        mass, drag, prev, nxt, anchor_of, k, c, rest = [], [], [], [], [], [], [], []
        self._node_init, self._anchor_init = [], []
        for e in self.entities:
            mat, n = e.material, e.material.n_nodes
            start = len(mass)
            e._setup(start, len(self._anchor_init) if mat.anchored else -1)
            half = tuple(float(h) for h in rotate(e.morph.quat, (0.0, 0.0, e.morph.height / 2)))
            top = tuple(p + h for p, h in zip(e.morph.pos, half))
            step = tuple(-2 * h / (n - 1) for h in half)
            for i in range(n):
                self._node_init.append(tuple(t + i * s for t, s in zip(top, step)))
                mass.append(mat.mass / n)
                drag.append(mat.drag)
                prev.append(start + i - 1 if i > 0 else -1)
                nxt.append(start + i + 1 if i < n - 1 else -1)
                anchor_of.append(e.anchor_slot if i == 0 else -1)
                k.append(mat.stiffness)
                c.append(mat.damping)
                rest.append(e.morph.height / (n - 1))
            if mat.anchored:
                self._anchor_init.append(top)
        fl, dev = self.float_dtype, self.device
        self.node_mass = torch.tensor(mass, dtype=fl, device=dev)
        self.node_drag = torch.tensor(drag, dtype=fl, device=dev)
        self.node_prev = torch.tensor(prev, dtype=torch.int32, device=dev)
        self.node_next = torch.tensor(nxt, dtype=torch.int32, device=dev)
        self.node_anchor = torch.tensor(anchor_of, dtype=torch.int32, device=dev)
        self.seg_k = torch.tensor(k, dtype=fl, device=dev)
        self.seg_c = torch.tensor(c, dtype=fl, device=dev)
        self.seg_rest = torch.tensor(rest, dtype=fl, device=dev)
        self.gravity = torch.tensor(self.sim_options.gravity, dtype=fl, device=dev)

    def state_dims(self):
        return {"n_nodes": len(self._node_init), "n_anchors": max(len(self._anchor_init), 1)}

    def init_state(self, f):
        self.state.at("pos", f)[:] = torch.tensor(self._node_init, dtype=self.float_dtype, device=self.device)
        if self._anchor_init:
            self.state.anchor[:] = torch.tensor(self._anchor_init, dtype=self.float_dtype, device=self.device)

    def _substep_args(self, f):
        s = self.state
        return (f, self.frames.next(f), self.sim_options.substep_dt, self.gravity, s.pos, s.vel, s.anchor,
                self.node_mass, self.node_drag, self.node_prev, self.node_next, self.node_anchor, self.seg_k,
                self.seg_c, self.seg_rest)

    def substep_pre_coupling(self, f):
        self._launch(kernels_step.substep, *self._substep_args(f))

    def substep_pre_coupling_grad(self, f):
        # the kernel reads frame f and writes frame f + 1 only: Taichi's autodiff of it is the exact adjoint
        self._launch(kernels_step.substep.grad, *self._substep_args(f))

    def substep_post_coupling_grad(self, f):
        pass

    @property
    def _launch(self):
        if "_launcher" not in self.__dict__:
            self._launcher = Launcher()  # the arrays are converted once, not at every substep
        return self._launcher

    def stable_dt(self) -> float:
        """The largest stable substep of the explicit spring force, 2 / omega_max (omega_max^2 <= 4 k / m)."""
        return min(2.0 / math.sqrt(4 * float(k) / float(m)) for k, m in zip(self.seg_k, self.node_mass))
