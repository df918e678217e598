"""Named steps that keep imagined rollouts physical and on task, without the simulator.

Each step uses only what the method may use: the domain's legality rules (walls, overlaps,
grid values, the floor; no dynamics), the task's success function on the imagined states, the
LM's own likelihood, and the real data's episode lengths. The simulator never makes or repairs
a rollout; it only judges the result afterwards (the quality report).

Steps, in the order a candidate rollout meets them:

0. **loop erasure** (``erase_loops``): once decoded, a candidate that comes back to a state it
   visited loses the steps in between (the first visit continues with the last visit's
   action; :mod:`~imaginebench.imagination.loops`), so the other steps judge, and the learner
   sees, the rollout without its detours (BabyAI's imagined turns back and forth);
1. **horizon** (``horizon_quantile``): decoding stops after ``horizon_scale`` times that
   quantile of the real data's successful episode lengths (capped by the level's limit), so a
   rollout that has missed its goal does not drift for the whole episode limit; with
   ``family_horizon_scale`` a rollout must also reach its goal within that scale times the
   quantile of its own task family's real lengths, or it counts as ``too_long`` (a detour the
   expert's data never takes for that kind of task);
2. **legality** (``reject_illegal``): a rollout stops at its first state that breaks the
   domain's rules and is dropped; with ``illegal_retries`` the action that led there is first
   redrawn from the LM up to that many times (rules judge each draw; nothing is repaired);
   with ``min_confidence`` a rollout also stops, as ``uncertain``, at its first transition that
   the dynamics ensemble fitted on the real data trusts less than that (the ``ensemble``
   confidence the dataset stores, ``exp`` of minus the committee's spread: a state-action pair
   unlike the real data, where the imagined state is least reliable; MOReL halts its model
   rollouts at such pairs), after the same redraws;
3. **success** (``require_success``): a rollout is kept only if its imagined states satisfy
   its own instruction; with ``max_progress_drop`` also only if its task's shaped potential
   (the state-only ``Task.progress`` on the imagined states) never falls by more than that at
   one step (``regressing``: a push that undoes the task on the way, which the expert's data
   rarely shows);
4. **best of N** (``best_of``, ``best_by``): N sampled candidates per episode; the kept one,
   among those the other steps keep, is the most likely under the LM (``likelihood``) or the
   one whose imagined states reach the goal in the fewest steps (``shortest``; ties by
   likelihood);
5. **coverage** (``coverage_rounds``): the level's tasks that no kept rollout imagines get
   ``coverage_episodes`` fresh episodes each (new starts and wordings) and are imagined again,
   for up to that many extra rounds, so the file is not limited to the tasks the LM plans right
   at its first try; what counts as covered is the other steps' verdict, never the simulator's;
6. **start difficulty** (``start_bins``, ``start_rounds``): the first round's starts are split
   into quantile bins of their initial task potential (state-only: how far the goal is); bins
   that hold fewer kept rollouts than an equal share get fresh episodes whose starts fall in
   them, as many as the bin's first-round keep rate says are needed (at most
   ``start_max_episodes`` a round), so the file is not made of the starts where the goal was
   already near;
7. **task cap** (``max_per_task``): at the end, each task keeps at most that many rollouts,
   the shortest (ties: the most likely). The success filter keeps the tasks the LM plans
   easily far more often than the hard ones (BabyAI rephrase: up to 11 rollouts of a go-to
   task, one of most put-next tasks), so without a cap the imaginary share of each batch goes
   mostly to the easy tasks (on BabyAI a cap of 2 moved no offline RL score beyond a seed
   spread; docs/grounding.md).

The counts of rollouts each step removed (and of loop steps erased) go into the dataset's
provenance and quality report.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from imaginebench.config import as_config
from imaginebench.envs.base import Task
from imaginebench.imagination.decoder import ImaginedRollout
from imaginebench.imagination.loops import erase_rollout_loops

if TYPE_CHECKING:
    from imaginebench.data.dataset import RolloutDataset


@dataclass
class FilterConfig:
    """Which filter steps run (all off: every non-diverged rollout is kept).

    Args:
        horizon_quantile: quantile of the real data's successful episode lengths that sets the
            horizon (``None``: the level's episode limit, or the command's ``horizon``).
        horizon_scale: the horizon is ``ceil(horizon_scale * quantile)``.
        family_horizon_scale: if set, a rollout longer than ``ceil(family_horizon_scale *
            quantile)`` of its task family's successful real episodes is dropped as
            ``too_long`` (needs ``horizon_quantile``; families without real episodes have no
            such limit).
        reject_illegal: stop and drop rollouts at their first illegal state.
        illegal_retries: before stopping, redraw the action that led to an illegal (or, with
            ``min_confidence``, uncertain) state up to this many times (needs
            ``reject_illegal`` or ``min_confidence``, and sampled actions).
        min_confidence: if set, stop and drop rollouts at their first transition whose
            dynamics-ensemble confidence (``exp(-spread)``, as stored in the dataset's
            ``ensemble`` confidence) is below this, as ``uncertain``.
        require_success: keep only rollouts that satisfy their own instruction.
        max_progress_drop: if set, drop rollouts whose task potential (``Task.progress`` on
            their imagined states) falls by more than this at any step, as ``regressing``.
        best_of: sampled candidates per episode (``> 1`` needs sampled decoding).
        best_by: which passing candidate is kept: the most likely under the LM
            (``likelihood``) or the shortest, i.e. the one that reaches its goal soonest
            (``shortest``, ties by likelihood).
        erase_loops: before the other steps judge a candidate, cut out the detours that return
            to a state it visited (:mod:`~imaginebench.imagination.loops`): the first visit
            continues with the last visit's action, so the rollout is shorter and every step
            left is one it imagined (exact state equality: discrete domains).
        coverage_rounds: extra rounds for the level's tasks that no kept rollout covers yet.
        coverage_episodes: episodes per uncovered task in each of those rounds.
        start_bins: quantile bins of the first round's initial task potential (0: off).
        start_rounds: extra rounds for the bins with fewer kept rollouts than an equal share.
        start_max_episodes: at most this many fresh episodes in one such round.
        max_per_task: if set, each task keeps at most this many rollouts at the end (the
            shortest, ties by likelihood); the rest count as ``over_task_cap``.
    """

    horizon_quantile: float | None = None
    horizon_scale: float = 2.0
    family_horizon_scale: float | None = None
    reject_illegal: bool = False
    illegal_retries: int = 0
    min_confidence: float | None = None
    require_success: bool = False
    max_progress_drop: float | None = None
    best_of: int = 1
    best_by: Literal["likelihood", "shortest"] = "likelihood"
    erase_loops: bool = False
    coverage_rounds: int = 0
    coverage_episodes: int = 1
    start_bins: int = 0
    start_rounds: int = 0
    start_max_episodes: int = 2000
    max_per_task: int | None = None

    def __post_init__(self) -> None:
        if self.horizon_quantile is not None and not 0.0 < self.horizon_quantile <= 1.0:
            raise ValueError(f"horizon_quantile must be in (0, 1], got {self.horizon_quantile}")
        if self.horizon_scale <= 0:
            raise ValueError(f"horizon_scale must be > 0, got {self.horizon_scale}")
        if self.family_horizon_scale is not None:
            if self.family_horizon_scale <= 0:
                raise ValueError(
                    f"family_horizon_scale must be > 0, got {self.family_horizon_scale}"
                )
            if self.horizon_quantile is None:
                raise ValueError("family_horizon_scale needs horizon_quantile (its quantile)")
        if self.illegal_retries < 0:
            raise ValueError(f"illegal_retries must be >= 0, got {self.illegal_retries}")
        if self.illegal_retries and not (self.reject_illegal or self.min_confidence is not None):
            raise ValueError(
                "illegal_retries redraws illegal or uncertain steps: set reject_illegal or "
                "min_confidence too"
            )
        if self.min_confidence is not None and not 0.0 < self.min_confidence <= 1.0:
            raise ValueError(f"min_confidence must be in (0, 1], got {self.min_confidence}")
        if self.max_progress_drop is not None and not self.max_progress_drop >= 0:
            raise ValueError(f"max_progress_drop must be >= 0, got {self.max_progress_drop}")
        if self.best_of < 1:
            raise ValueError(f"best_of must be >= 1, got {self.best_of}")
        if self.best_by not in ("likelihood", "shortest"):
            raise ValueError(f"best_by must be 'likelihood' or 'shortest', got {self.best_by!r}")
        if self.coverage_rounds < 0:
            raise ValueError(f"coverage_rounds must be >= 0, got {self.coverage_rounds}")
        if self.coverage_episodes < 1:
            raise ValueError(f"coverage_episodes must be >= 1, got {self.coverage_episodes}")
        if self.start_bins < 0 or self.start_bins == 1:
            raise ValueError(f"start_bins must be 0 (off) or >= 2, got {self.start_bins}")
        if self.start_rounds < 0:
            raise ValueError(f"start_rounds must be >= 0, got {self.start_rounds}")
        if self.start_rounds and not self.start_bins:
            raise ValueError("start_rounds fill start-difficulty bins: set start_bins too")
        if self.start_max_episodes < 1:
            raise ValueError(f"start_max_episodes must be >= 1, got {self.start_max_episodes}")
        if self.max_per_task is not None and self.max_per_task < 1:
            raise ValueError(f"max_per_task must be >= 1 (or null: off), got {self.max_per_task}")


@dataclass
class FilterCounts:
    """Candidate rollouts removed by each step (each by the first step that rejects it), and
    the episodes kept and dropped (an episode is dropped when no candidate survives), the
    actions redrawn because they led to an illegal or uncertain state, and the steps cut out
    of loops (``erase_loops``; all candidates)."""

    candidates: int = 0
    diverged: int = 0
    illegal: int = 0
    uncertain: int = 0
    unsuccessful: int = 0
    too_long: int = 0
    regressing: int = 0
    less_likely: int = 0
    over_task_cap: int = 0
    episodes_kept: int = 0
    episodes_dropped: int = 0
    redrawn_actions: int = 0
    loop_steps_erased: int = 0

    def to_dict(self) -> dict[str, int]:
        return asdict(self)

    def __add__(self, other: FilterCounts) -> FilterCounts:
        """The counts of two batches of candidates together."""
        mine, theirs = self.to_dict(), other.to_dict()
        return FilterCounts(**{key: mine[key] + theirs[key] for key in mine})


def real_horizon(
    lengths: np.ndarray, success: np.ndarray, quantile: float, scale: float, limit: float
) -> int:
    """``min(limit, ceil(scale * quantile))`` of the successful real episodes' lengths."""
    successful = np.asarray(lengths)[np.asarray(success, dtype=bool)]
    if len(successful) == 0:
        raise ValueError("the real data has no successful episode to take a horizon from")
    return int(min(limit, max(1, math.ceil(scale * np.quantile(successful, quantile)))))


