"""Plausibility of (imagined) BabyAI rollouts, for the imagination quality report.

* **legal state** (:func:`~imaginebench.envs.babyai.world.legal_states`): finite integers,
  colours 0..5, door state 0..2 on the east wall (col 7, row 1..6), the agent and every object
  on the floor inside the room, no two objects in one cell, at most one object carried, and a
  carried object reported at (0, 0) and matching the carried slot.
* **correct transition** (the Table-2 notion, judged on states): ``s_{t+1}`` is a state that
  *some* action leads to from a legal ``s_t``. So the agent moved at most one cell and not into
  a wall or the door, or an object went from the agent's cell into its empty hands, or the held
  object was put on the agent's free cell, or an adjacent door changed by minigrid's rules — and
  nothing else changed. The recorded action is not required to be the one that explains the
  change; :meth:`BabyAIQuality.exact_transitions` is the stricter replay of the recorded action.

Both use the environment's own dynamics (:func:`~imaginebench.envs.babyai.world.successors`).
"""

from __future__ import annotations

import numpy as np

from imaginebench.envs.babyai.world import legal_states, successors, transition


class BabyAIQuality:
    """Legality of states and correctness of transitions."""

    def legal(self, states: np.ndarray) -> np.ndarray:
        """``(N,)`` bool for states ``(N, 17)``."""
        return legal_states(np.asarray(states))

    def correct_transitions(self, states: np.ndarray, actions: np.ndarray) -> np.ndarray:
        """``(T,)`` bool: ``states[t + 1]`` is reachable from a legal ``states[t]`` in one step."""
        states = np.asarray(states, dtype=np.float64)
        legal = self.legal(states)
        out = np.zeros(len(states) - 1, dtype=bool)
        for t in np.flatnonzero(legal[:-1] & legal[1:]):
            reachable = successors(states[t], validate=False)
            out[t] = bool((reachable == np.rint(states[t + 1])).all(axis=1).any())
        return out

    def exact_transitions(self, states: np.ndarray, actions: np.ndarray) -> np.ndarray:
        """``(T,)`` bool: ``states[t + 1]`` is exactly the outcome of ``actions[t]``."""
        states = np.asarray(states, dtype=np.float64)
        legal = self.legal(states)
        actions = np.asarray(actions)
        out = np.zeros(len(actions), dtype=bool)
        for t in np.flatnonzero(legal[:-1] & legal[1:]):
            action = actions[t]
            if not (np.isfinite(action) and float(action).is_integer() and 0 <= action < 7):
                continue
            nxt = transition(states[t], int(action), validate=False)
            out[t] = bool(np.array_equal(nxt, np.rint(states[t + 1])))
        return out
