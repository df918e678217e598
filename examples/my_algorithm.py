"""Discrete AWAC: the worked example of docs/writing_an_algorithm.md.

Advantage-Weighted Actor-Critic (Nair, Gupta, Dalal & Levine, *AWAC: Accelerating Online
Reinforcement Learning with Offline Datasets*, 2020), written for discrete actions:

* critic: ``(Q(s, a) - y)^2`` with ``y = r + gamma (1 - d) sum_a' pi(a'|s') Q'(s', a')``, the
  policy's expected value under a Polyak-averaged target network;
* actor: weighted maximum likelihood of the data action,
  ``-min(exp(A(s, a) / lambda), max_weight) log pi(a | s)`` with the advantage
  ``A(s, a) = Q(s, a) - sum_a' pi(a'|s) Q(s, a')`` (not differentiated).

Both losses are weighted per transition (``batch["weight"]``, from the data module's
``imaginary_weighting``): a transition counts in the critic's and the actor's average as much
as it is trusted.

Defaults: ``lambda`` 1, Adam lr 3e-4, ``tau`` 0.005, ``gamma`` 0.99. Deviations from the paper:
discrete actions with exact expectations; one critic instead of two; advantage weights clipped
instead of normalised over the batch.

Run it on CLEVR-Robot (the ``examples`` directory must be importable)::

    PYTHONPATH=examples imaginebench fit -c examples/my_algorithm_clevr.yaml
"""

from __future__ import annotations

import copy
from typing import Any, ClassVar

import torch
import torch.nn.functional as F
from torch import Tensor

from imaginebench.batch import PreparedBatch
from imaginebench.modules.backbone import DiscreteHead, StateInstructionEncoder
from imaginebench.modules.offline.base import (
    LossParts,
    OfflineRLModule,
    soft_update,
    weighted_loss,
    weighted_mean,
)


class DiscreteAWAC(OfflineRLModule):
    """AWAC for discrete actions.

    Args:
        lr: Adam learning rate of the actor and the critic.
        gamma: discount factor.
        tau: Polyak rate of the target critic.
        lmbda: temperature of the advantage weights (smaller: greedier).
        max_weight: clip of the advantage weights.
        undiscounted_td_bug: reproduce the original benchmark's gamma = 1 (opt-in only).
        **kwargs: see :class:`OfflineRLModule`.
    """

    discrete = True  # the class refuses continuous action specs
    # Which loss term may train which submodule (checked by tests/test_conformance.py).
    loss_parts: ClassVar[LossParts] = {"critic_loss": ("q",), "actor_loss": ("actor",)}
    # Every per-sample loss is reduced with weighted_mean / weighted_loss (transition weights).
    weighted_losses = True

    def __init__(
        self,
        *args: Any,
        lr: float = 3e-4,
        gamma: float = 0.99,
        tau: float = 0.005,
        lmbda: float = 1.0,
        max_weight: float = 100.0,
        undiscounted_td_bug: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.save_hyperparameters()  # checkpoints rebuild the module from these
        self.lr, self.gamma, self.tau = lr, gamma, tau
        self.lmbda, self.max_weight = lmbda, max_weight
        self.undiscounted_td_bug = undiscounted_td_bug

        def trunk() -> StateInstructionEncoder:  # the shared state + instruction backbone
            return StateInstructionEncoder(
                self.state_dim, self.embedding_dim, self.hidden, self.instruction_dim
            )

        self.q = DiscreteHead(trunk(), self.num_actions)
        self.q_target = copy.deepcopy(self.q).requires_grad_(False)
        self.actor = DiscreteHead(trunk(), self.num_actions)

    def losses(self, batch: PreparedBatch) -> dict[str, Tensor]:
        s, s2, instr = batch["state"], batch["next_state"], batch["instruction"]
        index = batch["action"][:, None]
        q_all = self.q(s, instr)
        q_data = q_all.gather(1, index).squeeze(1)
        log_pi = F.log_softmax(self.actor(s, instr), dim=-1)

        with torch.no_grad():  # critic target: the policy's value at s'
            pi_next = F.softmax(self.actor(s2, instr), dim=-1)
            v_next = (pi_next * self.q_target(s2, instr)).sum(-1)
            discount = self.discount(batch["done"], self.gamma, self.undiscounted_td_bug)
            target = batch["reward"] + discount * v_next
            advantage = q_data - (log_pi.exp() * q_all).sum(-1)
            weight = torch.exp(advantage / self.lmbda).clamp(max=self.max_weight)
        sample_weight = batch.get("weight")  # absent when every transition weighs the same
        critic_loss = weighted_loss(F.mse_loss, q_data, target, weight=sample_weight)
        actor_loss = -weighted_mean(weight * log_pi.gather(1, index).squeeze(1), sample_weight)
        return {
            "loss": critic_loss + actor_loss,  # one backward pass trains both
            "critic_loss": critic_loss,
            "actor_loss": actor_loss,
            "q_data": q_data.detach().mean(),  # diagnostics: logged as train/<name>
            "weight": weight.mean(),
        }

    def after_update(self) -> None:
        soft_update(self.q_target, self.q, self.tau)

    def policy(self, state: Tensor, instruction: Tensor) -> Tensor:
        return self.actor(state, instruction).argmax(-1)
