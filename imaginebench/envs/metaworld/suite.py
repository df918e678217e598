"""The Meta-World task suite: tasks per level and initial-state sampling."""

from __future__ import annotations

import numpy as np

from imaginebench.envs.base import Task, TaskSuite
from imaginebench.envs.metaworld.tasks import MetaWorldTask

TRAIN_TASKS: tuple[str, ...] = (
    "reach",
    "push",
    "pick-place",
    "button-press",
    "door-unlock",
    "door-open",
    "window-open",
    "faucet-open",
    "coffee-push",
    "coffee-button",
)
EASY_TASKS: tuple[str, ...] = (
    "reach-wall",
    "push-wall",
    "pick-place-wall",
    "button-press-wall",
    "door-lock",
    "door-close",
    "window-close",
    "faucet-close",
)
HARD_TASKS: tuple[str, ...] = ("make-coffee", "locked-door-open", "hammer", "soccer")


class MetaWorldTaskSuite(TaskSuite):
    """Tasks per level (the original benchmark's).

    * ``train`` / ``rephrase``: reach, push, pick-place, button-press, door-unlock, door-open,
      window-open, faucet-open, coffee-push, coffee-button (training / unseen wordings).
    * ``easy``: the wall variants reach-wall, push-wall, pick-place-wall, button-press-wall
      (the wall in the way), and the opposite skills door-lock, door-close, window-close,
      faucet-close.
    * ``hard``: the compositions make-coffee (coffee-push then coffee-button) and
      locked-door-open (door-unlock then door-open), and the new skills hammer and soccer.
    """

    domain = "metaworld"

    def build_levels(self) -> dict[str, list[Task]]:
        train: list[Task] = [MetaWorldTask(n) for n in TRAIN_TASKS]
        easy: list[Task] = [MetaWorldTask(n) for n in EASY_TASKS]
        hard: list[Task] = [MetaWorldTask(n) for n in HARD_TASKS]
        return {"train": train, "rephrase": train, "easy": easy, "hard": hard}

    def sample_initial_state(self, task: Task, rng: np.random.Generator) -> np.ndarray:
        """Meta-World's reset state for task parameters (object and goal positions) drawn
        uniformly from ``rng`` in the task's reset range (a per-process simulator runs the
        reset: the hand settles for 50 steps). No task is accomplished at reset."""
        if not isinstance(task, MetaWorldTask):
            raise TypeError(f"not a Meta-World task: {task!r}")
        from imaginebench.envs.metaworld.scenes import shared_scene

        scene = shared_scene(task.name)
        return scene.reset(scene.sample_rand_vec(rng)).astype(np.float32)
