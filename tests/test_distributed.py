"""Environments sharded over processes (gs.distributed): the sharding rule, index conversion, gathers, and, with
two CPU processes over gloo, that a sharded run equals the unsharded one environment by environment (bitwise)
and that its checkpoint shards resume bitwise in a fresh pair of processes while another world size is refused."""

import importlib.util
import json
import os
import re
import shutil
import socket
import subprocess
import sys

import numpy as np
import pytest
import torch

import genesis_core as gs

from .conftest import REPO, python_env

dist = gs.distributed
EXAMPLE = os.path.join(REPO, "examples", "distributed_rollout.py")
TIMEOUT_S = 420


def _example_module():
    spec = importlib.util.spec_from_file_location("distributed_rollout_example", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _gloo_or_skip():
    import torch.distributed as tdist

    if not tdist.is_available():
        pytest.skip("torch.distributed is not available in this torch build")
    if not tdist.is_gloo_available():
        pytest.skip("torch.distributed has no gloo backend in this torch build")


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _child_env():
    env = python_env()
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
                 "GROUP_RANK", "ROLE_RANK", "TORCHELASTIC_RUN_ID"):
        env.pop(name, None)
    return env


def _run(args, nproc):
    """The example with `args`, in one plain process (nproc=0) or in nproc processes under torch.distributed.run."""
    if nproc:
        cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", str(nproc), "--master_addr",
               "127.0.0.1", "--master_port", str(_free_port()), EXAMPLE, *args]
    else:
        cmd = [sys.executable, EXAMPLE, *args]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, env=_child_env(), timeout=TIMEOUT_S, cwd=REPO)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"{' '.join(cmd)} ran past {TIMEOUT_S} s:\n{exc.stdout}\n{exc.stderr}")
    return done


def _ok(done):
    assert done.returncode == 0, f"exit {done.returncode}\nstdout:\n{done.stdout}\nstderr:\n{done.stderr[-4000:]}"
    return done.stdout


# -- the sharding rule, without processes ---------------------------------------------------------------------------


def test_shards_are_contiguous_balanced_and_cover_every_environment():
    for n in range(1, 23):
        for w in range(1, n + 1):
            ranges = dist.shard_ranges(n, w)
            assert ranges[0][0] == 0 and ranges[-1][1] == n
            assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:]))
            sizes = [b - a for a, b in ranges]
            assert max(sizes) - min(sizes) <= 1 and min(sizes) >= 1
            assert sizes == sorted(sizes, reverse=True)  # the first n % w ranks take one more
    assert dist.shard_ranges(5, 2) == [(0, 3), (3, 5)]


def test_more_processes_than_environments_and_bad_ranks_are_refused():
    with pytest.raises(dist.DistributedError, match="3 processes cannot share 2 environment"):
        dist.shard_range(2, 0, 3)
    with pytest.raises(dist.DistributedError, match=r"rank=2 is not in \[0, world_size=2\)"):
        dist.shard_range(4, 2, 2)
    with pytest.raises(dist.DistributedError, match="n_envs_total=0"):
        dist.shard_range(0, 0, 1)
    with pytest.raises(dist.DistributedError, match="world_size=True"):
        dist.shard_range(4, 0, True)


def test_local_and_global_indices_convert_and_out_of_shard_is_refused():
    s = dist.shard(7, rank=1, world_size=2)
    assert (s.start, s.stop, s.n_envs, s.offset) == (4, 7, 3, 4)
    assert s.global_idx.tolist() == [4, 5, 6]
    assert s.to_global(2) == 6 and s.to_local(4) == 0 and s.owns(6) and not s.owns(3)
    assert s.to_global([0, 2]).tolist() == [4, 6] and s.to_local(torch.tensor([5, 6])).tolist() == [1, 2]
    with pytest.raises(dist.DistributedError, match=r"global environment index 3 is not in \[4, 7\)"):
        s.to_local(3)
    with pytest.raises(dist.DistributedError, match=r"local environment indices must be in \[0, 3\)"):
        s.to_global([0, 3])
    with pytest.warns(UserWarning, match="one environment"):
        dist.shard(3, rank=1, world_size=2)


def test_per_environment_generators_depend_on_the_global_index_only():
    a = torch.rand(4, generator=dist.env_generator(5, seed=3))
    assert torch.equal(a, torch.rand(4, generator=dist.env_generator(5, seed=3)))
    assert not torch.equal(a, torch.rand(4, generator=dist.env_generator(6, seed=3)))


