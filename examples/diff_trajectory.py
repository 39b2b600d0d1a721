"""Trajectory optimisation through the physics: a control sequence (forces on every dof at every step) drives the
base of a floating robot to a target; each Adam iteration is one forward run and one backward.

    python examples/diff_trajectory.py
"""

import os

import torch

import genesis_core as gs
from genesis_core.progress import progress

ROBOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "models", "robot.urdf")


def main(iterations=100, n_steps=100, verbose=True):
    if not gs.runtime.initialized:
        gs.init(backend=gs.gpu)

    scene = gs.Scene(
        sim_options=gs.options.SimOptions(
            dt=0.01,  # seconds
            requires_grad=True,
        ),
    )
    robot = scene.add_entity(gs.morphs.URDF(file=ROBOT))
    scene.build()

    controls = torch.zeros(n_steps, robot.n_dofs, device=gs.device, requires_grad=True)
    optimizer = torch.optim.Adam([controls], lr=0.01)
    target = torch.tensor([1.0, 0.0, 0.5], device=gs.device)

    losses = []
    bar = progress(range(iterations), desc="optimising the controls", unit="iteration")
    for step in bar:
        scene.reset()
        for t in range(n_steps):
            robot.control_dofs_force(controls[t])
            scene.step()

        loss = torch.nn.functional.mse_loss(robot.get_pos(), target)

        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

        losses.append(loss.item())
        bar.set_postfix(loss=f"{losses[-1]:.4f}")
        if verbose:
            bar.write(f"step {step}: loss = {loss.item():.4f}")
    return losses


if __name__ == "__main__":
    main()
