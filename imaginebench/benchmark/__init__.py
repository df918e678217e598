"""The benchmark runner behind ``imaginebench benchmark -c configs/benchmark/<domain>.yaml``: a
grid of algorithms x data variants x seeds, each run a normal ``fit`` with its own folder,
resumable, parallel and shardable; ``imaginebench report`` (:mod:`imaginebench.report`) turns
the folder into tables and figures.

* :mod:`.spec`: the grid's description (:class:`BenchmarkSpec`, from YAML).
* :mod:`.grid`: its runs (:class:`Run`), their folders, shards.
* :mod:`.settings`: a run's ``fit`` arguments, resolved config and hash.
* :mod:`.runs`: a run folder's files and state (finished, resume, start).
* :mod:`.execute`: the worker loop; :mod:`.child`: one attempt in its own process.
* :mod:`.references`: the random policy and the expert scored beside the algorithms.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from imaginebench.benchmark.execute import GridOutcome, plan_runs, run_planned, write_grid_record
from imaginebench.benchmark.grid import Run, expand_grid, parse_shard, shard
from imaginebench.benchmark.records import export_records
from imaginebench.benchmark.spec import BenchmarkSpec, load_spec


def run_benchmark(
    spec: BenchmarkSpec,
    shard_of: tuple[int, int] = (0, 1),
    workers: int = 1,
    threads: int | None = None,
    force: bool = False,
    dry_run: bool = False,
    command: list[str] | None = None,
    progress: bool = True,
    log: Callable[[str], None] = print,
    records: Path | str | None = None,
) -> GridOutcome:
    """Run shard ``shard_of = (i, n)`` of ``spec``'s grid (:func:`run_planned`); ``dry_run``:
    only list its runs and their state. ``command`` is recorded in ``benchmark.yaml``.
    ``records``: an archive rewritten with every finished run's records of the folder
    (:func:`~imaginebench.benchmark.records.export_records`) each time a run finishes."""
    runs = shard(expand_grid(spec), *shard_of)
    log(f"resolving the settings of {len(runs)} runs (shard {shard_of[0]}/{shard_of[1]})")
    planned = plan_runs(spec, runs, force)
    if dry_run:
        for p in planned:
            log(f"{p.state.value:9} {p.run.name}  ({p.hash})")
        return GridOutcome(skipped=[p.run.name for p in planned if p.state.value == "finished"])
    write_grid_record(spec, command or [])
    on_finished = None
    if records is not None:

        def on_finished(name: str) -> None:
            export_records(spec.out_dir, records)

    return run_planned(planned, spec.out_dir, workers, threads, progress, log, on_finished)


__all__ = [
    "BenchmarkSpec",
    "GridOutcome",
    "Run",
    "expand_grid",
    "load_spec",
    "parse_shard",
    "plan_runs",
    "run_benchmark",
    "run_planned",
    "shard",
]
