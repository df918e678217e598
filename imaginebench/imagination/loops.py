"""Loop erasure: cut the detours of an imagined rollout that come back to a state it visited.

A rollout that returns to a state it has been in (turn left, then right; step forward, then
back) has spent the steps in between going nowhere. Erasing the loop keeps the first visit and
continues with the action taken at the last visit, so every transition left is one the rollout
imagined, the start and the final state are unchanged, and the rollout gets shorter. No
simulator is involved. States count as the same only when they are equal number for number:
on discrete domains (BabyAI's grid) loops are exact; on continuous ones they almost never are,
and the step changes nothing. A rollout is left whole when erasing would leave no step or
change whether its states satisfy its instruction (a task judged on the path, such as "first
A, then B", may need the visit a loop holds).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import numpy as np

from imaginebench.data.dataset import Episode
from imaginebench.envs.base import Task
from imaginebench.imagination.decoder import ImaginedRollout


def loop_free_steps(states: np.ndarray) -> np.ndarray:
    """The transitions ``t`` (indices into the ``T`` actions) of the loop-erased path through
    ``states`` ``(T + 1, D)``: the path visits each distinct state once, and its transition out
    of a state is the one taken at that state's last visit."""
    first_at: dict[bytes, int] = {}  # state -> its position on the path
    path: list[int] = []  # time index of each state on the path (its last visit so far)
    for t, state in enumerate(np.ascontiguousarray(states)):
        key = state.tobytes()
        where = first_at.get(key)
        if where is None:
            first_at[key] = len(path)
            path.append(t)
            continue
        for dropped in path[where + 1 :]:
            del first_at[np.ascontiguousarray(states[dropped]).tobytes()]
        path[where + 1 :] = []
        path[where] = t  # continue from here with this visit's action
    return np.asarray(path[:-1], dtype=np.int64)


def erasable_steps(task: Task, states: np.ndarray) -> np.ndarray | None:
    """:func:`loop_free_steps` of ``states``, or ``None`` when there is no loop, or erasing it
    would leave no step or change whether the states satisfy ``task`` at some step."""
    steps = loop_free_steps(states)
    if len(steps) in (0, len(states) - 1):
        return None
    if bool(task.success(_along(states, steps))[1:].any()) != bool(task.success(states)[1:].any()):
        return None
    return steps


def erase_loops(
    episode: Episode,
    rewards_of: Callable[[Task, np.ndarray, np.ndarray], np.ndarray],
) -> Episode:
    """``episode`` without its loops (itself when :func:`erasable_steps` finds none to erase).
    ``rewards_of(task, states, actions)`` (the domain's ``episode_rewards``) labels the shorter
    rollout again: rewards may depend on the step count, as BabyAI's do."""
    task = Task.from_spec(episode.task_spec)
    steps = erasable_steps(task, episode.states)
    if steps is None:
        return episode
    states, actions = _along(episode.states, steps), episode.actions[steps]
    return replace(
        episode,
        states=states,
        actions=actions,
        rewards=np.asarray(rewards_of(task, states, actions), dtype=np.float32),
        confidence={name: values[steps] for name, values in episode.confidence.items()},
    )


def erase_rollout_loops(rollout: ImaginedRollout) -> ImaginedRollout:
    """A decoded candidate without its loops (itself when :func:`erasable_steps` finds none to
    erase); its log-likelihood becomes the sum over the steps left when the model gives them
    per step."""
    steps = erasable_steps(rollout.spec.task, rollout.states)
    if steps is None:
        return rollout
    per_step = np.asarray(rollout.step_log_likelihoods)
    has_steps = per_step.shape[:1] == (len(rollout.actions),)
    return replace(
        rollout,
        states=_along(rollout.states, steps),
        actions=rollout.actions[steps],
        step_log_likelihoods=per_step[steps] if has_steps else per_step,
        log_likelihood=float(per_step[steps].sum()) if has_steps else rollout.log_likelihood,
    )


def _along(states: np.ndarray, steps: np.ndarray) -> np.ndarray:
    """The states a rollout visits when it takes only the transitions ``steps``."""
    return np.concatenate([states[steps], states[-1:]])
