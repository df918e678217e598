"""Online SAC (the offline SAC module's losses on a live environment) learns a known optimum."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from imaginebench.experts.online_sac import OnlineSACConfig, train_online_sac


class Bandit:
    """A one-step-per-state task: the best action is ``sign(state) * 0.6`` in every dimension
    (reward ``-|a - a*|^2``), states drawn uniformly from [-1, 1]."""

    state_dim, action_dim = 3, 2

    def __init__(self) -> None:
        self.rng = np.random.default_rng(0)
        self.state = np.zeros(self.state_dim, dtype=np.float32)

    def _draw(self) -> np.ndarray:
        self.state = self.rng.uniform(-1, 1, self.state_dim).astype(np.float32)
        return self.state

    def best(self, state: np.ndarray) -> np.ndarray:
        return np.full(self.action_dim, 0.6 * np.sign(state[0]), dtype=np.float32)

    def reset(self, rng: np.random.Generator) -> np.ndarray:
        return self._draw()

    def step(self, action: np.ndarray) -> tuple[np.ndarray, float]:
        reward = -float(np.sum((action - self.best(self.state)) ** 2))
        return self._draw(), reward


@pytest.mark.slow
def test_online_sac_finds_the_best_action():
    torch.set_num_threads(1)
    env = Bandit()
    config = OnlineSACConfig(
        total_steps=2500, start_steps=500, horizon=10, batch_size=64, hidden=(32, 32), gamma=0.0
    )
    agent, returns = train_online_sac(env, config, progress=False)
    assert len(returns) == 250
    assert np.mean(returns[-20:]) > np.mean(returns[:20]) + 2.0
    states = torch.tensor([[0.7, 0.1, -0.3], [-0.5, 0.9, 0.2]])
    with torch.no_grad():
        mean = agent.actor(states, torch.zeros(2, agent.embedding_dim))
    torch.testing.assert_close(mean, torch.tensor([[0.6, 0.6], [-0.6, -0.6]]), atol=0.2, rtol=0)


def test_online_sac_rejects_a_budget_without_learning_steps():
    with pytest.raises(ValueError, match="total_steps must exceed start_steps"):
        train_online_sac(Bandit(), OnlineSACConfig(total_steps=100, start_steps=100), False)
