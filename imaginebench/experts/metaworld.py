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
  the lock's lever, left of the handle's stem, where it pushes the door shut. Rather than go
  round the stem (about 45 steps), :func:`open_locked_door_action` hooks the closed fingers
  behind the grip bar's overhang on the stem's left and pulls the door open from there.

Actions are clipped to [-1, 1] (the policies' gains exceed it; the simulator clips anyway).
``epsilon`` replaces an action by a uniformly random one with that probability.

locked-door-open takes about 86 of the 100 steps (30 episodes: reaching the lever ~20,
unlocking ~11, hooking the bar until the door moves ~10, swinging the door through 1.4 rad ~44;
docs/results/metaworld_expert.md).
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
# The handle is an L: a stem from the door (x 0.312-0.338, y -0.018 .. -0.112) and a grip bar
# (y -0.097 .. -0.143) running from x 0.306 to 0.456, so the bar overhangs the stem's left side
# by 6 mm. Unlocking leaves the hand left of the stem, at the handle's height: the closed
# fingers hook behind that overhang and pull the door open from there.
HINGE_FROM_HANDLE = np.array([-0.375, 0.107])  # hinge xy - the closed door's handle reading
UNLOCK_PRESS = np.array([-0.04, -0.02, -0.03])  # the hand's press point from the lever tip
UNLOCK_PUSH = np.array([0.1, 0.0, -0.01])  # the push's target from the press point
UNLOCK_APPROACH_GAIN = 50.0  # a stiffer approach: full speed until 2 cm from the press point
UNLOCK_SWITCH = 0.03  # push once the hand is this close (xy) to the press point
DOOR_HOOK = np.array([0.285, -0.06])  # the hand: fingers (x +-0.015) left of the stem,
# behind the bar's overhang (x 0.306-0.312), between the door and the bar
DOOR_HOOK_Z = -0.02  # the hand's height above the handle reading: the fingers (0.045 above
# and below the hand) span the bar, the hand's body stays under the lock's lever
DOOR_HOOK_REACH = 0.015  # pull once the hand is at most this far left of DOOR_HOOK
DOOR_PULL = 0.2  # the pull's target: this far from the hook along the door's normal
DOOR_HOOK_LOST_Y = -0.13  # the fingers slipped off in front of the bar: hook again


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
    when the hand starts above 0.15 m): straight to the lever's tip (:data:`UNLOCK_PRESS`, at
    :data:`UNLOCK_APPROACH_GAIN`), then push it round (:data:`UNLOCK_PUSH`), slightly down so
    that the hand stays at the handle's height."""
    hand, lock = state[HAND], state[entity_pos("lock")]
    press = lock + UNLOCK_PRESS
    if np.linalg.norm(hand[:2] - press[:2]) > UNLOCK_SWITCH:
        return np.append(np.clip(UNLOCK_APPROACH_GAIN * (press - hand), -1.0, 1.0), 1.0)
    return move_to(hand, press + UNLOCK_PUSH, 1.0)


def _bearing(point: np.ndarray, centre: np.ndarray) -> float:
    """Angle of ``point - centre`` in the xy plane."""
    return float(np.arctan2(point[1] - centre[1], point[0] - centre[0]))


def _rotate(xy: np.ndarray, angle: float) -> np.ndarray:
    c, s = np.cos(angle), np.sin(angle)
    return np.array([c * xy[0] - s * xy[1], s * xy[0] + c * xy[1]])


def open_locked_door_action(states: np.ndarray) -> np.ndarray:
    """Open the unlocked door by its handle, from the state history ``(T, 91)`` (the hinge and
    the door's angle come from the initial and current handle readings). In the door frame:
    move right, under the lock's lever (pushing it up, off the latch), to :data:`DOOR_HOOK`,
    where the closed fingers catch the grip bar's overhang left of the stem, then pull along
    the door's normal (:data:`DOOR_PULL`), which swings the door round its hinge."""
    state, handle0 = states[-1], states[0, entity_pos("handle")]
    hand, handle = state[HAND], state[entity_pos("handle")]
    hinge = handle0[:2] + HINGE_FROM_HANDLE
    angle = _bearing(handle, hinge) - _bearing(handle0, hinge)  # the door's (negative: open)
    u = _rotate(hand[:2] - hinge, -angle)  # the hand in the door frame
    z = handle[2] + DOOR_HOOK_Z
    hooked = u[0] >= DOOR_HOOK[0] - DOOR_HOOK_REACH and u[1] >= DOOR_HOOK_LOST_Y
    target = DOOR_HOOK + (np.array([0.0, -DOOR_PULL]) if hooked else 0.0)
    return move_to(hand, np.append(hinge + _rotate(target, angle), z), 1.0)


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
