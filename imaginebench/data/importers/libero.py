"""Import the original ImagineBench LIBERO rollout files (``libero_real.npy``,
``libero_imaginary_{rephrase,easy,hard}.npy``).

Each is a pickled dict saved with ``np.save``, holding padded ``(N, T, ...)`` arrays:
``observations`` (the 44-d state, or the state followed by a 768-d instruction encoding, which is
dropped), ``actions (N, T, 7)``, ``masks``, optionally ``next_observations``, and
``instructions``: per episode a list of sentences. It is read by
:func:`~imaginebench.data.safe_npy.load_npy`, which runs no code from the pickle.

An episode's task is the one its first sentence asks for
(:func:`~imaginebench.envs.libero.instructions.task_of_instruction`: the 91 original sentences
are ours verbatim); every other sentence of the episode must ask for the same task, and the task
must belong to the imported level. Success and rewards are judged again by that task on the
imported states (:meth:`~imaginebench.envs.libero.tasks.LiberoTask.rewards`): nothing the file
says about them is read, so the original's defects (the "all" task, the first step's comparison
with the previous episode) do not carry over.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any, Literal

import numpy as np

from imaginebench.data.format import (
    SOURCES,
    DatasetError,
    Episode,
    RolloutDataset,
    default_provenance,
)
from imaginebench.data.importers.padded import Checker, load_npy_dict, strings
from imaginebench.envs.base import check_level
from imaginebench.envs.libero.instructions import task_of_instruction
from imaginebench.envs.libero.layout import ACTION_DIM, STATE_DIM
from imaginebench.envs.libero.suite import LiberoTaskSuite
from imaginebench.envs.libero.tasks import LiberoTask

__all__ = ["ACTION_SPEC", "import_libero"]

log = logging.getLogger(__name__)

ACTION_SPEC: dict[str, Any] = {
    "type": "continuous",
    "shape": [ACTION_DIM],
    "low": -1.0,
    "high": 1.0,
}
EMBEDDING_DIM = 768
OBS_DIMS = (STATE_DIM, STATE_DIM + EMBEDDING_DIM)  # 44, or 812 with the instruction encoding
ACTION_TOLERANCE = 1e-4  # actions may exceed [-1, 1] by this much (float noise)
SKIP_REASONS = ("non_finite", "empty", "dropped_final_transition")

InstructionMode = Literal["first", "cycle", "all"]
_INSTRUCTION_MODES = ("first", "cycle", "all")


def import_libero(
    path: str | os.PathLike[str],
    *,
    level: str = "train",
    source: str = "real",
    instruction: InstructionMode = "first",
) -> RolloutDataset:
    """Convert an original LIBERO ``.npy`` file into a dataset.

    Args:
        path: the pickled-dict ``.npy`` file.
        level: the level of every episode (each episode's task must be one of its tasks).
        source: ``"real"`` or ``"imaginary"``.
        instruction: ``"first"`` keeps each episode's first sentence (the original encodes only
            that one), ``"cycle"`` gives episode ``i`` its sentence ``i % K``, ``"all"`` emits
            one copy of the episode per distinct sentence.

    Returns:
        The dataset (domain ``"libero"``); ``provenance["import_skipped"]`` counts skipped
        episodes per reason and episodes whose final transition was dropped.

    Raises:
        FileNotFoundError: ``path`` does not exist.
        ValueError: (a :class:`DatasetError` naming the file) the file cannot be interpreted, an
            episode's sentence is not a LIBERO instruction or asks for a task of another level,
            or no usable episode is left.
    """
    level = check_level(level)
    if source not in SOURCES:
        raise ValueError(f"unknown source {source!r}; expected one of {SOURCES}")
    if instruction not in _INSTRUCTION_MODES:
        raise ValueError(
            f"unknown instruction mode {instruction!r}; expected one of {_INSTRUCTION_MODES}"
        )
    path = Path(path).expanduser()
    if not path.exists():
        raise FileNotFoundError(2, f"{path}: file does not exist", str(path))
    if path.is_dir() or path.suffix.lower() != ".npy":
        raise DatasetError(path, "expected a .npy file (np.save of a dict)")
    data = load_npy_dict(path, "LIBERO file")
    chk = Checker(path)
    chk.require(data, ("observations", "actions", "masks", "instructions"), "LIBERO layout")
    obs, next_obs, lengths, actions = _arrays(data, chk)
    level_tasks = {t.name for t in LiberoTaskSuite().tasks(level)}
    skipped = dict.fromkeys(SKIP_REASONS, 0)
    episodes: list[Episode] = []
    for i, length in enumerate(lengths):
        length = int(length)
        if next_obs is not None:
            states = np.concatenate([obs[i, :length], next_obs[i, length - 1 : length]])
        else:  # the state after the last action is unknown: drop that transition
            states = obs[i, :length]
            skipped["dropped_final_transition"] += 1
        steps = len(states) - 1
        if steps < 1:
            skipped["empty"] += 1
            continue
        act = actions[i, :steps]
        if not (np.isfinite(states).all() and np.isfinite(act).all()):
            skipped["non_finite"] += 1
            continue
        if np.abs(act).max() > 1.0 + ACTION_TOLERANCE:
            j = int(np.argmax(np.abs(act).max(axis=1)))
            raise chk.fail(
                f"'actions' must lie in [-1, 1]; episode {i} step {j} has {act[j].tolist()}"
            )
        task = _task(data["instructions"][i], i, level, level_tasks, chk)
        sentences = strings(data["instructions"][i])
        if instruction == "first":
            chosen = sentences[:1]
        elif instruction == "cycle":
            chosen = [sentences[i % len(sentences)]]
        else:
            chosen = list(dict.fromkeys(sentences))
        states = states.astype(np.float32)
        success = bool(task.success(states)[1:].any())
        rewards = task.rewards(states).astype(np.float32)
        for text in chosen:
            episodes.append(
                Episode(
                    states=states,
                    actions=np.clip(act, -1.0, 1.0).astype(np.float32),
                    rewards=rewards,
                    terminated=success,
                    truncated=not success,
                    instruction=text,
                    task_spec=task.spec(),
                    level=level,
                    source=source,
                    success=success,
                )
            )
    for reason, count in skipped.items():
        if count:
            log.warning(
                "%s: %s in %d of %d episodes", path, reason.replace("_", " "), count, len(lengths)
            )
    if not episodes:
        raise DatasetError(path, f"no usable episodes among {len(lengths)} (skipped: {skipped})")
    provenance = default_provenance(
        imported_from=str(path),
        importer="libero",
        format="imaginebench-libero-npy",
        level=level,
        instruction_mode=instruction,
        source_episodes=len(lengths),
    )
    provenance["import_skipped"] = skipped
    return RolloutDataset.from_episodes(
        episodes, domain="libero", action_spec=ACTION_SPEC, provenance=provenance
    )


def _arrays(
    data: dict[str, Any], chk: Checker
) -> tuple[np.ndarray, np.ndarray | None, np.ndarray, np.ndarray]:
    """Observations and next observations ``(N, T, 44)``, episode lengths ``(N,)`` and actions
    ``(N, T, 7)``, checked."""
    obs = chk.array(data, "observations")
    if obs.ndim != 3 or obs.shape[-1] not in OBS_DIMS:
        raise chk.fail(
            f"'observations' must be (N, T, {STATE_DIM}) or (N, T, {STATE_DIM + EMBEDDING_DIM}) "
            f"(the state, then the instruction encoding), got shape {obs.shape}"
        )
    n, t = obs.shape[:2]
    if n < 1 or t < 1:
        raise chk.fail(f"'observations' is empty, shape {obs.shape}")
    obs = obs[..., :STATE_DIM].astype(np.float64)
    next_obs = None
    if "next_observations" in data:
        next_obs = chk.array(data, "next_observations")
        if next_obs.ndim != 3 or next_obs.shape[:2] != (n, t) or next_obs.shape[-1] not in OBS_DIMS:
            raise chk.fail(
                f"'next_observations' must have shape (N, T, 44 or 812) with (N, T) = ({n}, {t}) "
                f"like 'observations', got {next_obs.shape}"
            )
        next_obs = next_obs[..., :STATE_DIM].astype(np.float64)
    lengths = chk.lengths(chk.per_step(chk.array(data, "masks"), "masks", n, t))
    actions = chk.array(data, "actions")
    if actions.shape != (n, t, ACTION_DIM):
        raise chk.fail(
            f"'actions' must have shape (N, T, {ACTION_DIM}) = ({n}, {t}, {ACTION_DIM}), "
            f"got {actions.shape}"
        )
    rows = data["instructions"]
    if isinstance(rows, np.ndarray) and rows.ndim == 0 or len(rows) != n:
        raise chk.fail(f"'instructions' must hold one list of sentences per episode (N = {n})")
    return obs, next_obs, lengths, actions.astype(np.float64)


def _task(raw: Any, i: int, level: str, level_tasks: set[str], chk: Checker) -> LiberoTask:
    """The task episode ``i``'s sentences ask for (all of them the same, one of ``level``)."""
    sentences = strings(raw)
    if not sentences:
        raise chk.fail(f"episode {i} has no non-empty instruction")
    names = set()
    for sentence in sentences:
        try:
            names.add(task_of_instruction(sentence))
        except ValueError:
            raise chk.fail(f"episode {i}: {sentence!r} is not a LIBERO instruction") from None
    if len(names) > 1:
        raise chk.fail(f"episode {i}'s sentences ask for different tasks: {sorted(names)}")
    name = names.pop()
    if name not in level_tasks:
        raise chk.fail(f"episode {i} asks for {name!r}, not a task of level {level!r}")
    return LiberoTask(name)
