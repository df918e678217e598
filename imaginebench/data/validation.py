"""Validation of rollout datasets: the one set of checks used when saving and loading."""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any

import numpy as np

from imaginebench.data.dataset import RolloutDataset
from imaginebench.data.schema import (
    ARRAY_KINDS,
    CONFIDENCE_GROUP,
    CONFIDENCE_NAME,
    INT_KINDS,
    KIND_NAMES,
    LEVELS,
    SOURCES,
    DatasetError,
    NonFinite,
    normalise_action_spec,
)

log = logging.getLogger(__name__)


def _kind_name(kind: str) -> str:
    return KIND_NAMES.get(kind, repr(kind))


def _check_kind(source: str, name: str, arr: np.ndarray, kinds: str) -> None:
    if arr.dtype.kind not in kinds:
        wanted = " or ".join(_kind_name(k) for k in kinds)
        raise DatasetError(
            source,
            f"dataset '{name}' has dtype {arr.dtype} "
            f"({_kind_name(arr.dtype.kind)}), expected {wanted}",
        )


def _check_shape(source: str, name: str, arr: np.ndarray, shape: tuple[int, ...], why: str) -> None:
    if arr.shape != shape:
        raise DatasetError(
            source, f"dataset '{name}' has shape {arr.shape}, expected {shape} ({why})"
        )


def _check_ids(source: str, name: str, ids: np.ndarray, n: int, what: str) -> None:
    if ids.size and (ids.min() < 0 or ids.max() >= n):
        bad = np.flatnonzero((ids < 0) | (ids >= n))
        raise DatasetError(
            source,
            f"dataset '{name}' has {bad.size} value(s) out of range "
            f"[0, {n}) ({what}); first at episode {int(bad[0])}: "
            f"{int(ids[bad[0]])}",
        )


def _check_table(source: str, name: str, table: Any) -> list[str]:
    if not isinstance(table, (list, tuple)) or not all(isinstance(s, str) for s in table):
        raise DatasetError(source, f"string table '{name}' must be a list of str")
    table = list(table)
    if len(set(table)) != len(table):
        seen: set[str] = set()
        dup = next(s for s in table if s in seen or seen.add(s))  # type: ignore[func-returns-value]
        raise DatasetError(source, f"string table '{name}' has duplicate entry {dup!r}")
    return table


def _check_confidence(source: str, confidence: Any, n: int) -> dict[str, np.ndarray]:
    """The confidence arrays as float32, sorted by source name: each named like an identifier,
    a float array of one value per transition, every value finite and in [0, 1]."""
    if not isinstance(confidence, Mapping):
        raise DatasetError(source, "'confidence' must map source names to (N,) arrays")
    out = {}
    for name, values in confidence.items():
        if not isinstance(name, str) or not CONFIDENCE_NAME.match(name):
            raise DatasetError(
                source,
                f"confidence source name {name!r} must be lower-case letters, digits and "
                "underscores, starting with a letter",
            )
        where = f"{CONFIDENCE_GROUP}/{name}"
        arr = np.asarray(values)
        _check_kind(source, where, arr, "f")
        _check_shape(source, where, arr, (n,), "one per transition")
        arr = arr.astype(np.float32, copy=False)
        bad = np.flatnonzero(~((arr >= 0.0) & (arr <= 1.0)))  # NaN fails both comparisons
        if bad.size:
            first = float(arr[bad[0]])
            raise DatasetError(
                source,
                f"dataset '{where}' has {bad.size} value(s) that are NaN, infinite or outside "
                f"[0, 1] (first: transition {int(bad[0])}: {first}); a confidence is a finite "
                "number in [0, 1] (recompute it with imaginebench score-imaginary)",
            )
        out[name] = arr
    return dict(sorted(out.items()))


