"""Scripted LIBERO expert: end-effector waypoints for reach, grasp, lift, carry and release,
read from the 44-d state.

A task is a list of **jobs**, each moving one object (or, for reach, only the hand):

| task | jobs |
|---|---|
| pick | grasp the object, lift it |
| reach | bring the hand down to the object |
| place, pick-and-place | carry the object into the basket |
| pick-to | carry ``a`` next to ``b`` (7 cm from it, on the side ``a`` came from) and set it down |
| sequential, all | carry each object into its own spot in the basket, in the named order |
| aside | carry the object 12 cm further from the basket than where it started |
| pick-out-of | lift the object out of the basket and carry it 50 cm towards the robot's front |

A job runs through phases: **approach** (above the grasp pose, hand pointing down, gripper
open; the hand rises first if it is low and far), **descend** to the grasp
pose, **close** the gripper (10 steps), **lift** to :data:`CARRY_HEIGHT`, **carry** over the
destination, **lower** to the release height, **release** (open, 8 steps) and **retreat**
upwards. If the object is no longer at the hand while lifting, carrying or lowering, the job
starts again from the approach. Each phase moves the hand towards its waypoint with a
proportional command (``OSC_POSE`` moves it by up to 5 cm per action, so the command is the
remaining distance over 5 cm, capped at :data:`MAX_COMMAND`), and turns it towards the grasp
orientation (straight down) the same way. The phase is the expert's only memory, reset when an episode starts
(the env's ``trajectory`` holds one state). ``epsilon`` replaces an action by a uniformly random
one with that probability.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from imaginebench.envs.libero.layout import ACTION_DIM, EEF_POS, EEF_QUAT, entity_pos
from imaginebench.envs.libero.starts import GRASP_OFFSET, grasp_position, grasp_quat
from imaginebench.envs.libero.tasks import LiberoTask

CARRY_HEIGHT = 0.27  # the hand's height while carrying: every object clears the basket's rim
APPROACH_HEIGHT = 0.08  # above the grasp pose before descending
BASKET_RIM = 0.146  # the basket's top above its position
RELEASE_CLEARANCE = 0.03  # an object's bottom above the rim (basket) or the floor when released
POSITION_SCALE = 0.05  # m per unit of a[0:3]
ROTATION_SCALE = 0.5  # rad per unit of a[3:6]
MAX_COMMAND = 0.8
XY_TOLERANCE = 0.008
Z_TOLERANCE = 0.01
CLOSE_STEPS = 10
OPEN_STEPS = 8
DESCEND_STEPS = 40
DROPPED = 0.06  # the object this far from the hand while held: it was dropped
BESIDE = 0.07  # pick-to: a's spot this far from b
ASIDE = 0.12  # aside: the spot this much further from the basket
OUT_OF = 0.5  # pick-out-of: the spot this far from the basket, towards the robot's front
# each object's spot in the basket, relative to the basket's centre (so they do not land on
# each other in the sequential tasks)
BASKET_SPOTS: dict[str, tuple[float, float]] = {
    "alphabet_soup": (-0.03, -0.035),
    "cream_cheese": (0.0, 0.04),
    "salad_dressing": (0.035, -0.03),
}
PHASES = ("approach", "descend", "close", "lift", "carry", "lower", "release", "retreat")


@dataclass(frozen=True)
class Job:
    """Move ``obj`` to ``where`` (``"basket"``, ``"beside:<object>"``, ``"aside"``,
    ``"out-of"``, ``"lift"``: keep it lifted, ``"reach"``: only bring the hand to it)."""

    obj: str
    where: str


def jobs(task: LiberoTask) -> tuple[Job, ...]:
    """The jobs that accomplish ``task``."""
    kind, objects = task.kind, task.objects
    if kind == "pick":
        return (Job(objects[0], "lift"),)
    if kind == "reach":
        return (Job(objects[0], "reach"),)
    if kind in ("place", "pick-and-place"):
        return (Job(objects[0], "basket"),)
    if kind == "pick-to":
        return (Job(objects[0], f"beside:{objects[1]}"),)
    if kind == "aside":
        return (Job(objects[0], "aside"),)
    if kind == "pick-out-of":
        return (Job(objects[0], "out-of"),)
    return tuple(Job(obj, "basket") for obj in objects)  # sequential, all


def _unit(v: np.ndarray) -> np.ndarray:
    norm = float(np.linalg.norm(v))
    return v / norm if norm > 1e-9 else np.array([1.0, 0.0])


def destination(job: Job, states: np.ndarray) -> tuple[np.ndarray, float]:
    """Where the job's object goes: the hand's ``(x, y)`` over the spot and its release
    height."""
    first, now = states[0], states[-1]
    basket = now[entity_pos("basket")]
    start = first[entity_pos(job.obj)]
    rest = start[2] + GRASP_OFFSET[job.obj][2]  # the grip above the object's bottom, at rest
    if job.where == "basket":
        spot = basket[:2] + np.asarray(BASKET_SPOTS[job.obj])
        return spot, basket[2] + BASKET_RIM + RELEASE_CLEARANCE + rest
    if job.where.startswith("beside:"):
        other = now[entity_pos(job.where.split(":", 1)[1])]
        spot = other[:2] + BESIDE * _unit(start[:2] - other[:2])
        return spot, rest + RELEASE_CLEARANCE
    if job.where == "aside":
        spot = start[:2] + ASIDE * _unit(start[:2] - basket[:2])
        return spot, rest + RELEASE_CLEARANCE
    if job.where == "out-of":
        return basket[:2] + np.array([0.0, -OUT_OF]), CARRY_HEIGHT
    hand = now[EEF_POS]
    return hand[:2], CARRY_HEIGHT  # lift: stay


def _rotation_vector(rot: np.ndarray) -> np.ndarray:
    cos = np.clip((np.trace(rot) - 1.0) / 2.0, -1.0, 1.0)
    angle = np.arccos(cos)
    axis = np.array([rot[2, 1] - rot[1, 2], rot[0, 2] - rot[2, 0], rot[1, 0] - rot[0, 1]])
    if angle < 1e-9:
        return 0.5 * axis
    return angle / (2.0 * np.sin(angle)) * axis


def _matrix(quat_xyzw: np.ndarray) -> np.ndarray:
    x, y, z, w = np.asarray(quat_xyzw, dtype=np.float64) / np.linalg.norm(quat_xyzw)
    return np.array(
        [
            [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
            [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
            [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
        ]
    )


def move(state: np.ndarray, target: np.ndarray, quat: np.ndarray, gripper: float) -> np.ndarray:
    """The action moving the hand towards ``target`` and turning it towards ``quat``."""
    action = np.zeros(ACTION_DIM)
    step = (np.asarray(target) - state[EEF_POS]) / POSITION_SCALE
    action[:3] = step * min(1.0, MAX_COMMAND / max(float(np.max(np.abs(step))), 1e-9))
    turn = _rotation_vector(_matrix(quat) @ _matrix(state[EEF_QUAT]).T) / ROTATION_SCALE
    action[3:6] = np.clip(turn, -MAX_COMMAND, MAX_COMMAND)
    action[6] = gripper
    return action


class LiberoExpert:
    """Acts on a :class:`~imaginebench.envs.libero.env.LiberoEnv` after ``reset``.

    Args:
        epsilon: probability of a uniformly random action instead of the scripted one.
        seed: seed of the random actions.
    """

    def __init__(self, epsilon: float = 0.0, seed: int | None = None) -> None:
        if not 0.0 <= epsilon <= 1.0:
            raise ValueError(f"epsilon must be in [0, 1], got {epsilon}")
        self.epsilon = epsilon
        self.rng = np.random.default_rng(seed)
        self.job = 0
        self.phase = "approach"
        self.count = 0

    def act(self, env: Any) -> np.ndarray:
        env = env.unwrapped
        if not isinstance(env.task, LiberoTask):
            raise TypeError(f"not a LIBERO task: {env.task!r}")
        states = np.asarray(env.trajectory, dtype=np.float64)
        if len(states) == 1:  # a new episode
            self.job, self.phase, self.count = 0, "approach", 0
        action = self.scripted(env.task, states)
        if self.rng.random() < self.epsilon:
            return self.rng.uniform(-1.0, 1.0, ACTION_DIM).astype(np.float32)
        return action.astype(np.float32)

    def _enter(self, phase: str) -> None:
        self.phase, self.count = phase, 0

    def scripted(self, task: LiberoTask, states: np.ndarray) -> np.ndarray:
        """The scripted action after ``states`` (advances the phase)."""
        plan = jobs(task)
        s = states[-1]
        hand = s[EEF_POS]
        if self.job >= len(plan):  # all done: hold still, open
            return move(s, hand, s[EEF_QUAT], -1.0)
        job = plan[self.job]
        obj = job.obj
        quat = grasp_quat(obj)
        grasp = grasp_position(s, obj)
        above = grasp + np.array([0.0, 0.0, APPROACH_HEIGHT])
        spot, release = destination(job, states)
        held = self.phase in ("lift", "carry", "lower")
        if held and np.linalg.norm(s[entity_pos(obj)] - hand) > DROPPED:
            self._enter("approach")
        self.count += 1
        xy_gap = float(np.linalg.norm(hand[:2] - grasp[:2]))
        if self.phase == "approach":
            if xy_gap < XY_TOLERANCE and hand[2] > grasp[2] - Z_TOLERANCE:
                self._enter("descend")
            elif xy_gap > 2 * XY_TOLERANCE and hand[2] < above[2] - 2 * Z_TOLERANCE:
                return move(s, np.array([*hand[:2], above[2]]), quat, -1.0)  # rise first
            else:
                return move(s, above, quat, -1.0)
        if self.phase == "descend":
            target = s[entity_pos(obj)] if job.where == "reach" else grasp
            close = np.linalg.norm(target - hand) < Z_TOLERANCE
            if (close or self.count > DESCEND_STEPS) and job.where != "reach":
                self._enter("close")
            else:
                return move(s, target, quat, -1.0)
        if self.phase == "close":
            if self.count > CLOSE_STEPS:
                self._enter("lift")
            else:
                return move(s, grasp, quat, 1.0)
        if self.phase == "lift":
            if hand[2] > CARRY_HEIGHT - 2 * Z_TOLERANCE and job.where != "lift":
                self._enter("carry")
            else:
                return move(s, np.array([*hand[:2], CARRY_HEIGHT]), quat, 1.0)
        if self.phase == "carry":
            if np.linalg.norm(hand[:2] - spot) < XY_TOLERANCE:
                self._enter("lower")
            else:
                return move(s, np.array([*spot, CARRY_HEIGHT]), quat, 1.0)
        if self.phase == "lower":
            if abs(hand[2] - release) < Z_TOLERANCE:
                self._enter("release")
            else:
                return move(s, np.array([*spot, release]), quat, 1.0)
        if self.phase == "release":
            if self.count > OPEN_STEPS:
                self._enter("retreat")
            else:
                return move(s, hand, quat, -1.0)
        # retreat
        if hand[2] > CARRY_HEIGHT - 3 * Z_TOLERANCE:
            self.job += 1
            self._enter("approach")
            return self.scripted(task, states)
        return move(s, np.array([*hand[:2], CARRY_HEIGHT]), quat, -1.0)
