"""``imaginebench/MetaWorld-v0``: Meta-World 3.1.1 manipulation with instructions and levels."""

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
from imaginebench.envs.metaworld.layout import (
    ACTION_DIM,
    DISTRACTOR_RANGES,
    STATE_DIM,
    TARGET,
    check_states,
    entity_slice,
    unused_entities,
)
from imaginebench.envs.metaworld.suite import MetaWorldTaskSuite
from imaginebench.envs.metaworld.tasks import MetaWorldTask

MAX_EPISODE_STEPS = 100
SUCCESS_REWARD = 10.0


def episode_rewards(task: Task, states: np.ndarray, actions: np.ndarray) -> np.ndarray:
    """Rewards ``(..., T)`` of the transitions of ``states`` ``(..., T + 1, 91)``: the
    difference of the task's state-only dense reward
    (:meth:`~imaginebench.envs.metaworld.tasks.MetaWorldTask.dense_reward`), replaced by 10 on
    a step that accomplishes the task (the original's reward shaping). ``actions``
    ``(..., T, 4)`` are only checked: the reward does not depend on them."""
    if not isinstance(task, MetaWorldTask):
        raise TypeError(f"not a Meta-World task: {task!r}")
    s = check_states(states)
    check_rollout_actions(s, actions, ACTION_DIM)
    shaped = np.diff(task.dense_reward(s), axis=-1)
    return np.where(task.success(s)[..., 1:], SUCCESS_REWARD, shaped).astype(np.float32)


def distractor_row(entity: str, rng: np.random.Generator) -> np.ndarray:
    """A plausible 7-d reading of ``entity``: a position uniform in its reset range, its reset
    orientation (:data:`~imaginebench.envs.metaworld.layout.DISTRACTOR_RANGES`)."""
    low, high, quat = DISTRACTOR_RANGES[entity]
    return np.concatenate([rng.uniform(low, high), quat])


class MetaWorldEnv(InstructionEnv):
    """A Sawyer arm on a table (Meta-World 3.1.1's ``-v3`` scenes), conditioned on an instruction.

    Observation: the 91-d entity-slot state (float32; :mod:`imaginebench.envs.metaworld.layout`).
    The instruction is in ``info["instruction"]`` (with ``info["task"]``, the task spec).
    Actions: ``Box(-1, 1, (4,))``: hand displacement ``0.01 a[:3]`` m per step (the mocap
    target), gripper ``a[3]`` (-1 open, 1 closed).

    Reward: :func:`episode_rewards`. Episodes terminate on success (judged on the state history,
    kept in ``trajectory``) and are truncated after ``max_episode_steps`` (100). For the two
    compositions, the step at which stage 1 is reached switches the target slot to stage 2's
    goal.

    ``distractor=True`` adds the original's distractor: at reset one entity the task does not
    use is drawn, and at every step its slot is overwritten by a random plausible reading
    (:func:`distractor_row`; the original drew rows of a data file). It is off by default: it
    is noise by construction, which no dynamics model or imagined rollout can predict, and the
    quality judges cannot replay it.

    ``reset(options=...)`` accepts ``{"episode": EpisodeSpec}`` or any of ``"task"`` (a
    :class:`Task` or its spec), ``"instruction"`` and ``"initial_state"`` (a reset state of the
    task, e.g. from the suite: the scene's object and goal positions are read back from it and
    Meta-World's reset is run with them); anything missing is drawn from the level's task suite
    with the env's seeded generator.
    """

    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["rgb_array"], "render_fps": 80}

    def __init__(
        self,
        level: Level = "train",
        max_episode_steps: int | None = None,
        distractor: bool = False,
        render_mode: str | None = None,
        render_size: tuple[int, int] = (240, 320),
    ) -> None:
        self.level = check_level(level)
        self.suite = MetaWorldTaskSuite()
        self.max_episode_steps = max_episode_steps or MAX_EPISODE_STEPS
        self.distractor = bool(distractor)
        if render_mode not in (None, "rgb_array"):
            raise ValueError(f"unsupported render_mode {render_mode!r}; use 'rgb_array' or None")
        self.render_mode = render_mode
        self.render_size = render_size
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, (STATE_DIM,), np.float32)
        self.action_space = gym.spaces.Box(-1.0, 1.0, (ACTION_DIM,), np.float32)
        self.task: Task | None = None
        self.instruction: str = ""
        self.trajectory: list[np.ndarray] = []
        self.distractor_entity: str | None = None
        self.scenes: dict[str, Any] = {}
        self.scene: Any = None

    def _scene(self, name: str) -> Any:
        if name not in self.scenes:
            from imaginebench.envs.metaworld.scenes import Scene

            height, width = self.render_size
            kwargs = {"render_mode": self.render_mode, "width": width, "height": height}
            self.scenes[name] = Scene(name, **kwargs)
        return self.scenes[name]

    # ------------------------------------------------------------------------------------------
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        episode = self.suite.plan_episode(self.level, dict(options or {}), self.np_random)
        if not isinstance(episode.task, MetaWorldTask):
            raise TypeError(f"not a Meta-World task: {episode.task!r}")
        initial = np.asarray(episode.initial_state, dtype=np.float64)
        if initial.shape != (STATE_DIM,) or not np.all(np.isfinite(initial)):
            raise ValueError(f"initial_state must be {STATE_DIM} finite numbers, got {initial!r}")
        self.task, self.instruction = episode.task, episode.instruction
        self.scene = self._scene(episode.task.name)
        state = self.scene.reset(self.scene.rand_vec_from_state(initial))
        self.distractor_entity = None
        if self.distractor:
            candidates = unused_entities(episode.task.name)
            self.distractor_entity = candidates[int(self.np_random.integers(len(candidates)))]
        self.switched = False
        obs = self._observe(state)
        self.trajectory = [obs]
        return obs.copy(), self._info(success=False)

    def _observe(self, state: np.ndarray) -> np.ndarray:
        obs = state.astype(np.float32)
        if self.distractor_entity is not None:
            obs[entity_slice(self.distractor_entity)] = distractor_row(
                self.distractor_entity, self.np_random
            )
        return obs

    def step(self, action: np.ndarray) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        if self.task is None:
            raise RuntimeError("call reset() before step()")
        action = np.asarray(action, dtype=np.float64)
        if action.shape != (ACTION_DIM,) or not np.all(np.isfinite(action)):
            raise ValueError(f"action must be {ACTION_DIM} finite numbers, got {action!r}")
        task: MetaWorldTask = self.task  # type: ignore[assignment]
        obs = self._observe(self.scene.step(action))
        if task.two_stage and not self.switched:
            history = np.stack([*self.trajectory, obs])
            if task.stage(history)[-1]:  # the task's observation rule: stage 2's goal shows
                obs = task.observed(history)
                self.scene.set_target(obs[TARGET])
                self.switched = True
        self.trajectory.append(obs)
        states = np.stack(self.trajectory)  # judges need the history (<= 101 states)
        success = bool(task.success(states)[-1])
        if success:
            reward = SUCCESS_REWARD
        else:
            dense = task.dense_reward(states)
            reward = float(dense[-1] - dense[-2])
        truncated = not success and len(self.trajectory) - 1 >= self.max_episode_steps
        return obs.copy(), reward, success, truncated, self._info(success)

    # ------------------------------------------------------------------------------------------
    def render(self) -> np.ndarray | None:
        if self.render_mode != "rgb_array" or self.scene is None:
            return None
        return self.scene.sim.render()

    def close(self) -> None:
        for scene in self.scenes.values():
            scene.close()
        self.scenes.clear()
