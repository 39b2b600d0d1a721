"""A particle entity with Genesis World's particle API. Arrays are `([n_envs,] n_particles, 3)` (positions,
velocities) and `([n_envs,] n_particles)` (active flags); `envs_idx` selects environments and
`particles_idx_local` particles of the entity (indices in [0, n_particles)), each once."""

from __future__ import annotations

import numpy as np
import torch

from ..errors import OptionError
from ..solver import Entity
from ..state import to_index, to_tensor


class ParticleEntity(Entity):
    """An entity whose state is rows `particle_start:particle_end` of its solver's `pos`, `vel` and `active`."""

    particle_start = particle_end = 0

    def _setup(self, start: int, end: int, index: int):
        """Called by the solver at build: this entity's particle rows and its index among the solver's entities."""
        self.particle_start, self.particle_end = start, end
        self._material_index = index

    @property
    def n_particles(self) -> int:
        return self.particle_end - self.particle_start

    @property
    def _range(self):
        return slice(self.particle_start, self.particle_end)

    def _rows(self, particles_idx_local, what):
        """The solver rows of the entity's particles `particles_idx_local` (None: all of them)."""
        if particles_idx_local is None:
            return self._range
        return to_index(particles_idx_local, self.n_particles, f"{what}: particles_idx_local") + self.particle_start

    def _read(self, name, envs_idx, particles_idx_local=None, what="get"):
        rows = self._rows(particles_idx_local, what)
        return self.solver.state.get_rows(name, self.solver.frame, self._envs_idx(envs_idx), (rows,))

    def _write(self, name, value, envs_idx, particles_idx_local, what):
        envs = self._envs_idx(envs_idx)
        rows = self._rows(particles_idx_local, what)
        self.solver.state.set_rows(name, self.solver.frame, value, envs, (rows,), what=what)

    # -- getters ---------------------------------------------------------------------------------------------------

    def get_particles_pos(self, envs_idx=None, particles_idx_local=None):
        return self._read("pos", envs_idx, particles_idx_local, "get_particles_pos")

    def get_particles(self, envs_idx=None, particles_idx_local=None):
        """Genesis World's name for get_particles_pos."""
        return self.get_particles_pos(envs_idx, particles_idx_local)

    def get_particles_vel(self, envs_idx=None, particles_idx_local=None):
        return self._read("vel", envs_idx, particles_idx_local, "get_particles_vel")

    def get_particles_active(self, envs_idx=None, particles_idx_local=None):
        """1 where a particle is simulated, 0 where it is frozen (int32)."""
        return self._read("active", envs_idx, particles_idx_local, "get_particles_active")

    def get_mass(self, envs_idx=None) -> torch.Tensor:
        """The entity's total mass, kg (every particle, active or not), one per environment as Genesis World's
        particle entities give it: `([n_envs,])`, or `(len(envs_idx),)` for the environments `envs_idx`."""
        envs = self._envs_idx(envs_idx)
        total = self.solver.p_mass[self._range].sum()
        if not self.scene.n_envs:
            return total.clone()
        return total.expand(self.scene.n_envs if envs is None else len(envs)).clone()

    def _com_weights(self, active):
        """Per-particle weights of the centre of mass: the masses of the active particles, or of every particle
        in an environment where none is active."""
        w = self.solver.p_mass[self._range] * active
        none = w.sum(-1, keepdim=True) == 0
        return torch.where(none, self.solver.p_mass[self._range].expand_as(w), w)

    def get_pos(self, envs_idx=None):
        """Centre of mass of the entity's active particles (of all of them where none is active), `([n_envs,] 3)`."""
        pos = self.get_particles_pos(envs_idx)
        w = self._com_weights(self._read("active", envs_idx))
        return (pos * w.unsqueeze(-1)).sum(-2) / w.sum(-1, keepdim=True)

    def find_closest_particle(self, pos, envs_idx=None):
        """The local index of the entity's particle closest to `pos` (`(3,)`, or `([n_envs,] 3)` one point per
        environment): an int64 tensor `([n_envs,])`. Every particle counts, active or not; ties go to the lowest
        index."""
        envs = self._envs_idx(envs_idx)
        x = self.solver.state.get_rows("pos", self.solver.frame, envs, (self._range,)).detach()
        point = to_tensor(pos, x.dtype, x.device, "find_closest_particle(pos=...)").detach()
        if point.shape[-1:] != (3,) or point.ndim > 2 or (point.ndim == 2 and not self.scene.n_envs):
            raise OptionError(f"find_closest_particle: pos must be (3,) or ([n_envs,] 3), got {tuple(point.shape)}.")
        if not torch.isfinite(point).all():
            raise OptionError("find_closest_particle: pos must be finite.")
        if self.scene.n_envs and point.ndim == 2 and point.shape[0] != x.shape[0]:
            raise OptionError(f"find_closest_particle: expected {x.shape[0]} points, got {point.shape[0]}.")
        d2 = ((x - point.unsqueeze(-2)) ** 2).sum(-1)
        return torch.argmin(d2, dim=-1)  # the first minimum

    # -- setters ---------------------------------------------------------------------------------------------------

    def set_particles_pos(self, pos, particles_idx_local=None, envs_idx=None):
        """Positions `([n_envs,] n, 3)` of the particles `particles_idx_local` (None: all); every one must lie
        inside the solver's domain."""
        self._write("pos", pos, envs_idx, particles_idx_local, "set_particles_pos")

    def set_particles_vel(self, vel, particles_idx_local=None, envs_idx=None):
        self._write("vel", vel, envs_idx, particles_idx_local, "set_particles_vel")

    def set_particles_active(self, active, particles_idx_local=None, envs_idx=None):
        """1 (or True): simulated; 0 (or False): frozen, keeping its state."""
        if isinstance(active, (bool, np.bool_)) or (isinstance(active, (list, tuple)) and active
                                                     and all(isinstance(a, (bool, np.bool_)) for a in active)):
            active = np.asarray(active, dtype=np.int32)
        elif isinstance(active, np.ndarray) and active.dtype == np.bool_:
            active = active.astype(np.int32)
        elif torch.is_tensor(active) and active.dtype == torch.bool:
            active = active.to(torch.int32)
        self._write("active", active, envs_idx, particles_idx_local, "set_particles_active")

    def _one_per_env(self, x, envs_idx, what):
        """Whether a `[..., 3]` value is one vector (`(3,)`, or `(n_envs, 3)` one per environment) rather than
        per-particle rows `([n_envs,] n_particles, 3)`; anything else raises, naming both forms."""
        n_envs = self.scene.n_envs
        n_sel = (n_envs if envs_idx is None else len(self._envs_idx(envs_idx))) if n_envs else 0
        n = self.n_particles
        if x.shape == (3,):
            return True
        if x.ndim == 2 and x.shape[1] == 3:
            if n_envs and x.shape[0] == n_sel and x.shape[0] != n:
                return True
            if x.shape[0] == n:
                return False  # per particle (the same in every environment)
            if n_envs and x.shape[0] == n_sel:
                return True
        if x.ndim == 3 and x.shape[1:] == (n, 3) and n_envs:
            return False
        want = f"(3,), ({n_sel}, 3), ({n}, 3) or ({n_sel}, {n}, 3)" if n_envs else f"(3,) or ({n}, 3)"
        raise OptionError(f"{what}: expected a value of shape {want}, got {tuple(x.shape)}.")

    def set_position(self, pos, envs_idx=None):
        """Move the entity: `pos` is particle positions (`([n_envs,] n_particles, 3)`), or a point (`(3,)`, or
        `(n_envs, 3)` one per environment) where its centre of mass (as `get_pos` computes it) goes, the particles
        keeping their offsets."""
        x = to_tensor(pos, self.solver.float_dtype, self.solver.device, "set_position")
        if self._one_per_env(x, envs_idx, "set_position"):
            envs = self._envs_idx(envs_idx)
            current = self.solver.state.get_rows("pos", self.solver.frame, envs, (self._range,)).detach()
            w = self._com_weights(self.solver.state.get_rows("active", self.solver.frame, envs, (self._range,)))
            com = (current * w.unsqueeze(-1)).sum(-2) / w.sum(-1, keepdim=True)
            x = current - com.unsqueeze(-2) + x.unsqueeze(-2)
        self._write("pos", x, envs_idx, None, "set_position")

    def set_velocity(self, vel, envs_idx=None):
        """Velocities `([n_envs,] n_particles, 3)`, or one velocity (`(3,)`, or `(n_envs, 3)` one per environment)
        for every particle."""
        x = to_tensor(vel, self.solver.float_dtype, self.solver.device, "set_velocity")
        if self._one_per_env(x, envs_idx, "set_velocity"):
            x = x.unsqueeze(-2)
        self._write("vel", x, envs_idx, None, "set_velocity")

    def set_active(self, active, envs_idx=None):
        """Every particle of the entity simulated (True) or frozen (False)."""
        if not isinstance(active, (bool, int, np.bool_, np.integer)) or active not in (0, 1):
            raise OptionError(f"set_active: expected True or False, got {active!r}.")
        self._write("active", int(active), envs_idx, None, "set_active")

    def activate(self, envs_idx=None):
        self.set_active(True, envs_idx)

    def deactivate(self, envs_idx=None):
        """Inactive particles keep their state and take no part in the simulation until activated."""
        self.set_active(False, envs_idx)

    # MPM's former name for set_particles_pos over every particle
    def set_pos(self, pos, envs_idx=None):
        self._write("pos", pos, envs_idx, None, "set_pos")


