"""`Task`: what a reinforcement-learning environment over a batched scene declares.

A task builds its scene, names its observation and action spaces, turns a batch of actions into controls, and
reads observations, rewards and terminations from the scene, all as torch tensors on gs.device shaped
`(n_envs, ...)`. `genesis_core.envs.VectorEnv` runs it: it owns the episode counters, the truncation at the
horizon, the per-environment random generators and the resets.
"""

from __future__ import annotations

import numpy as np
import torch


class Task:
    """Base class of a task. Subclasses set `horizon` and implement the methods below.

    horizon: the steps of an episode; an episode still running after `horizon` steps is truncated.

    The spaces are `gymnasium.spaces.Box`es of one environment, with the dtype of the engine's precision
    (`gs.np_float`): float64 with `gs.init(precision="64")`, float32 with "32". The environment's tensors carry the
    same dtype (`gs.tc_float`) and the same shapes, batched.
    """

    horizon: int = 1000

    # -- declared by each task --------------------------------------------------------------------------------------

    def build(self, n_envs: int):
        """Create the scene (`gs.Scene`), add the entities, build it for `n_envs` environments, set the gains and
        any controls an episode starts with, and return the scene. The state of the scene when this returns is the
        state every episode starts from, before `reset_envs` randomises it."""
        raise NotImplementedError

    def observation_space(self):
        """The single environment's observation space (a gymnasium.spaces.Box)."""
        raise NotImplementedError

    def action_space(self):
        """The single environment's action space (a gymnasium.spaces.Box; actions are clipped to it)."""
        raise NotImplementedError

    def apply_actions(self, actions: torch.Tensor):
        """Turn a batch of actions `(n_envs, *action_shape)`, clipped to the action space, into controls for the
        next `scene.step()`."""
        raise NotImplementedError

    def observe(self) -> torch.Tensor:
        """The batch of observations `(n_envs, *observation_shape)` at the current state."""
        raise NotImplementedError

    def reward(self, actions: torch.Tensor) -> torch.Tensor:
        """The reward `(n_envs,)` of the step just taken with `actions`, read from the state it led to."""
        raise NotImplementedError

    def terminated(self) -> torch.Tensor:
        """`(n_envs,)` bools: which environments reached a terminal state (the episode cannot go on)."""
        raise NotImplementedError

    def reset_envs(self, envs_idx: torch.Tensor, rand):
        """Randomise the environments `envs_idx` (a 1-D long tensor on gs.device), just restored to the start
        state, and clear the task's own per-environment buffers for them. `rand(*shape)` returns uniform samples in
        [0, 1) shaped `(len(envs_idx), *shape)`, row i drawn from environment `envs_idx[i]`'s own generator, so
        that an environment's start states depend only on the seed and on how many episodes it has begun. Only
        the environments in `envs_idx` may be written."""

    # -- helpers ----------------------------------------------------------------------------------------------------

    @staticmethod
    def box(low, high, shape=None):
        """A gymnasium Box in the engine's float dtype (gs.np_float)."""
        from gymnasium import spaces

        import genesis_core as gs

        dtype = np.dtype(gs.np_float)
        if shape is None:
            return spaces.Box(np.asarray(low, dtype=dtype), np.asarray(high, dtype=dtype), dtype=dtype)
        return spaces.Box(low, high, shape=shape, dtype=dtype)
