"""The base of particle solvers: per-entity particle ranges, each particle's mass and entity, the standard `pos`,
`vel` and `active` fields, and a domain (`lower_bound`, `upper_bound`, `particle_size`) that every position must
lie in, checked on every way into state.

A particle solver subclasses `ParticleSolver` and `ParticleOptions`:

    class MySolver(ParticleSolver):
        options_class = MyOptions                 # a ParticleOptions
        material_class = MyMaterial               # with `rho` (kg/m^3) and, optionally, `sampler`
        state_fields = ParticleSolver.particle_fields + (gs.FieldSpec("rho", ("n_particles",)), ...)

        def build_particles(self):                # after the entities' particles are laid out: static arrays
            ...

and writes its substep methods over `self.state.pos` ([frames, B, n_particles, 3]) and the others. A solver whose
kernels read gravity from its parameter array `params_f` also mixes in `ParamsGravity` (setting `gravity_param`),
which gives it `set_gravity`, so that `scene.set_gravity` works after build.
"""

from __future__ import annotations

import attrs
import numpy as np
import torch

from .. import morphs
from .. import validators as v
from .._runtime import runtime
from ..bases import Options
from ..errors import OptionError
from ..solver import SolverBase
from ..state import FieldSpec, first_entry
from . import sampling
from .entity import ParticleEntity


@attrs.define(frozen=True, kw_only=True)
class ParticleOptions(Options):
    """The domain of a particle solver: lower_bound, upper_bound (m) enclose every particle; particle_size (m):
    the spacing of the lattice particles are sampled on (None: the solver's default)."""

    lower_bound: tuple = attrs.field(default=(-1.0, -1.0, 0.0), converter=v.to_float_tuple, validator=v.vec(3))
    upper_bound: tuple = attrs.field(default=(1.0, 1.0, 1.0), converter=v.to_float_tuple, validator=v.vec(3))
    particle_size: float | None = attrs.field(default=None, validator=attrs.validators.optional(v.positive))

    def __attrs_post_init__(self):
        if any(not hi > lo for lo, hi in zip(self.lower_bound, self.upper_bound)):
            raise OptionError(f"{type(self).__name__}: upper_bound {self.upper_bound} must exceed lower_bound "
                              f"{self.lower_bound} along every axis.")


class ParamsGravity:
    """Gravity set after build, for a solver whose substep kernels read it at run time from its parameter array
    `params_f` (a 1-D torch tensor on the solver's device, passed to the kernels as an ndarray): gravity (m/s^2,
    world) is `params_f[gravity_param:gravity_param + 3]`, written at build from SimOptions.gravity. Mix it in
    before the base (`class MySolver(ParamsGravity, ParticleSolver)`) and set `gravity_param`; `scene.set_gravity`
    after build then writes the new value there in place (the kernels' prepared launches keep pointing at the same
    memory, and no kernel compiles again). MPM, SPH, PBD and FEM take it."""

    gravity_param: int  # the index in params_f of gravity's x (y and z follow)

    def set_gravity(self, gravity):
        """The gravity (m/s^2, world; 3 finite numbers, checked by scene.set_gravity) the substeps apply from the
        next one on, plain and differentiable alike: scene.set_gravity after build."""
        i = self.gravity_param
        with torch.no_grad():
            self.params_f[i:i + 3] = torch.as_tensor(gravity, dtype=self.params_f.dtype, device=self.params_f.device)


