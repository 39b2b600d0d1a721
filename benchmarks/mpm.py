"""MPM speed: an elastic cube on a 64^3 grid, dt 4e-4, in particle-substeps per second, against a bare MLS-MPM
substep (4 loops, float32, atomics, one environment) written in plain Taichi in the same process.

    python benchmarks/mpm.py [--sizes 27000 100000 300000] [--envs 1 8 64] [--seconds 3] [--rounds 5] [--profile]
                             [--json mpm.json]

Each row alternates rounds of the bare loop and of ours and keeps the best round of each: on a shared machine a
round that another process slowed is dropped on both sides, and "vs bare" compares figures measured seconds
apart. "spread" is ours' slowest round over its fastest (1.00: no noise). --profile adds where a substep's time
goes: every kernel launch of ours timed (the median launch of the best round) and the bare loop's four loops timed
as separate kernels.
"""

import argparse
import time

import numpy as np
import taichi as ti

import genesis_core as gs
from common import add_json_option, measuring, write_json
from genesis_core import launch


class BareMPM:
    """The floor to compare with: mpm88-style MLS-MPM in 3D with fixed-corotated elasticity, nothing else: one
    kernel of four loops (clear the grid, particle to grid with atomics, grid update, grid to particle)."""

    def __init__(self, n_particles, n_grid=64):
        dx = 1 / n_grid
        dt, p_vol, rho, E, nu = 4e-4, (dx * 0.5) ** 3, 1000.0, 3e5, 0.2
        mu, lam = E / (2 * (1 + nu)), E * nu / ((1 + nu) * (1 - 2 * nu))
        x = ti.Vector.field(3, float, n_particles)
        v = ti.Vector.field(3, float, n_particles)
        C = ti.Matrix.field(3, 3, float, n_particles)
        F = ti.Matrix.field(3, 3, float, n_particles)
        gv = ti.Vector.field(3, float, (n_grid,) * 3)
        gm = ti.field(float, (n_grid,) * 3)

        @ti.func
        def clear():
            for I in ti.grouped(gm):
                gv[I] = ti.Vector.zero(float, 3)
                gm[I] = 0

        @ti.func
        def p2g():
            for p in x:
                base = ti.cast(x[p] / dx - 0.5, ti.i32)
                fx = x[p] / dx - base
                w = [0.5 * (1.5 - fx) ** 2, 0.75 - (fx - 1) ** 2, 0.5 * (fx - 0.5) ** 2]
                F[p] = (ti.Matrix.identity(float, 3) + dt * C[p]) @ F[p]
                U, S, V = ti.svd(F[p])
                J = S[0, 0] * S[1, 1] * S[2, 2]
                stress = 2 * mu * (F[p] - U @ V.transpose()) @ F[p].transpose() + \
                    ti.Matrix.identity(float, 3) * lam * J * (J - 1)
                affine = -dt * p_vol * 4 / dx / dx * stress + rho * p_vol * C[p]
                for i, j, k in ti.static(ti.ndrange(3, 3, 3)):
                    off = ti.Vector([i, j, k])
                    wt = w[i][0] * w[j][1] * w[k][2]
                    gv[base + off] += wt * (rho * p_vol * v[p] + affine @ ((off - fx) * dx))
                    gm[base + off] += wt * rho * p_vol

        @ti.func
        def grid():
            for I in ti.grouped(gm):
                if gm[I] > 0:
                    gv[I] = gv[I] / gm[I] + dt * ti.Vector([0, 0, -9.8])
                for d in ti.static(range(3)):
                    if I[d] < 3 and gv[I][d] < 0 or I[d] > n_grid - 3 and gv[I][d] > 0:
                        gv[I][d] = 0

        @ti.func
        def g2p():
            for p in x:
                base = ti.cast(x[p] / dx - 0.5, ti.i32)
                fx = x[p] / dx - base
                w = [0.5 * (1.5 - fx) ** 2, 0.75 - (fx - 1) ** 2, 0.5 * (fx - 0.5) ** 2]
                nv = ti.Vector.zero(float, 3)
                nC = ti.Matrix.zero(float, 3, 3)
                for i, j, k in ti.static(ti.ndrange(3, 3, 3)):
                    off = ti.Vector([i, j, k])
                    wt = w[i][0] * w[j][1] * w[k][2]
                    nv += wt * gv[base + off]
                    nC += 4 / dx * wt * gv[base + off].outer_product(off - fx)
                v[p], C[p] = nv, nC
                x[p] += dt * nv

        @ti.kernel
        def step():
            clear()
            p2g()
            grid()
            g2p()

        def stage(func):
            @ti.kernel
            def one():
                func()

            return one

        self.n_particles = n_particles
        self.step = step
        self.stages = {"clear": stage(clear), "p2g": stage(p2g), "grid": stage(grid), "g2p": stage(g2p)}
        side = round(n_particles ** (1 / 3))
        pts = (np.stack(np.meshgrid(*[np.arange(side)] * 3, indexing="ij"), -1).reshape(-1, 3) + 0.5) * dx / 2 + 0.3
        x.from_numpy(pts[:n_particles].astype(np.float32))
        F.from_numpy(np.tile(np.eye(3, dtype=np.float32), (n_particles, 1, 1)))
        self._start = (x.to_numpy(), F.to_numpy())
        self._fields = (x, v, C, F)
        step()
        for s in self.stages.values():
            s()
        ti.sync()

    def restart(self):
        """Back to the undeformed cube at rest, so that every round runs the same physics."""
        x, v, C, F = self._fields
        x.from_numpy(self._start[0])
        F.from_numpy(self._start[1])
        v.fill(0)
        C.fill(0)

    def rate(self, seconds):
        """particle-substeps/s of the one-kernel substep over about `seconds`."""
        self.restart()
        ti.sync()
        n, t0 = 0, time.perf_counter()
        while time.perf_counter() - t0 < seconds or n < 3:
            self.step()
            n += 1
        ti.sync()
        return self.n_particles * n / (time.perf_counter() - t0)

    def stage_times(self, substeps=20):
        """Median ms of each loop run as its own kernel, over `substeps` substeps."""
        self.restart()
        times = {name: [] for name in self.stages}
        for _ in range(substeps):
            for name, kernel in self.stages.items():
                t0 = time.perf_counter()
                kernel()
                ti.sync()
                times[name].append(time.perf_counter() - t0)
        return {name: 1e3 * float(np.median(t)) for name, t in times.items()}


