"""Does the grounded LM's action depend on the words of the instruction?

Teacher-forces real episodes of one task through a grounding checkpoint with the episode's own
instruction swapped for each of several sentences, and reports, per sentence, the mean absolute
predicted action (continuous) and its squared error to the expert's actions. Used to ask
whether "faster" wordings make the HalfCheetah LM predict stronger torques than the training
wordings of the same run (docs/halfcheetah.md).

    python benchmarks/action_sensitivity.py --checkpoint C --real R \
        --task '<task spec of the real episodes>' --episodes 40 \
        --instructions "Run forward." "Move forward faster." "Run forward as fast as you can."

``--guidance W`` scores the instruction-guided prediction that ``decoding.guidance: W`` decodes
(``uncond + W (cond - uncond)``, ``uncond`` the prediction with the empty instruction).
"""

from __future__ import annotations

import argparse
import json

import numpy as np

from imaginebench.data.format import load_dataset
from imaginebench.imagination.confidence import teacher_forced_actions
from imaginebench.modules.grounding import GroundingModule
from imaginebench.modules.grounding.sequences import NO_INSTRUCTION


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--real", required=True)
    parser.add_argument("--task", required=True, help="task spec of the real episodes to use")
    parser.add_argument("--episodes", type=int, default=40)
    parser.add_argument("--instructions", nargs="+", required=True)
    parser.add_argument(
        "--steps", type=int, default=None, help="only the first STEPS actions (default: a window)"
    )
    parser.add_argument(
        "--guidance", type=float, default=1.0, help="instruction guidance weight (1: none)"
    )
    args = parser.parse_args()
    module = GroundingModule.load_from_checkpoint(
        args.checkpoint, map_location="cpu", weights_only=True
    ).eval()
    window = args.steps or module.builder.window or 10**9
    real = load_dataset(args.real)
    chosen = [i for i in range(len(real)) if real.episode(i).task_spec == args.task]
    if not chosen:
        raise SystemExit(f"no real episode of task {args.task}")
    episodes = [real.episode(i) for i in chosen[: args.episodes]]
    print(f"{len(episodes)} real episodes, first {window} transitions each")
    rows = []
    for sentence in args.instructions:
        predicted, expert = [], []
        for ep in episodes:
            n = min(window, len(ep.actions))
            states, a = ep.states[: n + 1], ep.actions[:n]
            p = teacher_forced_actions(module, sentence, states, a)
            if args.guidance != 1.0:
                u = teacher_forced_actions(module, NO_INSTRUCTION, states, a)
                p = np.clip(u + args.guidance * (p - u), -1.0, 1.0)  # as decoding clips
            predicted.append(p)
            expert.append(a)
        p, a = np.concatenate(predicted), np.concatenate(expert)
        rows.append(
            {
                "instruction": sentence,
                "guidance": args.guidance,
                "mean_abs_action": round(float(np.abs(p).mean()), 4),
                "mse_to_expert": round(float(((p - a) ** 2).mean()), 4),
                "expert_mean_abs_action": round(float(np.abs(a).mean()), 4),
            }
        )
        print(json.dumps(rows[-1]))


if __name__ == "__main__":
    main()