def uncovered_tasks(tasks: Sequence[Task], kept: Sequence[ImaginedRollout]) -> list[Task]:
    """The tasks (in the level's order) that no kept rollout imagines."""
    covered = {rollout.spec.task.spec() for rollout in kept}
    return [task for task in tasks if task.spec() not in covered]


def start_potential(spec: Any) -> float:
    """The task's shaped potential at an episode's initial state (state-only; lower is
    farther from the goal)."""
    state = np.asarray(spec.initial_state, dtype=np.float64)[None, None]
    return float(np.asarray(spec.task.progress(state))[0, 0])


def start_bin_edges(potentials: Sequence[float], bins: int) -> np.ndarray:
    """``bins + 1`` quantile edges of the level's start potentials."""
    if len(potentials) == 0:
        raise ValueError("no starts to bin")
    return np.quantile(np.asarray(potentials, dtype=float), np.linspace(0.0, 1.0, bins + 1))


def start_bin(potentials: Sequence[float] | np.ndarray, edges: np.ndarray) -> np.ndarray:
    """The bin of each potential (values beyond the edges go to the outer bins)."""
    inner = np.asarray(edges)[1:-1]
    return np.searchsorted(inner, np.asarray(potentials, dtype=float), side="right")


def start_episodes_needed(kept: np.ndarray, keep_rate: np.ndarray, budget: int) -> np.ndarray:
    """Fresh episodes to draw per bin, given the kept rollouts per bin: each bin short of an
    equal share (``ceil(kept / bins)``) gets its shortfall divided by its keep rate, scaled
    down to ``budget`` in all."""
    counts = np.asarray(kept, dtype=int)
    target = math.ceil(counts.sum() / len(counts))
    short = np.maximum(target - counts, 0)
    need = np.ceil(short / np.maximum(np.asarray(keep_rate, dtype=float), 1e-3)).astype(int)
    if need.sum() > budget:
        need = np.floor(need * budget / need.sum()).astype(int)
    return need


