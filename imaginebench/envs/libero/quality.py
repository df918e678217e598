"""Physical plausibility of (imagined) LIBERO rollouts, for the imagination quality report.

* **legal state**: every entry finite; the arm joints within the Panda's limits and the fingers
  within their travel (both widened by :data:`JOINT_TOLERANCE`); the end effector and every
  object inside the workspace (:data:`WORKSPACE_LOW` .. :data:`WORKSPACE_HIGH`: on or above the
  floor, within the arm's reach); every quaternion of unit norm within
  :data:`QUAT_NORM_TOLERANCE`.
* **correct transition**: a **teacher-forced replay** in the simulator. The 44-d state fixes
  every joint position of the scene, so for every step ``t`` the simulator's positions are set
  to ``s_t``; what the state does not hold (velocities, the gripper's held command, the
  controller's goal orientation) is carried over from the replay itself, which followed the
  rollout's actions from its initial state. The step then executes ``a_t``; the transition is
  correct when every position entry of ``s_{t+1}`` (end effector, objects) is within
  :data:`POSITION_TOLERANCE` of the simulated one, the joints within :data:`JOINT_TOLERANCE`,
  the fingers within :data:`FINGER_TOLERANCE` and the quaternions within
  :data:`QUAT_TOLERANCE` (``q`` and ``-q`` being the same rotation). Real rollouts replay
  exactly.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from imaginebench.envs.base import check_rollout_actions
from imaginebench.envs.libero.layout import (
    ACTION_DIM,
    EEF_POS,
    EEF_QUAT,
    ENTITIES,
    FINGERS,
    JOINTS,
    STATE_DIM,
    check_states,
    entity_slice,
)

# the Panda's joint limits (robosuite's model)
JOINT_LOW = np.array([-2.8973, -1.7628, -2.8973, -3.0718, -2.8973, -0.0175, -2.8973])
JOINT_HIGH = np.array([2.8973, 1.7628, 2.8973, -0.0698, 2.8973, 3.7525, 2.8973])
FINGER_TRAVEL = 0.04
JOINT_TOLERANCE = 0.01  # rad (joints) / m-scale slack on limits
WORKSPACE_LOW = np.array([-0.7, -0.7, -0.05])
WORKSPACE_HIGH = np.array([0.7, 0.7, 1.2])
QUAT_NORM_TOLERANCE = 0.05
POSITION_TOLERANCE = 0.002  # m
FINGER_TOLERANCE = 0.001  # m
QUAT_TOLERANCE = 0.02


def _positions() -> np.ndarray:
    index = list(range(EEF_POS.start, EEF_POS.stop))
    for entity in ENTITIES:
        start = entity_slice(entity).start
        index += [start, start + 1, start + 2]
    return np.array(index)


def _quats() -> list[slice]:
    out = [EEF_QUAT]
    for entity in ENTITIES:
        block = entity_slice(entity)
        out.append(slice(block.start + 3, block.stop))
    return out


POSITIONS = _positions()
QUATS = _quats()


def legal_states(states: np.ndarray) -> np.ndarray:
    """``(N,)`` bool for states ``(N, 44)`` (see the module docstring)."""
    s = check_states(states)
    finite = np.isfinite(s).all(axis=-1)
    s = np.nan_to_num(s, nan=1e6, posinf=1e6, neginf=-1e6)
    tol = JOINT_TOLERANCE
    joints = ((s[..., JOINTS] >= JOINT_LOW - tol) & (s[..., JOINTS] <= JOINT_HIGH + tol)).all(-1)
    fingers = s[..., FINGERS] * np.array([1.0, -1.0])  # both opening distances, >= 0
    fingers_ok = ((fingers >= -tol) & (fingers <= FINGER_TRAVEL + tol)).all(-1)
    ok = finite & joints & fingers_ok
    points = s[..., POSITIONS].reshape(*s.shape[:-1], -1, 3)
    ok &= ((points >= WORKSPACE_LOW) & (points <= WORKSPACE_HIGH)).all(axis=(-1, -2))
    for block in QUATS:
        ok &= np.abs(np.linalg.norm(s[..., block], axis=-1) - 1.0) <= QUAT_NORM_TOLERANCE
    return ok


class LiberoQuality:
    """Legality of states and correctness of transitions (teacher-forced simulator replay)."""

    def __init__(self) -> None:
        self.scene: Any = None

    def legal(self, states: np.ndarray) -> np.ndarray:
        return legal_states(states)

    def _scene(self) -> Any:
        if self.scene is None:  # the simulator is imported on first use
            from imaginebench.envs.libero.scene import Scene

            self.scene = Scene()
        return self.scene

    def transition_errors(self, states: np.ndarray, actions: np.ndarray) -> np.ndarray:
        """``(T, 44)`` absolute differences between ``states[1:]`` and the replayed next
        states (``inf`` where a step could not be replayed: an illegal state or a non-finite
        action)."""
        states = check_states(states)
        if states.ndim != 2:
            raise ValueError(f"states must be one rollout (T + 1, {STATE_DIM}), got {states.shape}")
        actions = check_rollout_actions(states, actions, ACTION_DIM)
        out = np.full((len(actions), STATE_DIM), np.inf)
        ok = legal_states(states[:-1]) & np.isfinite(actions).all(axis=-1)
        if len(actions) == 0 or not ok[0]:
            return out
        scene = self._scene()
        scene.set_state(states[0])
        for t in range(len(actions)):
            if not ok[t]:
                continue  # the replay carries on from its own state
            carried = scene.snapshot()  # velocities and held commands of the replay
            scene.restore((scene.qpos_of(states[t]), *carried[1:]))
            predicted = scene.step(np.clip(actions[t], -1.0, 1.0))
            out[t] = np.abs(states[t + 1] - predicted)
            for block in QUATS:  # q and -q are the same rotation
                flipped = np.abs(states[t + 1, block] + predicted[block])
                if flipped.max() < out[t, block].max():
                    out[t, block] = flipped
        return np.nan_to_num(out, nan=np.inf)

    def correct_transitions(self, states: np.ndarray, actions: np.ndarray) -> np.ndarray:
        """``(T,)`` bool: ``states[t + 1]`` matches the replayed outcome of ``actions[t]``."""
        errors = self.transition_errors(states, actions)
        quat = np.concatenate([np.arange(b.start, b.stop) for b in QUATS])
        return (
            (errors[:, POSITIONS] <= POSITION_TOLERANCE).all(axis=1)
            & (errors[:, JOINTS] <= JOINT_TOLERANCE).all(axis=1)
            & (errors[:, FINGERS] <= FINGER_TOLERANCE).all(axis=1)
            & (errors[:, quat] <= QUAT_TOLERANCE).all(axis=1)
        )
