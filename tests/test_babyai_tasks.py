"""BabyAI task families, suite and wordings: hand-built positive / negative states."""

import numpy as np
import pytest

from imaginebench.envs.babyai import instructions as text
from imaginebench.envs.babyai.suite import BabyAITaskSuite
from imaginebench.envs.babyai.tasks import (
    GoCenter,
    GoTo,
    GoWall,
    Open,
    OpenGo,
    OpenLock,
    OpenPick,
    PickUp,
    PutLine,
    PutNext,
    PutPile,
)
from imaginebench.envs.babyai.world import CLOSED, LOCKED, OPEN, compose_state, legal_states
from imaginebench.envs.base import LEVELS, Task


def state(
    ball=(2, 2), box=(4, 5), key=(5, 2), agent=(3, 3), door=(3, CLOSED), carried=None, **colours
):
    s = compose_state(
        ball=(colours.get("ball_colour", "red"), *ball),
        box=(colours.get("box_colour", "green"), *box),
        key=(colours.get("key_colour", "blue"), *key),
        door=(colours.get("door_colour", "purple"), *door),
        agent=agent,
        carried=carried,
    )
    assert legal_states(s[None])[0], s
    return s


def judge(task, *states):
    return task.success(np.stack(states)).tolist()


def test_goto_objects_and_the_door_front():
    task = GoTo("ball", "red")
    assert judge(
        task, state(agent=(2, 2)), state(agent=(2, 3)), state(agent=(4, 4), carried="ball")
    ) == [
        True,
        False,
        False,  # a held ball is nowhere on the floor
    ]
    assert not task.is_success(state(agent=(2, 2), ball_colour="yellow")[None])  # wrong colour
    door = GoTo("door", "purple")
    assert judge(door, state(agent=(3, 6)), state(agent=(2, 6)), state(agent=(3, 5))) == [
        True,
        False,
        False,
    ]


def test_open_and_pickup():
    assert judge(
        Open("purple"), state(door=(3, OPEN)), state(), state(door=(3, OPEN), door_colour="red")
    ) == [
        True,
        False,
        False,
    ]
    task = PickUp("key", "blue")
    assert judge(
        task,
        state(agent=(4, 4), carried="key"),
        state(agent=(5, 2)),  # standing on it is not holding it
        state(agent=(4, 4), carried="ball"),
        state(agent=(4, 4), carried="key", key_colour="grey"),
    ) == [True, False, False, False]


def test_put_next_needs_four_adjacency_and_both_on_the_floor():
    task = PutNext("ball", "red", "box", "green")
    assert judge(
        task,
        state(ball=(4, 4)),  # west of the box
        state(ball=(3, 5)),  # north of the box
        state(ball=(3, 4)),  # diagonal
        state(ball=(4, 3)),  # two cells away
        state(ball=(3, 5), box=(1, 1), agent=(3, 4), carried="box"),
    ) == [True, True, False, False, False]


def test_open_go_and_open_pick_the_fixed_test():
    go = OpenGo()
    assert judge(
        go,
        state(door=(3, OPEN), agent=(5, 2)),
        state(door=(3, OPEN), agent=(3, 3)),
        state(agent=(5, 2)),
    ) == [True, False, False]
    pick = OpenPick()  # the original's inverted test never succeeded
    assert judge(
        pick,
        state(door=(3, OPEN), agent=(1, 1), carried="box"),
        state(door=(3, OPEN), agent=(2, 2)),
        state(agent=(1, 1), carried="box"),
    ) == [True, False, False]


def test_go_wall_and_go_center():
    assert judge(GoWall(), state(agent=(1, 3)), state(agent=(4, 6)), state(agent=(3, 4))) == [
        True,
        True,
        False,
    ]
    assert judge(GoCenter(), state(agent=(4, 3)), state(agent=(3, 5)), state(agent=(1, 1))) == [
        True,
        False,
        False,
    ]


def test_open_lock():
    assert judge(OpenLock(), state(door=(3, OPEN)), state(door=(3, LOCKED)), state()) == [
        True,
        False,
        False,
    ]


def test_put_line_rows_columns_and_carried_items():
    task = PutLine()
    assert judge(
        task,
        state(ball=(2, 1), box=(2, 4), key=(2, 6)),
        state(ball=(1, 3), box=(6, 3), key=(4, 3)),
        state(ball=(2, 1), box=(2, 4), key=(3, 6)),
        # two in row 2 and the agent holds the third in row 2: a carried item counts as (0, 0)
        state(ball=(2, 1), box=(2, 4), agent=(2, 6), carried="key"),
    ) == [True, True, False, False]


def test_put_pile_is_an_l_not_a_line():
    task = PutPile()
    assert judge(
        task,
        state(ball=(3, 3), box=(3, 4), key=(4, 3)),  # corner ball, box east, key south
        state(ball=(6, 6), box=(5, 6), key=(6, 5)),  # in the room's corner
        state(ball=(3, 2), box=(3, 3), key=(3, 4)),  # three in a row: adjacent pairs but a line
        state(ball=(3, 3), box=(3, 4), key=(5, 3)),  # only one adjacent pair
        state(ball=(3, 3), box=(3, 4), agent=(4, 3), carried="key"),  # the third is held
    ) == [True, True, False, False, False]


