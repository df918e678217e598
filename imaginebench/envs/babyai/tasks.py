"""BabyAI task families with state-only success tests and L1 heuristic distances.

Every judge takes states ``(..., T, 17)`` (layout in :mod:`imaginebench.envs.babyai.world`) and
is vectorised over the leading dimensions. Success at step ``t`` depends on the state at ``t``
only (as in the original, whose episode ends at the first success), so no history is needed.

``progress`` is the negative of the task's heuristic distance ``d`` (``0`` exactly on success).
``d`` counts grid moves still needed, plus a staged remainder, plus penalties:
:data:`PICKUP_PENALTY` (24 = 3 x room size) per object that still has to be picked up,
:data:`DROP_PENALTY` (12) per object held but not yet put down where it belongs, and
:data:`WRONG_PENALTY` (72) while holding an object that must be dropped first.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from imaginebench.envs.babyai import instructions as text
from imaginebench.envs.babyai.world import (
    AGENT_COL,
    AGENT_ROW,
    CARRIED_COLOR,
    CARRIED_TYPE,
    COLOR_NAMES,
    DOOR_COLOR,
    DOOR_ROW,
    DOOR_STATE,
    INTERIOR,
    LOCKED,
    OPEN,
    PICKABLE,
    SLOT,
    STATE_DIM,
    TYPE_IDX,
)
from imaginebench.envs.base import Task, Wording

PICKUP_PENALTY = 24
DROP_PENALTY = 12
WRONG_PENALTY = 72
_FAR = 10**6  # distance of an impossible target
GOTO_TYPES: tuple[str, ...] = ("ball", "box", "key", "door")
CENTER = (3, 4)  # the centre rows / cols of the room


def as_int(states: np.ndarray) -> np.ndarray:
    """States rounded to ``int64`` (non-finite entries become -1) with a shape check."""
    arr = np.asarray(states, dtype=np.float64)
    if arr.shape[-1] != STATE_DIM:
        raise ValueError(f"BabyAI states must have {STATE_DIM} entries, got shape {arr.shape}")
    return np.rint(np.nan_to_num(arr, nan=-1.0, posinf=-1.0, neginf=-1.0)).astype(np.int64)


def colour_index(colour: str | int) -> int:
    if isinstance(colour, (int, np.integer)) and 0 <= int(colour) < len(COLOR_NAMES):
        return int(colour)
    if isinstance(colour, str) and colour in COLOR_NAMES:
        return COLOR_NAMES.index(colour)
    raise ValueError(f"unknown colour {colour!r}; expected one of {', '.join(COLOR_NAMES)}")


def _type(name: str, allowed: tuple[str, ...]) -> str:
    if name not in allowed:
        raise ValueError(f"unknown object type {name!r}; expected one of {', '.join(allowed)}")
    return name


# ---- state accessors on int arrays (..., 17) -------------------------------------------------
def agent(s: np.ndarray) -> np.ndarray:
    return s[..., AGENT_ROW : AGENT_COL + 1]


def carried(s: np.ndarray, name: str) -> np.ndarray:
    return s[..., CARRIED_TYPE] == TYPE_IDX[name]


def holding(s: np.ndarray) -> np.ndarray:
    return s[..., CARRIED_TYPE] != 0


def colour_of(s: np.ndarray, name: str) -> np.ndarray:
    return s[..., DOOR_COLOR if name == "door" else SLOT[name]]


def floor_pos(s: np.ndarray, name: str) -> np.ndarray:
    """An object's cell, or the agent's cell while it is carried."""
    k = SLOT[name]
    return np.where(carried(s, name)[..., None], agent(s), s[..., k + 1 : k + 3])


def door_front(s: np.ndarray) -> np.ndarray:
    """The interior cell west of the door (the only cell from which it can be toggled)."""
    return np.stack([s[..., DOOR_ROW], np.full(s.shape[:-1], INTERIOR[1])], axis=-1)


def l1(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.abs(a - b).sum(axis=-1)


def door_open(s: np.ndarray) -> np.ndarray:
    return s[..., DOOR_STATE] == OPEN


def door_distance(s: np.ndarray) -> np.ndarray:
    """Distance to an open door: walk to its front and toggle; for a locked door first fetch a
    key of its colour (dropping anything else held)."""
    front = door_front(s)
    to_door = l1(agent(s), front) + 1
    has_key = carried(s, "key") & (s[..., CARRIED_COLOR] == s[..., DOOR_COLOR])
    key = floor_pos(s, "key")
    fetch = WRONG_PENALTY * holding(s) + l1(agent(s), key) + PICKUP_PENALTY + l1(key, front) + 1
    locked = (s[..., DOOR_STATE] == LOCKED) & ~has_key
    return np.where(door_open(s), 0, np.where(locked, fetch, to_door))


def nearest_object(s: np.ndarray, origin: np.ndarray) -> np.ndarray:
    """L1 distance from ``origin`` to the nearest ball/box/key lying on the floor."""
    dists = [
        np.where(carried(s, n), _FAR, l1(origin, s[..., SLOT[n] + 1 : SLOT[n] + 3]))
        for n in PICKABLE
    ]
    return np.min(dists, axis=0)


class BabyAITask(Task):
    """Shared plumbing: integer conversion, ``progress = -distance``, zero distance on success.

    ``success`` and ``progress`` take trajectories ``(..., T, 17)`` (index 0 = the initial
    state), as every task's do; most families judge each state alone (:meth:`holds`), put-next
    also needs the initial state (:meth:`holds_from`)."""

    def success(self, states: np.ndarray) -> np.ndarray:
        s = as_int(states)
        return self.holds_from(s, s[..., :1, :])

    def progress(self, states: np.ndarray) -> np.ndarray:
        s = as_int(states)
        return -np.where(self.holds_from(s, s[..., :1, :]), 0, self.distance(s)).astype(np.float64)

    def holds(self, s: np.ndarray) -> np.ndarray:
        """``(...)`` bool success test on integer states ``(..., 17)``."""
        raise NotImplementedError

    def holds_from(self, s: np.ndarray, start: np.ndarray) -> np.ndarray:
        """``(..., T)`` success of integer states ``(..., T, 17)`` of an episode that began at
        ``start`` ``(..., 1, 17)``; the families whose test needs no history use :meth:`holds`."""
        return self.holds(s)

    def distance(self, s: np.ndarray) -> np.ndarray:
        """``(...)`` heuristic distance to success on integer states."""
        raise NotImplementedError

    def initial_colours(self) -> dict[str, int]:
        """Colours the initial state must give to objects (``{"ball"|...|"door": index}``)."""
        return {}

    def to_params(self) -> dict[str, Any]:
        return {}

    @classmethod
    def from_params(cls, params: dict[str, Any]) -> BabyAITask:
        return cls(**params)


# ---- train / rephrase families -----------------------------------------------------------------
@dataclass(frozen=True)
class GoTo(BabyAITask):
    """Stand on the object's cell (for the door: the interior cell west of it)."""

    obj: str
    colour: str
    family = "babyai_goto"

    def __post_init__(self) -> None:
        _type(self.obj, GOTO_TYPES)
        object.__setattr__(self, "colour", COLOR_NAMES[colour_index(self.colour)])

    def _target(self, s: np.ndarray) -> np.ndarray:
        return door_front(s) if self.obj == "door" else floor_pos(s, self.obj)

    def holds(self, s: np.ndarray) -> np.ndarray:
        on = l1(agent(s), self._target(s)) == 0
        if self.obj != "door":
            on &= ~carried(s, self.obj)
        return on & (colour_of(s, self.obj) == colour_index(self.colour))

    def distance(self, s: np.ndarray) -> np.ndarray:
        d = l1(agent(s), self._target(s))
        if self.obj != "door":  # a held target is one drop away
            d = np.where(carried(s, self.obj), 1, d)
        return d

    def initial_colours(self) -> dict[str, int]:
        return {self.obj: colour_index(self.colour)}

    def instructions(self, wording: Wording = "train") -> list[str]:
        return text.goto_wordings(self.colour, self.obj, wording)

    def to_params(self) -> dict[str, Any]:
        return {"obj": self.obj, "colour": self.colour}


