"""Scripted CLEVR-Robot expert: one-step look-ahead in the simulator on the task's potential.

For every candidate push (the 8 directions of each ball that matters for the task) the expert
simulates the outcome from the current physics state, judges it with the task's own success
function, and takes the push that succeeds or, failing that, raises the task's shaped potential
the most. When no push improves the potential it takes a random candidate push to get unstuck.
``epsilon`` adds uniformly random pushes for data diversity.
"""

from __future__ import annotations

import numpy as np

from imaginebench.envs.clevr.env import ClevrEnv
from imaginebench.envs.clevr.physics import PUSH_DIRECTIONS
from imaginebench.envs.clevr.tasks import relevant_balls


class ClevrExpert:
    """Acts on a :class:`ClevrEnv` (it reads and restores the env's simulator state)."""

    def __init__(
        self, epsilon: float = 0.0, seed: int | None = None, two_step_width: int = 12
    ) -> None:
        if not 0.0 <= epsilon <= 1.0:
            raise ValueError(f"epsilon must be in [0, 1], got {epsilon}")
        self.epsilon = epsilon
        self.two_step_width = two_step_width
        self.rng = np.random.default_rng(seed)

    def candidates(self, env: ClevrEnv) -> np.ndarray:
        assert env.task is not None, "reset the env first"
        n_dir = len(PUSH_DIRECTIONS)
        return np.array([b * n_dir + d for b in relevant_balls(env.task) for d in range(n_dir)])

    def act(self, env: ClevrEnv) -> int:
        env = env.unwrapped  # type: ignore[assignment]
        if self.rng.random() < self.epsilon:
            return int(self.rng.choice(env.action_space.n))
        return int(self.rng.choice(self.choices(env)))

    def action_probabilities(self, env: ClevrEnv) -> np.ndarray:
        """``(40,)`` probabilities of :meth:`act`'s action in the env's current state: a random
        push with probability ``epsilon``, else one of :meth:`choices` uniformly. The expert's
        own policy, so the cross-entropy of its actions under it is the lowest any model of
        the data can reach (ties and exploration make the expert's choice random)."""
        env = env.unwrapped  # type: ignore[assignment]
        n = int(env.action_space.n)
        probabilities = np.full(n, self.epsilon / n)
        choices = self.choices(env)
        np.add.at(probabilities, choices, (1.0 - self.epsilon) / len(choices))
        return probabilities

    def choices(self, env: ClevrEnv) -> np.ndarray:
        """The pushes the expert picks from uniformly when it does not explore: those that
        accomplish the task, else those that raise its potential the most, else the best by a
        two-push look-ahead. Restores the simulator to its current state."""
        env = env.unwrapped  # type: ignore[assignment]
        candidates = self.candidates(env)
        physics, task = env.physics, env.task
        assert task is not None
        history = np.stack(env.trajectory)
        snapshot = physics.snapshot()
        outcomes = []
        for action in candidates:
            outcomes.append(physics.push(int(action)))
            physics.restore(snapshot)
        trajectories = np.concatenate(
            [
                np.broadcast_to(history, (len(candidates), *history.shape)),
                np.stack(outcomes)[:, None],
            ],
            axis=1,
        )
        success = task.success(trajectories)[:, -1]
        if success.any():
            return candidates[success]
        progress = task.progress(trajectories)[:, -1]
        current = float(task.progress(history[None])[0, -1])
        if progress.max() <= current + 1e-4:  # stuck: look two pushes ahead
            top = np.argsort(-progress, kind="stable")[: self.two_step_width]
            return self._two_step(env, candidates, top, history, outcomes)
        return candidates[np.flatnonzero(progress >= progress.max() - 1e-6)]

    def _two_step(
        self,
        env: ClevrEnv,
        candidates: np.ndarray,
        first_moves: np.ndarray,
        history: np.ndarray,
        outcomes: list,
    ) -> np.ndarray:
        """Among ``first_moves`` (indices into candidates), the pushes with the best potential
        reachable by a second push."""
        physics, task = env.physics, env.task
        assert task is not None
        snapshot = physics.snapshot()
        scores = np.empty(len(first_moves))
        for k, i in enumerate(first_moves):
            physics.push(int(candidates[i]))
            after_first = physics.snapshot()
            finals = []
            for second in candidates:
                finals.append(physics.push(int(second)))
                physics.restore(after_first)
            physics.restore(snapshot)
            prefix = np.concatenate([history, outcomes[i][None]])
            trajectories = np.concatenate(
                [
                    np.broadcast_to(prefix, (len(candidates), *prefix.shape)),
                    np.stack(finals)[:, None],
                ],
                axis=1,
            )
            value = task.progress(trajectories)[:, -1] + 100.0 * task.success(trajectories)[:, -1]
            scores[k] = value.max()
        best = np.flatnonzero(scores >= scores.max() - 1e-6)
        return candidates[first_moves[best]]
