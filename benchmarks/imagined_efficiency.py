"""How many steps imagined rollouts take against the domain's expert from the same starts.

For every episode of an imaginary dataset, the expert (no exploration noise) runs in the
simulator from the episode's imagined initial state on its task and instruction; the table
gives, per task family, the imagined and the expert's mean length and their mean ratio. The
simulator only judges here: nothing is written back to the file. A ratio near 1 means the
imagined rollouts are as direct as the expert's; BC on a file with ratio 2 imitates detours.

    python benchmarks/imagined_efficiency.py imaginebench/datasets/babyai/imaginary_rephrase.h5
"""

from __future__ import annotations

import argparse
from collections import defaultdict

import numpy as np

from imaginebench.data.collect import rollout
from imaginebench.data.format import load_dataset
from imaginebench.envs import make
from imaginebench.envs.base import EpisodeSpec, Task
from imaginebench.experts import make_expert


def family_lengths(path: str) -> dict[str, np.ndarray]:
    """Per task family, rows of (imagined length, expert length, expert success)."""
    data = load_dataset(path)
    level = data.episode(0).level
    env = make(data.domain, level).unwrapped
    expert = make_expert(data.domain, epsilon=0.0, seed=0)
    rows: dict[str, list[tuple[int, int, bool]]] = defaultdict(list)
    for index in range(len(data)):
        episode = data.episode(index)
        task = Task.from_spec(episode.task_spec)
        plan = EpisodeSpec(task, episode.instruction, episode.states[0], episode.level)
        expert_run = rollout(env, expert, plan, episode.level)
        rows[task.family].append(
            (len(episode.actions), len(expert_run.actions), expert_run.success)
        )
    env.close()
    return {family: np.asarray(values, dtype=float) for family, values in rows.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="+", help="imaginary dataset files")
    args = parser.parse_args()
    for path in args.files:
        print(f"\n{path}\n")
        print(
            "| family | rollouts | imagined steps | expert steps | imagined / expert "
            "| expert success |"
        )
        print("|---|---|---|---|---|---|")
        everything = []
        for family, rows in sorted(family_lengths(path).items()):
            everything.append(rows)
            print(_row(family, rows))
        print(_row("all", np.concatenate(everything)))


def _row(name: str, rows: np.ndarray) -> str:
    ratio = rows[:, 0] / np.maximum(rows[:, 1], 1)
    return (
        f"| {name} | {len(rows)} | {rows[:, 0].mean():.1f} | {rows[:, 1].mean():.1f} | "
        f"{ratio.mean():.2f} | {100 * rows[:, 2].mean():.1f} % |"
    )


if __name__ == "__main__":
    main()
