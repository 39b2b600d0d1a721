"""Scene options. `SimOptions` belongs to the core; each plugin contributes its own options class
(`RigidOptions`, `MPMOptions`, ...) which appears here as `gs.options.<Name>` once the plugin is installed.

Every options class is a frozen attrs class: values are validated at construction and a bad value raises an
`OptionError` naming the class, the field, the value and the accepted range.
"""

from __future__ import annotations

import math
from numbers import Integral

import attrs
import numpy as np

from . import validators as v
from .bases import Options
from .errors import OptionError
from .faults import POLICIES
from .plugins.manager import plugin_namespace


@attrs.define(frozen=True, kw_only=True)
class SimOptions(Options):
    """Options of the simulation loop shared by every solver.

    dt: seconds per `scene.step()`. substeps: substeps per step (each of dt/substeps seconds).
    substeps_local: in differentiable mode, how many substep frames are kept in device memory before older
    ones move to host memory; must be a multiple of `substeps` (default: `substeps`).
    requires_grad: record what backward needs. gravity: m/s^2, Z up. floor_height: metres; the MPM solver's
    floor where it lies above the bottom of its domain (rigid scenes add a gs.morphs.Plane instead).
    on_invalid_env: what `scene.step()` does when an environment's state goes non-finite (NaN or inf; the other
    environments are never affected): "warn" (default) names the environments in a warning and lists them in
    `scene.invalid_envs`; "reset" also resets them to the registered initial state (MuJoCo resets on a bad
    acceleration); "raise" raises `gs.InvalidEnvError` after the step; "ignore" skips the check.
    """

    dt: float = attrs.field(default=1e-2, validator=v.positive)
    substeps: int = attrs.field(default=1, validator=v.int_at_least(1))
    substeps_local: int | None = attrs.field(default=None)
    requires_grad: bool = attrs.field(default=False, validator=v.is_bool)
    gravity: tuple = attrs.field(default=(0.0, 0.0, -9.81), converter=v.to_float_tuple, validator=v.vec(3))
    floor_height: float = attrs.field(default=0.0, validator=v.finite)
    on_invalid_env: str = attrs.field(default="warn", validator=v.one_of(*POLICIES))

    @substeps_local.validator
    def _check_substeps_local(self, attr, value):
        if value is None:
            return
        v.int_at_least(1)(self, attr, value)
        if value % self.substeps != 0:
            raise OptionError(
                f"SimOptions.substeps_local={value} is not accepted: it must be a multiple of "
                f"substeps={self.substeps}."
            )

    @property
    def substep_dt(self) -> float:
        return self.dt / self.substeps

    @property
    def n_substeps_local(self) -> int:
        return self.substeps if self.substeps_local is None else self.substeps_local


__all__ = ["Options", "SimOptions", "BaseCouplerOptions", "LegacyCouplerOptions", "SAPCouplerOptions",
           "IPCCouplerOptions"]
__getattr__, __dir__ = plugin_namespace("options", globals())


def _unit_vec3(inst, attr, value):
    v.vec(3)(inst, attr, value)
    if not all(0.0 <= x <= 1.0 for x in value):
        v._fail(inst, attr, value, "three numbers in [0, 1] (RGB)")


def _optional(check):
    def optional(inst, attr, value):
        if value is not None:
            check(inst, attr, value)

    return optional


def _res(inst, attr, value):
    if value is None:
        return
    if not (isinstance(value, tuple) and len(value) == 2 and all(
            isinstance(x, Integral) and not isinstance(x, bool) and x > 0 for x in value)):
        v._fail(inst, attr, value, "None or two ints > 0 (width, height)")


def _to_tuple(value):
    if value is None or isinstance(value, (str, bytes)):
        return value
    try:
        return tuple(value.tolist() if hasattr(value, "tolist") else value)
    except TypeError:
        return value


def _env_indices(inst, attr, value):
    if value is None:
        return
    if not (isinstance(value, tuple) and len(value) > 0 and all(
            isinstance(x, Integral) and not isinstance(x, bool) and x >= 0 for x in value)
            and len(set(value)) == len(value)):
        v._fail(inst, attr, value, "None or a non-empty sequence of distinct environment indices (ints >= 0)")


