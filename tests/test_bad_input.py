"""Bad input never crashes the process: what a field declares valid is checked on every way into state, damaged
and hostile checkpoint files are refused, an index computed from a position never leaves a field, and an
environment that goes non-finite is reported, isolated bitwise from the others and (opt-in) reset.

The hostile cases themselves run in child processes (tests/bad_input_cases.py), so that a crash fails a test
instead of ending the run."""

import inspect
import os
import pickle
import subprocess
import sys
import warnings

import attrs
import numpy as np
import pytest
import torch

import genesis_core as gs
from genesis_core import checkpoint, plugins
from genesis_core.plugins import registry

from .conftest import python_env

HERE = os.path.dirname(os.path.abspath(__file__))
SCENES = sorted(registry().test_scenes)


def run_cases(category, precision="64", timeout=900, script="bad_input_cases.py"):
    proc = subprocess.run([sys.executable, os.path.join(HERE, script), category, precision],
                          capture_output=True, text=True, env=python_env(), timeout=timeout)
    lines = proc.stdout.strip().splitlines()
    last = next((line for line in reversed(lines) if line.startswith("case ")), "no case started")
    assert proc.returncode == 0 and lines and lines[-1].startswith("done "), (
        f"{category}: exit code {proc.returncode} during '{last}'\n{proc.stderr[-3000:]}")
    return proc.stdout


# -- in child processes: a crash is a failure -----------------------------------------------------------------------

@pytest.mark.parametrize("category", ["files_random_bytes", "files_truncations", "files_bit_flips",
                                      "files_hostile_pickles"])
def test_hostile_files_are_refused_with_checkpoint_errors(category):
    out = run_cases(category)
    if category == "files_bit_flips":
        assert "bit flips: " in out


@pytest.mark.parametrize("kind", ["values", "envs_idx", "setters"])
@pytest.mark.parametrize("name", SCENES)
def test_hostile_inputs_per_solver(kind, name):
    run_cases(f"{kind}:{name}")


@pytest.mark.parametrize("category", ["values:mpm"] + [f"setters:{n}" for n in SCENES])
def test_hostile_inputs_in_float32(category):
    run_cases(category, precision="32")


MPM_KERNEL_CHECK = r"""
import torch, warnings
import genesis_core as gs
from genesis_core.plugins import registry
gs.init(backend=gs.cpu, precision="{precision}", seed=0, logging_level="warning")
if {grad}:
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=2e-3, substeps=2, requires_grad=True),
                     mpm_options=gs.options.MPMOptions(lower_bound=(0, 0, 0), upper_bound=(0.5, 0.5, 0.5),
                                                       grid_density=32))
    for mat in (gs.materials.MPM.Elastic(), gs.materials.MPM.Sand(), gs.materials.MPM.Liquid()):
        scene.add_entity(gs.morphs.Box(pos=(0.25, 0.25, 0.25), size=(0.06, 0.06, 0.06)), material=mat)
    scene.build(n_envs=4)
else:
    scene, drive = registry().test_scenes["mpm"](4)
scene.step()
ref = scene.get_state()
pos = scene.mpm_solver.state.at("pos", scene._frame)
vel = scene.mpm_solver.state.at("vel", scene._frame)
# past every validation: storage written directly, as an unstable step would leave it
pos[0, 0] = 1e30; pos[1, 3] = -1e30; pos[2, 5] = float("nan"); vel[2, 6] = float("inf")
warnings.simplefilter("ignore")
for _ in range({steps}):
    scene.step()
bad = scene.invalid_envs.tolist()
assert 3 not in bad, bad
print("ok", bad, flush=True)
"""


@pytest.mark.parametrize("precision, grad", [("32", False), ("64", False), ("64", True)])
def test_mpm_kernels_never_index_outside_the_grid(precision, grad):
    """Positions of +-1e30 m, NaN and infinite velocities straight in the storage: the stencil's base node is
    clamped in the kernels, so the steps run, in the plain and the differentiable kernels alike."""
    proc = subprocess.run([sys.executable, "-c", MPM_KERNEL_CHECK.format(precision=precision, steps=4, grad=grad)],
                          capture_output=True, text=True, env=python_env(), timeout=600)
    assert proc.returncode == 0 and "ok" in proc.stdout, proc.stderr[-3000:]


# -- declared validity, in this process ------------------------------------------------------------------------------

