"""Import the original Meta-World rollout files and re-judge every episode with our success
functions.

The original layout (KALM's ``meta_world.npy`` dict, ImagineBench's ``metaworld_*.h5``) holds
``N`` episodes padded to ``T`` steps:

* ``observations`` ``(N, T, 91)``, or ``(N, T, 859)``: the 91-d state followed by the 768-d
  encoding of the instruction (only the state is read; the layouts of the 91 numbers are the
  same, :mod:`imaginebench.envs.metaworld.layout`);
* ``actions`` ``(N, T, 4)``; ``masks`` and ``rewards`` ``(N, T)`` or ``(N, T, 1)``, the masks a
  prefix of 1s per episode;
* ``env_names`` ``(N,)`` and ``instructions`` ``(N, K)`` strings (ImagineBench's ``.h5`` files
  lack them: a companion ``.npy`` dict or ``.h5`` named by the caller supplies them);
* optional: ``next_observations`` (else an episode's last transition is dropped: the state it
  reaches is unknown), ``terminals``, ``is_successes`` ``(N[, 1])``.

Env names are the original's (``door-open``, ``rep-door-open`` for the rephrase level,
optionally with ``-v2`` / ``-v2-goal-observable``); the level follows from the task (``rep-``:
rephrase) unless given. The per-step distractor the original wrote into one unused entity slot
is cleared (``keep_distractor`` keeps it). Rewards are recomputed with ours
(:func:`~imaginebench.envs.metaworld.env.episode_rewards`): the file's are Meta-World v2's dense
reward, which reads the simulator and is not a function of the state.

Success is judged by our task on the imported states (at any step), never read from the file.
The original's marking is ``is_successes`` if present, else ``terminals`` at the last valid
step, else its success reward (10) there; :class:`ImportReport` compares the two.
"""

from __future__ import annotations

import logging
import os
import re
from dataclasses import asdict, dataclass, field
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
from imaginebench.data.importers.padded import Checker, load_npy_dict, read_h5, strings
from imaginebench.envs.base import check_level
from imaginebench.envs.metaworld.env import SUCCESS_REWARD, episode_rewards
from imaginebench.envs.metaworld.layout import (
    ACTION_DIM,
    STATE_DIM,
    TASK_NAMES,
    entity_slice,
    unused_entities,
)
from imaginebench.envs.metaworld.suite import EASY_TASKS, HARD_TASKS, TRAIN_TASKS
from imaginebench.envs.metaworld.tasks import MetaWorldTask

__all__ = ["ImportReport", "import_metaworld", "task_of_env_name"]

log = logging.getLogger(__name__)

ACTION_SPEC: dict[str, Any] = {
    "type": "continuous",
    "shape": [ACTION_DIM],
    "low": -1.0,
    "high": 1.0,
}
EMBEDDING_DIM = 768
OBS_DIMS = (STATE_DIM, STATE_DIM + EMBEDDING_DIM)  # 91 or 859
ACTION_TOLERANCE = 1e-3  # actions this far outside [-1, 1] are clipped silently; further: counted
InstructionMode = Literal["first", "cycle", "all"]
_INSTRUCTION_MODES = ("first", "cycle", "all")
_REPHRASE_PREFIX = "rep-"
_VERSION_SUFFIX = re.compile(r"-v\d+(-goal-(observable|hidden))?$")
LEVEL_TASKS = {
    "train": TRAIN_TASKS,
    "rephrase": TRAIN_TASKS,
    "easy": EASY_TASKS,
    "hard": HARD_TASKS,
}
_LEVEL_OF_TASK = {name: lvl for lvl in ("train", "easy", "hard") for name in LEVEL_TASKS[lvl]}


