"""Hostile-input cases, run in a child process by tests/test_bad_input.py so that a crash is a test failure:

    python tests/bad_input_cases.py CATEGORY [PRECISION]

Each case prints its name before it runs; the process prints "done N" at the end. A case passes if the engine
either accepts the input or refuses it with a genesis-core error (and, where it refuses, the scene is unchanged);
any other exception, or a crash, fails the run and the last name printed says which case it was.
"""

import os
import pickle
import sys
import warnings

import numpy as np
import torch

import genesis_core as gs
from genesis_core import checkpoint
from genesis_core.plugins import registry
from genesis_core.testing import write_raw_checkpoint

CASES = 0


def case(name):
    global CASES
    CASES += 1
    print(f"case {name}", flush=True)


def flat(scene):
    return {f"{s.solver}.{k}": x.clone() for s in scene.get_state().solvers_state if s is not None
            for k, x in s.fields.items()}


def same(a, b):
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def expect_refused_or_ok(fn, scene, what):
    """Run fn; a genesis-core error must leave the scene's state and t bitwise unchanged."""
    before, t = flat(scene), scene.t
    try:
        fn()
    except gs.GenesisError:
        assert same(before, flat(scene)) and scene.t == t, f"{what}: refused, but the scene changed"
        return False
    return True


def stepped_scene(name, n_envs=3, steps=2):
    scene, drive = registry().test_scenes[name](n_envs)
    for _ in range(steps):
        drive(scene, scene.t)
        scene.step()
    return scene


# -- files ----------------------------------------------------------------------------------------------------------

def _files(tmp):
    scene = stepped_scene("springs")
    good = os.path.join(tmp, "good.ckpt")
    scene.save_checkpoint(good)
    with open(good, "rb") as fh:
        data = fh.read()
    return scene, good, data


def must_refuse(scene, path, what, match=None):
    """load_checkpoint(path) must raise a CheckpointError (whose message matches `match`) and leave the scene
    bitwise unchanged."""
    import re

    before = flat(scene)
    try:
        scene.load_checkpoint(path)
    except gs.CheckpointError as exc:
        assert same(before, flat(scene)), f"{what}: refused, but the scene changed"
        assert match is None or re.search(match, str(exc)), f"{what}: refused for another reason: {exc}"
    else:
        raise AssertionError(f"{what}: loaded")


def _load(scene, path, data, what):
    with open(path, "wb") as fh:
        fh.write(data)
    expect_refused_or_ok(lambda: scene.load_checkpoint(path), scene, what)


def files_random_bytes(tmp):
    scene, _, data = _files(tmp)
    rng = np.random.default_rng(1)
    path = os.path.join(tmp, "bad.ckpt")
    for i in range(150):
        n = int(rng.integers(0, 4096))
        blob = rng.integers(0, 256, n, dtype=np.uint8).tobytes()
        if i % 3 == 1:
            blob = b"\x80\x04" + blob  # a pickle header, then noise
        if i % 3 == 2:
            blob = data[: int(rng.integers(0, len(data)))] + blob  # a valid start, then noise
        case(f"random bytes {i} ({n} bytes)")
        _load(scene, path, blob, "random bytes")


def files_truncations(tmp):
    scene, _, data = _files(tmp)
    path = os.path.join(tmp, "bad.ckpt")
    offsets = sorted(set(np.linspace(0, len(data) - 1, 120).astype(int).tolist()) | set(range(0, 40)))
    for off in offsets:
        case(f"truncated at {off} of {len(data)}")
        with open(path, "wb") as fh:
            fh.write(data[:off])
        must_refuse(scene, path, f"a file truncated at {off} of {len(data)} bytes")