class ParticleSolver(SolverBase):
    """Particles of every entity laid out one entity after the other (entity i owns rows
    `entities[i].particle_start:particle_end`); `p_mass` [n_particles] (kg) and `p_entity` [n_particles] (int)
    are static arrays on the solver's device."""

    entity_class = ParticleEntity
    particle_fields = (
        FieldSpec("pos", ("n_particles", 3), grad=True, domain=True, sentinel=True, doc="particle positions, m"),
        FieldSpec("vel", ("n_particles", 3), grad=True, sentinel=True, doc="particle velocities, m/s"),
        FieldSpec("active", ("n_particles",), dtype="int", frames=False, codes=(0, 1), doc="1: simulated, 0: frozen"),
    )
    state_fields = particle_fields

    def __init__(self, scene, sim_options, options=None):
        super().__init__(scene, sim_options, options)
        self.lower = np.asarray(self.options.lower_bound, dtype=np.float64)
        self.upper = np.asarray(self.options.upper_bound, dtype=np.float64)
        self.particle_size = self.options.particle_size or self.default_particle_size()
        self.n_particles = 0
        self._links_counted = None  # (link source, link count): link_count's, per solver (fixed once built)

    @property
    def substep_dt(self) -> float:
        """The time (s) one substep of this solver advances: its options' own `dt` (Genesis World's per-solver step,
        where the options class has one and it is set) over SimOptions.substeps, else SimOptions.substep_dt."""
        dt = getattr(self.options, "dt", None)
        return self.sim_options.substep_dt if dt is None else dt / self.sim_options.substeps

    def default_particle_size(self) -> float:
        return 0.01

    # -- entities --------------------------------------------------------------------------------------------------

    def sample_entity(self, idx, morph, material) -> np.ndarray:
        """The entity's initial particle positions (n, 3): a lattice inside the morph, or random points where the
        material's `sampler` is "random" (seeded by gs.init's seed and the entity's index)."""
        if isinstance(morph, morphs.Nowhere):  # (inactive until an emitter places them: parked inside the domain)
            lo, hi = (np.asarray(b, dtype=np.float64) for b in self.inside_bounds())
            return np.tile((lo + hi) / 2, (morph.n_particles, 1))
        sampler = getattr(material, "sampler", "regular")
        seed = ((runtime.seed or 0) * 1_000_003 + idx) % 2 ** 32
        return sampling.sample(morph, self.particle_size, sampler, seed)

    def add_entity(self, idx, morph, material):
        points = self.sample_entity(idx, morph, material)  # fails here, before build, on a bad morph
        self.check_inside(torch.as_tensor(points), f"{type(morph).__name__} entity")
        entity = super().add_entity(idx, morph, material)
        entity._points = points
        return entity

    # -- rigid links particles follow (PBD attachments, FEM vertex constraints) ----------------------------------------

    _link_source = None  # the rigid solver's coupling that hands over its collider view, when there is one
    # the int state fields that name a rigid link (the rigid solver's index) or -1 (none): every way into state
    # checks them against the scene's links (`link_rule`)
    link_fields: tuple = ()

    def add_link_source(self, coupling):
        """Called at build by a rigid coupling (RigidPBDCoupling, RigidFEMCoupling): the collider whose links
        particles can follow (`coupling.collider.collider_view(f)`: body_com, body_quat)."""
        self._link_source = coupling

    def link_count(self, view=None) -> int:
        """How many rigid links particles can follow: those of the link source's collider view (`view`, or one taken
        at the current frame), 0 without a link source. Counted once per link source (it is fixed once the scene is
        built)."""
        source = self._link_source
        if source is None:
            return 0
        if self._links_counted is None or self._links_counted[0] is not source:
            if view is None:
                view = source.collider.collider_view(self.frames.prev(self.frame))
            n = 0 if view.body_quat is None else min(view.body_quat.shape[1], view.body_com.shape[1])
            self._links_counted = (source, int(n))
        return self._links_counted[1]

    def any_linked(self, name: str) -> bool:
        """Whether an entry of the link field `name` names a link (>= 0): looked at again only after the field was
        written (its tensor's version counter moves with every in-place write)."""
        t = self.state.tensors[name]
        seen = self.__dict__.setdefault("_linked_seen", {})
        key = (id(t), t._version)
        if seen.get(name, (None,))[0] != key:
            seen[name] = (key, bool((t >= 0).any()))
        return seen[name][1]

    def link_pose(self, link: int, what: str):
        """(centre of mass [B, 3], orientation (w, x, y, z) [B, 4]) of rigid link `link` (the rigid solver's index)
        at the current frame, from the rigid solver's collider view; `what` names the call in errors."""
        if self._link_source is None:
            raise OptionError(f"{what}: the scene has no rigid bodies to attach particles to (the rigid plugin, "
                              "genesis-rigid, and a rigid entity are needed).")
        view = self._link_source.collider.collider_view(self.frames.prev(self.frame))
        n = self.link_count(view)
        if not 0 <= link < n:
            raise OptionError(f"{what}: link_idx={link} is not a link of the rigid solver (0 <= link_idx < {n}).")
        return view.body_com[:, link].detach().clone(), view.body_quat[:, link].detach().clone()

    def link_rule(self, rows):
        """The rule of the link fields (`link_fields`) across the scene (StateStore.rules), on rows {name: [R, ...]}
        of the fields present: every entry -1 or a link particles can follow (`link_count`). The first entry that
        breaks it, (name, row, index, value, expected), or None; the links are counted only when an entry names
        one."""
        for name in self.link_fields:
            x = rows.get(name)
            if x is None or not bool((x != -1).any()):
                continue
            n = self.link_count()
            bad = (x < -1) | (x >= n)
            if bad.any():
                expected = (f"-1 (no link) or a link of the rigid solver, 0 <= link < {n}" if n else
                            "-1 (no link): the scene has no rigid links to follow")
                return (name, *first_entry(bad, x), expected)
        return None

    def inside_bounds(self):
        """(lo, hi), metres: where a particle may start or be set (default: the domain's bounds)."""
        return self.lower, self.upper

    def check_inside(self, pos: torch.Tensor, what: str):
        """Refuse positions outside `inside_bounds()` or non-finite, before any kernel."""
        pos = pos.detach().cpu().double()
        lo, hi = (torch.as_tensor(np.asarray(b, dtype=np.float64)) for b in self.inside_bounds())
        if not torch.isfinite(pos).all() or (pos < lo).any() or (pos > hi).any():
            lo_t, hi_t = (tuple(float(x) for x in b) for b in (lo, hi))
            raise OptionError(f"{what}: particles must lie inside the {self.short_name.upper()} domain {lo_t} - "
                              f"{hi_t}; widen {type(self.options).__name__}' bounds.")

    # -- build -----------------------------------------------------------------------------------------------------

    def build(self, n_envs: int, n_frames: int):
        super().build(n_envs, n_frames)
        if self.link_fields:  # after init_state: a rule the solver installed there runs first
            st = self.state
            st.rules = self.link_rule if st.rules is None else _either(st.rules, self.link_rule)

    def build_model(self):
        self.particle_volume = sampling.volume_per_particle(self.particle_size)
        mass, owner, start = [], [], 0
        for i, e in enumerate(self.entities):
            n = len(e._points)
            e._setup(start, start + n, i)
            mass.append(self.particle_masses(e))
            owner.append(np.full(n, i, dtype=np.int32))
            start += n
        fl, dev = self.float_dtype, self.device
        self._points = np.concatenate([e._points for e in self.entities])
        self.n_particles = len(self._points)
        self.p_mass = torch.as_tensor(np.concatenate(mass), dtype=fl, device=dev)
        self.p_entity = torch.as_tensor(np.concatenate(owner), device=dev)
        self.build_particles()

    def particle_masses(self, entity) -> np.ndarray:
        """The masses (kg) of an entity's particles (`entity._points`): rho times the lattice volume each; a
        solver whose particles are a mesh's vertices lumps its own."""
        return np.full(len(entity._points), entity.material.rho * self.particle_volume)

    def build_particles(self):
        """The solver's own static arrays, after the particles are laid out (entities' ranges set)."""

    def state_dims(self):
        return {"n_particles": self.n_particles, "n_entities": len(self.entities)}

    def domain_bounds(self):
        return self.lower, self.upper

    def field_mask(self, f: int) -> torch.Tensor:
        """int32 [B, n_particles]: nonzero where the scene's force fields act on a particle in the substep at frame
        f (genesis_core.force_fields): by default the active particles; a solver whose particles can be held in
        place (fixed, attached, hard-constrained) leaves those out."""
        return self.state.at("active", f)

    def keep_inside(self, fn: int):
        """Put the particles of frame fn that left the domain back on its walls (`walls.keep_inside`): call it at
        the end of each substep, so that every state the solver produces passes the domain check on the way back
        in (save/load, reset)."""
        from ..launch import Launcher, serial_below
        from . import walls
        from .reduce import SERIAL_BELOW

        if "_walls" not in self.__dict__:
            lo, hi = (torch.as_tensor(np.asarray(x, dtype=np.float64), dtype=self.float_dtype, device=self.device)
                      for x in self.domain_bounds())
            extent = float(np.max(np.asarray(self.domain_bounds()[1]) - np.asarray(self.domain_bounds()[0])))
            vmax = 1000.0 * extent / self.substep_dt  # a thousand domains a substep: blown up
            kernel = serial_below(walls.keep_inside, self.batch * self.n_particles, SERIAL_BELOW)
            self._walls = (Launcher(), kernel, lo, hi, vmax)
        launch, kernel, lo, hi, vmax = self._walls
        st = self.state
        launch(kernel, fn, lo, hi, vmax, st.pos, st.vel, st.active)

    def init_state(self, f):
        st = self.state
        st.at("pos", f)[:] = torch.as_tensor(self._points, dtype=self.float_dtype)
        st.at("active", f)[:] = 1
        for e in self.entities:  # an emitter's particles start inactive
            if isinstance(e.morph, morphs.Nowhere):
                st.at("active", f)[..., e._range] = 0


def _either(first, second):
    """State rules (StateStore.rules) that report what `first` finds, else what `second` finds."""
    def rules(rows):
        found = first(rows)
        return second(rows) if found is None else found

    return rules
