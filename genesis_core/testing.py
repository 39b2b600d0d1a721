"""Test support for solver packages (the core's tests, the first-party plugins', a third party's).

Fixtures, in a conftest.py::

    from genesis_core.testing import gs_runtime, shared_assets  # noqa: F401

gs_runtime: one engine runtime per test process (CPU, float64, seeded), started once and torn down at the end.
shared_assets: the path of ../shared/assets beside the repository, or a skip that says it is absent.
central_differences, assert_close_rel: checking a gradient against finite differences.
check_momentum_exchange: the two sides of a coupling exchange linear momentum and lose none.

The engine's shared properties, in a test file of a solver package (they need hypothesis, the `test` extra)::

    import my_solver.plugin
    from genesis_core.testing import property_tests

    TestMySolverProperties = property_tests(my_solver.plugin)

runs, on every scene the plugin registers with `register_test_scenes` (or on a dict of scene factories),
over random n_envs, step counts and envs_idx subsets:

- get_state / reset round trip is bitwise, and restores scene.t;
- "snapshot, step N, restore, step N" repeats the first N steps bitwise (CPU determinism), and a second scene
  built the same way runs the same;
- reset with envs_idx restores exactly those environments and leaves the others bitwise untouched;
- save_checkpoint / load_checkpoint round trip, in this process and in a fresh one;
- a serialised, pickled SimState can be passed back to reset.

Each property is also a plain function (`check_get_state_reset_round_trip`, ...) that raises AssertionError;
`assert_states_equal` compares two states and names every key that differs ("Class.field"), with the
environments and the largest difference. Importing this module imports pytest; hypothesis is imported by
`property_tests` only, and nothing here is imported by `import genesis_core`.
"""

import os
import pickle
import subprocess
import sys
from typing import NamedTuple

import numpy as np
import pytest
import torch

SHARED_ASSETS_ENV = "GENESIS_SHARED_ASSETS"
RUNTIME = dict(precision="64", seed=0, logging_level="warning")  # on the CPU


def _start_runtime() -> bool:
    """Start the engine on the CPU in float64 unless it is already running; True if this call started it."""
    import genesis_core as gs

    if gs.runtime.initialized:
        return False
    gs.init(backend=gs.cpu, **RUNTIME)
    return True


@pytest.fixture(scope="session", autouse=True)
def gs_runtime():
    import genesis_core as gs

    started = _start_runtime()
    yield gs
    if started:
        gs.destroy()


def shared_assets_path(start: str) -> str:
    """$GENESIS_SHARED_ASSETS, or the first `shared/assets` found beside a parent folder of `start`."""
    if os.environ.get(SHARED_ASSETS_ENV):
        return os.environ[SHARED_ASSETS_ENV]
    folder = os.path.abspath(start)
    while True:
        candidate = os.path.join(os.path.dirname(folder), "shared", "assets")
        if os.path.isdir(candidate) or os.path.dirname(folder) == folder:
            return candidate
        folder = os.path.dirname(folder)


@pytest.fixture
def shared_assets(request):
    path = shared_assets_path(str(request.config.rootpath))
    if not os.path.isdir(path):
        pytest.skip(f"robot models of ../shared/assets are absent ({path}); they exist beside CI's clone")
    return path


