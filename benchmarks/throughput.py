"""Training throughput: gradient updates per second of every offline RL algorithm (the real
Lightning path) against a bare PyTorch loop and d3rlpy 2.8.1, on the same data, networks and
hyperparameters, measured in one process. Prints a markdown table and writes
docs/results/throughput.md.

    python benchmarks/throughput.py                            # 2000 steps, 200 warm-up, 3 repeats
    python benchmarks/throughput.py --steps 300 --repeats 1    # quick check
    python benchmarks/throughput.py --algorithms TD3BC,IQL --contenders ours,bare --out ''

Measure on an otherwise idle machine: torch's intra-op threads slow down by orders of magnitude
when other processes occupy the cores. The report records the cores other processes used during
every run, and also gives rates from the process CPU time (robust to that with ``--threads 1``).

Data: CLEVR-Robot expert episodes (collected once, cached in the temp dir). Discrete algorithms
train on them as they are (40 actions); continuous ones on the same transitions with each push
replaced by its 2-d direction vector in ``[-1, 1]^2`` (CLEVR has no continuous action space; the
throughput depends on the shapes only). Every network is our backbone: state (10) ||
Linear(384->64) of the instruction embedding (-> || action for critics) -> MLP 256, 256 -> head.
Batches of 256 transitions drawn uniformly.

* ``ours``: ``lightning.Trainer(max_steps=W+N)`` fitting the module; a callback times the N steps
  after W warm-up steps (batch sampling, Lightning's loop, update). Discrete algorithms use
  ``RealImaginaryDataModule(ratio=0)``; continuous ones its environment-free core,
  ``RolloutDataModule(ratio=0)``, over the continuous transitions (same buffer, stream and
  stacking; ``RealImaginaryDataModule`` checks the actions against the discrete CLEVR
  environment).
  ``ours`` uses the data module's default of 8 updates per Lightning step
  (``updates_per_batch``); ``ours-k1`` hands over one batch per step.
* ``bare``: a plain loop over the same in-memory tensors with the same network classes and
  hyperparameters and the losses written out in the usual single-file style (one optimizer per
  network, the critic stepped before the actor as the papers' code does), ``Adam(foreach=True)``.
* ``d3rlpy``: the corresponding d3rlpy config (where d3rlpy has one: not DiscreteIQL or COMBO)
  with an encoder factory that builds our ``StateInstructionEncoder`` on the observation
  state || embedding (states pre-normalised). Each step is ``dataset.sample_transition_batch(256)``
  + ``algo.update(batch)``, the body of d3rlpy's ``fit`` loop without logger and progress bar;
  sampling and update are timed separately.

Runs are interleaved (repeat r runs every algorithm and contender once, the contender order rotated
by r) and the median over repeats is reported; a ratio column is the median over repeats of
the ratio of the two contenders' runs in the same repeat (robust to the machine's speed drifting
between repeats).

d3rlpy 2.8.1 pins gymnasium==1.0.0, which conflicts with our gymnasium==1.4.0, so it is installed
without its dependencies (it runs fine with gymnasium 1.4):

    pip install structlog==26.1.0 colorama==0.4.6 dataclasses-json==0.6.7 gym==0.26.2
    pip install --no-deps d3rlpy==2.8.1

(the first line is ``pip install -e '.[benchmark]'``).
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import dataclasses
import functools
import gc
import inspect
import io
import itertools
import logging
import math
import os
import platform
import shlex
import statistics
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from imaginebench.modules.backbone import (
    DEFAULT_ENCODER,
    ContinuousQHead,
    DeterministicHead,
    DiscreteHead,
    GaussianHead,
    StateInstructionEncoder,
    shared_encoder,
)

DISCRETE = ("DiscreteBC", "DiscreteCQL", "DiscreteBCQ", "DiscreteSAC", "DiscreteIQL")
CONTINUOUS = ("BC", "CQL", "BCQ", "TD3BC", "SAC", "IQL", "PRDC", "COMBO")
ALGORITHMS = DISCRETE + CONTINUOUS
CONTENDERS = ("ours", "ours-k1", "bare", "d3rlpy")
UPDATES_PER_BATCH = 8  # the ours contender: the data module's default updates per batch
# CLEVR's 8 push directions (action % 8): the continuous actions of the continuous algorithms.
DIRECTIONS = np.array(
    [[1, 0], [0, 1], [-1, 0], [0, -1], [0.8, 0.8], [-0.8, 0.8], [0.8, -0.8], [-0.8, -0.8]],
    dtype=np.float32,
)

# Hyperparameters every contender uses (our module's constructor arguments). Targets of the
# discrete actor-critics are hard copies every 500 steps, as d3rlpy's discrete learners do.
SETTINGS: dict[str, dict[str, Any]] = {
    "DiscreteBC": {"lr": 1e-3, "logit_penalty": 0.0},
    "DiscreteCQL": {"lr": 3e-4, "gamma": 0.99, "alpha": 1.0, "target_update_interval": 500},
    "DiscreteBCQ": {
        "lr": 3e-4,
        "gamma": 0.99,
        "threshold": 0.3,
        "logit_penalty": 0.01,
        "tau": 1.0,
        "target_update_interval": 500,
    },
    "DiscreteSAC": {
        "actor_lr": 3e-4,
        "critic_lr": 3e-4,
        "alpha_lr": 3e-4,
        "gamma": 0.99,
        "tau": 1.0,
        "target_update_interval": 500,
        "initial_temperature": 1.0,
        "target_entropy_scale": 0.98,
    },
    "DiscreteIQL": {
        "actor_lr": 3e-4,
        "critic_lr": 3e-4,
        "value_lr": 3e-4,
        "gamma": 0.99,
        "tau": 0.005,
        "expectile": 0.7,
        "beta": 3.0,
        "max_weight": 100.0,
    },
    "BC": {"lr": 1e-3},
    "CQL": {
        "actor_lr": 1e-4,
        "critic_lr": 3e-4,
        "alpha_lr": 1e-4,
        "gamma": 0.99,
        "tau": 0.005,
        "conservative_weight": 5.0,
        "num_sampled_actions": 10,
    },
    "BCQ": {
        "actor_lr": 1e-3,
        "critic_lr": 1e-3,
        "vae_lr": 1e-3,
        "gamma": 0.99,
        "tau": 0.005,
        "phi": 0.05,
        "lmbda": 0.75,
        "num_sampled_actions": 10,
        "kl_weight": 0.5,
    },
    "TD3BC": {
        "actor_lr": 3e-4,
        "critic_lr": 3e-4,
        "gamma": 0.99,
        "tau": 0.005,
        "alpha": 2.5,
        "policy_noise": 0.2,
        "noise_clip": 0.5,
        "policy_freq": 2,
    },
    "SAC": {"actor_lr": 3e-4, "critic_lr": 3e-4, "alpha_lr": 3e-4, "gamma": 0.99, "tau": 0.005},
    "IQL": {
        "actor_lr": 3e-4,
        "critic_lr": 3e-4,
        "value_lr": 3e-4,
        "gamma": 0.99,
        "tau": 0.005,
        "expectile": 0.7,
        "beta": 3.0,
        "max_weight": 100.0,
    },
    "PRDC": {
        "actor_lr": 3e-4,
        "critic_lr": 3e-4,
        "gamma": 0.99,
        "tau": 0.005,
        "alpha": 2.5,
        "beta": 2.0,
        "policy_noise": 0.2,
        "noise_clip": 0.5,
        "policy_freq": 2,
    },
    "COMBO": {
        "actor_lr": 1e-4,
        "critic_lr": 3e-4,
        "alpha_lr": 1e-4,
        "gamma": 0.99,
        "tau": 0.005,
        "conservative_weight": 1.0,
        "num_sampled_actions": 10,
        "model_ratio": 0.5,
        "ensemble_size": 7,
        "num_elites": 5,
        "model_max_steps": 200,  # before the timed steps; only the rollouts below are timed
        "rollout_length": 5,
        "rollout_batch_size": 10_000,
        "rollout_every": 1000,
    },
}


@dataclass(frozen=True)
class Hyper:
    """Sizes shared by all contenders."""

    batch_size: int = 256
    hidden: tuple[int, ...] = (256, 256)
    instruction_dim: int = 64


# ------------------------------------------------------------------------------------- data


@dataclass
class Data:
    path: Path
    dataset: Any  # RolloutDataset (continuous actions for the continuous view)
    state_dim: int
    action_spec: dict
    instructions: list[str]
    embeddings: Tensor  # (num_instructions, 384), rows in the data module's instruction order
    standardized: bool  # embeddings standardised per dimension, as our modules do by default
    state_mean: Tensor
    state_std: Tensor
    # flat transition tensors (the data module's real buffer)
    states: Tensor
    state_index: Tensor
    action: Tensor  # int64 (discrete) or (N, 2) float32 in [-1, 1]
    reward: Tensor
    done: Tensor
    instruction_id: Tensor

    @property
    def transitions(self) -> int:
        return int(self.action.shape[0])

    @property
    def discrete(self) -> bool:
        return self.action_spec["type"] == "discrete"


def _module_default(name: str, fallback: object) -> object:
    """Default of an ``OfflineRLModule`` constructor argument (``fallback`` if it has none)."""
    from imaginebench.modules.offline.base import OfflineRLModule

    param = inspect.signature(OfflineRLModule.__init__).parameters.get(name)
    return fallback if param is None or param.default is inspect.Parameter.empty else param.default


def load_data(episodes: int, seed: int, cache_dir: Path) -> Data:
    from imaginebench.data.collect import collect
    from imaginebench.data.format import load_dataset, save_dataset
    from imaginebench.datamodules import RealImaginaryDataModule

    path = cache_dir / f"clevr_train_n{episodes}_s{seed}_e0.2.h5"
    if not path.exists():
        dataset, stats = collect("clevr", "train", episodes, seed=seed, epsilon=0.2, progress=False)
        save_dataset(dataset, path, overwrite=True)
        print(f"# {stats} -> {path}", flush=True)
    dm = RealImaginaryDataModule(real=str(path), ratio=0.0, batch_size=256)
    dm.setup()
    buf = dm.real
    assert buf is not None
    encoder = shared_encoder(DEFAULT_ENCODER, "mean", True)  # what the modules' banks use
    embeddings = encoder.encode(dm.instructions)
    # Match whatever our modules feed the network by default: if they standardise the
    # embeddings (with the training instructions' mean and std), the other contenders get the
    # same standardised table, computed once.
    standardize = _module_default("standardize_instructions", False) and len(embeddings) > 1
    if standardize:
        embeddings = (embeddings - embeddings.mean(0)) / embeddings.std(0).clamp_min(1e-4)
    return Data(
        path=path,
        dataset=load_dataset(path),
        state_dim=dm.state_dim,
        action_spec=dm.action_spec,
        instructions=list(dm.instructions),
        embeddings=embeddings,
        standardized=bool(standardize),
        state_mean=buf.states.mean(0),
        state_std=buf.states.std(0).clamp_min(1e-3),
        states=buf.states,
        state_index=buf.data["state_index"].long(),
        action=buf.data["action"].long(),
        reward=buf.data["reward"].float(),
        done=buf.data["done"].float(),
        instruction_id=buf.data["instruction_id"].long(),
    )


def continuous_view(data: Data) -> Data:
    """The same transitions with each push replaced by its 2-d direction in ``[-1, 1]^2``."""
    spec = {"type": "continuous", "shape": [2], "low": -1.0, "high": 1.0}
    dataset = dataclasses.replace(
        data.dataset, actions=DIRECTIONS[data.dataset.actions % 8], action_spec=spec
    )
    return dataclasses.replace(
        data,
        dataset=dataset,
        action_spec=spec,
        action=torch.as_tensor(DIRECTIONS)[data.action % 8],
    )


# ---------------------------------------------------------------------- contender: ours


def make_module(algo: str, state_dim: int, action_spec: dict, hp: Hyper) -> Any:
    from imaginebench.modules import offline

    cls = getattr(offline, algo)
    return cls(
        state_dim=state_dim,
        action_spec=action_spec,
        hidden=hp.hidden,
        instruction_dim=hp.instruction_dim,
        **SETTINGS[algo],
    )


def buffer_datamodule(data: Data, hp: Hyper, seed: int, k: int) -> Any:
    """The continuous transitions served like ``RealImaginaryDataModule(ratio=0)``: its
    environment-free core over the in-memory dataset."""
    from imaginebench.datamodules import RolloutDataModule

    return RolloutDataModule(
        data.dataset, ratio=0.0, batch_size=hp.batch_size, seed=seed, updates_per_batch=k
    )


def run_ours(
    algo: str, data: Data, hp: Hyper, warmup: int, steps: int, seed: int, k: int = UPDATES_PER_BATCH
) -> dict:
    import lightning as L

    from imaginebench.datamodules import RealImaginaryDataModule

    class StepTimer(L.Callback):
        """Time from the end of step ``warmup`` to the end of step ``warmup + steps``."""

        def __init__(self) -> None:
            self.t0, self.t1 = None, None

        def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
            step = trainer.global_step  # one per update, also with k updates per batch
            if step >= warmup and self.t0 is None:
                self.t0 = (time.perf_counter(), time.process_time())
            elif step >= warmup + steps and self.t1 is None:
                self.t1 = (time.perf_counter(), time.process_time())

    torch.manual_seed(seed)
    if data.discrete:
        dm = RealImaginaryDataModule(
            real=str(data.path), ratio=0.0, batch_size=hp.batch_size, seed=seed, updates_per_batch=k
        )
    else:
        dm = buffer_datamodule(data, hp, seed, k)
    model = make_module(algo, dm.state_dim, dm.action_spec, hp)
    timer = StepTimer()
    trainer = L.Trainer(
        max_steps=warmup + steps,
        accelerator="cpu",
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=[timer],
    )
    trainer.fit(model, dm)
    assert timer.t0 is not None and timer.t1 is not None, "the trainer stopped early"
    return {"seconds": timer.t1[0] - timer.t0[0], "cpu_seconds": timer.t1[1] - timer.t0[1]}


# ---------------------------------------------------------------------- contender: bare


@dataclass
class Batch:
    s: Tensor  # normalised state
    s2: Tensor
    a: Tensor
    r: Tensor
    nd: Tensor  # 1 - done
    e: Tensor  # instruction embedding
    ids: Tensor  # instruction ids (PRDC's same-instruction neighbours)


Step = Callable[[int, Batch], None]


class Nets:
    """Builders of the benchmark's networks from our backbone classes."""

    def __init__(self, data: Data, hp: Hyper) -> None:
        self.data, self.hp = data, hp
        self.n = int(data.action_spec["n"]) if data.discrete else 0
        self.a = 0 if data.discrete else int(data.action_spec["shape"][0])

    def trunk(self, extra: int = 0) -> StateInstructionEncoder:
        emb = int(self.data.embeddings.shape[1])
        return StateInstructionEncoder(
            self.data.state_dim, emb, self.hp.hidden, self.hp.instruction_dim, extra
        )

    def discrete(self) -> DiscreteHead:
        return DiscreteHead(self.trunk(), self.n)

    def critics(self) -> nn.ModuleList:
        return nn.ModuleList([ContinuousQHead(self.trunk(self.a)) for _ in range(2)])


