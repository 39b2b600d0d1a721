"""How long loading robot model files takes: the Franka panda (URDF and MJCF, ../shared/assets) and Genesis World's
go2 and shadow hand (URDF, found through genesis_core.morphs.find_file; --assets DIR adds a folder), on the CPU.

- load: `gs.Scene(show_viewer=False).add_entity(morph)`, which parses the file and takes the convex hulls of its
  collision meshes; the rigid plugin's mesh caches are cleared before each repeat, so each reads the files as a
  first load does. Median and min of --repeats (7).
- build: `scene.build()` of that scene (n_envs=0), median of --builds (3) after one untimed build of the model
  (with the Taichi offline cache warm, this is the model's compilation plus the kernels' loading).

Timed with time.perf_counter, the garbage collector off while a figure is taken (as timeit does).

With --baseline DIR, the same measurements also run on the code of the checkout DIR (PYTHONPATH=DIR:DIR/plugins/rigid,
e.g. from `git worktree add --detach DIR HEAD`): --rounds (--repeats) processes each, ours and the baseline's in
turn, so that load on the machine falls on both alike; the table gives the medians of all their figures, the ratio
ours/baseline, that of the minimums (the steadier one on a busy machine) and the range over the rounds of the ratio
of the processes' medians. "Ours" is the code this interpreter imports (this checkout, or what PYTHONPATH names).

    python benchmarks/model_load.py [--assets DIR] [--repeats 7] [--builds 3] [--baseline DIR [--rounds 7]]
"""

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import time

SHARED = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared", "assets")
MODELS = [  # name, morph class, file (relative ones are looked up with find_file)
    ("panda urdf", "URDF", os.path.normpath(os.path.join(SHARED, "urdf", "panda_bullet", "panda.urdf"))),
    ("panda mjcf", "MJCF", os.path.normpath(os.path.join(SHARED, "mjcf", "franka_emika_panda", "panda.xml"))),
    ("go2", "URDF", "urdf/go2/urdf/go2.urdf"),
    ("shadow hand", "URDF", "urdf/shadow_hand/shadow_hand.urdf"),
]
TAG = "MODEL_LOAD_JSON"


def clear_caches():
    """Empty the rigid plugin's in-process mesh caches (those this checkout has)."""
    import importlib

    for name in ("genesis_rigid.hull", "genesis_rigid.decompose", "genesis_rigid.solver"):
        try:
            mod = importlib.import_module(name)
        except ImportError:
            continue
        for attr in vars(mod).values():
            if callable(attr) and hasattr(attr, "cache_clear"):
                attr.cache_clear()
        if isinstance(getattr(mod, "_VISUAL_MESHES", None), dict):
            mod._VISUAL_MESHES.clear()


def timed(fn):
    """fn()'s result and the seconds it took, the garbage collector off meanwhile (as timeit does), so that when
    its collections fall does not reach the figures."""
    gc.collect()
    gc.disable()
    try:
        t = time.perf_counter()
        out = fn()
        return out, time.perf_counter() - t
    finally:
        gc.enable()


def measure(repeats, builds):
    """{"code": where genesis_core comes from, "models": {name: {"load": [s], "build": [s]} or {"error": str} or
    {"missing": str}}}, in this process."""
    import warnings

    import genesis_core as gs

    warnings.simplefilter("ignore")  # the solvers' notes on the models (overlapping geoms) are not measured
    gs.init(backend=gs.cpu, logging_level="warning")
    out = {}
    for name, kind, file in MODELS:
        found, looked = gs.morphs.find_file(file)
        if found is None:
            out[name] = {"missing": f"{file} (looked in: {', '.join(looked)})"}
            continue

        def scene_of(kind=kind, found=found):
            scene = gs.Scene(show_viewer=False)
            scene.add_entity(getattr(gs.morphs, kind)(file=found))
            return scene

        def load():
            clear_caches()
            return timed(scene_of)

        try:
            load()[0].build()  # untimed: imports, the Taichi cache, the files in the page cache
            loads = [load()[1] for _ in range(repeats)]
            out[name] = {"load": loads, "build": [timed(load()[0].build)[1] for _ in range(builds)]}
        except Exception as exc:
            out[name] = {"error": f"{type(exc).__name__}: {exc}"}
    return {"code": os.path.dirname(gs.__file__), "models": out}


def child(repeats, builds, pythonpath=None):
    """measure() in a fresh process (with PYTHONPATH=pythonpath where given), or {"error": why} when it failed."""
    env = dict(os.environ)
    if pythonpath is not None:
        env["PYTHONPATH"] = os.pathsep.join([pythonpath, env["PYTHONPATH"]] if env.get("PYTHONPATH") else [pythonpath])
    cmd = [sys.executable, os.path.abspath(__file__), "--child", "--repeats", str(repeats), "--builds", str(builds)]
    res = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=3600)
    line = [x for x in res.stdout.splitlines() if x.startswith(TAG + " ")]
    if res.returncode != 0 or not line:
        return {"error": f"exit {res.returncode}: {(res.stderr.strip() or res.stdout.strip())[-1500:]}"}
    return json.loads(line[-1][len(TAG) + 1:])


