"""``imaginebench report`` on constructed benchmark folders: numbers against hand-computed
values, the per-level rule, aggregate scores, figures, and clear errors for bad folders."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest

from imaginebench.report import ReportError, load_runs, summarize, write_report
from imaginebench.report.stats import aggregate_scores, level_values

LEVELS = ("train", "rephrase", "easy", "hard")


def make_run(
    root: Path,
    algorithm: str,
    variant: str,
    level: str | None,
    seed: int,
    success: dict[str, float],
    tasks: dict[str, list[tuple[str, int, int]]] | None = None,
    label: str = "DiscreteBC",
    seconds: float = 60.0,
    done: bool = True,
) -> Path:
    """A run folder as the runner leaves it: run.json, results.json and (``done``) done.json.
    ``tasks``: per level, ``(task, episodes, successes)`` (default: one task per level, 10
    episodes at the level's success)."""
    data = variant if level is None else f"{variant}-{level}"
    name = f"reference/{variant}" if algorithm == "reference" else f"{algorithm}/{data}/seed{seed}"
    folder = root / "runs" / name
    folder.mkdir(parents=True)
    cell = {"algorithm": algorithm, "variant": variant, "level": level, "seed": seed}
    (folder / "run.json").write_text(json.dumps({"run": cell, "hash": "h"}))
    levels = {}
    for lv, value in success.items():
        per_task = (tasks or {}).get(lv, [(f"{lv} task", 10, round(10 * value))])
        entries = [
            {"task": f'{{"t": "{t}"}}', "name": t, "episodes": n, "successes": k}
            for t, n, k in per_task
        ]
        levels[lv] = {"level": lv, "success": value, "episodes": 10, "tasks": entries}
    results = {"levels": levels, "episodes_per_level": 10, "global_step": 100, "algorithm": label}
    (folder / "results.json").write_text(json.dumps(results))
    if done:
        (folder / "done.json").write_text(json.dumps({"hash": "h", "seconds": seconds}))
    return folder


@pytest.fixture
def bench(tmp_path: Path) -> Path:
    """BC: real (3 seeds), imaginary on easy and hard (2 seeds), oracle easy (2 seeds);
    references; one unfinished run."""
    root = tmp_path / "bench"
    for seed, train in zip((0, 1, 2), (0.5, 0.6, 0.7)):
        make_run(root, "bc", "real", None, seed, {"train": train, "easy": 0.1 * (seed + 1)})
    for seed, (easy, hard, t_easy, t_hard) in enumerate(
        ((0.4, 0.1, 0.2, 0.4), (0.8, 0.3, 0.6, 0.8))
    ):
        make_run(
            root, "bc", "imaginary", "easy", seed, {"train": t_easy, "easy": easy, "hard": 0.9}
        )
        make_run(
            root, "bc", "imaginary", "hard", seed, {"train": t_hard, "easy": 0.9, "hard": hard}
        )
        make_run(root, "bc", "oracle", "easy", seed, {"train": 0.5, "easy": 0.9 + 0.05 * seed})
    make_run(root, "reference", "random", None, 0, {"train": 0.37, "easy": 0.255, "hard": 0.05})
    make_run(root, "reference", "expert", None, 0, {"train": 1.0, "easy": 0.995, "hard": 0.93})
    make_run(root, "cql", "real", None, 0, {"train": 0.1}, label="DiscreteCQL", done=False)
    return root


def _csv(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def test_summary_matches_hand_computed_values():
    s = summarize([0.5, 0.6, 0.7])
    assert (s.n, s.mean, s.std) == (3, pytest.approx(0.6), pytest.approx(0.1))
    half = 4.302652729911275 * 0.1 / np.sqrt(3)  # t(0.975, 2 dof) * s / sqrt(n)
    assert (s.ci_low, s.ci_high) == (pytest.approx(0.6 - half), pytest.approx(0.6 + half))
    one = summarize([0.25])
    assert one.mean == 0.25 and np.isnan(one.std) and np.isnan(one.ci_low)


def test_per_level_numbers_follow_the_variants_rule(bench):
    runs = load_runs(bench).runs
    # real: every level from the real runs
    assert level_values(runs, "bc", "real", "train") == pytest.approx([0.5, 0.6, 0.7])
    # per-level variants: each novel level from the run trained on it ...
    assert level_values(runs, "bc", "imaginary", "easy") == pytest.approx([0.4, 0.8])
    assert level_values(runs, "bc", "imaginary", "hard") == pytest.approx([0.1, 0.3])
    # ... and train from the mean of a seed's per-level runs
    assert level_values(runs, "bc", "imaginary", "train") == pytest.approx([0.3, 0.7])
    assert level_values(runs, "bc", "oracle", "hard") == []  # no oracle run trained on hard


def test_a_run_on_every_level_s_imaginary_or_oracle_data_scores_every_level(tmp_path):
    root = tmp_path / "bench"
    for seed in (0, 1):
        make_run(root, "bc", "real", None, seed, {"train": 0.5, "easy": 0.2})
        make_run(root, "bc", "imaginary_all", None, seed, {"train": 0.4 + 0.2 * seed, "easy": 0.3})
        make_run(root, "bc", "oracle_all", None, seed, {"train": 0.5, "easy": 0.7 + 0.1 * seed})
    runs = load_runs(root).runs
    assert level_values(runs, "bc", "imaginary_all", "train") == pytest.approx([0.4, 0.6])
    assert level_values(runs, "bc", "imaginary_all", "easy") == pytest.approx([0.3, 0.3])
    assert level_values(runs, "bc", "oracle_all", "easy") == pytest.approx([0.7, 0.8])
    written = write_report(root, tmp_path / "report", reps=200)
    rows = {(r["data"], r["level"]): r for r in _csv(tmp_path / "report/results.csv")}
    assert rows[("real + imaginary (all levels)", "train")]["mean"] == "50.0"
    assert rows[("real + imaginary (all levels)", "easy")]["runs"] == "2"
    assert rows[("real + oracle (all levels)", "easy")]["mean"] == "75.0"
    assert tmp_path / "report/figure5_imaginary.png" in written  # drawn beside real
    assert tmp_path / "report/figure6_oracle.png" in written  # imaginary_all beside oracle_all


def test_changes_against_real_only_are_paired_by_seed(tmp_path):
    """Each variant's change is the mean of its per-seed differences from the real-only run of
    the same seed, with the standard error of that mean; unpaired seeds are left out."""
    root = tmp_path / "bench"
    for seed, (real, imag) in enumerate(((0.50, 0.45), (0.60, 0.59), (0.70, 0.62))):
        make_run(root, "bc", "real", None, seed, {"train": real, "easy": 0.1})
        make_run(root, "bc", "imaginary_all", None, seed, {"train": imag, "easy": 0.3 + seed / 10})
    make_run(root, "bc", "imaginary_all", None, 7, {"train": 0.0, "easy": 0.0})  # no real seed 7
    make_run(root, "bc", "oracle_all", None, 0, {"train": 0.9, "easy": 0.9})  # one pair only
    write_report(root, tmp_path / "report", reps=200)
    rows = {(r["data"], r["level"]): r for r in _csv(tmp_path / "report/paired.csv")}
    train = rows[("real + imaginary (all levels)", "train")]
    # differences -5, -1, -8 points: mean -4.67, std 3.51, SE 2.03
    assert (train["seeds"], train["change"], train["standard_error"]) == ("3", "-4.7", "2.0")
    assert train["seeds_lower"] == "3"
    easy = rows[("real + imaginary (all levels)", "easy")]
    assert (easy["change"], easy["standard_error"], easy["seeds_lower"]) == ("30.0", "5.8", "0")
    assert not any(data == "real + oracle (all levels)" for data, _ in rows)
    table = (tmp_path / "report/results.md").read_text()
    assert "| DiscreteBC | real + imaginary (all levels) | 3 | -4.7 (2.0) | +30.0 (5.8) |" in table


def test_report_tables_hold_the_hand_computed_numbers(bench, tmp_path):
    written = write_report(bench, tmp_path / "report", reps=200)
    assert all(path.is_file() for path in written)
    rows = {
        (r["algorithm"], r["data"], r["level"]): r for r in _csv(tmp_path / "report/results.csv")
    }
    real_train = rows[("DiscreteBC", "real", "train")]
    half = 100 * 4.302652729911275 * 0.1 / np.sqrt(3)
    assert (
        real_train["runs"] == "3" and real_train["mean"] == "60.0" and real_train["std"] == "10.0"
    )
    assert float(real_train["ci95_low"]) == pytest.approx(60 - half, abs=0.05)
    assert float(real_train["ci95_high"]) == pytest.approx(60 + half, abs=0.05)
    imag_train = rows[("DiscreteBC", "real + imaginary", "train")]
    # seeds: (0.2 + 0.4) / 2 = 0.3 and (0.6 + 0.8) / 2 = 0.7 -> 50.0 ± 28.3
    assert (imag_train["runs"], imag_train["mean"], imag_train["std"]) == ("2", "50.0", "28.3")
    assert rows[("random policy", "", "easy")]["mean"] == "25.5"
    assert rows[("expert", "", "hard")]["mean"] == "93.0"
    assert not any(r[0] == "DiscreteCQL" for r in rows)  # unfinished: left out

    table = (tmp_path / "report/results.md").read_text()
    assert "| DiscreteBC | real | 60.0 ± 10.0 [35.2, 84.8] |" in table
    assert "| DiscreteBC | real + imaginary | 50.0 ± 28.3 [" in table
    assert "| DiscreteBC | real + oracle | 50.0 ± 0.0 [50.0, 50.0] (n=2)" in table  # of 3 seeds
    assert "| random policy | | 37.0 | 25.5 | 5.0 | |" in table  # levels: train, easy, hard
    assert "cql/real/seed0" in table  # named as unfinished
    every = {(r["data"], r["level"]): r for r in _csv(tmp_path / "report/all_levels.csv")}
    assert every[("imaginary-easy", "hard")]["mean"] == "90.0"  # off-level scores kept there


def test_per_task_success_and_aggregate_iqm(tmp_path):
    root = tmp_path / "bench"
    counts = [0, 1, 2, 3, 4, 5, 6, 10]  # successes of 10 episodes on 8 tasks
    tasks = {"easy": [(f"task {i}", 10, k) for i, k in enumerate(counts)]}
    make_run(root, "bc", "real", None, 0, {"easy": 0.3875}, tasks)
    flipped = {"easy": [(f"task {i}", 10, 10 - k) for i, k in enumerate(counts)]}
    make_run(root, "bc", "real", None, 1, {"easy": 0.6125}, flipped)
    write_report(root, tmp_path / "report", reps=500)

    per_task = {r["task"]: r for r in _csv(tmp_path / "report/tasks.csv")}
    assert per_task["task 1"]["mean"] == "50.0" and per_task["task 1"]["std"] == "56.6"
    assert per_task["task 7"]["episodes"] == "20"  # summed over the two runs
    assert "| task 3 | 50.0 (20) |" in (tmp_path / "report/tasks.md").read_text()

    (aggregate,) = _csv(tmp_path / "report/aggregate.csv")
    values = np.array([counts, [10 - k for k in counts]]) / 10
    lowest_to_highest = np.sort(values.ravel())
    iqm = lowest_to_highest[4:12].mean()  # 16 scores: drop the 4 lowest and the 4 highest
    assert float(aggregate["iqm"]) == pytest.approx(100 * iqm, abs=0.05)
    assert float(aggregate["mean"]) == pytest.approx(100 * values.mean(), abs=0.05)
    assert (
        float(aggregate["iqm_ci95_low"])
        <= float(aggregate["iqm"])
        <= float(aggregate["iqm_ci95_high"])
    )
    assert aggregate["tasks"] == "8" and aggregate["runs"] == "2"


def test_bootstrap_intervals_are_reproducible_and_narrow_with_agreement():
    rng = np.random.default_rng(0)
    spread = rng.uniform(0, 1, size=(5, 20))
    agreeing = np.tile(spread[:1], (5, 1))  # every run scores every task the same
    np.random.seed(1)
    first = aggregate_scores({"a": spread, "b": agreeing}, reps=300)
    np.random.seed(2)  # whatever the caller's global NumPy stream: the same intervals
    again = aggregate_scores({"a": spread, "b": agreeing}, reps=300)
    assert first == again
    assert np.random.randint(1 << 30) == np.random.RandomState(2).randint(1 << 30)  # untouched
    low, high = first["b"].iqm_ci
    assert low == pytest.approx(high) == pytest.approx(first["b"].iqm)
    assert first["a"].iqm_ci[1] - first["a"].iqm_ci[0] > 0.01


def test_aggregates_compare_methods_on_the_tasks_they_share(tmp_path):
    root = tmp_path / "bench"
    for seed in (0, 1):  # real is scored on train, easy and hard; imaginary-easy on train, easy
        make_run(root, "bc", "real", None, seed, {"train": 0.2, "easy": 0.4, "hard": 1.0})
        make_run(root, "bc", "imaginary", "easy", seed, {"train": 0.6, "easy": 0.8, "hard": 0.0})
    write_report(root, tmp_path / "report", reps=100)
    rows = {r["data"]: r for r in _csv(tmp_path / "report/aggregate.csv")}
    assert rows["real"]["tasks"] == rows["real + imaginary"]["tasks"] == "2"
    assert rows["real"]["mean"] == "30.0"  # (20 + 40) / 2: its hard score is left out
    assert rows["real + imaginary"]["mean"] == "70.0"


def test_figures_are_written_as_png_and_svg(bench, tmp_path):
    written = write_report(bench, tmp_path / "report", reps=100)
    for stem in ("figure5_imaginary", "figure6_oracle", "aggregate"):
        png, svg = tmp_path / "report" / f"{stem}.png", tmp_path / "report" / f"{stem}.svg"
        assert png in written and svg in written
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
        assert b"<svg" in svg.read_bytes()[:2000] and svg.stat().st_size > 10_000
    assert "![figure6_oracle](figure6_oracle.png)" in (tmp_path / "report/results.md").read_text()
    write_report(bench, tmp_path / "again", reps=100)  # the same files again: diffs stay small
    for name in ("figure5_imaginary.svg", "figure6_oracle.png", "tasks.csv", "aggregate.csv"):
        assert (tmp_path / "again" / name).read_bytes() == (tmp_path / "report" / name).read_bytes()


def test_figure6_needs_oracle_runs(tmp_path):
    root = tmp_path / "bench"
    for seed in (0, 1):
        make_run(root, "bc", "real", None, seed, {"train": 0.5, "easy": 0.5})
        make_run(root, "bc", "imaginary", "easy", seed, {"train": 0.5, "easy": 0.6})
    written = write_report(root, tmp_path / "report", reps=100)
    names = {p.name for p in written}
    assert "figure5_imaginary.png" in names and "figure6_oracle.png" not in names


def test_bad_folders_are_refused_with_the_file_named(bench, tmp_path):
    with pytest.raises(ReportError, match="no such folder"):
        write_report(tmp_path / "nowhere")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ReportError, match="no benchmark runs"):
        write_report(tmp_path / "empty")
    results = bench / "runs" / "bc" / "real" / "seed1" / "results.json"
    results.write_text('{"levels": {"train": {"success": 0.5')  # cut short
    with pytest.raises(ReportError, match=f"{results}: not valid JSON"):
        write_report(bench)
    results.write_text(json.dumps({"levels": {"train": {"success": 1.7}}}))
    with pytest.raises(ReportError, match=r"levels.train.success must be in \[0, 1\]"):
        write_report(bench)
    results.unlink()
    with pytest.raises(ReportError, match=f"{results}: missing"):
        write_report(bench)


def test_report_through_the_cli_reports_errors_in_one_line(tmp_path, capsys):
    from imaginebench.cli import main

    assert main(["report", str(tmp_path / "nowhere")]) == 2
    assert capsys.readouterr().err.strip() == f"error: {tmp_path / 'nowhere'}: no such folder"


def test_runs_without_per_task_records_are_named(tmp_path):
    root = tmp_path / "bench"
    make_run(root, "bc", "real", None, 0, {"easy": 0.5})
    make_run(root, "bc", "real", None, 1, {"easy": 0.7}, tasks={"easy": []})  # an older file
    write_report(root, tmp_path / "report", reps=100)
    text = (tmp_path / "report/results.md").read_text()
    assert "Runs without per-task records (left out of the aggregate scores" in text
    assert "bc/real/seed1" in text and "bc/real/seed0" not in text
    (aggregate,) = _csv(tmp_path / "report/aggregate.csv")
    assert aggregate["runs"] == "1"


def test_seeds_of_a_full_cell_count_every_command_s_runs(bench, tmp_path):
    """Runs of two commands in one folder (here the newest named one seed): the header and the
    ``(n=k)`` marks count the seeds the folder holds, not the newest command's list."""
    (bench / "benchmark.yaml").write_text("spec: {seeds: [2]}\ncommand: [imaginebench]\n")
    write_report(bench, tmp_path / "report", reps=200)
    table = (tmp_path / "report/results.md").read_text()
    assert "over 3 seed(s)" in table
    assert "| DiscreteBC | real | 60.0 ± 10.0 [35.2, 84.8] |" in table  # 3 of 3: no mark
    assert "| DiscreteBC | real + oracle | 50.0 ± 0.0 [50.0, 50.0] (n=2)" in table


def test_the_header_names_every_command_that_ran_into_the_folder(bench, tmp_path):
    (bench / "benchmark.yaml").write_text(
        "command: [imaginebench, b]\ncommands: [[imaginebench, a], [imaginebench, b]]\n"
    )
    write_report(bench, tmp_path / "report", reps=100)
    text = (tmp_path / "report/results.md").read_text()
    assert "from the runs of `imaginebench a` and then `imaginebench b`." in text
