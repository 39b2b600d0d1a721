"""genesis_core.envs: the Gymnasium vector environment over a batched scene, and its two tasks."""

import math
import warnings

import numpy as np
import pytest
import torch

gymnasium = pytest.importorskip("gymnasium", reason="genesis_core.envs needs gymnasium (gymnasium==1.4.0)")

from gymnasium.utils.env_checker import check_env  # noqa: E402
from gymnasium.vector import AutoresetMode  # noqa: E402
from gymnasium.vector.utils import batch_space  # noqa: E402

import genesis_core as gs  # noqa: E402
from genesis_core.envs import CartPoleSwingUp, QuadrupedStand, SingleEnv, Task, VectorEnv  # noqa: E402


def _bits(x):
    """A tensor's bits, so that equality is bitwise (0.0 and -0.0 differ, NaN equals itself)."""
    if x.is_floating_point():
        return x.contiguous().view({8: torch.int64, 4: torch.int32, 2: torch.int16}[x.element_size()])
    return x


def _fields(scene):
    return scene.get_state().fields_by_key()


def _same_rows(a: dict, b: dict, rows) -> list:
    """The fields whose rows `rows` differ, bit for bit, between two snapshots."""
    return [k for k in a if not torch.equal(_bits(a[k][rows]), _bits(b[k][rows]))]


@pytest.fixture(scope="module")
def cartpole():
    return VectorEnv(CartPoleSwingUp(horizon=6), num_envs=3)


@pytest.fixture(scope="module")
def quadruped():
    return VectorEnv(QuadrupedStand(horizon=8), num_envs=2)


def test_spaces_metadata_and_tensors(cartpole):
    env = cartpole
    assert isinstance(env, gymnasium.vector.VectorEnv)
    assert env.metadata["autoreset_mode"] == AutoresetMode.NEXT_STEP
    assert env.single_observation_space.shape == (5,) and env.single_action_space.shape == (1,)
    assert env.observation_space == batch_space(env.single_observation_space, 3)
    assert env.action_space == batch_space(env.single_action_space, 3)
    assert env.single_observation_space.dtype == np.dtype(gs.np_float)
    obs, info = env.reset(seed=0)
    assert info == {}
    assert isinstance(obs, torch.Tensor) and obs.device == gs.device and obs.dtype == gs.tc_float
    assert obs.cpu().numpy() in env.observation_space
    obs, rew, term, trunc, info = env.step(torch.zeros((3, 1), dtype=gs.tc_float, device=gs.device))
    assert all(isinstance(x, torch.Tensor) and x.device == gs.device for x in (obs, rew, term, trunc))
    assert rew.shape == term.shape == trunc.shape == (3,) and term.dtype == trunc.dtype == torch.bool
    # NumPy actions (what action_space.sample() gives) are accepted; bad ones are refused
    env.step(env.action_space.sample())
    with pytest.raises(gs.OptionError, match="shaped"):
        env.step(torch.zeros((2, 1)))
    with pytest.raises(gs.OptionError, match="finite"):
        env.step(torch.full((3, 1), float("nan")))
    with pytest.raises(gs.OptionError, match="num_envs"):
        VectorEnv(CartPoleSwingUp(), num_envs=0)
    assert isinstance(CartPoleSwingUp(), Task)


@pytest.mark.parametrize("which", ["cartpole", "quadruped"])
def test_a_random_policy_runs(which, request):
    env = request.getfixturevalue(which)
    horizon = env.task.horizon
    obs, _ = env.reset(seed=1)
    gen = torch.Generator(device=gs.device).manual_seed(0)
    n_steps = 2 * horizon + 3
    ended = torch.zeros(env.num_envs, dtype=torch.bool, device=gs.device)
    for _ in range(n_steps):
        actions = 2.0 * torch.rand(env.action_space.shape, generator=gen, dtype=gs.tc_float, device=gs.device) - 1.0
        obs, rew, term, trunc, _ = env.step(actions)
        assert torch.isfinite(obs).all() and torch.isfinite(rew).all()
        assert obs.cpu().numpy() in env.observation_space
        # NEXT_STEP: an environment that ended in the previous step starts over now, with reward 0 and no flags
        assert (rew[ended] == 0).all() and not term[ended].any() and not trunc[ended].any()
        assert (env.episode_steps[ended] == 0).all()
        ended = term | trunc
    assert (env.episode_steps <= horizon).all()
    if which == "cartpole":  # never terminates: every episode is truncated at the horizon
        assert ((rew >= 0) & (rew <= 1)).all()


def test_autoreset_resets_exactly_the_done_environments(cartpole):
    env, scene = cartpole, cartpole.scene
    torch.manual_seed(0)
    actions = [2 * torch.rand((3, 1), dtype=gs.tc_float) - 1 for _ in range(12)]
    env.reset(seed=2)
    for a in actions[:2]:
        env.step(a)
    env.reset(options={"reset_mask": np.array([False, True, False])})  # env 1's episode starts 2 steps later
    for k in range(2, env.task.horizon):  # envs 0 and 2 reach the horizon
        _, _, _, trunc, _ = env.step(actions[k])
    assert trunc.tolist() == [True, False, True]
    snapshot = scene.get_state()
    before = snapshot.fields_by_key()
    obs, rew, term, trunc, _ = env.step(actions[6])
    after = _fields(scene)
    # the done environments start over: reward 0, no flags, the pole hanging down again
    assert rew[[0, 2]].tolist() == [0.0, 0.0] and not (term | trunc).any()
    assert env.episode_steps.tolist() == [0, env.task.horizon - 1, 0]
    assert (obs[[0, 2], 1] < -0.99).all()
    assert _same_rows(before, after, [0, 2]) != []
    # environment 1 took exactly the step it would have taken without the others' resets
    start = scene.get_state()
    scene.reset(state=snapshot)
    env.task.apply_actions(actions[6].to(gs.device))
    scene.step()
    plain = _fields(scene)
    assert _same_rows(plain, after, [1]) == []
    scene.reset(state=start)