@attrs.define(frozen=True, kw_only=True)
class ViewerOptions(Options):
    """Options of the viewer (`gs.Scene(show_viewer=True, viewer_options=...)`): Genesis World 1.4.5's fields.

    Used: camera_pos, camera_lookat, camera_up, camera_fov (degrees, vertical): the browser's camera when a page
    opens and on "Reset View"; refresh_rate (Hz): how often the viewer sends the scene's poses and particles at
    most (scene.step() skips the update between; `max_FPS`, Genesis World's older name, sets it when given, and
    both at once are refused); realtime_factor: with a viewer, `scene.step()` waits so that simulated time runs
    at most this many times faster than the wall clock (None: as fast as it computes). Added here: host and port
    (the viewer's address; port 0 picks a free one; a busy port moves to the next free one). Accepted without
    effect (the browser decides them): res, run_in_thread (the viewer always serves from its own thread),
    enable_help_text, enable_default_keybinds, enable_gui.
    """

    res: tuple | None = attrs.field(default=None, converter=_to_tuple, validator=_res)
    run_in_thread: bool | None = attrs.field(default=None, validator=_optional(v.is_bool))
    refresh_rate: int = attrs.field(default=60, validator=v.int_at_least(1))
    realtime_factor: float | None = attrs.field(default=1.0, validator=_optional(v.positive))
    camera_pos: tuple = attrs.field(default=(3.5, 0.5, 2.5), converter=v.to_float_tuple, validator=v.vec(3))
    camera_lookat: tuple = attrs.field(default=(0.0, 0.0, 0.5), converter=v.to_float_tuple, validator=v.vec(3))
    camera_up: tuple = attrs.field(default=(0.0, 0.0, 1.0), converter=v.to_float_tuple, validator=v.vec(3))
    camera_fov: float = attrs.field(default=40.0, validator=v.positive)
    enable_help_text: bool = attrs.field(default=True, validator=v.is_bool)
    enable_default_keybinds: bool = attrs.field(default=True, validator=v.is_bool)
    enable_gui: bool = attrs.field(default=False, validator=v.is_bool)
    max_FPS: int | None = attrs.field(default=None, validator=_optional(v.int_at_least(1)))
    host: str = attrs.field(default="127.0.0.1", validator=attrs.validators.instance_of(str))
    port: int = attrs.field(default=8080, validator=v.int_at_least(0))

    def __attrs_post_init__(self):
        if not self.camera_fov < 180:
            v._fail(self, attrs.fields(ViewerOptions).camera_fov, self.camera_fov, "a number in (0, 180) degrees")
        if self.port > 65535:
            v._fail(self, attrs.fields(ViewerOptions).port, self.port, "a TCP port in [0, 65535]")
        if self.max_FPS is not None:
            if self.refresh_rate != 60:
                raise OptionError("ViewerOptions: max_FPS is Genesis World's older name of refresh_rate; set only "
                                  "one of them.")
            object.__setattr__(self, "refresh_rate", self.max_FPS)
        if np.allclose(self.camera_pos, self.camera_lookat):
            raise OptionError(f"ViewerOptions: camera_pos={self.camera_pos} equals camera_lookat.")


LIGHT_KINDS = {"directional": ("dir", "color", "intensity"), "point": ("pos", "color", "intensity"),
               "ambient": ("color", "intensity")}


def _light_dict(light) -> dict:
    if hasattr(light, "as_dict"):
        light = light.as_dict()
    if not isinstance(light, dict):
        return light
    return dict(light)


def _to_lights(value):
    try:
        return tuple(_light_dict(x) for x in value)
    except TypeError:
        return value


def _lights(inst, attr, value):
    if not isinstance(value, tuple):
        v._fail(inst, attr, value, "a sequence of lights")
    for light in value:
        kind = light.get("type") if isinstance(light, dict) else None
        if kind not in LIGHT_KINDS or set(light) != {"type", *LIGHT_KINDS[kind]}:
            v._fail(inst, attr, light, "lights given as dicts {'type': 'directional', 'dir', 'color', 'intensity'}, "
                    "{'type': 'point', 'pos', 'color', 'intensity'} or {'type': 'ambient', 'color', 'intensity'}")
        vecs = [light[k] for k in ("dir", "pos", "color") if k in light]
        try:
            ok = all(len(x) == 3 and all(math.isfinite(float(c)) for c in x) for x in vecs)
            ok = ok and all(0 <= float(c) <= 1 for c in light["color"]) and math.isfinite(float(light["intensity"]))
            ok = ok and float(light["intensity"]) >= 0 and ("dir" not in light or any(float(c) for c in light["dir"]))
        except (TypeError, ValueError):
            ok = False
        if not ok:
            v._fail(inst, attr, light, "finite 3-vectors (a non-zero dir), an RGB color in [0, 1] and an intensity "
                    ">= 0")


