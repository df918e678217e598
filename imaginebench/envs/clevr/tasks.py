"""CLEVR-Robot task families and their state-only success functions.

All judges take ball positions ``(..., T, 10)`` (x, y of red, blue, green, purple, cyan) and are
vectorised over leading batch dimensions. Thresholds are the original benchmark's:

* relation: the vector ``moved - anchor`` lies in the direction's 90-degree sector and its length
  is below ``3 * radius + 0.001`` (0.391);
* line: every consecutive ball-to-ball vector is within 30 degrees of +x;
* gather: every other ball is within ``2.5 * radius`` (0.325) of the centre ball;
* push (easy): the ball moved at least 0.15 along the direction since the episode start.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from imaginebench.envs.base import Task, Wording
from imaginebench.envs.clevr import instructions as text
from imaginebench.envs.clevr.physics import BALL_RADIUS, COLORS, NUM_BALLS

DIRECTIONS: tuple[str, ...] = ("behind", "left", "front", "right")
# Unit vector of each direction in table coordinates (behind = +y, left = -x, ...).
DIRECTION_VECTORS = np.array([[0.0, 1.0], [-1.0, 0.0], [0.0, -1.0], [1.0, 0.0]])
# Sector centre angle (degrees, counter-clockwise from +x) of each direction.
SECTOR_CENTERS = np.array([90.0, 180.0, 270.0, 0.0])

RELATION_DISTANCE = 3 * BALL_RADIUS + 1e-3
GATHER_RADIUS = 2.5 * BALL_RADIUS
LINE_MAX_ANGLE_DEG = 30.0
PUSH_DISTANCE = 0.15
# Potential targets: where the expert aims the moved ball (a gap of ~1/3 radius to the anchor).
RELATION_TARGET_DISTANCE = 0.30
GATHER_TARGET_DISTANCE = 0.28


def ball_index(ball: str | int) -> int:
    """Accept a colour name or index; return the index with a clear error otherwise."""
    if isinstance(ball, (int, np.integer)) and 0 <= int(ball) < NUM_BALLS:
        return int(ball)
    if isinstance(ball, str) and ball in COLORS:
        return COLORS.index(ball)
    raise ValueError(f"unknown ball {ball!r}; expected one of {COLORS} or an index 0-4")


def direction_index(direction: str | int) -> int:
    if isinstance(direction, (int, np.integer)) and 0 <= int(direction) < len(DIRECTIONS):
        return int(direction)
    if isinstance(direction, str) and direction in DIRECTIONS:
        return DIRECTIONS.index(direction)
    raise ValueError(f"unknown direction {direction!r}; expected one of {DIRECTIONS}")


def positions(states: np.ndarray) -> np.ndarray:
    """``(..., 10)`` -> ``(..., 5, 2)`` with a shape check."""
    states = np.asarray(states, dtype=np.float64)
    if states.shape[-1] != 2 * NUM_BALLS:
        raise ValueError(f"CLEVR states must have {2 * NUM_BALLS} entries, got {states.shape}")
    return states.reshape(*states.shape[:-1], NUM_BALLS, 2)


def relation_holds(pos: np.ndarray, moved: int, anchor: int, direction: int) -> np.ndarray:
    """Sector + distance test of "``moved`` is ``direction`` of ``anchor``" on ``(..., 5, 2)``."""
    delta = pos[..., moved, :] - pos[..., anchor, :]
    delta = np.where(np.abs(delta) < 1e-3, 0.0, delta)
    angle = np.degrees(np.arctan2(delta[..., 1], delta[..., 0])) % 360.0
    offset = (angle - SECTOR_CENTERS[direction] + 45.0) % 360.0
    in_sector = offset < 90.0
    return in_sector & (np.linalg.norm(delta, axis=-1) < RELATION_DISTANCE)


def relation_gap(pos: np.ndarray, moved: int, anchor: int, direction: int) -> np.ndarray:
    """Distance of the moved ball to its target spot next to the anchor."""
    target = pos[..., anchor, :] + RELATION_TARGET_DISTANCE * DIRECTION_VECTORS[direction]
    return np.linalg.norm(pos[..., moved, :] - target, axis=-1)


@dataclass(frozen=True)
class Relation(Task):
    """Move ball ``moved`` to ``direction`` of ball ``anchor`` (train / rephrase levels)."""

    moved: int
    anchor: int
    direction: int
    family = "relation"

    def __post_init__(self) -> None:
        object.__setattr__(self, "moved", ball_index(self.moved))
        object.__setattr__(self, "anchor", ball_index(self.anchor))
        object.__setattr__(self, "direction", direction_index(self.direction))
        if self.moved == self.anchor:
            raise ValueError("a relation needs two different balls")

    def holds(self, pos: np.ndarray) -> np.ndarray:
        return relation_holds(pos, self.moved, self.anchor, self.direction)

    def success(self, states: np.ndarray) -> np.ndarray:
        return self.holds(positions(states))

    def progress(self, states: np.ndarray) -> np.ndarray:
        return -relation_gap(positions(states), self.moved, self.anchor, self.direction)

    def names(self) -> tuple[str, str, str]:
        return COLORS[self.moved], COLORS[self.anchor], DIRECTIONS[self.direction]

    def instructions(self, wording: Wording = "train") -> list[str]:
        return text.relation_wordings(*self.names(), wording=wording)

    def to_params(self) -> dict[str, Any]:
        m, a, d = self.names()
        return {"moved": m, "anchor": a, "direction": d}

    @classmethod
    def from_params(cls, params: dict[str, Any]) -> "Relation":
        return cls(params["moved"], params["anchor"], params["direction"])


@dataclass(frozen=True)
class Push(Task):
    """Push one ball at least 0.15 in a direction from where it started (easy level)."""

    ball: int
    direction: int
    family = "push"

    def __post_init__(self) -> None:
        object.__setattr__(self, "ball", ball_index(self.ball))
        object.__setattr__(self, "direction", direction_index(self.direction))

    def _travel(self, states: np.ndarray) -> np.ndarray:
        pos = positions(states)[..., self.ball, :]
        return (pos - pos[..., :1, :]) @ DIRECTION_VECTORS[self.direction]

    def success(self, states: np.ndarray) -> np.ndarray:
        return self._travel(states) >= PUSH_DISTANCE

    def progress(self, states: np.ndarray) -> np.ndarray:
        return np.minimum(self._travel(states), PUSH_DISTANCE + 0.05)

    def instructions(self, wording: Wording = "train") -> list[str]:
        return text.push_wordings(COLORS[self.ball], DIRECTIONS[self.direction])

    def to_params(self) -> dict[str, Any]:
        return {"ball": COLORS[self.ball], "direction": DIRECTIONS[self.direction]}

    @classmethod
    def from_params(cls, params: dict[str, Any]) -> "Push":
        return cls(params["ball"], params["direction"])


@dataclass(frozen=True)
class Near(Task):
    """Bring ball ``a`` next to ball ``b`` on any side (easy level)."""

    a: int
    b: int
    family = "near"

    def __post_init__(self) -> None:
        object.__setattr__(self, "a", ball_index(self.a))
        object.__setattr__(self, "b", ball_index(self.b))
        if self.a == self.b:
            raise ValueError("'near' needs two different balls")

    def _distance(self, states: np.ndarray) -> np.ndarray:
        pos = positions(states)
        return np.linalg.norm(pos[..., self.a, :] - pos[..., self.b, :], axis=-1)

    def success(self, states: np.ndarray) -> np.ndarray:
        return self._distance(states) < RELATION_DISTANCE

    def progress(self, states: np.ndarray) -> np.ndarray:
        return -np.maximum(self._distance(states) - RELATION_TARGET_DISTANCE, 0.0)

    def instructions(self, wording: Wording = "train") -> list[str]:
        return text.near_wordings(COLORS[self.a], COLORS[self.b])

    def to_params(self) -> dict[str, Any]:
        return {"a": COLORS[self.a], "b": COLORS[self.b]}

    @classmethod
    def from_params(cls, params: dict[str, Any]) -> "Near":
        return cls(params["a"], params["b"])


def _relations(items: Sequence[Relation | dict | Sequence]) -> tuple[Relation, ...]:
    out = []
    for r in items:
        if isinstance(r, Relation):
            out.append(r)
        elif isinstance(r, dict):
            out.append(Relation.from_params(r))
        else:
            out.append(Relation(*r))
    return tuple(out)


def compatible_relations(relations: Sequence[Relation]) -> bool:
    """Relations that can hold together: distinct moved balls, an acyclic 'moved -> anchor'
    graph, and no two balls asked to sit on the same side of the same anchor."""
    moved = [r.moved for r in relations]
    if len(set(moved)) != len(moved):
        return False
    if len({(r.anchor, r.direction) for r in relations}) != len(relations):
        return False
    edges = {r.moved: r.anchor for r in relations}
    for start in edges:
        seen, node = {start}, start
        while node in edges:
            node = edges[node]
            if node in seen:
                return False
            seen.add(node)
    return True


@dataclass(frozen=True)
class AllOf(Task):
    """Two or three relations that must hold at the same time (hard level)."""

    relations: tuple[Relation, ...]
    family = "all_of"

    def __post_init__(self) -> None:
        rel = _relations(self.relations)
        if not 2 <= len(rel) <= 3:
            raise ValueError(f"all_of needs 2 or 3 relations, got {len(rel)}")
        if not compatible_relations(rel):
            raise ValueError(f"relations cannot hold together: {[r.names() for r in rel]}")
        object.__setattr__(self, "relations", rel)

    def satisfied(self, states: np.ndarray) -> np.ndarray:
        """Number of relations holding at each step."""
        pos = positions(states)
        return sum(r.holds(pos).astype(np.int64) for r in self.relations)

    def success(self, states: np.ndarray) -> np.ndarray:
        return self.satisfied(states) == len(self.relations)

    def progress(self, states: np.ndarray) -> np.ndarray:
        return sum(r.progress(states) for r in self.relations) + 0.2 * self.satisfied(states)

    def instructions(self, wording: Wording = "train") -> list[str]:
        return text.all_of_wordings([r.names() for r in self.relations])

    def to_params(self) -> dict[str, Any]:
        return {"relations": [r.to_params() for r in self.relations]}

    @classmethod
    def from_params(cls, params: dict[str, Any]) -> "AllOf":
        return cls(_relations(params["relations"]))


@dataclass(frozen=True)
class Line(Task):
    """Arrange the given balls in a line along +x in the given order (hard level).

    With all five balls in colour order this is the original's ORDER task.
    """

    balls: tuple[int, ...]
    family = "line"

    def __post_init__(self) -> None:
        balls = tuple(ball_index(b) for b in self.balls)
        if not 3 <= len(balls) <= NUM_BALLS or len(set(balls)) != len(balls):
            raise ValueError(f"line needs 3-5 distinct balls, got {self.balls!r}")
        object.__setattr__(self, "balls", balls)

    def _aligned(self, states: np.ndarray) -> np.ndarray:
        pos = positions(states)[..., list(self.balls), :]
        step = pos[..., 1:, :] - pos[..., :-1, :]
        norm = np.linalg.norm(step, axis=-1)
        cos = np.where(norm > 1e-9, step[..., 0] / np.maximum(norm, 1e-9), -1.0)
        return cos >= np.cos(np.radians(LINE_MAX_ANGLE_DEG))

    def success(self, states: np.ndarray) -> np.ndarray:
        return self._aligned(states).all(axis=-1)

    def targets(self, states: np.ndarray) -> np.ndarray:
        """Evenly spaced target spots on a horizontal line through the balls' mean height."""
        pos = positions(states)[..., list(self.balls), :]
        n = len(self.balls)
        spacing = min(0.3, 0.88 / (n - 1))
        xs = (np.arange(n) - (n - 1) / 2) * spacing
        y = np.clip(pos[..., 1].mean(axis=-1, keepdims=True), -0.05, 0.45)
        return np.stack(np.broadcast_arrays(xs, y), axis=-1)

    def progress(self, states: np.ndarray) -> np.ndarray:
        pos = positions(states)[..., list(self.balls), :]
        gap = np.linalg.norm(pos - self.targets(states), axis=-1).sum(axis=-1)
        return -gap + 0.1 * self._aligned(states).sum(axis=-1)

    def instructions(self, wording: Wording = "train") -> list[str]:
        return text.line_wordings([COLORS[b] for b in self.balls])

    def to_params(self) -> dict[str, Any]:
        return {"balls": [COLORS[b] for b in self.balls]}

    @classmethod
    def from_params(cls, params: dict[str, Any]) -> "Line":
        return cls(tuple(params["balls"]))


