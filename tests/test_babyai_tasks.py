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
    """Each state judged as an episode of its own (its own initial state)."""
    return task.success(np.stack(states)[:, None])[:, 0].tolist()


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


def test_put_next_moves_object_one_carrying_object_two_over_does_not_count():
    """BabyAI's verifier: object 1 is dropped next to object 2's initial cell. Moving object 2
    next to object 1 makes the same final layout from another start, and fails."""
    task = PutNext("ball", "red", "box", "green")
    start = state(ball=(2, 2), box=(4, 5), agent=(3, 3))
    ball_moved = state(ball=(4, 4), box=(4, 5), agent=(4, 4))  # west of the unmoved box
    box_moved = state(ball=(2, 2), box=(2, 3), agent=(2, 3))  # the box dropped east of the ball
    assert task.success(np.stack([start, ball_moved])).tolist() == [False, True]
    assert task.success(np.stack([start, box_moved])).tolist() == [False, False]
    # the same final layout from a start where the box already stood there: object 1 moved
    assert task.success(np.stack([state(ball=(6, 6), box=(2, 3)), box_moved])).tolist() == [
        False,
        True,
    ]
    # moved away and back: the box at its initial cell again counts
    back = state(ball=(4, 4), box=(4, 5), agent=(1, 1))
    away = state(ball=(2, 2), box=(1, 1), agent=(1, 1))
    assert task.success(np.stack([start, away, back])).tolist() == [False, False, True]
    # batches of episodes judge each against its own start; progress agrees with success
    episodes = np.stack([np.stack([start, ball_moved]), np.stack([start, box_moved])])
    assert task.success(episodes).tolist() == [[False, True], [False, False]]
    assert task.progress(episodes)[0, 1] == 0 and task.progress(episodes)[1, 1] < 0


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


# ------------------------------------------- exact distances (mutation testing, issue 26)
# Defaults of `state`: ball (2, 2), box (4, 5), key (5, 2), agent (3, 3), door in row 3 (its
# front cell is (3, 6)), hands empty. Distances are counted by hand from the module's rules:
# moves + 1 per toggle, +24 per pick-up still needed, +12 per drop, +72 while holding what must
# be dropped first.


def distance(task, *states):
    """The heuristic distance ``-progress`` of each state (0 on success), each state an episode
    of its own."""
    progress = task.progress(np.stack(states)[:, None])[:, 0]
    assert progress.dtype == np.float64
    return (-progress).tolist()


def test_door_distances_closed_locked_and_with_the_key():
    assert distance(Open("purple"), state()) == [3 + 1]  # walk to (3, 6), toggle
    locked = dict(door=(3, LOCKED), door_colour="red", key_colour="red")
    # fetch the key at (5, 2): 3 moves + 24, carry it to (3, 6): 6 moves, toggle
    assert distance(OpenLock(), state(**locked)) == [3 + 24 + 6 + 1]
    # holding the ball: +72 to get rid of it first
    assert distance(OpenLock(), state(**locked, agent=(4, 4), carried="ball")) == [
        72 + 3 + 24 + 6 + 1
    ]
    # holding the door's key: walk 3 and toggle
    assert distance(OpenLock(), state(**locked, agent=(4, 4), carried="key")) == [3 + 1]


def test_open_pick_and_open_go_distances():
    pick = OpenPick()
    assert distance(
        pick,
        state(),  # door 4, then from (3, 6) the box 2 away, + 24
        state(agent=(4, 4), carried="box"),  # door 3 + 1, already holding
        state(door=(3, OPEN), agent=(2, 2)),  # door open, standing on the ball: pick it up
        state(door=(3, OPEN), agent=(1, 1)),  # nearest is the ball at 2
    ) == [4 + 2 + 24, 4, 24, 2 + 24]
    go = OpenGo()
    assert distance(
        go,
        state(),  # door 4, then the box 2 from (3, 6)
        state(door=(3, OPEN), agent=(1, 1), carried="ball"),  # the held ball does not count
    ) == [4 + 2, 5]


