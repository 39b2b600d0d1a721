"""The demo scene: each loaded plugin contributes its part (hook `register_demo_parts`: entities, solver
options); the scene is built, run, checkpointed, restored into a freshly built scene, and the continuation compared
with the original run. The core names no entity or material of any plugin: with only the core installed there is
nothing to simulate, and the demo says so.
"""

from __future__ import annotations

import os
import tempfile
import time

import torch

from .progress import progress

DEFAULTS = {
    "n_envs": 8,
    "steps_before_checkpoint": 100,
    "steps_after_checkpoint": 100,
    "sim_options": {"dt": 1e-2, "substeps": 10},
    "parts": None,  # the names of the demo parts to include (None: every registered one)
}
# the camera of `run(video=...)`: it frames the parts the first-party plugins contribute (x -0.6..1.2 m,
# y -1..1.5 m, z 0..2 m)
VIDEO = {"res": (480, 360), "pos": (2.7, -2.5, 1.9), "lookat": (0.2, 0.25, 0.45), "fov": 45, "fps": 50}


def _parts(config, log):
    """[(name, plugin, solver options, [(morph, material), ...])] of the selected demo parts, in name order."""
    import genesis_core as gs
    from genesis_core.plugins import registry

    reg = registry()
    wanted = config.get("parts")
    if wanted is not None:
        unknown = sorted(set(wanted) - set(reg.demo_parts))
        if unknown:
            raise gs.GenesisError(f"demo parts {unknown} are not registered; registered: {sorted(reg.demo_parts)}.")
    out = []
    for name in sorted(reg.demo_parts):
        if wanted is not None and name not in wanted:
            continue
        plugin = reg.origin[("demo part", name)]
        try:
            part = reg.demo_parts[name]()
        except gs.PluginNotInstalledError as exc:
            log(f"  left out the demo part {name!r} of plugin {plugin!r}: {exc}")
            continue
        fields = part if isinstance(part, dict) else {}
        entities, options = fields.get("entities"), fields.get("options", {})
        pairs = isinstance(entities, (list, tuple)) and all(isinstance(e, (list, tuple)) and len(e) == 2
                                                            for e in entities)
        if not pairs or not isinstance(options, dict):
            raise gs.GenesisError(f"demo part {name!r} of plugin {plugin!r} returned {part!r:.200}: expected a dict "
                                  "with 'entities', a list of (morph, material) pairs, and optionally 'options', a "
                                  "dict of gs.Scene keywords to options objects.")
        out.append((name, plugin, dict(options), list(entities)))
    return out


def build_scene(config, log=print):
    """The demo scene of `config` (DEFAULTS' keys), built with `config["n_envs"]` environments."""
    import genesis_core as gs
    from genesis_core.plugins import registry

    parts = _parts(config, log)
    solver_options, given_by = {}, {}
    for name, _plugin, options, _entities in parts:
        for key, value in options.items():
            if key in solver_options and solver_options[key] != value:
                raise gs.GenesisError(f"demo parts {given_by[key]!r} and {name!r} give different {key}.")
            solver_options[key], given_by[key] = value, name
    if not any(entities for *_, entities in parts):
        raise gs.GenesisError("the demo scene is empty: no loaded plugin contributes a part of it (hook "
                              "register_demo_parts); `genesis-core plugins` lists what is loaded.")
    reg = registry()
    contributing = {reg.origin[("demo part", name)] for name in reg.demo_parts}
    silent = sorted({reg.origin[("solver", s)] for s in reg.solvers} - contributing)
    log("demo parts: " + ", ".join(f"{name} ({len(e)} entit{'y' if len(e) == 1 else 'ies'}, plugin {plugin})"
                                   for name, plugin, _o, e in parts)
        + (f"; plugins with a solver and no demo part: {', '.join(silent)}" if silent else ""))
    scene = gs.Scene(sim_options=gs.options.SimOptions(**config["sim_options"]), **solver_options)
    for _name, _plugin, _options, entities in parts:
        for morph, material in entities:
            scene.add_entity(morph, material=material)
    scene.build(n_envs=config["n_envs"])
    return scene


