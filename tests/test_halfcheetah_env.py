"""The HalfCheetah gymnasium environment and quality judge: registration, seeding, state layout,
rewards, termination, and the replay judge on real and corrupted transitions."""

import gymnasium as gym
import mujoco
import numpy as np
import pytest

import imaginebench  # noqa: F401  (registers the ids)
from imaginebench.envs import get_domain, make
from imaginebench.envs.base import EpisodeSpec
from imaginebench.envs.halfcheetah.env import episode_rewards
from imaginebench.envs.halfcheetah.quality import HalfCheetahQuality
from imaginebench.envs.halfcheetah.tasks import Jump, JumpInPlace, Run, Shuttle

ALL_TASKS = [Run("forward"), Run("backward"), Jump("forward"), Jump("backward"), JumpInPlace()]


def random_actions(n: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).uniform(-1, 1, size=(n, 6))


@pytest.fixture(scope="module")
def resting() -> np.ndarray:
    """The cheetah standing still on the floor after 40 zero-torque steps."""
    env = make("halfcheetah").unwrapped
    env.reset(seed=0)
    for _ in range(40):
        env.step(np.zeros(6))
    state = env.trajectory[-1].copy()
    state[0] = 0.0
    return state


@pytest.mark.parametrize("level", ["train", "rephrase", "easy", "hard"])
def test_registered_and_seeded_resets_reproduce(level):
    env = gym.make("imaginebench/HalfCheetah-v0", level=level)
    obs1, info1 = env.reset(seed=11)
    obs2, info2 = env.reset(seed=11)
    assert obs1.shape == (18,) and obs1.dtype == np.float32 and obs1[0] == 0.0
    np.testing.assert_array_equal(obs1, obs2)
    assert info1 == info2 and info1["level"] == level and info1["instruction"]
    assert set(info1) == {"instruction", "task", "level", "is_success"}
    assert env.observation_space.contains(obs1)
    assert env.action_space.shape == (6,) and (env.action_space.low == -1).all()
    actions = random_actions(5)
    first = [env.step(a)[0] for a in actions]
    env.reset(seed=11)
    np.testing.assert_array_equal(first, [env.step(a)[0] for a in actions])
    assert not np.array_equal(obs1, env.reset(seed=12)[0])


def test_state_layout_and_dx_at_reset():
    env = make("halfcheetah").unwrapped
    obs, _ = env.reset(seed=3)
    assert obs[0] == 0.0  # not the absolute x of the reset (the original's quirk)
    np.testing.assert_array_equal(obs[1:], env.sim._get_obs().astype(np.float32))
    for action in random_actions(20, seed=3):
        x = float(env.sim.data.qpos[0])
        obs, *_ = env.step(action)
        assert obs[0] == pytest.approx(env.sim.data.qpos[0] - x, abs=1e-6)
        np.testing.assert_array_equal(obs[1:], env.sim._get_obs().astype(np.float32))
    assert len(env.trajectory) == 21


def test_matches_gymnasium_half_cheetah_v5():
    """Same physics and reward terms as HalfCheetah-v5 started from the same state."""
    env = make("halfcheetah").unwrapped
    start = env.reset(seed=5, options={"task": Run("forward")})[0]
    ref = gym.make("HalfCheetah-v5").unwrapped
    ref.reset(seed=0)
    mujoco.mj_resetData(ref.model, ref.data)
    ref.set_state(np.concatenate([[0.0], start[1:9]]), start[9:])
    for action in random_actions(30, seed=5):
        obs, reward, *_ = env.step(action)
        ref_obs, ref_reward, _, _, info = ref.step(action)
        np.testing.assert_array_equal(obs[1:], ref_obs.astype(np.float32))
        assert reward == pytest.approx(info["reward_forward"] + info["reward_ctrl"], abs=1e-4)
        assert reward == pytest.approx(ref_reward, abs=1e-4)
    np.testing.assert_array_equal(env.sim.model.jnt_range, ref.model.jnt_range)


def test_rewards_per_task_match_the_pure_function():
    env = make("halfcheetah").unwrapped
    actions = random_actions(25, seed=1)
    for task in [*ALL_TASKS, Shuttle("forward"), Run("backward", fast=True)]:
        env.reset(seed=1, options={"task": task})
        rewards = [env.step(a)[1] for a in actions]
        states = np.stack(env.trajectory)
        np.testing.assert_allclose(episode_rewards(task, states, actions), rewards, rtol=1e-6)
        np.testing.assert_allclose(
            get_domain("halfcheetah").episode_rewards(task, states, actions), rewards, rtol=1e-6
        )
    forward = states[1:, 0] / 0.05
    ctrl = -0.1 * (actions**2).sum(axis=1)
    expected = {
        Run("forward"): forward + ctrl,
        Jump("forward"): forward + ctrl,
        Run("backward"): -forward + ctrl,
        Jump("backward"): -forward + ctrl,
        Shuttle("backward"): np.abs(forward) + ctrl,
        JumpInPlace(): -np.abs(forward) + ctrl,
    }
    for task, want in expected.items():
        np.testing.assert_allclose(episode_rewards(task, states, actions), want, rtol=1e-5)
    batch = episode_rewards(Run("forward"), np.stack([states, states]), np.stack([actions] * 2))
    assert batch.shape == (2, 25) and batch.dtype == np.float32
    with pytest.raises(ValueError, match="actions must have shape"):
        episode_rewards(Run("forward"), states, actions[:-1])


