"""How physical are the steps of the ``ensemble`` state model? One-step check on held-out data.

``imagine``'s ``state_model: ensemble`` advances imagined states with a dynamics ensemble fitted
on the real data (``imaginebench.imagination.confidence.TransitionEnsemble``). This fits one on
a real dataset, collects ``--episodes`` fresh expert episodes with another seed (never seen by
the fit), predicts each of their transitions' next state from its state and action, and judges
the prediction with the domain's transition judge (``correct_transitions`` of its quality class:
the simulator replays the step afterwards).

    python benchmarks/ensemble_state_model.py --domain halfcheetah \
        --real ~/.cache/imaginebench/halfcheetah_train_real_n1000_s0_e0.1_p5_x2.h5 --max-steps 3000 10000

Prints, per budget, the fit's hold-out MSE, the share of held-out steps judged correct and the
median absolute error per state entry.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from imaginebench.data.collect import collect
from imaginebench.data.format import load_dataset
from imaginebench.data.shipped import resolve_data_path
from imaginebench.envs import get_domain
from imaginebench.imagination.confidence import TransitionEnsemble


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--domain", default="halfcheetah")
    parser.add_argument("--real", required=True, help="the real dataset (e.g. the RL configs')")
    parser.add_argument("--episodes", type=int, default=20, help="fresh expert episodes judged")
    parser.add_argument("--epsilon", type=float, default=0.1, help="the fresh episodes' epsilon")
    parser.add_argument("--collect-seed", type=int, default=12345)
    parser.add_argument("--max-steps", type=int, nargs="+", default=[3000, 10000])
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    torch.manual_seed(args.seed)
    fit = load_dataset(resolve_data_path(args.real))
    fresh, _ = collect(
        args.domain,
        "train",
        args.episodes,
        seed=args.collect_seed,
        epsilon=args.epsilon,
        progress=False,
    )
    held_out = [fresh.episode(i) for i in range(len(fresh.episode_lengths()))]
    judge = get_domain(args.domain).make_quality()
    steps = sum(len(ep.actions) for ep in held_out)
    print(
        f"{args.domain}: ensemble fitted on {args.real}; judged on {len(held_out)} fresh expert "
        f"episodes (seed {args.collect_seed}, epsilon {args.epsilon}; {steps} steps)\n"
    )
    print(
        "| updates | fit seconds | hold-out MSE (fit) | held-out steps correct | median error per entry |"
    )
    print("|---|---|---|---|---|")
    for budget in args.max_steps:
        start = time.perf_counter()
        model = TransitionEnsemble.fit(fit, {"max_steps": budget, "seed": args.seed})
        seconds = time.perf_counter() - start
        correct, errors = [], []
        for ep in held_out:
            predicted = model.next_states(ep.states[:-1], ep.actions)
            for t, (state, action) in enumerate(zip(ep.states[:-1], ep.actions)):
                pair = np.stack([state, predicted[t]])
                correct.append(bool(judge.correct_transitions(pair, action[None])[0]))
            errors.append(np.abs(predicted - ep.states[1:]))
        median = np.round(np.median(np.concatenate(errors), axis=0), 3)
        print(
            f"| {budget} | {seconds:.0f} | {model.metrics['holdout_mse']:.3f} | "
            f"{100 * np.mean(correct):.1f} % | {' '.join(map(str, median))} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
