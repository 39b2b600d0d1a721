"""Progress on long work (genesis_core.progress): bars on a terminal at the default logging level, quiet in a pipe
and under logging_level="warning", and the status line while a scene's kernels compile. The terminal is a real
pseudo-terminal (pty) around a child process."""

import fcntl
import os
import pty
import struct
import subprocess
import sys
import termios

import pytest

import genesis_core as gs
from genesis_core import progress as prog

ROLLOUT = """
import genesis_core as gs
from genesis_core.progress import progress
gs.init(backend=gs.cpu{level})
for _ in progress(range(50), desc="rollout", unit="step"):
    pass
print("done", flush=True)
"""

COMPILE = """
import genesis_core as gs
import genesis_core.progress
genesis_core.progress.COMPILE_DELAY_S = 0.0  # shown at once (a warm offline cache loads the kernels in < 1 s)
gs.init(backend=gs.cpu)
scene = gs.Scene()
scene.add_entity(gs.morphs.Plane())
scene.add_entity(gs.morphs.Box(pos=(0, 0, 0.3), size=(0.2, 0.2, 0.2)))
scene.build()
scene.step()
print("first step done", flush=True)
scene.step()
print("second step done", flush=True)
"""


def _in_terminal(code, timeout=600):
    """Run `python -c code` with stdout and stderr on a pseudo-terminal; everything it wrote, and its exit code."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 160, 0, 0))  # 40 rows, 160 columns
    env = {k: v for k, v in os.environ.items() if k != "GENESIS_CORE_PROGRESS"}
    proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.DEVNULL, stdout=slave, stderr=slave,
                            env=env)
    os.close(slave)
    out = b""
    try:
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not chunk:
                break
            out += chunk
    finally:
        os.close(master)
    return out.decode(errors="replace"), proc.wait(timeout=timeout)


def _in_pipe(code):
    env = {k: v for k, v in os.environ.items() if k != "GENESIS_CORE_PROGRESS"}
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=600)
    return res.stdout + res.stderr, res.returncode


def test_a_rollout_bar_shows_on_a_terminal_and_not_in_a_pipe_or_under_warning():
    out, rc = _in_terminal(ROLLOUT.format(level=""))
    assert rc == 0 and "done" in out, out[-2000:]
    assert "rollout" in out and "50/50" in out, out[-2000:]
    out, rc = _in_terminal(ROLLOUT.format(level=', logging_level="warning"'))
    assert rc == 0 and "done" in out and "rollout" not in out, out[-2000:]
    out, rc = _in_pipe(ROLLOUT.format(level=""))
    assert rc == 0 and "done" in out and "rollout" not in out, out[-2000:]


def test_the_first_step_shows_that_kernels_compile_and_later_steps_do_not():
    out, rc = _in_terminal(COMPILE)
    assert rc == 0 and "second step done" in out, out[-3000:]
    first, second = out.split("first step done")
    assert "compiling kernels" in first, first[-2000:]
    assert "compiling kernels" not in second  # only the build and the first step
    out, rc = _in_pipe(COMPILE)
    assert rc == 0 and "compiling" not in out, out[-2000:]


def test_the_switch_overrides_the_terminal_test(monkeypatch):
    monkeypatch.setenv("GENESIS_CORE_PROGRESS", "0")
    assert not prog.enabled()
    bar = prog.progress(range(3), desc="quiet")
    assert list(bar) == [0, 1, 2]
    bar.set_postfix(loss=1.0)
    bar.update(2)
    bar.close()
    monkeypatch.setenv("GENESIS_CORE_PROGRESS", "1")
    assert prog.enabled()
    monkeypatch.delenv("GENESIS_CORE_PROGRESS")
    assert not prog.enabled()  # pytest captures standard error: not a terminal


def test_logging_level_none_is_genesis_world_s_default_info_and_a_bad_one_is_refused():
    code = ("import logging, genesis_core as gs\ngs.init(backend=gs.cpu, logging_level=None)\n"
            "logging.getLogger('genesis_core').info('hello from the engine')\n"
            "logging.getLogger('genesis_core').debug('not shown')\n")
    out, rc = _in_pipe(code)
    assert rc == 0 and "[genesis-core] INFO: hello from the engine" in out and "not shown" not in out, out[-2000:]
    out, rc = _in_pipe(code.replace("logging_level=None", 'logging_level="warning"'))
    assert rc == 0 and "hello" not in out, out[-2000:]
    with pytest.raises(gs.GenesisError, match="logging_level"):
        gs.init(backend=gs.cpu, logging_level="loud")
