"""Sensors' cost: a box resting on a plane in every environment, stepped without sensors, then with an IMU (with
noise, bias and a 2-step delay), a ContactForce and a Contact sensor on the box, each read after every step.
Prints env-steps per second of both, and the sensors' share of the step. With GENESIS_WORLD_PYTHON set
(GENESIS_WORLD_PYTHON=$(../shared/anchors/make-venv)), the same command runs the same script in Genesis World
1.4.5 and prints its figures and the ratio beside ours; without it, it says the anchor was skipped.

    python benchmarks/sensors.py [--steps 200] [--envs 512]
"""

import argparse
import os
import sys

from common import anchor_cells, rate_pair

# the same script in both engines (the API is the same): ENGINE picks the import
CHILD = r"""
import importlib, os, sys, time
gs = importlib.import_module(os.environ["ENGINE"])
n_envs, steps, with_sensors = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "1"
gs.init(backend=gs.cpu, precision="32", logging_level="error", seed=0)
scene = gs.Scene(sim_options=gs.options.SimOptions(dt=0.01), show_viewer=False)
scene.add_entity(gs.morphs.Plane())
box = scene.add_entity(gs.morphs.Box(pos=(0.0, 0.0, 0.05), size=(0.1, 0.1, 0.1)))
sensors = []
if with_sensors:
    sensors = [
        scene.add_sensor(gs.sensors.IMU(entity_idx=box.idx, acc_noise=0.01, gyro_noise=0.01, acc_bias=0.05,
                                        delay=0.02)),
        scene.add_sensor(gs.sensors.ContactForce(entity_idx=box.idx)),
        scene.add_sensor(gs.sensors.Contact(entity_idx=box.idx)),
    ]
scene.build(n_envs=n_envs) if n_envs else scene.build()
for _ in range(31):  # past the compilation and the launch-mode trial
    scene.step()
    for s in sensors:
        s.read()
t0 = time.perf_counter()
for _ in range(steps):
    scene.step()
    for s in sensors:
        s.read()
dt = time.perf_counter() - t0
print(f"result env_steps_per_s={steps * max(n_envs, 1) / dt:.1f}")
"""


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--envs", type=int, nargs="+", default=[512])
    args = parser.parse_args()
    anchor = os.environ.get("GENESIS_WORLD_PYTHON")
    rows = []
    for n in args.envs:
        for with_sensors in (False, True):
            what = f"box on a plane {'with' if with_sensors else 'without'} sensors at n_envs {n}"
            argv = [n, args.steps, int(with_sensors)]
            ours, theirs = rate_pair(CHILD, argv, what, anchor)
            rows.append((n, with_sensors, ours, theirs))
    print("\n| n_envs | sensors | genesis-core env-steps/s | Genesis World 1.4.5 env-steps/s | ratio |")
    print("|---|---|---|---|---|")
    for n, with_sensors, ours, theirs in rows:
        kind = "IMU + ContactForce + Contact" if with_sensors else "none"
        print("| {} | {} | {} | {} | {} |".format(n, kind, *anchor_cells(ours, theirs, anchor)))
    for engine, col in (("genesis-core", 2), ("Genesis World", 3)):
        for n in args.envs:
            bare = [r[col] for r in rows if r[0] == n and not r[1]][0]
            full = [r[col] for r in rows if r[0] == n and r[1]][0]
            if bare and full:
                print(f"{engine} at n_envs {n}: the sensors (update + reads) take {100 * (1 - full / bare):.0f}% "
                      "of the step")
    if not anchor:
        print("(Genesis World skipped: set GENESIS_WORLD_PYTHON=$(../shared/anchors/make-venv))")
    if any(ours is None for _, _, ours, _ in rows):
        sys.exit(1)


if __name__ == "__main__":
    main()
