"""Genesis World's force fields (`gs.force_fields.Constant`, `Wind`, `Point`, `Drag`, `Noise`, `Vortex`,
`Turbulence`, `Custom`), for `scene.add_force_field(ff)` before build.

As in Genesis World a field gives an acceleration (m/s^2), not a force, and is created inactive: `ff.activate()`
switches it on. Here it acts on every particle solver's particles and on the rigid links (mass times acceleration at
each link's centre of mass), per environment: the active flag and the parameters are state
(genesis_core.force_fields.manager), part of snapshots, resets and checkpoints (docs/force-fields.md).
"""

from __future__ import annotations

import math
from numbers import Integral, Real

import numpy as np
import torch

from ..errors import OptionError, SceneError
from . import kernels as K


def _number(cls, name, value, lo=None, lo_open=False, allow_inf=False):
    ok = isinstance(value, (Real, np.floating, np.integer)) and not isinstance(value, (bool, np.bool_))
    if ok:
        value = float(value)
        ok = not math.isnan(value) and (allow_inf or math.isfinite(value))
        if ok and lo is not None:
            ok = value > lo if lo_open else value >= lo
    if not ok:
        expect = "a finite number" if lo is None else f"a finite number {'>' if lo_open else '>='} {lo}"
        raise OptionError(f"gs.force_fields.{cls}({name}={value!r}) is not accepted: expected {expect}.")
    return value


def _vector(cls, name, value, unit=False):
    try:
        arr = np.asarray(value.detach().cpu() if torch.is_tensor(value) else value, dtype=np.float64)
    except (TypeError, ValueError):
        arr = None
    if arr is None or arr.shape != (3,) or not np.isfinite(arr).all() or (unit and not np.linalg.norm(arr) > 0):
        expect = "3 finite numbers" + (", not all zero" if unit else "")
        raise OptionError(f"gs.force_fields.{cls}({name}={value!r}) is not accepted: expected {expect} "
                          "(shape (3,)).")
    return arr / np.linalg.norm(arr) if unit else arr


class ForceField:
    """Base of the force fields: an acceleration field (m/s^2) over positions, velocities and time. Created
    inactive (as in Genesis World): `activate()` and `deactivate()` switch it, in every environment or in
    `envs_idx` only once the scene is built. Not used directly."""

    kind: int = -1

    def __init__(self):
        self._active0 = False  # the state of every environment at build
        self._params = np.zeros(K.N_PARAMS)
        self._manager = None  # the scene's ForceFieldManager once added
        self._index = -1  # the field's row in the manager's tables

    @property
    def scene(self):
        return None if self._manager is None else self._manager.scene

    def _set_active(self, value: int, envs_idx, what):
        m = self._manager
        if m is None or not m.scene.is_built:
            if envs_idx is not None:
                raise SceneError(f"{type(self).__name__}.{what}(envs_idx=...) before the scene is built: the "
                                 "environments exist after scene.build(); call it without envs_idx to set every "
                                 "environment's starting state.")
            self._active0 = bool(value)
            return
        m.set_active(self, value, envs_idx, what)

    def activate(self, envs_idx=None):
        """Switch the field on, in every environment or only in `envs_idx` (after build), from the next substep."""
        self._set_active(1, envs_idx, "activate")

    def deactivate(self, envs_idx=None):
        """Switch the field off, in every environment or only in `envs_idx` (after build), from the next substep."""
        self._set_active(0, envs_idx, "deactivate")

    @property
    def active(self):
        """Whether the field acts: a bool before build and on a scene without environments, else a bool tensor
        [n_envs], one entry per environment."""
        m = self._manager
        if m is None or not m.scene.is_built:
            return self._active0
        return m.get_active(self)

    def as_dict(self) -> dict:
        """What a checkpoint must match: the kind and the construction parameters (plain values)."""
        return {"kind": type(self).__name__, "params": [float(x) for x in self._params], **self._extra_signature()}

    def _extra_signature(self) -> dict:
        return {}

    def __repr__(self):
        return f"<gs.force_fields.{type(self).__name__} {'active' if self._active0 else 'inactive'} at build>"


class Constant(ForceField):
    """The same acceleration everywhere: `strength` (m/s^2) along `direction` (normalised)."""

    kind = K.CONSTANT

    def __init__(self, direction=(1, 0, 0), strength=1.0):
        super().__init__()
        self._direction = _vector("Constant", "direction", direction, unit=True)
        self._strength = _number("Constant", "strength", strength)
        self._params[K.P_DIR:K.P_DIR + 3] = self._direction
        self._params[K.P_STRENGTH] = self._strength

    @property
    def direction(self):
        return self._direction

    @property
    def strength(self):
        return self._strength


