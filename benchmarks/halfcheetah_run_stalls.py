"""How a trained HalfCheetah policy fails the `train` runs of one direction: distance per episode.

Loads each checkpoint (any continuous algorithm of ``imaginebench.modules.offline``), runs it on
the first ``--episodes`` "run" episodes of the given direction among the `train` level's fixed
evaluation episodes (``--seed``, as the evaluation callback draws them), and prints per
checkpoint the success rate, the median distance covered in that direction by step 99 and, per
failed episode, its distance after the episode and its wording.

    python benchmarks/halfcheetah_run_stalls.py runs/.../checkpoints/last.ckpt [...] \\
        --direction backward --episodes 30
"""

from __future__ import annotations

import argparse

import numpy as np
import torch

from imaginebench.envs import make
from imaginebench.envs.halfcheetah.tasks import Run, displacement
from imaginebench.modules.offline.base import OfflineRLModule


def load(path: str) -> OfflineRLModule:
    """The checkpoint's module, whatever its algorithm (its class is in the hyperparameters)."""
    import importlib

    stored = torch.load(path, map_location="cpu", weights_only=False)
    module_name, _, class_name = stored["hyper_parameters"]["_class_path"].rpartition(".")
    cls = getattr(importlib.import_module(module_name), class_name)
    return cls.load_from_checkpoint(path, map_location="cpu").eval()


def run_episodes(policy, direction: str, episodes: int, seed: int, pool: int = 300):
    """States visited and success of ``episodes`` `train` runs in ``direction``."""
    suite = make("halfcheetah", "train").unwrapped.suite
    plans = [
        p
        for p in suite.episodes("train", pool, seed)
        if isinstance(p.task, Run) and p.task.direction == direction
    ][:episodes]
    envs = [make("halfcheetah", "train").unwrapped for _ in plans]
    states = np.stack([env.reset(options={"episode": p})[0] for env, p in zip(envs, plans)])
    visited = [[s] for s in states]
    active, success = np.ones(len(plans), bool), np.zeros(len(plans), bool)
    instructions = [p.instruction for p in plans]
    while active.any():
        idx = np.flatnonzero(active)
        actions = policy.act(states[idx], [instructions[i] for i in idx])
        for i, action in zip(idx, actions):
            state, _, terminated, truncated, info = envs[i].step(action)
            states[i] = state
            visited[i].append(state)
            if terminated or truncated:
                active[i], success[i] = False, bool(info["is_success"])
    return [np.stack(v) for v in visited], success, instructions


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkpoints", nargs="+")
    parser.add_argument("--direction", default="backward", choices=["forward", "backward"])
    parser.add_argument("--episodes", type=int, default=30)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    torch.set_num_threads(1)
    sign = 1.0 if args.direction == "forward" else -1.0
    for path in args.checkpoints:
        visited, success, instructions = run_episodes(
            load(path), args.direction, args.episodes, args.seed
        )
        at_99 = [sign * displacement(v)[min(99, len(v) - 1)] for v in visited]
        print(
            f"{path}: success {success.mean():.0%} of {len(success)}, median distance by step "
            f"99 {np.median(at_99):.2f} m"
        )
        for v, ok, instruction in zip(visited, success, instructions):
            if not ok:
                print(
                    f"  failed: {sign * displacement(v)[-1]:.2f} m in {len(v) - 1} steps, "
                    f"{instruction!r}"
                )


if __name__ == "__main__":
    main()