def test_gather_in_one_process_is_a_copy():
    x = torch.arange(6.0).reshape(3, 2)
    y = dist.gather(x, dst=0)
    assert torch.equal(x, y) and y.data_ptr() != x.data_ptr()
    assert torch.equal(dist.gather(x), x)
    with pytest.raises(dist.DistributedError, match="scalar"):
        dist.gather(torch.tensor(1.0))


def test_layout_check_names_world_size_environment_count_and_range():
    manifest = {"world_size": 2, "n_envs_total": 5, "shards": [{"start": 0, "stop": 3}, {"start": 3, "stop": 5}]}
    assert dist.check_layout(manifest, 0, 2, [(0, 3), (3, 5)]) is None
    assert "written by 2 process(es) and this run has 1" in dist.check_layout(manifest, 0, 1, [(0, 5)])
    assert "hold 5 environments and this run has 6" in dist.check_layout(manifest, 0, 2, [(0, 3), (3, 6)])
    assert "rank 0 held global environments [0, 3] when saved and holds [0, 2]" in \
        dist.check_layout(manifest, 0, 2, [(0, 2), (2, 5)])


def _manifest(**changes):
    """A valid manifest of 5 environments over 2 ranks, as save_checkpoint_shard writes it, with `changes`."""
    data = {"format": "genesis-core.checkpoint-shards", "format_version": 1, "world_size": 2, "n_envs_total": 5,
            "step_index": 30,
            "shards": [{"rank": 0, "file": "shard_0_of_2.ckpt", "start": 0, "stop": 3, "checksum": "0" * 64},
                       {"rank": 1, "file": "shard_1_of_2.ckpt", "start": 3, "stop": 5, "checksum": "1" * 64}]}
    return {**data, **changes}


def _shards(**changes):
    """The valid manifest's shards, the second one with `changes`."""
    shards = _manifest()["shards"]
    return [shards[0], {**shards[1], **changes}]


DEEP = "[" * 100_000 + "]" * 100_000
HUGE = 10**30
P = pytest.param


def _json(data, where, raw):
    """JSON text of `data` whose entry `where` (a dotted path: "shards.1.checksum") is the raw JSON text `raw`."""
    node, (*parents, last) = data, where.split(".")
    for k in parents:
        node = node[int(k)] if isinstance(node, list) else node[k]
    node[int(last) if isinstance(node, list) else last] = "@raw@"
    return json.dumps(data).replace('"@raw@"', raw)


