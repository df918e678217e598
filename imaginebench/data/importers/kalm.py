"""Import the original KALM / ImagineBench CLEVR-Robot rollout files.

Two layouts are understood (see ``docs/dataset_format.md``, "Importing original KALM /
ImagineBench files"):

* ``kalm-npy``: a pickled dict saved with ``np.save`` (KALM's ``clevr_robot.npy``) holding padded
  ``(N, T, ...)`` arrays ``observations``, ``next_observations``, ``actions``, ``rewards``,
  ``terminals``, ``masks``, ``goals`` and ``(N, K)`` paraphrased ``instructions``.
* ``imaginebench-h5``: an HDF5 file with ``masks``, ``observations`` (ball positions followed by a
  768-d instruction embedding), ``actions`` and ``rewards``; ``instructions`` and ``goals`` live
  in a companion ``.npy`` dict named by the caller.  Without ``next_observations`` the state after
  an episode's last action is unknown, so that transition is dropped.

``.npy`` dicts are pickles: they are read by :func:`~imaginebench.data.safe_npy.load_npy`,
which builds only numpy arrays, lists, dicts, strings and numbers and runs no code from the file.

Every episode's task is rebuilt from its goal vector
(:func:`imaginebench.envs.clevr.goals.kalm_goal_to_task`) and success is judged by that task on
the imported states, never read from the file. Reading and checking the padded arrays is
:mod:`imaginebench.data.importers.padded`.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
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
from imaginebench.data.importers.padded import (
    INTEGRAL_TOL,
    Checker,
    load_npy_dict,
    read_h5,
    strings,
)
from imaginebench.envs.base import check_level
from imaginebench.envs.clevr.goals import SkippedGoal, goal_kind, kalm_goal_to_task
from imaginebench.envs.clevr.physics import NUM_BALLS

__all__ = [
    "ACTION_SPEC",
    "SKIP_REASONS",
    "SkippedGoal",
    "import_kalm_clevr",
    "kalm_goal_to_task",
]

log = logging.getLogger(__name__)

ACTION_SPEC: dict[str, Any] = {"type": "discrete", "n": 40}
STATE_DIM = 2 * NUM_BALLS  # 10: x, y of red, blue, green, purple, cyan
EMBEDDING_DIM = 768
OBS_DIMS = (STATE_DIM, STATE_DIM + EMBEDDING_DIM)  # 10 (KALM) or 778 (ImagineBench)
#: Counters reported in ``provenance["import_skipped"]``.
SKIP_REASONS = (
    "still_goal",
    "non_finite",
    "incompatible_goal",
    "dropped_final_transition",
    "empty",
)

InstructionMode = Literal["first", "cycle", "all"]
_INSTRUCTION_MODES = ("first", "cycle", "all")
_NPY_SUFFIXES = (".npy",)
_H5_SUFFIXES = (".h5", ".hdf5")


def import_kalm_clevr(
    path: str | os.PathLike[str],
    *,
    level: str = "train",
    source: str = "real",
    instruction: InstructionMode = "first",
    companion: str | os.PathLike[str] | None = None,
) -> RolloutDataset:
    """Convert an original KALM ``.npy`` or ImagineBench ``.h5`` CLEVR file into a dataset.

    Args:
        path: a pickled-dict ``.npy`` file (KALM) or an ``.h5``/``.hdf5`` file (ImagineBench).
        level: the level of every episode; also selects how goal vectors are read
            (``train``/``rephrase``: relations, ``easy``: pushes, ``hard``: task indicator).
        source: ``"real"`` or ``"imaginary"``.
        instruction: ``"first"`` uses each episode's first paraphrase, ``"cycle"`` gives episode
            ``i`` (its index in the file) paraphrase ``i % K``, ``"all"`` emits one copy of the
            episode per distinct paraphrase.
        companion: the ``.npy`` dict with ``instructions``/``goals`` for an ``.h5`` file without
            them (required then: no file is read unless named).

    Returns:
        The dataset; ``provenance["import_skipped"]`` counts episodes skipped per reason (and
        episodes whose final transition was dropped), per episode of the file.

    Raises:
        FileNotFoundError: ``path`` (or the companion) does not exist.
        ValueError: (a :class:`DatasetError` naming the file) the file cannot be interpreted, or
            no usable episode is left.
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
    if path.is_dir():
        raise DatasetError(path, "is a directory, expected a .npy or .h5 file")
    suffix = path.suffix.lower()
    companion_path: Path | None = None
    if suffix in _NPY_SUFFIXES:
        fmt = "kalm-npy"
        data = load_npy_dict(path, "KALM file")
    elif suffix in _H5_SUFFIXES:
        fmt = "imaginebench-h5"
        data = read_h5(path, STATE_DIM, OBS_DIMS)
        chk = Checker(path)
        chk.require(data, ("masks", "observations", "actions", "rewards"), "ImagineBench .h5")
        if not all(k in data for k in ("instructions", "goals")):
            if companion is None:
                raise DatasetError(
                    path,
                    "instructions and goals are not in the file; name the .npy dict that holds "
                    f"them with --companion (companion=...), e.g. {path.with_suffix('.npy')}",
                )
            companion_path = Path(companion).expanduser()
            extra = load_npy_dict(companion_path, "companion file")
            Checker(companion_path).require(
                extra,
                tuple(k for k in ("instructions", "goals") if k not in data),
                "companion .npy",
            )
            for key in ("instructions", "goals"):
                data.setdefault(key, extra[key])
    else:
        raise DatasetError(
            path,
            f"unknown extension {path.suffix!r}; expected .npy (KALM dict) "
            f"or .h5/.hdf5 (ImagineBench)",
        )

    episodes, skipped, n_file = _convert(
        data, path, level=level, source=source, instruction=instruction
    )
    for reason in ("still_goal", "incompatible_goal", "non_finite", "empty"):
        if skipped[reason]:
            log.warning(
                "%s: skipped %d of %d episodes (%s)",
                path,
                skipped[reason],
                n_file,
                reason.replace("_", " "),
            )
    if skipped["dropped_final_transition"]:
        log.warning(
            "%s: no next_observations; dropped the final transition of %d episodes "
            "(marked truncated)",
            path,
            skipped["dropped_final_transition"],
        )
    if not episodes:
        raise DatasetError(path, f"no usable episodes among {n_file} (skipped: {skipped})")
    provenance = default_provenance(
        imported_from=str(path),
        importer="kalm",
        format=fmt,
        level=level,
        instruction_mode=instruction,
        source_episodes=n_file,
    )
    if companion_path is not None:
        provenance["companion"] = str(companion_path)
    provenance["import_skipped"] = dict(skipped)
    return RolloutDataset.from_episodes(
        episodes, domain="clevr", action_spec=ACTION_SPEC, provenance=provenance
    )