def python_env(**extra):
    """Environment for a child Python process that sees the same packages as this one."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([p for p in sys.path if p] + [env.get("PYTHONPATH", "")])
    env.update(extra)
    return env


def central_differences(fn, x, eps=1e-6):
    """The gradient of the scalar function `fn` at tensor `x` by central differences, one entry at a time."""
    out = torch.zeros_like(x)
    for i in range(x.numel()):
        d = torch.zeros_like(x).view(-1)
        d[i] = eps
        d = d.view_as(x)
        out.view(-1)[i] = (fn(x + d) - fn(x - d)) / (2 * eps)
    return out


def assert_close_rel(grad, fd, tol=1e-3):
    """|grad - fd| / |fd| < tol, with both printed when it is not."""
    err = float((grad - fd).norm() / fd.norm())
    assert err < tol, f"relative error {err:.2e}\ngrad {grad}\nfd   {fd}"


# -- comparing states ----------------------------------------------------------------------------------------


def grads_match_differences(run, pair, x0, moves=0.0, tol=1e-3):
    """run(scene, entity, *inputs) -> loss: one backward through the differentiable scene of `pair` ((scene,
    entity) built with requires_grad=True, then the same built plain) at the inputs x0, then each input's gradient
    against central differences of the plain scene (reset before each run), each of which must move the loss by
    more than `moves`, to a relative `tol` (one, or one per input). Returns the inputs (with .grad)."""
    (scene, ent), (ref, ref_ent) = pair
    xs = [x.clone().requires_grad_(True) for x in x0]
    run(scene, ent, *xs).backward()
    for i, x in enumerate(xs):
        def f(v, i=i):
            ref.reset()
            args = list(x0)
            args[i] = v
            return float(run(ref, ref_ent, *args))

        fd = central_differences(f, x0[i])
        assert float(fd.abs().max()) > moves, f"input {i} does not move the loss"
        assert_close_rel(x.grad, fd, tol=tol[i] if isinstance(tol, (list, tuple)) else tol)
    return xs


def _state_key(solver: str, field: str) -> str:
    """The key of a field in a checkpoint's "arrays" and in every message: "RigidSolver.qpos"."""
    from .state import field_key

    return field_key(solver, field)


def flat_state(state) -> dict:
    """{"Class.field": tensor} of a SimState, in solver order (a dict of tensors or arrays is returned as tensors)."""
    if isinstance(state, dict):
        return {k: torch.as_tensor(x) for k, x in state.items()}
    return {_state_key(s.solver, k): x for s in state.solvers_state if s is not None for k, x in s.fields.items()}


def scene_fields(scene) -> tuple:
    """({"Class.field": a copy of the tensor} of the scene's state, scene.t): what a refused write must leave as it
    was (assert_unchanged)."""
    return {k: v.clone() for k, v in scene.get_state().fields_by_key().items()}, scene.t


def assert_unchanged(after: tuple, before: tuple):
    """Two scene_fields(scene) bitwise equal: the same t, keys and tensors."""
    assert after[1] == before[1] and after[0].keys() == before[0].keys()
    for k, x in before[0].items():
        assert torch.equal(after[0][k], x), f"{k} changed"


def write_raw_checkpoint(scene, state, path):
    """A checkpoint of `state` (a SimState of `scene`) sealed with a valid checksum, whatever its values: what a
    hostile writer makes, for tests that the values are refused on their own."""
    from . import __version__, checkpoint

    arrays = {f"{s.name}.{k}": getattr(sub, k).numpy().copy() for s, sub in zip(scene.solvers, state.solvers_state)
              if s.is_active for k, spec in s.state.specs.items() if spec.checkpoint}
    payload = checkpoint.make_payload(state.t, arrays, scene.signature(), __version__)
    with open(path, "wb") as fh:
        pickle.dump(payload, fh, protocol=4)


def solver_state(state, solver: str):
    """The part of a SimState that belongs to the solver named `solver` ("FEMSolver", ...)."""
    return next(s for s in state.solvers_state if s is not None and s.solver == solver)


LINK_REFUSALS = [  # (a link reference, the expected text of its refusal) in a scene with one rigid link
    (10**6, r"-1 \(no link\) or a link of the rigid solver, 0 <= link < 1"),
    (1, r"-1 \(no link\) or a link of the rigid solver, 0 <= link < 1"),  # the link count itself
    (-2, r"a value in \[-1\.0, inf\]"),  # the field's own bound
]