@dataclass(frozen=True)
class Gather(Task):
    """Gather every other ball within 0.325 of the centre ball (hard level; SORT with green)."""

    center: int
    family = "gather"

    def __post_init__(self) -> None:
        object.__setattr__(self, "center", ball_index(self.center))

    def _distances(self, states: np.ndarray) -> np.ndarray:
        pos = positions(states)
        others = [i for i in range(NUM_BALLS) if i != self.center]
        return np.linalg.norm(
            pos[..., others, :] - pos[..., self.center : self.center + 1, :], axis=-1
        )

    def success(self, states: np.ndarray) -> np.ndarray:
        return (self._distances(states) < GATHER_RADIUS).all(axis=-1)

    def progress(self, states: np.ndarray) -> np.ndarray:
        d = self._distances(states)
        return -np.maximum(d - GATHER_TARGET_DISTANCE, 0.0).sum(axis=-1) + 0.05 * (
            d < GATHER_RADIUS
        ).sum(axis=-1)

    def instructions(self, wording: Wording = "train") -> list[str]:
        return text.gather_wordings(COLORS[self.center])

    def to_params(self) -> dict[str, Any]:
        return {"center": COLORS[self.center]}

    @classmethod
    def from_params(cls, params: dict[str, Any]) -> "Gather":
        return cls(params["center"])


