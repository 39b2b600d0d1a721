"""The checkpoint file: the format, compatibility checks that name the first difference, safe loading,
atomic saves, clear errors on truncated or foreign files, and a scene left untouched by any failed load."""

import os
import pickle
import subprocess
import sys

import numpy as np
import pytest
import torch

import genesis_core as gs
from genesis_core import checkpoint

from .conftest import python_env


def chain_scene(n_envs=2, n_nodes=4, stiffness=300.0, dt=1e-2, euler=(0, 40, 0)):
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=dt, substeps=2))
    chain = scene.add_entity(gs.morphs.Cylinder(pos=(0, 0, 1), height=0.6, radius=0.01, euler=euler),
                             material=gs.materials.SpringChain(n_nodes=n_nodes, stiffness=stiffness))
    scene.build(n_envs=n_envs)
    return scene, chain


def stepped(n_steps=5, **kw):
    scene, chain = chain_scene(**kw)
    for _ in range(n_steps):
        scene.step()
    return scene, chain


def snapshot(scene):
    """Copies of every field, by checkpoint key ("SpringChainSolver.pos")."""
    return {k: x.clone() for k, x in scene.get_state().fields_by_key().items()}


def test_file_is_a_plain_dict_readable_with_pickle_load(tmp_path):
    scene, _ = stepped(7)
    scene.save_checkpoint(tmp_path / "a.ckpt")
    with open(tmp_path / "a.ckpt", "rb") as fh:
        payload = pickle.load(fh)
    assert isinstance(payload["timestamp"], float) and payload["step_index"] == 7
    assert set(payload["arrays"]) == {"SpringChainSolver.pos", "SpringChainSolver.vel", "SpringChainSolver.anchor"}
    pos = payload["arrays"]["SpringChainSolver.pos"]
    assert isinstance(pos, np.ndarray) and pos.shape == (2, 4, 3) and pos.dtype == np.float64
    assert np.array_equal(pos, scene.entities[0].get_nodes_pos().numpy())
    assert payload["format"] == checkpoint.FORMAT and payload["format_version"] == checkpoint.FORMAT_VERSION


def test_no_batch_dimension_without_envs(tmp_path):
    scene, _ = stepped(3, n_envs=0)
    scene.save_checkpoint(tmp_path / "a.ckpt")
    assert checkpoint.read(tmp_path / "a.ckpt")["arrays"]["SpringChainSolver.pos"].shape == (4, 3)


def test_load_restores_state_and_t(tmp_path):
    scene, _ = stepped(9)
    saved = snapshot(scene)
    scene.save_checkpoint(tmp_path / "a.ckpt")
    for _ in range(4):
        scene.step()
    scene.load_checkpoint(tmp_path / "a.ckpt")
    assert scene.t == 9
    for k, x in snapshot(scene).items():
        assert torch.equal(x, saved[k])


@pytest.mark.parametrize(
    "kwargs, where",
    [
        (dict(n_envs=3), "scene.n_envs"),
        (dict(stiffness=301.0), "stiffness"),
        (dict(n_nodes=5), "n_nodes"),
        (dict(dt=2e-2), "scene.sim_options.dt"),
        (dict(euler=(0, 41, 0)), "morph"),
    ],
)
def test_mismatched_scene_is_refused_naming_the_first_difference(tmp_path, kwargs, where):
    source, _ = stepped(4)
    source.save_checkpoint(tmp_path / "a.ckpt")
    target, _ = stepped(2, **kwargs)
    before = snapshot(target)
    with pytest.raises(gs.CheckpointMismatchError, match="does not fit this scene") as info:
        target.load_checkpoint(tmp_path / "a.ckpt")
    assert where in str(info.value)
    assert target.t == 2
    for k, x in snapshot(target).items():
        assert torch.equal(x, before[k]), "a failed load changed the scene"


def test_other_precision_is_refused(tmp_path):
    source, _ = stepped(2)
    source.save_checkpoint(tmp_path / "a.ckpt")
    payload = checkpoint.read(tmp_path / "a.ckpt")
    payload["scene"]["precision"] = "32"
    payload["arrays"] = {k: v.astype(np.float32) for k, v in payload["arrays"].items()}
    checkpoint.write(tmp_path / "b.ckpt", payload)
    with pytest.raises(gs.CheckpointMismatchError, match=r"scene.precision: the checkpoint has '32'"):
        source.load_checkpoint(tmp_path / "b.ckpt")