def test_goto_pickup_and_putnext_distances():
    assert distance(GoTo("ball", "red"), state(), state(agent=(4, 4), carried="ball")) == [2, 1]
    assert distance(GoTo("door", "purple"), state()) == [3]
    pick = PickUp("key", "blue")
    assert distance(pick, state(), state(agent=(4, 4), carried="ball")) == [3 + 24, 72 + 3 + 24]
    put = PutNext("ball", "red", "box", "green")
    assert distance(
        put,
        state(),  # walk 2 to the ball, +24, carry it 5 - 1 cells, +12
        state(agent=(4, 3), carried="ball"),  # 2 - 1 cells from the box, +12
        state(agent=(3, 3), carried="box"),  # +72, then the ball 2, +24, 2 - 1 from (3, 3), +12
    ) == [2 + 24 + 4 + 12, 1 + 12, 72 + 2 + 24 + 1 + 12]


def test_go_wall_and_go_center_distances_per_state():
    assert distance(GoWall(), state(agent=(3, 3)), state(agent=(2, 4)), state(agent=(4, 5))) == [
        2,
        1,
        1,
    ]
    assert distance(GoCenter(), state(agent=(1, 6)), state(agent=(3, 5))) == [4, 1]


def test_an_agent_outside_the_room_is_never_past_the_goal():
    """Imagined states may put the agent in the wall; the wall distance is clipped at 0."""
    s = state()
    s[13:15] = (0, 3)
    assert GoWall().progress(s[None]).tolist() == [0.0] and not GoWall().is_success(s[None])


def test_non_finite_entries_read_as_minus_1():
    """NaN, +inf and -inf all read as -1: 4 rows from the centre rows 3-4."""
    states = np.stack([state()] * 3)
    states[:, 13] = [np.nan, np.inf, -np.inf]
    assert GoCenter().progress(states).tolist() == [-4.0, -4.0, -4.0]


def test_put_line_distances_to_the_best_row_or_column():
    line = PutLine()
    assert distance(
        line,
        state(),  # column 2: the box 3 away + 24, walk 3 to it
        state(ball=(6, 1), box=(6, 4), key=(2, 3), agent=(5, 5)),  # row 6: key 4 + 24, walk 5
        state(ball=(2, 1), box=(2, 4), agent=(4, 4), carried="key"),  # drop the key 2 rows up
    ) == [3 + 24 + 3, 4 + 24 + 5, 2 + 12]
    # a batch (2 steps x 2): each state on its own, held or not
    batch = np.stack(
        [
            np.stack([state(), state(ball=(2, 1), box=(2, 4), agent=(4, 4), carried="key")]),
            np.stack([state(ball=(6, 1), box=(6, 4), key=(2, 3), agent=(5, 5)), state()]),
        ]
    )
    assert (-line.progress(batch)).tolist() == [[30.0, 14.0], [33.0, 30.0]]
    held = state(ball=(2, 1), box=(2, 4), key=(2, 6))
    lifted = state(ball=(2, 1), box=(2, 4), agent=(2, 6), carried="key")
    batch = np.stack([np.stack([held, lifted]), np.stack([lifted, held])])
    assert line.success(batch).tolist() == [[True, False], [False, True]]


