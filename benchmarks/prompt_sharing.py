"""Imagination speed with best-of-N candidates: one prompt pass per episode (shared by its N
candidates, the decoder's behaviour) against one prompt pass per candidate row (before).

    python benchmarks/prompt_sharing.py --checkpoint runs/grounding_clevr/checkpoints/best.ckpt

Same model, episodes, candidates and seed for both; every candidate decodes greedily for the
level's horizon (the filters are left out, so both decode the same steps). The two setups are
timed in interleaved rounds, so a busy machine slows both alike. Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import time
from contextlib import contextmanager, nullcontext
from typing import Iterator

import numpy as np
import torch

import imaginebench.data.collect  # noqa: F401  (allows a checkpoint's CollectConfig)
from imaginebench.envs import get_domain
from imaginebench.imagination import DecodingConfig, Imaginer, decoder
from imaginebench.modules.grounding import GroundingModule


@contextmanager
def one_prompt_pass_per_row() -> Iterator[None]:
    """Decode as before prompt sharing: every row encodes its own prompt."""
    shared = decoder.Imaginer._prompt

    def per_row(self, instructions, states, start, device):
        items = [
            self.builder.rollout_prompt(words, state, start)
            for words, state in zip(instructions, states)
        ]
        batch = decoder.to_device(self.builder.collate(items, "left"), device)
        return decoder._Sequences(self.model, batch, self.decoding.use_cache)

    decoder.Imaginer._prompt = per_row
    try:
        yield
    finally:
        decoder.Imaginer._prompt = shared


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--domain", default="clevr")
    parser.add_argument("--level", default="easy")
    parser.add_argument("--episodes", type=int, default=16)
    parser.add_argument("--candidates", type=int, default=4, help="N of best-of-N")
    parser.add_argument("--horizon", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    module = GroundingModule.load_from_checkpoint(args.checkpoint, map_location="cpu").eval()
    suite = get_domain(args.domain).make_suite()
    specs = suite.episodes(args.level, args.episodes, seed=0, split="data")
    candidates = [s for s in specs for _ in range(args.candidates)]
    decoding = DecodingConfig(strategy="greedy", batch_size=len(candidates))
    seconds: dict[str, list[float]] = {"shared prompt pass": [], "one pass per row": []}
    results = {}
    for _ in range(args.rounds):
        for name in seconds:
            started = time.perf_counter()
            setup = one_prompt_pass_per_row() if name == "one pass per row" else nullcontext()
            with torch.no_grad(), setup:
                out = Imaginer(module, decoding).imagine(candidates, args.horizon)
            seconds[name].append(time.perf_counter() - started)
            results[name] = out
    same = all(np.array_equal(a.actions, b.actions) for a, b in zip(*results.values(), strict=True))
    base = np.median(seconds["one pass per row"])
    print(
        f"{args.domain} {args.level}: {args.episodes} episodes x {args.candidates} candidates, "
        f"horizon {args.horizon}, greedy, {args.threads} thread(s); same actions: {same}\n"
    )
    print("| decoding | seconds (median of rounds) | candidates/s | speed-up |")
    print("|---|---|---|---|")
    for name, times in seconds.items():
        t = float(np.median(times))
        print(f"| {name} | {t:.1f} | {len(candidates) / t:.2f} | {base / t:.2f}x |")


if __name__ == "__main__":
    main()
