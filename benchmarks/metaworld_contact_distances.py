"""Meta-World: how far the hand is from an object when the object moves, real against imagined.

A real object moves only when something touches it. For every step at which an entity moves
more than 2 mm, this takes the tool centre point's smallest distance to the entity's position
over that step and the ``--window`` steps before it (an object may slide on after a push), and
tabulates those distances per task and entity for each file. With ``--real``, each imagined
(task, entity) is set beside the real data's range for the same entity (any task), and the
share of its moving steps beyond the real maximum is counted; an entity the real data never
moves has no range. Positions are the entities' body origins, so the distances are offsets
(the coffee button's body sits about 0.12 m from where the hand presses it), comparable only
per entity.

    python benchmarks/metaworld_contact_distances.py imagined_hard.h5 \
        --real ~/.cache/imaginebench/metaworld_train_real_n2000_s0_e0.05_p5_x3.h5
"""

from __future__ import annotations

import argparse
from collections import defaultdict

import numpy as np

from imaginebench.data.format import load_dataset
from imaginebench.envs.base import Task
from imaginebench.envs.metaworld.layout import entity_pos, tcp
from imaginebench.envs.metaworld.quality import filled_entities

MOVE = 0.002  # m: a step that moves the entity further than this counts as a move


def contact_distances(states: np.ndarray, window: int = 5) -> dict[str, np.ndarray]:
    """Per entity the scene of ``states`` (T, 91) fills: the hand's smallest distance to it over
    each step that moves it and the ``window`` steps before (one value per moving step)."""
    hand = tcp(states)
    out: dict[str, np.ndarray] = {}
    for entity in filled_entities(states[0]):
        position = states[:, entity_pos(entity)]
        distance = np.linalg.norm(hand - position, axis=-1)
        steps = np.flatnonzero(np.linalg.norm(np.diff(position, axis=0), axis=-1) > MOVE)
        out[entity] = np.array(
            [distance[max(0, t - window) : t + 2].min() for t in steps], dtype=np.float64
        )
    return out


def file_distances(path: str, window: int) -> dict[tuple[str, str], np.ndarray]:
    """(task, entity) -> the contact distances of all the file's moving steps."""
    dataset = load_dataset(path)
    pooled: dict[tuple[str, str], list[np.ndarray]] = defaultdict(list)
    for i in range(len(dataset)):
        episode = dataset.episode(i)
        task = Task.from_spec(episode.task_spec).name
        for entity, values in contact_distances(episode.states, window).items():
            pooled[task, entity].append(values)
    return {key: np.concatenate(parts) for key, parts in sorted(pooled.items())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="+", help="Meta-World rollout files (.h5)")
    parser.add_argument("--real", help="real file whose per-entity range the others are set beside")
    parser.add_argument("--window", type=int, default=5, help="steps before a move that count")
    args = parser.parse_args()
    real_max: dict[str, float] = {}
    if args.real:
        for (_, entity), values in file_distances(args.real, args.window).items():
            if len(values):
                real_max[entity] = max(real_max.get(entity, 0.0), float(values.max()))
    for path in ([args.real] if args.real else []) + args.files:
        print(f"\n{path}\n")
        head = "| task | entity | moving steps | hand distance (m): min / median / p95 / max |"
        extra = " real max (m) | beyond it |" if args.real and path != args.real else ""
        print(head + extra)
        print("|---" * (4 + (2 if extra else 0)) + "|")
        for (task, entity), values in file_distances(path, args.window).items():
            if not len(values):
                continue
            q = np.quantile(values, [0.0, 0.5, 0.95, 1.0])
            row = f"| {task} | {entity} | {len(values)} | " + " / ".join(f"{v:.3f}" for v in q)
            if extra:
                limit = real_max.get(entity)
                beyond = "never moves in it" if limit is None else f"{np.mean(values > limit):.1%}"
                row += f" | {'—' if limit is None else f'{limit:.3f}'} | {beyond}"
            print(row + " |")


if __name__ == "__main__":
    main()
