"""Bytes per transition of the in-memory buffers and the cost of sampling a batch
(regenerates the figures in docs/training.md).

    python benchmarks/memory.py --episodes 1000 --paraphrases 20

Collects (or reuses from the cache) the same real data as configs/cql_clevr.yaml and reports the
buffer size: states once per step, action, reward, done, instruction id and source per transition.
"""

from __future__ import annotations

import argparse
import time

from imaginebench.datamodules import CollectConfig, RealImaginaryDataModule


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--episodes", type=int, default=1000)
    parser.add_argument("--paraphrases", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--batches", type=int, default=2000, help="batches to time")
    args = parser.parse_args()
    dm = RealImaginaryDataModule(
        collect=CollectConfig(episodes=args.episodes, seed=args.seed, paraphrases=args.paraphrases)
    )
    dm.setup()
    assert dm.real is not None
    print(f"transitions: {len(dm.real)}")
    print(f"states: {tuple(dm.real.states.shape)} {dm.real.states.dtype}")
    for key, value in dm.real.data.items():
        print(f"{key}: {value.dtype}, {value.element_size() * value[0].numel()} bytes each")
    print(f"bytes per transition: {dm.bytes_per_transition:.1f}")
    stream = iter(dm.batches())
    for _ in range(100):  # warm-up
        next(stream)
    start = time.perf_counter()
    for _ in range(args.batches):
        next(stream)
    per_batch = (time.perf_counter() - start) / args.batches
    print(
        f"sampling: {1e6 * per_batch:.0f} µs per batch of {dm.batch_size} ({args.batches} batches)"
    )


if __name__ == "__main__":
    main()
