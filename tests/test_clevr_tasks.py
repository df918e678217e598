"""Tests of the CLEVR-Robot task families (state-only success judges) and the task suite.

States are 10 numbers: (x, y) of the red, blue, green, purple and cyan balls; behind = +y,
left = -x, front = -y, right = +x. Every judge is checked against hand-built states that sit on
either side of the original benchmark's thresholds.
"""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest

from imaginebench.envs.base import LEVELS, Task
from imaginebench.envs.clevr.instructions import train_sentence_set
from imaginebench.envs.clevr.physics import COLORS, X_RANGE, Y_RANGE
from imaginebench.envs.clevr.suite import MIN_CENTER_DISTANCE, ClevrTaskSuite
from imaginebench.envs.clevr.tasks import (
    GATHER_RADIUS,
    RELATION_DISTANCE,
    AllOf,
    Gather,
    Line,
    Near,
    Push,
    Relation,
    Sequential,
    compatible_relations,
    relevant_balls,
)

RED, BLUE, GREEN, PURPLE, CYAN = range(5)
DIRS = ("behind", "left", "front", "right")

# Default spots: pairwise at least 0.45 apart, so irrelevant balls never interfere.
FAR = {
    RED: (-0.45, -0.15),
    BLUE: (0.45, -0.15),
    GREEN: (-0.45, 0.55),
    PURPLE: (0.45, 0.55),
    CYAN: (0.0, 0.2),
}


def state(**placed: tuple[float, float]) -> np.ndarray:
    """A (10,) state with the named balls placed explicitly and the others at FAR spots."""
    spots = dict(FAR)
    for name, xy in placed.items():
        spots[COLORS.index(name)] = xy
    return np.array([c for i in range(5) for c in spots[i]], dtype=np.float64)


def polar(r: float, deg: float, origin: tuple[float, float] = (0.0, 0.0)) -> tuple[float, float]:
    a = np.radians(deg)
    return origin[0] + r * np.cos(a), origin[1] + r * np.sin(a)


def traj(*states: np.ndarray) -> np.ndarray:
    return np.stack(states)


def holds(task: Task, s: np.ndarray) -> bool:
    """Judge a single state as a one-step trajectory."""
    return bool(task.success(s[None])[0])


# Sector membership of the reference: behind [45,135), left [135,225), front [225,315),
# right [315,360) u [0,45).
def reference_direction(deg: float) -> str:
    deg %= 360.0
    if 45 <= deg < 135:
        return "behind"
    if 135 <= deg < 225:
        return "left"
    if 225 <= deg < 315:
        return "front"
    return "right"


# ------------------------------------------------------------------------------------ relation


@pytest.mark.parametrize(
    "deg",
    [0, 90, 180, 270, 44, 46, 134, 136, 224, 226, 314, 316, 1, 359, 89, 91, 179, 181, 269, 271],
)
def test_relation_sector_boundaries(deg: float) -> None:
    # Anchor green in the middle; the moved red ball sits 0.3 away at angle ``deg``.
    s = state(green=(0.0, 0.2), red=polar(0.3, deg, (0.0, 0.2)))
    expected = reference_direction(deg)
    for d in DIRS:
        assert holds(Relation("red", "green", d), s) == (d == expected), (deg, d)


@pytest.mark.parametrize(
    "delta, expected",
    [
        ((0.2, 0.2), "behind"),
        ((-0.2, 0.2), "left"),
        ((-0.2, -0.2), "front"),
        ((0.2, -0.2), "right"),
    ],
)
def test_relation_exact_diagonals_belong_to_the_counter_clockwise_sector(delta, expected) -> None:
    # The anchor at the origin keeps the angles exactly 45, 135, 225 and 315 degrees.
    s = state(blue=(0.0, 0.0), purple=delta)
    for d in DIRS:
        assert holds(Relation("purple", "blue", d), s) == (d == expected), (delta, d)


@pytest.mark.parametrize("direction", DIRS)
def test_relation_distance_threshold(direction: str) -> None:
    angle = {"behind": 90, "left": 180, "front": 270, "right": 0}[direction]
    anchor = (0.0, 0.2)
    task = Relation("cyan", "red", direction)
    assert holds(task, state(red=anchor, cyan=polar(0.389, angle, anchor)))
    assert holds(task, state(red=anchor, cyan=polar(0.3905, angle + 20, anchor)))
    assert not holds(task, state(red=anchor, cyan=polar(0.393, angle, anchor)))
    assert not holds(task, state(red=anchor, cyan=polar(0.6, angle, anchor)))
    # Touching-close (even overlapping) balls still count when in the sector.
    assert holds(task, state(red=anchor, cyan=polar(0.05, angle, anchor)))


