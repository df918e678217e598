"""Would a committee of the dynamics members pick the imagined rollouts whose actions work?

An imagined rollout's states come from the ensemble's *mean* prediction, and on Meta-World the
own-success filter keeps many rollouts whose actions fail in the simulator (the mean model
moves an object when the hand comes near it; docs/metaworld.md). Here each kept rollout's
actions are rolled forward from its first state by every member alone
(``TransitionEnsemble.member_rollouts``); a rollout counts as vouched for by ``k`` members when
``k`` members' own rollouts satisfy its instruction. The simulator only judges: the table gives,
for each ``k``, how many rollouts at least ``k`` members vouch for and the share of those whose
actions achieve the instruction when executed in the simulator (replayed success).

    python benchmarks/committee_success.py shipped:metaworld/imaginary_rephrase.h5 \\
        -c configs/imagine_metaworld.yaml \\
        --real ~/.cache/imaginebench/metaworld_train_real_n2000_s0_e0.05_p5_x3.h5
"""

from __future__ import annotations

import argparse
import json
from collections import Counter

import numpy as np
import torch
import yaml

from imaginebench.data.format import load_dataset
from imaginebench.data.shipped import resolve_data_path
from imaginebench.envs.base import Task
from imaginebench.imagination.quality import replayed_success
from imaginebench.imagination.score import fit_ensemble_on


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("file", help="imaginary dataset (a path or shipped:<domain>/<file>)")
    parser.add_argument("-c", "--config", required=True, help="the imagine config (ensemble:)")
    parser.add_argument("--real", required=True, help="the real data the ensemble is fitted on")
    parser.add_argument("--out", help="write the per-rollout counts here (JSON)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    config = yaml.safe_load(open(args.config))
    scorer, _ = fit_ensemble_on(args.real, config.get("ensemble"), progress=True)
    data = load_dataset(resolve_data_path(args.file))
    episodes = [data.episode(i) for i in range(len(data))]
    members = len(scorer.ensemble)
    vouched, tasks = [], []
    for episode in episodes:
        task = Task.from_spec(episode.task_spec)
        rollouts = scorer.member_rollouts(task, episode.states[0], episode.actions)
        vouched.append(sum(bool(np.any(task.success(r))) for r in rollouts))
        tasks.append(task.name)
    vouched = np.array(vouched)
    replayed = replayed_success(data.domain, episodes)
    print(f"{args.file}: {len(episodes)} rollouts, ensemble of {members}")
    print("| members vouching (at least) | rollouts | replayed success | tasks |")
    print("|---|---|---|---|")
    for k in range(0, members + 1):
        keep = vouched >= k
        kept_tasks = Counter(np.array(tasks)[keep].tolist())
        share = replayed[keep].mean() if keep.any() else float("nan")
        names = ", ".join(f"{t} {n}" for t, n in sorted(kept_tasks.items()))
        print(f"| {k} | {keep.sum()} | {100 * share:.1f} % | {names} |")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(
                {"vouched": vouched.tolist(), "replayed": replayed.tolist(), "tasks": tasks}, f
            )


if __name__ == "__main__":
    main()