def adam(params: Any, lr: float) -> torch.optim.Adam:
    return torch.optim.Adam(params, lr=lr, foreach=True)


def update(opt: torch.optim.Optimizer, loss: Tensor) -> None:
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()


def polyak(target: nn.Module, source: nn.Module, tau: float) -> None:
    with torch.no_grad():
        for t, s in zip(target.parameters(), source.parameters(), strict=True):
            t.lerp_(s, tau)


def expectile(diff: Tensor, tau: float) -> Tensor:
    return (torch.where(diff > 0, tau, 1 - tau) * diff**2).mean()


def bare_discrete_bc(nets: Nets, kw: dict) -> Step:
    net = nets.discrete()
    opt = adam(net.parameters(), kw["lr"])

    def step(k: int, b: Batch) -> None:
        logits = net(b.s, b.e)
        loss = F.cross_entropy(logits, b.a)
        if kw["logit_penalty"]:
            loss = loss + kw["logit_penalty"] * 0.5 * logits.pow(2).mean()
        update(opt, loss)

    return step


def bare_discrete_cql(nets: Nets, kw: dict) -> Step:
    net = nets.discrete()
    target = copy.deepcopy(net).requires_grad_(False)
    opt = adam(net.parameters(), kw["lr"])

    def step(k: int, b: Batch) -> None:
        q = net(b.s, b.e)
        q_a = q.gather(1, b.a[:, None]).squeeze(1)
        with torch.no_grad():
            best = net(b.s2, b.e).argmax(1, keepdim=True)
            y = b.r + kw["gamma"] * b.nd * target(b.s2, b.e).gather(1, best).squeeze(1)
        loss = F.smooth_l1_loss(q_a, y) + kw["alpha"] * (torch.logsumexp(q, 1) - q_a).mean()
        update(opt, loss)
        if (k + 1) % kw["target_update_interval"] == 0:
            target.load_state_dict(net.state_dict())

    return step