def test_relation_small_components_are_zeroed() -> None:
    anchor = (0.0, 0.0)
    s = state(red=anchor, blue=(0.3, 0.0005))
    assert holds(Relation("blue", "red", "right"), s)
    assert not holds(Relation("blue", "red", "behind"), s)
    s = state(red=anchor, blue=(0.0005, 0.3))
    assert holds(Relation("blue", "red", "behind"), s)
    assert not holds(Relation("blue", "red", "right"), s)
    # Tiny y with negative x: exactly on the -x axis -> left.
    s = state(red=anchor, blue=(-0.3, -0.0009))
    assert holds(Relation("blue", "red", "left"), s)
    # (0.0005, 0.0009) would point at ~61 degrees (behind); zeroed it is (0, 0), angle 0: right.
    s = state(red=anchor, blue=(0.0005, 0.0009))
    assert holds(Relation("blue", "red", "right"), s)
    assert not holds(Relation("blue", "red", "behind"), s)
    # A component of 1e-3 or more is kept: (0.0011, 0.3) -> still behind, (0.3, 0.0011) right.
    assert holds(Relation("blue", "red", "behind"), state(red=anchor, blue=(0.0011, 0.3)))
    assert holds(Relation("blue", "red", "right"), state(red=anchor, blue=(0.3, 0.0011)))


def test_relation_is_directional_and_uses_moved_minus_anchor() -> None:
    # Red is left of blue, hence blue is right of red.
    s = state(red=(-0.15, 0.1), blue=(0.15, 0.1))
    assert holds(Relation("red", "blue", "left"), s)
    assert holds(Relation("blue", "red", "right"), s)
    assert not holds(Relation("red", "blue", "right"), s)
    assert not holds(Relation("blue", "red", "left"), s)
    # Indices and names build the same task.
    assert Relation(RED, BLUE, 1) == Relation("red", "blue", "left")


def test_relation_judges_every_step_independently() -> None:
    task = Relation("green", "cyan", "front")
    hit = state(cyan=(0.0, 0.2), green=(0.0, -0.1))
    miss = state(cyan=(0.0, 0.2), green=(0.0, 0.5))
    assert task.success(traj(miss, hit, miss, hit)).tolist() == [False, True, False, True]
    assert task.is_success(traj(miss, hit))
    assert not task.is_success(traj(hit, miss))


# ------------------------------------------------------------------------------- near / push


@pytest.mark.parametrize("deg", [0, 37, 90, 150, 200, 270, 333])
def test_near_any_side(deg: float) -> None:
    task = Near("purple", "green")
    c = (0.0, 0.2)
    assert holds(task, state(green=c, purple=polar(0.389, deg, c)))
    assert holds(task, state(green=c, purple=polar(0.3905, deg, c)))
    assert not holds(task, state(green=c, purple=polar(0.393, deg, c)))
    assert not holds(task, state(green=c, purple=polar(0.391 + 1e-6, deg, c)))


@pytest.mark.parametrize(
    "direction, unit",
    [("behind", (0, 1)), ("left", (-1, 0)), ("front", (0, -1)), ("right", (1, 0))],
)
def test_push_threshold_and_direction(direction: str, unit: tuple[int, int]) -> None:
    start = (0.0, 0.2)
    u = np.array(unit, dtype=float)

    def moved(dist: float, vec: np.ndarray = u) -> np.ndarray:
        return state(blue=tuple(np.array(start) + dist * vec))

    task = Push("blue", direction)
    s0 = moved(0.0)
    assert task.success(traj(s0, moved(0.151))).tolist() == [False, True]
    assert task.success(traj(s0, moved(0.149))).tolist() == [False, False]
    # Pushed the opposite way, or sideways, does not count.
    assert not task.success(traj(s0, moved(0.3, -u))).any()
    assert not task.success(traj(s0, moved(0.3, u[::-1].copy()))).any()
    assert not task.success(traj(s0, moved(0.3, -u[::-1]))).any()
    # A diagonal push counts by its projection: 0.2 / sqrt(2) < 0.15 < 0.25 / sqrt(2).
    diag = (u + u[::-1]) / np.sqrt(2)
    assert not task.success(traj(s0, moved(0.2, diag)))[-1]
    assert task.success(traj(s0, moved(0.25, diag)))[-1]
    # Another ball moving does not count.
    other = state(blue=start, red=(-0.45 + 0.3 * u[0], -0.15 + 0.3 * u[1]))
    assert not Push("blue", direction).success(traj(s0, other)).any()
    assert Push("red", direction).success(traj(s0, other)).tolist() == [False, True]


def test_push_is_measured_from_the_first_state() -> None:
    task = Push("green", "right")
    steps = [state(green=(-0.3 + 0.08 * k, 0.2)) for k in range(4)]  # 0, 0.08, 0.16, 0.24
    assert task.success(traj(*steps)).tolist() == [False, False, True, True]
    # Coming back after the push: success is judged per step from the start.
    back = traj(steps[0], steps[3], steps[0])
    assert task.success(back).tolist() == [False, True, False]
    # A single state never succeeds (no displacement yet).
    assert not task.is_success(steps[3][None])


# ------------------------------------------------------------------------------- line / gather


def _line_state(order: tuple[str, ...], step_degs: list[float], length: float = 0.25) -> np.ndarray:
    pos = {order[0]: (-0.45, 0.1)}
    for name, prev, deg in zip(order[1:], order[:-1], step_degs):
        pos[name] = polar(length, deg, pos[prev])
    return state(**pos)


