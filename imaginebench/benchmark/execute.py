"""Run a benchmark grid: plan every run (settings, hash, state), then run the unfinished ones in
``workers`` child processes, resuming interrupted runs from their last checkpoint, with a
progress bar over runs."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import time
from collections import deque
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from imaginebench.atomic import write_text_atomically
from imaginebench.benchmark.grid import Run
from imaginebench.benchmark.records import grid_commands
from imaginebench.benchmark.references import evaluation_settings, reference_job
from imaginebench.benchmark.runs import (
    DONE_FILE,
    LOG_FILE,
    PARENT_ENV,
    RESULTS_FILE,
    RUN_FILE,
    RunLock,
    RunState,
    clear_run,
    read_json,
    run_state,
)
from imaginebench.benchmark.settings import oracle_collect, run_settings
from imaginebench.benchmark.spec import BenchmarkSpec

log = logging.getLogger(__name__)

#: Seconds a run gets to stop after SIGTERM before it is killed.
STOP_GRACE_SECONDS = 30


@dataclass
class PlannedRun:
    """A run of this invocation: its grid cell, folder, settings hash, state, the child's
    job (``{"kind": "fit" | "reference", ...}``) and whether it was finished and is rerun on
    request (``--force``)."""

    run: Run
    directory: Path
    hash: str
    state: RunState
    job: dict[str, Any]
    forced: bool = False


@dataclass
class GridOutcome:
    """What an invocation did: runs skipped as finished, finished now, failed (with their log
    files), and held by another benchmark process."""

    skipped: list[str] = field(default_factory=list)
    finished: list[str] = field(default_factory=list)
    failed: dict[str, Path] = field(default_factory=dict)
    busy: list[str] = field(default_factory=list)


class Interrupted(Exception):
    """The benchmark process was asked to stop (SIGINT or SIGTERM)."""


def plan_runs(spec: BenchmarkSpec, runs: list[Run], force: bool = False) -> list[PlannedRun]:
    """Settings, hash and state of every run (errors in any run's settings surface here,
    before anything starts). ``force``: rerun finished runs too."""
    planned = []
    evaluation = None
    for run in runs:
        directory = run.directory(spec.out_dir)
        if run.is_reference:
            if evaluation is None:
                first = run_settings(spec, Run(spec.algorithms[0], "real", None, spec.seeds[0]))
                evaluation = evaluation_settings(first.config)
            job = reference_job(run.variant, spec.domain, evaluation)
            job["results"] = str((directory / RESULTS_FILE).resolve())
            settings_hash = job["hash"]
        else:
            settings = run_settings(spec, run)
            settings_hash = settings.hash
            oracles = [
                {
                    "domain": spec.domain,
                    "path": str(path),
                    "collect": asdict(oracle_collect(level, spec.oracle)),
                }
                for level, path in settings.oracles
            ]
            job = {"kind": "fit", "args": settings.args, "oracles": oracles}
        state = run_state(directory, settings_hash)
        forced = force and state is RunState.FINISHED
        if forced:
            state = RunState.START
        planned.append(PlannedRun(run, directory, settings_hash, state, job, forced))
    return planned


def placement_arguments(directory: Path, resume: bool) -> list[str]:
    """The ``fit`` arguments that put a run into its folder: logger files (``results.json``
    included) in the folder itself, checkpoints in ``checkpoints/``, no per-step bar; with
    ``resume``, continue from the newest ``last*.ckpt`` there."""
    folder = directory.resolve()
    args = [
        f"--trainer.logger.init_args.save_dir={folder}",
        "--trainer.logger.init_args.name=",
        "--trainer.logger.init_args.version=",
        f"--trainer.callbacks.init_args.dirpath={folder / 'checkpoints'}",
        "--trainer.enable_progress_bar=false",
    ]
    return args + (["--ckpt_path=last"] if resume else [])


def start_attempt(planned: PlannedRun, resume: bool, threads: int) -> subprocess.Popen:
    """Start one attempt of ``planned`` in a child process (a fresh start empties the folder
    first) writing into ``log.txt``; record the attempt (and the child's pid) in
    ``run.json``."""
    directory = planned.directory
    if not resume:
        clear_run(directory)
    directory.mkdir(parents=True, exist_ok=True)
    job = dict(planned.job)
    if job["kind"] == "fit":
        job["args"] = job["args"] + placement_arguments(directory, resume)
    record = read_json(directory / RUN_FILE) if resume else None
    attempts = (record or {}).get("attempts", [])
    attempts.append({"started": time.strftime("%Y-%m-%d %H:%M:%S"), "resume": resume})
    record = {"run": asdict(planned.run), "hash": planned.hash, "job": job, "attempts": attempts}
    write_text_atomically(directory / RUN_FILE, json.dumps(record, indent=2))
    env = {
        **os.environ,
        "OMP_NUM_THREADS": str(threads),
        "MKL_NUM_THREADS": str(threads),
        PARENT_ENV: str(os.getpid()),
    }
    with open(directory / LOG_FILE, "a") as log:
        kind = "resuming from the last checkpoint" if resume else "starting"
        log.write(f"=== attempt {len(attempts)}: {kind} ({attempts[-1]['started']}) ===\n")
        log.flush()
        command = [sys.executable, "-m", "imaginebench.benchmark.child", json.dumps(job)]
        # its own session: a Ctrl-C in the terminal reaches the benchmark, which stops it
        process = subprocess.Popen(
            command, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
    attempts[-1]["pid"] = process.pid
    write_text_atomically(directory / RUN_FILE, json.dumps(record, indent=2))
    return process


def end_attempt(planned: PlannedRun, seconds: float, exit_code: int) -> bool:
    """Record the attempt's time and exit code; if it succeeded and ``results.json`` is
    readable, write the completion marker. Whether the run is finished."""
    directory = planned.directory
    record = read_json(directory / RUN_FILE) or {}
    attempts = record.get("attempts") or [{}]
    attempts[-1].update(seconds=round(seconds, 1), exit_code=exit_code)
    write_text_atomically(directory / RUN_FILE, json.dumps(record, indent=2))
    results = read_json(directory / RESULTS_FILE)
    if exit_code != 0 or results is None or "levels" not in results:
        return False
    total = sum(a.get("seconds", 0.0) for a in attempts)
    marker = {
        "hash": planned.hash,
        "seconds": round(total, 1),
        "attempts": len(attempts),
        "finished": time.strftime("%Y-%m-%d %H:%M:%S"),
    }
    write_text_atomically(directory / DONE_FILE, json.dumps(marker, indent=2))
    return True


def finished_meanwhile(planned: PlannedRun) -> bool:
    """Whether ``planned``, unfinished when planned, is finished now (another benchmark process
    on the same folder ran it to the end meanwhile); checked under the run's lock, before a
    fresh start would empty its folder."""
    if planned.forced:
        return False
    return run_state(planned.directory, planned.hash) is RunState.FINISHED


def default_threads() -> int:
    """The cores this process may use."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def run_planned(
    planned: list[PlannedRun],
    out: Path,
    workers: int = 1,
    threads: int | None = None,
    progress: bool = True,
    log: Callable[[str], None] = print,
    on_finished: Callable[[str], None] | None = None,
) -> GridOutcome:
    """Run the unfinished runs of ``planned``, ``workers`` at a time, each with ``threads //
    workers`` torch threads (at least one; ``threads`` defaults to the usable cores);
    ``on_finished(name)`` is called as each run finishes.

    An interrupted run with a checkpoint resumes from it (if the resumed attempt fails, the run
    starts over once); any other unfinished run starts over in an emptied folder. A run another
    benchmark process holds is left to it. SIGINT or SIGTERM stops every running child and
    raises :class:`Interrupted`; rerunning the same command continues. A run that another
    process finished after it was planned here is skipped, unless it was forced."""
    from tqdm import tqdm

    if workers < 1:
        raise ValueError(f"--workers must be >= 1, got {workers}")
    per_run = max(1, (threads or default_threads()) // workers)
    outcome = GridOutcome(skipped=[p.run.name for p in planned if p.state is RunState.FINISHED])
    queue = deque(
        (p, p.state is RunState.RESUME) for p in planned if p.state is not RunState.FINISHED
    )
    resuming = sum(resume for _, resume in queue)
    log(
        f"{len(planned)} runs: {len(outcome.skipped)} finished (skipped), {resuming} to resume, "
        f"{len(queue) - resuming} to start; {workers} worker(s) x {per_run} thread(s)"
    )
    running: dict[str, tuple[PlannedRun, bool, subprocess.Popen, RunLock, float]] = {}
    bar = tqdm(total=len(queue), unit="run", desc="benchmark", disable=not progress, miniters=1)
    shown = ""
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}

    def stop(signum: int, frame: Any) -> None:
        raise Interrupted(signal.Signals(signum).name)

    for sig in previous:
        signal.signal(sig, stop)
    try:
        while queue or running:
            while queue and len(running) < workers:
                planned_run, resume = queue.popleft()
                lock = RunLock(out, planned_run.run.name)
                if not lock.acquire():
                    outcome.busy.append(planned_run.run.name)
                    bar.update(1)
                    continue
                if finished_meanwhile(planned_run):
                    lock.release()
                    outcome.skipped.append(planned_run.run.name)
                    log(f"{planned_run.run.name}: finished by another process meanwhile; skipped")
                    bar.update(1)
                    continue
                process = start_attempt(planned_run, resume, per_run)
                running[planned_run.run.name] = (planned_run, resume, process, lock, time.time())
            if ", ".join(running) != shown:  # redrawn on change only: log files stay short
                shown = ", ".join(running)
                bar.set_postfix_str(shown)
            time.sleep(0.5)
            for name, (planned_run, resume, process, lock, started) in list(running.items()):
                code = process.poll()
                if code is None:
                    continue
                del running[name]
                done = end_attempt(planned_run, time.time() - started, code)
                if not done and resume:  # a broken checkpoint, say: start over once
                    log(f"{name}: resuming failed (exit {code}); starting over")
                    lock.release()
                    queue.appendleft((planned_run, False))
                    continue
                lock.release()
                if done:
                    outcome.finished.append(name)
                    if on_finished is not None:
                        on_finished(name)
                else:
                    outcome.failed[name] = planned_run.directory / LOG_FILE
                    log(f"{name}: failed (exit {code}), see {planned_run.directory / LOG_FILE}")
                bar.update(1)
    except Interrupted as stopped:
        log(f"stopping ({stopped}): ending {len(running)} running run(s)")
        for name, (planned_run, _, process, lock, started) in running.items():
            _terminate(process)
            end_attempt(planned_run, time.time() - started, process.returncode)
            lock.release()
        raise
    finally:
        bar.close()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return outcome


def _terminate(process: subprocess.Popen) -> None:
    """SIGTERM the child's process group, then SIGKILL it if it is still there after
    :data:`STOP_GRACE_SECONDS`."""
    try:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(STOP_GRACE_SECONDS)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    except ProcessLookupError:
        process.wait()


def write_grid_record(spec: BenchmarkSpec, command: list[str]) -> Path:
    """``<out>/benchmark.yaml``: the grid and the command that ran it, and under ``commands``
    every distinct command that has run into the folder, oldest first (what ``report`` states
    in its header: a folder resumed or extended by other commands holds all their runs)."""
    import yaml

    out = spec.out_dir
    out.mkdir(parents=True, exist_ok=True)
    path = out / "benchmark.yaml"
    earlier: dict[str, Any] = {}
    if path.is_file():
        try:
            earlier = yaml.safe_load(path.read_text()) or {}
        except yaml.YAMLError:
            log.warning("%s: unreadable, its earlier commands are not kept", path)
    commands = grid_commands(earlier)
    if command not in commands:
        commands.append(command)
    record = {"command": command, "commands": commands, "spec": spec.to_dict()}
    write_text_atomically(path, yaml.safe_dump(record, sort_keys=False))
    return path
