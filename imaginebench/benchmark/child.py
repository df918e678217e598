"""One attempt of one benchmark run, in its own process:
``python -m imaginebench.benchmark.child JOB_JSON``.

``JOB_JSON`` is ``{"kind": "fit", "args": [...], "oracles": [{...}, ...]}`` (collect the
oracle files that are missing, then ``imaginebench fit`` with the arguments) or ``{"kind":
"reference", ..., "results": FILE}`` (:func:`~imaginebench.benchmark.references.
score_reference`). On Linux the process asks to be terminated when the benchmark process that
started it dies, so that an interrupted benchmark leaves no run behind.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path

from imaginebench.benchmark.runs import PARENT_ENV


def die_with_parent() -> None:
    """Ask the kernel for SIGTERM when the parent dies (Linux ``prctl``; elsewhere a no-op),
    and exit at once if it is already gone."""
    if sys.platform.startswith("linux"):
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        pr_set_pdeathsig = 1
        libc.prctl(pr_set_pdeathsig, signal.SIGTERM)
    parent = os.environ.get(PARENT_ENV)
    if parent is not None and os.getppid() != int(parent):
        sys.exit("benchmark process gone before the run started")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    die_with_parent()
    job = json.loads(argv[0])
    if job["kind"] == "reference":
        from imaginebench.benchmark.references import score_reference

        score_reference(job, Path(job["results"]))
        return 0
    if job.get("oracles"):
        from imaginebench.datamodules.sources import ensure_real_dataset

        for oracle in job["oracles"]:
            ensure_real_dataset(oracle["domain"], Path(oracle["path"]), oracle["collect"])
    from imaginebench.cli import main as cli

    sys.argv = [sys.argv[0], "fit", *job["args"]]  # what LightningCLI reads
    return cli()


if __name__ == "__main__":
    sys.exit(main())
