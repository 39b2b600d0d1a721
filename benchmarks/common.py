"""What the soft-solver benchmarks share: resident memory, its growth per environment, one timed row, and a row run
in a fresh process."""

import json
import subprocess
import time


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


def row_in_process(cmd, tag, what):
    """Run `cmd` (a row of a benchmark in a fresh process) and return the dict it printed after `tag`, or None
    (and a line naming `what` and why) when it failed."""
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
