"""Meta-World tasks and their success functions on the 91-d state history.

Every judge takes states ``(..., T, 91)`` (layout in :mod:`imaginebench.envs.metaworld.layout`;
index 0 = the initial state) and returns ``(..., T)``, vectorised over the leading dimensions.
Goals are read from the **initial** state's target slot (constant in single-stage episodes), so
an imagined rollout cannot move its own goal. ``tcp`` is the hand position plus
:data:`~imaginebench.envs.metaworld.layout.TCP_OFFSET`; "obj" is the named entity's position.

| task | success at step ``t`` (thresholds as Meta-World v3, which match the original's v2) |
|---|---|
| reach, reach-wall | ``‖tcp − goal‖ <= 0.05`` |
| push | ``‖obj − goal‖ <= 0.05`` |
| pick-place, push-wall, pick-place-wall, coffee-push | ``‖obj − goal‖ <= 0.07`` |
| button-press, coffee-button | ``|button_y − goal_y| <= 0.02`` (button-press-wall: 0.03) |
| door-unlock | ``|lock_x − goal_x| <= 0.02`` (goal = initial lock + (0.1, −0.04, 0)) |
| door-lock | ``|lock_z − goal_z| <= 0.02`` (goal = initial lock + (0, −0.04, −0.1)) |
| door-open | ``|handle_x − goal_x| <= 0.08`` (goal = door + (−0.3, −0.45, 0)) |
| door-close | ``‖handle − goal‖ <= 0.08`` |
| window-open / window-close | ``|handle_x − goal_x| <= 0.05`` |
| faucet-open | ``‖handle + (−0.04, 0, 0.03) − goal‖ <= 0.07`` (Meta-World's handle offset) |
| faucet-close | ``‖handle − goal‖ <= 0.07`` |
| hammer | the nail driven more than 0.09 m in (``nail_y − 0.64 > 0.09``, its slide joint) |
| soccer | ``‖ball − goal‖ <= 0.07`` |
| make-coffee | the mug within 0.07 of its goal **and** the coffee button within 0.02 (in y) of its target, initial button + (0, 0.03, 0) |
| locked-door-open | unlocked (door-unlock's test) at some step ``k <= t``, and the **handle** within 0.08 (in x) of the door-open goal, door + (−0.3, −0.45, 0) |

The compositions have two stages: stage 1 (the mug pushed under the nozzle; the door unlocked)
switches the observed target to stage 2's (the button target; the door-open goal). The original
judged stage 2 on the first object slot — the mug, not the button, and the lock, not the
handle — so pushing the mug alone "made coffee" and the door never had to open; here stage 2 is
judged on the button and the handle.

``dense_reward`` is a state-only potential in [0, 10] in Meta-World's style (its
``tolerance`` with the long-tail sigmoid): ``10 (0.25 approach + 0.75 place)``, ``approach``
the gripper's closeness to the entity it handles (absent for the reach tasks), ``place`` the
closeness of the tested quantity to its threshold, with the initial distance as the margin.
Compositions use half of it per stage: ``D1 / 2`` before stage 1 is reached, ``5 + D2 / 2``
after. Meta-World's own dense rewards read contact forces, finger-pad positions and initial
positions that the 91-d state does not hold, so they could not reward imagined rollouts.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from typing import Any

import numpy as np

from imaginebench.envs.base import Task, Wording
from imaginebench.envs.metaworld import instructions as text
from imaginebench.envs.metaworld.layout import (
    TARGET,
    TASK_ENTITIES,
    TASK_NAMES,
    check_states,
    check_task_name,
    entity_pos,
    entity_slice,
    tcp,
)

NAIL_REST_Y = 0.64  # the nail's y with its slide joint at 0 (the box is not randomised)
NAIL_TRAVEL = 0.09  # hammer success: slide joint > 0.09
COFFEE_BUTTON_TRAVEL = 0.03  # coffee-button's target: button + (0, 0.03, 0)
# locked-door-open: the door-open goal (door + (-0.3, -0.45, 0)) relative to the unlock goal
# (lock link + (0.1, -0.04, 0) = door + (0.1, -0.158, 0.061)); checked against the simulator.
UNLOCK_TO_OPEN_GOAL = np.array([-0.4, -0.292, -0.061])
APPROACH_WEIGHT = 0.25
APPROACH_BOUND = 0.02
APPROACH_MARGIN = 0.3
MIN_PLACE_MARGIN = 0.05
_LONG_TAIL_SCALE = 3.0  # long-tail sigmoid: 0.1 at one margin beyond the bound


@dataclass(frozen=True)
class Goal:
    """One state test: ``measure <= threshold`` (``strict``: ``<``).

    ``entity`` is the tested entity (``None``: the gripper's tool centre), ``kind`` how it is
    compared with the goal: ``dist`` (Euclidean), ``x`` / ``y`` / ``z`` (one coordinate) or
    ``nail`` (0.09 minus the nail's travel, against 0). ``offset`` is added to the entity's
    position; ``grip`` is where the gripper works (default: the tested entity)."""

    entity: str | None
    kind: str
    threshold: float
    offset: tuple[float, float, float] = (0.0, 0.0, 0.0)
    strict: bool = False
    grip: str | None = None

    def point(self, s: np.ndarray) -> np.ndarray:
        base = tcp(s) if self.entity is None else s[..., entity_pos(self.entity)]
        return base + np.asarray(self.offset)

    def measure(self, s: np.ndarray, goal: np.ndarray) -> np.ndarray:
        """``(..., T)`` the tested distance for states ``(..., T, 91)`` and goal ``(..., 3)``."""
        if self.kind == "nail":
            return NAIL_TRAVEL - (s[..., entity_pos("nail")][..., 1] - NAIL_REST_Y)
        delta = self.point(s) - goal[..., None, :]
        if self.kind == "dist":
            return np.linalg.norm(delta, axis=-1)
        return np.abs(delta[..., "xyz".index(self.kind)])

    def reached(self, s: np.ndarray, goal: np.ndarray) -> np.ndarray:
        m = self.measure(s, goal)
        return m < self.threshold if self.strict else m <= self.threshold

    def potential(self, s: np.ndarray, goal: np.ndarray) -> np.ndarray:
        """``(..., T)`` in [0, 1]: 1 once reached, the long-tail closeness otherwise."""
        m = self.measure(s, goal)
        place_bound = self.threshold if self.kind != "nail" else 0.0
        margin = np.maximum(m[..., :1] - place_bound, MIN_PLACE_MARGIN)
        place = tolerance(m, place_bound, margin)
        grip = self.grip or self.entity
        if grip is None:
            return place
        gap = np.linalg.norm(tcp(s) - s[..., entity_pos(grip)], axis=-1)
        approach = tolerance(gap, APPROACH_BOUND, APPROACH_MARGIN)
        return APPROACH_WEIGHT * approach + (1.0 - APPROACH_WEIGHT) * place


def tolerance(x: np.ndarray, bound: float, margin: np.ndarray | float) -> np.ndarray:
    """Meta-World's ``tolerance(x, bounds=(0, bound), margin, sigmoid="long_tail")``: 1 up to
    ``bound``, ``1 / ((3 d / margin)^2 + 1)`` at ``d`` beyond it."""
    d = np.maximum(np.asarray(x) - bound, 0.0) / margin
    return 1.0 / ((_LONG_TAIL_SCALE * d) ** 2 + 1.0)


GOALS: dict[str, Goal] = {
    "reach": Goal(None, "dist", 0.05),
    "push": Goal("target_object", "dist", 0.05),
    "pick-place": Goal("target_object", "dist", 0.07),
    "button-press": Goal("button", "y", 0.02),
    "door-unlock": Goal("lock", "x", 0.02),
    "door-open": Goal("handle", "x", 0.08),
    "window-open": Goal("window", "x", 0.05),
    "faucet-open": Goal("faucet", "dist", 0.07, offset=(-0.04, 0.0, 0.03)),
    "coffee-push": Goal("coffee", "dist", 0.07),
    "coffee-button": Goal("coffee_button", "y", 0.02),
    "reach-wall": Goal(None, "dist", 0.05),
    "push-wall": Goal("target_object", "dist", 0.07),
    "pick-place-wall": Goal("target_object", "dist", 0.07),
    "button-press-wall": Goal("button", "y", 0.03),
    "door-lock": Goal("lock", "z", 0.02),
    "door-close": Goal("handle", "dist", 0.08),
    "window-close": Goal("window", "x", 0.05),
    "faucet-close": Goal("faucet", "dist", 0.07),
    "hammer": Goal("nail", "nail", 0.0, strict=True, grip="hammer"),
    "soccer": Goal("soccer", "dist", 0.07),
}
STAGE_TASKS: dict[str, tuple[str, str]] = {
    "make-coffee": ("coffee-push", "coffee-button"),
    "locked-door-open": ("door-unlock", "door-open"),
}
"""Each composition's two stages, as the training tasks they are."""

STAGE_1_HOLDS = {"make-coffee": True, "locked-door-open": False}
"""Whether a composition's stage 1 must still hold when stage 2 is done (the mug stays under
the nozzle; the unlocked door counts once unlocked)."""

STAGES: dict[str, tuple[Goal, Goal, bool]] = {
    name: (GOALS[first], GOALS[second], STAGE_1_HOLDS[name])
    for name, (first, second) in STAGE_TASKS.items()
}
"""Each composition's stage goals and :data:`STAGE_1_HOLDS`."""


def stage2_goal(name: str, states: np.ndarray) -> np.ndarray:
    """``(..., 3)`` stage 2's goal of a composition, from the initial state."""
    s0 = check_states(states)[..., 0, :]
    if name == "make-coffee":
        return s0[..., entity_pos("coffee_button")] + np.array([0.0, COFFEE_BUTTON_TRAVEL, 0.0])
    if name == "locked-door-open":
        return s0[..., TARGET] + UNLOCK_TO_OPEN_GOAL
    raise ValueError(f"{name!r} is not a two-stage task")


@dataclass(frozen=True)
class MetaWorldTask(Task):
    """One Meta-World task by name (see :data:`~imaginebench.envs.metaworld.layout.TASK_NAMES`)."""

    name: str
    family = "metaworld"

    def __post_init__(self) -> None:
        check_task_name(self.name)

    @property
    def two_stage(self) -> bool:
        return self.name in STAGES

    def _goal0(self, s: np.ndarray) -> np.ndarray:
        return s[..., 0, TARGET]

    def stage(self, states: np.ndarray) -> np.ndarray:
        """``(..., T)`` ints: 1 from the first step at which a composition's stage 1 is reached
        (always 0 for single-stage tasks)."""
        s = check_states(states)
        if not self.two_stage:
            return np.zeros(s.shape[:-1], dtype=np.int64)
        first = STAGES[self.name][0]
        return np.logical_or.accumulate(first.reached(s, self._goal0(s)), axis=-1).astype(np.int64)

    def observed(self, states: np.ndarray) -> np.ndarray:
        """The last state, its target switched to stage 2's goal once a composition's stage 1
        has been reached (what :class:`MetaWorldEnv` observes)."""
        s = check_states(states)
        last = np.array(s[-1], dtype=np.asarray(states).dtype)
        if self.two_stage and self.stage(s)[-1]:
            last[TARGET] = stage2_goal(self.name, s)
        return last

    def as_stage_task(self, states: np.ndarray, instruction: str) -> tuple[str, np.ndarray]:
        """A composition's current stage as its training task: one of that task's training
        wordings (picked by a checksum of ``instruction``, so each rollout keeps its own) and
        every entry in view but the other stage's entity slots, which that task's scenes leave
        empty. Single-stage tasks: ``instruction`` and every entry."""
        s = check_states(states)
        in_view = np.ones(s.shape[-1], dtype=bool)
        if not self.two_stage:
            return instruction, in_view
        task = STAGE_TASKS[self.name][int(self.stage(s)[-1])]
        for entity in set(TASK_ENTITIES[self.name]) - set(TASK_ENTITIES[task]):
            in_view[entity_slice(entity)] = False
        choices = text.wordings(task, "train")
        return choices[zlib.crc32(instruction.encode()) % len(choices)], in_view

    def success(self, states: np.ndarray) -> np.ndarray:
        s = check_states(states)
        if not self.two_stage:
            return GOALS[self.name].reached(s, self._goal0(s))
        first, second, hold = STAGES[self.name]
        done = second.reached(s, stage2_goal(self.name, s))
        if hold:
            return done & first.reached(s, self._goal0(s))
        return done & self.stage(s).astype(bool)

    def dense_reward(self, states: np.ndarray) -> np.ndarray:
        """``(..., T)`` the state-only dense reward (potential) in [0, 10]."""
        s = check_states(states)
        if not self.two_stage:
            return 10.0 * GOALS[self.name].potential(s, self._goal0(s))
        first, second, _ = STAGES[self.name]
        before = 5.0 * first.potential(s, self._goal0(s))
        after = 5.0 + 5.0 * second.potential(s, stage2_goal(self.name, s))
        return np.where(self.stage(s).astype(bool), after, before)

    def progress(self, states: np.ndarray) -> np.ndarray:
        return self.dense_reward(states) / 10.0

    def instructions(self, wording: Wording = "train") -> list[str]:
        return text.wordings(self.name, wording)

    def to_params(self) -> dict[str, Any]:
        return {"name": self.name}

    @classmethod
    def from_params(cls, params: dict[str, Any]) -> MetaWorldTask:
        return cls(**params)


ALL_TASKS: tuple[MetaWorldTask, ...] = tuple(MetaWorldTask(n) for n in TASK_NAMES)
