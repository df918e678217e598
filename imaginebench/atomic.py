"""Atomic file writes: a reader sees the old file or the complete new one, never a partial one."""

from __future__ import annotations

import fcntl
import os
import re
import secrets
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

#: ``.<name>.<pid>.<8 hex>.tmp``: the temporary files of :func:`atomic_path`.
_TMP_NAME = re.compile(r"^\..+\.(\d+)\.[0-9a-f]{8}\.tmp$")
#: Leftovers younger than this are kept even if their pid is dead here: on a shared file
#: system the pid may belong to a writer on another machine.
_STALE_AFTER_SECONDS = 600


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, another user's
        return True
    return True


def remove_stale_temporaries(directory: str | os.PathLike[str]) -> list[Path]:
    """Delete the temporary files that interrupted :func:`atomic_path` writes left in
    ``directory`` (their process is gone and they are over ten minutes old); return them."""
    removed = []
    now = time.time()
    for tmp in Path(directory).glob(".*.tmp"):
        match = _TMP_NAME.match(tmp.name)
        try:
            stale = match and not _pid_alive(int(match.group(1)))
            if stale and now - tmp.stat().st_mtime > _STALE_AFTER_SECONDS:
                tmp.unlink()
                removed.append(tmp)
        except OSError:  # vanished meanwhile, or not ours to delete
            continue
    return removed


@contextmanager
def atomic_path(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a hidden temporary sibling of ``path`` to write; when the block succeeds it is
    fsynced and renamed onto ``path`` (and the directory fsynced, so the rename survives a
    crash), when it fails it is removed and ``path`` is untouched.  Leftovers of writes
    killed before they could clean up are removed first (:func:`remove_stale_temporaries`)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temporaries(path.parent)
    tmp = path.parent / f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
    try:
        yield tmp
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _fsync_directory(path.parent)


@contextmanager
def file_lock(path: str | os.PathLike[str]) -> Iterator[None]:
    """Hold an exclusive lock on ``path`` (created if missing, then left in place) for the
    block; another process or thread asking for it waits.  An advisory ``flock``: it works
    between processes of one machine, not across machines sharing a network file system."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _fsync_directory(directory: Path) -> None:
    """Best effort: some file systems cannot open or fsync a directory."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_text_atomically(path: str | os.PathLike[str], text: str) -> None:
    """``Path(path).write_text(text)``, atomically."""
    with atomic_path(path) as tmp:
        tmp.write_text(text)


def check_output_path(path: str | os.PathLike[str], overwrite: bool) -> Path:
    """Fail before any work is done if a command could not write its output ``path``: it is a
    directory, it exists and ``overwrite`` (the ``--overwrite`` flag) is off, or its folder
    cannot hold new files (created if missing, then probed with a temporary file)."""
    path = Path(path).expanduser()
    if path.is_dir():
        raise IsADirectoryError(f"{path}: is a directory; give a file path")
    if path.exists() and not overwrite:
        raise FileExistsError(f"{path}: exists; pass --overwrite to replace it")
    if path.parent.exists() and not path.parent.is_dir():
        raise NotADirectoryError(f"{path}: cannot write there, {path.parent} is not a directory")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tempfile.TemporaryFile(dir=path.parent).close()
    except OSError as err:
        raise PermissionError(f"{path}: cannot write to {path.parent} ({err.strerror})") from None
    return path
