"""``imaginebench refilter``: imagination's simulator-free filter steps on a file that exists.

Five steps of ``filters:`` (:mod:`~imaginebench.imagination.filters`) can be applied after
the fact, without imagining again: ``erase_loops`` first cuts the loops out of every episode
(rewards labelled again for the shorter rollout; :mod:`~imaginebench.imagination.loops`);
``max_progress_drop`` keeps the episodes whose task potential
(the state-only ``Task.progress`` of the imagined states) never falls by more than that at one
step; ``family_limits`` keeps the episodes no longer than their task family's limit (from a
real file's successful lengths); ``min_confidence`` keeps the episodes whose stored ``ensemble``
confidence is at least that at every transition; ``max_per_task`` then keeps at most that
many episodes of each task (the shortest, ties by the stored LM likelihood). Inside
``imaginebench imagine`` the same steps may pick another candidate (or redraw an action) of the
same episode; here an episode that fails is dropped. No step runs the simulator. The kept
episodes are written (without their loops if asked), the steps recorded in the provenance
(``post_filter``), and the quality report beside the output is recomputed.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np

from imaginebench.atomic import check_output_path
from imaginebench.data.dataset import RolloutDataset
from imaginebench.data.format import load_dataset
from imaginebench.data.hdf5 import save_dataset
from imaginebench.data.schema import SOURCES
from imaginebench.data.shipped import resolve_data_path
from imaginebench.envs import get_domain
from imaginebench.envs.base import Task
from imaginebench.imagination.confidence import ENSEMBLE, LIKELIHOOD
from imaginebench.imagination.filters import (
    FilterConfig,
    episode_families,
    family_horizons,
    largest_potential_drop,
    within_task_cap,
)
from imaginebench.imagination.loops import erase_loops
from imaginebench.imagination.quality import QualityReport, quality_report, save_report_beside


def keep_mask(
    data: RolloutDataset,
    max_progress_drop: float | None = None,
    family_limits: dict[str, int] | None = None,
    min_confidence: float | None = None,
) -> np.ndarray:
    """``(episodes,)`` bool: the episodes that pass every step (a step left ``None`` passes;
    a family without a limit passes)."""
    lengths = data.episode_lengths()
    if min_confidence is not None and ENSEMBLE not in data.confidence:
        raise ValueError(
            f"min_confidence judges the {ENSEMBLE!r} confidence, which this file does not "
            f"store (it has {sorted(data.confidence) or 'none'}): add it with "
            "imaginebench score-imaginary FILE --real REAL --sources ensemble"
        )
    tasks = [Task.from_spec(spec) for spec in data.tasks]  # each task parsed once
    keep = np.ones(len(data), dtype=bool)
    for i, family in enumerate(episode_families(data)):
        if family_limits is not None and lengths[i] > family_limits.get(family, lengths[i]):
            keep[i] = False
        elif max_progress_drop is not None or min_confidence is not None:
            episode = data.episode(i)  # read once for both steps
            if max_progress_drop is not None and (
                largest_potential_drop(tasks[data.episode_task[i]], episode.states)
                > max_progress_drop
            ):
                keep[i] = False
            elif min_confidence is not None and (
                episode.confidence[ENSEMBLE].min(initial=1.0) < min_confidence
            ):
                keep[i] = False
    return keep


def task_cap_mask(data: RolloutDataset, keep: np.ndarray, cap: int) -> np.ndarray:
    """``keep`` narrowed to at most ``cap`` episodes per task (the shortest, ties by the
    stored ``likelihood`` confidence's log-likelihood where the file has it)."""
    lengths = data.episode_lengths()
    log_likelihoods = np.zeros(len(data))
    if LIKELIHOOD in data.confidence:
        steps = np.log(np.maximum(np.asarray(data.confidence[LIKELIHOOD], dtype=float), 1e-30))
        log_likelihoods = np.add.reduceat(steps, data.episode_offsets[:-1])  # episodes >= 1 step
    candidates = np.flatnonzero(keep)
    within = within_task_cap(
        [str(data.episode_task[i]) for i in candidates],
        [int(lengths[i]) for i in candidates],
        [float(log_likelihoods[i]) for i in candidates],
        cap,
    )
    narrowed = np.zeros_like(keep)
    narrowed[candidates[within]] = True
    return narrowed


def without_loops(data: RolloutDataset) -> RolloutDataset:
    """``data`` with every episode's loops erased and its rewards labelled again by the
    domain's reward function (``data`` itself when no episode has a loop)."""
    rewards_of = get_domain(data.domain).episode_rewards
    episodes, changed = [], False
    for i in range(len(data)):
        episode = data.episode(i)
        shorter = erase_loops(episode, rewards_of)
        changed |= shorter is not episode
        episodes.append(shorter)
    if not changed:
        return data
    return RolloutDataset.from_episodes(
        episodes, domain=data.domain, action_spec=data.action_spec, provenance=data.provenance
    )


def refilter_file(
    path: str | Path,
    out: str | Path,
    max_progress_drop: float | None = None,
    family_horizon: str | Path | None = None,
    quantile: float = 0.95,
    scale: float = 1.0,
    overwrite: bool = False,
    min_confidence: float | None = None,
    erase_loops: bool = False,
    max_per_task: int | None = None,
) -> tuple[RolloutDataset, QualityReport, dict[str, tuple[int, int]]]:
    """Write the episodes of the imaginary file ``path`` that pass the steps to ``out`` (and
    ``<out stem>.quality.json``); return them, their quality and ``family -> (kept, of)``.

    Args:
        max_progress_drop: the largest fall of the task potential allowed at one step.
        family_horizon: a real dataset file; each family's limit is the ``quantile`` of its
            successful episode lengths times ``scale`` (rounded up).
        min_confidence: the least ``ensemble`` confidence allowed at any transition.
        erase_loops: cut each episode's loops before the other steps judge it.
        max_per_task: after the other steps, at most this many episodes of each task.
        overwrite: replace ``out`` (``out`` may be ``path`` itself).
    """
    if (
        max_progress_drop is None
        and family_horizon is None
        and min_confidence is None
        and not erase_loops
        and max_per_task is None
    ):
        raise ValueError(
            "give erase_loops, max_progress_drop, family_horizon, min_confidence, max_per_task "
            "or several"
        )
    # the steps' bounds are imagine's: one check of them
    FilterConfig(
        max_progress_drop=max_progress_drop,
        min_confidence=min_confidence,
        max_per_task=max_per_task,
    )
    out = Path(out)
    check_output_path(out, overwrite)
    path = resolve_data_path(path)  # also ``shipped:<domain>/<file>``
    data = load_dataset(path)
    if not np.all(data.episode_source == SOURCES.index("imaginary")):
        raise ValueError(f"{path} holds real episodes: refilter applies to imaginary files")
    erased_steps = 0
    if erase_loops:
        before = int(data.episode_lengths().sum())
        data = without_loops(data)
        erased_steps = before - int(data.episode_lengths().sum())
    limits = None
    if family_horizon is not None:
        real = load_dataset(resolve_data_path(family_horizon))
        limits = family_horizons(
            episode_families(real),
            real.episode_lengths(),
            real.episode_success,
            quantile,
            scale,
        )
    keep = keep_mask(data, max_progress_drop, limits, min_confidence)
    if max_per_task is not None:
        keep = task_cap_mask(data, keep, max_per_task)
    if not keep.any():
        raise ValueError(f"no episode of {path} passes the steps; nothing to write")
    kept = data.select(keep)
    families = episode_families(data)
    kept_families = Counter(families[keep])
    per_family = {f: (kept_families[f], n) for f, n in sorted(Counter(families).items())}
    if earlier := kept.provenance.pop("post_filter", None):  # a refiltered file refiltered
        kept.provenance["earlier_post_filters"] = [
            *kept.provenance.get("earlier_post_filters", []),
            earlier,
        ]
    kept.provenance["post_filter"] = {
        "source": str(path),
        "max_progress_drop": max_progress_drop,
        "min_confidence": min_confidence,
        "erase_loops": erase_loops,
        "max_per_task": max_per_task,
        "loop_steps_erased": erased_steps,
        "family_horizon": None
        if limits is None
        else {"real": str(family_horizon), "quantile": quantile, "scale": scale, "limits": limits},
        "kept": int(keep.sum()),
        "of": len(data),
    }
    level = kept.provenance.get("level") or data.episode(0).level
    report = quality_report(kept.domain, level, [kept.episode(i) for i in range(len(kept))])
    save_dataset(kept, out, overwrite=overwrite)
    save_report_beside(out, report, kept.provenance)
    return kept, report, per_family
