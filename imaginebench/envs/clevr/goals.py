"""The original CLEVR-Robot goal vectors (KALM / ImagineBench files) as our CLEVR tasks.

The original environment encodes a task as numbers: six for a relation or a push (a mark per
ball, then a direction), at least 24 for the hard level (entry 5 a task indicator, then up to
three six-number relations). :func:`kalm_goal_to_task` decodes one vector per level.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from imaginebench.envs.base import Task, check_level
from imaginebench.envs.clevr.physics import COLORS, NUM_BALLS
from imaginebench.envs.clevr.tasks import DIRECTIONS, AllOf, Gather, Line, Push, Relation

STILL_DIRECTION = 4  # the original easy level's "keep the ball still" goal
TAU_GOAL_DIM = 6
HARD_GOAL_MIN_DIM = 24
_INTEGRAL_TOL = 1e-4


class SkippedGoal(ValueError):
    """A well-formed goal vector whose task our suite cannot express; ``reason`` says why
    (``"still_goal"`` or ``"incompatible_goal"``)."""

    def __init__(self, reason: str, message: str) -> None:
        self.reason = reason
        super().__init__(message)


def _code(value: float, what: str) -> int:
    """An entry of a goal vector that must be a whole number."""
    if not np.isfinite(value) or abs(value - round(value)) > _INTEGRAL_TOL:
        raise ValueError(f"{what} must be a whole number, got {value!r}")
    return int(round(value))


def _ball_marks(goal: np.ndarray, allowed: tuple[int, ...]) -> dict[int, list[int]]:
    """Entries 0-4 of a six-number goal: ``{mark: [ball indices]}`` for the non-zero marks."""
    marks: dict[int, list[int]] = {}
    for ball in range(NUM_BALLS):
        mark = _code(float(goal[ball]), f"ball mark {ball} ({COLORS[ball]})")
        if mark not in allowed:
            raise ValueError(
                f"ball mark {ball} ({COLORS[ball]}) is {mark}, expected one of {allowed}"
            )
        if mark:
            marks.setdefault(mark, []).append(ball)
    return marks


def _tau_relation(goal: np.ndarray) -> Relation:
    """Six numbers: balls marked 1 (moved) / 2 (anchor), entry 5 the direction 0-3."""
    marks = _ball_marks(goal, (0, 1, 2))
    moved, anchor = marks.get(1, []), marks.get(2, [])
    if len(moved) != 1 or len(anchor) != 1:
        raise ValueError(
            f"a relation goal needs exactly one ball marked 1 (moved) and one marked "
            f"2 (anchor), got {goal[:NUM_BALLS].tolist()}"
        )
    direction = _code(float(goal[5]), "direction (entry 5)")
    if not 0 <= direction < len(DIRECTIONS):
        raise ValueError(f"relation direction (entry 5) is {direction}, expected 0-3 {DIRECTIONS}")
    return Relation(moved[0], anchor[0], direction)


def _easy_push(goal: np.ndarray) -> Push:
    """Six numbers: the ball marked 1, entry 5 the direction 0-3 (4 = stay still: skipped)."""
    marks = _ball_marks(goal, (0, 1))
    balls = marks.get(1, [])
    if len(balls) != 1:
        raise ValueError(
            f"an easy goal needs exactly one ball marked 1, got {goal[:NUM_BALLS].tolist()}"
        )
    direction = _code(float(goal[5]), "direction (entry 5)")
    if direction == STILL_DIRECTION:
        raise SkippedGoal(
            "still_goal",
            f"'keep the {COLORS[balls[0]]} ball still' has no task in the imaginebench suite",
        )
    if not 0 <= direction < len(DIRECTIONS):
        raise ValueError(
            f"easy direction (entry 5) is {direction}, expected 0-3 {DIRECTIONS} or "
            f"{STILL_DIRECTION} (still)"
        )
    return Push(balls[0], direction)


def _hard_task(goal: np.ndarray) -> Task:
    """Entry 5 is the task indicator: 0/1 = two/three relations in goal[6:18] / goal[6:24],
    2 = all balls in colour order (ORDER), 3 = gather around green (SORT)."""
    indicator = _code(float(goal[5]), "hard task indicator (entry 5)")
    if indicator in (0, 1):
        k = 2 + indicator
        relations = []
        for j in range(k):
            sub = goal[TAU_GOAL_DIM * (j + 1) : TAU_GOAL_DIM * (j + 2)]
            try:
                relations.append(_tau_relation(sub))
            except ValueError as err:
                raise ValueError(f"sub-goal {j} ({sub.tolist()}): {err}") from None
        try:
            return AllOf(tuple(relations))
        except ValueError as err:
            raise SkippedGoal("incompatible_goal", str(err)) from None
    if indicator == 2:
        return Line(tuple(COLORS))
    if indicator == 3:
        return Gather("green")
    raise ValueError(
        f"hard task indicator (entry 5) is {indicator}, expected 0 (two relations), "
        f"1 (three relations), 2 (order) or 3 (sort)"
    )


def goal_kind(level: str, goal_dim: int) -> str:
    """Which interpretation applies to goal vectors of ``goal_dim`` entries at ``level``."""
    if level == "hard" and goal_dim >= HARD_GOAL_MIN_DIM:
        return "hard"
    if goal_dim != TAU_GOAL_DIM:
        expected = (
            f"{TAU_GOAL_DIM} or >= {HARD_GOAL_MIN_DIM}" if level == "hard" else str(TAU_GOAL_DIM)
        )
        raise ValueError(
            f"goal vectors have {goal_dim} entries; level {level!r} expects {expected}"
        )
    return "easy" if level == "easy" else "tau"


def kalm_goal_to_task(goal: Any, *, level: str = "train") -> Task:
    """Translate one original goal vector into our task.

    ``goal`` is ``(G,)`` or ``(T, G)`` (row 0 is used).  Levels ``train``/``rephrase`` read a
    six-number relation goal, ``easy`` a six-number push goal, and ``hard`` a task-indicator goal
    of at least 24 numbers (a six-number goal at ``hard`` is read as a relation).

    Raises:
        SkippedGoal: the goal is well formed but has no task here (easy "still", or relations
            that :class:`AllOf` rejects); ``err.reason`` says which.
        ValueError: the goal cannot be interpreted.
    """
    check_level(level)
    g = np.asarray(goal, dtype=np.float64)
    if g.ndim == 2:
        if g.shape[0] < 1:
            raise ValueError("goal has no rows")
        g = g[0]
    if g.ndim != 1:
        raise ValueError(f"a goal must be (G,) or (T, G), got shape {np.shape(goal)}")
    kind = goal_kind(level, g.shape[0])
    if not np.all(np.isfinite(g)):
        raise ValueError(f"goal contains non-finite values: {g.tolist()}")
    if kind == "hard":
        return _hard_task(g)
    if kind == "easy":
        return _easy_push(g)
    return _tau_relation(g)
