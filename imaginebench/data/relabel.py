"""Relabel imaginary episodes with the current success functions.

An imagined episode's ``success`` flag (and whether it ended ``terminated`` or ``truncated``)
is its task's judgement of the imagined states. When a success function changes, the states
stay right and the flags go stale; :func:`relabel_success` judges them again (states, actions
and rewards are untouched) and records the relabelling in the dataset's provenance.
"""

from __future__ import annotations

import dataclasses
import time

from imaginebench.data.dataset import RolloutDataset
from imaginebench.envs.base import Task


def relabel_success(dataset: RolloutDataset, reason: str) -> tuple[RolloutDataset, int]:
    """``dataset`` with every episode's success and end flags judged again by its task; the
    number of episodes whose flags changed."""
    episodes, changed = [], 0
    for i in range(len(dataset)):
        ep = dataset.episode(i)
        success = bool(Task.from_spec(ep.task_spec).success(ep.states)[1:].any())
        changed += success != ep.success
        ended = ep.terminated or ep.truncated
        episodes.append(
            dataclasses.replace(
                ep, success=success, terminated=success, truncated=ended and not success
            )
        )
    provenance = dict(dataset.provenance)
    provenance.setdefault("relabelled", []).append(
        {"reason": reason, "changed_episodes": changed, "time": time.strftime("%Y-%m-%d %H:%M")}
    )
    relabelled = RolloutDataset.from_episodes(
        episodes,
        domain=dataset.domain,
        action_spec=dataset.action_spec,
        provenance=provenance,
    )
    return relabelled, changed
