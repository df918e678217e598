"""A diagnostic copy of imaginary files whose states are the simulator's, not the state model's.

Each episode's actions are executed in the simulator from its imagined first state (as the
quality report's replayed success does, ``imaginebench.imagination.quality.replay``), and the
copy keeps the states the simulator visits, the actions up to the step that accomplished the
instruction (or all of them), the domain's rewards of those states, and whether they succeeded.
So the copy holds the imagined *actions* with real *states*: trained beside the original file,
it tells what a policy learns from the state model's errors apart from what it learns from the
imagined actions. The simulator makes these files, so they are a diagnostic and never shipped.

    python benchmarks/replayed_states.py --out-dir /tmp/replayed \\
        shipped:halfcheetah/imaginary_easy.h5
    imaginebench benchmark -c configs/benchmark/halfcheetah.yaml --algorithms cql \\
        --variants imaginary_all --levels rephrase easy hard --ratio 0.1 \\
        --imaginary '/tmp/replayed/{domain}_replayed_{level}.h5'   # other levels: copy them in
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from imaginebench.data.dataset import Episode, RolloutDataset
from imaginebench.data.format import load_dataset
from imaginebench.data.hdf5 import save_dataset
from imaginebench.data.shipped import resolve_data_path
from imaginebench.envs import get_domain
from imaginebench.envs.base import Task
from imaginebench.imagination.quality import replay


def replayed_copy(data: RolloutDataset) -> tuple[RolloutDataset, float, float]:
    """``data`` with each episode's states replaced by those its actions reach in the simulator;
    also the share of episodes that succeed replayed and the mean distance between imagined
    and replayed states (over the steps both have)."""
    rewards_of = get_domain(data.domain).episode_rewards
    originals = [data.episode(i) for i in range(len(data))]
    episodes, gaps = [], []
    for episode, (states, success) in zip(originals, replay(data.domain, originals)):
        steps = len(states) - 1
        actions = episode.actions[:steps]
        task = Task.from_spec(episode.task_spec)
        gaps.append(float(np.abs(states - episode.states[: steps + 1]).mean()))
        episodes.append(
            Episode(
                states=states,
                actions=actions,
                rewards=np.asarray(rewards_of(task, states, actions), dtype=np.float32),
                terminated=success,
                truncated=not success,
                instruction=episode.instruction,
                task_spec=episode.task_spec,
                level=episode.level,
                source=episode.source,
                success=success,
                confidence={k: v[:steps] for k, v in episode.confidence.items()},
            )
        )
    provenance = {**data.provenance, "diagnostic": "states replayed in the simulator"}
    copy = RolloutDataset.from_episodes(
        episodes, domain=data.domain, action_spec=data.action_spec, provenance=provenance
    )
    succeeded = float(np.mean([e.success for e in episodes]))
    return copy, succeeded, float(np.mean(gaps))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="+", help="imaginary files (paths or shipped:...)")
    parser.add_argument("--out-dir", type=Path, required=True)
    args = parser.parse_args()
    args.out_dir.mkdir(parents=True, exist_ok=True)
    for name in args.files:
        path = resolve_data_path(name)
        data = load_dataset(path)
        try:
            level = data.only_level()
        except ValueError as error:
            raise SystemExit(f"{path}: {error}") from None
        copy, succeeded, gap = replayed_copy(data)
        out = save_dataset(copy, args.out_dir / f"{data.domain}_replayed_{level}.h5")
        print(
            f"{out}: {len(copy)} episodes, {copy.num_transitions} transitions "
            f"(imagined: {data.num_transitions}); {100 * succeeded:.1f} % succeed replayed; "
            f"mean |imagined - replayed state| {gap:.4f}"
        )


if __name__ == "__main__":
    main()
