"""Resuming from a checkpoint in a fresh process: import + gs.init, build, load_checkpoint, first step.

Each figure comes from a new Python process, as a resumed job would start. "cold" uses an empty Taichi offline
cache (kernels compile), "warm" the cache the previous run filled. Prints one table.

    python benchmarks/resume.py [--n-envs 4096] [--runs 3]
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
import genesis_core as gs
mode, path, n_envs = sys.argv[1], sys.argv[2], int(sys.argv[3])
gs.init(backend=gs.cpu, precision="32")
t_init = time.perf_counter()
scene = gs.Scene(sim_options=gs.options.SimOptions(dt=1e-2, substeps=10))
for i in range(4):
    scene.add_entity(gs.morphs.Cylinder(pos=(i, 0, 2), height=1.0, radius=0.01, euler=(0, 20 * i, 0)),
                     material=gs.materials.SpringChain(n_nodes=16, stiffness=2000.0, damping=0.1))
scene.build(n_envs=n_envs)
t_build = time.perf_counter()
if mode == "save":
    for _ in range(50):
        scene.step()
    scene.save_checkpoint(path)
    print(json.dumps({}))
    sys.exit()
scene.load_checkpoint(path)
t_load = time.perf_counter()
scene.step()
t_step = time.perf_counter()
print(json.dumps({"import+init": t_init - t0, "build": t_build - t_init, "load": t_load - t_build,
                  "first step": t_step - t_load, "total": t_step - t0, "t": scene.t}))
"""


def child(mode, path, n_envs, cache):
    env = dict(os.environ, TI_OFFLINE_CACHE_FILE_PATH=cache)
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", CHILD, mode, path, str(n_envs)], capture_output=True, text=True,
                         env=env, check=True)
    wall = time.perf_counter() - t0
    result = json.loads(out.stdout.strip().splitlines()[-1])
    result["process wall"] = wall
    return result


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--n-envs", type=int, default=4096)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "run.ckpt")
        cache = os.path.join(tmp, "ticache")
        child("save", path, args.n_envs, os.path.join(tmp, "savecache"))
        size = os.path.getsize(path)
        rows = [("cold cache", child("load", path, args.n_envs, cache))]
        rows += [(f"warm cache #{i + 1}", child("load", path, args.n_envs, cache)) for i in range(args.runs)]
    cols = ["import+init", "build", "load", "first step", "total", "process wall"]
    print(f"resume from a checkpoint in a fresh process: 4 spring chains x 16 nodes, n_envs={args.n_envs}, "
          f"checkpoint {size / 1e6:.1f} MB")
    print(f"{'':<16}" + "".join(f"{c:>14}" for c in cols))
    for name, r in rows:
        assert r["t"] == 51
        print(f"{name:<16}" + "".join(f"{r[c]:>13.3f}s" for c in cols))
    warm = min(r["total"] for name, r in rows[1:])
    print(f"ours, warm cache: {warm:.2f} s from process start to the first resumed step. For scale only (another "
          f"scene): Genesis World 1.4.5 takes 7.1 s to init + 9.6 s to load the panda scene on this machine.")


if __name__ == "__main__":
    main()
