"""Rigid solver speed: the Franka panda (MJCF scene.xml: the arm on a plane) at n_envs 0, 64 and 512.

Prints build time (cold and warm Taichi offline cache, each in a fresh process) and env-steps per second, as one
table.

    python benchmarks/rigid.py [--steps 200] [--envs 0 64 512]
    python benchmarks/rigid.py --spheres 128 256 512     # the broadphase against the number of geoms
    python benchmarks/rigid.py --resting 16 64 128 256 512  # whole steps of n free spheres resting on a plane
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

SCENE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared", "assets", "mjcf",
                     "franka_emika_panda", "scene.xml")

CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
import torch
import genesis_core as gs
path, n_envs, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
gs.init(backend=gs.cpu, precision="32")
scene = gs.Scene(sim_options=gs.options.SimOptions(dt=0.01))
panda = scene.add_entity(gs.morphs.MJCF(file=path))
scene.build(n_envs=n_envs)
home = torch.tensor([0, 0, 0, -1.57079, 0, 1.57079, -0.7853, 0.04, 0.04])
panda.set_dofs_kp([100.0, 100.0], dofs_idx_local=[7, 8])
panda.control_dofs_position(home if n_envs == 0 else home.expand(n_envs, 9))
t_build = time.perf_counter()
scene.step()
t_first = time.perf_counter()
for _ in range(steps):
    scene.step()
t_end = time.perf_counter()
# profile: the time of each kernel launch (CPU launches are synchronous), the rest is Python around them
solver = scene.rigid_solver
inner, per = solver._launch, {}
class Timed:
    def __call__(self, kernel, *args):
        t = time.perf_counter()
        inner(kernel, *args)
        per[kernel.__name__] = per.get(kernel.__name__, 0.0) + time.perf_counter() - t
solver._launcher = Timed()
t_p = time.perf_counter()
for _ in range(steps):
    scene.step()
total = (time.perf_counter() - t_p) / steps * 1e6
profile = {k: v / steps * 1e6 for k, v in per.items()}
profile["python"] = total - sum(profile.values())
print(json.dumps({"start_to_build": t_build - t0, "first_step": t_first - t_build,
                  "steps_per_s": steps / (t_end - t_first), "n_envs": n_envs, "profile_us": profile}))
"""


