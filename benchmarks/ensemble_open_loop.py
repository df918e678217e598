"""Open-loop drift of a dynamics ensemble along held-out real Meta-World episodes, by what the
members see beyond the state and action (the 91-d state has no velocities, and the hand follows
a mocap target that accumulates the actions).

Fits ``TransitionEnsemble`` (five members, 200-200 units, beta-NLL) on the distinct real rollouts
but the first ``--test`` ones, three times: with the state and action only; with the last change
of state as well; with the domain's ``dynamics_context`` (the last change and the mocap target
rebuilt from the actions, :mod:`imaginebench.envs.metaworld.mocap`). Then it rolls each held-out
episode forward from its first state with its own actions, feeding the model its own
predictions, and prints the median error of the hand position (mm) after 1, 5, 10, 20 and 30
steps (docs/metaworld.md):

    python benchmarks/ensemble_open_loop.py \\
        --real ~/.cache/imaginebench/metaworld_train_real_n2000_s0_e0.05_p5_x3.h5
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from imaginebench.data.format import load_dataset
from imaginebench.envs import get_domain
from imaginebench.envs.base import Task
from imaginebench.imagination.confidence import TransitionEnsemble

REPORTED_STEPS = (1, 5, 10, 20, 30)


def last_change(task, states: np.ndarray, actions: np.ndarray) -> np.ndarray:
    """``s_t - s_{t-1}`` per transition (zeros at the first)."""
    return np.diff(np.asarray(states), axis=0, prepend=np.asarray(states)[:1]).astype(np.float32)


def open_loop_errors(scorer: TransitionEnsemble, data, episodes, context, horizon: int):
    """``(episodes, horizon)`` hand errors in mm (NaN past an episode's end)."""
    errors = np.full((len(episodes), horizon), np.nan)
    for row, e in enumerate(episodes):
        episode = data.episode(int(e))
        task = Task.from_spec(episode.task_spec)
        states = [np.asarray(episode.states[0], np.float32)]
        for t in range(min(horizon, len(episode.actions))):
            actions = np.asarray(episode.actions[: t + 1])
            step = None if context is None else context(task, np.stack(states), actions)[-1:]
            nxt = scorer.next_states(states[-1][None], actions[-1:], step)[0]
            states.append(nxt)
            errors[row, t] = 1000 * np.linalg.norm(nxt[:3] - episode.states[t + 1][:3])
    return errors


def ensemble_settings(max_steps: int, hidden: list[int] | None = None) -> dict:
    """The members' settings these benchmarks fit (the imagine config's: beta-NLL, 200-200
    units, early stopping every 500 updates) at ``max_steps`` updates."""
    return {
        "hidden": hidden or [200, 200],
        "max_steps": max_steps,
        "eval_every": 500,
        "patience": 4,
        "nll_beta": 1.0,
    }


def held_out_split(real, test: int):
    """``(fit_on, held_out)``: the first ``test`` distinct rollouts held out (their indices) and
    the dataset of the other distinct ones (a rollout stored once per wording, once)."""
    distinct = real.distinct_episodes()
    keep = np.zeros(len(real), bool)
    keep[distinct[test:]] = True
    return real.select(keep), distinct[:test]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--real", required=True)
    parser.add_argument("--test", type=int, default=100, help="held-out distinct rollouts")
    parser.add_argument("--max-steps", type=int, default=6000, help="updates of each fit")
    args = parser.parse_args()
    torch.set_num_threads(1)
    real = load_dataset(args.real)
    fit_on, test = held_out_split(real, args.test)
    settings = ensemble_settings(args.max_steps)
    variants = {
        "state and action": None,
        "+ last change": last_change,
        "+ last change and mocap target (the domain's context)": get_domain(
            real.domain
        ).dynamics_context,
    }
    print("| inputs | " + " | ".join(f"{k} steps" for k in REPORTED_STEPS) + " | fit |")
    print("|---|" + "---|" * (len(REPORTED_STEPS) + 1))
    for name, context in variants.items():
        started = time.time()
        scorer = TransitionEnsemble.fit(fit_on, settings, context=context)
        fitted = time.time() - started
        errors = open_loop_errors(scorer, real, test, context, max(REPORTED_STEPS))
        cells = " | ".join(f"{np.nanmedian(errors[:, k - 1]):.2f}" for k in REPORTED_STEPS)
        print(f"| {name} | {cells} | {fitted:.0f} s |", flush=True)


if __name__ == "__main__":
    main()
