"""Read a benchmark folder's finished runs (``runs/**/run.json`` with ``done.json`` and
``results.json``) into :class:`RunResult` records; anything unreadable is a
:class:`ReportError` naming the file."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


class ReportError(ValueError):
    """A benchmark folder the report cannot read: missing, empty, or a corrupt file."""


@dataclass(frozen=True)
class TaskScore:
    """One task's evaluation episodes and successes in one run."""

    name: str
    episodes: int
    successes: int

    @property
    def success(self) -> float:
        return self.successes / self.episodes


@dataclass(frozen=True)
class RunResult:
    """A finished run: its grid cell (``algorithm`` is ``"reference"`` for the random policy and
    the expert, ``variant`` then names which), its final success per level and per task, and
    what it cost."""

    algorithm: str
    variant: str
    level: str | None
    seed: int
    label: str
    success: dict[str, float]
    tasks: dict[str, dict[str, TaskScore]]
    episodes_per_level: int
    global_step: int
    seconds: float | None
    path: Path
    extra: dict[str, Any] = field(default_factory=dict, compare=False)

    @property
    def data(self) -> str:
        return self.variant if self.level is None else f"{self.variant}-{self.level}"


@dataclass
class BenchmarkRuns:
    """Every finished run of a folder, the names of unfinished ones, and the grid record
    (``benchmark.yaml``: the spec and the command; empty if absent)."""

    runs: list[RunResult]
    unfinished: list[str]
    record: dict[str, Any]

    @property
    def references(self) -> dict[str, RunResult]:
        return {r.variant: r for r in self.runs if r.algorithm == "reference"}

    @property
    def algorithms(self) -> list[str]:
        """Algorithm names in the grid's order (then any others, sorted)."""
        found = {r.algorithm for r in self.runs if r.algorithm != "reference"}
        ordered = [a for a in self.record.get("spec", {}).get("algorithms", []) if a in found]
        return ordered + sorted(found - set(ordered))


def _read_json(path: Path, what: str) -> dict[str, Any]:
    if not path.is_file():
        raise ReportError(f"{path}: missing ({what})")
    try:
        value = json.loads(path.read_text())
    except ValueError as err:
        raise ReportError(f"{path}: not valid JSON ({what}): {err}") from err
    if not isinstance(value, dict):
        raise ReportError(f"{path}: expected a JSON object ({what})")
    return value


def _fraction(value: Any, path: Path, key: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
        raise ReportError(f"{path}: {key} must be a number, got {value!r}")
    if not 0.0 <= value <= 1.0:
        raise ReportError(f"{path}: {key} must be in [0, 1], got {value!r}")
    return float(value)


def _parse_results(path: Path) -> tuple[dict[str, float], dict[str, dict[str, TaskScore]], dict]:
    results = _read_json(path, "the run's final scores")
    levels = results.get("levels")
    if not isinstance(levels, dict) or not levels:
        raise ReportError(f"{path}: no 'levels' with the scores per level")
    success, tasks = {}, {}
    for level, entry in levels.items():
        if not isinstance(entry, dict):
            raise ReportError(f"{path}: levels.{level} must be an object")
        success[level] = _fraction(entry.get("success"), path, f"levels.{level}.success")
        per_task = {}
        for i, task in enumerate(entry.get("tasks") or []):
            try:
                score = TaskScore(str(task["name"]), int(task["episodes"]), int(task["successes"]))
                spec = str(task["task"])
            except (KeyError, TypeError, ValueError) as err:
                raise ReportError(f"{path}: levels.{level}.tasks[{i}] is malformed: {err}") from err
            if not 0 <= score.successes <= score.episodes or score.episodes < 1:
                raise ReportError(f"{path}: levels.{level}.tasks[{i}] counts are inconsistent")
            per_task[spec] = score
        tasks[level] = per_task
    return success, tasks, results


def load_runs(runs_dir: str | Path) -> BenchmarkRuns:
    """The runs of the benchmark folder ``runs_dir`` (``imaginebench benchmark``'s ``out``).

    Runs without their completion marker (``done.json``) are unfinished and listed; a
    finished run whose ``results.json`` is missing or corrupt is an error."""
    import yaml

    root = Path(runs_dir)
    if not root.is_dir():
        raise ReportError(f"{root}: no such folder")
    records = sorted((root / "runs").rglob("run.json"))
    if not records:
        raise ReportError(
            f"{root}: no benchmark runs in it (no runs/**/run.json); give the folder "
            "`imaginebench benchmark` wrote (its out)"
        )
    runs, unfinished = [], []
    for record_path in records:
        directory = record_path.parent
        record = _read_json(record_path, "the run's record")
        cell = record.get("run")
        if not isinstance(cell, dict) or not {"algorithm", "variant", "level", "seed"} <= set(cell):
            raise ReportError(f"{record_path}: no 'run' with algorithm, variant, level, seed")
        name = str(directory.relative_to(root / "runs"))
        if not (directory / "done.json").exists():
            unfinished.append(name)
            continue
        done = _read_json(directory / "done.json", "the run's completion marker")
        success, tasks, results = _parse_results(directory / "results.json")
        runs.append(
            RunResult(
                algorithm=str(cell["algorithm"]),
                variant=str(cell["variant"]),
                level=cell["level"],
                seed=int(cell["seed"]),
                label=str(results.get("algorithm", cell["algorithm"])),
                success=success,
                tasks=tasks,
                episodes_per_level=int(results.get("episodes_per_level", 0)),
                global_step=int(results.get("global_step", 0)),
                seconds=done.get("seconds"),
                path=directory,
                extra={k: results.get(k) for k in ("data", "data_used", "seed")},
            )
        )
    grid = root / "benchmark.yaml"
    record = {}
    if grid.is_file():
        try:
            record = yaml.safe_load(grid.read_text()) or {}
        except yaml.YAMLError as err:
            raise ReportError(f"{grid}: not valid YAML: {err}") from err
    return BenchmarkRuns(runs, unfinished, record)