@dataclass
class _Arrays:
    """A file's padded arrays after the checks: states trimmed to ``STATE_DIM`` columns."""

    obs: np.ndarray  # (N, T, STATE_DIM) float64
    next_obs: np.ndarray | None
    lengths: np.ndarray  # (N,) steps inside each episode
    actions: np.ndarray  # (N, T) float64, whole numbers in [0, 40) inside episodes
    rewards: np.ndarray  # (N, T)
    terminals: np.ndarray | None  # (N, T) bool
    goals: np.ndarray  # (N, G) float64
    instructions: Any  # N rows of paraphrases
    finite: np.ndarray  # (N,) bool: every kept value of the episode is finite


def _convert(
    data: dict[str, Any], path: Path, *, level: str, source: str, instruction: str
) -> tuple[list[Episode], dict[str, int], int]:
    chk = Checker(path)
    arrays = _checked_arrays(data, chk, level)
    episodes, skipped = _episodes(arrays, chk, level=level, source=source, instruction=instruction)
    return episodes, skipped, len(arrays.lengths)


def _checked_arrays(data: dict[str, Any], chk: Checker, level: str) -> _Arrays:
    """The KALM layout's arrays, checked (a :class:`DatasetError` naming the file otherwise)."""
    chk.require(
        data,
        ("observations", "actions", "rewards", "masks", "goals", "instructions"),
        "KALM layout",
    )

    obs = chk.array(data, "observations")
    if obs.ndim != 3:
        raise chk.fail(f"'observations' must be (N, T, D), got shape {obs.shape}")
    obs_dim = int(data.get("_observations_dim", obs.shape[-1]))
    if obs_dim not in OBS_DIMS:
        raise chk.fail(
            f"'observations' last dim is {obs_dim}, expected {STATE_DIM} (ball "
            f"positions) or {STATE_DIM + EMBEDDING_DIM} (positions + instruction "
            f"embedding)"
        )
    n, t = obs.shape[:2]
    if n < 1 or t < 1:
        raise chk.fail(f"'observations' is empty, shape {obs.shape}")
    obs = obs[..., :STATE_DIM].astype(np.float64)

    next_obs = None
    if "next_observations" in data:
        next_obs = chk.array(data, "next_observations")
        next_dim = int(data.get("_next_observations_dim", next_obs.shape[-1]))
        if next_obs.ndim != 3 or next_obs.shape[:2] != (n, t) or next_dim not in OBS_DIMS:
            raise chk.fail(
                f"'next_observations' must have shape (N, T, 10 or 778) with "
                f"(N, T) = ({n}, {t}) like 'observations', got "
                f"{next_obs.shape[:2] + (next_dim,)}"
            )
        next_obs = next_obs[..., :STATE_DIM].astype(np.float64)

    masks = chk.per_step(chk.array(data, "masks"), "masks", n, t).astype(np.float64)
    lengths = chk.lengths(masks)

    actions = chk.per_step(chk.array(data, "actions"), "actions", n, t).astype(np.float64)
    rewards = chk.per_step(chk.array(data, "rewards"), "rewards", n, t)
    terminals = None
    if "terminals" in data:
        terminals = chk.per_step(chk.array(data, "terminals"), "terminals", n, t) != 0

    goals = chk.array(data, "goals")
    if goals.ndim == 3:
        if goals.shape[1] < 1:
            raise chk.fail(f"'goals' has no time steps, shape {goals.shape}")
        goals = goals[:, 0, :]
    if goals.ndim != 2 or goals.shape[0] != n:
        raise chk.fail(
            f"'goals' must be (N, G) or (N, T, G) with N = {n}, got shape {np.shape(data['goals'])}"
        )
    goals = goals.astype(np.float64)
    try:
        goal_kind(level, goals.shape[1])
    except ValueError as err:
        raise chk.fail(f"'goals': {err}") from None

    raw_instr = data["instructions"]
    if isinstance(raw_instr, np.ndarray) and raw_instr.ndim == 0:
        raise chk.fail("'instructions' must be (N,) or (N, K) strings, got a scalar")
    if len(raw_instr) != n:
        raise chk.fail(f"'instructions' has {len(raw_instr)} rows, expected N = {n}")

    valid = np.arange(t)[None, :] < lengths[:, None]  # (N, T)
    # Only the columns we keep matter for finiteness (the embedding is dropped).
    finite = np.isfinite(obs).all(axis=2) & np.isfinite(actions) & np.isfinite(rewards)
    if next_obs is not None:
        finite &= np.isfinite(next_obs).all(axis=2)
    ep_finite = (finite | ~valid).all(axis=1) & np.isfinite(goals).all(axis=1)

    # Actions must be whole numbers in [0, 40) wherever they matter.
    check = valid & np.isfinite(actions)
    bad_act = check & (
        (np.abs(actions - np.round(actions)) > INTEGRAL_TOL)
        | (actions < 0)
        | (actions > ACTION_SPEC["n"] - 1)
    )
    if bad_act.any():
        i, j = map(int, np.argwhere(bad_act)[0])
        raise chk.fail(
            f"'actions' must be integers in [0, {ACTION_SPEC['n']}); episode {i} step "
            f"{j} has {actions[i, j]!r} ({int(bad_act.sum())} bad entries)"
        )

    if next_obs is not None:
        inner = valid[:, 1:]  # step t + 1 is inside the episode
        diff = np.abs(obs[:, 1:] - next_obs[:, :-1]).max(axis=2)
        mismatch = (inner & (diff > 1e-5) & np.isfinite(diff)).any(axis=1)
        if mismatch.any():
            log.warning(
                "%s: %d episodes have observations[t + 1] != next_observations[t]; "
                "using observations plus the final next_observation",
                chk.path,
                int(mismatch.sum()),
            )

    return _Arrays(
        obs, next_obs, lengths, actions, rewards, terminals, goals, raw_instr, ep_finite
    )


