"""A rigid box floating on SPH water: a box of half the water's density settles with half its height under the
surface (Archimedes), one of 1.5 times sinks; the water's pressure acts on the box through its boundary.

    python examples/sph_floating_box.py [--rho 500] [--seconds 1.2]
"""

import argparse

import numpy as np

import genesis_core as gs


def main(rho=500.0, seconds=1.2, size=0.12, particle_size=0.02):
    """(mean draft over the second half, expected draft, final height of the box's centre), metres."""
    if not gs.runtime.initialized:
        gs.init(backend=gs.cpu, precision="64", logging_level="warning")
    s = particle_size
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=2e-3, substeps=4),
                     sph_options=gs.options.SPHOptions(lower_bound=(0, 0, 0), upper_bound=(0.4, 0.4, 0.6),
                                                       particle_size=s, pressure_solver="DFSPH"))
    water = scene.add_entity(gs.morphs.Box(pos=(0.2, 0.2, 0.1), size=(0.4, 0.4, 0.2)), material=gs.materials.SPH.Liquid())
    box = scene.add_entity(gs.morphs.Box(pos=(0.2, 0.2, 0.2 + size / 2 + 0.01), size=(size,) * 3),
                           material=gs.materials.Rigid(rho=rho))
    scene.build()
    n = int(round(seconds / 2e-3))
    drafts = []
    for i in range(n):
        scene.step()
        if i >= n // 2:
            p = water.get_particles_pos().numpy()
            far = (np.abs(p[:, :2] - 0.2) > size / 2 + 0.04).any(1)  # the free surface away from the box
            surface = np.sort(p[far, 2])[-int(far.sum() // 10):].mean() + s / 2
            drafts.append(surface - (float(box.get_pos()[2]) - size / 2))
    return float(np.mean(drafts)), size * rho / 1000.0, float(box.get_pos()[2])


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--rho", type=float, default=500.0)
    parser.add_argument("--seconds", type=float, default=1.2)
    args = parser.parse_args()
    draft, expected, z = main(args.rho, args.seconds)
    print(f"box of {args.rho:g} kg/m^3: draft {draft:.4f} m (Archimedes: {expected:.4f} m), centre at {z:.4f} m")
