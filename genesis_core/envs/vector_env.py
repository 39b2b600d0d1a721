"""`VectorEnv`: a `gymnasium.vector.VectorEnv` over one batched scene, and `SingleEnv`, a `gymnasium.Env` over
one environment of it."""

from __future__ import annotations

from typing import Any

import gymnasium
import numpy as np
import torch
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_space

import genesis_core as gs

from .task import Task


class VectorEnv(gymnasium.vector.VectorEnv):
    """`num_envs` environments of `task` stepped together in one `gs.Scene` built with `n_envs=num_envs`.

    Spaces: `single_observation_space` and `single_action_space` are the task's `gymnasium.spaces.Box`es;
    `observation_space` and `action_space` are their batches (`gymnasium.vector.utils.batch_space`), shaped
    `(num_envs, ...)`.

    Tensors: `reset` and `step` return observations `(num_envs, ...)`, rewards `(num_envs,)` and terminations and
    truncations `(num_envs,)` bools as torch tensors on gs.device, in the engine's float dtype (gs.tc_float, the
    Boxes' dtype); `step` takes actions as a torch tensor (or anything torch.as_tensor takes), shaped like
    `action_space`, and clips them to its bounds. Nothing goes to the host on the way: a policy on the GPU reads
    and writes device memory. The Boxes describe the values, shapes and dtype; gymnasium's Box.contains and
    Box.sample work on NumPy arrays, so `obs.cpu().numpy() in env.observation_space` is how to test membership, and
    a sampled action is turned into a tensor by step (one host-to-device copy, where the caller chose NumPy).
    `numpy=True` makes this environment return NumPy arrays instead (copies to the host every step), for code
    that only reads NumPy; gymnasium's `wrappers.vector.TorchToNumpy` does the same where `array-api-compat` is
    installed.

    Autoreset: `metadata["autoreset_mode"]` is `AutoresetMode.NEXT_STEP`, gymnasium's default, implemented as
    gymnasium documents it: an environment whose episode ended (terminated or truncated) in step t is reset during
    step t + 1, whose action for it is ignored, and step t + 1 returns its first observation of the new episode with
    reward 0 and termination and truncation False. The scene steps every environment at once; the done ones are
    restored after the physics step, with `scene.reset(envs_idx=...)` to the task's start state and the task's
    randomisation (`Task.reset_envs`), so their previous episode leaves no trace and the other environments are
    never written. `reset(options={"reset_mask": mask})` resets only the environments where `mask` is True
    (gymnasium's partial reset).

    Randomness: each environment has its own `torch.Generator` on gs.device. `reset(seed=s)` seeds environment i's
    from `(s, i)` (NumPy's SeedSequence), so an environment's sequence of start states depends on the seed and on
    how many episodes it has begun, not on when the others end. `reset()` without a seed the first time seeds from
    fresh entropy.

    The environment owns its scene: it registers the task's start state as the scene's initial state, so a bare
    `scene.reset()` returns there too. One step costs one `scene.step()` and one test of the done flags on the host
    (to decide whether any environment resets); an environment whose state goes non-finite ends its episode
    (terminated), with its observation and reward set to 0.
    """

    metadata = {"autoreset_mode": AutoresetMode.NEXT_STEP, "render_modes": []}

    def __init__(self, task: Task, num_envs: int, numpy: bool = False):
        if not isinstance(task, Task):
            raise gs.OptionError(f"VectorEnv: task must be a genesis_core.envs.Task, got {type(task).__name__}.")
        if not isinstance(num_envs, (int, np.integer)) or isinstance(num_envs, bool) or num_envs < 1:
            raise gs.OptionError(f"VectorEnv: num_envs={num_envs!r} is not accepted: expected an int >= 1.")
        horizon = getattr(task, "horizon", None)
        if not isinstance(horizon, (int, np.integer)) or isinstance(horizon, bool) or horizon < 1:
            raise gs.OptionError(f"VectorEnv: the task's horizon={horizon!r} must be an int >= 1.")
        self.task = task
        self.num_envs = int(num_envs)
        self.numpy = bool(numpy)
        self.metadata = dict(self.metadata)
        self.scene = task.build(self.num_envs)
        if not isinstance(self.scene, gs.Scene) or not self.scene.is_built or self.scene.n_envs != self.num_envs:
            raise gs.SceneError(f"VectorEnv: {type(task).__name__}.build({self.num_envs}) must return a gs.Scene built "
                                f"with n_envs={self.num_envs}.")
        self.scene.reset(state=self.scene.get_state())  # the task's start state becomes the scene's initial state
        self.single_observation_space = task.observation_space()
        self.single_action_space = task.action_space()
        for name, space in (("observation", self.single_observation_space), ("action", self.single_action_space)):
            if not isinstance(space, gymnasium.spaces.Box):
                raise gs.OptionError(f"VectorEnv: the task's {name} space must be a gymnasium.spaces.Box, got "
                                     f"{type(space).__name__}.")
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        self.device = gs.device
        self.dtype = gs.tc_float
        space = self.single_action_space
        self._act_low = torch.as_tensor(space.low, dtype=self.dtype, device=self.device)
        self._act_high = torch.as_tensor(space.high, dtype=self.dtype, device=self.device)
        self._all = torch.arange(self.num_envs, device=self.device)
        self._gens = None
        self._steps = torch.zeros(self.num_envs, dtype=torch.long, device=self.device)
        self._autoreset = torch.zeros(self.num_envs, dtype=torch.bool, device=self.device)

    # -- randomness -------------------------------------------------------------------------------------------------

    def _seed_generators(self, seed: int):
        children = np.random.SeedSequence(int(seed)).spawn(self.num_envs)
        self._gens = []
        for child in children:
            g = torch.Generator(device=self.device)
            g.manual_seed(int(child.generate_state(1, np.uint64)[0] >> np.uint64(1)))
            self._gens.append(g)

    def _rand_for(self, envs_idx: torch.Tensor):
        rows = envs_idx.tolist()

        def rand(*shape):
            if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
                shape = tuple(shape[0])
            out = [torch.rand(shape, generator=self._gens[i], dtype=self.dtype, device=self.device) for i in rows]
            if not out:
                return torch.zeros((0, *shape), dtype=self.dtype, device=self.device)
            return torch.stack(out)

        return rand

    # -- the gymnasium API ------------------------------------------------------------------------------------------

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        """Start new episodes in every environment, or, with `options={"reset_mask": mask}` (`(num_envs,)` bools,
        NumPy or torch), in those where mask is True. Returns (observations of every environment, {})."""
        super().reset(seed=seed)  # gymnasium's np_random, which seeds nothing here but the API's checks
        if seed is not None:
            self._seed_generators(seed)
        elif self._gens is None:
            self._seed_generators(int(self.np_random.integers(2**63 - 1)))
        mask = None if options is None else options.get("reset_mask")
        if mask is None:
            self.scene.reset()
            idx = self._all
        else:
            m = torch.as_tensor(mask.copy() if isinstance(mask, np.ndarray) else mask)
            if m.dtype != torch.bool or tuple(m.shape) != (self.num_envs,):
                raise gs.OptionError(f"reset: options['reset_mask'] must be ({self.num_envs},) bools, got "
                                     f"{m.dtype} of shape {tuple(m.shape)}.")
            idx = m.to(self.device).nonzero().flatten()
            if idx.numel():
                self.scene.reset(envs_idx=idx)
        if idx.numel():
            self.task.reset_envs(idx, self._rand_for(idx))
            self._steps[idx] = 0
            self._autoreset[idx] = False
        obs = self._observe()[0]
        return self._out(obs), {}

    def step(self, actions):
        """Step every environment with `actions` (shaped like action_space; clipped to it). Environments whose
        episode ended in the previous step are reset instead (NEXT_STEP autoreset). Returns (observations,
        rewards, terminations, truncations, {})."""
        a = self._actions(actions)
        reset = self._autoreset
        self.task.apply_actions(a)
        self.scene.step()
        idx = reset.nonzero().flatten()
        if idx.numel():
            self.scene.reset(envs_idx=idx)
            self.task.reset_envs(idx, self._rand_for(idx))
        obs, bad = self._observe()
        reward = self.task.reward(a).to(self.dtype)
        bad = bad | ~torch.isfinite(reward)
        zero = torch.zeros((), dtype=self.dtype, device=self.device)
        reward = torch.where(bad | reset, zero, reward)
        terminated = (self.task.terminated().to(torch.bool) | bad) & ~reset
        self._steps = torch.where(reset, 0, self._steps + 1)
        truncated = (self._steps >= self.task.horizon) & ~reset
        self._autoreset = terminated | truncated
        return self._out(obs), self._out(reward), self._out(terminated.clone()), self._out(truncated), {}

    def close_extras(self, **kwargs):
        self._gens = None

    # -- helpers ----------------------------------------------------------------------------------------------------

    @property
    def episode_steps(self) -> torch.Tensor:
        """The steps each environment's current episode has taken, `(num_envs,)` longs."""
        return self._steps.clone()

    def _actions(self, actions) -> torch.Tensor:
        shape = tuple(self.action_space.shape)
        try:
            a = torch.as_tensor(actions, dtype=self.dtype, device=self.device)
        except (TypeError, ValueError, RuntimeError) as exc:
            raise gs.OptionError(f"step: actions must be a tensor or array shaped {shape}, got "
                                 f"{type(actions).__name__}: {exc}") from None
        if tuple(a.shape) != shape:
            raise gs.OptionError(f"step: actions must be shaped {shape} (num_envs, *single_action_space.shape), got "
                                 f"{tuple(a.shape)}.")
        if not bool(torch.isfinite(a).all()):
            raise gs.OptionError("step: actions must be finite (no NaN or inf).")
        return torch.minimum(torch.maximum(a, self._act_low), self._act_high)

    def _observe(self):
        obs = self.task.observe().to(self.dtype)
        bad = ~torch.isfinite(obs.reshape(self.num_envs, -1)).all(-1)
        obs = torch.where(bad.reshape((-1,) + (1,) * (obs.dim() - 1)), torch.zeros((), dtype=self.dtype,
                                                                                   device=self.device), obs)
        return obs, bad

    def _out(self, x: torch.Tensor):
        return x.detach().cpu().numpy() if self.numpy else x

    def __repr__(self):
        return f"VectorEnv({type(self.task).__name__}, num_envs={self.num_envs})"


