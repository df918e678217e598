"""Does imaginary data help? Real + imaginary against real-only, every domain, from the reports.

Reads the ``results.csv`` of the benchmark reports the README's results tables come from (each
made by ``imaginebench benchmark`` + ``imaginebench report``, seeds and budgets in its
``results.md``) and prints, per domain, algorithm and level, the change that the shipped
imaginary data make to the success rate, with a verdict in the terms of the project's bar: a
**gain** when the change exceeds both rows' seed standard deviations, a **loss** when the
imaginary row is more than 2 points lower, else **within** (the spread, or 2 points).

    python benchmarks/imaginary_payoff.py [--out docs/results/imaginary_payoff.md]
"""

from __future__ import annotations

import argparse
import csv
from dataclasses import dataclass
from pathlib import Path

from imaginebench.envs.base import LEVELS

RESULTS = Path(__file__).resolve().parent.parent / "docs" / "results"
LOSS_POINTS = 2.0


@dataclass(frozen=True)
class Source:
    """One report: the real-only and real + imaginary rows of ``report``."""

    domain: str
    report: str  # folder under docs/results
    imaginary: str  # the ``data`` label of its real + imaginary rows
    note: str = ""
    pooled_with: tuple[str, ...] = ()  # reports of further seeds of the same runs
    filled_by: tuple[str, ...] = ()  # reports whose cells of the same algorithms fill gaps


SOURCES = (
    Source("CLEVR-Robot", "clevr_all_three_shipped", "real + imaginary (all levels)"),
    Source("BabyAI", "babyai_step1600_rephrase_easy", "real + imaginary (all levels)"),
    Source(
        "BabyAI, share 0.015",
        "babyai_step1600_share/0.015",
        "real + imaginary (all levels)",
        "this row and the next: DiscreteCQL on the same files and seeds with a smaller "
        "imaginary share; three shares (0.03, 0.015, 0.01) were tried on the same evaluation "
        "episodes, so these rows are a sweep, not a held-out choice",
    ),
    Source("BabyAI, share 0.01", "babyai_step1600_share/0.01", "real + imaginary (all levels)"),
    Source("HalfCheetah", "halfcheetah_lookahead_easy", "real + imaginary (all levels)"),
    Source(
        "Meta-World",
        "metaworld_bc_normalised",
        "real + imaginary",
        "each level scored by the runs trained on its own file; `hard` from the runs on the "
        "`hard` file (shipped 2026-12-06), all four learners",
        filled_by=("metaworld_imaginary_hard",),
    ),
    Source(
        "Meta-World",
        "metaworld_td3bc_normalised",
        "real + imaginary",
        filled_by=("metaworld_imaginary_hard",),
    ),
    Source(
        "Meta-World",
        "metaworld_bcq_cql_normalised",
        "real + imaginary",
        "BCQ and CQL: the `easy` file's runs only (`rephrase`: docs/metaworld.md, unchanged)",
        filled_by=("metaworld_imaginary_hard",),
    ),
    Source("LIBERO", "libero_grid", "real + imaginary (all levels)"),
)


@dataclass(frozen=True)
class Cell:
    mean: float
    std: float
    runs: int


def read_cells(report: str) -> dict[tuple[str, str, str], Cell]:
    """``(algorithm, data, level) -> Cell`` of a report's ``results.csv``."""
    path = RESULTS / report / "results.csv"
    if not path.is_file():
        raise SystemExit(f"{path} is missing: regenerate it with `imaginebench report`")
    with path.open() as f:
        return {
            (row["algorithm"], row["data"], row["level"]): Cell(
                float(row["mean"]), float(row["std"]), int(row["runs"])
            )
            for row in csv.DictReader(f)
            if row["data"]  # reference policies (expert, random) have no data
        }


def pooled(cells: list[Cell]) -> Cell:
    """One cell of several groups of seeds: the mean over every run and the sample standard
    deviation (``ddof=1``) of them all, exact up to the reports' rounding to 0.1."""
    runs = sum(c.runs for c in cells)
    mean = sum(c.runs * c.mean for c in cells) / runs
    squares = sum((c.runs - 1) * c.std**2 + c.runs * (c.mean - mean) ** 2 for c in cells)
    return Cell(mean, (squares / (runs - 1)) ** 0.5 if runs > 1 else 0.0, runs)


def source_cells(source: Source) -> dict[tuple[str, str, str], Cell]:
    """The source's cells, each pooled over its report and ``pooled_with``; then the cells of
    ``filled_by`` (in order) where those reports have none, for the algorithms that have real +
    imaginary cells there."""
    reports = [read_cells(r) for r in (source.report, *source.pooled_with)]
    cells = {k: pooled([r[k] for r in reports if k in r]) for k in reports[0]}
    algorithms = {a for a, data, _ in cells if data == source.imaginary}
    for report in source.filled_by:
        for key, cell in read_cells(report).items():
            if key[0] in algorithms:
                cells.setdefault(key, cell)
    return cells


def verdict(real: Cell, imagined: Cell) -> str:
    change = imagined.mean - real.mean
    if change > max(real.std, imagined.std):
        return "gain"
    if change < -LOSS_POINTS:
        return "loss"
    return "within"


def rows(source: Source) -> list[str]:
    cells = source_cells(source)
    algorithms = sorted({a for a, d, _ in cells if d == source.imaginary})
    out = []
    for algorithm in algorithms:
        verdicts = []
        parts = []
        for level in LEVELS:
            real = cells.get((algorithm, "real", level))
            imagined = cells.get((algorithm, source.imaginary, level))
            if real is None or imagined is None:
                parts.append("—")
                verdicts.append("none")
                continue
            v = verdict(real, imagined)
            verdicts.append(v)
            change = imagined.mean - real.mean
            text = f"{change:+.1f} ({real.mean:.1f} → {imagined.mean:.1f}) {v}"
            parts.append(f"**{text}**" if v == "gain" else text)
        met = all(v == "gain" for v in verdicts[1:3]) and "loss" not in verdicts
        seeds = sorted({c.runs for (a, _, _), c in cells.items() if a == algorithm})
        reports = (source.report, *source.pooled_with, *source.filled_by)
        links = ", ".join(f"[{r}]({r}/results.md)" for r in reports)
        out.append(
            f"| {source.domain} | {algorithm} | {' | '.join(parts)} | {'yes' if met else 'no'} | "
            f"{'/'.join(map(str, seeds))} | {links} |"
        )
    return out


def table() -> str:
    lines = [
        "| domain | algorithm | train | rephrase | easy | hard | bar met | seeds | report |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for source in SOURCES:
        lines.extend(rows(source))
    notes = [f"- {s.domain}: {s.note}" for s in SOURCES if s.note]
    return "\n".join(lines + [""] + notes) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", help="also write the table to this markdown file")
    args = parser.parse_args()
    text = table()
    print(text, end="")
    if args.out:
        header = (
            "# Real + imaginary against real-only\n\n"
            "Made by `python benchmarks/imaginary_payoff.py --out "
            "docs/results/imaginary_payoff.md` from the reports linked per row (their seeds, "
            "budgets and commands are in each report). Each cell: the change in success rate "
            "(points), real-only → real + the shipped imaginary data; **gain** when the change "
            "exceeds both rows' seed standard deviations, **loss** when it is below "
            f"−{LOSS_POINTS:g}, else within. *Bar met*: a gain on `rephrase` and `easy` and no "
            "loss on any level.\n\n"
        )
        Path(args.out).write_text(header + text)


if __name__ == "__main__":
    main()
