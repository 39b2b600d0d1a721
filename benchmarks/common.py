"""What the benchmarks share: resident memory, its growth per environment, one timed row, a row run in a fresh
process, and the --json file of a table's figures that benchmarks/plot.py plots."""

import contextlib
import json
import subprocess
import time

from genesis_core.progress import progress

_BAR = None  # one bar per benchmark command, over the measurements it runs


def rss():
    """Resident memory of this process, bytes."""
    with open("/proc/self/status") as fh:
        return next(int(line.split()[1]) * 1024 for line in fh if line.startswith("VmRSS"))


def per_env(row, base):
    """MiB per environment: the whole growth at 1 environment, the growth beyond 1 environment's over N - 1."""
    if row is None:
        return None
    if row["n_envs"] == 1:
        return row["growth"] / 2 ** 20
    if base is None:
        return None
    return (row["growth"] - base["growth"]) / (row["n_envs"] - 1) / 2 ** 20


def timed_row(scene, n_envs, warmup, steps):
    """Build (unbatched at 1 environment), take the warm-up steps, time the next ones: a dict of build_s,
    warmup_s, seconds and growth (the RSS growth over build and warm-up, bytes)."""
    before = rss()
    t0 = time.perf_counter()
    scene.build(n_envs=n_envs) if n_envs > 1 else scene.build()
    build_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    for _ in range(warmup):
        scene.step()
    warmup_s = time.perf_counter() - t0
    growth = rss() - before
    t0 = time.perf_counter()
    for _ in range(steps):
        scene.step()  # CPU launches are synchronous: the step has finished when it returns
    return {"build_s": build_s, "warmup_s": warmup_s, "seconds": time.perf_counter() - t0, "growth": growth}


@contextlib.contextmanager
def measuring(what):
    """The benchmark's progress bar (on a terminal, genesis_core.progress) names `what` while it is measured and
    counts it when done; the bar is drawn between measurements' timings, not inside them."""
    global _BAR
    if _BAR is None:
        _BAR = progress(total=None, desc="benchmark", unit="measurement", leave=False)
    _BAR.set_description(f"benchmark: {what}")
    try:
        yield
    finally:
        _BAR.update(1)


# the end of a child script for engine_rate: build `scene` with n_envs environments (0: unbatched), step past the
# compilation and genesis-core's launch-mode trial, time `steps` steps, print the rate
TIMED_STEPS = r"""
scene.build(n_envs=n_envs) if n_envs else scene.build()
for _ in range(31):
    scene.step()
t0 = time.perf_counter()
for _ in range(steps):
    scene.step()
dt = time.perf_counter() - t0
print(f"result env_steps_per_s={steps * max(n_envs, 1) / dt:.1f}")
"""


# the child scripts' go2 (`robot`, built with `n_envs`), PD-held at its standing pose in every environment: its 12
# joints' `dofs`, the pose `stand`
GO2_STAND = r"""names = ["FR_hip_joint", "FR_thigh_joint", "FR_calf_joint", "FL_hip_joint", "FL_thigh_joint", "FL_calf_joint",
         "RR_hip_joint", "RR_thigh_joint", "RR_calf_joint", "RL_hip_joint", "RL_thigh_joint", "RL_calf_joint"]
dofs = [robot.get_joint(n).dofs_idx_local[0] for n in names]
stand = torch.tensor([0.0, 0.8, -1.5, 0.0, 0.8, -1.5, 0.0, 1.0, -1.5, 0.0, 1.0, -1.5])
robot.set_dofs_kp([30.0] * 12, dofs)
robot.set_dofs_kv([1.0] * 12, dofs)
robot.set_dofs_position(stand.expand(n_envs, 12), dofs)
robot.control_dofs_position(stand.expand(n_envs, 12), dofs)
"""


def engine_rate(python, engine, child, argv, what, timeout=1800):
    """The rate a child script prints as `result env_steps_per_s=<x>`, run by `python` with ENGINE=`engine`
    (genesis_core, or genesis for the anchor: the same script imports either), or None (and a line naming
    `what` and why) when it failed."""
    import os

    env = dict(os.environ, ENGINE=engine)
    with measuring(f"{what}, {engine}"):
        res = subprocess.run([python, "-c", child, *map(str, argv)], capture_output=True, text=True, env=env,
                             timeout=timeout)
    line = [x for x in res.stdout.splitlines() if x.startswith("result ")]
    if res.returncode != 0 or not line:
        print(f"({engine} failed, {what}: {res.stderr.strip()[-300:]})")
        return None
    return float(line[-1].split("=")[1])


