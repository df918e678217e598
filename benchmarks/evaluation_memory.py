"""Peak memory of a run's evaluations: the training-time one, then the final score, in one process
(regenerates the Meta-World figures in docs/metaworld.md).

    python benchmarks/evaluation_memory.py CHECKPOINT [--domain metaworld] [--keep-extra]

Loads an offline RL checkpoint, evaluates it with ``SuccessRateEvaluation``'s settings of the
Meta-World configs (20 episodes per level, then 100) and prints the success per level and the
process's peak resident memory after each. ``--keep-extra`` keeps every level's extra
simulators alive, as the evaluation did before 2026-12-02 (for the comparison).
"""

from __future__ import annotations

import argparse
import importlib
import resource
import time
from types import SimpleNamespace

import torch

from imaginebench.callbacks import SuccessRateEvaluation


def peak_mb() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("checkpoint")
    parser.add_argument("--domain", default="metaworld")
    parser.add_argument("--module", default="imaginebench.modules.offline.bc.BC")
    parser.add_argument("--episodes", type=int, default=20, help="training-time, per level")
    parser.add_argument("--test-episodes", type=int, default=100, help="final, per level")
    parser.add_argument("--keep-extra", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(1)
    path, name = args.module.rsplit(".", 1)
    cls = getattr(importlib.import_module(path), name)
    module = cls.load_from_checkpoint(args.checkpoint, map_location="cpu").eval()
    callback = SuccessRateEvaluation(
        episodes_per_level=args.episodes, test_episodes_per_level=args.test_episodes
    )
    if args.keep_extra:
        callback._release_extra_envs = lambda envs: None  # type: ignore[method-assign]
    trainer = SimpleNamespace(datamodule=SimpleNamespace(domain=args.domain))
    start = time.perf_counter()
    for label, episodes in (("training-time", args.episodes), ("final", args.test_episodes)):
        results = callback.run(trainer, module, episodes)
        scores = ", ".join(f"{r.level} {100 * r.success:.0f}%" for r in results)
        print(f"{label} ({episodes} per level): {scores}; peak {peak_mb()} MB", flush=True)
    print(f"{time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
