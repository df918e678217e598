"""Meta-World task suite, wordings and success functions on hand-constructed 91-d states (no
simulator)."""

import numpy as np
import pytest

from imaginebench.envs.base import LEVELS, Task
from imaginebench.envs.metaworld import instructions as text
from imaginebench.envs.metaworld.env import SUCCESS_REWARD, episode_rewards
from imaginebench.envs.metaworld.layout import (
    ENTITIES,
    STATE_DIM,
    TARGET,
    TASK_ENTITIES,
    TASK_NAMES,
    TCP_OFFSET,
    entity_pos,
    entity_slice,
    pack_state,
)
from imaginebench.envs.metaworld.suite import (
    EASY_TASKS,
    HARD_TASKS,
    TRAIN_TASKS,
    MetaWorldTaskSuite,
)
from imaginebench.envs.metaworld.tasks import (
    COFFEE_BUTTON_TRAVEL,
    NAIL_REST_Y,
    UNLOCK_TO_OPEN_GOAL,
    MetaWorldTask,
    stage2_goal,
)

GOAL = np.array([0.05, 0.8, 0.15])
HAND = np.array([0.0, 0.6, 0.2])
QUAT = np.array([1.0, 0.0, 0.0, 0.0])


def history(name, *steps, goal=GOAL):
    """States ``(T, 91)`` of task ``name``: each step a dict entity -> position (the hand under
    the key ``"hand"``), every state with the goal ``goal`` in the target slot."""
    out = []
    for step in steps:
        entities = {
            e: np.concatenate([step.get(e, [0.3, 0.7, 0.1]), QUAT]) for e in TASK_ENTITIES[name]
        }
        out.append(pack_state(step.get("hand", HAND), 1.0, goal, entities))
    return np.stack(out)


def shifted(axis_offset):
    return GOAL + np.asarray(axis_offset, dtype=float)


def test_layout_is_the_references_entity_slots():
    assert STATE_DIM == 91 and len(ENTITIES) == 12
    starts = {e: entity_slice(e).start for e in ENTITIES}
    assert starts == {
        "target_object": 7, "button": 14, "lock": 21, "handle": 28, "window": 35, "faucet": 42,
        "wall": 49, "coffee": 56, "coffee_button": 63, "hammer": 70, "nail": 77, "soccer": 84,
    }  # fmt: skip
    assert entity_slice("soccer").stop == STATE_DIM
    for wall_task in ("reach-wall", "push-wall", "pick-place-wall", "button-press-wall"):
        assert TASK_ENTITIES[wall_task][1] == "wall"
    assert TASK_ENTITIES["make-coffee"] == ("coffee", "coffee_button")
    assert TASK_ENTITIES["locked-door-open"] == ("lock", "handle")
    with pytest.raises(ValueError, match="unknown Meta-World entity"):
        entity_slice("cup")


# (task, the entity that moves, a position that succeeds, one that fails), goal = GOAL
SINGLE_STAGE = [
    ("push", "target_object", shifted([0.03, -0.03, 0]), shifted([0.04, -0.04, 0])),
    ("pick-place", "target_object", shifted([0.0, 0.0, -0.069]), shifted([0.0, 0.0, -0.071])),
    ("push-wall", "target_object", shifted([0.05, 0.04, 0]), shifted([0.05, 0.05, 0])),
    ("pick-place-wall", "target_object", shifted([0.0, 0.069, 0]), shifted([0.0, 0.071, 0])),
    ("coffee-push", "coffee", shifted([0.0, -0.069, 0]), shifted([0.0, -0.071, 0])),
    ("button-press", "button", shifted([0.3, 0.019, 0.3]), shifted([0.0, -0.021, 0.0])),
    ("coffee-button", "coffee_button", shifted([0.2, -0.019, 0.2]), shifted([0.0, 0.021, 0.0])),
    ("button-press-wall", "button", shifted([0.1, 0.029, 0.0]), shifted([0.0, 0.031, 0.0])),
    ("door-unlock", "lock", shifted([0.019, 0.3, 0.3]), shifted([0.021, 0.0, 0.0])),
    ("door-open", "handle", shifted([-0.079, 0.2, 0.0]), shifted([0.081, 0.0, 0.0])),
    ("window-open", "window", shifted([0.049, 0.3, 0.0]), shifted([-0.051, 0.0, 0.0])),
    ("window-close", "window", shifted([-0.049, 0.1, 0.1]), shifted([0.051, 0.0, 0.0])),
    ("door-lock", "lock", shifted([0.3, 0.3, 0.019]), shifted([0.0, 0.0, -0.021])),
    ("door-close", "handle", shifted([0.0, 0.079, 0.0]), shifted([0.0, 0.081, 0.0])),
    ("faucet-close", "faucet", shifted([-0.069, 0.0, 0.0]), shifted([-0.071, 0.0, 0.0])),
    # Meta-World judges faucet-open's handle 0.04 m left of and 0.03 m above its reading
    ("faucet-open", "faucet", shifted([0.109, 0.0, -0.03]), shifted([0.111, 0.0, -0.03])),
    ("soccer", "soccer", shifted([0.0, 0.069, 0.0]), shifted([0.06, 0.0, 0.04])),
]