@pytest.mark.parametrize("task", ALL_TASKS, ids=lambda t: t.spec())
def test_zero_torques_fail_and_truncate_after_200_steps(task):
    env = make("halfcheetah").unwrapped
    env.reset(seed=4, options={"task": task})
    for t in range(200):
        _, _, terminated, truncated, info = env.step(np.zeros(6))
        assert not terminated and info["is_success"] is False and truncated == (t == 199)
    assert len(env.trajectory) == 201


def test_a_launch_from_the_floor_is_a_jump_and_terminates(resting):
    env = make("halfcheetah").unwrapped
    launch = resting.copy()
    launch[9:11] = (2.0, 3.0)  # 2 m/s forward, 3 m/s up: about 0.4 m of clearance
    for task, solved in [(Jump("forward"), True), (Jump("backward"), False), (JumpInPlace(), True)]:
        env.reset(options={"task": task, "initial_state": launch})
        for _ in range(30):
            _, _, terminated, truncated, info = env.step(np.zeros(6))
            if terminated:
                break
        assert terminated is solved and info["is_success"] is solved and not truncated
    straight_up = resting.copy()
    straight_up[10] = 3.0
    env.reset(
        options={"episode": EpisodeSpec(Jump("forward"), "Jump forward.", straight_up, "train")}
    )
    assert not any(env.step(np.zeros(6))[2] for _ in range(30))  # jumped, but did not move on


def test_reset_options_and_bad_input(resting):
    env = make("halfcheetah").unwrapped
    spec = Shuttle("backward").spec()
    obs, info = env.reset(options={"task": spec, "initial_state": resting})
    np.testing.assert_array_equal(obs, resting)
    assert info["task"] == spec and info["instruction"] in Shuttle("backward").instructions()
    moved = resting.copy()
    moved[0] = 0.3
    with pytest.raises(ValueError, match="Δx"):
        env.reset(options={"initial_state": moved})
    with pytest.raises(ValueError, match="initial_state"):
        env.reset(options={"initial_state": np.zeros(17)})
    env.reset(seed=0)
    with pytest.raises(ValueError, match="6 finite"):
        env.step(np.zeros(5))
    with pytest.raises(ValueError, match="6 finite"):
        env.step(np.full(6, np.nan))


def test_quality_judge_accepts_real_rollouts_and_rejects_corrupted_ones():
    env = make("halfcheetah").unwrapped
    judge = get_domain("halfcheetah").make_quality()
    assert isinstance(judge, HalfCheetahQuality)
    env.reset(seed=2)
    actions = np.concatenate([random_actions(40, seed=2), np.sign(random_actions(40, seed=9))])
    for a in actions:
        env.step(a)
    states = np.stack(env.trajectory)
    assert judge.legal(states).all()
    assert judge.correct_transitions(states, actions).all()
    assert not judge.correct_transitions(states, -actions).any()  # other torques
    frozen = np.repeat(states[:1], len(states), axis=0)
    assert not judge.correct_transitions(frozen, actions).any()
    for index, offset in [(0, 0.1), (1, 0.1), (5, 0.1), (9, 2.0), (15, 2.0)]:  # Δx, z, joint, v
        bad = states.copy()
        bad[20, index] += offset
        correct = judge.correct_transitions(bad, actions)
        assert not correct[19] and correct[:19].all() and correct[21:].all()


def test_quality_judge_legality():
    judge = HalfCheetahQuality()
    base = judge.simulate(np.zeros(18), np.zeros(6))
    base[0] = 0.0
    assert judge.legal(base[None])[0]
    low, high = judge.model.jnt_range[3 + 2]  # bfoot
    cases = {
        "nan": (4, np.nan),
        "joint beyond its range": (5, high + 0.5),
        "joint below its range": (5, low - 0.5),
        "speeding": (9, 40.0),
        "jump in x": (0, 2.0),
        "spinning joint": (14, 100.0),
        "under the floor": (1, -1.0),
    }
    bad = np.repeat(base[None], len(cases), axis=0)
    for row, (index, value) in enumerate(cases.values()):
        bad[row, index] = value
    assert not judge.legal(bad).any()
    flipped = base.copy()
    flipped[2] = 7.0  # torso pitch is unbounded (the cheetah may flip)
    flipped[1] = 0.5
    assert judge.legal(flipped[None])[0]
    states = np.stack([base, bad[0], base])
    assert judge.correct_transitions(states, np.zeros((2, 6))).tolist() == [False, False]
    with pytest.raises(ValueError, match="actions must have shape"):
        judge.correct_transitions(states, np.zeros((3, 6)))


def test_render_rgb_frame():
    env = make("halfcheetah", render_mode="rgb_array", render_size=(48, 64)).unwrapped
    env.reset(seed=0)
    frame = env.render()
    assert frame.shape == (48, 64, 3) and frame.dtype == np.uint8 and frame.std() > 5
    env.close()
