"""Implicit Q-Learning (Kostrikov, Nair & Levine, *Offline Reinforcement Learning with Implicit
Q-Learning*, 2021): in-sample learning that never queries actions outside the data.

* value: expectile regression ``L_tau(min_j Q'_j(s, a) - V(s))`` with
  ``L_tau(u) = |tau - 1(u < 0)| u^2``;
* critics: ``(Q_i(s, a) - r - gamma (1 - d) V(s'))^2``;
* policy extraction by advantage-weighted regression:
  ``-min(exp(beta (min_j Q'_j(s, a) - V(s))), 100) log pi(a | s)``;
* Polyak-averaged target critics.

:class:`IQL` has the authors' Gaussian policy (``tanh`` mean, state-independent log std in
``[-5, 2]``, no squashing of samples) on continuous actions; :class:`DiscreteIQL` applies the
same three losses to a categorical policy and Q-values over all discrete actions (not in the
paper; its natural discrete form). Authors' defaults: ``expectile`` 0.7 (0.9 for AntMaze),
``beta`` 3 (10 for AntMaze), advantage weights clipped at 100, Adam lr 3e-4 for every network,
``tau`` 0.005, ``gamma`` 0.99, batch 256.

Per-transition weights (``batch["weight"]``) weight all three losses per transition: the value
and critic regressions and the advantage-weighted regression of the policy (the confidence
weight multiplies the advantage weight).

Deliberate deviations: one backward pass per step, so the actor's advantage and the critics'
target use the value network from before this step's update (the original updates V first);
a constant actor learning rate (the original decays it with a cosine schedule over training).
"""

from __future__ import annotations

import copy
import math
from typing import Any, ClassVar

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from imaginebench.batch import PreparedBatch
from imaginebench.modules.backbone import (
    ContinuousQHead,
    DeterministicHead,
    DiscreteHead,
    StateInstructionEncoder,
)
from imaginebench.modules.offline.base import (
    LossParts,
    OfflineRLModule,
    soft_update,
    weighted_loss,
    weighted_mean,
)
from imaginebench.modules.offline.common import expectile_loss, make_trunk


class ValueHead(nn.Module):
    """``V(s, instruction)``: backbone + a scalar output."""

    def __init__(self, encoder: StateInstructionEncoder) -> None:
        super().__init__()
        self.encoder, self.out = encoder, nn.Linear(encoder.feature_dim, 1)

    def forward(self, state: Tensor, instruction: Tensor) -> Tensor:
        return self.out(self.encoder(state, instruction)).squeeze(-1)


class GaussianPolicy(nn.Module):
    """``N(tanh(f(s, instruction)), diag(exp(log_std)^2))`` with a state-independent log std."""

    LOG_STD_MIN, LOG_STD_MAX = -5.0, 2.0

    def __init__(self, encoder: StateInstructionEncoder, action_dim: int) -> None:
        super().__init__()
        self.mean = DeterministicHead(encoder, action_dim)
        self.log_std = nn.Parameter(torch.zeros(action_dim))

    def log_prob(self, state: Tensor, instruction: Tensor, action: Tensor) -> Tensor:
        log_std = self.log_std.clamp(self.LOG_STD_MIN, self.LOG_STD_MAX)
        z = (action - self.mean(state, instruction)) / log_std.exp()
        return (-0.5 * z.pow(2) - log_std - 0.5 * math.log(2 * math.pi)).sum(-1)

    def forward(self, state: Tensor, instruction: Tensor) -> Tensor:
        return self.mean(state, instruction)