def test_line_angle_threshold() -> None:
    order = ("red", "blue", "green")
    task = Line(order)
    assert holds(task, _line_state(order, [0, 0]))
    assert holds(task, _line_state(order, [29, 0]))
    assert holds(task, _line_state(order, [-29, 29]))
    assert not holds(task, _line_state(order, [31, 0]))
    assert not holds(task, _line_state(order, [0, -31]))
    assert not holds(task, _line_state(order, [29, 31]))
    # The length of the steps does not matter, only their direction.
    assert holds(task, _line_state(order, [10, -10], length=0.05))


def test_line_order_matters() -> None:
    s = _line_state(("red", "blue", "green"), [5, -5])
    assert holds(Line(("red", "blue", "green")), s)
    assert not holds(Line(("green", "blue", "red")), s)
    assert not holds(Line(("blue", "red", "green")), s)
    # A sub-sequence in order is still a line; the others balls are irrelevant.
    five = _line_state(COLORS, [0, 10, -10, 20], length=0.22)
    assert holds(Line(COLORS), five)
    assert holds(Line(("red", "green", "cyan")), five)
    assert not holds(Line(tuple(reversed(COLORS))), five)
    assert not holds(Line(("red", "cyan", "green")), five)


def test_line_coincident_balls_are_not_a_line() -> None:
    s = state(red=(0.0, 0.0), blue=(0.0, 0.0), green=(0.3, 0.0))
    assert not holds(Line(("red", "blue", "green")), s)


@pytest.mark.parametrize("center", COLORS)
def test_gather_threshold(center: str) -> None:
    c = (0.0, 0.2)
    others = [name for name in COLORS if name != center]
    angles = [10, 100, 190, 280]
    inside = {name: polar(0.32, a, c) for name, a in zip(others, angles)}
    task = Gather(center)
    assert holds(task, state(**{center: c}, **inside))
    for k in range(4):
        out = dict(inside)
        out[others[k]] = polar(0.33, angles[k], c)
        assert not holds(task, state(**{center: c}, **out)), (center, others[k])


# ------------------------------------------------------------------------- all_of / sequential


def test_all_of_needs_every_relation_at_the_same_step() -> None:
    task = AllOf([("red", "green", "left"), ("blue", "green", "right")])
    g = (0.0, 0.2)
    both = state(green=g, red=(-0.3, 0.2), blue=(0.3, 0.2))
    only_red = state(green=g, red=(-0.3, 0.2), blue=(0.45, -0.15))
    only_blue = state(green=g, red=(-0.45, -0.15), blue=(0.3, 0.2))
    wrong_side = state(green=g, red=(-0.3, 0.2), blue=(0.0, 0.5))
    assert task.success(traj(only_red, only_blue, wrong_side, both)).tolist() == [False] * 3 + [
        True
    ]
    assert task.satisfied(traj(only_red, only_blue, both)).tolist() == [1, 1, 2]
    # A three-relation conjunction with one failing relation fails.
    three = AllOf(
        [("red", "green", "left"), ("blue", "green", "right"), ("cyan", "green", "front")]
    )
    assert not holds(three, both)
    assert holds(three, state(green=g, red=(-0.3, 0.2), blue=(0.3, 0.2), cyan=(0.0, -0.1)))


STAGE1 = Relation("red", "blue", "right")  # red at blue + (0.3, 0)
STAGE2 = Relation("green", "purple", "behind")  # green at purple + (0, 0.3)


def _seq_state(s1: bool, s2: bool) -> np.ndarray:
    placed: dict[str, tuple[float, float]] = {"blue": (-0.3, -0.1), "purple": (0.3, 0.0)}
    placed["red"] = (0.0, -0.1) if s1 else (-0.45, 0.5)
    placed["green"] = (0.3, 0.3) if s2 else (0.45, -0.2)
    s = state(**placed)
    assert holds(STAGE1, s) == s1 and holds(STAGE2, s) == s2
    return s


def test_sequential_order_satisfied_counts() -> None:
    task = Sequential([STAGE1, STAGE2])
    t = traj(_seq_state(False, False), _seq_state(True, False), _seq_state(False, True))
    assert task.stage_reached(t).tolist() == [0, 1, 2]
    assert task.success(t).tolist() == [False, False, True]
    # Once reached, success persists even if the relations stop holding.
    t = traj(
        _seq_state(False, False),
        _seq_state(True, False),
        _seq_state(False, True),
        _seq_state(False, False),
    )
    assert task.success(t).tolist() == [False, False, True, True]


def test_sequential_stage_two_before_stage_one_does_not_count() -> None:
    task = Sequential([STAGE1, STAGE2])
    t = traj(
        _seq_state(False, False),
        _seq_state(False, True),
        _seq_state(False, False),
        _seq_state(True, False),
    )
    assert task.stage_reached(t).tolist() == [0, 0, 0, 1]
    assert not task.success(t).any()
    # Stage 2 needs to hold again after stage 1.
    t2 = np.concatenate([t, _seq_state(False, True)[None]])
    assert task.success(t2).tolist() == [False] * 4 + [True]


