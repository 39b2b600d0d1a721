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
    ("equality.py", ["--steps", "3", "--envs", "0"], "genesis-core env-steps/s"),
    ("heterogeneous.py", ["--steps", "3", "--envs", "2"], "genesis-core env-steps/s"),
    ("sensors.py", ["--steps", "3", "--envs", "0"], "genesis-core env-steps/s"),
    ("drone.py", ["--steps", "3", "--envs", "0"], "genesis-core env-steps/s"),
    ("mpm.py", ["--sizes", "1000", "--envs", "1", "--seconds", "0.2"], "particle-substeps/s"),
    ("resume.py", ["--n-envs", "4", "--runs", "1"], "to the first resumed step"),
    ("validation.py", ["--steps", "5", "--envs", "0", "2"], "fault check per step, us"),
    ("model_load.py", ["--repeats", "1", "--builds", "1"], "| model | what |"),
    ("sph.py", ["--particle-size", "0.04", "--envs", "1", "--steps", "2", "--warmup", "1", "--no-anchor"],
     "particle-substeps/s"),
    ("fem.py", ["--maxvolume", "2e-5", "--envs", "1", "--steps", "1", "--warmup", "1", "--no-anchor"],
     "vertex-substeps/s"),
    ("pbd.py", ["--n", "16", "--envs", "1", "--steps", "2", "--warmup", "1", "--no-anchor"],
     "particle-substeps/s"),
])
def test_benchmark_runs_at_a_tiny_size(script, args, expect, tmp_path):
    """Each script at a tiny size; those with a table of throughputs also write it with --json, as
    benchmarks/plot.py reads it."""
    table = tmp_path / "table.json"
    writes_json = script in ("mpm.py", "sph.py", "fem.py", "pbd.py")
    if writes_json:
        args = [*args, "--json", str(table)]
    run = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", script), *args], capture_output=True,
                         text=True, timeout=900, cwd=ROOT)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-3000:]
    assert expect in run.stdout, run.stdout[-2000:]
    if writes_json:
        rows = _benchmark_module("plot").load(str(table))["rows"]
        assert rows and all(r["ours"] > 0 and r["anchor"] is None for r in rows), rows


def test_raycaster_benchmark_runs_at_a_tiny_size():
    """benchmarks/raycaster.py (Genesis World's go2 with a height scan) unbatched, 2 steps, where the go2 is found
    (Genesis World's assets on $GENESIS_CORE_ASSETS, or an installed Genesis World)."""
    from genesis_core.morphs import find_file

    if find_file("urdf/go2/urdf/go2.urdf")[0] is None:
        pytest.skip("Genesis World's urdf/go2/urdf/go2.urdf is not found (put its assets on GENESIS_CORE_ASSETS)")
    run = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "raycaster.py"), "--steps", "2", "--envs",
                          "0"], capture_output=True, text=True, timeout=900, cwd=ROOT)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-3000:]
    assert "height scan (187 rays)" in run.stdout, run.stdout[-2000:]


def _benchmark_module(name):
    sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
    try:
        return __import__(name)
    finally:
        sys.path.pop(0)


def test_plot_draws_benchmark_tables_to_a_png(tmp_path):
    """benchmarks/plot.py on made-up tables in write_json's layout (an anchor, a second engine, an unbatched
    n_envs 0, a table without anchor): a PNG of the panels' size; a file that is not a table is refused."""
    common, plot = _benchmark_module("common"), _benchmark_module("plot")
    common.write_json(str(tmp_path / "sph.json"), "sph", "SPH", "particle-substeps/s", [
        {"scene": s, "n_envs": n, "ours": o, "anchor": g}
        for s, n, o, g in [("WCSPH", 1, 8.5e5, 3.8e5), ("WCSPH", 8, 9.4e5, 2.2e5), ("DFSPH", 1, 3.3e5, 9.0e4),
                           ("DFSPH", 8, 4.0e5, None)]])
    common.write_json(str(tmp_path / "pbd.json"), "pbd", "PBD cloth", "particle-substeps/s", [
        {"scene": "cloth", "n_envs": n, "ours": o, "anchor": g, "others": {"Newton": w}}
        for n, o, g, w in [(1, 1.0e6, 5.0e5, 1.4e6), (8, 2.0e6, 5.8e5, 2.0e6), (64, 2.5e6, 6.0e5, None)]])
    common.write_json(str(tmp_path / "rigid.json"), "rigid", "panda", "env-steps/s", [
        {"scene": "held", "n_envs": n, "ours": o, "anchor": g} for n, o, g in [(0, 6e3, 4.7e3), (64, 6.2e4, 5.5e4)]])
    common.write_json(str(tmp_path / "mpm.json"), "mpm", "MPM", "particle-substeps/s",
                      [{"scene": "27000 particles", "n_envs": 1, "ours": 2e6}], anchor=None)
    out = tmp_path / "benchmarks.png"
    tables = [str(tmp_path / f"{name}.json") for name in ("sph", "pbd", "rigid", "mpm")]
    assert plot.main([*tables, "-o", str(out), "--columns", "3", "--dpi", "80"]) == 0
    data = out.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    # 5 panels in 3 columns of about 3.6 x 4.4 inches at 80 dpi (cropped to the drawing)
    assert 600 < width < 1000 and 500 < height < 800, (width, height)
    assert 20_000 < len(data) < 2_000_000, len(data)
    (tmp_path / "bad.json").write_text('{"unit": "x", "rows": [{"scene": "a", "n_envs": -1, "ours": 1}]}')
    assert plot.main([str(tmp_path / "bad.json"), "-o", str(tmp_path / "bad.png")]) == 2
    assert not (tmp_path / "bad.png").exists()


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
