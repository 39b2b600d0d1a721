"""The cart-pole swing-up as a Gymnasium vector environment: a batch of cart-poles driven by a random policy or by
an energy-pumping controller, with next-step autoreset at the end of each 5 s episode.

    python examples/gym_cartpole.py            # the energy-pumping controller
    python examples/gym_cartpole.py --random   # uniform random forces
"""

import argparse

import torch

import genesis_core as gs
from genesis_core.envs import CartPoleSwingUp, VectorEnv


def energy_pump(obs):
    """Push the cart so that the pole's energy rises towards that of the upright pole (angle 0), and keep the
    cart near the middle of its rail."""
    x, cos, _, v, w = obs.unbind(-1)
    m, l, g, inertia = 0.1, 0.5, 9.81, 0.00833 + 0.1 * 0.5 ** 2  # the pole of cartpole.xml, about its hinge
    energy = 0.5 * inertia * w ** 2 + m * g * l * cos
    return (-50.0 * (m * g * l - energy) * w * cos - 0.5 * x - 0.5 * v).clamp(-1.0, 1.0)[:, None]


def main(num_envs=8, episodes=1, random=False, horizon=500, seed=0):
    """Run `episodes` episodes in each of `num_envs` environments; returns each environment's return in its first
    episode and the highest cos(pole angle) it reached (1: upright)."""
    if not gs.runtime.initialized:
        gs.init(backend=gs.cpu, precision="64")
    env = VectorEnv(CartPoleSwingUp(horizon=horizon), num_envs=num_envs)
    obs, _ = env.reset(seed=seed)
    gen = torch.Generator(device=gs.device).manual_seed(seed)
    returns = torch.zeros(num_envs, dtype=gs.tc_float, device=gs.device)
    highest = obs[:, 1].clone()
    first = torch.ones(num_envs, dtype=torch.bool, device=gs.device)
    for _ in range(episodes * (horizon + 1)):
        if random:
            actions = 2.0 * torch.rand((num_envs, 1), generator=gen, dtype=gs.tc_float, device=gs.device) - 1.0
        else:
            actions = energy_pump(obs)
        obs, reward, terminated, truncated, _ = env.step(actions)
        returns += torch.where(first, reward, torch.zeros_like(reward))
        highest = torch.where(first, torch.maximum(highest, obs[:, 1]), highest)
        first &= ~(terminated | truncated)
    env.close()
    return returns, highest


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--random", action="store_true", help="uniform random forces instead of the controller")
    parser.add_argument("--num-envs", type=int, default=8)
    args = parser.parse_args()
    returns, highest = main(num_envs=args.num_envs, random=args.random)
    for i, (r, h) in enumerate(zip(returns.tolist(), highest.tolist())):
        print(f"env {i}: return {r:7.2f}, highest pole cos {h:+.3f}")
