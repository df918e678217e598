"""Open-loop drift of a dynamics ensemble along held-out real episodes, with and without the
last change of state as an input (Meta-World's 91-d state has no velocities).

Fits five members (200-200 units, beta-NLL, 6,000 updates) on the distinct real rollouts but
the first ``--test`` ones, then rolls each held-out episode forward from its first state with
its own actions, feeding the model its own predictions, and prints the median error of the
hand position (mm) after 1, 5, 10 and 20 steps (docs/metaworld.md). The members' inputs and
the zero rule are ``TransitionEnsemble``'s; the history input is what this script adds.

    python benchmarks/ensemble_open_loop.py --real ~/.cache/imaginebench/metaworld_train_real_n2000_s0_e0.05_p5_x3.h5
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from imaginebench.data.format import load_dataset
from imaginebench.imagination.confidence import entries_that_stay_zero
from imaginebench.modules.backbone import StateInstructionEncoder
from imaginebench.modules.dynamics import DynamicsEnsemble, fit_ensemble

HORIZON = 20
REPORTED_STEPS = (1, 5, 10, 20)


def episode_arrays(states: np.ndarray, actions: np.ndarray, offsets: np.ndarray, e: int):
    """Episode ``e``'s ``(T + 1, D)`` states and ``(T, A)`` actions."""
    return states[offsets[e] + e : offsets[e + 1] + e + 1], actions[offsets[e] : offsets[e + 1]]


def transitions(states, actions, offsets, episodes):
    """State, last change of state (0 at the first step), action and next state of every
    transition of ``episodes``."""
    s, p, a, n = [], [], [], []
    for e in episodes:
        st, ac = episode_arrays(states, actions, offsets, e)
        previous = np.r_[st[:1], st[:-1]]
        s.append(st[:-1])
        p.append(st[:-1] - previous[:-1])
        a.append(ac)
        n.append(st[1:])
    return [np.concatenate(x) for x in (s, p, a, n)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--real", required=True)
    parser.add_argument("--test", type=int, default=100, help="held-out distinct rollouts")
    parser.add_argument("--max-steps", type=int, default=6000, help="updates of each fit")
    args = parser.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    real = load_dataset(args.real)
    states = np.asarray(real.states, np.float32)
    actions = np.asarray(real.actions, np.float32)
    offsets = real.episode_offsets
    dim = states.shape[1]
    # a rollout stored once per wording: keep one copy of each (same first state)
    firsts = states[offsets[:-1] + np.arange(len(real))]
    distinct = np.sort(np.unique(firsts, axis=0, return_index=True)[1])
    test, train = distinct[: args.test], distinct[args.test :]
    s, p, a, n = transitions(states, actions, offsets, train)
    mean, std = s.mean(0), s.std(0) + 1e-3
    change_std = (n - s).std(0) + 1e-3
    stay_zero = entries_that_stay_zero(torch.as_tensor(s), torch.as_tensor(n)).numpy()

    def features(state: np.ndarray, change: np.ndarray, history: bool) -> np.ndarray:
        x = (state - mean) / std
        return np.concatenate([x, change / change_std], -1) if history else x

    for history in (False, True):
        torch.manual_seed(0)
        trunks = [
            StateInstructionEncoder(dim + (dim if history else 0), 1, (200, 200), 1, a.shape[1])
            for _ in range(5)
        ]
        ensemble = DynamicsEnsemble(trunks, dim)
        x = features(s, p, history)
        started = time.time()
        fit_ensemble(
            ensemble,
            torch.as_tensor(x),
            torch.zeros(len(x), 1),
            torch.as_tensor(a),
            torch.as_tensor((n - s) / change_std),
            torch.zeros(len(x)),
            torch.Generator().manual_seed(0),
            max_steps=args.max_steps,
            eval_every=500,
            patience=4,
            nll_beta=1.0,
        )
        print("fit", history, f"{time.time() - started:.0f}s", flush=True)
        errors = []
        for e in test:
            st, ac = episode_arrays(states, actions, offsets, e)
            current, previous = st[0].copy(), st[0].copy()
            error = []
            for t in range(min(HORIZON, len(ac))):
                inputs = features(current, current - previous, history)
                with torch.no_grad():
                    mean_change = ensemble.means(
                        torch.as_tensor(inputs[None], dtype=torch.float32),
                        torch.zeros(1, 1),
                        torch.as_tensor(ac[t][None]),
                    )
                change = mean_change.mean(0)[0].numpy() * change_std
                change[(current == 0) & stay_zero] = 0
                previous, current = current, current + change
                error.append(np.linalg.norm(current[:3] - st[t + 1, :3]) * 1000)
            errors.append(np.pad(error, (0, HORIZON - len(error)), constant_values=np.nan))
        errors = np.array(errors)
        medians = [round(float(np.nanmedian(errors[:, k - 1])), 2) for k in REPORTED_STEPS]
        print("history", history, "open-loop hand error mm at steps 1,5,10,20:", medians)


if __name__ == "__main__":
    main()