@pytest.mark.parametrize("content, match", [
    P(_json(_manifest(), "a", DEEP), "nested 100001 levels deep, more than the limit of 32", id="deep-key"),
    P(_json(_manifest(), "shards.1.checksum", DEEP), "nested 100003 levels deep", id="deep-checksum"),
    P(_json(_manifest(), "shards.0", '{"a": ' * 100_000 + "0" + "}" * 100_000), "nested 100002 levels deep",
      id="deep-shard"),
    P(_json(_manifest(), "world_size", DEEP), "nested 100001 levels deep", id="deep-world-size"),
    P(DEEP, "nested 100000 levels deep", id="deep-document"),
    P("[" * 100_000, "nested 100000 levels deep", id="deep-unclosed"),
    P(json.dumps(_manifest(n_envs_total=HUGE)), r"n_envs_total = 10{30} is not an integer in \[0, 2\*\*62\)",
      id="n_envs_total-huge"),
    P(json.dumps(_manifest(n_envs_total=2**62)), "n_envs_total = 4611686018427387904 is not an integer",
      id="n_envs_total-2**62"),
    P(_json(_manifest(), "n_envs_total", "9" * 5000), "not a readable shard manifest.*4300 digits",
      id="n_envs_total-5000-digits"),
    P(json.dumps(_manifest(step_index=-1)), r"step_index = -1 is not an integer in \[0, 2\*\*62\)",
      id="step_index-negative"),
    P(json.dumps(_manifest(step_index=1.5)), "step_index = 1.5 is not an integer", id="step_index-float"),
    P(json.dumps(_manifest(shards=_shards(start=HUGE))), r"shards\[1\].start = 10{30} is not an integer",
      id="start-huge"),
    P(json.dumps(_manifest(shards=_shards(stop=HUGE))), r"shards\[1\].stop = 10{30} is not an integer",
      id="stop-huge"),
    P(json.dumps(_manifest(shards=_shards(start=-3))), r"shards\[1\].start = -3 is not an integer in \[0, 2\*\*62\)",
      id="start-negative"),
    P(json.dumps(_manifest(shards=_shards(stop=-3))), r"shards\[1\].stop = -3 is not an integer", id="stop-negative"),
    P(json.dumps(_manifest(shards=_shards(start=3, stop=3))),
      r"shards\[1\] holds \[3, 3\); the ranges must be contiguous and non-empty", id="range-empty"),
    P(json.dumps(_manifest(shards=_shards(start=2))), r"shards\[1\] holds \[2, 5\).*starting at 3", id="range-gap"),
    P(json.dumps(_manifest(shards=_shards(rank=True))), r"shards\[1\].rank = True is not an integer", id="rank-bool"),
    P(json.dumps(_manifest(shards=_shards(file="../../x"))), r"shards\[1\].file = '../../x', expected "
      "'shard_1_of_2.ckpt'", id="file-elsewhere"),
    P(json.dumps(_manifest(shards=_shards(checksum=None))), r"shards\[1\].checksum = None is not a string",
      id="checksum-null"),
    P(json.dumps(_manifest(n_envs_total=6)), r"the shards cover \[0, 5\) and n_envs_total is 6", id="coverage"),
    P(json.dumps(_manifest(world_size=0)), r"world_size = 0 is not an integer in \[1, 2\*\*62\)", id="world-0"),
    P(json.dumps(_manifest(world_size=HUGE)), r"world_size = 10{30} is not an integer in \[1, 2\*\*62\)",
      id="world-huge"),
    P(json.dumps(_manifest(world_size=True)), "world_size = True is not an integer", id="world-bool"),
    P(json.dumps(_manifest(world_size=2.0)), "world_size = 2.0 is not an integer", id="world-float"),
    P(json.dumps(_manifest(world_size=3)), "lists 2 shards and world_size is 3", id="world-not-the-shards"),
    P(json.dumps(_manifest(shards={"0": 1})), "has shards = {'0': 1} and world_size is 2", id="shards-object"),
    P(json.dumps(_manifest(format_version=True)), "manifest version True; this engine reads 1", id="version-bool"),
    P(json.dumps(_manifest()) + " " * (20 * 2**20), r"is 20971\d+ bytes, more than the limit of 16777216 for a shard "
      "manifest", id="20-MiB"),
    P(b"\xff\xfe{}\x80", "not UTF-8 text", id="not-utf-8"),
    P(json.dumps([_manifest()]), "is not a genesis-core shard manifest", id="a-list"),
    P(json.dumps(_manifest())[:-1], "is not a readable shard manifest", id="truncated"),
    P("", "is not a readable shard manifest", id="empty"),
])
def test_hostile_manifests_are_refused_with_checkpoint_errors(tmp_path, content, match):
    """read_manifest (which load_checkpoint_shard calls first) refuses what save_checkpoint_shard never writes with a
    CheckpointError naming it: nesting past the limit (before parsing: never a RecursionError), an integer outside
    [0, 2**62) or a bool, a world size that is not the number of shards, a file over the size limit, bytes that are
    not UTF-8, JSON that is not an object."""
    path = tmp_path / "manifest.json"
    if isinstance(content, str):
        path.write_text(content, encoding="utf-8")
    else:
        path.write_bytes(content)
    error = None
    try:
        dist.read_manifest(tmp_path)
    except gs.CheckpointError as exc:
        error = str(exc)
    except RecursionError:
        error = "RecursionError"
    assert error is not None, "the manifest was accepted"
    assert error != "RecursionError", "read_manifest raised RecursionError, not a CheckpointError"
    assert re.search(match, error), error


def test_a_manifest_with_brackets_inside_strings_and_the_valid_one_are_read(tmp_path):
    path = tmp_path / "manifest.json"
    path.write_text(json.dumps(_manifest()), encoding="utf-8")
    assert dist.read_manifest(tmp_path) == _manifest()
    # brackets and escaped quotes inside strings are not nesting
    odd = _manifest(note='[{"' * 100_000 + "\\", shards=_shards(checksum='\\"]' * 40 + "[" * 100_000))
    path.write_text(json.dumps(odd), encoding="utf-8")
    assert dist.read_manifest(tmp_path) == odd


