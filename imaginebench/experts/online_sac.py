"""Online SAC: the project's :class:`~imaginebench.modules.offline.sac.SAC` losses trained on a
live simulator (used to train the HalfCheetah experts).

The loop is the standard one of Haarnoja et al. (2018): ``start_steps`` uniformly random actions
fill the replay buffer, then every environment step (a stochastic policy action) is followed by
one gradient update of actor, twin critics and temperature on a uniform mini-batch of 256. The
update itself is :meth:`SAC.losses` + :meth:`SAC.after_update` unchanged, so online experts and
offline agents share one implementation. Episodes have a fixed horizon and never terminate
(time-limit truncation bootstraps, ``done = 0``). A task-specific expert needs no language: the
instruction input is a constant zero vector projected to one feature (``instruction_dim=1``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import torch
from tqdm import tqdm

from imaginebench.config import as_config
from imaginebench.modules.offline.sac import SAC


class OnlineEnv(Protocol):
    """A simulator with a fixed reward: ``reset(rng) -> state``, ``step(action) -> (state,
    reward)``."""

    state_dim: int
    action_dim: int

    def reset(self, rng: np.random.Generator) -> np.ndarray: ...

    def step(self, action: np.ndarray) -> tuple[np.ndarray, float]: ...


@dataclass(frozen=True)
class OnlineSACConfig:
    """Budget and hyperparameters (the SAC authors' defaults where they have one)."""

    total_steps: int = 60_000
    start_steps: int = 5_000
    horizon: int = 200
    batch_size: int = 256
    hidden: tuple[int, ...] = (256, 256)
    lr: float = 3e-4
    gamma: float = 0.99
    tau: float = 0.005
    seed: int = 0


class ReplayBuffer:
    """Preallocated transition tensors with uniform sampling."""

    def __init__(self, capacity: int, state_dim: int, action_dim: int) -> None:
        self.state = torch.zeros(capacity, state_dim)
        self.action = torch.zeros(capacity, action_dim)
        self.reward = torch.zeros(capacity)
        self.next_state = torch.zeros(capacity, state_dim)
        self.size = 0

    def add(self, state: np.ndarray, action: np.ndarray, reward: float, next_state: np.ndarray):
        i = self.size
        self.state[i] = torch.from_numpy(state)
        self.action[i] = torch.from_numpy(action)
        self.reward[i] = reward
        self.next_state[i] = torch.from_numpy(next_state)
        self.size += 1

    def sample(self, batch_size: int, generator: torch.Generator) -> dict[str, torch.Tensor]:
        idx = torch.randint(self.size, (batch_size,), generator=generator)
        return {
            "state": self.state[idx],
            "action": self.action[idx],
            "reward": self.reward[idx],
            "next_state": self.next_state[idx],
            "done": torch.zeros(batch_size),
        }


def make_agent(
    state_dim: int, action_dim: int, config: OnlineSACConfig | Mapping[str, Any]
) -> SAC:
    """A :class:`SAC` module for one task: no state normalisation, one constant instruction
    feature."""
    config = as_config(config, OnlineSACConfig, "config")
    return SAC(
        state_dim,
        {"type": "continuous", "shape": [action_dim], "low": -1.0, "high": 1.0},
        hidden=config.hidden,
        instruction_dim=1,
        normalize_states=False,
        standardize_instructions=False,
        actor_lr=config.lr,
        critic_lr=config.lr,
        alpha_lr=config.lr,
        gamma=config.gamma,
        tau=config.tau,
        sampling_seed=config.seed,
    )


def train_online_sac(
    env: OnlineEnv,
    config: OnlineSACConfig | Mapping[str, Any],
    progress: bool = True,
    on_episode: Callable[[int, float], None] | None = None,
) -> tuple[SAC, list[float]]:
    """Train SAC on ``env``; return the agent and every episode's return.

    ``on_episode(step, episode_return)`` is called after each episode (e.g. for logging).
    """
    config = as_config(config, OnlineSACConfig, "config")
    if config.total_steps <= config.start_steps:
        raise ValueError("total_steps must exceed start_steps")
    torch.manual_seed(config.seed)
    rng = np.random.default_rng(config.seed)
    agent = make_agent(env.state_dim, env.action_dim, config)
    optimizer = torch.optim.Adam(agent.param_groups(), foreach=True)
    buffer = ReplayBuffer(config.total_steps, env.state_dim, env.action_dim)
    no_instruction = torch.zeros(1, agent.embedding_dim)
    batch_instruction = no_instruction.expand(config.batch_size, -1)
    returns: list[float] = []
    state, episode_return, t = env.reset(rng), 0.0, 0
    bar = tqdm(range(config.total_steps), desc="online SAC", unit="step", disable=not progress)
    for step in bar:
        if step < config.start_steps:
            action = rng.uniform(-1.0, 1.0, env.action_dim).astype(np.float32)
        else:
            with torch.no_grad():
                s = torch.from_numpy(state)[None]
                action = agent.tanh_gaussian(agent.actor, s, no_instruction)[0][0].numpy()
        next_state, reward = env.step(action)
        buffer.add(state, action, reward, next_state)
        state, episode_return, t = next_state, episode_return + reward, t + 1
        if t == config.horizon:
            returns.append(episode_return)
            if on_episode is not None:
                on_episode(step + 1, episode_return)
            bar.set_postfix(ret=f"{episode_return:.0f}", refresh=False)
            state, episode_return, t = env.reset(rng), 0.0, 0
        if step + 1 >= config.start_steps:
            batch = buffer.sample(config.batch_size, agent.generator)
            batch["instruction"] = batch_instruction
            terms = agent.losses(batch)
            optimizer.zero_grad(set_to_none=True)
            terms["loss"].backward()
            optimizer.step()
            agent.after_update()
    return agent, returns
