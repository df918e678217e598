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

Every episode's task is rebuilt from its goal vector (see :func:`kalm_goal_to_task`) and success
is judged by that task on the imported states, never read from the file.
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
from imaginebench.data.safe_npy import UnsafePickleError, load_npy
from imaginebench.envs.base import Task, check_level
from imaginebench.envs.clevr.physics import COLORS, NUM_BALLS
from imaginebench.envs.clevr.tasks import DIRECTIONS, AllOf, Gather, Line, Push, Relation

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
STILL_DIRECTION = 4  # the original easy level's "keep the ball still" goal
TAU_GOAL_DIM = 6
HARD_GOAL_MIN_DIM = 24
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
_INTEGRAL_TOL = 1e-4


class SkippedGoal(ValueError):
    """A well-formed goal vector whose task our suite cannot express; ``reason`` is a key of
    :data:`SKIP_REASONS` (``"still_goal"`` or ``"incompatible_goal"``)."""

    def __init__(self, reason: str, message: str) -> None:
        self.reason = reason
        super().__init__(message)


# --------------------------------------------------------------------------------------------------
# Goal vectors -> tasks
# --------------------------------------------------------------------------------------------------


def _code(value: float, what: str) -> int:
    """An entry of a goal vector that must be a whole number."""
    if not np.isfinite(value) or abs(value - round(value)) > _INTEGRAL_TOL:
        raise ValueError(f"{what} must be a whole number, got {value!r}")
    return int(round(value))


def _ball_marks(goal: np.ndarray, allowed: tuple[int, ...]) -> dict[int, list[int]]:
    """Entries 0-4 of a six-number goal: ``{mark: [ball indices]}`` for the non-zero marks."""
    marks: dict[int, list[int]] = {}
    for ball in range(NUM_BALLS):
        mark = _code(float(goal[ball]), f"ball mark {ball} ({COLORS[ball]})")
        if mark not in allowed:
            raise ValueError(
                f"ball mark {ball} ({COLORS[ball]}) is {mark}, expected one of {allowed}"
            )
        if mark:
            marks.setdefault(mark, []).append(ball)
    return marks


def _tau_relation(goal: np.ndarray) -> Relation:
    """Six numbers: balls marked 1 (moved) / 2 (anchor), entry 5 the direction 0-3."""
    marks = _ball_marks(goal, (0, 1, 2))
    moved, anchor = marks.get(1, []), marks.get(2, [])
    if len(moved) != 1 or len(anchor) != 1:
        raise ValueError(
            f"a relation goal needs exactly one ball marked 1 (moved) and one marked "
            f"2 (anchor), got {goal[:NUM_BALLS].tolist()}"
        )
    direction = _code(float(goal[5]), "direction (entry 5)")
    if not 0 <= direction < len(DIRECTIONS):
        raise ValueError(f"relation direction (entry 5) is {direction}, expected 0-3 {DIRECTIONS}")
    return Relation(moved[0], anchor[0], direction)


def _easy_push(goal: np.ndarray) -> Push:
    """Six numbers: the ball marked 1, entry 5 the direction 0-3 (4 = stay still: skipped)."""
    marks = _ball_marks(goal, (0, 1))
    balls = marks.get(1, [])
    if len(balls) != 1:
        raise ValueError(
            f"an easy goal needs exactly one ball marked 1, got {goal[:NUM_BALLS].tolist()}"
        )
    direction = _code(float(goal[5]), "direction (entry 5)")
    if direction == STILL_DIRECTION:
        raise SkippedGoal(
            "still_goal",
            f"'keep the {COLORS[balls[0]]} ball still' has no task in the imaginebench suite",
        )
    if not 0 <= direction < len(DIRECTIONS):
        raise ValueError(
            f"easy direction (entry 5) is {direction}, expected 0-3 {DIRECTIONS} or "
            f"{STILL_DIRECTION} (still)"
        )
    return Push(balls[0], direction)


def _hard_task(goal: np.ndarray) -> Task:
    """Entry 5 is the task indicator: 0/1 = two/three relations in goal[6:18] / goal[6:24],
    2 = all balls in colour order (ORDER), 3 = gather around green (SORT)."""
    indicator = _code(float(goal[5]), "hard task indicator (entry 5)")
    if indicator in (0, 1):
        k = 2 + indicator
        relations = []
        for j in range(k):
            sub = goal[TAU_GOAL_DIM * (j + 1) : TAU_GOAL_DIM * (j + 2)]
            try:
                relations.append(_tau_relation(sub))
            except ValueError as err:
                raise ValueError(f"sub-goal {j} ({sub.tolist()}): {err}") from None
        try:
            return AllOf(tuple(relations))
        except ValueError as err:
            raise SkippedGoal("incompatible_goal", str(err)) from None
    if indicator == 2:
        return Line(tuple(COLORS))
    if indicator == 3:
        return Gather("green")
    raise ValueError(
        f"hard task indicator (entry 5) is {indicator}, expected 0 (two relations), "
        f"1 (three relations), 2 (order) or 3 (sort)"
    )


