"""Meta-World's two-stage tasks: how far imagined rollouts get, in imagination and replayed.

For each make-coffee and locked-door-open rollout of an imagined file (best made without the
own-success filter, ``--filters.require_success false``), the step at which its imagined states
reach stage 1 (the mug under the nozzle; the door unlocked) and whether its actions, executed in
the simulator from its first state, reach stage 1 and the goal (the simulator only judges), with
how far stage 1's object moved, how far the hand was from it while it moved, and where the hand
ends beside stage 2's object.

    python benchmarks/composition_stages.py imagined_hard.h5
"""

from __future__ import annotations

import argparse
from collections import defaultdict

import numpy as np

from imaginebench.data.format import load_dataset
from imaginebench.envs.base import Task
from imaginebench.envs.metaworld.layout import TASK_ENTITIES, entity_pos, tcp
from imaginebench.imagination.quality import replay

COMPOSITIONS = ("make-coffee", "locked-door-open")


def stage_summary(task: Task, states: np.ndarray) -> dict[str, float]:
    """Stage 1 reached (and its step), success, stage 1's object's travel and the hand's
    median distance to it on the steps it moves, the hand's distance to stage 2's object at the
    end."""
    first, second = TASK_ENTITIES[task.name]
    stage = task.stage(states)
    obj = states[:, entity_pos(first)]
    moving = np.linalg.norm(np.diff(obj, axis=0), axis=-1) > 1e-3  # a step that moves it > 1 mm
    hand_to_first = np.linalg.norm(tcp(states[1:]) - obj[1:], axis=-1)
    return {
        "stage1": bool(stage.any()),
        "stage1_step": int(np.argmax(stage)) if stage.any() else -1,
        "moved": float(np.linalg.norm(obj[-1] - obj[0])),
        "hand_to_second": float(np.linalg.norm(tcp(states[-1]) - states[-1, entity_pos(second)])),
        "success": bool(task.success(states)[-1]),
        "hand_while_moving": float(np.median(hand_to_first[moving])) if moving.any() else np.nan,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("imagined", help="imagined hard-level Meta-World file (.h5)")
    args = parser.parse_args()
    data = load_dataset(args.imagined)
    episodes = [data.episode(i) for i in range(len(data))]
    episodes = [e for e in episodes if Task.from_spec(e.task_spec).name in COMPOSITIONS]
    if not episodes:
        raise SystemExit(f"{args.imagined} holds no make-coffee or locked-door-open rollout")
    rows: dict[str, list[tuple[dict, dict]]] = defaultdict(list)
    for episode, (replayed, _) in zip(episodes, replay("metaworld", episodes)):
        task = Task.from_spec(episode.task_spec)
        rows[task.name].append((stage_summary(task, episode.states), stage_summary(task, replayed)))
    print(
        "| task | rollouts | stage 1 imagined | stage 1 replayed | success imagined | "
        "success replayed | stage-1 object moved, imagined / replayed (m, median) | "
        "hand to stage-2 object at the end, imagined / replayed (m, median) | "
        "hand to stage-1 object while it moves, imagined / replayed (m, median) |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for name, pairs in sorted(rows.items()):
        im = [p[0] for p in pairs]
        sim = [p[1] for p in pairs]

        def count(side: list[dict], key: str) -> int:
            return sum(bool(r[key]) for r in side)

        def median(side: list[dict], key: str) -> float:
            values = [r[key] for r in side if np.isfinite(r[key])]
            return float(np.median(values)) if values else float("nan")

        print(
            f"| {name} | {len(pairs)} | {count(im, 'stage1')} | {count(sim, 'stage1')} | "
            f"{count(im, 'success')} | {count(sim, 'success')} | "
            f"{median(im, 'moved'):.3f} / {median(sim, 'moved'):.3f} | "
            f"{median(im, 'hand_to_second'):.3f} / {median(sim, 'hand_to_second'):.3f} | "
            f"{median(im, 'hand_while_moving'):.3f} / {median(sim, 'hand_while_moving'):.3f} |"
        )


if __name__ == "__main__":
    main()
