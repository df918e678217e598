"""Environments and the domain registry.

Every domain registers a gymnasium id ``imaginebench/<Name>-v0`` that takes a ``level`` keyword.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import gymnasium as gym
import numpy as np

from imaginebench.envs.base import LEVELS, EpisodeSpec, Level, Task, TaskSuite, check_level


@dataclass(frozen=True)
class Domain:
    """How to build a domain's environment, task suite, scripted expert and quality judge.

    ``episode_rewards(task, states, actions)`` gives the rewards ``(T,)`` of a rollout of
    ``T + 1`` states and ``T`` actions (used for imagined rollouts, so they are rewarded exactly
    like simulated ones); CLEVR and BabyAI ignore the actions, HalfCheetah needs them for its
    control cost. ``make_quality()`` returns an
    object with ``legal(states) -> (N,) bool`` and ``correct_transitions(states, actions) ->
    (T,) bool`` for the imagination quality report. ``integer_states`` marks grid domains whose
    states are integers (cell coordinates, indices): imagined states are rounded to them.
    """

    name: str
    env_id: str
    make_suite: Callable[[], TaskSuite]
    make_expert: Callable[..., Any]
    episode_rewards: Callable[[Task, np.ndarray, np.ndarray], np.ndarray]
    make_quality: Callable[[], Any]
    integer_states: bool = False


def _clevr_suite() -> TaskSuite:
    from imaginebench.envs.clevr.suite import ClevrTaskSuite

    return ClevrTaskSuite()


def _clevr_expert(**kwargs: Any) -> Any:
    from imaginebench.envs.clevr.expert import ClevrExpert

    return ClevrExpert(**kwargs)


def _clevr_rewards(task: Task, states: np.ndarray, actions: np.ndarray) -> np.ndarray:
    from imaginebench.envs.clevr.env import episode_rewards

    return episode_rewards(task, states)


def _clevr_quality() -> Any:
    from imaginebench.envs.clevr.quality import ClevrQuality

    return ClevrQuality()


def _babyai_suite() -> TaskSuite:
    from imaginebench.envs.babyai.suite import BabyAITaskSuite

    return BabyAITaskSuite()


def _babyai_expert(**kwargs: Any) -> Any:
    from imaginebench.envs.babyai.expert import BabyAIExpert

    return BabyAIExpert(**kwargs)


def _babyai_rewards(task: Task, states: np.ndarray, actions: np.ndarray) -> np.ndarray:
    from imaginebench.envs.babyai.env import episode_rewards

    return episode_rewards(task, states)


def _babyai_quality() -> Any:
    from imaginebench.envs.babyai.quality import BabyAIQuality

    return BabyAIQuality()


def _halfcheetah_suite() -> TaskSuite:
    from imaginebench.envs.halfcheetah.suite import HalfCheetahTaskSuite

    return HalfCheetahTaskSuite()


def _halfcheetah_expert(**kwargs: Any) -> Any:
    from imaginebench.envs.halfcheetah.expert import HalfCheetahExpert

    return HalfCheetahExpert(**kwargs)


def _halfcheetah_rewards(task: Task, states: np.ndarray, actions: np.ndarray) -> np.ndarray:
    from imaginebench.envs.halfcheetah.env import episode_rewards

    return episode_rewards(task, states, actions)


def _halfcheetah_quality() -> Any:
    from imaginebench.envs.halfcheetah.quality import HalfCheetahQuality

    return HalfCheetahQuality()


DOMAINS: dict[str, Domain] = {
    "clevr": Domain(
        "clevr",
        "imaginebench/CLEVR-v0",
        _clevr_suite,
        _clevr_expert,
        _clevr_rewards,
        _clevr_quality,
    ),
    "babyai": Domain(
        "babyai",
        "imaginebench/BabyAI-v0",
        _babyai_suite,
        _babyai_expert,
        _babyai_rewards,
        _babyai_quality,
        integer_states=True,
    ),
    "halfcheetah": Domain(
        "halfcheetah",
        "imaginebench/HalfCheetah-v0",
        _halfcheetah_suite,
        _halfcheetah_expert,
        _halfcheetah_rewards,
        _halfcheetah_quality,
    ),
}


def get_domain(name: str) -> Domain:
    """Look up a domain by name with a clear error for unknown names."""
    if name not in DOMAINS:
        raise ValueError(f"unknown domain {name!r}; available: {', '.join(sorted(DOMAINS))}")
    return DOMAINS[name]


def make(domain: str, level: Level = "train", **kwargs: Any) -> gym.Env:
    """``gymnasium.make`` the domain's environment at ``level``."""
    return gym.make(get_domain(domain).env_id, level=check_level(level), **kwargs)


if "imaginebench/CLEVR-v0" not in gym.registry:
    gym.register(
        id="imaginebench/CLEVR-v0",
        entry_point="imaginebench.envs.clevr.env:ClevrEnv",
        disable_env_checker=True,
    )

if "imaginebench/BabyAI-v0" not in gym.registry:
    gym.register(
        id="imaginebench/BabyAI-v0",
        entry_point="imaginebench.envs.babyai.env:BabyAIEnv",
        disable_env_checker=True,
    )

if "imaginebench/HalfCheetah-v0" not in gym.registry:
    gym.register(
        id="imaginebench/HalfCheetah-v0",
        entry_point="imaginebench.envs.halfcheetah.env:HalfCheetahEnv",
        disable_env_checker=True,
    )

__all__ = [
    "DOMAINS",
    "LEVELS",
    "Domain",
    "EpisodeSpec",
    "Level",
    "Task",
    "TaskSuite",
    "get_domain",
    "make",
]
