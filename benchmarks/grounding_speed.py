"""Training throughput of the grounding fine-tune, and held-out loss per step, per setup.

    python benchmarks/grounding_speed.py -c configs/grounding_clevr.yaml \\
        --setups baseline lm_layers=15 precision=bfloat16 --steps 12 --warmup 2
    python benchmarks/grounding_speed.py -c configs/grounding_clevr.yaml \\
        --setups baseline lm_layers=15 --train-steps 300        # + held-out loss after 300 steps

``compile=true`` in a setup compiles the LM body (``torch.compile``, dynamic shapes) instead of
passing an init argument.

Each setup is the config's ``GroundingModule`` with ``key=value`` overrides of its init
arguments (values parsed as YAML), trained by a plain loop (forward, backward, clipped AdamW
step with the module's two learning rates) on the same batches of the config's data module.
Reported: real (non-padding) tokens per second, positions per second (padding included),
seconds per step (timed in rounds, one step of each setup per round, so that a busy machine
slows every setup alike), and with ``--train-steps`` the held-out loss terms (the data module's
validation batches) after that many steps, so that a faster setup is only counted as faster
if it learns as much per step. Writes ``docs/results/grounding_speed.md`` (``--out``).
"""

from __future__ import annotations

import argparse
import platform
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
import yaml

from imaginebench.datamodules import GroundingDataModule
from imaginebench.modules.grounding import GroundingModule
from imaginebench.modules.grounding.module import transition_states
from imaginebench.modules.grounding.sequences import PAD


def parse_setup(text: str) -> tuple[str, dict[str, Any]]:
    """``"baseline"`` or ``"key=value,key=value"`` (YAML values; ``outer.inner=value`` sets one
    entry of a dict argument, e.g. ``lora.dropout=0``) -> (name, overrides)."""
    if text == "baseline":
        return text, {}
    overrides = {}
    for part in text.split(","):
        key, _, value = part.partition("=")
        if not value:
            raise ValueError(f"setup {text!r}: expected key=value pairs")
        overrides[key.strip()] = yaml.safe_load(value)
    return text, overrides


def build(config: dict, overrides: dict[str, Any]) -> tuple[GroundingModule, GroundingDataModule]:
    """The config's module (``overrides`` on its init arguments; ``compile=true`` compiles the
    LM body with ``torch.compile(dynamic=True)`` instead) and its data module."""
    overrides = dict(overrides)
    compiled = bool(overrides.pop("compile", False))
    data_args = dict(config["data"]["init_args"])
    dm = GroundingDataModule(**data_args)
    dm.setup()
    model_args = dict(config["model"]["init_args"])
    for key, value in overrides.items():  # "lora.dropout" sets one entry of the lora settings
        outer, _, inner = key.partition(".")
        if inner:
            model_args[outer] = {**model_args[outer], inner: value}
        else:
            model_args[key] = value
    torch.manual_seed(config.get("seed_everything", 0))
    module = GroundingModule(dm.state_dim, dm.action_spec, **model_args)
    module.dataset = dm.dataset
    module.model.fit_statistics(*transition_states(dm.dataset))
    if compiled:  # the first steps then include the compilation: give --warmup room for it
        body = module.model.lm.base_model
        body.forward = torch.compile(body.forward, dynamic=True)
    return module, dm


def optimizer_of(module: GroundingModule) -> torch.optim.Optimizer:
    """The module's own AdamW (two learning rates; no schedule)."""
    return module.configure_optimizers()["optimizer"]


def train_step(
    module: GroundingModule, optimizer: torch.optim.Optimizer, refs: dict
) -> tuple[int, int]:
    """One clipped AdamW step; returns the batch's real tokens and all its positions."""
    batch = module.collate(refs)
    loss = module._loss(module.model.losses(batch))
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(module.model.parameters(), 1.0)
    optimizer.step()
    return int((batch["kind"] != PAD).sum()), int(batch["kind"].numel())


@torch.no_grad()
def held_out(module: GroundingModule, dm: GroundingDataModule) -> dict[str, float]:
    module.eval()
    terms: dict[str, list[float]] = {}
    for k in range(dm.val_batches):
        refs = dm.references(k, dm.val_episodes, dm.batch_size, stream=1)
        for key, value in module.model.losses(module.collate(refs)).items():
            terms.setdefault(key, []).append(float(value))
    module.train()
    return {k: float(np.mean(v)) for k, v in terms.items()}


