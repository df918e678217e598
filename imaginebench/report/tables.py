"""The report's tables, as rows (for CSV) and as Markdown. Success is in percent."""

from __future__ import annotations

import csv
import math
from pathlib import Path

import numpy as np

from imaginebench.report.results import BenchmarkRuns
from imaginebench.report.stats import (
    Aggregate,
    level_values,
    levels_of,
    seed_values,
    summarize,
    task_values,
    variants_of,
)

LABELS = {
    "real": "real",
    "imaginary": "real + imaginary",
    "oracle": "real + oracle",
    "imaginary_all": "real + imaginary (all levels)",
    "oracle_all": "real + oracle (all levels)",
}
REFERENCE_LABELS = {"random": "random policy", "expert": "expert"}


def _pct(value: float) -> str:
    return "" if math.isnan(value) else f"{100 * value:.1f}"


def level_rows(bench: BenchmarkRuns) -> list[dict[str, object]]:
    """One row per algorithm, data variant and level: runs (seeds), mean, std and 95 % CI."""
    rows = []
    runs = bench.runs
    for algorithm in bench.algorithms:
        label = next(r.label for r in runs if r.algorithm == algorithm)
        for variant in variants_of(runs, algorithm):
            for level in levels_of(runs):
                values = level_values(runs, algorithm, variant, level)
                if not values:
                    continue
                s = summarize(values)
                rows.append(
                    {
                        "algorithm": label,
                        "data": LABELS.get(variant, variant),
                        "level": level,
                        "runs": s.n,
                        "mean": _pct(s.mean),
                        "std": _pct(s.std),
                        "ci95_low": _pct(s.ci_low),
                        "ci95_high": _pct(s.ci_high),
                    }
                )
    for name, ref in bench.references.items():
        for level, success in ref.success.items():
            rows.append(
                {
                    "algorithm": REFERENCE_LABELS.get(name, name),
                    "data": "",
                    "level": level,
                    "runs": 1,
                    "mean": _pct(success),
                    "std": "",
                    "ci95_low": "",
                    "ci95_high": "",
                }
            )
    return rows


def _cell(values: list[float], expected: int) -> str:
    if not values:
        return "—"
    s = summarize(values)
    partial = f" (n={s.n})" if s.n < expected else ""
    if s.n < 2:
        return f"{_pct(s.mean)}{partial}"
    return f"{_pct(s.mean)} ± {_pct(s.std)} [{_pct(s.ci_low)}, {_pct(s.ci_high)}]{partial}"


def level_table(bench: BenchmarkRuns, seeds: int) -> str:
    """Markdown: success per level, one row per algorithm and data variant, then the
    references; cells ``mean ± std [95 % CI]`` over seeds, ``(n=k)`` when fewer than
    ``seeds`` runs."""
    runs = bench.runs
    levels = levels_of(runs)
    lines = [
        "| algorithm | data | " + " | ".join(levels) + " | minutes per run |",
        "|---|---|" + "---|" * len(levels) + "---|",
    ]
    for algorithm in bench.algorithms:
        label = next(r.label for r in runs if r.algorithm == algorithm)
        for variant in variants_of(runs, algorithm):
            cells = [_cell(level_values(runs, algorithm, variant, lv), seeds) for lv in levels]
            seconds = [
                r.seconds
                for r in runs
                if r.algorithm == algorithm and r.variant == variant and r.seconds is not None
            ]
            minutes = f"{np.mean(seconds) / 60:.1f}" if seconds else ""
            row = f"| {label} | {LABELS.get(variant, variant)} | " + " | ".join(cells)
            lines.append(row + f" | {minutes} |")
    for name, ref in bench.references.items():
        cells = [_pct(ref.success[lv]) if lv in ref.success else "—" for lv in levels]
        lines.append(f"| {REFERENCE_LABELS.get(name, name)} | | " + " | ".join(cells) + " | |")
    return "\n".join(lines)