def run(n_envs, steps, cache, **extra_env):
    env = dict(os.environ, TI_OFFLINE_CACHE_FILE_PATH=cache, **extra_env)
    out = subprocess.run([sys.executable, "-c", CHILD, SCENE, str(n_envs), str(steps)], capture_output=True,
                         text=True, env=env, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def broadphase(counts):
    """The collision kernel alone (broadphase and sphere contacts) for n free spheres resting on a grid over a
    plane: all n (n - 1) / 2 sphere pairs are candidates, a few per sphere touch."""
    import numpy as np

    import genesis_core as gs

    gs.init(backend=gs.cpu, precision="32", logging_level="warning")
    print(f"{'spheres':>8}{'candidate pairs':>17}{'collide, us':>13}")
    for n in counts:
        rng = np.random.default_rng(0)
        scene = gs.Scene()
        scene.add_entity(gs.morphs.Plane())
        side = int(np.ceil(n ** 0.5))
        for i in range(n):
            scene.add_entity(gs.morphs.Sphere(radius=0.05, pos=(0.12 * (i % side), 0.12 * (i // side),
                                                                0.05 + 0.2 * rng.random())))
        scene.build()
        solver = scene.rigid_solver
        for _ in range(5):
            solver._collide(0)
        t0 = time.perf_counter()
        for _ in range(200):
            solver._collide(0)
        print(f"{n:>8}{solver.n_pairs:>17}{(time.perf_counter() - t0) / 200 * 1e6:>13.0f}")


def resting(counts, steps=20):
    """Whole steps of n free spheres (6 n dofs) resting on a plane in a grid, every contact kept
    (max_contacts = 4 n): the dynamics and constraint stage against the number of bodies."""
    import numpy as np

    import genesis_core as gs

    gs.init(backend=gs.cpu, precision="32", logging_level="warning")
    print(f"{'spheres':>8}{'dofs':>7}{'ms/step':>10}{'lowest centre, m':>18}")
    for n in counts:
        rng = np.random.default_rng(0)
        scene = gs.Scene(sim_options=gs.options.SimOptions(dt=0.01),
                         rigid_options=gs.options.RigidOptions(max_contacts=4 * n))
        scene.add_entity(gs.morphs.Plane())
        side = int(np.ceil(n ** 0.5))
        balls = [scene.add_entity(gs.morphs.Sphere(radius=0.05, pos=(0.12 * (i % side), 0.12 * (i // side),
                                                                     0.05 + 0.2 * rng.random())))
                 for i in range(n)]
        scene.build()
        for _ in range(100):  # they land and settle
            scene.step()
        t0 = time.perf_counter()
        for _ in range(steps):
            scene.step()
        ms = (time.perf_counter() - t0) / steps * 1e3
        lowest = min(float(b.get_pos()[2]) for b in balls)
        print(f"{n:>8}{6 * n:>7}{ms:>10.2f}{lowest:>18.4f}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--envs", type=int, nargs="+", default=[0, 64, 512])
    parser.add_argument("--spheres", type=int, nargs="+", help="time the broadphase instead, for these sphere counts")
    parser.add_argument("--resting", type=int, nargs="+", help="time whole steps of this many resting spheres instead")
    args = parser.parse_args()
    if args.spheres:
        return broadphase(args.spheres)
    if args.resting:
        return resting(args.resting)
    if not os.path.isfile(SCENE):
        sys.exit(f"the panda model is not at {SCENE} (../shared/assets beside the clone)")
    with tempfile.TemporaryDirectory() as cache:
        t0 = time.perf_counter()
        cold = run(args.envs[0], 5, cache)
        cold_wall = time.perf_counter() - t0
        rows = [run(n, args.steps, cache) for n in args.envs]  # the default: bound launches
        plain = run(args.envs[0], args.steps, cache, GENESIS_CORE_BOUND_LAUNCH="0")
    print("panda (MJCF scene.xml: convex-hull mesh links) on a plane, dt 0.01, float32, position control to the home "
          "pose; up to 3 kernel launches per substep (primitive contacts, mesh contacts, dynamics)")
    print(f"build+first step, cold cache: {cold['start_to_build'] + cold['first_step']:.1f} s "
          f"(process wall {cold_wall:.1f} s); warm cache: "
          f"{rows[0]['start_to_build'] + rows[0]['first_step']:.1f} s")
    print(f"{'n_envs':>8}{'steps/s':>12}{'env-steps/s':>14}{'first step (warm)':>20}")
    for r in rows:
        b = max(r["n_envs"], 1)
        print(f"{r['n_envs']:>8}{r['steps_per_s']:>12.0f}{r['steps_per_s'] * b:>14.0f}{r['first_step']:>19.2f}s")
    print(f"n_envs {args.envs[0]} through Taichi's own launch path (GENESIS_CORE_BOUND_LAUNCH=0): "
          f"{plain['steps_per_s']:.0f} steps/s, {rows[0]['steps_per_s'] / plain['steps_per_s']:.2f}x slower")
    kernels = list(rows[0]["profile_us"])
    print("\nprofile, us per step:")
    print(f"{'n_envs':>8}" + "".join(f"{k:>18}" for k in kernels))
    for r in rows + [dict(plain, n_envs=f"{args.envs[0]} (Taichi's path)")]:
        print(f"{str(r['n_envs']):>8}" + "".join(f"{r['profile_us'].get(k, 0.0):>18.1f}" for k in kernels))
    print("reference on this machine (same file): Genesis World 1.4.5: 4.2k steps/s single, 34.8k env-steps/s at 64, "
          "17.4k at 512; MuJoCo 4.0: 42.7k steps/s single-threaded")


if __name__ == "__main__":
    main()