def ms(xs, f=statistics.median):
    return f"{f(xs) * 1e3:.1f}" if xs else "-"


def report_problems(side, run):
    for name, m in run["models"].items():
        if "missing" in m:
            print(f"{name}: skipped, not found: {m['missing']}")
        elif "error" in m:
            print(f"{name}: failed to load on {side}: {m['error']}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--assets", metavar="DIR", default=None,
                        help="a folder holding Genesis World's assets (default: $GENESIS_CORE_ASSETS, else an "
                             "installed Genesis World's)")
    parser.add_argument("--repeats", type=int, default=7, help="timed loads per model (per process)")
    parser.add_argument("--builds", type=int, default=3, help="timed builds per model (per process)")
    parser.add_argument("--baseline", metavar="DIR", default=None, help="a checkout to compare against")
    parser.add_argument("--rounds", type=int, default=None, help="processes of each side with --baseline "
                                                                 "(default: --repeats)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.repeats < 1 or args.builds < 1 or (args.rounds is not None and args.rounds < 1):
        parser.error("--repeats, --builds and --rounds: at least 1")
    if args.assets is not None:
        if not os.path.isdir(args.assets):
            parser.error(f"--assets {args.assets}: no such folder")
        old = os.environ.get("GENESIS_CORE_ASSETS")
        os.environ["GENESIS_CORE_ASSETS"] = os.pathsep.join([os.path.abspath(args.assets)] + ([old] if old else []))
    if args.child:
        print(TAG, json.dumps(measure(args.repeats, args.builds)), flush=True)
        return
    if args.baseline is None:
        run = measure(args.repeats, args.builds)
        print(f"code: {run['code']}; CPU, one process; {args.repeats} loads, {args.builds} builds per model\n")
        report_problems("ours", run)
        print("| model | what | median ms | min ms |\n|---|---|---|---|")
        for name, m in run["models"].items():
            for what in ("load", "build") if "load" in m else ():
                print(f"| {name} | {what} | {ms(m[what])} | {ms(m[what], min)} |")
        return
    base = os.path.abspath(args.baseline)
    if not os.path.isdir(os.path.join(base, "genesis_core")):
        parser.error(f"--baseline {args.baseline}: not a genesis-core checkout (no genesis_core folder)")
    base_path = os.pathsep.join([base, os.path.join(base, "plugins", "rigid")])
    rounds = args.rounds or args.repeats
    runs = {"ours": [], "baseline": []}
    t0 = time.perf_counter()
    for r in range(rounds):  # ours first in even rounds, the baseline first in odd ones
        for side in ("ours", "baseline") if r % 2 == 0 else ("baseline", "ours"):
            run = child(args.repeats, args.builds, base_path if side == "baseline" else None)
            if "error" in run:
                print(f"{side}'s process failed, {run['error']}")
                sys.exit(1)
            runs[side].append(run)
        print(f"round {r + 1}/{rounds} done ({time.perf_counter() - t0:.0f} s)", file=sys.stderr, flush=True)
    for side in runs:
        codes = sorted({run["code"] for run in runs[side]})
        print(f"{side}: {', '.join(codes)}")
        report_problems(side, runs[side][0])
    if runs["ours"][0]["code"] == runs["baseline"][0]["code"]:
        print("(both sides ran the same code: the ratios show the noise)")
    print(f"CPU; {rounds} rounds of one process per side, taken in turn; per process {args.repeats} loads, "
          f"{args.builds} builds per model\n")
    print("| model | what | ours ms | baseline ms | ratio ours/baseline | ratio of the mins "
          "| ratio's range over rounds |")
    print("|---|---|---|---|---|---|---|")
    for name, _, _ in MODELS:
        ours = [run["models"][name] for run in runs["ours"]]
        theirs = [run["models"][name] for run in runs["baseline"]]
        if not all("load" in m for m in ours + theirs):
            continue
        for what in ("load", "build"):
            a = [x for m in ours for x in m[what]]
            b = [x for m in theirs for x in m[what]]
            per = [statistics.median(p[what]) / statistics.median(q[what]) for p, q in zip(ours, theirs)]
            print(f"| {name} | {what} | {ms(a)} | {ms(b)} | {statistics.median(a) / statistics.median(b):.3f} | "
                  f"{min(a) / min(b):.3f} | {min(per):.3f} - {max(per):.3f} |")


if __name__ == "__main__":
    main()
