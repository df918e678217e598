"""Collect real rollouts by running a domain's expert (:mod:`imaginebench.experts`) in its
simulator."""

from __future__ import annotations

import multiprocessing
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import torch
from tqdm.auto import tqdm

from imaginebench.data.format import Episode, RolloutDataset, default_provenance
from imaginebench.envs import EpisodeSpec, Level, check_level, make
from imaginebench.envs.base import action_spec_of
from imaginebench.experts import EXPERT_DATA_VERSIONS, make_expert


@dataclass
class CollectConfig:
    """Real data collected automatically when the ``real`` file is missing.

    Args:
        episodes: number of expert episodes.
        seed: collection seed (the dataset is a pure function of the config).
        level: level whose tasks the expert solves.
        epsilon: probability of a random action in the expert.
        paraphrases: wordings stored per rollout (see :func:`imaginebench.data.collect.collect`).
    """

    episodes: int = 400
    seed: int = 0
    level: Level = "train"
    epsilon: float = 0.2
    paraphrases: int = 10

    def filename(self, domain: str) -> str:
        """The cache file's name: the collection settings and the version of the domain's
        expert data (:data:`~imaginebench.experts.EXPERT_DATA_VERSIONS`)."""
        return (
            f"{domain}_{self.level}_real_n{self.episodes}_s{self.seed}_e{self.epsilon:g}"
            f"_p{self.paraphrases}_x{EXPERT_DATA_VERSIONS.get(domain, 1)}.h5"
        )


EPISODE_STREAM = 2  # workers seed episode i's expert with [seed, 2, i] (1: the wordings)

# Checkpoints store data modules' hyperparameters: allow the config under weights_only loads.
torch.serialization.add_safe_globals([CollectConfig])


@dataclass(frozen=True)
class CollectionStats:
    """Simulated episodes and transitions (before paraphrase copies) and their speed."""

    episodes: int
    transitions: int
    seconds: float
    success_rate: float

    @property
    def episodes_per_second(self) -> float:
        return self.episodes / max(self.seconds, 1e-9)

    def __str__(self) -> str:
        return (
            f"collected {self.episodes} episodes ({self.transitions} transitions) in "
            f"{self.seconds:.1f} s: {self.episodes_per_second:.1f} episodes/s, "
            f"expert success {100 * self.success_rate:.1f}%"
        )


def rollout(env: Any, expert: Any, plan: EpisodeSpec, level: Level) -> Episode:
    """Run ``expert`` in ``env`` (unwrapped) on one planned episode, as real data."""
    state, info = env.reset(options={"episode": plan})
    action_dtype = np.int64 if env.action_space.dtype.kind == "i" else np.float32
    states, actions, rewards = [state], [], []
    terminated = truncated = False
    while not (terminated or truncated):
        action = expert.act(env)
        state, reward, terminated, truncated, info = env.step(action)
        states.append(state)
        actions.append(action)
        rewards.append(reward)
    return Episode(
        states=np.asarray(states, dtype=np.float32),
        actions=np.asarray(actions, dtype=action_dtype),
        rewards=np.asarray(rewards, dtype=np.float32),
        terminated=bool(terminated),
        truncated=bool(truncated),
        instruction=plan.instruction,
        task_spec=plan.task.spec(),
        level=level,
        source="real",
        success=bool(info["is_success"]),
    )


_WORKER: dict[str, Any] = {}


def _start_worker(domain: str, level: Level) -> None:
    """A worker process's own environment (built once, reused for its episodes)."""
    torch.set_num_threads(1)
    _WORKER["env"] = make(domain, level).unwrapped
    _WORKER["domain"], _WORKER["level"] = domain, level


def _worker_rollout(job: tuple[int, EpisodeSpec, float, int]) -> Episode:
    index, plan, epsilon, seed = job
    expert = make_expert(_WORKER["domain"], epsilon=epsilon, seed=[seed, EPISODE_STREAM, index])
    return rollout(_WORKER["env"], expert, plan, _WORKER["level"])


