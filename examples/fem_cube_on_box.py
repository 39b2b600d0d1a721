"""A soft FEM cube dropped onto a rigid box standing on the ground: it bounces, wobbles and comes to rest on the
box's top face, squashed by its own weight. The contact is the particle kit's (every surface vertex against the
box's geom, two-way: the box feels the cube's weight through its own contact with the ground).

    python examples/fem_cube_on_box.py [--seconds 1.0] [--implicit]
"""

import argparse

import genesis_core as gs


def main(seconds=1.0, implicit=False, E=2e4, size=0.1, box_height=0.2):
    """(the cube's lowest vertex height, the box's top, the cube's static squash per unit height from linear
    elasticity, the measured one), metres and ratios."""
    if not gs.runtime.initialized:
        gs.init(backend=gs.cpu, precision="64", logging_level="warning")
    dt, substeps = (2e-3, 2) if implicit else (2e-3, 10)
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=dt, substeps=substeps),
                     fem_options=gs.options.FEMOptions(use_implicit_solver=implicit, damping=5.0,
                                                       n_newton_iterations=3, n_linesearch_iterations=3))
    scene.add_entity(gs.morphs.Plane())
    box = scene.add_entity(gs.morphs.Box(pos=(0.0, 0.0, box_height / 2), size=(0.3, 0.3, box_height)),
                           material=gs.materials.Rigid(rho=500.0))
    rho = 500.0
    cube = scene.add_entity(gs.morphs.Box(pos=(0.0, 0.0, box_height + size / 2 + 0.05), size=(size,) * 3,
                                          maxvolume=size ** 3 / 1000),
                            material=gs.materials.FEM.Elastic(E=E, nu=0.3, rho=rho, model="stable_neohookean"))
    scene.build()
    for _ in range(int(round(seconds / dt))):
        scene.step()
    p = cube.get_particles_pos()
    low, high = float(p[:, 2].min()), float(p[:, 2].max())
    # a column under its own weight: mean strain rho g h / (2 E) (uniaxial, free sides)
    expected = rho * 9.81 * size / (2 * E)
    measured = 1.0 - (high - low) / size
    return low, float(box.get_pos()[2]) + box_height / 2, expected, measured


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=1.0)
    parser.add_argument("--implicit", action="store_true")
    args = parser.parse_args()
    low, top, expected, measured = main(args.seconds, args.implicit)
    print(f"the cube's lowest vertex at {low:.4f} m, the box's top at {top:.4f} m; squash {measured:.2e} "
          f"(a free column under its weight: {expected:.2e})")
