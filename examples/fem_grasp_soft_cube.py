"""The panda closes its fingers on a soft FEM cube with a force of 1 N each and lifts it 10 cm (Genesis World's
`grasp_soft_cube` example with an FEM cube instead of an MPM one). The cube is held only by Coulomb friction at
the finger pads: the kit's particle contact between the cube's surface vertices and the fingers' geoms, two-way
(the fingers feel the cube's weight). A 4 cm cube of 64 g needs a friction coefficient of at least
0.064 * 9.81 / (2 * 1 N) = 0.31; the fingers' `coup_friction` is 1.

    python examples/fem_grasp_soft_cube.py [--panda PATH] [--envs N] [--gif grasp.gif [--gif-res 320x240]]

With several environments, environment k pushes its fingers with grip[k] N (negative closes): an environment
whose fingers open leaves the cube on the floor while the others lift theirs.
"""

import argparse

import numpy as np

import genesis_core as gs
from genesis_core.render import recording

PANDA = "xml/franka_emika_panda/panda.xml"  # Genesis World's name: found on the asset search path
KP = [4500, 4500, 3500, 3500, 2000, 2000, 2000, 100, 100]
KV = [450, 450, 350, 350, 200, 200, 200, 10, 10]
FORCE = [87, 87, 87, 87, 12, 12, 12, 100, 100]


def main(panda=PANDA, grip=(-1.0,), n_envs=0, close_steps=100, lift_steps=200, hold_steps=50, lift=0.1,
         coup_friction=1.0, gif=None):
    """Returns (the cube's mean height after closing, after lifting, at the end) and the hand's height after
    closing and at the end, each a [max(n_envs, 1)] tensor (m). gif: a recording.Gif (or a path) to record
    environment 0 to."""
    if not gs.runtime.initialized:
        gs.init(backend=gs.cpu, precision="64", logging_level="warning")
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=5e-3, substeps=15),
                     fem_options=gs.options.FEMOptions(damping=10.0))
    scene.add_entity(gs.morphs.Plane())
    cube = scene.add_entity(gs.morphs.Box(size=(0.04, 0.04, 0.04), pos=(0.65, 0.0, 0.02), maxvolume=0.008 ** 3 / 3),
                            material=gs.materials.FEM.Elastic(E=1e5, nu=0.3, rho=1000.0))
    franka = scene.add_entity(gs.morphs.MJCF(file=panda), material=gs.materials.Rigid(coup_friction=coup_friction))
    scene.build(n_envs=n_envs) if n_envs else scene.build()
    B = max(n_envs, 1)
    motors, fingers = np.arange(7), np.arange(7, 9)
    franka.set_dofs_kp(np.array(KP))
    franka.set_dofs_kv(np.array(KV))
    franka.set_dofs_force_range(-np.array(FORCE), np.array(FORCE))
    hand = franka.get_link("hand")
    down = np.array([0.0, 1.0, 0.0, 0.0])

    def arm_target(z, init_qpos=None):
        pos, quat = np.array([0.65, 0.0, z]), down
        if n_envs:
            pos, quat = np.tile(pos, (n_envs, 1)), np.tile(quat, (n_envs, 1))
        return franka.inverse_kinematics(link=hand, pos=pos, quat=quat, init_qpos=init_qpos)

    # from a bent arm above the table: the solver converges from there without random restarts, so that every
    # environment starts in the same pose (later solves start from the current pose)
    home = np.array([0.0, 0.0, 0.0, -2.0, 0.0, 2.0, 0.79, 0.0, 0.0])
    qpos = arm_target(0.135, np.tile(home, (n_envs, 1)) if n_envs else home)
    qpos[..., -2:] = 0.03  # open, around the cube
    franka.set_dofs_position(qpos[..., :-2], motors)
    franka.set_dofs_position(qpos[..., -2:], fingers)
    franka.control_dofs_position(qpos[..., :-2], motors)
    force = np.repeat(np.asarray(grip, dtype=float).reshape(-1, 1), 2, axis=1)[:B]
    franka.control_dofs_force(force if n_envs else force[0], fingers)

    def cube_z():
        z = cube.get_particles_pos()[..., 2].mean(-1)
        return z.reshape(B).clone()

    def hand_z():
        return hand.get_pos()[..., 2].reshape(B).clone()

    # the fingers and the cube, seen from in front of the arm (+x), a little to the side and above
    rec = recording.start(scene, gif, box=((0.5, -0.2, 0.0), (0.8, 0.2, 0.35)), azimuth=25, elevation=15,
                          steps=close_steps + lift_steps + hold_steps)
    for _ in range(close_steps):
        scene.step()
        rec.step()
    closed, hand0 = cube_z(), hand_z()
    for i in range(lift_steps):
        qpos = arm_target(0.135 + lift * (i + 1) / lift_steps)
        franka.control_dofs_position(qpos[..., :-2], motors)
        scene.step()
        rec.step()
    lifted = cube_z()
    for _ in range(hold_steps):
        scene.step()
        rec.step()
    for path in rec.stop():
        print(f"recorded {rec.frames} frames of environment 0 to {path}")
    return closed, lifted, cube_z(), hand0, hand_z()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--panda", default=PANDA, help="the panda's MJCF (default: Genesis World's name on the "
                        "asset search path; e.g. ../shared/assets/mjcf/franka_emika_panda/panda.xml)")
    parser.add_argument("--envs", type=int, default=0)
    recording.add_arguments(parser)
    args = parser.parse_args()
    grip = [-1.0 if k % 2 == 0 else 1.0 for k in range(max(args.envs, 1))]
    closed, lifted, end, hand0, hand1 = main(args.panda, grip, args.envs, gif=recording.from_args(args))
    for k in range(max(args.envs, 1)):
        print(f"env {k}: grip {grip[k]:+.0f} N; the hand rose {float(hand1[k] - hand0[k]) * 100:.1f} cm, the cube "
              f"{float(end[k] - closed[k]) * 100:.1f} cm")
