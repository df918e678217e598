"""The ``d3rlpy`` contender: d3rlpy 2.8.1's config of each algorithm with the benchmark's
settings, an encoder factory building our ``StateInstructionEncoder`` on the observation
(normalised state || instruction embedding), and the body of d3rlpy's ``fit`` loop timed."""

from __future__ import annotations

import contextlib
import io
import time
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from throughput_data import Data, Hyper
from throughput_settings import settings
from torch import Tensor

from imaginebench.modules.backbone import StateInstructionEncoder


def import_d3rlpy():
    with contextlib.redirect_stderr(io.StringIO()):  # gym 0.26's "unmaintained" banner
        import d3rlpy
    if d3rlpy.__version__ != "2.8.1":
        warnings.warn(f"d3rlpy {d3rlpy.__version__} installed, the benchmark targets 2.8.1")
    return d3rlpy


_d3rlpy_cache: dict = {}


def d3rlpy_dataset(data: Data):
    """Our transitions as a d3rlpy MDPDataset with observation = normalised state || embedding.

    Terminated episodes keep their T rows (d3rlpy bootstraps nothing after a terminal);
    truncated ones get their final state as an extra row flagged ``timeouts`` (with a dummy
    action and reward), so d3rlpy sees the same T transitions and next states.
    """
    key = ("dataset", data.discrete)
    if key in _d3rlpy_cache:
        return _d3rlpy_cache[key]
    d3rlpy = import_d3rlpy()
    ds = data.dataset
    index = {s: i for i, s in enumerate(data.instructions)}
    states = (torch.as_tensor(ds.states) - data.state_mean) / data.state_std
    obs, act, rew, term, tout = [], [], [], [], []
    off = ds.episode_offsets
    for i in range(len(ds)):
        t0, t1 = int(off[i]), int(off[i + 1])
        length = t1 - t0
        if length == 0:
            continue
        ep_states = states[t0 + i : t1 + i + 1]
        emb = data.embeddings[index[ds.instructions[ds.episode_instruction[i]]]]
        terminated = bool(ds.terminals[t1 - 1])
        rows = length if terminated else length + 1
        obs.append(torch.cat([ep_states[:rows], emb.expand(rows, -1)], 1).numpy())
        if data.discrete:
            a = ds.actions[t0:t1].astype(np.int64)
        else:
            a = ds.actions[t0:t1].astype(np.float32)
        r = ds.rewards[t0:t1].astype(np.float32)
        flags = np.zeros(rows, dtype=np.float32)
        flags[-1] = 1.0
        if terminated:
            act.append(a), rew.append(r), term.append(flags), tout.append(np.zeros_like(flags))
        else:
            act.append(np.concatenate([a, np.zeros_like(a[:1])]))
            rew.append(np.append(r, np.float32(0)))
            term.append(np.zeros_like(flags)), tout.append(flags)
    space = d3rlpy.ActionSpace.DISCRETE if data.discrete else d3rlpy.ActionSpace.CONTINUOUS
    dataset = d3rlpy.dataset.MDPDataset(
        observations=np.concatenate(obs).astype(np.float32),
        actions=np.concatenate(act),
        rewards=np.concatenate(rew),
        terminals=np.concatenate(term),
        timeouts=np.concatenate(tout),
        action_space=space,
        action_size=int(data.action_spec["n"]) if data.discrete else int(data.action.shape[1]),
    )
    assert dataset.transition_count == data.transitions, (
        dataset.transition_count,
        data.transitions,
    )
    _d3rlpy_cache[key] = dataset
    return dataset


def d3rlpy_encoder_factory(data: Data, hp: Hyper):
    """An EncoderFactory building our StateInstructionEncoder on the concatenated observation
    (and, for critics and the BCQ generator, the action or latent as its extra input)."""
    d3rlpy = import_d3rlpy()
    if "factory" in _d3rlpy_cache:
        return _d3rlpy_cache["factory"]
    from d3rlpy.models.torch import Encoder, EncoderWithAction

    state_dim, emb_dim = data.state_dim, int(data.embeddings.shape[1])

    class SplitEncoder(Encoder):
        def __init__(self) -> None:
            super().__init__()
            self.body = StateInstructionEncoder(state_dim, emb_dim, hp.hidden, hp.instruction_dim)

        def forward(self, x: Tensor) -> Tensor:
            return self.body(x[:, :state_dim], x[:, state_dim:])

    class SplitEncoderWithAction(EncoderWithAction):
        def __init__(self, extra: int) -> None:
            super().__init__()
            self.body = StateInstructionEncoder(
                state_dim, emb_dim, hp.hidden, hp.instruction_dim, extra
            )

        def forward(self, x: Tensor, action: Tensor) -> Tensor:
            return self.body(x[:, :state_dim], x[:, state_dim:], action)

    class SplitEncoderFactory(d3rlpy.models.EncoderFactory):
        def create(self, observation_shape):
            assert tuple(observation_shape) == (state_dim + emb_dim,), observation_shape
            return SplitEncoder()

        def create_with_action(self, observation_shape, action_size, discrete_action=False):
            assert not discrete_action, "our discrete critics take no action input"
            return SplitEncoderWithAction(action_size)

        @staticmethod
        def get_type() -> str:
            return "imaginebench_split"

    _d3rlpy_cache["factory"] = SplitEncoderFactory()
    return _d3rlpy_cache["factory"]