def episode_families(data: RolloutDataset) -> np.ndarray:
    """``(episodes,)`` the task family of every episode of a dataset (each task parsed once)."""
    family_of_task = np.array([Task.from_spec(spec).family for spec in data.tasks])
    return family_of_task[data.episode_task]


def family_horizons(
    families: Sequence[str],
    lengths: np.ndarray,
    success: np.ndarray,
    quantile: float,
    scale: float,
) -> dict[str, int]:
    """Per task family, :func:`real_horizon` (uncapped) of that family's real episodes."""
    families, lengths = np.asarray(families), np.asarray(lengths)
    success = np.asarray(success, dtype=bool)
    return {
        str(family): real_horizon(
            lengths[families == family], success[families == family], quantile, scale, math.inf
        )
        for family in np.unique(families[success])
    }


def select(
    candidates: Sequence[ImaginedRollout],
    config: FilterConfig | Mapping[str, Any],
    family_limits: Mapping[str, int] | None = None,
) -> tuple[list[ImaginedRollout], FilterCounts]:
    """Keep at most one rollout per group of ``config.best_of`` consecutive candidates (one
    episode): among those that are finite, legal (if required) and successful (if required),
    the best by ``config.best_by``; the others that pass count as ``less_likely``. A rollout
    stopped at an uncertain transition counts as ``uncertain`` (with ``config.min_confidence``).
    ``family_limits`` (task family -> steps, :func:`family_horizons`) drops successful
    rollouts longer than their family's limit as ``too_long``; ``config.max_progress_drop``
    drops those whose imagined task potential falls by more than it at a step as
    ``regressing``. With ``config.erase_loops`` every candidate loses its loops first."""
    config = as_config(config, FilterConfig, "config")
    best_of = config.best_of
    if len(candidates) % best_of:
        raise ValueError(f"{len(candidates)} candidates are not groups of {best_of}")
    counts = FilterCounts(
        candidates=len(candidates), redrawn_actions=sum(r.redrawn for r in candidates)
    )
    if config.erase_loops:
        erased = [erase_rollout_loops(r) for r in candidates]
        counts.loop_steps_erased = sum(
            len(r.actions) - len(e.actions) for r, e in zip(candidates, erased)
        )
        candidates = erased
    kept: list[ImaginedRollout] = []
    key = _likelihood if config.best_by == "likelihood" else _shortest
    for first in range(0, len(candidates), best_of):
        passing = []
        for rollout in candidates[first : first + best_of]:
            if rollout.diverged:
                counts.diverged += 1
            elif config.reject_illegal and rollout.illegal:
                counts.illegal += 1
            elif config.min_confidence is not None and rollout.uncertain:
                counts.uncertain += 1
            elif config.require_success and not rollout.success:
                counts.unsuccessful += 1
            elif family_limits and len(rollout.actions) > family_limits.get(
                rollout.spec.task.family, len(rollout.actions)
            ):
                counts.too_long += 1
            elif (
                config.max_progress_drop is not None
                and largest_progress_drop(rollout) > config.max_progress_drop
            ):
                counts.regressing += 1
            else:
                passing.append(rollout)
        if passing:
            kept.append(max(passing, key=key))
            counts.less_likely += len(passing) - 1
            counts.episodes_kept += 1
        else:
            counts.episodes_dropped += 1
    return kept, counts


