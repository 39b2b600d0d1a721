"""FEM speed on the anchors' FEM scene: a sphere of radius 0.1 m at z 0.5 (gs.morphs.Sphere, maxvolume 2e-7: about
6,000 vertices), gs.materials.FEM.Elastic(E=1e5, nu=0.3, rho=1000), over a gs.morphs.Plane, dt 1e-4, 10
substeps, float32, CPU; the explicit solver, and the implicit one (FEMOptions(use_implicit_solver=True), its
default Newton / CG settings), for each number of environments, in vertex-substeps per second.

    python benchmarks/fem.py [--solvers explicit implicit] [--envs 1 8 64] [--steps N] [--warmup N] [--no-anchor]
                             [--json fem.json]
    GENESIS_WORLD_PYTHON=$(../shared/anchors/make-venv) python benchmarks/fem.py ...   # Genesis World 1.4.5 beside

Every row is a fresh process of this script (`--one SOLVER N_ENVS`, `--engine genesis` for Genesis World). One
environment is built unbatched (scene.build()), more with scene.build(n_envs=N). A row builds the scene, takes
the warm-up steps (the first compiles the kernels) and times the next --steps steps only: vertex-substeps/s =
n_vertices * substeps * steps * n_envs / seconds. Memory per environment as in benchmarks/sph.py (the RSS growth
over build and warm-up; above 1 environment, the growth beyond the 1-environment figure over n_envs - 1).

With GENESIS_WORLD_PYTHON set, the same rows run in that python on Genesis World 1.4.5 (the same scene code) and
the table at the end holds both figures and their ratio; without it, it says the anchor was skipped. No figure is
checked: compare figures from the same run.
"""

import argparse
import importlib
import json
import os
import sys

from common import add_json_option, per_env, row_in_process, timed_row, write_json

ENGINES = {"ours": "genesis_core", "genesis": "genesis"}


def default_steps(solver, n_envs):
    base = 20 if solver == "explicit" else 4
    return max(1, round(base * 8 / (8 + n_envs)))


def one(engine, solver, n_envs, steps, warmup, maxvolume=2e-7):
    """One row in this process: build, warm up, time; prints one `fem-row {json}` line."""
    gs = importlib.import_module(ENGINES[engine])
    gs.init(backend=gs.cpu, precision="32", logging_level="error")
    substeps = 10
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=1e-4, substeps=substeps),
                     fem_options=gs.options.FEMOptions(use_implicit_solver=solver == "implicit"), show_viewer=False)
    scene.add_entity(gs.morphs.Plane())
    ball = scene.add_entity(material=gs.materials.FEM.Elastic(E=1e5, nu=0.3, rho=1000),
                            morph=gs.morphs.Sphere(pos=(0.0, 0.0, 0.5), radius=0.1, maxvolume=maxvolume))
    t = timed_row(scene, n_envs, warmup, steps)
    n = int(ball.n_vertices)
    print("fem-row " + json.dumps({
        "engine": engine, "solver": solver, "n_envs": n_envs, "vertices": n, "elements": int(ball.n_elements),
        "steps": steps, **t, "rate": n * substeps * steps * n_envs / t["seconds"]}), flush=True)


