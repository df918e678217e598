"""How fast the lookahead's HalfCheetah runs go, in the state model and replayed in the simulator.

From the first states of real `train` episodes, ``--steps`` actions of "run forward faster" (and
backward) are chosen by the lookahead (:mod:`imaginebench.imagination.lookahead`) in the dynamics
ensemble fitted on the real data, each refining a zero torque (no LM: what the search alone
does), for each ``--penalties`` weight of the members' disagreement. Printed per weight: the
distance covered in 99 steps in the imagined states and when the same actions are executed in
the simulator from the same first state (the simulator only judges), and the members' mean
disagreement about the steps taken beside that of held-out real transitions (``--heldout``:
real episodes the ensemble never saw, e.g. ``imaginebench collect --domain halfcheetah --level
train --episodes 100 --seed 1 --epsilon 0.1``). The `easy` pace is 8.5 m in 99 steps; the paced
expert's training runs cover 7.3-8.1 m.

    python benchmarks/lookahead_pace.py --real <the grounding's real file> --heldout <file> \\
        --penalties 0.1 0.3 0.5 1.0 --starts 4
"""

from __future__ import annotations

import argparse

import numpy as np
import torch

from imaginebench.data.format import load_dataset
from imaginebench.envs import get_domain, make
from imaginebench.envs.base import EpisodeSpec
from imaginebench.envs.halfcheetah.tasks import Run, displacement
from imaginebench.imagination.confidence import _transition_states
from imaginebench.imagination.lookahead import Lookahead, LookaheadConfig
from imaginebench.imagination.score import fit_ensemble_on

WORDING = {"forward": "Move forward faster.", "backward": "Move backward faster."}


def heldout_spread(ensemble, path: str) -> np.ndarray:
    """The members' disagreement about each held-out real transition (as the lookahead
    measures it: the spread of their predicted changes, in units of a real change's spread)."""
    data = load_dataset(path)
    states, _ = _transition_states(data)
    _, spread = ensemble.step_with_spread(states.numpy(), np.asarray(data.actions))
    return spread


def run(ensemble, config, starts, direction, steps, seed):
    """Imagine ``steps`` lookahead actions from each start; imagined and replayed distances
    along ``direction`` and the mean disagreement of the steps taken."""
    legal = get_domain("halfcheetah").make_quality().legal
    lookahead = Lookahead(ensemble, config, legal)
    task = Run(direction, fast=True)
    generator = torch.Generator().manual_seed(seed)
    histories = [[s] for s in starts]
    actions, spreads = [[] for _ in starts], []
    rows = list(range(len(starts)))
    for _ in range(steps):
        past = [np.stack(h) for h in histories]
        zeros = np.zeros((len(starts), 6), np.float32)
        action = lookahead.refine(rows, [task] * len(rows), past, zeros, generator)
        nxt, spread = ensemble.step_with_spread(np.stack([p[-1] for p in past]), action)
        spreads.append(spread)
        for i in rows:
            histories[i].append(nxt[i])
            actions[i].append(action[i])
    sign = 1.0 if direction == "forward" else -1.0
    env = make("halfcheetah", "easy", max_episode_steps=10**9).unwrapped
    imagined, replayed = [], []
    for i, start in enumerate(starts):
        imagined.append(sign * displacement(np.stack(histories[i]))[-1])
        env.reset(options={"episode": EpisodeSpec(task, WORDING[direction], start, "easy")})
        visited = [start] + [np.asarray(env.step(a)[0], np.float32) for a in actions[i]]
        replayed.append(sign * displacement(np.stack(visited))[-1])
    env.close()
    return np.array(imagined), np.array(replayed), float(np.mean(spreads))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--real", required=True, help="real data the ensemble is fitted on")
    parser.add_argument("--heldout", help="real episodes the ensemble never saw")
    parser.add_argument("--penalties", type=float, nargs="+", default=[0.1, 0.3, 0.5, 1.0])
    parser.add_argument("--starts", type=int, default=4)
    parser.add_argument("--steps", type=int, default=99)
    parser.add_argument("--horizon", type=int, default=12)
    parser.add_argument("--ensemble-steps", type=int, default=10000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    torch.set_num_threads(1)
    ensemble, _ = fit_ensemble_on(args.real, {"max_steps": args.ensemble_steps}, progress=True)
    real = load_dataset(args.real)
    picks = np.random.default_rng(args.seed).choice(len(real), args.starts, replace=False)
    starts = [np.asarray(real.episode(int(i)).states[0], np.float32) for i in picks]
    if args.heldout:
        spread = heldout_spread(ensemble, args.heldout)
        print(
            f"held-out real transitions: disagreement mean {spread.mean():.3f}, median "
            f"{np.median(spread):.3f}, 90 % quantile {np.quantile(spread, 0.9):.3f}"
        )
    print(
        "| penalty | direction | imagined m in 99 steps (mean, min-max) | replayed | "
        "replayed >= 8.5 m | mean disagreement |"
    )
    print("|---|---|---|---|---|---|")
    for penalty in args.penalties:
        config = LookaheadConfig(horizon=args.horizon, spread_penalty=penalty)
        for direction in ("forward", "backward"):
            imagined, replayed, spread = run(
                ensemble, config, starts, direction, args.steps, args.seed
            )
            print(
                f"| {penalty} | {direction} | {imagined.mean():.2f} ({imagined.min():.2f}-"
                f"{imagined.max():.2f}) | {replayed.mean():.2f} ({replayed.min():.2f}-"
                f"{replayed.max():.2f}) | {(replayed >= 8.5).sum()} of {len(replayed)} | "
                f"{spread:.3f} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