class SingleEnv(gymnasium.Env):
    """One environment of `task` as a `gymnasium.Env` (a `VectorEnv` with num_envs=1 underneath): observations
    and actions without the batch dimension, reward a float, terminated and truncated bools. There is no
    autoreset: after an episode ends, call `reset()` (stepping on raises). `numpy=True` returns NumPy observations,
    which is what `gymnasium.utils.env_checker.check_env` compares and tests against the spaces."""

    metadata = {"render_modes": []}

    def __init__(self, task: Task, numpy: bool = False):
        self.vector_env = VectorEnv(task, 1, numpy=numpy)
        self.task, self.scene = task, self.vector_env.scene
        self.observation_space = self.vector_env.single_observation_space
        self.action_space = self.vector_env.single_action_space
        self._done = True

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        obs, info = self.vector_env.reset(seed=seed, options=options)
        self._done = False
        return obs[0], info

    def step(self, action):
        if self._done:
            raise gs.SceneError("SingleEnv.step: the episode has ended (or none began): call reset() first.")
        a = action[None] if isinstance(action, (np.ndarray, torch.Tensor)) else [action]
        obs, reward, terminated, truncated, info = self.vector_env.step(a)
        terminated, truncated = bool(terminated[0]), bool(truncated[0])
        self._done = terminated or truncated
        return obs[0], float(reward[0]), terminated, truncated, info

    def close(self):
        self.vector_env.close()
