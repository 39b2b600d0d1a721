"""A position-based fluid (Macklin & Mueller 2013) dam break: a 0.2 x 0.4 x 0.3 m column of liquid collapses in a
0.8 x 0.4 m tank (the domain's walls) and settles into a layer of the same volume, its depth the column's volume
over the tank's floor (measured as twice its particles' mean height), its density near the rest density.

    python examples/pbd_liquid.py
"""

import numpy as np

import genesis_core as gs


def main(seconds=2.0, particle_size=0.02):
    if not gs.runtime.initialized:
        gs.init(backend=gs.cpu, precision="64")
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=4e-3, substeps=5),
                     pbd_options=gs.options.PBDOptions(lower_bound=(0, 0, 0), upper_bound=(0.8, 0.4, 0.6),
                                                       particle_size=particle_size,
                                                       max_density_solver_iterations=4,
                                                       max_viscosity_solver_iterations=1))
    water = scene.add_entity(gs.morphs.Box(pos=(0.1, 0.2, 0.15), size=(0.2, 0.4, 0.3)),
                             material=gs.materials.PBD.Liquid(viscosity_relaxation=0.05))
    scene.build()
    front = []
    for i in range(round(seconds / 4e-3)):
        scene.step()
        front.append(float(water.get_particles_pos()[:, 0].max()))
    x = water.get_particles_pos().numpy()
    rho = scene.pbd_solver.densities()[0].numpy()
    deep = x[:, 2] < np.percentile(x[:, 2], 50)
    # a flat layer from 0 to H holds its particles' centres at a mean height of H / 2
    return {"depth": 2.0 * float(x[:, 2].mean()), "expected_depth": 0.2 * 0.3 / 0.8,
            "front": front, "density": float(rho[deep].mean()), "speed": float(water.get_particles_vel().norm(dim=1).max())}


if __name__ == "__main__":
    r = main()
    print(f"layer depth {r['depth']:.3f} m (volume / floor: {r['expected_depth']:.3f} m), mean density of its lower "
          f"half {r['density']:.0f} kg/m^3, fastest particle {r['speed']:.2f} m/s")
