"""Where a data module's rollouts come from: dataset files, the cache, collection of missing
real data on first use, and the checks that a file fits its domain's environment."""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from imaginebench.atomic import file_lock
from imaginebench.config import as_config
from imaginebench.data.collect import CollectConfig
from imaginebench.data.format import DatasetError, RolloutDataset, load_dataset, save_dataset
from imaginebench.data.shipped import resolve_data_path
from imaginebench.envs import get_domain, make
from imaginebench.envs.base import action_spec_of

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class DomainSpec:
    """What a domain's environment says its data must look like."""

    state_dim: int
    state_low: np.ndarray  # (state_dim,) float32
    state_high: np.ndarray
    action_spec: dict[str, Any]


def domain_spec(domain: str) -> DomainSpec:
    """The state size and bounds and the action spec of ``domain``'s environment (a
    ``ValueError`` for an unknown domain)."""
    get_domain(domain)
    env = make(domain).unwrapped
    try:
        space = env.observation_space
        return DomainSpec(
            state_dim=int(space.shape[0]),
            state_low=np.asarray(space.low, dtype=np.float32),
            state_high=np.asarray(space.high, dtype=np.float32),
            action_spec=action_spec_of(env.action_space),
        )
    finally:
        env.close()


def default_cache_dir() -> Path:
    """``$IMAGINEBENCH_CACHE`` or ``~/.cache/imaginebench``."""
    return Path(os.environ.get("IMAGINEBENCH_CACHE", Path.home() / ".cache" / "imaginebench"))


def real_dataset_path(
    domain: str,
    real: str | None,
    collect: CollectConfig | Mapping[str, Any] | None,
    cache_dir: Path,
) -> Path:
    """``real`` if given, else the cache file named after the collection config."""
    collect = as_config(collect, CollectConfig, "collect")
    if real:
        return resolve_data_path(real)
    if collect is None:
        raise ValueError("no real dataset given: set data.real or data.collect")
    return cache_dir / collect.filename(domain)


def ensure_real_dataset(
    domain: str, path: Path, collect: CollectConfig | Mapping[str, Any] | None
) -> None:
    """Collect the real dataset at ``path`` with the expert if the file is missing.

    Runs started together on an empty cache collect it once: the others wait on a lock file
    beside it (``.<name>.lock``) and then find the file."""
    if path.exists():
        return
    collect = as_config(collect, CollectConfig, "collect")
    if collect is None:
        raise FileNotFoundError(f"real dataset {path} does not exist and data.collect is unset")
    from imaginebench.data.collect import collect as run_collection

    with file_lock(path.parent / f".{path.name}.lock"):
        if path.exists():  # collected by another run while we waited
            return
        log.warning("real dataset %s missing: collecting %s", path, collect)
        dataset, stats = run_collection(
            domain,
            collect.level,
            collect.episodes,
            collect.seed,
            epsilon=collect.epsilon,
            paraphrases=collect.paraphrases,
        )
        save_dataset(dataset, path)
    log.warning("%s -> %s", stats, path)


def check_matches_env(
    dataset: RolloutDataset, path: Path, domain: str, state_dim: int, action_spec: dict
) -> None:
    """Raise :class:`DatasetError` unless ``dataset`` fits the domain's environment: domain,
    state size, action type and size (``n``, or the continuous shape) and, for continuous
    actions, every action inside the environment's bounds."""
    if dataset.domain != domain:
        raise DatasetError(path, f"domain is {dataset.domain!r}, expected {domain!r}")
    if dataset.state_dim != state_dim:
        raise DatasetError(path, f"state_dim {dataset.state_dim} != env's {state_dim}")
    spec = dataset.action_spec
    size = "n" if action_spec["type"] == "discrete" else "shape"
    if spec.get("type") != action_spec["type"] or spec.get(size) != action_spec.get(size):
        raise DatasetError(path, f"action spec {spec} != env's {action_spec}")
    if action_spec["type"] == "continuous" and dataset.num_transitions:
        low, high = np.float32(action_spec["low"]), np.float32(action_spec["high"])
        outside = ((dataset.actions < low) | (dataset.actions > high)).reshape(
            dataset.num_transitions, -1
        )
        bad = np.flatnonzero(outside.any(axis=1))
        if bad.size:
            raise DatasetError(
                path,
                f"{bad.size} action(s) outside the env's bounds [{low:g}, {high:g}] "
                f"(first: transition {int(bad[0])}: {dataset.actions[bad[0]].tolist()})",
            )


def require_episodes(dataset: RolloutDataset, path: Path) -> None:
    """Raise :class:`DatasetError` if the training data ``dataset`` holds no episode."""
    if len(dataset) == 0:
        raise DatasetError(path, "holds 0 episodes: nothing to train on")


def load_real_dataset(
    domain: str, path: Path, collect: CollectConfig | Mapping[str, Any] | None, spec: DomainSpec
) -> RolloutDataset:
    """The real dataset at ``path`` (collected first if missing and ``collect`` is set),
    checked against the environment and refused if it holds no episode."""
    ensure_real_dataset(domain, path, collect)
    dataset = load_dataset(path)
    check_matches_env(dataset, path, domain, spec.state_dim, spec.action_spec)
    require_episodes(dataset, path)
    return dataset


def load_imaginary_dataset(
    domain: str, path: Path, spec: DomainSpec, state_margin: float, optional: bool
) -> tuple[RolloutDataset | None, int]:
    """The imaginary dataset at ``path`` without its episodes holding non-finite values or
    states outside the environment's bounds (plus ``state_margin``), and how many were
    dropped. A missing file is an error, or ``(None, 0)`` with a warning if ``optional``."""
    if not path.exists():
        if not optional:
            raise FileNotFoundError(
                f"{path}: imaginary dataset does not exist (set data.imaginary_optional: "
                "true to train without it)"
            )
        log.warning("imaginary dataset %s not found: skipped", path)
        return None, 0
    dataset = load_dataset(path, nonfinite="drop")
    check_matches_env(dataset, path, domain, spec.state_dim, spec.action_spec)
    low, high = spec.state_low - state_margin, spec.state_high + state_margin
    inside = ((dataset.states >= low) & (dataset.states <= high)).all(axis=1)
    episode_of_state = np.repeat(np.arange(len(dataset)), dataset.episode_lengths() + 1)
    bad = np.zeros(len(dataset), dtype=bool)
    bad[episode_of_state[~inside]] = True
    dropped = int(dataset.dropped_nonfinite + bad.sum())
    if bad.any() or dataset.dropped_nonfinite:
        log.warning(
            "%s: dropped %d episodes with non-finite values and %d with out-of-range states",
            path,
            dataset.dropped_nonfinite,
            int(bad.sum()),
        )
    return (dataset.select(~bad) if bad.any() else dataset), dropped
