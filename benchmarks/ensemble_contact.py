"""Does a Meta-World dynamics ensemble reproduce what the expert's actions do to the objects?

Own-success filtering can only pick imagined rollouts whose actions work if the state model
moves the objects as the simulator does. This measures that on real data, with no LM: fit
``TransitionEnsemble`` on the distinct real rollouts but ``--test`` held-out ones, roll each
held-out episode forward from its first state with its own (expert) actions, the model fed its
own predictions, and compare with the episode's real states:

* the hand's and the task object's position error (mm, median over episodes) after 10 and 30
  steps and at the episode's end;
* success agreement, the own-success filter's view: each held-out episode's actions, and the
  same actions with Gaussian noise (``--noise``, clipped to the action box), are executed in the
  simulator from the episode's first state (the judge) and rolled through the ensemble; recall
  is the share of the simulator's successes that the ensemble's states also call successes,
  precision the share of the ensemble's successes that the simulator confirms (the replayed
  success an own-success filter would get on such actions).

Variants of what the members see beyond the state and action: the domain's
``dynamics_context`` (the last change of state and the mocap pull), and that plus the offset
from the tool centre point to every filled entity slot (a function of the state alone, so it
can be computed for imagined states as well):

    python benchmarks/ensemble_contact.py \
        --real ~/.cache/imaginebench/metaworld_train_real_n2000_s0_e0.05_p5_x3.h5
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from collections.abc import Callable

import numpy as np
import torch
from ensemble_open_loop import ensemble_settings, held_out_split

from imaginebench.data.dataset import RolloutDataset
from imaginebench.data.format import load_dataset
from imaginebench.envs import get_domain
from imaginebench.envs.base import Task
from imaginebench.envs.metaworld.layout import (
    ENTITIES,
    TASK_ENTITIES,
    entity_pos,
    tcp,
)
from imaginebench.imagination.confidence import TransitionEnsemble
from imaginebench.imagination.quality import replayed_success

Context = Callable[[Task, np.ndarray, np.ndarray], np.ndarray]


def entity_offsets(states: np.ndarray) -> np.ndarray:
    """``(T, 36)``: each entity slot's position minus the tool centre point, zero for a slot
    the state leaves empty."""
    states = np.asarray(states, dtype=np.float64)
    centre = tcp(states)
    out = []
    for entity in ENTITIES:
        position = states[:, entity_pos(entity)]
        filled = np.any(position != 0, axis=1, keepdims=True)
        out.append(np.where(filled, position - centre, 0.0))
    return np.concatenate(out, axis=1)


def with_offsets(context: Context) -> Context:
    def extended(task: Task, states: np.ndarray, actions: np.ndarray) -> np.ndarray:
        base = context(task, states, actions)
        return np.concatenate([base, entity_offsets(states)], axis=1).astype(np.float32)

    return extended


def open_loop(scorer: TransitionEnsemble, episode, context: Context) -> np.ndarray:
    """The episode's states rolled forward from its first with its own actions, by the
    members' mean change (as ``imagine`` advances states)."""
    task = Task.from_spec(episode.task_spec)
    states = [np.asarray(episode.states[0], np.float32)]
    actions = np.asarray(episode.actions)
    for t in range(len(actions)):
        step = context(task, np.stack(states), actions[: t + 1])[-1:]
        states.append(scorer.next_states(states[-1][None], actions[t : t + 1], step)[0])
    return np.stack(states)


def action_sets(data, episodes, noises: list[float], seed: int) -> dict[float, list]:
    """Per noise level, the held-out episodes with their actions perturbed (0: as recorded)."""
    rng = np.random.default_rng(seed)
    out = {}
    for noise in noises:
        out[noise] = []
        for e in episodes:
            episode = data.episode(int(e))
            actions = np.asarray(episode.actions, np.float32)
            if noise > 0:
                actions = np.clip(actions + rng.normal(0, noise, actions.shape), -1, 1)
            out[noise].append(dataclasses.replace(episode, actions=actions.astype(np.float32)))
    return out


