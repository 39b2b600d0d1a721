"""Particles of any particle solver against the geoms of every collider (`genesis_core.coupler.ColliderView`),
momentum-consistent, written once with the kit's physics (`genesis_core.particles.collider`).

A particle solver takes part by exposing `particle_view(f)` and registering the coupling against every collider:

    from genesis_core.coupler import ANY_COLLIDER
    from genesis_core.particles.coupling import ParticleColliderCoupling, ParticleView

    class MySolver(ParticleSolver):
        def particle_view(self, f):           # frame f + 1, after this substep's pre-coupling part
            fn = self.frames.next(f)
            return ParticleView(pos=self.state.at("pos", fn), vel=self.state.at("vel", fn), mass=self.p_mass,
                                active=self.state.at("active", fn), radius=0.005, restitution=0.5)

    @gs.hookimpl
    def register_couplings(register):
        register(ANY_COLLIDER, "MySolver", ParticleColliderCoupling)

Per substep, after every solver's pre-coupling part (both views then hold frame f + 1), two kernels:

1. `contact_mass`: for every body, the sum of m w over the active particles that touch it (d - radius < 0, d the
   signed distance of the particle's centre to one of the body's geoms) and move into it; w is the body's inverse
   effective mass at the contact. The share of each body is 1 / (1 + sum): the particles that hit one body in a
   substep share its inertia (exact for one particle; see the kit's module doc).
2. `respond_and_project`: every touching particle gets the kit's response (normal relative velocity vn < 0 to
   -restitution vn, times the body's share; Coulomb friction with the geom's coefficient), the momentum it lost is
   handed to the geom's body (`view.body_impulse`: linear, and angular about the body's centre of mass, at the
   contact point on the geom's surface), and a penetrating particle is moved out along the normal until
   d - radius = 0 (a position projection: no velocity, hence no momentum, changes with it). Geoms are taken one
   after the other, each seeing the particle as the previous one left it.

Parallel over environments and chunks of particles (`n_chunks`, a function of the particle count and the batch
only; each chunk a task of TASK_STRIDE loop iterations, so that a few chunks spread over the threads); each chunk accumulates into private rows, summed afterwards in a fixed order: no atomics, bitwise
repeatable. Not differentiable: a scene built with requires_grad=True and a particle-collider pair is refused at
build, unless the particle solver constructs the coupling with `identity_grad=True` (it runs in the forward, and
its reverse is taken as the identity: for a solver whose own boundary keeps particles out of the geoms, so that
the contact acts only on the rare particle that got in; the impulse it hands a body then carries no gradient).
"""

import attrs
import taichi as ti
import torch

from ..coupler import Collider
from ..errors import GenesisError
from ..launch import Launcher, serial_below
from .collider import (add_impulse, approaching, body_of, body_surface, clear_impulse_rows, distance_to,
                       inverse_effective_mass, respond)
from .reduce import SERIAL_BELOW, TASK_STRIDE, n_parts, part_range, sum_parts

V3 = ti.types.vector(3, float)
V4 = ti.types.vector(4, float)
M3 = ti.types.matrix(3, 3, float)
nd = ti.types.ndarray


@attrs.define
class ParticleView:
    """The particles a solver exposes to `ParticleColliderCoupling`, at the coupling time of a substep.

    pos, vel: [B, N, 3] (m, m/s, world), B = max(n_envs, 1): the solver's frame f + 1 as its pre-coupling part left
    it (positions and velocities after the substep's free motion). The coupling reads them and writes the contacts'
    result into them in place, before the solver's post-coupling part; they must be contiguous (a frame of the
    solver's state, `state.at("pos", fn)`, is). mass: [N], kg. active: int32 [B, N], 1 where a particle is
    simulated (only those collide), 0 where it is frozen. radius: m, the particles' radius (0: points).
    restitution: in [0, 1], the ratio of the normal relative velocity after and before a contact.
    """

    pos: torch.Tensor
    vel: torch.Tensor
    mass: torch.Tensor
    active: torch.Tensor
    radius: float = 0.0
    restitution: float = 0.0


