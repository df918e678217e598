"""Experts that act in the simulators: scripted (CLEVR, BabyAI, Meta-World, LIBERO) and learned
(HalfCheetah).

Every expert follows one contract, :class:`Expert`: ``act(env)`` reads the live (reset) env and
returns the next action. Learned policies are different: their ``act(states, instructions)``
maps batches of states and instruction strings to actions without a simulator.

Experts sit above the environments: they import ``imaginebench.envs`` (and the HalfCheetah
expert its online SAC trainer and networks), never the other way round. A domain's expert is
found by name with :func:`make_expert`; the expert modules load on first use, so importing this
package loads no simulator.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from imaginebench.experts.babyai import BabyAIExpert
    from imaginebench.experts.clevr import ClevrExpert
    from imaginebench.experts.halfcheetah import HalfCheetahExpert, train_skill
    from imaginebench.experts.libero import LiberoExpert
    from imaginebench.experts.metaworld import MetaWorldExpert
    from imaginebench.experts.online_sac import OnlineSACConfig, train_online_sac


class Expert(Protocol):
    """What data collection needs of an expert."""

    def act(self, env: Any) -> Any:
        """The next action in ``env``'s current state (the env is reset, not yet done)."""


# domain -> "module:class" of its expert, built as ``cls(epsilon=..., seed=...)``
EXPERTS: dict[str, str] = {
    "clevr": "imaginebench.experts.clevr:ClevrExpert",
    "babyai": "imaginebench.experts.babyai:BabyAIExpert",
    "halfcheetah": "imaginebench.experts.halfcheetah:HalfCheetahExpert",
    "metaworld": "imaginebench.experts.metaworld:MetaWorldExpert",
    "libero": "imaginebench.experts.libero:LiberoExpert",
}

# domain -> version of what its expert collects. Bump it when a change to the expert (or to the
# environment it acts in) changes the data it collects: the cache of collected real data is keyed
# by it (``CollectConfig.filename``), so older cached files are not reused by mistake.
# HalfCheetah 2: the training-level runs are paced (RUN_PACE_TORQUE). Meta-World 2: own soccer
# and locked-door-open policies, and the locked door's panel narrowed so that it swings open;
# 3: locked-door-open pulls the door from behind the grip bar's overhang (solved in 100 steps).
EXPERT_DATA_VERSIONS: dict[str, int] = {"clevr": 1, "babyai": 1, "halfcheetah": 2, "metaworld": 3}

# public name -> module that defines it (loaded on first access)
_LAZY: dict[str, str] = {
    "ClevrExpert": "imaginebench.experts.clevr",
    "BabyAIExpert": "imaginebench.experts.babyai",
    "HalfCheetahExpert": "imaginebench.experts.halfcheetah",
    "MetaWorldExpert": "imaginebench.experts.metaworld",
    "LiberoExpert": "imaginebench.experts.libero",
    "train_skill": "imaginebench.experts.halfcheetah",
    "OnlineSACConfig": "imaginebench.experts.online_sac",
    "train_online_sac": "imaginebench.experts.online_sac",
}


def expert_class(domain: str) -> type:
    """The expert class of ``domain`` (clear error for a domain without one)."""
    if domain not in EXPERTS:
        known = ", ".join(sorted(EXPERTS))
        raise ValueError(f"no expert for domain {domain!r}; available: {known}")
    module, name = EXPERTS[domain].split(":")
    return getattr(importlib.import_module(module), name)


def make_expert(domain: str, **kwargs: Any) -> Expert:
    """Build ``domain``'s expert, e.g. ``make_expert("clevr", epsilon=0.2, seed=0)``."""
    return expert_class(domain)(**kwargs)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "EXPERTS",
    "EXPERT_DATA_VERSIONS",
    "BabyAIExpert",
    "ClevrExpert",
    "Expert",
    "HalfCheetahExpert",
    "LiberoExpert",
    "MetaWorldExpert",
    "OnlineSACConfig",
    "expert_class",
    "make_expert",
    "train_online_sac",
    "train_skill",
]