def bare_discrete_bcq(nets: Nets, kw: dict) -> Step:
    q, imitation = nets.discrete(), nets.discrete()
    target = copy.deepcopy(q).requires_grad_(False)
    opt = adam(itertools.chain(q.parameters(), imitation.parameters()), kw["lr"])
    log_threshold = math.log(kw["threshold"])

    def step(k: int, b: Batch) -> None:
        q_a = q(b.s, b.e).gather(1, b.a[:, None]).squeeze(1)
        logits = imitation(b.s, b.e)
        with torch.no_grad():
            log_p = F.log_softmax(imitation(b.s2, b.e), 1)
            allowed = log_p - log_p.max(1, keepdim=True).values > log_threshold
            best = q(b.s2, b.e).masked_fill(~allowed, -torch.inf).argmax(1, keepdim=True)
            y = b.r + kw["gamma"] * b.nd * target(b.s2, b.e).gather(1, best).squeeze(1)
        loss = F.smooth_l1_loss(q_a, y) + F.cross_entropy(logits, b.a)
        update(opt, loss + kw["logit_penalty"] * logits.pow(2).mean())
        if (k + 1) % kw["target_update_interval"] == 0:
            target.load_state_dict(q.state_dict())

    return step


def bare_discrete_sac(nets: Nets, kw: dict) -> Step:
    actor = nets.discrete()
    critics = nn.ModuleList([nets.discrete(), nets.discrete()])
    targets = copy.deepcopy(critics).requires_grad_(False)
    log_alpha = torch.zeros((), requires_grad=True)
    opt_a, opt_c = (
        adam(actor.parameters(), kw["actor_lr"]),
        adam(critics.parameters(), kw["critic_lr"]),
    )
    opt_t = adam([log_alpha], kw["alpha_lr"])
    target_entropy = kw["target_entropy_scale"] * math.log(nets.n)

    def step(k: int, b: Batch) -> None:
        alpha = log_alpha.exp().detach()
        with torch.no_grad():
            log_p2 = F.log_softmax(actor(b.s2, b.e), 1)
            q2 = torch.min(*(t(b.s2, b.e) for t in targets))
            y = b.r + kw["gamma"] * b.nd * (log_p2.exp() * (q2 - alpha * log_p2)).sum(1)
        q = [c(b.s, b.e).gather(1, b.a[:, None]).squeeze(1) for c in critics]
        update(opt_c, sum(F.mse_loss(qi, y) for qi in q))
        log_p = F.log_softmax(actor(b.s, b.e), 1)
        with torch.no_grad():
            q_min = torch.min(*(c(b.s, b.e) for c in critics))
        update(opt_a, (log_p.exp() * (alpha * log_p - q_min)).sum(1).mean())
        neg_entropy = (log_p.exp() * log_p).sum(1).detach()
        update(opt_t, -(log_alpha * (neg_entropy + target_entropy)).mean())
        if (k + 1) % kw["target_update_interval"] == 0:
            targets.load_state_dict(critics.state_dict())

    return step