# -- two processes over gloo ----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The example run unsharded (one process) and sharded (two processes over gloo), 5 environments (shards of 3
    and 2), then the sharded checkpoint resumed in a fresh pair of processes."""
    _gloo_or_skip()
    tmp = tmp_path_factory.mktemp("distributed")
    common = ["--n-envs", "5", "--steps", "30", "--resume-steps", "10"]
    out = {}
    out["one"] = _ok(_run([*common, "--checkpoint", str(tmp / "one.d"), "--out", str(tmp / "one.npz")], 0))
    out["two"] = _ok(_run([*common, "--checkpoint", str(tmp / "two.d"), "--out", str(tmp / "two.npz")], 2))
    shutil.copytree(tmp / "two.d", tmp / "saved.d")  # as written at step 30 (the run then loaded it again)
    out["resumed"] = _ok(_run([*common, "--checkpoint", str(tmp / "saved.d"), "--resume", "--out",
                               str(tmp / "resumed.npz")], 2))
    return tmp, out


def _arrays(path):
    with np.load(path) as data:
        return {k: data[k] for k in data.files}


def test_sharded_run_equals_unsharded_run_environment_by_environment(runs):
    tmp, out = runs
    one, two = _arrays(tmp / "one.npz"), _arrays(tmp / "two.npz")
    assert int(one["world_size"]) == 1 and int(two["world_size"]) == 2
    assert "2 process(es), 5 environments (rank 0: 0..2, rank 1: 3..4)" in out["two"]
    assert "bitwise equal" in out["one"] and "bitwise equal" in out["two"]  # each resumed its own shards in-process
    keys = sorted(k for k in one if k != "world_size")
    assert keys == sorted(k for k in two if k != "world_size") and "RigidSolver.qpos" in keys
    for k in keys:
        a, b = one[k], two[k]
        assert a.shape == b.shape and a.dtype == b.dtype, k
        for env in range(a.shape[0] if a.ndim else 0):
            assert np.array_equal(a[env], b[env]), f"{k}, environment {env}: sharded differs from unsharded"
        assert np.array_equal(a, b), k
    moved = one["RigidSolver.qpos"]
    assert len({moved[e].tobytes() for e in range(5)}) == 5, "every environment starts from its own state"


def test_checkpoint_shards_resume_bitwise_in_fresh_processes(runs):
    tmp, out = runs
    manifest = dist.read_manifest(tmp / "saved.d")
    assert manifest["world_size"] == 2 and manifest["n_envs_total"] == 5 and manifest["step_index"] == 30
    assert [(s["file"], s["start"], s["stop"]) for s in manifest["shards"]] == \
        [("shard_0_of_2.ckpt", 0, 3), ("shard_1_of_2.ckpt", 3, 5)]
    assert "resumed the shards" in out["resumed"] and "at step 30" in out["resumed"]
    two, resumed = _arrays(tmp / "two.npz"), _arrays(tmp / "resumed.npz")
    assert int(resumed["t"]) == int(two["t"]) == 40
    for k in two:
        assert np.array_equal(two[k], resumed[k]), f"{k}: the resumed shards differ from the original run"


def test_load_with_another_world_size_or_a_replaced_shard_is_refused(runs, tmp_path):
    tmp, _ = runs
    example = _example_module()
    scene, _, _ = example.build_scene(dist.shard(5, rank=0, world_size=1))
    before = {k: v.clone() for k, v in scene.get_state().fields_by_key().items()}
    with pytest.raises(gs.CheckpointMismatchError,
                       match=r"written by 2 process\(es\) and this run has 1: resume with the same world size"):
        dist.load_checkpoint_shard(scene, tmp / "saved.d")
    assert scene.t == 0
    assert all(torch.equal(v, before[k]) for k, v in scene.get_state().fields_by_key().items())
    # one process: its own shards load; a shard file replaced after the manifest was written is refused
    folder = tmp_path / "one.d"
    dist.save_checkpoint_shard(scene, folder)
    scene.step()
    scene.save_checkpoint(folder / "shard_0_of_1.ckpt")
    with pytest.raises(gs.CheckpointMismatchError, match="not the shard the manifest names"):
        dist.load_checkpoint_shard(scene, folder)
    assert scene.t == 1
    with pytest.raises(gs.CheckpointError, match="holds no manifest.json"):
        dist.load_checkpoint_shard(scene, tmp_path)
