"""PBD cloth speed and memory: a 2 m square cloth of 64 x 64 vertices (x, y in [-1, 1], two triangles per grid
cell, written as an OBJ file) added with gs.materials.PBD.Cloth() and gs.morphs.Mesh at z 0.5, falling onto a
gs.morphs.Plane; default PBDOptions, dt 4e-3, 10 substeps, float32, CPU; for each number of environments, in
particle-substeps per second and resident memory per environment.

    python benchmarks/pbd.py [--envs 1 8 64] [--steps N] [--warmup N] [--n 64] [--no-anchor] [--json pbd.json]
    GENESIS_WORLD_PYTHON=$(../shared/anchors/make-venv) python benchmarks/pbd.py ...   # Genesis World 1.4.5 beside
    NEWTON_PYTHON=/path/to/python python benchmarks/pbd.py ...          # Newton XPBD cloth (newton_cloth.py) beside

Every row is a fresh process of this script (`--one N_ENVS`, `--engine genesis` for Genesis World), so that no
two scenes share a process and the memory figures are clean. One environment is built unbatched (scene.build()),
more with scene.build(n_envs=N). A row builds the scene, takes the warm-up steps (the first one compiles the
kernels) and times the next --steps steps only (not the build, which takes about 40 s in Genesis World):
particle-substeps/s = n_particles * substeps * steps * n_envs / seconds, where n_particles is the cloth entity's
own count. The engines do not simulate the same number of particles: ours simulates the mesh's vertices (4,096),
Genesis World remeshes the cloth to its particle_size (about 64,000 particles for this cloth), so the table shows
each engine's count and compares the rates per particle.

Default steps per row, a function of the engine and the number of environments, about 5-20 s a row on a 2-core
machine (ours does about 1e6 particle-substeps/s at 1 environment, 24 steps a second, and 2-3e6 over 64; Genesis
World about 5e5 over its 64,000 particles, under one step a second, and builds in about 40 s; Newton about 1.5e6):
ours round(240 / n_envs ** 0.75), at least 5 (240 at 1 environment, 50 at 8, 11 at 64); Genesis World
round(8 / n_envs ** 0.75), at least 1 (8, 2, 1); Newton round(256 / n_envs), at least 3 (256, 32, 4). Warm-up: 2
steps at 1 environment, 1 above (Newton's script takes its own: 1 + 3 steps). --steps and --warmup set them for
every engine. With the three anchors that is about 10 minutes, most of it Genesis World's builds and its 64
environments; --envs 1 8 or --steps shorten it.

Memory per environment: as in benchmarks/sph.py (the growth of VmRSS from just before scene.build() to just after
the warm-up; above 1 environment, the growth beyond the 1-environment figure over n_envs - 1, the 1-environment
figure from its own process).

With GENESIS_WORLD_PYTHON set, the same rows run in that python on Genesis World 1.4.5 (the same scene code, the
engine module picked by --engine). With NEWTON_PYTHON set (a python with newton installed), each number of
environments also runs benchmarks/newton_cloth.py N_ENVS STEPS in it: NVIDIA Newton's XPBD solver on Warp's CPU
device, the same 64 x 64 cloth (only at --n 64), replicated into one world per environment. Newton's cloth there
is springs along the edges and across adjacent triangles (stretch), dihedral bending, its default 2 XPBD
iterations and no self-collision; ours runs 4 stretch and 1 bending sweeps and particle self-collision (as Genesis
World does). Without either variable (or with --no-anchor) the table says which anchor was skipped. No figure is
checked: on a shared machine timings are noisy, compare figures from the same run.
"""

import argparse
import importlib
import json
import os
import re
import subprocess
import sys
import tempfile

from common import add_json_option, check_rows, per_env, row_in_process, timed_row, write_json

ENGINES = {"ours": "genesis_core", "genesis": "genesis"}
SUBSTEPS = 10


def default_steps(engine, n_envs):
    if engine == "genesis":
        return max(1, round(8 / n_envs ** 0.75))  # 1 -> 8, 8 -> 2, 64 -> 1
    if engine == "newton":
        return max(3, round(256 / n_envs))  # 1 -> 256, 8 -> 32, 64 -> 4
    return max(5, round(240 / n_envs ** 0.75))  # 1 -> 240, 8 -> 50, 64 -> 11


def default_warmup(n_envs):
    return 2 if n_envs == 1 else 1


