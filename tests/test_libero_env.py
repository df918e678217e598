"""``imaginebench/LIBERO-v0`` in the simulator: spaces, resets from initial states, rewards,
truncation, the first-step defect, the quality judge. Short: one env, a few steps."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

pytest.importorskip("libero.libero", reason="needs the libero extra: pip install -e '.[libero]'")

from imaginebench.envs import get_domain, make
from imaginebench.envs.libero.env import LiberoEnv
from imaginebench.envs.libero.layout import STATE_DIM
from imaginebench.envs.libero.suite import TRAIN_TASKS
from imaginebench.envs.libero.tasks import TASK_NAMES, LiberoTask
from imaginebench.experts import make_expert


@pytest.fixture(scope="module")
def env():
    env = make("libero", "train").unwrapped
    yield env
    env.close()


def rollout(env, steps, rng):
    actions = []
    for _ in range(steps):
        action = rng.uniform(-1, 1, 7).astype(np.float32)
        _, _, terminated, truncated, _ = env.step(action)
        actions.append(action)
        if terminated or truncated:
            break
    return np.stack(env.trajectory), np.stack(actions)


def task_name(info):
    return LiberoTask.from_spec(info["task"]).name


def test_spaces_and_info(env):
    assert env.observation_space.shape == (STATE_DIM,) and env.observation_space.dtype == np.float32
    assert env.action_space == gym.spaces.Box(-1.0, 1.0, (7,), np.float32)
    obs, info = env.reset(seed=0)
    assert obs.shape == (44,) and obs.dtype == np.float32
    assert task_name(info) in TRAIN_TASKS and info["level"] == "train"
    assert info["instruction"] in LiberoTask(task_name(info)).instructions("train")
    with pytest.raises(ValueError, match="action must be 7 finite numbers"):
        env.step(np.zeros(4))
    with pytest.raises(ValueError, match="unsupported render_mode"):
        LiberoEnv(render_mode="human")


def test_initial_states_restart_exactly_and_accomplish_nothing(env):
    rng = np.random.default_rng(0)
    place, out = LiberoTask("place-alphabet_soup"), LiberoTask("pick-out-of-salad_dressing")
    starts = {
        "pick": env.suite.sample_initial_state(LiberoTask("reach-salad_dressing"), rng),
        place.name: env.suite.sample_initial_state(place, rng),
        out.name: env.suite.sample_initial_state(out, rng),
    }
    # place: the hand at the soup, fingers open; out: the dressing in the basket, hand above
    at, inside = starts[place.name].astype(float), starts[out.name].astype(float)
    assert np.linalg.norm(at[7:10] - at[16:19]) < 0.02 and at[14] > 0.03
    assert np.linalg.norm(inside[30:32] - inside[37:39]) < 0.04 and inside[9] > inside[32]
    for state in starts.values():
        obs, _ = env.reset(options={"task": place, "initial_state": state})
        np.testing.assert_allclose(obs, state, atol=1e-6)
    # every task is unaccomplished in the initial states of its distribution
    for name in TASK_NAMES:
        task = LiberoTask(name)
        state = starts.get(
            name, starts["pick"] if task.kind not in ("place", "pick-out-of") else None
        )
        assert state is None or not task.success(state[None])[0], name


def test_a_seeded_reset_is_the_same_in_every_new_env(env):
    """The scene's home layout does not depend on numpy's global generator (robosuite's
    placement samplers draw from it), so a seed gives the same episode in any process."""
    first, _ = env.reset(seed=5)
    np.random.seed(12345)  # what else ran before must not matter
    other = make("libero", "train").unwrapped
    try:
        again, _ = other.reset(seed=5)
    finally:
        other.close()
    np.testing.assert_allclose(first, again, atol=1e-6)  # before: 1-2 cm apart


def test_env_rewards_are_the_state_only_rewards_and_episodes_truncate(env):
    rng = np.random.default_rng(1)
    env.reset(seed=1, options={"task": LiberoTask("pick-and-place-cream_cheese")})
    env.max_episode_steps = 6
    try:
        rewards = []
        for _ in range(6):
            _, reward, terminated, truncated, _ = env.step(rng.uniform(-1, 1, 7))
            rewards.append(reward)
    finally:
        env.max_episode_steps = 500
    assert truncated and not terminated
    states = np.stack(env.trajectory)
    expected = get_domain("libero").episode_rewards(env.task, states, np.zeros((6, 7)))
    np.testing.assert_allclose(rewards, expected, rtol=1e-5, atol=1e-6)


def test_first_step_is_judged_against_the_new_episode(env):
    """Defect fixed: the original compared the first step with the previous episode's last
    state, so a hand resting at the soup "grasped" it when the soup had been elsewhere."""
    rng = np.random.default_rng(2)
    task = LiberoTask("pick-alphabet_soup")
    env.reset(seed=2, options={"task": task})
    rollout(env, 3, rng)
    at_soup = env.suite.sample_initial_state(LiberoTask("place-alphabet_soup"), rng)
    env.reset(options={"task": task, "initial_state": at_soup})
    assert len(env.trajectory) == 1
    _, reward, terminated, _, _ = env.step(np.zeros(7))
    assert not terminated and abs(reward) < 0.05  # nothing moved: no grasp, no shaping


def test_an_initial_state_and_actions_give_the_same_rollout_whatever_came_before(env):
    """The reset clears what the simulator keeps between steps (commands, the solver's warm
    start): worker processes with other histories collect the same data. The expert grasps
    the box, so contact forces (where the warm start matters) are part of the rollout."""
    rng = np.random.default_rng(4)
    task = LiberoTask("place-cream_cheese")
    start = env.suite.sample_initial_state(task, rng)

    def replay():
        expert = make_expert("libero")
        env.reset(options={"task": task, "initial_state": start})
        for _ in range(30):
            env.step(expert.act(env))
        return np.stack(env.trajectory)

    first = replay()
    env.reset(seed=4, options={"task": LiberoTask("reach-alphabet_soup")})
    rollout(env, 5, rng)
    np.testing.assert_array_equal(replay(), first)


def test_quality_replays_real_steps_and_catches_a_wrong_state(env):
    rng = np.random.default_rng(3)
    env.reset(seed=3, options={"task": LiberoTask("reach-alphabet_soup")})
    states, actions = rollout(env, 6, rng)
    judge = get_domain("libero").make_quality()
    judge.scene = env.scene  # reuse the env's simulator (it is reset by the next episode)
    assert judge.legal(states).all()
    assert judge.correct_transitions(states, actions).all()
    wrong = states.copy()
    wrong[3, 23:26] += 0.03  # the cream cheese jumps 3 cm in x, y and z
    assert np.flatnonzero(~judge.correct_transitions(wrong, actions)).tolist() == [2, 3]
    flying = states.copy()
    flying[2, 9] = 2.0  # the hand 2 m up
    assert judge.legal(flying).tolist() == [i != 2 for i in range(len(states))]
