"""Training throughput of the grounding fine-tune, and held-out loss per step, per setup.

    python benchmarks/grounding_speed.py -c configs/grounding_clevr.yaml \\
        --setups baseline lm_layers=15 precision=bfloat16 --steps 12 --warmup 2
    python benchmarks/grounding_speed.py -c configs/grounding_clevr.yaml \\
        --setups baseline lm_layers=15 --train-steps 300        # + held-out loss after 300 steps

Each setup is the config's ``GroundingModule`` with ``key=value`` overrides of its init
arguments (values parsed as YAML), trained by a plain loop (forward, backward, clipped AdamW
step with the module's two learning rates) on the same batches of the config's data module.
Reported: real (non-padding) tokens per second, positions per second (padding included),
seconds per step, and with ``--train-steps`` the held-out loss terms (the data module's
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


def parse_setup(text: str) -> tuple[str, dict[str, Any]]:
    """``"baseline"`` or ``"key=value,key=value"`` (YAML values) -> (name, overrides)."""
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
    data_args = dict(config["data"]["init_args"])
    dm = GroundingDataModule(**data_args)
    dm.setup()
    model_args = {**config["model"]["init_args"], **overrides}
    torch.manual_seed(config.get("seed_everything", 0))
    module = GroundingModule(dm.state_dim, dm.action_spec, **model_args)
    module.dataset = dm.dataset
    module.model.fit_statistics(*transition_states(dm.dataset))
    return module, dm


def optimizer_of(module: GroundingModule) -> torch.optim.Optimizer:
    groups: dict[bool, list[torch.nn.Parameter]] = {True: [], False: []}
    for name, param in module.model.named_parameters():
        if param.requires_grad:
            groups[name.startswith("lm.")].append(param)
    return torch.optim.AdamW(
        [
            {"params": groups[True], "lr": module.lr},
            {"params": groups[False], "lr": module.adapter_lr},
        ],
        weight_decay=module.weight_decay,
    )


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
    return int(batch["attention_mask"].sum()), int(batch["attention_mask"].numel())


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


def measure(
    config: dict, name: str, overrides: dict, steps: int, warmup: int, train_steps: int
) -> dict[str, Any]:
    module, dm = build(config, overrides)
    module.train()
    optimizer = optimizer_of(module)
    for k in range(warmup):
        train_step(module, optimizer, dm.references(k, dm.train_episodes, dm.batch_size))
    tokens = positions = 0
    start = time.perf_counter()
    for k in range(warmup, warmup + steps):
        refs = dm.references(k, dm.train_episodes, dm.batch_size)
        real, padded = train_step(module, optimizer, refs)
        tokens, positions = tokens + real, positions + padded
    seconds = time.perf_counter() - start
    row: dict[str, Any] = {
        "setup": name,
        "tokens_per_s": tokens / seconds,
        "positions_per_s": positions / seconds,
        "s_per_step": seconds / steps,
    }
    if train_steps:
        for k in range(warmup + steps, train_steps):
            train_step(module, optimizer, dm.references(k, dm.train_episodes, dm.batch_size))
        row["held_out"] = held_out(module, dm)
    return row


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
    rows = []
    for text in args.setups:
        name, overrides = parse_setup(text)
        rows.append(measure(config, name, overrides, args.steps, args.warmup, args.train_steps))
        print(rows[-1], flush=True)
    base = rows[0]["tokens_per_s"]
    lines = [
        "# Grounding fine-tune: throughput and held-out loss per setup",
        "",
        f"Generated by `python benchmarks/grounding_speed.py -c {args.config} --setups "
        f"{' '.join(args.setups)} --steps {args.steps} --warmup {args.warmup} --train-steps "
        f"{args.train_steps} --threads {args.threads}` on {time.strftime('%Y-%m-%d %H:%M')} "
        f"({platform.machine()}, {args.threads} torch threads). One training step = forward, "
        "backward and a clipped AdamW step on one batch of the config's data module; the same "
        "batches for every setup. Tokens = real (non-padding) positions.",
        "",
        "| setup | tokens/s | × first | positions/s | s/step |"
        + (" held-out action CE | held-out state error |" if args.train_steps else ""),
        "|---|---|---|---|---|" + ("---|---|" if args.train_steps else ""),
    ]
    for row in rows:
        line = (
            f"| {row['setup']} | {row['tokens_per_s']:.0f} | {row['tokens_per_s'] / base:.2f} | "
            f"{row['positions_per_s']:.0f} | {row['s_per_step']:.2f} |"
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