def test_array_of_wrong_shape_or_missing_key_is_refused(tmp_path):
    scene, _ = stepped(2)
    scene.save_checkpoint(tmp_path / "a.ckpt")
    payload = checkpoint.read(tmp_path / "a.ckpt")
    payload["arrays"]["SpringChainSolver.vel"] = payload["arrays"]["SpringChainSolver.vel"][:, :2]
    checkpoint.write(tmp_path / "b.ckpt", payload)
    with pytest.raises(gs.CheckpointMismatchError, match=r"SpringChainSolver.vel.*float64\[2, 2, 3\].*\[2, 4, 3\]"):
        scene.load_checkpoint(tmp_path / "b.ckpt")
    del payload["arrays"]["SpringChainSolver.vel"]
    checkpoint.write(tmp_path / "c.ckpt", payload)
    with pytest.raises(gs.CheckpointMismatchError, match="absent from the checkpoint"):
        scene.load_checkpoint(tmp_path / "c.ckpt")


class _Exploit:
    def __reduce__(self):
        return (os.system, ("touch pwned",))


def test_malicious_pickle_is_refused_and_nothing_runs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    scene, _ = stepped(2)
    scene.save_checkpoint("good.ckpt")
    payload = checkpoint.read("good.ckpt")
    payload["arrays"]["SpringChainSolver.pos"] = _Exploit()
    with open("evil.ckpt", "wb") as fh:
        pickle.dump(payload, fh)
    before = snapshot(scene)
    with pytest.raises(gs.UnsafeCheckpointError, match="posix.system|os.system"):
        scene.load_checkpoint("evil.ckpt")
    assert not os.path.exists("pwned"), "code from the checkpoint ran"
    for k, x in snapshot(scene).items():
        assert torch.equal(x, before[k])
    # the same file given to plain pickle.load would have run the command: the test is real
    with open("evil.ckpt", "rb") as fh:
        pickle.load(fh)
    assert os.path.exists("pwned")