def test_sequential_one_stage_per_step() -> None:
    task = Sequential([STAGE1, STAGE2])
    both = _seq_state(True, True)
    assert task.stage_reached(traj(_seq_state(False, False), both)).tolist() == [0, 1]
    assert not task.is_success(traj(_seq_state(False, False), both))
    assert task.success(traj(_seq_state(False, False), both, both)).tolist() == [False, False, True]
    # Also at the very first step only stage 1 counts.
    assert task.stage_reached(both[None]).tolist() == [1]
    assert not task.is_success(both[None])


def test_sequential_three_stages() -> None:
    s3 = Relation("cyan", "red", "front")
    task = Sequential([STAGE1, STAGE2, s3])
    a = _seq_state(True, False)
    b = _seq_state(False, True)
    c = state(red=(-0.45, 0.5), cyan=(-0.45, 0.2), blue=(-0.3, -0.1), purple=(0.3, 0.0))
    assert holds(s3, c) and not holds(STAGE1, c) and not holds(STAGE2, c)
    assert task.stage_reached(traj(c, a, c, b, c)).tolist() == [0, 1, 1, 2, 3]
    assert task.stage_reached(traj(a, c, b)).tolist() == [1, 1, 2]


# ------------------------------------------------------------------------ shapes / batching


SUITE = ClevrTaskSuite()
ALL_TASKS: list[Task] = list(
    dict.fromkeys(t for level in LEVELS for t in SUITE.tasks(level))  # type: ignore[arg-type]
)
# One task per family as an extra hand-made set.
FAMILY_EXAMPLES: list[Task] = [
    Relation("red", "blue", "left"),
    Push("green", "front"),
    Near("cyan", "purple"),
    AllOf([("red", "green", "left"), ("blue", "green", "right")]),
    Sequential([STAGE1, STAGE2]),
    Line(("red", "blue", "green")),
    Gather("cyan"),
]


