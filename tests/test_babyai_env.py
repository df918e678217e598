"""The BabyAI world and gymnasium environment: action semantics, validation, rewards, seeding."""

import gymnasium as gym
import numpy as np
import pytest

import imaginebench  # noqa: F401  (registers the ids)
from imaginebench.envs import get_domain, make
from imaginebench.envs.babyai.env import episode_rewards
from imaginebench.envs.babyai.tasks import GoTo, Open, PickUp, PutNext
from imaginebench.envs.babyai.world import (
    CLOSED,
    LOCKED,
    OPEN,
    Action,
    check_state,
    compose_state,
    legal_states,
    transition,
)

L, R, U, D = Action.LEFT, Action.RIGHT, Action.UP, Action.DOWN


def layout(agent=(3, 3), door=("purple", 3, CLOSED), carried=None, ball=(2, 2)):
    return compose_state(
        ball=("red", *ball),
        box=("green", 4, 5),
        key=("blue", 5, 2),
        door=door,
        agent=agent,
        carried=carried,
    )


def agent_of(s):
    return tuple(int(v) for v in s[13:15])


def test_action_numbering_moves_in_absolute_directions():
    s = layout()
    assert agent_of(transition(s, 0)) == (3, 2)  # left: -col
    assert agent_of(transition(s, 1)) == (3, 4)  # right: +col
    assert agent_of(transition(s, 2)) == (2, 3)  # up: -row
    assert agent_of(transition(s, 6)) == (4, 3)  # down: +row


def test_walls_and_the_door_block_but_objects_can_be_walked_over():
    corner = layout(agent=(1, 1))
    np.testing.assert_array_equal(transition(corner, L), corner)
    np.testing.assert_array_equal(transition(corner, U), corner)
    for door_state in (OPEN, CLOSED, LOCKED):
        front = layout(agent=(3, 6), door=("purple", 3, door_state))
        np.testing.assert_array_equal(transition(front, R), front)  # even an open door blocks
    onto_ball = transition(layout(agent=(2, 3)), L)
    assert agent_of(onto_ball) == (2, 2) and tuple(onto_ball[1:3]) == (2, 2)


def test_pickup_only_from_the_own_cell_and_only_with_empty_hands():
    beside = layout(agent=(2, 3))
    np.testing.assert_array_equal(transition(beside, Action.PICKUP), beside)
    picked = transition(layout(agent=(2, 2)), Action.PICKUP)
    assert tuple(picked[15:17]) == (6, 0) and tuple(picked[1:3]) == (0, 0)
    holding_on_box = layout(agent=(4, 5), carried="ball")
    np.testing.assert_array_equal(transition(holding_on_box, Action.PICKUP), holding_on_box)


def test_drop_refused_on_an_occupied_cell_and_lands_on_the_own_cell():
    on_box = layout(agent=(4, 5), carried="ball")
    np.testing.assert_array_equal(transition(on_box, Action.DROP), on_box)
    dropped = transition(layout(agent=(4, 4), carried="ball"), Action.DROP)
    assert tuple(dropped[1:3]) == (4, 4) and tuple(dropped[15:17]) == (0, 0)
    empty = layout(agent=(4, 4))
    np.testing.assert_array_equal(transition(empty, Action.DROP), empty)


def test_toggle_opens_and_closes_an_adjacent_door_only():
    front = layout(agent=(3, 6))
    opened = transition(front, Action.TOGGLE)
    assert opened[12] == OPEN
    assert transition(opened, Action.TOGGLE)[12] == CLOSED
    for far in ((2, 6), (3, 5)):  # diagonal to the door, two cells away
        s = layout(agent=far)
        np.testing.assert_array_equal(transition(s, Action.TOGGLE), s)