def rate_pair(child, argv, what, anchor):
    """(ours, the anchor's or None) env-steps/s of the child script run by both engines with `argv` (the anchor's
    only when `anchor`, its Python, is given)."""
    import sys

    ours = engine_rate(sys.executable, "genesis_core", child, argv, what)
    return ours, (engine_rate(anchor, "genesis", child, argv, what) if anchor else None)


def anchor_cells(ours, theirs, anchor):
    """The table cells (ours, the anchor's, the ratio) of one row; the anchor's says `skipped` when no anchor
    was given and `failed` when it ran and failed."""
    ratio = f"{ours / theirs:.2f}x" if ours and theirs else "-"
    mine = f"{ours:.0f}" if ours else "failed"
    other = f"{theirs:.0f}" if theirs else ("failed" if anchor else "skipped")
    return mine, other, ratio


def print_rate_table(rows, anchor, columns=("n_envs",)):
    """The table of (*columns, ours, the anchor's) env-steps/s rows beside their ratio, the line saying when the
    anchor was skipped; exits with 1 when one of ours failed."""
    import sys

    print("\n| " + " | ".join(columns) + " | genesis-core env-steps/s | Genesis World 1.4.5 env-steps/s | ratio |")
    print("|---" * (len(columns) + 3) + "|")
    for row in rows:
        print("| " + " | ".join(map(str, (*row[:-2], *anchor_cells(row[-2], row[-1], anchor)))) + " |")
    if not anchor:
        print("(Genesis World skipped: set GENESIS_WORLD_PYTHON=$(../shared/anchors/make-venv))")
    if any(row[-2] is None for row in rows):
        sys.exit(1)


def row_in_process(cmd, tag, what):
    """Run `cmd` (a row of a benchmark in a fresh process) and return the dict it printed after `tag`, or None
    (and a line naming `what` and why) when it failed."""
    with measuring(what):
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=3600)
    line = [x for x in res.stdout.splitlines() if x.startswith(tag + " ")]
    if res.returncode != 0 or not line:
        print(f"({what} failed, exit {res.returncode}: {(res.stderr.strip() or res.stdout.strip())[-1500:]})",
              flush=True)
        return None
    return json.loads(line[-1][len(tag) + 1:])


def check_rows(parser, args):
    """Refuse, through the parser, --envs below 1 and --warmup or --steps below 1 (the first step compiles)."""
    if any(n < 1 for n in args.envs):
        parser.error("--envs: numbers of environments, 1 or more (1 builds the scene unbatched)")
    if args.warmup is not None and args.warmup < 1:
        parser.error("--warmup: at least 1 (the first step compiles the kernels)")
    if args.steps is not None and args.steps < 1:
        parser.error("--steps: at least 1")


ANCHOR = "Genesis World 1.4.5"


def add_json_option(parser):
    """--json PATH: the table's figures also written as JSON (write_json), what benchmarks/plot.py plots."""
    parser.add_argument("--json", metavar="PATH", default=None,
                        help="also write the table's figures to this JSON file (benchmarks/plot.py plots them)")


def write_json(path, benchmark, title, unit, rows, anchor=ANCHOR):
    """Write a benchmark's table for benchmarks/plot.py: {"benchmark", "title", "unit", "anchor", "rows"}, each row
    {"scene", "n_envs", "ours", "anchor"} (throughputs in `unit`, None where that engine did not run or failed)
    and optionally "others": {engine name: throughput} (a further anchor, a bare loop). Nothing is written when
    path is None."""
    if path is None:
        return
    out = []
    for r in rows:
        row = {"scene": str(r["scene"]), "n_envs": int(r["n_envs"]),
               "ours": None if r.get("ours") is None else float(r["ours"]),
               "anchor": None if r.get("anchor") is None else float(r["anchor"])}
        others = {k: float(v) for k, v in (r.get("others") or {}).items() if v is not None}
        if others:
            row["others"] = others
        out.append(row)
    with open(path, "w") as fh:
        json.dump({"benchmark": benchmark, "title": title, "unit": unit, "anchor": anchor, "rows": out}, fh,
                  indent=1)
    print(f"figures written to {path}")
