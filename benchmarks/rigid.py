"""Rigid solver speed: the Franka panda at n_envs 0, 64 and 512 (and more with --envs), in two scenes:

- held: MJCF scene.xml (the arm on its floor), position control to the home pose;
- folding: MJCF panda.xml on a gs.morphs.Plane, no control: the arm folds onto the floor and contacts pile up
  (the scene of ../shared/anchors/gs_franka_bench.py).

Prints build time (cold and warm Taichi offline cache, each in a fresh process) and env-steps per second, as one
table. With GENESIS_WORLD_PYTHON set (GENESIS_WORLD_PYTHON=$(../shared/anchors/make-venv)), the same command runs
Genesis World 1.4.5 on the same scenes and MuJoCo (from that venv) on the same model, and prints their figures
and the ratios beside ours; without it, it says the anchor was skipped.

    python benchmarks/rigid.py [--steps 200] [--envs 0 64 512] [--json rigid.json]
    python benchmarks/rigid.py --spheres 128 256 512     # the broadphase against the number of geoms
    python benchmarks/rigid.py --resting 16 64 128 256 512  # whole steps of n free spheres resting on a plane
    python benchmarks/rigid.py --pyramid 1024 [--steps 100]  # Genesis's falling pyramid: speed, memory per env
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

from common import add_json_option, measuring, write_json

PANDA_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared", "assets", "mjcf",
                         "franka_emika_panda")
SCENE = os.path.join(PANDA_DIR, "scene.xml")
HOME = [0, 0, 0, -1.57079, 0, 1.57079, -0.7853, 0.04, 0.04]

# steps before the timed ones, ours and Genesis World's alike (the first compiles; ours then runs its launch-mode
# trial, docs/rigid.md): both time the same stretch of the scene, which matters where the arm folds onto its floor
WARMUP = 31

CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
import torch
import genesis_core as gs
path, n_envs, steps, held = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "held"
warmup = int(sys.argv[5])
gs.init(backend=gs.cpu, precision="32")
scene = gs.Scene(sim_options=gs.options.SimOptions(dt=0.01))
if not held:
    scene.add_entity(gs.morphs.Plane())
panda = scene.add_entity(gs.morphs.MJCF(file=path))
scene.build(n_envs=n_envs)
if held:
    home = torch.tensor([0, 0, 0, -1.57079, 0, 1.57079, -0.7853, 0.04, 0.04])
    panda.set_dofs_kp([100.0, 100.0], dofs_idx_local=[7, 8])
    panda.control_dofs_position(home if n_envs == 0 else home.expand(n_envs, 9))
t_build = time.perf_counter()
scene.step()
t_first = time.perf_counter()
# batches of 2-512 time their first substeps on both copies of the kernels (docs/rigid.md, "Launch mode"): past them
solver = scene.rigid_solver
assert len(solver.TRIAL_PLAN) < warmup
for _ in range(warmup - 1):
    scene.step()
t_warm = time.perf_counter()
for _ in range(steps):
    scene.step()
t_end = time.perf_counter()
# profile: the time of each kernel launch (CPU launches are synchronous), the rest is Python around them
from genesis_core import launch
call, per = launch.Launcher.__call__, {}
def timed(self, kernel, *args):
    t = time.perf_counter()
    call(self, kernel, *args)
    per[kernel.__name__] = per.get(kernel.__name__, 0.0) + time.perf_counter() - t
launch.Launcher.__call__ = timed
t_p = time.perf_counter()
for _ in range(steps):
    scene.step()
total = (time.perf_counter() - t_p) / steps * 1e6
profile = {k: v / steps * 1e6 for k, v in per.items()}
profile["python"] = total - sum(profile.values())
print(json.dumps({"start_to_build": t_build - t0, "first_step": t_first - t_build,
                  "steps_per_s": steps / (t_end - t_warm), "n_envs": n_envs, "profile_us": profile,
                  "launch_mode": solver.launch_mode}))
"""


