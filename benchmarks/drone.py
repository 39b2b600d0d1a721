"""Drones: a Crazyflie 2.x (Genesis World's urdf/drones/cf2x.urdf) hovering 1 m above a plane in every environment,
its four propellers set to the hover speed sqrt(m g / (4 KF)) before every step (set_propellers_rpm), dt 0.01,
float32, CPU. Prints env-steps per second. With GENESIS_WORLD_PYTHON set (GENESIS_WORLD_PYTHON=$(../shared/anchors/
make-venv)), the same command runs the same script in Genesis World 1.4.5 and prints its figures and the ratio
beside ours; without it, it says the anchor was skipped. Each row is a fresh process; the script checks that the
drone still hovers (within 1 cm of 1 m) after the timed steps.

    python benchmarks/drone.py [--envs 0 4096] [--steps 200]
"""

import argparse
import os

from common import print_rate_table, rate_pair

# the same script in both engines (the API is the same): ENGINE picks the import
CHILD = r"""
import importlib, math, os, sys, time
import torch
gs = importlib.import_module(os.environ["ENGINE"])
n_envs, steps = int(sys.argv[1]), int(sys.argv[2])
gs.init(backend=gs.cpu, precision="32", logging_level="error", seed=0)
scene = gs.Scene(sim_options=gs.options.SimOptions(dt=0.01), show_viewer=False)
scene.add_entity(gs.morphs.Plane())
drone = scene.add_entity(gs.morphs.Drone(file="urdf/drones/cf2x.urdf", pos=(0.0, 0.0, 1.0)))
scene.build(n_envs=n_envs) if n_envs else scene.build()
mass = float(drone.get_mass())
hover = math.sqrt(mass * 9.81 / (4 * drone.KF))
rpm = torch.full((n_envs, 4) if n_envs else (4,), hover, dtype=torch.float32)
def step():
    drone.set_propellers_rpm(rpm)
    scene.step()
for _ in range(31):  # past the compilation and the launch-mode trial
    step()
t0 = time.perf_counter()
for _ in range(steps):
    step()
dt = time.perf_counter() - t0
z = drone.get_pos()[..., 2]
assert bool((z - 1.0).abs().max() < 0.01), f"the drone left its hover: z in [{float(z.min())}, {float(z.max())}]"
print(f"result env_steps_per_s={steps * max(n_envs, 1) / dt:.1f}")
"""


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--envs", type=int, nargs="+", default=[0, 4096],
                        help="numbers of environments (0: unbatched)")
    args = parser.parse_args()
    if any(n < 0 for n in args.envs) or args.steps < 1:
        parser.error("--envs: 0 (unbatched) or more; --steps: at least 1")
    anchor = os.environ.get("GENESIS_WORLD_PYTHON")
    rows = []
    for n in args.envs:
        what = f"hovering cf2x at n_envs {n}"
        ours, theirs = rate_pair(CHILD, [n, args.steps], what, anchor)
        rows.append((n, ours, theirs))
    print_rate_table(rows, anchor)


if __name__ == "__main__":
    main()
