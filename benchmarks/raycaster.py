"""Ray-cast sensor's cost: Genesis World's go2 standing on a plane (position control to its standing pose) in every
environment, stepped without sensors and then with a legged-robot height scan on its base (a Raycaster with
Genesis World's GridPattern(resolution=0.1, size=(1.6, 1.0)): 17 x 11 = 187 rays pointing down), read after every
step. Prints env-steps per second of both, rays per second (over the whole step, and over the sensor's share of
it), in genesis-core and, with GENESIS_WORLD_PYTHON set (GENESIS_WORLD_PYTHON=$(../shared/anchors/make-venv)), in
Genesis World 1.4.5 running the same script, with the ratios; without it, it says the anchor was skipped.

The robot is drawn by its collision geoms (`vis_mode="collision"`), which is what Genesis World's rays hit; here
the rays hit what the cameras draw. With the anchor, one short run per engine also prints environment 0's mean
and extreme distances, so that the two engines are seen to cast against the same geometry.

The go2 is looked up as Genesis World's scripts name it, "urdf/go2/urdf/go2.urdf" (genesis_core.morphs.find_file):
--assets DIR adds a folder to the search, and the anchor's Genesis World assets are added when
GENESIS_WORLD_PYTHON is set.

    python benchmarks/raycaster.py [--steps 100] [--envs 64 ...] [--assets DIR]
"""

import argparse
import os
import subprocess
import sys

from common import anchor_cells, measuring, rate_pair

N_RAYS = 17 * 11
# the same script in both engines (the API is the same): ENGINE picks the import
CHILD = r"""
import importlib, os, sys, time
import torch
gs = importlib.import_module(os.environ["ENGINE"])
n_envs, steps, with_sensor = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "1"
gs.init(backend=gs.cpu, precision="32", logging_level="error", seed=0)
scene = gs.Scene(sim_options=gs.options.SimOptions(dt=0.02), show_viewer=False)
scene.add_entity(gs.morphs.Plane())
robot = scene.add_entity(gs.morphs.URDF(file="urdf/go2/urdf/go2.urdf", pos=(0.0, 0.0, 0.42)),
                         surface=gs.surfaces.Default(vis_mode="collision"))
sensor = None
if with_sensor:
    sensor = scene.add_sensor(gs.sensors.Raycaster(
        pattern=gs.sensors.GridPattern(resolution=0.1, size=(1.6, 1.0)), entity_idx=robot.idx))
scene.build(n_envs=n_envs) if n_envs else scene.build()
legs = [f"{leg}_{part}_joint" for leg in ("FR", "FL", "RR", "RL") for part in ("hip", "thigh", "calf")]
dofs = [robot.get_joint(name).dofs_idx_local[0] for name in legs]
stand = torch.tensor([{"hip": 0.0, "thigh": 0.8, "calf": -1.5}[name.split("_")[1]] for name in legs])
stand = stand.expand(n_envs, 12).contiguous() if n_envs else stand
robot.set_dofs_kp([20.0] * 12, dofs)
robot.set_dofs_kv([0.5] * 12, dofs)
robot.set_dofs_position(stand, dofs)
robot.control_dofs_position(stand, dofs)
for _ in range(31):  # past the compilation and the launch-mode trial
    scene.step()
    if sensor is not None:
        sensor.read()
if os.environ.get("RAYCASTER_CHECK"):
    d = sensor.read().distances
    d = (d[0] if n_envs else d).double()
    z = float(robot.get_pos().reshape(-1, 3)[0, 2])
    print(f"check {float(d.mean()):.4f} {float(d.min()):.4f} {float(d.max()):.4f} {z:.3f}")
    sys.exit(0)
t0 = time.perf_counter()
for _ in range(steps):
    scene.step()
    if sensor is not None:
        sensor.read()
dt = time.perf_counter() - t0
print(f"result env_steps_per_s={steps * max(n_envs, 1) / dt:.1f}")
"""