def paired_rows(bench: BenchmarkRuns) -> list[dict[str, object]]:
    """Per algorithm, data variant other than ``real`` and level: the change in success against
    the same algorithm's real-only runs of the same seeds (mean of the per-seed differences,
    its standard error, the seeds paired and how many of them are lower). Cells with fewer than
    two such seeds are left out: one pair has no standard error."""
    rows = []
    levels = levels_of(bench.runs)
    for algorithm in bench.algorithms:
        label = next(r.label for r in bench.runs if r.algorithm == algorithm)
        real_by_level = {lv: seed_values(bench.runs, algorithm, "real", lv) for lv in levels}
        for variant in [v for v in variants_of(bench.runs, algorithm) if v != "real"]:
            for level in levels:
                real = real_by_level[level]
                other = seed_values(bench.runs, algorithm, variant, level)
                seeds = sorted(set(real) & set(other))
                if len(seeds) < 2:
                    continue
                change = np.array([other[s] - real[s] for s in seeds])
                rows.append(
                    {
                        "algorithm": label,
                        "data": LABELS.get(variant, variant),
                        "level": level,
                        "seeds": len(seeds),
                        "change": _pct(float(change.mean())),
                        "standard_error": _pct(float(change.std(ddof=1) / math.sqrt(len(seeds)))),
                        "seeds_lower": int((change < 0).sum()),
                    }
                )
    return rows


def paired_table(rows: list[dict[str, object]], levels: list[str]) -> str:
    """Markdown: ``change (standard error)`` per level, in points."""
    table: dict[tuple[object, object, object], dict[object, str]] = {}
    for row in rows:
        change = float(str(row["change"]))
        key = (row["algorithm"], row["data"], row["seeds"])
        table.setdefault(key, {})[row["level"]] = f"{change:+.1f} ({row['standard_error']})"
    lines = [
        "| algorithm | data | seeds | " + " | ".join(levels) + " |",
        "|---|---|---|" + "---|" * len(levels),
    ]
    for (algorithm, data, seeds), cells in table.items():
        lines.append(
            f"| {algorithm} | {data} | {seeds} | "
            + " | ".join(cells.get(lv, "—") for lv in levels)
            + " |"
        )
    return "\n".join(lines)


def all_levels_rows(bench: BenchmarkRuns) -> list[dict[str, object]]:
    """Every run group (algorithm, data such as ``imaginary-easy``) on every level it was
    scored on, mean and std over seeds: what a per-level run does on the other levels too."""
    groups: dict[tuple[str, str], dict[str, list[float]]] = {}
    labels = {}
    for r in bench.runs:
        if r.algorithm == "reference":
            continue
        labels[r.algorithm] = r.label
        for level, success in r.success.items():
            groups.setdefault((r.algorithm, r.data), {}).setdefault(level, []).append(success)
    rows = []
    order = {a: i for i, a in enumerate(bench.algorithms)}
    for (algorithm, data), per_level in sorted(
        groups.items(), key=lambda kv: (order[kv[0][0]], kv[0][1])
    ):
        for level in [lv for lv in levels_of(bench.runs) if lv in per_level]:
            s = summarize(per_level[level])
            rows.append(
                {
                    "algorithm": labels[algorithm],
                    "data": data,
                    "level": level,
                    "runs": s.n,
                    "mean": _pct(s.mean),
                    "std": _pct(s.std),
                }
            )
    return rows


def all_levels_table(rows: list[dict[str, object]], levels: list[str]) -> str:
    table: dict[tuple[object, object], dict[object, str]] = {}
    for row in rows:
        spread = f" ± {row['std']}" if row["std"] != "" else ""
        table.setdefault((row["algorithm"], row["data"]), {})[row["level"]] = (
            f"{row['mean']}{spread}"
        )
    lines = [
        "| algorithm | data | " + " | ".join(levels) + " |",
        "|---|---|" + "---|" * len(levels),
    ]
    for (algorithm, data), cells in table.items():
        lines.append(
            f"| {algorithm} | {data} | " + " | ".join(cells.get(lv, "—") for lv in levels) + " |"
        )
    return "\n".join(lines)


