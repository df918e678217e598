"""Shared test helpers: a quiet CPU trainer, random loss batches, and small synthetic
language-conditioned tasks with a known optimum plus a data module serving their datasets (the
:class:`~imaginebench.datamodules.RolloutDataModule` core of the CLEVR one).

The tasks: on a line, the instruction ("go left" / "head right" / ...) alone decides whether
the agent must walk left or right; the state holds the position and two distractor features
redrawn every step. Actions: discrete ``0`` left / ``1`` right / ``2`` stay, or continuous
``a in [-2, 2]^2`` whose first entry moves the agent by ``a / 4`` (the second does nothing).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import lightning as L
import numpy as np
import torch

from imaginebench.data.format import Episode, RolloutDataset
from imaginebench.datamodules import RolloutDataModule

LEFT = ("go left", "walk to the left", "head left", "move leftwards")
RIGHT = ("go right", "walk to the right", "head right", "move rightwards")


def trainer(steps: int, **kwargs: Any) -> L.Trainer:
    """A silent CPU trainer for ``steps`` updates (no logger or checkpoints unless given)."""
    kwargs.setdefault("logger", False)
    kwargs.setdefault("enable_checkpointing", False)
    return L.Trainer(
        max_steps=steps,
        accelerator="cpu",
        enable_progress_bar=False,
        enable_model_summary=False,
        **kwargs,
    )


def random_batch(
    n: int = 8, state_dim: int = 3, emb: int = 384, discrete: bool = True, seed: int = 0
) -> dict[str, torch.Tensor]:
    """A prepared-looking batch (normalised states, embeddings) of random values."""
    g = torch.Generator().manual_seed(seed)
    return {
        "state": torch.randn(n, state_dim, generator=g),
        "next_state": torch.randn(n, state_dim, generator=g),
        "instruction": torch.randn(n, emb, generator=g),
        "action": torch.randint(0, 4, (n,), generator=g)
        if discrete
        else torch.rand(n, 2, generator=g) * 2 - 1,
        "reward": torch.randn(n, generator=g),
        "done": torch.tensor([True, False] * (n // 2)),
        "source": torch.zeros(n, dtype=torch.uint8),  # every row real
    }


@dataclass(frozen=True)
class LineTask:
    """Walk to the end of a line named by the instruction.

    Discrete: positions ``-2..2`` from 0; reward 1 and termination at the instructed end, 0 and
    termination at the other one, ``-step_cost`` on other steps. Continuous: position from
    ``U(-0.2, 0.2)``, reward the progress in the instructed direction, termination (success)
    at distance 1 from the origin.
    Episodes are cut after ``horizon`` steps. The optimum succeeds every time (2 or 3 steps).
    """

    discrete: bool
    horizon: int = 5
    step_cost: float = 0.0  # discrete: reward -step_cost on steps that end nowhere

    @property
    def action_spec(self) -> dict[str, Any]:
        if self.discrete:
            return {"type": "discrete", "n": 3}
        return {"type": "continuous", "shape": [2], "low": -2.0, "high": 2.0}

    @property
    def state_dim(self) -> int:
        return 3

    def observe(self, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        scale = 0.5 if self.discrete else 1.0
        noise = rng.normal(size=(len(x), 2))
        return np.concatenate([scale * x[:, None], noise], axis=1).astype(np.float32)

    def reset(self, n: int, rng: np.random.Generator) -> np.ndarray:
        return np.zeros(n) if self.discrete else rng.uniform(-0.2, 0.2, size=n)

    def step(
        self, x: np.ndarray, action: np.ndarray, direction: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """``(x', reward, success, terminated)`` for directions ``-1`` (left) / ``+1``."""
        if self.discrete:
            move = np.array([-1.0, 1.0, 0.0])[np.asarray(action, dtype=np.int64)]
            x2 = x + move
            success, ended = x2 * direction >= 2, np.abs(x2) >= 2
            reward = np.where(ended, success, -self.step_cost).astype(np.float32)
            return x2, reward, success, ended
        x2 = np.clip(x + 0.25 * np.clip(action[:, 0], -2, 2), -1.5, 1.5)
        success = x2 * direction >= 1
        return x2, ((x2 - x) * direction).astype(np.float32), success, success

    def behaviour(
        self, direction: np.ndarray, rng: np.random.Generator, expert: float, lure: float = 0.0
    ) -> np.ndarray:
        """The data's actions: with probability ``lure`` a suboptimal one (discrete: stay;
        continuous: a small step the wrong way), otherwise the right move with probability
        ``expert``, else random. With ``lure`` 0.5 the lure is the most common action."""
        n = len(direction)
        lured = rng.random(n) < lure if lure else np.zeros(n, dtype=bool)  # same stream at 0
        good = (rng.random(n) < expert) & ~lured
        if self.discrete:
            action = np.where(good, (direction > 0).astype(np.int64), rng.integers(0, 3, size=n))
            return np.where(lured, 2, action)
        action = rng.uniform(-2, 2, size=(n, 2))
        action[good, 0] = np.clip(2 * direction[good] + rng.normal(0, 0.4, good.sum()), -2, 2)
        if lure:
            action[lured, 0] = -0.5 * direction[lured] + rng.normal(0, 0.1, lured.sum())
        return action.astype(np.float32)

    def dataset(
        self,
        instructions: Sequence[str],
        episodes: int,
        seed: int,
        expert: float = 0.6,
        source: str = "real",
        lure: float = 0.0,
    ) -> RolloutDataset:
        rng = np.random.default_rng(seed)
        out = []
        for i in range(episodes):
            instruction = instructions[i % len(instructions)]
            direction = np.array([-1.0 if instruction in LEFT else 1.0])
            x = self.reset(1, rng)
            states, actions, rewards = [self.observe(x, rng)[0]], [], []
            success = terminated = False
            for _ in range(self.horizon):
                action = self.behaviour(direction, rng, expert, lure)
                x, reward, won, ended = self.step(x, action, direction)
                states.append(self.observe(x, rng)[0])
                actions.append(action[0])
                rewards.append(float(reward[0]))
                success, terminated = bool(won[0]), bool(ended[0])
                if terminated:
                    break
            out.append(
                Episode(
                    states=np.stack(states),
                    actions=np.stack(actions),
                    rewards=np.asarray(rewards, dtype=np.float32),
                    terminated=terminated,
                    truncated=not terminated,
                    instruction=instruction,
                    task_spec=json.dumps({"line": int(direction[0])}),
                    level="train" if source == "real" else "rephrase",
                    source=source,
                    success=success,
                )
            )
        return RolloutDataset.from_episodes(
            out, domain="line", action_spec=self.action_spec, provenance={}
        )

    def evaluate(self, module: Any, episodes_per_instruction: int = 20, seed: int = 1) -> dict:
        """Success rate of ``module.act`` per direction, every wording, all episodes batched."""
        rng = np.random.default_rng(seed)
        instructions = [w for w in LEFT + RIGHT for _ in range(episodes_per_instruction)]
        direction = np.array([-1.0 if w in LEFT else 1.0 for w in instructions])
        x = self.reset(len(instructions), rng)
        alive = np.ones(len(x), dtype=bool)
        success = np.zeros(len(x), dtype=bool)
        for _ in range(self.horizon):
            idx = np.flatnonzero(alive)
            if len(idx) == 0:
                break
            action = module.act(self.observe(x[idx], rng), [instructions[i] for i in idx])
            x[idx], _, won, ended = self.step(x[idx], np.asarray(action), direction[idx])
            success[idx] |= won
            alive[idx] = ~ended
        return {
            "left": float(success[direction < 0].mean()),
            "right": float(success[direction > 0].mean()),
        }


class TaskDataModule(RolloutDataModule):
    """Real and imaginary datasets in memory, batches mixed at ``ratio`` by the core data module
    (one batch per Lightning step; a resumed run sees the batches an uninterrupted one would)."""

    def __init__(
        self,
        real: RolloutDataset,
        imaginary: RolloutDataset | None = None,
        ratio: float = 0.5,
        batch_size: int = 64,
        seed: int = 0,
    ) -> None:
        super().__init__(real, imaginary, ratio, batch_size, seed, updates_per_batch=1)
