"""Batch-Constrained deep Q-learning.

* :class:`BCQ` — continuous BCQ (Fujimoto, Meger & Precup, *Off-Policy Deep Reinforcement
  Learning without Exploration*, 2019). A conditional VAE ``G(a | s)`` models the data's
  actions; a perturbation actor ``xi(s, a)`` in ``[-Phi, Phi]`` adjusts ``n`` decoded actions;
  the action is the perturbed sample with the highest ``Q_1``. Losses per step:

  - VAE: ``(D(s, z) - a)^2 + 0.5 KL(N(mu, sigma) || N(0, 1))`` with ``z ~ E(s, a)``;
  - actor: ``-Q_1(s, a + xi(s, a))`` for ``a ~ G(s)`` (the VAE and critics are not updated);
  - critics: ``(Q_i(s, a) - y)^2`` with ``y = r + gamma (1 - d) max_{n samples} [lambda min_j
    Q'_j + (1 - lambda) max_j Q'_j](s', a'_k)``, ``a'_k = a~_k + xi'(s', a~_k)``, ``a~_k ~ G(s')``.

  Authors' defaults: ``Phi`` 0.05, ``lambda`` 0.75, ``n`` 10 (the paper; the authors' code
  uses 100 at evaluation), ``tau`` 0.005, Adam lr 1e-3 for all three networks, batch 100,
  latent size ``2 * action_dim``, latent clipped to ``[-0.5, 0.5]`` when sampling.

* :class:`DiscreteBCQ` — discrete BCQ (Fujimoto, Conti, Ghavamzadeh & Pineau, *Benchmarking
  Batch Deep Reinforcement Learning Algorithms*, 2019). A generative model ``G(a | s)`` trained
  by cross-entropy (plus ``0.01 * mean(logits^2)``) masks the actions with
  ``G(a | s) / max_a' G(a' | s) <= threshold``; Q-learning uses a Huber loss and a double-DQN
  target over the allowed actions, and the greedy policy picks among them. Authors' defaults
  (low-dimensional tasks): ``threshold`` 0.3, Adam lr 3e-4, Polyak ``tau`` 0.005 every step;
  their Atari setting is lr 6.25e-5 with a hard copy every 8000 steps (``tau=1``,
  ``target_update_interval=8000``).

Per-transition weights (``batch["weight"]``) weight every term of both: the generative model's
loss (reconstruction and KL, or cross-entropy and logit penalty: an untrusted action should not
shape the set of allowed actions), the actor term at each transition's state and the TD errors.

Deliberate deviations (both): one backward pass per step, so every term uses the networks as
they were before this step's update (the original updates the VAE / generative model first and
uses it for the critic's backup); the networks are the shared state + instruction trunk
(``hidden``) rather than the papers' 400-300 / 750-750 MLPs; actions are in ``[-1, 1]`` units.
Evaluation decodes the same ``n`` fixed latent codes for every state, so ``act`` is a
deterministic function of each state and instruction and never touches the training stream.
"""

from __future__ import annotations

import copy
import math
from typing import Any, ClassVar

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from imaginebench.batch import PreparedBatch
from imaginebench.modules.backbone import ContinuousQHead, DiscreteHead, StateInstructionEncoder
from imaginebench.modules.offline.base import (
    LossParts,
    OfflineRLModule,
    frozen,
    soft_update,
    weighted_loss,
    weighted_mean,
)
from imaginebench.modules.offline.common import StochasticModule, make_trunk

EVAL_SEED = 12345  # evaluation-time sampling seed (fixed: ``act`` is deterministic)


