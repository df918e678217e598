"""LIBERO task suite, wordings, success functions and rewards on hand-constructed 44-d states
(no simulator: these run without the ``libero`` extra)."""

import numpy as np
import pytest

from imaginebench.envs.base import LEVELS, Task
from imaginebench.envs.libero import instructions as text
from imaginebench.envs.libero.env import episode_rewards
from imaginebench.envs.libero.layout import (
    ENTITIES,
    OBJECTS,
    STATE_DIM,
    entity_pos,
    entity_slice,
    pack_state,
)
from imaginebench.envs.libero.suite import (
    EASY_TASKS,
    HARD_TASKS,
    TRAIN_TASKS,
    LiberoTaskSuite,
)
from imaginebench.envs.libero.tasks import OUT_OF_DISTANCE, TASK_NAMES, LiberoTask

QUAT = np.array([0.0, 0.0, 0.0, 1.0])
HOME = {  # the reference layout (object positions at rest)
    "alphabet_soup": [-0.12, -0.24, 0.038],
    "cream_cheese": [-0.15, 0.06, 0.009],
    "salad_dressing": [0.05, -0.10, 0.073],
    "basket": [0.0, 0.27, -0.005],
}
HAND = [-0.15, 0.0, 0.26]


def history(*steps):
    """States ``(T, 44)``: each step a dict entity -> position (the end effector under
    ``"eef"``); unnamed entities stay at :data:`HOME`."""
    out = []
    for step in steps:
        entities = {e: np.concatenate([step.get(e, HOME[e]), QUAT]) for e in ENTITIES}
        out.append(pack_state(np.zeros(7), step.get("eef", HAND), QUAT, [0.02, -0.02], entities))
    return np.stack(out)


def in_basket(z=0.06):
    return [0.01, 0.28, z]


def test_layout_is_the_references():
    assert STATE_DIM == 44
    assert {e: entity_slice(e).start for e in ENTITIES} == {
        "alphabet_soup": 16,
        "cream_cheese": 23,
        "salad_dressing": 30,
        "basket": 37,
    }


def test_levels_tasks_and_wordings_are_the_references():
    suite = LiberoTaskSuite()
    counts = {level: len(suite.tasks(level)) for level in LEVELS}
    assert counts == {"train": 6, "rephrase": 6, "easy": 12, "hard": 13}
    assert [t.name for t in suite.tasks("rephrase")] == list(TRAIN_TASKS)
    assert len(TASK_NAMES) == 31 and len(EASY_TASKS) == 12 and len(HARD_TASKS) == 13
    # 91 distinct sentences, each naming exactly one task
    assert len(text.instruction_table()) == 91
    pick = LiberoTask("pick-cream_cheese")
    assert pick.instructions("train") == ["Employ the gripper to seize the cream_cheese."]
    assert len(pick.instructions("rephrase")) == 10
    assert not set(pick.instructions("train")) & set(pick.instructions("rephrase"))
    for task in suite.tasks("hard"):
        assert task.instructions("train") == task.instructions("rephrase")
        assert len(task.instructions()) == 1
    assert text.task_of_instruction(" Transfer the salad_dressing to the basket. ") == (
        "place-salad_dressing"
    )
    with pytest.raises(ValueError, match="not a LIBERO instruction"):
        text.task_of_instruction("Transfer the salad dressing to the basket.")


def test_tasks_round_trip_their_spec_and_reject_unknown_names():
    for name in TASK_NAMES:
        assert Task.from_spec(LiberoTask(name).spec()) == LiberoTask(name)
    with pytest.raises(ValueError, match="unknown LIBERO task"):
        LiberoTask("pick-milk")


def test_pick_needs_the_hand_at_the_object_while_it_moves():
    task = LiberoTask("pick-alphabet_soup")
    soup = np.array(HOME["alphabet_soup"])
    at = {"eef": soup + [0, 0, 0.01]}
    # hand at the soup, soup nudged by 1 mm: grasped; hand at it but soup still: not yet
    assert task.success(history(at, {**at, "alphabet_soup": soup + [0.001, 0, 0]})).tolist() == [
        False,
        True,
    ]
    assert not task.success(history(at, at)).any()
    # moved earlier (hand away), then at rest by the hand: movement counts since the last step
    pushed = soup + [0.01, 0, 0]
    earlier = history({}, {"alphabet_soup": pushed}, {**at, "alphabet_soup": pushed})
    assert not task.success(earlier).any()
    # the soup moves but the hand is 6 cm away: not a grasp
    far = {"eef": soup + [0.06, 0, 0]}
    assert not task.success(history(far, {**far, "alphabet_soup": soup + [0, 0, 0.01]})).any()


