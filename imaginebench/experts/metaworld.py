"""Scripted Meta-World expert: metaworld 3.1.1's scripted policies (``metaworld.policies``), read
from the 91-d state and chained per stage for the two compositions, plus three policies of ours.

Every Meta-World scripted policy reads the hand position, the gripper opening, its task's first
object (``obs[4:7]``) and the goal (``obs[-3:]``) of the 39-d observation. The expert rebuilds
that observation from the state: hand and gripper, the entity the current stage handles in the
first object slot, and the target slot as the goal. The compositions switch policy with the
task's stage (:meth:`~imaginebench.envs.metaworld.tasks.MetaWorldTask.stage`, a function of the
state history): make-coffee runs coffee-push's policy on the mug, then coffee-button's on the
button; locked-door-open unlocks with :func:`unlock_action`, then opens the door with
:func:`open_locked_door_action`.

Ours, where Meta-World's policies fall short:

* door-lock: :func:`door_lock_action`, Meta-World's policy made to keep pressing the lever.
* soccer: :func:`soccer_action` aims the ball at the goal along the line from the ball
  (Meta-World's pushes along x or y only, so balls off the goal's line roll past it: 73 %).
* locked-door-open: door-open's policy cannot follow the unlocking, which leaves the hand under
  the lock's lever on the wrong side of the handle's stem, so :func:`open_locked_door_action`
  backs out from under the lever, passes over the stem, drops between the door and the grip bar
  and pulls the handle round the hinge.

Actions are clipped to [-1, 1] (the policies' gains exceed it; the simulator clips anyway).
``epsilon`` replaces an action by a uniformly random one with that probability.

Known limit (docs/metaworld.md, docs/results/metaworld_expert.md): locked-door-open needs about
120 steps (unlocking ~33, getting round the stem ~45, swinging the door through 1.4 rad ~42),
more than the episode's 100.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import numpy as np

from imaginebench.envs.metaworld.layout import (
    ACTION_DIM,
    GRIPPER,
    HAND,
    TARGET,
    TASK_ENTITIES,
    check_task_name,
    entity_pos,
    entity_slice,
)
from imaginebench.envs.metaworld.tasks import MetaWorldTask

# task -> per stage: (the Meta-World policy's env name, the entity it handles)
STAGE_POLICIES: dict[str, tuple[tuple[str, str], ...]] = {
    name: ((f"{name}-v3", TASK_ENTITIES[name][0]),)
    for name in TASK_ENTITIES
    if name not in ("make-coffee", "locked-door-open")
}
STAGE_POLICIES["make-coffee"] = (
    ("coffee-push-v3", "coffee"),
    ("coffee-button-v3", "coffee_button"),
)
STAGE_POLICIES["locked-door-open"] = (("door-unlock-v3", "lock"), ("door-open-v3", "handle"))
# policies of ours, by task and stage (replacing the Meta-World policy named above)
OWN_POLICIES = {("door-lock", 0), ("soccer", 0), ("locked-door-open", 0), ("locked-door-open", 1)}
GAIN = 25.0  # Meta-World's position gain: action = GAIN * (target - hand), clipped
PRESS_XY = 0.06  # door-lock: keep pressing while the hand is this close to the lever in xy
PRESS_Z = 0.07  # ... and at most this high above it

# soccer (ball radius 0.026; the goal's mouth faces the robot, posts 0.09 m either side)
SOCCER_HAND_Z = 0.05  # the hand's lowest height: the fingers cover the ball
SOCCER_BEHIND = 0.05  # where the hand lines up, behind the ball on the line to the goal
SOCCER_LINED_UP = (0.03, 0.015)  # ... at least this far behind it, at most this far off the line
SOCCER_AROUND = 0.05  # a hand this close beside or in front of the ball goes round it, higher
SOCCER_SPEED = 0.6  # pushing speed (largest action component): a slower ball keeps its line
SOCCER_STEER = 2.0  # while pushing, the hand moves this many times its offset back to the line
SOCCER_LEAN = (0.04, 0.04)  # aim this far (times the shot's slope, at most) past the goal's
# centre on the far side, so that a slanted shot clears the near post and ends inside the net

# locked-door-open. Door frame: origin at the hinge, x along the closed door towards the
# handle, y its normal (negative: towards the robot); the door's angle is read from the handle.
HINGE_FROM_HANDLE = np.array([-0.375, 0.107])  # hinge xy - the closed door's handle reading
UNLOCK_PRESS = np.array([-0.04, -0.02, -0.03])  # door-unlock's press point from the lever tip
DOOR_GRIP = np.array([0.365, -0.072])  # fingers right of the handle's stem (x 0.312-0.338),
# between the door (y -0.01) and the grip bar (y -0.097 .. -0.143)
DOOR_GAP = ((0.35, 0.5), (-0.095, -0.02))  # the fingers are in that gap (x, y ranges)
DOOR_BACK_OUT = np.array([0.275, -0.135])  # out from under the lever, left of the stem
DOOR_LEVER_CLEAR_Y = -0.118  # the hand's body clears the lever's front (-0.061) below this
DOOR_RISE = np.array([0.285, -0.125])  # where the hand rises, in front of the lever
DOOR_OVER_Z = 0.08  # hand height passing over the stem and bar: their tops (0.023 above the
# handle reading) plus the fingers' reach below the hand (0.045) plus clearance
DOOR_LEAD = 0.3  # rad: the pull aims at the grip point this far round the hinge


@cache
def scripted_policy(env_name: str) -> Any:
    """Meta-World's scripted policy for ``env_name`` (e.g. ``"reach-v3"``), shared (stateless)."""
    from metaworld.policies import ENV_POLICY_MAP

    return ENV_POLICY_MAP[env_name]()


