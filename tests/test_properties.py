"""The engine's shared properties (genesis_core.testing.property_tests) on every installed plugin's test scenes:

- get_state / reset round trip is bitwise, and restores scene.t;
- "snapshot, step N, restore, step N" repeats the first N steps bitwise (CPU determinism);
- reset with envs_idx restores exactly those environments and leaves the others bitwise untouched;
- save_checkpoint / load_checkpoint round trip, in this process and in a fresh one;
- a serialised, pickled SimState can be passed back to reset.

Each plugin contributes small scenes through the `register_test_scenes` hook; one test body runs over all. A
solver package runs the same tests on its own scenes alone (examples/custom_solver/tests).
"""

import os
import shutil
import subprocess
import sys

import pytest

from genesis_core import plugins
from genesis_core.plugins import registry
from genesis_core.testing import assert_states_equal, check_snapshot_step_restore_step, property_tests, run_steps

from . import toy_plugin
from .conftest import REPO, python_env

TestEveryInstalledPlugin = property_tests(dict(sorted(registry().test_scenes.items())))


def test_every_installed_solver_is_in_a_test_scene():
    """The properties hold for every installed solver only if each one contributes a test scene."""
    covered = set()
    for make_scene in registry().test_scenes.values():
        scene, _ = make_scene(0)
        covered |= {s.name for s in scene.active_solvers}
    assert set(registry().solvers) <= covered, f"solvers without a test scene: {set(registry().solvers) - covered}"


@pytest.fixture
def toy():
    name = plugins.register_plugin(toy_plugin, name="toy")
    yield toy_plugin
    plugins.unregister_plugin(name)


def _solver_state(state, scene, solver):
    return state.solvers_state[scene.solvers.index(solver)]


def test_a_failing_comparison_names_every_differing_key(toy):
    """Differences planted in two keys of one solver and one key of another, in different environments: the
    assertion names all three, each with its environments and largest difference, and no other key."""
    scene, drive = toy.make_scene(4)
    run_steps(scene, drive, 3)
    expected = scene.get_state()
    actual = expected.clone()
    balls = _solver_state(actual, scene, scene.toy_ball_solver)
    floor = _solver_state(actual, scene, scene.toy_floor_solver)
    balls.pos[1, 0, 2] += 1e-9
    balls.vel[0, 1, 0] -= 0.5
    balls.vel[3, 0, 1] += 0.25
    floor.impulse[2, 0, 5] = float("nan")
    with pytest.raises(AssertionError) as info:
        assert_states_equal(expected, actual)
    lines = str(info.value).splitlines()
    assert lines[0] == "states differ: 3 keys differ", lines
    assert lines[1:] == [
        "  ToyBallSolver.pos: envs [1] of 4, 1 of 24 entries, max |difference| 1e-09",
        "  ToyBallSolver.vel: envs [0, 3] of 4, 2 of 24 entries, max |difference| 0.5",
        "  ToyFloorSolver.impulse: envs [2] of 4, 1 of 24 entries, max |difference| nan",
    ]
    assert_states_equal(expected, expected.clone(), n_envs=4)  # NaN-free and equal: nothing to report


def test_a_run_that_does_not_repeat_names_every_key_of_every_solver(toy):
    """A drive that depends on how often it was called, not on the step index (hidden state), pushes the balls
    and the floor's impulse differently the second time: the determinism property names the keys of both
    solvers that it changed, in every environment."""
    calls = []

    def leaky_scene(n_envs):
        scene, _ = toy.make_scene(n_envs)

        def drive(scene, i_step):
            calls.append(i_step)
            balls, floor = scene.toy_ball_solver, scene.toy_floor_solver
            balls.state.at("vel", balls.frame)[..., 0] += 1e-3 * len(calls)
            floor.state.impulse[..., 3] += len(calls)

        return scene, drive

    with pytest.raises(AssertionError) as info:
        check_snapshot_step_restore_step(leaky_scene, n_envs=2, k1=2, n=3)
    message = str(info.value)
    assert message.startswith("step 3, run again from the state of step 2, differs from the first run: 3 keys"), message
    for key in ("ToyBallSolver.pos", "ToyBallSolver.vel", "ToyFloorSolver.impulse"):
        assert f"  {key}: envs [0, 1] of 2" in message, message


def test_a_package_runs_the_properties_on_its_own_scenes_outside_this_repository(tmp_path):
    """The example package's tests folder, copied out of the repository and run by pytest there with only that
    plugin loaded: the shared properties run on its scenes alone and pass (what a third party who installed
    genesis-core with pip gets from its own conftest.py and one line of a test file)."""
    shutil.copytree(os.path.join(REPO, "examples", "custom_solver", "tests"), tmp_path / "tests",
                    ignore=shutil.ignore_patterns("__pycache__"))
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rA",
                          "tests/test_springs_properties.py"], capture_output=True, text=True, cwd=tmp_path,
                         env=python_env(GENESIS_CORE_PLUGINS="springs"))
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
    passed = [line for line in out.stdout.splitlines() if line.startswith("PASSED ")]
    assert len(passed) == 7 and all("[springs" in line for line in passed), out.stdout[-4000:]