class Ours:
    """The same cube as an MPM entity in a scene of `n_envs` environments, one substep a step."""

    def __init__(self, n_particles, n_envs):
        side = n_particles ** (1 / 3) / 128  # cube edge at 2 particles per cell of 1/64 m
        scene = gs.Scene(sim_options=gs.options.SimOptions(dt=4e-4, substeps=1),
                         mpm_options=gs.options.MPMOptions(lower_bound=(0, 0, 0), upper_bound=(1, 1, 1),
                                                           grid_density=63))
        self.cube = scene.add_entity(gs.morphs.Box(pos=(0.5, 0.5, 0.5), size=(side,) * 3),
                                     material=gs.materials.MPM.Elastic())
        scene.build(n_envs=0 if n_envs == 1 else n_envs)
        scene.step()
        self.scene, self.n_envs = scene, n_envs
        self.n_particles = self.cube.n_particles

    def rate(self, seconds):
        """particle-substeps/s over about `seconds`, from the initial state."""
        self.scene.reset()
        n, t0 = 0, time.perf_counter()
        while time.perf_counter() - t0 < seconds or n < 3:
            self.scene.step()
            n += 1
        return self.n_particles * self.n_envs * n / (time.perf_counter() - t0)

    def kernel_times(self, steps=20):
        """ms per step of each kernel and of the whole step (medians over `steps` steps), and the launches per
        step: every launch through genesis_core.launch.Launcher is timed (a CPU launch returns when the kernel is
        done)."""
        self.scene.reset()
        times = []
        call = launch.Launcher.__call__

        def timed(launcher, kernel, *args):
            t0 = time.perf_counter()
            call(launcher, kernel, *args)
            ti.sync()
            times[-1][kernel.__name__] = times[-1].get(kernel.__name__, 0.0) + time.perf_counter() - t0
            times[-1]["launches"] += 1

        launch.Launcher.__call__ = timed
        try:
            for _ in range(steps):
                times.append({"launches": 0})
                t0 = time.perf_counter()
                self.scene.step()
                times[-1]["step"] = time.perf_counter() - t0
        finally:
            launch.Launcher.__call__ = call
        out = {name: 1e3 * float(np.median([t.get(name, 0.0) for t in times])) for name in times[0]}
        out["launches"] = times[0]["launches"]
        return out


