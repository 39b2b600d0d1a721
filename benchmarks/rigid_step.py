"""The rigid solver's time per step against another checkout's, for changes that must not cost speed: the panda
held at home (MJCF scene.xml, position control) and folding onto a plane (panda.xml, no control) at n_envs 0 and
64, and the backward of a differentiable run (a free box, and the panda folding, 30 steps from a joint velocity).

Each figure is the least time of --blocks blocks of 50 steps (of --blocks backwards) in one process; with --baseline
DIR the same process runs --rounds times on this checkout's code and on DIR's (PYTHONPATH=DIR:DIR/plugins/rigid,
e.g. from `git worktree add --detach DIR HEAD~3`), in turn, so that load on the machine falls on both alike, and the
table gives each side's least figure over the rounds and their ratio. The panda is in ../shared/assets.

    python benchmarks/rigid_step.py [--baseline DIR] [--rounds 4] [--blocks 7]
"""

import argparse
import json
import os
import subprocess
import sys

PANDA_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared", "assets", "mjcf",
                         "franka_emika_panda")
TAG = "RIGID_STEP_JSON"

CHILD = r"""
import json, sys, time
import torch
import genesis_core as gs
panda_dir, blocks = sys.argv[1], int(sys.argv[2])
gs.init(backend=gs.cpu, precision="32", logging_level="error")
out = {}

def least(fn):
    return min(fn() for _ in range(blocks))

for name, n_envs in (("held", 0), ("folding", 0), ("folding", 64)):
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=0.01), show_viewer=False)
    if name == "folding":
        scene.add_entity(gs.morphs.Plane())
    panda = scene.add_entity(gs.morphs.MJCF(file=f"{panda_dir}/{'panda' if name == 'folding' else 'scene'}.xml"))
    scene.build(n_envs=n_envs)
    if name == "held":
        panda.control_dofs_position(torch.tensor([0, 0, 0, -1.57079, 0, 1.57079, -0.7853, 0.04, 0.04]))
    for _ in range(60):  # past the first steps and the launch-mode trial
        scene.step()

    def block():
        t = time.perf_counter()
        for _ in range(50):
            scene.step()
        return (time.perf_counter() - t) / 50 * 1e6

    out[f"{name}, n_envs {n_envs}: us a step"] = least(block)

for name in ("box", "panda folding"):
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=0.01, requires_grad=True), show_viewer=False)
    scene.add_entity(gs.morphs.Plane())
    entity = scene.add_entity(gs.morphs.Box(pos=(0, 0, 0.3), size=(0.2, 0.2, 0.2)) if name == "box"
                              else gs.morphs.MJCF(file=f"{panda_dir}/panda.xml"))
    scene.build()

    def backward():
        scene.reset()
        v0 = torch.zeros(entity.n_dofs, requires_grad=True)
        with torch.no_grad():
            v0[:min(6, entity.n_dofs)] = 0.3
        entity.set_dofs_velocity(v0)
        for _ in range(30):
            scene.step()
        loss = entity.get_links_pos().pow(2).sum()
        t = time.perf_counter()
        loss.backward()
        return (time.perf_counter() - t) / 30 * 1e6

    backward()  # (the first backward compiles the reverse kernels)
    out[f"backward, {name}: us a step"] = least(backward)
print("RIGID_STEP_JSON " + json.dumps(out))
"""


def run(pythonpath, blocks):
    env = dict(os.environ)
    if pythonpath:
        env["PYTHONPATH"] = os.pathsep.join([pythonpath, os.path.join(pythonpath, "plugins", "rigid")]
                                            + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    res = subprocess.run([sys.executable, "-c", CHILD, PANDA_DIR, str(blocks)], capture_output=True, text=True,
                         env=env)
    line = [x for x in res.stdout.splitlines() if x.startswith(TAG)]
    if res.returncode or not line:
        raise SystemExit(f"the child failed:\n{res.stdout[-2000:]}\n{res.stderr[-2000:]}")
    return json.loads(line[0][len(TAG) + 1:])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", help="another checkout to compare with (its code through PYTHONPATH)")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--blocks", type=int, default=7)
    args = parser.parse_args()
    if not os.path.isdir(PANDA_DIR):
        raise SystemExit(f"the panda model is absent ({PANDA_DIR}): it lies in ../shared/assets beside the clone")
    ours, base = [], []
    for _ in range(args.rounds if args.baseline else 1):
        ours.append(run(None, args.blocks))
        if args.baseline:
            base.append(run(os.path.abspath(args.baseline), args.blocks))
    print("| figure | ours | baseline | ours / baseline |\n|---|---|---|---|")
    for key in ours[0]:
        a = min(r[key] for r in ours)
        if base:
            b = min(r[key] for r in base)
            print(f"| {key} | {a:.1f} | {b:.1f} | {a / b:.3f} |")
        else:
            print(f"| {key} | {a:.1f} | | |")
    print(f"(least of {args.blocks} blocks a process, and of {len(ours)} process(es) a side)")


if __name__ == "__main__":
    main()
