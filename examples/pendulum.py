"""A simple pendulum (the shipped MJCF model): released at 0.3 rad, its period is measured and compared with
the small-angle value 2 pi sqrt(L / g) and the finite-amplitude correction (1 + theta0^2 / 16).

    python examples/pendulum.py
"""

import math

import genesis_core as gs
from genesis_core.plugins import registry


def main(seconds=6.0, dt=1e-3, theta0=0.3):
    if not gs.runtime.initialized:
        gs.init(backend=gs.cpu, precision="64")
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=dt))
    # the file's hinge as MuJoCo reads it: no rotor inertia (Genesis World's default_armature would add 0.1 kg m^2)
    pendulum = scene.add_entity(gs.morphs.MJCF(file=registry().asset_path("@rigid/pendulum.xml"),
                                               default_armature=None))
    scene.build()
    pendulum.set_dofs_position([theta0])
    angles = []
    for _ in range(round(seconds / dt)):
        scene.step()
        angles.append(float(pendulum.get_dofs_position()[0]))
    ups = [i for i in range(1, len(angles)) if angles[i - 1] < 0 <= angles[i]]
    period = (ups[-1] - ups[0]) / (len(ups) - 1) * dt
    expected = 2 * math.pi * math.sqrt(1.0 / 9.81) * (1 + theta0 ** 2 / 16)
    return period, expected


if __name__ == "__main__":
    period, expected = main()
    print(f"period {period:.4f} s, expected {expected:.4f} s ({(period / expected - 1) * 100:+.2f}%)")
