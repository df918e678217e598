"""Soft Actor-Critic trained offline (no conservatism: a baseline for CQL, COMBO and co.).

* :class:`SAC` — Haarnoja et al., *Soft Actor-Critic Algorithms and Applications*, 2018:
  tanh-Gaussian policy, twin critics with the soft clipped double-Q backup
  ``y = r + gamma (1 - d) (min_j Q'_j(s', a') - alpha log pi(a'|s'))``, actor loss
  ``alpha log pi(a|s) - min_j Q_j(s, a)``, and automatic temperature tuning towards the target
  entropy ``-action_dim``. Authors' defaults: Adam lr 3e-4 for all three, ``tau`` 0.005,
  ``gamma`` 0.99, batch 256.
* :class:`DiscreteSAC` — Christodoulou, *Soft Actor-Critic for Discrete Action Settings*, 2019:
  a categorical policy; every expectation over actions is computed exactly,
  ``V(s') = sum_a pi(a|s') (min_j Q'_j(s', a) - alpha log pi(a|s'))``, actor loss
  ``sum_a pi(a|s) (alpha log pi(a|s) - min_j Q_j(s, a))``, temperature loss
  ``-log(alpha) (sum_a pi(a|s) log pi(a|s) + H_target)`` with ``H_target = 0.98 log |A|``.
  Paper defaults: Adam lr 3e-4, batch 64, ``gamma`` 0.99; its Atari runs copy the targets every
  8000 steps, here Polyak ``tau`` 0.005 every step (``tau=1, target_update_interval=8000``
  gives the hard copies).

Per-transition weights (``batch["weight"]``) weight every term of both: the critics' TD errors
and the actor and temperature terms at each transition's state are per-sample expectations
over the data.

Deliberate deviations: one backward pass per step (the actor and temperature terms use the
critics and temperature from before this step's update; the original steps them in turn); the
temperature is optimised in log space (as in the authors' code); the actor term of the discrete
variant uses the critics' detached values of the same forward pass.
"""

from __future__ import annotations

import copy
import math
from typing import Any, ClassVar

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from imaginebench.batch import PreparedBatch
from imaginebench.modules.backbone import ContinuousQHead, DiscreteHead, GaussianHead
from imaginebench.modules.offline.base import (
    LossParts,
    OfflineRLModule,
    frozen,
    soft_update,
    weighted_loss,
    weighted_mean,
)
from imaginebench.modules.offline.common import StochasticModule, make_trunk


