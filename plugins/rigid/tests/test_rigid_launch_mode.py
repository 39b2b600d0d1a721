"""The rigid solver's launch mode: the serial and the parallel copies of its kernels compute the same bits, so a
batch may run either; "auto" times both over its first substeps and keeps the faster."""

import numpy as np
import pytest
import torch

import genesis_core as gs
from genesis_rigid.solver import RigidSolver

ARM = """<mujoco><worldbody><geom type="plane" size="2 2 0.1"/>
  <body pos="0 0 0.5"><joint name="j0" type="hinge" axis="0 1 0" damping="0.05"/>
    <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.04" mass="1"/>
    <body pos="0.3 0 0"><joint name="j1" type="hinge" axis="0 1 0" range="-1.5 1.5" limited="true"/>
      <geom type="box" size="0.12 0.04 0.04" pos="0.12 0 0" mass="0.5"/>
      <body pos="0.24 0 0"><joint name="j2" type="hinge" axis="1 0 0"/>
        <geom type="sphere" size="0.06" pos="0.05 0 0" mass="0.3"/></body></body></body>
  <body pos="0.3 0.3 0.06"><freejoint/><geom type="box" size="0.05 0.05 0.05" mass="0.2"/></body>
  <body pos="0.32 0.31 0.17" euler="0 0 30"><freejoint/><geom type="box" size="0.05 0.05 0.05" mass="0.2"/></body>
  <body pos="0.29 0.3 0.28" euler="0 0 60"><freejoint/><geom type="box" size="0.05 0.05 0.05" mass="0.2"/></body>
  <body pos="0.3 0.29 0.4"><freejoint/><geom type="sphere" size="0.05" mass="0.2"/></body>
</worldbody></mujoco>"""


def scene_of(tmp_path, n_envs, mode=None):
    path = tmp_path / "arm.xml"
    path.write_text(ARM)
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=0.01))
    arm = scene.add_entity(gs.morphs.MJCF(file=str(path)))
    scene.build(n_envs=n_envs)
    if mode is not None:
        scene.rigid_solver.launch_mode = mode
    return scene, arm


def run(scene, arm, n_envs, steps=120):
    # each environment its own start of the arm's three hinges
    rng = np.random.default_rng(3)
    q = torch.as_tensor(rng.uniform(-1.0, 1.0, size=(n_envs, 3) if n_envs else (3,)), dtype=torch.float32)
    arm.set_dofs_position(q, dofs_idx_local=[0, 1, 2])
    out = []
    for _ in range(steps):
        scene.step()
    for name in ("qpos", "dofs_vel", "contact_impulse", "limit_impulse", "contact_key"):
        out.append(getattr(scene.rigid_solver.state, name)[scene.rigid_solver.frame].clone())
    return out


def test_serial_and_parallel_copies_step_a_batch_bitwise_alike(tmp_path):
    """A batch of an arm swinging onto its floor against its joint limit, a pile of three boxes and a ball beside
    it: 120 steps on the parallel kernels and on their serial copies end bitwise equal in every declared field
    (positions, velocities, contacts' and limits' impulses, contact keys). With LLVM's fast-math flags (Taichi's
    default) the two copies drift apart within these steps; the rigid kernels are compiled without them
    (launch.exact_math)."""
    results = []
    for mode in ("parallel", "serial"):
        scene, arm = scene_of(tmp_path, 6, mode)
        assert scene.rigid_solver.launch_mode == mode
        results.append(run(scene, arm, 6))
    contacts = int((results[0][4] >= 0).sum())
    assert contacts > 0  # the arm and the box are on the floor
    assert float(results[0][3].abs().max()) > 0  # a limit held
    for a, b in zip(*results):
        assert torch.equal(a, b)


def test_auto_times_both_copies_then_keeps_the_faster(tmp_path, monkeypatch):
    """launch_mode "auto" (the default) on a batch: TRIAL_LEAD substeps on the pool, then serial, parallel, parallel,
    serial blocks of TRIAL_BLOCK + 1, then the copy with the least time of a substep; the trajectory is the forced
    copies' own."""
    scene, arm = scene_of(tmp_path, 4)
    solver = scene.rigid_solver
    assert solver._trial is not None and solver.launch_mode == "parallel"
    ran = []
    timed = solver._time_trial

    def record(seconds):
        ran.append(solver.launch_mode)
        timed(seconds)

    monkeypatch.setattr(solver, "_time_trial", record)
    auto = run(scene, arm, 4)
    b = RigidSolver.TRIAL_BLOCK + 1
    assert ran == ["parallel"] * RigidSolver.TRIAL_LEAD + ["serial"] * b + ["parallel"] * 2 * b + ["serial"] * b
    assert solver._trial is None
    result = solver._trial_result
    assert set(result) == {"serial_s", "parallel_s"} and min(result.values()) > 0
    assert solver.launch_mode == ("serial" if result["serial_s"] <= result["parallel_s"] else "parallel")
    forced, arm2 = scene_of(tmp_path, 4, "parallel")
    for a, c in zip(auto, run(forced, arm2, 4)):
        assert torch.equal(a, c)