def check_link_reference_rule(scene, solver, field, link, expected, folder, particles):
    """A particle solver's link field (`field` of the solver named `solver`: FEM cons_link, PBD attach_link) in a
    stepped scene of 2 environments with one rigid link: a state or a checkpoint (valid checksum) whose entry [1, 3]
    is `link` is refused naming the entry with `expected`, the scene bitwise unchanged, and the scene then steps
    finite (`particles`: an entity of that solver); link 0 and -1 are accepted both ways."""
    import pytest

    from .errors import InvalidCheckpointStateError, InvalidStateError

    good = scene.get_state()
    bad = good.clone()
    getattr(solver_state(bad, solver), field)[1, 3] = link
    before = scene_fields(scene)
    message = (rf"{solver}\.{field}\[env 1, index \[3\]\] = {link} is not accepted: expected {expected}\. "
               r"Nothing was changed\.")
    for envs_idx in (None, [1], [0]):  # (a state passed to reset becomes the initial state: checked whole)
        with pytest.raises(InvalidStateError, match="reset: " + message):
            scene.reset(state=bad, envs_idx=envs_idx)
        assert_unchanged(scene_fields(scene), before)
    write_raw_checkpoint(scene, bad, os.path.join(folder, "bad.ckpt"))
    with pytest.raises(InvalidCheckpointStateError, match=r"load_checkpoint\(.*bad\.ckpt'\): " + message):
        scene.load_checkpoint(os.path.join(folder, "bad.ckpt"))
    assert_unchanged(scene_fields(scene), before)
    t = scene.t
    scene.step()
    assert scene.t == t + 1 and torch.isfinite(particles.get_particles_pos()).all()
    for value in (0, -1):  # link 0 (the rigid body) and -1 (none) are link references
        ok = good.clone()
        getattr(solver_state(ok, solver), field)[1, 3] = value
        scene.reset(state=ok)
        write_raw_checkpoint(scene, ok, os.path.join(folder, "ok.ckpt"))
        scene.load_checkpoint(os.path.join(folder, "ok.ckpt"))
        store = next(s for s in scene.solvers if s.name == solver).state
        assert int(store.at(field, scene._frame)[1, 3]) == value
        scene.step()


class MomentumExchange(NamedTuple):
    """What check_momentum_exchange measured: each side's linear momentum before the steps (a0, b0) and after the
    last (a, b), and the largest |total - initial total| entry over the steps it checked (drift)."""

    a0: torch.Tensor
    b0: torch.Tensor
    a: torch.Tensor
    b: torch.Tensor
    drift: float

    @property
    def total0(self) -> torch.Tensor:
        return self.a0 + self.b0


def check_momentum_exchange(scene, momentum_a, momentum_b, steps: int, rtol: float = 1e-6, atol: float = 0.0,
                            every_step: bool = True, after_step=None) -> MomentumExchange:
    """Two sides of a coupling exchange linear momentum and lose none: what one gains in `steps` scene.step() calls,
    the other loses. `momentum_a`, `momentum_b`: callables, no arguments, that return the linear momentum (N s) of
    each side now, a tensor [3] or [B, 3] (a row per environment): a solver's particles (sum of mass x velocity),
    a rigid body (mass x velocity, plus the impulses the coupling handed it that it applies in its next substep).
    After every step (`every_step`), or after the last only, every entry of (a + b) - (a0 + b0) must be within
    atol + rtol * |a0 + b0| (the Euclidean norm of the initial total, per environment). `after_step(i)`, if given,
    is called after step i (1 to `steps`), before the check: for a test's own observations. Raises
    AssertionError with both sides' figures; returns them (MomentumExchange), to check that the exchange happened
    (a coupling that exchanges nothing conserves momentum too)."""
    a0, b0 = momentum_a().clone(), momentum_b().clone()
    total0 = a0 + b0
    bound = atol + rtol * total0.norm(dim=-1, keepdim=True)
    a, b, drift = a0, b0, 0.0
    for i in range(1, steps + 1):
        scene.step()
        if after_step is not None:
            after_step(i)
        if not every_step and i < steps:
            continue
        a, b = momentum_a().clone(), momentum_b().clone()
        change = ((a + b) - total0).abs()
        drift = max(drift, float(change.max()))
        if not bool((change <= bound).all()):
            raise AssertionError(
                f"momentum lost in the exchange after step {i} of {steps}: side a {a0.tolist()} -> {a.tolist()}, "
                f"side b {b0.tolist()} -> {b.tolist()}; the total moved by {change.tolist()}, more than "
                f"atol {atol:g} + rtol {rtol:g} x |initial total| = {bound.reshape(-1).tolist()}")
    return MomentumExchange(a0, b0, a, b, drift)