class ConditionalVAE(nn.Module):
    """``E(s, a) -> (mu, sigma)`` over a latent ``z`` and ``D(s, z) -> tanh(...)`` actions."""

    def __init__(
        self, encoder: StateInstructionEncoder, decoder: StateInstructionEncoder, action_dim: int
    ) -> None:
        super().__init__()
        self.latent_dim = 2 * action_dim
        self.encoder, self.decoder = encoder, decoder
        self.stats = nn.Linear(encoder.feature_dim, 2 * self.latent_dim)
        self.out = nn.Linear(decoder.feature_dim, action_dim)

    def forward(
        self, state: Tensor, instruction: Tensor, action: Tensor, noise: Tensor
    ) -> tuple[Tensor, Tensor, Tensor]:
        """Reconstruction, latent mean and latent std of ``action``."""
        mean, log_std = self.stats(self.encoder(state, instruction, action)).chunk(2, dim=-1)
        std = log_std.clamp(-4.0, 15.0).exp()
        return self.decode(state, instruction, mean + std * noise), mean, std

    def decode(self, state: Tensor, instruction: Tensor, z: Tensor) -> Tensor:
        return torch.tanh(self.out(self.decoder(state, instruction, z)))


class PerturbationActor(nn.Module):
    """``xi(s, a) = Phi * tanh(f(s, a))``; returns ``clip(a + xi, -1, 1)``."""

    def __init__(self, encoder: StateInstructionEncoder, action_dim: int, phi: float) -> None:
        super().__init__()
        self.encoder, self.phi = encoder, phi
        self.out = nn.Linear(encoder.feature_dim, action_dim)

    def forward(self, state: Tensor, instruction: Tensor, action: Tensor) -> Tensor:
        xi = self.phi * torch.tanh(self.out(self.encoder(state, instruction, action)))
        return (action + xi).clamp(-1.0, 1.0)


