"""Genesis World's SPH tutorial (examples/tutorials/sph_liquid.py) with one changed import and no viewer: a 0.4 m
cube of water dropped on a plane, 64,000 particles (particle_size 0.01).

    python examples/sph_liquid.py [--steps 1000] [--particle-size 0.01]
"""

import argparse

import genesis_core as gs

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=1000)
parser.add_argument("--particle-size", type=float, default=0.01)
args = parser.parse_args()

########################## init ##########################
gs.init()

########################## create a scene ##########################
scene = gs.Scene(
    sim_options=gs.options.SimOptions(
        dt=4e-3,
        substeps=10,
    ),
    sph_options=gs.options.SPHOptions(
        lower_bound=(-0.5, -0.5, 0.0),
        upper_bound=(0.5, 0.5, 1),
        particle_size=args.particle_size,
    ),
    vis_options=gs.options.VisOptions(
        visualize_sph_boundary=True,
    ),
    show_viewer=False,
)

########################## entities ##########################
plane = scene.add_entity(
    morph=gs.morphs.Plane(),
)

liquid = scene.add_entity(
    # viscous liquid
    # material=gs.materials.SPH.Liquid(mu=0.02, gamma=0.02),
    material=gs.materials.SPH.Liquid(),
    morph=gs.morphs.Box(
        pos=(0.0, 0.0, 0.65),
        size=(0.4, 0.4, 0.4),
    ),
    surface=gs.surfaces.Default(
        color=(0.4, 0.8, 1.0),
        vis_mode="particle",
    ),
)

########################## build ##########################
scene.build()

horizon = args.steps
for i in range(horizon):
    scene.step()

# get particle positions
particles = liquid.get_particles()
print(f"{liquid.n_particles} particles after {horizon} steps; lowest {float(particles[:, 2].min()):.3f} m, "
      f"highest {float(particles[:, 2].max()):.3f} m")