def d3rlpy_config(algo: str, hp: Hyper, factory: Any) -> Any | None:
    """d3rlpy's config of ``algo`` with the benchmark's settings (None: d3rlpy has none)."""
    algos = import_d3rlpy().algos
    kw, b = settings(algo), hp.batch_size
    one = {"encoder_factory": factory}
    two = {"actor_encoder_factory": factory, "critic_encoder_factory": factory}
    td3 = {
        "batch_size": b,
        "actor_learning_rate": kw.get("actor_lr"),
        "critic_learning_rate": kw.get("critic_lr"),
        "gamma": kw.get("gamma"),
        "tau": kw.get("tau"),
        "target_smoothing_sigma": kw.get("policy_noise"),
        "target_smoothing_clip": kw.get("noise_clip"),
        "alpha": kw.get("alpha"),
        "update_actor_interval": kw.get("policy_freq"),
        **two,
    }
    sac = {
        "batch_size": b,
        "actor_learning_rate": kw.get("actor_lr"),
        "critic_learning_rate": kw.get("critic_lr"),
        "temp_learning_rate": kw.get("alpha_lr"),
        "gamma": kw.get("gamma"),
        **two,
    }
    configs: dict[str, Callable[[], Any]] = {
        "DiscreteBC": lambda: algos.DiscreteBCConfig(
            batch_size=b, learning_rate=kw["lr"], beta=kw["logit_penalty"], **one
        ),
        "DiscreteCQL": lambda: algos.DiscreteCQLConfig(
            batch_size=b,
            learning_rate=kw["lr"],
            gamma=kw["gamma"],
            alpha=kw["alpha"],
            target_update_interval=kw["target_update_interval"],
            **one,
        ),
        "DiscreteBCQ": lambda: algos.DiscreteBCQConfig(
            batch_size=b,
            learning_rate=kw["lr"],
            gamma=kw["gamma"],
            action_flexibility=kw["threshold"],
            beta=kw["logit_penalty"],
            target_update_interval=kw["target_update_interval"],
            share_encoder=False,
            **one,
        ),
        "DiscreteSAC": lambda: algos.DiscreteSACConfig(
            **sac,
            initial_temperature=kw["initial_temperature"],
            target_update_interval=kw["target_update_interval"],
        ),
        "BC": lambda: algos.BCConfig(
            batch_size=b, learning_rate=kw["lr"], policy_type="deterministic", **one
        ),
        "CQL": lambda: algos.CQLConfig(
            **sac,
            tau=kw["tau"],
            conservative_weight=kw["conservative_weight"],
            n_action_samples=kw["num_sampled_actions"],
            alpha_learning_rate=0.0,  # a fixed conservative weight, as ours
        ),
        "BCQ": lambda: algos.BCQConfig(
            batch_size=b,
            actor_learning_rate=kw["actor_lr"],
            critic_learning_rate=kw["critic_lr"],
            imitator_learning_rate=kw["vae_lr"],
            gamma=kw["gamma"],
            tau=kw["tau"],
            lam=kw["lmbda"],
            n_action_samples=kw["num_sampled_actions"],
            action_flexibility=kw["phi"],
            beta=kw["kl_weight"],
            imitator_encoder_factory=factory,
            **two,
        ),
        "TD3BC": lambda: algos.TD3PlusBCConfig(**td3),
        "SAC": lambda: algos.SACConfig(**sac, tau=kw["tau"]),
        "IQL": lambda: algos.IQLConfig(
            batch_size=b,
            actor_learning_rate=kw["actor_lr"],
            critic_learning_rate=kw["critic_lr"],
            gamma=kw["gamma"],
            tau=kw["tau"],
            expectile=kw["expectile"],
            weight_temp=kw["beta"],
            max_weight=kw["max_weight"],
            value_encoder_factory=factory,
            **two,
        ),
        "PRDC": lambda: algos.PRDCConfig(**td3, beta=kw["beta"]),
    }
    return configs[algo]() if algo in configs else None


def run_d3rlpy(algo: str, data: Data, hp: Hyper, warmup: int, steps: int, seed: int) -> dict | None:
    d3rlpy = import_d3rlpy()
    config = d3rlpy_config(algo, hp, d3rlpy_encoder_factory(data, hp))
    if config is None:
        return None
    dataset = d3rlpy_dataset(data)
    d3rlpy.seed(seed)  # numpy (the replay buffer's sampler), random and torch
    learner = config.create(device="cpu:0")
    learner.build_with_dataset(dataset)
    if algo == "PRDC":  # d3rlpy builds its neighbour index in fit(); the loop below skips fit()
        obs = torch.cat(
            [
                (data.states[data.state_index] - data.state_mean) / data.state_std,
                data.embeddings[data.instruction_id],
            ],
            1,
        )
        learner._nbsr.fit(torch.cat([settings(algo)["beta"] * obs, data.action], 1).numpy())
    clock = time.perf_counter
    for _ in range(warmup):
        learner.update(dataset.sample_transition_batch(hp.batch_size))
    sample_s = update_s = 0.0
    t0, c0 = clock(), time.process_time()
    for _ in range(steps):
        ta = clock()
        batch = dataset.sample_transition_batch(hp.batch_size)
        tb = clock()
        learner.update(batch)
        tc = clock()
        sample_s += tb - ta
        update_s += tc - tb
    return {
        "seconds": clock() - t0,
        "cpu_seconds": time.process_time() - c0,
        "sample_seconds": sample_s,
        "update_seconds": update_s,
    }