def files_bit_flips(tmp):
    """Every flip is refused (damaged or unreadable) or, where it touches nothing the file means (a pickle
    framing hint), loads exactly the saved state."""
    scene, good, data = _files(tmp)
    scene.load_checkpoint(good)
    saved, t = flat(scene), scene.t
    rng = np.random.default_rng(2)
    path = os.path.join(tmp, "bad.ckpt")
    bits = sorted(rng.choice(8 * len(data), 300, replace=False).tolist())
    accepted = 0
    for bit in bits:
        case(f"bit flip {bit} of {8 * len(data)}")
        blob = bytearray(data)
        blob[bit // 8] ^= 1 << (bit % 8)
        with open(path, "wb") as fh:
            fh.write(bytes(blob))
        try:
            scene.load_checkpoint(path)
        except gs.CheckpointError:
            pass
        else:
            accepted += 1
            assert same(saved, flat(scene)) and scene.t == t, f"bit {bit}: loaded with changed numbers"
        assert same(saved, flat(scene))
    print(f"bit flips: {len(bits)}, loaded unchanged: {accepted}", flush=True)
    # (the few that load touch pickle bytes NumPy overwrites or ignores: the placeholder shape (0,) that the
    # array's state replaces, a dtype's unused alignment field; the state loaded is the saved one, checked above)
    assert accepted <= 5, f"{accepted} of {len(bits)} damaged files loaded"


def files_hostile_pickles(tmp):
    scene, good, data = _files(tmp)
    payload = checkpoint.read(good)
    path = os.path.join(tmp, "bad.ckpt")

    deep = "__DEEP__"  # replaced in the pickle by lists nested 100,000 deep (pickle.dump itself would recurse)

    def dump(obj):
        blob = pickle.dumps(obj, protocol=4)
        n = 100_000
        blob = blob.replace(b"\x8c\x08__DEEP__", b"]" * n + b"a" * (n - 1))  # n empty lists, each appended to the last
        with open(path, "wb") as fh:
            fh.write(blob)

    # nested too deep to seal (the digest is computed after the structure checks): refused for the depth
    for name, obj in [
        ("scene nested 100000 deep", {**payload, "scene": {**payload["scene"], "n_envs": deep}}),
        ("extra entry nested 100000 deep", {**payload, "notes": deep}),
        ("arrays nested", {**payload, "arrays": {"SpringChainSolver.pos": deep}}),
    ]:
        case(name)
        dump(obj)
        must_refuse(scene, path, name, match=("nested deeper than" if name != "arrays nested" else "not a numeric"))
    # resealed (a valid checksum), so that each reaches the rule it is about
    arrays = payload["arrays"]
    for name, obj, match in [
        ("a set in scene", {**payload, "scene": {1, 2}}, "not a dict"),
        ("a tuple of objects in scene", {**payload, "scene": {**payload["scene"], "x": (object,)}}, "refused"),
        ("format version 99", {**payload, "format_version": 99}, "format version 99"),
        ("format version True", {**payload, "format_version": True}, "format version True"),
        ("step_index 2**100", {**payload, "step_index": 2**100}, "not in \\[0, 2\\*\\*62\\)"),
        ("step_index -1", {**payload, "step_index": -1}, "not in"),
        ("timestamp inf", {**payload, "timestamp": float("inf")}, "not a finite number"),
        ("a NaN array", {**payload, "arrays": {**arrays, "SpringChainSolver.vel": arrays["SpringChainSolver.vel"] * np.nan}},
         "SpringChainSolver.vel\\[env 0, index \\[0, 0\\]\\] = nan"),
    ]:
        case(name)
        checkpoint.write(path, obj)
        must_refuse(scene, path, name, match=match)
    for name, obj, match in [
        ("checksum removed", {k: v for k, v in payload.items() if k != "checksum"}, "checksum' entry is missing"),
        ("checksum not a dict", {**payload, "checksum": "0" * 64}, "malformed"),
        ("not a dict", [1, 2, 3], "not a genesis-core checkpoint"),
        ("a non-str key", {**payload, 3: "x"}, "keys must be strings"),
        ("object array", {**payload, "arrays": {**arrays, "SpringChainSolver.pos": np.array([None] * 3)}},
         "not a numeric"),
    ]:
        case(name)
        dump(obj)
        must_refuse(scene, path, name, match=match)
    case("bytes after the end")
    with open(path, "wb") as fh:
        fh.write(data + b"\x00garbage")
    must_refuse(scene, path, "trailing bytes", match="follow the end")
    # hand-written pickles: a huge claimed shape with little data, a chained _codecs expansion, code to run
    class HugeArray:
        def __reduce__(self):
            return (np.ndarray.__reduce__(np.zeros(1))[0], (np.ndarray, (0,), b"b"),
                    (1, (1 << 40, 1 << 20), np.dtype("f8"), False, b"\0" * 8))

    for name, blob in [
        ("huge claimed shape", pickle.dumps({**payload, "arrays": {"SpringChainSolver.pos": HugeArray()}},
                                            protocol=4)),
        ("_codecs.encode", b"\x80\x02c_codecs\nencode\nX\x01\x00\x00\x00aX\x03\x00\x00\x00hex\x86R."),
        ("os.system", b"\x80\x02cos\nsystem\nX\x04\x00\x00\x00true\x85R."),
        ("persistent id", b"\x80\x02X\x01\x00\x00\x00aQ."),
    ]:
        case(name)
        with open(path, "wb") as fh:
            fh.write(blob)
        must_refuse(scene, path, name)
    case("file over max_bytes")
    try:
        scene.load_checkpoint(good, max_bytes=100)
    except gs.CheckpointError as exc:
        assert "limit" in str(exc)
    else:
        raise AssertionError("max_bytes was not enforced")


# -- values ---------------------------------------------------------------------------------------------------------

def hostile_values(spec, dtype):
    if spec.dtype == "int":
        return [-1, 3, 2**31 - 1, -(2**31), 7]
    big = float(torch.finfo(dtype).max) / 10
    return [float("nan"), float("inf"), -float("inf"), big, -big, 1e30, -1e30, 0.0, -1.0, 0.5, 2.0]


def values(tmp, name):
    """Every declared field of every active solver, each hostile value, through reset(state) and a checkpoint;
    what is accepted is then stepped (and must not crash; a non-finite environment is reported)."""
    scene = stepped_scene(name)
    good = scene.get_state()
    path = os.path.join(tmp, "v.ckpt")
    warnings.simplefilter("ignore")
    for si, solver in enumerate(scene.solvers):
        if not solver.is_active:
            continue
        for field, spec in solver.state.specs.items():
            for value in hostile_values(spec, solver.float_dtype):
                for where in ("reset", "checkpoint"):
                    if where == "checkpoint" and not spec.checkpoint:
                        continue
                    case(f"{solver.name}.{field} = {value!r} via {where}")
                    scene.reset(state=good)
                    st = good.clone()
                    x = getattr(st.solvers_state[si], field)
                    x[1].reshape(-1)[0] = value
                    if where == "reset":
                        ok = expect_refused_or_ok(lambda: scene.reset(state=st, envs_idx=[1]), scene, "reset")
                    else:
                        write_raw_checkpoint(scene, st, path)
                        ok = expect_refused_or_ok(lambda: scene.load_checkpoint(path), scene, "checkpoint")
                    if ok:
                        for _ in range(3):
                            scene.step()
                        bad = scene.invalid_envs.tolist()
                        assert set(bad) <= {1}, f"environments {bad} went non-finite, only 1 was changed"
                        assert set(bad) == nonfinite_envs(scene), "a non-finite environment went unreported"
    scene.reset(state=good)


def nonfinite_envs(scene):
    """The environments with a non-finite entry in any float field that declares itself finite."""
    out = set()
    for s in scene.active_solvers:
        for field, spec in s.state.specs.items():
            if spec.dtype == "float" and spec.finite:
                x = s.state.at(field, scene._frame)
                out |= set(torch.nonzero(~torch.isfinite(x.reshape(x.shape[0], -1)).all(1)).flatten().tolist())
    return out


def envs_idx(tmp, name):
    scene = stepped_scene(name)
    entity = scene.entities[-1]
    good = scene.get_state()
    bad = [[-1], [3], [0, 0], 1.5, "a", [[0]], [True, False], np.array([2**40]), torch.tensor([0.5]),
           object(), 2**70, [2**70], {0: 1}, torch.tensor([[1]]), np.array(["x"]), [None], float("nan"), True]
    getters = [m for m in dir(entity) if m.startswith("get_") and "envs_idx" in
               getattr(getattr(entity, m), "__code__", type("", (), {"co_varnames": ()})).co_varnames]
    for idx in bad:
        case(f"reset(envs_idx={idx!r:.40})")
        expect_refused_or_ok(lambda: scene.reset(state=good, envs_idx=idx), scene, "reset")
        for g in getters:
            case(f"{type(entity).__name__}.{g}(envs_idx={idx!r:.40})")
            try:
                getattr(entity, g)(envs_idx=idx)
            except gs.GenesisError:
                pass
    case("reset(envs_idx=[]) is a no-op")
    before = flat(scene)
    scene.reset(state=good, envs_idx=[])
    assert same(before, flat(scene))


def setters(tmp, name):
    """Every setter of the scene's entities with hostile values, in one environment and in all."""
    scene = stepped_scene(name)
    good = scene.get_state()
    warnings.simplefilter("ignore")
    for entity in scene.entities:
        for m in sorted(dir(entity)):
            fn = getattr(entity, m)
            if not (m.startswith(("set_", "control_")) and callable(fn)):
                continue
            for value in [float("nan"), float("inf"), 1e30, -1e30, "x", [[[1.0]]], None, object(), True,
                          np.array([np.nan, 0, 0, 1]), torch.tensor([1, 2], dtype=torch.bool)]:
                for env in (None, [1]):
                    case(f"{type(entity).__name__}.{m}({value!r:.30}, envs_idx={env})")
                    scene.reset(state=good)
                    args = {"envs_idx": env} if "envs_idx" in fn.__code__.co_varnames else {}
                    try:
                        expect_refused_or_ok(lambda: fn(value, **args), scene, m)
                    except TypeError as exc:  # a setter with another signature (set_material_params(E=...))
                        if "argument" not in str(exc):
                            raise
                    scene.step()
                    assert set(scene.invalid_envs.tolist()) <= ({1} if env else {0, 1, 2})


def main():
    category = sys.argv[1]
    gs.init(backend=gs.cpu, precision=sys.argv[2] if len(sys.argv) > 2 else "64", seed=0, logging_level="warning")
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        if ":" in category:
            kind, name = category.split(":")
            globals()[kind](tmp, name)
        else:
            globals()[category](tmp)
    print(f"done {CASES}", flush=True)


if __name__ == "__main__":
    main()
