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
    """One line per state: ``step t/T``, `` success`` where the task's state-only judge counts
    the rollout as accomplished at step ``t``, then `` | header``. The step comes first, so
    even a narrow frame shows it (and no two frames of a GIF are identical: Pillow would merge
    them)."""
    states = np.nan_to_num(np.asarray(states, dtype=np.float64))
    success = np.asarray(task.success(states), dtype=bool)
    last = len(states) - 1
    suffix = f" | {header}" if header else ""
    return [
        f"step {t}/{last}" + (" success" if success[t] else "") + suffix for t in range(len(states))
    ]


def kept_steps(length: int, every: int) -> np.ndarray:
    """The indices of every ``every``-th of ``length`` states, the last one always included."""
    if every < 1:
        raise ValueError(f"every must be >= 1, got {every}")
    return np.unique(np.append(np.arange(0, length, every), length - 1))


def render_rollout(
    renderer: RolloutRenderer,
    task: Task,
    instruction: str,
    states: np.ndarray,
    header: str = "",
    every: int = 1,
) -> np.ndarray:
    """Frames of the states ``(T, D)`` drawn by ``renderer``, the instruction and
    :func:`step_notes` captioned under each: ``(T, H', W, 3)``, or with ``every > 1`` only the
    frames of :func:`kept_steps` (the renderer still reads the whole rollout)."""
    keep = kept_steps(len(states), every)
    frames = renderer.render(task, states, keep)
    notes = step_notes(task, states, header)
    return caption_frames(frames, instruction, [notes[t] for t in keep])


def render_dataset_episode(
    path: str | Path,
    episode: int,
    height: int = 240,
    width: int = 320,
    drop_nonfinite: bool = False,
    every: int = 1,
) -> tuple[np.ndarray, float]:
    """The captioned frames of episode ``episode`` of the dataset file ``path`` (or
    ``shipped:<domain>/<file>``) and the frames per second that play them in the domain
    renderer's time (its ``fps / every``).

    ``drop_nonfinite`` loads the file without its episodes holding NaN/inf (as imaginary data is
    loaded for training); indices then count the remaining episodes. ``every`` keeps every
    ``every``-th frame (and the last; see :func:`render_rollout`)."""
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
        frames = render_rollout(renderer, task, item.instruction, item.states, header, every)
        return frames, renderer.fps / every