def _random_batch(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    # Cramped balls so that relations, nearness and gathering happen now and then.
    return rng.uniform(-0.35, 0.35, size=(*shape, 10))


def test_every_family_is_covered() -> None:
    assert {t.family for t in ALL_TASKS} == {t.family for t in FAMILY_EXAMPLES}
    assert len(FAMILY_EXAMPLES) == len({t.family for t in FAMILY_EXAMPLES})


def test_batched_judges_match_a_loop() -> None:
    rng = np.random.default_rng(0)
    batch = _random_batch(rng, (6, 7))
    # Splice in states that succeed, so positives are compared too.
    batch[0, 3] = state(red=(0.0, 0.0), blue=(0.3, 0.0))
    batch[1] = np.linspace(state(red=(0.0, 0.0)), state(red=(0.3, 0.3)), 7)
    any_success = False
    for task in ALL_TASKS + FAMILY_EXAMPLES:
        succ, prog = task.success(batch), task.progress(batch)
        assert succ.shape == (6, 7) and succ.dtype == bool, task.spec()
        assert prog.shape == (6, 7) and np.issubdtype(prog.dtype, np.floating), task.spec()
        assert np.isfinite(prog).all()
        for b in range(6):
            np.testing.assert_array_equal(succ[b], task.success(batch[b]))
            np.testing.assert_allclose(prog[b], task.progress(batch[b]))
        # Extra leading dimensions.
        nested = batch.reshape(2, 3, 7, 10)
        np.testing.assert_array_equal(task.success(nested), succ.reshape(2, 3, 7))
        np.testing.assert_allclose(task.progress(nested), prog.reshape(2, 3, 7))
        any_success |= bool(succ.any())
    assert any_success


@pytest.mark.parametrize("task", FAMILY_EXAMPLES, ids=lambda t: t.family)
def test_shapes_of_single_trajectories(task: Task) -> None:
    s = np.stack([state(), state(red=(0.1, 0.1))])
    assert task.success(s).shape == (2,)
    assert task.progress(s).shape == (2,)
    assert task.success(s[:1]).shape == (1,)
    assert isinstance(task.is_success(s), bool)
    # Plain lists are accepted too.
    assert task.success(s.tolist()).shape == (2,)


@pytest.mark.parametrize("task", FAMILY_EXAMPLES, ids=lambda t: t.family)
@pytest.mark.parametrize("dim", [8, 9, 11, 12])
def test_wrong_state_dimension_raises(task: Task, dim: int) -> None:
    bad = np.zeros((3, dim))
    with pytest.raises(ValueError):
        task.success(bad)
    with pytest.raises(ValueError):
        task.progress(bad)
    with pytest.raises(ValueError):
        task.success(np.zeros((2, 3, dim)))


# --------------------------------------------------------------------------------- progress


@pytest.mark.parametrize("direction", DIRS)
def test_relation_progress_increases_towards_the_target(direction: str) -> None:
    task = Relation("red", "cyan", direction)
    c = (0.0, 0.2)
    unit = {"behind": (0, 1), "left": (-1, 0), "front": (0, -1), "right": (1, 0)}[direction]
    target = np.array(c) + 0.3 * np.array(unit)
    start = np.array(c) + 0.9 * np.array(unit) + 0.4 * np.array(unit[::-1])
    path = [state(cyan=c, red=tuple(start + f * (target - start))) for f in np.linspace(0, 1, 8)]
    prog = task.progress(traj(*path))
    assert np.all(np.diff(prog) > 0), prog
    assert task.success(traj(*path))[-1] and not task.success(traj(*path))[0]


def test_other_families_progress_increases_as_the_ball_approaches() -> None:
    fs = np.linspace(0, 1, 6)
    # Near: purple approaches green.
    near = Near("purple", "green")
    path = [state(green=(0.0, 0.2), purple=(0.45 - 0.15 * f, 0.55 - 0.35 * f)) for f in fs]
    assert np.all(np.diff(near.progress(traj(*path))) > 0)
    # Push: the ball travels further right (up to the success distance).
    push = Push("blue", "right")
    path = [state(blue=(-0.3 + 0.15 * f, 0.0)) for f in fs]
    assert np.all(np.diff(push.progress(traj(*path))) > 0)
    assert push.is_success(traj(*path))
    # Gather: all others at 0.2 except red, which comes in from far away.
    gather = Gather("cyan")
    c = (0.0, 0.2)
    base = {"blue": polar(0.2, 0, c), "green": polar(0.2, 90, c), "purple": polar(0.2, 270, c)}
    path = [state(cyan=c, red=polar(0.7 - 0.45 * f, 180, c), **base) for f in fs]
    assert np.all(np.diff(gather.progress(traj(*path))) > 0)
    assert gather.is_success(traj(*path))
    # AllOf: one relation already holds, the moved ball of the other approaches its spot.
    all_of = AllOf([("red", "green", "left"), ("blue", "green", "right")])
    g = (0.0, 0.2)
    path = [state(green=g, red=(-0.3, 0.2), blue=(0.3 + 0.2 * (1 - f), 0.6 - 0.4 * f)) for f in fs]
    assert np.all(np.diff(all_of.progress(traj(*path))) > 0)
    assert all_of.is_success(traj(*path))


# ----------------------------------------------------------------------------- construction


def test_valid_constructions_accept_names_and_indices() -> None:
    assert Push(2, 3) == Push("green", "right")
    assert Near(0, 4) == Near("red", "cyan")
    assert Gather(np.int64(1)) == Gather("blue")
    assert Line((0, 1, 2)) == Line(["red", "blue", "green"])
    rel = [Relation("red", "green", "left"), ("blue", "green", "right")]
    assert AllOf(rel) == AllOf(
        [{"moved": "red", "anchor": "green", "direction": "left"}, ("blue", "green", "right")]
    )
    assert Sequential(rel).stages == (Relation(0, 2, 1), Relation(1, 2, 3))


@pytest.mark.parametrize(
    "build",
    [
        lambda: Relation("red", "red", "left"),
        lambda: Relation(3, 3, 0),
        lambda: Relation("pink", "red", "left"),
        lambda: Relation("red", "blue", "up"),
        lambda: Relation("red", "blue", 4),
        lambda: Relation(5, 0, 0),
        lambda: Relation(-1, 0, 0),
        lambda: Near("blue", "blue"),
        lambda: Near("blue", "orange"),
        lambda: Push("yellow", "left"),
        lambda: Push("red", "forward"),
        lambda: Gather("black"),
        lambda: Line(("red", "blue")),
        lambda: Line(("red", "blue", "red")),
        lambda: Line(("red", "blue", "white")),
        lambda: AllOf([("red", "blue", "left")]),
        # Cycles in the "moved -> anchor" graph.
        lambda: AllOf([("red", "blue", "left"), ("blue", "red", "left")]),
        lambda: AllOf(
            [("red", "blue", "left"), ("blue", "green", "front"), ("green", "red", "right")]
        ),
        # Two balls on the same side of the same anchor.
        lambda: AllOf([("red", "green", "left"), ("blue", "green", "left")]),
        # The same ball moved twice.
        lambda: AllOf([("red", "green", "left"), ("red", "blue", "front")]),
        lambda: AllOf(
            [
                ("red", "green", "left"),
                ("blue", "green", "right"),
                ("cyan", "green", "front"),
                ("purple", "green", "behind"),
            ]
        ),
        lambda: AllOf([("red", "red", "left"), ("blue", "green", "right")]),
        lambda: Sequential([("red", "blue", "left")]),
        lambda: Sequential([("red", "blue", "left"), ("red", "blue", "sideways")]),
    ],
)
def test_invalid_constructions_raise(build) -> None:
    with pytest.raises(ValueError):
        build()


def test_from_spec_unknown_family_raises() -> None:
    with pytest.raises(ValueError):
        Task.from_spec(json.dumps({"family": "juggle", "ball": "red"}))
    with pytest.raises(ValueError):
        Task.from_spec({"ball": "red", "direction": "left"})


# -------------------------------------------------------------------------------- the suite


@pytest.mark.parametrize("level", LEVELS)
def test_spec_round_trip_for_every_suite_task(level: str) -> None:
    for task in SUITE.tasks(level):  # type: ignore[arg-type]
        spec = task.spec()
        assert Task.from_spec(spec) == task
        assert Task.from_spec(json.loads(spec)) == task
        assert hash(Task.from_spec(spec)) == hash(task)
        assert Task.from_spec(spec).spec() == spec
        assert json.loads(spec)["family"] == task.family


def test_train_and_rephrase_levels() -> None:
    train, rephrase = SUITE.tasks("train"), SUITE.tasks("rephrase")
    assert len(train) == 80 and len(rephrase) == 80
    assert list(train) == list(rephrase)
    assert all(isinstance(t, Relation) for t in train)
    triples = {(t.moved, t.anchor, t.direction) for t in train}
    assert triples == {(m, a, d) for m, a in itertools.permutations(range(5), 2) for d in range(4)}
    assert SUITE.wording("rephrase") == "rephrase"
    assert all(SUITE.wording(lv) == "train" for lv in ("train", "easy", "hard"))


def test_train_and_rephrase_wordings_are_disjoint() -> None:
    every_train = train_sentence_set()
    for task in SUITE.tasks("train"):
        train_w, reph_w = set(task.instructions("train")), set(task.instructions("rephrase"))
        assert train_w and reph_w
        assert not train_w & reph_w, task.spec()
        assert not reph_w & every_train, task.spec()


def test_easy_and_hard_levels() -> None:
    easy, hard = SUITE.tasks("easy"), SUITE.tasks("hard")
    assert len(easy) == 30 and len(set(easy)) == 30
    assert {(t.ball, t.direction) for t in easy if isinstance(t, Push)} == set(
        itertools.product(range(5), range(4))
    )
    assert {frozenset((t.a, t.b)) for t in easy if isinstance(t, Near)} == {
        frozenset(p) for p in itertools.combinations(range(5), 2)
    }
    assert len(hard) == 66 and len(set(hard)) == 66
    count = lambda cls, n=None: sum(  # noqa: E731
        isinstance(t, cls)
        and (
            n is None
            or len(getattr(t, {AllOf: "relations", Line: "balls"}.get(cls, "stages"))) == n
        )
        for t in hard
    )
    assert count(AllOf, 2) == 24 and count(AllOf, 3) == 12 and count(Sequential, 2) == 12
    assert count(Line, 3) == 8 and count(Line, 4) == 4 and count(Line, 5) == 1
    assert Line(COLORS) in hard
    assert {t.center for t in hard if isinstance(t, Gather)} == set(range(5))
    # Hard compositions are fixed once and for all.
    assert list(ClevrTaskSuite().tasks("hard")) == list(hard)
    # Every task of every level has wordings.
    for level in LEVELS:
        for t in SUITE.tasks(level):  # type: ignore[arg-type]
            assert t.instructions(SUITE.wording(level))  # type: ignore[arg-type]


def test_unknown_level_raises() -> None:
    with pytest.raises(ValueError):
        SUITE.tasks("medium")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        SUITE.episodes("medium", 2, 0)  # type: ignore[arg-type]


@pytest.mark.parametrize("level", LEVELS)
def test_episodes_are_deterministic_and_start_unsolved(level: str) -> None:
    a = SUITE.episodes(level, 25, seed=3)  # type: ignore[arg-type]
    b = ClevrTaskSuite().episodes(level, 25, seed=3)  # type: ignore[arg-type]
    assert len(a) == 25
    for ea, eb in zip(a, b):
        assert ea.task == eb.task and ea.instruction == eb.instruction and ea.level == level
        np.testing.assert_array_equal(ea.initial_state, eb.initial_state)
    other = SUITE.episodes(level, 25, seed=4)  # type: ignore[arg-type]
    assert any(not np.array_equal(x.initial_state, y.initial_state) for x, y in zip(a, other))
    wording = "rephrase" if level == "rephrase" else "train"
    for ep in a:
        s = np.asarray(ep.initial_state)
        assert s.shape == (10,)
        assert not ep.task.is_success(s[None]), ep.task.spec()
        assert not ep.task.success(s[None]).any()
        assert ep.task in SUITE.tasks(level)  # type: ignore[arg-type]
        assert ep.instruction in ep.task.instructions(wording)  # type: ignore[arg-type]
        pos = s.reshape(5, 2)
        assert np.all((pos[:, 0] >= X_RANGE[0]) & (pos[:, 0] <= X_RANGE[1]))
        assert np.all((pos[:, 1] >= Y_RANGE[0]) & (pos[:, 1] <= Y_RANGE[1]))
        gaps = [np.linalg.norm(p - q) for p, q in itertools.combinations(pos, 2)]
        assert min(gaps) >= MIN_CENTER_DISTANCE - 1e-6


# ------------------------------------------------ exact values (mutation testing, issue 26)

def test_thresholds_exclude_their_exact_distance() -> None:
    """Relation and Near need a distance below 0.391, Gather below 0.325: exactly at it fails."""
    assert RELATION_DISTANCE == pytest.approx(0.391) and GATHER_RADIUS == pytest.approx(0.325)
    at = state(red=(RELATION_DISTANCE, 0.0), blue=(0.0, 0.0))
    inside = state(red=(np.nextafter(RELATION_DISTANCE, 0.0), 0.0), blue=(0.0, 0.0))
    assert not holds(Relation("red", "blue", "right"), at)
    assert holds(Relation("red", "blue", "right"), inside)
    assert not holds(Near("red", "blue"), at) and holds(Near("red", "blue"), inside)
    ring = {"red": (0.0, 0.2), "green": (-0.2, 0.0), "purple": (0.0, -0.2)}
    assert not holds(Gather("cyan"), state(cyan=(0.0, 0.0), blue=(GATHER_RADIUS, 0.0), **ring))
    # progress: -(0.325 - 0.28) for blue, + 0.05 for each of the 3 balls strictly inside
    progress = Gather("cyan").progress(
        state(cyan=(0.0, 0.0), blue=(GATHER_RADIUS, 0.0), **ring)[None]
    )
    assert progress[0] == pytest.approx(-0.045 + 0.15, abs=1e-12)


def test_relation_components_of_exactly_1e3_are_kept() -> None:
    """Only components below 1e-3 are zeroed: (1e-3, 1e-3) is at 45 degrees, i.e. behind."""
    s = state(red=(0.001, 0.001), blue=(0.0, 0.0))
    assert holds(Relation("red", "blue", "behind"), s)
    assert not holds(Relation("red", "blue", "right"), s)


def test_exact_progress_values_of_relation_push_near_all_of() -> None:
    """Progress is minus the distance to the target spot 0.3 beside the anchor (batched),
    the push travel capped at 0.2, minus the distance beyond 0.3 for near, and the sum of
    relation progresses + 0.2 per holding relation for all_of."""
    rel = Relation("red", "blue", "right")  # target (0.3, 0) with blue at the origin
    batch = np.stack(
        [
            traj(state(blue=(0, 0), red=(0.3, 0.4)), state(blue=(0, 0), red=(0.6, 0.4))),
            traj(state(blue=(0, 0), red=(0.3, 0.0)), state(blue=(0, 0), red=(0.0, -0.4))),
        ]
    )
    np.testing.assert_allclose(rel.progress(batch), [[-0.4, -0.5], [0.0, -0.5]], atol=1e-12)
    push = Push("blue", "right")
    path = traj(state(blue=(-0.3, 0.0)), state(blue=(-0.2, 0.0)), state(blue=(0.2, 0.0)))
    np.testing.assert_allclose(push.progress(path), [0.0, 0.1, 0.2], atol=1e-12)
    near = Near("red", "blue")
    path = traj(state(blue=(0, 0), red=(0.5, 0.0)), state(blue=(0, 0), red=(0.2, 0.0)))
    np.testing.assert_allclose(near.progress(path), [-0.2, 0.0], atol=1e-12)
    all_of = AllOf([("red", "green", "left"), ("blue", "green", "right")])
    s = state(green=(0.0, 0.0), red=(-0.3, 0.0), blue=(0.3, 0.4))  # first holds, second 0.4 off
    assert all_of.progress(s[None])[0] == pytest.approx(-0.4 + 0.2, abs=1e-12)


def test_float32_states_are_judged_as_their_float64_values() -> None:
    s = state(red=(0.5, 0.1), blue=(0.0, 0.0)).astype(np.float32)[None]
    progress = Near("red", "blue").progress(s)
    assert progress.dtype == np.float64
    assert progress.tolist() == Near("red", "blue").progress(s.astype(np.float64)).tolist()


def test_line_at_exactly_30_degrees_is_aligned() -> None:
    c, s = np.cos(np.radians(30.0)), np.sin(np.radians(30.0))
    on_line = state(red=(0, 0), blue=(c, s), green=(2 * c, 2 * s))
    assert holds(Line(("red", "blue", "green")), on_line)


def test_line_targets_are_spaced_and_at_the_clipped_mean_height() -> None:
    """3 balls 0.3 apart, 4 balls 0.88/3 apart, 5 balls 0.22 apart, centred on x = 0, at the
    mean y of the line's balls clipped to [-0.05, 0.45], per step."""
    three = Line(("red", "blue", "green"))
    path = traj(
        state(red=(-0.3, 0.1), blue=(0.0, 0.2), green=(0.3, 0.3)),  # mean y 0.2
        state(red=(-0.3, 0.6), blue=(0.0, 0.6), green=(0.3, 0.6)),
        state(red=(-0.3, -0.3), blue=(0.0, -0.3), green=(0.3, -0.3)),
    )
    xs = [-0.3, 0.0, 0.3]
    expected = [[[x, y] for x in xs] for y in (0.2, 0.45, -0.05)]
    np.testing.assert_allclose(three.targets(path), expected, atol=1e-12)
    four = Line(("red", "blue", "green", "purple")).targets(state()[None])[0]
    np.testing.assert_allclose(four[:, 0], [-0.44, -0.44 / 3, 0.44 / 3, 0.44], atol=1e-12)
    five = Line(tuple(COLORS)).targets(state()[None])[0]
    np.testing.assert_allclose(five[:, 0], [-0.44, -0.22, 0.0, 0.22, 0.44], atol=1e-12)


def test_line_progress_is_minus_the_gap_plus_0_1_per_aligned_step() -> None:
    task = Line(("red", "blue", "green"))
    on = state(red=(-0.3, 0.2), blue=(0.0, 0.2), green=(0.3, 0.2))  # on the targets
    # mean y 0.3: gaps 0.1 + 0.1 + 0.2; red->blue aligned, blue->green at 45 degrees
    off = state(red=(-0.3, 0.2), blue=(0.0, 0.2), green=(0.3, 0.5))
    np.testing.assert_allclose(task.progress(traj(on, off)), [0.2, -0.4 + 0.1], atol=1e-12)


def sequential_batch() -> np.ndarray:
    """Stage 1: red left of blue (at the origin); stage 2: green right of blue, 0.02 short
    of its target spot. Trajectory 0 does them at steps 1 and 2, trajectory 1 holds both from
    the start (one stage per step), and both keep holding afterwards."""
    red, green = (-0.3, 0.0), (0.32, 0.0)
    first = traj(
        state(blue=(0, 0)),
        state(blue=(0, 0), red=red),
        state(blue=(0, 0), red=red, green=green),
        state(blue=(0, 0), red=red, green=green),
    )
    second = traj(*[state(blue=(0, 0), red=red, green=green)] * 4)
    return np.stack([first, second])


SEQ = Sequential([("red", "blue", "left"), ("green", "blue", "right")])


def test_sequential_stays_complete_while_the_last_stage_keeps_holding() -> None:
    batch = sequential_batch()
    assert SEQ.stage_reached(batch).tolist() == [[0, 1, 2, 2], [1, 2, 2, 2]]
    assert SEQ.success(batch).tolist() == [[False, False, True, True], [False, True, True, True]]


def test_sequential_progress_is_stages_reached_plus_the_next_stage_progress() -> None:
    # red starts at (-0.45, -0.15): 0.15 * sqrt(2) from (-0.3, 0); green at (-0.45, 0.55) is
    # sqrt(0.75**2 + 0.55**2) from (0.3, 0); once complete the progress is exactly 2.
    first = [-0.15 * np.sqrt(2), 1 - np.sqrt(0.865), 2.0, 2.0]
    second = [1 - 0.02, 2.0, 2.0, 2.0]
    np.testing.assert_allclose(SEQ.progress(sequential_batch()), [first, second], atol=1e-12)


def test_messages_of_invalid_constructions() -> None:
    cases = [
        (lambda: Relation("pink", "red", "left"), "unknown ball 'pink'"),
        (lambda: Relation("red", "blue", "up"), "unknown direction 'up'"),
        (lambda: Relation("red", "red", "left"), "^a relation needs two different balls$"),
        (lambda: Near("cyan", 4), "^'near' needs two different balls$"),
        (lambda: AllOf([("red", "blue", "left")]), "all_of needs 2 or 3 relations, got 1"),
        (
            lambda: AllOf([("red", "blue", "left"), ("blue", "red", "left")]),
            "relations cannot hold together",
        ),
        (lambda: Line(("red", "blue")), "line needs 3-5 distinct balls"),
        (
            lambda: Sequential([("red", "blue", d) for d in DIRS]),
            "sequential needs 2 or 3 stages, got 4",
        ),
        (lambda: Near("red", "blue").success(np.zeros((3, 9))), r"10 entries, got \(3, 9\)"),
    ]
    for build, message in cases:
        with pytest.raises(ValueError, match=message):
            build()


def test_a_cycle_that_does_not_reach_back_to_the_start_is_incompatible() -> None:
    """red -> blue -> green -> blue: the walk from red must notice blue seen twice."""
    rels = [Relation("red", "blue", "left"), Relation("blue", "green", "left")]
    assert compatible_relations(rels)
    assert not compatible_relations([*rels, Relation("green", "blue", "right")])


def test_relation_default_wording_is_train() -> None:
    task = Relation("red", "blue", "left")
    assert task.instructions() == task.instructions("train") and len(task.instructions()) == 54


def test_relevant_balls_of_every_family() -> None:
    assert relevant_balls(Relation("red", "cyan", "left")) == (RED, CYAN)
    assert relevant_balls(Push("blue", "left")) == (BLUE,)
    assert relevant_balls(Near("green", "red")) == (GREEN, RED)
    all_of = AllOf([("purple", "green", "left"), ("red", "green", "right")])
    assert relevant_balls(all_of) == (RED, GREEN, PURPLE)
    seq = Sequential([("cyan", "blue", "left"), ("red", "green", "front")])
    assert relevant_balls(seq) == (RED, BLUE, GREEN, CYAN)
    assert relevant_balls(Line(("green", "red", "blue"))) == (GREEN, RED, BLUE)
    assert relevant_balls(Gather("green")) == (RED, BLUE, GREEN, PURPLE, CYAN)