class SAC(StochasticModule):
    """SAC for continuous actions, trained on a fixed dataset.

    Args:
        actor_lr: learning rate of the tanh-Gaussian policy.
        critic_lr: learning rate of the twin Q-networks.
        alpha_lr: learning rate of the log temperature.
        gamma: discount factor.
        tau: Polyak rate of the target critics.
        initial_temperature: initial entropy temperature ``alpha``.
        target_entropy: entropy target (default ``-action_dim``).
        sampling_seed: seed of the module's sampling generator (saved in checkpoints;
            not named ``seed``, which is the data module's).
        undiscounted_td_bug: reproduce the original benchmark's gamma = 1 (opt-in only).
        **kwargs: see :class:`OfflineRLModule`.
    """

    discrete = False
    weighted_losses = True
    loss_parts: ClassVar[LossParts] = {
        "actor_loss": ("actor",),
        "temperature_loss": ("log_temperature",),
        "critic_loss": ("critics",),
    }

    def __init__(
        self,
        *args: Any,
        actor_lr: float = 3e-4,
        critic_lr: float = 3e-4,
        alpha_lr: float = 3e-4,
        gamma: float = 0.99,
        tau: float = 0.005,
        initial_temperature: float = 1.0,
        target_entropy: float | None = None,
        sampling_seed: int = 0,
        undiscounted_td_bug: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.save_hyperparameters()
        self.actor_lr, self.critic_lr, self.alpha_lr = actor_lr, critic_lr, alpha_lr
        self.gamma, self.tau, self.undiscounted_td_bug = gamma, tau, undiscounted_td_bug
        self.target_entropy = (
            -float(self.action_dim) if target_entropy is None else float(target_entropy)
        )
        self.seed_sampling(sampling_seed)
        self.actor = GaussianHead(make_trunk(self), self.action_dim)
        self.critics = nn.ModuleList(
            [ContinuousQHead(make_trunk(self, self.action_dim)) for _ in range(2)]
        )
        self.critics_target = copy.deepcopy(self.critics).requires_grad_(False)
        self.log_temperature = nn.Parameter(torch.tensor(math.log(initial_temperature)))

    def param_groups(self) -> list[dict[str, Any]]:
        return [
            {"params": self.actor.parameters(), "lr": self.actor_lr},
            {"params": self.critics.parameters(), "lr": self.critic_lr},
            {"params": [self.log_temperature], "lr": self.alpha_lr},
        ]

    def policy_terms(
        self, state: Tensor, instruction: Tensor, temperature: Tensor, weight: Tensor | None
    ) -> tuple[Tensor, Tensor, Tensor]:
        """Policy improvement with the critics frozen: the actor loss
        ``alpha log pi(a|s) - min_j Q_j(s, a)``, the temperature loss (both averaged over the
        states with the transitions' ``weight``) and ``log pi`` (detached)."""
        pi, log_pi = self.tanh_gaussian(self.actor, state, instruction, split=True)
        q_pi = torch.min(*(frozen(c, state, instruction, pi) for c in self.critics))
        actor_loss = weighted_mean(temperature * log_pi - q_pi, weight)
        log_pi = log_pi.detach()
        temperature_loss = -weighted_mean(
            self.log_temperature * (log_pi + self.target_entropy), weight
        )
        return actor_loss, temperature_loss, log_pi

    @torch.no_grad()
    def soft_backup(
        self,
        reward: Tensor,
        next_state: Tensor,
        instruction: Tensor,
        done: Tensor,
        temperature: Tensor,
    ) -> Tensor:
        """The soft clipped double-Q target ``r + gamma (1 - d) (min_j Q'_j(s', a') - alpha log pi(a'|s'))``."""
        a2, log_a2 = self.tanh_gaussian(self.actor, next_state, instruction, split=True)
        q_next = torch.min(*(c(next_state, instruction, a2) for c in self.critics_target))
        discount = self.discount(done, self.gamma, self.undiscounted_td_bug)
        return reward + discount * (q_next - temperature * log_a2)

    def losses(self, batch: PreparedBatch) -> dict[str, Tensor]:
        s, instr, weight = batch["state"], batch["instruction"], batch.get("weight")
        action = self.to_unit(batch["action"]).clamp(-1.0, 1.0)
        temperature = self.log_temperature.exp().detach()
        actor_loss, temperature_loss, log_pi = self.policy_terms(s, instr, temperature, weight)
        target = self.soft_backup(
            batch["reward"], batch["next_state"], instr, batch["done"], temperature
        )
        q = [c(s, instr, action) for c in self.critics]
        critic_loss = sum(weighted_loss(F.mse_loss, qi, target, weight=weight) for qi in q)
        return {
            "loss": actor_loss + temperature_loss + critic_loss,
            "actor_loss": actor_loss,
            "temperature_loss": temperature_loss,
            "critic_loss": critic_loss,
            "temperature": temperature,
            "entropy": -log_pi.mean(),
            "q_data": q[0].detach().mean(),
        }

    def after_update(self) -> None:
        soft_update(self.critics_target, self.critics, self.tau)

    def policy(self, state: Tensor, instruction: Tensor) -> Tensor:
        return self.from_unit(self.actor(state, instruction))


class DiscreteSAC(OfflineRLModule):
    """SAC for discrete actions (exact expectations over the categorical policy).

    Args:
        actor_lr: learning rate of the policy logits.
        critic_lr: learning rate of the twin Q-networks.
        alpha_lr: learning rate of the log temperature.
        gamma: discount factor.
        tau: Polyak rate of the target critics (1 = hard copy).
        target_update_interval: steps between target updates.
        initial_temperature: initial entropy temperature ``alpha``.
        target_entropy_scale: target entropy as a fraction of the maximum ``log |A|``.
        undiscounted_td_bug: reproduce the original benchmark's gamma = 1 (opt-in only).
        **kwargs: see :class:`OfflineRLModule`.
    """

    discrete = True
    weighted_losses = True
    loss_parts: ClassVar[LossParts] = {
        "actor_loss": ("actor",),
        "temperature_loss": ("log_temperature",),
        "critic_loss": ("critics",),
    }

    def __init__(
        self,
        *args: Any,
        actor_lr: float = 3e-4,
        critic_lr: float = 3e-4,
        alpha_lr: float = 3e-4,
        gamma: float = 0.99,
        tau: float = 0.005,
        target_update_interval: int = 1,
        initial_temperature: float = 1.0,
        target_entropy_scale: float = 0.98,
        undiscounted_td_bug: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.save_hyperparameters()
        self.actor_lr, self.critic_lr, self.alpha_lr = actor_lr, critic_lr, alpha_lr
        self.gamma, self.tau, self.target_update_interval = gamma, tau, target_update_interval
        self.undiscounted_td_bug = undiscounted_td_bug
        self.target_entropy = target_entropy_scale * math.log(self.num_actions)
        self.actor = DiscreteHead(make_trunk(self), self.num_actions)
        self.critics = nn.ModuleList(
            [DiscreteHead(make_trunk(self), self.num_actions) for _ in range(2)]
        )
        self.critics_target = copy.deepcopy(self.critics).requires_grad_(False)
        self.log_temperature = nn.Parameter(torch.tensor(math.log(initial_temperature)))

    def param_groups(self) -> list[dict[str, Any]]:
        return [
            {"params": self.actor.parameters(), "lr": self.actor_lr},
            {"params": self.critics.parameters(), "lr": self.critic_lr},
            {"params": [self.log_temperature], "lr": self.alpha_lr},
        ]

    def losses(self, batch: PreparedBatch) -> dict[str, Tensor]:
        s, s2, instr, action = (
            batch["state"],
            batch["next_state"],
            batch["instruction"],
            batch["action"],
        )
        weight = batch.get("weight")
        temperature = self.log_temperature.exp().detach()
        q_all = [c(s, instr) for c in self.critics]

        log_pi = F.log_softmax(self.actor(s, instr), dim=-1)
        pi = log_pi.exp()
        q_min = torch.min(*q_all).detach()
        actor_loss = weighted_mean((pi * (temperature * log_pi - q_min)).sum(-1), weight)
        neg_entropy = (pi * log_pi).sum(-1).detach()
        temperature_loss = -weighted_mean(
            self.log_temperature * (neg_entropy + self.target_entropy), weight
        )

        with torch.no_grad():
            log_pi2 = F.log_softmax(self.actor(s2, instr), dim=-1)
            q_next = torch.min(*(c(s2, instr) for c in self.critics_target))
            v_next = (log_pi2.exp() * (q_next - temperature * log_pi2)).sum(-1)
            discount = self.discount(batch["done"], self.gamma, self.undiscounted_td_bug)
            target = batch["reward"] + discount * v_next
        q_data = [q.gather(1, action[:, None]).squeeze(1) for q in q_all]
        critic_loss = sum(weighted_loss(F.mse_loss, q, target, weight=weight) for q in q_data)
        return {
            "loss": actor_loss + temperature_loss + critic_loss,
            "actor_loss": actor_loss,
            "temperature_loss": temperature_loss,
            "critic_loss": critic_loss,
            "temperature": temperature,
            "entropy": -neg_entropy.mean(),
            "q_data": q_data[0].detach().mean(),
        }

    def after_update(self) -> None:
        if self.global_step % self.target_update_interval == 0:
            soft_update(self.critics_target, self.critics, self.tau)

    def policy(self, state: Tensor, instruction: Tensor) -> Tensor:
        return self.actor(state, instruction).argmax(-1)
