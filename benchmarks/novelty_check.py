"""Are the novel levels novel? Real-only success per level beside the expert's and the random
policy's, from the ``results.csv`` that ``imaginebench report`` writes (docs/benchmarking.md).

    python benchmarks/novelty_check.py REPORT_DIR_OR_RESULTS_CSV [...] [--margin 10]

Per domain and level: each algorithm's success on real data only (``data == "real"``, mean ±
std over seeds), the expert's and the random policy's, and a verdict. A novel level (rephrase,
easy, hard) is ``novel`` when the best real-only algorithm stays more than ``--margin`` points
(default 10) below the expert there, ``solved by real data (defect)`` otherwise; ``train`` is
shown but never judged. The domain is read from the ``results.md`` beside the CSV ("# Benchmark
results: clevr"), else it is the folder's name.
"""

from __future__ import annotations

import argparse
import csv
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

REQUIRED = ("algorithm", "data", "level", "runs", "mean", "std", "ci95_low", "ci95_high")
EXPERT, RANDOM = "expert", "random policy"
NOVEL, DEFECT = "novel", "solved by real data (defect)"


@dataclass
class LevelCheck:
    """One level: real-only cells per algorithm, the references and the verdict."""

    level: str
    real: dict[str, str] = field(default_factory=dict)  # algorithm -> "mean ± std"
    best: tuple[str, float] | None = None  # best real-only algorithm and its mean
    expert: float | None = None
    random: float | None = None
    verdict: str = ""


def results_csv(path: Path) -> Path:
    """The ``results.csv`` a path names: the file itself or the one in the folder."""
    if not path.exists():
        raise FileNotFoundError(f"no such file or folder: {path}")
    csv_path = path / "results.csv" if path.is_dir() else path
    if not csv_path.is_file():
        raise FileNotFoundError(f"no results.csv in {path}")
    return csv_path


def domain_of(csv_path: Path) -> str:
    """The domain named by ``results.md`` beside the CSV, else the folder's name."""
    md = csv_path.with_name("results.md")
    if md.is_file():
        match = re.match(r"# Benchmark results: (\S+)", md.read_text())
        if match:
            return match.group(1)
    return csv_path.resolve().parent.name


def read_rows(csv_path: Path) -> list[dict[str, str]]:
    with csv_path.open(newline="") as f:
        reader = csv.DictReader(f)
        missing = [c for c in REQUIRED if c not in (reader.fieldnames or [])]
        if missing:
            raise ValueError(f"{csv_path}: not a report's results.csv (missing {missing})")
        return list(reader)


def verdict(level: str, best: float | None, expert: float | None, margin: float) -> str:
    if level == "train":
        return "not judged (train)"
    if expert is None:
        return "no expert score"
    if best is None:
        return "no real-only run"
    # rounded: the CSV holds one decimal, so 100.0 - 90.0 must be exactly the margin
    return NOVEL if round(expert - best, 6) > margin else DEFECT


def check_levels(rows: list[dict[str, str]], margin: float = 10.0) -> list[LevelCheck]:
    """A :class:`LevelCheck` per level, in the CSV's order."""
    checks: dict[str, LevelCheck] = {}
    for row in rows:
        c = checks.setdefault(row["level"], LevelCheck(row["level"]))
        if not row["mean"]:  # a level without a finished score
            continue
        mean = float(row["mean"])
        if row["algorithm"] == EXPERT:
            c.expert = mean
        elif row["algorithm"] == RANDOM:
            c.random = mean
        elif row["data"] == "real":
            spread = f" ± {row['std']}" if row["std"] else ""
            c.real[row["algorithm"]] = f"{row['mean']}{spread}"
            if c.best is None or mean > c.best[1]:
                c.best = (row["algorithm"], mean)
    for c in checks.values():
        c.verdict = verdict(c.level, c.best[1] if c.best else None, c.expert, margin)
    return list(checks.values())


def table(checks: list[LevelCheck]) -> str:
    """Markdown: one row per level."""
    algorithms = list(dict.fromkeys(a for c in checks for a in c.real))

    def num(x: float | None) -> str:
        return "—" if x is None else f"{x:.1f}"

    head = ["level", *(f"{a} (real)" for a in algorithms), "expert", "random policy"]
    lines = ["| " + " | ".join([*head, "expert − best real", "verdict"]) + " |"]
    lines.append("|" + "---|" * (len(head) + 2))
    for c in checks:
        gap = "—"
        if c.expert is not None and c.best:
            gap = f"{c.expert - c.best[1]:.1f} ({c.best[0]})"
        cells = [c.level, *(c.real.get(a, "—") for a in algorithms)]
        cells += [num(c.expert), num(c.random), gap, c.verdict]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", nargs="+", type=Path, help="report folders or results.csv files")
    parser.add_argument(
        "--margin", type=float, default=10.0, help="points below the expert a novel level needs"
    )
    args = parser.parse_args(argv)
    reports = []
    for path in args.paths:  # every file read before anything is printed
        try:
            csv_path = results_csv(path)
            reports.append(
                (domain_of(csv_path), path, check_levels(read_rows(csv_path), args.margin))
            )
        except (FileNotFoundError, ValueError) as err:
            parser.error(str(err))
    for domain, path, checks in reports:
        print(f"## {domain} ({path})\n\n{table(checks)}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
