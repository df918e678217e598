"""Environments and the domain registry.

Every domain registers a gymnasium id ``imaginebench/<Name>-v0`` that takes a ``level`` keyword.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import gymnasium as gym

from imaginebench.envs.base import LEVELS, EpisodeSpec, Level, Task, TaskSuite, check_level


@dataclass(frozen=True)
class Domain:
    """How to build a domain's environment, task suite and scripted expert."""

    name: str
    env_id: str
    make_suite: Callable[[], TaskSuite]
    make_expert: Callable[..., Any]


def _clevr_suite() -> TaskSuite:
    from imaginebench.envs.clevr.suite import ClevrTaskSuite

    return ClevrTaskSuite()


def _clevr_expert(**kwargs: Any) -> Any:
    from imaginebench.envs.clevr.expert import ClevrExpert

    return ClevrExpert(**kwargs)


DOMAINS: dict[str, Domain] = {
    "clevr": Domain("clevr", "imaginebench/CLEVR-v0", _clevr_suite, _clevr_expert),
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