GENESIS_HELD = r"""
import sys, time, genesis as gs
n_envs, steps, warmup = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
gs.init(backend=gs.cpu, precision="32", logging_level="error")
scene = gs.Scene(sim_options=gs.options.SimOptions(dt=0.01), show_viewer=False)
scene.add_entity(gs.morphs.Plane())
panda = scene.add_entity(gs.morphs.MJCF(file="xml/franka_emika_panda/panda.xml"))
scene.build(n_envs=n_envs) if n_envs else scene.build()
import torch
home = torch.tensor(%r)
panda.set_dofs_kp(torch.tensor([4500.0, 4500, 3500, 3500, 2000, 2000, 2000, 100, 100]))
panda.set_dofs_kv(torch.tensor([450.0, 450, 350, 350, 200, 200, 200, 10, 10]))
panda.control_dofs_position(home if n_envs == 0 else home.expand(n_envs, 9))
for _ in range(warmup): scene.step()
t0 = time.time()
for _ in range(steps): scene.step()
print(f"genesis n_envs={n_envs} steps_per_s={steps / (time.time() - t0):.1f}")
""" % HOME

# ../shared/anchors/gs_franka_bench.py's scene (panda.xml on a plane, no control, Genesis's defaults: dt 0.01,
# float32), with the warm-up as an argument
GENESIS_FOLDING = r"""
import sys, time, genesis as gs
n_envs, steps, warmup = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
gs.init(backend=gs.cpu, logging_level="error")
scene = gs.Scene(show_viewer=False)
scene.add_entity(gs.morphs.Plane())
franka = scene.add_entity(gs.morphs.MJCF(file="xml/franka_emika_panda/panda.xml"))
scene.build(n_envs=n_envs) if n_envs else scene.build()
for _ in range(warmup): scene.step()
t0 = time.time()
for _ in range(steps): scene.step()
print(f"genesis n_envs={n_envs} steps_per_s={steps / (time.time() - t0):.1f}")
"""

MUJOCO = r"""
import sys, time, threading, mujoco, numpy as np
path, steps, held = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "held"
m = mujoco.MjModel.from_xml_path(path)
home = np.array(%r)
if not held:  # no control: the actuators exert nothing and the arm folds onto the floor
    m.actuator_gainprm[:, 0] = 0
    m.actuator_biasprm[:, :3] = 0
def make():
    d = mujoco.MjData(m)
    if held:
        d.qpos[:9] = home
        d.ctrl[:] = home[:m.nu] if m.nu <= 9 else 0
    return d
d = make()
for _ in range(10): mujoco.mj_step(m, d)
t0 = time.perf_counter()
for _ in range(steps): mujoco.mj_step(m, d)
single = steps / (time.perf_counter() - t0)
batch = [make() for _ in range(64)]
def work(ds):
    for _ in range(max(steps // 8, 10)):
        for x in ds: mujoco.mj_step(m, x)
threads = [threading.Thread(target=work, args=(batch[i::2],)) for i in range(2)]
t0 = time.perf_counter()
for t in threads: t.start()
for t in threads: t.join()
multi = 64 * max(steps // 8, 10) / (time.perf_counter() - t0)
print(f"mujoco single={single:.0f} two_threads={multi:.0f}")
""" % HOME


PYRAMID = r"""
import sys, time
def rss():
    with open("/proc/self/status") as fh:
        return next(int(l.split()[1]) * 1024 for l in fh if l.startswith("VmRSS"))
engine, n_envs, steps, warmup = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
import numpy as np
if engine == "ours":
    import genesis_core as gs
    gs.init(backend=gs.cpu, precision="32", logging_level="warning")
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=0.01))
else:
    import genesis as gs
    gs.init(backend=gs.cpu, precision="32", logging_level="error")
    try:  # the example's options
        ro = gs.options.RigidOptions(box_box_detection=False, max_collision_pairs=1000, use_gjk_collision=True,
                                     enable_mujoco_compatibility=False)
    except Exception:
        ro = gs.options.RigidOptions(max_collision_pairs=1000)
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=0.01), rigid_options=ro, show_viewer=False)
scene.add_entity(gs.morphs.Plane())
size, spacing = 0.25, 1.1 * 0.25
offset = np.array([-0.5, 1.0, 0.0]) + 0.5 * size
boxes = []
for i in range(5):
    for j in range(5 - i):
        boxes.append(scene.add_entity(gs.morphs.Box(size=(size,) * 3, pos=offset + spacing * np.array([i + 0.5 * j, 0, j]))))
before = rss()
scene.build(n_envs=n_envs) if n_envs else scene.build()
for _ in range(warmup):  # both engines alike (WARMUP)
    scene.step()
after = rss()
t0 = time.perf_counter()
for _ in range(steps):
    scene.step()
dt = time.perf_counter() - t0
top = float(np.asarray(boxes[4].get_pos()).reshape(-1, 3)[:, 2].min())
extra = ""
if engine == "ours":
    extra = f" arrays_per_env={sum(scene.rigid_solver.memory_per_env().values())}"
print(f"pyramid {engine} n_envs={n_envs} env_steps_per_s={steps * max(n_envs, 1) / dt:.0f} "
      f"rss_per_env={(after - before) / max(n_envs, 1):.0f} top_z={top:.3f}{extra}")
"""