class Wind(ForceField):
    """`strength` (m/s^2) along `direction` (normalised) inside the infinite cylinder of `radius` (m) about the line
    through `center` along `direction`; zero outside."""

    kind = K.WIND

    def __init__(self, direction=(1, 0, 0), strength=1.0, radius=1, center=(0, 0, 0)):
        super().__init__()
        self._direction = _vector("Wind", "direction", direction, unit=True)
        self._center = _vector("Wind", "center", center)
        self._strength = _number("Wind", "strength", strength)
        self._radius = _number("Wind", "radius", radius, lo=0.0)
        p = self._params
        p[K.P_DIR:K.P_DIR + 3], p[K.P_CENTER:K.P_CENTER + 3] = self._direction, self._center
        p[K.P_STRENGTH], p[K.P_RADIUS] = self._strength, self._radius

    direction = Constant.direction
    strength = Constant.strength

    @property
    def radius(self):
        return self._radius

    @property
    def center(self):
        return self._center


class Point(ForceField):
    """Along the line from `position` to the point (r its distance): a = (s d + flow (s d - v)) / (r + 1)^falloff_pow
    with d = (x - position) / r and s = `strength` (m/s^2). As Genesis World's code (its docstring says the
    opposite), a positive strength pushes away from `position`, a negative one pulls toward it; `flow` (1/s) also
    pulls the velocity toward s d (Genesis World's default, 1.0)."""

    kind = K.POINT

    def __init__(self, strength=1.0, position=(0, 0, 0), falloff_pow=0.0, flow=1.0):
        super().__init__()
        self._strength = _number("Point", "strength", strength)
        self._position = _vector("Point", "position", position)
        self._falloff_pow = _number("Point", "falloff_pow", falloff_pow)
        self._flow = _number("Point", "flow", flow)
        p = self._params
        p[K.P_CENTER:K.P_CENTER + 3], p[K.P_STRENGTH] = self._position, self._strength
        p[K.P_FALLOFF_POW], p[K.P_FLOW] = self._falloff_pow, self._flow

    strength = Constant.strength

    @property
    def position(self):
        return self._position

    @property
    def falloff_pow(self):
        return self._falloff_pow

    @property
    def flow(self):
        return self._flow


class Drag(ForceField):
    """Against the velocity: a = -linear v - quadratic |v| v (linear 1/s, quadratic 1/m)."""

    kind = K.DRAG

    def __init__(self, linear=0.0, quadratic=0.0):
        super().__init__()
        self._linear = _number("Drag", "linear", linear, lo=0.0)
        self._quadratic = _number("Drag", "quadratic", quadratic, lo=0.0)
        self._params[K.P_LINEAR], self._params[K.P_QUADRATIC] = self._linear, self._quadratic

    @property
    def linear(self):
        return self._linear

    @property
    def quadratic(self):
        return self._quadratic


class Noise(ForceField):
    """Random accelerations, each axis uniform in [-strength, strength] (m/s^2), drawn anew for every point,
    environment and substep. Unlike Genesis World's (Taichi's unseeded generator), a draw is a hash of (seed,
    substep, environment, point, axis): the same on every run and after every restore. seed: an int in
    [0, 2**31); None takes gs.init's seed and the field's position among the scene's fields."""

    kind = K.NOISE

    def __init__(self, strength=1.0, seed=None):
        super().__init__()
        self._strength = _number("Noise", "strength", strength)
        self._seed = _seed("Noise", seed)
        self._params[K.P_STRENGTH] = self._strength

    strength = Constant.strength

    @property
    def seed(self):
        return self._seed

    def _extra_signature(self):
        return {"seed": self._seed}


