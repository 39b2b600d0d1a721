"""The force-field manager: a solver of the core that owns a scene's force fields and their state.

It sits in `scene.solvers` just before the sensor manager and is active only when the scene has force fields, so
that the state registry applies to the fields unchanged: each field's active flag and parameters, per environment,
are declared `FieldSpec`s and take part in `scene.get_state()`, `scene.reset(state, envs_idx)`, checkpoints and
their validation like any solver's. The time a field sees is the scene's (substeps taken times the substep's dt),
which full resets and checkpoints restore; nothing else is carried from one substep to the next.

It acts in its post-coupling part of each substep f, after every physics solver's (kernels.py):

- on the particles of every active particle solver (genesis_core.particles.ParticleSolver: MPM, SPH, PBD, FEM and
  third parties' on the kit): vel[f + 1] += dt * a(pos[f], vel[f]) where the solver's `field_mask(f)` allows;
- on the bodies of every active collider that reports its bodies' masses (`ColliderView.body_inv_mass`: the rigid
  solver's links): the impulse m a(com, v) dt at each body's centre of mass after the substep, into
  `body_impulse`, which the collider applies in its next substep: each substep applies the field at the pose it
  starts from (semi-implicit, as gravity). That impulse is part of the collider's state (the rigid solver's
  links_ext_impulse), so a restored state carries it; at build, and where `activate()` / `deactivate()` switch a
  field after build, the impulse of the current pose is added (or taken back) at once, so that a field acts on
  bodies from the next substep exactly as on particles.

Its reverse (`substep_post_coupling_grad`) is Taichi's reverse of the same two kernels: in differentiable mode the
gradients flow through the fields into frame f's positions and velocities and the bodies' poses.
"""

from __future__ import annotations

import numpy as np
import torch

from .._runtime import runtime
from ..errors import OptionError
from ..launch import Launcher
from ..solver import SolverBase
from ..state import FieldSpec
from . import kernels as K
from .fields import Custom, ForceField, Turbulence

# what each kind's parameters must satisfy in the state (every way in: reset(state), checkpoints): (column, lower
# bound, open?) per kind, and whether the kind's direction is a unit vector
_LOWER = {
    K.WIND: ((K.P_RADIUS, 0.0, False),),
    K.DRAG: ((K.P_LINEAR, 0.0, False), (K.P_QUADRATIC, 0.0, False)),
    K.VORTEX: ((K.P_FALLOFF_MIN, 0.0, False),),
    K.TURBULENCE: ((K.P_FREQUENCY, 0.0, True),),
}
_UNIT_DIRECTION = (K.CONSTANT, K.WIND, K.VORTEX)
UNIT_TOL = 1e-3  # |norm - 1| accepted for a direction (as a quaternion's, genesis_core.state.QUAT_TOL)


