"""LIBERO tasks, their success functions and rewards on the 44-d state history.

Every judge takes states ``(..., T, 44)`` (layout in :mod:`imaginebench.envs.libero.layout`;
index 0 = the episode's initial state) and returns ``(..., T)``, vectorised over the leading
dimensions. "eef" is the end effector's position, an object's position is its body's; ``d(x, y)``
is the Euclidean distance, ``xy`` / ``z`` its horizontal part / the height difference.
Thresholds are the original's (all strict).

| task (``{a}``, ``{b}``: objects) | level | success at step ``t`` |
|---|---|---|
| ``pick-{a}`` | train | **grasp**: ``d(eef, a) < 0.05`` and ``a`` moved more than 0.1 mm since step ``t - 1`` |
| ``place-{a}``, ``pick-and-place-{a}`` | train, easy | **in basket**: ``xy(a, basket) < 0.14`` and ``z(a, basket) < 0.155`` (salad_dressing: 0.22) |
| ``pick-{a}-and-place-to-{b}`` | easy | ``xy(a, b) < 0.1`` and ``z(a, b) < 0.22`` |
| ``reach-{a}`` | easy | ``d(eef, a) < 0.05`` |
| ``sequential-pick-and-place-{a}-and-{b}`` | hard | ``a`` and ``b`` have each been in the basket (``xy < 0.14``, ``z < 0.22``) at some step ``<= t`` |
| ``pick-and-place-aside-{a}`` | hard | ``d(a_t, a_0) > 0.07``: moved away from where it **started** |
| ``sequential-pick-and-place-all`` | hard | all **three** objects have each been in the basket at some step ``<= t`` |
| ``pick-out-of-{a}`` | hard | ``d(a, basket) > 0.45`` (soup) / ``0.35`` (cream_cheese) / ``0.40`` (salad_dressing) |

Fixed defects of the original: ``sequential-pick-and-place-all`` checked the cream cheese twice
and never the salad dressing; "aside" measured from the state after the first step instead of
the initial state; and on an episode's first step the grasp check and the shaping reward
compared against the *previous episode's* last state. Here step 0 never grasps (it has no
earlier step) and step 1 is compared with the episode's own initial state.

**Reward** (:meth:`LiberoTask.rewards`, the original's): 20 x the decrease of the current
stage's distance (eef -> object before the grasp, object -> basket / second object after it;
for "aside" and "pick-out-of" the *increase* of the object's distance from its start / the
basket), +1 on the step at which a grasp (or, in the sequential tasks, a placement) is first
detected, +1 on the step that accomplishes a single-goal task. The stage of ``pick-and-place``
and ``pick-to`` switches one step after the grasp (the original tested its grasp flag before
updating it), that of "aside", "pick-out-of" and the sequential tasks on the grasp's step.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from imaginebench.envs.base import Task, Wording
from imaginebench.envs.libero import instructions as text
from imaginebench.envs.libero.layout import (
    EEF_POS,
    OBJECTS,
    check_states,
    entity_pos,
)

GRASP_DISTANCE = 0.05
GRASP_MOVE = 1e-4
REACH_DISTANCE = 0.05
BASKET_XY = 0.14
BASKET_Z = 0.155
TALL_BASKET_Z = 0.22  # salad_dressing's, and every object's in the sequential tasks
PICK_TO_XY = 0.1
PICK_TO_Z = 0.22
ASIDE_DISTANCE = 0.07
OUT_OF_DISTANCE: dict[str, float] = {
    "alphabet_soup": 0.45,
    "cream_cheese": 0.35,
    "salad_dressing": 0.40,
}
SHAPING_SCALE = 20.0
BONUS = 1.0
_CLOSENESS_SCALE = 10.0  # progress: closeness 1 / (1 + 10 d) of the current stage's distance


def _task_table() -> dict[str, tuple[str, tuple[str, ...]]]:
    """Task name -> (kind, objects), in the order of the levels."""
    table: dict[str, tuple[str, tuple[str, ...]]] = {}
    for kind in ("pick", "place"):
        for a in OBJECTS:
            table[f"{kind}-{a}"] = (kind, (a,))
    for a in OBJECTS:
        table[f"pick-and-place-{a}"] = ("pick-and-place", (a,))
    pairs = [(a, b) for a in OBJECTS for b in OBJECTS if a != b]
    for a, b in pairs:
        table[f"pick-{a}-and-place-to-{b}"] = ("pick-to", (a, b))
    for a in OBJECTS:
        table[f"reach-{a}"] = ("reach", (a,))
    for a, b in pairs:
        table[f"sequential-pick-and-place-{a}-and-{b}"] = ("sequential", (a, b))
    for a in OBJECTS:
        table[f"pick-and-place-aside-{a}"] = ("aside", (a,))
    table["sequential-pick-and-place-all"] = ("all", OBJECTS)
    for a in OBJECTS:
        table[f"pick-out-of-{a}"] = ("pick-out-of", (a,))
    return table


TASKS: dict[str, tuple[str, tuple[str, ...]]] = _task_table()
TASK_NAMES: tuple[str, ...] = tuple(TASKS)


def check_task_name(name: str) -> str:
    if name not in TASKS:
        raise ValueError(f"unknown LIBERO task {name!r}; expected one of {TASK_NAMES}")
    return name


# -- measurements on states (..., T, 44) -> (..., T) ----------------------------------------------
def position(s: np.ndarray, entity: str) -> np.ndarray:
    return s[..., entity_pos(entity)]


def distance(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    return np.linalg.norm(x - y, axis=-1)


def eef_distance(s: np.ndarray, obj: str) -> np.ndarray:
    return distance(s[..., EEF_POS], position(s, obj))


def grasped(s: np.ndarray, obj: str) -> np.ndarray:
    """The original's grasp test: the end effector within 5 cm of ``obj`` and ``obj`` moved
    more than 0.1 mm since the previous step of the same episode (never at step 0)."""
    p = position(s, obj)
    moved = np.zeros(p.shape[:-1], dtype=bool)
    moved[..., 1:] = distance(p[..., 1:, :], p[..., :-1, :]) > GRASP_MOVE
    return (eef_distance(s, obj) < GRASP_DISTANCE) & moved


def near(s: np.ndarray, obj: str, target: str, xy: float, z: float) -> np.ndarray:
    """``obj`` within ``xy`` of ``target`` horizontally and ``z`` vertically."""
    a, b = position(s, obj), position(s, target)
    return (distance(a[..., :2], b[..., :2]) < xy) & (np.abs(a[..., 2] - b[..., 2]) < z)


def in_basket(s: np.ndarray, obj: str, tall: bool = False) -> np.ndarray:
    z = TALL_BASKET_Z if tall or obj == "salad_dressing" else BASKET_Z
    return near(s, obj, "basket", BASKET_XY, z)


def latched(events: np.ndarray) -> np.ndarray:
    """True from the first True on (along the last axis)."""
    return np.logical_or.accumulate(events, axis=-1)


@dataclass(frozen=True)
class Stage:
    """One stage of a task: its event (``(..., T)`` bool) and the distance the reward shapes
    (``away``: rewarded for growing, else for shrinking)."""

    kind: str  # "grasp" | "reach" | "basket" | "basket-tall" | "to" | "aside" | "out-of"
    obj: str
    other: str = "basket"
    away: bool = False

    def event(self, s: np.ndarray) -> np.ndarray:
        if self.kind == "grasp":
            return grasped(s, self.obj)
        if self.kind == "reach":
            return eef_distance(s, self.obj) < REACH_DISTANCE
        if self.kind in ("basket", "basket-tall"):
            return in_basket(s, self.obj, tall=self.kind == "basket-tall")
        if self.kind == "to":
            return near(s, self.obj, self.other, PICK_TO_XY, PICK_TO_Z)
        return self.measure(s) > self.threshold

    @property
    def threshold(self) -> float:
        return ASIDE_DISTANCE if self.kind == "aside" else OUT_OF_DISTANCE[self.obj]

    def measure(self, s: np.ndarray) -> np.ndarray:
        if self.kind in ("grasp", "reach"):
            return eef_distance(s, self.obj)
        if self.kind == "aside":  # from the episode's initial state
            return distance(position(s, self.obj), position(s, self.obj)[..., :1, :])
        return distance(position(s, self.obj), position(s, self.other))

    def closeness(self, s: np.ndarray) -> np.ndarray:
        """``(..., T)`` in [0, 1]: how close the stage is to its event."""
        m = self.measure(s)
        if self.away:
            return np.minimum(m / self.threshold, 1.0)
        return 1.0 / (1.0 + _CLOSENESS_SCALE * m)


def _stages(kind: str, objects: tuple[str, ...]) -> tuple[Stage, ...]:
    a = objects[0]
    if kind == "pick":
        return (Stage("grasp", a),)
    if kind == "reach":
        return (Stage("reach", a),)
    if kind == "place":
        return (Stage("basket", a),)
    if kind == "pick-and-place":
        return (Stage("grasp", a), Stage("basket", a))
    if kind == "pick-to":
        return (Stage("grasp", a), Stage("to", a, objects[1]))
    if kind == "aside":
        return (Stage("grasp", a), Stage("aside", a, away=True))
    if kind == "pick-out-of":
        return (Stage("grasp", a), Stage("out-of", a, away=True))
    return tuple(  # sequential, all: grasp and place every object in turn
        stage for obj in objects for stage in (Stage("grasp", obj), Stage("basket-tall", obj))
    )


@dataclass(frozen=True)
class LiberoTask(Task):
    """One LIBERO task by its original name (see :data:`TASK_NAMES`)."""

    name: str
    family = "libero"

    def __post_init__(self) -> None:
        check_task_name(self.name)

    @property
    def kind(self) -> str:
        """``pick``, ``place``, ``pick-and-place``, ``pick-to``, ``reach``, ``sequential``,
        ``aside``, ``all`` or ``pick-out-of``."""
        return TASKS[self.name][0]

    @property
    def objects(self) -> tuple[str, ...]:
        """The objects the task names, in order (``all``: the three)."""
        return TASKS[self.name][1]

    @property
    def stages(self) -> tuple[Stage, ...]:
        return _stages(self.kind, self.objects)

    @property
    def sequential(self) -> bool:
        """Whether success needs every stage's event at some step (sequential, all)."""
        return self.kind in ("sequential", "all")

    def success(self, states: np.ndarray) -> np.ndarray:
        s = check_states(states)
        stages = self.stages
        if self.sequential:
            return np.logical_and.reduce(
                [latched(st.event(s)) for st in stages if st.kind == "basket-tall"]
            )
        return stages[-1].event(s)

    def completed(self, states: np.ndarray) -> np.ndarray:
        """``(..., T)`` ints: how many stages have been reached in order by step ``t``
        (each stage's event latched; the last stage only counts at success)."""
        s = check_states(states)
        done = np.zeros(s.shape[:-1], dtype=np.int64)
        ahead = np.ones(s.shape[:-1], dtype=bool)
        stages = self.stages
        for k, stage in enumerate(stages):
            reached = self.success(s) if k == len(stages) - 1 else latched(stage.event(s))
            ahead &= reached
            done += ahead
        return done

    def rewards(self, states: np.ndarray) -> np.ndarray:
        """``(..., T - 1)`` the original's rewards of the transitions of ``states``."""
        s = check_states(states)
        stages = self.stages
        success = self.success(s)[..., 1:]
        events = [latched(st.event(s)) for st in stages]
        first = [e[..., 1:] & ~e[..., :-1] for e in events]
        if self.sequential:  # every first grasp and placement; the first stage not reached
            bonus = np.sum([f.astype(np.float64) for f in first], axis=0)
            current = np.full(success.shape, len(stages))
            for k in reversed(range(len(stages))):
                current = np.where(events[k][..., 1:], current, k)
        elif len(stages) == 1:
            bonus = success.astype(np.float64)
            current = np.zeros(success.shape, dtype=np.int64)
        else:  # grasp, then the second stage
            late = self.kind in ("pick-and-place", "pick-to")
            grasp = events[0][..., :-1] if late else events[0][..., 1:]
            bonus = first[0].astype(np.float64) + success
            current = grasp.astype(np.int64)
        shaping = np.zeros(success.shape)
        for k, stage in enumerate(stages):
            m = stage.measure(s)
            change = m[..., 1:] - m[..., :-1]
            shaping = np.where(current == k, change if stage.away else -change, shaping)
        return SHAPING_SCALE * shaping + BONUS * bonus

    def progress(self, states: np.ndarray) -> np.ndarray:
        """Stages reached in order plus the closeness of the next one, over the stage count."""
        s = check_states(states)
        done = self.completed(s)
        stages = self.stages
        closeness = np.stack([st.closeness(s) for st in stages], axis=-1)
        index = np.minimum(done, len(stages) - 1)[..., None]
        current = np.take_along_axis(closeness, index, axis=-1)[..., 0]
        return (done + np.where(done < len(stages), current, 0.0)) / len(stages)

    def instructions(self, wording: Wording = "train") -> list[str]:
        return text.wordings(self.kind, self.objects, wording)

    def to_params(self) -> dict[str, Any]:
        return {"name": self.name}

    @classmethod
    def from_params(cls, params: dict[str, Any]) -> LiberoTask:
        return cls(**params)


ALL_TASKS: tuple[LiberoTask, ...] = tuple(LiberoTask(n) for n in TASK_NAMES)
