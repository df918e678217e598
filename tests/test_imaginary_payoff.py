"""benchmarks/imaginary_payoff.py on hand-written reports: pooled seeds equal the statistics of
all runs together, the verdict boundaries, and a row's "bar met"."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "imaginary_payoff.py"
spec = importlib.util.spec_from_file_location("imaginary_payoff", SCRIPT)
payoff = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = payoff  # dataclasses look their module up there
spec.loader.exec_module(payoff)
Cell = payoff.Cell

HEADER = "algorithm,data,level,runs,mean,std,ci95_low,ci95_high\n"


def test_pooled_groups_equal_the_statistics_of_all_runs():
    first, second = np.array([70.0, 75.5, 82.5]), np.array([66.0, 71.0, 69.5, 73.0])
    cells = [Cell(float(x.mean()), float(x.std(ddof=1)), len(x)) for x in (first, second)]
    both = np.concatenate([first, second])
    together = payoff.pooled(cells)
    assert together.runs == 7
    assert together.mean == pytest.approx(both.mean())
    assert together.std == pytest.approx(both.std(ddof=1))


def test_a_gain_exceeds_both_spreads_and_a_loss_is_more_than_two_points():
    real = Cell(50.0, 3.0, 3)
    assert payoff.verdict(real, Cell(53.5, 1.0, 3)) == "gain"
    assert payoff.verdict(real, Cell(53.0, 1.0, 3)) == "within"  # not beyond the 3.0
    assert payoff.verdict(real, Cell(55.0, 6.0, 3)) == "within"
    assert payoff.verdict(real, Cell(48.0, 1.0, 3)) == "within"  # exactly 2 points lower
    assert payoff.verdict(real, Cell(47.9, 1.0, 3)) == "loss"


def test_rows_say_whether_the_bar_is_met(tmp_path, monkeypatch):
    report = tmp_path / "grid"
    report.mkdir()
    imagined = "real + imaginary (all levels)"
    lines = []
    for algorithm, changes in (("BC", (0, 5, 5, -1)), ("CQL", (-3, 5, 5, 0))):
        for level, change in zip(payoff.LEVELS, changes):
            lines.append(f"{algorithm},real,{level},3,50.0,1.0,0,0")
            lines.append(f"{algorithm},{imagined},{level},3,{50.0 + change},1.0,0,0")
    lines.append("expert,,train,1,100.0,,,")  # reference rows are skipped
    (report / "results.csv").write_text(HEADER + "\n".join(lines) + "\n")
    monkeypatch.setattr(payoff, "RESULTS", tmp_path)
    bc, cql = payoff.rows(payoff.Source("X", "grid", imagined))
    assert bc.startswith("| X | BC |") and "| yes |" in bc and "**+5.0 (50.0 → 55.0) gain**" in bc
    assert "| no |" in cql and "-3.0 (50.0 → 47.0) loss" in cql
    with pytest.raises(SystemExit, match="missing"):
        payoff.read_cells("absent")


def test_a_filling_report_adds_only_missing_cells_of_the_same_algorithms(tmp_path, monkeypatch):
    """A level the main report lacks comes from ``filled_by``; its other cells, and those of
    algorithms without real + imaginary cells in the main report, are ignored."""
    for name, lines in {
        "main": [
            "BC,real,hard,3,4.0,1.0,0,0",
            "BC,real + imaginary,easy,3,30.0,1.0,0,0",
            "CQL,real + oracle,hard,3,20.0,1.0,0,0",
        ],
        "extra": [
            "BC,real + imaginary,hard,3,1.0,0.5,0,0",
            "BC,real + imaginary,easy,3,99.0,0.0,0,0",  # the main report's cell stays
            "CQL,real + imaginary,hard,3,7.0,0.0,0,0",  # CQL has no real + imaginary cell there
        ],
    }.items():
        (tmp_path / name).mkdir()
        (tmp_path / name / "results.csv").write_text(HEADER + "\n".join(lines) + "\n")
    monkeypatch.setattr(payoff, "RESULTS", tmp_path)
    cells = payoff.source_cells(
        payoff.Source("X", "main", "real + imaginary", filled_by=("extra",))
    )
    assert cells[("BC", "real + imaginary", "hard")] == Cell(1.0, 0.5, 3)
    assert cells[("BC", "real + imaginary", "easy")] == Cell(30.0, 1.0, 3)
    assert ("CQL", "real + imaginary", "hard") not in cells
    (row,) = payoff.rows(payoff.Source("X", "main", "real + imaginary", filled_by=("extra",)))
    assert "-3.0 (4.0 → 1.0) loss" in row and "[extra](extra/results.md)" in row