@dataclass(frozen=True)
class Open(BabyAITask):
    """Open the door of the given colour."""

    colour: str
    family = "babyai_open"

    def __post_init__(self) -> None:
        object.__setattr__(self, "colour", COLOR_NAMES[colour_index(self.colour)])

    def holds(self, s: np.ndarray) -> np.ndarray:
        return door_open(s) & (s[..., DOOR_COLOR] == colour_index(self.colour))

    def distance(self, s: np.ndarray) -> np.ndarray:
        return door_distance(s)

    def initial_colours(self) -> dict[str, int]:
        return {"door": colour_index(self.colour)}

    def instructions(self, wording: Wording = "train") -> list[str]:
        return text.open_wordings(self.colour, wording)

    def to_params(self) -> dict[str, Any]:
        return {"colour": self.colour}


@dataclass(frozen=True)
class PickUp(BabyAITask):
    """End up carrying the object of the given type and colour."""

    obj: str
    colour: str
    family = "babyai_pickup"

    def __post_init__(self) -> None:
        _type(self.obj, PICKABLE)
        object.__setattr__(self, "colour", COLOR_NAMES[colour_index(self.colour)])

    def holds(self, s: np.ndarray) -> np.ndarray:
        return carried(s, self.obj) & (s[..., CARRIED_COLOR] == colour_index(self.colour))

    def distance(self, s: np.ndarray) -> np.ndarray:
        wrong = holding(s) & ~carried(s, self.obj)
        return WRONG_PENALTY * wrong + l1(agent(s), floor_pos(s, self.obj)) + PICKUP_PENALTY

    def initial_colours(self) -> dict[str, int]:
        return {self.obj: colour_index(self.colour)}

    def instructions(self, wording: Wording = "train") -> list[str]:
        return text.pickup_wordings(self.colour, self.obj, wording)

    def to_params(self) -> dict[str, Any]:
        return {"obj": self.obj, "colour": self.colour}


