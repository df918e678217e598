"""benchmarks/novelty_check.py on a hand-written results.csv: verdicts (with the boundary at
exactly the margin), the domain read from results.md, and clear errors for missing files."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "novelty_check.py"
spec = importlib.util.spec_from_file_location("novelty_check", SCRIPT)
novelty_check = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = novelty_check  # dataclasses look their module up there
spec.loader.exec_module(novelty_check)

HEADER = "algorithm,data,level,runs,mean,std,ci95_low,ci95_high\n"
ROWS = """\
BC,real,train,3,99.0,0.5,98.0,100.0
BC,real,rephrase,3,89.9,1.0,87.0,92.0
BC,real,easy,3,90.0,1.0,87.0,93.0
BC,real,hard,3,20.0,2.0,15.0,25.0
CQL,real,easy,3,80.0,1.0,77.0,83.0
CQL,real,hard,3,94.0,1.0,91.0,97.0
CQL,real + imaginary,rephrase,3,100.0,0.0,100.0,100.0
expert,,train,1,100.0,,,
expert,,rephrase,1,100.0,,,
expert,,easy,1,100.0,,,
expert,,hard,1,95.0,,,
random policy,,train,1,5.0,,,
random policy,,rephrase,1,5.0,,,
random policy,,easy,1,60.0,,,
random policy,,hard,1,1.0,,,
"""


@pytest.fixture
def report(tmp_path: Path) -> Path:
    (tmp_path / "results.csv").write_text(HEADER + ROWS)
    (tmp_path / "results.md").write_text("# Benchmark results: babyai\n\ntext\n")
    return tmp_path


def test_verdicts_per_level(report: Path) -> None:
    rows = novelty_check.read_rows(report / "results.csv")
    checks = {c.level: c for c in novelty_check.check_levels(rows)}
    assert checks["train"].verdict == "not judged (train)"
    # 10.1 points below the expert: novel; the imaginary row (100 %) is not real-only
    assert checks["rephrase"].verdict == novelty_check.NOVEL
    assert checks["rephrase"].best == ("BC", 89.9)
    # exactly 10 points below: not more than the margin, a defect
    assert checks["easy"].verdict == novelty_check.DEFECT
    # the best real-only algorithm decides (CQL at 94 against the expert's 95)
    assert checks["hard"].best == ("CQL", 94.0)
    assert checks["hard"].verdict == novelty_check.DEFECT
    assert (checks["easy"].expert, checks["easy"].random) == (100.0, 60.0)


def test_main_prints_the_domain_and_table(report: Path, capsys: pytest.CaptureFixture) -> None:
    assert novelty_check.main([str(report)]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"## babyai ({report})")
    assert "| easy | 90.0 ± 1.0 | 80.0 ± 1.0 | 100.0 | 60.0 | 10.0 (BC) | solved by real" in out
    assert "| rephrase | 89.9 ± 1.0 | — | 100.0 | 5.0 | 10.1 (BC) | novel |" in out


def test_missing_files_are_clear_errors(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit) as exit_info:
        novelty_check.main([str(tmp_path / "nowhere")])
    assert exit_info.value.code == 2
    assert "no such file or folder" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        novelty_check.main([str(tmp_path)])  # a folder without results.csv
    assert f"no results.csv in {tmp_path}" in capsys.readouterr().err
    (tmp_path / "tasks.csv").write_text("algorithm,data,level,task,mean,std\n")
    with pytest.raises(SystemExit):
        novelty_check.main([str(tmp_path / "tasks.csv")])
    assert "not a report's results.csv" in capsys.readouterr().err
