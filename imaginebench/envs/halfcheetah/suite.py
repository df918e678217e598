"""The HalfCheetah task suite: tasks per level and initial-state sampling."""

from __future__ import annotations

import numpy as np

from imaginebench.envs.base import Task, TaskSuite
from imaginebench.envs.halfcheetah.physics import RESET_NOISE_SCALE, load_model
from imaginebench.envs.halfcheetah.tasks import HalfCheetahTask, Jump, JumpInPlace, Run, Shuttle


class HalfCheetahTaskSuite(TaskSuite):
    """Tasks per level.

    * ``train`` / ``rephrase``: run forward, run backward, jump a step forward, jump a step
      backward (training / unseen wordings).
    * ``easy``: run forward faster, run backward faster.
    * ``hard``: forward then backward, backward then forward, jump in place.
    """

    domain = "halfcheetah"

    def build_levels(self) -> dict[str, list[Task]]:
        train: list[Task] = [Run("forward"), Run("backward"), Jump("forward"), Jump("backward")]
        easy: list[Task] = [Run("forward", fast=True), Run("backward", fast=True)]
        hard: list[Task] = [Shuttle("forward"), Shuttle("backward"), JumpInPlace()]
        return {"train": train, "rephrase": train, "easy": easy, "hard": hard}

    def sample_initial_state(self, task: Task, rng: np.random.Generator) -> np.ndarray:
        """HalfCheetah-v5's reset distribution, drawn from ``rng``: the resting pose with
        ``qpos[1:] + U(-0.1, 0.1)`` and ``qvel + 0.1 N(0, 1)`` (root x, which the state does not
        hold, is 0), as the 18-d state ``[0, qpos[1:], qvel]``. No task is accomplished at
        step 0, so no draw is rejected."""
        if not isinstance(task, HalfCheetahTask):
            raise TypeError(f"not a HalfCheetah task: {task!r}")
        model = load_model()
        noise = RESET_NOISE_SCALE
        qpos = model.qpos0 + rng.uniform(-noise, noise, size=model.nq)
        qvel = noise * rng.standard_normal(model.nv)
        return np.concatenate([[0.0], qpos[1:], qvel]).astype(np.float32)
