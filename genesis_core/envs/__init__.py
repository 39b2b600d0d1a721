"""Reinforcement-learning environments over batched scenes, for Gymnasium 1.x.

    import genesis_core as gs
    from genesis_core.envs import VectorEnv, CartPoleSwingUp

    gs.init(backend=gs.cpu)
    env = VectorEnv(CartPoleSwingUp(), num_envs=64)       # a gymnasium.vector.VectorEnv
    obs, info = env.reset(seed=0)                         # torch tensors on gs.device
    obs, reward, terminated, truncated, info = env.step(actions)

`Task` declares an environment (scene, spaces, reward, termination, reset distribution); `VectorEnv` runs
`num_envs` of them in one scene with next-step autoreset; `SingleEnv` is one of them as a `gymnasium.Env`.
`CartPoleSwingUp` and `QuadrupedStand` are the shipped tasks (docs/envs.md). `Task` and the tasks import without
Gymnasium; `VectorEnv` and `SingleEnv` need it (gymnasium==1.4.0).
"""

from .task import Task
from .tasks import CartPoleSwingUp, QuadrupedStand

_NEEDS_GYMNASIUM = ("VectorEnv", "SingleEnv")


def __getattr__(name):
    if name in _NEEDS_GYMNASIUM:
        try:
            from . import vector_env
        except ModuleNotFoundError as exc:
            if exc.name != "gymnasium":
                raise
            raise ImportError(f"genesis_core.envs.{name} needs Gymnasium: pip install gymnasium==1.4.0.",
                              name="gymnasium") from None
        return getattr(vector_env, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["Task", "CartPoleSwingUp", "QuadrupedStand", "VectorEnv", "SingleEnv"]