# chunks of particles per environment: enough work per thread (MIN_CHUNK particles), and no more threads than
# MAX_CHUNKS over the batch
MAX_CHUNKS = 8
MIN_CHUNK = 32
# True in the serial copies (genesis_core.launch.serial_below: below reduce.SERIAL_BELOW particle-environments;
# the chunks, hence the sums, are the same)
SERIAL = False


def n_chunks(n_particles: int, batch: int) -> int:
    """The private rows per environment: a function of the particle count and the batch alone, so that the same
    scene sums its impulses in the same order on every machine."""
    return n_parts(batch, n_particles // MIN_CHUNK, threads=MAX_CHUNKS, max_parts=MAX_CHUNKS)


def _check_shapes(owner, arrays, what, sizes, exact=False):
    for name, (x, lead, comps) in arrays.items():
        if x is None:
            continue
        shape = tuple(x.shape)
        rows = shape[:len(lead)]
        if (len(shape) != len(lead) + len(comps) or shape[len(lead):] != comps
                or any(a < b for a, b in zip(rows, lead)) or (exact and rows != lead)):
            raise GenesisError(f"{owner}: {name} has shape {shape}; {what} needs {lead + comps} ({sizes}"
                               f"{'' if exact else '; geom and body arrays may hold more rows'}).")


def check_view(view, batch: int, owner: str, what: str):
    """Refuse a ColliderView whose arrays are too small for the indices a kernel forms from it (B environments,
    G = len(geom_type) geoms, L = body_impulse.shape[1] bodies), before any kernel runs: an index outside an array
    would be a crash on the CPU. Body indices and hull rows inside the arrays are clamped by the kernels
    (`collider.body_of`, `collider.distance_to`)."""
    if view.body_impulse.dim() != 3 or view.geom_type.dim() != 1:
        raise GenesisError(f"{owner}: ColliderView.body_impulse must be [B, L, 6] and geom_type [G] (got "
                           f"{tuple(view.body_impulse.shape)} and {tuple(view.geom_type.shape)}).")
    B, G, L = batch, view.geom_type.shape[0], view.body_impulse.shape[1]
    arrays = {"geom_size": (view.geom_size, (G,), (3,)), "geom_friction": (view.geom_friction, (G,), ()),
              "geom_body": (view.geom_body, (G,), ()), "geom_pos": (view.geom_pos, (B, G), (3,)),
              "geom_quat": (view.geom_quat, (B, G), (4,)), "body_com": (view.body_com, (B, L), (3,)),
              "body_lin_vel": (view.body_lin_vel, (B, L), (3,)), "body_ang_vel": (view.body_ang_vel, (B, L), (3,)),
              "body_impulse": (view.body_impulse, (B, L), (6,)), "body_inv_mass": (view.body_inv_mass, (L,), ()),
              "body_inv_inertia": (view.body_inv_inertia, (B, L), (3, 3)),
              "geom_hull": (view.geom_hull, (G,), (2,)), "hull_planes": (view.hull_planes, (0,), (4,)),
              "body_quat": (view.body_quat, (B, L), (4,))}
    _check_shapes(owner, arrays, what, f"B={B} environments, G={G} geoms, L={L} bodies")


class ViewExtras:
    """The optional arrays of a ColliderView, (body_inv_mass, body_inv_inertia, geom_hull, hull_planes): the
    view's own, or stand-ins of the right shapes (infinitely heavy bodies, meshes without a hull), kept between
    substeps. One per coupling."""

    def __init__(self):
        self._standins = None
        self._detached = {}  # id(source) -> (source, its detached view): the same objects every substep, so that
        # a Launcher keeps its bound arguments

    def __call__(self, view, batch, dtype, device):
        n_geoms, n_bodies = view.geom_type.shape[0], max(view.body_impulse.shape[1], 1)
        z = self._standins
        if z is None or z[0].shape[0] != n_bodies or z[1].shape[0] != batch or z[2].shape[0] < n_geoms:
            z = self._standins = (torch.zeros(n_bodies, dtype=dtype, device=device),
                                  torch.zeros((batch, n_bodies, 3, 3), dtype=dtype, device=device),
                                  torch.zeros((max(n_geoms, 1), 2), dtype=torch.int32, device=device),
                                  torch.zeros((1, 4), dtype=dtype, device=device))
        own = (view.body_inv_mass, view.body_inv_inertia, view.geom_hull, view.hull_planes)
        return tuple(self._detach(x) if x is not None else d for x, d in zip(own, z))

    def _detach(self, x):
        hit = self._detached.get(id(x))
        if hit is None or hit[0] is not x:
            if len(self._detached) > 16:
                self._detached.clear()
            hit = self._detached[id(x)] = (x, x.detach())
        return hit[1]


class ParticleColliderCoupling:
    """A particle solver's particles against one collider's geoms (see the module doc). Constructed by the core's
    coupler with the collider, the particle solver and the SimOptions, once for every active collider."""

    def __init__(self, collider, particles, sim_options, identity_grad=False):
        if not isinstance(collider, Collider):
            raise GenesisError(f"{collider.name} does not expose collider_view(f); it cannot couple with "
                               f"{particles.name}.")
        if not callable(getattr(particles, "particle_view", None)):
            raise GenesisError(f"{particles.name} registered ParticleColliderCoupling but has no particle_view(f) "
                               "returning a genesis_core.particles.coupling.ParticleView; add one.")
        self.identity_grad = bool(identity_grad)
        if sim_options.requires_grad and not self.identity_grad:
            raise GenesisError(f"the coupling of {particles.name} with {collider.name} (ParticleColliderCoupling) is "
                               "not differentiable; build the scene with SimOptions(requires_grad=False), or without "
                               f"one of the two solvers' entities.")
        self.collider, self.particles = collider, particles
        self._rows = None  # (mass rows [K, B, L], impulse rows [K, B, L, 6], share [B, L])
        self._extras = ViewExtras()
        self._launchers = {}  # one per frame f: the views of one frame keep their arrays

    def _view_extras(self, view, batch, dtype, device):
        return self._extras(view, batch, dtype, device)

    def _scratch(self, batch, n_particles, n_bodies, dtype, device):
        k = n_chunks(n_particles, batch)
        if self._rows is None or self._rows[0].shape != (k, batch, n_bodies):
            self._rows = (torch.zeros((k, batch, n_bodies), dtype=dtype, device=device),
                          torch.zeros((k, batch, n_bodies, 6), dtype=dtype, device=device),
                          torch.ones((batch, n_bodies), dtype=dtype, device=device))
        return self._rows

    def _check(self, view, part):
        """Every index the kernels form from the two views stays inside the arrays: the particle arrays hold
        B x N rows, the geom arrays at least G (the geoms' count, len(geom_type)), the body arrays at least L."""
        if not isinstance(part, ParticleView):
            raise GenesisError(f"{self.particles.name}.particle_view(f) returned a {type(part).__name__}, not a "
                               "genesis_core.particles.coupling.ParticleView.")
        if part.pos.dim() != 3 or view.body_impulse.dim() != 3:
            raise GenesisError(f"coupling {self.particles.name} with {self.collider.name}: ParticleView.pos must be "
                               f"[B, N, 3] (got {tuple(part.pos.shape)}) and ColliderView.body_impulse [B, L, 6] (got "
                               f"{tuple(view.body_impulse.shape)}).")
        B, N = part.pos.shape[0], part.pos.shape[1]
        ours = {"pos": (part.pos, (B, N), (3,)), "vel": (part.vel, (B, N), (3,)), "mass": (part.mass, (N,), ()),
                "active": (part.active, (B, N), ())}
        _check_shapes(self.particles.name, ours, f"coupling {self.particles.name} with {self.collider.name}",
                      f"B={B} environments, N={N} particles", exact=True)
        check_view(view, B, self.collider.name, f"coupling {self.particles.name} with {self.collider.name}")
        if not (part.pos.is_contiguous() and part.vel.is_contiguous()):
            raise GenesisError(f"{self.particles.name}.particle_view(f): pos and vel must be contiguous tensors (the "
                               "coupling writes them in place); pass a frame of the state, state.at(\"pos\", fn).")
        if not (part.radius >= 0 and 0 <= part.restitution <= 1):
            raise GenesisError(f"{self.particles.name}.particle_view(f): radius={part.radius!r} must be >= 0 and "
                               f"restitution={part.restitution!r} in [0, 1].")

    def couple(self, f: int):
        view = self.collider.collider_view(f)
        part = self.particles.particle_view(f)
        self._check(view, part)
        batch, n_particles = part.pos.shape[0], part.pos.shape[1]
        n_geoms, n_bodies = view.geom_type.shape[0], view.body_impulse.shape[1]
        if n_geoms == 0 or n_particles == 0:
            return
        dtype, device = part.pos.dtype, part.pos.device
        inv_mass, inv_inertia, geom_hull, hull_planes = self._view_extras(view, batch, dtype, device)
        mass_rows, impulse_rows, share = self._scratch(batch, n_particles, max(n_bodies, 1), dtype, device)
        launch = self._launchers.setdefault(f, Launcher())
        radius = float(part.radius)
        n = batch * n_particles
        launch(serial_below(contact_mass, n, SERIAL_BELOW), part.pos, part.vel, part.mass, part.active, radius,
               view.geom_type, view.geom_size, view.geom_body, geom_hull, hull_planes, view.geom_pos, view.geom_quat,
               view.body_com, view.body_lin_vel, view.body_ang_vel, inv_mass, inv_inertia, mass_rows)
        with torch.no_grad():
            torch.reciprocal(sum_parts(mass_rows, share) + 1.0, out=share)
        launch(serial_below(respond_and_project, n, SERIAL_BELOW), part.pos, part.vel, part.mass, part.active,
               radius, float(part.restitution), view.geom_type, view.geom_size, view.geom_friction, view.geom_body,
               geom_hull, hull_planes, view.geom_pos, view.geom_quat, view.body_com, view.body_lin_vel,
               view.body_ang_vel, share, impulse_rows)
        if n_bodies:
            sum_parts(impulse_rows[:, :, :n_bodies], view.body_impulse, add=True)

    def couple_grad(self, f: int):
        if not self.identity_grad:
            raise GenesisError(f"the coupling of {self.particles.name} with {self.collider.name} is not "
                               "differentiable.")


# -- kernels ------------------------------------------------------------------------------------------------------
# Indices read from the view are kept inside their arrays: a body outside [0, L) is treated as static, a mesh's hull
# rows are clamped to hull_planes.


@ti.kernel
def contact_mass(pos: nd(dtype=V3, ndim=2), vel: nd(dtype=V3, ndim=2), mass: nd(ndim=1), active: nd(ndim=2),
                 radius: float, geom_type: nd(ndim=1), geom_size: nd(dtype=V3, ndim=1), geom_body: nd(ndim=1),
                 geom_hull: nd(ndim=2), hull_planes: nd(ndim=2), geom_pos: nd(dtype=V3, ndim=2),
                 geom_quat: nd(dtype=V4, ndim=2), body_com: nd(dtype=V3, ndim=2), body_lin_vel: nd(dtype=V3, ndim=2),
                 body_ang_vel: nd(dtype=V3, ndim=2), body_inv_mass: nd(ndim=1),
                 body_inv_inertia: nd(dtype=M3, ndim=2), chunk_mass: nd(ndim=3)):
    """chunk_mass [K, B, L] receives each chunk's sum of m w over its active particles touching each body
    (d - radius < 0) and moving into it, w the body's inverse effective mass at the contact point."""
    if ti.static(SERIAL):
        ti.loop_config(serialize=True)
    n_chunks = chunk_mass.shape[0]
    n_bodies = ti.min(ti.min(chunk_mass.shape[2], body_inv_mass.shape[0]),
                      ti.min(ti.min(body_com.shape[1], body_inv_inertia.shape[1]),
                             ti.min(body_lin_vel.shape[1], body_ang_vel.shape[1])))
    n = pos.shape[1]
    for t in range(pos.shape[0] * n_chunks * TASK_STRIDE):
        if t % TASK_STRIDE != 0:
            continue
        b, k = t // (n_chunks * TASK_STRIDE), t // TASK_STRIDE % n_chunks
        for body in range(chunk_mass.shape[2]):
            chunk_mass[k, b, body] = 0.0
        i0, i1 = part_range(k, n, n_chunks)
        for i in range(i0, i1):
            if active[b, i] != 0:
                x = pos[b, i]
                v = vel[b, i]
                for g in range(geom_type.shape[0]):
                    body = body_of(geom_body, g, n_bodies)
                    if body >= 0:
                        d, nrm = distance_to(g, b, x, geom_type, geom_size, geom_hull, hull_planes, geom_pos,
                                             geom_quat)
                        if d - radius < 0:
                            at = x - d * nrm  # the contact point, on the geom's surface
                            com, v_body = body_surface(b, body, at, body_com, body_lin_vel, body_ang_vel)
                            if approaching(v, v_body, nrm) < 0:
                                w = inverse_effective_mass(at, nrm, com, body_inv_mass[body], body_inv_inertia[b, body])
                                chunk_mass[k, b, body] += mass[i] * w


@ti.kernel
def respond_and_project(pos: nd(dtype=V3, ndim=2), vel: nd(dtype=V3, ndim=2), mass: nd(ndim=1), active: nd(ndim=2),
                        radius: float, restitution: float, geom_type: nd(ndim=1), geom_size: nd(dtype=V3, ndim=1),
                        geom_friction: nd(ndim=1), geom_body: nd(ndim=1), geom_hull: nd(ndim=2),
                        hull_planes: nd(ndim=2), geom_pos: nd(dtype=V3, ndim=2), geom_quat: nd(dtype=V4, ndim=2),
                        body_com: nd(dtype=V3, ndim=2), body_lin_vel: nd(dtype=V3, ndim=2),
                        body_ang_vel: nd(dtype=V3, ndim=2), body_share: nd(ndim=2), chunk_impulse: nd(ndim=4)):
    """The contacts of the active particles, geom after geom: velocity response (body_share [B, L], 1 / (1 + sum
    m w) from contact_mass), the impulse into chunk_impulse [K, B, L, 6] (linear, angular about the body's centre
    of mass), and the position projection to d - radius = 0."""
    if ti.static(SERIAL):
        ti.loop_config(serialize=True)
    n_chunks = chunk_impulse.shape[0]
    n_bodies = ti.min(ti.min(chunk_impulse.shape[2], body_share.shape[1]),
                      ti.min(body_com.shape[1], ti.min(body_lin_vel.shape[1], body_ang_vel.shape[1])))
    n = pos.shape[1]
    for t in range(pos.shape[0] * n_chunks * TASK_STRIDE):
        if t % TASK_STRIDE != 0:
            continue
        b, k = t // (n_chunks * TASK_STRIDE), t // TASK_STRIDE % n_chunks
        clear_impulse_rows(k, b, chunk_impulse)
        i0, i1 = part_range(k, n, n_chunks)
        for i in range(i0, i1):
            if active[b, i] != 0:
                x = pos[b, i]
                v = vel[b, i]
                m = mass[i]
                for g in range(geom_type.shape[0]):
                    d, nrm = distance_to(g, b, x, geom_type, geom_size, geom_hull, hull_planes, geom_pos, geom_quat)
                    if d - radius < 0:
                        body = body_of(geom_body, g, n_bodies)
                        at = x - d * nrm
                        com, v_body = body_surface(b, body, at, body_com, body_lin_vel, body_ang_vel)
                        share = 1.0
                        if body >= 0:
                            share = body_share[b, body]
                        out = respond(v, nrm, v_body, geom_friction[g], restitution, share)
                        if body >= 0:
                            add_impulse(m * (v - out), at, com, k, b, body, chunk_impulse)
                        v = out
                        x = x + (radius - d) * nrm
                pos[b, i] = x
                vel[b, i] = v

