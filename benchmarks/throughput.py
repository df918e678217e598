"""Training throughput: gradient updates per second of every offline RL algorithm (the real
Lightning path) against a bare PyTorch loop and d3rlpy 2.8.1, on the same data, networks and
hyperparameters, measured in one process. Prints a markdown table and writes
docs/results/throughput.md.

    python benchmarks/throughput.py                            # 2000 steps, 200 warm-up, 3 repeats
    python benchmarks/throughput.py --steps 300 --repeats 1    # quick check
    python benchmarks/throughput.py --algorithms TD3BC,IQL --contenders ours,bare --out ''

Measure on an otherwise idle machine: torch's intra-op threads slow down by orders of magnitude
when other processes occupy the cores. The report records the cores other processes used during
every run, and also gives rates from the process CPU time (robust to that with ``--threads 1``).

Data: CLEVR-Robot expert episodes (collected once, cached in the temp dir). Discrete algorithms
train on them as they are (40 actions); continuous ones on the same transitions with each push
replaced by its 2-d direction vector in ``[-1, 1]^2`` (CLEVR has no continuous action space; the
throughput depends on the shapes only). Every network is our backbone: state (10) ||
Linear(384->64) of the instruction embedding (-> || action for critics) -> MLP 256, 256 -> head.
Batches of 256 transitions drawn uniformly.

* ``ours``: ``lightning.Trainer(max_steps=W+N)`` fitting the module; a callback times the N steps
  after W warm-up steps (batch sampling, Lightning's loop, update). Discrete algorithms use
  ``RealImaginaryDataModule(ratio=0)``; continuous ones its environment-free core,
  ``RolloutDataModule(ratio=0)``, over the continuous transitions (same buffer, stream and
  stacking; ``RealImaginaryDataModule`` checks the actions against the discrete CLEVR
  environment).
  ``ours`` uses the data module's default of 8 updates per Lightning step
  (``updates_per_batch``); ``ours-k1`` hands over one batch per step.
* ``bare``: a plain loop over the same in-memory tensors with the same network classes and
  hyperparameters and the losses written out in the usual single-file style (one optimizer per
  network, the critic stepped before the actor as the papers' code does), ``Adam(foreach=True)``.
* ``d3rlpy``: the corresponding d3rlpy config (where d3rlpy has one: not DiscreteIQL or COMBO)
  with an encoder factory that builds our ``StateInstructionEncoder`` on the observation
  state || embedding (states pre-normalised). Each step is ``dataset.sample_transition_batch(256)``
  + ``algo.update(batch)``, the body of d3rlpy's ``fit`` loop without logger and progress bar;
  sampling and update are timed separately.

Runs are interleaved (repeat r runs every algorithm and contender once, the contender order rotated
by r) and the median over repeats is reported; a ratio column is the median over repeats of
the ratio of the two contenders' runs in the same repeat (robust to the machine's speed drifting
between repeats).

d3rlpy 2.8.1 pins gymnasium==1.0.0, which conflicts with our gymnasium==1.4.0, so it is installed
without its dependencies (it runs fine with gymnasium 1.4):

    pip install structlog==26.1.0 colorama==0.4.6 dataclasses-json==0.6.7 gym==0.26.2
    pip install --no-deps d3rlpy==2.8.1

(the first line is ``pip install -e '.[benchmark]'``).

This file is the command line; the pieces live beside it: ``throughput_data.py`` (the data),
``throughput_settings.py`` (the hyperparameters, read from the shipped configs),
``throughput_ours.py``, ``throughput_bare.py`` and ``throughput_d3rlpy.py`` (the contenders),
``throughput_harness.py`` (interleaved timed runs) and ``throughput_report.py`` (the tables).
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
import tempfile
from pathlib import Path

import torch
from throughput_d3rlpy import import_d3rlpy
from throughput_data import Hyper, continuous_view, load_data
from throughput_harness import CONTENDERS, quiet_libraries, run_all, warn_if_busy
from throughput_report import rate_table, write_report
from throughput_settings import ALGORITHMS


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--steps", type=int, default=2000, help="timed updates per run")
    parser.add_argument(
        "--warmup", type=int, default=200, help="untimed updates before timing (>= 1)"
    )
    parser.add_argument(
        "--repeats", type=int, default=3, help="interleaved repeats (median reported)"
    )
    parser.add_argument(
        "--threads", type=int, default=None, help="torch.set_num_threads (default: torch's default)"
    )
    parser.add_argument("--episodes", type=int, default=300, help="CLEVR train episodes collected")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--algorithms",
        default=",".join(ALGORITHMS),
        help="comma-separated subset of " + ",".join(ALGORITHMS),
    )
    parser.add_argument(
        "--contenders",
        default=",".join(CONTENDERS),
        help="comma-separated subset of " + ",".join(CONTENDERS),
    )
    parser.add_argument(
        "--cache-dir",
        default=str(Path(tempfile.gettempdir()) / "imaginebench_throughput"),
        help="where the collected dataset is cached",
    )
    parser.add_argument("--out", default="docs/results/throughput.md", help="'' to skip writing")
    args = parser.parse_args()
    if args.steps < 1 or args.warmup < 1 or args.repeats < 1:
        parser.error("--steps, --warmup and --repeats must be >= 1")
    algorithms = [a for a in args.algorithms.split(",") if a]
    contenders = [c for c in args.contenders.split(",") if c]
    for a in algorithms:
        if a not in ALGORITHMS:
            parser.error(f"unknown algorithm {a!r}; choose from {ALGORITHMS}")
    for c in contenders:
        if c not in CONTENDERS:
            parser.error(f"unknown contender {c!r}; choose from {CONTENDERS}")

    command = shlex.join(["python", "benchmarks/throughput.py", *sys.argv[1:]])
    load_start = os.getloadavg()  # before this process does any work
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    d3rlpy_version = None
    if "d3rlpy" in contenders:
        try:
            d3rlpy_version = import_d3rlpy().__version__
        except ImportError:
            sys.exit(
                "d3rlpy is not installed; see the install lines in this script's docstring "
                "or pass --contenders ours,bare"
            )
    quiet_libraries()
    threads = torch.get_num_threads()
    warn_if_busy(load_start[0], os.cpu_count() or 1, threads)
    hp = Hyper()
    cache_dir = Path(args.cache_dir)
    cache_dir.mkdir(parents=True, exist_ok=True)
    discrete_data = load_data(args.episodes, args.seed, cache_dir)
    views = {True: discrete_data, False: continuous_view(discrete_data)}
    data = discrete_data
    print(
        f"# {args.episodes} episodes, {data.transitions} transitions, "
        f"{len(data.instructions)} instructions; torch {torch.__version__} with "
        f"{threads} threads; steps {args.steps}, warm-up {args.warmup}, "
        f"repeats {args.repeats}, batch {hp.batch_size}",
        flush=True,
    )

    results = run_all(
        algorithms, contenders, views, hp, args.warmup, args.steps, args.repeats, args.seed
    )
    print("\n".join(rate_table(results, algorithms, args.steps, "rate")))
    if args.out:
        write_report(
            args, command, results, algorithms, contenders, data, hp, load_start, d3rlpy_version
        )


if __name__ == "__main__":
    main()
