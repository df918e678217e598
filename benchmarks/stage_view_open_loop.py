"""Does the imagination's state model reproduce a composition's stage 1 along real actions?

Rolls the dynamics ensemble of ``configs/imagine_metaworld.yaml`` (fitted on the real training
data, read from the cache) forward from the first state of real expert episodes of Meta-World's
two compositions, with the episodes' own actions, feeding it its own predictions. Once with the
whole state, once with the stage views of ``decoding.stage_tasks`` (only the current stage's
task's entities in view, the others held; :meth:`Task.as_stage_task`). Per task: how often
stage 1 is reached, in the real episodes and open loop, and how far stage 1's object moved.
The expert episodes of the ``hard`` tasks only judge the state model here; they are no data.

    imaginebench collect --domain metaworld --level hard --episodes 80 --seed 11 --epsilon 0 \
        --out hard_expert.h5
    python benchmarks/stage_view_open_loop.py --real <the imagination's real file> \
        --episodes hard_expert.h5
"""

from __future__ import annotations

import argparse
from collections import defaultdict

import numpy as np
import yaml

from imaginebench.data.format import load_dataset
from imaginebench.envs.base import Task
from imaginebench.envs.metaworld.layout import entity_pos
from imaginebench.imagination.score import fit_ensemble_on

STAGE_1_OBJECT = {"locked-door-open": "lock", "make-coffee": "coffee"}


def open_loop(scorer, task: Task, states: np.ndarray, actions: np.ndarray, staged: bool):
    """``(T + 1, D)`` states the ensemble predicts along ``actions`` from ``states[0]``."""
    rolled = [states[0].astype(np.float32)]
    for t in range(len(actions)):
        history = np.stack(rolled)
        current = history[-1]
        in_view = task.as_stage_task(history, "")[1] if staged else np.ones_like(current, bool)
        context = scorer.context(task, history, actions[: t + 1])[-1:]  # (1, K)
        predicted = scorer.next_states((current * in_view)[None], actions[t : t + 1], context)[0]
        rolled.append(task.observed(np.stack([*rolled, np.where(in_view, predicted, current)])))
    return np.stack(rolled)


def travel(states: np.ndarray, entity: str) -> float:
    """How far ``entity`` ends from where it started (m)."""
    where = entity_pos(entity)
    return float(np.linalg.norm(states[-1, where] - states[0, where]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--real", required=True, help="the real file the ensemble is fitted on")
    parser.add_argument("--episodes", required=True, help="real episodes of the compositions")
    parser.add_argument("--config", default="configs/imagine_metaworld.yaml")
    parser.add_argument("--per-task", type=int, default=20)
    parser.add_argument(
        "--still-measured-on",
        choices=("in_use", "all"),
        default="in_use",
        help="the ensemble's rule for entries held still (all: the rule before 2026-12-06)",
    )
    args = parser.parse_args()
    with open(args.config) as f:
        settings = yaml.safe_load(f)["ensemble"] | {"still_measured_on": args.still_measured_on}
    scorer, _ = fit_ensemble_on(args.real, settings, progress=False)
    data = load_dataset(args.episodes)
    rows: dict[str, list[dict[str, float]]] = defaultdict(list)
    for episode in (data.episode(i) for i in range(len(data))):
        task = Task.from_spec(episode.task_spec)
        name = getattr(task, "name", "")
        if name not in STAGE_1_OBJECT or len(rows[name]) >= args.per_task:
            continue
        entity = STAGE_1_OBJECT[name]
        row = {
            "real stage 1": float(task.stage(episode.states).max()),
            "real travel": travel(episode.states, entity),
        }
        for staged in (False, True):
            rolled = open_loop(scorer, task, episode.states, episode.actions, staged)
            label = "stage views" if staged else "whole state"
            row[f"{label} stage 1"] = float(task.stage(rolled).max())
            row[f"{label} travel"] = travel(rolled, entity)
        rows[name].append(row)
    print(f"ensemble {settings}; episodes {args.episodes}")
    keys = list(next(iter(rows.values()))[0])
    print("| task | episodes | " + " | ".join(keys) + " |")
    print("|---|---|" + "---|" * len(keys))
    for name, results in sorted(rows.items()):
        cells = []
        for key in keys:
            values = [r[key] for r in results]
            cells.append(
                f"{100 * np.mean(values):.0f} %"
                if key.endswith("stage 1")
                else f"{np.median(values):.3f}"
            )
        print(f"| {name} | {len(results)} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