def within_task_cap(
    tasks: Sequence[str], lengths: Sequence[int], log_likelihoods: Sequence[float], cap: int
) -> np.ndarray:
    """``(rollouts,)`` bool: at most ``cap`` rollouts of each task (``tasks``: a key per
    rollout), the shortest first, ties by the higher log-likelihood, then by order."""
    order = sorted(range(len(tasks)), key=lambda i: (tasks[i], lengths[i], -log_likelihoods[i], i))
    keep = np.zeros(len(tasks), dtype=bool)
    taken: dict[str, int] = {}
    for i in order:
        if taken.get(tasks[i], 0) < cap:
            keep[i] = True
            taken[tasks[i]] = taken.get(tasks[i], 0) + 1
    return keep


def cap_per_task(
    kept: Sequence[ImaginedRollout], cap: int | None
) -> tuple[list[ImaginedRollout], int]:
    """The step ``max_per_task`` on the kept rollouts: those within the cap (in their order)
    and how many it removed."""
    if cap is None:
        return list(kept), 0
    keep = within_task_cap(
        [r.spec.task.spec() for r in kept],
        [len(r.actions) for r in kept],
        [r.log_likelihood for r in kept],
        cap,
    )
    return [r for r, k in zip(kept, keep) if k], int((~keep).sum())


def largest_progress_drop(rollout: ImaginedRollout) -> float:
    """The largest one-step fall of the rollout's task potential on its imagined states
    (0 when it never falls)."""
    return largest_potential_drop(rollout.spec.task, rollout.states)


def largest_potential_drop(task: Task, states: np.ndarray) -> float:
    """The largest one-step fall of ``task.progress`` along one episode's states ``(T, d)``
    (index 0 = the initial state); 0 when it never falls."""
    potential = np.asarray(task.progress(np.asarray(states)[None]), dtype=float)[0]
    return float(max(0.0, -np.diff(potential).min(initial=0.0)))


def _likelihood(rollout: ImaginedRollout) -> float:
    return rollout.log_likelihood


def _shortest(rollout: ImaginedRollout) -> tuple[int, float]:
    return -len(rollout.actions), rollout.log_likelihood