@pytest.mark.parametrize(
    "name, entity, good, bad", SINGLE_STAGE, ids=[case[0] for case in SINGLE_STAGE]
)
def test_single_stage_success_on_constructed_states(name, entity, good, bad):
    task = MetaWorldTask(name)
    far = GOAL + np.array([0.3, -0.2, 0.1])
    states = history(name, {entity: far}, {entity: bad}, {entity: good}, {entity: bad})
    assert task.success(states).tolist() == [False, False, True, False]
    assert task.is_success(states[:3]) and not task.is_success(states)
    dense = task.dense_reward(states)
    assert ((dense >= 0) & (dense <= 10)).all() and dense[2] > dense[0]
    assert not task.stage(states).any()


def test_reach_is_judged_at_the_tool_centre_point():
    for name in ("reach", "reach-wall"):
        task = MetaWorldTask(name)
        at_goal = GOAL - TCP_OFFSET  # the fingertips on the goal
        states = history(
            name,
            {"hand": HAND},
            {"hand": at_goal + [0.049, 0, 0]},
            {"hand": at_goal + [0, 0, 0.051]},
            {"hand": GOAL},  # the hand body on the goal leaves the fingertips 4.5 cm below
        )
        assert task.success(states).tolist() == [False, True, False, True]
        states[-1, 2] -= 0.01  # fingertips 5.5 cm below the goal
        assert not task.success(states)[-1]


def test_hammer_needs_the_nail_driven_in_more_than_0_09():
    task = MetaWorldTask("hammer")
    rest = np.array([0.24, NAIL_REST_Y, 0.11])
    hammer_far = {"hammer": [0.0, 0.45, 0.0]}
    states = history(
        "hammer",
        {**hammer_far, "nail": rest},
        {**hammer_far, "nail": rest + [0, 0.09, 0]},
        {**hammer_far, "nail": rest + [0, 0.091, 0]},
        goal=np.array([0.24, 0.74, 0.11]),
    )
    assert task.success(states).tolist() == [False, False, True]
    # the hammer itself at the goal does not count
    states[:, entity_pos("hammer")] = [0.24, 0.74, 0.11]
    states[:, entity_pos("nail")] = rest
    assert not task.success(states).any()


def make_coffee_states(*steps):
    """make-coffee histories: each step (mug placed?, button pressed?)."""
    button0 = np.array([0.05, 0.75, 0.3])
    out = []
    for placed, pressed in steps:
        mug = GOAL + ([0.0, 0.06, 0.0] if placed else [0.0, -0.15, 0.0])
        button = button0 + ([0.0, COFFEE_BUTTON_TRAVEL - 0.015, 0.0] if pressed else 0.0)
        out.append({"coffee": mug, "coffee_button": button})
    return history("make-coffee", {"coffee": GOAL - [0, 0.15, 0], "coffee_button": button0}, *out)