def _goal_kind(level: str, goal_dim: int) -> str:
    """Which interpretation applies to goal vectors of ``goal_dim`` entries at ``level``."""
    if level == "hard" and goal_dim >= HARD_GOAL_MIN_DIM:
        return "hard"
    if goal_dim != TAU_GOAL_DIM:
        expected = (
            f"{TAU_GOAL_DIM} or >= {HARD_GOAL_MIN_DIM}" if level == "hard" else str(TAU_GOAL_DIM)
        )
        raise ValueError(
            f"goal vectors have {goal_dim} entries; level {level!r} expects {expected}"
        )
    return "easy" if level == "easy" else "tau"


def kalm_goal_to_task(goal: Any, *, level: str = "train") -> Task:
    """Translate one original goal vector into our task.

    ``goal`` is ``(G,)`` or ``(T, G)`` (row 0 is used).  Levels ``train``/``rephrase`` read a
    six-number relation goal, ``easy`` a six-number push goal, and ``hard`` a task-indicator goal
    of at least 24 numbers (a six-number goal at ``hard`` is read as a relation).

    Raises:
        SkippedGoal: the goal is well formed but has no task here (easy "still", or relations
            that :class:`AllOf` rejects); ``err.reason`` says which.
        ValueError: the goal cannot be interpreted.
    """
    check_level(level)
    g = np.asarray(goal, dtype=np.float64)
    if g.ndim == 2:
        if g.shape[0] < 1:
            raise ValueError("goal has no rows")
        g = g[0]
    if g.ndim != 1:
        raise ValueError(f"a goal must be (G,) or (T, G), got shape {np.shape(goal)}")
    kind = _goal_kind(level, g.shape[0])
    if not np.all(np.isfinite(g)):
        raise ValueError(f"goal contains non-finite values: {g.tolist()}")
    if kind == "hard":
        return _hard_task(g)
    if kind == "easy":
        return _easy_push(g)
    return _tau_relation(g)


# --------------------------------------------------------------------------------------------------
# Reading the files
# --------------------------------------------------------------------------------------------------


def _load_npy_dict(path: Path, what: str) -> dict[str, Any]:
    """The dict pickled in a ``.npy`` file, read by :func:`load_npy` (which runs no code)."""
    if not path.exists():
        raise FileNotFoundError(2, f"{path}: {what} does not exist", str(path))
    try:
        obj = load_npy(path)
    except UnsafePickleError as err:
        raise DatasetError(path, f"refused to load the {what}: {err}") from None
    except Exception as err:  # a broken pickle can fail with almost any exception type
        raise DatasetError(
            path, f"cannot read the {what} as a .npy file ({type(err).__name__}: {err})"
        ) from None
    if not isinstance(obj, dict):
        kind = (
            f"array of shape {obj.shape} and dtype {obj.dtype}"
            if isinstance(obj, np.ndarray)
            else type(obj).__name__
        )
        raise DatasetError(
            path, f"the {what} must hold a pickled dict (np.save of a dict), got an {kind}"
        )
    return {str(k): v for k, v in obj.items()}


def _read_h5(path: Path) -> dict[str, Any]:
    import h5py

    try:
        h5 = h5py.File(path, "r")
    except OSError as err:
        raise DatasetError(path, f"not a readable HDF5 file ({err})") from None
    out: dict[str, Any] = {}
    with h5:
        for name, obj in h5.items():
            if not isinstance(obj, h5py.Dataset):
                continue
            try:
                if (
                    name in ("observations", "next_observations")
                    and obj.ndim == 3
                    and obj.shape[-1] in OBS_DIMS
                ):
                    out[name] = obj[:, :, :STATE_DIM]  # never load the instruction embedding
                    out[f"_{name}_dim"] = obj.shape[-1]
                elif h5py.check_string_dtype(obj.dtype) is not None:
                    out[name] = obj.asstr()[()]
                else:
                    out[name] = obj[()]
            except (OSError, RuntimeError, ValueError, TypeError) as err:
                raise DatasetError(path, f"cannot read dataset '{name}' ({err})") from None
    return out