def write_cloth(path, n):
    """An n x n vertex grid over [-1, 1]^2 at z 0, two triangles per cell, as an OBJ file (1-based faces)."""
    with open(path, "w") as fh:
        for j in range(n):
            for i in range(n):
                fh.write(f"v {-1 + 2 * i / (n - 1):.9g} {-1 + 2 * j / (n - 1):.9g} 0\n")
        for j in range(n - 1):
            for i in range(n - 1):
                a = j * n + i + 1
                fh.write(f"f {a} {a + 1} {a + n}\n")
                fh.write(f"f {a + 1} {a + n + 1} {a + n}\n")


def one(engine, n_envs, steps, warmup, n):
    """One row in this process: build, warm up, time; prints one `pbd-row {json}` line."""
    gs = importlib.import_module(ENGINES[engine])
    gs.init(backend=gs.cpu, precision="32", logging_level="error")
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, f"cloth_{n}.obj")
        write_cloth(path, n)
        scene = gs.Scene(sim_options=gs.options.SimOptions(dt=4e-3, substeps=SUBSTEPS), show_viewer=False)
        scene.add_entity(gs.morphs.Plane())
        cloth = scene.add_entity(material=gs.materials.PBD.Cloth(), morph=gs.morphs.Mesh(file=path, pos=(0, 0, 0.5)))
        t = timed_row(scene, n_envs, warmup, steps)
    p = int(cloth.n_particles)
    print("pbd-row " + json.dumps({
        "engine": engine, "n_envs": n_envs, "particles": p, "steps": steps, **t,
        "rate": p * SUBSTEPS * steps * n_envs / t["seconds"]}), flush=True)


def spawn(python, engine, n_envs, args):
    """One row in a fresh process of `python`; its figures, or None (and a line saying why) when it failed."""
    steps = args.steps if args.steps is not None else default_steps(engine, n_envs)
    warmup = args.warmup if args.warmup is not None else default_warmup(n_envs)
    cmd = [python, os.path.abspath(__file__), "--one", str(n_envs), "--engine", engine, "--steps", str(steps),
           "--warmup", str(warmup), "--n", str(args.n)]
    row = row_in_process(cmd, "pbd-row", f"{engine} at n_envs {n_envs}")
    if row is None:
        return None
    print(f"{engine:>8}{n_envs:>7}{row['particles']:>10}{row['steps']:>6}{row['build_s']:>10.1f}"
          f"{row['warmup_s']:>12.1f}{row['rate']:>22.3g}{row['growth'] / 2 ** 20:>11.1f}", flush=True)
    return row


