"""Meta-World's wall against an imaginary file: which rollouts pass through it, and what the
ensemble's confidence (recomputed with the imagination config's ensemble) says of their steps.

Per task: rollouts, rollouts whose states all clear the wall (the legality judge's
``wall_clear``), the simulator's verdict on their transitions (teacher-forced replay: judging
only), the share of transitions at the config's ``min_confidence`` or above, the AUROC of the
confidence for correctness, and replayed success:

    python benchmarks/wall_and_confidence.py FILE --real REAL [-c configs/imagine_metaworld.yaml]
"""

from __future__ import annotations

import argparse
from collections import defaultdict

import numpy as np
import yaml

from imaginebench.data.format import load_dataset
from imaginebench.envs import get_domain
from imaginebench.envs.base import Task
from imaginebench.envs.metaworld.quality import wall_clear
from imaginebench.imagination.confidence import EnsembleConfig, auroc
from imaginebench.imagination.quality import replayed_success
from imaginebench.imagination.score import fit_ensemble_on


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("file")
    parser.add_argument("--real", required=True)
    parser.add_argument("-c", "--config", default="configs/imagine_metaworld.yaml")
    args = parser.parse_args()
    config = yaml.safe_load(open(args.config))
    threshold = config["filters"]["min_confidence"]
    scorer, _ = fit_ensemble_on(args.real, EnsembleConfig(**config.get("ensemble", {})), True)
    data = load_dataset(args.file)
    judge = get_domain("metaworld").make_quality()
    episodes = [data.episode(i) for i in range(len(data))]
    replayed = np.asarray(replayed_success("metaworld", episodes), dtype=bool)
    rows: dict[str, dict[str, list]] = defaultdict(lambda: defaultdict(list))
    for i, episode in enumerate(episodes):
        task = Task.from_spec(data.tasks[data.episode_task[i]])
        context = scorer.context(task, episode.states[:-1], episode.actions)
        confidence = scorer.transition_confidence(
            episode.states[:-1], episode.actions, episode.states[1:], context
        )
        correct = np.asarray(judge.correct_transitions(episode.states, episode.actions))
        row = rows[task.name]
        row["clear"].append(bool(wall_clear(episode.states).all()))
        row["correct"].append(correct)
        row["confidence"].append(confidence)
        row["replayed"].append(replayed[i])
    print(f"{args.file}: {len(episodes)} rollouts; min_confidence {threshold}")
    print("| task | rollouts | clear of the wall | correct transitions | confident steps "
          "| rollouts confident throughout | AUROC | replayed success |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|")
    for name, row in sorted(rows.items()):
        correct = np.concatenate(row["correct"])
        confidence = np.concatenate(row["confidence"])
        throughout = sum(c.min(initial=1.0) >= threshold for c in row["confidence"])
        print(
            f"| {name} | {len(row['clear'])} | {sum(row['clear'])} | {100 * correct.mean():.1f} % "
            f"| {100 * (confidence >= threshold).mean():.1f} % | {throughout} "
            f"| {auroc(confidence, correct):.2f} | {sum(row['replayed'])} |"
        )


if __name__ == "__main__":
    main()
