"""A cloth banner on a swinging arm: the shipped pendulum (a 1 kg bob 1 m below a hinge) carries a 0.3 m x 0.3 m
cloth whose top row is attached to the bob (fix_particles_to_link). Released at 0.3 rad, the arm swings with the
cloth dragging behind it; its period is longer than the bare pendulum's (the cloth's mass hangs below the bob),
and the attached row stays on its points of the arm.

    python examples/pbd_cloth_arm.py
"""

import math
import os
import tempfile

import numpy as np
import torch

import genesis_core as gs
from genesis_core.plugins import registry
from genesis_core.rotations import quat_to_mat
from genesis_pbd.plugin import cloth_obj


def swing(with_cloth, seconds, theta0=0.3, dt=2e-3):
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=dt, substeps=4),
                     pbd_options=gs.options.PBDOptions(lower_bound=(-2, -2, 0), upper_bound=(2, 2, 3)))
    arm = scene.add_entity(gs.morphs.MJCF(file=registry().asset_path("@rigid/pendulum.xml")))
    cloth = None
    if with_cloth:
        path = cloth_obj(11, 0.3, os.path.join(tempfile.mkdtemp(), "banner.obj"))
        cloth = scene.add_entity(gs.morphs.Mesh(file=path, pos=(0.0, 0.0, 0.79), euler=(90, 0, 0)),
                                 material=gs.materials.PBD.Cloth(rho=1.0, bending_compliance=1e-3))
    scene.build()
    link = arm.get_link("pole").idx
    top = None
    if cloth is not None:
        x = cloth.get_particles_pos()
        top = torch.nonzero(x[:, 2] > x[:, 2].max() - 1e-6).flatten()  # the banner's top row, at z = 0.94 (below the bob's sphere)
        cloth.fix_particles_to_link(link, top)
        local = x[top] - torch.tensor([0.0, 0.0, 1.0], dtype=x.dtype)  # about the bob (the link's centre of mass)
    arm.set_dofs_position([theta0])
    angles, drift = [], 0.0
    for _ in range(round(seconds / dt)):
        scene.step()
        angles.append(float(arm.get_dofs_position()[0]))
        if cloth is not None:
            th = angles[-1]
            com = torch.tensor([-math.sin(th), 0.0, 2.0 - math.cos(th)], dtype=x.dtype)  # the bob
            R = torch.as_tensor(quat_to_mat(np.array([math.cos(th / 2), 0.0, math.sin(th / 2), 0.0])), dtype=x.dtype)
            want = com + local @ R.T
            drift = max(drift, float((cloth.get_particles_pos()[top] - want).norm(dim=1).max()))
    ups = [i for i in range(1, len(angles)) if angles[i - 1] < 0 <= angles[i]]
    period = (ups[-1] - ups[0]) / (len(ups) - 1) * dt
    return period, drift


def main(seconds=5.0):
    if not gs.runtime.initialized:
        gs.init(backend=gs.cpu, precision="64")
    bare, _ = swing(False, seconds)
    loaded, drift = swing(True, seconds)
    return bare, loaded, drift


if __name__ == "__main__":
    bare, loaded, drift = main()
    print(f"period {bare:.4f} s bare, {loaded:.4f} s with the banner; the attached row stays within {drift:.1e} m of "
          f"its points on the arm")
