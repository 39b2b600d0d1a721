"""`gs.Scene`: entities, solvers, the step loop, state snapshots and checkpoints."""

from __future__ import annotations

import math
import uuid
import warnings
from pathlib import Path

import attrs
import numpy as np
import torch

from . import checkpoint as ckpt
from ._runtime import require_init, runtime
from .coupler import Coupler
from .faults import FaultMonitor
from .grad import Tape, require_grad_support
from .errors import InvalidCheckpointStateError, InvalidEnvError, OptionError, SceneError
from .materials import Material
from .morphs import MJCF, URDF, Box, Cylinder, Mesh, Morph, Nowhere, Plane, Sphere
from .options import COUPLER_REFUSALS, BaseCouplerOptions, LegacyCouplerOptions, SimOptions
from .plugins import registry
from .progress import compiling
from .recorders.recorder_manager import RecorderManager
from .emitter import EmitterManager
from .force_fields.manager import ForceFieldManager
from .sensors.manager import SensorManager
from .plugins.manager import missing_plugin_error
from .state import SimState, SolverState, to_index
from .stepping import substep

# Genesis World's surface vis_mode values (the cameras draw rigid entities by "visual" or "collision")
VIS_MODES = ("visual", "collision", "particle", "sdf", "recon")

DEFAULT_MATERIAL = "Rigid"


class UID:
    """Genesis World's `gs.UID`: an entity's unique id, 32 hex digits; `short()`, the first 7, is what
    `scene.get_entity(uid=...)` and the default entity names use."""

    def __init__(self):
        self.uid = uuid.uuid4().hex

    def short(self) -> str:
        return self.uid[:7]

    def full(self) -> str:
        return f"{self.uid[:7]}-{self.uid[7:]}"

    def match(self, other: str, short_only: bool = False) -> bool:
        return (self.short() if short_only else self.uid) == other

    def __str__(self):
        return self.uid

    def __format__(self, format_spec):
        return f"<{self.short()}>"

    def __repr__(self):
        return f"UID('{self.full()}')"