@attrs.define(frozen=True, kw_only=True)
class Probe(gs.materials.Material):
    solver = "ProbeSolver"


class ProbeSolver(gs.SolverBase):
    """A third-party solver that only declares what its fields accept; the core does every check."""

    short_name = "probe"
    material_class = Probe
    state_fields = (
        gs.FieldSpec("pos", ("n", 3), domain=True, sentinel=True),
        gs.FieldSpec("pose", ("n", 7), quat="pose_quats"),
        gs.FieldSpec("mode", ("n",), dtype="int", frames=False, codes=(0, 2)),
        gs.FieldSpec("density", ("n",), frames=False, bounds=(0, 10), bounds_open=(True, False)),
        gs.FieldSpec("free", ("n",), frames=False, finite=False),
    )

    def state_dims(self):
        return {"n": len(self.entities), "pose_quats": [3]}

    def domain_bounds(self):
        return (-1.0, -1.0, 0.0), (1.0, 1.0, 2.0)

    def init_state(self, f):
        self.state.pose[f][..., 3] = 1.0
        self.state.density[:] = 1.0

    def substep_pre_coupling(self, f):
        nxt = self.frames.next(f)
        self.state.pos[nxt] = self.state.pos[f]
        self.state.pose[nxt] = self.state.pose[f]


class ProbePlugin:
    @gs.hookimpl
    def register_solvers(self, register):
        register(ProbeSolver)

    @gs.hookimpl
    def register_materials(self, register):
        register("Probe", Probe)


@pytest.fixture
def probe():
    name = plugins.register_plugin(ProbePlugin(), name="probe")
    scene = gs.Scene()
    for _ in range(2):
        scene.add_entity(gs.morphs.Sphere(radius=0.1), material=Probe())
    scene.build(n_envs=3)
    yield scene
    plugins.unregister_plugin(name)


def snapshot(scene):
    return {f"{s.solver}.{k}": x.clone() for s in scene.get_state().solvers_state if s is not None
            for k, x in s.fields.items()}


def assert_unchanged(scene, before):
    after = snapshot(scene)
    assert all(torch.equal(before[k], after[k]) for k in before)


@pytest.mark.parametrize("field, env, index, value, expected", [
    ("pos", 2, (1, 2), 2.5, "inside the solver's domain, [0.0, 2.0] m on axis z"),
    ("pos", 0, (0, 0), float("nan"), "a finite value"),
    ("pose", 1, (1, 4), 0.3, "a unit quaternion"),
    ("mode", 2, (0,), 1, "one of [0, 2]"),
    ("density", 1, (1,), 0.0, "a value in (0.0, 10.0]"),
    ("density", 0, (0,), 10.5, "a value in (0.0, 10.0]"),
])
def test_reset_refuses_what_a_field_declares_invalid(probe, field, env, index, value, expected):
    scene = probe
    si = [s.name for s in scene.solvers].index("ProbeSolver")
    state = scene.get_state()
    getattr(state.solvers_state[si], field)[(env,) + index] = value
    before = snapshot(scene)
    with pytest.raises(gs.InvalidStateError) as info:
        scene.reset(state=state)
    msg = str(info.value)
    idx = list(index) if field != "pose" else [index[0], 3]  # a quaternion is named by its first entry
    assert f"ProbeSolver.{field}[env {env}, index {idx}]" in msg and expected in msg, msg
    assert_unchanged(scene, before)
    # also for environments it does not break: the state would become the initial state
    other = [e for e in range(3) if e != env]
    with pytest.raises(gs.InvalidStateError):
        scene.reset(state=state, envs_idx=other)
    assert_unchanged(scene, before)


def test_a_field_may_opt_out_of_the_finite_rule(probe):
    scene = probe
    si = [s.name for s in scene.solvers].index("ProbeSolver")
    state = scene.get_state()
    state.solvers_state[si].free[1, 0] = float("inf")
    scene.reset(state=state)
    assert torch.isinf(scene.get_state().solvers_state[si].free[1, 0])