@dataclass(frozen=True)
class PutNext(BabyAITask):
    """Put object 1 on a cell 4-adjacent to object 2, both on the floor, object 2 where the
    episode started it: object 1 is the one moved, as in BabyAI's own verifier (minigrid's
    ``PutNextInstr`` succeeds when object 1 is dropped next to object 2's initial cell).
    Carrying object 2 to object 1 does not count."""

    obj1: str
    colour1: str
    obj2: str
    colour2: str
    family = "babyai_putnext"

    def __post_init__(self) -> None:
        _type(self.obj1, PICKABLE)
        _type(self.obj2, PICKABLE)
        if self.obj1 == self.obj2:
            raise ValueError("put-next needs two different object types")
        object.__setattr__(self, "colour1", COLOR_NAMES[colour_index(self.colour1)])
        object.__setattr__(self, "colour2", COLOR_NAMES[colour_index(self.colour2)])

    def holds(self, s: np.ndarray) -> np.ndarray:
        a, b = self.obj1, self.obj2
        return (
            ~carried(s, a)
            & ~carried(s, b)
            & (l1(floor_pos(s, a), floor_pos(s, b)) == 1)
            & (colour_of(s, a) == colour_index(self.colour1))
            & (colour_of(s, b) == colour_index(self.colour2))
        )

    def holds_from(self, s: np.ndarray, start: np.ndarray) -> np.ndarray:
        unmoved = (floor_pos(s, self.obj2) == floor_pos(start, self.obj2)).all(axis=-1)
        return self.holds(s) & unmoved

    def distance(self, s: np.ndarray) -> np.ndarray:
        p1, p2, me = floor_pos(s, self.obj1), floor_pos(s, self.obj2), agent(s)
        has1 = carried(s, self.obj1)
        wrong = holding(s) & ~has1
        if_held = np.abs(l1(me, p2) - 1) + DROP_PENALTY
        if_not = l1(me, p1) + PICKUP_PENALTY + np.abs(l1(p1, p2) - 1) + DROP_PENALTY
        return WRONG_PENALTY * wrong + np.where(has1, if_held, if_not)

    def initial_colours(self) -> dict[str, int]:
        return {self.obj1: colour_index(self.colour1), self.obj2: colour_index(self.colour2)}

    def instructions(self, wording: Wording = "train") -> list[str]:
        return text.putnext_wordings(self.colour1, self.obj1, self.colour2, self.obj2, wording)

    def to_params(self) -> dict[str, Any]:
        return {
            "obj1": self.obj1,
            "colour1": self.colour1,
            "obj2": self.obj2,
            "colour2": self.colour2,
        }


