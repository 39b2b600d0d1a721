"""A kinematic twin's cost: a go2 standing on a plane in every environment (PD-held at its standing pose), stepped
alone, then beside a kinematic go2 (gs.materials.Kinematic) whose 12 joint angles are set before every step (a
reference motion, Genesis World's kinematic/go2_kinematic.py). Prints env-steps per second of both. With
GENESIS_WORLD_PYTHON set (GENESIS_WORLD_PYTHON=$(../shared/anchors/make-venv)), the same command runs the same
script in Genesis World 1.4.5 and prints its figures and the ratio beside ours; without it, it says the anchor was
skipped. Needs Genesis World's go2 (urdf/go2/urdf/go2.urdf) on the asset path (GENESIS_CORE_ASSETS).

    python benchmarks/kinematic.py [--steps 100] [--envs 1 512]
"""

import argparse
import os

from common import GO2_STAND, print_rate_table, rate_pair

# the same script in both engines (the API is the same): ENGINE picks the import
CHILD = r"""
import importlib, math, os, sys, time
import torch
gs = importlib.import_module(os.environ["ENGINE"])
n_envs, steps, with_twin = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "1"
gs.init(backend=gs.cpu, precision="32", logging_level="error", seed=0)
scene = gs.Scene(sim_options=gs.options.SimOptions(dt=0.01), show_viewer=False)
scene.add_entity(gs.morphs.Plane())
robot = scene.add_entity(gs.morphs.URDF(file="urdf/go2/urdf/go2.urdf", pos=(0.0, 0.0, 0.42)))
twin = None
if with_twin:
    twin = scene.add_entity(gs.morphs.URDF(file="urdf/go2/urdf/go2.urdf", pos=(0.0, 0.0, 0.42)),
                            material=gs.materials.Kinematic())
scene.build(n_envs=n_envs)
""" + GO2_STAND + r"""
def run(k):
    for i in range(k):
        if twin is not None:
            ref = stand.clone()
            ref[[1, 4, 7, 10]] += 0.3 * math.sin(0.1 * i)
            twin.set_dofs_position(ref.expand(n_envs, 12), dofs)
        scene.step()

run(31)  # past the compilation and the launch-mode trial
t0 = time.perf_counter()
run(steps)
dt = time.perf_counter() - t0
print(f"result env_steps_per_s={steps * n_envs / dt:.1f}")
"""


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--envs", type=int, nargs="+", default=[1, 512])
    args = parser.parse_args()
    anchor = os.environ.get("GENESIS_WORLD_PYTHON")
    rows = []
    for n in args.envs:
        for with_twin in (False, True):
            what = f"go2 {'with' if with_twin else 'without'} a kinematic twin at n_envs {n}"
            argv = [n, args.steps, int(with_twin)]
            ours, theirs = rate_pair(CHILD, argv, what, anchor)
            kind = "go2 + kinematic twin (12 angles set each step)" if with_twin else "go2 alone"
            rows.append((n, kind, ours, theirs))
    print_rate_table(rows, anchor, ("n_envs", "scene"))


if __name__ == "__main__":
    main()