def pyramid(counts, steps):
    """Genesis's examples/collision/pyramid.py (falling, 15 cubes) at these n_envs: env-steps/s and the memory each
    environment costs (the growth of resident memory from before build to after 10 steps, at n_envs and at 1
    environment: their difference over n_envs - 1), for ours and, with GENESIS_WORLD_PYTHON, for Genesis World in
    the same command; ours also sums its state and scratch arrays per environment."""
    python = os.environ.get("GENESIS_WORLD_PYTHON")
    rows = []

    def one(engine, exe, n):
        with measuring(f"pyramid, {engine} at n_envs {n}"):
            res = subprocess.run([exe, "-c", PYRAMID, engine, str(n), str(steps), str(WARMUP)], capture_output=True,
                                 text=True, timeout=3600)
        line = [x for x in res.stdout.splitlines() if x.startswith("pyramid ")]
        if res.returncode != 0 or not line:
            print(f"({engine} failed at n_envs {n}: {res.stderr.strip()[-300:]})")
            return None
        return dict(kv.split("=") for kv in line[-1].split()[2:])

    for engine, exe in (("ours", sys.executable), ("genesis", python)):
        if exe is None:
            continue
        base = one(engine, exe, 1)  # what does not grow with the batch (compiled kernels, the model)
        for n in counts:
            r = one(engine, exe, n)
            if r is None or base is None:
                continue
            # the memory each further environment costs: (RSS growth at n - RSS growth at 1) / (n - 1)
            r["rss_per_env"] = str(int((float(r["rss_per_env"]) * n - float(base["rss_per_env"])) / max(n - 1, 1)))
            rows.append(r | {"engine": engine})
    if python is None:
        print("anchor skipped: set GENESIS_WORLD_PYTHON=$(../shared/anchors/make-venv) to run Genesis World on the "
              "same scene in this command")
    print("\n| engine | n_envs | env-steps/s | memory per env (RSS), KB | arrays per env, KB | top cube's z (lowest env), m |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        arrays = f"{int(r['arrays_per_env']) / 1024:.1f}" if "arrays_per_env" in r else "-"
        print(f"| {r['engine']} | {r['n_envs']} | {int(r['env_steps_per_s']):,} | {int(r['rss_per_env']) / 1024:.1f} "
              f"| {arrays} | {r['top_z']} |")
    for n in counts:
        ours = [r for r in rows if r["engine"] == "ours" and int(r["n_envs"]) == n]
        theirs = [r for r in rows if r["engine"] == "genesis" and int(r["n_envs"]) == n]
        if ours and theirs:
            print(f"n_envs {n}: ours / Genesis speed {int(ours[0]['env_steps_per_s']) / int(theirs[0]['env_steps_per_s']):.2f}x, "
                  f"memory per env {int(ours[0]['rss_per_env']) / max(int(theirs[0]['rss_per_env']), 1):.2f}x")


def run(n_envs, steps, cache, scene="held", **extra_env):
    env = dict(os.environ, TI_OFFLINE_CACHE_FILE_PATH=cache, **extra_env)
    path = SCENE if scene == "held" else os.path.join(PANDA_DIR, "panda.xml")
    with measuring(f"{scene} panda, ours at n_envs {n_envs}"):
        out = subprocess.run([sys.executable, "-c", CHILD, path, str(n_envs), str(steps), scene, str(WARMUP)],
                             capture_output=True, text=True, env=env, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def anchor(args, timeout=1800):
    """Genesis World's env-steps/s per scene and n_envs, and MuJoCo's; None where GENESIS_WORLD_PYTHON is unset."""
    python = os.environ.get("GENESIS_WORLD_PYTHON")
    if not python:
        return None
    out = {"genesis": {}, "mujoco": {}}
    for scene in ("held", "folding"):
        for n in args.envs:
            cmd = [python, "-c", GENESIS_FOLDING if scene == "folding" else GENESIS_HELD, str(n), str(args.steps),
                   str(WARMUP)]
            with measuring(f"{scene} panda, Genesis World at n_envs {n}"):
                res = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
            line = [x for x in res.stdout.splitlines() if x.startswith("genesis ")]
            if res.returncode != 0 or not line:
                out["genesis"][(scene, n)] = None
                print(f"(Genesis World failed on {scene} at n_envs {n}: {res.stderr.strip()[-300:]})")
                continue
            steps_per_s = float(line[-1].split("steps_per_s=")[1].split()[0])
            out["genesis"][(scene, n)] = steps_per_s * max(n, 1)
        with measuring(f"{scene} panda, MuJoCo"):
            res = subprocess.run([python, "-c", MUJOCO, SCENE, str(args.steps * 10),
                                  scene], capture_output=True, text=True, timeout=timeout)
        line = [x for x in res.stdout.splitlines() if x.startswith("mujoco ")]
        out["mujoco"][scene] = tuple(float(x.split("=")[1]) for x in line[-1].split()[1:]) if line else None
    return out


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
    parser.add_argument("--pyramid", type=int, nargs="+", help="Genesis's falling pyramid at these n_envs instead")
    add_json_option(parser)
    args = parser.parse_args()
    if args.pyramid:
        return pyramid(args.pyramid, args.steps)
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
        folding = [run(n, args.steps, cache, scene="folding") for n in args.envs]
        plain = run(args.envs[0], args.steps, cache, GENESIS_CORE_BOUND_LAUNCH="0")
    anchors = anchor(args)
    print("panda on a plane, dt 0.01, float32; held: scene.xml, position control to the home pose; folding: "
          "panda.xml on a plane, no control (contacts pile up); up to 3 kernel launches per substep (primitive "
          "contacts, mesh and box contacts, dynamics)")
    print(f"build+first step, cold cache: {cold['start_to_build'] + cold['first_step']:.1f} s "
          f"(process wall {cold_wall:.1f} s); warm cache: "
          f"{rows[0]['start_to_build'] + rows[0]['first_step']:.1f} s")
    if anchors is None:
        print("anchor skipped: set GENESIS_WORLD_PYTHON=$(../shared/anchors/make-venv) to run Genesis World and "
              "MuJoCo on the same scenes in this command")
    print("\n| scene | n_envs | ours, env-steps/s | Genesis World 1.4.5, env-steps/s | ours / Genesis "
          "| ours' launch mode |")
    print("|---|---|---|---|---|---|")
    figures = []
    for scene, table in (("held", rows), ("folding", folding)):
        for r in table:
            ours = r["steps_per_s"] * max(r["n_envs"], 1)
            theirs = anchors["genesis"].get((scene, r["n_envs"])) if anchors else None
            ratio = f"{ours / theirs:.2f}x" if theirs else "-"
            print(f"| {scene} | {r['n_envs']} | {ours:,.0f} | {f'{theirs:,.0f}' if theirs else '-'} | {ratio} "
                  f"| {r['launch_mode']} |")
            figures.append({"scene": scene, "n_envs": r["n_envs"], "ours": ours, "anchor": theirs})
    write_json(args.json, "rigid", "Franka panda, float32, dt 0.01", "env-steps/s", figures)
    if anchors:
        for scene in ("held", "folding"):
            mj = anchors["mujoco"].get(scene)
            if mj:
                last = (rows if scene == "held" else folding)[-1]
                ours = last["steps_per_s"] * max(last["n_envs"], 1)
                print(f"MuJoCo (same venv), {scene}: {mj[0]:,.0f} steps/s on one thread, {mj[1]:,.0f} env-steps/s "
                      f"with two threads over 64 environments; ours at {last['n_envs']} environments / MuJoCo on "
                      f"two threads: {ours / mj[1]:.2f}x")
    print(f"\nn_envs {args.envs[0]} (held) through Taichi's own launch path (GENESIS_CORE_BOUND_LAUNCH=0): "
          f"{plain['steps_per_s']:.0f} steps/s, {rows[0]['steps_per_s'] / plain['steps_per_s']:.2f}x slower")
    kernels = sorted({k for r in rows + folding for k in r["profile_us"]})
    print("\nprofile, us per step:")
    print(f"{'scene':>8}{'n_envs':>8}" + "".join(f"{k:>18}" for k in kernels))
    for scene, table in (("held", rows + [dict(plain, n_envs=f"{args.envs[0]}*")]), ("folding", folding)):
        for r in table:
            print(f"{scene:>8}{str(r['n_envs']):>8}" + "".join(f"{r['profile_us'].get(k, 0.0):>18.1f}" for k in kernels))
    print("(* Taichi's own launch path)")


if __name__ == "__main__":
    main()