@dataclass
class ImportReport:
    """What an import found, per episode of the file (``provenance["import_report"]``).

    ``original_successes``: episodes the file marks successful; ``our_successes``: episodes
    our success function judges successful; ``agreements``: episodes on which both agree.
    ``per_task`` holds the three counts and the episode count per task."""

    episodes: int = 0
    imported: int = 0
    original_successes: int = 0
    our_successes: int = 0
    agreements: int = 0
    original_marking: str = ""
    skipped_non_finite: int = 0
    skipped_empty: int = 0
    dropped_final_transitions: int = 0
    clipped_actions: int = 0
    cleared_distractors: int = 0
    per_task: dict[str, dict[str, int]] = field(default_factory=dict)

    def summary(self) -> str:
        head = (
            f"{self.imported} of {self.episodes} episodes imported; successful: "
            f"{self.original_successes} by the file's marking ({self.original_marking}), "
            f"{self.our_successes} by our success functions ({self.agreements} agree)"
        )
        lines = [head]
        for name, c in self.per_task.items():
            lines.append(
                f"  {name}: {c['episodes']} episodes, file {c['original']}, ours {c['ours']}"
            )
        extra = {
            "skipped (non-finite)": self.skipped_non_finite,
            "skipped (empty)": self.skipped_empty,
            "final transition dropped (no next_observations: the state the last action "
            "reaches is unknown, so success on the last step cannot be judged)": (
                self.dropped_final_transitions
            ),
            "episodes with actions clipped to [-1, 1]": self.clipped_actions,
            "distractor slots cleared": self.cleared_distractors,
        }
        lines += [f"  {k}: {v}" for k, v in extra.items() if v]
        return "\n".join(lines)


def task_of_env_name(env_name: str) -> tuple[MetaWorldTask, bool]:
    """Our task for an original env name, and whether the name marks the rephrase level.

    Raises:
        ValueError: the name is no Meta-World task of the benchmark.
    """
    name = str(env_name).strip().lower()
    rephrase = name.startswith(_REPHRASE_PREFIX)
    base = _VERSION_SUFFIX.sub("", name[len(_REPHRASE_PREFIX) :] if rephrase else name)
    if base not in TASK_NAMES or (rephrase and base not in TRAIN_TASKS):
        raise ValueError(
            f"unknown Meta-World env name {env_name!r}; expected one of {TASK_NAMES} "
            f"(optionally with -v2 / -v2-goal-observable; 'rep-' before a training task)"
        )
    return MetaWorldTask(base), rephrase


def import_metaworld(
    path: str | os.PathLike[str],
    *,
    level: str | None = None,
    source: str = "real",
    instruction: InstructionMode = "first",
    companion: str | os.PathLike[str] | None = None,
    keep_distractor: bool = False,
) -> tuple[RolloutDataset, ImportReport]:
    """Convert an original Meta-World ``.npy`` dict or ``.h5`` file into a dataset.

    Args:
        path: a pickled-dict ``.npy`` file (read without running code) or an ``.h5``/``.hdf5``.
        level: the level of every episode (each task must belong to it); ``None``: from the env
            names (``rep-``: rephrase, else the task's level).
        source: ``"real"`` or ``"imaginary"``.
        instruction: ``"first"`` uses each episode's first instruction, ``"cycle"`` gives
            episode ``i`` instruction ``i % K``, ``"all"`` one copy per distinct instruction.
        companion: a ``.npy`` dict or ``.h5`` with ``env_names`` / ``instructions`` for a file
            that lacks them (only a named file is read).
        keep_distractor: keep the entity slots the episode's task does not use (the original's
            per-step distractor); by default they are cleared.

    Returns:
        The dataset (``provenance["import_report"]`` holds the report) and the report.

    Raises:
        FileNotFoundError: ``path`` (or the companion) does not exist.
        ValueError: (a :class:`DatasetError` naming the file) the file cannot be interpreted,
            an env name is unknown, or no usable episode is left.
    """
    if level is not None:
        level = check_level(level)
    if source not in SOURCES:
        raise ValueError(f"unknown source {source!r}; expected one of {SOURCES}")
    if instruction not in _INSTRUCTION_MODES:
        raise ValueError(
            f"unknown instruction mode {instruction!r}; expected one of {_INSTRUCTION_MODES}"
        )
    path = Path(path).expanduser()
    data = _read(path, "Meta-World file")
    chk = Checker(path)
    chk.require(data, ("observations", "actions", "rewards", "masks"), "Meta-World layout")
    missing = [k for k in ("env_names", "instructions") if k not in data]
    companion_path = None
    if missing:
        if companion is None:
            raise DatasetError(
                path,
                f"{' and '.join(missing)} not in the file; name the .npy dict or .h5 that holds "
                "them with --companion (companion=...)",
            )
        companion_path = Path(companion).expanduser()
        extra = _read(companion_path, "companion file")
        Checker(companion_path).require(extra, tuple(missing), "companion")
        for key in missing:
            data[key] = extra[key]
    arrays = _checked(data, chk)
    episodes, report = _episodes(arrays, chk, level, source, instruction, keep_distractor)
    if not episodes:
        raise DatasetError(path, f"no usable episodes among {report.episodes}: {report}")
    log.info("%s: %s", path, report.summary())
    provenance = default_provenance(
        imported_from=str(path),
        importer="metaworld",
        format="npy" if path.suffix.lower() == ".npy" else "h5",
        instruction_mode=instruction,
        source_episodes=report.episodes,
        import_report=asdict(report),
    )
    if companion_path is not None:
        provenance["companion"] = str(companion_path)
    dataset = RolloutDataset.from_episodes(
        episodes, domain="metaworld", action_spec=ACTION_SPEC, provenance=provenance
    )
    return dataset, report