def test_place_thresholds_are_the_references_and_taller_for_the_salad_dressing():
    place = LiberoTask("place-cream_cheese")
    assert place.success(history({"cream_cheese": in_basket(0.14)}))[0]
    assert not place.success(history({"cream_cheese": in_basket(0.16)}))[0]  # z 0.165 > 0.155
    assert not place.success(history({"cream_cheese": [0.0, 0.42, 0.0]}))[0]  # xy 0.15
    dressing = LiberoTask("pick-and-place-salad_dressing")
    assert dressing.success(history({"salad_dressing": in_basket(0.2)}))[0]  # z 0.205 < 0.22
    assert not dressing.success(history({"salad_dressing": in_basket(0.22)}))[0]


def test_pick_to_reach_and_out_of():
    to = LiberoTask("pick-alphabet_soup-and-place-to-salad_dressing")
    dressing = np.array(HOME["salad_dressing"])
    assert to.success(history({"alphabet_soup": dressing + [0.09, 0, -0.03]}))[0]
    assert not to.success(history({"alphabet_soup": dressing + [0.11, 0, -0.03]}))[0]
    reach = LiberoTask("reach-cream_cheese")
    cheese = np.array(HOME["cream_cheese"])
    assert reach.success(history({"eef": cheese + [0, 0, 0.049]}))[0]
    assert not reach.success(history({"eef": cheese + [0, 0, 0.051]}))[0]
    for obj, limit in OUT_OF_DISTANCE.items():
        task = LiberoTask(f"pick-out-of-{obj}")
        basket = np.array(HOME["basket"])
        assert not task.success(history({obj: basket + [0, -(limit - 0.01), 0]}))[0]
        assert task.success(history({obj: basket + [0, -(limit + 0.01), 0]}))[0]


def test_sequential_counts_each_object_once_in_the_basket_at_any_step():
    task = LiberoTask("sequential-pick-and-place-cream_cheese-and-alphabet_soup")
    cheese_in = {"cream_cheese": in_basket()}
    both = {"cream_cheese": [0.3, 0.3, 0.0], "alphabet_soup": in_basket()}  # cheese taken out
    assert task.success(history({}, cheese_in, both)).tolist() == [False, False, True]
    assert not task.success(history({}, cheese_in, cheese_in)).any()


def test_all_needs_the_salad_dressing_too():
    """Defect fixed: the original checked the cream cheese twice and never the dressing."""
    task = LiberoTask("sequential-pick-and-place-all")
    two = {"alphabet_soup": in_basket(), "cream_cheese": in_basket()}
    assert not task.success(history({}, two)).any()
    three = {**two, "salad_dressing": in_basket()}
    assert task.success(history({}, three))[-1]


def test_aside_is_measured_from_the_initial_state():
    """Defect fixed: the original measured from the state after the first step, so an object
    moved 5 cm on step 1 and 5 more on step 2 never counted as moved 10 cm."""
    task = LiberoTask("pick-and-place-aside-salad_dressing")
    d = np.array(HOME["salad_dressing"])
    steps = history({}, {"salad_dressing": d + [0.05, 0, 0]}, {"salad_dressing": d + [0.1, 0, 0]})
    assert task.success(steps).tolist() == [False, False, True]


def test_first_step_compares_with_the_episodes_own_initial_state():
    """Defect fixed: the original's first grasp check and shaping reward compared with the
    previous episode's last state. Here a step-0 state never grasps (it has no earlier step),
    and step 1 is judged against the episode's own initial state (the env's side of this is
    tested in test_libero_env.py)."""
    task = LiberoTask("pick-cream_cheese")
    cheese = np.array(HOME["cream_cheese"])
    start = {"eef": cheese + [0, 0, 0.2]}
    moved_near = {"eef": cheese + [0, 0, 0.01], "cream_cheese": cheese + [0, 0.002, 0]}
    assert not task.success(history(moved_near)).any()  # an initial state alone grasps nothing
    reward = task.rewards(history(start, moved_near))
    assert reward[0] == pytest.approx(20 * (0.2 - np.hypot(0.01, 0.002)) + 1.0)


