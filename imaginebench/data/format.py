"""The single on-disk format for rollout datasets (HDF5), and its in-memory counterparts.

A dataset holds whole episodes of ``(state, action, reward)`` produced either by a real simulator
(``source="real"``) or imagined by a language model (``source="imaginary"``), each conditioned on a
natural-language instruction and a task.  In memory, episodes are packed into flat arrays
(:class:`RolloutDataset`); a single episode can be materialised as an :class:`Episode`.

Files are written atomically by :func:`save_dataset` and checked thoroughly by
:func:`load_dataset`; both go through :func:`validate`.  The layout is documented in
``docs/dataset_format.md``.
"""
from __future__ import annotations

import dataclasses
import json
import logging
import os
import secrets
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Literal, Sequence

import h5py
import numpy as np

from imaginebench.envs.base import LEVELS

__all__ = [
    "FORMAT_NAME",
    "SCHEMA_VERSION",
    "LEVELS",
    "SOURCES",
    "DatasetError",
    "Episode",
    "RolloutDataset",
    "validate",
    "save_dataset",
    "load_dataset",
    "default_provenance",
]

log = logging.getLogger(__name__)

FORMAT_NAME = "imaginebench-rollouts"
SCHEMA_VERSION = 1
SUPPORTED_SCHEMA_VERSIONS = (1,)
SOURCES: tuple[str, ...] = ("real", "imaginary")

NonFinite = Literal["raise", "drop"]

# Datasets of the file, in write order, with the dtype kinds accepted on load (numpy ``kind``).
_INT_KINDS = "iu"
_ARRAY_KINDS: dict[str, str] = {
    "states": "f",
    "actions": "iuf",  # refined with the action spec
    "rewards": "f",
    "terminals": "b",
    "truncations": "b",
    "episode_offsets": _INT_KINDS,
    "episode_instruction": _INT_KINDS,
    "episode_task": _INT_KINDS,
    "episode_level": _INT_KINDS,
    "episode_source": _INT_KINDS,
    "episode_success": "b",
}
_STRING_TABLES = ("instructions", "tasks")
_ROOT_ATTRS = ("format", "schema_version", "domain", "state_dim", "action_spec", "provenance",
               "levels", "sources")
_COMPRESSED = ("states", "actions", "rewards")
_KIND_NAMES = {"f": "floating point", "i": "signed integer", "u": "unsigned integer",
               "b": "boolean", "c": "complex", "O": "object", "S": "bytes", "U": "unicode"}


class DatasetError(ValueError):
    """A dataset (file or in-memory object) violates the format.

    The message always starts with the source (file path or a description) followed by the problem.
    """

    def __init__(self, source: str | os.PathLike[str], problem: str) -> None:
        self.source = str(source)
        self.problem = problem
        super().__init__(f"{self.source}: {problem}")


# --------------------------------------------------------------------------------------------------
# In-memory types
# --------------------------------------------------------------------------------------------------


@dataclass(eq=False)
class Episode:
    """One episode of ``T >= 1`` transitions.

    Attributes:
        states: ``(T + 1, D)`` float32, including the state reached after the last action.
        actions: ``(T,)`` int64 (discrete) or ``(T, *shape)`` float32 (continuous).
        rewards: ``(T,)`` float32.
        terminated: the episode ended in a terminal state (e.g. the task was accomplished).
        truncated: the episode was cut by a time limit.
        instruction: natural-language instruction the episode is conditioned on.
        task_spec: canonical JSON string identifying the task (``Task.spec()``).
        level: one of :data:`LEVELS`.
        source: one of :data:`SOURCES`.
        success: whether the task counts as accomplished.
    """

    states: np.ndarray
    actions: np.ndarray
    rewards: np.ndarray
    terminated: bool
    truncated: bool
    instruction: str
    task_spec: str
    level: str
    source: str
    success: bool

    def __len__(self) -> int:
        """Number of transitions ``T``."""
        return int(np.shape(self.rewards)[0])


