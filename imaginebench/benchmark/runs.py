"""A run's folder: what is in it, and whether the run is finished, can resume or starts over.

``<out>/runs/<algorithm>/<data>/seed<seed>/`` holds ``run.json`` (what the run is: its grid
cell, settings hash and ``fit`` arguments, written when an attempt starts), ``log.txt`` (every
attempt's output), the logger's files (``results.json``, TensorBoard events, ``config.yaml``),
``checkpoints/`` and, once the run has finished and its results are read back, ``done.json``
(the completion marker: hash, seconds).
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
from enum import Enum
from pathlib import Path
from typing import Any

RUN_FILE = "run.json"
DONE_FILE = "done.json"
RESULTS_FILE = "results.json"
LOG_FILE = "log.txt"
CHECKPOINTS = "checkpoints"
#: Environment variable with the pid of the benchmark process that started a run's child
#: process (:mod:`imaginebench.benchmark.child`, never imported by the package itself).
PARENT_ENV = "IMAGINEBENCH_BENCHMARK_PARENT"


class RunState(str, Enum):
    """What to do with a run of the grid."""

    FINISHED = "finished"  # done.json with this hash and a results.json: skipped
    RESUME = "resume"  # started with this hash, interrupted after a checkpoint
    START = "start"  # never started, interrupted before a checkpoint, or other settings


def read_json(path: Path) -> dict[str, Any] | None:
    """The JSON object in ``path``; ``None`` if it is missing, unreadable or not an object."""
    try:
        value = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def last_checkpoint(directory: Path) -> Path | None:
    """The newest ``last*.ckpt`` in the run's ``checkpoints/`` (what ``--ckpt_path last``
    resumes from), or ``None``."""
    found = sorted((directory / CHECKPOINTS).glob("last*.ckpt"), key=lambda p: p.stat().st_mtime)
    return found[-1] if found else None


def run_state(directory: Path, settings_hash: str) -> RunState:
    """:class:`RunState` of the run in ``directory`` whose settings hash to ``settings_hash``.

    A completion marker or a started run with another hash (a changed setting or data file)
    does not count: that run starts over."""
    done = read_json(directory / DONE_FILE)
    finished = done is not None and done.get("hash") == settings_hash
    if finished and (directory / RESULTS_FILE).is_file():
        return RunState.FINISHED
    started = read_json(directory / RUN_FILE)
    interrupted = started is not None and started.get("hash") == settings_hash and done is None
    if interrupted and last_checkpoint(directory) is not None:
        return RunState.RESUME
    return RunState.START


def clear_run(directory: Path) -> None:
    """Empty a run's folder before it starts over (a stale or partial run's files)."""
    if directory.is_dir():
        for entry in directory.iterdir():
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry)
            else:
                entry.unlink()


class RunLock:
    """An exclusive, non-blocking ``flock`` on a run (``<out>/.locks/<run>.lock``), held while
    an attempt runs, so that two benchmark processes (overlapping shards, a second
    invocation) never run the same run at once. Released when the process ends, however it
    ends."""

    def __init__(self, out: Path, name: str) -> None:
        self.path = Path(out) / ".locks" / (name.replace("/", "__") + ".lock")
        self._fd: int | None = None

    def acquire(self) -> bool:
        """Take the lock; ``False`` if another process holds it."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        self._fd = fd
        return True

    def release(self) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None