def test_locked_door_needs_a_key_of_its_colour():
    locked = layout(agent=(3, 6), door=("blue", 3, LOCKED))
    assert transition(locked, Action.TOGGLE)[12] == LOCKED  # empty hands
    with_ball = layout(agent=(3, 6), door=("blue", 3, LOCKED), carried="ball")
    assert transition(with_ball, Action.TOGGLE)[12] == LOCKED
    wrong_key = layout(agent=(3, 6), door=("red", 3, LOCKED), carried="key")  # the key is blue
    assert transition(wrong_key, Action.TOGGLE)[12] == LOCKED
    right_key = layout(agent=(3, 6), door=("blue", 3, LOCKED), carried="key")
    opened = transition(right_key, Action.TOGGLE)
    assert opened[12] == OPEN
    assert transition(opened, Action.TOGGLE)[12] == CLOSED  # unlocked for good


@pytest.mark.parametrize(
    "broken, rule",
    [
        ({1: 4, 2: 5}, "two objects in one cell"),  # ball onto the box
        ({11: 6}, "door not on the east wall"),
        ({10: 0}, "door not on the east wall"),
        ({13: 0}, "agent outside the interior"),
        ({4: 7}, "object outside the interior"),
        ({0: 6}, "colour outside"),
        ({12: 3}, "door state"),
        ({15: 6}, "carried slot"),  # claims the ball while it lies on the floor
        ({2: 2.5}, "not finite integers"),
        ({2: np.nan}, "not finite integers"),
    ],
)
def test_illegal_states_are_named_and_rejected_by_reset(broken, rule):
    s = layout()
    for i, v in broken.items():
        s[i] = v
    assert not legal_states(s[None])[0]
    with pytest.raises(ValueError, match=rule):
        check_state(s)
    env = make("babyai").unwrapped
    with pytest.raises(ValueError, match="illegal BabyAI state"):
        env.reset(options={"task": GoTo("ball", "red"), "initial_state": s})


def test_carried_object_must_sit_at_the_origin_with_matching_colour():
    held = layout(agent=(4, 4), carried="ball")
    assert legal_states(held[None])[0]
    wrong_colour = held.copy()
    wrong_colour[16] = 3
    two_held = held.copy()
    two_held[4:6] = 0
    assert not legal_states(np.stack([wrong_colour, two_held])).any()


@pytest.mark.parametrize("level", ["train", "rephrase", "easy", "hard"])
def test_registered_and_seeded_resets_reproduce(level):
    env = gym.make("imaginebench/BabyAI-v0", level=level)
    obs1, info1 = env.reset(seed=7)
    obs2, info2 = env.reset(seed=7)
    assert obs1.shape == (17,) and obs1.dtype == np.float32
    np.testing.assert_array_equal(obs1, obs2)
    assert info1 == info2 and info1["level"] == level and info1["instruction"]
    assert env.observation_space.contains(obs1) and env.action_space.n == 7
    actions = [0, 2, 3, 6, 1, 5, 4]
    first = [env.step(a)[0] for a in actions]
    env.reset(seed=7)
    np.testing.assert_array_equal(first, [env.step(a)[0] for a in actions])
    assert any(not np.array_equal(obs1, env.reset(seed=s)[0]) for s in (8, 9, 10))


def test_layouts_and_other_colours_vary_across_episodes():
    env = make("babyai").unwrapped
    env.reset(seed=0)
    obs = np.stack([env.reset(options={"task": GoTo("ball", "red")})[0] for _ in range(40)])
    assert (obs[:, 0] == 0).all()  # the task's colour
    for colour_slot in (3, 6, 9):  # box, key, door colours are redrawn every episode
        assert len(set(obs[:, colour_slot])) >= 4
    assert len({tuple(o[13:15]) for o in obs}) >= 10 and len(set(obs[:, 10])) >= 4


