"""The hyperparameters every throughput contender uses, read from the shipped training configs.

Each algorithm's value comes from the ``model.init_args`` of its shipped config (CLEVR for the
discrete algorithms, whose data the benchmark uses; HalfCheetah for the continuous ones), else
from the module's constructor default (continuous SAC and IQL ship no config). ``SHARED``
names the settings the bare loop and d3rlpy read; ``OVERRIDES`` are the few values the
benchmark sets on purpose, each with its reason.
"""

from __future__ import annotations

import inspect
from functools import cache
from pathlib import Path
from typing import Any

CONFIGS = Path(__file__).resolve().parents[1] / "configs"
DISCRETE = ("DiscreteBC", "DiscreteCQL", "DiscreteBCQ", "DiscreteSAC", "DiscreteIQL")
CONTINUOUS = ("BC", "CQL", "BCQ", "TD3BC", "SAC", "IQL", "PRDC", "COMBO")
ALGORITHMS = DISCRETE + CONTINUOUS

# The constructor arguments the other contenders need to train like our module.
_ACTOR_CRITIC = ("actor_lr", "critic_lr", "gamma", "tau")
_SOFT = ("actor_lr", "critic_lr", "alpha_lr", "gamma", "tau")  # SAC and its conservative kin
_TD3 = (*_ACTOR_CRITIC, "alpha")
_TD3_TARGETS = ("policy_noise", "noise_clip", "policy_freq")
_IQL = ("actor_lr", "critic_lr", "value_lr", "gamma", "tau", "expectile", "beta", "max_weight")
SHARED: dict[str, tuple[str, ...]] = {
    "DiscreteBC": ("lr", "logit_penalty"),
    "DiscreteCQL": ("lr", "gamma", "alpha", "target_update_interval"),
    "DiscreteBCQ": ("lr", "gamma", "threshold", "logit_penalty", "tau", "target_update_interval"),
    "DiscreteSAC": (
        "actor_lr",
        "critic_lr",
        "alpha_lr",
        "gamma",
        "tau",
        "target_update_interval",
        "initial_temperature",
        "target_entropy_scale",
    ),
    "DiscreteIQL": _IQL,
    "BC": ("lr",),
    "CQL": (*_SOFT, "conservative_weight", "num_sampled_actions"),
    "BCQ": (
        *_ACTOR_CRITIC[:2],
        "vae_lr",
        *_ACTOR_CRITIC[2:],
        "phi",
        "lmbda",
        "num_sampled_actions",
        "kl_weight",
    ),
    "TD3BC": (*_TD3, *_TD3_TARGETS),
    "SAC": _SOFT,
    "IQL": _IQL,
    "PRDC": (*_TD3, "beta", *_TD3_TARGETS),
    "COMBO": (
        *_SOFT,
        "conservative_weight",
        "num_sampled_actions",
        "model_ratio",
        "ensemble_size",
        "num_elites",
        "model_max_steps",
        "rollout_length",
        "rollout_batch_size",
        "rollout_every",
    ),
}

# d3rlpy's discrete learners copy their targets every 500 steps and its DiscreteSAC starts at
# temperature 1 with the target entropy 0.98 log(n): the discrete actor-critics use these in
# every contender so that d3rlpy runs the same updates (the shipped configs use Polyak targets
# and a smaller temperature; the cost per update is the same).
_D3RLPY_TARGETS = {"tau": 1.0, "target_update_interval": 500}
OVERRIDES: dict[str, dict[str, Any]] = {
    "DiscreteBCQ": _D3RLPY_TARGETS,
    "DiscreteSAC": {**_D3RLPY_TARGETS, "initial_temperature": 1.0, "target_entropy_scale": 0.98},
    # The model phase runs before the timed steps: a short one keeps the benchmark quick.
    "COMBO": {"model_max_steps": 200},
}


def config_path(algo: str) -> Path | None:
    """The shipped config training ``algo`` on the benchmark's kind of data (None: none)."""
    name = algo.removeprefix("Discrete").lower()
    path = CONFIGS / f"{name}_{'clevr' if algo in DISCRETE else 'halfcheetah'}.yaml"
    return path if path.exists() else None


def _defaults(cls: type) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for base in reversed(cls.__mro__):
        if "__init__" in base.__dict__ and base is not object:
            for name, p in inspect.signature(base.__init__).parameters.items():
                if p.default is not inspect.Parameter.empty:
                    out[name] = p.default
    return out


@cache
def settings(algo: str) -> dict[str, Any]:
    """``algo``'s shared settings: config, else constructor default, then ``OVERRIDES``."""
    from imaginebench.config import load_config_file
    from imaginebench.modules import offline

    cls = getattr(offline, algo)
    path = config_path(algo)
    given: dict[str, Any] = {}
    if path is not None:
        model = load_config_file(path)["model"]
        if model["class_path"].rsplit(".", 1)[-1] != algo:
            raise ValueError(f"{path} trains {model['class_path']}, not {algo}")
        given = model.get("init_args", {})
    values = {**_defaults(cls), **given, **OVERRIDES.get(algo, {})}
    return {name: values[name] for name in SHARED[algo]}
