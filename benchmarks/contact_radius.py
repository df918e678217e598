"""Do imagined Meta-World objects start moving out of the hand's reach, and would a contact rule
pick the imagined rollouts whose actions work?

In the real data an object starts moving (or speeds up) only when the tool centre point is
near it; past contact it may coast. For each entity this takes the distance from the tool
centre point to the entity at the real steps where the entity starts or speeds up, and a
radius at a quantile of it. A rollout breaks the contact rule when its entity starts or speeds
up farther than that from the tool centre point. The table gives, per quantile, the share of
real episodes that pass (the rule's false alarms) and the imagined rollouts that pass, with
their replayed success in the simulator (a judge only):

    python benchmarks/contact_radius.py shipped:metaworld/imaginary_rephrase.h5 \\
        --real ~/.cache/imaginebench/metaworld_train_real_n2000_s0_e0.05_p5_x3.h5
"""

from __future__ import annotations

import argparse

import numpy as np

from imaginebench.data.format import load_dataset
from imaginebench.data.shipped import resolve_data_path
from imaginebench.envs.base import Task
from imaginebench.envs.metaworld.layout import TASK_ENTITIES, entity_pos, tcp
from imaginebench.imagination.quality import replayed_success

MOVES = 1e-3  # m per step: the entity moves
SPEEDS_UP = 1e-3  # m per step more than its last step: it starts or speeds up


def starts_and_distances(episode) -> tuple[str, np.ndarray, np.ndarray]:
    """The task's first entity, whether each step starts or speeds it up, and the tool centre
    point's distance to it before each step."""
    task = Task.from_spec(episode.task_spec)
    states = np.asarray(episode.states, np.float64)
    entity = TASK_ENTITIES[task.name][0]
    where = entity_pos(entity)
    step = np.linalg.norm(np.diff(states[:, where], axis=0), axis=1)
    last = np.r_[0.0, step[:-1]]
    distance = np.linalg.norm(states[:-1, where] - tcp(states[:-1]), axis=1)
    return entity, (step > MOVES) & (step > last + SPEEDS_UP), distance


def passes(episode, radius: dict[str, float]) -> bool:
    entity, starts, distance = starts_and_distances(episode)
    return not np.any(starts & (distance > radius.get(entity, np.inf)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("file", help="imaginary dataset (a path or shipped:<domain>/<file>)")
    parser.add_argument("--real", required=True)
    parser.add_argument("--quantiles", type=float, nargs="+", default=[0.95, 0.99, 0.999, 1.0])
    args = parser.parse_args()
    real = load_dataset(resolve_data_path(args.real))
    distinct = real.distinct_episodes()  # a rollout stored once per wording, once
    real_episodes = [real.episode(int(i)) for i in distinct]
    at_start: dict[str, list[np.ndarray]] = {}
    for episode in real_episodes:
        entity, starts, distance = starts_and_distances(episode)
        at_start.setdefault(entity, []).append(distance[starts])
    imagined = load_dataset(resolve_data_path(args.file))
    episodes = [imagined.episode(i) for i in range(len(imagined))]
    replayed = replayed_success(imagined.domain, episodes)
    print(f"{args.file}: {len(episodes)} rollouts, replayed success {100 * replayed.mean():.1f} %")
    print(
        "| quantile | radius per entity (cm) | real episodes passing | imagined passing | "
        "replayed success of those | of the others |"
    )
    print("|---|---|---|---|---|---|")
    for q in args.quantiles:
        radius = {
            e: float(np.quantile(np.concatenate(d), q))
            for e, d in at_start.items()
            if len(np.concatenate(d))
        }
        real_pass = np.mean([passes(e, radius) for e in real_episodes])
        keep = np.array([passes(e, radius) for e in episodes])
        radii = ", ".join(f"{e} {100 * r:.1f}" for e, r in sorted(radius.items()))
        kept = f"{100 * replayed[keep].mean():.1f} %" if keep.any() else "—"
        others = f"{100 * replayed[~keep].mean():.1f} %" if (~keep).any() else "—"
        print(f"| {q} | {radii} | {100 * real_pass:.1f} % | {keep.sum()} | {kept} | {others} |")


if __name__ == "__main__":
    main()