# ---- easy ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class OpenGo(BabyAITask):
    """The door is open and the agent stands on the ball, box or key."""

    family = "babyai_open_go"

    def holds(self, s: np.ndarray) -> np.ndarray:
        return door_open(s) & (nearest_object(s, agent(s)) == 0)

    def distance(self, s: np.ndarray) -> np.ndarray:
        staged = door_distance(s) + nearest_object(s, door_front(s))
        return np.where(door_open(s), nearest_object(s, agent(s)), staged)

    def instructions(self, wording: Wording = "train") -> list[str]:
        return list(text.EASY_HARD["open_go"])


@dataclass(frozen=True)
class OpenPick(BabyAITask):
    """The door is open and the agent carries any object (the original's inverted test, fixed)."""

    family = "babyai_open_pick"

    def holds(self, s: np.ndarray) -> np.ndarray:
        return door_open(s) & holding(s)

    def distance(self, s: np.ndarray) -> np.ndarray:
        origin = np.where(door_open(s)[..., None], agent(s), door_front(s))
        pick = np.where(holding(s), 0, nearest_object(s, origin) + PICKUP_PENALTY)
        return door_distance(s) + pick

    def instructions(self, wording: Wording = "train") -> list[str]:
        return list(text.EASY_HARD["open_pick"])


@dataclass(frozen=True)
class GoWall(BabyAITask):
    """Stand on a cell along a wall (row or column 1 or 6); episodes start in the centre."""

    family = "babyai_go_wall"

    def distance(self, s: np.ndarray) -> np.ndarray:
        lo, hi = INTERIOR
        a = agent(s)
        return np.minimum(np.min(a - lo, axis=-1), np.min(hi - a, axis=-1)).clip(0)

    def holds(self, s: np.ndarray) -> np.ndarray:
        lo, hi = INTERIOR
        a = agent(s)
        return ((a == lo) | (a == hi)).any(axis=-1)

    def instructions(self, wording: Wording = "train") -> list[str]:
        return list(text.EASY_HARD["go_wall"])


@dataclass(frozen=True)
class GoCenter(BabyAITask):
    """Stand on one of the four centre cells (rows and cols 3-4); episodes start off-centre."""

    family = "babyai_go_center"

    def distance(self, s: np.ndarray) -> np.ndarray:
        a = agent(s)
        return (np.maximum(CENTER[0] - a, 0) + np.maximum(a - CENTER[1], 0)).sum(axis=-1)

    def holds(self, s: np.ndarray) -> np.ndarray:
        a = agent(s)
        return ((a >= CENTER[0]) & (a <= CENTER[1])).all(axis=-1)

    def instructions(self, wording: Wording = "train") -> list[str]:
        return list(text.EASY_HARD["go_center"])


# ---- hard ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class OpenLock(BabyAITask):
    """Open the door, which starts locked and coloured like the key (fetch the key first)."""

    family = "babyai_open_lock"

    def holds(self, s: np.ndarray) -> np.ndarray:
        return door_open(s)

    def distance(self, s: np.ndarray) -> np.ndarray:
        return door_distance(s)

    def instructions(self, wording: Wording = "train") -> list[str]:
        return list(text.EASY_HARD["open_lock"])