class BCQ(StochasticModule):
    """Continuous BCQ.

    Args:
        actor_lr: learning rate of the perturbation actor.
        critic_lr: learning rate of the twin Q-networks.
        vae_lr: learning rate of the conditional VAE.
        gamma: discount factor.
        tau: Polyak rate of the target actor and critics.
        phi: perturbation range ``Phi`` (fraction of the ``[-1, 1]`` action range).
        lmbda: weight of the minimum in the soft clipped double-Q backup.
        num_sampled_actions: VAE samples per next state in the backup.
        num_eval_actions: VAE samples per state when acting.
        kl_weight: weight of the KL term of the VAE loss.
        sampling_seed: seed of the module's sampling generator (saved in checkpoints;
            not named ``seed``, which is the data module's).
        undiscounted_td_bug: reproduce the original benchmark's gamma = 1 (opt-in only).
        **kwargs: see :class:`OfflineRLModule`.
    """

    discrete = False
    weighted_losses = True
    loss_parts: ClassVar[LossParts] = {
        "vae_loss": ("vae",),
        "actor_loss": ("actor",),
        "critic_loss": ("critics",),
    }

    def __init__(
        self,
        *args: Any,
        actor_lr: float = 1e-3,
        critic_lr: float = 1e-3,
        vae_lr: float = 1e-3,
        gamma: float = 0.99,
        tau: float = 0.005,
        phi: float = 0.05,
        lmbda: float = 0.75,
        num_sampled_actions: int = 10,
        num_eval_actions: int = 10,
        kl_weight: float = 0.5,
        sampling_seed: int = 0,
        undiscounted_td_bug: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.save_hyperparameters()
        self.actor_lr, self.critic_lr, self.vae_lr = actor_lr, critic_lr, vae_lr
        self.gamma, self.tau, self.lmbda = gamma, tau, lmbda
        self.num_sampled_actions, self.num_eval_actions = num_sampled_actions, num_eval_actions
        self.kl_weight, self.undiscounted_td_bug = kl_weight, undiscounted_td_bug
        self.seed_sampling(sampling_seed)
        a = self.action_dim
        self.vae = ConditionalVAE(make_trunk(self, a), make_trunk(self, 2 * a), a)
        self.actor = PerturbationActor(make_trunk(self, a), a, phi)
        self.actor_target = copy.deepcopy(self.actor).requires_grad_(False)
        self.critics = nn.ModuleList([ContinuousQHead(make_trunk(self, a)) for _ in range(2)])
        self.critics_target = copy.deepcopy(self.critics).requires_grad_(False)

    def param_groups(self) -> list[dict[str, Any]]:
        return [
            {"params": self.vae.parameters(), "lr": self.vae_lr},
            {"params": self.actor.parameters(), "lr": self.actor_lr},
            {"params": self.critics.parameters(), "lr": self.critic_lr},
        ]

    def sample_latent(self, n: int, device: torch.device) -> Tensor:
        """Training-time latents ``N(0, 1)`` clipped to ``[-0.5, 0.5]``, one per batch row."""
        return self.normal((n, self.vae.latent_dim), device, split=True).clamp(-0.5, 0.5)

    def losses(self, batch: PreparedBatch) -> dict[str, Tensor]:
        s, s2, instr = batch["state"], batch["next_state"], batch["instruction"]
        action = self.to_unit(batch["action"]).clamp(-1.0, 1.0)
        n, k = s.shape[0], self.num_sampled_actions
        weight = batch.get("weight")

        # Generative model of the data's actions.
        noise = self.normal((n, self.vae.latent_dim), s.device, split=True)
        recon, mean, std = self.vae(s, instr, action, noise)
        kl = -0.5 * weighted_mean(1 + (std**2).log() - mean**2 - std**2, weight)
        recon_loss = weighted_loss(F.mse_loss, recon, action, weight=weight)
        vae_loss = recon_loss + self.kl_weight * kl

        # Perturbation actor on decoded actions: the VAE and critics stay fixed.
        with torch.no_grad():
            sampled = self.vae.decode(s, instr, self.sample_latent(n, s.device))
        q_pi = frozen(self.critics[0], s, instr, self.actor(s, instr, sampled))
        actor_loss = -weighted_mean(q_pi, weight)

        # Critics: soft clipped double Q, best of k perturbed samples per next state.
        with torch.no_grad():
            s2_k = s2.unsqueeze(1).expand(-1, k, -1)  # (n, k, state_dim), one instr per row
            latent = self.sample_latent(n * k, s.device).view(n, k, -1)
            a2 = self.actor_target(s2_k, instr, self.vae.decode(s2_k, instr, latent))
            q1, q2 = (c(s2_k, instr, a2) for c in self.critics_target)
            q_next = self.lmbda * torch.min(q1, q2) + (1 - self.lmbda) * torch.max(q1, q2)
            q_next = q_next.max(dim=1).values
            discount = self.discount(batch["done"], self.gamma, self.undiscounted_td_bug)
            target = batch["reward"] + discount * q_next
        q = [c(s, instr, action) for c in self.critics]
        critic_loss = sum(weighted_loss(F.mse_loss, qi, target, weight=weight) for qi in q)
        return {
            "loss": vae_loss + actor_loss + critic_loss,
            "vae_loss": vae_loss,
            "actor_loss": actor_loss,
            "critic_loss": critic_loss,
            "recon": recon_loss.detach(),
            "kl": kl.detach(),
            "q_data": q[0].detach().mean(),
        }

    def after_update(self) -> None:
        soft_update(self.critics_target, self.critics, self.tau)
        soft_update(self.actor_target, self.actor, self.tau)

    def policy(self, state: Tensor, instruction: Tensor) -> Tensor:
        """The best of ``num_eval_actions`` perturbed VAE samples under ``Q_1``."""
        n, k = state.shape[0], self.num_eval_actions
        # The same k latent codes for every state: an action depends on its own input only.
        generator = torch.Generator().manual_seed(EVAL_SEED)
        z = torch.randn((k, self.vae.latent_dim), generator=generator).clamp(-0.5, 0.5)
        z = z.to(state.device).expand(n, -1, -1)
        s_k = state.unsqueeze(1).expand(-1, k, -1)  # (n, k, state_dim), one instr per row
        actions = self.actor(s_k, instruction, self.vae.decode(s_k, instruction, z))
        best = self.critics[0](s_k, instruction, actions).argmax(dim=1)
        chosen = actions[torch.arange(n, device=state.device), best]
        return self.from_unit(chosen)


class DiscreteBCQ(OfflineRLModule):
    """Discrete BCQ.

    Args:
        lr: Adam learning rate (Q-network and generative model).
        gamma: discount factor.
        threshold: actions with ``G(a|s) / max G(.|s) <= threshold`` are never chosen.
        logit_penalty: weight of ``mean(logits^2)`` of the generative model (authors: 0.01).
        tau: Polyak rate of the target Q-network (1 = hard copy).
        target_update_interval: steps between target updates.
        undiscounted_td_bug: reproduce the original benchmark's gamma = 1 (opt-in only).
        **kwargs: see :class:`OfflineRLModule`.
    """

    discrete = True
    weighted_losses = True
    loss_parts: ClassVar[LossParts] = {"td_loss": ("q",), "imitation_loss": ("imitation",)}

    def __init__(
        self,
        *args: Any,
        lr: float = 3e-4,
        gamma: float = 0.99,
        threshold: float = 0.3,
        logit_penalty: float = 0.01,
        tau: float = 0.005,
        target_update_interval: int = 1,
        undiscounted_td_bug: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.save_hyperparameters()
        self.lr, self.gamma, self.threshold = lr, gamma, threshold
        self.logit_penalty, self.tau = logit_penalty, tau
        self.target_update_interval = target_update_interval
        self.undiscounted_td_bug = undiscounted_td_bug
        self.log_threshold = math.log(threshold) if threshold > 0 else -math.inf
        self.q = DiscreteHead(make_trunk(self), self.num_actions)
        self.q_target = copy.deepcopy(self.q).requires_grad_(False)
        self.imitation = DiscreteHead(make_trunk(self), self.num_actions)

    def allowed(self, logits: Tensor) -> Tensor:
        """Mask of actions whose probability ratio to the most likely one exceeds the threshold."""
        log_p = F.log_softmax(logits, dim=-1)
        return log_p - log_p.max(dim=-1, keepdim=True).values > self.log_threshold

    def constrained_argmax(self, q: Tensor, logits: Tensor) -> Tensor:
        return q.masked_fill(~self.allowed(logits), -torch.inf).argmax(dim=-1)

    def losses(self, batch: PreparedBatch) -> dict[str, Tensor]:
        s, s2, instr, action = (
            batch["state"],
            batch["next_state"],
            batch["instruction"],
            batch["action"],
        )
        q_data = self.q(s, instr).gather(1, action[:, None]).squeeze(1)
        logits = self.imitation(s, instr)
        with torch.no_grad():
            best = self.constrained_argmax(self.q(s2, instr), self.imitation(s2, instr))
            bootstrap = self.q_target(s2, instr).gather(1, best[:, None]).squeeze(1)
            discount = self.discount(batch["done"], self.gamma, self.undiscounted_td_bug)
            target = batch["reward"] + discount * bootstrap
        weight = batch.get("weight")
        td = weighted_loss(F.smooth_l1_loss, q_data, target, weight=weight)
        nll = weighted_loss(F.cross_entropy, logits, action, weight=weight)
        imitation = nll + self.logit_penalty * weighted_mean(logits.pow(2), weight)
        return {
            "loss": td + imitation,
            "td_loss": td,
            "imitation_loss": imitation,
            "nll": nll.detach(),
            "q_data": q_data.detach().mean(),
        }

    def after_update(self) -> None:
        if self.global_step % self.target_update_interval == 0:
            soft_update(self.q_target, self.q, self.tau)

    def policy(self, state: Tensor, instruction: Tensor) -> Tensor:
        return self.constrained_argmax(
            self.q(state, instruction), self.imitation(state, instruction)
        )