class ForceFieldManager(SolverBase):
    """The force fields of a scene and their state (see the module's docstring). Reached as
    `scene.force_field_manager`."""

    short_name = "force_field"
    order = 2**31 - 1  # after every physics solver, before the sensor manager
    supports_grad = True
    state_fields = (
        FieldSpec("active", ("n_fields",), dtype="int", frames=False, codes=(0, 1),
                  doc="1 where the field acts in the environment (ff.activate / ff.deactivate), 0 elsewhere"),
        FieldSpec("params", ("n_fields", K.N_PARAMS), frames=False,
                  doc="each field's parameters, one column per named parameter (genesis_core.force_fields.kernels: "
                      "P_DIR, P_CENTER, P_STRENGTH, ...), SI units"),
    )

    def __init__(self, scene, sim_options, options=None):
        super().__init__(scene, sim_options, options)
        self.fields = []

    @property
    def is_active(self) -> bool:
        return bool(self.fields)

    def add_force_field(self, field):
        if not isinstance(field, ForceField) or type(field) is ForceField:
            raise OptionError(f"add_force_field: expected a gs.force_fields.* field (Constant, Wind, Point, Drag, "
                              f"Noise, Vortex, Turbulence, Custom), got {type(field).__name__}.")
        if field._manager is not None:
            raise OptionError(f"add_force_field: this {type(field).__name__} field was already added to a scene; "
                              "make one field per scene.")
        field._manager, field._index = self, len(self.fields)
        self.fields.append(field)
        return field

    # -- build -----------------------------------------------------------------------------------------------------

    def build_model(self):
        dev, n = self.device, len(self.fields)
        seeds = np.zeros(n, dtype=np.int32)
        perm = np.zeros((n, 3, 2 * K.WRAP), dtype=np.int32)
        seed0 = int(runtime.seed or 0)
        for k, ff in enumerate(self.fields):
            seed = getattr(ff, "seed", None)
            seeds[k] = ((seed0 * 1_000_003 + k) if seed is None else seed) % 2**31
            if isinstance(ff, Turbulence):
                perm[k] = ff.permutations()
        self.seeds = torch.as_tensor(seeds, device=dev)
        self.perm = torch.as_tensor(perm, device=dev)
        self.kick_particles, self.push_bodies = K.kernels_for(
            tuple((ff.kind, ff.func if isinstance(ff, Custom) else None) for ff in self.fields))
        self._launch = Launcher()
        self._masks = {}

    def state_dims(self):
        return {"n_fields": len(self.fields)}

    def build(self, n_envs, n_frames):
        super().build(n_envs, n_frames)
        self.state.rules = self._rules

    def init_state(self, f):
        st = self.state
        for k, ff in enumerate(self.fields):
            st.at("active", f)[:, k] = int(ff._active0)
            st.at("params", f)[:, k] = torch.as_tensor(ff._params, dtype=self.float_dtype)
        self._push_now(st.at("active", f), 1.0)  # (the colliders were built before: they come first)

    def _rules(self, rows):
        """The kinds' own bounds on the parameter rows [R, n_fields, N_PARAMS] (StateStore.rules)."""
        x = rows.get("params")
        if x is None:
            return None
        xd = x.detach().double().cpu()
        for k, ff in enumerate(self.fields):
            for col, lo, lo_open in _LOWER.get(ff.kind, ()):
                bad = (xd[:, k, col] <= lo) if lo_open else (xd[:, k, col] < lo)
                if bad.any():
                    r = int(bad.nonzero()[0, 0])
                    return ("params", r, (k, col), float(xd[r, k, col]),
                            f"a value {'>' if lo_open else '>='} {lo} for {type(ff).__name__} (column {col})")
            if ff.kind in _UNIT_DIRECTION:
                norm = xd[:, k, K.P_DIR:K.P_DIR + 3].norm(dim=-1)
                bad = ~((norm - 1).abs() <= UNIT_TOL)
                if bad.any():
                    r = int(bad.nonzero()[0, 0])
                    return ("params", r, (k, K.P_DIR), xd[r, k, K.P_DIR:K.P_DIR + 3].tolist(),
                            f"a unit direction for {type(ff).__name__} (|norm - 1| <= {UNIT_TOL})")
        return None

    def signature(self) -> dict:
        return {"options": None, "entities": [], "fields": [ff.as_dict() for ff in self.fields]}

    # -- the fields' setters ---------------------------------------------------------------------------------------

    def set_active(self, field, value, envs_idx, what):
        self.scene._require_built(f"{type(field).__name__}.{what}")
        idx = self.scene._sanitize_envs_idx(envs_idx)
        st, k = self.state, field._index
        before = st.at("active", self.frame)[:, k].clone()
        st.set_rows("active", self.frame, value, idx, item=(k,), what=f"{type(field).__name__}.{what}")
        flipped = st.at("active", self.frame)[:, k] != before
        if bool(flipped.any()):  # the bodies' impulse for the next substep takes the field in or out
            switch = torch.zeros_like(st.at("active", self.frame))
            switch[:, k] = flipped.to(switch.dtype)
            self._push_now(switch, 1.0 if value else -1.0)

    def get_active(self, field):
        self.scene._require_built(f"{type(field).__name__}.active")
        x = self.state.at("active", self.frame)[:, field._index] != 0
        return bool(x[0]) if not self.n_envs else x.clone()

    # -- the substep -----------------------------------------------------------------------------------------------

    def _substep_index(self) -> int:
        """The index of the substep under way since t = 0 (the tape's, while the backward re-runs one)."""
        tape = self.scene._tape
        if tape is not None and tape.rerun_k is not None:
            return int(tape.rerun_k)
        return int(self.scene._substep)

    def _targets(self):
        from ..coupler import Collider
        from ..particles.solver import ParticleSolver

        particles, bodies = [], []
        for s in self.scene.active_solvers:
            if isinstance(s, ParticleSolver) and s.n_particles:
                particles.append(s)
            elif isinstance(s, Collider) and s is not self:
                bodies.append(s)
        return particles, bodies

    def _push(self, kernel, view_frame, step, active, scale):
        """Launch `kernel` (push_bodies or its reverse) on every collider's bodies as `collider_view(view_frame)`
        shows them (the poses of the next frame, the impulse its substep applies), for substep index `step`."""
        dt = float(self.sim_options.substep_dt)
        for s in self._targets()[1]:
            view = s.collider_view(view_frame)
            inv_mass = view.body_inv_mass
            if inv_mass is None or not inv_mass.shape[0] or inv_mass.shape[0] > view.body_com.shape[1]:
                continue
            self._launch(kernel, scale * dt, step * dt, step % 2**31, self.seeds, active, self.state.params,
                         self.perm, view.body_com, view.body_lin_vel, inv_mass, view.body_impulse)

    def _push_now(self, active, scale):
        """Add scale times the impulse of the fields `active` ([B, n_fields]) at the bodies' current poses to the
        impulse the next substep applies (outside the substeps: at build, at activate / deactivate)."""
        if self._targets()[1]:
            with torch.no_grad():
                self._push(self.push_bodies, self.frames.prev(self.frame), int(self.scene._substep), active, scale)

    def _run(self, f, grad: bool):
        st = self.state
        dt = float(self.sim_options.substep_dt)
        step = self._substep_index()
        t = step * dt
        fn = self.frames.next(f)
        common = (self.seeds, st.active, st.params, self.perm)
        particles, _ = self._targets()
        launch = self._launch
        # the bodies: the field at frame fn's poses (substep step + 1's start), applied by that substep
        self._push(self.push_bodies.grad if grad else self.push_bodies, f, step + 1, st.active, 1.0)
        for s in particles:
            pst = s.state
            kernel = self.kick_particles.grad if grad else self.kick_particles
            launch(kernel, f, fn, dt, t, step % 2**31, *common, pst.pos, pst.vel, s.field_mask(f))

    def substep_post_coupling(self, f):
        self._run(f, grad=False)

    def substep_post_coupling_grad(self, f):
        self._run(f, grad=True)

    def substep_pre_coupling_grad(self, f):
        pass
