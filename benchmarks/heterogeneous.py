"""Heterogeneous entities' speed: one entity with four shapes (boxes of 4 and 2 cm, spheres of 1.5 and 2.5 cm
radius, Genesis World's heterogeneous_simulation example), one per block of environments, dropped onto a plane and
settling there, at several n_envs. Prints env-steps per second. With GENESIS_WORLD_PYTHON set
(GENESIS_WORLD_PYTHON=$(../shared/anchors/make-venv)), the same command runs the same script in Genesis World 1.4.5
and prints its figures and the ratio beside ours; without it, it says the anchor was skipped.

    python benchmarks/heterogeneous.py [--steps 200] [--envs 4 64 512]
"""

import argparse
import os

from common import TIMED_STEPS, print_rate_table, rate_pair

# the same script in both engines (the API is the same): ENGINE picks the import
CHILD = r"""
import importlib, os, sys, time
gs = importlib.import_module(os.environ["ENGINE"])
n_envs, steps = int(sys.argv[1]), int(sys.argv[2])
gs.init(backend=gs.cpu, precision="32", logging_level="error")
scene = gs.Scene(sim_options=gs.options.SimOptions(dt=0.01), show_viewer=False)
scene.add_entity(gs.morphs.Plane())
scene.add_entity(morph=[
    gs.morphs.Box(size=(0.04, 0.04, 0.04), pos=(0.0, 0.0, 0.1)),
    gs.morphs.Box(size=(0.02, 0.02, 0.02), pos=(0.0, 0.0, 0.1)),
    gs.morphs.Sphere(radius=0.015, pos=(0.0, 0.0, 0.1)),
    gs.morphs.Sphere(radius=0.025, pos=(0.0, 0.0, 0.1)),
])
""" + TIMED_STEPS


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--envs", type=int, nargs="+", default=[4, 64, 512])
    args = parser.parse_args()
    if any(n < 1 for n in args.envs):
        parser.error("--envs: a heterogeneous entity needs environments (n_envs >= 1)")
    anchor = os.environ.get("GENESIS_WORLD_PYTHON")
    rows = []
    for n in args.envs:
        what = f"heterogeneous shapes at n_envs {n}"
        ours, theirs = rate_pair(CHILD, [n, args.steps], what, anchor)
        rows.append((n, ours, theirs))
    print_rate_table(rows, anchor)


if __name__ == "__main__":
    main()
