"""Newton XPBD cloth on the CPU: a reference speed for the PBD cloth benchmark.

Runs NVIDIA Newton's XPBD solver (newton.solvers.SolverXPBD, on Warp's "cpu"
device) on one fixed scene and prints one result line:

    newton cloth n_envs=N particles=P substeps=10 iterations=I build_s=.. first_step_s=..
        steps_per_s=.. particle_substeps_per_s=..

Scene: a 2 m x 2 m cloth of 64 x 64 vertices (x, y in [-1, 1], two triangles
per grid cell), flat at z = 0.5 m, dropped onto the ground plane z = 0 under
gravity -9.81 z. Density 4 kg/m^2 (16 kg). Frame dt 4e-3 s in 10 substeps.
Newton's XPBD solves distance constraints (springs) and dihedral bending, not
triangle FEM, so the cloth gets springs along its edges and across each pair
of adjacent triangles (add_springs=True, as in Newton's cloth_hanging example).
Cloth-ground soft contact is on; cloth self-contact is off (--self-contact
turns it on). N_ENVS copies of the cloth are replicated into one model, one
world each, 3 m apart in x.

Timing: build, one first step (includes kernel compilation or cache load),
3 warm-up steps, then STEPS timed frames; wp.synchronize() before each clock
read. No CUDA graphs.

Usage (needs a python with newton installed, which brings warp-lang):

    $NEWTON_PYTHON benchmarks/newton_cloth.py N_ENVS STEPS [--check] [--self-contact] [--iterations K]

e.g. NEWTON_PYTHON=/root/.cache/newton-venv/bin/python (pip install newton).
--check also simulates 0.5 s (125 frames) of one run and asserts that the
cloth lies on the ground: finite, min z >= -0.02, max z <= 0.05 (particle
radius 0.01 m) and no spring stretched by more than 10 %.
"""

import argparse
import time

import numpy as np
import warp as wp

wp.config.log_level = wp.LOG_WARNING  # no init / module-load messages

import newton  # noqa: E402

N = 64  # vertices per side
SIZE = 2.0  # m
HEIGHT = 0.5  # m
DENSITY = 4.0  # kg/m^2
FRAME_DT = 4e-3
SUBSTEPS = 10
ENV_SPACING = 3.0  # m, along x
RADIUS = 0.01  # particle contact radius [m], below half the vertex spacing (0.0159 m)
# spring_ke as in Newton's cloth_hanging example. That example also uses spring_kd = 1 with 10
# iterations; with the default 2 iterations the cloth blows up after landing unless kd = 0, and
# already in free fall for spring_ke >= 3e3.
SPRING_KE, SPRING_KD = 1.0e3, 0.0
EDGE_KE, EDGE_KD = 1.0e1, 0.0  # bending, as in Newton's cloth_hanging example


def cloth_mesh():
    s = np.linspace(-SIZE / 2, SIZE / 2, N)
    x, y = np.meshgrid(s, s)  # vertex j*N+i at (s[i], s[j])
    verts = np.stack([x.ravel(), y.ravel(), np.zeros(N * N)], axis=1)
    tris = []
    for j in range(N - 1):
        for i in range(N - 1):
            a = j * N + i
            tris += [a, a + 1, a + N, a + 1, a + N + 1, a + N]
    return verts, tris


def build(n_envs, self_contact, iterations=None):
    verts, tris = cloth_mesh()
    cloth = newton.ModelBuilder()
    cloth.add_cloth_mesh(
        pos=wp.vec3(0.0, 0.0, HEIGHT),
        rot=wp.quat_identity(),
        scale=1.0,
        vel=wp.vec3(0.0, 0.0, 0.0),
        vertices=[wp.vec3(*v) for v in verts],
        indices=tris,
        density=DENSITY,
        edge_ke=EDGE_KE,
        edge_kd=EDGE_KD,
        add_springs=True,
        spring_ke=SPRING_KE,
        spring_kd=SPRING_KD,
        particle_radius=RADIUS,
    )
    builder = newton.ModelBuilder()  # z up, gravity -9.81 z
    builder.replicate(cloth, n_envs, spacing=(ENV_SPACING, 0.0, 0.0))
    builder.add_ground_plane()
    model = builder.finalize(device="cpu")
    model.soft_contact_mu = 1.0
    if not self_contact:
        model.particle_grid = None
        model.particle_max_radius = 0.0
    solver = newton.solvers.SolverXPBD(model)  # default iterations (2 in newton 1.8)
    if iterations:
        solver.iterations = iterations
    pipeline = newton.CollisionPipeline(model)
    return model, solver, pipeline


def main():
    p = argparse.ArgumentParser()
    p.add_argument("n_envs", type=int, nargs="?", default=1)
    p.add_argument("steps", type=int, nargs="?", default=20)
    p.add_argument("--check", action="store_true")
    p.add_argument("--self-contact", action="store_true")
    p.add_argument("--iterations", type=int, default=None)
    args = p.parse_args()
    n_envs, steps = args.n_envs, args.steps
    wp.set_device("cpu")

    t0 = time.perf_counter()
    model, solver, pipeline = build(n_envs, args.self_contact, args.iterations)
    contacts = pipeline.contacts()
    s0, s1 = model.state(), model.state()
    control = model.control()
    wp.synchronize()
    build_s = time.perf_counter() - t0

    sub_dt = FRAME_DT / SUBSTEPS

    def frame():
        nonlocal s0, s1
        for _ in range(SUBSTEPS):
            s0.clear_forces()
            pipeline.collide(s0, contacts)
            solver.step(s0, s1, control, contacts, sub_dt)
            s0, s1 = s1, s0

    t0 = time.perf_counter()
    frame()
    wp.synchronize()
    first_step_s = time.perf_counter() - t0
    for _ in range(3):
        frame()
    wp.synchronize()
    t0 = time.perf_counter()
    for _ in range(steps):
        frame()
    wp.synchronize()
    elapsed = time.perf_counter() - t0
    done = 1 + 3 + steps

    if args.check:
        for _ in range(max(0, 125 - done)):  # 125 frames = 0.5 s
            frame()
        q = s0.particle_q.numpy()
        z_min = float(q[:, 2].min())
        idx = model.spring_indices.numpy().reshape(-1, 2)
        length = np.linalg.norm(q[idx[:, 0]] - q[idx[:, 1]], axis=1)
        stretch = float((length / model.spring_rest_length.numpy()).max())
        print(f"check: t={max(done, 125) * FRAME_DT:.3f}s z_min={z_min:.4f} z_max={q[:, 2].max():.4f} "
              f"max_spring_stretch={stretch:.4f}")
        assert np.isfinite(q).all(), "non-finite particle positions"
        assert z_min >= -0.02 and q[:, 2].max() <= 0.05, "cloth not lying on the ground"
        assert stretch < 1.1, f"cloth over-stretched: {stretch}"

    particles = N * N
    rate = particles * n_envs * SUBSTEPS * steps / elapsed
    print(
        f"newton cloth n_envs={n_envs} particles={particles} substeps={SUBSTEPS} "
        f"iterations={solver.iterations} build_s={build_s:.3f} first_step_s={first_step_s:.3f} "
        f"steps_per_s={steps / elapsed:.3g} particle_substeps_per_s={rate:.3g}"
    )


if __name__ == "__main__":
    main()
