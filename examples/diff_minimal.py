"""The minimal example of differentiable simulation: forces on every dof of a floating robot, run for 100 steps,
and the gradient of a loss on the base position with respect to them.

    python examples/diff_minimal.py
"""

import os

import torch

import genesis_core as gs

ROBOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "models", "robot.urdf")


def main(n_steps=100):
    if not gs.runtime.initialized:
        gs.init(backend=gs.gpu)

    scene = gs.Scene(
        sim_options=gs.options.SimOptions(
            dt=0.01,  # seconds
            requires_grad=True,  # enable differentiable mode
        ),
    )
    robot = scene.add_entity(gs.morphs.URDF(file=ROBOT))
    scene.build()

    # A control signal we want gradients for
    force = torch.zeros(robot.n_dofs, device=gs.device, requires_grad=True)

    for _ in range(n_steps):
        robot.control_dofs_force(force)
        scene.step()

    target = torch.tensor([1.0, 0.0, 0.5], device=gs.device)
    loss = torch.nn.functional.mse_loss(robot.get_pos(), target)

    loss.backward()  # propagates through every step back to `force`
    return force, loss


if __name__ == "__main__":
    force, loss = main()
    print(f"loss {loss.item():.4f}")
    print(force.grad)