def best_of_rounds(bare, ours, seconds, rounds):
    """Alternate rounds of both, `seconds` / rounds each: the best rate of each and ours' slowest over fastest."""
    mine, theirs = [], []
    for _ in range(rounds):
        theirs.append(bare.rate(seconds / rounds))
        mine.append(ours.rate(seconds / rounds))
    return max(mine), max(theirs), max(mine) / min(mine)


def fastest(measure, rounds):
    """The measurement (a dict of ms) of the round whose total is the smallest."""
    runs = [measure() for _ in range(rounds)]
    return min(runs, key=lambda r: r.get("step", sum(r.values())))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", type=int, nargs="+", default=[27000, 100000, 300000])
    parser.add_argument("--envs", type=int, nargs="+", default=[1, 8, 64])
    parser.add_argument("--seconds", type=float, default=3.0, help="time per row for ours (the bare loop as much)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--profile", action="store_true", help="also time each kernel launch")
    add_json_option(parser)
    args = parser.parse_args()
    gs.init(backend=gs.cpu, precision="32")
    bare = BareMPM(27000)
    print("bare: a plain-Taichi MLS-MPM substep (atomics, 1 env, 27k particles), in rounds alternating with ours")
    print(f"{'particles':>10}{'n_envs':>8}{'particle-substeps/s':>22}{'bare':>10}{'vs bare':>9}{'spread':>8}")
    profiles, figures = [], []
    for size in args.sizes:
        for n_envs in args.envs:
            if size * n_envs > 4e6:
                print(f"{size:>10}{n_envs:>8}{'(skipped: > 4M particles)':>31}")
                continue
            with measuring(f"{size} particles at n_envs {n_envs}"):
                ours = Ours(size, n_envs)
                rate, bare_rate, spread = best_of_rounds(bare, ours, args.seconds, args.rounds)
            print(f"{ours.n_particles:>10}{n_envs:>8}{rate:>22.3g}{bare_rate:>10.3g}{rate / bare_rate:>9.2f}"
                  f"{spread:>8.2f}", flush=True)
            figures.append({"scene": f"{ours.n_particles} particles", "n_envs": n_envs, "ours": rate,
                            "others": {"bare MLS-MPM loop (1 env, 27k particles)": bare_rate}})
            if args.profile:
                profiles.append((ours.n_particles, n_envs, fastest(ours.kernel_times, args.rounds)))
            del ours
    write_json(args.json, "mpm", "MPM elastic cube, 64^3 grid, dt 4e-4", "particle-substeps/s", figures, anchor=None)
    if args.profile:
        stages = fastest(bare.stage_times, args.rounds)
        print("\nms per substep, each launch timed (median launch of the fastest of the rounds):")
        print("  bare loop, its loops as separate kernels: " +
              ", ".join(f"{k} {v:.2f}" for k, v in stages.items()) + f"; sum {sum(stages.values()):.2f}")
        for n, n_envs, t in profiles:
            kernels = {k: v for k, v in t.items() if k not in ("step", "launches")}
            rest = t["step"] - sum(kernels.values())
            print(f"  ours, {n} particles x {n_envs} envs: " + ", ".join(f"{k} {v:.2f}" for k, v in kernels.items())
                  + f"; step {t['step']:.2f} (outside the kernels {rest:.2f}); {t['launches']:.0f} launches a step")


if __name__ == "__main__":
    main()