def test_auto_keeps_the_serial_copies_for_one_environment_and_the_pool_for_a_big_batch(tmp_path):
    one, _ = scene_of(tmp_path, 0)
    assert one.rigid_solver.launch_mode == "serial" and one.rigid_solver._trial is None
    big, _ = scene_of(tmp_path, RigidSolver.TRIAL_MAX_BATCH + 1)
    assert big.rigid_solver.launch_mode == "parallel" and big.rigid_solver._trial is None


def test_a_bad_launch_mode_is_refused(tmp_path):
    scene, _ = scene_of(tmp_path, 2)
    with pytest.raises(gs.OptionError, match="launch_mode='fast'.*'auto', 'parallel', 'serial'"):
        scene.rigid_solver.launch_mode = "fast"
    assert scene.rigid_solver._trial is not None  # unchanged: still choosing


def test_differentiable_mode_keeps_the_pool(tmp_path):
    path = tmp_path / "arm.xml"
    path.write_text(ARM)
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=0.01, requires_grad=True))
    scene.add_entity(gs.morphs.MJCF(file=str(path)))
    scene.build(n_envs=3)
    assert scene.rigid_solver.launch_mode == "parallel" and scene.rigid_solver._trial is None


def test_kernel_modules_accumulate_into_arrays_without_augmented_assignment():
    """`a[i] += x` on an array compiles, in a Taichi parallel loop, to an atomic read-modify-write (a
    compare-and-swap loop for floats) even where one thread owns a[i], as here, where each loop iteration is one
    environment and writes that environment's entries only. The parallel copies ran the pyramid of 15 boxes at
    1024 environments 2.2x slower a thread than the serial copies (763 against 1652 environment-steps/s) until
    every such accumulation was written out as `a[i] = a[i] + x` (the same rounding). Augmented assignment stays
    for local names, which compile to registers."""
    import ast
    import pathlib

    import genesis_rigid

    found = []
    for path in sorted(pathlib.Path(genesis_rigid.__file__).parent.glob("kernels_*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Subscript):
                found.append(f"{path.name}:{node.lineno}")
    assert not found, found


def test_kinematics_kept_from_the_last_substep_step_as_if_computed_again(tmp_path, monkeypatch):
    """A substep takes frame f's kinematics (rotations, centres of mass, joint frames) that the last substep's final
    kinematics left in the scratch instead of computing them again (RigidSolver._fresh_kinematics). One scene keeps
    them, the other computes them at every substep; between steps both are written to alike (positions with and
    without their kinematics, velocities, a snapshot restored in some environments, a centre-of-mass shift, a mass
    shift). Every declared field is equal bit for bit after every step: a write the solver failed to notice would
    leave the first scene stepping from stale kinematics. The first scene kept them in most substeps."""
    fresh = []
    scenes = [scene_of(tmp_path, 3, "parallel") for _ in range(2)]
    keep, again = scenes[0][0].rigid_solver, scenes[1][0].rigid_solver
    decide = keep._fresh_kinematics

    def record(f):
        fresh.append(decide(f))
        return fresh[-1]

    monkeypatch.setattr(keep, "_fresh_kinematics", record)
    monkeypatch.setattr(again, "_fresh_kinematics", lambda f: 0)
    snapshots = [None, None]
    writes = {
        10: lambda s, arm, i: arm.set_dofs_position(torch.tensor([[0.3, -0.2]]), dofs_idx_local=[0, 1], envs_idx=[1]),
        17: lambda s, arm, i: arm.set_qpos(torch.tensor([[0.1]]), qs_idx_local=[2], envs_idx=[2], skip_forward=True),
        24: lambda s, arm, i: arm.set_dofs_velocity(torch.full((3, 1), 2.0), dofs_idx_local=[2]),
        31: lambda s, arm, i: snapshots.__setitem__(i, s.get_state()),
        40: lambda s, arm, i: s.reset(state=snapshots[i], envs_idx=[0, 2]),
        47: lambda s, arm, i: arm.set_COM_shift(torch.full((3, 1, 3), 0.02), links_idx_local=[1]),
        55: lambda s, arm, i: arm.set_mass_shift(torch.full((3, 1), 0.3), links_idx_local=[2]),
    }
    for step in range(70):
        out = []
        for i, (scene, arm) in enumerate(scenes):
            if step in writes:
                writes[step](scene, arm, i)
            scene.step()
            st = scene.rigid_solver.state
            out.append([getattr(st, name)[scene.rigid_solver.frame].clone() for name in
                        ("qpos", "dofs_vel", "links_pos", "links_quat", "contact_impulse", "limit_impulse")])
        for a, b in zip(*out):
            assert torch.equal(a, b), f"step {step}"
    assert 0 < sum(fresh) and sum(fresh) >= len(fresh) - 2 * len(writes), fresh
