"""Batched box drop: every environment drops a box from its own height and tilt onto the plane; all come to
rest flat on a face, at the height of half their edge.

    python examples/box_drop.py
"""

import math

import torch

import genesis_core as gs


def main(n_envs=16, seconds=3.0, dt=1e-2):
    if not gs.runtime.initialized:
        gs.init(backend=gs.cpu, precision="64")
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=dt, substeps=2))
    scene.add_entity(gs.morphs.Plane())
    box = scene.add_entity(gs.morphs.Box(pos=(0, 0, 1), size=(0.2, 0.2, 0.2)))
    scene.build(n_envs=n_envs)
    heights = torch.linspace(0.3, 1.5, n_envs, dtype=torch.float64)
    angles = torch.linspace(0.0, math.pi / 3, n_envs, dtype=torch.float64)
    pos = torch.stack([torch.zeros(n_envs), torch.zeros(n_envs), heights], dim=1)
    quat = torch.stack([torch.cos(angles / 2), torch.sin(angles / 2) * 0.6, torch.sin(angles / 2) * 0.8,
                        torch.zeros(n_envs)], dim=1)
    box.set_pos(pos)
    box.set_quat(quat)
    for _ in range(round(seconds / dt)):
        scene.step()
    return box.get_pos()[:, 2], box.get_vel().norm(dim=1)


if __name__ == "__main__":
    z, speed = main()
    for i, (zi, si) in enumerate(zip(z.tolist(), speed.tolist())):
        print(f"env {i:2d}: rests at z = {zi:.4f} m (speed {si:.1e} m/s)")
