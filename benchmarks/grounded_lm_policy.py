"""The grounded LM's action head as a policy, closed loop in the simulator.

Imagination pairs the LM's actions with a state model (its own state head or the dynamics
ensemble); when imagined rollouts never replay to success, this tells whether the actions or
the imagined states are to blame. Here the LM chooses each action exactly as ``imaginebench
imagine`` decodes it (same prompts, windows, decoding settings), but the *simulator* gives the
next state: success is then the action head's own success as a policy, the ceiling of what its
imagined rollouts can replay to. The simulator only judges here: nothing is written as data.

Per task: episodes, success, mean steps, and the task's shaped progress (``Task.progress``) at
the start against the best it reaches, which says whether the actions steer towards the goal
at all; for a composition also how often its stage 1 is reached. ``--stage-tasks``
prompts each stage of a composition as its training task (``decoding.stage_tasks``).

    python benchmarks/grounded_lm_policy.py --checkpoint C --domain metaworld --level rephrase \
        --episodes 30 --out results.json
    python benchmarks/grounded_lm_policy.py --checkpoint C --domain metaworld --level hard \
        --tasks make-coffee locked-door-open --episodes 16 --stage-tasks lm
"""

from __future__ import annotations

import argparse
import json
import time
from collections import defaultdict

import numpy as np
import torch

from imaginebench.envs import get_domain, make
from imaginebench.imagination.decoder import Imaginer


def simulator_step(env: object):
    """``(states (1, D), actions (1, A)) -> (1, D)``: one step of ``env`` (one rollout at a
    time, so the row is always this env's)."""

    def step(states: np.ndarray, actions: np.ndarray, *context: object) -> np.ndarray:
        observation, *_ = env.step(actions[0])
        return np.asarray(observation, dtype=np.float32)[None]

    return step


def run(
    checkpoint: str,
    domain: str,
    level: str,
    episodes: int,
    seed: int,
    horizon: int | None,
    stage_tasks: str = "off",
    tasks: list[str] | None = None,
) -> dict[str, object]:
    from imaginebench.modules.grounding import GroundingModule

    torch.manual_seed(seed)
    module = GroundingModule.load_from_checkpoint(checkpoint, map_location="cpu", weights_only=True)
    module.merge_lora()
    env = make(domain, level).unwrapped
    horizon = horizon or int(env.max_episode_steps)
    suite = get_domain(domain).make_suite()
    if tasks:  # the level's episodes of these tasks, in the level's order
        pool = suite.episodes(level, 20 * episodes, seed, split="data")
        specs = [s for s in pool if getattr(s.task, "name", None) in tasks][:episodes]
        if len(specs) < episodes:
            raise ValueError(f"{level!r} has too few episodes of {sorted(tasks)} in its draw")
    else:
        specs = suite.episodes(level, episodes, seed, split="data")
    per_task: dict[str, list[dict[str, float]]] = defaultdict(list)
    started = time.perf_counter()
    for spec in specs:
        observation, _ = env.reset(options={"episode": spec})
        if not np.allclose(observation, spec.initial_state, atol=1e-5):
            raise RuntimeError("the simulator did not start from the episode's initial state")
        decoding = {
            "strategy": "greedy",
            "batch_size": 1,
            "stage_tasks": stage_tasks,
        }
        imaginer = Imaginer(module, decoding, seed, dynamics=simulator_step(env))
        (rollout,) = imaginer.imagine([spec], horizon)
        progress = spec.task.progress(rollout.states)
        per_task[getattr(spec.task, "name", spec.task.family)].append(
            {
                "success": float(rollout.success),
                "steps": float(len(rollout.actions)),
                "progress_start": float(progress[0]),
                "progress_best": float(progress.max()),
                "stage_1": float(spec.task.stage(rollout.states).max())
                if getattr(spec.task, "two_stage", False)
                else float("nan"),
            }
        )
    env.close()
    rows = {
        task: {key: float(np.mean([r[key] for r in results])) for key in results[0]}
        | {"episodes": len(results)}
        for task, results in sorted(per_task.items())
    }
    every = [r for results in per_task.values() for r in results]
    return {
        "checkpoint": checkpoint,
        "domain": domain,
        "level": level,
        "episodes": episodes,
        "seed": seed,
        "horizon": horizon,
        "stage_tasks": stage_tasks,
        "only_tasks": tasks,
        "seconds": round(time.perf_counter() - started, 1),
        "success": float(np.mean([r["success"] for r in every])),
        "tasks": rows,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--domain", required=True)
    parser.add_argument("--level", default="rephrase")
    parser.add_argument("--episodes", type=int, default=30)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--horizon", type=int, default=None)
    parser.add_argument(
        "--stage-tasks",
        choices=("off", "lm"),
        default="off",
        help="lm: prompt each stage of a composition as its training task (decoding option; "
        "the simulator is the state model, so it sees and moves every entity)",
    )
    parser.add_argument("--tasks", nargs="+", help="only the level's episodes of these tasks")
    parser.add_argument("--out", default=None, help="also write the results as JSON here")
    args = parser.parse_args()
    result = run(
        args.checkpoint,
        args.domain,
        args.level,
        args.episodes,
        args.seed,
        args.horizon,
        args.stage_tasks,
        args.tasks,
    )
    print(
        f"{args.domain} {args.level}: success {100 * result['success']:.1f} % "
        f"({args.episodes} episodes, {result['seconds']} s)"
    )
    print(
        "| task | episodes | stage 1 reached | success | steps | progress at start | "
        "best progress |"
    )
    print("|---|---|---|---|---|---|---|")
    for task, row in result["tasks"].items():
        stage = "" if np.isnan(row["stage_1"]) else f"{100 * row['stage_1']:.0f} %"
        print(
            f"| {task} | {row['episodes']} | {stage} | {100 * row['success']:.0f} % | "
            f"{row['steps']:.1f} | {row['progress_start']:.3f} | {row['progress_best']:.3f} |"
        )
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=2)


if __name__ == "__main__":
    main()
