"""The README's main job (`genesis-core demo`) and the CLI entry points."""

import subprocess
import sys

from genesis_core import demo

from .conftest import python_env


def test_demo_continuation_matches_bitwise(tmp_path):
    lines = []
    config = dict(demo.DEFAULTS, n_envs=3, steps_before_checkpoint=15, steps_after_checkpoint=15)
    assert demo.run(config, checkpoint_path=str(tmp_path / "demo.ckpt"), log=lines.append)
    text = "\n".join(lines)
    assert "matches the original run: yes (bitwise)" in text
    assert "SpringChainSolver.pos" in text and (tmp_path / "demo.ckpt").exists()


def test_demo_command_runs_in_a_fresh_process(tmp_path):
    out = subprocess.run([sys.executable, "-m", "genesis_core.cli", "demo", "--n-envs", "2", "--steps", "10",
                          "--checkpoint", str(tmp_path / "d.ckpt")], capture_output=True, text=True, env=python_env())
    assert out.returncode == 0, out.stderr[-2000:]
    assert "yes (bitwise)" in out.stdout


def test_demo_without_any_solver_plugin_says_so():
    out = subprocess.run([sys.executable, "-m", "genesis_core.cli", "demo", "--steps", "1"], capture_output=True,
                         text=True, env=python_env(GENESIS_CORE_PLUGINS="none"))
    assert out.returncode == 2 and "the demo scene is empty" in out.stderr