class ElasticParams:
    """Young's modulus and Poisson's ratio per entity and environment, as the solver's state fields `E` and `nu`
    (`("n_entities",)`, frameless, differentiable): MPM's and FEM's `get_material_params` / `set_material_params`.
    For a ParticleEntity (its `_material_index` is its column)."""

    def get_material_params(self, envs_idx=None):
        """(E, nu): Young's modulus (Pa) and Poisson's ratio, each `([n_envs,])`."""
        envs = self._envs_idx(envs_idx)
        st, item = self.solver.state, (self._material_index,)
        return st.get_rows("E", self.solver.frame, envs, item), st.get_rows("nu", self.solver.frame, envs, item)

    def set_material_params(self, E=None, nu=None, envs_idx=None):
        """Young's modulus E (Pa, > 0) and Poisson's ratio nu (in [0, 0.5)): a number, or one per environment
        `([n_envs,])`. They hold from the next substep on; in differentiable mode a tensor that requires grad
        receives dL/dE, dL/dnu. The material's other parameters derived from them (the ElastoPlastic yield
        strain, the Liquid bulk modulus) follow."""
        envs = self._envs_idx(envs_idx)
        checks = (("E", E, lambda x: x > 0, "positive"), ("nu", nu, lambda x: (x >= 0) & (x < 0.5), "in [0, 0.5)"))
        values = {}
        for name, value, ok, what in checks:
            if value is None:
                continue
            if isinstance(value, bool) or not (torch.is_tensor(value) or isinstance(value, (int, float, list, tuple))):
                raise OptionError(f"set_material_params: {name} must be a number or a tensor, got "
                                     f"{type(value).__name__}.")
            x = to_tensor(value, self.solver.float_dtype, self.solver.device, f"set_material_params({name}=...)")
            if x.dtype == torch.bool or x.is_complex():
                raise OptionError(f"set_material_params: {name} must be real numbers.")
            x = x.to(self.solver.float_dtype)
            want = (self.scene.n_envs if envs is None else len(envs),) if self.scene.n_envs else ()
            try:
                fits = torch.broadcast_shapes(x.shape, want) == want
            except RuntimeError:
                fits = False
            if not fits:
                raise OptionError(f"set_material_params: {name} must be a number or shaped {want}, got "
                                     f"{tuple(x.shape)}.")
            plain = x.detach()
            if not torch.isfinite(plain).all() or not bool(ok(plain).all()):
                raise OptionError(f"set_material_params: {name}={plain.tolist()} is not accepted: expected "
                                     f"{what}.")
            values[name] = x
        for name, x in values.items():
            self.solver.state.set_rows(name, self.solver.frame, x, envs, (self._material_index,),
                                       what=f"set_material_params({name}=...)")


