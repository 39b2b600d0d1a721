"""A cantilever beam under its own weight against Euler-Bernoulli beam theory: a 0.4 x 0.04 x 0.04 m beam
(E = 4e7 Pa, nu = 0, rho = 1000) clamped at one end (hard vertex constraints on its face), its static tip sag from
one implicit step long enough that inertia does not count, on meshes of increasing resolution. Linear tetrahedra
lock in bending, so the sag converges from below, the error falling as the square of the cell size.

    python examples/fem_cantilever.py [--cells 2 4 8]
"""

import argparse

import numpy as np

import genesis_core as gs

L, B, E, RHO, G = 0.4, 0.04, 4e7, 1000.0, 9.81


def euler_bernoulli():
    """The tip sag q L^4 / (8 E I) of the uniform load q = rho g A, m."""
    return RHO * G * B * B * L ** 4 / (8 * E * B ** 4 / 12)


def main(cells=(2, 4, 8)):
    """[(cells across, tets, tip sag, sag / Euler-Bernoulli's)]."""
    if not gs.runtime.initialized:
        gs.init(backend=gs.cpu, precision="64", logging_level="warning")
    rows = []
    for n in cells:
        h = B / n
        scene = gs.Scene(sim_options=gs.options.SimOptions(dt=100.0, substeps=1),
                         fem_options=gs.options.FEMOptions(use_implicit_solver=True, n_newton_iterations=2,
                                                           n_pcg_iterations=20000, pcg_threshold=1e-16,
                                                           newton_dx_threshold=1e-10, damping_alpha=0.0,
                                                           damping_beta=0.0, floor_height=-10.0))
        beam = scene.add_entity(gs.morphs.Box(pos=(L / 2, 0.0, 0.0), size=(L, B, B), maxvolume=h ** 3 / 3),
                                material=gs.materials.FEM.Elastic(E=E, nu=0.0, rho=RHO))
        scene.build()
        X = beam.get_particles_pos().numpy().copy()
        beam.set_vertex_constraints(np.nonzero(X[:, 0] < 1e-9)[0])  # the clamped face, x = 0
        tip = np.nonzero(X[:, 0] > L - 1e-9)[0]
        scene.step()
        sag = -float((beam.get_particles_pos().numpy()[tip, 2] - X[tip, 2]).mean())
        rows.append((n, beam.n_elements, sag, sag / euler_bernoulli()))
    return rows


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--cells", type=int, nargs="+", default=[2, 4, 8])
    args = parser.parse_args()
    print(f"Euler-Bernoulli tip sag: {euler_bernoulli() * 1e3:.4f} mm")
    for n, tets, sag, ratio in main(args.cells):
        print(f"{n:>2} cells across, {tets:>6} tets: tip sag {sag * 1e3:.4f} mm, {ratio:.4f} of Euler-Bernoulli's")