def collect(
    domain: str,
    level: Level,
    episodes: int,
    seed: int,
    *,
    epsilon: float = 0.0,
    paraphrases: int = 1,
    progress: bool = True,
    workers: int = 1,
) -> tuple[RolloutDataset, CollectionStats]:
    """Run the expert on ``episodes`` seeded episodes of ``level`` and pack them as real data.

    With ``paraphrases > 1`` every rollout is stored once per wording: the one it was collected
    with plus ``paraphrases - 1`` other wordings of the same task from the level's wording set
    (the original real data carried 54 paraphrases per trajectory). The same arguments always
    give the same dataset.

    ``workers > 1`` runs the episodes in that many processes (each builds its own environment;
    episodes come back in order; a script calling it needs the ``if __name__ == "__main__":``
    guard of spawned processes). There every episode has its own expert, seeded with
    ``[seed, 2, episode index]``, so the dataset does not depend on the number of workers. It
    equals the single-process dataset (one expert, seeded with ``seed``, for every episode) when
    the expert draws no random numbers: every expert but CLEVR's (which breaks ties at random)
    with ``epsilon = 0``.
    """
    check_level(level)
    if episodes < 1:
        raise ValueError(f"episodes must be >= 1, got {episodes}")
    if paraphrases < 1:
        raise ValueError(f"paraphrases must be >= 1, got {paraphrases}")
    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    wording_rng = np.random.default_rng([seed, 1])
    env = make(domain, level).unwrapped
    expert = make_expert(domain, epsilon=epsilon, seed=seed)
    plans = env.suite.episodes(level, episodes, seed, split="data")
    out: list[Episode] = []
    successes: list[bool] = []
    simulated = 0
    start = time.perf_counter()
    # disable=None: a progress bar on terminals only (no megabytes of bar updates in log files)
    bar = tqdm(
        total=len(plans),
        desc=f"collect {domain}/{level}",
        unit="ep",
        disable=None if progress else True,
    )
    pool = None
    if workers > 1:
        pool = multiprocessing.get_context("spawn").Pool(
            workers, initializer=_start_worker, initargs=(domain, level)
        )
        jobs = [(i, plan, epsilon, seed) for i, plan in enumerate(plans)]
        rollouts: Iterator[Episode] = pool.imap(_worker_rollout, jobs)
    else:
        rollouts = (rollout(env, expert, plan, level) for plan in plans)
    try:
        for plan, episode in zip(plans, rollouts):
            out.append(episode)
            successes.append(episode.success)
            simulated += len(episode.actions)
            if paraphrases > 1:
                others = [
                    w
                    for w in plan.task.instructions(env.suite.wording(level))
                    if w != plan.instruction
                ]
                picked = wording_rng.choice(
                    len(others), min(paraphrases - 1, len(others)), replace=False
                )
                out += [replace(episode, instruction=others[i]) for i in sorted(picked)]
            bar.update()
            bar.set_postfix(success=f"{np.mean(successes):.2f}", refresh=False)
    finally:
        bar.close()
        if pool is not None:
            pool.terminate()
    seconds = time.perf_counter() - start
    action_spec = action_spec_of(env.action_space)
    provenance = default_provenance(
        generator=f"{type(expert).__name__}(epsilon={epsilon})",
        epsilon=epsilon,
        seed=seed,
        paraphrases=paraphrases,
        level=level,
        episodes=episodes,
    )
    if workers > 1:
        provenance["workers"] = workers
    dataset = RolloutDataset.from_episodes(
        out, domain=domain, action_spec=action_spec, provenance=provenance
    )
    stats = CollectionStats(
        episodes=len(successes),
        transitions=simulated,
        seconds=seconds,
        success_rate=float(np.mean(successes)),
    )
    return dataset, stats
