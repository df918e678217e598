"""What the lookahead's search alone does on Meta-World, in the state model and replayed.

From fresh scenes of a level's tasks (``--starts`` per task, the suite's seeded episodes), each
action of up to ``--steps`` is chosen by the lookahead (:mod:`imaginebench.imagination.lookahead`)
in the dynamics ensemble fitted on the real data with the mocap context (the imagination's
state model, read from the cache when ``imagine`` fitted it with the same settings), each
refining a zero action (no LM: what the search alone does), for each ``--penalties`` weight of
the members' disagreement. A rollout ends when its imagined states satisfy its task, as an
imagined rollout does. Printed per weight: the share imagined successful, the share whose
actions, executed in the simulator from the same scene up to that step, succeed (the
simulator only judges), and the members' mean disagreement about the steps taken beside that of
held-out real transitions (``--heldout``: real episodes the ensemble never saw, e.g.
``imaginebench collect --domain metaworld --level train --episodes 100 --seed 1 --epsilon
0.05``).

    python benchmarks/lookahead_metaworld.py --real <the imagination's real file> \\
        --heldout <file> --level rephrase --penalties 0 0.05 0.2 --starts 2
"""

from __future__ import annotations

import argparse
from collections import defaultdict

import numpy as np
import torch

from imaginebench.data.format import load_dataset
from imaginebench.envs import get_domain, make
from imaginebench.imagination.confidence import _transition_states, dataset_context
from imaginebench.imagination.lookahead import Lookahead, LookaheadConfig
from imaginebench.imagination.score import fit_ensemble_on

#: the ensemble settings of configs/imagine_metaworld.yaml (so the cached fit is reused)
ENSEMBLE = {"nll_beta": 1.0, "max_steps": 6000, "eval_every": 500, "patience": 4}


def heldout_spread(ensemble, path: str) -> np.ndarray:
    """The members' disagreement about each held-out real transition, with its context."""
    data = load_dataset(path)
    states, _ = _transition_states(data)
    context = dataset_context(data, get_domain("metaworld").dynamics_context)
    _, spread = ensemble.step_with_spread(states.numpy(), np.asarray(data.actions), context)
    return spread


def imagined_step(ensemble, task, past: np.ndarray, actions: np.ndarray):
    """The imagined state after ``past`` ``(t + 1, 91)`` under ``actions`` ``(t + 1, 4)`` (the
    last is this step's), as the rollout observes it, and the members' disagreement about it."""
    context = get_domain("metaworld").dynamics_context(task, past, actions)[-1:]
    nxt, spread = ensemble.step_with_spread(past[-1:], actions[-1:], context)
    return task.observed(np.concatenate([past, nxt])), float(spread[0])


def search(ensemble, config, specs, steps, seed, tasks=None):
    """The searched actions of each episode (up to its imagined success), whether the imagined
    states succeed, the mean disagreement of the steps taken, and each episode's imagined
    states. ``tasks`` (default: the episodes' own) are what the search scores plans with."""
    domain = get_domain("metaworld")
    lookahead = Lookahead(
        ensemble, config, domain.make_quality().legal, plan_context=domain.plan_context
    )
    generator = torch.Generator().manual_seed(seed)
    tasks = [spec.task for spec in specs] if tasks is None else list(tasks)
    histories = [[np.asarray(spec.initial_state, np.float32)] for spec in specs]
    actions: list[list[np.ndarray]] = [[] for _ in specs]
    done = np.zeros(len(specs), dtype=bool)
    spreads: list[float] = []
    for _ in range(steps):
        rows = np.flatnonzero(~done).tolist()
        if not rows:
            break
        past = [np.stack(histories[i]) for i in rows]
        taken = [np.stack(actions[i]) if actions[i] else np.zeros((0, 4), np.float32) for i in rows]
        zeros = np.zeros((len(rows), 4), np.float32)
        chosen = lookahead.refine(rows, [tasks[i] for i in rows], past, zeros, generator, taken)
        for row, i in enumerate(rows):
            path = np.concatenate([taken[row], chosen[row : row + 1]])
            state, spread = imagined_step(ensemble, tasks[i], past[row], path)
            histories[i].append(state)
            actions[i].append(chosen[row])
            spreads.append(spread)
            done[i] = bool(tasks[i].is_success(np.stack(histories[i])))
    return actions, done, float(np.mean(spreads)), [np.stack(h) for h in histories]


def replayed(spec, actions) -> tuple[np.ndarray, bool]:
    """The simulator's states under ``actions`` from the episode's scene (up to its success),
    and whether they succeed."""
    env = make("metaworld", spec.level, max_episode_steps=10**9).unwrapped
    obs, _ = env.reset(options={"episode": spec})
    states, success = [obs], False
    try:
        for action in actions:
            obs, _, terminated, _, info = env.step(action)
            states.append(obs)
            if info["is_success"] or terminated:
                success = bool(info["is_success"])
                break
    finally:
        env.close()
    return np.stack(states), success


def replay(spec, actions) -> bool:
    """Whether ``actions``, executed in the simulator from the episode's scene, succeed."""
    return replayed(spec, actions)[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--real", required=True, help="real data the ensemble is fitted on")
    parser.add_argument("--heldout", help="real episodes the ensemble never saw")
    parser.add_argument("--level", default="rephrase")
    parser.add_argument("--penalties", type=float, nargs="+", default=[0.0, 0.05, 0.2])
    parser.add_argument("--starts", type=int, default=2, help="scenes per task")
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--horizon", type=int, default=12)
    parser.add_argument("--candidates", type=int, default=256)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    torch.set_num_threads(1)
    ensemble, _ = fit_ensemble_on(args.real, ENSEMBLE, progress=True)
    suite = get_domain("metaworld").make_suite()
    tasks = sorted(suite.tasks(args.level), key=lambda task: task.name)
    specs = suite.episodes_of(args.level, tasks, args.starts, args.seed, draw=1)
    if args.heldout:
        spread = heldout_spread(ensemble, args.heldout)
        print(
            f"held-out real transitions: disagreement mean {spread.mean():.3f}, median "
            f"{np.median(spread):.3f}, 90 % quantile {np.quantile(spread, 0.9):.3f}"
        )
    print(f"{len(specs)} scenes of {len(tasks)} tasks ({args.level}), {args.steps} steps")
    print(
        "| penalty | imagined success | replayed success | mean disagreement | replayed per task |"
    )
    print("|---|---|---|---|---|")
    for penalty in args.penalties:
        config = LookaheadConfig(
            horizon=args.horizon, candidates=args.candidates, spread_penalty=penalty
        )
        actions, imagined, spread, _ = search(ensemble, config, specs, args.steps, args.seed)
        replayed = np.array([replay(spec, a) for spec, a in zip(specs, actions)])
        per_task = defaultdict(list)
        for spec, ok in zip(specs, replayed):
            per_task[spec.task.name].append(ok)
        tasks = ", ".join(f"{k} {sum(v)}/{len(v)}" for k, v in sorted(per_task.items()))
        print(
            f"| {penalty} | {imagined.mean():.0%} | {replayed.mean():.0%} | {spread:.3f} | "
            f"{tasks} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
