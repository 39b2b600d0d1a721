"""SPH speed and memory on Genesis World's SPH tutorial scene: a 0.4 m cube of water (gs.materials.SPH.Liquid,
gs.morphs.Box at z 0.65) falling onto a gs.morphs.Plane in the domain (-0.5, -0.5, 0) to (0.5, 0.5, 1),
particle_size 0.01 (64,000 particles), dt 4e-3, 10 substeps, float32, CPU; for each pressure solver (WCSPH,
DFSPH) and each number of environments, in particle-substeps per second and resident memory per environment.

    python benchmarks/sph.py [--solvers WCSPH DFSPH] [--envs 1 8 64] [--steps N] [--warmup N] [--particle-size 0.01]
                             [--no-anchor] [--json sph.json]
    GENESIS_WORLD_PYTHON=$(../shared/anchors/make-venv) python benchmarks/sph.py ...   # Genesis World 1.4.5 beside

Every row is a fresh process of this script (`--one SOLVER N_ENVS`, `--engine genesis` for Genesis World), so that
no two scenes share a process and the memory figures are clean. One environment is built unbatched
(scene.build(), n_envs=0, as in the tutorial), more with scene.build(n_envs=N). A row builds the scene, takes the
warm-up steps (the first one compiles the kernels) and times the next --steps steps only (not the build, which
can take a minute in Genesis World): particle-substeps/s = n_particles * substeps * steps * n_envs / seconds.
By default the steps shrink as the batch grows (10 at 1 environment, 3 at 8, 1 at 64; warm-up 2 steps at 1
environment, 1 above): 172 environment-steps of 64,000 particles per solver, 128 of them at 64 environments, the
least that row can take. At Genesis World's speed on a 2-core machine (about 3.8e5 particle-substeps/s with
WCSPH, a third of that with DFSPH) that is about 5 + 15 minutes per engine, plus the builds (up to a minute each
in Genesis World); --envs 1 8 or --steps, --warmup shorten it.

Memory per environment: the growth of the process's resident memory (VmRSS in /proc/self/status) from just
before scene.build() to just after the warm-up steps. At 1 environment the figure is that whole growth (the
state, the solver's scratch and the compiled kernels); at N > 1 it is (growth at N - growth at 1) / (N - 1), the
cost of one more environment, with the 1-environment figure measured in its own process (the 1-environment row,
or an extra process when --envs has no 1), so that what does not grow with the batch cancels out.

With GENESIS_WORLD_PYTHON set, the same rows run in that python on Genesis World 1.4.5 (the same scene code, the
engine module picked by --engine), and the table at the end holds both figures and their ratio; without it, it
says the anchor was skipped. No figure is checked: on a shared machine timings are noisy, compare figures from
the same run.
"""

import argparse
import importlib
import json
import os
import sys

from common import add_json_option, check_rows, per_env, row_in_process, timed_row, write_json

ENGINES = {"ours": "genesis_core", "genesis": "genesis"}


def default_steps(n_envs):
    return max(1, min(10, round(24 / n_envs)))  # 1 -> 10, 8 -> 3, 64 -> 1


def default_warmup(n_envs):
    return 2 if n_envs == 1 else 1


def one(engine, solver, n_envs, steps, warmup, particle_size):
    """One row in this process: build, warm up, time; prints one `sph-row {json}` line."""
    gs = importlib.import_module(ENGINES[engine])
    gs.init(backend=gs.cpu, precision="32", logging_level="error")
    substeps = 10
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=4e-3, substeps=substeps),
                     sph_options=gs.options.SPHOptions(lower_bound=(-0.5, -0.5, 0.0), upper_bound=(0.5, 0.5, 1.0),
                                                       particle_size=particle_size, pressure_solver=solver),
                     show_viewer=False)
    scene.add_entity(gs.morphs.Plane())
    water = scene.add_entity(material=gs.materials.SPH.Liquid(),
                             morph=gs.morphs.Box(pos=(0.0, 0.0, 0.65), size=(0.4, 0.4, 0.4)))
    t = timed_row(scene, n_envs, warmup, steps)
    n = int(water.n_particles)
    print("sph-row " + json.dumps({
        "engine": engine, "solver": solver, "n_envs": n_envs, "particles": n, "steps": steps, **t,
        "rate": n * substeps * steps * n_envs / t["seconds"]}), flush=True)