def test_setters_check_the_rows_they_write(probe):
    """set_rows validates the rows as the write would leave them: a quaternion written in part is checked whole."""
    scene = probe
    st = scene.solvers[[s.name for s in scene.solvers].index("ProbeSolver")].state
    before = snapshot(scene)
    with pytest.raises(gs.InvalidStateError, match=r"ProbeSolver.pose\[env 1, index \[0, 3\]\]"):
        st.set_rows("pose", scene._frame, torch.tensor([0.0, 0.5]), torch.tensor([1]), (slice(None), slice(3, 5)),
                    what="set_pose")
    with pytest.raises(gs.InvalidStateError, match=r"set_mode: ProbeSolver.mode\[env 2, index \[1\]\]"):
        st.set_rows("mode", scene._frame, torch.tensor([[0, 3]]), torch.tensor([2]), what="set_mode")
    assert_unchanged(scene, before)
    st.set_rows("pose", scene._frame, torch.tensor([0.0, 1.0, 0.0, 0.0]), torch.tensor([1]),
                (slice(None), slice(3, 7)))  # a unit quaternion is accepted


def test_checkpoint_values_are_checked_like_reset(probe, tmp_path):
    scene = probe
    scene.save_checkpoint(tmp_path / "a.ckpt")
    payload = checkpoint.read(tmp_path / "a.ckpt")
    payload["arrays"]["ProbeSolver.density"][2, 1] = -1.0
    payload = checkpoint.make_payload(payload["step_index"], payload["arrays"], payload["scene"], "x")
    with open(tmp_path / "b.ckpt", "wb") as fh:
        pickle.dump(payload, fh, protocol=4)
    before = snapshot(scene)
    with pytest.raises(gs.InvalidCheckpointStateError, match=r"ProbeSolver.density\[env 2, index \[1\]\] = -1.0"):
        scene.load_checkpoint(tmp_path / "b.ckpt")
    assert_unchanged(scene, before)


def test_a_pickled_state_with_hostile_contents_is_refused(probe):
    scene = probe
    state = pickle.loads(pickle.dumps(scene.get_state().serializable()))
    state.t = -3
    with pytest.raises(gs.SceneError, match="state.t=-3"):
        scene.reset(state=state)
    state.t = 0
    state.solvers_state = "garbage"
    with pytest.raises(gs.SceneError, match="solvers_state"):
        scene.reset(state=state)


def test_rigid_quaternions_and_control_modes_are_declared():
    scene, _ = registry().test_scenes["rigid"](2)
    rigid = scene.rigid_solver
    si = scene.solvers.index(rigid)
    box = scene.entities[2]
    state = scene.get_state()
    q = box.q_start + 3
    state.solvers_state[si].qpos[1, q] = 2.0
    with pytest.raises(gs.InvalidStateError, match=rf"RigidSolver.qpos\[env 1, index \[{q}\]\].*unit quaternion"):
        scene.reset(state=state)
    state = scene.get_state()
    state.solvers_state[si].dofs_ctrl_mode[0, 0] = 5
    with pytest.raises(gs.InvalidStateError, match=r"dofs_ctrl_mode\[env 0, index \[0\]\] = 5"):
        scene.reset(state=state)
    with pytest.raises(gs.InvalidStateError, match=r"set_dofs_kp: RigidSolver.dofs_kp\[env 1, index \[0\]\]"):
        scene.entities[1].set_dofs_kp([-1.0], dofs_idx_local=[0], envs_idx=[1])
    with pytest.raises(gs.InvalidStateError, match=r"control_dofs_force.*dofs_ctrl_force\[env 1.*finite"):
        scene.entities[1].control_dofs_force(torch.tensor([[0.0], [float("nan")]]), dofs_idx_local=[0])


def test_mpm_positions_are_checked_against_the_domain():
    scene, _ = registry().test_scenes["mpm"](2)
    cube = scene.entities[0]
    before = snapshot(scene)
    x = scene.get_state().solvers_state[scene.solvers.index(scene.mpm_solver)].pos[:, cube._range].clone()
    x[1, 4, 2] = -0.5
    with pytest.raises(gs.InvalidStateError, match=r"set_pos: MPMSolver.pos\[env 1, index \[4, 2\]\] = -0.5.*axis z"):
        cube.set_pos(x)
    assert_unchanged(scene, before)


# -- damaged files -----------------------------------------------------------------------------------------------------

def springs_scene(n_envs=2):
    scene, drive = registry().test_scenes["springs"](n_envs)
    for _ in range(3):
        drive(scene, scene.t)
        scene.step()
    return scene


