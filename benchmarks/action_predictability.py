"""How predictable are the real data's actions? A reference point for the grounding's action loss.

    python benchmarks/action_predictability.py -c configs/grounding_clevr.yaml \\
        --episodes 10000 --epochs 3

Trains small classifiers on the grounding config's real data and validation split (whole
rollouts held out, exactly as ``GroundingDataModule`` splits them) and reports their held-out
action cross-entropy: a uniform guess, the instruction alone, the state alone, and the
instruction (frozen MiniLM embedding) with the state. The last is roughly what a grounded LM
could reach if it read instruction and state perfectly: the gap between it and the grounding's
held-out ``action_ce`` is what better grounding can still win; its own value is the floor set
by the data (random exploration pushes, ties the expert breaks at random). For a domain whose
expert exposes ``action_probabilities`` (CLEVR) the expert's own policy is scored too: the
held-out rollouts are replayed in the simulator and each action is scored under the
distribution the expert drew it from, which no model of the data can beat (the Bayes floor).
Discrete action spaces only.
"""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path

import numpy as np
import torch
import yaml
from torch import nn

from imaginebench.data.collect import CollectConfig
from imaginebench.datamodules import GroundingDataModule
from imaginebench.envs import make
from imaginebench.experts import make_expert
from imaginebench.modules.backbone import InstructionEncoder, resolve_encoder_path


def transitions(dm: GroundingDataModule, episodes: torch.Tensor) -> tuple[np.ndarray, ...]:
    """(instruction index, state, action) of every transition of ``episodes``."""
    data = dm.dataset
    rows = [data.episode(int(i)) for i in episodes]
    instruction = np.concatenate(
        [np.full(len(ep.actions), data.instructions.index(ep.instruction)) for ep in rows]
    )
    states = np.concatenate([ep.states[:-1] for ep in rows]).astype(np.float32)
    actions = np.concatenate([ep.actions for ep in rows]).astype(np.int64)
    return instruction, states, actions


def expert_floor(dm: GroundingDataModule, episodes: torch.Tensor, epsilon: float) -> tuple[float, float] | None:
    """Held-out (cross-entropy, top-1 accuracy) of the expert's own action distribution, by
    replaying each distinct held-out rollout (wordings share one) in the simulator; ``None``
    if the domain's expert does not expose its distribution."""
    data = dm.dataset
    expert = make_expert(dm.domain, epsilon=epsilon, seed=0)
    if not hasattr(expert, "action_probabilities"):
        return None
    env = make(dm.domain, "train").unwrapped
    counts: dict[bytes, int] = {}
    rollouts = {}
    for i in episodes.tolist():
        ep = data.episode(int(i))
        key = ep.states.tobytes() + ep.actions.tobytes()
        counts[key] = counts.get(key, 0) + 1
        rollouts.setdefault(key, ep)
    nll = hits = steps = 0.0
    for key, ep in rollouts.items():
        env.reset(
            options={"task": ep.task_spec, "instruction": ep.instruction, "initial_state": ep.states[0]}
        )
        for action in ep.actions.tolist():
            p = expert.action_probabilities(env)
            nll -= counts[key] * math.log(p[action])
            modal = p >= p.max() - 1e-12  # top-1 with ties broken at random
            hits += counts[key] * float(modal[action]) / int(modal.sum())
            steps += counts[key]
            env.step(action)
    return nll / steps, hits / steps