def test_make_coffee_needs_the_mug_under_the_nozzle_and_the_button_pressed():
    task = MetaWorldTask("make-coffee")
    s = make_coffee_states((True, False), (True, True))
    assert task.success(s).tolist() == [False, False, True]
    assert task.stage(s).tolist() == [0, 1, 1]
    # the original judged stage 2 on the mug: pushing the mug alone made coffee
    assert not task.success(make_coffee_states((True, False), (True, False))).any()
    # pressing the button with the mug elsewhere makes no coffee
    assert not task.success(make_coffee_states((False, True), (False, True))).any()
    # nor does knocking the mug away before pressing
    assert task.success(make_coffee_states((True, False), (False, True))).tolist() == [False] * 3
    dense = task.dense_reward(s)
    assert dense[0] < 5.0 <= dense[1] < dense[2] <= 10.0


def locked_door_states(*steps, goal=GOAL):
    """locked-door-open histories: each step (unlocked?, handle at the open goal?, lock at the
    open goal?)."""
    open_goal = goal + UNLOCK_TO_OPEN_GOAL
    lock0, handle0 = goal - [0.1, -0.04, 0.0], goal + [0.04, -0.05, -0.11]
    out = []
    for unlocked, handle_open, lock_there in steps:
        lock = goal + [0.01, 0.0, 0.0] if unlocked else lock0
        if lock_there:
            lock = open_goal + [0.02, 0.1, 0.0]
        handle = open_goal + [0.07, 0.05, 0.0] if handle_open else handle0
        out.append({"lock": lock, "handle": handle})
    return history("locked-door-open", {"lock": lock0, "handle": handle0}, *out, goal=goal)


def test_locked_door_open_needs_unlocking_first_and_is_judged_on_the_handle():
    task = MetaWorldTask("locked-door-open")
    s = locked_door_states((True, False, False), (True, True, False))
    assert task.success(s).tolist() == [False, False, True]
    assert task.stage(s).tolist() == [0, 1, 1]
    # the door swinging the lock away afterwards does not undo the unlocking
    s = locked_door_states((True, False, False), (False, True, False))
    assert task.success(s).tolist() == [False, False, True]
    # never unlocked: no success even with the handle at the goal
    assert not task.success(locked_door_states((False, True, False))).any()
    # the original judged stage 2 on the lock: the lock at the goal is not an open door
    assert not task.success(locked_door_states((True, False, False), (False, False, True))).any()


def test_a_composition_shows_stage_2_goal_once_stage_1_is_reached():
    """``observed`` (the env's and the imagination's observation rule): the last state's
    target is stage 2's goal from the step stage 1 is reached on, the initial one before;
    single-stage tasks show their states unchanged."""
    task = MetaWorldTask("locked-door-open")
    s = locked_door_states((False, False, False), (True, False, False), (False, False, False))
    shown = [task.observed(s[: t + 1]) for t in range(len(s))]
    for t in (0, 1):
        np.testing.assert_array_equal(shown[t], s[t])
    for t in (2, 3):  # unlocked at step 2; the lock turning back does not undo the switch
        np.testing.assert_allclose(shown[t][TARGET], GOAL + UNLOCK_TO_OPEN_GOAL)
        np.testing.assert_array_equal(np.delete(shown[t], TARGET), np.delete(s[t], TARGET))
    coffee = make_coffee_states((False, False), (True, False))
    np.testing.assert_allclose(
        MetaWorldTask("make-coffee").observed(coffee)[TARGET],
        stage2_goal("make-coffee", coffee),
    )
    push = history("push", {"target_object": GOAL}, {"target_object": GOAL})
    np.testing.assert_array_equal(MetaWorldTask("push").observed(push), push[-1])


