"""How right are the next states of the real-data dynamics ensemble (``imagine``'s
``state_model: ensemble``) on real transitions of tasks it never saw?

    python benchmarks/dynamics_accuracy.py --domain clevr --real-episodes 2000 --level easy

Fits :class:`~imaginebench.imagination.confidence.TransitionEnsemble` (the imagine configs'
ensemble settings) on expert episodes of the ``train`` level, then predicts the next state of
every transition of fresh expert episodes of ``--level`` and reports: the mean absolute error
of the moved transitions, that of "nothing moves", and the fraction of predicted transitions
the domain's quality judge (the simulator, after the fact) finds correct, beside the same
fraction for the real next states (the judge's ceiling).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from imaginebench.data.collect import collect
from imaginebench.envs import DOMAINS, get_domain
from imaginebench.imagination.confidence import EnsembleConfig, TransitionEnsemble


def judged_correct(domain: str, states: np.ndarray, next_states: np.ndarray, actions) -> float:
    """Fraction of ``(state, action, next state)`` rows the domain's judge finds correct."""
    judge = get_domain(domain).make_quality()
    correct = [
        judge.correct_transitions(np.stack([s, n]), np.asarray(actions[i : i + 1]))[0]
        for i, (s, n) in enumerate(zip(states, next_states))
    ]
    return float(np.mean(correct))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--domain", default="clevr", choices=sorted(DOMAINS))
    parser.add_argument("--real-episodes", type=int, default=2000)
    parser.add_argument("--epsilon", type=float, default=0.2)
    parser.add_argument("--level", default="easy", help="level of the held-out transitions")
    parser.add_argument("--test-episodes", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    real, _ = collect(
        args.domain, "train", args.real_episodes, args.seed, epsilon=args.epsilon, progress=False
    )
    held_out, _ = collect(
        args.domain, args.level, args.test_episodes, args.seed + 5, epsilon=args.epsilon,
        progress=False,
    )  # fmt: skip
    started = time.perf_counter()
    scorer = TransitionEnsemble.fit(real, EnsembleConfig(seed=args.seed), progress=True)
    fit_seconds = time.perf_counter() - started
    before, after = held_out.transition_indices()
    states, truth = held_out.states[before], held_out.states[after]
    predicted = scorer.next_states(states, held_out.actions)
    moved = np.abs(truth - states).sum(1) > 1e-3
    print(
        f"# {args.domain}: dynamics ensemble on {args.real_episodes} real train episodes "
        f"(epsilon {args.epsilon}, seed {args.seed}), {int(scorer.metrics['transitions'])} "
        f"distinct transitions, fit {fit_seconds:.0f} s, hold-out MSE "
        f"{scorer.metrics['holdout_mse']:.3f}\n"
    )
    print(
        "| held-out level | transitions | MAE, moved | MAE of no change | judged correct | real |"
    )
    print("|---|---|---|---|---|---|")
    ours = judged_correct(args.domain, states, predicted, held_out.actions)
    ceiling = judged_correct(args.domain, states, truth, held_out.actions)
    error, still = np.abs(predicted - truth)[moved].mean(), np.abs(states - truth)[moved].mean()
    print(
        f"| {args.level} ({args.test_episodes} episodes) | {len(states)} | {error:.4f} | "
        f"{still:.4f} | {100 * ours:.1f} % | {100 * ceiling:.1f} % |"
    )


if __name__ == "__main__":
    main()
