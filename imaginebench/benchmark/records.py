"""Finished-run records: a benchmark folder's results, small enough to keep in git, and back.

A grid's checkpoints and logs take gigabytes; what ``imaginebench report`` and the runner's
"finished" check need takes a few kilobytes per run: ``benchmark.yaml`` and each finished run's
``run.json``, ``done.json`` and ``results.json``. :func:`export_records` packs those into a
``.tar.gz`` with a checksum list; :func:`import_records` checks the archive whole (only those
files, checksums, valid JSON) before it writes anything, so a grid interrupted on one machine
continues on another, or after its folder was lost, with its finished runs skipped.
"""

from __future__ import annotations

import hashlib
import io
import json
import re
import tarfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from imaginebench.atomic import write_text_atomically
from imaginebench.benchmark.runs import (
    DONE_FILE,
    RESULTS_FILE,
    RUN_FILE,
    clear_run,
    read_json,
)

GRID_FILE = "benchmark.yaml"
CHECKSUMS = "records.json"
RUN_RECORD_FILES = (RUN_FILE, DONE_FILE, RESULTS_FILE)
FORMAT = 1
#: ``runs/<algorithm>/<data>/seed<n>/<file>`` or ``runs/reference/<policy>/<file>``.
#: Path parts may not start with a dot (no ``..``, no hidden files).
_PART = r"[A-Za-z0-9_-][A-Za-z0-9_.-]*"
_MEMBER = re.compile(rf"runs/{_PART}/{_PART}(?:/seed\d+)?/(?:run|done|results)\.json")
_LARGEST_MEMBER = 64 * 1024 * 1024


@dataclass
class ImportOutcome:
    """What :func:`import_records` did, per run name (``<algorithm>/<data>/seed<n>``)."""

    written: list[str] = field(default_factory=list)
    already_finished: list[str] = field(default_factory=list)
    replaced: list[str] = field(default_factory=list)


def grid_commands(record: dict[str, Any]) -> list[list[str]]:
    """Every command a grid record (``benchmark.yaml``) names, oldest first: its ``commands``,
    or, in a record from before they were kept, its one ``command``."""
    return list(record.get("commands") or [c for c in [record.get("command")] if c])


def finished_run_folders(runs_dir: Path) -> list[Path]:
    """Every run folder under ``runs_dir/runs`` with a completion marker and results."""
    found = []
    for done in sorted((Path(runs_dir) / "runs").rglob(DONE_FILE)):
        folder = done.parent
        if read_json(done) is not None and all((folder / f).is_file() for f in RUN_RECORD_FILES):
            found.append(folder)
    return found


def export_records(runs_dir: Path | str, archive: Path | str) -> list[str]:
    """Write the finished runs' records of ``runs_dir`` (a benchmark's ``out``) to ``archive``
    (``.tar.gz``); return the runs' names. Unfinished runs are left out."""
    runs_dir, archive = Path(runs_dir), Path(archive)
    folders = finished_run_folders(runs_dir)
    if not folders:
        raise ValueError(f"{runs_dir}: no finished run (runs/*/*/*/done.json) to export")
    files: dict[str, bytes] = {}
    if (runs_dir / GRID_FILE).is_file():
        files[GRID_FILE] = (runs_dir / GRID_FILE).read_bytes()
    for folder in folders:
        for name in RUN_RECORD_FILES:
            files[(folder / name).relative_to(runs_dir).as_posix()] = (folder / name).read_bytes()
    checksums = {path: hashlib.sha256(data).hexdigest() for path, data in files.items()}
    names = [folder.relative_to(runs_dir / "runs").as_posix() for folder in folders]
    index = {"format": FORMAT, "runs": names, "sha256": checksums}
    files[CHECKSUMS] = json.dumps(index, indent=1, sort_keys=True).encode()
    archive.parent.mkdir(parents=True, exist_ok=True)
    partial = archive.with_name(archive.name + ".partial")
    with tarfile.open(partial, "w:gz") as tar:
        for path in sorted(files):
            info = tarfile.TarInfo(path)
            info.size, info.mode = len(files[path]), 0o644
            tar.addfile(info, io.BytesIO(files[path]))
    partial.replace(archive)
    return names


