"""A ``min_confidence`` threshold taken from real transitions the ensemble never saw.

The ``ensemble`` confidence (docs/confidence.md) is fitted on the real data; this scores a
*held-out* real file (fresh expert episodes, another collection seed) with the same ensemble
and prints the low quantiles of its confidence: a threshold at the 1 % quantile rejects an
imagined step the ensemble trusts less than it trusts 99 % of real steps. Nothing about the
imagined data chooses it. Then, per imaginary file, what ``imaginebench refilter
--min-confidence`` at each quantile would keep, and (judging only) how correct the kept
transitions are and how many kept rollouts replay to success in the simulator:

    imaginebench collect --domain babyai --level train --episodes 300 --seed 1 --epsilon 0.2 \\
        --out heldout.h5
    python benchmarks/confidence_threshold_from_real.py --config configs/imagine_babyai.yaml \\
        --real <the real training file> --heldout heldout.h5 \\
        shipped:babyai/imaginary_rephrase.h5 shipped:babyai/imaginary_easy.h5
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import yaml

from imaginebench.data.format import load_dataset
from imaginebench.data.shipped import resolve_data_path
from imaginebench.envs import get_domain
from imaginebench.imagination.confidence import ENSEMBLE, auroc
from imaginebench.imagination.quality import replayed_success
from imaginebench.imagination.refilter import keep_mask
from imaginebench.imagination.score import fit_ensemble_on

QUANTILES = (0.005, 0.01, 0.02)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("files", nargs="+", help="imaginary files to filter")
    parser.add_argument("--config", required=True, help="imagine config (its ensemble settings)")
    parser.add_argument("--real", required=True, help="the real file the ensemble is fitted on")
    parser.add_argument("--heldout", required=True, help="real episodes the ensemble never saw")
    args = parser.parse_args()

    settings = yaml.safe_load(Path(args.config).read_text()).get("ensemble") or {}
    scorer, how = fit_ensemble_on(args.real, settings, progress=False)
    heldout = scorer.confidence(load_dataset(args.heldout))
    thresholds = {q: float(np.quantile(heldout, q)) for q in QUANTILES}
    print(f"ensemble fit: {how['fit']}")
    print(
        f"held-out real transitions: {len(heldout)}; confidence quantiles "
        + ", ".join(f"{100 * q:g} %: {t:.3f}" for q, t in thresholds.items())
    )
    print(
        "| file | rollouts | inexact transitions | AUROC | quantile | threshold | kept | "
        "exact transitions (kept) | replayed success (kept) | replayed success (dropped) |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name in args.files:
        data = load_dataset(resolve_data_path(name))
        judge = get_domain(data.domain).make_quality()
        episodes = [data.episode(i) for i in range(len(data))]
        # the recorded action's exact outcome where the domain's judge has one (BabyAI)
        judged = getattr(judge, "exact_transitions", judge.correct_transitions)
        exact = [np.asarray(judged(e.states, e.actions)) for e in episodes]
        correct = np.concatenate(exact)
        confidence = scorer.confidence(data)
        scored = data.with_confidence(ENSEMBLE, confidence)  # this ensemble's, not the stored
        replayed = replayed_success(data.domain, episodes)
        for q, threshold in thresholds.items():
            keep = keep_mask(scored, min_confidence=threshold)  # refilter's own rule
            kept = [c for c, k in zip(exact, keep) if k]
            kept_correct = f"{100 * np.concatenate(kept).mean():.1f} %" if kept else "—"
            kept_replayed = f"{100 * replayed[keep].mean():.1f} %" if kept else "—"
            dropped = f"{100 * replayed[~keep].mean():.1f} %" if (~keep).any() else "—"
            print(
                f"| {name} | {len(data)} | {int((~correct).sum())} of {len(correct)} | "
                f"{auroc(confidence, correct):.3f} | {100 * q:g} % | {threshold:.3f} | "
                f"{int(keep.sum())} | {kept_correct} | {kept_replayed} | {dropped} |"
            )


if __name__ == "__main__":
    main()