def test_a_composition_shows_its_current_stage_as_that_training_task():
    """``as_stage_task``: before stage 1 is reached, a training wording of stage 1's task and
    every entry in view but stage 2's entity slots; from then on stage 2's task's wording,
    without stage 1's entities; the same wording for the same instruction. Single-stage
    tasks keep their words and every entry."""
    task = MetaWorldTask("locked-door-open")
    s = locked_door_states((False, False, False), (True, False, False), (False, False, False))
    words = task.instructions()[3]
    shown = [task.as_stage_task(s[: t + 1], words) for t in range(len(s))]
    lock, handle = entity_slice("lock"), entity_slice("handle")
    assert shown[0][0] == shown[1][0] and shown[0][0] in text.wordings("door-unlock", "train")
    assert shown[2][0] == shown[3][0] and shown[2][0] in text.wordings("door-open", "train")
    for t, (_, in_view) in enumerate(shown):
        hidden = handle if t < 2 else lock
        expected = np.ones(STATE_DIM, dtype=bool)
        expected[hidden] = False
        np.testing.assert_array_equal(in_view, expected)
    others = {task.as_stage_task(s, w)[0] for w in task.instructions()}
    assert len(others) > 1  # the wording varies with the rollout's own instruction
    coffee = make_coffee_states((False, False), (True, False))
    first_words, first = MetaWorldTask("make-coffee").as_stage_task(coffee[:1], words)
    assert first_words in text.wordings("coffee-push", "train")
    assert not first[entity_slice("coffee_button")].any() and first[entity_slice("coffee")].all()
    second = MetaWorldTask("make-coffee").as_stage_task(coffee, words)[1]
    assert not second[entity_slice("coffee")].any() and second[entity_slice("coffee_button")].all()
    push = history("push", {"target_object": GOAL}, {"target_object": GOAL})
    same_words, same = MetaWorldTask("push").as_stage_task(push, "Push it.")
    assert same_words == "Push it." and same.all() and same.shape == (STATE_DIM,)


def test_two_stage_targets_come_from_the_initial_state():
    """A moved target slot (an imagined rollout drifting its goal) does not change judgement."""
    task = MetaWorldTask("push")
    states = history("push", {"target_object": GOAL + [0.3, 0, 0]}, {"target_object": GOAL})
    assert task.success(states)[-1]
    states[1, 4:7] += 0.5
    assert task.success(states)[-1]


def test_episode_rewards_are_dense_differences_and_10_on_success():
    task = MetaWorldTask("push")
    path = [GOAL + [0.3 - 0.1 * k, 0.0, 0.0] for k in range(4)]  # reaches the goal at step 3
    states = history("push", *({"target_object": p, "hand": p} for p in path))
    actions = np.zeros((3, 4))
    rewards = episode_rewards(task, states, actions)
    dense = task.dense_reward(states)
    np.testing.assert_allclose(rewards[:2], np.diff(dense)[:2], rtol=1e-5)
    assert rewards[2] == SUCCESS_REWARD and rewards.dtype == np.float32
    assert (rewards[:2] > 0).all()
    batch = episode_rewards(task, np.stack([states] * 2), np.stack([actions] * 2))
    assert batch.shape == (2, 3)
    with pytest.raises(ValueError, match="actions must have shape"):
        episode_rewards(task, states, actions[:2])
    with pytest.raises(TypeError, match="not a Meta-World task"):
        from imaginebench.envs.halfcheetah.tasks import Run

        episode_rewards(Run("forward"), states, actions)


def test_judges_are_vectorised_over_leading_dimensions():
    states = np.random.default_rng(0).uniform(-0.2, 1.0, size=(3, 5, 6, STATE_DIM))
    for task in map(MetaWorldTask, TASK_NAMES):
        assert task.success(states).shape == (3, 5, 6)
        assert task.dense_reward(states).shape == (3, 5, 6)
    with pytest.raises(ValueError, match="91 entries"):
        MetaWorldTask("reach").success(np.zeros((4, 90)))
    with pytest.raises(ValueError, match="unknown Meta-World task"):
        MetaWorldTask("juggle")


