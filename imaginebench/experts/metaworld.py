"""Scripted Meta-World expert: metaworld 3.1.1's scripted policies (``metaworld.policies``), read
from the 91-d state and chained per stage for the two compositions.

Every Meta-World scripted policy reads the hand position, the gripper opening, its task's first
object (``obs[4:7]``) and the goal (``obs[-3:]``) of the 39-d observation. The expert rebuilds
that observation from the state: hand and gripper, the entity the current stage handles in the
first object slot, and the target slot as the goal. The compositions switch policy with the
task's stage (:meth:`~imaginebench.envs.metaworld.tasks.MetaWorldTask.stage`, a function of the
state history): make-coffee runs coffee-push's policy on the mug, then coffee-button's on the
button; locked-door-open runs door-unlock's on the lock, then door-open's on the handle.

door-lock uses :func:`door_lock_action`, Meta-World's policy made to keep pressing the lever.
Actions are clipped to [-1, 1] (the policies' gains exceed it; the simulator clips anyway).
``epsilon`` replaces an action by a uniformly random one with that probability.

Known limits (docs/metaworld.md, docs/results/metaworld_expert.md): the chain does not solve
locked-door-open within 100 steps (after unlocking, the hand is on the wrong side of the
handle's stem for door-open's policy), and Meta-World's soccer policy scores about 73 %.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import numpy as np

from imaginebench.envs.metaworld.layout import (
    ACTION_DIM,
    GRIPPER,
    HAND,
    TARGET,
    TASK_ENTITIES,
    check_task_name,
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
PRESS_XY = 0.06  # door-lock: keep pressing while the hand is this close to the lever in xy
PRESS_Z = 0.07  # ... and at most this high above it


@lru_cache(maxsize=None)
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


def expert_action(task: MetaWorldTask, states: np.ndarray) -> np.ndarray:
    """The scripted action after the state history ``states`` ``(T, 91)``."""
    name = check_task_name(task.name)
    stage = int(task.stage(states)[-1])
    env_name, entity = STAGE_POLICIES[name][stage]
    obs = policy_observation(states[-1], entity)
    if env_name == "door-lock-v3":
        action = door_lock_action(obs)
    else:
        action = scripted_policy(env_name).get_action(obs)
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
