"""The throughput timing harness: interleaved repeats of every algorithm and contender, the
cores other processes kept busy during each run, and the medians and paired ratios reported."""

from __future__ import annotations

import contextlib
import functools
import gc
import logging
import os
import platform
import statistics
import time
import warnings
from pathlib import Path
from typing import Any

from throughput_bare import run_bare
from throughput_d3rlpy import run_d3rlpy
from throughput_data import Data, Hyper
from throughput_ours import run_ours
from throughput_settings import DISCRETE

CONTENDERS = ("ours", "ours-k1", "bare", "d3rlpy")
RUNNERS = {
    "ours": run_ours,
    "ours-k1": functools.partial(run_ours, k=1),
    "bare": run_bare,
    "d3rlpy": run_d3rlpy,
}
Results = dict[tuple[str, str], list[dict[str, Any]]]  # (algorithm, contender) -> runs


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def busy_cpu_seconds() -> float | None:
    """CPU seconds the whole machine has spent busy since boot (``/proc/stat``; None elsewhere)."""
    try:
        ticks = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
    except (OSError, ValueError):
        return None
    idle = ticks[3] + ticks[4]  # idle + iowait
    return (sum(ticks) - idle) / os.sysconf("SC_CLK_TCK")


def quiet_libraries() -> None:
    """Silence Lightning's banners/tips and d3rlpy's structlog info lines (warnings stay)."""
    import lightning  # noqa: F401  (creates its loggers)

    for name in list(logging.root.manager.loggerDict):
        if name.startswith(("lightning", "pytorch_lightning")):
            logging.getLogger(name).setLevel(logging.ERROR)
    warnings.filterwarnings("ignore", message=".*does not have many workers.*")
    warnings.filterwarnings("ignore", message=".*isinstance\\(treespec, LeafSpec\\).*")
    warnings.filterwarnings("ignore", message=".*validation_step.*val_dataloader.*")
    with contextlib.suppress(ImportError):
        import structlog

        structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))


def warn_if_busy(load: float, cores: int, threads: int) -> None:
    """Print a warning when the load average says other processes use the cores."""
    if load <= 0.5 * cores:
        return
    print(
        f"# warning: 1-minute load average {load:.1f} on {cores} cores (it lags a "
        f"minute behind): if other processes are running, wall-clock rates are unreliable"
        + (
            f", and {threads} torch threads sharing busy cores can make every step orders of "
            f"magnitude slower; measure on an idle machine (or with --threads 1 and read "
            f"the CPU-time rates)"
            if threads > 1
            else "; read the CPU-time rates"
        )
        + ". The report gives the cores other processes used during every run.",
        flush=True,
    )


def run_all(
    algorithms: list[str],
    contenders: list[str],
    views: dict[bool, Data],
    hp: Hyper,
    warmup: int,
    steps: int,
    repeats: int,
    seed: int,
) -> Results:
    """Repeat ``r`` runs every algorithm and contender once (the contender order rotated by
    ``r``, seed ``seed + r``), printing one line per run."""
    results: Results = {}
    for r in range(repeats):
        order = contenders[r % len(contenders) :] + contenders[: r % len(contenders)]
        for algo in algorithms:
            for who in order:
                gc.collect()
                busy0, own0, wall0 = busy_cpu_seconds(), time.process_time(), time.perf_counter()
                res = RUNNERS[who](algo, views[algo in DISCRETE], hp, warmup, steps, seed + r)
                if res is None:  # d3rlpy has no such algorithm
                    continue
                busy1, own1, wall1 = busy_cpu_seconds(), time.process_time(), time.perf_counter()
                res["rate"] = steps / res["seconds"]
                res["cpu_rate"] = steps / res["cpu_seconds"]
                # cores kept busy by other processes during this run (setup included)
                res["others"] = (
                    None
                    if busy0 is None or busy1 is None
                    else max(0.0, (busy1 - busy0) - (own1 - own0)) / (wall1 - wall0)
                )
                results.setdefault((algo, who), []).append(res)
                extra = ""
                if "update_seconds" in res:
                    extra = (
                        f"; sampling {1e3 * res['sample_seconds'] / steps:.2f} ms/step, "
                        f"update {1e3 * res['update_seconds'] / steps:.2f} ms/step"
                    )
                if res["others"] is not None:
                    extra += f"; other processes used {res['others']:.2f} cores"
                print(
                    f"# repeat {r + 1}/{repeats} {algo:11s} {who:7s} "
                    f"{res['rate']:8.1f} upd/s (CPU time: {res['cpu_rate']:.1f}){extra}",
                    flush=True,
                )
    return results


def median(results: Results, steps: int, algo: str, who: str, key: str = "rate") -> float | None:
    """Median rate over repeats (``key`` a rate, or a seconds key turned into a rate)."""
    runs = results.get((algo, who))
    if not runs:
        return None
    if key in ("rate", "cpu_rate"):
        return statistics.median(x[key] for x in runs)
    return statistics.median(steps / x[key] for x in runs)


def paired(results: Results, algo: str, a: str, b: str, key: str) -> str:
    """Median over repeats of the ratio within each repeat (the two runs are minutes
    apart, so drifts of the machine's speed between repeats cancel)."""
    runs_a, runs_b = results.get((algo, a)), results.get((algo, b))
    if not runs_a or not runs_b:
        return "n/a"
    ratios = [x[key] / y[key] for x, y in zip(runs_a, runs_b)]
    return f"{statistics.median(ratios):.2f}x"
