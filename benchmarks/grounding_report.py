"""Summarise a grounding fine-tune from its TensorBoard log: the loss curve (train losses
averaged over windows, validation losses at every evaluation) and the wall-clock time. Writes
docs/results/grounding_<domain>.md.

    imaginebench fit -c configs/grounding_clevr.yaml     # the run (writes runs/grounding_clevr)
    python benchmarks/grounding_report.py --domain clevr # reads runs/grounding_clevr/version_0
"""

from __future__ import annotations

import argparse
import platform
from pathlib import Path

import numpy as np
import yaml
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

ROOT = Path(__file__).resolve().parents[1]
TERMS = (
    "loss",
    "state_mse",
    "state_ce",
    "state_mae",
    "action_ce",
    "action_accuracy",
    "action_mse",
    "token_ce",
)


def _training_minutes(steps: np.ndarray, wall: np.ndarray) -> tuple[float, int]:
    """Minutes of training of a logged run and how often it was resumed. Time between
    logged points counts; a gap at a resume (the step goes back or stays, or a pause longer
    than ten times the usual interval) counts as the usual time per step instead."""
    order = np.argsort(wall, kind="stable")
    steps, wall = steps[order], wall[order]
    step_gaps, time_gaps = np.diff(steps), np.diff(wall)
    per_step = time_gaps[step_gaps > 0] / step_gaps[step_gaps > 0]
    usual = float(np.median(per_step)) if len(per_step) else 0.0
    paused = (step_gaps <= 0) | (time_gaps > 10 * usual * np.maximum(step_gaps, 1))
    seconds = time_gaps[~paused].sum() + usual * np.clip(step_gaps[paused], 0, None).sum()
    seconds += usual * (steps[0] + 1)  # before the first logged point
    return float(seconds) / 60, int((step_gaps <= 0).sum() + (paused & (step_gaps > 0)).sum())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--domain", default="clevr")
    parser.add_argument(
        "--log-dir",
        nargs="+",
        default=None,
        help="default: runs/grounding_<domain>/version_0; several for a run resumed elsewhere "
        "(their logs are joined in step order)",
    )
    parser.add_argument("--config", default=None, help="default: configs/grounding_<domain>.yaml")
    parser.add_argument("--window", type=int, default=50, help="steps per row of the curve")
    parser.add_argument("--out", default=None, help="default: docs/results/grounding_<domain>.md")
    args = parser.parse_args()
    args.log_dir = args.log_dir or [f"runs/grounding_{args.domain}/version_0"]
    args.config = args.config or str(ROOT / "configs" / f"grounding_{args.domain}.yaml")
    args.out = args.out or str(ROOT / "docs" / "results" / f"grounding_{args.domain}.md")
    logs = [EventAccumulator(d, size_guidance={"scalars": 0}) for d in args.log_dir]
    for log in logs:
        log.Reload()
    scalars = set().union(*(log.Tags()["scalars"] for log in logs))

    def series(tag: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        rows = sorted(
            (r for log in logs if tag in log.Tags()["scalars"] for r in log.Scalars(tag)),
            key=lambda r: (r.step, r.wall_time),
        )
        return (
            np.array([r.step for r in rows]),
            np.array([r.value for r in rows]),
            np.array([r.wall_time for r in rows]),
        )

    train_terms = [t for t in TERMS if f"train/{t}" in scalars]  # the run's own terms
    steps, _, wall = series("train/loss")
    minutes, resumes = _training_minutes(steps, wall)
    lines = [
        "| steps | " + " | ".join(f"train {t}" for t in train_terms) + " |",
        "|---|" + "---|" * len(train_terms),
    ]
    for start in range(0, int(steps[-1]) + 1, args.window):
        cells = []
        for tag in train_terms:
            s, v, _ = series(f"train/{tag}")
            chosen = v[(s >= start) & (s < start + args.window)]
            cells.append(f"{chosen.mean():.3f}" if len(chosen) else "")
        lines.append(f"| {start}–{start + args.window - 1} | " + " | ".join(cells) + " |")
    val_tags = [t for t in train_terms if f"val/{t}" in scalars]
    val_lines = [
        "| step | " + " | ".join(f"val {t}" for t in val_tags) + " |",
        "|---|" + "---|" * len(val_tags),
    ]
    if val_tags:
        val_steps = series(f"val/{val_tags[0]}")[0]
        for k, step in enumerate(val_steps):
            val_lines.append(
                f"| {int(step) + 1} | "
                + " | ".join(f"{series(f'val/{t}')[1][k]:.3f}" for t in val_tags)
                + " |"
            )
    config_path = Path(args.config).resolve()
    config = yaml.safe_load(config_path.read_text())
    shown_config = (
        config_path.relative_to(ROOT) if config_path.is_relative_to(ROOT) else config_path
    )
    model = config["model"]["init_args"]
    data = config["data"]["init_args"]
    report = "\n".join(
        [
            f"# Grounding fine-tune on {args.domain}",
            "",
            f"`imaginebench fit -c {shown_config}`, summarised by "
            f"`python benchmarks/grounding_report.py --domain {args.domain} --log-dir "
            f"{' '.join(args.log_dir)}"
            + (f" --config {args.config}" if args.config else "")
            + (f" --window {args.window}" if args.window != 50 else "")
            + (f" --out {args.out}" if args.out else "")
            + "` "
            f"({platform.machine()}, CPU, 2 cores).",
            "",
            f"SmolLM2-135M-Instruct (`{model['lm']}`, {model['precision']}), LoRA rank "
            f"{model['lora']['rank']} on {', '.join(model['lora']['targets'])}, state adapter "
            f"MLP width {model.get('state_adapter_hidden', 0)}; {int(steps[-1]) + 1} steps of "
            f"{data['batch_size']} sequences, task weights {data['task_weights']}, lr "
            f"{model['lr']} (adapters {model['adapter_lr']}); seed {config['seed_everything']}. "
            f"Wall-clock: {minutes:.0f} min of training"
            + (f" over {resumes + 1} runs (resumed from checkpoints)." if resumes else "."),
            "",
            "`state_mae` is the mean absolute error of the supervised predicted states (every "
            "state after a rollout's first) in data units; `action_ce` the negative "
            "log-likelihood of the expert's action, whose floor is set by the expert's own "
            "randomness (`benchmarks/action_predictability.py`); `action_accuracy` the "
            "fraction of the expert's actions the model ranks first (the expert is "
            "multi-modal, so this is a pessimistic measure; what the imagined actions achieve "
            "when replayed is the one that counts).",
            "",
            "## Training curve (means over windows)",
            "",
            *lines,
            "",
            "## Held-out rollouts",
            "",
            *val_lines,
            "",
        ]
    )
    print(report)
    Path(args.out).write_text(report)


if __name__ == "__main__":
    main()
