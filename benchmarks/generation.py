"""Imagination speed: imaginary rollouts per second of our batched, KV-cached decoder against
decoders that re-run the full forward pass, same model, prompts and batch. Writes
docs/results/generation.md.

    python benchmarks/generation.py --checkpoint runs/grounding_clevr/checkpoints/last.ckpt
    python benchmarks/generation.py --rollouts 8 --horizon 5     # quick check, untrained adapters

Contenders (all on SmolLM2-135M-Instruct + the grounding adapters, float32, the same episodes
of the ``hard`` level, every rollout decoded for exactly ``--horizon`` steps so all do the same
number of steps):

* ``kv-cache`` (ours): prompt + initial state encoded once, then one one-position forward per
  slot (action, then state) with the KV cache.
* ``full re-forward``: the same decoding, but every slot re-runs the whole sequence (no cache).
  It produces the same rollouts (tested in tests/test_grounding.py).
* ``reference loop``: the original KALM generation loop: one full forward per step, reading
  both the next state and the next action from it (so its actions lag one step; it does half
  the forwards of a correct uncached decoder).
"""

from __future__ import annotations

import argparse
import platform
import time
from pathlib import Path

import numpy as np
import torch

import imaginebench.data.collect  # noqa: F401  (allows a checkpoint's CollectConfig)
from imaginebench.envs import get_domain
from imaginebench.imagination import DecodingConfig, Imaginer
from imaginebench.imagination.decoder import _Sequences

ROOT = Path(__file__).resolve().parents[1]


class _NeverDone:
    """A task stand-in whose success never holds (so every rollout runs the full horizon)."""

    def success(self, states: np.ndarray) -> np.ndarray:
        return np.zeros(len(states), dtype=bool)


def reference_loop(module, specs, horizon: int) -> float:
    """Seconds for the reference's loop: one full forward per step (no cache, lagged action)."""
    model, builder = module.model, module.builder
    started = time.perf_counter()
    with torch.no_grad():
        items = [builder.rollout_prompt(s.instruction, s.initial_state) for s in specs]
        batch = builder.collate(items, "left")
        seq = _Sequences(model, batch, use_cache=False)
        state = torch.as_tensor(np.stack([s.initial_state for s in specs]))
        action = model.action_logits(seq.last).argmax(-1)
        for _ in range(horizon):
            # one forward over everything so far gives both predictions of this step
            seq.embeds = torch.cat([seq.embeds, model.embed_actions(action)[:, None]], 1)
            seq.mask = torch.cat([seq.mask, torch.ones_like(seq.mask[:, :1])], 1)
            seq.positions = torch.cat([seq.positions, seq.positions[:, -1:] + 1], 1)
            hidden, _ = model.hidden(seq.embeds, seq.mask, seq.positions)
            state = model.next_state(hidden[:, -1], state)
            action = model.action_logits(hidden[:, -1]).argmax(-1)  # stale: before s_{t+1}
            seq.embeds = torch.cat([seq.embeds, model.embed_states(state)[:, None]], 1)
            seq.mask = torch.cat([seq.mask, torch.ones_like(seq.mask[:, :1])], 1)
            seq.positions = torch.cat([seq.positions, seq.positions[:, -1:] + 1], 1)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--checkpoint",
        default=None,
        help="grounding checkpoint (default: "
        "SmolLM2 with freshly initialised adapters; speed is the same)",
    )
    parser.add_argument("--rollouts", type=int, default=32)
    parser.add_argument("--horizon", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: default)")
    parser.add_argument("--out", default=str(ROOT / "docs" / "results" / "generation.md"))
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    from dataclasses import replace

    from imaginebench.modules.grounding import GroundingModule

    if args.checkpoint:
        module = GroundingModule.load_from_checkpoint(args.checkpoint, weights_only=True)
    else:
        torch.manual_seed(0)
        module = GroundingModule(10, {"type": "discrete", "n": 40})
    module.eval()
    specs = get_domain("clevr").make_suite().episodes("hard", args.rollouts, seed=0, split="data")
    specs = [replace(s, task=_NeverDone()) for s in specs]
    n = args.rollouts
    times: dict[str, list[float]] = {"kv-cache": [], "full re-forward": [], "reference loop": []}
    for _ in range(args.repeats):
        for use_cache, name in ((True, "kv-cache"), (False, "full re-forward")):
            imaginer = Imaginer(module, DecodingConfig(batch_size=n, use_cache=use_cache))
            started = time.perf_counter()
            imaginer.imagine(specs, args.horizon)
            times[name].append(time.perf_counter() - started)
        times["reference loop"].append(reference_loop(module, specs, args.horizon))
    best = {k: min(v) for k, v in times.items()}
    ours = n / best["kv-cache"]
    lines = [
        "# Imagination speed",
        "",
        f"`python benchmarks/generation.py{' --checkpoint ' + args.checkpoint if args.checkpoint else ''}"
        f" --rollouts {n} --horizon {args.horizon} --repeats {args.repeats}`",
        "",
        f"SmolLM2-135M-Instruct + grounding adapters (float32), {n} rollouts of the `hard` level "
        f"decoded together (one batch), {args.horizon} steps each (2 slots per step), best of "
        f"{args.repeats}; {platform.processor() or platform.machine()}, "
        f"{torch.get_num_threads()} torch threads.",
        "",
        "| decoder | seconds | rollouts/s | transitions/s | speed-up of kv-cache |",
        "|---|---|---|---|---|",
    ]
    for name, seconds in best.items():
        rate = n / seconds
        lines.append(
            f"| {name} | {seconds:.2f} | {rate:.2f} | {rate * args.horizon:.1f} | "
            f"{ours / rate:.1f}x |"
        )
    report = "\n".join(lines) + "\n"
    print(report)
    Path(args.out).write_text(report)


if __name__ == "__main__":
    main()
