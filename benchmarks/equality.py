"""Equality constraints' speed: closed-loop mechanisms from MJCF (a four-bar linkage closed by a connect, a free
box welded to a pendulum, two hinges coupled by a joint equality), swinging under gravity, contact-free, at
several n_envs. Prints env-steps per second. With GENESIS_WORLD_PYTHON set
(GENESIS_WORLD_PYTHON=$(../shared/anchors/make-venv)), the same command runs the same model and script in Genesis
World 1.4.5 and prints its figures and the ratio beside ours; without it, it says the anchor was skipped.

    python benchmarks/equality.py [--steps 200] [--envs 0 64 512]
"""

import argparse
import os
import tempfile

from common import TIMED_STEPS, print_rate_table, rate_pair

MODEL = """<mujoco model="closed_loops">
  <default><geom contype="0" conaffinity="0"/></default>
  <worldbody>
    <body name="crank" pos="0 0 1">
      <joint name="j0" axis="0 1 0" damping="0.01"/>
      <geom type="capsule" fromto="0 0 0 0.2 0 0" size="0.02"/>
      <body name="coupler" pos="0.2 0 0">
        <joint name="j1" axis="0 1 0"/>
        <geom type="capsule" fromto="0 0 0 0.3 0 0.3" size="0.02"/>
      </body>
    </body>
    <body name="rocker" pos="0.4 0 1">
      <joint name="j2" axis="0 1 0"/>
      <geom type="capsule" fromto="0 0 0 0.1 0 0.3" size="0.02"/>
    </body>
    <body name="arm" pos="1 0 1">
      <joint name="j3" axis="1 0 0"/>
      <geom type="capsule" fromto="0 0 0 0 0.3 0" size="0.02"/>
    </body>
    <body name="box" pos="1.05 0.3 0.95" euler="10 20 30">
      <freejoint/>
      <geom type="box" size="0.05 0.03 0.02"/>
    </body>
    <body name="p1" pos="2 0 1">
      <joint name="j4" axis="0 1 0"/>
      <geom type="capsule" fromto="0 0 0 0.2 0 0" size="0.02"/>
    </body>
    <body name="p2" pos="2.5 0 1">
      <joint name="j5" axis="0 0 1"/>
      <geom type="capsule" fromto="0 0 0 0.1 0 0" size="0.02"/>
    </body>
  </worldbody>
  <equality>
    <connect body1="coupler" body2="rocker" anchor="0.3 0 0.3"/>
    <weld body1="box" body2="arm"/>
    <joint joint1="j5" joint2="j4" polycoef="0 1.5 0 0 0"/>
  </equality>
</mujoco>
"""

# the same script in both engines (the API is the same): ENGINE picks the import
CHILD = r"""
import importlib, os, sys, time
gs = importlib.import_module(os.environ["ENGINE"])
path, n_envs, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
gs.init(backend=gs.cpu, precision="32", logging_level="error")
scene = gs.Scene(sim_options=gs.options.SimOptions(dt=0.002), show_viewer=False)
scene.add_entity(gs.morphs.MJCF(file=path))
""" + TIMED_STEPS


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--envs", type=int, nargs="+", default=[0, 64, 512])
    args = parser.parse_args()
    anchor = os.environ.get("GENESIS_WORLD_PYTHON")
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "closed_loops.xml")
        with open(path, "w") as fh:
            fh.write(MODEL)
        rows = []
        for n in args.envs:
            what = f"closed loops at n_envs {n}"
            ours, theirs = rate_pair(CHILD, [path, n, args.steps], what, anchor)
            rows.append((n, ours, theirs))
    print_rate_table(rows, anchor)


if __name__ == "__main__":
    main()