def bare_discrete_iql(nets: Nets, kw: dict) -> Step:
    actor, value = nets.discrete(), DiscreteHead(nets.trunk(), 1)
    critics = nn.ModuleList([nets.discrete(), nets.discrete()])
    targets = copy.deepcopy(critics).requires_grad_(False)
    opt_a, opt_c = (
        adam(actor.parameters(), kw["actor_lr"]),
        adam(critics.parameters(), kw["critic_lr"]),
    )
    opt_v = adam(value.parameters(), kw["value_lr"])

    def step(k: int, b: Batch) -> None:
        idx = b.a[:, None]
        with torch.no_grad():
            q_t = torch.min(*(t(b.s, b.e).gather(1, idx) for t in targets)).squeeze(1)
        update(opt_v, expectile(q_t - value(b.s, b.e).squeeze(1), kw["expectile"]))
        with torch.no_grad():
            y = b.r + kw["gamma"] * b.nd * value(b.s2, b.e).squeeze(1)
            w = torch.exp(kw["beta"] * (q_t - value(b.s, b.e).squeeze(1))).clamp(
                max=kw["max_weight"]
            )
        update(opt_c, sum(F.mse_loss(c(b.s, b.e).gather(1, idx).squeeze(1), y) for c in critics))
        log_p = F.log_softmax(actor(b.s, b.e), 1).gather(1, idx).squeeze(1)
        update(opt_a, -(w * log_p).mean())
        polyak(targets, critics, kw["tau"])

    return step


def bare_bc(nets: Nets, kw: dict) -> Step:
    actor = DeterministicHead(nets.trunk(), nets.a)
    opt = adam(actor.parameters(), kw["lr"])

    def step(k: int, b: Batch) -> None:
        update(opt, F.mse_loss(actor(b.s, b.e), b.a))

    return step


def soft_critic_step(
    kw: dict,
    actor: GaussianHead,
    critics: nn.ModuleList,
    targets: nn.ModuleList,
    log_alpha: Tensor,
    b: Batch,
    conservative: Callable[[nn.Module, Tensor], Tensor] | None,
) -> Tensor:
    """The (conservative) soft critic loss of SAC / CQL / COMBO."""
    alpha = log_alpha.exp().detach()
    with torch.no_grad():
        a2, log_a2 = actor.sample(b.s2, b.e)
        q2 = torch.min(*(t(b.s2, b.e, a2) for t in targets))
        y = b.r + kw["gamma"] * b.nd * (q2 - alpha * log_a2)
    loss = 0.0
    for c in critics:
        q = c(b.s, b.e, b.a)
        loss = loss + F.mse_loss(q, y)
        if conservative is not None:
            loss = loss + kw["conservative_weight"] * conservative(c, q)
    return loss


def soft_actor_steps(
    kw: dict,
    actor: GaussianHead,
    critics: nn.ModuleList,
    log_alpha: Tensor,
    opt_a: torch.optim.Optimizer,
    opt_t: torch.optim.Optimizer,
    b: Batch,
    target_entropy: float,
) -> None:
    pi, log_pi = actor.sample(b.s, b.e)
    q = torch.min(*(c(b.s, b.e, pi) for c in critics))
    update(opt_a, (log_alpha.exp().detach() * log_pi - q).mean())
    update(opt_t, -(log_alpha * (log_pi.detach() + target_entropy)).mean())


def logsumexp_gap(
    critic: nn.Module, actor: GaussianHead, s: Tensor, s2: Tensor, e: Tensor, k: int, n_dims: int
) -> Tensor:
    """CQL(H)'s importance-sampled log-sum-exp of Q over uniform and policy actions."""
    s_k, s2_k, e_k = (x.repeat_interleave(k, 0) for x in (s, s2, e))
    with torch.no_grad():
        uniform = torch.rand(len(s_k), n_dims) * 2 - 1
        a_s, lp_s = actor.sample(s_k, e_k)
        a_s2, lp_s2 = actor.sample(s2_k, e_k)
    sampled = torch.stack(
        [
            critic(s_k, e_k, uniform) - n_dims * math.log(0.5),
            critic(s_k, e_k, a_s) - lp_s,
            critic(s_k, e_k, a_s2) - lp_s2,
        ],
        -1,
    ).view(len(s), 3 * k)
    return torch.logsumexp(sampled, -1).mean()


def bare_sac_family(nets: Nets, kw: dict, conservative: bool) -> Step:
    actor = GaussianHead(nets.trunk(), nets.a)
    critics = nets.critics()
    targets = copy.deepcopy(critics).requires_grad_(False)
    log_alpha = torch.zeros((), requires_grad=True)
    opt_a, opt_c = (
        adam(actor.parameters(), kw["actor_lr"]),
        adam(critics.parameters(), kw["critic_lr"]),
    )
    opt_t = adam([log_alpha], kw["alpha_lr"])

    def step(k: int, b: Batch) -> None:
        gap = None
        if conservative:

            def gap(c: nn.Module, q: Tensor) -> Tensor:
                return (
                    logsumexp_gap(c, actor, b.s, b.s2, b.e, kw["num_sampled_actions"], nets.a)
                    - q.mean()
                )

        update(opt_c, soft_critic_step(kw, actor, critics, targets, log_alpha, b, gap))
        soft_actor_steps(kw, actor, critics, log_alpha, opt_a, opt_t, b, -float(nets.a))
        polyak(targets, critics, kw["tau"])

    return step