def test_rewards_follow_the_original_shaping():
    task = LiberoTask("pick-and-place-alphabet_soup")
    soup = np.array(HOME["alphabet_soup"])
    basket = np.array(HOME["basket"])
    s = history(
        {"eef": soup + [0, 0, 0.10]},
        {"eef": soup + [0, 0, 0.01]},  # approach: 20 x 0.09
        {"eef": soup + [0, 0, 0.06], "alphabet_soup": soup + [0, 0, 0.05]},  # grasp (+1)
        {"eef": soup + [0, 0.1, 0.06], "alphabet_soup": soup + [0, 0.1, 0.05]},  # carry
    )
    r = task.rewards(s)
    assert r[0] == pytest.approx(20 * 0.09, abs=1e-6)
    # the grasp step is still shaped by the hand-object distance (the original's order): 0
    assert r[1] == pytest.approx(1.0, abs=1e-6)
    d = np.linalg.norm(soup + [0, 0, 0.05] - basket) - np.linalg.norm(
        soup + [0, 0.1, 0.05] - basket
    )
    assert r[2] == pytest.approx(20 * d, abs=1e-6)
    np.testing.assert_allclose(episode_rewards(task, s, np.zeros((3, 7))), r, rtol=1e-6)
    with pytest.raises(ValueError, match="actions must have shape"):
        episode_rewards(task, s, np.zeros((2, 7)))


def test_progress_grows_with_the_stages():
    task = LiberoTask("sequential-pick-and-place-alphabet_soup-and-cream_cheese")
    soup = np.array(HOME["alphabet_soup"])
    s = history(
        {},
        {"eef": soup + [0, 0, 0.01], "alphabet_soup": soup + [0, 0, 0.002]},  # grasped
        {"alphabet_soup": in_basket()},  # placed
    )
    progress = task.progress(s)
    assert progress[0] < progress[1] < progress[2] <= 1.0


def test_bad_states_are_rejected():
    with pytest.raises(ValueError, match="LIBERO states must have 44 entries"):
        LiberoTask("reach-alphabet_soup").success(np.zeros((3, 43)))
    assert len(OBJECTS) == 3 and entity_pos("basket") == slice(37, 40)


def _at(**positions):
    """One step with entities (and ``eef``) at the given positions, the rest at HOME."""
    return {name: np.asarray(p, dtype=np.float64) for name, p in positions.items()}


ORIGIN = [0.0, 0.0, 0.0]


@pytest.mark.parametrize(
    ("task", "step_at", "step_inside"),
    [  # each threshold exactly (not success: all are strict) and just inside it
        (
            "reach-cream_cheese",
            _at(eef=[0.05, 0, 0], cream_cheese=ORIGIN),
            _at(eef=[0.0499, 0, 0], cream_cheese=ORIGIN),
        ),
        (
            "place-alphabet_soup",
            _at(alphabet_soup=[0.14, 0, 0], basket=ORIGIN),
            _at(alphabet_soup=[0.1399, 0, 0], basket=ORIGIN),
        ),
        (
            "place-alphabet_soup",
            _at(alphabet_soup=[0, 0, 0.155], basket=ORIGIN),
            _at(alphabet_soup=[0, 0, 0.1549], basket=ORIGIN),
        ),
        (
            "place-salad_dressing",
            _at(salad_dressing=[0, 0, 0.22], basket=ORIGIN),
            _at(salad_dressing=[0, 0, 0.2199], basket=ORIGIN),
        ),
        (
            "pick-cream_cheese-and-place-to-salad_dressing",
            _at(cream_cheese=[0.1, 0, 0], salad_dressing=ORIGIN),
            _at(cream_cheese=[0.0999, 0, 0], salad_dressing=ORIGIN),
        ),
        (
            "pick-cream_cheese-and-place-to-salad_dressing",
            _at(cream_cheese=[0, 0, 0.22], salad_dressing=ORIGIN),
            _at(cream_cheese=[0, 0, 0.2199], salad_dressing=ORIGIN),
        ),
        (
            "pick-out-of-alphabet_soup",
            _at(alphabet_soup=[0.45, 0, 0], basket=ORIGIN),
            _at(alphabet_soup=[0.4501, 0, 0], basket=ORIGIN),
        ),
    ],
)
def test_success_thresholds_are_strict(task, step_at, step_inside):
    judge = LiberoTask(task)
    assert judge.success(history(step_at)).tolist() == [False]
    assert judge.success(history(step_inside)).tolist() == [True]


def test_aside_threshold_is_strict():
    task = LiberoTask("pick-and-place-aside-cream_cheese")
    start = _at(cream_cheese=ORIGIN)
    assert task.success(history(start, _at(cream_cheese=[0.07, 0, 0]))).tolist() == [False] * 2
    assert task.success(history(start, _at(cream_cheese=[0.0701, 0, 0]))).tolist() == [
        False,
        True,
    ]