def measure(
    scorer: TransitionEnsemble, sets: dict[float, list], judged: dict[float, np.ndarray], context
) -> dict[str, float]:
    """Errors along the recorded actions; recall and precision of the ensemble's own success
    against the simulator's on every action set."""
    hand, obj = {10: [], 30: [], "end": []}, {10: [], 30: [], "end": []}
    row: dict[str, float] = {}
    for noise, episodes in sets.items():
        imagined_success, member_successes, members = [], [], 0
        for episode in episodes:
            task = Task.from_spec(episode.task_spec)
            imagined = open_loop(scorer, episode, context).astype(np.float64)
            imagined_success.append(bool(np.any(task.success(imagined))))
            alone = scorer.member_rollouts(task, episode.states[0], episode.actions)
            member_successes.append(sum(bool(np.any(task.success(r))) for r in alone))
            members = len(alone)
            if noise:
                continue
            real = np.asarray(episode.states, np.float64)
            where = entity_pos(TASK_ENTITIES[task.name][0])
            for key in hand:
                t = len(real) - 1 if key == "end" else min(key, len(real) - 1)
                hand[key].append(1000 * np.linalg.norm(imagined[t, :3] - real[t, :3]))
                obj[key].append(1000 * np.linalg.norm(imagined[t, where] - real[t, where]))
        rules = {
            "mean": np.array(imagined_success),
            "all members": np.array(member_successes) == members,
        }
        row[f"σ {noise}: sim successes"] = f"{judged[noise].sum()}"
        for rule, own in rules.items():
            both = np.sum(judged[noise] & own)
            row[f"σ {noise} {rule}: own / recall / precision"] = (
                f"{own.sum()} / {both / max(judged[noise].sum(), 1):.2f} / "
                f"{both / max(own.sum(), 1):.2f}"
            )
    return {
        **{f"hand {k} (mm)": float(np.median(v)) for k, v in hand.items()},
        **{f"object {k} (mm)": float(np.median(v)) for k, v in obj.items()},
        **row,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--real", required=True)
    parser.add_argument("--test", type=int, default=100, help="held-out distinct rollouts")
    parser.add_argument("--max-steps", type=int, nargs="+", default=[6000], help="updates per fit")
    parser.add_argument("--hidden", type=int, nargs="+", default=[200, 200])
    parser.add_argument("--noise", type=float, nargs="+", default=[0.0, 0.3, 0.6])
    parser.add_argument("--variants", nargs="+", default=["context", "context+offsets"])
    parser.add_argument(
        "--extra-real",
        nargs="*",
        default=[],
        help="more real files of the training tasks to fit on (e.g. a noisier expert's)",
    )
    args = parser.parse_args()
    torch.set_num_threads(1)
    real = load_dataset(args.real)
    fit_on, test = held_out_split(real, args.test)
    if args.extra_real:
        fit_on = RolloutDataset.concatenate([fit_on, *map(load_dataset, args.extra_real)])
    sets = action_sets(real, test, args.noise, seed=0)
    judged = {noise: replayed_success(real.domain, episodes) for noise, episodes in sets.items()}
    base = get_domain(real.domain).dynamics_context
    contexts = {"context": base, "context+offsets": with_offsets(base)}
    columns = None
    for name in args.variants:
        for max_steps in args.max_steps:
            settings = ensemble_settings(max_steps, args.hidden)
            started = time.time()
            scorer = TransitionEnsemble.fit(fit_on, settings, context=contexts[name])
            fitted = time.time() - started
            row = measure(scorer, sets, judged, contexts[name])
            if columns is None:
                columns = list(row)
                print("| inputs | updates (done) | " + " | ".join(columns) + " | fit |")
                print("|---|---|" + "---|" * (len(columns) + 1))
            cells = " | ".join(
                row[c] if isinstance(row[c], str) else f"{row[c]:.2f}" for c in columns
            )
            done = int(scorer.metrics["updates"])
            print(f"| {name} | {max_steps} ({done}) | {cells} | {fitted:.0f} s |", flush=True)


if __name__ == "__main__":
    main()
