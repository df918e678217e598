"""How exact is the ``ensemble`` state model on a discrete-state domain (BabyAI)?

Fits ``TransitionEnsemble`` on a real file with each given setting, predicts the next state of
every transition of a held-out real file (another seed or level), rounds it (BabyAI states are
integers) and reports the share predicted exactly, the share legal, the legality rules broken
(BabyAI) and the exact share per action. Behind ``nll_beta`` (docs/grounding.md#imagination-imaginebench-imagine).

    imaginebench collect --domain babyai --level rephrase --episodes 400 --seed 7 --epsilon 0.2 --out test.h5
    python benchmarks/ensemble_exactness.py --real ~/.cache/imaginebench/babyai_train_real_n5000_s0_e0.2_p20_x1.h5 \
        --test test.h5 --settings '{}' '{"nll_beta": 1.0, "max_steps": 6000, "eval_every": 500, "patience": 4}'
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
import torch

from imaginebench.data.format import load_dataset
from imaginebench.envs import get_domain
from imaginebench.envs.babyai.world import state_violations
from imaginebench.imagination.confidence import EnsembleConfig, TransitionEnsemble


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--domain", default="babyai")
    parser.add_argument("--real", required=True, help="real file the ensemble is fitted on")
    parser.add_argument("--test", required=True, help="held-out real file it is judged on")
    parser.add_argument("--settings", nargs="+", default=["{}"], help="EnsembleConfig JSONs")
    args = parser.parse_args()
    torch.set_num_threads(1)
    real, test = load_dataset(args.real), load_dataset(args.test)
    before, after = test.transition_indices()
    states = np.asarray(test.states, dtype=np.float32)
    state, truth, actions = states[before], states[after], np.asarray(test.actions)
    quality = get_domain(args.domain).make_quality()
    for setting in args.settings:
        started = time.perf_counter()
        scorer = TransitionEnsemble.fit(real, EnsembleConfig(**json.loads(setting)))
        predicted = np.rint(scorer.next_states(state, actions))
        exact = np.all(predicted == truth, axis=1)
        legal = quality.legal(predicted)
        print(
            f"{setting}: fit {time.perf_counter() - started:.0f} s, {scorer.metrics}; "
            f"exact {100 * exact.mean():.1f} %, legal {100 * legal.mean():.1f} %"
        )
        if args.domain == "babyai":  # which rule the illegal predictions break
            broken = {
                rule: round(100 * float(bad.mean()), 1)
                for rule, bad in state_violations(predicted).items()
                if bad.any()
            }
            print(f"  predictions breaking each rule (%): {broken}")
        per_action = {
            int(a): round(100 * float(exact[actions == a].mean()), 1) for a in np.unique(actions)
        }
        print(f"  exact per action (%): {per_action}")


if __name__ == "__main__":
    main()
