"""Differentiable mode: the cost of the backward against the forward, and the memory the tape holds against the
horizon, for a free rigid box falling onto the plane, an MPM elastic cube of about 1k particles, and the spring
chains of the example plugin; with `--only panda panda64`, the panda (../shared/assets) folding onto the floor
with no control, at 1 and 64 environments.

    python benchmarks/grad.py [--steps 50 100] [--precision 32] [--only rigid mpm springs panda panda64]

For each scene and horizon: the time of a forward run in differentiable mode (recording), of the backward
(loss.backward(), physics included), their ratio, and the forward of the same scene without requires_grad.
The first backward of a process also compiles the adjoint kernels; it is timed separately and left out of the
ratios. Memory: `scene.grad_memory` (frames moved to host memory) at several horizons, and the slope per step.
"""

import argparse
import functools
import os
import time

import torch

import genesis_core as gs


def rigid_box(requires_grad):
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=0.01, requires_grad=requires_grad))
    scene.add_entity(gs.morphs.Plane())
    box = scene.add_entity(gs.morphs.Box(pos=(0, 0, 0.3), size=(0.2, 0.2, 0.2)))
    scene.build()

    def run(n_steps):
        v0 = torch.tensor([1.0, 0.0, 0.0, 0.0, 0.0, 0.0], requires_grad=requires_grad)
        box.set_dofs_velocity(v0)
        for _ in range(n_steps):
            scene.step()
        return box.get_pos().pow(2).sum(), v0

    return scene, run


PANDA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared", "assets", "mjcf",
                     "franka_emika_panda", "panda.xml")


def panda_folding(requires_grad, n_envs=0):
    """The panda on a plane with no control, started with a joint velocity (the input of the gradient): it folds
    onto the floor and its meshes touch it."""
    if not os.path.exists(PANDA):
        raise SystemExit(f"the panda model is absent ({PANDA}): it lies in ../shared/assets beside the clone")
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=0.01, requires_grad=requires_grad))
    scene.add_entity(gs.morphs.Plane())
    panda = scene.add_entity(gs.morphs.MJCF(file=PANDA))
    scene.build(n_envs=n_envs)

    def run(n_steps):
        v0 = torch.zeros(panda.n_dofs, dtype=gs.tc_float, requires_grad=requires_grad)
        with torch.no_grad():
            v0[:7] = 0.5
        panda.set_dofs_velocity(v0.expand(n_envs, -1) if n_envs else v0)
        for _ in range(n_steps):
            scene.step()
        return panda.get_links_pos().pow(2).sum(), v0

    return scene, run


def mpm_cube(requires_grad):
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=2e-3, substeps=5, requires_grad=requires_grad),
                     mpm_options=gs.options.MPMOptions(lower_bound=(0, 0, 0), upper_bound=(0.5, 0.5, 0.5),
                                                       grid_density=32))
    cube = scene.add_entity(gs.morphs.Box(pos=(0.25, 0.25, 0.2), size=(0.16, 0.16, 0.16)),
                            material=gs.materials.MPM.Elastic(E=2e4, nu=0.3, rho=1000))
    scene.build()

    def run(n_steps):
        v0 = torch.tensor([0.5, 0.0, 0.0], requires_grad=requires_grad)
        cube.set_velocity(v0)
        for _ in range(n_steps):
            scene.step()
        return cube.get_particles_pos().mean(0).pow(2).sum(), v0

    return scene, run, cube.n_particles


def spring_chains(requires_grad):
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=0.01, substeps=4, requires_grad=requires_grad))
    chain = scene.add_entity(gs.morphs.Cylinder(pos=(0, 0, 1), height=0.5),
                             material=gs.materials.SpringChain(n_nodes=16, anchored=True))
    scene.build(n_envs=64)

    def run(n_steps):
        v0 = torch.tensor([0.3, 0.0, 0.0], requires_grad=requires_grad)
        chain.set_nodes_vel(v0.expand(64, 16, 3))
        for _ in range(n_steps):
            scene.step()
        return chain.get_nodes_pos().pow(2).sum(), v0

    return scene, run


def timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def measure(name, make, steps, label, repeat=3):
    made = make(True)
    scene, run = made[0], made[1]
    plain = make(False)
    # compile everything: forward kernels, then the adjoint kernels (first backward of the process)
    (loss, _), _ = timed(lambda: run(2))
    _, first_backward = timed(loss.backward)
    plain[1](2)
    rows = []
    for n in steps:
        fwd = bwd = fwd_plain = float("inf")
        for _ in range(repeat):  # each figure the best of its own runs
            scene.reset()
            (loss, v0), t_fwd = timed(lambda: run(n))
            _, t_bwd = timed(loss.backward)
            assert v0.grad is not None and torch.isfinite(v0.grad).all()
            plain[0].reset()
            _, t_plain = timed(lambda: plain[1](n))
            fwd, bwd, fwd_plain = min(fwd, t_fwd), min(bwd, t_bwd), min(fwd_plain, t_plain)
        rows.append((f"{name} ({label})", n, fwd, bwd, bwd / fwd, fwd_plain, fwd / fwd_plain))
    mem = []
    for n in (max(steps) // 4, max(steps) // 2, max(steps)):
        scene.reset()
        run(n)
        mem.append((n, scene.grad_memory))
    slope = (mem[-1][1] - mem[0][1]) / (mem[-1][0] - mem[0][0])
    return rows, first_backward, mem, slope


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, nargs="+", default=[50, 100])
    parser.add_argument("--precision", default="32", choices=["32", "64"])
    parser.add_argument("--only", nargs="+", default=["rigid", "mpm", "springs"])
    parser.add_argument("--repeat", type=int, default=3, help="runs per figure (each figure the best of them)")
    args = parser.parse_args()
    gs.init(backend=gs.cpu, precision=args.precision, logging_level="warning")
    cases = {"rigid": ("rigid box on a plane", rigid_box, "1 env"),
             "mpm": ("MPM elastic cube", mpm_cube, "1 env"),
             "springs": ("spring chains", spring_chains, "64 envs x 16 nodes"),
             "panda": ("panda folding onto the floor", panda_folding, "1 env"),
             "panda64": ("panda folding onto the floor", functools.partial(panda_folding, n_envs=64), "64 envs")}
    print(f"float{args.precision}; times in seconds (each the best of {args.repeat})\n")
    print("| scene | steps | forward (recording) | backward | backward / forward | forward, plain scene | "
          "recording / plain |")
    print("|---|---|---|---|---|---|---|")
    notes = []
    for key in args.only:
        name, make, label = cases[key]
        if key == "mpm":
            label = f"{make(False)[2]} particles"
        rows, first, mem, slope = measure(name, make, args.steps, label, args.repeat)
        for r in rows:
            print(f"| {r[0]} | {r[1]} | {r[2]:.3f} | {r[3]:.3f} | {r[4]:.2f} | {r[5]:.3f} | {r[6]:.2f}x |")
        notes.append(f"{name}: first backward (compiles the adjoint kernels) {first:.1f} s; tape memory "
                     + ", ".join(f"{n} steps {b / 1e6:.2f} MB" for n, b in mem) + f"; slope {slope / 1e3:.1f} kB/step")
    print()
    for n in notes:
        print(n)


if __name__ == "__main__":
    main()
