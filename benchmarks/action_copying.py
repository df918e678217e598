"""Does the grounded LM's action head read the state, or copy the previous action?

Along real episodes (their first window of transitions), the action head's predictions are
compared with the expert's actions in three ways, always on the *real* states:

* ``teacher forced``: the sequence holds the expert's earlier actions (how training scores it);
* ``own actions``: the decoder's path, the sequence holding the LM's own earlier actions (the
  states still the real ones, so only the actions fed back differ);
* ``first step``: the first action of each episode, with no earlier action to copy.

Beside them, two baselines from the expert's actions alone: repeating the previous action, and
each episode's mean action. A head whose teacher-forced error is near the copy baseline, whose
first step is no better than the mean, and whose error grows once it reads its own actions has
learned to copy (the expert's actions change slowly), and closed loop it repeats itself.

    python benchmarks/action_copying.py --checkpoint C --real R --episodes 24
"""

from __future__ import annotations

import argparse
import json

import numpy as np
import torch

from imaginebench.data.format import load_dataset
from imaginebench.envs.base import EpisodeSpec, Task
from imaginebench.imagination.confidence import teacher_forced_actions
from imaginebench.imagination.decoder import Imaginer


def replaying(states: np.ndarray):
    """A state model that returns the real episode's next state, whatever the action."""
    upcoming = iter(states[1:].astype(np.float32))

    def next_states(current: np.ndarray, actions: np.ndarray, *context: object) -> np.ndarray:
        return next(upcoming)[None]

    return next_states


def measure(checkpoint: str, real: str, episodes: int, seed: int) -> dict[str, float]:
    from imaginebench.modules.grounding import GroundingModule

    module = GroundingModule.load_from_checkpoint(checkpoint, map_location="cpu", weights_only=True)
    module.merge_lora()
    module.eval()
    data = load_dataset(real)
    window = module.builder.window or 10**9
    rng = np.random.default_rng(seed)
    chosen = rng.choice(len(data.episode_lengths()), episodes, replace=False)
    rows: dict[str, list[float]] = {k: [] for k in ("teacher", "own", "first", "copy", "mean")}
    for index in chosen:
        ep = data.episode(int(index))
        steps = min(window, len(ep.actions))
        states, expert = ep.states[: steps + 1], ep.actions[:steps]
        forced = teacher_forced_actions(module, ep.instruction, states, expert)
        decoding = {"strategy": "greedy", "batch_size": 1}
        imaginer = Imaginer(module, decoding, seed, dynamics=replaying(states))
        spec = EpisodeSpec(Task.from_spec(ep.task_spec), ep.instruction, states[0], ep.level)
        (rollout,) = imaginer.imagine([spec], steps)
        n = len(rollout.actions)  # shorter if the real states reach success earlier
        rows["teacher"].append(float(((forced[:n] - expert[:n]) ** 2).mean()))
        rows["own"].append(float(((rollout.actions - expert[:n]) ** 2).mean()))
        rows["first"].append(float(((forced[0] - expert[0]) ** 2).mean()))
        rows["copy"].append(float(((expert[1:] - expert[:-1]) ** 2).mean()))
        rows["mean"].append(float(((expert - expert.mean(0)) ** 2).mean()))
    return {key: float(np.mean(values)) for key, values in rows.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--real", required=True, help="real rollouts (the grounding's data)")
    parser.add_argument("--episodes", type=int, default=24)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", default=None, help="also write the results as JSON here")
    args = parser.parse_args()
    torch.manual_seed(args.seed)
    result = measure(args.checkpoint, args.real, args.episodes, args.seed)
    print("action MSE against the expert's, on real states:")
    print("| teacher forced | own actions fed back | first step | copy previous | episode mean |")
    print("|---|---|---|---|---|")
    print(
        "| "
        + " | ".join(f"{result[k]:.4f}" for k in ("teacher", "own", "first", "copy", "mean"))
        + " |"
    )
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"checkpoint": args.checkpoint, **vars(args), **result}, f, indent=2)


if __name__ == "__main__":
    main()
