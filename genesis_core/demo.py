"""The demo scene: built from the embedded defaults below, run, checkpointed, restored, and the continuation
compared with the original run. Entities whose plugin is not installed are left out (and said so)."""

from __future__ import annotations

import os
import tempfile
import time

import torch

DEFAULTS = {
    "n_envs": 8,
    "steps_before_checkpoint": 100,
    "steps_after_checkpoint": 100,
    "sim_options": {"dt": 1e-2, "substeps": 10},
    # solver options by Scene keyword: options class name under gs.options, its arguments
    "solver_options": {"mpm_options": ("MPMOptions", {"lower_bound": (-0.5, -0.5, 0.0), "upper_bound": (0.5, 0.5, 1.0),
                                                      "grid_density": 24})},
    "entities": [
        # material (name under gs.materials), its arguments, morph (name under gs.morphs), its arguments;
        # "@plugin/file" names a model file a plugin ships
        {"material": "Rigid", "material_args": {}, "morph": "Plane", "morph_args": {}},
        {"material": "Rigid", "material_args": {}, "morph": "URDF",
         "morph_args": {"file": "@rigid/arm.urdf", "fixed": True, "pos": (0.0, -1.0, 0.0)}},
        {"material": "Rigid", "material_args": {}, "morph": "MJCF",
         "morph_args": {"file": "@rigid/cartpole.xml", "pos": (0.0, 1.5, 0.0)}},
        {"material": "MPM.Elastic", "material_args": {"E": 5e4}, "morph": "Box",
         "morph_args": {"pos": (0.0, 0.0, 0.5), "size": (0.2, 0.2, 0.2)}},
        {"material": "Rigid", "material_args": {"rho": 500.0}, "morph": "Box",
         "morph_args": {"pos": (1.0, -1.0, 0.6), "size": (0.2, 0.2, 0.2), "euler": (30.0, 20.0, 0.0)}},
        {"material": "SpringChain", "material_args": {"n_nodes": 12, "stiffness": 2000.0, "damping": 0.2},
         "morph": "Cylinder", "morph_args": {"pos": (0.0, 0.0, 1.5), "height": 1.0, "radius": 0.01,
                                             "euler": (0.0, 60.0, 0.0)}},
        {"material": "SpringChain", "material_args": {"n_nodes": 6, "anchored": False, "stiffness": 800.0},
         "morph": "Capsule", "morph_args": {"pos": (1.0, 0.0, 2.0), "height": 0.5, "radius": 0.01,
                                            "euler": (30.0, 45.0, 0.0)}},
    ],
}


def _material(name, args):
    import genesis_core as gs

    obj = gs.materials
    for part in name.split("."):
        obj = getattr(obj, part)
    return obj(**args)


def build_scene(config, log=print):
    import genesis_core as gs
    from genesis_core.plugins import registry

    solver_options = {}
    for key, (cls_name, args) in config.get("solver_options", {}).items():
        try:
            solver_options[key] = getattr(gs.options, cls_name)(**args)
        except gs.PluginNotInstalledError:
            pass  # the entities that need it are left out below
    scene = gs.Scene(sim_options=gs.options.SimOptions(**config["sim_options"]), **solver_options)
    for entry in config["entities"]:
        try:
            material = _material(entry["material"], entry["material_args"])
        except gs.PluginNotInstalledError as exc:
            log(f"  left out {entry['material']} on a {entry['morph']}: {exc}")
            continue
        args = dict(entry["morph_args"])
        if isinstance(args.get("file"), str):
            try:
                args["file"] = registry().asset_path(args["file"])
            except gs.PluginNotInstalledError as exc:
                log(f"  left out a {entry['morph']}: {exc}")
                continue
        scene.add_entity(getattr(gs.morphs, entry["morph"])(**args), material=material)
    if not scene.entities:
        raise gs.GenesisError("the demo scene is empty: no plugin providing its materials is installed.")
    scene.build(n_envs=config["n_envs"])
    return scene


def _flat_state(scene):
    return scene.get_state().fields_by_key()


def run(config=DEFAULTS, checkpoint_path=None, log=print) -> bool:
    """Run the demo; returns True when the restored continuation equals the original one bitwise."""
    import genesis_core as gs

    if not gs.runtime.initialized:
        gs.init(backend=gs.cpu, precision="32", seed=0)
    t0 = time.perf_counter()
    scene = build_scene(config, log)
    t_build = time.perf_counter() - t0
    log(f"scene: {len(scene.entities)} entities, solvers {[s.name for s in scene.active_solvers]}, "
        f"n_envs={scene.n_envs}; built in {t_build:.2f} s")
    n1, n2 = config["steps_before_checkpoint"], config["steps_after_checkpoint"]
    t0 = time.perf_counter()
    scene.step()  # compiles the kernels, or loads them from the offline cache
    t_first = time.perf_counter() - t0
    t0 = time.perf_counter()
    for _ in range(n1 - 1):
        scene.step()
    t_run = max(time.perf_counter() - t0, 1e-9)
    log(f"first step {t_first:.2f} s (kernel compilation or cache load); then {(n1 - 1) / t_run:.0f} steps/s, "
        f"{(n1 - 1) * max(scene.n_envs, 1) / t_run:.0f} env-steps/s")

    tmp = None
    if checkpoint_path is None:
        tmp = tempfile.TemporaryDirectory()
        checkpoint_path = os.path.join(tmp.name, "demo.ckpt")
    scene.save_checkpoint(checkpoint_path)
    log(f"saved checkpoint at t={scene.t}: {checkpoint_path} ({os.path.getsize(checkpoint_path)} bytes)")
    for _ in range(n2):
        scene.step()
    original = _flat_state(scene)

    restored = build_scene(config, log=lambda *_: None)
    restored.load_checkpoint(checkpoint_path)
    log(f"restored into a freshly built scene at t={restored.t}; continuing {n2} steps")
    for _ in range(n2):
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