@dataclass(eq=False)
class RolloutDataset:
    """``E`` episodes with ``N`` transitions in total, packed into flat arrays.

    Episode ``i`` owns transitions ``[off[i], off[i+1])`` and states
    ``[off[i] + i, off[i+1] + i + 1)``
    where ``off = episode_offsets``; each episode stores one state more than it has transitions.
    See ``docs/dataset_format.md`` for shapes and dtypes.
    """

    states: np.ndarray
    actions: np.ndarray
    rewards: np.ndarray
    terminals: np.ndarray
    truncations: np.ndarray
    episode_offsets: np.ndarray
    instructions: list[str]
    tasks: list[str]
    episode_instruction: np.ndarray
    episode_task: np.ndarray
    episode_level: np.ndarray
    episode_source: np.ndarray
    episode_success: np.ndarray
    domain: str
    action_spec: dict[str, Any]
    provenance: dict[str, Any] = field(default_factory=dict)
    #: Episodes removed by ``load_dataset(..., nonfinite="drop")`` (not stored in files).
    dropped_nonfinite: int = 0

    # ---------------------------------------------------------------------------- construction

    @classmethod
    def from_episodes(
        cls,
        episodes: Iterable[Episode],
        *,
        domain: str,
        action_spec: dict[str, Any],
        provenance: dict[str, Any] | None = None,
    ) -> "RolloutDataset":
        """Pack a non-empty sequence of episodes (string tables are built in first-seen order)."""
        episodes = list(episodes)
        if not episodes:
            raise ValueError("from_episodes needs at least one episode (the state dim is unknown)")
        spec = _normalise_action_spec(action_spec, "action_spec")
        discrete = spec["type"] == "discrete"
        act_shape = () if discrete else tuple(spec["shape"])
        state_dim: int | None = None
        instr_ids: dict[str, int] = {}
        task_ids: dict[str, int] = {}
        states, actions, rewards, lengths = [], [], [], []
        ep_instr: list[int] = []
        ep_task: list[int] = []
        ep_level: list[int] = []
        ep_source: list[int] = []
        ep_success: list[bool] = []
        ep_term: list[bool] = []
        ep_trunc: list[bool] = []
        for i, ep in enumerate(episodes):
            where = f"episode {i}"
            s = np.asarray(ep.states)
            r = np.asarray(ep.rewards)
            a = np.asarray(ep.actions)
            if r.ndim != 1 or r.shape[0] < 1:
                raise ValueError(f"{where}: rewards must have shape (T,) with T >= 1, "
                                 f"got {r.shape}")
            t = r.shape[0]
            if s.ndim != 2 or s.shape[0] != t + 1 or s.shape[1] < 1:
                raise ValueError(f"{where}: states must have shape (T + 1, D) = ({t + 1}, D), "
                                 f"got {s.shape}")
            if state_dim is None:
                state_dim = s.shape[1]
            elif s.shape[1] != state_dim:
                raise ValueError(f"{where}: state dim {s.shape[1]} differs from episode 0's "
                                 f"{state_dim}")
            if a.shape != (t, *act_shape):
                raise ValueError(f"{where}: actions must have shape {(t, *act_shape)} for a "
                                 f"{spec['type']} action spec, got {a.shape}")
            if discrete and a.dtype.kind not in _INT_KINDS:
                raise ValueError(f"{where}: discrete actions must be integers, got dtype {a.dtype}")
            if not discrete and a.dtype.kind not in "fiu":
                raise ValueError(f"{where}: continuous actions must be numeric, got {a.dtype}")
            if ep.level not in LEVELS:
                raise ValueError(f"{where}: unknown level {ep.level!r}; expected one of {LEVELS}")
            if ep.source not in SOURCES:
                raise ValueError(f"{where}: unknown source {ep.source!r}; expected one of "
                                 f"{SOURCES}")
            if not isinstance(ep.instruction, str) or not isinstance(ep.task_spec, str):
                raise ValueError(f"{where}: instruction and task_spec must be str")
            states.append(s.astype(np.float32, copy=False))
            actions.append(a.astype(np.int64 if discrete else np.float32, copy=False))
            rewards.append(r.astype(np.float32, copy=False))
            lengths.append(t)
            ep_instr.append(instr_ids.setdefault(ep.instruction, len(instr_ids)))
            ep_task.append(task_ids.setdefault(ep.task_spec, len(task_ids)))
            ep_level.append(LEVELS.index(ep.level))
            ep_source.append(SOURCES.index(ep.source))
            ep_success.append(bool(ep.success))
            ep_term.append(bool(ep.terminated))
            ep_trunc.append(bool(ep.truncated))
        offsets = np.zeros(len(episodes) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        n = int(offsets[-1])
        terminals = np.zeros(n, dtype=bool)
        truncations = np.zeros(n, dtype=bool)
        last = offsets[1:] - 1
        terminals[last] = ep_term
        truncations[last] = ep_trunc
        return cls(
            states=np.concatenate(states),
            actions=np.concatenate(actions),
            rewards=np.concatenate(rewards),
            terminals=terminals,
            truncations=truncations,
            episode_offsets=offsets,
            instructions=list(instr_ids),
            tasks=list(task_ids),
            episode_instruction=np.asarray(ep_instr, dtype=np.int32),
            episode_task=np.asarray(ep_task, dtype=np.int32),
            episode_level=np.asarray(ep_level, dtype=np.uint8),
            episode_source=np.asarray(ep_source, dtype=np.uint8),
            episode_success=np.asarray(ep_success, dtype=bool),
            domain=domain,
            action_spec=spec,
            provenance=dict(provenance or {}),
        )

    @classmethod
    def concatenate(
        cls, datasets: Sequence["RolloutDataset"], *, provenance: dict[str, Any] | None = None
    ) -> "RolloutDataset":
        """Join datasets of the same domain, action spec and state dim, merging the string tables.

        ``provenance`` defaults to the common provenance if all inputs share it, else to
        ``{"concatenated_from": [p0, p1, ...]}``.
        """
        datasets = list(datasets)
        if not datasets:
            raise ValueError("concatenate needs at least one dataset")
        first = datasets[0]
        spec = _normalise_action_spec(first.action_spec, "action_spec")
        for k, d in enumerate(datasets[1:], start=1):
            if d.domain != first.domain:
                raise ValueError(f"cannot concatenate: dataset {k} has domain {d.domain!r}, "
                                 f"dataset 0 has {first.domain!r}")
            other = _normalise_action_spec(d.action_spec, "action_spec")
            if other != spec:
                raise ValueError(f"cannot concatenate: dataset {k} has action spec {other}, "
                                 f"dataset 0 has {spec}")
            if d.state_dim != first.state_dim:
                raise ValueError(f"cannot concatenate: dataset {k} has state dim {d.state_dim}, "
                                 f"dataset 0 has {first.state_dim}")
        instr_ids: dict[str, int] = {}
        task_ids: dict[str, int] = {}
        ep_instr, ep_task, offsets = [], [], [np.zeros(1, dtype=np.int64)]
        shift = 0
        for d in datasets:
            lut_i = np.asarray([instr_ids.setdefault(s, len(instr_ids)) for s in d.instructions],
                               dtype=np.int32)
            lut_t = np.asarray([task_ids.setdefault(s, len(task_ids)) for s in d.tasks],
                               dtype=np.int32)
            ep_instr.append(lut_i[np.asarray(d.episode_instruction, dtype=np.int64)])
            ep_task.append(lut_t[np.asarray(d.episode_task, dtype=np.int64)])
            offsets.append(np.asarray(d.episode_offsets[1:], dtype=np.int64) + shift)
            shift += d.num_transitions
        if provenance is None:
            provs = [d.provenance for d in datasets]
            same = all(_canonical_json(p) == _canonical_json(provs[0]) for p in provs)
            provenance = dict(provs[0]) if same else {"concatenated_from": provs}

        def cat(name: str) -> np.ndarray:
            return np.concatenate([np.asarray(getattr(d, name)) for d in datasets])

        return cls(
            states=cat("states"),
            actions=cat("actions"),
            rewards=cat("rewards"),
            terminals=cat("terminals"),
            truncations=cat("truncations"),
            episode_offsets=np.concatenate(offsets),
            instructions=list(instr_ids),
            tasks=list(task_ids),
            episode_instruction=np.concatenate(ep_instr).astype(np.int32),
            episode_task=np.concatenate(ep_task).astype(np.int32),
            episode_level=cat("episode_level"),
            episode_source=cat("episode_source"),
            episode_success=cat("episode_success"),
            domain=first.domain,
            action_spec=spec,
            provenance=dict(provenance),
            dropped_nonfinite=sum(d.dropped_nonfinite for d in datasets),
        )

    # ---------------------------------------------------------------------------- accessors

    def __len__(self) -> int:
        """Number of episodes ``E``."""
        return int(np.shape(self.episode_offsets)[0]) - 1

    @property
    def num_transitions(self) -> int:
        """Number of transitions ``N`` (summed over episodes)."""
        return int(np.shape(self.rewards)[0])

    @property
    def state_dim(self) -> int:
        """State vector size ``D``."""
        return int(np.shape(self.states)[1])

    @property
    def is_discrete(self) -> bool:
        """True for a discrete action spec."""
        return self.action_spec.get("type") == "discrete"

    def episode_lengths(self) -> np.ndarray:
        """``(E,)`` int64 number of transitions per episode."""
        return np.diff(np.asarray(self.episode_offsets, dtype=np.int64))

    def transition_episodes(self) -> np.ndarray:
        """``(N,)`` int64 episode index of every transition."""
        return np.repeat(np.arange(len(self), dtype=np.int64), self.episode_lengths())

    def transition_indices(self) -> tuple[np.ndarray, np.ndarray]:
        """``(state_idx, next_state_idx)``: rows of :attr:`states` before/after each transition."""
        state_idx = np.arange(self.num_transitions, dtype=np.int64) + self.transition_episodes()
        return state_idx, state_idx + 1

    def episode(self, i: int) -> Episode:
        """Materialise episode ``i`` (negative indices count from the end); arrays are copies."""
        e = len(self)
        if not -e <= i < e:
            raise IndexError(f"episode index {i} out of range for {e} episodes")
        i = int(i) % e
        t0, t1 = int(self.episode_offsets[i]), int(self.episode_offsets[i + 1])
        return Episode(
            states=np.array(self.states[t0 + i: t1 + i + 1]),
            actions=np.array(self.actions[t0:t1]),
            rewards=np.array(self.rewards[t0:t1]),
            terminated=bool(self.terminals[t1 - 1]),
            truncated=bool(self.truncations[t1 - 1]),
            instruction=self.instructions[int(self.episode_instruction[i])],
            task_spec=self.tasks[int(self.episode_task[i])],
            level=LEVELS[int(self.episode_level[i])],
            source=SOURCES[int(self.episode_source[i])],
            success=bool(self.episode_success[i]),
        )

    def __iter__(self):
        for i in range(len(self)):
            yield self.episode(i)

    def select(self, episode_mask: np.ndarray | Sequence[int] | Sequence[bool]) -> "RolloutDataset":
        """Keep a subset of episodes.

        ``episode_mask`` is an ``(E,)`` bool mask or a sequence of episode indices (kept in the
        given order).  String tables are re-packed to the entries still referenced.
        """
        sel = np.asarray(episode_mask)
        e = len(self)
        if sel.dtype == bool:
            if sel.shape != (e,):
                raise ValueError(f"episode mask must have shape ({e},), got {sel.shape}")
            idx = np.flatnonzero(sel)
        else:
            if sel.size and sel.dtype.kind not in _INT_KINDS:
                raise ValueError(f"select needs a bool mask or integer indices, got {sel.dtype}")
            idx = sel.astype(np.int64).reshape(-1)
            if idx.size and (idx.min() < -e or idx.max() >= e):
                raise IndexError(f"episode indices out of range for {e} episodes")
            idx = idx % max(e, 1)
        off = np.asarray(self.episode_offsets, dtype=np.int64)
        lens = off[idx + 1] - off[idx]
        new_off = np.zeros(idx.size + 1, dtype=np.int64)
        np.cumsum(lens, out=new_off[1:])
        t_idx = _ranges(off[idx], lens)
        s_idx = _ranges(off[idx] + idx, lens + 1)
        instr_keep, instr_new = np.unique(np.asarray(self.episode_instruction)[idx],
                                          return_inverse=True)
        task_keep, task_new = np.unique(np.asarray(self.episode_task)[idx], return_inverse=True)
        return dataclasses.replace(
            self,
            states=np.asarray(self.states)[s_idx],
            actions=np.asarray(self.actions)[t_idx],
            rewards=np.asarray(self.rewards)[t_idx],
            terminals=np.asarray(self.terminals)[t_idx],
            truncations=np.asarray(self.truncations)[t_idx],
            episode_offsets=new_off,
            instructions=[self.instructions[int(k)] for k in instr_keep],
            tasks=[self.tasks[int(k)] for k in task_keep],
            episode_instruction=instr_new.reshape(-1).astype(np.int32),
            episode_task=task_new.reshape(-1).astype(np.int32),
            episode_level=np.asarray(self.episode_level)[idx],
            episode_source=np.asarray(self.episode_source)[idx],
            episode_success=np.asarray(self.episode_success)[idx],
            action_spec=dict(self.action_spec),
            provenance=dict(self.provenance),
        )

    def summary(self) -> str:
        """A short multi-line human-readable description."""
        e, n = len(self), self.num_transitions
        levels = np.bincount(np.asarray(self.episode_level, dtype=np.int64), minlength=len(LEVELS))
        sources = np.bincount(np.asarray(self.episode_source, dtype=np.int64),
                              minlength=len(SOURCES))
        n_success = int(np.count_nonzero(self.episode_success))
        rate = f"{n_success / e:.3f} ({n_success}/{e})" if e else "n/a (0 episodes)"
        mean_len = f"{n / e:.2f}" if e else "n/a"
        spec = self.action_spec
        if spec.get("type") == "discrete":
            spec_txt = f"discrete(n={spec.get('n')})"
        else:
            spec_txt = (f"continuous(shape={spec.get('shape')}, low={spec.get('low')}, "
                        f"high={spec.get('high')})")
        lines = [
            f"domain: {self.domain}",
            f"episodes: {e}",
            f"transitions: {n}",
            "levels: " + ", ".join(f"{name}={int(c)}" for name, c in zip(LEVELS, levels)),
            "sources: " + ", ".join(f"{name}={int(c)}" for name, c in zip(SOURCES, sources)),
            f"success rate: {rate}",
            f"mean length: {mean_len}",
            f"instructions: {len(self.instructions)}",
            f"tasks: {len(self.tasks)}",
            f"state dim: {self.state_dim}",
            f"action spec: {spec_txt}",
        ]
        if self.dropped_nonfinite:
            lines.append(f"dropped (non-finite): {self.dropped_nonfinite}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return (f"RolloutDataset(domain={self.domain!r}, episodes={len(self)}, "
                f"transitions={self.num_transitions}, state_dim={self.state_dim}, "
                f"action_spec={self.action_spec})")


def _ranges(starts: np.ndarray, lens: np.ndarray) -> np.ndarray:
    """Concatenation of ``arange(s, s + l)`` for each ``(s, l)``, vectorised."""
    starts = np.asarray(starts, dtype=np.int64)
    lens = np.asarray(lens, dtype=np.int64)
    total = int(lens.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    begin = np.zeros(lens.size, dtype=np.int64)
    np.cumsum(lens[:-1], out=begin[1:])
    return np.repeat(starts - begin, lens) + np.arange(total, dtype=np.int64)


def default_provenance(**extra: Any) -> dict[str, Any]:
    """A provenance dict with command line, creation time and library versions, plus ``extra``."""
    try:
        from importlib.metadata import version

        pkg_version = version("imaginebench")
    except Exception:  # not installed (e.g. running from a checkout)
        pkg_version = "unknown"
    prov: dict[str, Any] = {
        "command": " ".join(sys.argv),
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "imaginebench_version": pkg_version,
        "python": sys.version.split()[0],
        "numpy": np.__version__,
        "h5py": h5py.__version__,
    }
    prov.update(extra)
    return prov


# --------------------------------------------------------------------------------------------------
# Validation
# --------------------------------------------------------------------------------------------------


def _canonical_json(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True)


def _is_int(x: Any) -> bool:
    return isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_))


def _normalise_action_spec(spec: Any, source: str) -> dict[str, Any]:
    """Check an action spec and return a plain-JSON copy (extra keys are kept)."""
    def bad(problem: str) -> DatasetError:
        return DatasetError(source, f"invalid action_spec {spec!r}: {problem}")

    if not isinstance(spec, dict):
        raise bad("must be a JSON object")
    out = dict(spec)
    kind = spec.get("type")
    if kind == "discrete":
        n = spec.get("n")
        if not _is_int(n) or int(n) < 1:
            raise bad("discrete spec needs an integer 'n' >= 1")
        out["n"] = int(n)
    elif kind == "continuous":
        shape = spec.get("shape")
        if (not isinstance(shape, (list, tuple)) or not shape
                or not all(_is_int(s) and int(s) >= 1 for s in shape)):
            raise bad("continuous spec needs a non-empty 'shape' list of positive integers")
        out["shape"] = [int(s) for s in shape]
        bounds = {}
        for key in ("low", "high"):
            if key not in spec:
                raise bad(f"continuous spec needs '{key}'")
            try:
                arr = np.asarray(spec[key], dtype=np.float64)
                bounds[key] = np.broadcast_to(arr, tuple(out["shape"]))
            except (TypeError, ValueError):
                raise bad(f"'{key}' must be a number or a list broadcastable to shape "
                          f"{out['shape']}") from None
            if np.isnan(arr).any():
                raise bad(f"'{key}' contains NaN")
            out[key] = arr.tolist()
        if (bounds["low"] > bounds["high"]).any():
            raise bad("'low' exceeds 'high'")
    else:
        raise bad("'type' must be 'discrete' or 'continuous'")
    try:
        json.dumps(out, allow_nan=True)
    except (TypeError, ValueError) as err:
        raise bad(f"not JSON-serialisable ({err})") from None
    return out


def _kind_name(kind: str) -> str:
    return _KIND_NAMES.get(kind, repr(kind))


def _check_kind(source: str, name: str, arr: np.ndarray, kinds: str) -> None:
    if arr.dtype.kind not in kinds:
        wanted = " or ".join(_kind_name(k) for k in kinds)
        raise DatasetError(source, f"dataset '{name}' has dtype {arr.dtype} "
                                   f"({_kind_name(arr.dtype.kind)}), expected {wanted}")


def _check_shape(source: str, name: str, arr: np.ndarray, shape: tuple[int, ...], why: str) -> None:
    if arr.shape != shape:
        raise DatasetError(source, f"dataset '{name}' has shape {arr.shape}, expected {shape} "
                                   f"({why})")


def _check_ids(source: str, name: str, ids: np.ndarray, n: int, what: str) -> None:
    if ids.size and (ids.min() < 0 or ids.max() >= n):
        bad = np.flatnonzero((ids < 0) | (ids >= n))
        raise DatasetError(source, f"dataset '{name}' has {bad.size} value(s) out of range "
                                   f"[0, {n}) ({what}); first at episode {int(bad[0])}: "
                                   f"{int(ids[bad[0]])}")


def _check_table(source: str, name: str, table: Any) -> list[str]:
    if not isinstance(table, (list, tuple)) or not all(isinstance(s, str) for s in table):
        raise DatasetError(source, f"string table '{name}' must be a list of str")
    table = list(table)
    if len(set(table)) != len(table):
        seen: set[str] = set()
        dup = next(s for s in table if s in seen or seen.add(s))  # type: ignore[func-returns-value]
        raise DatasetError(source, f"string table '{name}' has duplicate entry {dup!r}")
    return table


def validate(
    ds: RolloutDataset, *, source_name: str = "<in-memory dataset>", nonfinite: NonFinite = "raise"
) -> RolloutDataset:
    """Check every rule of the format and return the dataset with canonical dtypes.

    Raises :class:`DatasetError` (message prefixed by ``source_name``) on the first violation.
    With ``nonfinite="drop"``, episodes containing NaN/inf in states, actions or rewards are
    removed (count added to ``dropped_nonfinite``, a warning is logged) instead of raising.
    """
    src = str(source_name)
    if nonfinite not in ("raise", "drop"):
        raise ValueError(f"nonfinite must be 'raise' or 'drop', got {nonfinite!r}")

    # ---- file-level metadata
    if not isinstance(ds.domain, str) or not ds.domain:
        raise DatasetError(src, f"'domain' must be a non-empty string, got {ds.domain!r}")
    spec = _normalise_action_spec(ds.action_spec, src)
    if not isinstance(ds.provenance, dict):
        raise DatasetError(src, f"'provenance' must be a JSON object, got "
                                f"{type(ds.provenance).__name__}")
    try:
        json.dumps(ds.provenance)
    except (TypeError, ValueError) as err:
        raise DatasetError(src, f"'provenance' is not JSON-serialisable ({err})") from None

    arrays = {name: np.asarray(getattr(ds, name)) for name in _ARRAY_KINDS}
    discrete = spec["type"] == "discrete"
    for name, kinds in _ARRAY_KINDS.items():
        if name == "actions":
            kinds = _INT_KINDS if discrete else "f"
        _check_kind(src, name, arrays[name], kinds)

    # ---- transition arrays
    states, rewards, actions = arrays["states"], arrays["rewards"], arrays["actions"]
    if states.ndim != 2 or states.shape[1] < 1:
        raise DatasetError(src, f"dataset 'states' must be 2-D (num_states, state_dim>=1), "
                                f"got shape {states.shape}")
    if rewards.ndim != 1:
        raise DatasetError(src, f"dataset 'rewards' must be 1-D, got shape {rewards.shape}")
    n = rewards.shape[0]
    lengths = {name: arrays[name].shape[0] if arrays[name].ndim else None
               for name in ("actions", "rewards", "terminals", "truncations")}
    if len(set(lengths.values())) != 1:
        counts = ", ".join(f"{k}={v}" for k, v in lengths.items())
        raise DatasetError(src, f"transition datasets have inconsistent lengths ({counts}); "
                                f"all must have one entry per transition")
    act_shape = (n,) if discrete else (n, *spec["shape"])
    why = "one per transition" if discrete else f"action_spec shape {spec['shape']}"
    _check_shape(src, "actions", actions, act_shape, why)
    _check_shape(src, "terminals", arrays["terminals"], (n,), "one per transition")
    _check_shape(src, "truncations", arrays["truncations"], (n,), "one per transition")

    # ---- episode offsets
    off_raw = arrays["episode_offsets"]
    if off_raw.ndim != 1 or off_raw.shape[0] < 1:
        raise DatasetError(src, f"dataset 'episode_offsets' must be 1-D with E + 1 >= 1 entries, "
                                f"got shape {off_raw.shape}")
    off = off_raw.astype(np.int64)
    e = off.shape[0] - 1
    if off[0] != 0:
        raise DatasetError(src, f"dataset 'episode_offsets' must start at 0, starts at {off[0]}")
    steps = np.diff(off)
    if (steps < 1).any():
        k = int(np.flatnonzero(steps < 1)[0])
        raise DatasetError(src, f"dataset 'episode_offsets' must be strictly increasing (every "
                                f"episode has >= 1 transition); episode {k} spans "
                                f"[{off[k]}, {off[k + 1]})")
    if off[-1] != n:
        raise DatasetError(src, f"dataset 'episode_offsets' ends at {off[-1]} but there are {n} "
                                f"transitions (length of 'rewards')")
    if states.shape[0] != n + e:
        raise DatasetError(src, f"dataset 'states' has {states.shape[0]} rows, expected "
                                f"N + E = {n} + {e} = {n + e} (one extra final state per episode)")

    # ---- per-episode arrays and tables
    for name in ("episode_instruction", "episode_task", "episode_level", "episode_source",
                 "episode_success"):
        _check_shape(src, name, arrays[name], (e,), "one per episode")
    instructions = _check_table(src, "instructions", ds.instructions)
    tasks = _check_table(src, "tasks", ds.tasks)
    for k, spec_str in enumerate(tasks):
        try:
            json.loads(spec_str)
        except ValueError:
            raise DatasetError(src, f"string table 'tasks' entry {k} is not valid JSON: "
                                    f"{spec_str[:80]!r}") from None
    ep_instr = arrays["episode_instruction"].astype(np.int64)
    ep_task = arrays["episode_task"].astype(np.int64)
    ep_level = arrays["episode_level"].astype(np.int64)
    ep_source = arrays["episode_source"].astype(np.int64)
    _check_ids(src, "episode_instruction", ep_instr, len(instructions), "index into 'instructions'")
    _check_ids(src, "episode_task", ep_task, len(tasks), "index into 'tasks'")
    _check_ids(src, "episode_level", ep_level, len(LEVELS), f"index into levels {list(LEVELS)}")
    _check_ids(src, "episode_source", ep_source, len(SOURCES),
               f"index into sources {list(SOURCES)}")

    # ---- end-of-episode flags
    not_last = np.ones(n, dtype=bool)
    not_last[off[1:] - 1] = False
    for name in ("terminals", "truncations"):
        wrong = np.flatnonzero(arrays[name] & not_last)
        if wrong.size:
            k = int(np.searchsorted(off, wrong[0], side="right") - 1)
            raise DatasetError(src, f"dataset '{name}' is set on {wrong.size} transition(s) that "
                                    f"are not the last of their episode (first: transition "
                                    f"{int(wrong[0])} of episode {k}, which ends at "
                                    f"{int(off[k + 1]) - 1})")

    # ---- discrete action range
    if discrete and n:
        a64 = actions.astype(np.int64)
        if actions.dtype == np.uint64:
            a64 = np.where(actions > np.iinfo(np.int64).max, -1, a64)
        bad = np.flatnonzero((a64 < 0) | (a64 >= spec["n"]))
        if bad.size:
            raise DatasetError(src, f"dataset 'actions' has {bad.size} discrete action(s) outside "
                                    f"[0, {spec['n']}) (action_spec n); first at transition "
                                    f"{int(bad[0])}: {int(actions[bad[0]])}")

    out = RolloutDataset(
        states=states.astype(np.float32, copy=False),
        actions=actions.astype(np.int64 if discrete else np.float32, copy=False),
        rewards=rewards.astype(np.float32, copy=False),
        terminals=arrays["terminals"],
        truncations=arrays["truncations"],
        episode_offsets=off,
        instructions=instructions,
        tasks=tasks,
        episode_instruction=ep_instr.astype(np.int32),
        episode_task=ep_task.astype(np.int32),
        episode_level=ep_level.astype(np.uint8),
        episode_source=ep_source.astype(np.uint8),
        episode_success=arrays["episode_success"],
        domain=ds.domain,
        action_spec=spec,
        provenance=dict(ds.provenance),
        dropped_nonfinite=int(ds.dropped_nonfinite),
    )

    # ---- non-finite values (checked after the float32 cast, which may overflow to inf)
    bad_ep = np.zeros(e, dtype=bool)
    if e:
        state_owner = np.repeat(np.arange(e), steps + 1)
        trans_owner = np.repeat(np.arange(e), steps)
        bad_ep[state_owner[~np.isfinite(out.states).all(axis=1)]] = True
        bad_ep[trans_owner[~np.isfinite(out.rewards)]] = True
        if not discrete:
            finite_act = np.isfinite(out.actions).reshape(n, -1).all(axis=1)
            bad_ep[trans_owner[~finite_act]] = True
    n_bad = int(bad_ep.sum())
    if n_bad:
        first = int(np.flatnonzero(bad_ep)[0])
        if nonfinite == "raise":
            raise DatasetError(src, f"non-finite values (NaN/inf) in states/actions/rewards of "
                                    f"{n_bad} of {e} episodes (first: episode {first}); load with "
                                    f"nonfinite='drop' to discard them")
        log.warning("%s: dropping %d of %d episodes with non-finite states/actions/rewards",
                    src, n_bad, e)
        out = out.select(~bad_ep)
        out.dropped_nonfinite += n_bad
    return out


# --------------------------------------------------------------------------------------------------
# Writing
# --------------------------------------------------------------------------------------------------


def _create_array(h5: h5py.File, name: str, data: np.ndarray) -> None:
    """Write one numeric array (big transition arrays are gzip-compressed)."""
    kwargs: dict[str, Any] = {}
    if name in _COMPRESSED and data.size:
        kwargs = {"compression": "gzip", "compression_opts": 4, "shuffle": True, "chunks": True}
    h5.create_dataset(name, data=data, **kwargs)


def _create_strings(h5: h5py.File, name: str, table: list[str]) -> None:
    h5.create_dataset(name, data=np.array(table, dtype=object), shape=(len(table),),
                      dtype=h5py.string_dtype("utf-8"))


def _write_payload(h5: h5py.File, ds: RolloutDataset) -> None:
    h5.attrs["format"] = FORMAT_NAME
    h5.attrs["schema_version"] = np.int64(SCHEMA_VERSION)
    h5.attrs["domain"] = ds.domain
    h5.attrs["state_dim"] = np.int64(ds.state_dim)
    h5.attrs["action_spec"] = json.dumps(ds.action_spec, sort_keys=True)
    h5.attrs["provenance"] = json.dumps(ds.provenance, sort_keys=True)
    h5.attrs["levels"] = json.dumps(list(LEVELS))
    h5.attrs["sources"] = json.dumps(list(SOURCES))
    for name in _ARRAY_KINDS:
        _create_array(h5, name, getattr(ds, name))
    for name in _STRING_TABLES:
        _create_strings(h5, name, getattr(ds, name))


def _fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def save_dataset(ds: RolloutDataset, path: str | os.PathLike[str], *,
                 overwrite: bool = False) -> Path:
    """Validate ``ds`` strictly and write it atomically to ``path``; return the resolved path.

    The file is written to a hidden ``.<name>.*.tmp`` sibling, fsynced and then renamed onto
    ``path``, so ``path`` is never left partially written and a pre-existing file survives any
    failure.  Refuses to replace an existing file unless ``overwrite=True``.
    """
    path = Path(path).expanduser().absolute()
    if path.is_dir():
        raise IsADirectoryError(f"{path}: is a directory, cannot write a dataset file there")
    if path.exists() and not overwrite:
        raise FileExistsError(f"{path}: file already exists; pass overwrite=True to replace it")
    canonical = validate(ds, source_name=f"{path} (while saving)", nonfinite="raise")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
    try:
        with h5py.File(tmp, "x") as h5:  # "x": fail rather than clobber; mode follows the umask
            _write_payload(h5, canonical)
            h5.flush()
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        if path.exists() and not overwrite:  # appeared while we were writing
            raise FileExistsError(f"{path}: file already exists; pass overwrite=True to replace it")
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)
    return path