@dataclass(frozen=True)
class Sequential(Task):
    """Relations to achieve one after another, in order (hard level).

    Stage ``k`` counts as reached at the first step, not before stage ``k - 1`` was reached, at
    which its relation holds; the task succeeds when the last stage is reached.
    """

    stages: tuple[Relation, ...]
    family = "sequential"

    def __post_init__(self) -> None:
        stages = _relations(self.stages)
        if not 2 <= len(stages) <= 3:
            raise ValueError(f"sequential needs 2 or 3 stages, got {len(stages)}")
        object.__setattr__(self, "stages", stages)

    def stage_reached(self, states: np.ndarray) -> np.ndarray:
        """``(..., T)`` number of stages completed up to and including each step."""
        pos = positions(states)
        holds = np.stack([s.holds(pos) for s in self.stages], axis=-1)  # (..., T, K)
        count = np.zeros(holds.shape[:-2], dtype=np.int64)
        out = np.zeros(holds.shape[:-1], dtype=np.int64)
        for t in range(holds.shape[-2]):
            # A stage completes at t if it is the next one and holds at t (one per step).
            nxt = np.minimum(count, len(self.stages) - 1)
            h = np.take_along_axis(holds[..., t, :], nxt[..., None], axis=-1)[..., 0]
            count = count + ((count < len(self.stages)) & h)
            out[..., t] = count
        return out

    def success(self, states: np.ndarray) -> np.ndarray:
        return self.stage_reached(states) == len(self.stages)

    def progress(self, states: np.ndarray) -> np.ndarray:
        reached = self.stage_reached(states)
        nxt = np.minimum(reached, len(self.stages) - 1)
        gaps = np.stack([s.progress(states) for s in self.stages], axis=-1)
        current = np.take_along_axis(gaps, nxt[..., None], axis=-1)[..., 0]
        return reached.astype(np.float64) + np.where(reached == len(self.stages), 0.0, current)

    def instructions(self, wording: Wording = "train") -> list[str]:
        return text.sequential_wordings([s.names() for s in self.stages])

    def to_params(self) -> dict[str, Any]:
        return {"stages": [s.to_params() for s in self.stages]}

    @classmethod
    def from_params(cls, params: dict[str, Any]) -> "Sequential":
        return cls(_relations(params["stages"]))


def relevant_balls(task: Task) -> tuple[int, ...]:
    """Balls whose pushes can make progress on ``task`` (used to prune the expert's search)."""
    if isinstance(task, Relation):
        return (task.moved, task.anchor)
    if isinstance(task, Push):
        return (task.ball,)
    if isinstance(task, Near):
        return (task.a, task.b)
    if isinstance(task, (AllOf, Sequential)):
        rels = task.relations if isinstance(task, AllOf) else task.stages
        return tuple(sorted({b for r in rels for b in (r.moved, r.anchor)}))
    if isinstance(task, Line):
        return task.balls
    return tuple(range(NUM_BALLS))