def test_grasp_thresholds_are_strict():
    """A grasp needs the hand strictly within 5 cm and the object moved strictly more than
    0.1 mm since the step before."""
    task = LiberoTask("pick-cream_cheese")
    start = _at(eef=[0.0, 0, 0], cream_cheese=ORIGIN)
    moved = [1e-4 + 1e-7, 0, 0]
    assert not task.success(history(start, _at(eef=[0.0, 0, 0], cream_cheese=[1e-4, 0, 0])))[1]
    assert task.success(history(start, _at(eef=[0.0, 0, 0], cream_cheese=moved)))[1]
    far = [moved[0] + 0.05, 0, 0]  # the hand exactly 5 cm from the moved object
    assert not task.success(history(start, _at(eef=far, cream_cheese=moved)))[1]


def test_the_sequential_tasks_accept_the_taller_basket_height_for_every_object():
    """Placed at 18 cm above the basket: too high for placing the soup (15.5 cm), but the
    sequential tasks judge every object with the taller 22 cm."""
    high = _at(alphabet_soup=[0, 0, 0.18], basket=ORIGIN)
    assert not LiberoTask("place-alphabet_soup").success(history(high))[0]
    task = LiberoTask("sequential-pick-and-place-alphabet_soup-and-cream_cheese")
    cheese_in = _at(cream_cheese=[0.01, 0, 0.01], basket=ORIGIN)
    assert task.success(history(high, cheese_in)).tolist() == [False, True]


def _tasks_histories():
    soup, cheese, basket = (np.array(HOME[e]) for e in ("alphabet_soup", "cream_cheese", "basket"))
    grasp_soup = {"eef": soup + [0, 0, 0.01], "alphabet_soup": soup + [0, 0, 0.002]}
    lifted = {"eef": soup + [0, 0.05, 0.1], "alphabet_soup": soup + [0, 0.05, 0.09]}
    placed = {"eef": basket + [0, 0, 0.15], "alphabet_soup": in_basket()}
    cheese_grasp = {
        "alphabet_soup": in_basket(),
        "eef": cheese + [0, 0, 0.01],
        "cream_cheese": cheese + [0.002, 0, 0],
    }
    cheese_placed = {"alphabet_soup": in_basket(), "cream_cheese": in_basket(0.03)}
    first = history({}, grasp_soup, lifted, placed, cheese_grasp, cheese_placed)
    second = history({}, {"eef": soup + [0, 0, 0.2]}, grasp_soup, grasp_soup, lifted, lifted)
    return np.stack([first, second])


@pytest.mark.parametrize("name", TASK_NAMES)
def test_judges_on_a_batch_of_episodes_match_each_episode(name):
    """Leading dimensions are episodes: every judge gives each episode of a batch what it
    gives that episode alone (distances, latching and the moved test run along time)."""
    task = LiberoTask(name)
    batch = _tasks_histories()
    for judge in (task.success, task.completed, task.rewards, task.progress):
        together = judge(batch)
        for i, episode in enumerate(batch):
            np.testing.assert_array_equal(together[i], judge(episode))


def test_progress_is_the_stages_done_plus_the_closeness_of_the_next():
    task = LiberoTask("pick-and-place-alphabet_soup")
    soup, basket = np.array(HOME["alphabet_soup"]), np.array(HOME["basket"])
    lifted = soup + [0, 0, 0.002]
    s = history(
        {"eef": soup + [0, 0, 0.2]},
        {"eef": soup + [0, 0, 0.01], "alphabet_soup": lifted},  # grasped
        {"alphabet_soup": in_basket()},
    )
    grasp_closeness = 1 / (1 + 10 * 0.2)
    basket_closeness = 1 / (1 + 10 * np.linalg.norm(lifted - basket))
    np.testing.assert_allclose(
        task.progress(s), [grasp_closeness / 2, (1 + basket_closeness) / 2, 1.0], rtol=1e-12
    )
    aside = LiberoTask("pick-and-place-aside-alphabet_soup")  # an "away" stage: distance / 7 cm
    s = history(
        {},
        {"eef": soup + [0, 0, 0.01], "alphabet_soup": lifted},
        {"alphabet_soup": soup + [0.035, 0, 0]},
    )
    np.testing.assert_allclose(aside.progress(s)[1:], [(1 + 0.002 / 0.07) / 2, 0.75], rtol=1e-9)


