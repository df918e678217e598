"""How well each stored confidence of an imaginary file predicts transition correctness.

For every transition the domain's judge says whether it is physically right (the simulator
replays the step from the imagined state: judging only); the transitions are split into
quartiles of each confidence source (``ensemble``, ``likelihood``) and the correct fraction of
each quartile printed. Then, per threshold, what ``imaginebench refilter --min-confidence``
would keep (rollouts whose every stored ``ensemble`` confidence reaches it), how correct its
transitions are and how many of its rollouts replay to success (their actions executed in the
simulator from their first state, as the quality report's replayed success):

    python benchmarks/confidence_vs_correctness.py FILE [FILE ...] [--thresholds 0.6 0.68 0.7]
"""

from __future__ import annotations

import argparse

import numpy as np

from imaginebench.data.format import load_dataset
from imaginebench.envs import get_domain
from imaginebench.imagination.quality import replayed_success


def per_transition(
    path: str,
) -> tuple[list[np.ndarray], dict[str, list[np.ndarray]], np.ndarray]:
    """Per episode: the judge's verdict on each transition, each stored confidence, and
    whether the episode replays to success."""
    data = load_dataset(path)
    judge = get_domain(data.domain).make_quality()
    correct, confidence = [], {name: [] for name in sorted(data.confidence)}
    episodes = [data.episode(i) for i in range(len(data))]
    for episode in episodes:
        correct.append(np.asarray(judge.correct_transitions(episode.states, episode.actions)))
        for name in confidence:
            confidence[name].append(np.asarray(episode.confidence[name]))
    return correct, confidence, np.asarray(replayed_success(data.domain, episodes), dtype=bool)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("files", nargs="+")
    parser.add_argument("--thresholds", nargs="+", type=float, default=[0.6, 0.64, 0.68, 0.7])
    args = parser.parse_args()
    for path in args.files:
        correct, confidence, replayed = per_transition(path)
        flat = np.concatenate(correct)
        print(f"\n{path}: {len(correct)} rollouts, {len(flat)} transitions, "
              f"{100 * flat.mean():.1f} % correct")  # fmt: skip
        print("| source | quartile cuts | correct per quartile, lowest to highest |")
        print("|---|---|---|")
        for name, values in confidence.items():
            x = np.concatenate(values)
            cuts = np.quantile(x, [0.25, 0.5, 0.75])
            bins = np.digitize(x, cuts)
            shares = " / ".join(f"{100 * flat[bins == b].mean():.1f}" for b in range(4))
            print(f"| {name} | {', '.join(f'{c:.3g}' for c in cuts)} | {shares} % |")
        if "ensemble" not in confidence:
            continue
        least = np.array([c.min(initial=1.0) for c in confidence["ensemble"]])
        print("| min_confidence | rollouts kept | transitions correct | replayed success |")
        print("|---|---|---|---|")
        for threshold in [0.0, *args.thresholds]:
            kept = np.flatnonzero(least >= threshold)
            share = np.concatenate([correct[i] for i in kept]).mean() if len(kept) else np.nan
            works = replayed[kept].mean() if len(kept) else np.nan
            print(f"| {threshold} | {len(kept)} | {100 * share:.1f} % | {100 * works:.1f} % |")


if __name__ == "__main__":
    main()
