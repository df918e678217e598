"""Reference policies scored on the algorithms' evaluation set: the random policy (chance
level) and the domain's expert (what the data's author achieves)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from imaginebench.atomic import write_text_atomically
from imaginebench.callbacks.evaluation import ExpertPolicy, evaluate_level

REFERENCE_NAMES = {"random": "random policy", "expert": "expert"}


class RandomPolicy:
    """Uniformly random actions of an environment's action space.

    Args:
        action_space: the environment's gymnasium action space (discrete or box).
        seed: seed of the action stream.
    """

    def __init__(self, action_space: Any, seed: int) -> None:
        self.space = action_space
        self.rng = np.random.default_rng(seed)

    def act(self, states: np.ndarray, instructions: list[str]) -> np.ndarray:
        if hasattr(self.space, "n"):
            return self.rng.integers(0, self.space.n, size=len(states))
        low, high = self.space.low, self.space.high
        return self.rng.uniform(low, high, size=(len(states), *self.space.shape))


def evaluation_settings(config: dict[str, Any]) -> dict[str, Any]:
    """The final-score settings of a resolved training config's ``SuccessRateEvaluation``:
    levels, episodes per level, evaluation seed, time-limit override."""
    callback = next(
        c
        for c in config["trainer"]["callbacks"]
        if c["class_path"].endswith("SuccessRateEvaluation")
    )
    args = callback["init_args"]
    settings = {
        "levels": list(args.get("levels") or ["train", "rephrase", "easy", "hard"]),
        "episodes": int(args.get("test_episodes_per_level", 200)),
        "seed": int(args.get("seed", 0)),
        "max_episode_steps": args.get("max_episode_steps"),
    }
    if args.get("max_envs"):  # how many simulators at once: not part of the score otherwise
        settings["max_envs"] = int(args["max_envs"])
    return settings


def reference_job(policy: str, domain: str, evaluation: dict[str, Any]) -> dict[str, Any]:
    """What a reference run does (the child process's instructions), and its hash."""
    job = {"kind": "reference", "policy": policy, "domain": domain, **evaluation}
    text = json.dumps(job, sort_keys=True)
    return {**job, "hash": hashlib.sha256(text.encode()).hexdigest()[:16]}


def score_reference(job: dict[str, Any], out: Path) -> None:
    """Score the reference ``job["policy"]`` on every level and write ``out`` in the format of
    the evaluation callback's ``results.json`` (per level and per task)."""
    from imaginebench.envs import make
    from imaginebench.experts import make_expert

    domain, seed = job["domain"], job["seed"]
    levels = {}
    for level in job["levels"]:
        if job["policy"] == "random":
            policy: Any = RandomPolicy(make(domain, level).action_space, seed=0)
        else:
            policy = ExpertPolicy(lambda: make_expert(domain, epsilon=0.0, seed=0))
        result = evaluate_level(
            policy,
            domain,
            level,
            job["episodes"],
            seed,
            max_episode_steps=job["max_episode_steps"],
            max_envs=job.get("max_envs"),
        )
        levels[level] = asdict(result)
        print(f"{level}: {100 * result.success:.1f}% of {result.episodes}", flush=True)
    payload = {
        "levels": levels,
        "seed": seed,
        "episodes_per_level": job["episodes"],
        "global_step": 0,
        "algorithm": REFERENCE_NAMES[job["policy"]],
    }
    write_text_atomically(out, json.dumps(payload, indent=2))
