"""Two-way coupling of MPM with a solver that exposes rigid geoms through genesis_core.coupler.ColliderView
(the rigid solver, or any third-party solver implementing `collider_view`). Registered for the pair
("RigidSolver", "MPMSolver"); it reads the rigid solver only through that interface."""

import torch

import genesis_core as gs
from genesis_core.coupler import Collider

from . import kernels_coupling


class ColliderMPMCoupling:
    """Grid nodes inside a geom take the geom's surface velocity in the normal direction (with Coulomb friction
    tangentially); the momentum they lose goes to the geom's body, which applies it in its next substep."""

    def __init__(self, collider, mpm, sim_options):
        if not isinstance(collider, Collider):
            raise gs.GenesisError(f"{collider.name} does not expose collider_view(f); it cannot couple with MPM.")
        self.collider, self.mpm = collider, mpm
        self.n_slabs = max(1, min(mpm.n_partitions, mpm.grid_v.shape[1]))
        self._slabs = None

    def couple(self, f):
        view = self.collider.collider_view(f)
        n_bodies = view.body_impulse.shape[1]
        if self._slabs is None or self._slabs.shape[2] != n_bodies:
            self._slabs = torch.zeros((self.n_slabs, self.mpm.batch, max(n_bodies, 1), 6), dtype=self.mpm.float_dtype,
                                      device=self.mpm.device)
        kernels_coupling.grid_vs_colliders(
            self.mpm.params_f, self.mpm.grid_v, self.mpm.grid_m, view.geom_type, view.geom_size, view.geom_friction,
            view.geom_body, view.geom_pos, view.geom_quat, view.body_com, view.body_lin_vel, view.body_ang_vel,
            self._slabs)
        for k in range(self.n_slabs):  # a fixed order: bitwise repeatable
            view.body_impulse += self._slabs[k, :, :n_bodies]

    def couple_grad(self, f):
        raise gs.GenesisError("the rigid-MPM coupling has no backward yet.")
