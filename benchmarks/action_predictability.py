"""How predictable are the real data's actions? A reference point for the grounding's action loss.

    python benchmarks/action_predictability.py -c configs/grounding_clevr.yaml \\
        --episodes 10000 --epochs 3

Trains small classifiers on the grounding config's real data and validation split (whole
rollouts held out, exactly as ``GroundingDataModule`` splits them) and reports their held-out
action cross-entropy: a uniform guess, the instruction alone, the state alone, and the
instruction (frozen MiniLM embedding) with the state. The last is roughly what a grounded LM
could reach if it read instruction and state perfectly: the gap between it and the grounding's
held-out ``action_ce`` is what better grounding can still win; its own value is the floor set
by the data (random exploration pushes, ties the expert breaks at random). Discrete action
spaces only.
"""

from __future__ import annotations

import argparse
import math

import numpy as np
import torch
import yaml
from torch import nn

from imaginebench.data.collect import CollectConfig
from imaginebench.datamodules import GroundingDataModule
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

    print(
        f"{len(dm.dataset)} episodes; {len(train[2])} training and {len(val[2])} held-out "
        f"transitions; {classes} actions\n"
    )
    print("| inputs | held-out action CE | top-1 accuracy |")
    print("|---|---|---|")
    print(f"| none (uniform guess) | {math.log(classes):.2f} | {1 / classes:.3f} |")
    for use in ("instruction", "state", "both"):
        ce, accuracy = fit_classifier(
            features(train, use), features(val, use), classes, args.epochs, args.seed
        )
        name = {"both": "instruction + state"}.get(use, use)
        print(f"| {name} | {ce:.2f} | {accuracy:.3f} |", flush=True)


if __name__ == "__main__":
    main()
