"""Collect real rollouts by running a domain's scripted expert in its simulator."""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
from tqdm.auto import tqdm

from imaginebench.data.format import Episode, RolloutDataset, default_provenance
from imaginebench.envs import Level, check_level, get_domain, make


@dataclass(frozen=True)
class CollectionStats:
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


def collect(
    domain: str,
    level: Level,
    episodes: int,
    seed: int,
    *,
    epsilon: float = 0.0,
    progress: bool = True,
) -> tuple[RolloutDataset, CollectionStats]:
    """Run the expert on ``episodes`` seeded episodes of ``level`` and pack them as real data.

    The same ``(domain, level, episodes, seed, epsilon)`` always gives the same dataset.
    """
    check_level(level)
    if episodes < 1:
        raise ValueError(f"episodes must be >= 1, got {episodes}")
    spec = get_domain(domain)
    env = make(domain, level).unwrapped
    expert = spec.make_expert(epsilon=epsilon, seed=seed)
    plans = env.suite.episodes(level, episodes, seed, split="data")
    out: list[Episode] = []
    start = time.perf_counter()
    bar = tqdm(plans, desc=f"collect {domain}/{level}", unit="ep", disable=not progress)
    for plan in bar:
        state, info = env.reset(options={"episode": plan})
        states, actions, rewards = [state], [], []
        terminated = truncated = False
        while not (terminated or truncated):
            action = expert.act(env)
            state, reward, terminated, truncated, info = env.step(action)
            states.append(state)
            actions.append(action)
            rewards.append(reward)
        out.append(
            Episode(
                states=np.asarray(states, dtype=np.float32),
                actions=np.asarray(actions, dtype=np.int64),
                rewards=np.asarray(rewards, dtype=np.float32),
                terminated=bool(terminated),
                truncated=bool(truncated),
                instruction=plan.instruction,
                task_spec=plan.task.spec(),
                level=level,
                source="real",
                success=bool(info["is_success"]),
            )
        )
        bar.set_postfix(success=f"{np.mean([e.success for e in out]):.2f}", refresh=False)
    seconds = time.perf_counter() - start
    action_spec = {"type": "discrete", "n": int(env.action_space.n)}
    provenance = default_provenance(
        generator=f"{type(expert).__name__}(epsilon={epsilon})",
        seed=seed,
        level=level,
        episodes=episodes,
    )
    dataset = RolloutDataset.from_episodes(
        out, domain=domain, action_spec=action_spec, provenance=provenance
    )
    stats = CollectionStats(
        episodes=len(out),
        transitions=dataset.num_transitions,
        seconds=seconds,
        success_rate=float(np.mean([e.success for e in out])),
    )
    return dataset, stats