def _read(path: Path, what: str) -> dict[str, Any]:
    if not path.exists():
        raise FileNotFoundError(2, f"{path}: {what} does not exist", str(path))
    if path.is_dir():
        raise DatasetError(path, "is a directory, expected a .npy or .h5 file")
    suffix = path.suffix.lower()
    if suffix == ".npy":
        return load_npy_dict(path, what)
    if suffix in (".h5", ".hdf5"):
        return read_h5(path, STATE_DIM, OBS_DIMS)
    raise DatasetError(
        path, f"unknown extension {path.suffix!r}; expected .npy (a dict) or .h5/.hdf5"
    )


@dataclass
class _Arrays:
    """A file's arrays after the checks."""

    obs: np.ndarray  # (N, T, 91) float64
    next_obs: np.ndarray | None
    lengths: np.ndarray  # (N,)
    actions: np.ndarray  # (N, T, 4) float64
    rewards: np.ndarray  # (N, T)
    terminals: np.ndarray | None  # (N, T) bool
    is_successes: np.ndarray | None  # (N,) bool
    env_names: list[str]
    instructions: Any  # N rows of instructions


def _checked(data: dict[str, Any], chk: Checker) -> _Arrays:
    obs = _observations(data, "observations", chk)
    n, t = obs.shape[:2]
    next_obs = None
    if "next_observations" in data:
        next_obs = _observations(data, "next_observations", chk)
        if next_obs.shape[:2] != (n, t):
            raise chk.fail(
                f"'next_observations' has (N, T) = {next_obs.shape[:2]}, 'observations' {(n, t)}"
            )
    lengths = chk.lengths(chk.per_step(chk.array(data, "masks"), "masks", n, t))
    actions = chk.array(data, "actions").astype(np.float64)
    if actions.shape != (n, t, ACTION_DIM):
        raise chk.fail(
            f"'actions' must have shape (N, T, {ACTION_DIM}) = ({n}, {t}, {ACTION_DIM}) like "
            f"'observations', got {actions.shape}"
        )
    rewards = chk.per_step(chk.array(data, "rewards"), "rewards", n, t).astype(np.float64)
    terminals = None
    if "terminals" in data:
        terminals = chk.per_step(chk.array(data, "terminals"), "terminals", n, t) != 0
    is_successes = None
    if "is_successes" in data:
        flags = chk.array(data, "is_successes").reshape(-1)
        if flags.shape != (n,):
            raise chk.fail(
                f"'is_successes' must hold one flag per episode (N = {n}), got {flags.shape}"
            )
        is_successes = flags != 0
    names = strings(data["env_names"])
    if len(names) != n:
        raise chk.fail(f"'env_names' has {len(names)} non-empty names, expected N = {n}")
    instructions = data["instructions"]
    if isinstance(instructions, np.ndarray) and instructions.ndim == 0:
        raise chk.fail("'instructions' must be (N,) or (N, K) strings, got a scalar")
    if len(instructions) != n:
        raise chk.fail(f"'instructions' has {len(instructions)} rows, expected N = {n}")
    return _Arrays(
        obs, next_obs, lengths, actions, rewards, terminals, is_successes, names, instructions
    )