def _items(s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Positions ``(..., 3, 2)`` (held item at the agent) and held flags ``(..., 3)``."""
    pos = np.stack([floor_pos(s, n) for n in PICKABLE], axis=-2)
    held = np.stack([carried(s, n) for n in PICKABLE], axis=-1)
    return pos, held


def placement_distance(s: np.ndarray, dist: np.ndarray) -> np.ndarray:
    """Distance to arrange the three items, minimised over candidate arrangements.

    ``dist`` ``(..., K, 3)`` is each item's L1 distance to its place in candidate ``k``. An item
    on the floor at its place costs 0; elsewhere on the floor ``dist + 24``; held ``dist + 12``;
    when the hands are empty the walk to the nearest misplaced item is added.
    """
    pos, held = _items(s)
    pos, held = pos[..., None, :, :], held[..., None, :]
    placed = ~held & (dist == 0)
    cost = np.where(placed, 0, dist + np.where(held, DROP_PENALTY, PICKUP_PENALTY)).sum(axis=-1)
    walk = np.where(placed, _FAR, l1(agent(s)[..., None, None, :], pos)).min(axis=-1)
    walk = np.where(placed.all(axis=-1) | held.any(axis=-1), 0, walk)
    return (cost + walk).min(axis=-1)


def _collinear(pos: np.ndarray) -> np.ndarray:
    same = pos == pos[..., :1, :]
    return same[..., 0].all(axis=-1) | same[..., 1].all(axis=-1)


@dataclass(frozen=True)
class PutLine(BabyAITask):
    """Ball, box and key lie in one row or one column, none carried."""

    family = "babyai_put_line"

    def holds(self, s: np.ndarray) -> np.ndarray:
        pos, held = _items(s)
        return ~held.any(axis=-1) & _collinear(pos)

    def distance(self, s: np.ndarray) -> np.ndarray:
        pos, _ = _items(s)
        lines = np.arange(INTERIOR[0], INTERIOR[1] + 1)
        rows = np.abs(pos[..., None, :, 0] - lines[:, None])  # (..., 6, 3)
        cols = np.abs(pos[..., None, :, 1] - lines[:, None])
        return placement_distance(s, np.concatenate([rows, cols], axis=-2))

    def instructions(self, wording: Wording = "train") -> list[str]:
        return list(text.EASY_HARD["put_line"])


def adjacent_pairs(pos: np.ndarray) -> np.ndarray:
    """Number of 4-adjacent pairs among three positions ``(..., 3, 2)``."""
    return sum((l1(pos[..., i, :], pos[..., j, :]) == 1).astype(np.int64) for i, j in _PAIRS)


_PAIRS = ((0, 1), (0, 2), (1, 2))


@dataclass(frozen=True)
class PutPile(BabyAITask):
    """An L-shaped pile: >= 2 of the 3 item pairs 4-adjacent, not all in one row/column, none
    carried (one item is the corner, one beside it in its row and one in its column)."""

    family = "babyai_put_pile"

    def holds(self, s: np.ndarray) -> np.ndarray:
        pos, held = _items(s)
        return ~held.any(axis=-1) & (adjacent_pairs(pos) >= 2) & ~_collinear(pos)

    def distance(self, s: np.ndarray) -> np.ndarray:
        pos, held = _items(s)
        lo, hi = INTERIOR
        candidates = []
        for a in range(3):
            corner = pos[..., a, :]
            b, c = [i for i in range(3) if i != a]
            # distance of item i to the nearest interior cell beside the corner along an axis
            side: dict[tuple[int, int], np.ndarray] = {}
            for i in (b, c):
                for axis in (0, 1):
                    other = 1 - axis
                    along = np.abs(pos[..., i, other] - corner[..., other])
                    best = np.full(along.shape, _FAR)
                    for step in (-1, 1):
                        cell = corner[..., axis] + step
                        ok = (cell >= lo) & (cell <= hi)
                        best = np.minimum(
                            best, np.where(ok, np.abs(pos[..., i, axis] - cell), _FAR)
                        )
                    side[i, axis] = along + best
            far = np.where(held[..., a], _FAR, 0)
            for axis_b in (0, 1):
                dist = np.zeros(pos.shape[:-1], dtype=np.int64)
                dist[..., a] = far
                dist[..., b] = side[b, axis_b]
                dist[..., c] = side[c, 1 - axis_b]
                candidates.append(dist)
        return placement_distance(s, np.stack(candidates, axis=-2))

    def instructions(self, wording: Wording = "train") -> list[str]:
        return list(text.EASY_HARD["put_pile"])


TRAIN_FAMILIES = (GoTo, Open, PickUp, PutNext)
EASY_TASKS = (OpenGo, OpenPick, GoWall, GoCenter)
HARD_TASKS = (OpenLock, PutLine, PutPile)