class Scene:
    """A scene: entities simulated by the installed solvers, batched over `n_envs` environments.

    sim_options: `gs.options.SimOptions`. `<short_name>_options`: the options of each solver
    (``rigid_options=gs.options.RigidOptions(...)``). show_viewer: serve the scene to a web browser from build on
    (`scene.viewer`, genesis_core.render.viewer: its address is printed once), drawn as `vis_options`
    (gs.options.VisOptions) says, with the camera and pacing of `viewer_options` (gs.options.ViewerOptions).
    show_FPS: the steps per second, logged at most once a second (and shown in the viewer's panel); also on with
    `profiling_options=gs.options.ProfilingOptions()` (its show_FPS, True by default as in Genesis World).
    coupler_options: Genesis World's choice of coupler; `gs.options.LegacyCouplerOptions()` (the default) is the
    coupler here, with every pair coupled; SAPCouplerOptions and IPCCouplerOptions, other couplers, are refused.
    """

    def __init__(self, sim_options: SimOptions | None = None, show_viewer: bool = False, show_FPS: bool = False,
                 **solver_options):
        require_init("gs.Scene")
        if sim_options is None:
            sim_options = SimOptions()
        if not isinstance(sim_options, SimOptions):
            raise OptionError(f"sim_options must be a gs.options.SimOptions, got {type(sim_options).__name__}.")
        if not isinstance(show_viewer, bool):
            raise OptionError(f"gs.Scene(show_viewer={show_viewer!r}) must be a bool.")
        if not isinstance(show_FPS, bool):
            raise OptionError(f"gs.Scene(show_FPS={show_FPS!r}) must be a bool.")
        reg = registry()
        from .options import RENDERING_OPTIONS

        from .renderers import Renderer

        self.coupler_options = _check_coupler_options(solver_options.pop("coupler_options", None))
        renderer = solver_options.pop("renderer", None)  # Genesis World's choice of renderer: accepted, unused
        if renderer is not None and not isinstance(renderer, Renderer):
            raise OptionError(f"gs.Scene(renderer=...) must be a gs.renderers.* (Rasterizer, RayTracer, "
                              f"BatchRenderer), got {type(renderer).__name__}.")
        rendering = {}
        for key in [k for k in solver_options if k in RENDERING_OPTIONS]:  # the viewer's options
            value = solver_options.pop(key)
            if value is not None and not isinstance(value, RENDERING_OPTIONS[key]):
                raise OptionError(f"gs.Scene({key}=...) must be a gs.options.{RENDERING_OPTIONS[key].__name__}, got "
                                  f"{type(value).__name__}.")
            rendering[key] = value
        self.vis_options = rendering.get("vis_options") or RENDERING_OPTIONS["vis_options"]()
        self.viewer_options = rendering.get("viewer_options") or RENDERING_OPTIONS["viewer_options"]()
        self.renderer = renderer
        self.profiling_options = rendering.get("profiling_options")
        self.show_FPS = show_FPS or (self.profiling_options is not None and self.profiling_options.show_FPS)
        for key, value in solver_options.items():
            short = key[: -len("_options")] if key.endswith("_options") else None
            if short is None:
                raise OptionError(f"gs.Scene got an unexpected keyword {key!r}.")
            cls = reg.solver_for_short_name(short)
            if cls is None:
                raise missing_plugin_error(f"gs.Scene({key}=...): solver", short)
            if value is not None and cls.options_class is None:
                raise OptionError(f"gs.Scene({key}=...): {cls.__name__} takes no options.")
        self.sim_options = sim_options
        self._solvers = [
            cls(self, sim_options, solver_options.get(f"{cls.short_name}_options"))
            for cls in sorted(reg.solvers.values(), key=lambda c: (c.order, c.__name__))
        ]
        # the core's own solvers, after every physics solver: the force fields and their state (active with force
        # fields), then the sensors and theirs (active with sensors)
        self._emitter_manager = EmitterManager(self, sim_options)
        self._solvers.append(self._emitter_manager)
        self._force_field_manager = ForceFieldManager(self, sim_options)
        self._solvers.append(self._force_field_manager)
        self._sensor_manager = SensorManager(self, sim_options)
        self._solvers.append(self._sensor_manager)
        self._couplings = list(reg.couplings)
        self._entities = []
        self._built = False
        self._stepped = False  # the first step compiles the step's kernels (a status line on a terminal)
        self._generation = None
        self.n_envs = 0
        self._t = 0
        self._substep = 0  # substeps taken since t = 0; the current frame is _substep % n_frames
        self._n_frames = 0
        self._init_state = self._build_state = None
        self.coupler = None
        self._tape = None  # differentiable mode: what backward needs (genesis_core.grad.Tape)
        self._faults = None
        self._invalid_envs = []
        self._surfaces = {}  # entity index -> its gs.surfaces.* (the renderer's colours)
        self._cameras = []
        self.debug_objects = []  # scene.draw_debug_* markers (genesis_core.render.debug)
        self._env_layout = {}
        self._fps = None  # show_FPS: (wall time of the last report, steps since)
        self._viewer = None
        self._destroyed = False
        # the recorders (scene.start_recording): I/O, no simulation state
        self._recorder_manager = RecorderManager(sim_options.dt)
        if show_viewer:
            from .render.viewer import Viewer

            self._viewer = Viewer(self, self.viewer_options, self.vis_options, show_FPS)

    # -- structure -------------------------------------------------------------------------------------------------

    @property
    def solvers(self) -> list:
        """Every installed solver, in a fixed order; `get_state().solvers_state` is aligned with it."""
        return list(self._solvers)

    @property
    def active_solvers(self) -> list:
        return [s for s in self._solvers if s.is_active]

    @property
    def entities(self) -> list:
        return list(self._entities)

    @property
    def is_built(self) -> bool:
        return self._built

    @property
    def t(self) -> int:
        """The number of steps taken since build (restored by reset(state) and load_checkpoint)."""
        return self._t

    @property
    def dt(self) -> float:
        return self.sim_options.dt

    @property
    def sim(self):
        """Genesis World's `scene.sim` (its simulator, which holds the solvers): here the scene itself, so that
        `scene.sim.rigid_solver` and the like reach the solvers."""
        return self

    def __getattr__(self, name):
        # scene.rigid_solver, scene.mpm_solver, ...: the solver whose short_name matches
        if name.endswith("_solver") and not name.startswith("_"):
            if self.__dict__.get("_destroyed"):
                raise SceneError(f"scene.{name}: the scene was destroyed (scene.destroy()); make a new scene.")
            short = name[: -len("_solver")]
            for s in self.__dict__.get("_solvers", ()):
                if s.short_name == short:
                    return s
            raise missing_plugin_error(f"scene.{name}: solver", short)
        raise AttributeError(f"'Scene' object has no attribute {name!r}")

    def add_entity(self, morph, material=None, surface=None, *, name: str | None = None, **kwargs):
        """Add an entity; `material` (default `gs.materials.Rigid()`) picks the solver that simulates it; `surface`
        (its looks, `gs.surfaces.*`) may be given third, as in Genesis World's signature. `morph`
        may be a list of morphs (Genesis World's heterogeneous entity: environment b simulates one of them, in
        balanced blocks; see the rigid solver's add_heterogeneous_entity).

        name: the entity's name (`entity.name`, `scene.get_entity(name)`), unique in the scene; None gives
        Genesis World's default, the morph's kind and the entity's short uid (`entity.uid`): "box_1a2b3c4",
        "mpm_sphere_...", a robot file's name ("franka_...")."""
        self._require_alive("add_entity")
        if self._built:
            raise SceneError("add_entity after scene.build(): add every entity first, then build.")
        if surface is not None:
            kwargs["surface"] = surface
        if name is not None:
            if not isinstance(name, str) or not name:
                raise OptionError(f"add_entity: name={name!r} must be a non-empty string or None.")
            if name in self.entity_names:
                raise OptionError(f"add_entity: name={name!r} is already the name of another entity of this scene; "
                                  "entity names are unique: pick another one (or leave name=None).")
        variants = None
        if isinstance(morph, (list, tuple)):  # Genesis World's heterogeneous entity: one morph per environment
            variants = tuple(morph)
            if not variants or not all(isinstance(m, Morph) for m in variants):
                raise OptionError("add_entity: morph=[...] (a heterogeneous entity) must be a non-empty list of "
                                  f"gs.morphs.* objects, got {[type(m).__name__ for m in variants]}.")
            morph = variants[0]
        if not isinstance(morph, Morph):
            raise OptionError(f"add_entity: morph must be a gs.morphs.* object, got {type(morph).__name__}.")
        if kwargs:
            extra = [k for k in kwargs if k not in ("surface", "visualize_contact", "vis_mode")]  # rendering only
            if extra:
                raise OptionError(f"add_entity got unexpected keywords {sorted(extra)}.")
        vis_mode = kwargs.pop("vis_mode", None)
        if vis_mode is not None:  # Genesis World's shorthand for the surface's vis_mode
            if vis_mode not in VIS_MODES:
                raise OptionError(f"add_entity: vis_mode={vis_mode!r} is not one of {', '.join(VIS_MODES)}.")
            from .surfaces import Default

            surface = kwargs.get("surface")
            kwargs["surface"] = (Default(vis_mode=vis_mode) if surface is None
                                 else type(surface)(**{**surface.options, "vis_mode": vis_mode}))
        if material is None:
            material = registry().lookup("materials", DEFAULT_MATERIAL)()
        if not isinstance(material, Material):
            raise OptionError(f"add_entity: material must be a gs.materials.* object, got {type(material).__name__}.")
        if callable(getattr(material, "add_parts", None)):
            return self._add_composite(morph if variants is None else list(variants), material, name, kwargs)
        if not isinstance(material.solver, str):
            raise OptionError(f"add_entity: {type(material).__name__} does not name its solver (class attribute `solver`).")
        solver = next((s for s in self._solvers if s.name == material.solver), None)
        if solver is None:
            raise missing_plugin_error(f"{type(material).__name__} needs solver", material.solver or "?")
        uid = UID()
        while any(e.uid.match(uid.short(), short_only=True) for e in self._entities):
            uid = UID()
        if variants is not None:
            if not callable(getattr(solver, "add_heterogeneous_entity", None)):
                raise OptionError(f"add_entity(morph=[...]): the {solver.name} solver simulates one morph per entity "
                                  "(no add_heterogeneous_entity); heterogeneous entities, one morph per environment, "
                                  "are the rigid solver's (gs.materials.Rigid).")
            entity = solver.add_heterogeneous_entity(len(self._entities), variants, material)
        else:
            entity = solver.add_entity(len(self._entities), morph, material)
        entity.uid = uid
        entity.name = name if name is not None else f"{_morph_identifier(morph, solver.short_name)}_{uid.short()}"
        self._entities.append(entity)
        if kwargs.get("surface") is not None:
            self._surfaces[entity.idx] = kwargs["surface"]
        return entity

    def _add_composite(self, morph, material, name, kwargs):
        """A material made of entities of other solvers (Genesis World's `gs.materials.Hybrid`: a rigid skeleton
        and a soft skin): `material.add_parts(scene, morph, name=..., **kwargs)` adds its parts through add_entity
        and returns the object that drives them (not itself an entity of the scene: its parts are). Should it fail,
        the entities it added are removed again, so that a refused composite leaves the scene as it was."""
        n_entities = len(self._entities)
        n_solver_entities = [len(s.entities) for s in self._solvers]
        try:
            return material.add_parts(self, morph, name=name, **kwargs)
        except BaseException:
            for e in self._entities[n_entities:]:
                self._surfaces.pop(e.idx, None)
            del self._entities[n_entities:]
            for s, n in zip(self._solvers, n_solver_entities):
                del s.entities[n:]
            raise

    # -- debug drawing (Genesis World's names; genesis_core.render.debug) ----------------------------------------------

    def _debug(self, kind, **params):
        from .render import debug

        self._require_built(f"draw_debug_{kind}")
        obj = debug.make(kind, **params)
        self.debug_objects.append(obj)
        viewer = self._viewer
        if viewer is not None and getattr(viewer, "server", None) is not None:
            debug.show(viewer.server, obj)
        return obj

    def draw_debug_sphere(self, pos, radius=0.01, color=(1.0, 0.0, 0.0, 0.5)):
        """A sphere marker at pos (world, m): drawn in the viewer when one is open; see genesis_core.render.debug."""
        return self._debug("sphere", pos=pos, radius=radius, color=color)

    def draw_debug_spheres(self, poss, radius=0.01, color=(1.0, 0.0, 0.0, 0.5)):
        return self._debug("spheres", pos=poss, radius=radius, color=color)

    def draw_debug_points(self, poss, colors=(1.0, 0.0, 0.0, 0.5)):
        return self._debug("points", pos=poss, color=colors)

    def draw_debug_box(self, bounds, color=(1.0, 0.0, 0.0, 1.0), wireframe=True, wireframe_radius=0.0015):
        return self._debug("box", bounds=bounds, color=color, wireframe=wireframe)

    def draw_debug_line(self, start, end, radius=0.002, color=(1.0, 0.0, 0.0, 0.5)):
        return self._debug("line", start=start, end=end, radius=radius, color=color)

    def draw_debug_arrow(self, pos, vec=(0, 0, 1), radius=0.01, color=(1.0, 0.0, 0.0, 0.5)):
        return self._debug("arrow", start=pos, vec=vec, radius=radius, color=color)

    def draw_debug_frame(self, T, axis_length=1.0, origin_size=0.015, axis_radius=0.01):
        return self._debug("frame", T=T, axis_length=axis_length, origin_size=origin_size, axis_radius=axis_radius)

    def draw_debug_frames(self, Ts, axis_length=1.0, origin_size=0.015, axis_radius=0.01):
        return self._debug("frames", T=Ts, axis_length=axis_length, origin_size=origin_size, axis_radius=axis_radius)

    def draw_debug_mesh(self, mesh, pos=(0.0, 0.0, 0.0), T=None):
        return self._debug("mesh", mesh=mesh, pos=pos, T=T)

    def clear_debug_object(self, obj):
        """Remove one marker drawn by a draw_debug_* call."""
        from .render import debug

        if obj not in self.debug_objects:
            raise SceneError(f"clear_debug_object: {obj!r} is not a debug object of this scene.")
        debug.hide(obj)
        self.debug_objects.remove(obj)

    def clear_debug_objects(self):
        from .render import debug

        for obj in self.debug_objects:
            debug.hide(obj)
        self.debug_objects = []

    def add_sensor(self, sensor_options):
        """Add a sensor (Genesis World's `scene.add_sensor`), before build: `sensor_options` is a `gs.sensors.IMU`,
        `gs.sensors.Contact` or `gs.sensors.ContactForce`, attached to a link of a rigid entity. Returns the sensor,
        whose `read(envs_idx=None)` and `read_ground_truth(envs_idx=None)` give torch tensors `([n_envs,] ...)`,
        updated once per `scene.step()` after the physics (docs/sensors.md). Its state (delay buffer, drift, noise
        generator) is the sensor manager's, `scene.sensor_manager`, part of get_state, reset and checkpoints."""
        self._require_alive("add_sensor")
        if self._built:
            raise SceneError("add_sensor after scene.build(): add every sensor first, then build.")
        return self._sensor_manager.add_sensor(sensor_options)

    def add_emitter(self, material, max_particles=20000, surface=None):
        """A particle emitter (Genesis World's `scene.add_emitter`), before build: an entity of `max_particles`
        particles of `material` (a particle solver's: MPM, SPH, PBD particles or liquid), all inactive
        (`gs.morphs.Nowhere`) until `emitter.emit(...)` / `emit_omni(...)` place and activate them, the oldest
        reused once all are used. Returns the `genesis_core.emitter.Emitter`; its progress is state
        (`EmitterManager`). Not in differentiable mode."""
        from .particles.solver import ParticleSolver

        self._require_alive("add_emitter")
        if self._built:
            raise SceneError("add_emitter after scene.build(): add every emitter first, then build.")
        if self.sim_options.requires_grad:
            raise OptionError("add_emitter: emitters are not available with SimOptions(requires_grad=True) (the "
                              "particles they place and activate carry no gradient).")
        if not isinstance(max_particles, int) or isinstance(max_particles, bool) or not 1 <= max_particles <= 10**8:
            raise OptionError(f"add_emitter: max_particles={max_particles!r} is not accepted: expected an int in "
                              "[1, 1e8].")
        solver = next((s for s in self._solvers if s.name == getattr(material, "solver", None)), None)
        if not isinstance(solver, ParticleSolver) or solver.short_name == "fem" or \
                type(material).__name__ in ("Cloth", "Elastic"):
            raise OptionError(f"add_emitter: {type(material).__name__} is not a particle material (MPM, SPH, PBD "
                              "particles or liquid).")
        entity = self.add_entity(Nowhere(n_particles=max_particles), material=material,
                                 **({"surface": surface} if surface is not None else {}))
        return self._emitter_manager.add(entity, max_particles)

    @property
    def emitters(self) -> list:
        """The scene's emitters, in the order they were added."""
        return list(self._emitter_manager.emitters) if not self._destroyed else []

    def add_force_field(self, force_field):
        """Add a force field (Genesis World's `scene.add_force_field`), before build: `force_field` is a
        `gs.force_fields.Constant`, `Wind`, `Point`, `Drag`, `Noise`, `Vortex`, `Turbulence` or `Custom`, created
        inactive (`force_field.activate()` switches it on). Returns it. It acts on every particle solver's particles
        and on the rigid links (mass times acceleration at each link's centre of mass), in every environment where
        it is active; its active flag and parameters are the force-field manager's state,
        `scene.force_field_manager`, part of get_state, reset and checkpoints (docs/force-fields.md)."""
        self._require_alive("add_force_field")
        if self._built:
            raise SceneError("add_force_field after scene.build(): add every force field first, then build.")
        return self._force_field_manager.add_force_field(force_field)

    @property
    def force_fields(self) -> list:
        """The scene's force fields, in the order they were added."""
        return list(self._force_field_manager.fields) if not self._destroyed else []

    @property
    def force_field_manager(self):
        """The core's solver that holds the force fields and their state (just before the sensor manager in
        `scene.solvers`)."""
        self._require_alive("scene.force_field_manager")
        return self._force_field_manager

    @property
    def sensors(self) -> list:
        """The scene's sensors, in the order they were added."""
        return list(self._sensor_manager.sensors) if not self._destroyed else []

    @property
    def sensor_manager(self):
        """The core's solver that holds the sensors and their state (last in `scene.solvers`)."""
        self._require_alive("scene.sensor_manager")
        return self._sensor_manager

    @property
    def entity_names(self) -> tuple:
        """The entities' names, in the order they were added."""
        return tuple(e.name for e in self._entities)

    def get_entity(self, name: str | None = None, *, uid: str | None = None):
        """The entity named `name`, or whose short uid (`entity.uid.short()`, 7 hex digits) is `uid`: exactly one
        of the two (Genesis World's signature)."""
        self._require_alive("get_entity")
        if (name is None) == (uid is None):
            raise OptionError(f"get_entity: give exactly one of name and uid (got name={name!r}, uid={uid!r}).")
        if name is not None:
            found = [e for e in self._entities if e.name == name]
            what = f"name={name!r}"
        else:
            found = [e for e in self._entities if e.uid.match(uid, short_only=True)]
            what = f"uid={uid!r}"
        if not found:
            names = ", ".join(repr(n) for n in self.entity_names[:20]) + (", ..." if len(self._entities) > 20 else "")
            raise OptionError(f"get_entity: no entity of this scene has {what}; its entities are [{names}].")
        return found[0]

    def entity_surface(self, idx: int):
        """The `gs.surfaces.*` given to add_entity for entity `idx` (None if none)."""
        return self._surfaces.get(idx)

    def add_camera(self, res=(320, 320), pos=(0.5, 2.5, 3.5), lookat=(0.5, 0.5, 0.5), up=(0.0, 0.0, 1.0), fov=30,
                   GUI=False, **options):
        """A camera (`genesis_core.render.Camera`, Genesis World's arguments), before or after build; GUI=True shows
        each render's image in the viewer's panel (show_viewer=True). `transform` and `env_idx` are used as Genesis
        World uses them; its other camera options (model, spp, near, far, ...) are accepted without effect."""
        from .render import Camera

        self._require_alive("add_camera")
        cam = Camera(self, len(self._cameras), res=res, pos=pos, lookat=lookat, up=up, fov=fov, GUI=GUI, **options)
        self._cameras.append(cam)
        return cam

    def start_recording(self, data_func, rec_options):
        """Record `data_func()` (a callable without arguments) as the scene steps, with the recorder that
        `rec_options` stands for (`gs.recorders.NPZFile`, `CSVFile`, `VideoFile`, `MPLLinePlot`, `MPLImagePlot`,
        `MPLVectorFieldPlot`, `PyQtLinePlot`); returns the recorder. Before or after build (Genesis World: before):
        from the first step after both, the data is sampled after every step whose index `scene.t` is a multiple
        of round(1 / (rec_options.hz dt)) (every step without hz), after the sensors measured that step, and the
        recorder gets it with its simulation time, `scene.t * dt` s. The data is a tensor, an array, a number, a
        dict or a named tuple of them; it is copied to host memory at each sample. `scene.stop_recording()` writes
        the files and closes the plots. Recorders are no simulation state: they are in no get_state, reset or
        checkpoint (docs/recorders.md)."""
        self._require_alive("start_recording")
        return self._recorder_manager.add_recorder(data_func, rec_options)

    def stop_recording(self):
        """Stop every recording that scene.start_recording (or sensor.start_recording) started: files are written
        (NPZFile at this point) and closed, plots closed. With no recording started, a warning and nothing else."""
        self._require_alive("stop_recording")
        self._recorder_manager.stop()

    def build(self, n_envs: int = 0, **layout):
        """Allocate every active solver's model and state for `n_envs` environments (0: no batch dimension).

        Genesis World's env-layout keywords: env_spacing (x, y in m), n_envs_per_row and center_envs_at_origin
        place the environments side by side in the viewer only (they share one world frame in the physics);
        compile_kernels is accepted and has no effect."""
        require_init("scene.build")
        self._require_alive("scene.build()")
        unknown = sorted(set(layout) - {"env_spacing", "n_envs_per_row", "center_envs_at_origin", "compile_kernels"})
        if unknown:
            raise OptionError(f"build got unexpected keywords {unknown}; did you mean n_envs?")
        self._env_layout = _check_layout(layout)
        if self._built:
            raise SceneError("scene.build() was already called.")
        if not isinstance(n_envs, (int, np.integer)) or isinstance(n_envs, bool) or n_envs < 0:
            raise OptionError(f"build: n_envs={n_envs!r} is not accepted: expected an int >= 0.")
        if self.sim_options.requires_grad:
            require_grad_support(self.active_solvers)
        self.n_envs = int(n_envs)
        opts = self.sim_options
        self._n_frames = opts.n_substeps_local + 1 if opts.requires_grad else 2
        with compiling():
            for s in self.active_solvers:
                s.build(self.n_envs, self._n_frames)
            self.coupler = Coupler(self._solvers, self._couplings, opts)
            if opts.requires_grad:
                self._tape = Tape(self)
                for s in self.active_solvers:
                    s.state.tape = self._tape
            self._faults = FaultMonitor(self.active_solvers)
            self._built = True
            self._generation = runtime.generation
            self._build_state = self.get_state().serializable()
        self._init_state = self._build_state
        if self._viewer is not None:
            self._viewer.build()
        self._recorder_manager.build()

    @property
    def segmentation_idx_dict(self) -> dict:
        """Genesis World's map of the cameras' segmentation indices: {0: -1 (the background), 1: key, ...}, a key
        being an entity index, (entity, link) or (entity, link, geom) by `vis_options.segmentation_level`
        ("link" by default; particles are keyed by their entity). Numbered once per scene, in sorted key order."""
        from .render.view import segmentation_map

        self._require_built("scene.segmentation_idx_dict")
        return segmentation_map(self).idx_dict

    @property
    def viewer(self):
        """The viewer (genesis_core.render.viewer.Viewer: `url`, `update()`, `stop()`) of a scene made with
        show_viewer=True, None otherwise."""
        return self._viewer

    @property
    def visualizer(self):
        """Genesis World's `scene.visualizer`, for what its scripts use of it: `visualizer.context.
        update_debug_objects(objs, poses)` moves debug markers (genesis_core.render.debug.DebugContext), and
        `visualizer.viewer` is `scene.viewer`."""
        from .render.debug import Visualizer

        if self.__dict__.get("_visualizer") is None:
            self._visualizer = Visualizer(self)
        return self._visualizer

    def _require_alive(self, what):
        if self._destroyed:
            raise SceneError(f"{what}: the scene was destroyed (scene.destroy()); make a new scene.")

    def _require_built(self, what):
        self._require_alive(what)
        if not self._built:
            raise SceneError(f"{what} before scene.build(): build the scene first.")
        if self._generation != runtime.generation or not runtime.initialized:
            raise SceneError(f"{what}: this scene was built before gs.destroy()/gs.init(); build a new scene.")

    # -- stepping --------------------------------------------------------------------------------------------------

    @property
    def _frame(self) -> int:
        return self._substep % self._n_frames

    def step(self, update_visualizer: bool = True, refresh_visualizer: bool = True):
        """Advance every environment by dt: each solver's `process_input()`, then `substeps` substeps
        (`genesis_core.stepping.substep`: pre-coupling, coupling, post-coupling). The first step compiles the
        step's kernels (or loads them from the offline cache): on a terminal a status line says so while it
        lasts more than a second (genesis_core.progress).

        update_visualizer: whether the viewer (show_viewer=True) is sent the new poses after this step, as in
        Genesis World (False saves that work in a loop that shows only some steps; the cameras render the
        current state whenever asked). refresh_visualizer, Genesis World's redraw of its window, is accepted (a
        bool) and has no effect: the browser redraws on its own."""
        for key, value in (("update_visualizer", update_visualizer), ("refresh_visualizer", refresh_visualizer)):
            if not isinstance(value, bool):
                raise OptionError(f"scene.step({key}={value!r}) must be a bool.")
        if self._stepped:
            return self._step(update_visualizer)
        with compiling():
            self._step(update_visualizer)
        self._stepped = True

    def _step(self, update_visualizer=True):
        self._require_built("scene.step()")
        active = self.active_solvers
        tape = self._tape
        if tape is not None:
            tape.check_live("scene.step()")  # before any solver takes its input
        for s in active:
            s.process_input()
        if tape is not None:  # the frameless fields the step runs with, after the solvers took their input
            tape.begin_step(self._t)
        for _ in range(self.sim_options.substeps):
            f = self._frame
            if tape is not None:
                tape.begin_substep(self._substep, self._n_frames)
            substep(active, self.coupler, f)
            self._substep += 1
        self._t += 1
        if self._sensor_manager.is_active:  # the sensors measure the state the step left
            self._sensor_manager.update()
        if self.sim_options.on_invalid_env != "ignore":
            self._check_faults()
        for cam in self._cameras:
            if cam._recording:
                cam._record_step()
        if self._recorder_manager.is_recording:
            self._recorder_manager.step(self._t)
        if self.show_FPS:
            self._report_fps()
        if self._viewer is not None and update_visualizer:
            self._viewer.update()

    def set_gravity(self, gravity, envs_idx=None):
        """Genesis World's `scene.sim.set_gravity` (`scene.sim` is the scene here): the gravity (m/s^2, Z up)
        every solver applies from the next step on, `SimOptions.gravity` from then on.

        gravity: 3 finite numbers. envs_idx must be None: every solver keeps gravity as one value shared by all
        environments (a per-environment gravity is refused; run such environments in separate scenes). Before
        build every solver reads the new value at build. After build each active solver takes it through its
        `set_gravity(gravity)`, which writes it into the parameters its kernels read at run time (no kernel
        compiles again): every first-party solver (rigid, MPM, SPH, PBD, FEM) has one, in plain and
        differentiable mode. In differentiable mode the tape keeps the gravity each step ran with, and the
        backward re-runs each substep with it. A solver without `set_gravity` (a third party's that fixed its
        gravity at build) is named in the error, and nothing changes: set the gravity before scene.build()
        instead."""
        self._require_alive("scene.set_gravity")
        try:
            g = tuple(float(x) for x in torch.as_tensor(gravity, dtype=torch.float64).cpu().reshape(-1).tolist())
        except (TypeError, ValueError, RuntimeError):
            g = ()
        if len(g) != 3 or not all(math.isfinite(x) for x in g):
            raise OptionError(f"scene.set_gravity: gravity={gravity!r} must be 3 finite numbers (m/s^2).")
        if envs_idx is not None:
            raise OptionError("scene.set_gravity(envs_idx=...) is not accepted: gravity is one vector shared by "
                              "every environment here (each solver reads it into one parameter); call "
                              "set_gravity(gravity) for all, or simulate environments that need another gravity "
                              "in a scene of their own.")
        active = self.active_solvers if self._built else []
        if self._built:
            self._require_built("scene.set_gravity")
            fixed = [s.name for s in active if not callable(getattr(s, "set_gravity", None))]
            if fixed:
                raise SceneError(f"scene.set_gravity after build: {', '.join(fixed)} compiled the gravity into its "
                                 "parameters at build and takes no new one (no set_gravity method); nothing was "
                                 "changed. Call scene.set_gravity(...) before scene.build(), or give "
                                 "SimOptions(gravity=...).")
        self._apply_gravity(g)

    def _apply_gravity(self, g: tuple):
        """Make `g` (3 floats, m/s^2, checked) the gravity of the options and, once built, of every active solver
        through its `set_gravity` (scene.set_gravity checked that each has one). The tape's backward calls it too,
        to re-run a step with the gravity that step ran with."""
        self.sim_options = attrs.evolve(self.sim_options, gravity=g)
        for s in self._solvers:
            s.sim_options = self.sim_options
            if getattr(s.options, "gravity", None) is not None:  # a solver's own copy (RigidOptions(gravity=...))
                s.options = attrs.evolve(s.options, gravity=g)
        if self._built:
            for s in self.active_solvers:
                s.set_gravity(g)

    def destroy(self):
        """Release the scene, as Genesis World's `scene.destroy()`: the viewer stops, and the scene lets go of its
        solvers (their models and state), cameras, recorded frames and snapshots, which are freed once nothing
        else refers to them (entities the script keeps refer to their solver). Any later call on the scene, or
        on one of its entities' state, raises a SceneError. Calling it again does nothing."""
        if self._destroyed:
            return
        if self._recorder_manager.is_recording:  # their files are written
            try:
                self._recorder_manager.stop()
            except Exception as e:  # noqa: BLE001 - the scene is released all the same
                warnings.warn(f"scene.destroy(): a recording could not be written: {e}", stacklevel=2)
        if self._viewer is not None:
            self._viewer.stop()
        for s in self._solvers:  # what an entity the script keeps reads through its solver refuses, naming why
            s._state = s.frames = _Released()
        self._destroyed = True
        self._solvers, self._couplings, self._cameras, self._surfaces = [], [], [], {}
        self.coupler = self._tape = self._faults = self._viewer = None
        self._init_state = self._build_state = None

    def _report_fps(self):
        import time

        from ._runtime import logger

        now = time.perf_counter()
        if self._fps is None:
            self._fps = (now, 0)
            return
        since, steps = self._fps[0], self._fps[1] + 1
        if now - since >= 1.0:
            rate = steps / (now - since)
            logger.info("Running at %.1f steps/s (%.0f env-steps/s)", rate, rate * max(self.n_envs, 1))
            self._fps = (now, 0)
        else:
            self._fps = (since, steps)

    @property
    def invalid_envs(self) -> torch.Tensor:
        """The environments whose state the last `scene.step()` left non-finite (NaN or inf), a 1-D long tensor
        on gs.device, empty when every environment is finite ([0] on a scene built without environments). With
        `SimOptions(on_invalid_env="reset")` they have been reset to the initial state by the time you read it."""
        return torch.as_tensor(self._invalid_envs, dtype=torch.long, device=runtime.device)

    def _check_faults(self):
        f = self._frame
        if not self._faults.any_invalid(f):
            self._invalid_envs = []
            return
        envs, first = self._faults.invalid_envs(f, max(self.n_envs, 1))
        self._invalid_envs = envs
        if self._tape is not None:
            self._tape.mark_invalid(envs)
        policy = self.sim_options.on_invalid_env
        what = (f"environments {envs}" if self.n_envs else "the scene") + " went non-finite at step " + \
            f"{self._t} (first in " + ", ".join(sorted(set(first.values()))) + ")"
        if policy == "raise":
            raise InvalidEnvError(f"{what}; the state is kept for inspection: reset(envs_idx=...) restores them.",
                                  envs)
        if policy == "reset":
            self.reset(envs_idx=envs if self.n_envs else None)
            warnings.warn(f"{what}: reset to the initial state (SimOptions.on_invalid_env='reset').", stacklevel=3)
        else:
            warnings.warn(f"{what}; the other environments are unaffected. scene.invalid_envs lists them; "
                          "scene.reset(envs_idx=scene.invalid_envs) restores them, or set "
                          "SimOptions(on_invalid_env='reset').", stacklevel=3)

    # -- state -----------------------------------------------------------------------------------------------------

    def _sanitize_envs_idx(self, envs_idx) -> torch.Tensor | None:
        """envs_idx as a long tensor on gs.device (None: all environments). Raises on a scene without envs."""
        if envs_idx is None:
            return None
        if not self.n_envs:
            raise SceneError("envs_idx was given, but this scene was built without environments (n_envs=0).")
        idx = to_index(envs_idx, self.n_envs, "envs_idx")
        return idx.to(runtime.device)

    def get_state(self) -> SimState:
        """A snapshot of every solver's state (copies), `solvers_state` aligned with `scene.solvers`."""
        self._require_built("scene.get_state()")
        f = self._frame
        return SimState(self, [s.get_state(f) if s.is_active else None for s in self._solvers], self._t)

    def _aligned_states(self, state, where, envs_idx=None) -> list:
        """The state's per-solver entries aligned with scene.solvers (matched by solver name, so that a pickled
        state still fits after an unrelated plugin was installed or removed), each checked against its solver."""
        if not isinstance(state, SimState):
            raise SceneError(f"{where}: state must be a SimState from scene.get_state(), got {type(state).__name__}.")
        t = getattr(state, "t", None)
        if not isinstance(t, (int, np.integer)) or isinstance(t, bool) or not 0 <= t < ckpt.MAX_STEP_INDEX:
            raise SceneError(f"{where}: state.t={t!r} is not a step index (an int in [0, 2**62)).")
        if not isinstance(getattr(state, "solvers_state", None), (list, tuple)):
            raise SceneError(f"{where}: state.solvers_state must be a list aligned with scene.solvers.")
        by_name = {}
        for sub in state.solvers_state:
            if sub is not None:
                if not isinstance(sub, SolverState) or not isinstance(getattr(sub, "solver", None), str):
                    raise SceneError(f"{where}: state.solvers_state holds a {type(sub).__name__}, not a SolverState "
                                     "from scene.get_state().")
                by_name[sub.solver] = sub
        names = {s.name for s in self._solvers}
        for name in by_name:
            if name not in names:
                raise SceneError(f"{where}: the state has data for {name}, which this scene does not have.")
        out = []
        for s in self._solvers:
            sub = by_name.get(s.name)
            if s.is_active:
                if sub is None:
                    raise SceneError(f"{where}: the state has no data for {s.name}.")
                s.check_state(sub, where, envs_idx=envs_idx)
            elif sub is not None:
                raise SceneError(f"{where}: the state has data for {s.name}, which has no entities in this scene.")
            out.append(sub)
        return out

    def reset(self, state: SimState | None = None, envs_idx=None):
        """Restore `state` (default: the registered initial state) into all environments, or only `envs_idx`.

        Passing `state` also registers it as the initial state for later bare `reset()` calls. Environments
        not in `envs_idx` are not touched. A full reset also sets `scene.t` to the state's step index.
        """
        self._require_built("scene.reset()")
        idx = self._sanitize_envs_idx(envs_idx)
        target = self._init_state if state is None else state
        # a state that becomes the initial state is checked whole: a later bare reset() writes every environment
        aligned = self._aligned_states(target, "reset", None if state is not None else idx)
        if state is not None:
            self._init_state = state.clone()
        if idx is None:
            self._substep = int(target.t) * self.sim_options.substeps
            self._t = int(target.t)
        f = self._frame
        for s, sub in zip(self._solvers, aligned):
            if s.is_active:
                s.set_state(f, sub, idx)
        if self._viewer is not None:
            self._viewer.refresh()
        if self._recorder_manager.is_recording:  # save_on_reset file writers start their next file
            self._recorder_manager.reset(None if idx is None else envs_idx)
        if self._tape is not None:
            if idx is None:  # a new forward run
                self._tape.clear()
            else:  # the reset rows no longer depend on what came before
                for s in self.active_solvers:
                    for name in s.state.specs:
                        if s.state.has_grad(name):
                            self._tape.on_set(s.state, name, idx, (), None)

    # -- checkpoints -----------------------------------------------------------------------------------------------

    def signature(self) -> dict:
        """The structure a checkpoint must match: environments, precision, options and entities per solver."""
        sim = self.sim_options.as_dict()
        for k in ("requires_grad", "substeps_local", "on_invalid_env"):  # what is recorded or reported, not the physics
            sim.pop(k)
        return {
            "n_envs": self.n_envs,
            "precision": runtime.precision,
            "sim_options": sim,
            "solvers": {s.name: s.signature() for s in self.active_solvers},
        }

    def _checkpoint_layout(self) -> dict:
        """``{key: (shape, dtype)}`` of every array a checkpoint of this scene holds (StateStore's layout)."""
        return {k: v for s in self.active_solvers for k, v in s.state.checkpoint_layout().items()}

    def save_checkpoint(self, path):
        """Write every active solver's checkpointed fields and `scene.t` to `path` (atomically)."""
        self._require_built("scene.save_checkpoint()")
        from . import __version__

        f = self._frame
        # what load_checkpoint would refuse is not written (the previous file stays as it was)
        where = f"save_checkpoint({str(path)!r}) (reset those environments first; nothing was written)"
        arrays = {k: v for s in self.active_solvers for k, v in s.state.checkpoint_arrays(f, where).items()}
        ckpt.write(path, ckpt.make_payload(self._t, arrays, self.signature(), __version__))

    def load_checkpoint(self, path, max_bytes: int | None = None):
        """Restore a checkpoint written by a scene built the same way; on any error the scene is unchanged.

        The file's checksum, its structure, its fit to this scene and every value (the fields' declared rules)
        are checked before anything is written. max_bytes: refuse a larger file (default: twice what this
        scene's arrays take, plus 64 MiB)."""
        self._require_built("scene.load_checkpoint()")
        layout = self._checkpoint_layout()
        if max_bytes is None:
            need = sum(int(np.prod(shape, dtype=np.int64)) * dtype.itemsize for shape, dtype in layout.values())
            max_bytes = 2 * need + 64 * 2**20
        payload = ckpt.read(path, max_bytes=max_bytes)
        ckpt.check_fits(payload, self.signature(), layout, path)
        where = f"load_checkpoint({str(path)!r})"
        # every solver's values are checked before any is written
        values = {s.name: s.state.from_checkpoint(payload["arrays"], where, error=InvalidCheckpointStateError)
                  for s in self.active_solvers}
        self._substep = payload["step_index"] * self.sim_options.substeps
        self._t = payload["step_index"]
        f = self._frame
        for s, build_state in zip(self._solvers, self._build_state.solvers_state):
            if s.is_active:
                # fields kept out of checkpoints restart from their build-time values
                s.state.restore(f, values[s.name], build_state.fields)
                if hasattr(s, "state_restored"):
                    s.state_restored()
        if self._tape is not None:
            self._tape.clear()
        if self._viewer is not None:
            self._viewer.refresh()

    # -- differentiable mode ---------------------------------------------------------------------------------------

    @property
    def requires_grad(self) -> bool:
        return self.sim_options.requires_grad

    def _backward(self):
        """The physics backward of the recorded forward run (called by gs.Tensor.backward after torch's)."""
        self._require_built("backward")
        if self._tape is None:
            raise SceneError("backward through the physics needs a scene built with SimOptions(requires_grad=True).")
        self._tape.backward()

    def _check_backward(self):
        if self._tape is not None:
            self._tape.check_live("backward")

    @property
    def grad_memory(self) -> int:
        """Differentiable mode: bytes of recorded frames held in host memory by the current forward run."""
        return 0 if self._tape is None else self._tape.host_bytes()

    def __repr__(self):
        state = f"built, n_envs={self.n_envs}, t={self._t}" if self._built else "not built"
        return f"<gs.Scene {state}: {len(self._entities)} entities, active solvers {[s.name for s in self.active_solvers]}>"


