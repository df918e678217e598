"""The ``bare`` contender: a plain PyTorch loop over the same in-memory tensors with the same
network classes and hyperparameters, each algorithm's losses written out in the usual
single-file style (one ``Adam(foreach=True)`` per network, the critic stepped before the actor
as the papers' code does)."""

from __future__ import annotations

import copy
import itertools
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from throughput_data import Data, Hyper
from throughput_settings import settings
from torch import Tensor, nn

from imaginebench.modules.backbone import (
    ContinuousQHead,
    DeterministicHead,
    DiscreteHead,
    GaussianHead,
    StateInstructionEncoder,
)


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
    from imaginebench.modules.dynamics import DynamicsEnsemble

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
        [nets.trunk(nets.a) for _ in range(kw["ensemble_size"])], data.state_dim + 1
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
    nets, kw = Nets(data, hp), settings(algo)
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