def pile_oracle(s):
    """The pile distance by enumeration: a corner item stays (on the floor), one item goes to
    an interior cell beside it in its row, the other beside it in its column; per item 0 if on
    its cell on the floor, else L1 + 24 (on the floor) or + 12 (held); + the walk to the
    nearest misplaced item when the hands are empty."""
    names = ("ball", "box", "key")
    agent = (int(s[13]), int(s[14]))
    held = [int(s[15]) == {"ball": 6, "box": 7, "key": 5}[n] for n in names]
    pos = [agent if held[i] else (int(s[3 * i + 1]), int(s[3 * i + 2])) for i in range(3)]
    l1 = lambda p, q: abs(p[0] - q[0]) + abs(p[1] - q[1])  # noqa: E731
    best = None
    for a in range(3):
        if held[a]:
            continue
        r, c = pos[a]
        row_cells = [(r, c + d) for d in (-1, 1) if 1 <= c + d <= 6]
        col_cells = [(r + d, c) for d in (-1, 1) if 1 <= r + d <= 6]
        b, c_ = [i for i in range(3) if i != a]
        for first, second in ((row_cells, col_cells), (col_cells, row_cells)):
            for tb in first:
                for tc in second:
                    target = {a: pos[a], b: tb, c_: tc}
                    cost, misplaced = 0, []
                    for i in range(3):
                        if not held[i] and pos[i] == target[i]:
                            continue
                        cost += l1(pos[i], target[i]) + (12 if held[i] else 24)
                        misplaced.append(i)
                    if misplaced and not any(held):
                        cost += min(l1(agent, pos[i]) for i in misplaced)
                    best = cost if best is None else min(best, cost)
    return best


PILE_STATES = [
    dict(),
    dict(ball=(1, 1), box=(6, 6), key=(3, 5), agent=(4, 2)),  # corners against the walls
    dict(ball=(6, 2), box=(1, 4), key=(6, 6), agent=(2, 2)),
    dict(ball=(3, 3), box=(3, 4), key=(5, 5), agent=(1, 6)),  # one pair already adjacent
    dict(ball=(3, 3), box=(6, 1), agent=(2, 5), carried="key"),
    dict(ball=(1, 6), box=(2, 2), agent=(4, 4), carried="key"),
    dict(box=(1, 1), key=(6, 6), agent=(4, 3), carried="ball"),
    dict(ball=(2, 3), box=(1, 3), key=(2, 6), agent=(4, 4)),  # the box beside, in row 1
    dict(ball=(5, 4), box=(6, 4), key=(5, 1), agent=(3, 3)),  # the box beside, in row 6
    dict(ball=(3, 4), box=(4, 3), agent=(3, 3), carried="key"),  # an L around the held key
]


def test_put_pile_distance_matches_an_enumeration_of_l_shapes():
    """One state at a time ((T, 17)) and as a (T, 1, 17) batch."""
    states = [state(**kw) for kw in PILE_STATES]
    expected = [pile_oracle(s) for s in states]
    # hand count: the key is the corner, the ball goes 2 to (4, 2), the box 3 to (5, 3), walk 2
    assert expected[0] == 2 + 24 + 3 + 24 + 2
    assert distance(PutPile(), *states) == expected
    batch = np.stack(states)[:, None]
    assert (-PutPile().progress(batch)).tolist() == [[e] for e in expected]


def test_colours_given_as_indices_are_stored_as_names():
    assert GoTo("ball", 0).colour == "red" and Open(0).colour == "red"
    assert PickUp("key", 2).colour == "blue"
    put = PutNext("ball", 3, "box", 4)
    assert (put.colour1, put.colour2) == ("purple", "yellow")


def test_messages_of_invalid_parameters():
    names = "red, green, blue, purple, yellow, grey"
    for bad, message in [
        (lambda: GoTo("ball", 6), f"unknown colour 6; expected one of {names}$"),
        (lambda: GoTo("ball", "cyan"), f"unknown colour 'cyan'; expected one of {names}$"),
        (lambda: GoTo("wall", "red"), "unknown object type 'wall'; expected one of ball, box, "),
        (
            lambda: PutNext("ball", "red", "ball", "blue"),
            "^put-next needs two different object types$",
        ),
        (lambda: OpenGo().success(np.zeros((2, 16))), "BabyAI states must have 17 entries"),
    ]:
        with pytest.raises(ValueError, match=message):
            bad()