def _differing(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Entries that are not exactly equal (a NaN matches a NaN)."""
    if x.dtype.is_floating_point:
        return ~((x == y) | (torch.isnan(x) & torch.isnan(y)))
    return x != y


def _list(ids, most=8) -> str:
    ids = [int(i) for i in ids]
    return str(ids) if len(ids) <= most else f"[{', '.join(map(str, ids[:most]))}, ... ({len(ids)} in all)]"


def state_differences(expected, actual, n_envs: int, envs=None) -> list:
    """One line per key in which two states differ, in solver order: "Class.field: envs [..] of n_envs, k of m
    entries, max |difference| d". `expected`, `actual`: SimStates (or {"Class.field": tensor} dicts) of a scene
    built with `n_envs`; `envs`: compare only these environments (indices), all when None. The step index `t`
    of two SimStates is compared too."""
    a, b = flat_state(expected), flat_state(actual)
    out = []
    t_a, t_b = getattr(expected, "t", None), getattr(actual, "t", None)
    if t_a is not None and t_b is not None and t_a != t_b:
        out.append(f"t: {t_a} expected, {t_b} got")
    rows = None if envs is None else torch.as_tensor(envs, dtype=torch.long).reshape(-1)
    if rows is not None and not n_envs:
        raise ValueError(f"state_differences: envs={envs!r} given for a scene built without environments")
    for key in list(a) + [k for k in b if k not in a]:
        if key not in b or key not in a:
            out.append(f"{key}: only in the {'expected' if key in a else 'actual'} state")
            continue
        x, y = a[key].detach().cpu(), b[key].detach().cpu()
        if x.shape != y.shape or x.dtype != y.dtype:
            out.append(f"{key}: {x.dtype}{list(x.shape)} expected, {y.dtype}{list(y.shape)} got")
            continue
        env_ids = torch.arange(x.shape[0]) if n_envs else None
        if rows is not None:
            x, y, env_ids = x[rows], y[rows], rows
        bad = _differing(x, y)
        if not bool(bad.any()):
            continue
        gap = (x.double() - y.double()).abs()[bad]
        where = "(a scene without environments)"
        if n_envs:
            where = f"envs {_list(env_ids[bad.reshape(bad.shape[0], -1).any(dim=1)])} of {n_envs}"
        out.append(f"{key}: {where}, {int(bad.sum())} of {bad.numel()} entries, "
                   f"max |difference| {float(gap.max()):.3g}")
    return out


def _n_envs_of(*states):
    for s in states:
        scene = getattr(s, "scene", None)
        if scene is not None:
            return scene.n_envs
    raise ValueError("pass n_envs: neither state refers to its scene (a serialised or cloned state)")


def assert_states_equal(expected, actual, n_envs: int | None = None, what: str = "states differ", envs=None):
    """Raise AssertionError naming every key in which `actual` differs from `expected` (see state_differences).
    `n_envs` defaults to that of the scene either state refers to."""
    if n_envs is None:
        n_envs = _n_envs_of(expected, actual)
    diffs = state_differences(expected, actual, n_envs, envs)
    if diffs:
        raise AssertionError(f"{what}: {len(diffs)} key{'s' if len(diffs) > 1 else ''} differ\n  " + "\n  ".join(diffs))


# -- the properties, as plain functions ----------------------------------------------------------------------
#
# `make_scene(n_envs) -> (scene, drive)` is a factory as `register_test_scenes` registers it: a freshly built
# scene, and `drive(scene, i_step)`, applied before each step, a function of the step index alone.


def run_steps(scene, drive, n: int):
    for _ in range(n):
        drive(scene, scene.t)
        scene.step()


def check_get_state_reset_round_trip(make_scene, n_envs: int, k1: int, k2: int):
    """get_state after k1 steps, k2 more steps, reset(state=...): scene.t and every field are back bitwise."""
    scene, drive = make_scene(n_envs)
    run_steps(scene, drive, k1)
    snap = scene.get_state()
    run_steps(scene, drive, k2)
    scene.reset(state=snap)
    assert scene.t == k1, f"reset(state) after {k1} + {k2} steps left scene.t = {scene.t}, the state's is {k1}"
    assert_states_equal(snap, scene.get_state(), n_envs, f"reset(state) after {k1} + {k2} steps")


def check_snapshot_step_restore_step(make_scene, n_envs: int, k1: int, n: int):
    """After k1 steps: snapshot, step n, restore, step n repeats every one of the n states bitwise; and a second
    scene built the same way reaches the same state after k1 + n steps."""
    scene, drive = make_scene(n_envs)
    run_steps(scene, drive, k1)
    snap = scene.get_state()
    first = []
    for _ in range(n):
        run_steps(scene, drive, 1)
        first.append(scene.get_state().clone())
    scene.reset(state=snap)
    for i, ref in enumerate(first):
        run_steps(scene, drive, 1)
        assert_states_equal(ref, scene.get_state(), n_envs,
                            f"step {k1 + i + 1}, run again from the state of step {k1}, differs from the first run")
    other, drive2 = make_scene(n_envs)
    run_steps(other, drive2, k1 + n)
    assert_states_equal(first[-1], other.get_state(), n_envs,
                        f"a second scene built the same way differs after {k1 + n} steps")


ENVS_IDX_TYPES = ("list", "tensor", "numpy", "mask")


def check_reset_envs_idx(make_scene, n_envs: int, k1: int, k2: int, envs, as_type: str = "list"):
    """reset(state taken after k1 steps, envs_idx=envs) after k1 + k2 steps: the environments in `envs` hold
    that state bitwise, every other one is bitwise what it was, and scene.t does not move. `as_type`: how
    envs_idx is passed (one of ENVS_IDX_TYPES)."""
    envs = sorted(int(e) for e in envs)
    scene, drive = make_scene(n_envs)
    run_steps(scene, drive, k1)
    snap = scene.get_state()
    run_steps(scene, drive, k2)
    before = scene.get_state().clone()
    chosen = torch.zeros(n_envs, dtype=torch.bool)
    chosen[envs] = True
    idx = {"list": lambda: envs, "tensor": lambda: torch.tensor(envs, dtype=torch.long),
           "numpy": lambda: np.array(envs, dtype=np.int64), "mask": lambda: chosen.clone()}[as_type]()
    scene.reset(state=snap, envs_idx=idx)
    after = scene.get_state()
    reset_diffs = state_differences(snap, flat_state(after), n_envs, envs=chosen.nonzero().reshape(-1))
    kept_diffs = state_differences(before, flat_state(after), n_envs, envs=(~chosen).nonzero().reshape(-1))
    problems = []
    if reset_diffs:
        problems.append(f"environments in envs_idx={envs} ({as_type}) differ from the state they were reset to:\n  "
                        + "\n  ".join(reset_diffs))
    if kept_diffs:
        problems.append(f"environments outside envs_idx={envs} ({as_type}) changed:\n  " + "\n  ".join(kept_diffs))
    assert not problems, f"reset(state, envs_idx) after {k1} + {k2} steps: " + "\n".join(problems)
    assert scene.t == k1 + k2, f"a partial reset moved scene.t from {k1 + k2} to {scene.t}"


def check_checkpoint_round_trip(make_scene, n_envs: int, k1: int, k2: int, path):
    """save_checkpoint after k1 steps; a fresh scene loads it (scene.t and every field bitwise) and its next k2
    steps are bitwise those of the scene that saved it."""
    scene, drive = make_scene(n_envs)
    run_steps(scene, drive, k1)
    saved = scene.get_state()
    scene.save_checkpoint(path)
    run_steps(scene, drive, k2)
    continued = scene.get_state()
    fresh, drive2 = make_scene(n_envs)
    fresh.load_checkpoint(path)
    assert fresh.t == k1, f"load_checkpoint of step {k1} left scene.t = {fresh.t}"
    assert_states_equal(saved, fresh.get_state(), n_envs, f"a checkpoint of step {k1}, loaded into a fresh scene")
    run_steps(fresh, drive2, k2)
    assert_states_equal(continued, fresh.get_state(), n_envs,
                        f"{k2} steps from a loaded checkpoint of step {k1} differ from the run that saved it")


def check_pickled_state_reset(make_scene, n_envs: int, k1: int):
    """state.serializable() drops the scene and pickles; the unpickled state, passed to reset, restores scene.t
    and every field bitwise."""
    scene, drive = make_scene(n_envs)
    run_steps(scene, drive, k1)
    state = scene.get_state()
    blob = pickle.dumps(state.serializable())
    assert state.scene is None, "serializable() kept the reference to the scene"
    run_steps(scene, drive, 3)
    scene.reset(state=pickle.loads(blob))
    assert scene.t == k1, f"reset to a pickled state of step {k1} left scene.t = {scene.t}"
    assert_states_equal(state, scene.get_state(), n_envs, f"reset to a pickled state of step {k1}")


def check_checkpoint_in_fresh_process(make_scene, n_envs: int, folder, k1: int = 7, k2: int = 9):
    """A checkpoint of step k1, loaded by a fresh Python process into the scene `make_scene` builds there, runs
    k2 steps bitwise like this process. `make_scene` must pickle (a module-level function does): the child
    imports it by name. The child starts the engine as this process's is (backend, precision, seed)."""
    import genesis_core as gs

    try:
        factory = pickle.dumps(make_scene)
    except (pickle.PicklingError, AttributeError, TypeError) as e:
        raise AssertionError(f"the scene factory {make_scene!r} does not pickle ({e}); the fresh-process checkpoint "
                             "test rebuilds the scene in a child process, which imports the factory by name: "
                             "make it a module-level function") from e
    folder = str(folder)
    with open(os.path.join(folder, "factory.pkl"), "wb") as f:
        f.write(factory)
    scene, drive = make_scene(n_envs)
    run_steps(scene, drive, k1)
    scene.save_checkpoint(os.path.join(folder, "run.ckpt"))
    run_steps(scene, drive, k2)
    expected = scene.get_state()
    rt = gs.runtime
    args = [os.path.join(folder, "factory.pkl"), rt.backend, rt.precision, str(rt.seed), str(n_envs),
            os.path.join(folder, "run.ckpt"), str(k2), os.path.join(folder, "out.npz")]
    child = subprocess.run([sys.executable, "-c", "from genesis_core.testing import _resume_checkpoint_child as m; m()",
                            *args], capture_output=True, text=True, env=python_env(), cwd=folder)
    assert child.returncode == 0, f"the child process failed:\n{child.stderr[-4000:]}"
    with np.load(os.path.join(folder, "out.npz")) as got:
        t = int(got["t"])
        arrays = {k: torch.from_numpy(got[k]) for k in got.files if k != "t"}
    assert t == k1 + k2, f"the child resumed at step {k1} and ended at scene.t = {t}, not {k1 + k2}"
    assert_states_equal(expected, arrays, n_envs,
                        f"{k2} steps after loading a checkpoint of step {k1} in a fresh process differ from this one's")


def _resume_checkpoint_child():
    """The child of check_checkpoint_in_fresh_process: argv = factory pickle, backend, precision, seed, n_envs,
    checkpoint, steps, output .npz."""
    import genesis_core as gs

    factory, backend, precision, seed, n_envs, path, steps, out = sys.argv[1:9]
    gs.init(backend=backend, precision=precision, seed=None if seed == "None" else int(seed))
    with open(factory, "rb") as f:
        make_scene = pickle.load(f)
    scene, drive = make_scene(int(n_envs))
    scene.load_checkpoint(path)
    run_steps(scene, drive, int(steps))
    arrays = {k: x.detach().cpu().numpy() for k, x in flat_state(scene.get_state()).items()}
    np.savez(out, t=scene.t, **arrays)


# -- the properties as pytest tests --------------------------------------------------------------------------


def scenes_of(*sources) -> dict:
    """{name: factory} of the test scenes in `sources`: dicts of factories, or plugins (a module or object with
    a `register_test_scenes` hook implementation, called here with a collecting `register`)."""
    scenes = {}

    def add(name, factory, origin):
        if name in scenes:
            raise ValueError(f"test scene {name!r} is given twice (again by {origin!r})")
        if not callable(factory):
            raise TypeError(f"test scene {name!r} of {origin!r}: the factory {factory!r} is not callable")
        scenes[name] = factory

    for source in sources:
        if isinstance(source, dict):
            for name, factory in source.items():
                add(name, factory, source)
            continue
        hook = getattr(source, "register_test_scenes", None)
        if hook is None:
            raise TypeError(f"{source!r} is neither a dict of scene factories nor a plugin with a "
                            "register_test_scenes hook")
        hook(register=lambda name, factory, _source=source: add(name, factory, _source))
    if not scenes:
        raise ValueError(f"no test scene in {sources!r}: register one with the register_test_scenes hook")
    return scenes


def property_tests(*sources, max_examples: int | None = None):
    """A pytest test class running the engine's shared properties on every scene of `sources` (dicts of scene
    factories, or plugins, as for `scenes_of`). Assign it to a name pytest collects::

        TestMySolverProperties = property_tests(my_solver.plugin)

    Tests are parametrized by scene name. Hypothesis draws n_envs in 0..5 (2..6 for envs_idx), step counts in
    0..12 and envs_idx subsets; max_examples: examples per property and scene, by default that of the
    hypothesis profile loaded when this is called (hypothesis' own default is 100). The engine is started on
    the CPU in float64 if no fixture (gs_runtime) did it first."""
    try:
        from hypothesis import HealthCheck, given, settings
        from hypothesis import strategies as st
    except ImportError as e:
        raise ImportError("genesis_core.testing.property_tests needs hypothesis: pip install hypothesis "
                          "(or genesis-core[test])") from e

    chosen = scenes_of(*sources)
    names = list(chosen)
    factories = [chosen[n] for n in names]
    options = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow])
    if max_examples is not None:
        options["max_examples"] = max_examples
    config = settings(**options)
    n_envs_st = st.integers(min_value=0, max_value=5)
    steps_st = st.integers(min_value=0, max_value=12)
    positive_steps_st = st.integers(min_value=1, max_value=12)

    # The tests are staticmethods: pytest makes an instance per parametrized case, and hypothesis refuses a
    # @given method run on several instances (its differing_executors health check); they hold no state.
    class SolverProperties:
        __doc__ = f"The engine's shared properties on the test scenes {', '.join(names)}."
        scenes = dict(chosen)  # {name: factory}, for a subclass's own tests

        @pytest.fixture(autouse=True)
        def _genesis_runtime(self):
            _start_runtime()

        def pytest_generate_tests(self, metafunc):
            if "scene_factory" in metafunc.fixturenames:
                metafunc.parametrize("scene_factory", factories, ids=names)

        @staticmethod
        @config
        @given(n_envs=n_envs_st, k1=steps_st, k2=positive_steps_st)
        def test_get_state_reset_round_trip(scene_factory, n_envs, k1, k2):
            check_get_state_reset_round_trip(scene_factory, n_envs, k1, k2)

        @staticmethod
        @config
        @given(n_envs=n_envs_st, k1=steps_st, n=positive_steps_st)
        def test_snapshot_step_restore_step_is_bitwise(scene_factory, n_envs, k1, n):
            check_snapshot_step_restore_step(scene_factory, n_envs, k1, n)

        @staticmethod
        @config
        @given(data=st.data(), n_envs=st.integers(min_value=2, max_value=6), k1=steps_st, k2=positive_steps_st)
        def test_reset_envs_idx_touches_only_those_envs(scene_factory, data, n_envs, k1, k2):
            envs = data.draw(st.lists(st.integers(0, n_envs - 1), unique=True, max_size=n_envs), label="envs_idx")
            as_type = data.draw(st.sampled_from(ENVS_IDX_TYPES), label="envs_idx type")
            check_reset_envs_idx(scene_factory, n_envs, k1, k2, envs, as_type)

        @staticmethod
        @config
        @given(n_envs=n_envs_st, k1=steps_st, k2=st.integers(min_value=1, max_value=10))
        def test_checkpoint_round_trip_same_process(scene_factory, n_envs, k1, k2, tmp_path_factory):
            path = tmp_path_factory.mktemp("ckpt") / "run.ckpt"
            check_checkpoint_round_trip(scene_factory, n_envs, k1, k2, path)

        @staticmethod
        @config
        @given(n_envs=n_envs_st, k1=steps_st)
        def test_pickled_state_can_be_reset_to(scene_factory, n_envs, k1):
            check_pickled_state_reset(scene_factory, n_envs, k1)

        @staticmethod
        @pytest.mark.parametrize("n_envs", [0, 3])
        def test_checkpoint_resumes_exactly_in_a_fresh_process(scene_factory, n_envs, tmp_path):
            check_checkpoint_in_fresh_process(scene_factory, n_envs, tmp_path)

    return SolverProperties