# --------------------------------------------------------------------------------------------------
# Loading
# --------------------------------------------------------------------------------------------------


def _read_attr(h5: h5py.File, src: str, name: str) -> Any:
    if name not in h5.attrs:
        raise DatasetError(src, f"missing root attribute '{name}'")
    value = h5.attrs[name]
    if isinstance(value, bytes):
        value = value.decode("utf-8", errors="replace")
    return value


def _read_str_attr(h5: h5py.File, src: str, name: str) -> str:
    value = _read_attr(h5, src, name)
    if not isinstance(value, str):
        raise DatasetError(src, f"root attribute '{name}' must be a string, got {value!r}")
    return value


def _read_json_attr(h5: h5py.File, src: str, name: str) -> Any:
    text = _read_str_attr(h5, src, name)
    try:
        return json.loads(text)
    except ValueError as err:
        raise DatasetError(src, f"root attribute '{name}' is not valid JSON ({err}): "
                                f"{text[:80]!r}") from None


def _read_int_attr(h5: h5py.File, src: str, name: str) -> int:
    value = _read_attr(h5, src, name)
    if isinstance(value, np.ndarray) and value.shape == ():
        value = value[()]
    if not _is_int(value):
        raise DatasetError(src, f"root attribute '{name}' must be an integer, got {value!r}")
    return int(value)