def task_rows(bench: BenchmarkRuns) -> list[dict[str, object]]:
    """One row per algorithm, data variant, level and task: mean and std over seeds of the
    task's success, and its episodes summed over the runs (references: one run)."""
    rows = []
    runs = bench.runs
    for algorithm in bench.algorithms:
        label = next(r.label for r in runs if r.algorithm == algorithm)
        for variant in variants_of(runs, algorithm):
            for level in levels_of(runs):
                for spec, (name, values, episodes) in task_values(
                    runs, algorithm, variant, level
                ).items():
                    s = summarize(values)
                    rows.append(
                        {
                            "algorithm": label,
                            "data": LABELS.get(variant, variant),
                            "level": level,
                            "task": name,
                            "spec": spec,
                            "runs": s.n,
                            "episodes": episodes,
                            "mean": _pct(s.mean),
                            "std": _pct(s.std),
                        }
                    )
    for ref_name, ref in bench.references.items():
        for level, tasks in ref.tasks.items():
            for spec, score in tasks.items():
                rows.append(
                    {
                        "algorithm": REFERENCE_LABELS.get(ref_name, ref_name),
                        "data": "",
                        "level": level,
                        "task": score.name,
                        "spec": spec,
                        "runs": 1,
                        "episodes": score.episodes,
                        "mean": _pct(score.success),
                        "std": "",
                    }
                )
    return rows


def task_tables(rows: list[dict[str, object]], levels: list[str]) -> str:
    """Markdown: per level, one row per task, one column per method (success %, mean over
    seeds, with the episodes behind it)."""
    methods: list[tuple[object, object]] = []
    for row in rows:
        if (row["algorithm"], row["data"]) not in methods:
            methods.append((row["algorithm"], row["data"]))
    parts = []
    for level in levels:
        in_level = [r for r in rows if r["level"] == level]
        if not in_level:
            continue
        cells: dict[object, dict[tuple[object, object], str]] = {}
        for r in in_level:
            cells.setdefault(r["task"], {})[(r["algorithm"], r["data"])] = (
                f"{r['mean']} ({r['episodes']})"
            )
        shown = [m for m in methods if any(m in c for c in cells.values())]
        header = " | ".join(f"{a} {d}".strip() for a, d in shown)
        lines = [f"### {level}", "", f"| task | {header} |", "|---|" + "---|" * len(shown)]
        for task in sorted(cells, key=str):
            lines.append(f"| {task} | " + " | ".join(cells[task].get(m, "—") for m in shown) + " |")
        parts.append("\n".join(lines))
    return "\n\n".join(parts)


def aggregate_rows(aggregates: dict[tuple[str, str], Aggregate]) -> list[dict[str, object]]:
    return [
        {
            "algorithm": algorithm,
            "data": data,
            "runs": a.runs,
            "tasks": a.tasks,
            "iqm": _pct(a.iqm),
            "iqm_ci95_low": _pct(a.iqm_ci[0]),
            "iqm_ci95_high": _pct(a.iqm_ci[1]),
            "mean": _pct(a.mean),
            "mean_ci95_low": _pct(a.mean_ci[0]),
            "mean_ci95_high": _pct(a.mean_ci[1]),
        }
        for (algorithm, data), a in aggregates.items()
    ]


def aggregate_table(rows: list[dict[str, object]]) -> str:
    lines = [
        "| algorithm | data | runs | (level, task) pairs | IQM [95 % CI] | mean [95 % CI] |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['algorithm']} | {r['data']} | {r['runs']} | {r['tasks']} | "
            f"{r['iqm']} [{r['iqm_ci95_low']}, {r['iqm_ci95_high']}] | "
            f"{r['mean']} [{r['mean_ci95_low']}, {r['mean_ci95_high']}] |"
        )
    return "\n".join(lines)


def write_csv(path: Path, rows: list[dict[str, object]]) -> Path:
    """``rows`` (dicts with the same keys) as a CSV file with a header row."""
    with open(path, "w", newline="") as f:
        if rows:
            writer = csv.DictWriter(f, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
    return path