def test_rewards_of_the_single_stage_away_and_sequential_tasks():
    soup, cheese = np.array(HOME["alphabet_soup"]), np.array(HOME["cream_cheese"])
    basket = np.array(HOME["basket"])
    # reach: the hand's approach, +1 on success
    reach = LiberoTask("reach-cream_cheese")
    r = reach.rewards(history({"eef": cheese + [0, 0, 0.2]}, {"eef": cheese + [0, 0, 0.03]}))
    assert r == pytest.approx([20 * 0.17 + 1.0])
    # aside: shaped by the growing distance from the start from the grasp's own step on
    aside = LiberoTask("pick-and-place-aside-alphabet_soup")
    s = history(
        {},
        {"eef": soup + [0, 0, 0.01], "alphabet_soup": soup + [0.002, 0, 0]},  # grasp (+1)
        {"alphabet_soup": soup + [0.05, 0, 0]},
        {"alphabet_soup": soup + [0.08, 0, 0]},  # 8 cm away: success (+1)
    )
    assert aside.rewards(s) == pytest.approx(
        [20 * 0.002 + 1.0, 20 * 0.048, 20 * 0.03 + 1.0], abs=1e-9
    )
    # pick-out-of: the growing distance from the basket
    out = LiberoTask("pick-out-of-cream_cheese")
    start = cheese
    grasped = {"eef": start + [0, 0, 0.01], "cream_cheese": start + [0, 0, 0.002]}
    away = start + [0, -0.3, 0.002]
    r = out.rewards(history({}, grasped, {"cream_cheese": away}))
    d = [np.linalg.norm(p - basket) for p in (start, start + [0, 0, 0.002], away)]
    assert d[2] > OUT_OF_DISTANCE["cream_cheese"]  # out: success (+1)
    assert r == pytest.approx([20 * (d[1] - d[0]) + 1.0, 20 * (d[2] - d[1]) + 1.0], abs=1e-9)
    # pick-to: the hand's approach still shapes the grasp's step (the original's late switch)
    pick_to = LiberoTask("pick-alphabet_soup-and-place-to-cream_cheese")
    s = history(
        {"eef": soup + [0, 0, 0.1]},
        {"eef": soup + [0, 0, 0.01], "alphabet_soup": soup + [0, 0, 0.002]},
    )
    hand = np.linalg.norm([0, 0, 0.01 - 0.002])
    assert pick_to.rewards(s) == pytest.approx([20 * (0.1 - hand) + 1.0], abs=1e-9)
    # sequential: +1 for each first grasp and placement; shaped by the first stage not reached
    seq = LiberoTask("sequential-pick-and-place-alphabet_soup-and-cream_cheese")
    s = history(
        {"eef": soup + [0, 0, 0.1]},
        {"eef": soup + [0, 0, 0.01], "alphabet_soup": soup + [0, 0, 0.002]},  # grasp soup
        {"alphabet_soup": in_basket(), "eef": cheese + [0, 0, 0.1]},  # place soup
        {"alphabet_soup": in_basket(), "eef": cheese + [0, 0, 0.05]},  # approach cheese
    )
    soup_eef = soup + [0, 0, 0.01]
    m_basket = [np.linalg.norm(p - basket) for p in (soup, soup + [0, 0, 0.002])]
    m_cheese = np.linalg.norm(soup_eef - cheese)  # the hand's distance to the next object
    assert seq.rewards(s) == pytest.approx(
        [
            20 * (m_basket[0] - m_basket[1]) + 1.0,  # grasped: shaped by the soup's placement
            20 * (m_cheese - 0.1) + 1.0,  # placed: shaped by the hand's approach to the cheese
            20 * 0.05,
        ],
        abs=1e-9,
    )


def test_stages_count_in_order_and_the_last_only_while_it_succeeds():
    """The soup lands in the basket before any grasp (no stage done: the grasp comes first), is
    grasped (1), placed (2) and taken out again (1: the last stage counts only at success)."""
    task = LiberoTask("pick-and-place-alphabet_soup")
    soup = np.array(HOME["alphabet_soup"])
    grasped = {"eef": soup + [0, 0, 0.01], "alphabet_soup": soup + [0, 0, 0.002]}
    s = history({}, {"alphabet_soup": in_basket()}, {}, grasped, {"alphabet_soup": in_basket()}, {})
    np.testing.assert_array_equal(task.success(s), [False, True, False, False, True, False])
    np.testing.assert_array_equal(task.completed(s), [0, 0, 0, 1, 2, 1])