def newton_row(python, n_envs, args):
    """benchmarks/newton_cloth.py N_ENVS STEPS in `python`: its figures, or None (and a line saying why)."""
    steps = args.steps if args.steps is not None else default_steps("newton", n_envs)
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "newton_cloth.py")
    try:
        res = subprocess.run([python, script, str(n_envs), str(steps)], capture_output=True, text=True,
                             timeout=3600)
    except (OSError, subprocess.TimeoutExpired) as e:
        print(f"(newton at n_envs {n_envs} failed: {e})", flush=True)
        return None
    line = [x for x in res.stdout.splitlines() if x.startswith("newton cloth ")]
    if res.returncode != 0 or not line:
        print(f"(newton at n_envs {n_envs} failed, exit {res.returncode}: "
              f"{(res.stderr.strip() or res.stdout.strip())[-1500:]})", flush=True)
        return None
    fields = dict(re.findall(r"(\w+)=(\S+)", line[-1]))
    row = {"engine": "newton", "n_envs": int(fields["n_envs"]), "particles": int(fields["particles"]),
           "steps": steps, "iterations": int(fields["iterations"]), "build_s": float(fields["build_s"]),
           "warmup_s": float(fields["first_step_s"]), "rate": float(fields["particle_substeps_per_s"])}
    print(f"{'newton':>8}{n_envs:>7}{row['particles']:>10}{steps:>6}{row['build_s']:>10.1f}"
          f"{row['warmup_s']:>12.1f}{row['rate']:>22.3g}{'-':>11}", flush=True)
    return row


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--envs", type=int, nargs="+", default=[1, 8, 64])
    parser.add_argument("--steps", type=int, default=None, help="timed steps per row, every engine (default: by "
                        "engine and n_envs; ours 240 at 1 environment, 50 at 8, 11 at 64)")
    parser.add_argument("--warmup", type=int, default=None,
                        help="untimed steps before them (default: 2 at 1 environment, 1 above)")
    parser.add_argument("--n", type=int, default=64, help="cloth vertices per side (default 64)")
    parser.add_argument("--no-anchor", action="store_true",
                        help="ours only, even with GENESIS_WORLD_PYTHON or NEWTON_PYTHON set")
    add_json_option(parser)
    parser.add_argument("--one", type=int, metavar="N_ENVS", help=argparse.SUPPRESS)
    parser.add_argument("--engine", choices=sorted(ENGINES), default="ours", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.n < 2:
        parser.error("--n: at least 2 vertices per side")
    if args.one is not None:
        n = args.one
        return one(args.engine, n, args.steps if args.steps is not None else default_steps(args.engine, n),
                   args.warmup if args.warmup is not None else default_warmup(n), args.n)
    check_rows(parser, args)
    python = None if args.no_anchor else os.environ.get("GENESIS_WORLD_PYTHON")
    newton = None if args.no_anchor or args.n != 64 else os.environ.get("NEWTON_PYTHON")
    engines = [("ours", sys.executable)] + ([("genesis", python)] if python else [])
    print(f"PBD cloth, {args.n} x {args.n} vertices over 2 m x 2 m at z 0.5, default PBDOptions, dt 4e-3, "
          f"10 substeps, float32, CPU; each row a fresh process")
    print(f"{'engine':>8}{'n_envs':>7}{'particles':>10}{'steps':>6}{'build, s':>10}{'warm-up, s':>12}"
          f"{'particle-substeps/s':>22}{'RSS+, MiB':>11}")
    rows, ours_failed = {}, False
    for engine, exe in engines:
        for n in args.envs:
            rows[engine, n] = spawn(exe, engine, n, args)
            ours_failed |= engine == "ours" and rows[engine, n] is None
        if 1 not in args.envs:  # the memory baseline, in its own process
            rows[engine, "base"] = spawn(exe, engine, 1, argparse.Namespace(steps=1, warmup=args.warmup, n=args.n))
    if newton:
        for n in args.envs:
            rows["newton", n] = newton_row(newton, n, args)
    if args.no_anchor:
        print("anchors skipped (--no-anchor)")
    else:
        if python is None:
            print("Genesis World anchor skipped: set GENESIS_WORLD_PYTHON=$(../shared/anchors/make-venv) to run "
                  "Genesis World 1.4.5 on the same scene in this command")
        if newton is None:
            print("Newton anchor skipped: " + ("its scene is the 64 x 64 cloth only (--n 64)" if args.n != 64 else
                  "set NEWTON_PYTHON to a python with newton installed to run benchmarks/newton_cloth.py in this "
                  "command"))
    print("\n| n_envs | ours particles | Genesis particles | Newton particles | ours p-substeps/s "
          "| Genesis p-substeps/s | Newton p-substeps/s | ours/Genesis | ours/Newton | ours memory/env, MiB "
          "| Genesis memory/env, MiB |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for n in args.envs:
        r = {e: rows.get((e, n)) for e in ("ours", "genesis", "newton")}
        count = {e: str(x["particles"]) if x else "-" for e, x in r.items()}
        rate = {e: f"{x['rate']:.3g}" if x else "-" for e, x in r.items()}
        ratio = {e: f"{r['ours']['rate'] / r[e]['rate']:.2f}x" if r["ours"] and r[e] else "-"
                 for e in ("genesis", "newton")}
        mib = {}
        for e in ("ours", "genesis"):
            m = per_env(r[e], rows.get((e, 1)) or rows.get((e, "base")))
            mib[e] = f"{m:.1f}" if m is not None else "-"
        print(f"| {n} | {count['ours']} | {count['genesis']} | {count['newton']} | {rate['ours']} "
              f"| {rate['genesis']} | {rate['newton']} | {ratio['genesis']} | {ratio['newton']} | {mib['ours']} "
              f"| {mib['genesis']} |")
    print("(particle-substeps/s counts each engine's own particles: ours simulates the mesh's vertices, Genesis "
          "World remeshes the cloth to its particle_size, so the counts differ and the ratios compare rates per "
          "particle)")
    print("(Newton: XPBD on Warp's CPU device, springs for stretch plus dihedral bending, its default 2 iterations, "
          "no self-collision; ours and Genesis World: 4 stretch and 1 bending sweeps plus particle self-collision)")
    print("(memory/env: the RSS growth over build and warm-up at 1 environment; above 1, the growth beyond the "
          "1-environment figure over n_envs - 1)")
    rate = {k: row["rate"] for k, row in rows.items() if row}
    write_json(args.json, "pbd", f"PBD cloth, {args.n} x {args.n} vertices", "particle-substeps/s",
               [{"scene": "cloth", "n_envs": n, "ours": rate.get(("ours", n)), "anchor": rate.get(("genesis", n)),
                 "others": {"Newton 1.8.0": rate.get(("newton", n))}} for n in args.envs])
    if ours_failed:
        sys.exit("ours failed on at least one row (above)")


if __name__ == "__main__":
    main()