def _get_dataset(h5: h5py.File, src: str, name: str) -> h5py.Dataset:
    if name not in h5:
        raise DatasetError(src, f"missing dataset '{name}'")
    obj = h5[name]
    if not isinstance(obj, h5py.Dataset):
        raise DatasetError(src, f"'{name}' must be a dataset, found {type(obj).__name__}")
    return obj


def _read_array(h5: h5py.File, src: str, name: str, kinds: str) -> np.ndarray:
    dset = _get_dataset(h5, src, name)
    if h5py.check_string_dtype(dset.dtype) is not None or dset.dtype.kind not in kinds:
        wanted = " or ".join(_kind_name(k) for k in kinds)
        raise DatasetError(src, f"dataset '{name}' has dtype {dset.dtype} "
                                f"({_kind_name(dset.dtype.kind)}), expected {wanted}")
    try:
        return np.asarray(dset[()])
    except (OSError, RuntimeError, ValueError, TypeError) as err:
        raise DatasetError(src, f"cannot read dataset '{name}' ({err})") from None


def _read_strings(h5: h5py.File, src: str, name: str) -> list[str]:
    dset = _get_dataset(h5, src, name)
    if h5py.check_string_dtype(dset.dtype) is None:
        raise DatasetError(src, f"dataset '{name}' must be a variable-length UTF-8 string "
                                f"dataset, got dtype {dset.dtype}")
    if dset.ndim != 1:
        raise DatasetError(src, f"dataset '{name}' must be 1-D, got shape {dset.shape}")
    try:
        return [str(s) for s in dset.asstr()[()]]
    except (OSError, RuntimeError, ValueError, TypeError, UnicodeDecodeError) as err:
        raise DatasetError(src, f"cannot read string dataset '{name}' ({err})") from None