class Vortex(ForceField):
    """A swirl about the axis through `center` along `direction` (Genesis World's: the z axis, whatever
    `direction`; here `direction` is the axis, the same field for the default (0, 0, 1)). With rel the offset from
    the axis and r its length: a = falloff(r) (strength_perpendicular (d x rel) - strength_radial rel) - damping v,
    falloff 1 below falloff_min (m), 1 / (r - falloff_min + 1)^falloff_pow up to falloff_max (m), 0 beyond.
    Positive strength_perpendicular turns counterclockwise about `direction`, positive strength_radial pulls
    inward (1/s^2)."""

    kind = K.VORTEX

    def __init__(self, direction=(0.0, 0.0, 1.0), center=(0.0, 0.0, 0.0), strength_perpendicular=20.0,
                 strength_radial=0.0, falloff_pow=2.0, falloff_min=0.01, falloff_max=np.inf, damping=0.0):
        super().__init__()
        cls = "Vortex"
        self._direction = _vector(cls, "direction", direction, unit=True)
        self._center = _vector(cls, "center", center)
        self._strength_perpendicular = _number(cls, "strength_perpendicular", strength_perpendicular)
        self._strength_radial = _number(cls, "strength_radial", strength_radial)
        self._falloff_pow = _number(cls, "falloff_pow", falloff_pow)
        self._falloff_min = _number(cls, "falloff_min", falloff_min, lo=0.0)
        self._falloff_max = _number(cls, "falloff_max", falloff_max, lo=self._falloff_min, allow_inf=True)
        self._damping = _number(cls, "damping", damping)
        p = self._params
        p[K.P_DIR:K.P_DIR + 3], p[K.P_CENTER:K.P_CENTER + 3] = self._direction, self._center
        p[K.P_STRENGTH], p[K.P_STRENGTH_RADIAL] = self._strength_perpendicular, self._strength_radial
        p[K.P_FALLOFF_POW], p[K.P_FALLOFF_MIN] = self._falloff_pow, self._falloff_min
        p[K.P_FALLOFF_MAX] = -1.0 if math.isinf(self._falloff_max) else self._falloff_max
        p[K.P_DAMPING] = self._damping

    direction = Constant.direction
    center = Wind.center
    falloff_pow = Point.falloff_pow

    @property
    def radius(self):
        """Genesis World's property of that name reads an attribute it never sets; here the range of the
        field, falloff_max (m)."""
        return self._falloff_max

    @property
    def strength_perpendicular(self):
        return self._strength_perpendicular

    @property
    def strength_radial(self):
        return self._strength_radial

    @property
    def falloff_min(self):
        return self._falloff_min

    @property
    def falloff_max(self):
        return self._falloff_max

    @property
    def damping(self):
        return self._damping


class Turbulence(ForceField):
    """Perlin noise (Ken Perlin's improved noise, one lattice per axis): a = strength n(frequency x), then
    a += flow (a - v). seed: None keeps the lattices unshuffled (Genesis World's None); an int seeds each axis'
    permutation with seed, seed + 1, seed + 2 (NumPy's legacy shuffle, as Genesis World): the same field as
    Genesis World's for the same seed."""

    kind = K.TURBULENCE

    def __init__(self, strength=1.0, frequency=3, flow=0.0, seed=None):
        super().__init__()
        self._strength = _number("Turbulence", "strength", strength)
        self._frequency = _number("Turbulence", "frequency", frequency, lo=0.0, lo_open=True)
        self._flow = _number("Turbulence", "flow", flow)
        self._seed = _seed("Turbulence", seed)
        p = self._params
        p[K.P_STRENGTH], p[K.P_FREQUENCY], p[K.P_FLOW] = self._strength, self._frequency, self._flow

    strength = Constant.strength
    flow = Point.flow

    @property
    def frequency(self):
        return self._frequency

    @property
    def seed(self):
        return self._seed

    def permutations(self) -> np.ndarray:
        """[3, 2 * WRAP] int32: each axis' lattice permutation, written twice (Genesis World's layout)."""
        out = np.zeros((3, 2 * K.WRAP), dtype=np.int32)
        for axis in range(3):
            perm = np.arange(K.WRAP, dtype=np.int32)
            if self._seed is not None:
                np.random.RandomState(self._seed + axis).shuffle(perm)
            out[axis] = np.concatenate([perm, perm])
        return out

    def _extra_signature(self):
        return {"seed": self._seed}


class Custom(ForceField):
    """A user's acceleration `func(pos, vel, t, i)`: a Taichi function (`@ti.func`) of the point's position and
    velocity (3-vectors, m and m/s), the time t (s) and the point's index i (a particle's index in its solver, a
    rigid link's index in the rigid solver), returning the acceleration (a 3-vector, m/s^2). It is compiled into
    the fields' kernels (once per scene), and in differentiable mode Taichi differentiates it (it must follow
    Taichi's autodiff rules: docs/differentiable.md)."""

    kind = K.CUSTOM

    def __init__(self, func):
        super().__init__()
        if not callable(func) or not getattr(func, "_is_taichi_function", False):
            raise OptionError(f"gs.force_fields.Custom(func={func!r}) is not accepted: expected a Taichi function "
                              "(a Python function decorated with @ti.func) of (pos, vel, t, i) returning a 3-vector "
                              "acceleration.")
        self.func = func

    def _extra_signature(self):
        f = self.func
        return {"func": f"{getattr(f, '__module__', '?')}.{getattr(f, '__qualname__', repr(f))}"}


def _seed(cls, seed):
    if seed is None:
        return None
    if not isinstance(seed, (Integral, np.integer)) or isinstance(seed, (bool, np.bool_)) or not 0 <= seed < 2**31:
        raise OptionError(f"gs.force_fields.{cls}(seed={seed!r}) is not accepted: expected None or an int in "
                          "[0, 2**31).")
    return int(seed)


FIELD_CLASSES = (Constant, Wind, Point, Drag, Noise, Vortex, Turbulence, Custom)