@pytest.mark.parametrize("which", ["cartpole", "quadruped"])
def test_a_partial_reset_leaves_the_other_environments_bitwise_untouched(which, request):
    env = request.getfixturevalue(which)
    env.reset(seed=3)
    for _ in range(3):
        env.step(env.action_space.sample())
    before = _fields(env.scene)
    mask = np.zeros(env.num_envs, dtype=bool)
    mask[0] = True
    env.reset(options={"reset_mask": mask})
    after = _fields(env.scene)
    bad = _same_rows(before, after, list(range(1, env.num_envs)))
    assert bad == [], [(k, (before[k][1:] - after[k][1:]).abs().max().item()) for k in bad]
    assert _same_rows(before, after, [0]) != []
    assert env.episode_steps[0] == 0 and (env.episode_steps[1:] == 3).all()


def test_reset_with_a_seed_is_reproducible(cartpole):
    env = cartpole

    def run(seed):
        obs, _ = env.reset(seed=seed)
        out = [obs]
        for k in range(4):
            out.append(env.step(torch.full((3, 1), 0.5 * (-1) ** k, dtype=gs.tc_float))[0])
        return torch.stack(out)

    a, b, c = run(7), run(7), run(8)
    assert torch.equal(_bits(a), _bits(b))
    assert not torch.equal(a[0], c[0])
    # each environment draws from its own generator: its start states do not depend on the others' resets
    env.reset(seed=9)
    one = env.reset(options={"reset_mask": np.array([True, False, False])})[0][0]
    env.reset(seed=9)
    every = env.reset(options={"reset_mask": np.array([True, True, True])})[0][0]
    assert torch.equal(_bits(one), _bits(every))


@pytest.mark.parametrize("make_task", [lambda: CartPoleSwingUp(horizon=20), lambda: QuadrupedStand(horizon=20)],
                         ids=["cartpole", "quadruped"])
def test_gymnasium_env_checker(make_task):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(SingleEnv(make_task(), numpy=True), skip_render_check=True)
    # unbounded observations (velocities) are the only thing the checker remarks on
    assert [str(w.message) for w in caught if "infinity" not in str(w.message)] == []


def test_gymnasium_vector_wrappers_read_the_autoreset_mode():
    from gymnasium.wrappers.vector import RecordEpisodeStatistics

    env = RecordEpisodeStatistics(VectorEnv(CartPoleSwingUp(horizon=4), num_envs=2, numpy=True))
    env.reset(seed=0)
    lengths = []
    for _ in range(10):
        _, _, _, _, info = env.step(env.action_space.sample())
        if "episode" in info:
            lengths += info["episode"]["l"][info["_episode"]].tolist()
    assert lengths and set(lengths) == {4}


def test_energy_pumping_swings_the_cartpole_up():
    """u = -k (E_up - E) w cos(theta) pumps the pole's energy E towards that of the upright pole, E_up: every
    environment swings it above the horizontal within 2 s, from hanging down."""
    env = VectorEnv(CartPoleSwingUp(horizon=200), num_envs=3)
    obs, _ = env.reset(seed=0)
    m, l, g = 0.1, 0.5, 9.81
    inertia = 0.00833 + m * l ** 2  # about the hinge
    highest = obs[:, 1].clone()
    for _ in range(env.task.horizon):
        x, c, _, v, w = obs.unbind(-1)
        energy = 0.5 * inertia * w ** 2 + m * g * l * c
        u = -50.0 * (m * g * l - energy) * w * c - 0.5 * x - 0.5 * v
        obs, _, _, trunc, _ = env.step(u.clamp(-1.0, 1.0)[:, None])
        highest = torch.maximum(highest, obs[:, 1])
    assert trunc.all()  # the horizon ends the episode
    assert (highest > math.cos(math.radians(60))).all(), highest
    # without the pump, the pole stays down
    obs, _ = env.reset(seed=0)
    for _ in range(50):
        obs = env.step(torch.zeros((3, 1), dtype=gs.tc_float))[0]
    assert (obs[:, 1] < -0.99).all()


def test_quadruped_stands_for_two_seconds_under_its_servos():
    env = VectorEnv(QuadrupedStand(horizon=200), num_envs=2)
    env.reset(seed=0)
    robot, target = env.task.robot, env.task.target_height
    zero = torch.zeros((2, 12), dtype=gs.tc_float, device=gs.device)
    heights = []
    for _ in range(round(2.0 / env.task.dt)):
        _, rew, term, trunc, _ = env.step(zero)
        assert not (term | trunc).any()
        heights.append(robot.get_pos()[:, 2])
    heights = torch.stack(heights)
    settled = heights[round(0.5 / env.task.dt):]
    assert ((settled - target).abs() < 0.03).all(), (settled.min(), settled.max())
    assert (rew > 0.9).all()
    up = -env.task._gravity(robot.get_quat())[:, 2]
    assert (up > math.cos(math.radians(5))).all()


def test_gym_cartpole_example():
    import importlib.util
    import os

    path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples", "gym_cartpole.py")
    spec = importlib.util.spec_from_file_location("gym_cartpole", path)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    returns, highest = example.main(num_envs=2, horizon=200)
    assert (highest > 0.5).all()
    random_returns, _ = example.main(num_envs=2, horizon=200, random=True)
    assert (returns > random_returns).all()