def _enum_lut(src: str, name: str, attr_value: Any, known: tuple[str, ...]) -> np.ndarray | None:
    """Map a file's enum order onto ours (None if identical)."""
    if not isinstance(attr_value, list) or not all(isinstance(v, str) for v in attr_value):
        raise DatasetError(src, f"root attribute '{name}' must be a JSON list of strings")
    if tuple(attr_value) == known:
        return None
    unknown = [v for v in attr_value if v not in known]
    if unknown:
        raise DatasetError(src, f"root attribute '{name}' lists unknown value(s) {unknown}; "
                                f"this version knows {list(known)}")
    return np.asarray([known.index(v) for v in attr_value], dtype=np.int64)


def _remap(src: str, name: str, ids: np.ndarray, lut: np.ndarray | None, attr: str) -> np.ndarray:
    if lut is None:
        return ids
    ids64 = ids.astype(np.int64)
    _check_ids(src, name, ids64, lut.size, f"index into the file's '{attr}' attribute")
    return lut[ids64]


def _load_open(h5: h5py.File, src: str, nonfinite: NonFinite) -> RolloutDataset:
    fmt = _read_attr(h5, src, "format")
    if fmt != FORMAT_NAME:
        raise DatasetError(src, f"root attribute 'format' is {fmt!r}, expected {FORMAT_NAME!r} "
                                f"(not an imaginebench rollout dataset)")
    version = _read_int_attr(h5, src, "schema_version")
    if version not in SUPPORTED_SCHEMA_VERSIONS:
        raise DatasetError(src, f"unsupported schema_version {version}; this version of "
                                f"imaginebench reads {list(SUPPORTED_SCHEMA_VERSIONS)}")
    domain = _read_str_attr(h5, src, "domain")
    state_dim = _read_int_attr(h5, src, "state_dim")
    action_spec = _normalise_action_spec(_read_json_attr(h5, src, "action_spec"), src)
    provenance = _read_json_attr(h5, src, "provenance")
    level_lut = _enum_lut(src, "levels", _read_json_attr(h5, src, "levels"), LEVELS)
    source_lut = _enum_lut(src, "sources", _read_json_attr(h5, src, "sources"), SOURCES)

    arrays: dict[str, np.ndarray] = {}
    for name, kinds in _ARRAY_KINDS.items():
        if name == "actions":
            kinds = _INT_KINDS if action_spec["type"] == "discrete" else "f"
        arrays[name] = _read_array(h5, src, name, kinds)
    tables = {name: _read_strings(h5, src, name) for name in _STRING_TABLES}

    states = arrays["states"]
    if states.ndim == 2 and states.shape[1] != state_dim:
        raise DatasetError(src, f"dataset 'states' has {states.shape[1]} columns but root "
                                f"attribute state_dim is {state_dim}")
    arrays["episode_level"] = _remap(src, "episode_level", arrays["episode_level"], level_lut,
                                     "levels")
    arrays["episode_source"] = _remap(src, "episode_source", arrays["episode_source"], source_lut,
                                      "sources")
    raw = RolloutDataset(**arrays, **tables, domain=domain, action_spec=action_spec,
                         provenance=provenance)
    return validate(raw, source_name=src, nonfinite=nonfinite)