@attrs.define(frozen=True, kw_only=True)
class VisOptions(Options):
    """What the viewer shows (`gs.Scene(vis_options=...)`): Genesis World 1.4.5's fields, validated.

    Used by the viewer: show_world_frame / world_frame_size, show_link_frame / link_frame_size (the frames of every
    entity's links that have `get_pos` / `get_quat`), show_cameras (the scene's cameras as frustums),
    background_color, ambient_light, lights (dicts: {"type": "directional", "dir", "color", "intensity"}, "point"
    with "pos", "ambient"; Genesis World's intensity 5 is a three.js intensity of 1), shadow,
    visualize_mpm_boundary / visualize_sph_boundary / visualize_pbd_boundary (the solver's domain as a wire box),
    particle_size_scale (drawn particle size), rendered_envs_idx (the environments shown, each offset by
    `scene.build(env_spacing=...)`; None: all; n_rendered_envs, the older name, means the first n).
    Used by the cameras: segmentation_level ("entity", "link" or "geom": the keys behind the segmentation indices,
    `scene.segmentation_idx_dict`).
    Accepted without effect: plane_reflection, split_envs (env_separate_rigid, its older name),
    render_particle_as ("tet" is drawn as spheres), contact_force_scale, n_support_neighbors.
    """

    show_world_frame: bool = attrs.field(default=False, validator=v.is_bool)
    world_frame_size: float = attrs.field(default=1.0, validator=v.positive)
    show_link_frame: bool = attrs.field(default=False, validator=v.is_bool)
    link_frame_size: float = attrs.field(default=0.2, validator=v.positive)
    show_cameras: bool = attrs.field(default=False, validator=v.is_bool)
    shadow: bool = attrs.field(default=True, validator=v.is_bool)
    plane_reflection: bool = attrs.field(default=False, validator=v.is_bool)
    split_envs: bool = attrs.field(default=False, validator=v.is_bool)
    env_separate_rigid: bool | None = attrs.field(default=None, validator=_optional(v.is_bool))
    background_color: tuple = attrs.field(default=(0.04, 0.08, 0.12), converter=v.to_float_tuple,
                                          validator=_unit_vec3)
    ambient_light: tuple = attrs.field(default=(0.1, 0.1, 0.1), converter=v.to_float_tuple, validator=_unit_vec3)
    visualize_mpm_boundary: bool = attrs.field(default=False, validator=v.is_bool)
    visualize_sph_boundary: bool = attrs.field(default=False, validator=v.is_bool)
    visualize_pbd_boundary: bool = attrs.field(default=False, validator=v.is_bool)
    segmentation_level: str = attrs.field(default="link", validator=v.one_of("entity", "link", "geom"))
    render_particle_as: str = attrs.field(default="sphere", validator=v.one_of("sphere", "tet"))
    particle_size_scale: float = attrs.field(default=1.0, validator=v.positive)
    contact_force_scale: float = attrs.field(default=0.01, validator=v.positive)
    n_support_neighbors: int = attrs.field(default=12, validator=v.int_at_least(1))
    rendered_envs_idx: tuple | None = attrs.field(default=None, converter=_to_tuple, validator=_env_indices)
    n_rendered_envs: int | None = attrs.field(default=None, validator=_optional(v.int_at_least(1)))
    lights: tuple = attrs.field(
        default=({"type": "directional", "dir": (-1.0, -1.0, -1.0), "color": (1.0, 1.0, 1.0), "intensity": 5.0},),
        converter=_to_lights, validator=_lights)

    def __attrs_post_init__(self):
        if self.n_rendered_envs is not None:
            if self.rendered_envs_idx is not None:
                raise OptionError("VisOptions: n_rendered_envs is the older name of rendered_envs_idx; set only one.")
            object.__setattr__(self, "rendered_envs_idx", tuple(range(self.n_rendered_envs)))
        if self.env_separate_rigid is not None:
            if self.split_envs:
                raise OptionError("VisOptions: env_separate_rigid is the older name of split_envs; set only one.")
            object.__setattr__(self, "split_envs", self.env_separate_rigid)


