"""Genesis World's PBD cloth tutorial (examples/tutorials/pbd_cloth.py) with one changed import and no viewer: two
cloths of the shipped meshes/cloth.obj scaled to 1 m, one held at its four corners, the other at one corner,
dropped onto it from half a metre above.

    python examples/pbd_cloth.py [--steps 1000] [--gif pbd_cloth.gif [--gif-res 320x240] [--gif-every K]]
"""

import argparse

import genesis_core as gs
from genesis_core.progress import progress
from genesis_core.render import recording

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=1000)
recording.add_arguments(parser)
args = parser.parse_args()

########################## init ##########################
gs.init()

########################## create a scene ##########################

scene = gs.Scene(
    sim_options=gs.options.SimOptions(
        dt=4e-3,
        substeps=10,
    ),
    viewer_options=gs.options.ViewerOptions(
        camera_fov=30,
        res=(1280, 720),
        max_FPS=60,
    ),
    show_viewer=False,
)

########################## entities ##########################
plane = scene.add_entity(
    morph=gs.morphs.Plane(),
)

cloth_1 = scene.add_entity(
    material=gs.materials.PBD.Cloth(),
    morph=gs.morphs.Mesh(
        file="meshes/cloth.obj",
        scale=2.0,
        pos=(0, 0, 0.5),
        euler=(0.0, 0, 0.0),
    ),
    surface=gs.surfaces.Default(
        color=(0.2, 0.4, 0.8, 1.0),
        vis_mode="visual",
    ),
)

cloth_2 = scene.add_entity(
    material=gs.materials.PBD.Cloth(),
    morph=gs.morphs.Mesh(
        file="meshes/cloth.obj",
        scale=2.0,
        pos=(0, 0, 1.0),
        euler=(0.0, 0, 0.0),
    ),
    surface=gs.surfaces.Default(
        color=(0.8, 0.4, 0.2, 1.0),
        vis_mode="particle",
    ),
)

########################## build ##########################
scene.build()

cloth_1.fix_particles(cloth_1.find_closest_particle((-1, -1, 1.0)))
cloth_1.fix_particles(cloth_1.find_closest_particle((1, 1, 1.0)))
cloth_1.fix_particles(cloth_1.find_closest_particle((-1, 1, 1.0)))
cloth_1.fix_particles(cloth_1.find_closest_particle((1, -1, 1.0)))

cloth_2.fix_particles(cloth_2.find_closest_particle((-1, -1, 1.0)))

horizon = args.steps
# with --gif: both cloths, from the side and above
rec = recording.start(scene, recording.from_args(args), box=((-0.6, -0.6, 0.0), (0.6, 0.6, 1.0)), azimuth=-60,
                      elevation=25, steps=horizon)
for i in progress(range(horizon), desc="cloth", unit="step"):
    scene.step()
    rec.step()
for path in rec.stop():
    print(f"recorded {rec.frames} frames to {path}")

low_1 = float(cloth_1.get_particles_pos()[:, 2].min())
low_2 = float(cloth_2.get_particles_pos()[:, 2].min())
print(f"{cloth_1.n_particles} + {cloth_2.n_particles} particles after {horizon} steps: lowest points "
      f"{low_1:.3f} m and {low_2:.3f} m")