def validate(
    ds: RolloutDataset, *, source_name: str = "<in-memory dataset>", nonfinite: NonFinite = "raise"
) -> RolloutDataset:
    """Check every rule of the format and return the dataset with canonical dtypes.

    Raises :class:`DatasetError` (message prefixed by ``source_name``) on the first violation.
    With ``nonfinite="drop"``, episodes containing NaN/inf in states, actions or rewards are
    removed (count added to ``dropped_nonfinite``, a warning is logged) instead of raising.
    Confidence values must be finite and in [0, 1] either way.
    """
    src = str(source_name)
    if nonfinite not in ("raise", "drop"):
        raise ValueError(f"nonfinite must be 'raise' or 'drop', got {nonfinite!r}")

    # ---- file-level metadata
    if not isinstance(ds.domain, str) or not ds.domain:
        raise DatasetError(src, f"'domain' must be a non-empty string, got {ds.domain!r}")
    spec = normalise_action_spec(ds.action_spec, src)
    if not isinstance(ds.provenance, dict):
        raise DatasetError(
            src, f"'provenance' must be a JSON object, got {type(ds.provenance).__name__}"
        )
    try:
        json.dumps(ds.provenance)
    except (TypeError, ValueError) as err:
        raise DatasetError(src, f"'provenance' is not JSON-serialisable ({err})") from None

    arrays = {name: np.asarray(getattr(ds, name)) for name in ARRAY_KINDS}
    discrete = spec["type"] == "discrete"
    for name, kinds in ARRAY_KINDS.items():
        if name == "actions":
            kinds = INT_KINDS if discrete else "f"
        _check_kind(src, name, arrays[name], kinds)

    # ---- transition arrays
    states, rewards, actions = arrays["states"], arrays["rewards"], arrays["actions"]
    if states.ndim != 2 or states.shape[1] < 1:
        raise DatasetError(
            src,
            f"dataset 'states' must be 2-D (num_states, state_dim>=1), got shape {states.shape}",
        )
    if rewards.ndim != 1:
        raise DatasetError(src, f"dataset 'rewards' must be 1-D, got shape {rewards.shape}")
    n = rewards.shape[0]
    lengths = {
        name: arrays[name].shape[0] if arrays[name].ndim else None
        for name in ("actions", "rewards", "terminals", "truncations")
    }
    if len(set(lengths.values())) != 1:
        counts = ", ".join(f"{k}={v}" for k, v in lengths.items())
        raise DatasetError(
            src,
            f"transition datasets have inconsistent lengths ({counts}); "
            f"all must have one entry per transition",
        )
    act_shape = (n,) if discrete else (n, *spec["shape"])
    why = "one per transition" if discrete else f"action_spec shape {spec['shape']}"
    _check_shape(src, "actions", actions, act_shape, why)
    _check_shape(src, "terminals", arrays["terminals"], (n,), "one per transition")
    _check_shape(src, "truncations", arrays["truncations"], (n,), "one per transition")

    # ---- episode offsets
    off_raw = arrays["episode_offsets"]
    if off_raw.ndim != 1 or off_raw.shape[0] < 1:
        raise DatasetError(
            src,
            f"dataset 'episode_offsets' must be 1-D with E + 1 >= 1 entries, "
            f"got shape {off_raw.shape}",
        )
    off = off_raw.astype(np.int64)
    e = off.shape[0] - 1
    if off[0] != 0:
        raise DatasetError(src, f"dataset 'episode_offsets' must start at 0, starts at {off[0]}")
    steps = np.diff(off)
    if (steps < 1).any():
        k = int(np.flatnonzero(steps < 1)[0])
        raise DatasetError(
            src,
            f"dataset 'episode_offsets' must be strictly increasing (every "
            f"episode has >= 1 transition); episode {k} spans "
            f"[{off[k]}, {off[k + 1]})",
        )
    if off[-1] != n:
        raise DatasetError(
            src,
            f"dataset 'episode_offsets' ends at {off[-1]} but there are {n} "
            f"transitions (length of 'rewards')",
        )
    if states.shape[0] != n + e:
        raise DatasetError(
            src,
            f"dataset 'states' has {states.shape[0]} rows, expected "
            f"N + E = {n} + {e} = {n + e} (one extra final state per episode)",
        )

    # ---- per-episode arrays and tables
    for name in (
        "episode_instruction",
        "episode_task",
        "episode_level",
        "episode_source",
        "episode_success",
    ):
        _check_shape(src, name, arrays[name], (e,), "one per episode")
    instructions = _check_table(src, "instructions", ds.instructions)
    tasks = _check_table(src, "tasks", ds.tasks)
    for k, spec_str in enumerate(tasks):
        try:
            json.loads(spec_str)
        except ValueError:
            raise DatasetError(
                src, f"string table 'tasks' entry {k} is not valid JSON: {spec_str[:80]!r}"
            ) from None
    ep_instr = arrays["episode_instruction"].astype(np.int64)
    ep_task = arrays["episode_task"].astype(np.int64)
    ep_level = arrays["episode_level"].astype(np.int64)
    ep_source = arrays["episode_source"].astype(np.int64)
    _check_ids(src, "episode_instruction", ep_instr, len(instructions), "index into 'instructions'")
    _check_ids(src, "episode_task", ep_task, len(tasks), "index into 'tasks'")
    _check_ids(src, "episode_level", ep_level, len(LEVELS), f"index into levels {list(LEVELS)}")
    _check_ids(
        src, "episode_source", ep_source, len(SOURCES), f"index into sources {list(SOURCES)}"
    )

    # ---- end-of-episode flags
    not_last = np.ones(n, dtype=bool)
    not_last[off[1:] - 1] = False
    for name in ("terminals", "truncations"):
        wrong = np.flatnonzero(arrays[name] & not_last)
        if wrong.size:
            k = int(np.searchsorted(off, wrong[0], side="right") - 1)
            raise DatasetError(
                src,
                f"dataset '{name}' is set on {wrong.size} transition(s) that "
                f"are not the last of their episode (first: transition "
                f"{int(wrong[0])} of episode {k}, which ends at "
                f"{int(off[k + 1]) - 1})",
            )

    confidence = _check_confidence(src, ds.confidence, n)

    # ---- discrete action range
    if discrete and n:
        a64 = actions.astype(np.int64)
        if actions.dtype == np.uint64:
            a64 = np.where(actions > np.iinfo(np.int64).max, -1, a64)
        bad = np.flatnonzero((a64 < 0) | (a64 >= spec["n"]))
        if bad.size:
            raise DatasetError(
                src,
                f"dataset 'actions' has {bad.size} discrete action(s) outside "
                f"[0, {spec['n']}) (action_spec n); first at transition "
                f"{int(bad[0])}: {int(actions[bad[0]])}",
            )

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
        confidence=confidence,
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
            raise DatasetError(
                src,
                f"non-finite values (NaN/inf) in states/actions/rewards of "
                f"{n_bad} of {e} episodes (first: episode {first}); load with "
                f"nonfinite='drop' (imaginebench info --drop-nonfinite) to discard them",
            )
        log.warning(
            "%s: dropping %d of %d episodes with non-finite states/actions/rewards", src, n_bad, e
        )
        out = out.select(~bad_ep)
        out.dropped_nonfinite += n_bad
    return out