def read_records(archive: Path | str) -> dict[str, bytes]:
    """The files of a records archive, checked: only a checksum list, ``benchmark.yaml`` and
    run records at safe relative paths, each matching its checksum, each run's JSON an object,
    every run complete. Raises ``ValueError`` naming the first problem."""
    archive = Path(archive)
    try:
        tar = tarfile.open(archive, "r:gz")
    except (OSError, tarfile.TarError) as err:
        raise ValueError(f"{archive}: not a records archive (.tar.gz): {err}") from err
    files: dict[str, bytes] = {}
    with tar:
        for member in tar:
            name = member.name
            if not member.isfile():
                raise ValueError(f"{archive}: {name!r} is not a regular file")
            if name not in (CHECKSUMS, GRID_FILE) and not _MEMBER.fullmatch(name):
                raise ValueError(f"{archive}: unexpected member {name!r}")
            if member.size > _LARGEST_MEMBER or name in files:
                raise ValueError(f"{archive}: {name!r} is too large or appears twice")
            files[name] = tar.extractfile(member).read()
    if CHECKSUMS not in files:
        raise ValueError(f"{archive}: no {CHECKSUMS} (not made by `imaginebench records export`)")
    try:
        index = json.loads(files.pop(CHECKSUMS))
        expected = dict(index["sha256"])
    except (ValueError, KeyError, TypeError) as err:
        raise ValueError(f"{archive}: unreadable {CHECKSUMS}: {err}") from err
    if set(expected) != set(files):
        missing, extra = set(expected) - set(files), set(files) - set(expected)
        raise ValueError(f"{archive}: files missing {sorted(missing)}, unlisted {sorted(extra)}")
    for name, data in files.items():
        if hashlib.sha256(data).hexdigest() != expected[name]:
            raise ValueError(f"{archive}: {name} does not match its checksum (corrupt)")
        if name.endswith(".json"):
            try:
                if not isinstance(json.loads(data), dict):
                    raise ValueError("not a JSON object")
            except ValueError as err:
                raise ValueError(f"{archive}: {name}: {err}") from err
    for run in _runs(files):
        if any(f"runs/{run}/{f}" not in files for f in RUN_RECORD_FILES):
            raise ValueError(f"{archive}: run {run} lacks one of {', '.join(RUN_RECORD_FILES)}")
    return files


def _runs(files: dict[str, bytes]) -> list[str]:
    return sorted({name[len("runs/") :].rsplit("/", 1)[0] for name in files if name != GRID_FILE})


def import_records(
    archive: Path | str, runs_dir: Path | str, replace: bool = False
) -> ImportOutcome:
    """Write the runs of ``archive`` into ``runs_dir`` so the runner counts them as finished.

    A run already finished there with the same settings hash is left alone. A run folder with
    other content (an interrupted attempt, other settings) is an error listing every such run,
    before anything is written, unless ``replace``: then that folder is emptied first.
    ``benchmark.yaml`` is written only where the folder has none."""
    files = read_records(archive)
    runs_dir = Path(runs_dir)
    outcome = ImportOutcome()
    plan: list[tuple[str, bool]] = []
    conflicts = []
    for run in _runs(files):
        folder = runs_dir / "runs" / run
        here = read_json(folder / DONE_FILE)
        theirs = json.loads(files[f"runs/{run}/{DONE_FILE}"])
        if here is not None and here.get("hash") == theirs.get("hash"):
            if (folder / RESULTS_FILE).is_file():
                outcome.already_finished.append(run)
                continue
        occupied = folder.is_dir() and any(folder.iterdir())
        if occupied and not replace:
            conflicts.append(run)
        plan.append((run, occupied))
    if conflicts:
        raise ValueError(
            f"{len(conflicts)} run folder(s) in {runs_dir} hold other files: "
            f"{', '.join(conflicts)}; pass --replace to empty them and import, or another folder"
        )
    for run, occupied in plan:
        folder = runs_dir / "runs" / run
        if occupied:
            clear_run(folder)
        folder.mkdir(parents=True, exist_ok=True)
        for name in (RUN_FILE, RESULTS_FILE, DONE_FILE):  # the completion marker last
            write_text_atomically(folder / name, files[f"runs/{run}/{name}"].decode())
        (outcome.replaced if occupied else outcome.written).append(run)
    if GRID_FILE in files and not (runs_dir / GRID_FILE).exists():
        write_text_atomically(runs_dir / GRID_FILE, files[GRID_FILE].decode())
    return outcome