def test_success_reward_shaping_and_termination():
    env = make("babyai").unwrapped
    task = GoTo("ball", "red")
    start = layout(agent=(2, 4))  # ball at (2, 2): d0 = 2
    env.reset(options={"task": task, "initial_state": start})
    _, away, terminated, _, _ = env.step(R)
    assert away == pytest.approx((2 - 3) / 3) and not terminated
    _, toward, *_ = env.step(L)
    assert toward == pytest.approx((3 - 2) / 3)
    _, closer, terminated, *_ = env.step(L)
    assert closer == pytest.approx((2 - 1) / 3) and not terminated
    _, reward, terminated, truncated, info = env.step(L)
    assert toward > 0 and away < 0
    assert terminated and not truncated and info["is_success"]
    assert reward == pytest.approx(1 - 0.9 * 4 / 128)
    rewards = episode_rewards(task, np.stack(env.trajectory))
    np.testing.assert_allclose(rewards, [away, toward, closer, reward], rtol=1e-6)
    assert get_domain("babyai").episode_rewards is not None


def test_put_next_succeeds_when_object_one_is_dropped_not_object_two():
    """The env judges put-next against the episode's start: dropping the box (object 2) next
    to the ball does not end the episode, dropping the ball next to the box does."""
    env = make("babyai").unwrapped
    task = PutNext("ball", "red", "box", "green")
    start = layout(agent=(4, 5), ball=(2, 2))  # standing on the box at (4, 5)
    env.reset(options={"task": task, "initial_state": start})
    steps = [Action.PICKUP, U, U, L, L, Action.DROP]  # carry the box to (2, 3), east of the ball
    for action in steps[:-1]:
        assert not env.step(action)[2]
    state, reward, terminated, _, info = env.step(steps[-1])
    assert agent_of(state) == (2, 3) and tuple(state[4:6]) == (2, 3)  # the box beside the ball
    assert not terminated and not info["is_success"]
    assert episode_rewards(task, np.stack(env.trajectory))[-1] == pytest.approx(reward)
    env.reset(options={"task": task, "initial_state": layout(agent=(2, 2), ball=(2, 2))})
    for action in (Action.PICKUP, D, D, R):  # the ball from (2, 2) to (4, 3)
        assert not env.step(action)[2]
    _, reward, terminated, _, info = env.step(R)  # (4, 4): west of the box
    assert not terminated
    _, reward, terminated, _, info = env.step(Action.DROP)
    assert terminated and info["is_success"] and reward == pytest.approx(1 - 0.9 * 6 / 128)
    rewards = episode_rewards(task, np.stack(env.trajectory))
    assert rewards[-1] == pytest.approx(reward)


def test_time_limit_truncates_and_rewards_match_the_pure_function():
    env = make("babyai", level="hard").unwrapped
    env.reset(options={"task": Open("grey"), "initial_state": layout(door=("grey", 3, CLOSED))})
    rng = np.random.default_rng(0)
    rewards = []
    for t in range(128):
        _, r, terminated, truncated, info = env.step(int(rng.choice([0, 1, 2, 6])))  # never toggles
        rewards.append(r)
        assert not terminated and info["is_success"] is False and truncated == (t == 127)
    np.testing.assert_allclose(
        episode_rewards(Open("grey"), np.stack(env.trajectory)), rewards, atol=1e-6
    )


def test_reset_options_and_info():
    env = make("babyai").unwrapped
    spec = PickUp("key", "blue").spec()
    obs, info = env.reset(options={"task": spec, "initial_state": layout()})
    np.testing.assert_array_equal(obs, layout())
    assert info["task"] == spec and info["instruction"] in PickUp("key", "blue").instructions()
    assert set(info) == {"instruction", "task", "level", "is_success"}
    with pytest.raises(ValueError, match=r"\[0, 7\)"):
        env.step(7)


def test_render_rgb_frame():
    env = make("babyai", render_mode="rgb_array", tile_size=16).unwrapped
    env.reset(seed=0)
    frame = env.render()
    assert frame.shape == (128, 128, 3) and frame.dtype == np.uint8 and frame.std() > 5