def bare_bcq(nets: Nets, kw: dict) -> Step:
    from imaginebench.modules.offline.bcq import ConditionalVAE, PerturbationActor

    a = nets.a
    vae = ConditionalVAE(nets.trunk(a), nets.trunk(2 * a), a)
    actor = PerturbationActor(nets.trunk(a), a, kw["phi"])
    actor_t = copy.deepcopy(actor).requires_grad_(False)
    critics = nets.critics()
    targets = copy.deepcopy(critics).requires_grad_(False)
    opt_v, opt_a = adam(vae.parameters(), kw["vae_lr"]), adam(actor.parameters(), kw["actor_lr"])
    opt_c = adam(critics.parameters(), kw["critic_lr"])
    n_samples, lam = kw["num_sampled_actions"], kw["lmbda"]

    def latent(n: int) -> Tensor:
        return torch.randn(n, vae.latent_dim).clamp(-0.5, 0.5)

    def step(k: int, b: Batch) -> None:
        n = len(b.s)
        recon, mean, std = vae(b.s, b.e, b.a, torch.randn(n, vae.latent_dim))
        kl = -0.5 * (1 + (std**2).log() - mean**2 - std**2).mean()
        update(opt_v, F.mse_loss(recon, b.a) + kw["kl_weight"] * kl)
        with torch.no_grad():
            s2, e2 = b.s2.repeat_interleave(n_samples, 0), b.e.repeat_interleave(n_samples, 0)
            a2 = actor_t(s2, e2, vae.decode(s2, e2, latent(n * n_samples)))
            q1, q2 = (t(s2, e2, a2) for t in targets)
            q_next = (
                (lam * torch.min(q1, q2) + (1 - lam) * torch.max(q1, q2)).view(n, -1).max(1).values
            )
            y = b.r + kw["gamma"] * b.nd * q_next
        update(opt_c, sum(F.mse_loss(c(b.s, b.e, b.a), y) for c in critics))
        with torch.no_grad():
            sampled = vae.decode(b.s, b.e, latent(n))
        update(opt_a, -critics[0](b.s, b.e, actor(b.s, b.e, sampled)).mean())
        polyak(targets, critics, kw["tau"])
        polyak(actor_t, actor, kw["tau"])

    return step


def bare_td3_family(nets: Nets, kw: dict, data: Data, prdc: bool) -> Step:
    actor = DeterministicHead(nets.trunk(), nets.a)
    actor_t = copy.deepcopy(actor).requires_grad_(False)
    critics = nets.critics()
    targets = copy.deepcopy(critics).requires_grad_(False)
    opt_a, opt_c = (
        adam(actor.parameters(), kw["actor_lr"]),
        adam(critics.parameters(), kw["critic_lr"]),
    )
    if prdc:  # keys (beta * s, a, c * instruction id): neighbours share the instruction
        from scipy.spatial import cKDTree

        s_all = (data.states[data.state_index] - data.state_mean) / data.state_std
        keys = torch.cat([kw["beta"] * s_all, data.action], 1).double()
        spacing = 2 * math.sqrt(keys.shape[1]) * (float(keys.abs().max()) + 1)
        tree = cKDTree(
            torch.cat([keys, data.instruction_id[:, None].double() * spacing], 1).numpy()
        )

    def step(k: int, b: Batch) -> None:
        with torch.no_grad():
            noise = (torch.randn_like(b.a) * kw["policy_noise"]).clamp(
                -kw["noise_clip"], kw["noise_clip"]
            )
            a2 = (actor_t(b.s2, b.e) + noise).clamp(-1, 1)
            y = b.r + kw["gamma"] * b.nd * torch.min(*(t(b.s2, b.e, a2) for t in targets))
        update(opt_c, sum(F.mse_loss(c(b.s, b.e, b.a), y) for c in critics))
        if k % kw["policy_freq"] == 0:
            pi = actor(b.s, b.e)
            q = critics[0](b.s, b.e, pi)
            lmbda = kw["alpha"] / q.abs().mean().detach()
            if prdc:
                key = torch.cat([kw["beta"] * b.s, pi.detach(), b.ids[:, None] * spacing], 1)
                _, idx = tree.query(key.double().numpy(), k=1)
                regulariser = F.mse_loss(pi, data.action[torch.as_tensor(idx)])
            else:
                regulariser = F.mse_loss(pi, b.a)
            update(opt_a, -lmbda * q.mean() + regulariser)
            polyak(targets, critics, kw["tau"])
            polyak(actor_t, actor, kw["tau"])

    return step


def bare_iql(nets: Nets, kw: dict) -> Step:
    from imaginebench.modules.offline.iql import GaussianPolicy, ValueHead

    actor, value = GaussianPolicy(nets.trunk(), nets.a), ValueHead(nets.trunk())
    critics = nets.critics()
    targets = copy.deepcopy(critics).requires_grad_(False)
    opt_a, opt_c = (
        adam(actor.parameters(), kw["actor_lr"]),
        adam(critics.parameters(), kw["critic_lr"]),
    )
    opt_v = adam(value.parameters(), kw["value_lr"])

    def step(k: int, b: Batch) -> None:
        with torch.no_grad():
            q_t = torch.min(*(t(b.s, b.e, b.a) for t in targets))
        update(opt_v, expectile(q_t - value(b.s, b.e), kw["expectile"]))
        with torch.no_grad():
            y = b.r + kw["gamma"] * b.nd * value(b.s2, b.e)
            w = torch.exp(kw["beta"] * (q_t - value(b.s, b.e))).clamp(max=kw["max_weight"])
        update(opt_c, sum(F.mse_loss(c(b.s, b.e, b.a), y) for c in critics))
        update(opt_a, -(w * actor.log_prob(b.s, b.e, b.a)).mean())
        polyak(targets, critics, kw["tau"])

    return step


def bare_combo(nets: Nets, kw: dict, data: Data) -> Step:
    """COMBO's policy optimisation with its model rollouts (the untimed model phase skipped)."""
    from imaginebench.modules.offline.combo import DynamicsEnsemble

    actor = GaussianHead(nets.trunk(), nets.a)
    critics = nets.critics()
    targets = copy.deepcopy(critics).requires_grad_(False)
    log_alpha = torch.zeros((), requires_grad=True)
    opt_a, opt_c = (
        adam(actor.parameters(), kw["actor_lr"]),
        adam(critics.parameters(), kw["critic_lr"]),
    )
    opt_t = adam([log_alpha], kw["alpha_lr"])
    dynamics = DynamicsEnsemble(
        [nets.trunk(nets.a) for _ in range(kw["ensemble_size"])], data.state_dim
    ).requires_grad_(False)
    starts = (data.states[data.state_index] - data.state_mean) / data.state_std
    low, high = starts.min(0).values, starts.max(0).values
    model: dict[str, list[Tensor]] = {"s": [], "a": [], "r": [], "s2": [], "nd": [], "ids": []}

    @torch.no_grad()
    def rollout() -> None:
        pick = torch.randint(len(starts), (kw["rollout_batch_size"],))
        s, ids = starts[pick], data.instruction_id[pick]
        for _ in range(kw["rollout_length"]):
            e = data.embeddings[ids]
            a, _ = actor.sample(s, e)
            member = torch.randint(kw["num_elites"], (len(s),))
            out = torch.empty(len(s), data.state_dim + 1)
            logvar, done = torch.empty_like(out), torch.empty(len(s))
            for m in range(kw["num_elites"]):
                rows = member == m
                out[rows], logvar[rows], done[rows] = dynamics(m, s[rows], e[rows], a[rows])
            sample = out + (0.5 * logvar).exp() * torch.randn_like(out)
            s2 = torch.max(torch.min(s + sample[:, :-1], high), low)
            alive = done <= 0
            for key, v in zip(model, (s, a, sample[:, -1], s2, alive.float(), ids), strict=True):
                model[key].append(v)
            s, ids = s2[alive], ids[alive]
        for key, parts in model.items():  # keep the rows as one tensor per key
            model[key] = [torch.cat(parts)]

    def step(k: int, b: Batch) -> None:
        if k % kw["rollout_every"] == 0:
            rollout()
        n = len(b.s)
        n_model = round(kw["model_ratio"] * n)
        idx = torch.randint(len(model["s"][0]), (n_model,))
        fake = {key: v[0][idx] for key, v in model.items()}
        mixed = Batch(
            s=torch.cat([b.s[n_model:], fake["s"]]),
            s2=torch.cat([b.s2[n_model:], fake["s2"]]),
            a=torch.cat([b.a[n_model:], fake["a"]]),
            r=torch.cat([b.r[n_model:], fake["r"]]),
            nd=torch.cat([b.nd[n_model:], fake["nd"]]),
            e=torch.cat([b.e[n_model:], data.embeddings[fake["ids"]]]),
            ids=b.ids,
        )
        n_real = n - n_model

        def gap(c: nn.Module, q: Tensor) -> Tensor:
            k_ = kw["num_sampled_actions"]
            push_down = logsumexp_gap(c, actor, fake["s"], fake["s2"], mixed.e[n_real:], k_, nets.a)
            return push_down - q[:n_real].mean()

        update(opt_c, soft_critic_step(kw, actor, critics, targets, log_alpha, mixed, gap))
        soft_actor_steps(kw, actor, critics, log_alpha, opt_a, opt_t, mixed, -float(nets.a))
        polyak(targets, critics, kw["tau"])

    return step


