"""Sand pile: a column of Drucker-Prager sand collapses on a rough floor; prints the pile's height profile.

    python examples/sand_pile.py [--gif sand_pile.gif [--gif-res 320x240] [--gif-every K]]
"""

import argparse

import numpy as np

import genesis_core as gs
from genesis_core.progress import progress
from genesis_core.render import recording


def main(steps=600, grid_density=48, friction_angle=35.0, gif=None):
    """(the column's top, the pile's profile [(radius, height)], the mean particle speed); gif: a recording.Gif (or
    a path) to record the collapse to."""
    if not gs.runtime.initialized:
        gs.init(backend=gs.cpu, precision="32")
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=1e-3, substeps=4),
                     mpm_options=gs.options.MPMOptions(lower_bound=(0, 0, 0), upper_bound=(0.5, 0.5, 0.4),
                                                       grid_density=grid_density, boundary="sticky"))
    sand = scene.add_entity(gs.morphs.Cylinder(pos=(0.25, 0.25, 0.11), radius=0.09, height=0.11),
                            material=gs.materials.MPM.Sand(friction_angle=friction_angle),
                            surface=gs.surfaces.Default(color=(0.85, 0.7, 0.4)))
    scene.build()
    top0 = float(sand.get_particles_pos()[:, 2].max())
    rec = recording.start(scene, gif, box=((0.05, 0.05, 0.0), (0.45, 0.45, 0.17)), azimuth=-60, elevation=30,
                          steps=steps, floor=0.0)
    for _ in progress(range(steps), desc="sand pile", unit="step"):
        scene.step()
        rec.step()
    for path in rec.stop():
        print(f"recorded {rec.frames} frames to {path}")
    pos = sand.get_particles_pos().numpy()
    r = np.hypot(pos[:, 0] - 0.25, pos[:, 1] - 0.25)
    edges = np.linspace(0, r.max(), 9)
    profile = [(0.5 * (lo + hi), float(np.quantile(pos[(r >= lo) & (r < hi), 2], 0.95)))
               for lo, hi in zip(edges[:-1], edges[1:]) if ((r >= lo) & (r < hi)).sum() > 10]
    return top0, profile, float(np.linalg.norm(sand.get_particles_vel().numpy(), axis=1).mean())


if __name__ == "__main__":
    parser = recording.add_arguments(argparse.ArgumentParser())
    top0, profile, speed = main(gif=recording.from_args(parser.parse_args()))
    print(f"column top {top0:.3f} m; pile profile (radius, height):")
    for r, z in profile:
        print(f"  {r:.3f} m  {z:.3f} m")
    print(f"mean particle speed {speed:.4f} m/s")