def _flat_state(scene):
    return scene.get_state().fields_by_key()


def run(config=DEFAULTS, checkpoint_path=None, log=print, video=None) -> bool:
    """Run the demo; returns True when the restored continuation equals the original one bitwise. video: a path
    ending in .mp4 or .gif: environment 0 of the steps before the checkpoint is recorded there by a camera
    (VIDEO), a frame every second step (50 fps at dt = 0.01 s); the timings then include the renders."""
    import genesis_core as gs

    if video is not None and os.path.splitext(str(video))[1].lower() not in (".mp4", ".gif"):
        raise gs.OptionError(f"demo video={video!r}: the file must end in .mp4 or .gif.")
    if not gs.runtime.initialized:
        gs.init(backend=gs.cpu, precision="32", seed=0)
    t0 = time.perf_counter()
    scene = build_scene(config, log)
    t_build = time.perf_counter() - t0
    cam = None
    if video is not None:
        cam = scene.add_camera(res=VIDEO["res"], pos=VIDEO["pos"], lookat=VIDEO["lookat"], fov=VIDEO["fov"],
                               env_idx=0 if scene.n_envs else None)
        cam.start_recording(save_to_filename=str(video), fps=VIDEO["fps"])
    log(f"scene: {len(scene.entities)} entities, solvers {[s.name for s in scene.active_solvers]}, "
        f"n_envs={scene.n_envs}; built in {t_build:.2f} s")
    n1, n2 = config["steps_before_checkpoint"], config["steps_after_checkpoint"]
    t0 = time.perf_counter()
    scene.step()  # compiles the kernels, or loads them from the offline cache
    t_first = time.perf_counter() - t0
    t0 = time.perf_counter()
    for _ in progress(range(n1 - 1), desc="demo: steps", unit="step", leave=False):
        scene.step()
    t_run = max(time.perf_counter() - t0, 1e-9)
    log(f"first step {t_first:.2f} s (kernel compilation or cache load); then {(n1 - 1) / t_run:.0f} steps/s, "
        f"{(n1 - 1) * max(scene.n_envs, 1) / t_run:.0f} env-steps/s" + (" (recording)" if cam else ""))
    if cam is not None:
        n_frames = len(cam._frames)
        log(f"recorded {n_frames} frames of environment 0: {', '.join(cam.stop_recording())}")

    tmp = None
    if checkpoint_path is None:
        tmp = tempfile.TemporaryDirectory()
        checkpoint_path = os.path.join(tmp.name, "demo.ckpt")
    scene.save_checkpoint(checkpoint_path)
    log(f"saved checkpoint at t={scene.t}: {checkpoint_path} ({os.path.getsize(checkpoint_path)} bytes)")
    for _ in progress(range(n2), desc="demo: steps after the checkpoint", unit="step", leave=False):
        scene.step()
    original = _flat_state(scene)

    restored = build_scene(config, log=lambda *_: None)
    restored.load_checkpoint(checkpoint_path)
    log(f"restored into a freshly built scene at t={restored.t}; continuing {n2} steps")
    for _ in progress(range(n2), desc="demo: the restored scene's steps", unit="step", leave=False):
        restored.step()
    again = _flat_state(restored)
    if tmp is not None:
        tmp.cleanup()

    ok = True
    log(f"{'field':<32}{'shape':<18}{'max |difference|':>18}  bitwise")
    for key, x in original.items():
        y = again[key]
        same = torch.equal(x, y)
        ok &= same
        diff = (x.double() - y.double()).abs().max().item() if x.numel() else 0.0
        log(f"{key:<32}{str(tuple(x.shape)):<18}{diff:>18.3g}  {'yes' if same else 'NO'}")
    log("continuation after restore matches the original run: " + ("yes (bitwise)" if ok else "NO"))
    return ok
