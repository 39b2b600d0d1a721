"""Particle emitters (Genesis World's `scene.add_emitter`): a particle entity of `max_particles` particles that start
inactive (`gs.morphs.Nowhere`), which `emit` places as droplets leaving a nozzle and activates, recycling the oldest
once all have been used.

An emitter's progress is state: the next particle to place and the droplet length carried over from steps too short
to emit one, per environment (`EmitterManager`'s fields `next` and `carry`), so snapshots, `reset(state, envs_idx)`
and checkpoints resume emission where it was. Every environment is emitted into alike (as in Genesis World); where
environments have been reset to different progress, each is emitted from its own.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from . import morphs
from ._runtime import runtime
from .errors import OptionError
from .particles import sampling
from .rotations import axis_angle, frame_from_z, quat_mul, quat_to_mat
from .solver import SolverBase
from .state import FieldSpec

SHAPES = ("circle", "sphere", "square", "rectangle")


class Emitter:
    """Made by `scene.add_emitter`; `emit` / `emit_omni` place and activate particles before a step."""

    def __init__(self, manager, index, max_particles):
        self._manager, self._index, self.max_particles = manager, index, int(max_particles)
        self.entity = None

    def _progress(self):
        st = self._manager.state
        return st.at("next", None)[..., self._index], st.at("carry", None)[..., self._index]

    def reset(self, envs_idx=None):
        """Emit from the first particle again (the placed ones stay where they are)."""
        self._manager._require_built("Emitter.reset")
        rows = self._manager._envs(envs_idx, "Emitter.reset")
        nxt, carry = self._progress()
        nxt.view(-1)[rows] = 0
        carry.view(-1)[rows] = 0.0

    def emit(self, droplet_shape, droplet_size, droplet_length=None, pos=(0.5, 0.5, 1.0), direction=(0, 0, -1),
             theta=0.0, speed=1.0, p_size=None):
        """A droplet of `droplet_shape` ("circle": a cylinder of diameter droplet_size; "sphere": a ball of that
        diameter, which ignores the length; "square": droplet_size wide; "rectangle": droplet_size = (width,
        height)) and `droplet_length` along `direction` (None: speed * dt plus what earlier steps carried, emitted
        once it reaches a particle's size), centred on the nozzle `pos`, turned by `theta` (rad) about the
        direction, its particles on the solver's lattice of `p_size` (default: the entity's particle size), moving
        at `speed` (m/s) along the direction."""
        self._manager._require_built("Emitter.emit")
        if droplet_shape not in SHAPES:
            raise OptionError(f"Emitter.emit: droplet_shape={droplet_shape!r} is not one of {SHAPES}.")
        if droplet_shape == "rectangle":
            size = _numbers(droplet_size, 2, "droplet_size", "(width, height) in m, > 0")
        else:
            size = _numbers([droplet_size], 1, "droplet_size", "a diameter or width in m, > 0")
        direction = _numbers(direction, 3, "direction", "a non-zero 3-vector", positive=False)
        if np.linalg.norm(direction) < 1e-9:
            raise OptionError(f"Emitter.emit: direction={tuple(direction)} is not accepted: expected a non-zero "
                              "vector.")
        direction = direction / np.linalg.norm(direction)
        pos = _numbers(pos, 3, "pos", "a finite 3-vector", positive=False)
        speed = _numbers([speed], 1, "speed", "a finite number", positive=False)[0]
        theta = _numbers([theta], 1, "theta", "a finite angle in rad", positive=False)[0]
        p = self._particle_size(p_size)
        if droplet_length is not None:
            droplet_length = _numbers([droplet_length], 1, "droplet_length", "a length in m, >= 0",
                                      positive=False)[0]
            if droplet_length < 0:
                raise OptionError(f"Emitter.emit: droplet_length={droplet_length} is not accepted: expected >= 0.")
        rot = quat_to_mat(quat_mul(frame_from_z(direction), axis_angle(np.array([0.0, 0.0, 1.0]), theta)))
        dt = self._manager.scene.sim_options.dt

        def droplet(length, start):
            if droplet_shape == "circle":
                shape = morphs.Cylinder(radius=size[0] / 2, height=length)
            elif droplet_shape == "sphere":
                shape = morphs.Sphere(radius=size[0] / 2)
            else:
                w, h = (size[0], size[0]) if droplet_shape == "square" else size
                shape = morphs.Box(size=(w, h, length))
            return self._sample(shape, p, start) @ rot.T + pos

        self._place(lambda carry: (droplet_length, 0.0) if droplet_length is not None else
                    ((speed * dt + carry, 0.0) if speed * dt + carry >= p else (0.0, speed * dt + carry)),
                    droplet, direction * speed, None)

    def emit_omni(self, source_radius=0.1, pos=(0.5, 0.5, 1.0), speed=1.0, particle_size=None):
        """Particles on the lattice of `particle_size` filling a shell of radii 0.4 and 1 times source_radius
        about `pos`, each moving radially outward at `speed`."""
        self._manager._require_built("Emitter.emit_omni")
        r = _numbers([source_radius], 1, "source_radius", "a radius in m, > 0")[0]
        pos = _numbers(pos, 3, "pos", "a finite 3-vector", positive=False)
        speed = _numbers([speed], 1, "speed", "a finite number", positive=False)[0]
        p = self._particle_size(particle_size)
        ball = self._sample(morphs.Sphere(radius=r), p, 0)
        shell = ball[np.linalg.norm(ball, axis=1) >= 0.4 * r]
        dist = np.linalg.norm(shell, axis=1, keepdims=True)
        self._place(lambda carry: (1.0, 0.0), lambda length, start: shell + pos, None,
                    speed * shell / np.maximum(dist, 1e-12))

    # -- internals ---------------------------------------------------------------------------------------------------

    def _sample(self, shape, p, start):
        """The droplet's particles, filled as the entity's material fills a morph ("regular" or "random": seeded by
        gs.init's seed, the emitter and the environment's next particle `start`, so a restored state emits the
        same droplet)."""
        sampler = getattr(self.entity.material, "sampler", "regular")
        seed = ((runtime.seed or 0) * 1_000_003 + 7919 * self._index + start) % 2 ** 32
        return sampling.sample(shape, p, sampler, seed)

    def _particle_size(self, value):
        if value is None:
            return self.entity.solver.particle_size
        return _numbers([value], 1, "particle size", "a size in m, > 0")[0]

    def _place(self, length_of, positions_of, vel, vels):
        """Place a droplet in every environment: its length from the carried length (length_of(carry) -> (length,
        new carry)), its particles from positions_of(length, next particle), then activate them from each environment's next
        particle; environments at the same progress are placed together."""
        nxt, carry = self._progress()
        nxt_rows, carry_rows = nxt.reshape(-1), carry.reshape(-1)
        groups = {}
        for b in range(nxt_rows.shape[0]):
            groups.setdefault((int(nxt_rows[b]), float(carry_rows[b])), []).append(b)
        batched = self._manager.n_envs > 0
        for (start, c), rows in groups.items():
            length, new_carry = length_of(c)
            pts = positions_of(length, start) if length > 0 else np.zeros((0, 3))
            n = len(pts)
            if n > self.max_particles:
                raise OptionError(f"Emitter.emit: the droplet holds {n} particles, more than the emitter's "
                                  f"max_particles={self.max_particles}; give add_emitter more.")
            if n:
                if start + n > self.max_particles:
                    start = 0
                idx = torch.arange(start, start + n)
                envs = rows if batched else None
                v = np.broadcast_to(vel, pts.shape) if vels is None else vels
                self.entity.set_particles_pos(_per_env(pts, envs), idx, envs_idx=envs)
                self.entity.set_particles_vel(_per_env(np.ascontiguousarray(v), envs), idx, envs_idx=envs)
                self.entity.set_particles_active(_per_env(np.ones(n, dtype=np.int64), envs), idx, envs_idx=envs)
                start += n
                if start + n > self.max_particles:  # (Genesis World recycles when the next would not fit)
                    start = 0
            r = torch.as_tensor(rows)
            nxt_rows[r] = start
            carry_rows[r] = new_carry


def _per_env(x, envs):
    x = torch.as_tensor(np.ascontiguousarray(x))
    return x if envs is None else x.expand(len(envs), *x.shape)


def _numbers(value, n, name, expect, positive=True):
    try:
        a = np.asarray(value, dtype=np.float64).reshape(-1)
    except (TypeError, ValueError):
        a = None
    if a is None or a.shape != (n,) or not np.isfinite(a).all() or (positive and (a <= 0).any()):
        raise OptionError(f"Emitter: {name}={value!r} is not accepted: expected {expect}.")
    return a


class EmitterManager(SolverBase):
    """The emitters of a scene and their progress (see the module's docstring); active with emitters."""

    short_name = "emitter"
    order = 2**31 - 2  # after every physics solver, before the force fields and the sensors
    state_fields = (
        FieldSpec("next", ("n_emitters",), dtype="int", frames=False,
                  doc="the next particle (the emitter entity's local index) each emitter places"),
        FieldSpec("carry", ("n_emitters",), frames=False,
                  doc="droplet length (m) carried over from steps too short to emit a particle's size"),
    )

    def __init__(self, scene, sim_options, options=None):
        super().__init__(scene, sim_options, options)
        self.emitters = []

    @property
    def is_active(self) -> bool:
        return bool(self.emitters)

    def add(self, entity, max_particles):
        em = Emitter(self, len(self.emitters), max_particles)
        em.entity = entity
        self.emitters.append(em)
        return em

    def state_dims(self):
        return {"n_emitters": len(self.emitters)}

    def build(self, n_envs, n_frames):
        super().build(n_envs, n_frames)
        self.state.rules = self._rules

    def init_state(self, f):
        pass  # (zeros: every emitter at its first particle)

    def _rules(self, rows):
        """Each emitter's next particle inside its entity, its carried length finite and >= 0."""
        nxt, carry = rows.get("next"), rows.get("carry")
        for k, em in enumerate(self.emitters):
            if nxt is not None:
                bad = (nxt[:, k] < 0) | (nxt[:, k] >= em.max_particles)
                if bad.any():
                    r = int(bad.nonzero()[0, 0])
                    return ("next", r, (k,), int(nxt[r, k]), f"a particle index in [0, {em.max_particles})")
            if carry is not None:
                c = carry[:, k].detach().double()
                bad = ~(torch.isfinite(c) & (c >= 0))
                if bad.any():
                    r = int(bad.nonzero()[0, 0])
                    return ("carry", r, (k,), float(c[r]), "a finite length >= 0")
        return None

    def signature(self) -> dict:
        return {"options": None, "entities": [], "emitters": [em.max_particles for em in self.emitters]}

    def _require_built(self, what):
        if not self.scene.is_built:
            raise OptionError(f"{what}: build the scene first (scene.build()).")

    def _envs(self, envs_idx, what):
        n = max(self.n_envs, 1)
        if envs_idx is None:
            return torch.arange(n)
        idx = torch.as_tensor(envs_idx).reshape(-1).long()
        if (idx < 0).any() or (idx >= n).any():
            raise OptionError(f"{what}: envs_idx {idx.tolist()} outside [0, {n}).")
        return idx
