"""Properties every installed solver must hold, over random n_envs, step counts and envs_idx subsets:

- get_state / reset round trip is bitwise, and restores scene.t;
- "snapshot, step N, restore, step N" repeats the first N steps bitwise (CPU determinism);
- reset with envs_idx restores exactly those environments and leaves the others bitwise untouched;
- save_checkpoint / load_checkpoint round trip, in this process and in a fresh one;
- a serialised, pickled SimState can be passed back to reset.

Each plugin contributes small scenes through the `register_test_scenes` hook; one test body runs over all.
"""

import pickle
import subprocess
import sys

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from genesis_core.plugins import registry

from .conftest import python_env

SCENES = sorted(registry().test_scenes)


def test_every_installed_solver_is_in_a_test_scene():
    """The properties below hold for every installed solver only if each one contributes a test scene."""
    covered = set()
    for name in SCENES:
        scene, _ = registry().test_scenes[name](0)
        covered |= {s.name for s in scene.active_solvers}
    assert set(registry().solvers) <= covered, f"solvers without a test scene: {set(registry().solvers) - covered}"


def flat(state):
    return {f"{s.solver}.{k}": x.clone() for s in state.solvers_state if s is not None for k, x in s.fields.items()}


def assert_states_equal(a, b):
    fa, fb = flat(a), flat(b)
    assert fa.keys() == fb.keys()
    for k in fa:
        assert torch.equal(fa[k], fb[k]), f"{k} differs (max {(fa[k].double() - fb[k].double()).abs().max():.3g})"


def make(name, n_envs):
    return registry().test_scenes[name](n_envs)


def run(scene, drive, n):
    for _ in range(n):
        drive(scene, scene.t)
        scene.step()


n_envs_st = st.integers(min_value=0, max_value=5)
steps_st = st.integers(min_value=0, max_value=12)


@pytest.mark.parametrize("name", SCENES)
@given(n_envs=n_envs_st, k1=steps_st, k2=st.integers(min_value=1, max_value=12))
def test_get_state_reset_round_trip(name, n_envs, k1, k2):
    scene, drive = make(name, n_envs)
    run(scene, drive, k1)
    snap = scene.get_state()
    run(scene, drive, k2)
    scene.reset(state=snap)
    assert scene.t == k1
    assert_states_equal(scene.get_state(), snap)


@pytest.mark.parametrize("name", SCENES)
@given(n_envs=n_envs_st, k1=steps_st, n=st.integers(min_value=1, max_value=12))
def test_snapshot_step_restore_step_is_bitwise(name, n_envs, k1, n):
    scene, drive = make(name, n_envs)
    run(scene, drive, k1)
    snap = scene.get_state()
    first = []
    for _ in range(n):
        run(scene, drive, 1)
        first.append(scene.get_state())
    scene.reset(state=snap)
    for ref in first:
        run(scene, drive, 1)
        assert_states_equal(scene.get_state(), ref)
    # and a second scene built the same way runs the same
    other, drive2 = make(name, n_envs)
    run(other, drive2, k1 + n)
    assert_states_equal(other.get_state(), first[-1])


@pytest.mark.parametrize("name", SCENES)
@given(data=st.data(), n_envs=st.integers(min_value=2, max_value=6), k1=steps_st, k2=st.integers(1, 12))
def test_reset_envs_idx_touches_only_those_envs(name, data, n_envs, k1, k2):
    envs = data.draw(st.lists(st.integers(0, n_envs - 1), unique=True, max_size=n_envs), label="envs_idx")
    as_type = data.draw(st.sampled_from(["list", "tensor", "numpy", "mask"]), label="envs_idx type")
    scene, drive = make(name, n_envs)
    run(scene, drive, k1)
    snap = scene.get_state()
    run(scene, drive, k2)
    before = scene.get_state()
    idx = {"list": envs, "tensor": torch.tensor(envs, dtype=torch.long), "numpy": np.array(envs, dtype=np.int64),
           "mask": torch.isin(torch.arange(n_envs), torch.tensor(envs, dtype=torch.long))}[as_type]
    scene.reset(state=snap, envs_idx=idx)
    after = flat(scene.get_state())
    chosen = torch.zeros(n_envs, dtype=torch.bool)
    chosen[envs] = True
    for key, x in after.items():
        assert torch.equal(x[chosen], flat(snap)[key][chosen]), f"{key}: a reset environment differs from the state"
        assert torch.equal(x[~chosen], flat(before)[key][~chosen]), f"{key}: an environment outside envs_idx changed"
    assert scene.t == k1 + k2  # a partial reset does not move the clock


@pytest.mark.parametrize("name", SCENES)
@given(n_envs=n_envs_st, k1=steps_st, k2=st.integers(1, 10))
def test_checkpoint_round_trip_same_process(name, n_envs, k1, k2, tmp_path_factory):
    path = tmp_path_factory.mktemp("ckpt") / "run.ckpt"
    scene, drive = make(name, n_envs)
    run(scene, drive, k1)
    saved = scene.get_state()
    scene.save_checkpoint(path)
    run(scene, drive, k2)
    continued = scene.get_state()
    fresh, drive2 = make(name, n_envs)
    fresh.load_checkpoint(path)
    assert fresh.t == k1
    assert_states_equal(fresh.get_state(), saved)
    run(fresh, drive2, k2)
    assert_states_equal(fresh.get_state(), continued)


@pytest.mark.parametrize("name", SCENES)
@given(n_envs=n_envs_st, k1=steps_st)
def test_pickled_state_can_be_reset_to(name, n_envs, k1):
    scene, drive = make(name, n_envs)
    run(scene, drive, k1)
    state = scene.get_state()
    blob = pickle.dumps(state.serializable())
    assert state.scene is None
    run(scene, drive, 3)
    scene.reset(state=pickle.loads(blob))
    assert scene.t == k1
    assert_states_equal(scene.get_state(), state)


CHILD = r"""
import sys, numpy as np, genesis_core as gs
from genesis_core.plugins import registry
gs.init(backend=gs.cpu, precision="64", seed=0)
name, n_envs, path, steps, out = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), sys.argv[5]
scene, drive = registry().test_scenes[name](n_envs)
scene.load_checkpoint(path)
for _ in range(steps):
    drive(scene, scene.t)
    scene.step()
state = scene.get_state()
np.savez(out, t=scene.t, **{f"{s.solver}.{k}": x.numpy() for s in state.solvers_state if s is not None
                           for k, x in s.fields.items()})
"""


@pytest.mark.parametrize("name", SCENES)
@pytest.mark.parametrize("n_envs", [0, 3])
def test_checkpoint_resumes_exactly_in_a_fresh_process(name, n_envs, tmp_path):
    scene, drive = make(name, n_envs)
    run(scene, drive, 7)
    scene.save_checkpoint(tmp_path / "run.ckpt")
    run(scene, drive, 9)
    expected = flat(scene.get_state())
    subprocess.run([sys.executable, "-c", CHILD, name, str(n_envs), str(tmp_path / "run.ckpt"), "9",
                    str(tmp_path / "out.npz")], check=True, env=python_env(), cwd=tmp_path)
    got = np.load(tmp_path / "out.npz")
    assert int(got["t"]) == 16
    for key, x in expected.items():
        assert np.array_equal(got[key], x.numpy()), f"{key} differs after resuming in another process"
