"""Batch sampling: our in-memory buffers against torchrl's ``TensorDictReplayBuffer``.

    pip install -e '.[benchmark]'                       # torchrl (tensordict is a core dependency)
    python benchmarks/replay_buffer.py                  # sampling only, about a minute
    python benchmarks/replay_buffer.py --step-time 200  # plus DiscreteBC and CQL step times

Every contender draws the same training batches: half of each batch from an imaginary pool,
the rest from a real one, from a generator reseeded per step from ``(seed, step)`` (what makes a
resumed run see the batches of an uninterrupted one), returned as one ``TensorDict`` with
``state``, ``next_state``, ``action``, ``reward``, ``done``, ``instruction_id`` and ``source``.

* ``ours``: :class:`~imaginebench.datamodules.stream.MixedBatches` over two
  :class:`~imaginebench.datamodules.buffer.TransitionBuffer` s (each state stored once, a
  transition's next state the row after it), ``updates_per_batch`` batches gathered in one pass.
* ``torchrl``: one ``TensorDictReplayBuffer`` per pool over a ``TensorStorage`` of the same
  compact transition tensors (no copy), a ``RandomSampler`` drawing from the shared reseeded
  generator, then the two state gathers (``states[i]``, ``states[i + 1]``) and the concatenation.
* ``torchrl-flat``: the same buffers over a storage that also holds ``state`` and ``next_state``
  per transition (torchrl's usual layout, twice the state memory), so the sample is the batch.

Synthetic pools of the training data's shapes: CLEVR (10-d states, 40 discrete actions, episodes
of 10 steps) and HalfCheetah (18-d states, 6-d actions, episodes of 1000 steps). Times are
process CPU time per training update (one thread), the median over ``--repeats``.
``--step-time N`` also fits DiscreteBC and CQL for ``N`` timed updates with the throughput
benchmark's ``ours`` contender and relates the sampling cost to a whole update.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from tensordict import TensorDict

from imaginebench.datamodules.buffer import TransitionBuffer
from imaginebench.datamodules.stream import MixedBatches

DOMAINS = {  # transitions per pool, episode length, state size, action shape (() = discrete)
    "clevr": (200_000, 10, 10, ()),
    "halfcheetah": (500_000, 1000, 18, (6,)),
}


def synthetic_buffer(domain: str, source: int, seed: int) -> TransitionBuffer:
    """A pool of random transitions laid out as ``TransitionBuffer.from_dataset`` packs data."""
    n, length, state_dim, shape = DOMAINS[domain]
    g = torch.Generator().manual_seed(seed)
    episodes = n // length
    states = torch.randn(n + episodes, state_dim, generator=g)
    step = torch.arange(n, dtype=torch.int64)
    state_index = (step + step // length).to(torch.int32)  # each episode keeps one extra state
    if shape:
        action = torch.rand(n, *shape, generator=g) * 2 - 1
    else:
        action = torch.randint(40, (n,), generator=g).to(torch.uint8)
    data = TensorDict(
        {
            "state_index": state_index,
            "action": action,
            "reward": torch.randn(n, generator=g),
            "done": (step % length) == length - 1,
            "instruction_id": torch.randint(1000, (n,), generator=g, dtype=torch.int32),
            "source": torch.full((n,), source, dtype=torch.uint8),
        },
        batch_size=[n],
    )
    return TransitionBuffer(states, data)


class TorchRLBatches:
    """The stream of :class:`MixedBatches` drawn through torchrl replay buffers."""

    def __init__(
        self,
        real: TransitionBuffer,
        imaginary: TransitionBuffer,
        n_real: int,
        n_imaginary: int,
        seed: int,
        flat: bool,
    ) -> None:
        from torchrl.data import RandomSampler, TensorDictReplayBuffer, TensorStorage

        self.seed, self.flat = seed, flat
        self.generator = torch.Generator()
        self.pools = []
        for buffer, n in ((real, n_real), (imaginary, n_imaginary)):
            data = buffer.data
            if flat:
                index = data["state_index"].long()
                data = data.clone(recurse=False)
                data["state"], data["next_state"] = buffer.states[index], buffer.states[index + 1]
            replay = TensorDictReplayBuffer(
                storage=TensorStorage(data),
                sampler=RandomSampler(),
                batch_size=n,
                generator=self.generator,
            )
            self.pools.append((replay, buffer.states))

    def _part(self, replay: Any, states: torch.Tensor) -> dict[str, torch.Tensor]:
        td = replay.sample()
        action = td["action"]
        part = {
            "action": action.long() if not action.is_floating_point() else action,
            "reward": td["reward"],
            "done": td["done"],
            "instruction_id": td["instruction_id"].long(),
            "source": td["source"],
        }
        if self.flat:
            part["state"], part["next_state"] = td["state"], td["next_state"]
        else:
            index = td["state_index"].long()
            part["state"], part["next_state"] = states[index], states[index + 1]
        return part

    def batch(self, step: int) -> TensorDict:
        state = np.random.SeedSequence([self.seed, step]).generate_state(1)[0]
        self.generator.manual_seed(int(state))
        parts = [self._part(replay, states) for replay, states in self.pools]
        size = sum(len(p["reward"]) for p in parts)
        return TensorDict({k: torch.cat([p[k] for p in parts]) for k in parts[0]}, [size])

    def stacked(self, step: int, k: int) -> TensorDict:
        return torch.stack([self.batch(step + j) for j in range(k)])


def per_update(draw: Callable[[int], object], k: int, updates: int, repeats: int) -> float:
    """Median over repeats of the CPU seconds per update of ``draw(step)`` (``k`` updates)."""
    for step in range(0, 20 * k, k):  # warm-up
        draw(step)
    times = []
    for r in range(repeats):
        start = time.process_time()
        for step in range(r * updates, (r + 1) * updates, k):
            draw(step)
        times.append((time.process_time() - start) / updates)
    return statistics.median(times)


def sampling_table(batch_sizes: list[int], ks: list[int], updates: int, repeats: int) -> dict:
    print(
        "| data | batch | updates per batch | ours µs/update | torchrl µs/update "
        "| torchrl-flat µs/update | torchrl / ours |"
    )
    print("|---|---|---|---|---|---|---|")
    out = {}
    for domain in DOMAINS:
        real, imaginary = synthetic_buffer(domain, 0, 1), synthetic_buffer(domain, 1, 2)
        for b in batch_sizes:
            n_imaginary = b // 2
            args = (real, imaginary, b - n_imaginary, n_imaginary, 0)
            ours = MixedBatches(*args)
            rl, flat = TorchRLBatches(*args, flat=False), TorchRLBatches(*args, flat=True)
            reference = ours.batch(3)
            for other in (rl, flat):  # the same draws: the same batch
                batch = other.batch(3)
                assert all(torch.equal(batch[key], reference[key]) for key in reference.keys())
            for k in ks:
                times = [
                    1e6 * per_update(lambda s, c=c: c.stacked(s, k), k, updates, repeats)
                    for c in (ours, rl, flat)
                ]
                out[domain, b, k] = times
                print(
                    f"| {domain} | {b} | {k} | {times[0]:.1f} | {times[1]:.1f} | "
                    f"{times[2]:.1f} | {times[1] / times[0]:.2f}x |",
                    flush=True,
                )
    return out


def step_times(steps: int) -> dict[str, float]:
    """CPU seconds per update of DiscreteBC (CLEVR) and CQL (the continuous view) through
    Lightning, as the throughput benchmark's ``ours`` contender times them."""
    import sys
    import tempfile
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from throughput_data import Hyper, continuous_view, load_data
    from throughput_harness import quiet_libraries
    from throughput_ours import run_ours

    quiet_libraries()
    cache = Path(tempfile.gettempdir()) / "imaginebench_throughput"
    cache.mkdir(parents=True, exist_ok=True)
    data = load_data(300, 0, cache)
    views = {"DiscreteBC": data, "CQL": continuous_view(data)}
    return {
        algo: run_ours(algo, view, Hyper(), 20, steps, 0)["cpu_seconds"] / steps
        for algo, view in views.items()
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--batch-sizes", default="256,1024")
    parser.add_argument("--updates-per-batch", default="1,8", help="comma-separated K values")
    parser.add_argument("--updates", type=int, default=2000, help="updates timed per repeat")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--step-time", type=int, default=0, help="timed updates per algorithm")
    args = parser.parse_args()
    torch.set_num_threads(1)
    batch_sizes = [int(b) for b in args.batch_sizes.split(",")]
    ks = [int(k) for k in args.updates_per_batch.split(",")]
    table = sampling_table(batch_sizes, ks, args.updates, args.repeats)
    if not args.step_time:
        return
    print()
    print("| algorithm | update ms (CPU) | torchrl - ours µs | share of an update |")
    print("|---|---|---|---|")
    # the throughput benchmark's CLEVR data, its batch and the default updates per batch
    ours, rl, _ = table.get(("clevr", 256, 8), (0.0, 0.0, 0.0))
    for algo, seconds in step_times(args.step_time).items():
        print(
            f"| {algo} | {1e3 * seconds:.2f} | {rl - ours:+.1f} | "
            f"{(rl - ours) / (1e6 * seconds):+.1%} |"
        )


if __name__ == "__main__":
    main()