def test_checkpoints_carry_a_checksum_and_damage_is_named(tmp_path):
    scene = springs_scene()
    scene.save_checkpoint(tmp_path / "a.ckpt")
    with open(tmp_path / "a.ckpt", "rb") as fh:
        payload = pickle.load(fh)  # still a plain pickle
    assert payload["format_version"] == 4 and payload["checksum"]["algorithm"] == "sha256"
    assert payload["checksum"]["digest"] == checkpoint.digest(payload)
    for change in ("array", "step_index", "scene"):
        p = pickle.loads(pickle.dumps(payload))
        if change == "array":
            p["arrays"]["SpringChainSolver.vel"].reshape(-1)[3] += 1e-12
        elif change == "step_index":
            p["step_index"] += 1
        else:
            p["scene"]["n_envs"] = 2.0
        with open(tmp_path / "b.ckpt", "wb") as fh:
            pickle.dump(p, fh, protocol=4)
        before = snapshot(scene)
        with pytest.raises(gs.DamagedCheckpointError, match="damaged"):
            scene.load_checkpoint(tmp_path / "b.ckpt")
        assert_unchanged(scene, before)


def test_older_format_versions_are_refused_with_a_message_that_says_so(tmp_path):
    """Version 3 keeps the rigid contact warm start as a keyed pool, version 4 the limits' warm start: files of
    versions 1 to 3 are refused, naming the version and what changed, and the scene is left as it was."""
    scene = springs_scene()
    scene.save_checkpoint(tmp_path / "a.ckpt")
    payload = checkpoint.read(tmp_path / "a.ckpt")
    for version in (1, 2, 3):
        old = dict(payload, format_version=version)
        if version == 1:
            del old["checksum"]
        else:
            old["checksum"] = dict(old["checksum"], digest=checkpoint.digest(old))
        with open(tmp_path / "old.ckpt", "wb") as fh:
            pickle.dump(old, fh, protocol=4)
        before = snapshot(scene)
        with pytest.raises(gs.CheckpointError, match=f"format version {version}, older than the version 4") as info:
            scene.load_checkpoint(tmp_path / "old.ckpt")
        assert "Re-create it" in str(info.value)
        assert ("keyed by (geom pair, feature)" in str(info.value)) == (version == 2)
        assert ("RigidSolver.limit_impulse" in str(info.value)) == (version == 3)
        assert_unchanged(scene, before)


def test_oversized_files_are_refused_before_reading(tmp_path):
    scene = springs_scene()
    path = tmp_path / "big.ckpt"
    with open(path, "wb") as fh:
        fh.truncate(200 * 2**20)  # sparse: larger than twice the arrays plus 64 MiB
    with pytest.raises(gs.CheckpointError, match="limit"):
        scene.load_checkpoint(path)
    with pytest.raises(gs.CheckpointError, match="limit of 10 "):
        checkpoint.read(path, max_bytes=10)


# -- non-finite environments ------------------------------------------------------------------------------------------

def poisoned(name, n_envs=3, env=1, policy="warn", **scene_kw):
    """A test scene and its twin; in the twin, environment `env` gets velocities a tenth of the largest float
    (finite, so validation would pass them too), written straight into the storage as a blown-up step would
    leave them; the next steps turn that environment non-finite."""
    out = []
    for poison in (False, True):
        scene, drive = registry().test_scenes[name](n_envs, **scene_kw)
        scene.sim_options = attrs.evolve(scene.sim_options, on_invalid_env=policy)
        drive(scene, 0)
        scene.step()
        if poison:
            for s in scene.active_solvers:
                for field, spec in s.state.specs.items():
                    if spec.sentinel and not spec.structural and spec.bounds is None:
                        x = s.state.at(field, scene._frame)
                        x[env if n_envs else 0] = torch.finfo(x.dtype).max / 10
        out.append((scene, drive))
    return out