def policy_observation(state: np.ndarray, entity: str) -> np.ndarray:
    """The 39-d Meta-World observation a scripted policy reads, rebuilt from a 91-d state."""
    state = np.asarray(state, dtype=np.float64)
    obs = np.zeros(39)
    obs[HAND] = state[HAND]
    obs[GRIPPER] = state[GRIPPER]
    obs[4:11] = state[entity_slice(entity)]
    obs[36:39] = state[TARGET]
    return obs


def door_lock_action(obs: np.ndarray) -> np.ndarray:
    """door-lock's scripted policy with one change: once the hand is pressing the lever down
    (within :data:`PRESS_XY` of it in xy, less than :data:`PRESS_Z` above it) it keeps
    pressing. Meta-World's policy re-aligns above the lever whenever the hand is 0.02 m off in
    xy, which the lever's own sideways swing causes, and then often runs out of steps (13/20
    within 100 steps)."""
    hand = obs[:3]
    lock = obs[4:7] + np.array([-0.02, -0.02, 0.0])
    xy = float(np.linalg.norm(hand[:2] - lock[:2]))
    pressing = 0.0 <= hand[2] - lock[2] < PRESS_Z and xy < PRESS_XY
    if xy > 0.02 and not pressing:
        to = hand + np.array([0.0, -0.1, 0.1]) if hand[2] < 0.25 else lock + np.array([0, 0, 0.3])
    elif abs(hand[2] - lock[2]) > 0.02 and not pressing:
        to = lock
    else:
        to = lock + np.array([-0.1, 0.0, -0.1])
    return np.append(np.clip(25.0 * (to - hand), -1.0, 1.0), -1.0)


def move_to(hand: np.ndarray, target: np.ndarray, gripper: float) -> np.ndarray:
    """Meta-World's proportional move towards ``target`` with the gripper effort appended."""
    return np.append(np.clip(GAIN * (target - hand), -1.0, 1.0), gripper)


def soccer_action(state: np.ndarray) -> np.ndarray:
    """Kick the ball into the goal along the line from the ball to an aim point in the goal
    (:data:`SOCCER_LEAN`): line the hand up behind the ball (going round it, higher, when in
    front), then push at :data:`SOCCER_SPEED`, steering back to the line."""
    hand, ball, goal = state[HAND], state[entity_pos("soccer")], state[TARGET]
    aim = goal[:2].copy()
    run, rise = aim - ball[:2]
    aim[0] += np.sign(run) * min(SOCCER_LEAN[0] * abs(run) / max(rise, 1e-3), SOCCER_LEAN[1])
    line = (aim - ball[:2]) / max(float(np.linalg.norm(aim - ball[:2])), 1e-6)
    side = np.array([-line[1], line[0]])
    along, off = (hand[:2] - ball[:2]) @ line, (hand[:2] - ball[:2]) @ side
    behind = ball[:2] - SOCCER_BEHIND * line
    if along < -SOCCER_LINED_UP[0] and abs(off) < SOCCER_LINED_UP[1]:
        target = np.append(ball[:2] + 0.1 * line - SOCCER_STEER * off * side, SOCCER_HAND_Z)
        action = move_to(hand, target, 1.0)
        action[:2] *= min(1.0, SOCCER_SPEED / max(float(np.abs(action[:2]).max()), 1e-6))
        return action
    high = SOCCER_HAND_Z + 0.05
    if along > -0.02 and abs(off) < SOCCER_AROUND:  # in front of or beside the ball
        target = np.append(behind + SOCCER_AROUND * np.sign(off + 1e-12) * side, high)
    else:
        target = np.append(behind, SOCCER_HAND_Z if along < -0.02 else high)
    return move_to(hand, target, 1.0)