def _strings(raw: Any) -> list[str]:
    """One episode's paraphrases, decoded and stripped, empty ones removed, order kept."""
    out = []
    for s in np.ravel(np.asarray(raw, dtype=object)):
        if isinstance(s, (bytes, np.bytes_)):
            s = bytes(s).decode("utf-8", errors="replace")
        s = str(s).strip()
        if s:
            out.append(s)
    return out


class _Checker:
    """Shape / content checks that raise :class:`DatasetError` naming the file."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def fail(self, problem: str) -> DatasetError:
        return DatasetError(self.path, problem)

    def require(self, data: dict[str, Any], keys: tuple[str, ...], where: str) -> None:
        missing = [k for k in keys if k not in data]
        if missing:
            raise self.fail(
                f"missing required key(s) {missing} ({where}); found "
                f"{sorted(k for k in data if not k.startswith('_'))}"
            )

    def array(self, data: dict[str, Any], key: str) -> np.ndarray:
        try:
            arr = np.asarray(data[key])
        except (TypeError, ValueError) as err:
            raise self.fail(f"'{key}' is not a rectangular array ({err})") from None
        if arr.dtype == object or arr.dtype.kind not in "biuf":
            raise self.fail(f"'{key}' must be numeric, got dtype {arr.dtype}")
        return arr

    def per_step(self, arr: np.ndarray, key: str, n: int, t: int) -> np.ndarray:
        """``(N, T)`` or ``(N, T, 1)`` -> ``(N, T)``."""
        if arr.ndim == 3 and arr.shape[-1] == 1:
            arr = arr[..., 0]
        if arr.shape != (n, t):
            raise self.fail(
                f"'{key}' must have shape (N, T) or (N, T, 1) = ({n}, {t}[, 1]) like "
                f"'observations', got {arr.shape}"
            )
        return arr


# --------------------------------------------------------------------------------------------------
# The importer
# --------------------------------------------------------------------------------------------------


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
        data = _load_npy_dict(path, "KALM file")
    elif suffix in _H5_SUFFIXES:
        fmt = "imaginebench-h5"
        data = _read_h5(path)
        chk = _Checker(path)
        chk.require(data, ("masks", "observations", "actions", "rewards"), "ImagineBench .h5")
        if not all(k in data for k in ("instructions", "goals")):
            if companion is None:
                raise DatasetError(
                    path,
                    "instructions and goals are not in the file; name the .npy dict that holds "
                    f"them with --companion (companion=...), e.g. {path.with_suffix('.npy')}",
                )
            companion_path = Path(companion).expanduser()
            extra = _load_npy_dict(companion_path, "companion file")
            _Checker(companion_path).require(
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


def _convert(
    data: dict[str, Any], path: Path, *, level: str, source: str, instruction: str
) -> tuple[list[Episode], dict[str, int], int]:
    chk = _Checker(path)
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
    if not np.all((masks == 0) | (masks == 1)):
        bad = np.unique(masks[(masks != 0) & (masks != 1)])[:5]
        raise chk.fail(f"'masks' must contain only 0 and 1, found {bad.tolist()}")
    not_prefix = np.flatnonzero((masks[:, 1:] > masks[:, :-1]).any(axis=1))
    if not_prefix.size:
        raise chk.fail(
            f"'masks' must be a contiguous prefix of 1s per episode (then 0s); "
            f"{not_prefix.size} episode(s) are not, first: episode "
            f"{int(not_prefix[0])} = {masks[not_prefix[0]].astype(int).tolist()}"
        )
    lengths = masks.sum(axis=1).astype(np.int64)

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
        _goal_kind(level, goals.shape[1])
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
        (np.abs(actions - np.round(actions)) > _INTEGRAL_TOL)
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
                path,
                int(mismatch.sum()),
            )

    skipped = dict.fromkeys(SKIP_REASONS, 0)
    episodes: list[Episode] = []
    for i in range(n):
        length = int(lengths[i])
        steps = length if next_obs is not None else length - 1
        if steps < 1:
            skipped["empty"] += 1
            continue
        if not ep_finite[i]:
            skipped["non_finite"] += 1
            continue
        try:
            task = kalm_goal_to_task(goals[i], level=level)
        except SkippedGoal as err:
            skipped[err.reason] += 1
            continue
        except ValueError as err:
            raise chk.fail(
                f"cannot interpret the goal vector of episode {i} "
                f"({goals[i].tolist()}) at level {level!r}: {err}"
            ) from None
        paraphrases = _strings(raw_instr[i])
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
        act = np.round(actions[i, :steps]).astype(np.int64)
        rew = np.asarray(rewards[i, :steps], dtype=np.float32)
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
    return episodes, skipped, n
