"""Real expert episodes shaped like an imaginary file: a control for what its rollouts teach.

From a real file of a level's episodes (``imaginebench collect --level rephrase ...``), keep
successful episodes either with as many per task as a reference (imaginary) file holds
(``--match``: the same tasks and counts, real actions instead of the LM's) or spread evenly
over all the level's tasks (``--total N``). Trained beside the real data like the imaginary
file, the pair tells which part of its cost comes from the tasks it covers and which from its
actions (docs/metaworld.md, "Which tasks the second stream covers"):

    python benchmarks/oracle_like.py <real rephrase file> --match <imaginary file> --out a.h5
    python benchmarks/oracle_like.py <real rephrase file> --total 133 --out b.h5
"""

from __future__ import annotations

import argparse
from collections import Counter

import numpy as np

from imaginebench.data.format import load_dataset, save_dataset
from imaginebench.envs.base import Task


def task_names(data) -> np.ndarray:
    return np.array([str(Task.from_spec(data.episode(i).task_spec).name) for i in range(len(data))])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("real", help="real episodes of the level (the pool)")
    how = parser.add_mutually_exclusive_group(required=True)
    how.add_argument("--match", help="a file whose per-task counts to copy")
    how.add_argument("--total", type=int, help="episodes spread evenly over the pool's tasks")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    pool = load_dataset(args.real)
    names = task_names(pool)
    if args.match:
        want = dict(Counter(task_names(load_dataset(args.match))))
    else:
        tasks = sorted(set(names))
        each, extra = divmod(args.total, len(tasks))
        want = {task: each + (i < extra) for i, task in enumerate(tasks)}
    keep: list[int] = []
    for task, count in sorted(want.items()):
        candidates = np.flatnonzero((names == task) & np.asarray(pool.episode_success, bool))
        if len(candidates) < count:
            raise SystemExit(f"{task}: {len(candidates)} successful episodes, {count} wanted")
        keep += candidates[:count].tolist()
    save_dataset(pool.select(sorted(keep)), args.out)
    print(
        f"{len(keep)} episodes: {dict(sorted((str(k), v) for k, v in want.items()))} -> {args.out}"
    )


if __name__ == "__main__":
    main()
