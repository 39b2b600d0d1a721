"""Sand pile: a column of Drucker-Prager sand collapses on a rough floor; prints the pile's height profile.

    python examples/sand_pile.py
"""

import numpy as np

import genesis_core as gs


def main(steps=600, grid_density=48, friction_angle=35.0):
    if not gs.runtime.initialized:
        gs.init(backend=gs.cpu, precision="32")
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=1e-3, substeps=4),
                     mpm_options=gs.options.MPMOptions(lower_bound=(0, 0, 0), upper_bound=(0.5, 0.5, 0.4),
                                                       grid_density=grid_density, boundary="sticky"))
    sand = scene.add_entity(gs.morphs.Cylinder(pos=(0.25, 0.25, 0.11), radius=0.09, height=0.11),
                            material=gs.materials.MPM.Sand(friction_angle=friction_angle))
    scene.build()
    top0 = float(sand.get_particles_pos()[:, 2].max())
    for _ in range(steps):
        scene.step()
    pos = sand.get_particles_pos().numpy()
    r = np.hypot(pos[:, 0] - 0.25, pos[:, 1] - 0.25)
    edges = np.linspace(0, r.max(), 9)
    profile = [(0.5 * (lo + hi), float(np.quantile(pos[(r >= lo) & (r < hi), 2], 0.95)))
               for lo, hi in zip(edges[:-1], edges[1:]) if ((r >= lo) & (r < hi)).sum() > 10]
    return top0, profile, float(np.linalg.norm(sand.get_particles_vel().numpy(), axis=1).mean())


if __name__ == "__main__":
    top0, profile, speed = main()
    print(f"column top {top0:.3f} m; pile profile (radius, height):")
    for r, z in profile:
        print(f"  {r:.3f} m  {z:.3f} m")
    print(f"mean particle speed {speed:.4f} m/s")
