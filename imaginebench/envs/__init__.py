"""Environments and the domain registry.

Every domain registers a gymnasium id ``imaginebench/<Name>-v0`` that takes a ``level`` keyword.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np

from imaginebench.envs.base import LEVELS, EpisodeSpec, Level, Task, TaskSuite, check_level
from imaginebench.envs.rendering import RolloutRenderer


@dataclass(frozen=True)
class Domain:
    """How to build a domain's environment, task suite and quality judge (its expert lives in
    :mod:`imaginebench.experts`: environments do not depend on it).

    ``episode_rewards(task, states, actions)`` gives the rewards ``(T,)`` of a rollout of
    ``T + 1`` states and ``T`` actions (used for imagined rollouts, so they are rewarded exactly
    like simulated ones); CLEVR and BabyAI ignore the actions, HalfCheetah needs them for its
    control cost. ``make_quality()`` returns an
    object with ``legal(states) -> (N,) bool`` and ``correct_transitions(states, actions) ->
    (T,) bool`` for the imagination quality report. ``integer_states`` marks grid domains whose
    states are integers (cell coordinates, indices): imagined states are rounded to them.
    ``make_renderer(height, width)`` returns the domain's
    :class:`~imaginebench.envs.rendering.RolloutRenderer`, which draws a rollout from its states
    (``None``: the domain cannot be rendered yet; :func:`make_renderer` says so).
    ``dynamics_context(task, states, actions)`` gives, per transition of a rollout (its ``T``
    states before each transition and ``T`` actions), what a model of the dynamics needs beyond
    the state and action and the rollout's own history determines (``(T, K)``; Meta-World: the
    mocap target its actions have moved, :mod:`imaginebench.envs.metaworld.mocap`); ``None``:
    the state and action are all it needs. ``plan_context(task, states, actions, n)`` (with a
    ``dynamics_context``) continues a rollout's ``t + 1`` states and ``t`` actions along ``n``
    candidate plans: an object whose ``step(states, actions) -> (n, K)`` gives each candidate's
    context of its next transition (the imagination's lookahead).
    """

    name: str
    env_id: str
    make_suite: Callable[[], TaskSuite]
    episode_rewards: Callable[[Task, np.ndarray, np.ndarray], np.ndarray]
    make_quality: Callable[[], Any]
    integer_states: bool = False
    make_renderer: Callable[..., RolloutRenderer] | None = None
    dynamics_context: Callable[[Task, np.ndarray, np.ndarray], np.ndarray] | None = None
    plan_context: Callable[[Task, np.ndarray, np.ndarray, int], Any] | None = None


def _lazy(target: str) -> Callable[..., Any]:
    """A function that imports ``"module:attribute"`` on its first call and forwards to it
    (domains load their simulators only when used)."""
    module, attribute = target.split(":")

    def call(*args: Any, **kwargs: Any) -> Any:
        return getattr(importlib.import_module(module), attribute)(*args, **kwargs)

    call.__qualname__ = call.__name__ = target
    return call


def _domain(
    name: str, env_id: str, package: str, prefix: str, renderer: bool = False, **flags: Any
) -> Domain:
    """A domain whose package ``imaginebench.envs.<package>`` has the usual modules: ``suite``
    (``<Prefix>TaskSuite``), ``env`` (``episode_rewards``) and ``quality``
    (``<Prefix>Quality``), and with ``renderer`` also ``render`` (``<Prefix>Renderer``)."""
    root = f"imaginebench.envs.{package}"
    return Domain(
        name,
        env_id,
        make_suite=_lazy(f"{root}.suite:{prefix}TaskSuite"),
        episode_rewards=_lazy(f"{root}.env:episode_rewards"),
        make_quality=_lazy(f"{root}.quality:{prefix}Quality"),
        make_renderer=_lazy(f"{root}.render:{prefix}Renderer") if renderer else None,
        **flags,
    )


DOMAINS: dict[str, Domain] = {
    "clevr": _domain("clevr", "imaginebench/CLEVR-v0", "clevr", "Clevr", renderer=True),
    "babyai": _domain(
        "babyai", "imaginebench/BabyAI-v0", "babyai", "BabyAI", renderer=True, integer_states=True
    ),
    "halfcheetah": _domain(
        "halfcheetah", "imaginebench/HalfCheetah-v0", "halfcheetah", "HalfCheetah", renderer=True
    ),
    "metaworld": _domain(
        "metaworld",
        "imaginebench/MetaWorld-v0",
        "metaworld",
        "MetaWorld",
        renderer=True,
        dynamics_context=_lazy("imaginebench.envs.metaworld.mocap:dynamics_context"),
        plan_context=_lazy("imaginebench.envs.metaworld.mocap:MocapContinuation"),
    ),
    "libero": _domain("libero", "imaginebench/LIBERO-v0", "libero", "Libero", renderer=True),
}


def get_domain(name: str) -> Domain:
    """Look up a domain by name with a clear error for unknown names."""
    if name not in DOMAINS:
        raise ValueError(f"unknown domain {name!r}; available: {', '.join(sorted(DOMAINS))}")
    return DOMAINS[name]


def make_renderer(domain: str, height: int = 240, width: int = 320) -> RolloutRenderer:
    """The domain's :class:`~imaginebench.envs.rendering.RolloutRenderer` drawing frames of
    ``height`` x ``width`` pixels; a clear error for an unknown domain or one without a
    renderer."""
    entry = get_domain(domain)
    if entry.make_renderer is None:
        rendered = ", ".join(sorted(n for n, d in DOMAINS.items() if d.make_renderer is not None))
        raise ValueError(
            f"domain {domain!r} has no renderer yet (its Domain entry sets no make_renderer); "
            f"domains that render: {rendered}"
        )
    return entry.make_renderer(height=height, width=width)


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

if "imaginebench/MetaWorld-v0" not in gym.registry:
    gym.register(
        id="imaginebench/MetaWorld-v0",
        entry_point="imaginebench.envs.metaworld.env:MetaWorldEnv",
        disable_env_checker=True,
    )

if "imaginebench/LIBERO-v0" not in gym.registry:
    gym.register(
        id="imaginebench/LIBERO-v0",
        entry_point="imaginebench.envs.libero.env:LiberoEnv",
        disable_env_checker=True,
    )

__all__ = [
    "DOMAINS",
    "LEVELS",
    "Domain",
    "EpisodeSpec",
    "Level",
    "RolloutRenderer",
    "Task",
    "TaskSuite",
    "get_domain",
    "make",
    "make_renderer",
]
