"""The LIBERO task suite: tasks per level and initial-state sampling."""

from __future__ import annotations

from functools import cache
from typing import Any

import numpy as np

from imaginebench.envs.base import Task, TaskSuite
from imaginebench.envs.libero.tasks import TASKS, LiberoTask

LEVEL_KINDS: dict[str, tuple[str, ...]] = {
    "train": ("pick", "place"),
    "easy": ("pick-and-place", "pick-to", "reach"),
    "hard": ("sequential", "aside", "all", "pick-out-of"),
}


def _names(level: str) -> tuple[str, ...]:
    return tuple(name for name, (kind, _) in TASKS.items() if kind in LEVEL_KINDS[level])


TRAIN_TASKS: tuple[str, ...] = _names("train")
EASY_TASKS: tuple[str, ...] = _names("easy")
HARD_TASKS: tuple[str, ...] = _names("hard")


@cache
def shared_scene() -> Any:
    """A per-process scene for drawing initial states when no env lends its own."""
    from imaginebench.envs.libero.scene import Scene

    return Scene()


class LiberoTaskSuite(TaskSuite):
    """Tasks per level (the original benchmark's, in its order).

    * ``train`` / ``rephrase``: pick and place each of alphabet_soup, cream_cheese,
      salad_dressing (training / unseen wordings).
    * ``easy``: pick-and-place of each object, pick one object and place it at another (the six
      ordered pairs), reach each object.
    * ``hard``: sequential pick-and-place of the six ordered pairs, pick-and-place each object
      aside, all three objects into the basket, pick each object out of the basket.

    Initial states come from :mod:`imaginebench.envs.libero.starts`, simulated in ``scene``
    (an env's own simulator, saved and restored around the draw) or, without one, in a
    per-process scene.

    Args:
        scene: the :class:`~imaginebench.envs.libero.scene.Scene` that simulates initial states
            (``None``: a per-process one, built on first use).
    """

    domain = "libero"

    def __init__(self, scene: Any = None) -> None:
        self.scene = scene

    def build_levels(self) -> dict[str, list[Task]]:
        train: list[Task] = [LiberoTask(n) for n in TRAIN_TASKS]
        easy: list[Task] = [LiberoTask(n) for n in EASY_TASKS]
        hard: list[Task] = [LiberoTask(n) for n in HARD_TASKS]
        return {"train": train, "rephrase": train, "easy": easy, "hard": hard}

    def sample_initial_state(self, task: Task, rng: np.random.Generator) -> np.ndarray:
        """A settled initial state of ``task``'s distribution (pick, place or out-of-basket),
        drawn with ``rng``."""
        if not isinstance(task, LiberoTask):
            raise TypeError(f"not a LIBERO task: {task!r}")
        from imaginebench.envs.libero.starts import initial_state

        scene = self.scene if self.scene is not None else shared_scene()
        saved = scene.snapshot()
        try:
            state = initial_state(scene, task.kind, task.objects, rng)
        finally:
            scene.restore(saved)
        return state.astype(np.float32)