class Muscles:
    """Muscle groups, fibres and actuation of a soft entity, Genesis World's `set_muscle` / `set_actuation`: MPM's
    and FEM's muscles. The muscle's units (MPM: its particles; FEM: its elements) are the rows `_muscle_rows` (a
    slice) of the solver's frameless state fields `actu` (`("n_<units>",)`, differentiable: each unit's actuation)
    and `mdir` (`("n_<units>", 3)`: each unit's unit fibre direction in the rest shape; `set_muscle` writes it into
    the registered initial state as well, so that a bare `scene.reset()` keeps the fibres, as Genesis World's
    does). The groups are a map kept on the host, from which group each unit takes its actuation
    (`set_actuation`); all units start in group 0.
    The material gives `n_groups` and `muscle_stiffness` (0 for a material that is not a muscle)."""

    _muscle_unit_name = "units"
    _muscle_group = None  # (n_units,) int64, on the host; None: every unit in group 0

    @property
    def _muscle_rows(self) -> slice:
        raise NotImplementedError

    @property
    def _n_muscle_units(self) -> int:
        rows = self._muscle_rows
        return rows.stop - rows.start

    def _require_muscle(self, what):
        if not getattr(self.material, "muscle_stiffness", 0.0):
            raise OptionError(f"{what}: entity {self.idx} is made of {type(self.material).__name__}, not a muscle "
                              "material (gs.materials.MPM.Muscle, gs.materials.FEM.Muscle).")

    def get_muscle_group(self) -> torch.Tensor:
        """`(n_units,)` int32: each unit's muscle group."""
        self._require_muscle("get_muscle_group")
        g = self._muscle_group if self._muscle_group is not None else np.zeros(self._n_muscle_units, np.int64)
        return torch.as_tensor(g, dtype=torch.int32, device=self.solver.device).clone()

    def get_muscle_direction(self, envs_idx=None) -> torch.Tensor:
        """`([n_envs,] n_units, 3)`: each unit's fibre direction."""
        self._require_muscle("get_muscle_direction")
        return self.solver.state.get_rows("mdir", self.solver.frame, self._envs_idx(envs_idx), (self._muscle_rows,))

    def get_actuation(self, envs_idx=None) -> torch.Tensor:
        """`([n_envs,] n_units)`: each unit's actuation (its group's)."""
        self._require_muscle("get_actuation")
        return self.solver.state.get_rows("actu", self.solver.frame, self._envs_idx(envs_idx), (self._muscle_rows,))

    def set_actuation(self, actu, envs_idx=None):
        """The muscle groups' actuation (dimensionless; > 0 contracts the fibres), held until set again: a number
        (every group), `(n_groups,)` (every environment of envs_idx), or `(len(envs_idx) or n_envs, n_groups)`.
        Each unit takes its group's value. In differentiable mode a tensor that requires grad receives dL/dactu."""
        self._require_muscle("set_actuation")
        n_groups = self.material.n_groups
        x = to_tensor(actu, self.solver.float_dtype, self.solver.device, "set_actuation")
        envs = self._envs_idx(envs_idx)
        n_sel = (self.scene.n_envs if envs is None else len(envs)) if self.scene.n_envs else 0
        if x.ndim == 0:
            x = x.expand(n_groups)
        if x.shape == (n_groups,):
            x = x.expand(n_sel, n_groups) if n_sel else x
        elif not (n_sel and x.shape == (n_sel, n_groups)):
            want = f"(), ({n_groups},)" + (f" or ({n_sel}, {n_groups})" if n_sel else "")
            raise OptionError(f"set_actuation: expected a value of shape {want} (n_groups = {n_groups}), got "
                              f"{tuple(x.shape)}.")
        bad = ~torch.isfinite(x.detach())
        if bad.any():  # (a group that no unit belongs to too: the per-unit rows would not show it)
            *env, group = bad.nonzero()[0].tolist()
            where = (f"env {int(envs[env[0]]) if envs is not None else env[0]}, " if env else "") + f"group {group}"
            raise OptionError(f"set_actuation: actuation[{where}] = {float(x.detach()[tuple(env + [group])])!r} is "
                              "not accepted: expected a finite value. Nothing was changed.")
        groups = self.get_muscle_group().to(device=x.device, dtype=torch.long)
        self.solver.state.set_rows("actu", self.solver.frame, x[..., groups], envs, (self._muscle_rows,),
                                   what="set_actuation")

    def set_muscle(self, muscle_group=None, muscle_direction=None, envs_idx=None):
        """muscle_group: `(n_units,)` integers in [0, n_groups), or one for every unit (the map set_actuation uses
        from its next call on); muscle_direction: unit vectors, `(3,)` for every unit, `(n_units, 3)`, or
        `(len(envs_idx) or n_envs, n_units, 3)` (state, per environment). Both are checked before either is
        written."""
        self._require_muscle("set_muscle")
        group = None if muscle_group is None else self._check_muscle_group(muscle_group, "set_muscle")
        if muscle_direction is not None:
            self._write_muscle_direction(muscle_direction, envs_idx, "set_muscle")
        if group is not None:
            self._muscle_group = group

    def set_muscle_group(self, muscle_group):
        """Genesis World's name: `set_muscle(muscle_group=...)`."""
        self._require_muscle("set_muscle_group")
        self._muscle_group = self._check_muscle_group(muscle_group, "set_muscle_group")

    def set_muscle_direction(self, muscle_direction, envs_idx=None):
        """Genesis World's name: `set_muscle(muscle_direction=...)`."""
        self._require_muscle("set_muscle_direction")
        self._write_muscle_direction(muscle_direction, envs_idx, "set_muscle_direction")

    def _check_muscle_group(self, muscle_group, what) -> np.ndarray:
        n, n_groups = self._n_muscle_units, self.material.n_groups
        g = to_tensor(muscle_group, torch.int64, "cpu", f"{what}: muscle_group").numpy()
        if g.ndim == 0:
            g = np.full(n, int(g))
        if g.shape != (n,):
            raise OptionError(f"{what}: muscle_group must be ({n},) integers (one per {self._muscle_unit_name[:-1]}) "
                              f"or one integer, got shape {g.shape}.")
        if g.size and (g.min() < 0 or g.max() >= n_groups):
            bad = int(np.nonzero((g < 0) | (g >= n_groups))[0][0])
            raise OptionError(f"{what}: muscle_group[{bad}] = {int(g[bad])} is not accepted: expected a group in "
                              f"[0, {n_groups}) (the material's n_groups). Nothing was changed.")
        return g.astype(np.int64)

    def _write_muscle_direction(self, muscle_direction, envs_idx, what):
        n = self._n_muscle_units
        d = to_tensor(muscle_direction, self.solver.float_dtype, self.solver.device, f"{what}: muscle_direction")
        envs = self._envs_idx(envs_idx)
        n_sel = (self.scene.n_envs if envs is None else len(envs)) if self.scene.n_envs else 0
        shapes = [(3,), (n, 3)] + ([(n_sel, n, 3)] if n_sel else [])
        if tuple(d.shape) not in shapes:
            raise OptionError(f"{what}: muscle_direction must be shaped {' or '.join(map(str, shapes))}, got "
                              f"{tuple(d.shape)}.")
        norm = d.detach().double().norm(dim=-1)
        bad = ~(torch.isfinite(norm) & ((norm - 1).abs() <= 1e-4))
        if bad.any():
            where = bad.nonzero()[0].tolist()
            raise OptionError(f"{what}: muscle_direction{where} has norm {float(norm[tuple(where)])!r}: expected unit "
                              "vectors (norm within 1e-4 of 1). Nothing was changed.")
        self.solver.state.set_rows("mdir", self.solver.frame, d, envs, (self._muscle_rows,),
                                   what=f"{what}(muscle_direction=...)")
        # the fibres are part of the body: a bare scene.reset() keeps them (as Genesis World's reset does), so
        # the registered initial state takes them too
        init = self.scene._init_state
        if init is not None:
            sub = init.solvers_state[self.scene.solvers.index(self.solver)]
            live = self.solver.state.at("mdir", self.solver.frame)
            rows = slice(None) if envs is None else envs
            if self.scene.n_envs:
                sub.mdir[rows, self._muscle_rows] = live[rows, self._muscle_rows].to(sub.mdir.device)
            else:
                sub.mdir[self._muscle_rows] = live[0, self._muscle_rows].to(sub.mdir.device)