def test_suite_levels_are_the_references():
    suite = MetaWorldTaskSuite()
    names = {level: [t.name for t in suite.tasks(level)] for level in LEVELS}
    assert names["train"] == names["rephrase"] == list(TRAIN_TASKS)
    assert names["train"] == [
        "reach", "push", "pick-place", "button-press", "door-unlock", "door-open",
        "window-open", "faucet-open", "coffee-push", "coffee-button",
    ]  # fmt: skip
    assert names["easy"] == list(EASY_TASKS) and len(EASY_TASKS) == 8
    assert set(EASY_TASKS) == {
        "reach-wall", "push-wall", "pick-place-wall", "button-press-wall",
        "door-lock", "door-close", "window-close", "faucet-close",
    }  # fmt: skip
    assert names["hard"] == ["make-coffee", "locked-door-open", "hammer", "soccer"]
    assert set(TASK_NAMES) == set(TRAIN_TASKS) | set(EASY_TASKS) | set(HARD_TASKS)
    for task in map(MetaWorldTask, TASK_NAMES):
        assert Task.from_spec(task.spec()) == task


def test_twenty_wordings_per_task_and_disjoint_sets():
    train = {n: MetaWorldTask(n).instructions("train") for n in TRAIN_TASKS}
    rephrase = {n: MetaWorldTask(n).instructions("rephrase") for n in TRAIN_TASKS}
    novel = {n: MetaWorldTask(n).instructions("train") for n in (*EASY_TASKS, *HARD_TASKS)}
    for table in (train, rephrase, novel):
        for name, wordings in table.items():
            assert len(wordings) == 20 and len(set(wordings)) == 20, name
            assert all(w[0].isupper() and w[-1] in ".?" for w in wordings), name
    all_train = {w for ws in train.values() for w in ws}
    all_rephrase = {w for ws in rephrase.values() for w in ws}
    all_novel = {w for ws in novel.values() for w in ws}
    assert len(all_train) == 200 and len(all_rephrase) == 200 and len(all_novel) == 240
    assert not all_train & all_rephrase  # unseen wordings at the rephrase level
    assert not all_novel & (all_train | all_rephrase)  # the novel levels' wordings are unseen
    for name in (*EASY_TASKS, *HARD_TASKS):  # one wording set for the novel levels
        assert MetaWorldTask(name).instructions("rephrase") == novel[name]
    assert "Relocate the gripper to the designated spot." in train["reach"]  # the original's
    with pytest.raises(ValueError, match="wording must be"):
        text.wordings("reach", "formal")


def test_suite_wordings_per_level():
    suite = MetaWorldTaskSuite()
    rng = np.random.default_rng(0)
    push = MetaWorldTask("push")
    for level, wording in [("train", "train"), ("rephrase", "rephrase"), ("easy", "train")]:
        assert suite.wording(level) == wording
    spec = suite.plan_episode("rephrase", {"task": push, "initial_state": np.zeros(91)}, rng)
    assert spec.instruction in push.instructions("rephrase")


# ------------------------------------------------ exact values (mutation testing, issue 26)
# tolerance(m, bound, margin) = 1 / ((3 (m - bound) / margin)^2 + 1) beyond the bound, the
# margin max(m at step 0 - bound, 0.05); potential = 0.25 approach + 0.75 place when the gripper
# handles an entity (approach: bound 0.02, margin 0.3), place alone for reach.


def test_a_distance_exactly_at_the_threshold_succeeds():
    goal = np.array([0.0, 0.8, 0.15])
    lock = goal + [0.02, 0.0, 0.0]  # |0.02 - 0.0| is exactly 0.02
    states = history("door-unlock", {"lock": lock}, goal=goal)
    assert MetaWorldTask("door-unlock").success(states).tolist() == [True]


def test_reach_dense_reward_and_progress_values():
    """tcp 0.45 then 0.25 from the goal: margin 0.4, place 1 / (3^2 + 1), 1 / (1.5^2 + 1)."""
    at_goal = GOAL - TCP_OFFSET
    states = history("reach", {"hand": at_goal + [0.45, 0, 0]}, {"hand": at_goal + [0.25, 0, 0]})
    task = MetaWorldTask("reach")
    np.testing.assert_allclose(task.dense_reward(states), [1.0, 10 / 3.25], rtol=1e-9)
    np.testing.assert_allclose(task.progress(states), [0.1, 1 / 3.25], rtol=1e-9)


