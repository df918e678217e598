"""The CLEVR-Robot gymnasium environment: registration, seeding, step semantics, rendering."""

import gymnasium as gym
import numpy as np
import pytest

import imaginebench  # noqa: F401  (registers the ids)
from imaginebench.envs import make
from imaginebench.envs.base import EpisodeSpec
from imaginebench.envs.clevr.env import SUCCESS_BONUS
from imaginebench.envs.clevr.physics import X_RANGE, Y_RANGE
from imaginebench.envs.clevr.tasks import Push, Relation

SPREAD = np.array([-0.35, 0.05, 0.05, 0.45, 0.35, 0.0, -0.35, 0.45, 0.35, 0.45], dtype=np.float32)


@pytest.mark.parametrize("level", ["train", "rephrase", "easy", "hard"])
def test_registered_and_seeded_resets_reproduce(level):
    env = gym.make("imaginebench/CLEVR-v0", level=level)
    obs1, info1 = env.reset(seed=123)
    obs2, info2 = env.reset(seed=123)
    assert obs1.shape == (10,) and obs1.dtype == np.float32
    np.testing.assert_array_equal(obs1, obs2)
    assert info1 == info2 and info1["level"] == level and info1["instruction"]
    assert env.observation_space.contains(obs1)
    rollout = [env.step(a)[0] for a in (3, 17, 25)]
    env.reset(seed=123)
    np.testing.assert_array_equal(rollout, [env.step(a)[0] for a in (3, 17, 25)])
    other, _ = env.reset(seed=124)
    assert not np.array_equal(obs1, other)


def test_unknown_level_and_bad_action_are_rejected():
    with pytest.raises(ValueError, match="unknown level"):
        make("clevr", level="medium")
    with pytest.raises(ValueError, match="unknown domain"):
        make("atari")
    env = make("clevr").unwrapped
    env.reset(seed=0)
    with pytest.raises(ValueError, match=r"\[0, 40\)"):
        env.step(40)


def test_first_push_moves_the_ball():
    """The push is aimed at the state right after reset: the first push moves its ball fully."""
    env = make("clevr").unwrapped
    task = Relation("red", "blue", "left")
    env.reset(options={"episode": EpisodeSpec(task, "x", SPREAD, "train")})
    obs, *_ = env.step(0 * 8 + 0)  # red, +x
    assert obs[0] - SPREAD[0] > 0.12  # moved right by a full push
    np.testing.assert_allclose(obs[2:], SPREAD[2:], atol=0.02)  # the others stay put


def test_walls_keep_balls_inside():
    env = make("clevr").unwrapped
    env.reset(seed=0)
    for _ in range(12):
        obs, *_ = env.step(2)  # push red left, repeatedly into the wall
    pos = obs.reshape(5, 2)
    assert pos[:, 0].min() >= X_RANGE[0] - 0.01 and pos[:, 1].min() >= Y_RANGE[0] - 0.01
    assert pos[0, 0] < X_RANGE[0] + 0.03  # pinned against the left wall


def test_success_terminates_with_bonus_and_time_limit_truncates():
    env = make("clevr", level="easy").unwrapped
    task = Push("red", "right")
    env.reset(options={"episode": EpisodeSpec(task, "push red right", SPREAD, "easy")})
    _, reward, terminated, truncated, info = env.step(0)  # red, +x
    assert terminated and not truncated and info["is_success"]
    assert reward > SUCCESS_BONUS  # bonus plus positive progress
    env.reset(options={"episode": EpisodeSpec(task, "push red right", SPREAD, "easy")})
    assert env.max_episode_steps == 5  # the easy level's short limit
    for t in range(env.max_episode_steps):
        _, _, terminated, truncated, info = env.step(1 * 8 + 1)  # keep pushing blue backwards
        assert not terminated and info["is_success"] is False
    assert truncated


def test_reset_options_task_spec_and_initial_state():
    env = make("clevr").unwrapped
    spec = Relation("green", "cyan", "front").spec()
    obs, info = env.reset(options={"task": spec, "initial_state": SPREAD})
    np.testing.assert_allclose(obs, SPREAD, atol=1e-6)
    assert info["task"] == spec
    assert info["instruction"] in Relation("green", "cyan", "front").instructions("train")
    with pytest.raises(ValueError, match="initial_state"):
        env.reset(options={"task": spec, "initial_state": np.zeros(7)})


def test_render_rgb_frame():
    env = make("clevr", render_mode="rgb_array", render_size=(96, 128)).unwrapped
    env.reset(seed=0)
    frame = env.render()
    env.close()
    assert frame.shape == (96, 128, 3) and frame.dtype == np.uint8
    assert frame.std() > 5  # not a blank image: table and coloured balls


@pytest.mark.slow
def test_expert_action_probabilities_are_the_distribution_it_acts_from():
    """The expert's stated distribution equals the frequencies of its actions in one state
    (ties broken at random, epsilon exploration uniform), and it sums to one."""
    from imaginebench.experts.clevr import ClevrExpert

    env = gym.make("imaginebench/CLEVR-v0", level="train").unwrapped
    env.reset(seed=3)
    probabilities = ClevrExpert(epsilon=0.3).action_probabilities(env)
    assert probabilities.shape == (40,) and abs(probabilities.sum() - 1) < 1e-12
    assert (probabilities > 0.3 / 40 + 1e-9).sum() >= 1  # the expert's own choices
    state = env.physics.state()
    expert = ClevrExpert(epsilon=0.3, seed=0)
    draws = np.bincount([expert.act(env) for _ in range(1000)], minlength=40) / 1000
    np.testing.assert_array_equal(env.physics.state(), state)  # acting leaves the scene alone
    assert np.abs(draws - probabilities).max() < 0.05  # 1000 draws: std <= 0.016