def spawn(python, engine, solver, n_envs, args):
    steps = args.steps if args.steps is not None else default_steps(solver, n_envs)
    warmup = args.warmup if args.warmup is not None else 1
    cmd = [python, os.path.abspath(__file__), "--one", solver, str(n_envs), "--engine", engine, "--steps",
           str(steps), "--warmup", str(warmup), "--maxvolume", str(args.maxvolume)]
    row = row_in_process(cmd, "fem-row", f"{engine} on {solver} at n_envs {n_envs}")
    if row is None:
        return None
    print(f"{engine:>8}{solver:>9}{n_envs:>7}{row['vertices']:>9}{row['elements']:>9}{row['steps']:>6}"
          f"{row['build_s']:>10.1f}{row['warmup_s']:>12.1f}{row['rate']:>20.3g}{row['growth'] / 2 ** 20:>11.1f}",
          flush=True)
    return row


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--solvers", nargs="+", default=["explicit", "implicit"], choices=["explicit", "implicit"])
    parser.add_argument("--envs", type=int, nargs="+", default=[1, 8, 64])
    parser.add_argument("--steps", type=int, default=None, help="timed steps per row (default: fewer as the "
                        "batch grows; explicit 18 at 1 environment, implicit 4)")
    parser.add_argument("--warmup", type=int, default=None, help="untimed steps before them (default 1)")
    parser.add_argument("--maxvolume", type=float, default=2e-7, help="the sphere's tet volume bound (smaller: "
                        "more vertices)")
    parser.add_argument("--no-anchor", action="store_true", help="ours only, even with GENESIS_WORLD_PYTHON set")
    add_json_option(parser)
    parser.add_argument("--one", nargs=2, metavar=("SOLVER", "N_ENVS"), help=argparse.SUPPRESS)
    parser.add_argument("--engine", choices=sorted(ENGINES), default="ours", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        solver, n = args.one[0], int(args.one[1])
        return one(args.engine, solver, n, args.steps if args.steps is not None else default_steps(solver, n),
                   args.warmup if args.warmup is not None else 1, args.maxvolume)
    if any(n < 1 for n in args.envs):
        parser.error("--envs: numbers of environments, 1 or more (1 builds the scene unbatched)")
    python = None if args.no_anchor else os.environ.get("GENESIS_WORLD_PYTHON")
    engines = [("ours", sys.executable)] + ([("genesis", python)] if python else [])
    print(f"FEM sphere, radius 0.1 m, maxvolume {args.maxvolume:g}, E 1e5, dt 1e-4, 10 substeps, float32, CPU; "
          "each row a fresh process")
    print(f"{'engine':>8}{'solver':>9}{'n_envs':>7}{'vertices':>9}{'elements':>9}{'steps':>6}{'build, s':>10}"
          f"{'warm-up, s':>12}{'vertex-substeps/s':>20}{'RSS+, MiB':>11}")
    rows, ours_failed = {}, False
    for solver in args.solvers:
        for engine, exe in engines:
            for n in args.envs:
                rows[engine, solver, n] = spawn(exe, engine, solver, n, args)
                ours_failed |= engine == "ours" and rows[engine, solver, n] is None
    if args.no_anchor:
        print("anchor skipped (--no-anchor)")
    elif python is None:
        print("anchor skipped: set GENESIS_WORLD_PYTHON=$(../shared/anchors/make-venv) to run Genesis World 1.4.5 on "
              "the same scene in this command")
    print("\n| solver | n_envs | ours vertices / elements | Genesis vertices / elements | ours v-substeps/s "
          "| Genesis v-substeps/s | ours/Genesis | ours memory/env, MiB | Genesis memory/env, MiB |")
    print("|---|---|---|---|---|---|---|---|---|")
    for solver in args.solvers:
        for n in args.envs:
            ours, theirs = rows.get(("ours", solver, n)), rows.get(("genesis", solver, n))
            mem = {e: per_env(rows.get((e, solver, n)), rows.get((e, solver, 1))) for e in ("ours", "genesis")}
            ratio = f"{ours['rate'] / theirs['rate']:.2f}x" if ours and theirs else "-"
            size = {e: f"{r['vertices']} / {r['elements']}" if r else "-" for e, r in (("ours", ours),
                                                                                       ("genesis", theirs))}
            rate = {e: f"{r['rate']:.3g}" if r else "-" for e, r in (("ours", ours), ("genesis", theirs))}
            mib = {e: f"{m:.1f}" if m is not None else "-" for e, m in mem.items()}
            print(f"| {solver} | {n} | {size['ours']} | {size['genesis']} | {rate['ours']} | {rate['genesis']} "
                  f"| {ratio} | {mib['ours']} | {mib['genesis']} |")
    print("(vertex-substeps/s counts vertices, as Genesis World's own figure does; the meshes differ in size: the "
          "vertex and element counts are in the table)")
    rate = {k: row["rate"] for k, row in rows.items() if row}
    write_json(args.json, "fem", f"FEM sphere, maxvolume {args.maxvolume:g}", "vertex-substeps/s",
               [{"scene": s, "n_envs": n, "ours": rate.get(("ours", s, n)), "anchor": rate.get(("genesis", s, n))}
                for s in args.solvers for n in args.envs])
    if ours_failed:
        sys.exit("ours failed on at least one row (above)")


if __name__ == "__main__":
    main()
