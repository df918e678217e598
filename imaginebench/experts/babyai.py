"""Scripted BabyAI expert: a closed-loop planner over subgoals with BFS navigation.

Every step the expert reads the current state and picks the next subgoal of the task: drop a
wrongly held object on a free cell, walk to an object and pick it up, carry it to a target cell
and drop it, or walk in front of the door and toggle it (fetching a matching key first when the
door is locked; an open door is never toggled). Navigation is a breadth-first search over the
room interior (objects can be walked over; walls and the door block). For the line and pile
tasks the expert commits, per episode, to the line or corner item that needs the least work.
``epsilon`` replaces actions by uniformly random ones for data diversity.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from typing import Any

import numpy as np

from imaginebench.envs.babyai.tasks import (
    DROP_PENALTY,
    PICKUP_PENALTY,
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
from imaginebench.envs.babyai.world import (
    AGENT_ROW,
    CARRIED_COLOR,
    CARRIED_TYPE,
    DOOR_COLOR,
    DOOR_ROW,
    DOOR_STATE,
    IDX_TYPE,
    INTERIOR,
    LOCKED,
    NUM_ACTIONS,
    OPEN,
    PICKABLE,
    SLOT,
    Action,
)

Cell = tuple[int, int]
_STEPS: tuple[tuple[int, int, int], ...] = (
    (Action.UP, -1, 0),
    (Action.DOWN, 1, 0),
    (Action.LEFT, 0, -1),
    (Action.RIGHT, 0, 1),
)
_LO, _HI = INTERIOR
_INTERIOR_CELLS: list[Cell] = [(r, c) for r in range(_LO, _HI + 1) for c in range(_LO, _HI + 1)]


def _inside(cell: Cell) -> bool:
    return _LO <= cell[0] <= _HI and _LO <= cell[1] <= _HI


def _l1(a: Cell, b: Cell) -> int:
    return abs(a[0] - b[0]) + abs(a[1] - b[1])


def _neighbours(cell: Cell) -> list[Cell]:
    return [
        (cell[0] + dr, cell[1] + dc)
        for _, dr, dc in _STEPS
        if _inside((cell[0] + dr, cell[1] + dc))
    ]


def navigate(start: Cell, goals: Iterable[Cell]) -> int | None:
    """First move of a shortest interior path from ``start`` to the nearest goal (BFS);
    ``None`` when ``start`` is a goal."""
    goal_set = set(goals)
    if not goal_set:
        raise ValueError("navigate needs at least one goal cell")
    if start in goal_set:
        return None
    first: dict[Cell, int] = {start: -1}
    queue = deque([start])
    while queue:
        cell = queue.popleft()
        for action, dr, dc in _STEPS:
            nxt = (cell[0] + dr, cell[1] + dc)
            if not _inside(nxt) or nxt in first:
                continue
            first[nxt] = int(action) if cell == start else first[cell]
            if nxt in goal_set:
                return first[nxt]
            queue.append(nxt)
    raise ValueError(f"no goal in {sorted(goal_set)} is reachable from {start}")


class _View:
    """Convenient read access to one integer state."""

    def __init__(self, state: np.ndarray) -> None:
        s = [round(float(v)) for v in state]
        self.agent: Cell = (s[AGENT_ROW], s[AGENT_ROW + 1])
        self.held: str | None = IDX_TYPE.get(s[CARRIED_TYPE]) if s[CARRIED_TYPE] else None
        self.held_colour = s[CARRIED_COLOR]
        self.colour = {n: s[SLOT[n]] for n in PICKABLE}
        self.floor: dict[str, Cell] = {
            n: (s[SLOT[n] + 1], s[SLOT[n] + 2]) for n in PICKABLE if n != self.held
        }
        self.door_state, self.door_colour = s[DOOR_STATE], s[DOOR_COLOR]
        self.front: Cell = (s[DOOR_ROW], _HI)

    def free(self, cell: Cell) -> bool:
        return cell not in self.floor.values()


def _go(view: _View, goals: Iterable[Cell], then: int) -> int:
    """Walk to the nearest goal, then do ``then``."""
    move = navigate(view.agent, goals)
    return then if move is None else move


def _drop_anywhere(view: _View) -> int:
    return _go(view, [c for c in _INTERIOR_CELLS if view.free(c)], Action.DROP)


def _fetch(view: _View, name: str) -> int:
    return _go(view, [view.floor[name]], Action.PICKUP)


def _open_door(view: _View) -> int:
    has_key = view.held == "key" and view.held_colour == view.door_colour
    if view.door_state == LOCKED and not has_key:
        return _drop_anywhere(view) if view.held else _fetch(view, "key")
    return _go(view, [view.front], Action.TOGGLE)


def _fetch_nearest(view: _View, names: Iterable[str]) -> int:
    name = min(names, key=lambda n: (_l1(view.agent, view.floor[n]), PICKABLE.index(n)))
    return _fetch(view, name)


# ---- line and pile -------------------------------------------------------------------------
Line = tuple[int, int]  # (axis, index): axis 0 = a row, 1 = a column


def _off_line(view: _View, line: Line) -> list[str]:
    axis, index = line
    return [n for n, cell in view.floor.items() if cell[axis] != index]


def _line_cost(view: _View, line: Line) -> int:
    axis, index = line
    cost = 0
    for n in PICKABLE:
        cell = view.floor.get(n, view.agent)
        if n == view.held:
            cost += abs(cell[axis] - index) + DROP_PENALTY
        elif cell[axis] != index:
            cost += abs(cell[axis] - index) + PICKUP_PENALTY
    off = _off_line(view, line)
    if off and view.held is None:
        cost += min(_l1(view.agent, view.floor[n]) for n in off)
    return cost


def _put_line(view: _View, memory: dict[str, Any]) -> int:
    if "line" not in memory:
        lines = [(axis, i) for axis in (0, 1) for i in range(_LO, _HI + 1)]
        memory["line"] = min(lines, key=lambda line: _line_cost(view, line))
    axis, index = memory["line"]
    if view.held is not None:
        on_line = [c for c in _INTERIOR_CELLS if c[axis] == index and view.free(c)]
        return _go(view, on_line, Action.DROP)
    return _fetch_nearest(view, _off_line(view, memory["line"]))


def _side(anchor: Cell, cell: Cell) -> int | None:
    """0 if ``cell`` is beside ``anchor`` in its column (above/below), 1 if in its row, else None."""
    if _l1(anchor, cell) != 1:
        return None
    return 0 if cell[1] == anchor[1] else 1


def _pile_cost(view: _View, anchor: str) -> int:
    corner = view.floor[anchor]
    others = [n for n in PICKABLE if n != anchor]
    sides = [_side(corner, view.floor[n]) if n in view.floor else None for n in others]
    cost = 0
    for n, side in zip(others, sides):
        if side is None:
            cell = view.floor.get(n, view.agent)
            cost += min(_l1(cell, c) for c in _neighbours(corner)) + PICKUP_PENALTY
    if sides[0] is not None and sides[0] == sides[1]:
        cost += PICKUP_PENALTY + 1
    return cost


def _put_pile(view: _View, memory: dict[str, Any]) -> int:
    anchor = memory.get("anchor")
    if anchor not in view.floor:  # first step, or a random action picked the corner item up
        anchor = min(view.floor, key=lambda n: (_pile_cost(view, n), PICKABLE.index(n)))
        memory["anchor"] = anchor
    corner = view.floor[anchor]
    others = [n for n in PICKABLE if n != anchor]
    if view.held is not None:
        rest = next(n for n in others if n != view.held)
        taken = _side(corner, view.floor[rest])
        targets = [
            c
            for c in _neighbours(corner)
            if view.free(c) and (taken is None or _side(corner, c) != taken)
        ]
        return _go(view, targets, Action.DROP)
    sides = {n: _side(corner, view.floor[n]) for n in others}
    misplaced = [n for n in others if sides[n] is None]
    return _fetch_nearest(view, misplaced or others)  # both on one side: move the nearer one


# ---- the planner ---------------------------------------------------------------------------
def plan(task: Any, state: np.ndarray, memory: dict[str, Any]) -> int:
    """The expert's action for ``task`` in ``state`` (``memory`` persists within an episode)."""
    view = _View(state)
    door_closed = view.door_state != OPEN
    if isinstance(task, GoTo):
        if task.obj == "door":
            return _go(view, [view.front], Action.LEFT)
        if view.held == task.obj:  # dropping it puts it under the agent
            return _drop_anywhere(view)
        return _go(view, [view.floor[task.obj]], Action.LEFT)
    if isinstance(task, (Open, OpenLock)):
        return _open_door(view)
    if isinstance(task, PickUp):
        return _drop_anywhere(view) if view.held else _fetch(view, task.obj)
    if isinstance(task, PutNext):
        if view.held is not None and view.held != task.obj1:
            return _drop_anywhere(view)
        if view.held == task.obj1:
            beside = [c for c in _neighbours(view.floor[task.obj2]) if view.free(c)]
            return _go(view, beside, Action.DROP)
        return _fetch(view, task.obj1)
    if isinstance(task, OpenGo):
        return _open_door(view) if door_closed else _go(view, view.floor.values(), Action.LEFT)
    if isinstance(task, OpenPick):
        return _open_door(view) if door_closed else _fetch_nearest(view, view.floor)
    if isinstance(task, GoWall):
        return _go(view, [c for c in _INTERIOR_CELLS if _LO in c or _HI in c], Action.LEFT)
    if isinstance(task, GoCenter):
        return _go(view, [c for c in _INTERIOR_CELLS if set(c) <= {3, 4}], Action.LEFT)
    if isinstance(task, PutLine):
        return _put_line(view, memory)
    if isinstance(task, PutPile):
        return _put_pile(view, memory)
    raise TypeError(f"the BabyAI expert cannot solve {task!r}")


class BabyAIExpert:
    """Acts on a :class:`~imaginebench.envs.babyai.env.BabyAIEnv` from its current state."""

    def __init__(self, epsilon: float = 0.0, seed: int | None = None) -> None:
        if not 0.0 <= epsilon <= 1.0:
            raise ValueError(f"epsilon must be in [0, 1], got {epsilon}")
        self.epsilon = epsilon
        self.rng = np.random.default_rng(seed)
        self._episode: tuple[int, int] | None = None
        self._memory: dict[str, Any] = {}

    def act(self, env: Any) -> int:
        env = env.unwrapped
        assert env.task is not None, "reset the env first"
        episode = (id(env), id(env.trajectory))
        if len(env.trajectory) == 1 or episode != self._episode:
            self._episode, self._memory = episode, {}
        if self.rng.random() < self.epsilon:
            return int(self.rng.integers(NUM_ACTIONS))
        return int(plan(env.task, env.trajectory[-1], self._memory))