def _check_layout(layout: dict) -> dict:
    """scene.build's env-layout keywords, validated (they place environments in the viewer)."""
    spacing = layout.get("env_spacing", (0.0, 0.0))
    try:
        sp = tuple(float(x) for x in spacing)
    except (TypeError, ValueError):
        sp = ()
    if len(sp) != 2 or not all(np.isfinite(sp)):
        raise OptionError(f"build: env_spacing={spacing!r} must be two finite numbers (x, y in m).")
    per_row = layout.get("n_envs_per_row")
    if per_row is not None and (not isinstance(per_row, (int, np.integer)) or isinstance(per_row, bool)
                                or per_row < 1):
        raise OptionError(f"build: n_envs_per_row={per_row!r} must be None or an int >= 1.")
    center = layout.get("center_envs_at_origin", True)
    if not isinstance(center, bool):
        raise OptionError(f"build: center_envs_at_origin={center!r} must be a bool.")
    return {"env_spacing": sp, "n_envs_per_row": per_row, "center_envs_at_origin": center}


class _Released:
    """Stands for the state store and frames of a destroyed scene's solvers: any use raises."""

    def __getattr__(self, name):
        raise SceneError("the scene was destroyed (scene.destroy()); make a new scene.")


def _check_coupler_options(options):
    """Genesis World's `gs.Scene(coupler_options=...)`: None or LegacyCouplerOptions with every pair coupled (the
    coupler here); any other coupler is refused with the reason (options.COUPLER_REFUSALS)."""
    if options is None:
        return LegacyCouplerOptions()
    if not isinstance(options, BaseCouplerOptions):
        raise OptionError(f"gs.Scene(coupler_options=...) must be a gs.options.LegacyCouplerOptions, got "
                          f"{type(options).__name__}.")
    if type(options) in COUPLER_REFUSALS:
        raise OptionError(f"gs.Scene(coupler_options=gs.options.{type(options).__name__}(...)) is not accepted: "
                          f"{COUPLER_REFUSALS[type(options)]}.")
    if not isinstance(options, LegacyCouplerOptions):
        raise OptionError(f"gs.Scene(coupler_options=...): {type(options).__name__} is not a coupler of this engine; "
                          "use gs.options.LegacyCouplerOptions().")
    off = [k for k, on in attrs.asdict(options).items() if not on]
    if off:
        raise OptionError(f"gs.Scene(coupler_options=LegacyCouplerOptions({', '.join(f'{k}=False' for k in off)})) "
                          "is not accepted: the coupler here runs every coupling registered between two active "
                          "solvers, and none can be switched off; leave these True, or keep the entities that must "
                          "not interact in separate scenes.")
    return options


