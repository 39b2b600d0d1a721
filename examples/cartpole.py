"""A cart-pole under force control, batched: each environment's cart is pushed by a PD law on the pole angle
with its own gain, and the pole is kept up (or not) accordingly.

    python examples/cartpole.py
"""

import torch

import genesis_core as gs
from genesis_core.plugins import registry


def main(n_envs=4, seconds=3.0, dt=1e-2):
    if not gs.runtime.initialized:
        gs.init(backend=gs.cpu, precision="64")
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=dt, substeps=2))
    cartpole = scene.add_entity(gs.morphs.MJCF(file=registry().asset_path("@rigid/cartpole.xml")))
    scene.build(n_envs=n_envs)
    cartpole.set_dofs_position(torch.full((n_envs, 1), 0.1, dtype=torch.float64), dofs_idx_local=[1])
    gains = torch.linspace(0.0, 40.0, n_envs, dtype=torch.float64)  # env 0: no control
    for _ in range(round(seconds / dt)):
        q = cartpole.get_dofs_position()
        v = cartpole.get_dofs_velocity()
        # push the cart under the pole: force along x grows with the pole's lean (q1) and its rate
        force = gains * q[:, 1] + 0.25 * gains * v[:, 1] + 0.5 * gains.sign() * (q[:, 0] * 0.2 + v[:, 0] * 0.5)
        cartpole.control_dofs_force(force.reshape(n_envs, 1), dofs_idx_local=[0])
        scene.step()
    return cartpole.get_dofs_position()[:, 1].abs()


if __name__ == "__main__":
    for i, angle in enumerate(main().tolist()):
        print(f"env {i}: final pole angle {angle:.3f} rad")
