"""A cloth dropped on a box: a 0.8 m square cloth (25 x 25 vertices) falls from 0.2 m above a rigid box standing on
the ground, comes to rest on its top face and hangs over its edges; the box feels its weight.

    python examples/pbd_cloth_on_box.py [--gif cloth_on_box.gif [--gif-res 320x240] [--gif-every K]]
"""

import argparse
import os
import tempfile

import numpy as np

import genesis_core as gs
from genesis_core.progress import progress
from genesis_core.render import recording
from genesis_pbd.plugin import cloth_obj


def main(seconds=2.0, n=25, gif=None):
    """The cloth's middle and lowest heights, its particles inside the box, the box's height; gif: a recording.Gif
    (or a path) to record the fall to."""
    if not gs.runtime.initialized:
        gs.init(backend=gs.cpu, precision="64")
    path = cloth_obj(n, 0.8, os.path.join(tempfile.mkdtemp(), "cloth.obj"))
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=4e-3, substeps=10),
                     pbd_options=gs.options.PBDOptions(lower_bound=(-1, -1, 0), upper_bound=(1, 1, 1)))
    scene.add_entity(gs.morphs.Plane())
    box = scene.add_entity(gs.morphs.Box(pos=(0, 0, 0.15), size=(0.3, 0.3, 0.3)), material=gs.materials.Rigid(rho=300))
    cloth = scene.add_entity(gs.morphs.Mesh(file=path, pos=(0, 0, 0.5)),
                             material=gs.materials.PBD.Cloth(bending_compliance=1e-3))
    scene.build()
    n_steps = round(seconds / 4e-3)
    rec = recording.start(scene, gif, box=((-0.45, -0.45, 0.0), (0.45, 0.45, 0.5)), azimuth=-60, elevation=25,
                          steps=n_steps)
    for _ in progress(range(n_steps), desc="cloth on a box", unit="step"):
        scene.step()
        rec.step()
    for path in rec.stop():
        print(f"recorded {rec.frames} frames to {path}")
    x = cloth.get_particles_pos().numpy()
    inside = np.all(np.abs(x - np.array([0, 0, 0.15])) < 0.15 - 1e-3, axis=1).sum()
    middle = x[np.argmin(np.linalg.norm(x[:, :2], axis=1)), 2]
    return {"middle": float(middle), "lowest": float(x[:, 2].min()), "inside": int(inside),
            "box_z": float(box.get_pos()[2])}


if __name__ == "__main__":
    parser = recording.add_arguments(argparse.ArgumentParser())
    r = main(gif=recording.from_args(parser.parse_args()))
    print(f"the cloth's middle at {r['middle']:.4f} m (the box's top at 0.30 m, particles of radius 5 mm), its lowest "
          f"point at {r['lowest']:.3f} m, {r['inside']} particles inside the box; the box's centre at {r['box_z']:.4f} m")
