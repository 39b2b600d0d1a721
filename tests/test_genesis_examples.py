"""Genesis World's own example scripts, run on genesis-core by compat/genesis_examples.py, each with a check that
its physics happened (docs/compatibility.md).

Needs a Genesis World checkout: its examples folder is found through $GENESIS_EXAMPLES_DIR, or at
../Genesis/examples beside this repository. Without one every script's test is skipped (and takes no time). Each
script is its own test; the scripts known not to pass here (a feature genesis-core lacks or does otherwise) are
expected failures with the reason, so a script that passes today fails the suite if it regresses.
"""

import importlib.util
import os
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _load_runner():
    spec = importlib.util.spec_from_file_location("genesis_examples_runner",
                                                  os.path.join(REPO, "compat", "genesis_examples.py"))
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


runner = _load_runner()
EXAMPLES = runner.find_examples()
TIMEOUT = float(os.environ.get("GENESIS_EXAMPLES_TIMEOUT", runner.DEFAULT_TIMEOUT))

# Scripts known not to pass here, with why (measured: docs/compatibility.md).
KNOWN_FAILING = {
    "tutorials/IK_motion_planning_grasp": "motion planning: RigidEntity.plan_path (and Scene.draw_debug_path, "
                                          "Scene.clear_debug_object) are not implemented",
    "coupling/sand_wheel": "particle emitters: Scene.add_emitter is not implemented",
    "differentiable_push": "differentiable tools: gs.materials.Tool is not implemented",
    "rigid/closed_loop": "the weld closing the four-bar linkage restores link_4's orientation but not its position "
                         "once the script has opened the loop (link_4 ends metres from the closed pose)",
    "tutorials/visualization": "recording takes a frame every round(1 / (60 fps x dt)) = 2 steps after "
                               "start_recording, and the script's test run takes 1 step: stop_recording finds no "
                               "frame",
    "fem_hard_and_soft_constraint": "recording takes a frame every round(1 / (60 fps x dt)) = 17 steps after "
                                    "start_recording, and the script's test run takes 10: stop_recording finds no "
                                    "frame",
}

needs_examples = pytest.mark.skipif(EXAMPLES is None, reason=(
    f"no Genesis World examples folder: set ${runner.EXAMPLES_ENV} to a Genesis checkout's examples/ (or put the "
    "checkout at ../Genesis beside this repository)"))


def _params():
    for target in runner.TARGETS:
        marks = []
        if target.needs:  # not run: what it needs is named (docs/compatibility.md)
            marks.append(pytest.mark.skip(reason=f"{target.name} needs {target.needs}"))
        elif target.name in KNOWN_FAILING:
            marks.append(pytest.mark.xfail(reason=KNOWN_FAILING[target.name], strict=False))
        yield pytest.param(target.name, id=target.name, marks=marks)


@needs_examples
@pytest.mark.parametrize("name", list(_params()))
def test_genesis_example(name):
    result = runner.run_one(EXAMPLES, name, timeout=TIMEOUT)
    if result["status"] == "SKIP" and "Python package" in str(result.get("detail")):
        pytest.skip(f"{name}: {result['detail']}")  # an optional package (tensordict) this machine lacks
    assert result["status"] == "PASS", f"{result['status']} {name}: {result.get('detail')}"


def test_every_example_script_is_a_target_and_those_not_run_say_why():
    """The runner covers all of Genesis World's example scripts: with a checkout, each of its scripts is a target;
    a target either has a check or names what it needs (and has none)."""
    for t in runner.TARGETS:
        assert (t.check is None) == bool(t.needs), t.name
    assert len({t.name for t in runner.TARGETS}) == len(runner.TARGETS)
    if EXAMPLES is not None:
        scripts = {os.path.relpath(os.path.join(d, f), EXAMPLES)[:-3] for d, _, files in os.walk(EXAMPLES)
                   for f in files if f.endswith(".py")}
        assert scripts == set(runner.TARGETS_BY_NAME)


def test_a_target_marked_needs_is_skipped_with_its_reason_not_run(tmp_path):
    name = next(t.name for t in runner.TARGETS if t.needs)
    result = runner.run_one(str(tmp_path), name)  # no such script there: not even looked for
    assert result["status"] == "SKIP" and result["detail"] == f"needs {runner.TARGETS_BY_NAME[name].needs}"


def test_relative_import_paths_are_made_absolute_for_the_script_run_elsewhere(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(["plugins/rigid", "/abs/path"]))
    paths = runner._env(str(tmp_path / "examples"))["PYTHONPATH"].split(os.pathsep)
    assert paths == [runner.REPO, str(tmp_path / "plugins" / "rigid"), "/abs/path"]


def test_rewrite_changes_only_the_import_and_the_viewer():
    src = ("import genesis as gs\nfrom genesis.utils.geom import quat_to_xyz\nimport genesis.utils.geom as gu\n"
           "scene = gs.Scene(show_viewer=True)\nx = 'genesis'\n")
    out = runner.rewrite(src)
    assert out == ("import genesis_core as gs\nfrom genesis_core.utils.geom import quat_to_xyz\n"
                   "import genesis_core.utils.geom as gu\nscene = gs.Scene(show_viewer=False)\nx = 'genesis'\n")
