"""Physical plausibility of (imagined) CLEVR-Robot rollouts, for the imagination quality report.

* **legal state**: every ball centre lies inside the walls (with ``LEGAL_TOLERANCE``) and no two
  balls overlap by more than ``LEGAL_TOLERANCE``.
* **correct transition**: from the imagined state ``s_t``, the simulator executes ``a_t``; the
  transition is correct when every ball of the imagined ``s_{t+1}`` lies within
  ``TRANSITION_TOLERANCE`` of the simulated one (so the pushed ball moved by the right amount
  in the right direction, and the others moved as collisions dictate). Transitions out of an
  illegal state cannot be simulated and count as incorrect.
"""

from __future__ import annotations

import numpy as np

from imaginebench.envs.clevr.physics import (
    BALL_RADIUS,
    NUM_BALLS,
    WALL_X,
    WALL_Y_BACK,
    WALL_Y_FRONT,
    ClevrPhysics,
)

LEGAL_TOLERANCE = 0.02
TRANSITION_TOLERANCE = 0.1  # about 3/4 of a ball radius; a free push moves a ball ~0.22


def legal_states(states: np.ndarray) -> np.ndarray:
    """``(N,)`` bool: each ``(N, 10)`` state is finite, inside the walls, without overlaps."""
    xy = np.asarray(states, dtype=np.float64).reshape(len(states), NUM_BALLS, 2)
    finite = np.isfinite(xy).all(axis=(1, 2))
    xy = np.nan_to_num(xy, nan=1e6)
    tol = LEGAL_TOLERANCE
    inside = (
        (np.abs(xy[..., 0]) <= WALL_X + tol)
        & (xy[..., 1] >= WALL_Y_FRONT - tol)
        & (xy[..., 1] <= WALL_Y_BACK + tol)
    ).all(axis=1)
    gaps = np.linalg.norm(xy[:, :, None] - xy[:, None], axis=-1)
    gaps[:, np.arange(NUM_BALLS), np.arange(NUM_BALLS)] = np.inf
    apart = (gaps >= 2 * BALL_RADIUS - tol).all(axis=(1, 2))
    return finite & inside & apart


class ClevrQuality:
    """Legality of states and correctness of transitions (replayed in the simulator)."""

    def __init__(self) -> None:
        self.physics = ClevrPhysics()

    def legal(self, states: np.ndarray) -> np.ndarray:
        return legal_states(states)

    def transition_errors(self, states: np.ndarray, actions: np.ndarray) -> np.ndarray:
        """``(T,)`` largest per-ball distance between imagined and simulated next states
        (``inf`` where ``s_t`` is illegal)."""
        legal = legal_states(states[:-1])
        out = np.full(len(actions), np.inf)
        for t in np.flatnonzero(legal):
            self.physics.set_state(states[t])
            simulated = self.physics.push(int(actions[t]))
            gap = (states[t + 1] - simulated).reshape(NUM_BALLS, 2)
            out[t] = float(np.linalg.norm(gap, axis=1).max())
        return out

    def correct_transitions(self, states: np.ndarray, actions: np.ndarray) -> np.ndarray:
        """``(T,)`` bool: the imagined next state matches the simulated one."""
        return self.transition_errors(states, actions) <= TRANSITION_TOLERANCE