def spawn(python, engine, solver, n_envs, args):
    """One row in a fresh process of `python`; its figures, or None (and a line saying why) when it failed."""
    steps = args.steps if args.steps is not None else default_steps(n_envs)
    warmup = args.warmup if args.warmup is not None else default_warmup(n_envs)
    cmd = [python, os.path.abspath(__file__), "--one", solver, str(n_envs), "--engine", engine, "--steps",
           str(steps), "--warmup", str(warmup), "--particle-size", str(args.particle_size)]
    row = row_in_process(cmd, "sph-row", f"{engine} on {solver} at n_envs {n_envs}")
    if row is None:
        return None
    print(f"{engine:>8}{solver:>7}{n_envs:>7}{row['particles']:>10}{row['steps']:>6}{row['build_s']:>10.1f}"
          f"{row['warmup_s']:>12.1f}{row['rate']:>22.3g}{row['growth'] / 2 ** 20:>11.1f}", flush=True)
    return row


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--solvers", nargs="+", default=["WCSPH", "DFSPH"], choices=["WCSPH", "DFSPH"])
    parser.add_argument("--envs", type=int, nargs="+", default=[1, 8, 64])
    parser.add_argument("--steps", type=int, default=None,
                        help="timed steps per row (default: 10 at 1 environment, 3 at 8, 1 at 64)")
    parser.add_argument("--warmup", type=int, default=None,
                        help="untimed steps before them (default: 2 at 1 environment, 1 above)")
    parser.add_argument("--particle-size", type=float, default=0.01)
    parser.add_argument("--no-anchor", action="store_true", help="ours only, even with GENESIS_WORLD_PYTHON set")
    add_json_option(parser)
    parser.add_argument("--one", nargs=2, metavar=("SOLVER", "N_ENVS"), help=argparse.SUPPRESS)
    parser.add_argument("--engine", choices=sorted(ENGINES), default="ours", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        n = int(args.one[1])
        return one(args.engine, args.one[0], n, args.steps if args.steps is not None else default_steps(n),
                   args.warmup if args.warmup is not None else default_warmup(n), args.particle_size)
    check_rows(parser, args)
    python = None if args.no_anchor else os.environ.get("GENESIS_WORLD_PYTHON")
    engines = [("ours", sys.executable)] + ([("genesis", python)] if python else [])
    print(f"SPH water cube, particle_size {args.particle_size}, dt 4e-3, 10 substeps, float32, CPU; each row a "
          f"fresh process")
    print(f"{'engine':>8}{'solver':>7}{'n_envs':>7}{'particles':>10}{'steps':>6}{'build, s':>10}{'warm-up, s':>12}"
          f"{'particle-substeps/s':>22}{'RSS+, MiB':>11}")
    rows, ours_failed = {}, False
    for solver in args.solvers:
        for engine, exe in engines:
            for n in args.envs:
                rows[engine, solver, n] = spawn(exe, engine, solver, n, args)
                ours_failed |= engine == "ours" and rows[engine, solver, n] is None
            if 1 not in args.envs:  # the memory baseline, in its own process
                rows[engine, solver, "base"] = spawn(exe, engine, solver, 1, argparse.Namespace(
                    steps=1, warmup=args.warmup, particle_size=args.particle_size))
    if args.no_anchor:
        print("anchor skipped (--no-anchor)")
    elif python is None:
        print("anchor skipped: set GENESIS_WORLD_PYTHON=$(../shared/anchors/make-venv) to run Genesis World 1.4.5 on "
              "the same scene in this command")
    print("\n| solver | n_envs | particles | ours p-substeps/s | Genesis p-substeps/s | ours/Genesis "
          "| ours memory/env, MiB | Genesis memory/env, MiB |")
    print("|---|---|---|---|---|---|---|---|")
    for solver in args.solvers:
        for n in args.envs:
            ours, theirs = rows.get(("ours", solver, n)), rows.get(("genesis", solver, n))
            figs = {}
            for engine, row in (("ours", ours), ("genesis", theirs)):
                base = rows.get((engine, solver, 1)) or rows.get((engine, solver, "base"))
                mem = per_env(row, base)
                figs[engine] = (f"{row['rate']:.3g}" if row else "-", f"{mem:.1f}" if mem is not None else "-")
            ratio = f"{ours['rate'] / theirs['rate']:.2f}x" if ours and theirs else "-"
            particles = (ours or theirs or {}).get("particles", "-")
            print(f"| {solver} | {n} | {particles} | {figs['ours'][0]} | {figs['genesis'][0]} | {ratio} "
                  f"| {figs['ours'][1]} | {figs['genesis'][1]} |")
    print("(memory/env: the RSS growth over build and warm-up at 1 environment; above 1, the growth beyond the "
          "1-environment figure over n_envs - 1)")
    rate = {k: row["rate"] for k, row in rows.items() if row}
    write_json(args.json, "sph", f"SPH water cube, particle_size {args.particle_size}", "particle-substeps/s",
               [{"scene": s, "n_envs": n, "ours": rate.get(("ours", s, n)), "anchor": rate.get(("genesis", s, n))}
                for s in args.solvers for n in args.envs])
    if ours_failed:
        sys.exit("ours failed on at least one row (above)")


if __name__ == "__main__":
    main()
