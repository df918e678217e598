"""``imaginebench/CLEVR-v0``: the language-conditioned CLEVR-Robot gymnasium environment."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from imaginebench.envs.base import InstructionEnv, Level, Task, check_level
from imaginebench.envs.clevr.physics import (
    NUM_ACTIONS,
    STATE_DIM,
    WALL_X,
    WALL_Y_BACK,
    WALL_Y_FRONT,
    ClevrPhysics,
)
from imaginebench.envs.clevr.suite import ClevrTaskSuite

MAX_EPISODE_STEPS = 50
# Easy tasks take one or two pushes; a short limit keeps them a test of the instruction rather
# than of wandering (random pushes solve 86 % of them within 50 steps, 25 % within 5).
LEVEL_MAX_STEPS: dict[str, int] = {
    "train": MAX_EPISODE_STEPS,
    "rephrase": MAX_EPISODE_STEPS,
    "easy": 5,
    "hard": MAX_EPISODE_STEPS,
}
PROGRESS_REWARD_SCALE = 10.0
SUCCESS_BONUS = 10.0


def episode_rewards(
    task: Task, states: np.ndarray, actions: np.ndarray | None = None
) -> np.ndarray:
    """Rewards ``(T,)`` of the transitions of ``states`` ``(T + 1, D)``: ``10 * Δprogress``
    plus 10 where the task is accomplished (the same for simulated and imagined rollouts;
    the actions do not enter)."""
    progress = task.progress(states)
    success = task.success(states)[1:]
    return (PROGRESS_REWARD_SCALE * np.diff(progress) + SUCCESS_BONUS * success).astype(np.float32)


class ClevrEnv(InstructionEnv):
    """Five balls on a table; each action pushes one ball in one of 8 directions.

    Observation: the 10-d ball positions. The instruction is not part of the observation; it is
    returned in ``info["instruction"]`` (with ``info["task"]``, the task spec).

    Reward: ``10 * (progress_{t+1} - progress_t)`` of the task's shaped potential, plus 10 on the
    step that accomplishes the task. Episodes terminate on success and are truncated after
    ``max_episode_steps`` (default per level: 50, and 5 for ``easy``).

    ``reset(options=...)`` accepts ``{"episode": EpisodeSpec}`` or any of ``"task"`` (a
    :class:`Task` or its spec), ``"instruction"`` and ``"initial_state"``; anything missing is
    drawn from the level's task suite with the env's seeded generator.
    """

    metadata = {"render_modes": ["rgb_array"], "render_fps": 4}

    def __init__(
        self,
        level: Level = "train",
        max_episode_steps: int | None = None,
        render_mode: str | None = None,
        render_size: tuple[int, int] = (240, 320),
    ) -> None:
        self.level = check_level(level)
        self.suite = ClevrTaskSuite()
        self.max_episode_steps = max_episode_steps or LEVEL_MAX_STEPS[self.level]
        if render_mode not in (None, "rgb_array"):
            raise ValueError(f"unsupported render_mode {render_mode!r}; use 'rgb_array' or None")
        self.render_mode = render_mode
        self.render_size = render_size
        self.physics = ClevrPhysics()
        self.observation_space = gym.spaces.Box(
            low=np.array([-WALL_X, WALL_Y_FRONT] * 5, dtype=np.float32),
            high=np.array([WALL_X, WALL_Y_BACK] * 5, dtype=np.float32),
            dtype=np.float32,
        )
        self.action_space = gym.spaces.Discrete(NUM_ACTIONS)
        self.task: Task | None = None
        self.instruction: str = ""
        self.trajectory: list[np.ndarray] = []
        self._renderer = None

    # ------------------------------------------------------------------------------------------
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        episode = self.suite.plan_episode(self.level, dict(options or {}), self.np_random)
        initial = np.asarray(episode.initial_state, dtype=np.float32)
        if initial.shape != (STATE_DIM,) or not np.all(np.isfinite(initial)):
            raise ValueError(f"initial_state must be {STATE_DIM} finite numbers, got {initial!r}")
        self.task, self.instruction = episode.task, episode.instruction
        self.physics.set_state(initial)
        state = self.physics.state()
        self.trajectory = [state]
        return state.copy(), self._info(success=False)

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        if self.task is None:
            raise RuntimeError("call reset() before step()")
        state = self.physics.push(int(action))
        self.trajectory.append(state)
        states = np.stack(self.trajectory)  # judges may need the history (<= 51 states)
        success = bool(self.task.success(states)[-1])
        reward = float(episode_rewards(self.task, states)[-1])
        truncated = not success and len(self.trajectory) - 1 >= self.max_episode_steps
        return state.copy(), reward, success, truncated, self._info(success)

    # ------------------------------------------------------------------------------------------
    def render(self) -> np.ndarray | None:
        if self.render_mode != "rgb_array":
            return None
        import mujoco

        if self._renderer is None:
            height, width = self.render_size
            self._renderer = mujoco.Renderer(self.physics.model, height=height, width=width)
        self._renderer.update_scene(self.physics.data, camera="front")
        return self._renderer.render()

    def close(self) -> None:
        if self._renderer is not None:
            self._renderer.close()
            self._renderer = None
