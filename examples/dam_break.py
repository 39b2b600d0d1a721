"""Dam break: a square water column collapses along a frictionless floor; the surge front is printed against
Martin & Moyce's (1952) measurements in their dimensionless units (Z = x / a, T = t sqrt(2 g / a)).

    python examples/dam_break.py [--gif dam_break.gif [--gif-res 320x240] [--gif-every K]]
"""

import argparse
import math

import numpy as np

import genesis_core as gs
from genesis_core.progress import progress
from genesis_core.render import recording

MM_T = [0.41, 0.84, 1.19, 1.43, 1.63, 1.83, 1.98, 2.20, 2.32, 2.51, 2.65, 2.83, 2.98, 3.11, 3.33]
MM_Z = [1.11, 1.22, 1.44, 1.67, 1.89, 2.11, 2.33, 2.56, 2.78, 3.00, 3.22, 3.44, 3.67, 3.89, 4.11]


def main(a=0.15, grid_density=64, t_end=3.4, gif=None):
    """[(T, Z)] every step; gif: a recording.Gif (or a path) to record the collapse to."""
    if not gs.runtime.initialized:
        gs.init(backend=gs.cpu, precision="32")
    dx = 1 / grid_density
    wall, width, dt = 0.0, 10 * dx, 2e-3  # the walls' planes are the domain's bounds; a slab ten cells wide
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=dt, substeps=10),
                     mpm_options=gs.options.MPMOptions(lower_bound=(0, 0, 0), upper_bound=(1.0, width, 0.3),
                                                       grid_density=grid_density, boundary="slip"))
    water = scene.add_entity(gs.morphs.Box(pos=(wall + a / 2, width / 2, wall + a / 2), size=(a, width - 2 * wall, a)),
                             material=gs.materials.MPM.Liquid(E=1e6),
                             surface=gs.surfaces.Default(color=(0.2, 0.45, 0.9)))
    scene.build()
    x_wall = float(water.get_particles_pos()[:, 0].min()) - dx / 4
    per_row = round((width - 2 * wall) / (dx / 2))
    n_steps = round(t_end / math.sqrt(2 * 9.81 / a) / dt)
    # the water's half of the slab, seen from the front and above
    rec = recording.start(scene, gif, box=((0.0, 0.0, 0.0), (min(5 * a, 1.0), width, a)), azimuth=-75,
                          elevation=25, steps=n_steps, floor=0.0)
    rows = []
    for i in progress(range(n_steps), desc="dam break", unit="step"):
        scene.step()
        rec.step()
        counts, edges = np.histogram(water.get_particles_pos()[:, 0].numpy(), bins=np.arange(0, 1.0, dx / 2))
        deep = np.nonzero(counts >= per_row)[0]  # the front: where the layer is at least one particle deep
        rows.append(((i + 1) * dt * math.sqrt(2 * 9.81 / a), (edges[deep[-1] + 1] - x_wall) / a))
    for path in rec.stop():
        print(f"recorded {rec.frames} frames to {path}")
    return rows


if __name__ == "__main__":
    parser = recording.add_arguments(argparse.ArgumentParser())
    rows = main(gif=recording.from_args(parser.parse_args()))
    times, fronts = zip(*rows)
    print(f"{'T':>6}{'Z (ours)':>10}{'Z (Martin & Moyce)':>20}")
    for t, z in zip(MM_T, MM_Z):
        print(f"{t:>6.2f}{np.interp(t, times, fronts):>10.2f}{z:>20.2f}")
