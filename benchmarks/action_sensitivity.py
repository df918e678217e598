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
import torch

from imaginebench.data.format import load_dataset
from imaginebench.modules.grounding import GroundingModule
from imaginebench.modules.grounding.sequences import ACTION_TARGET, NO_INSTRUCTION


def predicted_actions(module, instruction: str, states: np.ndarray, actions: np.ndarray):
    """The action head's predictions at every action slot of one window, teacher-forced."""
    batch = module.builder.collate([module.builder.generation(instruction, states, actions)])
    model = module.model
    with torch.no_grad():
        hidden, _ = model.hidden(model.embed(batch), batch["attention_mask"], batch["position_ids"])
        heads = model.batch_context(hidden[:, :-1], batch)
        mask = batch["target"][:, 1:] == ACTION_TARGET
        return model.action_out(heads)[mask].float().numpy(), batch["action"][:, 1:][mask].numpy()


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
            p, a = predicted_actions(module, sentence, ep.states[: n + 1], ep.actions[:n])
            if args.guidance != 1.0:
                u, _ = predicted_actions(module, NO_INSTRUCTION, ep.states[: n + 1], ep.actions[:n])
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