# Genesis World's default entity names: the morph's kind, the solver's prefix for a particle solver
# (each ParticleEntity subclass's _get_morph_identifier), and the fallback when the morph has no kind of its own
_NAME_FALLBACK = {"rigid": "rigid", "fem": "entity"}


def _morph_identifier(morph, short_name: str) -> str:
    kind = None
    if isinstance(morph, Box):
        kind = "box"
    elif isinstance(morph, Sphere):
        kind = "sphere"
    elif isinstance(morph, Cylinder):
        kind = "cylinder"
    elif isinstance(morph, Plane) and short_name == "rigid":
        kind = "plane"
    elif isinstance(morph, Mesh):
        kind = Path(morph.file).stem
    elif isinstance(morph, (URDF, MJCF)) and short_name == "rigid":
        kind = _model_file_name(morph.file, "name" if isinstance(morph, URDF) else "model")
    kind = kind or _NAME_FALLBACK.get(short_name, "particle")
    return kind if short_name == "rigid" else f"{short_name}_{kind}"


def _model_file_name(path: str, attribute: str) -> str:
    """The model's own name in a URDF (`<robot name=...>`) or MJCF (`<mujoco model=...>`) file, else the file's
    stem."""
    import xml.etree.ElementTree as ET

    try:
        for _, element in ET.iterparse(path, events=("start",)):
            return element.get(attribute) or Path(path).stem
    except (ET.ParseError, OSError):
        pass
    return Path(path).stem
