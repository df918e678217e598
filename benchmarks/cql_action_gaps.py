"""How decided DiscreteCQL's greedy choice is on real states: for each finished run's last
checkpoint, on every transition of a real file, the share of states where the greedy
action is the data's action, and the gap between the best and the second-best Q-value.

Used in docs/grounding.md ("BabyAI: where in CQL the `train` loss arises") on expert
transitions the runs never saw:

    imaginebench collect --domain babyai --level train --episodes 300 --seed 1 --epsilon 0.2 \\
        --out heldout.h5
    python benchmarks/cql_action_gaps.py --real heldout.h5 \\
        runs/benchmark/babyai/runs/cql/real runs/benchmark/babyai/runs/cql/imaginary_all
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import torch

from imaginebench.data.format import load_dataset
from imaginebench.modules.offline import DiscreteCQL


def q_values(checkpoint: Path, states: np.ndarray, instructions: list[str]) -> torch.Tensor:
    """``(N, actions)`` Q-values of a DiscreteCQL checkpoint's online network."""
    module = DiscreteCQL.load_from_checkpoint(checkpoint, map_location="cpu").eval()
    ids = module.bank.add(instructions)
    with torch.no_grad():
        state = module.normalize(torch.as_tensor(states, dtype=torch.float32))
        return module.q(state, module.embed(ids))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--real", required=True, help="real rollouts (HDF5) to score on")
    parser.add_argument("runs", nargs="+", type=Path, help="folders of seed*/ runs")
    args = parser.parse_args()
    torch.set_num_threads(1)
    data = load_dataset(args.real)
    state_idx, _ = data.transition_indices()
    states = data.states[state_idx]
    sentences = [data.instructions[i] for i in data.episode_instruction[data.transition_episodes()]]
    print(f"{args.real}: {data.num_transitions} transitions")
    for folder in args.runs:
        agree, gaps = [], []
        for checkpoint in sorted(folder.glob("seed*/checkpoints/last.ckpt")):
            q = q_values(checkpoint, states, sentences)
            top2 = q.topk(2, dim=-1).values
            agree.append(float((q.argmax(-1).numpy() == data.actions).mean()))
            gaps.append(float((top2[:, 0] - top2[:, 1]).mean()))
            print(f"  {checkpoint.parent.parent.name}: agree {agree[-1]:.4f}, gap {gaps[-1]:.4f}")
        if agree:
            print(
                f"{folder}: {len(agree)} runs, greedy = data action {100 * np.mean(agree):.2f} %, "
                f"mean best-second gap {np.mean(gaps):.4f}"
            )


if __name__ == "__main__":
    main()