def make_bare(algo: str, data: Data, hp: Hyper) -> Step:
    nets, kw = Nets(data, hp), SETTINGS[algo]
    builders: dict[str, Callable[[], Step]] = {
        "DiscreteBC": lambda: bare_discrete_bc(nets, kw),
        "DiscreteCQL": lambda: bare_discrete_cql(nets, kw),
        "DiscreteBCQ": lambda: bare_discrete_bcq(nets, kw),
        "DiscreteSAC": lambda: bare_discrete_sac(nets, kw),
        "DiscreteIQL": lambda: bare_discrete_iql(nets, kw),
        "BC": lambda: bare_bc(nets, kw),
        "CQL": lambda: bare_sac_family(nets, kw, conservative=True),
        "BCQ": lambda: bare_bcq(nets, kw),
        "TD3BC": lambda: bare_td3_family(nets, kw, data, prdc=False),
        "SAC": lambda: bare_sac_family(nets, kw, conservative=False),
        "IQL": lambda: bare_iql(nets, kw),
        "PRDC": lambda: bare_td3_family(nets, kw, data, prdc=True),
        "COMBO": lambda: bare_combo(nets, kw, data),
    }
    return builders[algo]()


def run_bare(algo: str, data: Data, hp: Hyper, warmup: int, steps: int, seed: int) -> dict:
    torch.manual_seed(seed)
    step = make_bare(algo, data, hp)
    gen = torch.Generator().manual_seed(seed)
    n, b = data.transitions, hp.batch_size
    states, mean, std = data.states, data.state_mean, data.state_std

    def sample() -> Batch:
        idx = torch.randint(n, (b,), generator=gen)
        row = data.state_index[idx]
        ids = data.instruction_id[idx]
        return Batch(
            s=(states[row] - mean) / std,
            s2=(states[row + 1] - mean) / std,
            a=data.action[idx],
            r=data.reward[idx],
            nd=1.0 - data.done[idx],
            e=data.embeddings[ids],
            ids=ids,
        )

    for k in range(warmup):
        step(k, sample())
    t0, c0 = time.perf_counter(), time.process_time()
    for k in range(warmup, warmup + steps):
        step(k, sample())
    return {"seconds": time.perf_counter() - t0, "cpu_seconds": time.process_time() - c0}


# ---------------------------------------------------------------------- contender: d3rlpy


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
    kw, b = SETTINGS[algo], hp.batch_size
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
        learner._nbsr.fit(torch.cat([SETTINGS[algo]["beta"] * obs, data.action], 1).numpy())
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


RUNNERS = {
    "ours": run_ours,
    "ours-k1": functools.partial(run_ours, k=1),
    "bare": run_bare,
    "d3rlpy": run_d3rlpy,
}


# ------------------------------------------------------------------------------------- main


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def busy_cpu_seconds() -> float | None:
    """CPU seconds the whole machine has spent busy since boot (``/proc/stat``; None elsewhere)."""
    try:
        ticks = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
    except (OSError, ValueError):
        return None
    idle = ticks[3] + ticks[4]  # idle + iowait
    return (sum(ticks) - idle) / os.sysconf("SC_CLK_TCK")


def fmt_rate(x: float | None) -> str:
    return "n/a" if x is None else f"{x:,.0f}"


def quiet_libraries() -> None:
    """Silence Lightning's banners/tips and d3rlpy's structlog info lines (warnings stay)."""
    import lightning  # noqa: F401  (creates its loggers)

    for name in list(logging.root.manager.loggerDict):
        if name.startswith(("lightning", "pytorch_lightning")):
            logging.getLogger(name).setLevel(logging.ERROR)
    warnings.filterwarnings("ignore", message=".*does not have many workers.*")
    warnings.filterwarnings("ignore", message=".*isinstance\\(treespec, LeafSpec\\).*")
    warnings.filterwarnings("ignore", message=".*validation_step.*val_dataloader.*")
    with contextlib.suppress(ImportError):
        import structlog

        structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))


