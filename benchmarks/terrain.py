"""Terrain's cost: a go2 standing (PD-held at its standing pose) on a 1 m x 1 m random height field (Genesis World's
random_uniform_terrain, 11 x 11 vertices 0.1 m apart, bumps of +-2 cm) in every environment, against the same go2
on a plane. Prints env-steps per second. With GENESIS_WORLD_PYTHON set (GENESIS_WORLD_PYTHON=$(../shared/anchors/make-venv)),
the same command runs the same script in Genesis World 1.4.5 and prints its figures and the ratio beside ours;
without it, it says the anchor was skipped. Needs Genesis World's go2 (urdf/go2/urdf/go2.urdf) on the asset path
(GENESIS_CORE_ASSETS).

    python benchmarks/terrain.py [--steps 100] [--envs 1 512 4096]
"""

import argparse
import os

from common import GO2_STAND, print_rate_table, rate_pair

# the same script in both engines (the API is the same): ENGINE picks the import
CHILD = r"""
import importlib, os, sys, time
import torch
gs = importlib.import_module(os.environ["ENGINE"])
n_envs, steps, terrain = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "1"
gs.init(backend=gs.cpu, precision="32", logging_level="error", seed=0)
scene = gs.Scene(sim_options=gs.options.SimOptions(dt=0.01), show_viewer=False)
if terrain:
    scene.add_entity(gs.morphs.Terrain(
        n_subterrains=(1, 1), subterrain_size=(1.0, 1.0), horizontal_scale=0.1, vertical_scale=0.005,
        subterrain_types="random_uniform_terrain", pos=(-0.5, -0.5, 0.0),
        subterrain_parameters={"random_uniform_terrain": {"min_height": -0.02, "max_height": 0.02, "step": 0.01,
                                                          "downsampled_scale": 0.2}}))
else:
    scene.add_entity(gs.morphs.Plane())
robot = scene.add_entity(gs.morphs.URDF(file="urdf/go2/urdf/go2.urdf", pos=(0.0, 0.0, 0.45)))
scene.build(n_envs=n_envs)
""" + GO2_STAND + r"""
def run(k):
    for i in range(k):
        scene.step()

run(31)  # past the compilation and the launch-mode trial
t0 = time.perf_counter()
run(steps)
dt = time.perf_counter() - t0
z = float(robot.get_pos()[:, 2].min())
print(f"base height {z:.3f} m (lowest environment)", file=sys.stderr)
print(f"result env_steps_per_s={steps * n_envs / dt:.1f}")
"""


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--envs", type=int, nargs="+", default=[1, 512, 4096])
    args = parser.parse_args()
    anchor = os.environ.get("GENESIS_WORLD_PYTHON")
    rows = []
    for n in args.envs:
        for terrain in (True, False):
            what = f"go2 on {'random terrain' if terrain else 'a plane'} at n_envs {n}"
            argv = [n, args.steps, int(terrain)]
            ours, theirs = rate_pair(CHILD, argv, what, anchor)
            rows.append((n, "go2 on 1 m x 1 m random terrain" if terrain else "go2 on a plane", ours, theirs))
    print_rate_table(rows, anchor, ("n_envs", "scene"))


if __name__ == "__main__":
    main()
