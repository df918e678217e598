"""Rendered, captioned rollouts: one episode of a dataset file, or any task + states."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from imaginebench.data.format import load_dataset
from imaginebench.data.shipped import resolve_data_path
from imaginebench.envs import make_renderer
from imaginebench.envs.base import Task
from imaginebench.envs.rendering import RolloutRenderer
from imaginebench.video.captions import caption_frames


def step_notes(task: Task, states: np.ndarray, header: str = "") -> list[str]:
    """One line per state: ``header | step t/T``, plus ``| success`` where the task's
    state-only judge counts the rollout as accomplished at step ``t``."""
    states = np.nan_to_num(np.asarray(states, dtype=np.float64))
    success = np.asarray(task.success(states), dtype=bool)
    last = len(states) - 1
    prefix = f"{header} | " if header else ""
    return [
        f"{prefix}step {t}/{last}" + (" | success" if success[t] else "")
        for t in range(len(states))
    ]


def render_rollout(
    renderer: RolloutRenderer, task: Task, instruction: str, states: np.ndarray, header: str = ""
) -> np.ndarray:
    """Frames ``(T, H', W, 3)`` of the states ``(T, D)`` drawn by ``renderer``, the instruction
    and :func:`step_notes` captioned under each."""
    frames = renderer.render(task, states)
    return caption_frames(frames, instruction, step_notes(task, states, header))


def render_dataset_episode(
    path: str | Path,
    episode: int,
    height: int = 240,
    width: int = 320,
    drop_nonfinite: bool = False,
) -> tuple[np.ndarray, int]:
    """The captioned frames of episode ``episode`` of the dataset file ``path`` (or
    ``shipped:<domain>/<file>``) and the domain renderer's frames per second.

    ``drop_nonfinite`` loads the file without its episodes holding NaN/inf (as imaginary data is
    loaded for training); indices then count the remaining episodes."""
    dataset = load_dataset(resolve_data_path(path), nonfinite="drop" if drop_nonfinite else "raise")
    if not 0 <= episode < len(dataset):
        raise ValueError(
            f"{path}: no episode {episode}; the file has {len(dataset)} episodes "
            f"(0..{len(dataset) - 1})"
        )
    item = dataset.episode(episode)
    task = Task.from_spec(item.task_spec)
    header = f"{item.source} | {item.level} | episode {episode}"
    with make_renderer(dataset.domain, height, width) as renderer:
        frames = render_rollout(renderer, task, item.instruction, item.states, header)
        return frames, renderer.fps