def settings_table() -> list[str]:
    rows = [
        "| algorithm | settings (ours = bare = d3rlpy where it has the algorithm) |",
        "|---|---|",
    ]
    for algo in ALGORITHMS:
        rows.append(
            f"| {algo} | "
            + ", ".join(
                f"{k} {v:g}" if isinstance(v, float) else f"{k} {v}"
                for k, v in SETTINGS[algo].items()
            )
            + " |"
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--steps", type=int, default=2000, help="timed updates per run")
    parser.add_argument(
        "--warmup", type=int, default=200, help="untimed updates before timing (>= 1)"
    )
    parser.add_argument(
        "--repeats", type=int, default=3, help="interleaved repeats (median reported)"
    )
    parser.add_argument(
        "--threads", type=int, default=None, help="torch.set_num_threads (default: torch's default)"
    )
    parser.add_argument("--episodes", type=int, default=300, help="CLEVR train episodes collected")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--algorithms",
        default=",".join(ALGORITHMS),
        help="comma-separated subset of " + ",".join(ALGORITHMS),
    )
    parser.add_argument(
        "--contenders",
        default=",".join(CONTENDERS),
        help="comma-separated subset of " + ",".join(CONTENDERS),
    )
    parser.add_argument(
        "--cache-dir",
        default=str(Path(tempfile.gettempdir()) / "imaginebench_throughput"),
        help="where the collected dataset is cached",
    )
    parser.add_argument("--out", default="docs/results/throughput.md", help="'' to skip writing")
    args = parser.parse_args()
    if args.steps < 1 or args.warmup < 1 or args.repeats < 1:
        parser.error("--steps, --warmup and --repeats must be >= 1")
    algorithms = [a for a in args.algorithms.split(",") if a]
    contenders = [c for c in args.contenders.split(",") if c]
    for a in algorithms:
        if a not in ALGORITHMS:
            parser.error(f"unknown algorithm {a!r}; choose from {ALGORITHMS}")
    for c in contenders:
        if c not in CONTENDERS:
            parser.error(f"unknown contender {c!r}; choose from {CONTENDERS}")

    command = shlex.join(["python", "benchmarks/throughput.py", *sys.argv[1:]])
    load_start = os.getloadavg()  # before this process does any work
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    d3rlpy_version = None
    if "d3rlpy" in contenders:
        try:
            d3rlpy_version = import_d3rlpy().__version__
        except ImportError:
            sys.exit(
                "d3rlpy is not installed; see the install lines in this script's docstring "
                "or pass --contenders ours,bare"
            )
    quiet_libraries()
    import lightning

    cores = os.cpu_count() or 1
    threads = torch.get_num_threads()
    if load_start[0] > 0.5 * cores:
        print(
            f"# warning: 1-minute load average {load_start[0]:.1f} on {cores} cores (it lags a "
            f"minute behind): if other processes are running, wall-clock rates are unreliable"
            + (
                f", and {threads} torch threads sharing busy cores can make every step orders of "
                f"magnitude slower; measure on an idle machine (or with --threads 1 and read "
                f"the CPU-time rates)"
                if threads > 1
                else "; read the CPU-time rates"
            )
            + ". The report gives the cores other processes used during every run.",
            flush=True,
        )
    hp = Hyper()
    cache_dir = Path(args.cache_dir)
    cache_dir.mkdir(parents=True, exist_ok=True)
    discrete_data = load_data(args.episodes, args.seed, cache_dir)
    views = {True: discrete_data, False: continuous_view(discrete_data)}
    data = discrete_data
    print(
        f"# {args.episodes} episodes, {data.transitions} transitions, "
        f"{len(data.instructions)} instructions; torch {torch.__version__} with "
        f"{threads} threads; steps {args.steps}, warm-up {args.warmup}, "
        f"repeats {args.repeats}, batch {hp.batch_size}",
        flush=True,
    )

    results: dict[tuple[str, str], list[dict]] = {}
    for r in range(args.repeats):
        order = contenders[r % len(contenders) :] + contenders[: r % len(contenders)]
        for algo in algorithms:
            for who in order:
                gc.collect()
                busy0, own0, wall0 = busy_cpu_seconds(), time.process_time(), time.perf_counter()
                res = RUNNERS[who](
                    algo, views[algo in DISCRETE], hp, args.warmup, args.steps, args.seed + r
                )
                if res is None:  # d3rlpy has no such algorithm
                    continue
                busy1, own1, wall1 = busy_cpu_seconds(), time.process_time(), time.perf_counter()
                res["rate"] = args.steps / res["seconds"]
                res["cpu_rate"] = args.steps / res["cpu_seconds"]
                # cores kept busy by other processes during this run (setup included)
                res["others"] = (
                    None
                    if busy0 is None or busy1 is None
                    else max(0.0, (busy1 - busy0) - (own1 - own0)) / (wall1 - wall0)
                )
                results.setdefault((algo, who), []).append(res)
                extra = ""
                if "update_seconds" in res:
                    extra = (
                        f"; sampling {1e3 * res['sample_seconds'] / args.steps:.2f} ms/step, "
                        f"update {1e3 * res['update_seconds'] / args.steps:.2f} ms/step"
                    )
                if res["others"] is not None:
                    extra += f"; other processes used {res['others']:.2f} cores"
                print(
                    f"# repeat {r + 1}/{args.repeats} {algo:11s} {who:7s} "
                    f"{res['rate']:8.1f} upd/s (CPU time: {res['cpu_rate']:.1f}){extra}",
                    flush=True,
                )

    def median(algo: str, who: str, key: str = "rate") -> float | None:
        runs = results.get((algo, who))
        if not runs:
            return None
        if key in ("rate", "cpu_rate"):
            return statistics.median(x[key] for x in runs)
        return statistics.median(args.steps / x[key] for x in runs)  # a seconds key -> rate

    def paired(algo: str, a: str, b: str, key: str) -> str:
        """Median over repeats of the ratio within each repeat (the two runs are minutes
        apart, so drifts of the machine's speed between repeats cancel)."""
        runs_a, runs_b = results.get((algo, a)), results.get((algo, b))
        if not runs_a or not runs_b:
            return "n/a"
        ratios = [x[key] / y[key] for x, y in zip(runs_a, runs_b)]
        return f"{statistics.median(ratios):.2f}x"

    def rate_table(key: str) -> list[str]:
        rows = [
            (
                "| algorithm | ours (Lightning, 8 updates per batch) upd/s | ours, 1 update per batch "
                "| bare loop upd/s | d3rlpy upd/s | ours / bare | ours-k1 / bare | ours / d3rlpy |"
            ),
            "|---|---|---|---|---|---|---|---|",
        ]
        for algo in algorithms:
            ours, k1, bare, d3 = (median(algo, c, key) for c in CONTENDERS)
            rows.append(
                f"| {algo} | {fmt_rate(ours)} | {fmt_rate(k1)} | {fmt_rate(bare)} | "
                f"{fmt_rate(d3)} | {paired(algo, 'ours', 'bare', key)} | "
                f"{paired(algo, 'ours-k1', 'bare', key)} | {paired(algo, 'ours', 'd3rlpy', key)} |"
            )
        return rows

    table = rate_table("rate")
    print("\n".join(table))
    if not args.out:
        return

    others = [x["others"] for runs in results.values() for x in runs if x["others"] is not None]
    busy = bool(others) and max(others) > 0.2
    lines = [
        "# Training throughput: ours vs. a bare PyTorch loop vs. d3rlpy",
        "",
        f"Generated by `{command}` on {time.strftime('%Y-%m-%d %H:%M')}.",
        "",
        (
            f"* CPU: {cpu_name()} ({cores} logical cores); torch {torch.__version__} with "
            f"{threads} intra-op thread(s) ({torch.get_num_interop_threads()} inter-op); "
            f"lightning {lightning.__version__}; d3rlpy {d3rlpy_version or 'not run'}; "
            f"Python {platform.python_version()}."
        ),
        (
            f"* Data: {args.episodes} CLEVR-Robot `train` expert episodes (epsilon 0.2, seed "
            f"{args.seed}): {data.transitions} transitions, {len(data.instructions)} instructions, "
            f"10-d state, {data.embeddings.shape[1]}-d instruction embedding (all-MiniLM-L6-v2"
            f"{', standardised per dimension' if data.standardized else ''}), "
            f"{data.action_spec['n']} discrete actions; continuous algorithms train on the same "
            "transitions with each push replaced by its 2-d direction in [-1, 1]^2."
        ),
        (
            f"* Networks (every contender): state || Linear({data.embeddings.shape[1]}->"
            f"{hp.instruction_dim}) of the embedding (|| action for continuous critics) -> MLP "
            f"{', '.join(map(str, hp.hidden))} (ReLU) -> head; Adam; batch {hp.batch_size}."
        ),
        (
            f"* Timing: {args.steps} timed updates after {args.warmup} warm-up updates per run, "
            f"{args.repeats} interleaved repeat(s), median reported; ratios are the median "
            "over repeats of the ratio within each repeat."
        ),
        f"* Other processes: 1-minute load average {load_start[0]:.2f} before the start; during "
        f"the runs they kept "
        + (
            f"{statistics.mean(others):.2f} cores busy on average (at most {max(others):.2f} "
            f"in one run)"
            if others
            else "an unknown number of cores busy"
        )
        + f" of {cores}"
        + (
            ": **the machine was shared, so the wall-clock numbers are unreliable** (the "
            "CPU-time table is less sensitive to this with `--threads 1`)."
            if busy
            else "."
        ),
        "",
        "## Updates per second (wall clock, median)",
        "",
        *table,
        "",
        "Target: ours >= 0.9x the bare loop. n/a: d3rlpy 2.8.1 has no DiscreteIQL or COMBO.",
        "",
        "## Updates per second from process CPU time (median)",
        "",
        (
            "Steps divided by the CPU time the process used during the timed steps. With one torch "
            "thread this is close to the wall-clock rate on an idle machine and is far less "
            "sensitive to other processes; with several threads it also counts threads spinning."
        ),
        "",
        *rate_table("cpu_rate"),
        "",
        "## Settings",
        "",
        *settings_table(),
        "",
    ]
    if any(who == "d3rlpy" for _, who in results):
        lines += [
            "## d3rlpy step breakdown (wall clock, median)",
            "",
            (
                "| algorithm | sample + update upd/s | update only upd/s | sampling ms/step "
                "| update ms/step |"
            ),
            "|---|---|---|---|---|",
        ]
        for algo in algorithms:
            if (algo, "d3rlpy") not in results:
                continue
            upd = median(algo, "d3rlpy", "update_seconds")
            samp = median(algo, "d3rlpy", "sample_seconds")
            lines.append(
                f"| {algo} | {fmt_rate(median(algo, 'd3rlpy'))} | {fmt_rate(upd)} | "
                f"{1e3 / samp:.2f} | {1e3 / upd:.2f} |"
            )
        lines.append("")
    lines += [
        "## Every run",
        "",
        "Updates/s from wall clock / from CPU time, and the cores other processes kept busy.",
        "",
        "| algorithm | contender | "
        + " | ".join(f"repeat {r + 1}" for r in range(args.repeats))
        + " |",
        "|---|---|" + "---|" * args.repeats,
    ]
    for algo in algorithms:
        for who in contenders:
            runs = results.get((algo, who))
            if not runs:
                continue
            cells = " | ".join(
                f"{x['rate']:,.1f} / {x['cpu_rate']:,.1f}"
                + ("" if x["others"] is None else f" (others {x['others']:.2f})")
                for x in runs
            )
            lines.append(f"| {algo} | {who} | {cells} |")
    lines += [
        "",
        "## What is timed",
        "",
        (
            '* **ours**: `lightning.Trainer(max_steps=W+N, accelerator="cpu", logger=False, '
            "enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False)` "
            "fitting the module: discrete algorithms with `RealImaginaryDataModule(ratio=0.0, "
            "batch_size=256)`, continuous ones with its environment-free core `RolloutDataModule("
            "ratio=0.0, batch_size=256)` over the continuous transitions. A callback "
            "takes the time at the end of step W and at the end of step W+N, so the N timed steps "
            "include batch sampling, Lightning's loop and hooks, and `training_step` (state "
            "normalisation, embedding lookup, losses, one backward, `Adam(foreach=True)` step, "
            "target updates, logging every 50 steps). COMBO's model phase runs before step 0 "
            "(untimed); its rollouts every 1000 steps are timed."
        ),
        (
            "* **bare**: a loop in this script with the same backbone classes and in-memory tensors: "
            "`torch.randint` indices, gathers, state normalisation, embedding-table lookup, and each "
            "algorithm's losses written out in the usual single-file style: one `Adam(foreach=True)` "
            "per network, the critic stepped before the actor (and the generator / value network "
            "first) as the papers' code does, targets updated as in our modules. Bare COMBO runs "
            "the same rollout schedule with an untrained model (its model phase is not timed)."
        ),
        (
            "* **d3rlpy**: the d3rlpy config of the algorithm with the same hyperparameters and a "
            "custom `EncoderFactory` that wraps our `StateInstructionEncoder` (d3rlpy adds the heads "
            "itself); the observation is the normalised state concatenated with the instruction "
            "embedding (`MDPDataset` built from the same episodes). Each timed step is "
            "`dataset.sample_transition_batch(256)` followed by `algo.update(batch)`: the body of "
            "d3rlpy's own `fit` loop without its logger and progress bar, so the main table compares "
            "the full per-step cost of each library, sampling included for all three. d3rlpy's "
            "replay buffer assembles every batch from 256 Python `Transition` objects; the breakdown "
            "gives the update alone. d3rlpy keeps its default `AdamFactory` (torch `Adam` without "
            "`foreach`). Its PRDC searches neighbours over the whole observation (state || 384-d "
            "embedding) with scikit-learn, ours over (state, action) within the instruction with a "
            "KD-tree; its CQL runs with a fixed conservative weight (`alpha_learning_rate=0`)."
        ),
        "",
        "The d3rlpy install (its `gymnasium==1.0.0` pin conflicts with ours; it runs with 1.4):",
        "",
        "```bash",
        "pip install -e '.[benchmark]'   # structlog, colorama, dataclasses-json, gym==0.26.2",
        "pip install --no-deps d3rlpy==2.8.1",
        "```",
    ]
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