def load_dataset(path: str | os.PathLike[str], *, nonfinite: NonFinite = "raise") -> RolloutDataset:
    """Read and fully validate a dataset file.

    Raises :class:`DatasetError` (a ``ValueError`` whose message starts with the path) for any
    format violation, and :class:`FileNotFoundError` if ``path`` does not exist.  Episodes with
    NaN/inf values raise unless ``nonfinite="drop"``, which removes them and records the count in
    ``dropped_nonfinite``.
    """
    if nonfinite not in ("raise", "drop"):
        raise ValueError(f"nonfinite must be 'raise' or 'drop', got {nonfinite!r}")
    path = Path(path).expanduser()
    src = str(path)
    if not path.exists():
        raise FileNotFoundError(2, f"{src}: dataset file does not exist", src)
    if path.is_dir():
        raise DatasetError(src, "is a directory, not a dataset file")
    try:
        h5 = h5py.File(path, "r")
    except OSError as err:
        raise DatasetError(src, f"not a readable HDF5 file (corrupt, truncated or another "
                                f"format): {err}") from None
    try:
        with h5:
            return _load_open(h5, src, nonfinite)
    except DatasetError:
        raise
    except (OSError, KeyError, RuntimeError, TypeError, ValueError) as err:
        raise DatasetError(src, f"failed to read the file ({type(err).__name__}: {err})") from None
