"""An elastic MPM cube dropped on a rigid box: the two solvers meet through the core's coupler (the MPM plugin
reads the rigid geoms through ColliderView); the cube bounces and settles on the box's top.

    python examples/cube_on_box.py
"""

import genesis_core as gs


def main(steps=500):
    if not gs.runtime.initialized:
        gs.init(backend=gs.cpu, precision="32")
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=2e-3, substeps=4),
                     mpm_options=gs.options.MPMOptions(lower_bound=(0, 0, 0), upper_bound=(1, 1, 1), grid_density=32))
    scene.add_entity(gs.morphs.Box(pos=(0.5, 0.5, 0.25), size=(0.3, 0.3, 0.3), fixed=True))
    cube = scene.add_entity(gs.morphs.Box(pos=(0.5, 0.5, 0.6), size=(0.15, 0.15, 0.15)),
                            material=gs.materials.MPM.Elastic(E=5e4))
    scene.build()
    heights = []
    for _ in range(steps):
        scene.step()
        heights.append(float(cube.get_particles_pos()[:, 2].min()))
    return heights


if __name__ == "__main__":
    heights = main()
    print(f"lowest particle: {min(heights):.3f} m; at the end {heights[-1]:.3f} m (the box top is at 0.400 m)")
