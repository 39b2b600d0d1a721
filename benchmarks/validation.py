"""What bad-input protection costs, as a share of a step of the same scene in the same process:

- the per-step fault check (`scene.invalid_envs`: one number read per step), timed alone: the difference of
  whole steps with the check on and off lies far below the run-to-run noise of a step here (+-20% seen);
- the validation of a control setter called once per step (`control_dofs_position`, the RL loop's call);
- a partial `reset(state, envs_idx)` with its validation (per reset, not per step).

Scenes: the Franka panda (../shared/assets; the shipped cart-pole where it is absent) at n_envs 0, 64 and 512,
and the MPM test scene's elastic cube and sand block. There is no anchor: neither Genesis World nor MuJoCo
validates state or checks environments, so the figure is a ratio against this engine's own step.

    python benchmarks/validation.py [--steps 300] [--envs 0 64 512]
"""

import argparse
import os
import time

PANDA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared", "assets", "mjcf",
                     "franka_emika_panda", "scene.xml")


def best(fn, n, repeats=3):
    out = []
    for _ in range(repeats):
        t = time.perf_counter()
        for _ in range(n):
            fn()
        out.append((time.perf_counter() - t) / n)
    return min(out)


def rigid_scene(gs, n_envs, policy="warn"):
    import torch

    from genesis_rigid import assets

    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=0.01, on_invalid_env=policy))
    if os.path.exists(PANDA):
        robot = scene.add_entity(gs.morphs.MJCF(file=PANDA))
        target = torch.tensor([0, 0, 0, -1.57079, 0, 1.57079, -0.7853, 0.04, 0.04])
        dofs = list(range(9))
        name = "panda"
    else:
        scene.add_entity(gs.morphs.Plane())
        robot = scene.add_entity(gs.morphs.MJCF(file=assets.path("cartpole.xml")))
        target, dofs, name = torch.tensor([0.1]), [0], "cart-pole"
    scene.build(n_envs=n_envs)
    target = target if n_envs == 0 else target.expand(n_envs, len(target)).contiguous()
    robot.set_dofs_kp([100.0] * len(dofs), dofs_idx_local=dofs)

    def control():
        robot.control_dofs_position(target, dofs_idx_local=dofs)

    return scene, control, name


def mpm_scene(gs, n_envs, policy="warn"):
    import attrs

    from genesis_core.plugins import registry

    scene, drive = registry().test_scenes["mpm"](n_envs)
    scene.sim_options = attrs.evolve(scene.sim_options, on_invalid_env=policy)
    cube = scene.entities[0]
    vel = cube.get_particles_vel()

    def control():
        cube.set_velocity(vel)

    return scene, control, f"MPM cube + sand ({scene.mpm_solver.n_particles} particles)"


def measure(gs, make, n_envs, steps):
    import torch

    scene, control, name = make(gs, n_envs, "warn")
    for _ in range(3):
        scene.step()
    t_step = best(scene.step, steps)
    f = scene._frame
    t_check = best(lambda: scene._faults.any_invalid(f), steps * 10)
    t_control = best(control, steps)
    # the setter's validation alone: the entry checks set_rows runs on the value it writes
    st = scene.rigid_solver.state if scene.rigid_solver.is_active else scene.mpm_solver.state
    field = "dofs_ctrl_pos" if st.owner == "RigidSolver" else "vel"
    value = st.at(field, f).clone()
    t_entries = best(lambda: st._entries_ok(st.specs[field], value), steps * 10)
    state = scene.get_state()
    idx = [0] if n_envs else None
    t_reset = best(lambda: scene.reset(state=state, envs_idx=idx), max(steps // 10, 3))
    del torch
    return dict(name=name, n_envs=n_envs, step=t_step, check=t_check, control=t_control,
                entries=t_entries, reset=t_reset)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--envs", type=int, nargs="+", default=[0, 64, 512])
    args = parser.parse_args()

    import genesis_core as gs
    from genesis_core.plugins import registry

    gs.init(backend=gs.cpu, precision="32", logging_level="warning")
    rows = []
    for n in args.envs:
        rows.append(measure(gs, rigid_scene, n, args.steps))
    if "mpm" in registry().test_scenes:
        for n in args.envs[:2]:
            rows.append(measure(gs, mpm_scene, n, max(args.steps // 10, 3)))
    print("float32, one process; each share is of the step time of the same scene\n")
    print("| scene | n_envs | step, us | fault check per step, us (share) | setter validation, us (share) "
          "| setter call, us | reset(envs_idx) with validation, us |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        step = r["step"]
        print(f"| {r['name']} | {r['n_envs']} | {step * 1e6:.1f} | {r['check'] * 1e6:.2f} ({r['check'] / step:.2%}) "
              f"| {r['entries'] * 1e6:.2f} ({r['entries'] / step:.2%}) | {r['control'] * 1e6:.1f} "
              f"| {r['reset'] * 1e6:.0f} |")


if __name__ == "__main__":
    main()