def fit_classifier(
    inputs: tuple[torch.Tensor, torch.Tensor],
    held_out: tuple[torch.Tensor, torch.Tensor],
    classes: int,
    epochs: int,
    seed: int,
) -> tuple[float, float]:
    """Best held-out (cross-entropy, top-1 accuracy) of an MLP over the epochs."""
    torch.manual_seed(seed)
    x, y = inputs
    vx, vy = held_out
    net = nn.Sequential(
        nn.Linear(x.shape[1], 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, classes)
    )
    optimizer = torch.optim.Adam(net.parameters(), lr=1e-3)
    best = (math.inf, 0.0)
    for _ in range(epochs):
        order = torch.randperm(len(x))
        for start in range(0, len(x), 256):
            batch = order[start : start + 256]
            loss = nn.functional.cross_entropy(net(x[batch]), y[batch])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        with torch.no_grad():
            logits = net(vx)
            ce = float(nn.functional.cross_entropy(logits, vy))
            accuracy = float((logits.argmax(-1) == vy).float().mean())
        if ce < best[0]:
            best = (ce, accuracy)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("-c", "--config", default="configs/grounding_clevr.yaml")
    parser.add_argument("--episodes", type=int, help="override the config's collect.episodes")
    parser.add_argument("--epochs", type=int, default=3, help="passes over the data (each rollout is stored once per wording)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", help="also write the table to this Markdown file")
    args = parser.parse_args()
    data_args = dict(yaml.safe_load(open(args.config))["data"]["init_args"])
    collect = dict(data_args.pop("collect"))
    if args.episodes:
        collect["episodes"] = args.episodes
    dm = GroundingDataModule(collect=CollectConfig(**collect), **data_args)
    dm.setup()
    if dm.action_spec["type"] != "discrete":
        raise SystemExit("action predictability is measured for discrete action spaces only")
    classes = int(dm.action_spec["n"])
    train = transitions(dm, dm.train_episodes)
    val = transitions(dm, dm.val_episodes)
    encoder = InstructionEncoder(resolve_encoder_path("all-MiniLM-L6-v2"))
    with torch.no_grad():
        embeddings = encoder.encode(dm.dataset.instructions).float()
    mean, std = train[1].mean(0), train[1].std(0) + 1e-6

    def features(split: tuple[np.ndarray, ...], use: str) -> tuple[torch.Tensor, torch.Tensor]:
        instruction = embeddings[torch.as_tensor(split[0])]
        state = torch.as_tensor((split[1] - mean) / std)
        parts = {"instruction": [instruction], "state": [state], "both": [instruction, state]}
        return torch.cat(parts[use], 1), torch.as_tensor(split[2])

    lines = [
        f"{len(dm.dataset)} episodes; {len(train[2])} training and {len(val[2])} held-out "
        f"transitions; {classes} actions",
        "",
        "| inputs | held-out action CE | top-1 accuracy |",
        "|---|---|---|",
        f"| none (uniform guess) | {math.log(classes):.2f} | {1 / classes:.3f} |",
    ]
    print("\n".join(lines), flush=True)

    def row(name: str, ce: float, accuracy: float) -> None:
        lines.append(f"| {name} | {ce:.2f} | {accuracy:.3f} |")
        print(lines[-1], flush=True)

    floor = expert_floor(dm, dm.val_episodes, collect["epsilon"])
    if floor is not None:
        row("the expert's own policy (floor)", *floor)
    for use in ("instruction", "state", "both"):
        ce, accuracy = fit_classifier(
            features(train, use), features(val, use), classes, args.epochs, args.seed
        )
        row({"both": "instruction + state"}.get(use, use), ce, accuracy)
    if args.out:
        command = f"python benchmarks/action_predictability.py -c {args.config} --epochs {args.epochs}"
        header = [
            "# How predictable are the real data's actions?",
            "",
            f"`{command}` ({time.strftime('%Y-%m-%d')}): held-out action cross-entropy on the "
            "grounding config's validation split (whole rollouts held out). Classifiers: a "
            "two-layer MLP (256 units) on the frozen MiniLM instruction embedding and/or the "
            "standardised state, best held-out epoch. The expert's own policy is the "
            "distribution each action was drawn from (replayed in the simulator); top-1 breaks "
            "its ties at random.",
            "",
        ]
        Path(args.out).write_text("\n".join(header + lines) + "\n")

if __name__ == "__main__":
    main()
