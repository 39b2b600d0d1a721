"""SPH dam break against Martin & Moyce (1952): a water column of width a and height 2a collapses along the floor
of a tank (a slab between walls, DFSPH); prints the surge front Z = x / a against T = t sqrt(2 g / a) beside the
experiment's. By default the experiment's own column, a = 2.25 in (57.15 mm), ten particles across.

    python examples/sph_dam_break.py [--a 0.05715] [--particle-size 0.005715] [--gif sph_dam_break.gif]
"""

import argparse
import math
import os
import sys

import numpy as np

import genesis_core as gs
from genesis_core.render import recording

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "plugins", "sph", "tests"))
from data.martin_moyce import N2_2  # noqa: E402  (T, Z) of the n^2 = 2 column

G = 9.81


A_EXPERIMENT = 0.05715  # Martin & Moyce's column width, 2.25 in


def main(a=A_EXPERIMENT, particle_size=A_EXPERIMENT / 10, t_max=3.0, dt=1e-3, gif=None):
    """[(T, Z ours, Z Martin & Moyce)] up to T = t_max; gif: a recording.Gif (or a path) to record the collapse
    to."""
    if not gs.runtime.initialized:
        gs.init(backend=gs.cpu, precision="64", logging_level="warning")
    s = particle_size
    depth = 4 * s
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=dt, substeps=4),
                     sph_options=gs.options.SPHOptions(lower_bound=(0, 0, 0), upper_bound=(6 * a, depth, 3 * a),
                                                       particle_size=s, pressure_solver="DFSPH"))
    water = scene.add_entity(gs.morphs.Box(pos=(a / 2, depth / 2, a), size=(a, depth, 2 * a)),
                             material=gs.materials.SPH.Liquid(gamma=0.0),
                             surface=gs.surfaces.Default(color=(0.2, 0.45, 0.9)))
    scene.build()
    scale = math.sqrt(2 * G / a)
    rec = recording.start(scene, gif, box=((0.0, 0.0, 0.0), (5 * a, depth, 2 * a)), azimuth=-75, elevation=25,
                          steps=round(min(t_max, N2_2[-1][0]) / scale / dt), floor=0.0)
    rows, t = [], 0.0
    for T, Z in N2_2:
        if T > t_max:
            break
        while t < T / scale - 1e-12:
            scene.step()
            rec.step()
            t += dt
        x = water.get_particles_pos()[:, 0].numpy()
        rows.append((T, (np.sort(x)[-3:].mean() + s / 2) / a, Z))
    for path in rec.stop():
        print(f"recorded {rec.frames} frames to {path}")
    return rows


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--a", type=float, default=A_EXPERIMENT)
    parser.add_argument("--particle-size", type=float, default=None, help="default: a / 10")
    recording.add_arguments(parser)
    args = parser.parse_args()
    rows = main(args.a, args.particle_size or args.a / 10, gif=recording.from_args(args))
    print("   T   Z ours   Z Martin & Moyce")
    for T, z, zm in rows:
        print(f"{T:5.2f}  {z:6.3f}  {zm:6.3f}  ({100 * (z / zm - 1):+.1f}%)")