@attrs.define(frozen=True, kw_only=True)
class ProfilingOptions(Options):
    """Genesis World's profiling options (`gs.Scene(profiling_options=...)`).

    show_FPS: log the steps per second (as `gs.Scene(show_FPS=True)`: at most once a second, and in the viewer's
        panel). Genesis World's default, True.
    FPS_tracker_alpha: in [0, 1): Genesis World's smoothing of its per-step rate. Accepted and checked; the rate
        logged here is the mean over the last second, not smoothed step by step.
    """

    show_FPS: bool = attrs.field(default=True, validator=v.is_bool)
    FPS_tracker_alpha: float = attrs.field(default=0.95, validator=v.unit_interval)

    def __attrs_post_init__(self):
        if not self.FPS_tracker_alpha < 1.0:
            v._fail(self, attrs.fields(ProfilingOptions).FPS_tracker_alpha, self.FPS_tracker_alpha,
                    "a number in [0, 1)")


RENDERING_OPTIONS = {"vis_options": VisOptions, "viewer_options": ViewerOptions,
                     "profiling_options": ProfilingOptions}


@attrs.define(frozen=True, kw_only=True)
class BaseCouplerOptions(Options):
    """Base of Genesis World's coupler options (`gs.Scene(coupler_options=...)`), which pick the coupler."""


@attrs.define(frozen=True, kw_only=True)
class LegacyCouplerOptions(BaseCouplerOptions):
    """Genesis World's default coupler, the one this engine has: each pair of active solvers exchanges impulses
    every substep through the couplings their plugins register (docs/writing-a-solver.md). Each field says
    whether the pair it names is coupled; True, Genesis World's default for each, is what runs here, and
    `gs.Scene` refuses False (every registered coupling of two active solvers runs)."""

    rigid_mpm: bool = attrs.field(default=True, validator=v.is_bool)
    rigid_sph: bool = attrs.field(default=True, validator=v.is_bool)
    rigid_pbd: bool = attrs.field(default=True, validator=v.is_bool)
    rigid_fem: bool = attrs.field(default=True, validator=v.is_bool)
    mpm_sph: bool = attrs.field(default=True, validator=v.is_bool)
    mpm_pbd: bool = attrs.field(default=True, validator=v.is_bool)
    fem_mpm: bool = attrs.field(default=True, validator=v.is_bool)
    fem_sph: bool = attrs.field(default=True, validator=v.is_bool)


_CONTACT_TYPES = ("tet", "vert", "none")


@attrs.define(frozen=True, kw_only=True)
class SAPCouplerOptions(BaseCouplerOptions):
    """Genesis World's coupler by Drake's Semi-Analytic Primal contact solver (hydroelastic and point contacts
    solved as one convex problem across FEM and rigid bodies). Its fields are Genesis World's, validated;
    `gs.Scene` refuses it: that coupler is not implemented here (see COUPLER_REFUSALS)."""

    n_sap_iterations: int = attrs.field(default=5, validator=v.int_at_least(1))
    n_pcg_iterations: int = attrs.field(default=100, validator=v.int_at_least(1))
    n_linesearch_iterations: int = attrs.field(default=10, validator=v.int_at_least(1))
    sap_convergence_atol: float = attrs.field(default=1e-6, validator=v.positive)
    sap_convergence_rtol: float = attrs.field(default=1e-5, validator=v.positive)
    sap_taud: float = attrs.field(default=0.1, validator=v.positive)
    sap_beta: float = attrs.field(default=1.0, validator=v.positive)
    sap_sigma: float = attrs.field(default=1e-3, validator=v.positive)
    pcg_threshold: float = attrs.field(default=1e-6, validator=v.positive)
    linesearch_ftol: float = attrs.field(default=1e-6, validator=v.positive)
    linesearch_max_step_size: float = attrs.field(default=1.5, validator=v.positive)
    hydroelastic_stiffness: float = attrs.field(default=1e8, validator=v.positive)
    point_contact_stiffness: float = attrs.field(default=1e8, validator=v.positive)
    fem_floor_contact_type: str = attrs.field(default="tet", validator=v.one_of(*_CONTACT_TYPES))
    enable_fem_self_tet_contact: bool = attrs.field(default=True, validator=v.is_bool)
    rigid_floor_contact_type: str = attrs.field(default="tet", validator=v.one_of(*_CONTACT_TYPES))
    enable_rigid_fem_contact: bool = attrs.field(default=True, validator=v.is_bool)
    rigid_rigid_contact_type: str = attrs.field(default="tet", validator=v.one_of(*_CONTACT_TYPES))