def test_push_dense_reward_weighs_approach_and_place():
    """The object 0.25 from the goal (margin 0.2, place 0.1); the tcp 0.17 from the object
    (approach 1 / (1.5^2 + 1)) at step 0 and on it at step 1."""
    obj = GOAL + [0.25, 0.0, 0.0]
    states = history(
        "push",
        {"target_object": obj, "hand": obj - TCP_OFFSET + [0.17, 0, 0]},
        {"target_object": obj, "hand": obj - TCP_OFFSET},
    )
    expected = [10 * (0.25 / 3.25 + 0.75 * 0.1), 10 * (0.25 + 0.75 * 0.1)]
    np.testing.assert_allclose(MetaWorldTask("push").dense_reward(states), expected, rtol=1e-9)


def test_hammer_dense_reward_places_the_nail_against_0():
    """Nail travel 0 then 0.03 of the 0.09 needed: margin 0.09, place 0.1 then 1 / (2^2 + 1);
    the tcp on the hammer (approach 1)."""
    hammer = np.array([0.0, 0.45, 0.0])
    rest = np.array([0.24, NAIL_REST_Y, 0.11])
    grip = {"hammer": hammer, "hand": hammer - TCP_OFFSET}
    states = history(
        "hammer",
        {**grip, "nail": rest},
        {**grip, "nail": rest + [0, 0.03, 0]},
        goal=np.array([0.24, 0.74, 0.11]),
    )
    expected = [10 * (0.25 + 0.75 * 0.1), 10 * (0.25 + 0.75 * 0.2)]
    np.testing.assert_allclose(MetaWorldTask("hammer").dense_reward(states), expected, rtol=1e-9)


def test_composition_dense_reward_is_half_per_stage():
    """locked-door-open: the lock 0.07 (in x) from its goal with the tcp on it: stage 1's
    potential 0.25 + 0.75 * 0.1, halved; then unlocked with the tcp on the handle, 0.18 (in x)
    from the open goal: 5 + half of 0.25 + 0.75 * 0.1."""
    handle = GOAL + UNLOCK_TO_OPEN_GOAL + [0.18, 0.0, 0.0]
    lock0 = GOAL + [0.07, 0.0, 0.0]
    states = history(
        "locked-door-open",
        {"lock": lock0, "handle": handle, "hand": lock0 - TCP_OFFSET},
        {"lock": GOAL, "handle": handle, "hand": handle - TCP_OFFSET},
    )
    task = MetaWorldTask("locked-door-open")
    assert task.stage(states).tolist() == [0, 1]
    np.testing.assert_allclose(task.dense_reward(states), [1.625, 5 + 1.625], rtol=1e-9)


def test_stage_2_goal_is_read_from_the_initial_state():
    """make-coffee: the button pressed 0.03 from where it started at step 0 (not from step 1)."""
    button0 = np.array([0.05, 0.75, 0.3])
    press = button0 + [0.0, COFFEE_BUTTON_TRAVEL, 0.0]
    states = history(
        "make-coffee",
        {"coffee": GOAL, "coffee_button": button0},
        {"coffee": GOAL, "coffee_button": press},
        {"coffee": GOAL, "coffee_button": press},
    )
    assert MetaWorldTask("make-coffee").success(states).tolist() == [False, True, True]
    with pytest.raises(ValueError, match="^'reach' is not a two-stage task$"):
        stage2_goal("reach", states)


def test_stages_are_int_per_trajectory_of_a_batch():
    unlocked = history("door-unlock", {"lock": GOAL}, {"lock": GOAL + [0.3, 0, 0]})
    locked = history("door-unlock", {"lock": GOAL + [0.3, 0, 0]}, {"lock": GOAL + [0.3, 0, 0]})
    batch = np.stack([unlocked, locked])
    for name in ("locked-door-open", "door-unlock"):
        stage = MetaWorldTask(name).stage(batch)
        assert stage.dtype == np.int64 and stage.shape == (2, 2)
    assert MetaWorldTask("locked-door-open").stage(batch).tolist() == [[1, 1], [0, 0]]


def test_default_wording_is_train():
    task = MetaWorldTask("reach")
    assert task.instructions() == task.instructions("train")
