"""``imaginebench/HalfCheetah-v0``: gymnasium's HalfCheetah-v5 with instructions and task levels."""

from __future__ import annotations

from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
from gymnasium.envs.mujoco.half_cheetah_v5 import HalfCheetahEnv as _GymHalfCheetah

from imaginebench.envs.base import (
    InstructionEnv,
    Level,
    Task,
    check_level,
    check_rollout_actions,
)
from imaginebench.envs.halfcheetah.physics import (
    ACTION_DIM,
    CTRL_COST_WEIGHT,
    DT,
    DX,
    STATE_DIM,
    check_states,
    set_state,
)
from imaginebench.envs.halfcheetah.suite import HalfCheetahTaskSuite
from imaginebench.envs.halfcheetah.tasks import HalfCheetahTask

MAX_EPISODE_STEPS = 200


def episode_rewards(task: Task, states: np.ndarray, actions: np.ndarray) -> np.ndarray:
    """Rewards ``(..., T)`` of the transitions of ``states`` ``(..., T + 1, 18)`` under
    ``actions`` ``(..., T, 6)``: the task's use of the forward reward ``Δx / dt`` plus
    HalfCheetah-v5's control cost ``-0.1 |a|^2`` (the same for simulated and imagined
    rollouts; the control cost is why the actions are needed)."""
    if not isinstance(task, HalfCheetahTask):
        raise TypeError(f"not a HalfCheetah task: {task!r}")
    s = check_states(states)
    a = check_rollout_actions(s, actions, ACTION_DIM)
    forward = s[..., 1:, DX] / DT
    ctrl = -CTRL_COST_WEIGHT * np.sum(a**2, axis=-1)
    return (task.speed_reward(forward) + ctrl).astype(np.float32)


def advance(sim: _GymHalfCheetah, action: np.ndarray) -> np.ndarray:
    """Execute ``action`` in gymnasium's HalfCheetah simulator; return the new 18-d state
    ``[Δx, observation]`` (float32), ``Δx`` the root's displacement during the step."""
    x_before = float(sim.data.qpos[0])
    obs, *_ = sim.step(np.asarray(action, dtype=np.float64))
    dx = float(sim.data.qpos[0]) - x_before
    return np.concatenate([[dx], obs]).astype(np.float32)


class HalfCheetahEnv(InstructionEnv):
    """Gymnasium's HalfCheetah-v5 body, physics and reset noise, conditioned on an instruction.

    Observation: the 18-d state ``[Δx, 17-d HalfCheetah-v5 observation]`` (float32), ``Δx`` the
    root's x displacement during the last step (0 after reset); see
    :mod:`imaginebench.envs.halfcheetah.physics`. The instruction is in ``info["instruction"]``
    (with ``info["task"]``, the task spec). Actions: ``Box(-1, 1, (6,))`` joint torques.

    Reward: :func:`episode_rewards`. Episodes terminate on success (judged on the whole state
    history, kept in ``trajectory``) and are truncated after ``max_episode_steps`` (200).

    ``reset(options=...)`` accepts ``{"episode": EpisodeSpec}`` or any of ``"task"`` (a
    :class:`Task` or its spec), ``"instruction"`` and ``"initial_state"`` (any finite 18-d state
    with ``Δx = 0``: root x does not affect the dynamics, so it starts the simulator exactly);
    anything missing is drawn from the level's task suite with the env's seeded generator.
    """

    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["rgb_array"], "render_fps": 20}

    def __init__(
        self,
        level: Level = "train",
        max_episode_steps: int | None = None,
        render_mode: str | None = None,
        render_size: tuple[int, int] = (240, 320),
    ) -> None:
        self.level = check_level(level)
        self.suite = HalfCheetahTaskSuite()
        self.max_episode_steps = max_episode_steps or MAX_EPISODE_STEPS
        if render_mode not in (None, "rgb_array"):
            raise ValueError(f"unsupported render_mode {render_mode!r}; use 'rgb_array' or None")
        self.render_mode = render_mode
        height, width = render_size
        self.sim = _GymHalfCheetah(render_mode=render_mode, width=width, height=height)
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, (STATE_DIM,), np.float32)
        self.action_space = gym.spaces.Box(-1.0, 1.0, (ACTION_DIM,), np.float32)
        self.task: Task | None = None
        self.instruction: str = ""
        self.trajectory: list[np.ndarray] = []

    # ------------------------------------------------------------------------------------------
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        episode = self.suite.plan_episode(self.level, dict(options or {}), self.np_random)
        initial = np.asarray(episode.initial_state, dtype=np.float32)
        if initial.shape != (STATE_DIM,) or not np.all(np.isfinite(initial)):
            raise ValueError(f"initial_state must be {STATE_DIM} finite numbers, got {initial!r}")
        if initial[DX] != 0.0:
            raise ValueError(f"an initial state's Δx (entry 0) must be 0, got {initial[DX]}")
        self.task, self.instruction = episode.task, episode.instruction
        set_state(self.sim.model, self.sim.data, initial)
        data = self.sim.data
        state = np.concatenate([[0.0], data.qpos[1:], data.qvel]).astype(np.float32)
        self.trajectory = [state]
        return state.copy(), self._info(success=False)

    def step(self, action: np.ndarray) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        if self.task is None:
            raise RuntimeError("call reset() before step()")
        action = np.asarray(action, dtype=np.float64)
        if action.shape != (ACTION_DIM,) or not np.all(np.isfinite(action)):
            raise ValueError(f"action must be {ACTION_DIM} finite numbers, got {action!r}")
        state = advance(self.sim, action)
        self.trajectory.append(state)
        states = np.stack(self.trajectory)  # judges need the history (<= 201 states)
        success = bool(self.task.success(states)[-1])
        reward = float(episode_rewards(self.task, states[-2:], action[None])[-1])
        truncated = not success and len(self.trajectory) - 1 >= self.max_episode_steps
        return state.copy(), reward, success, truncated, self._info(success)

    # ------------------------------------------------------------------------------------------
    def render(self) -> np.ndarray | None:
        if self.render_mode != "rgb_array":
            return None
        return self.sim.render()

    def close(self) -> None:
        self.sim.close()