def _observations(data: dict[str, Any], key: str, chk: Checker) -> np.ndarray:
    arr = chk.array(data, key)
    width = int(data.get(f"_{key}_dim", arr.shape[-1] if arr.ndim else 0))
    if arr.ndim != 3 or width not in OBS_DIMS:
        raise chk.fail(
            f"'{key}' must be (N, T, {STATE_DIM}) or (N, T, {STATE_DIM + EMBEDDING_DIM}) (the "
            f"state, then a {EMBEDDING_DIM}-d instruction encoding), got shape "
            f"{arr.shape[:-1] + (width,) if arr.ndim else arr.shape}"
        )
    if arr.shape[0] < 1 or arr.shape[1] < 1:
        raise chk.fail(f"'{key}' is empty, shape {arr.shape}")
    return arr[..., :STATE_DIM].astype(np.float64)


def _original_success(a: _Arrays, i: int, length: int) -> tuple[bool, str]:
    if a.is_successes is not None:
        return bool(a.is_successes[i]), "is_successes"
    if a.terminals is not None:
        return bool(a.terminals[i, length - 1]), "terminals at the last step"
    return bool(np.isclose(a.rewards[i, length - 1], SUCCESS_REWARD)), "reward 10 at the last step"


def _episodes(
    a: _Arrays, chk: Checker, level: str | None, source: str, mode: str, keep_distractor: bool
) -> tuple[list[Episode], ImportReport]:
    report = ImportReport(episodes=len(a.lengths))
    episodes: list[Episode] = []
    for i, (env_name, length) in enumerate(zip(a.env_names, a.lengths.tolist())):
        try:
            task, rephrase = task_of_env_name(env_name)
        except ValueError as err:
            raise chk.fail(f"episode {i}: {err}") from None
        episode_level = level or ("rephrase" if rephrase else _LEVEL_OF_TASK[task.name])
        if task.name not in LEVEL_TASKS[episode_level]:
            raise chk.fail(
                f"episode {i}: {env_name!r} is not a task of level {episode_level!r} "
                f"({LEVEL_TASKS[episode_level]})"
            )
        steps = length if a.next_obs is not None else length - 1
        if steps < 1:
            report.skipped_empty += 1
            continue
        states = a.obs[i, :length]
        if a.next_obs is not None:
            states = np.concatenate([states, a.next_obs[i, length - 1 : length]])
        else:
            report.dropped_final_transitions += 1
        actions = a.actions[i, :steps]
        if not (np.isfinite(states).all() and np.isfinite(actions).all()):
            report.skipped_non_finite += 1
            continue
        if np.abs(actions).max() > 1.0 + ACTION_TOLERANCE:
            report.clipped_actions += 1
        actions = np.clip(actions, -1.0, 1.0).astype(np.float32)
        if not keep_distractor:
            unused = [entity_slice(e) for e in unused_entities(task.name)]
            states = states.copy()
            if any(states[:, s].any() for s in unused):
                report.cleared_distractors += 1
            for s in unused:
                states[:, s] = 0.0
        states = states.astype(np.float32)
        judged = task.success(states)
        ours = bool(judged.any())
        original, report.original_marking = _original_success(a, i, length)
        counts = report.per_task.setdefault(task.name, {"episodes": 0, "original": 0, "ours": 0})
        counts["episodes"] += 1
        counts["original"] += original
        counts["ours"] += ours
        report.imported += 1
        report.original_successes += original
        report.our_successes += ours
        report.agreements += original == ours
        paraphrases = strings(a.instructions[i])
        if not paraphrases:
            raise chk.fail(f"episode {i} has no non-empty instruction")
        if mode == "first":
            chosen = paraphrases[:1]
        elif mode == "cycle":
            chosen = [paraphrases[i % len(paraphrases)]]
        else:
            chosen = list(dict.fromkeys(paraphrases))
        rewards = episode_rewards(task, states, actions)
        for text in chosen:
            episodes.append(
                Episode(
                    states=states,
                    actions=actions,
                    rewards=rewards,
                    terminated=bool(judged[-1]),
                    truncated=not bool(judged[-1]),
                    instruction=text,
                    task_spec=task.spec(),
                    level=episode_level,
                    source=source,
                    success=ours,
                )
            )
    return episodes, report
