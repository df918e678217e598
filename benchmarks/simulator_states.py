"""A diagnostic copy of an imaginary file whose states are the simulator's along its actions.

Each rollout is reset to its imagined first state and its actions are executed in the
simulator until the instruction is accomplished (or the actions run out); the copy keeps those
actions and stores the states the simulator reached, with rewards from the domain's success
function. Trained beside the real data, it separates what a file's *states* cost from what its
*actions* cost (docs/metaworld.md, "An object-centric state model"). The simulator makes the
copy's states, so it is a diagnostic, never imaginary data:

    python benchmarks/simulator_states.py <imagined file> --out <copy>
"""

from __future__ import annotations

import argparse
import dataclasses

import numpy as np

from imaginebench.data.dataset import RolloutDataset
from imaginebench.data.format import load_dataset
from imaginebench.data.hdf5 import save_dataset
from imaginebench.envs import get_domain
from imaginebench.envs.base import Task
from imaginebench.imagination.quality import replay


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("imagined")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    data = load_dataset(args.imagined)
    domain = get_domain(data.domain)
    episodes, drift = [], []
    for i, (states, success) in enumerate(replay(data.domain, map(data.episode, range(len(data))))):
        ep = data.episode(i)
        task = Task.from_spec(ep.task_spec)
        actions = np.asarray(ep.actions[: len(states) - 1], np.float32)
        shared = min(len(states), len(ep.states))
        hand_gap = np.linalg.norm(states[:shared, :3] - ep.states[:shared, :3], axis=1)
        drift.append(np.median(hand_gap))
        rewards = np.asarray(domain.episode_rewards(task, states, actions), np.float32)
        episodes.append(
            dataclasses.replace(
                ep,
                states=states,
                actions=actions,
                rewards=rewards,
                terminated=success,
                truncated=False,
                success=success,
                confidence={},
            )
        )
    copy = RolloutDataset.from_episodes(
        episodes,
        domain=data.domain,
        action_spec=data.action_spec,
        provenance={
            "generator": "benchmarks/simulator_states.py: the simulator's states along the "
            "imagined actions (a diagnostic, never imaginary data)",
            "source_file": args.imagined,
        },
    )
    save_dataset(copy, args.out)
    print(
        f"{len(episodes)} rollouts, {sum(e.success for e in episodes)} accomplished; the first "
        f"three state entries (Meta-World: the hand) {1000 * float(np.median(drift)):.1f} x 1e-3 "
        "from the imagined ones (median over rollouts of each rollout's median)"
    )


if __name__ == "__main__":
    main()