def unlock_action(state: np.ndarray) -> np.ndarray:
    """door-unlock's scripted policy without its opening detour (it first backs off and drops
    when the hand starts above 0.15 m): straight to the lever's tip, then push it round."""
    hand, lock = state[HAND], state[entity_pos("lock")]
    press = lock + UNLOCK_PRESS
    if np.linalg.norm(hand[:2] - press[:2]) > 0.02:
        return move_to(hand, press, 1.0)
    return move_to(hand, press + np.array([0.1, 0.0, 0.01]), 1.0)


def _bearing(point: np.ndarray, centre: np.ndarray) -> float:
    """Angle of ``point - centre`` in the xy plane."""
    return float(np.arctan2(point[1] - centre[1], point[0] - centre[0]))


def _rotate(xy: np.ndarray, angle: float) -> np.ndarray:
    c, s = np.cos(angle), np.sin(angle)
    return np.array([c * xy[0] - s * xy[1], s * xy[0] + c * xy[1]])


def open_locked_door_action(states: np.ndarray) -> np.ndarray:
    """Open the unlocked door by its handle, from the state history ``(T, 91)`` (the hinge and
    the door's angle come from the initial and current handle readings). In the door frame:
    back out from under the lock's lever, rise in front of it, pass over the handle's stem,
    drop between the door and the grip bar (:data:`DOOR_GRIP`) and pull the handle round the
    hinge, :data:`DOOR_LEAD` ahead of it."""
    state, handle0 = states[-1], states[0, entity_pos("handle")]
    hand, handle = state[HAND], state[entity_pos("handle")]
    hinge = handle0[:2] + HINGE_FROM_HANDLE
    angle = _bearing(handle, hinge) - _bearing(handle0, hinge)  # the door's (negative: open)
    u = _rotate(hand[:2] - hinge, -angle)  # the hand in the door frame

    def door_point(xy: np.ndarray, z: float, lead: float = 0.0) -> np.ndarray:
        return np.append(hinge + _rotate(xy, angle - lead), z)

    (x_low, x_high), (y_low, y_high) = DOOR_GAP
    over_z = handle[2] + DOOR_OVER_Z
    if x_low < u[0] < x_high and y_low < u[1] < y_high:  # the fingers are in the gap
        if hand[2] > handle[2] + 0.025:
            return move_to(hand, door_point(DOOR_GRIP, handle[2]), 1.0)
        return move_to(hand, door_point(DOOR_GRIP, handle[2], DOOR_LEAD), 1.0)
    if hand[2] >= over_z - 0.008:  # high enough: over the stem and the bar
        z = over_z + 0.005 if u[0] < 0.33 else over_z - 0.01
        return move_to(hand, door_point(DOOR_GRIP + np.array([0.005, 0.0]), z), 1.0)
    if u[1] > DOOR_LEVER_CLEAR_Y and u[0] < x_low - 0.005:  # under the lever
        out = np.array([min(u[0], DOOR_BACK_OUT[0]), DOOR_BACK_OUT[1]])
        return move_to(hand, door_point(out, handle[2] - 0.01), 1.0)
    rise = np.array([min(u[0] + 0.04, DOOR_RISE[0]), DOOR_RISE[1]])
    return move_to(hand, door_point(rise, over_z + 0.01), 1.0)


def expert_action(task: MetaWorldTask, states: np.ndarray) -> np.ndarray:
    """The scripted action after the state history ``states`` ``(T, 91)``."""
    name = check_task_name(task.name)
    stage = int(task.stage(states)[-1])
    env_name, entity = STAGE_POLICIES[name][stage]
    if (name, stage) in OWN_POLICIES:
        if name == "door-lock":
            action = door_lock_action(policy_observation(states[-1], entity))
        elif name == "soccer":
            action = soccer_action(np.asarray(states[-1], dtype=np.float64))
        elif stage == 0:
            action = unlock_action(np.asarray(states[-1], dtype=np.float64))
        else:
            action = open_locked_door_action(np.asarray(states, dtype=np.float64))
    else:
        action = scripted_policy(env_name).get_action(policy_observation(states[-1], entity))
    return np.clip(np.asarray(action, dtype=np.float32), -1.0, 1.0)


class MetaWorldExpert:
    """Acts on a :class:`~imaginebench.envs.metaworld.env.MetaWorldEnv` after ``reset``."""

    def __init__(self, epsilon: float = 0.0, seed: int | None = None) -> None:
        if not 0.0 <= epsilon <= 1.0:
            raise ValueError(f"epsilon must be in [0, 1], got {epsilon}")
        self.epsilon = epsilon
        self.rng = np.random.default_rng(seed)

    def act(self, env: Any) -> np.ndarray:
        env = env.unwrapped
        if not isinstance(env.task, MetaWorldTask):
            raise TypeError(f"not a Meta-World task: {env.task!r}")
        if self.rng.random() < self.epsilon:
            return self.rng.uniform(-1.0, 1.0, ACTION_DIM).astype(np.float32)
        return expert_action(env.task, np.stack(env.trajectory))
