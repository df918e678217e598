"""Per task: do the imagined rollouts that reach their goal also reach it in the simulator?

``imaginebench imagine``'s own-success filter keeps a rollout when its *imagined* states satisfy
its instruction; the quality report's replayed success executes its actions in the simulator
from its first state. This splits both by task, with how often they agree, so that one can see
whether the own-success filter keeps the rollouts whose actions work (the simulator only judges
here, as in the quality report).

    python benchmarks/imagined_vs_replayed.py imagined.h5 [more.h5 ...] --domain metaworld
"""

from __future__ import annotations

import argparse
from collections import defaultdict

import numpy as np

from imaginebench.data.format import load_dataset
from imaginebench.envs.base import Task
from imaginebench.imagination.quality import replayed_success


def per_task(path: str, domain: str) -> dict[str, dict[str, int]]:
    """``task -> {rollouts, imagined, replayed, both}`` counts for one imagined file."""
    data = load_dataset(path)
    episodes = [data.episode(i) for i in range(len(data))]
    replayed = replayed_success(domain, episodes)
    rows: dict[str, dict[str, int]] = defaultdict(
        lambda: {"rollouts": 0, "imagined": 0, "replayed": 0, "both": 0}
    )
    for episode, works in zip(episodes, np.asarray(replayed, dtype=bool).tolist()):
        task = Task.from_spec(episode.task_spec)
        row = rows[getattr(task, "name", task.family)]
        imagined = bool(episode.success)
        row["rollouts"] += 1
        row["imagined"] += imagined
        row["replayed"] += works
        row["both"] += imagined and works
    return dict(sorted(rows.items()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="+")
    parser.add_argument("--domain", required=True)
    args = parser.parse_args()
    for path in args.files:
        rows = per_task(path, args.domain)
        print(f"\n{path}")
        print("| task | rollouts | imagined success | replayed success | both |")
        print("|---|---|---|---|---|")
        for task, row in rows.items():
            print(
                f"| {task} | {row['rollouts']} | {row['imagined']} | {row['replayed']} | "
                f"{row['both']} |"
            )
        total = {k: sum(r[k] for r in rows.values()) for k in next(iter(rows.values()))}
        print(
            f"| all | {total['rollouts']} | {total['imagined']} | {total['replayed']} | "
            f"{total['both']} |"
        )


if __name__ == "__main__":
    main()