def check(python, engine):
    """Environment 0's (mean, min, max) height-scan distance and base height after the warm-up steps, n_envs 2."""
    env = dict(os.environ, ENGINE=engine, RAYCASTER_CHECK="1")
    with measuring(f"the scan's values, {engine}"):
        res = subprocess.run([python, "-c", CHILD, "2", "0", "1"], capture_output=True, text=True, env=env,
                             timeout=1800)
    line = [x for x in res.stdout.splitlines() if x.startswith("check ")]
    if res.returncode != 0 or not line:
        print(f"({engine} failed, the scan's values: {res.stderr.strip()[-300:]})")
        return None
    return [float(x) for x in line[-1].split()[1:]]


def anchor_assets(python):
    """The `assets` folder of the Genesis World that `python` runs (found without importing it), or None."""
    code = ("import importlib.util, os; s = importlib.util.find_spec('genesis'); "
            "print(os.path.join(os.path.dirname(s.origin), 'assets') if s and s.origin else '')")
    res = subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=120)
    folder = res.stdout.strip()
    return folder if res.returncode == 0 and os.path.isdir(folder) else None


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--envs", type=int, nargs="+", default=[64])
    parser.add_argument("--assets", metavar="DIR", default=None,
                        help="a folder holding Genesis World's assets (urdf/go2/urdf/go2.urdf)")
    args = parser.parse_args()
    anchor = os.environ.get("GENESIS_WORLD_PYTHON")
    folders = [args.assets] if args.assets else []
    if args.assets and not os.path.isdir(args.assets):
        parser.error(f"--assets {args.assets}: no such folder")
    if anchor and anchor_assets(anchor):
        folders.append(anchor_assets(anchor))
    if folders:
        old = os.environ.get("GENESIS_CORE_ASSETS")
        os.environ["GENESIS_CORE_ASSETS"] = os.pathsep.join([os.path.abspath(f) for f in folders]
                                                            + ([old] if old else []))
    rows = []
    for n in args.envs:
        for with_sensor in (False, True):
            what = f"go2 {'with' if with_sensor else 'without'} a height scan at n_envs {n}"
            argv = [n, args.steps, int(with_sensor)]
            ours, theirs = rate_pair(CHILD, argv, what, anchor)
            rows.append((n, with_sensor, ours, theirs))
    print(f"\n| n_envs | sensor | genesis-core env-steps/s | Genesis World 1.4.5 env-steps/s | ratio | "
          f"genesis-core rays/s | Genesis World rays/s |")
    print("|---|---|---|---|---|---|---|")
    for n, with_sensor, ours, theirs in rows:
        kind = f"height scan ({N_RAYS} rays)" if with_sensor else "none"
        rays = [f"{r * N_RAYS:.3g}" if with_sensor and r else "-" for r in (ours, theirs)]
        print("| {} | {} | {} | {} | {} | {} | {} |".format(n, kind, *anchor_cells(ours, theirs, anchor), *rays))
    for engine, col in (("genesis-core", 2), ("Genesis World", 3)):
        for n in args.envs:
            bare = [r[col] for r in rows if r[0] == n and not r[1]][0]
            full = [r[col] for r in rows if r[0] == n and r[1]][0]
            if bare and full:
                extra = 1 / full - 1 / bare  # s per env-step the sensor adds
                alone = f"{N_RAYS / extra:.3g} rays/s" if extra > 0 else "not measurable (within the noise)"
                print(f"{engine} at n_envs {n}: the height scan (cast + read) takes {100 * (1 - full / bare):.0f}% "
                      f"of the step; over that share alone, {alone}")
    if anchor:
        values = [(name, check(python, engine)) for name, python, engine in
                  (("genesis-core", sys.executable, "genesis_core"), ("Genesis World", anchor, "genesis"))]
        for name, v in values:
            if v:
                print(f"{name}: env 0's scan after 31 steps: mean {v[0]:.4f} m, min {v[1]:.4f} m, max {v[2]:.4f} m "
                      f"(base at z = {v[3]:.3f} m)")
    else:
        print("(Genesis World skipped: set GENESIS_WORLD_PYTHON=$(../shared/anchors/make-venv))")
    if any(ours is None for _, _, ours, _ in rows):
        sys.exit(1)


if __name__ == "__main__":
    main()
