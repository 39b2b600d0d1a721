"""The coupler: pairwise interactions between solvers, contributed by plugins and run by the core.

A coupling between solvers A and B is registered by a plugin under the pair of class names
(``register("RigidSolver", "MPMSolver", RigidMPMCoupling)``) and runs only when both are installed and active.
It never reads another plugin's internals: a solver that others collide with exposes its geometry through
`collider_view()`, the layout below, and takes contact impulses back through the same object. A third-party
particle solver couples with the rigid solver exactly the way the MPM solver does.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import attrs
import torch

from .geoms import GeomKind

# geom_type codes of ColliderView (genesis_core.geoms.GeomKind)
GEOM_PLANE, GEOM_SPHERE, GEOM_CAPSULE, GEOM_BOX, GEOM_CYLINDER, GEOM_MESH, GEOM_ELLIPSOID, GEOM_HFIELD = (
    int(k) for k in GeomKind)

# register(ANY_COLLIDER, "MySolver", cls): the coupling runs between MySolver and every active solver that exposes
# collider_view (Collider), each its own instance, in the order of scene.solvers
ANY_COLLIDER = "*collider"


@attrs.define
class ColliderView:
    """The collision geometry a solver exposes to couplings, at one frame. B = max(n_envs, 1); G geoms; L bodies.

    geom_type: int32 [G], a GEOM_* code (-1: no geometry, which collides with nothing). geom_size: [G, 3], metres: sphere (r, -, -); capsule (r, half-length
    of the segment, -) along local Z; box (half-extents); cylinder (r, half-height, -) along local Z;
    ellipsoid (the semi-axes along local X, Y, Z); plane: unused (the plane is local z = 0, normal +Z); height field
    (cell size along local X, along Y, vertices per row ny), its heights in hull_planes (below).
    geom_friction: [G], Coulomb coefficient. geom_body: int32 [G], the body that carries the geom, -1 for static
    geoms.
    geom_pos: [B, G, 3] world position; geom_quat: [B, G, 4] world orientation (w, x, y, z).
    body_com: [B, L, 3] world centre of mass; body_lin_vel / body_ang_vel: [B, L, 3] (m/s, rad/s, world).
    body_impulse: [B, L, 6], an accumulator: a coupling adds (linear impulse N s, angular impulse about
    body_com N m s) in world axes; the owning solver applies it and clears it, in its post-coupling part or in its
    next substep (as the rigid solver does; the accumulator is then declared state).

    Optional (None: every body infinitely heavy, meshes without a hull):
    body_inv_mass: [L], 1/kg (0: immovable). body_inv_inertia: [B, L, 3, 3], the inverse of the body's inertia
    about body_com in world axes (1/(kg m^2)); together the inverse effective mass a contact at a point sees (for
    a link of an articulated body: the link alone, which the joints make heavier in effect).
    geom_hull: int32 [G, 2], (first row, rows) of a mesh geom's hull in hull_planes (0 rows for other kinds);
    hull_planes: [P, 4], (outward unit normal, offset) in the geom's frame: n . p <= offset inside the convex
    piece. A non-convex mesh appears as its convex pieces, one geom each. A height field's rows hold its heights
    (metres, column 0), row-major over its nx x ny vertices (genesis_core.terrain): geom_hull gives (first row,
    nx * ny).
    body_quat: [B, L, 4], each body's orientation (w, x, y, z; world): what a coupling needs to carry points
    fixed in a body (particles attached to a link).
    """

    geom_type: torch.Tensor
    geom_size: torch.Tensor
    geom_friction: torch.Tensor
    geom_body: torch.Tensor
    geom_pos: torch.Tensor
    geom_quat: torch.Tensor
    body_com: torch.Tensor
    body_lin_vel: torch.Tensor
    body_ang_vel: torch.Tensor
    body_impulse: torch.Tensor
    body_inv_mass: torch.Tensor | None = None
    body_inv_inertia: torch.Tensor | None = None
    geom_hull: torch.Tensor | None = None
    hull_planes: torch.Tensor | None = None
    body_quat: torch.Tensor | None = None


@runtime_checkable
class Collider(Protocol):
    """A solver whose geometry other solvers collide with."""

    def collider_view(self, f: int) -> ColliderView: ...


@runtime_checkable
class Coupling(Protocol):
    """An interaction between two solvers. Constructed at scene build with the two solver objects (in the
    order they were registered) and the SimOptions; `couple(f)` runs every substep at frame f, after both
    solvers' pre-coupling parts and before their post-coupling parts; `couple_grad(f)` is its reverse."""

    def __init__(self, solver_a, solver_b, sim_options): ...

    def couple(self, f: int) -> None: ...

    def couple_grad(self, f: int) -> None: ...


class Coupler:
    """Runs the couplings whose two solvers are both active in the scene."""

    def __init__(self, solvers: list, couplings: list, sim_options):
        active = [s for s in solvers if s.is_active]
        by_name = {s.name: s for s in active}
        exact = {frozenset((a, b)) for a, b, _ in couplings if a != ANY_COLLIDER}  # either order
        self.couplings = []
        for a, b, cls in couplings:
            if b not in by_name:
                continue
            if a == ANY_COLLIDER:  # every collider but b itself, unless a plugin registered that exact pair
                pairs = [s for s in active if isinstance(s, Collider) and s.name != b
                         and frozenset((s.name, b)) not in exact]
            else:
                pairs = [by_name[a]] if a in by_name else []
            self.couplings.extend(cls(s, by_name[b], sim_options) for s in pairs)

    def couple(self, f: int):
        for c in self.couplings:
            c.couple(f)

    def couple_grad(self, f: int):
        for c in reversed(self.couplings):
            c.couple_grad(f)
