"""A rigid tool pushes a soft MPM cube across a floor with friction; gradient descent through the physics (the
MPM solver, the rigid solver and their coupling) finds the tool's launch velocity that leaves the cube's centre
on a target.

    python examples/diff_push.py
"""

import os

import torch

import genesis_core as gs
from genesis_core.progress import progress

PUSHER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "models", "pusher.xml")
FLOOR = 0.0  # the MPM floor: the lower bound of its domain


def main(iterations=10, n_steps=60, target=(0.32, 0.2), lr=4.0, verbose=True):
    if not gs.runtime.initialized:
        gs.init(backend=gs.gpu)

    scene = gs.Scene(
        sim_options=gs.options.SimOptions(dt=5e-3, substeps=5, requires_grad=True),
        mpm_options=gs.options.MPMOptions(lower_bound=(0, 0, 0), upper_bound=(0.6, 0.4, 0.2), grid_density=48,
                                          boundary="slip", wall_friction=0.4),
    )
    tool = scene.add_entity(gs.morphs.MJCF(file=PUSHER, pos=(0.12, 0.2, FLOOR + 0.03)))
    cube = scene.add_entity(gs.morphs.Box(pos=(0.22, 0.2, FLOOR + 0.03), size=(0.06, 0.06, 0.06)),
                            material=gs.materials.MPM.Elastic(E=5e4, nu=0.3, rho=500))
    scene.build()

    velocity = torch.tensor([0.4, 0.0], requires_grad=True)  # the tool's launch velocity along x and y, m/s
    # plain gradient descent: the loss is close to quadratic in the launch velocity (the cube's travel grows about
    # linearly with it), and lr = 4 s^2/m^2 is near the step that lands on the target at once
    optimizer = torch.optim.SGD([velocity], lr=lr)
    goal = torch.tensor(target)
    misses = []
    bar = progress(range(iterations), desc="optimising the launch velocity", unit="iteration")
    for it in bar:
        scene.reset()
        tool.set_dofs_velocity(velocity)
        for _ in range(n_steps):
            scene.step()
        centre = cube.get_particles_pos().mean(dim=0)
        loss = (centre[:2] - goal).pow(2).sum()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        misses.append(float(loss.detach().sqrt()))
        bar.set_postfix(miss=f"{misses[-1] * 100:.2f} cm")
        if verbose:
            bar.write(f"iteration {it}: launch velocity {velocity.detach().tolist()}, cube centre "
                  f"{centre[:2].detach().tolist()}, miss {misses[-1] * 100:.2f} cm")
    return misses, velocity.detach()


if __name__ == "__main__":
    main()