def time_interleaved(
    setups: list[tuple[GroundingModule, torch.optim.Optimizer, GroundingDataModule]],
    steps: int,
    warmup: int,
) -> list[dict[str, float]]:
    """Time ``steps`` training steps per setup in rounds (one step of each setup per round, the
    same batch for all), so that load from other processes slows every setup alike. Besides
    the totals, each setup's speed-up over the first in every round (same batch, adjacent in
    time): its median and quartiles are robust to a round slowed by other load."""
    totals = [{"tokens": 0, "positions": 0, "seconds": 0.0} for _ in setups]
    per_round = np.zeros((steps, len(setups)))
    for k in range(warmup + steps):
        for s, ((module, optimizer, dm), total) in enumerate(zip(setups, totals)):
            refs = dm.references(k, dm.train_episodes, dm.batch_size)
            start = time.perf_counter()
            real, padded = train_step(module, optimizer, refs)
            if k >= warmup:
                per_round[k - warmup, s] = time.perf_counter() - start
                total["seconds"] += per_round[k - warmup, s]
                total["tokens"] += real
                total["positions"] += padded
    ratios = per_round[:, :1] / per_round
    return [
        {
            "tokens_per_s": t["tokens"] / t["seconds"],
            "positions_per_s": t["positions"] / t["seconds"],
            "s_per_step": t["seconds"] / steps,
            "round_ratio": np.percentile(ratios[:, s], [25, 50, 75]).tolist(),
        }
        for s, t in enumerate(totals)
    ]


def train_on(
    module: GroundingModule,
    optimizer: torch.optim.Optimizer,
    dm: GroundingDataModule,
    done: int,
    train_steps: int,
) -> dict[str, float]:
    """Train from step ``done`` to ``train_steps``, then the held-out loss terms."""
    for k in range(done, train_steps):
        train_step(module, optimizer, dm.references(k, dm.train_episodes, dm.batch_size))
    return held_out(module, dm)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-c", "--config", default="configs/grounding_clevr.yaml")
    parser.add_argument("--setups", nargs="+", default=["baseline"])
    parser.add_argument("--steps", type=int, default=12, help="timed steps per setup")
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--train-steps", type=int, default=0, help="train this many steps in all")
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--out", default="docs/results/grounding_speed.md")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    config = yaml.safe_load(Path(args.config).read_text())
    names, setups = [], []
    for text in args.setups:
        name, overrides = parse_setup(text)
        module, dm = build(config, overrides)
        module.train()
        names.append(name)
        setups.append((module, optimizer_of(module), dm))
    rows = [
        {"setup": name, **timing}
        for name, timing in zip(names, time_interleaved(setups, args.steps, args.warmup))
    ]
    for row in rows:
        print(row, flush=True)
    if args.train_steps:
        done = args.warmup + args.steps
        for row, setup in zip(rows, setups):
            row["held_out"] = train_on(*setup, done, args.train_steps)
            print(row, flush=True)
    base = rows[0]["tokens_per_s"]
    lines = [
        "# Grounding fine-tune: throughput and held-out loss per setup",
        "",
        (
            f"Generated by `python benchmarks/grounding_speed.py -c {args.config} --setups "
            f"{' '.join(args.setups)} --steps {args.steps} --warmup {args.warmup} --train-steps "
            f"{args.train_steps} --threads {args.threads}` on {time.strftime('%Y-%m-%d %H:%M')} "
            f"({platform.machine()}, {args.threads} torch threads). One training step = forward, "
            "backward and a clipped AdamW step on one batch of the config's data module; the "
            "same batches for every setup, timed in rounds (a step of each setup per round) so "
            "that other load slows all setups alike. Tokens = real (non-padding) positions."
        ),
        "",
        "| setup | tokens/s | × first | × first per round: median (quartiles) | positions/s "
        "| s/step |" + (" held-out action CE | held-out state error |" if args.train_steps else ""),
        "|---|---|---|---|---|---|" + ("---|---|" if args.train_steps else ""),
    ]
    for row in rows:
        low, median, high = row["round_ratio"]
        line = (
            f"| {row['setup']} | {row['tokens_per_s']:.0f} | {row['tokens_per_s'] / base:.2f} | "
            f"{median:.2f} ({low:.2f}–{high:.2f}) | {row['positions_per_s']:.0f} | "
            f"{row['s_per_step']:.2f} |"
        )
        if args.train_steps:
            h = row["held_out"]
            state = h.get("state_mae", float("nan"))
            action = h.get("action_ce", h.get("action_mse", float("nan")))
            line += f" {action:.3f} | {state:.4f} |"
        lines.append(line)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
