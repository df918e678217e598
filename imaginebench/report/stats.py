"""The numbers of the report: success per algorithm, data variant and level over seeds (mean,
sample standard deviation, 95 % t-interval), per task, and aggregate scores across tasks and
levels (interquartile mean and mean with stratified-bootstrap intervals, the ``rliable``
method).

Which runs score a level: a run of one data set for all levels (``real``, ``imaginary_all``,
``oracle_all``) scores every level; a per-level variant (``imaginary``, ``oracle``) scores
each novel level with the run that trained on that level's data, and ``train`` with the mean,
per seed, over its per-level runs.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass

import numpy as np

from imaginebench.report.results import RunResult

LEVEL_ORDER = ("train", "rephrase", "easy", "hard")


@dataclass(frozen=True)
class Summary:
    """Mean, sample standard deviation (``ddof=1``) and 95 % Student-t interval of the mean of
    ``n`` values (``nan`` spread and interval for ``n < 2``)."""

    n: int
    mean: float
    std: float
    ci_low: float
    ci_high: float


def summarize(values: list[float]) -> Summary:
    """:class:`Summary` of ``values`` (at least one)."""
    from scipy import stats

    x = np.asarray(values, dtype=float)
    if x.size == 0:
        raise ValueError("summarize needs at least one value")
    mean = float(x.mean())
    if x.size < 2:
        return Summary(1, mean, math.nan, math.nan, math.nan)
    std = float(x.std(ddof=1))
    half = float(stats.t.ppf(0.975, x.size - 1)) * std / math.sqrt(x.size)
    return Summary(int(x.size), mean, std, mean - half, mean + half)


def scoring_runs(
    runs: list[RunResult], algorithm: str, variant: str, level: str
) -> dict[int, list[RunResult]]:
    """Per seed, the runs of ``algorithm`` and ``variant`` that score ``level`` (see the module
    docstring); seeds without one are left out."""
    chosen: dict[int, list[RunResult]] = defaultdict(list)
    for r in runs:
        if r.algorithm != algorithm or r.variant != variant or level not in r.success:
            continue
        if r.level is None or r.level == level or level == "train":
            chosen[r.seed].append(r)
    return dict(sorted(chosen.items()))


def seed_values(
    runs: list[RunResult], algorithm: str, variant: str, level: str
) -> dict[int, float]:
    """The success on ``level`` (a fraction) of each seed that scores it."""
    chosen = scoring_runs(runs, algorithm, variant, level)
    return {seed: float(np.mean([r.success[level] for r in rs])) for seed, rs in chosen.items()}


def level_values(runs: list[RunResult], algorithm: str, variant: str, level: str) -> list[float]:
    """The success on ``level`` per seed (fractions)."""
    return list(seed_values(runs, algorithm, variant, level).values())


def task_values(
    runs: list[RunResult], algorithm: str, variant: str, level: str
) -> dict[str, tuple[str, list[float], int]]:
    """Per task of ``level`` (its spec): its name, its success per seed, and its episodes summed
    over the runs. A seed whose runs did not all evaluate the task is left out for it."""
    per_task: dict[str, tuple[str, list[float], int]] = {}
    for rs in scoring_runs(runs, algorithm, variant, level).values():
        specs = set.intersection(*(set(r.tasks.get(level, {})) for r in rs))
        for spec in sorted(specs):
            scores = [r.tasks[level][spec] for r in rs]
            name, values, episodes = per_task.get(spec, (scores[0].name, [], 0))
            values.append(float(np.mean([s.success for s in scores])))
            per_task[spec] = (name, values, episodes + sum(s.episodes for s in scores))
    return per_task


def levels_of(runs: list[RunResult]) -> list[str]:
    """The evaluated levels, in the usual order."""
    found = {level for r in runs for level in r.success}
    return [lv for lv in LEVEL_ORDER if lv in found] + sorted(found - set(LEVEL_ORDER))


def variants_of(runs: list[RunResult], algorithm: str) -> list[str]:
    order = ("real", "imaginary", "imaginary_all", "oracle", "oracle_all")
    found = {r.variant for r in runs if r.algorithm == algorithm}
    return [v for v in order if v in found] + sorted(found - set(order))


@dataclass(frozen=True)
class Aggregate:
    """Aggregate score of a method across tasks and levels: interquartile mean and mean of the
    per-task success, each with a 95 % stratified-bootstrap interval over runs."""

    runs: int
    tasks: int
    iqm: float
    iqm_ci: tuple[float, float]
    mean: float
    mean_ci: tuple[float, float]


def task_scores(
    runs: list[RunResult], algorithm: str, variant: str
) -> dict[int, dict[tuple[str, str], float]]:
    """Per seed, the success on every (level, task spec) pair the method was scored on."""
    per_seed: dict[int, dict[tuple[str, str], float]] = defaultdict(dict)
    for level in levels_of(runs):
        for seed, rs in scoring_runs(runs, algorithm, variant, level).items():
            specs = set.intersection(*(set(r.tasks.get(level, {})) for r in rs))
            for spec in specs:
                value = np.mean([r.tasks[level][spec].success for r in rs])
                per_seed[seed][(level, spec)] = float(value)
    return dict(per_seed)


def score_matrix(
    per_seed: dict[int, dict[tuple[str, str], float]], columns: list[tuple[str, str]]
) -> np.ndarray:
    """``(seeds, pairs)`` success on ``columns`` over the seeds that have every one of them."""
    rows = [
        [scores[c] for c in columns] for scores in per_seed.values() if set(columns) <= set(scores)
    ]
    return np.array(rows, dtype=float).reshape(len(rows), len(columns))


def common_pairs(methods: list[dict[int, dict[tuple[str, str], float]]]) -> list[tuple[str, str]]:
    """The (level, task) pairs every seed of every method was scored on: the methods'
    aggregates are then over the same tasks."""
    sets = [set(scores) for per_seed in methods for scores in per_seed.values()]
    return sorted(set.intersection(*sets)) if sets else []


def aggregate_scores(
    matrices: dict[str, np.ndarray], reps: int = 10_000, seed: int = 0
) -> dict[str, Aggregate]:
    """IQM and mean of each ``(runs, tasks)`` matrix with 95 % stratified-bootstrap intervals
    (``rliable.library.get_interval_estimates``, ``reps`` resamples, seeded); empty matrices are
    left out."""
    try:
        from rliable import library, metrics
    except ImportError as err:  # an optional extra
        raise ImportError(
            "aggregate scores need rliable: pip install 'imaginebench[report]'"
        ) from err

    def iqm_and_mean(scores: np.ndarray) -> np.ndarray:
        return np.array([metrics.aggregate_iqm(scores), metrics.aggregate_mean(scores)])

    kept = {k: m for k, m in matrices.items() if m.size}
    if not kept:
        return {}
    # rliable 1.2's stratified bootstrap draws its resamples from NumPy's global generator (its
    # random_state argument reaches only arch, which does not draw them): seed that, and put
    # the caller's state back afterwards
    state = np.random.get_state()
    np.random.seed(seed)
    try:
        points, intervals = library.get_interval_estimates(kept, iqm_and_mean, reps=reps)
    finally:
        np.random.set_state(state)
    return {
        key: Aggregate(
            runs=kept[key].shape[0],
            tasks=kept[key].shape[1],
            iqm=float(points[key][0]),
            iqm_ci=(float(intervals[key][0, 0]), float(intervals[key][1, 0])),
            mean=float(points[key][1]),
            mean_ci=(float(intervals[key][0, 1]), float(intervals[key][1, 1])),
        )
        for key in kept
    }