@attrs.define(frozen=True, kw_only=True)
class IPCCouplerOptions(BaseCouplerOptions):
    """Genesis World's coupler by Incremental Potential Contact (libuipc: barrier-potential contacts, affine
    bodies). Its fields are Genesis World's (None: libuipc's default), validated; `gs.Scene` refuses it: that
    coupler is not implemented here (see COUPLER_REFUSALS)."""

    newton_max_iterations: int | None = attrs.field(default=None, validator=_optional(v.int_at_least(1)))
    newton_min_iterations: int | None = attrs.field(default=None, validator=_optional(v.int_at_least(1)))
    newton_tolerance: float | None = attrs.field(default=None, validator=_optional(v.positive))
    newton_ccd_tolerance: float | None = attrs.field(default=None, validator=_optional(v.positive))
    newton_use_adaptive_tolerance: bool | None = attrs.field(default=None, validator=_optional(v.is_bool))
    newton_translation_tolerance: float | None = attrs.field(default=None, validator=_optional(v.positive))
    newton_semi_implicit_enable: bool | None = attrs.field(default=None, validator=_optional(v.is_bool))
    newton_semi_implicit_beta_tolerance: float | None = attrs.field(default=None, validator=_optional(v.positive))
    n_linesearch_iterations: int | None = attrs.field(default=None, validator=_optional(v.int_at_least(1)))
    linesearch_report_energy: bool | None = attrs.field(default=None, validator=_optional(v.is_bool))
    linear_system_solver: str | None = attrs.field(default=None, validator=v.one_of(None, "linear_pcg", "direct"))
    linear_system_tolerance: float | None = attrs.field(default=None, validator=_optional(v.positive))
    contact_enable: bool | None = attrs.field(default=None, validator=_optional(v.is_bool))
    contact_d_hat: float | None = attrs.field(default=None, validator=_optional(v.positive))
    contact_friction_enable: bool | None = attrs.field(default=None, validator=_optional(v.is_bool))
    contact_resistance: float = attrs.field(default=1e9, validator=v.positive)
    contact_eps_velocity: float | None = attrs.field(default=None, validator=_optional(v.positive))
    contact_constitution: str | None = attrs.field(default=None, validator=v.one_of(None, "ipc", "isometric"))
    collision_detection_method: str | None = attrs.field(default=None,
                                                         validator=v.one_of(None, "linear_bvh", "spatial_hash"))
    cfl_enable: bool | None = attrs.field(default=None, validator=_optional(v.is_bool))
    sanity_check_enable: bool | None = attrs.field(default=None, validator=_optional(v.is_bool))
    constraint_strength_translation: float = attrs.field(default=100.0, validator=v.positive)
    constraint_strength_rotation: float = attrs.field(default=100.0, validator=v.positive)
    enable_rigid_ground_contact: bool = attrs.field(default=True, validator=v.is_bool)
    enable_rigid_rigid_contact: bool = attrs.field(default=True, validator=v.is_bool)
    two_way_coupling: bool = attrs.field(default=True, validator=v.is_bool)
    enable_rigid_dofs_sync: bool = attrs.field(default=False, validator=v.is_bool)
    free_base_driven_by_ipc: bool = attrs.field(default=False, validator=v.is_bool)


# Why gs.Scene refuses each coupler but LegacyCouplerOptions, and what to use instead
COUPLER_REFUSALS = {
    SAPCouplerOptions: "Drake's SAP contact solver (hydroelastic and tet-based contacts between FEM and rigid "
                       "bodies, solved as one convex problem) is not implemented here, and the couplings here "
                       "(impulses exchanged between solvers each substep) give other contact forces; use "
                       "gs.options.LegacyCouplerOptions() or leave coupler_options out",
    IPCCouplerOptions: "Incremental Potential Contact (libuipc's barrier-potential contacts, which keep every "
                       "pair of surfaces apart) is not implemented here, and the couplings here (impulses "
                       "exchanged between solvers each substep) allow the penetration it rules out; use "
                       "gs.options.LegacyCouplerOptions() or leave coupler_options out",
}