def _episodes(
    a: _Arrays, chk: Checker, *, level: str, source: str, instruction: str
) -> tuple[list[Episode], dict[str, int]]:
    """One episode per usable row (per paraphrase with ``instruction="all"``), and how many
    rows were skipped per reason."""
    obs, next_obs, lengths, terminals = a.obs, a.next_obs, a.lengths, a.terminals
    skipped = dict.fromkeys(SKIP_REASONS, 0)
    episodes: list[Episode] = []
    for i in range(len(lengths)):
        length = int(lengths[i])
        steps = length if next_obs is not None else length - 1
        if steps < 1:
            skipped["empty"] += 1
            continue
        if not a.finite[i]:
            skipped["non_finite"] += 1
            continue
        try:
            task = kalm_goal_to_task(a.goals[i], level=level)
        except SkippedGoal as err:
            skipped[err.reason] += 1
            continue
        except ValueError as err:
            raise chk.fail(
                f"cannot interpret the goal vector of episode {i} "
                f"({a.goals[i].tolist()}) at level {level!r}: {err}"
            ) from None
        paraphrases = strings(a.instructions[i])
        if not paraphrases:
            raise chk.fail(f"episode {i} has no non-empty instruction")

        if next_obs is not None:
            states = np.concatenate([obs[i, :length], next_obs[i, length - 1 : length]])
            terminated = bool(terminals[i, length - 1]) if terminals is not None else True
            truncated = not terminated
        else:  # the state after the last action is unknown: drop that transition
            states = obs[i, :length]
            terminated, truncated = False, True
            skipped["dropped_final_transition"] += 1
        states = states.astype(np.float32)
        success = bool(task.success(states)[-1])
        if instruction == "first":
            chosen = paraphrases[:1]
        elif instruction == "cycle":
            chosen = [paraphrases[i % len(paraphrases)]]
        else:
            chosen = list(dict.fromkeys(paraphrases))
        spec = task.spec()
        act = np.round(a.actions[i, :steps]).astype(np.int64)
        rew = np.asarray(a.rewards[i, :steps], dtype=np.float32)
        for text in chosen:
            episodes.append(
                Episode(
                    states=states,
                    actions=act,
                    rewards=rew,
                    terminated=terminated,
                    truncated=truncated,
                    instruction=text,
                    task_spec=spec,
                    level=level,
                    source=source,
                    success=success,
                )
            )
    return episodes, skipped
