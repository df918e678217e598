"""How right are the next states of the real-data dynamics ensemble (``imagine``'s
``state_model: ensemble``), on transitions of tasks it never saw?

    python benchmarks/dynamics_accuracy.py --domain clevr --real-episodes 2000 --level easy
    python benchmarks/dynamics_accuracy.py --real FILE --max-steps 3000 12000 \\
        --imagined a.h5 b.h5

Fits :class:`~imaginebench.imagination.confidence.TransitionEnsemble` (the imagine configs'
ensemble settings; ``--max-steps`` budgets, one fit each) on real data — ``--real`` (a file)
or ``--real-episodes`` fresh expert episodes of the ``train`` level — then predicts the next
state of (1) every transition of fresh expert episodes of ``--level`` and (2) every
``(state, action)`` pair of the ``--imagined`` files (the actions the LM chose). Reported: the
fraction of predicted transitions the domain's quality judge (the simulator, after the fact)
finds correct, beside the same fraction for the transitions as recorded (the real next states:
the judge's ceiling; the imagined ones: what the file's own states achieve), and for (1) the
mean absolute error of the moved transitions against that of "nothing moves".
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from imaginebench.data.collect import collect
from imaginebench.data.format import load_dataset
from imaginebench.data.shipped import resolve_data_path
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


def transitions(dataset) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """States, actions and recorded next states of every transition of ``dataset``."""
    before, after = dataset.transition_indices()
    return dataset.states[before], np.asarray(dataset.actions), dataset.states[after]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--domain", default="clevr", choices=sorted(DOMAINS))
    parser.add_argument("--real", help="real data file to fit on (default: fresh episodes)")
    parser.add_argument("--real-episodes", type=int, default=2000)
    parser.add_argument("--epsilon", type=float, default=0.2)
    parser.add_argument("--level", default="easy", help="level of the held-out expert episodes")
    parser.add_argument("--test-episodes", type=int, default=200)
    parser.add_argument("--imagined", nargs="*", default=[], help="imaginary files to judge")
    parser.add_argument("--max-steps", nargs="+", type=int, default=[3000])
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    if args.real:
        real = load_dataset(resolve_data_path(args.real))
        source = args.real
    else:
        real, _ = collect(
            args.domain, "train", args.real_episodes, args.seed, epsilon=args.epsilon,
            progress=False,
        )  # fmt: skip
        source = f"{args.real_episodes} fresh expert episodes (epsilon {args.epsilon})"
    held_out, _ = collect(
        args.domain, args.level, args.test_episodes, args.seed + 5, epsilon=args.epsilon,
        progress=False,
    )  # fmt: skip
    sets = {f"expert, {args.level} ({args.test_episodes} episodes)": transitions(held_out)}
    for path in args.imagined:
        sets[f"imagined, {path}"] = transitions(load_dataset(resolve_data_path(path)))
    print(f"# {args.domain}: dynamics ensemble fitted on {source}, seed {args.seed}\n")
    print("| fit budget | updates run | hold-out MSE | fit s | transitions judged | n | "
          "ensemble correct | recorded correct | MAE moved (no change) |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|")
    for budget in args.max_steps:
        started = time.perf_counter()
        scorer = TransitionEnsemble.fit(real, EnsembleConfig(max_steps=budget, seed=args.seed))
        seconds = time.perf_counter() - started
        fit = scorer.metrics
        for name, (states, actions, recorded) in sets.items():
            predicted = scorer.next_states(states, actions)
            moved = np.abs(recorded - states).sum(1) > 1e-3
            mae = ""
            if name.startswith("expert"):
                error = np.abs(predicted - recorded)[moved].mean()
                mae = f"{error:.4f} ({np.abs(states - recorded)[moved].mean():.4f})"
            ours = judged_correct(args.domain, states, predicted, actions)
            given = judged_correct(args.domain, states, recorded, actions)
            print(
                f"| {budget} | {int(fit['updates'])} | {fit['holdout_mse']:.3f} | {seconds:.0f} "
                f"| {name} | {len(states)} | {100 * ours:.1f} % | {100 * given:.1f} % | {mae} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
