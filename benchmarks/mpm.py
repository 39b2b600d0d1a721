"""MPM speed: an elastic cube on a 64^3 grid, dt 4e-4, in particle-substeps per second, against a bare
MLS-MPM substep (4 loops, float32, atomics, one environment) written in plain Taichi in the same process.

    python benchmarks/mpm.py [--sizes 27000 100000 300000] [--envs 1 8 64] [--seconds 3]
"""

import argparse
import time

import numpy as np
import taichi as ti

import genesis_core as gs


def bare_reference(n_particles, n_grid=64, substeps=200):
    """The floor to compare with: mpm88-style MLS-MPM in 3D with fixed-corotated elasticity, nothing else."""
    dx = 1 / n_grid
    dt, p_vol, rho, E, nu = 4e-4, (dx * 0.5) ** 3, 1000.0, 3e5, 0.2
    mu, lam = E / (2 * (1 + nu)), E * nu / ((1 + nu) * (1 - 2 * nu))
    x = ti.Vector.field(3, float, n_particles)
    v = ti.Vector.field(3, float, n_particles)
    C = ti.Matrix.field(3, 3, float, n_particles)
    F = ti.Matrix.field(3, 3, float, n_particles)
    gv = ti.Vector.field(3, float, (n_grid,) * 3)
    gm = ti.field(float, (n_grid,) * 3)

    @ti.kernel
    def step():
        for I in ti.grouped(gm):
            gv[I] = ti.Vector.zero(float, 3)
            gm[I] = 0
        for p in x:
            base = ti.cast(x[p] / dx - 0.5, ti.i32)
            fx = x[p] / dx - base
            w = [0.5 * (1.5 - fx) ** 2, 0.75 - (fx - 1) ** 2, 0.5 * (fx - 0.5) ** 2]
            F[p] = (ti.Matrix.identity(float, 3) + dt * C[p]) @ F[p]
            U, S, V = ti.svd(F[p])
            J = S[0, 0] * S[1, 1] * S[2, 2]
            stress = 2 * mu * (F[p] - U @ V.transpose()) @ F[p].transpose() + ti.Matrix.identity(float, 3) * lam * J * (J - 1)
            affine = -dt * p_vol * 4 / dx / dx * stress + rho * p_vol * C[p]
            for i, j, k in ti.static(ti.ndrange(3, 3, 3)):
                off = ti.Vector([i, j, k])
                wt = w[i][0] * w[j][1] * w[k][2]
                gv[base + off] += wt * (rho * p_vol * v[p] + affine @ ((off - fx) * dx))
                gm[base + off] += wt * rho * p_vol
        for I in ti.grouped(gm):
            if gm[I] > 0:
                gv[I] = gv[I] / gm[I] + dt * ti.Vector([0, 0, -9.8])
            for d in ti.static(range(3)):
                if I[d] < 3 and gv[I][d] < 0 or I[d] > n_grid - 3 and gv[I][d] > 0:
                    gv[I][d] = 0
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

    side = round(n_particles ** (1 / 3))
    pts = (np.stack(np.meshgrid(*[np.arange(side)] * 3, indexing="ij"), -1).reshape(-1, 3) + 0.5) * dx / 2 + 0.3
    x.from_numpy(pts[:n_particles].astype(np.float32))
    F.from_numpy(np.tile(np.eye(3, dtype=np.float32), (n_particles, 1, 1)))
    step()
    ti.sync()
    t0 = time.perf_counter()
    for _ in range(substeps):
        step()
    ti.sync()
    return n_particles * substeps / (time.perf_counter() - t0)


def ours(n_particles, n_envs, seconds):
    side = n_particles ** (1 / 3) / 128  # cube edge at 2 particles per cell of 1/64 m
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=4e-4, substeps=1),
                     mpm_options=gs.options.MPMOptions(lower_bound=(0, 0, 0), upper_bound=(1, 1, 1), grid_density=63))
    cube = scene.add_entity(gs.morphs.Box(pos=(0.5, 0.5, 0.5), size=(side,) * 3), material=gs.materials.MPM.Elastic())
    scene.build(n_envs=0 if n_envs == 1 else n_envs)
    scene.step()
    n = 0
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds or n < 3:
        scene.step()
        n += 1
    elapsed = time.perf_counter() - t0
    return cube.n_particles, cube.n_particles * n_envs * n / elapsed


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", type=int, nargs="+", default=[27000, 100000, 300000])
    parser.add_argument("--envs", type=int, nargs="+", default=[1, 8, 64])
    parser.add_argument("--seconds", type=float, default=3.0)
    args = parser.parse_args()
    gs.init(backend=gs.cpu, precision="32")
    bare = bare_reference(27000)
    print(f"bare MLS-MPM substep (plain Taichi, atomics, 1 env, 27k particles): {bare:.3g} particle-substeps/s")
    print(f"{'particles':>10}{'n_envs':>8}{'particle-substeps/s':>22}{'vs bare':>9}")
    for size in args.sizes:
        for n_envs in args.envs:
            if size * n_envs > 4e6:
                print(f"{size:>10}{n_envs:>8}{'(skipped: > 4M particles)':>31}")
                continue
            n, rate = ours(size, n_envs, args.seconds)
            print(f"{n:>10}{n_envs:>8}{rate:>22.3g}{rate / bare:>9.2f}")


if __name__ == "__main__":
    main()
