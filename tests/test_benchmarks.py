"""The benchmarks stay runnable: each at a tiny size (no timing is checked; the figures are in benchmarks/README)."""

import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.mark.parametrize("script, args, expect", [
    ("rigid.py", ["--resting", "4"], "ms/step"),
    ("rigid.py", ["--spheres", "8"], "collide, us"),
    ("grad.py", ["--steps", "3"], "backward / forward"),
    ("mpm.py", ["--sizes", "1000", "--envs", "1", "--seconds", "0.2"], "particle-substeps/s"),
    ("resume.py", ["--n-envs", "4", "--runs", "1"], "to the first resumed step"),
    ("validation.py", ["--steps", "5", "--envs", "0", "2"], "fault check per step, us"),
    ("sph.py", ["--particle-size", "0.04", "--envs", "1", "--steps", "2", "--warmup", "1", "--no-anchor"],
     "particle-substeps/s"),
    ("fem.py", ["--maxvolume", "2e-5", "--envs", "1", "--steps", "1", "--warmup", "1", "--no-anchor"],
     "vertex-substeps/s"),
    ("pbd.py", ["--n", "16", "--envs", "1", "--steps", "2", "--warmup", "1", "--no-anchor"],
     "particle-substeps/s"),
])
def test_benchmark_runs_at_a_tiny_size(script, args, expect):
    run = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", script), *args], capture_output=True,
                         text=True, timeout=900, cwd=ROOT)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-3000:]
    assert expect in run.stdout, run.stdout[-2000:]


def test_render_benchmark_runs_at_a_tiny_size():
    """benchmarks/render.py on the panda scene of ../shared/assets, 2 environments at 32 x 24 (no anchor)."""
    sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
    try:
        import render
    finally:
        sys.path.pop(0)
    if not os.path.exists(render.SCENE):
        pytest.skip(f"the panda scene {render.SCENE} is absent (../shared/assets)")
    run = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "render.py"), "--rows", "2x32x24",
                          "--frames", "1", "--warmup", "1", "--no-anchor"], capture_output=True, text=True,
                         timeout=900, cwd=ROOT)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-3000:]
    assert "ours failed" not in run.stdout and "env-frames/s" in run.stdout, run.stdout[-2000:]