def step_until_invalid(ref, drive, bad, bad_drive, n=4):
    """Step both scenes alike until the twin reports a non-finite environment; the warnings it gave."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(n):
            drive(ref, ref.t)
            ref.step()
            bad_drive(bad, bad.t)
            bad.step()
            if bad.invalid_envs.numel():
                break
    return caught


GRAD_SCENES = [n for n in SCENES if "requires_grad" in inspect.signature(registry().test_scenes[n]).parameters]


@pytest.mark.parametrize("name, requires_grad", [(n, False) for n in SCENES] + [(n, True) for n in GRAD_SCENES])
def test_a_non_finite_environment_is_reported_and_isolated_bitwise(name, requires_grad):
    """Also in differentiable mode, whose substeps run other code (the rigid solver's batched torch step)."""
    (ref, drive), (bad, bad_drive) = poisoned(name, **({"requires_grad": True} if requires_grad else {}))
    caught = step_until_invalid(ref, drive, bad, bad_drive)
    assert bad.invalid_envs.tolist() == [1]
    assert ref.invalid_envs.tolist() == []
    assert any("environments [1] went non-finite" in str(w.message) for w in caught)
    a, b = snapshot(ref), snapshot(bad)
    for k in a:
        assert torch.equal(a[k][[0, 2]], b[k][[0, 2]]), f"{k}: another environment changed"
    assert any(not torch.isfinite(b[k][1]).all() for k in b if b[k].is_floating_point())


@pytest.mark.parametrize("name", SCENES)
def test_the_reset_policy_restores_the_initial_state(name):
    (ref, drive), (bad, bad_drive) = poisoned(name, policy="reset")
    caught = step_until_invalid(ref, drive, bad, bad_drive)
    assert bad.invalid_envs.tolist() == [1]
    assert any("reset to the initial state" in str(w.message) for w in caught)
    initial = {f"{s.solver}.{k}": x for s in bad._init_state.solvers_state if s is not None
               for k, x in s.fields.items()}
    b, a = snapshot(bad), snapshot(ref)
    for k in b:
        assert torch.equal(b[k][1], initial[k][1]), f"{k}: environment 1 was not reset"
        assert torch.equal(a[k][[0, 2]], b[k][[0, 2]]), f"{k}: another environment changed"
    bad_drive(bad, bad.t)
    bad.step()
    assert bad.invalid_envs.tolist() == []


def test_the_raise_policy_and_a_scene_without_envs():
    _, (bad, bad_drive) = poisoned("springs", n_envs=0, policy="raise")
    with pytest.raises(gs.InvalidEnvError, match="the scene went non-finite") as info:
        for _ in range(4):
            bad_drive(bad, bad.t)
            bad.step()
    assert info.value.envs == [0]
    assert bad.invalid_envs.tolist() == [0]


def test_the_check_can_be_switched_off():
    scene = gs.Scene(sim_options=gs.options.SimOptions(on_invalid_env="ignore"))
    scene.add_entity(gs.morphs.Cylinder(pos=(0, 0, 1), height=0.5, radius=0.01),
                     material=gs.materials.SpringChain(n_nodes=3))
    scene.build(n_envs=2)

    def not_called(f):
        raise AssertionError("the check ran")

    scene._faults.any_invalid = not_called
    scene.step()
    with pytest.raises(gs.OptionError, match="on_invalid_env"):
        gs.options.SimOptions(on_invalid_env="explode")


def test_the_policy_is_not_part_of_the_checkpoint_signature(tmp_path):
    scene = springs_scene()
    scene.save_checkpoint(tmp_path / "a.ckpt")
    other, _ = registry().test_scenes["springs"](2)
    other.sim_options = attrs.evolve(other.sim_options, on_invalid_env="reset")
    other.load_checkpoint(tmp_path / "a.ckpt")
    assert np.array_equal(snapshot(other)["SpringChainSolver.pos"].numpy(),
                          snapshot(scene)["SpringChainSolver.pos"].numpy())


# -- a property over random hostile entries ---------------------------------------------------------------------------

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

HOSTILE = st.one_of(st.sampled_from([float("nan"), float("inf"), -float("inf"), 1e30, -1e30, 1e300, -1e300, 0.0,
                                     -1.0, 2.0, 7.0]),
                    st.floats(allow_nan=True, allow_infinity=True))


@settings(max_examples=40)
@given(data=st.data())
def test_one_hostile_entry_is_refused_untouched_or_isolated(data):
    """Any entry of any declared field of any solver's test scene, in one environment, set to a hostile value and
    passed to reset(state, envs_idx): either refused with the scene bitwise unchanged, or accepted, and then a
    step changes no other environment's numbers and reports that environment if it went non-finite."""
    cache = test_one_hostile_entry_is_refused_untouched_or_isolated.__dict__.setdefault("scenes", {})
    if cache.get("generation") != gs.runtime.generation:
        cache.clear()
        cache["generation"] = gs.runtime.generation
    name = data.draw(st.sampled_from(SCENES), label="scene")
    if name not in cache:
        scene, drive = registry().test_scenes[name](3)
        drive(scene, 0)
        scene.step()
        good = scene.get_state()
        scene.step()
        expected = snapshot(scene)
        cache[name] = (scene, good, expected)
    scene, good, expected = cache[name]
    solvers = [(i, s) for i, s in enumerate(scene.solvers) if s.is_active]
    si, solver = data.draw(st.sampled_from(solvers), label="solver")
    field = data.draw(st.sampled_from(sorted(solver.state.specs)), label="field")
    env = data.draw(st.integers(0, 2), label="env")
    state = good.clone()
    x = getattr(state.solvers_state[si], field)
    flat_index = data.draw(st.integers(0, x[env].numel() - 1), label="index")
    value = data.draw(HOSTILE if x.is_floating_point() else st.integers(-(2**31), 2**31 - 1), label="value")
    x[env].reshape(-1)[flat_index] = value
    scene.reset(state=good)
    before = snapshot(scene)
    try:
        scene.reset(state=state, envs_idx=[env])
    except gs.InvalidStateError as exc:
        assert f"{solver.name}.{field}[env {env}, index" in str(exc)
        assert_unchanged(scene, before)
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        scene.step()
    after = snapshot(scene)
    others = [e for e in range(3) if e != env]
    for k in after:
        assert torch.equal(after[k][others], expected[k][others]), f"{k}: another environment changed"
    nonfinite = any(not torch.isfinite(after[k][env]).all() for k in after if after[k].is_floating_point())
    assert scene.invalid_envs.tolist() == ([env] if nonfinite else [])


# -- found in review ------------------------------------------------------------------------------------------------

FAR_DOMAIN = r"""
import torch
import genesis_core as gs
gs.init(backend=gs.cpu, precision="32", seed=0, logging_level="warning")
lo = (1000.1, 1000.1, 0.0)
scene = gs.Scene(sim_options=gs.options.SimOptions(dt=1e-3),
                 mpm_options=gs.options.MPMOptions(lower_bound=lo, upper_bound=(1000.4, 1000.4, 0.3),
                                                   grid_density=100))
cube = scene.add_entity(gs.morphs.Box(pos=(1000.25, 1000.25, 0.15), size=(0.05, 0.05, 0.05)),
                        material=gs.materials.MPM.Elastic())
scene.build()
cube.set_velocity(torch.tensor([-500.0, -500.0, 0.0]))
for _ in range(3):
    scene.step()
x = cube.get_particles_pos()
assert float(x[:, 0].min()) < lo[0] + 0.011, float(x[:, 0].min())  # pressed against the wall
scene.reset(state=scene.get_state())
scene.save_checkpoint("far.ckpt")
scene.load_checkpoint("far.ckpt")
print("ok")
"""


def test_states_the_solver_produces_far_from_the_origin_are_accepted(tmp_path):
    """float32 rounds lower + dx far from the origin by more than a thousandth of a cell: the domain bound the
    validation uses allows for the precision, so a particle the grid clamps to the wall reloads."""
    proc = subprocess.run([sys.executable, "-c", FAR_DOMAIN], capture_output=True, text=True, env=python_env(),
                          timeout=600, cwd=tmp_path)
    assert proc.returncode == 0 and "ok" in proc.stdout, proc.stderr[-3000:]


def test_a_non_finite_environment_does_not_spoil_the_gradients_of_the_others():
    """One input drives two environments; environment 1 blows up (finite, enormous velocities), the loss reads
    environment 0: the gradient is that of a run where environment 1 stayed finite, not NaN."""
    grads = []
    for blow_up in (False, True):
        scene = gs.Scene(sim_options=gs.options.SimOptions(dt=1e-2, substeps=2, requires_grad=True))
        chain = scene.add_entity(gs.morphs.Cylinder(pos=(0, 0, 1), height=0.6, radius=0.01),
                                 material=gs.materials.SpringChain(n_nodes=4, stiffness=300.0))
        scene.build(n_envs=2)
        v0 = torch.tensor([0.3, 0.0, 0.1], dtype=torch.float64, requires_grad=True)
        scale = torch.tensor([1.0, 1e300 if blow_up else 1.0], dtype=torch.float64)[:, None, None]
        chain.set_nodes_vel(v0 * scale)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for _ in range(6):
                scene.step()
            loss = chain.get_nodes_pos()[0].pow(2).sum()
            loss.backward()
        if blow_up:
            assert scene.invalid_envs.tolist() == [1] or 1 in scene._tape.invalid_envs
            assert any("gradients are dropped" in str(w.message) for w in caught)
        grads.append(v0.grad.clone())
    assert torch.isfinite(grads[1]).all()
    assert torch.allclose(grads[0], grads[1], rtol=1e-12, atol=0), (grads[0], grads[1])


def test_the_state_that_becomes_the_initial_state_is_checked_whole(probe):
    scene = probe
    si = [s.name for s in scene.solvers].index("ProbeSolver")
    state = scene.get_state()
    state.solvers_state[si].density[2, 0] = -5.0  # environment 2 broken, environment 0 fine
    with pytest.raises(gs.InvalidStateError, match=r"density\[env 2"):
        scene.reset(state=state, envs_idx=[0])
    scene.reset(envs_idx=[2])  # the registered state is still the good one


def test_odd_pickled_states_and_step_indices_raise_genesis_errors(probe):
    scene = probe
    state = scene.get_state()
    si = [s.name for s in scene.solvers].index("ProbeSolver")
    for mutate, match in [
        (lambda s: setattr(s.solvers_state[si], "solver", ["ProbeSolver"]), "not a SolverState"),
        (lambda s: s.solvers_state.__setitem__(si, {"pos": 1}), "not a SolverState"),
        (lambda s: setattr(s.solvers_state[si], "pos", s.solvers_state[si].pos.to_sparse()), "dense real"),
        (lambda s: setattr(s.solvers_state[si], "pos", torch.empty(s.solvers_state[si].pos.shape, device="meta")),
         "dense real"),
        (lambda s: setattr(s, "t", np.int64(2**62)), "state.t"),
        (lambda s: setattr(s, "t", 2.5), "state.t"),
    ]:
        bad = scene.get_state()
        mutate(bad)
        with pytest.raises(gs.SceneError, match=match):
            scene.reset(state=bad)
    scene.reset(state=state)


def test_integer_fields_take_only_whole_numbers_in_range(probe):
    scene = probe
    st = scene.solvers[[s.name for s in scene.solvers].index("ProbeSolver")].state
    for value in (2**32 + 2, 1.9, np.uint64(2**63), float("nan")):
        with pytest.raises(gs.OptionError, match="whole numbers"):
            st.set_rows("mode", scene._frame, value, what="set_mode")
    st.set_rows("mode", scene._frame, 2.0, what="set_mode")  # a whole float is fine


def test_save_refuses_what_load_would_refuse(tmp_path):
    scene = springs_scene()
    scene.save_checkpoint(tmp_path / "a.ckpt")
    before = (tmp_path / "a.ckpt").read_bytes()
    scene.solvers[[s.name for s in scene.solvers].index("SpringChainSolver")].state.at("vel", scene._frame)[1] = \
        float("nan")
    with pytest.raises(gs.InvalidStateError, match=r"save_checkpoint.*nothing was written.*vel\[env 1"):
        scene.save_checkpoint(tmp_path / "a.ckpt")
    assert (tmp_path / "a.ckpt").read_bytes() == before


def test_the_policy_is_read_at_every_step():
    (_, _), (bad, bad_drive) = poisoned("springs", policy="ignore")
    for _ in range(3):
        bad_drive(bad, bad.t)
        bad.step()
    assert bad.invalid_envs.tolist() == []  # not checked
    bad.sim_options = attrs.evolve(bad.sim_options, on_invalid_env="warn")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        bad.step()
    assert bad.invalid_envs.tolist() == [1]


def test_a_huge_finite_velocity_that_overflows_the_deformation_gradient_is_reported():
    """Found by the property above: one MPM particle's velocity set to 1e300 in one environment leaves every
    position and velocity finite after a step, but the deformation gradient overflows; C and F are sentinels, so
    the environment is reported."""
    scene, drive = registry().test_scenes["mpm"](3)
    drive(scene, 0)
    scene.step()
    state = scene.get_state()
    si = next(i for i, s in enumerate(scene.solvers) if s.name == "MPMSolver")
    state.solvers_state[si].vel[0].reshape(-1)[375] = 1e300
    scene.reset(state=state, envs_idx=[0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        scene.step()
    after = scene.get_state().solvers_state[si]
    assert bool(torch.isfinite(after.vel).all()) and not bool(torch.isfinite(after.F[0]).all())
    assert scene.invalid_envs.tolist() == [0]
