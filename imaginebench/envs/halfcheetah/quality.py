"""Physical plausibility of (imagined) HalfCheetah rollouts, for the imagination quality report.

* **legal state**: every entry finite; the six joint angles inside the model's joint ranges
  (``model.jnt_range``) widened by :data:`JOINT_RANGE_TOLERANCE` (the limits are soft:
  full-torque control overshoots them by up to 0.19 rad); root x / z speeds and ``|Δx| / dt``
  at most :data:`MAX_LINEAR_SPEED` and angular speeds at most :data:`MAX_ANGULAR_SPEED`
  (random and bang-bang control reach 6 m/s and 31 rad/s; fast learned gaits about 15 m/s);
  the body's lowest point at most :data:`FLOOR_TOLERANCE` below the floor (contacts press in by
  up to 0.07 m). The torso pitch is unbounded: the cheetah can flip over.
* **correct transition**: root x does not affect the dynamics, so the simulator restarts
  exactly from ``s_t`` (``qpos = [0, s_t[1:9]]``, ``qvel = s_t[9:18]``) and executes ``a_t``
  (clipped to [-1, 1], as MuJoCo does); the transition is correct when every position entry of
  ``s_{t+1}`` (``Δx``, rootz, rooty, joint angles) is within :data:`POSITION_TOLERANCE` of the
  simulated one and every velocity within :data:`VELOCITY_TOLERANCE`. Those are about a fifth
  of the median one-step change of a joint angle (0.25-0.32 rad under random torques) and a
  tenth of that of a joint velocity (7.5-10.7 rad/s); replaying a real transition from its
  float32 state reproduces it within 0.003 (float32 rounding, amplified by the contacts).
  Transitions out of an illegal state or with a non-finite action cannot be simulated and count
  as incorrect.
"""

from __future__ import annotations

import mujoco
import numpy as np

from imaginebench.envs.base import check_rollout_actions
from imaginebench.envs.halfcheetah.physics import (
    ACTION_DIM,
    DT,
    DX,
    FRAME_SKIP,
    JOINTS,
    POSITIONS,
    STATE_DIM,
    VELOCITIES,
    check_states,
    clearance,
    load_model,
    set_state,
)

JOINT_RANGE_TOLERANCE = 0.35  # rad
MAX_LINEAR_SPEED = 25.0  # m/s
MAX_ANGULAR_SPEED = 60.0  # rad/s
FLOOR_TOLERANCE = 0.15  # m
POSITION_TOLERANCE = 0.05  # m or rad
VELOCITY_TOLERANCE = 1.0  # m/s or rad/s
_LINEAR = np.array([0, 1])  # vx, vz within the velocity block


def legal_states(states: np.ndarray) -> np.ndarray:
    """``(N,)`` bool for states ``(N, 18)`` (see the module docstring)."""
    s = check_states(states)
    finite = np.isfinite(s).all(axis=-1)
    s = np.nan_to_num(s, nan=1e6, posinf=1e6, neginf=-1e6)
    low, high = load_model().jnt_range[3:].T
    joints = s[..., JOINTS]
    in_range = (
        (joints >= low - JOINT_RANGE_TOLERANCE) & (joints <= high + JOINT_RANGE_TOLERANCE)
    ).all(axis=-1)
    speed = np.abs(s[..., VELOCITIES])
    linear = (speed[..., _LINEAR] <= MAX_LINEAR_SPEED).all(axis=-1)
    linear &= np.abs(s[..., DX]) <= MAX_LINEAR_SPEED * DT
    angular = (np.delete(speed, _LINEAR, axis=-1) <= MAX_ANGULAR_SPEED).all(axis=-1)
    above_floor = clearance(s) >= -FLOOR_TOLERANCE
    return finite & in_range & linear & angular & above_floor


class HalfCheetahQuality:
    """Legality of states and correctness of transitions (replayed in the simulator)."""

    def __init__(self) -> None:
        self.model = load_model()
        self.data = mujoco.MjData(self.model)

    def legal(self, states: np.ndarray) -> np.ndarray:
        return legal_states(states)

    def simulate(self, state: np.ndarray, action: np.ndarray) -> np.ndarray:
        """The 18-d state after executing ``action`` from ``state``."""
        set_state(self.model, self.data, np.asarray(state, dtype=np.float64))
        self.data.ctrl[:] = np.clip(action, -1.0, 1.0)
        mujoco.mj_step(self.model, self.data, nstep=FRAME_SKIP)
        return np.concatenate([self.data.qpos, self.data.qvel])  # qpos[0] is Δx (from x = 0)

    def transition_errors(self, states: np.ndarray, actions: np.ndarray) -> np.ndarray:
        """``(T, 18)`` absolute differences between ``states[1:]`` and the simulated next
        states (``inf`` where ``states[t]`` is illegal or ``actions[t]`` not finite)."""
        states = check_states(states)
        if states.ndim != 2:
            raise ValueError(f"states must be one rollout (T + 1, {STATE_DIM}), got {states.shape}")
        actions = check_rollout_actions(states, actions, ACTION_DIM)
        out = np.full((len(actions), STATE_DIM), np.inf)
        ok = legal_states(states[:-1]) & np.isfinite(actions).all(axis=-1)
        for t in np.flatnonzero(ok):
            out[t] = np.abs(states[t + 1] - self.simulate(states[t], actions[t]))
        return np.nan_to_num(out, nan=np.inf)

    def correct_transitions(self, states: np.ndarray, actions: np.ndarray) -> np.ndarray:
        """``(T,)`` bool: ``states[t + 1]`` matches the simulated outcome of ``actions[t]``."""
        errors = self.transition_errors(states, actions)
        return (errors[:, POSITIONS] <= POSITION_TOLERANCE).all(axis=1) & (
            errors[:, VELOCITIES] <= VELOCITY_TOLERANCE
        ).all(axis=1)
