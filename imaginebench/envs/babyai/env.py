"""``imaginebench/BabyAI-v0``: one 8x8 minigrid room with a ball, a box, a key and a door."""

from __future__ import annotations

from typing import Any, ClassVar

import gymnasium as gym
import numpy as np

from imaginebench.envs.babyai.suite import BabyAITaskSuite
from imaginebench.envs.babyai.world import (
    MAX_STEPS,
    NUM_ACTIONS,
    ROOM_SIZE,
    STATE_DIM,
    BabyAIWorld,
)
from imaginebench.envs.base import InstructionEnv, Level, Task, check_level

SUCCESS_DECAY = 0.9  # success reward 1 - 0.9 * steps / 128


def shaped_rewards(
    d_start: np.ndarray,
    d_prev: np.ndarray,
    d_next: np.ndarray,
    success: np.ndarray,
    steps: np.ndarray,
) -> np.ndarray:
    """The original's reward: ``1 - 0.9 * steps / 128`` on success (``steps`` = number of actions
    taken so far), else the distance decrease ``(d_prev - d_next) / (d_start + 1)``."""
    shaping = (d_prev - d_next) / (d_start + 1.0)
    return np.where(success, 1.0 - SUCCESS_DECAY * steps / MAX_STEPS, shaping).astype(np.float32)


def episode_rewards(
    task: Task, states: np.ndarray, actions: np.ndarray | None = None
) -> np.ndarray:
    """Rewards ``(..., T)`` of the transitions of ``states`` ``(..., T + 1, 17)``; ``d`` is
    ``-task.progress`` (identical for simulated and imagined rollouts; the actions do not
    enter)."""
    d = -task.progress(states)
    success = task.success(states)[..., 1:]
    steps = np.arange(1, d.shape[-1])
    return shaped_rewards(d[..., :1], d[..., :-1], d[..., 1:], success, steps)


class BabyAIEnv(InstructionEnv):
    """The BabyAI room of the original benchmark, on minigrid's grid and objects.

    Observation: the 17-integer symbolic state as float32 (see
    :mod:`imaginebench.envs.babyai.world`); the instruction is in ``info["instruction"]`` (with
    ``info["task"]``, the task spec). Actions: Discrete(7), 0 left, 1 right, 2 up, 6 down, 3 pick
    up (own cell), 4 drop (own cell), 5 toggle an adjacent door.

    Reward: :func:`episode_rewards`. Episodes terminate on success and are truncated after
    ``max_episode_steps`` (128).

    ``reset(options=...)`` accepts ``{"episode": EpisodeSpec}`` or any of ``"task"`` (a
    :class:`Task` or its spec), ``"instruction"`` and ``"initial_state"``; anything missing is
    drawn from the level's task suite with the env's seeded generator. Illegal initial states
    raise ``ValueError``.
    """

    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["rgb_array"], "render_fps": 4}

    def __init__(
        self,
        level: Level = "train",
        max_episode_steps: int | None = None,
        render_mode: str | None = None,
        tile_size: int = 32,
    ) -> None:
        self.level = check_level(level)
        self.suite = BabyAITaskSuite()
        self.max_episode_steps = max_episode_steps or MAX_STEPS
        if render_mode not in (None, "rgb_array"):
            raise ValueError(f"unsupported render_mode {render_mode!r}; use 'rgb_array' or None")
        self.render_mode = render_mode
        self.tile_size = tile_size
        self.observation_space = gym.spaces.Box(
            low=0.0, high=float(ROOM_SIZE - 1), shape=(STATE_DIM,), dtype=np.float32
        )
        self.action_space = gym.spaces.Discrete(NUM_ACTIONS)
        self.task: Task | None = None
        self.instruction: str = ""
        self.trajectory: list[np.ndarray] = []
        self.world: BabyAIWorld | None = None
        self._d_start = self._d_prev = 0.0

    # ------------------------------------------------------------------------------------------
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        episode = self.suite.plan_episode(self.level, dict(options or {}), self.np_random)
        self.world = BabyAIWorld(np.asarray(episode.initial_state))  # validates
        self.task, self.instruction = episode.task, episode.instruction
        state = self.world.state()
        self.trajectory = [state]
        self._d_start = self._d_prev = self._distance(state)
        return state.copy(), self._info(success=False)

    def _distance(self, state: np.ndarray) -> float:
        assert self.task is not None
        return float(-self.task.progress(np.stack([self.trajectory[0], state]))[-1])

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        if self.task is None or self.world is None:
            raise RuntimeError("call reset() before step()")
        if not 0 <= int(action) < NUM_ACTIONS:
            raise ValueError(f"action must be an integer in [0, {NUM_ACTIONS}), got {action}")
        self.world.step(int(action))
        state = self.world.state()
        self.trajectory.append(state)
        success = bool(self.task.success(np.stack([self.trajectory[0], state]))[-1])
        d_next = self._distance(state)
        steps = len(self.trajectory) - 1
        reward = float(shaped_rewards(self._d_start, self._d_prev, d_next, success, steps))
        self._d_prev = d_next
        truncated = not success and steps >= self.max_episode_steps
        return state.copy(), reward, success, truncated, self._info(success)

    def render(self) -> np.ndarray | None:
        if self.render_mode != "rgb_array" or self.world is None:
            return None
        return self.world.render(self.tile_size)