ALL_TASKS = [t for level in LEVELS for t in BabyAITaskSuite().tasks(level)]


def test_judges_are_vectorised_and_progress_is_zero_exactly_on_success():
    suite = BabyAITaskSuite()
    rng = np.random.default_rng(0)
    for task in ALL_TASKS[::5] + list(suite.tasks("hard")) + list(suite.tasks("easy")):
        batch = np.stack(
            [np.stack([suite.sample_initial_state(task, rng) for _ in range(3)]) for _ in range(2)]
        )
        assert task.success(batch).shape == (2, 3) and task.progress(batch).shape == (2, 3)
        assert (task.progress(batch) < 0).all()  # unsolved starts are at a positive distance


def test_progress_rises_towards_the_goal():
    task = PutNext("ball", "red", "box", "green")
    far, near, holding = (
        state(agent=(6, 6)),
        state(agent=(2, 3)),
        state(agent=(4, 3), carried="ball"),
    )
    done = state(ball=(4, 4))
    progress = task.progress(np.stack([far, near, holding, done]))
    assert progress[0] < progress[1] < progress[2] < progress[3] == 0
    line = PutLine()
    before = state(ball=(2, 1), box=(2, 4), key=(5, 5), agent=(5, 5))
    lifted = state(ball=(2, 1), box=(2, 4), agent=(5, 5), carried="key")
    assert line.progress(before[None])[0] < line.progress(lifted[None])[0] < 0


def test_specs_round_trip_and_reject_bad_parameters():
    for task in ALL_TASKS:
        assert Task.from_spec(task.spec()) == task
    for bad in (
        lambda: GoTo("wall", "red"),
        lambda: GoTo("ball", "cyan"),
        lambda: PickUp("door", "red"),
        lambda: PutNext("ball", "red", "ball", "blue"),
    ):
        with pytest.raises(ValueError):
            bad()


def test_suite_levels_and_initial_states():
    suite = BabyAITaskSuite()
    train = suite.tasks("train")
    assert len(train) == 108 and list(suite.tasks("rephrase")) == list(train)
    families = [t.family for t in train]
    assert [families.count(f) for f in ("babyai_goto", "babyai_open", "babyai_pickup")] == [
        24,
        6,
        18,
    ]
    assert families.count("babyai_putnext") == 60 and len(set(train)) == 108
    assert [type(t) for t in suite.tasks("easy")] == [OpenGo, OpenPick, GoWall, GoCenter]
    assert [type(t) for t in suite.tasks("hard")] == [OpenLock, PutLine, PutPile]
    rng = np.random.default_rng(1)
    for task in ALL_TASKS:
        for _ in range(3):
            s = suite.sample_initial_state(task, rng)
            assert legal_states(s[None])[0] and not task.is_success(s[None])
            assert s[12] == (LOCKED if isinstance(task, OpenLock) else CLOSED) and s[15] == 0
            agent = set(s[13:15].tolist())
            if isinstance(task, GoWall):
                assert agent <= {3, 4}
            if isinstance(task, GoCenter):
                assert not agent & {3, 4}
            if isinstance(task, OpenLock):
                assert s[9] == s[6]  # the door has the key's colour
            if isinstance(task, (GoTo, PickUp)) and task.obj != "door":
                assert s[{"ball": 0, "box": 3, "key": 6}[task.obj]] == [
                    "red",
                    "green",
                    "blue",
                    "purple",
                    "yellow",
                    "grey",
                ].index(task.colour)


def test_wordings_counts_canonical_first_and_rephrase_disjoint():
    suite = BabyAITaskSuite()
    train_sentences = set()
    for task in suite.tasks("train"):
        wordings = task.instructions("train")
        assert len(wordings) == 40 == len(set(wordings))
        train_sentences |= set(wordings)
    for task in suite.tasks("rephrase"):
        wordings = task.instructions("rephrase")
        assert len(wordings) == 10 == len(set(wordings))
        assert not set(wordings) & train_sentences
    for task in [*suite.tasks("easy"), *suite.tasks("hard")]:
        assert 3 <= len(task.instructions()) and not set(task.instructions()) & train_sentences
    assert not set(text.GOTO_REPHRASE + text.OPEN_REPHRASE + text.PICKUP_REPHRASE) & set(
        text.GOTO_TRAIN + text.OPEN_TRAIN + text.PICKUP_TRAIN
    )
    assert GoTo("door", "grey").instructions()[0] == "go to the grey door"
    assert Open("red").instructions()[0] == "open the red door"
    assert PickUp("box", "blue").instructions()[0] == "pick up the blue box"
    first = PutNext("key", "yellow", "ball", "green").instructions()[0]
    assert first == "put the yellow key next to the green ball"
    with pytest.raises(ValueError, match="wording"):
        Open("red").instructions("novel")
