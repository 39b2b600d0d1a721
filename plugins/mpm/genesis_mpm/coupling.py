"""Two-way coupling of MPM with every solver that exposes rigid geoms through genesis_core.coupler.ColliderView
(the rigid solver, or any third-party solver implementing `collider_view`): registered against
genesis_core.coupler.ANY_COLLIDER, it reads the collider only through that interface."""

import torch

import genesis_core as gs
from genesis_core.coupler import GEOM_MESH, Collider
from genesis_core.launch import Launcher
from genesis_core.particles.coupling import ViewExtras, check_view
from genesis_core.particles.reduce import sum_parts

from . import kernels_coupling, kernels_grad

# the ColliderView arrays gradients flow into, in differentiable mode
POSE_ARRAYS = ("geom_pos", "geom_quat", "body_com", "body_lin_vel", "body_ang_vel")


class ColliderMPMCoupling:
    """Grid nodes within half a cell of a geom (kernels_coupling.CONTACT_BAND) stop moving into it relative to
    its surface (with Coulomb friction tangentially), each by the body's share 1 / (1 + sum m w) over the nodes
    moving into the body (a first pass sums m w); the momentum they lose goes to the geom's body, which applies it
    in its next substep. Plain and differentiable mode run the same node contact (kernels_coupling.node_contact_mass,
    node_contact).

    In differentiable mode the nodes' velocities go from the MPM solver's grid into arrays of this coupling
    (grid-to-particle then reads the last of them), and `couple_grad` carries the gradient back to the grid and
    to the view's geom poses, body centres of mass and velocities (their `.grad`), taking the gradient of the
    impulses from `view.body_impulse.grad`. The collider owns those `.grad` buffers and carries them on into its
    own state."""

    def __init__(self, collider, mpm, sim_options):
        if not isinstance(collider, Collider):
            raise gs.GenesisError(f"{getattr(collider, 'name', type(collider).__name__)} does not expose "
                                  "collider_view(f); it cannot couple with MPM.")
        self.collider, self.mpm = collider, mpm
        self.who = getattr(collider, "name", type(collider).__name__)  # in messages
        self.n_slabs = max(1, min(mpm.n_partitions, mpm.grid_v.shape[1]))
        self.requires_grad = bool(sim_options.requires_grad)
        self._slabs = None
        self._shares = None  # (m w sums per slab [K, B, L], the bodies' shares [B, L], in differentiable mode one
        # copy of the shares per slab [K, B, L])
        self._outs = []  # differentiable mode: the grid velocity after each launch
        self._out_grads = []  # their adjoints, flat, each with a launcher of kernels_grad.clear
        self._copies = {}  # differentiable mode: the view's pose arrays, one copy per slab
        self._run = None  # differentiable mode: what the last `couple` read and wrote
        self._extras = ViewExtras()  # the view's optional arrays, or stand-ins (infinitely heavy bodies, no hulls)
        if mpm.takes_links_from(collider):  # a hybrid's skin follows this collider's links (genesis_mpm.hybrid)
            mpm.add_link_source(self)

    def _view_extras(self, view):
        """(body_inv_mass, body_inv_inertia, geom_hull, hull_planes), the view's or zeros of the right shapes."""
        return self._extras(view, self.mpm.batch, self.mpm.float_dtype, self.mpm.device)

    def _slab_rows(self, n_bodies):
        if self._slabs is None or self._slabs.shape[2] != max(n_bodies, 1):
            self._slabs = torch.zeros((self.n_slabs, self.mpm.batch, max(n_bodies, 1), 6),
                                      dtype=self.mpm.float_dtype, device=self.mpm.device)
            if self.requires_grad:
                self._slabs.requires_grad_(True)
                self._slabs.grad = torch.zeros_like(self._slabs)
        return self._slabs

    def _share_rows(self, n_bodies):
        """(m w sums per slab, the bodies' shares, their per-slab copies), for max(n_bodies, 1) bodies."""
        L = max(n_bodies, 1)
        if self._shares is None or self._shares[1].shape[1] != L:
            mpm = self.mpm
            shape = (self.n_slabs, mpm.batch, L)
            rows = torch.zeros(shape, dtype=mpm.float_dtype, device=mpm.device)
            share = torch.ones((mpm.batch, L), dtype=mpm.float_dtype, device=mpm.device)
            copies = torch.ones(shape, dtype=mpm.float_dtype, device=mpm.device)
            if self.requires_grad:
                for x in (rows, copies):
                    x.requires_grad_(True)
                    x.grad = torch.zeros_like(x)
            self._shares = (rows, share, copies)
        return self._shares

    def couple(self, f):
        view = self.collider.collider_view(f)
        check_view(view, self.mpm.batch, self.who, f"coupling {self.who} with MPMSolver")
        if self.requires_grad:
            self._couple_differentiable(view)
            return
        n_bodies = view.body_impulse.shape[1]
        slabs = self._slab_rows(n_bodies)
        inv_mass, inv_inertia, geom_hull, hull_planes = self._view_extras(view)
        rows, share, _ = self._share_rows(n_bodies)
        mpm = self.mpm
        kernels_coupling.grid_contact_mass(
            mpm.params_f, mpm.grid_v, mpm.grid_m, view.geom_type, view.geom_size, view.geom_body, geom_hull,
            hull_planes, view.geom_pos, view.geom_quat, view.body_com, view.body_lin_vel, view.body_ang_vel, inv_mass,
            inv_inertia, rows)
        with torch.no_grad():
            torch.reciprocal(sum_parts(rows, share) + 1.0, out=share)
        kernels_coupling.grid_vs_colliders(
            mpm.params_f, mpm.grid_v, mpm.grid_m, view.geom_type, view.geom_size, view.geom_friction,
            view.geom_body, geom_hull, hull_planes, view.geom_pos, view.geom_quat, view.body_com, view.body_lin_vel,
            view.body_ang_vel, inv_mass, inv_inertia, share, slabs)
        sum_parts(slabs[:, :, :n_bodies], view.body_impulse, add=True)

    # -- differentiable mode ---------------------------------------------------------------------------------------

    def _couple_differentiable(self, view):
        mpm = self.mpm
        n_geoms = view.geom_type.shape[0]
        n_bodies = view.body_impulse.shape[1]
        self._run = None
        if n_geoms == 0:
            return
        if bool((view.geom_type == GEOM_MESH).any()):
            raise gs.GenesisError(f"{self.who} has mesh geoms, which the MPM coupling does not differentiate "
                                  "yet; in differentiable mode collide MPM with primitives (planes, spheres, capsules, "
                                  "cylinders, boxes).")
        inertia = self._view_extras(view)[:2]  # the bodies' inverse masses and inertias (constants)
        n_launches = -(-n_geoms // kernels_coupling.GEOM_CHUNK)
        while len(self._outs) < n_launches:
            out = torch.zeros_like(mpm.grid_v.detach()).requires_grad_(True)
            out.grad = torch.zeros_like(out)
            self._outs.append(out)
            self._out_grads.append((out.grad.view(-1), Launcher()))
        # the adjoints the reverse accumulates into start from zero: the core re-runs this before couple_grad
        # (a coupling after this one adds into the last grid's)
        for flat, launch in self._out_grads[:n_launches]:
            launch(kernels_grad.clear, flat)
        slabs = self._slab_rows(n_bodies)
        with torch.no_grad():
            slabs.zero_()
            copies = []
            for name in POSE_ARRAYS:
                src = getattr(view, name).detach()
                c = self._copies.get(name)
                if c is None or c.shape[1:] != src.shape:
                    c = torch.zeros((self.n_slabs, *src.shape), dtype=src.dtype, device=src.device)
                    c.requires_grad_(True)
                    c.grad = torch.zeros_like(c)
                    self._copies[name] = c
                c.copy_(src.unsqueeze(0).expand_as(c))
                copies.append(c)
        inputs = [mpm.g2p_grid_v] + self._outs[:n_launches - 1]
        rows, share, share_copies = self._share_rows(n_bodies)
        with torch.no_grad():
            rows.zero_()
        kernels_coupling.grid_contact_mass_ad(mpm.params_f, inputs[0], mpm.grid_m, view.geom_type, view.geom_size,
                                              view.geom_body, *copies, *inertia, rows)
        with torch.no_grad():
            torch.reciprocal(sum_parts(rows, share) + 1.0, out=share)
            share_copies.copy_(share.unsqueeze(0).expand_as(share_copies))
        for c in range(n_launches):
            kernels_coupling.grid_vs_colliders_ad(
                c * kernels_coupling.GEOM_CHUNK, mpm.params_f, inputs[c], mpm.grid_m, view.geom_type,
                view.geom_size, view.geom_friction, view.geom_body, *copies, share_copies, self._outs[c], slabs)
        with torch.no_grad():
            sum_parts(slabs[:, :, :n_bodies], view.body_impulse, add=True)
        mpm.g2p_grid_v = self._outs[n_launches - 1]
        self._run = (view, inputs, copies, n_launches, inertia)

    def couple_grad(self, f):
        """The reverse of `couple(f)` (which the core has just re-run): from the adjoint of the grid velocity
        grid-to-particle read and `view.body_impulse.grad`, into the MPM grid's adjoints and the `.grad` of the
        view's pose arrays (where they have one)."""
        if self._run is None:
            return
        view, inputs, copies, n_launches, inertia = self._run
        mpm = self.mpm
        n_bodies = view.body_impulse.shape[1]
        slabs = self._slabs
        with torch.no_grad():
            slabs.grad.zero_()
            g_impulse = view.body_impulse.grad
            if g_impulse is not None and n_bodies:
                slabs.grad[:, :, :n_bodies] = g_impulse.unsqueeze(0)
            for c in copies:
                c.grad.zero_()
            rows, share, share_copies = self._shares
            share_copies.grad.zero_()
            for c in reversed(range(n_launches)):
                kernels_coupling.grid_vs_colliders_ad.grad(
                    c * kernels_coupling.GEOM_CHUNK, mpm.params_f, inputs[c], mpm.grid_m, view.geom_type,
                    view.geom_size, view.geom_friction, view.geom_body, *copies, share_copies, self._outs[c], slabs)
            # share = 1 / (1 + sum of the slabs' m w): its adjoint, summed over the slabs' copies in order, goes to
            # every slab's sum as -share^2 times it
            g_share = sum_parts(share_copies.grad, torch.empty_like(share))
            rows.grad.copy_((-share * share * g_share).unsqueeze(0).expand_as(rows))
            kernels_coupling.grid_contact_mass_ad.grad(mpm.params_f, inputs[0], mpm.grid_m, view.geom_type,
                                                       view.geom_size, view.geom_body, *copies, *inertia, rows)
            for name, c in zip(POSE_ARRAYS, copies):
                target = getattr(view, name)
                if target.grad is not None:
                    sum_parts(c.grad, target.grad, add=True)