class _IQLBase(OfflineRLModule):
    """The hyperparameters, value network, optimiser groups and target updates of both IQLs."""

    weighted_losses = True
    loss_parts: ClassVar[LossParts] = {
        "value_loss": ("value",),
        "critic_loss": ("critics",),
        "actor_loss": ("actor",),
    }
    actor: nn.Module
    critics: nn.ModuleList
    critics_target: nn.ModuleList

    def __init__(
        self,
        *args: Any,
        actor_lr: float = 3e-4,
        critic_lr: float = 3e-4,
        value_lr: float = 3e-4,
        gamma: float = 0.99,
        tau: float = 0.005,
        expectile: float = 0.7,
        beta: float = 3.0,
        max_weight: float = 100.0,
        undiscounted_td_bug: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.save_hyperparameters()  # from here, so the subclasses' hparams hold these defaults
        self.actor_lr, self.critic_lr, self.value_lr = actor_lr, critic_lr, value_lr
        self.gamma, self.tau, self.expectile = gamma, tau, expectile
        self.beta, self.max_weight = beta, max_weight
        self.undiscounted_td_bug = undiscounted_td_bug
        self.value = ValueHead(make_trunk(self))

    def param_groups(self) -> list[dict[str, Any]]:
        return [
            {"params": self.actor.parameters(), "lr": self.actor_lr},
            {"params": self.critics.parameters(), "lr": self.critic_lr},
            {"params": self.value.parameters(), "lr": self.value_lr},
        ]

    def iql_losses(
        self,
        batch: dict[str, Tensor],
        q_data: list[Tensor],
        q_target: Tensor,
        log_prob: Tensor,
    ) -> dict[str, Tensor]:
        """The three IQL losses from the critics' ``Q_i(s, a)``, the target critics'
        ``min_j Q'_j(s, a)`` and the policy's ``log pi(a | s)``."""
        sample_weight = batch.get("weight")
        v = self.value(batch["state"], batch["instruction"])
        value_loss = expectile_loss(q_target - v, self.expectile, sample_weight)
        with torch.no_grad():
            v_next = self.value(batch["next_state"], batch["instruction"])
            discount = self.discount(batch["done"], self.gamma, self.undiscounted_td_bug)
            target = batch["reward"] + discount * v_next
            weight = torch.exp(self.beta * (q_target - v)).clamp(max=self.max_weight)
        critic_loss = sum(
            weighted_loss(F.mse_loss, q, target, weight=sample_weight) for q in q_data
        )
        actor_loss = -weighted_mean(weight * log_prob, sample_weight)
        return {
            "loss": value_loss + critic_loss + actor_loss,
            "value_loss": value_loss,
            "critic_loss": critic_loss,
            "actor_loss": actor_loss,
            "v": v.detach().mean(),
            "q_data": q_data[0].detach().mean(),
            "weight": weight.mean(),
        }

    def after_update(self) -> None:
        soft_update(self.critics_target, self.critics, self.tau)


class IQL(_IQLBase):
    """IQL for continuous actions.

    Args:
        actor_lr: learning rate of the Gaussian policy.
        critic_lr: learning rate of the twin Q-networks.
        value_lr: learning rate of the value network.
        gamma: discount factor.
        tau: Polyak rate of the target critics.
        expectile: expectile of the value regression (0.9 for AntMaze-like sparse tasks).
        beta: inverse temperature of the advantage weights.
        max_weight: clip of the advantage weights.
        undiscounted_td_bug: reproduce the original benchmark's gamma = 1 (opt-in only).
        **kwargs: see :class:`OfflineRLModule`.
    """

    discrete = False

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.actor = GaussianPolicy(make_trunk(self), self.action_dim)
        self.critics = nn.ModuleList(
            [ContinuousQHead(make_trunk(self, self.action_dim)) for _ in range(2)]
        )
        self.critics_target = copy.deepcopy(self.critics).requires_grad_(False)

    def losses(self, batch: PreparedBatch) -> dict[str, Tensor]:
        s, instr = batch["state"], batch["instruction"]
        action = self.to_unit(batch["action"]).clamp(-1.0, 1.0)
        with torch.no_grad():
            q_target = torch.min(*(c(s, instr, action) for c in self.critics_target))
        q_data = [c(s, instr, action) for c in self.critics]
        return self.iql_losses(batch, q_data, q_target, self.actor.log_prob(s, instr, action))

    def policy(self, state: Tensor, instruction: Tensor) -> Tensor:
        return self.from_unit(self.actor(state, instruction))


class DiscreteIQL(_IQLBase):
    """IQL for discrete actions (categorical policy, Q-values for every action).

    Args:
        actor_lr: learning rate of the policy logits.
        critic_lr: learning rate of the twin Q-networks.
        value_lr: learning rate of the value network.
        gamma: discount factor.
        tau: Polyak rate of the target critics.
        expectile: expectile of the value regression.
        beta: inverse temperature of the advantage weights.
        max_weight: clip of the advantage weights.
        undiscounted_td_bug: reproduce the original benchmark's gamma = 1 (opt-in only).
        **kwargs: see :class:`OfflineRLModule`.
    """

    discrete = True

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.actor = DiscreteHead(make_trunk(self), self.num_actions)
        self.critics = nn.ModuleList(
            [DiscreteHead(make_trunk(self), self.num_actions) for _ in range(2)]
        )
        self.critics_target = copy.deepcopy(self.critics).requires_grad_(False)

    def losses(self, batch: PreparedBatch) -> dict[str, Tensor]:
        s, instr, index = batch["state"], batch["instruction"], batch["action"][:, None]
        with torch.no_grad():
            q_target = torch.min(*(c(s, instr).gather(1, index) for c in self.critics_target))
        q_data = [c(s, instr).gather(1, index).squeeze(1) for c in self.critics]
        log_prob = F.log_softmax(self.actor(s, instr), dim=-1).gather(1, index).squeeze(1)
        return self.iql_losses(batch, q_data, q_target.squeeze(1), log_prob)

    def policy(self, state: Tensor, instruction: Tensor) -> Tensor:
        return self.actor(state, instruction).argmax(-1)