def test_truncated_file_gives_a_clear_error(tmp_path):
    scene, _ = stepped(2)
    scene.save_checkpoint(tmp_path / "a.ckpt")
    data = (tmp_path / "a.ckpt").read_bytes()
    for cut in (0, 1, len(data) // 2, len(data) - 1):
        (tmp_path / "t.ckpt").write_bytes(data[:cut])
        with pytest.raises(gs.CheckpointError, match="truncated or corrupt"):
            scene.load_checkpoint(tmp_path / "t.ckpt")
    assert scene.t == 2


@pytest.mark.parametrize("content", [[1, 2, 3], {"timestamp": 1.0, "step_index": 1, "arrays": {}}, "text"])
def test_foreign_pickle_is_refused(tmp_path, content):
    scene, _ = stepped(1)
    (tmp_path / "f.pkl").write_bytes(pickle.dumps(content))
    with pytest.raises(gs.CheckpointError, match="not a genesis-core checkpoint"):
        scene.load_checkpoint(tmp_path / "f.pkl")


def test_missing_file_and_not_a_pickle(tmp_path):
    scene, _ = stepped(1)
    with pytest.raises(gs.CheckpointError, match="cannot read checkpoint"):
        scene.load_checkpoint(tmp_path / "nope.ckpt")
    (tmp_path / "x.ckpt").write_bytes(b"\x89PNG\r\n\x1a\n not a pickle at all")
    with pytest.raises(gs.CheckpointError):
        scene.load_checkpoint(tmp_path / "x.ckpt")


def test_save_is_atomic(tmp_path, monkeypatch):
    scene, _ = stepped(3)
    path = tmp_path / "run.ckpt"
    scene.save_checkpoint(path)
    good = path.read_bytes()
    for _ in range(2):
        scene.step()

    def crash(obj, fh, protocol=None):
        fh.write(b"partial write")
        raise KeyboardInterrupt("power cut")

    monkeypatch.setattr(checkpoint.pickle, "dump", crash)
    with pytest.raises(KeyboardInterrupt):
        scene.save_checkpoint(path)
    monkeypatch.undo()
    assert path.read_bytes() == good, "the previous checkpoint was damaged"
    assert [p.name for p in tmp_path.iterdir()] == ["run.ckpt"], "a temporary file was left behind"
    assert checkpoint.read(path)["step_index"] == 3


def test_save_and_load_before_build_raise(tmp_path):
    scene = gs.Scene()
    with pytest.raises(gs.SceneError, match="before scene.build"):
        scene.save_checkpoint(tmp_path / "a.ckpt")
    with pytest.raises(gs.SceneError, match="before scene.build"):
        scene.load_checkpoint(tmp_path / "a.ckpt")


def test_cli_inspect_prints_keys_shapes_and_dtypes(tmp_path):
    scene, _ = stepped(6, n_envs=3)
    scene.save_checkpoint(tmp_path / "a.ckpt")
    out = subprocess.run([sys.executable, "-m", "genesis_core.cli", "inspect", str(tmp_path / "a.ckpt")],
                         capture_output=True, text=True, env=python_env(), check=True).stdout
    assert "step_index:     6" in out and f"version {checkpoint.FORMAT_VERSION}" in out and "timestamp:" in out
    assert "checksum:       sha256 " in out and "(verified)" in out
    assert "SpringChainSolver.pos" in out and "(3, 4, 3)" in out and "float64" in out
    assert "SpringChainSolver.anchor" in out and "(3, 1, 3)" in out
    (tmp_path / "bad.ckpt").write_bytes(b"garbage")
    bad = subprocess.run([sys.executable, "-m", "genesis_core.cli", "inspect", str(tmp_path / "bad.ckpt")],
                         capture_output=True, text=True, env=python_env())
    assert bad.returncode == 1 and "error:" in bad.stderr


def test_checkpoint_file_mode_follows_umask_and_bad_folder_is_clear(tmp_path):
    scene, _ = stepped(1)
    old = os.umask(0o022)
    try:
        scene.save_checkpoint(tmp_path / "a.ckpt")
    finally:
        os.umask(old)
    assert (tmp_path / "a.ckpt").stat().st_mode & 0o777 == 0o644
    with pytest.raises(gs.CheckpointError, match="cannot write checkpoint"):
        scene.save_checkpoint(tmp_path / "no" / "such" / "dir" / "a.ckpt")


def test_non_finite_arrays_and_non_plain_scene_entry_are_refused(tmp_path):
    scene, _ = stepped(1)
    scene.save_checkpoint(tmp_path / "a.ckpt")
    payload = checkpoint.read(tmp_path / "a.ckpt")
    payload["arrays"]["SpringChainSolver.pos"][0, 0, 0] = np.nan
    checkpoint.write(tmp_path / "b.ckpt", payload)
    with pytest.raises(gs.InvalidCheckpointStateError, match=r"SpringChainSolver.pos\[env 0, index \[0, 0\]\] = nan"):
        scene.load_checkpoint(tmp_path / "b.ckpt")
    payload = checkpoint.read(tmp_path / "a.ckpt")
    payload["scene"]["n_envs"] = np.zeros(3)
    checkpoint.write(tmp_path / "c.ckpt", payload)
    with pytest.raises(gs.CheckpointError, match="plain data"):
        scene.load_checkpoint(tmp_path / "c.ckpt")


def test_the_store_derives_the_checkpoint_from_the_declaration():
    """StateStore owns what a checkpoint holds: the fields declared checkpoint=True, keyed by field_key, in the
    public layout and the storage dtype; a restore writes them and restarts the other fields from given values;
    a value outside the declaration is refused before anything is written."""
    from genesis_core.state import StateStore, field_key

    specs = [gs.FieldSpec("pos", ("n", 3)), gs.FieldSpec("cache", ("n",), frames=False, checkpoint=False),
             gs.FieldSpec("mode", ("n",), dtype="int", codes=(0, 1), frames=False)]

    def store(n_envs):
        return StateStore("ToySolver", specs, {"n": 2}, n_envs, 2, torch.float64, torch.device("cpu"))

    assert field_key("ToySolver", "pos") == "ToySolver.pos"
    for n_envs, lead in ((3, (3,)), (0, ())):
        src, dst = store(n_envs), store(n_envs)
        assert src.checkpoint_layout() == {"ToySolver.pos": (lead + (2, 3), np.dtype("float64")),
                                           "ToySolver.mode": (lead + (2,), np.dtype("int32"))}
        src.at("pos", 1).copy_(torch.arange(src.batch * 6, dtype=torch.float64).reshape(src.batch, 2, 3))
        src.at("mode", 1)[..., 1] = 1
        src.at("cache", 1).fill_(7.0)
        arrays = src.checkpoint_arrays(1, "test")
        assert list(arrays) == ["ToySolver.pos", "ToySolver.mode"]
        assert all(a.flags.c_contiguous and a.shape == src.checkpoint_layout()[k][0] for k, a in arrays.items())
        values = dst.from_checkpoint(arrays, "test")
        dst.restore(0, values, {"cache": torch.full(lead + (2,), 3.0, dtype=torch.float64)})
        assert torch.equal(dst.at("pos", 0), src.at("pos", 1)) and torch.equal(dst.at("mode", 0), src.at("mode", 1))
        assert bool((dst.at("cache", 0) == 3.0).all())
        arrays["ToySolver.mode"][..., 0] = 2
        before = dst.at("pos", 0).clone()
        with pytest.raises(gs.InvalidStateError, match=r"test: ToySolver.mode\[.*index \[0\]\] = 2 .*one of \[0, 1\]"):
            dst.from_checkpoint(arrays, "test")
        assert torch.equal(dst.at("pos", 0), before)
