"""TD3+BC (Fujimoto & Gu, *A Minimalist Approach to Offline Reinforcement Learning*, 2021).

:class:`TD3BC` is TD3 whose actor also regresses onto the data action:

* critics: ``sum_i (Q_i(s, a) - y)^2`` with ``y = r + gamma (1 - d) min_j Q'_j(s', a')`` and
  target policy smoothing ``a' = clip(pi'(s') + clip(N(0, sigma), -c, c), -1, 1)``;
* actor (every ``policy_freq`` updates): ``-lambda Q_1(s, pi(s)) + (pi(s) - a)^2`` with
  ``lambda = alpha / mean|Q_1(s, pi(s))|`` (the normaliser is not differentiated);
* Polyak-averaged target actor and critics, updated after each actor update.

Defaults are the authors': ``alpha`` 2.5, ``policy_noise`` 0.2, ``noise_clip`` 0.5,
``policy_freq`` 2, ``tau`` 0.005, learning rates 3e-4, ``gamma`` 0.99 (batch 256 and state
normalisation, both on by default here). Deliberate deviations:

* one backward pass per step: on actor steps the actor term uses the critics *before* this
  step's critic update (the original steps the critics first, then the actor);
* the actor is updated on steps ``0, d, 2d, ...`` (the original: ``d, 2d, ...``);
* the mean-squared BC term is averaged over action dimensions (the original too, via
  ``F.mse_loss``); actions are in the policy's ``[-1, 1]`` units.

Per-transition weights (``batch["weight"]``) weight every term: the critics' TD errors, the
actor's Q and BC terms at each transition (an untrusted action is not imitated) and the mean
``|Q|`` of ``lambda``, so a transition of weight 0 changes nothing, not even the scale.

With DDP, use ``strategy: ddp_find_unused_parameters_true``: between delayed updates the actor
gets no gradient (and must not: a zero gradient would still move it through Adam's momentum).
Each rank normalises ``lambda`` with the mean ``|Q|`` of its own slice of the batch.
"""

from __future__ import annotations

import copy
from typing import Any, ClassVar

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from imaginebench.batch import PreparedBatch
from imaginebench.modules.backbone import ContinuousQHead, DeterministicHead
from imaginebench.modules.offline.base import (
    LossParts,
    frozen,
    soft_update,
    weighted_loss,
    weighted_mean,
)
from imaginebench.modules.offline.common import StochasticModule, make_trunk


class TD3BC(StochasticModule):
    """TD3+BC for continuous actions.

    Args:
        actor_lr: learning rate of the deterministic tanh policy.
        critic_lr: learning rate of the twin Q-networks.
        gamma: discount factor.
        tau: Polyak rate of the target actor and critics.
        alpha: weight of the Q term relative to the BC term (``lambda = alpha / mean|Q|``).
        policy_noise: std of the target policy smoothing noise (in ``[-1, 1]`` action units).
        noise_clip: clip of that noise.
        policy_freq: critic updates per actor (and target) update.
        sampling_seed: seed of the module's sampling generator (saved in checkpoints;
            not named ``seed``, which is the data module's).
        undiscounted_td_bug: reproduce the original benchmark's gamma = 1 (opt-in only).
        **kwargs: see :class:`OfflineRLModule`.
    """

    discrete = False
    weighted_losses = True
    loss_parts: ClassVar[LossParts] = {"actor_loss": ("actor",), "critic_loss": ("critics",)}

    def __init__(
        self,
        *args: Any,
        actor_lr: float = 3e-4,
        critic_lr: float = 3e-4,
        gamma: float = 0.99,
        tau: float = 0.005,
        alpha: float = 2.5,
        policy_noise: float = 0.2,
        noise_clip: float = 0.5,
        policy_freq: int = 2,
        sampling_seed: int = 0,
        undiscounted_td_bug: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.save_hyperparameters()
        self.actor_lr, self.critic_lr, self.gamma, self.tau = actor_lr, critic_lr, gamma, tau
        self.alpha, self.policy_noise, self.noise_clip = alpha, policy_noise, noise_clip
        self.policy_freq, self.undiscounted_td_bug = policy_freq, undiscounted_td_bug
        self.seed_sampling(sampling_seed)
        self.actor = DeterministicHead(make_trunk(self), self.action_dim)
        self.actor_target = copy.deepcopy(self.actor).requires_grad_(False)
        self.critics = nn.ModuleList(
            [ContinuousQHead(make_trunk(self, self.action_dim)) for _ in range(2)]
        )
        self.critics_target = copy.deepcopy(self.critics).requires_grad_(False)
        self.actor_step = False

    def on_train_start(self) -> None:
        super().on_train_start()
        model = self.trainer.strategy.model
        if self.policy_freq > 1 and getattr(model, "find_unused_parameters", True) is False:
            raise RuntimeError(
                f"{type(self).__name__} leaves the actor without gradients between its delayed "
                "updates; with DDP use --trainer.strategy=ddp_find_unused_parameters_true"
            )

    def param_groups(self) -> list[dict[str, Any]]:
        return [
            {"params": self.actor.parameters(), "lr": self.actor_lr},
            {"params": self.critics.parameters(), "lr": self.critic_lr},
        ]

    def critic_loss(self, batch: dict[str, Tensor], action: Tensor) -> tuple[Tensor, Tensor]:
        """TD3's clipped double-Q loss with target policy smoothing; also returns mean Q."""
        s, s2, instr = batch["state"], batch["next_state"], batch["instruction"]
        with torch.no_grad():
            noise = self.normal(tuple(action.shape), s.device, split=True) * self.policy_noise
            a2 = self.actor_target(s2, instr) + noise.clamp(-self.noise_clip, self.noise_clip)
            a2 = a2.clamp(-1.0, 1.0)
            q_next = torch.min(*(c(s2, instr, a2) for c in self.critics_target))
            discount = self.discount(batch["done"], self.gamma, self.undiscounted_td_bug)
            target = batch["reward"] + discount * q_next
        q = [c(s, instr, action) for c in self.critics]
        weight = batch.get("weight")
        critic = sum(weighted_loss(F.mse_loss, qi, target, weight=weight) for qi in q)
        return critic, q[0].detach().mean()

    def losses(self, batch: PreparedBatch) -> dict[str, Tensor]:
        s, instr = batch["state"], batch["instruction"]
        action = self.to_unit(batch["action"]).clamp(-1.0, 1.0)
        critic_loss, q_data = self.critic_loss(batch, action)
        terms = {"critic_loss": critic_loss, "q_data": q_data}
        self.actor_step = self.global_step % self.policy_freq == 0
        if self.actor_step:
            weight = batch.get("weight")
            pi = self.actor(s, instr)
            q_pi = frozen(self.critics[0], s, instr, pi)
            lmbda = self.alpha / weighted_mean(q_pi.abs(), weight).detach().clamp_min(1e-6)
            bc = weighted_loss(F.mse_loss, pi, action, weight=weight)
            actor_loss = -lmbda * weighted_mean(q_pi, weight) + bc
            terms.update(actor_loss=actor_loss, bc=bc.detach(), lmbda=lmbda)
            terms["loss"] = critic_loss + terms["actor_loss"]
        else:
            terms["loss"] = critic_loss
        return terms

    def after_update(self) -> None:
        if self.actor_step:
            soft_update(self.critics_target, self.critics, self.tau)
            soft_update(self.actor_target, self.actor, self.tau)

    def policy(self, state: Tensor, instruction: Tensor) -> Tensor:
        return self.from_unit(self.actor(state, instruction))
