"""The dynamics ensemble as a state model on tasks whose entities the real data never shows.

The ensemble is fitted on the real training-level data (the imagine config's settings, with the
domain's dynamics context; read from the cache if fitted before) and rolled open-loop along real
expert episodes of a novel level, each from its first state with its own actions, the model fed
its own predictions: the simulator made those episodes, and here it only judges the model (as
the quality report's replay does). Two rules for entries that never vary in the real data
(Meta-World's wall, which no training task has): as they are, many spreads away from the real
mean (the rule before 2026-12-01), and held (``TransitionEnsemble.next_states(hold_unvaried=
True)``: they enter the members at their real mean, and keep their value). Prints per task the
median error of the hand (mm) after 1, 5, 10, 20 and 40 steps, the moved object's error after
40 steps, and the share of episodes whose open-loop states are all legal (docs/metaworld.md):

    imaginebench collect --domain metaworld --level train --episodes 2000 --seed 0 \\
        --epsilon 0.05 --paraphrases 5 --out real.h5    # the RL configs' real data
    imaginebench collect --domain metaworld --level easy --episodes 80 --seed 0 --out easy.h5
    python benchmarks/ensemble_unseen_entities.py -c configs/imagine_metaworld.yaml \\
        --real real.h5 --novel easy.h5
"""

from __future__ import annotations

import argparse
from collections import defaultdict
from pathlib import Path

import numpy as np
import torch
import yaml

from imaginebench.data.format import load_dataset
from imaginebench.envs import get_domain
from imaginebench.envs.base import Task
from imaginebench.envs.metaworld.layout import TASK_ENTITIES, entity_slice
from imaginebench.imagination.score import fit_ensemble_on

REPORTED_STEPS = (1, 5, 10, 20, 40)


def open_loop(scorer, episode, context, horizon: int, hold: bool) -> np.ndarray:
    """``(T + 1, D)`` states of ``episode`` predicted open-loop from its first state."""
    task = Task.from_spec(episode.task_spec)
    states = [np.asarray(episode.states[0], np.float32)]
    for t in range(min(horizon, len(episode.actions))):
        actions = np.asarray(episode.actions[: t + 1])
        step = None if context is None else context(task, np.stack(states), actions)[-1:]
        states.append(scorer.next_states(states[-1][None], actions[-1:], step, hold)[0])
    return np.stack(states)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("-c", "--config", required=True, help="the imagine config (its ensemble)")
    parser.add_argument("--real", required=True, help="the real training-level data")
    parser.add_argument("--novel", required=True, help="real expert episodes of a novel level")
    args = parser.parse_args()
    torch.set_num_threads(1)
    config = yaml.safe_load(Path(args.config).read_text())
    scorer, how = fit_ensemble_on(args.real, config.get("ensemble"), progress=False)
    novel = load_dataset(args.novel)
    domain = get_domain(novel.domain)
    legal = domain.make_quality().legal
    last = REPORTED_STEPS[-1]
    print(f"ensemble: {how['fit']}; {len(novel)} episodes of {args.novel}\n")
    header = " | ".join(f"hand {k}" for k in REPORTED_STEPS)
    print(f"| task | unvaried entries | episodes | {header} | object {last} | all legal |")
    print("|---|---|---|" + "---|" * (len(REPORTED_STEPS) + 2))
    for hold in (False, True):
        found = defaultdict(list)  # task -> (hand errors, object errors, all legal) per episode
        for i in range(len(novel)):
            episode = novel.episode(i)
            task = Task.from_spec(episode.task_spec)
            predicted = open_loop(scorer, episode, domain.dynamics_context, last, hold)
            real = np.asarray(episode.states[: len(predicted)], np.float32)
            moved = entity_slice(TASK_ENTITIES[task.name][0])
            hand = 1000 * np.linalg.norm(predicted[:, :3] - real[:, :3], axis=1)
            obj = 1000 * np.linalg.norm(predicted[:, moved][:, :3] - real[:, moved][:, :3], axis=1)
            found[task.name].append((hand, obj, bool(legal(predicted).all())))
        for name, episodes in sorted(found.items()):
            cells = [_median([h[k] for h, _, _ in episodes if len(h) > k]) for k in REPORTED_STEPS]
            cells.append(_median([o[min(last, len(o) - 1)] for _, o, _ in episodes]))
            share = 100 * np.mean([ok for _, _, ok in episodes])
            rule = "held" if hold else "as they are"
            print(f"| {name} | {rule} | {len(episodes)} | {' | '.join(cells)} | {share:.0f} % |")


def _median(values: list[float]) -> str:
    return f"{np.median(values):.1f}" if values else "–"


if __name__ == "__main__":
    main()
