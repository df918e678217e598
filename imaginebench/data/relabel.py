"""Relabel imaginary episodes with the current success functions.

An imagined episode's ``success`` flag (whether it ended ``terminated`` or ``truncated``) and
its rewards are its task's judgement of the imagined states. When a success function changes,
the states stay right and the labels go stale; :func:`relabel_success` judges them again
(states and actions are untouched, rewards recomputed by the domain's reward function) and
records the relabelling in the dataset's provenance. With ``drop_unsuccessful`` it also applies
imagination's own-success filter again: episodes that no longer satisfy their instruction go.
"""

from __future__ import annotations

import dataclasses
import time

import numpy as np

from imaginebench.data.dataset import RolloutDataset
from imaginebench.envs import get_domain
from imaginebench.envs.base import Task


def relabel_success(
    dataset: RolloutDataset, reason: str, drop_unsuccessful: bool = False
) -> tuple[RolloutDataset, int]:
    """``dataset`` with every episode's success, end flags and rewards judged again by its task
    (without the episodes that fail it, if ``drop_unsuccessful``); the number of episodes whose
    success changed."""
    rewards_of = get_domain(dataset.domain).episode_rewards
    episodes, changed, dropped = [], 0, 0
    for i in range(len(dataset)):
        ep = dataset.episode(i)
        task = Task.from_spec(ep.task_spec)
        success = bool(task.success(ep.states)[1:].any())
        changed += success != ep.success
        if drop_unsuccessful and not success:
            dropped += 1
            continue
        ended = ep.terminated or ep.truncated
        rewards = np.asarray(rewards_of(task, ep.states, ep.actions), dtype=np.float32)
        episodes.append(
            dataclasses.replace(
                ep,
                rewards=rewards,
                success=success,
                terminated=success,
                truncated=ended and not success,
            )
        )
    if not episodes:
        raise ValueError("no episode satisfies its instruction any more; nothing to write")
    provenance = dict(dataset.provenance)
    record = {
        "reason": reason,
        "changed_episodes": changed,
        "time": time.strftime("%Y-%m-%d %H:%M"),
    }
    if drop_unsuccessful:
        record["dropped_unsuccessful"] = dropped
    provenance.setdefault("relabelled", []).append(record)
    relabelled = RolloutDataset.from_episodes(
        episodes,
        domain=dataset.domain,
        action_spec=dataset.action_spec,
        provenance=provenance,
    )
    return relabelled, changed
