"""Lookahead: a short search in the learned state model before each imagined action.

Greedy decoding takes the grounded LM's action as it is. With a lookahead of ``H`` steps, each
step's action is instead the first of an ``H``-step plan found by the cross-entropy method in
the dynamics ensemble fitted on the real data (never the simulator):

1. the plan's mean starts from the rollout's plan of the step before, shifted by one (at its
   first step: the LM's action, repeated);
2. ``candidates`` plans are drawn around the mean (the mean itself and the LM's action for this
   step followed by the mean's rest among them), rolled forward
   by the ensemble's mean prediction, and scored by the rollout's own task: its state-only
   potential :meth:`~imaginebench.envs.base.Task.progress` at the end of the plan, minus
   ``spread_penalty`` times the members' disagreement summed over the plan (where the members
   part, the state model is guessing); a plan through a state the domain's legality rule
   rejects scores lowest;
3. the mean and spread are refitted to the ``elites`` best, ``iterations`` times; the action
   taken is the final mean's first.

The instruction's own judge thus steers the imagined actions as the ``require_success`` filter
does the rollouts, one step at a time: what the task asks for beyond the real data (HalfCheetah's
"faster") can be reached by actions the LM alone does not propose. The state model decides
what those actions do, so the rollouts are only as physical as it is: the disagreement term
keeps the plans where its members agree. Where the state model needs a dynamics context
(Meta-World's mocap target), each candidate carries its own, continued from the rollout's
history by the domain's ``plan_context``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from imaginebench.envs.base import Task
from imaginebench.imagination.confidence import TransitionEnsemble

#: the smallest spread of the candidates around the refitted mean (action units)
MIN_NOISE = 0.05


@dataclass
class LookaheadConfig:
    """Settings of :class:`Lookahead` (``lookahead:`` of ``imaginebench imagine``).

    Args:
        horizon: steps searched ahead of each action (0: off, the LM's action as it is).
        candidates: plans drawn per rollout and iteration.
        elites: best plans the mean and spread are refitted to.
        iterations: refits per step.
        noise: spread of the first draw around the mean, in action units.
        spread_penalty: weight of the ensemble members' disagreement (per step, in units of
            a real change's spread) against the task's potential.
    """

    horizon: int = 0
    candidates: int = 256
    elites: int = 24
    iterations: int = 4
    noise: float = 0.6
    spread_penalty: float = 0.5

    def __post_init__(self) -> None:
        if self.horizon < 0:
            raise ValueError(f"lookahead.horizon must be >= 0, got {self.horizon}")
        if self.candidates < 2:
            raise ValueError(f"lookahead.candidates must be >= 2, got {self.candidates}")
        if not 1 <= self.elites <= self.candidates:
            raise ValueError(
                f"lookahead.elites must be in 1..candidates ({self.candidates}), got {self.elites}"
            )
        if self.iterations < 1:
            raise ValueError(f"lookahead.iterations must be >= 1, got {self.iterations}")
        if not self.noise > 0:
            raise ValueError(f"lookahead.noise must be > 0, got {self.noise}")
        if not self.spread_penalty >= 0:
            raise ValueError(f"lookahead.spread_penalty must be >= 0, got {self.spread_penalty}")

    @property
    def enabled(self) -> bool:
        return self.horizon > 0


class Lookahead:
    """Refines continuous actions by a cross-entropy search in a dynamics ensemble.

    Args:
        ensemble: the dynamics ensemble fitted on the real data (the imagination's state model).
        config: the search settings.
        legal: the domain's legality rule (``(N, D) states -> (N,) bool``), or ``None``.
        action_low: lower bound of every action entry.
        action_high: upper bound of every action entry.
        plan_context: the domain's ``plan_context(task, states, actions, n)`` (see
            :class:`~imaginebench.envs.Domain`), needed when the ensemble models a dynamics
            context.
    """

    def __init__(
        self,
        ensemble: TransitionEnsemble,
        config: LookaheadConfig,
        legal: Callable[[np.ndarray], np.ndarray] | None = None,
        action_low: float = -1.0,
        action_high: float = 1.0,
        plan_context: Callable[[Task, np.ndarray, np.ndarray, int], Any] | None = None,
    ) -> None:
        if not config.enabled:
            raise ValueError("Lookahead needs lookahead.horizon >= 1")
        if ensemble.context is not None and plan_context is None:
            raise ValueError(
                "the state model takes a dynamics context (Meta-World's mocap target): the "
                "lookahead needs the domain's plan_context to give every candidate its own"
            )
        self.ensemble, self.config, self.legal = ensemble, config, legal
        self.plan_context = plan_context if ensemble.context is not None else None
        self.low, self.high = action_low, action_high
        self.plans: dict[int, np.ndarray] = {}

    def reset(self) -> None:
        """Forget every rollout's plan (a new batch)."""
        self.plans = {}

    @torch.no_grad()
    def refine(
        self,
        rollouts: Sequence[int],
        tasks: Sequence[Task],
        histories: Sequence[np.ndarray],
        proposed: np.ndarray,
        generator: torch.Generator,
        actions: Sequence[np.ndarray] | None = None,
    ) -> np.ndarray:
        """``(B, A)`` float32: the action of each rollout after the search.

        ``rollouts`` names each row (its plan is kept under that key for the next step),
        ``tasks`` its task, ``histories`` its ``(t + 1, D)`` imagined states so far (the last
        is the current state), ``proposed`` the LM's ``(B, A)`` action and ``actions`` the
        ``(t, A)`` actions taken so far (needed with a dynamics context)."""
        if self.plan_context is not None and actions is None:
            raise ValueError("a lookahead with a dynamics context needs the actions taken so far")
        cfg = self.config
        proposed = np.asarray(proposed, dtype=np.float32)
        b, a = proposed.shape
        mean = np.empty((b, cfg.horizon, a), dtype=np.float32)
        for row, key in enumerate(rollouts):
            previous = self.plans.get(key)  # planned at the step before: one step behind
            if previous is None:
                mean[row] = proposed[row]
            else:
                mean[row, :-1], mean[row, -1] = previous[1:], previous[-1]
        std = np.full_like(mean, cfg.noise)
        current = np.stack([np.asarray(h[-1], dtype=np.float32) for h in histories])
        for _ in range(cfg.iterations):
            noise = torch.randn((b, cfg.candidates, cfg.horizon, a), generator=generator).numpy()
            plans = np.clip(mean[:, None] + std[:, None] * noise, self.low, self.high)
            plans[:, 0] = mean  # the current mean stays a candidate,
            plans[:, 1] = mean  # and so does the LM's action followed by the mean's rest
            plans[:, 1, 0] = proposed
            scores = self._scores(tasks, histories, actions, current, plans.astype(np.float32))
            best = np.argsort(-scores, axis=1)[:, : cfg.elites]
            elites = np.take_along_axis(plans, best[:, :, None, None], axis=1)
            mean = elites.mean(1)
            std = np.maximum(elites.std(1), MIN_NOISE)
        for row, key in enumerate(rollouts):
            self.plans[key] = mean[row]
        return mean[:, 0].astype(np.float32)

    def _scores(
        self,
        tasks: Sequence[Task],
        histories: Sequence[np.ndarray],
        actions: Sequence[np.ndarray] | None,
        current: np.ndarray,
        plans: np.ndarray,
    ) -> np.ndarray:
        """``(B, P)``: each plan's task potential at its end, less its disagreement penalty."""
        b, p, h, _ = plans.shape
        state = np.repeat(current, p, axis=0)
        futures = np.empty((b * p, h, current.shape[-1]), dtype=np.float32)
        spread = np.zeros(b * p)
        continuations = None
        if self.plan_context is not None:
            assert actions is not None
            continuations = [
                self.plan_context(task, history, taken, p)
                for task, history, taken in zip(tasks, histories, actions, strict=True)
            ]
        for step in range(h):
            taken = plans[:, :, step].reshape(b * p, -1)
            context = None
            if continuations is not None:
                context = np.concatenate(
                    [
                        continuation.step(state[row * p : (row + 1) * p], plans[row, :, step])
                        for row, continuation in enumerate(continuations)
                    ]
                )
            futures[:, step], disagreement = self.ensemble.step_with_spread(state, taken, context)
            spread += disagreement
            state = futures[:, step]
        futures = futures.reshape(b, p, h, -1)
        scores = -self.config.spread_penalty * spread.reshape(b, p)
        for row, task in enumerate(tasks):
            past = np.broadcast_to(histories[row], (p, *np.shape(histories[row])))
            path = np.concatenate([past, futures[row]], axis=1)
            scores[row] += np.asarray(task.progress(path), dtype=float)[:, -1]
            if self.legal is not None:
                legal = np.asarray(self.legal(futures[row].reshape(p * h, -1))).reshape(p, h)
                scores[row][~legal.all(1)] = -np.inf
        return scores
