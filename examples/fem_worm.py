"""A muscle-driven soft worm (gs.materials.FEM.Muscle) crawling on the ground: its body is cut into segments along
its length, each with an upper and a lower muscle group; a wave of contraction runs from the head to the tail
(the upper fibres of a segment contract while its lower ones relax, and half a period later the reverse), so the
body arches and flattens segment after segment, and the ground's friction turns that into crawling.

    python examples/fem_worm.py [--seconds 2.0] [--segments 4]
"""

import argparse
import math

import numpy as np
import torch

import genesis_core as gs


def main(seconds=2.0, segments=4, amplitude=0.25, frequency=2.0, length=0.4, thickness=0.05):
    """(the worm's centre-of-mass travel along x, the largest vertical spread of its spine during the run),
    metres."""
    if not gs.runtime.initialized:
        gs.init(backend=gs.cpu, precision="64", logging_level="warning")
    dt = 2e-3
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=dt, substeps=8),
                     fem_options=gs.options.FEMOptions(damping=1.0, floor_height=-1.0))
    scene.add_entity(gs.morphs.Plane(), material=gs.materials.Rigid(friction=1.0))
    worm = scene.add_entity(gs.morphs.Box(pos=(0.0, 0.0, thickness / 2 + 1e-3),
                                          size=(length, thickness, thickness), maxvolume=thickness ** 3 / 250),
                            material=gs.materials.FEM.Muscle(E=5e4, nu=0.3, rho=1000.0, model="stable_neohookean",
                                                             n_groups=2 * segments))
    scene.build()
    # muscle groups by element centroid: segment s along x, upper (2 s) or lower (2 s + 1) half
    X = worm.get_particles_pos().numpy()
    centroid = X[worm.get_el2v().numpy()].mean(1)
    seg = np.clip(((centroid[:, 0] + length / 2) / length * segments).astype(int), 0, segments - 1)
    lower = centroid[:, 2] < thickness / 2 + 1e-3
    groups = 2 * seg + lower
    fibres = np.tile([1.0, 0.0, 0.0], (worm.n_elements, 1))  # along the body
    worm.set_muscle(muscle_group=torch.as_tensor(groups), muscle_direction=torch.as_tensor(fibres))
    x0 = float(worm.get_pos()[0])
    spread = 0.0
    steps = int(round(seconds / dt))
    for i in range(steps):
        t = i * dt
        a = np.zeros(2 * segments)
        for s in range(segments):
            phase = 2 * math.pi * (frequency * t - s / segments)  # the wave runs from head (x max) to tail
            a[2 * s] = amplitude * max(0.0, math.sin(phase))
            a[2 * s + 1] = amplitude * max(0.0, -math.sin(phase))
        worm.set_actuation(torch.as_tensor(a[::-1].copy()))
        scene.step()
        z = worm.get_particles_pos()[:, 2]
        spread = max(spread, float(z.max() - z.min()) - thickness)
    return float(worm.get_pos()[0]) - x0, spread


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--segments", type=int, default=4)
    args = parser.parse_args()
    travel, spread = main(args.seconds, args.segments)
    print(f"the worm's centre of mass moved {travel * 100:+.2f} cm along x; its body arched up to "
          f"{spread * 100:.2f} cm")
