"""The mocap target Meta-World's hand is pulled to, rebuilt from a rollout's own actions.

Meta-World moves the hand through a mocap body: each action adds ``action_scale * a[:3]`` to
the mocap position (clipped to the task's mocap box), and the physics pulls the hand towards it,
with lag and momentum. The 91-d state holds the hand but not the target, so a step's change of
state is not a function of the state and action alone (docs/metaworld.md). The target is a
function of the task's constants and the actions taken so far, though, so a model of the
dynamics can be given it (with the last change of state, for the momentum) without the
simulator: :func:`dynamics_context`. The constants are metaworld 3.1.1's (checked against the
environments by ``tests/test_metaworld_mocap.py``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

#: the mocap box of the tasks that reach below the table top (door, faucet): z from -0.15
_LOW_DEEP = (-0.5, 0.4, -0.15)
_LOW = (-0.5, 0.4, 0.05)
_HIGH = (0.5, 1.0, 0.5)
_NEAR, _FAR = (0.0, 0.4, 0.2), (0.0, 0.6, 0.2)
ACTION_SCALE = 0.01

#: task -> (mocap box low, high, the mocap position at reset)
MOCAP: dict[str, tuple[tuple[float, ...], tuple[float, ...], tuple[float, ...]]] = {
    "reach": (_LOW, _HIGH, _FAR),
    "push": (_LOW, _HIGH, _FAR),
    "pick-place": (_LOW, _HIGH, _FAR),
    "button-press": (_LOW, _HIGH, _NEAR),
    "door-unlock": (_LOW_DEEP, _HIGH, _FAR),
    "door-open": (_LOW, _HIGH, _FAR),
    "window-open": (_LOW, _HIGH, _NEAR),
    "faucet-open": (_LOW_DEEP, _HIGH, _NEAR),
    "coffee-push": (_LOW, _HIGH, _NEAR),
    "coffee-button": (_LOW, _HIGH, _NEAR),
    "reach-wall": (_LOW, _HIGH, _FAR),
    "push-wall": (_LOW, _HIGH, _FAR),
    "pick-place-wall": (_LOW, _HIGH, _FAR),
    "button-press-wall": (_LOW, _HIGH, _NEAR),
    "door-lock": (_LOW_DEEP, _HIGH, _FAR),
    "door-close": (_LOW, _HIGH, (-0.5, 0.6, 0.2)),
    "window-close": (_LOW, _HIGH, _NEAR),
    "faucet-close": (_LOW_DEEP, _HIGH, _NEAR),
    "make-coffee": (_LOW, _HIGH, _NEAR),
    "locked-door-open": (_LOW_DEEP, _HIGH, _FAR),
    "hammer": (_LOW, _HIGH, _NEAR),
    "soccer": (_LOW, _HIGH, _FAR),
}


def mocap_targets(task_name: str, actions: np.ndarray) -> np.ndarray:
    """``(T, 3)``: the mocap position after each of ``T`` actions, from the task's reset."""
    if task_name not in MOCAP:
        raise ValueError(f"no mocap constants for Meta-World task {task_name!r}")
    low, high, start = (np.asarray(x, dtype=np.float64) for x in MOCAP[task_name])
    steps = np.clip(np.asarray(actions, dtype=np.float64)[:, :3], -1.0, 1.0) * ACTION_SCALE
    out = np.empty((len(steps), 3))
    target = start
    for t, step in enumerate(steps):
        target = np.clip(target + step, low, high)
        out[t] = target
    return out


def dynamics_context(task: Any, states: np.ndarray, actions: np.ndarray) -> np.ndarray:
    """``(T, D + 3)`` float32, per transition ``t`` of a rollout: the last change of state
    ``s_t - s_{t-1}`` (zeros at ``t = 0``) and the mocap target after ``a_t`` minus the hand,
    given the rollout's states ``s_0 … s_{T-1}`` ``(T, D)`` before each transition and its
    actions ``(T, 4)``."""
    states = np.asarray(states, dtype=np.float64)
    if len(states) != len(actions):
        raise ValueError(f"{len(states)} states before transitions, {len(actions)} actions")
    last_change = np.diff(states, axis=0, prepend=states[:1])
    pull = mocap_targets(task.name, actions) - states[:, :3]
    return np.concatenate([last_change, pull], axis=1).astype(np.float32)


class MocapContinuation:
    """:func:`dynamics_context` for ``n`` continuations of one rollout, one step at a time.

    A search over plans (the imagination's lookahead) continues a rollout's history
    ``states`` ``(t + 1, D)`` (the last is the current state) and ``actions`` ``(t, 4)`` along
    ``n`` candidate plans at once; :meth:`step` gives each candidate's context of its next
    transition, as :func:`dynamics_context` would give it for the whole path, without
    recomputing the history."""

    def __init__(self, task: Any, states: np.ndarray, actions: np.ndarray, n: int) -> None:
        if task.name not in MOCAP:
            raise ValueError(f"no mocap constants for Meta-World task {task.name!r}")
        states = np.asarray(states, dtype=np.float64)
        if len(states) != len(actions) + 1:
            raise ValueError(
                f"{len(states)} states need {len(states) - 1} actions, got {len(actions)}"
            )
        low, high, start = (np.asarray(x, dtype=np.float64) for x in MOCAP[task.name])
        self.low, self.high = low, high
        target = mocap_targets(task.name, actions)[-1] if len(actions) else start
        self.target = np.tile(target, (n, 1))
        self.previous = np.tile(states[-2] if len(states) > 1 else states[-1], (n, 1))

    def step(self, states: np.ndarray, actions: np.ndarray) -> np.ndarray:
        """``(n, D + 3)`` float32: the context of each candidate's transition from ``states``
        ``(n, D)`` by ``actions`` ``(n, 4)``; the candidates then stand at their next state."""
        states = np.asarray(states, dtype=np.float64)
        step = np.clip(np.asarray(actions, dtype=np.float64)[:, :3], -1.0, 1.0) * ACTION_SCALE
        self.target = np.clip(self.target + step, self.low, self.high)
        last_change, self.previous = states - self.previous, states
        return np.concatenate([last_change, self.target - states[:, :3]], axis=1).astype(np.float32)
