"""Conservative Q-Learning (Kumar et al., 2020).

* :class:`DiscreteCQL` — double DQN with the CQL(H) regulariser
  ``alpha * E_s[logsumexp_a Q(s, a) - Q(s, a_data)]`` (as in the paper's discrete experiments
  and d3rlpy's DiscreteCQL), Huber TD loss, periodic hard target updates.
* :class:`CQL` — SAC with twin critics and automatic entropy tuning plus the CQL(H)
  regulariser estimated by importance sampling over uniform actions and policy actions at
  ``s`` and ``s'`` (the paper's continuous variant).

Both discount with ``gamma``; ``undiscounted_td_bug=True`` reproduces the original
benchmark's effective gamma = 1 (its mini-batches set the discount exponent to the terminal flag).
"""

from __future__ import annotations

import copy
import math
from typing import Any, ClassVar

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from imaginebench.modules.backbone import (
    ContinuousQHead,
    DiscreteHead,
    GaussianHead,
    StateInstructionEncoder,
)
from imaginebench.modules.offline.base import LossParts, OfflineRLModule, frozen, soft_update


class DiscreteCQL(OfflineRLModule):
    """CQL for discrete actions.

    Args:
        lr: Adam learning rate of the Q-network.
        gamma: discount factor.
        alpha: weight of the conservative regulariser (the original benchmark used 10; the
            CQL paper 0.5-5 on Atari).
        target_update_interval: steps between hard target-network copies.
        double_q: choose the bootstrap action with the online network (double DQN).
        undiscounted_td_bug: reproduce the original benchmark's gamma = 1 (opt-in only).
        **kwargs: see :class:`OfflineRLModule`.
    """

    discrete = True
    loss_parts: ClassVar[LossParts] = {"loss": ("q",)}

    def __init__(
        self,
        *args: Any,
        lr: float = 3e-4,
        gamma: float = 0.99,
        alpha: float = 1.0,
        target_update_interval: int = 500,
        double_q: bool = True,
        undiscounted_td_bug: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.save_hyperparameters()
        self.lr, self.gamma, self.alpha = lr, gamma, alpha
        self.target_update_interval, self.double_q = target_update_interval, double_q
        self.undiscounted_td_bug = undiscounted_td_bug
        trunk = StateInstructionEncoder(
            self.state_dim, self.embedding_dim, self.hidden, self.instruction_dim
        )
        self.q = DiscreteHead(trunk, self.num_actions)
        self.q_target = copy.deepcopy(self.q).requires_grad_(False)

    def losses(self, batch: dict[str, Tensor]) -> dict[str, Tensor]:
        s, s2, instr = batch["state"], batch["next_state"], batch["instruction"]
        q_all = self.q(s, instr)
        q_data = q_all.gather(1, batch["action"][:, None]).squeeze(1)
        with torch.no_grad():
            q_next_target = self.q_target(s2, instr)
            if self.double_q:
                best = self.q(s2, instr).argmax(-1, keepdim=True)
            else:
                best = q_next_target.argmax(-1, keepdim=True)
            bootstrap = q_next_target.gather(1, best).squeeze(1)
            discount = self.discount(batch["done"], self.gamma, self.undiscounted_td_bug)
            target = batch["reward"] + discount * bootstrap
        td = F.smooth_l1_loss(q_data, target)
        conservative = (torch.logsumexp(q_all, dim=-1) - q_data).mean()
        return {
            "loss": td + self.alpha * conservative,
            "td": td,
            "conservative": conservative,
            "q_data": q_data.mean().detach(),
        }

    def after_update(self) -> None:
        if (self.global_step + 1) % self.target_update_interval == 0:
            self.q_target.load_state_dict(self.q.state_dict())

    def policy(self, state: Tensor, instruction: Tensor) -> Tensor:
        return self.q(state, instruction).argmax(-1)


class CQL(OfflineRLModule):
    """CQL(H) on top of SAC for continuous actions.

    Args:
        actor_lr: learning rate of the tanh-Gaussian policy.
        critic_lr: learning rate of the twin Q-networks.
        alpha_lr: learning rate of the entropy temperature.
        gamma: discount factor.
        tau: Polyak rate of the target critics.
        conservative_weight: weight of the CQL regulariser (paper: 5 or 10).
        num_sampled_actions: uniform and policy actions per state for the logsumexp.
        initial_temperature: initial entropy temperature.
        seed: seed of the module's own sampling generator (saved in checkpoints).
        undiscounted_td_bug: reproduce the original benchmark's gamma = 1 (opt-in only).
        **kwargs: see :class:`OfflineRLModule`.
    """

    discrete = False
    loss_parts: ClassVar[LossParts] = {
        "actor": ("actor",),
        "temperature_loss": ("log_temperature",),
        "critic_loss": ("critics",),
    }

    def __init__(
        self,
        *args: Any,
        actor_lr: float = 1e-4,
        critic_lr: float = 3e-4,
        alpha_lr: float = 1e-4,
        gamma: float = 0.99,
        tau: float = 0.005,
        conservative_weight: float = 5.0,
        num_sampled_actions: int = 10,
        initial_temperature: float = 1.0,
        seed: int = 0,
        undiscounted_td_bug: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.save_hyperparameters()
        self.actor_lr, self.critic_lr, self.alpha_lr = actor_lr, critic_lr, alpha_lr
        self.gamma, self.tau = gamma, tau
        self.conservative_weight, self.num_sampled_actions = (
            conservative_weight,
            num_sampled_actions,
        )
        self.undiscounted_td_bug = undiscounted_td_bug
        self.target_entropy = -float(self.action_dim)

        def trunk(extra: int = 0) -> StateInstructionEncoder:
            return StateInstructionEncoder(
                self.state_dim, self.embedding_dim, self.hidden, self.instruction_dim, extra
            )

        self.actor = GaussianHead(trunk(), self.action_dim)
        self.critics = nn.ModuleList([ContinuousQHead(trunk(self.action_dim)) for _ in range(2)])
        self.critics_target = copy.deepcopy(self.critics).requires_grad_(False)
        self.log_temperature = nn.Parameter(torch.tensor(math.log(initial_temperature)))
        self.generator = torch.Generator().manual_seed(seed)

    # -- helpers ------------------------------------------------------------------------------
    def noise(self, shape: tuple[int, ...], device: torch.device) -> Tensor:
        return torch.randn(shape, generator=self.generator).to(device)

    def sample(self, state: Tensor, instruction: Tensor) -> tuple[Tensor, Tensor]:
        """Reparameterised tanh-Gaussian sample and its log-probability."""
        mean, std = self.actor.distribution(state, instruction)
        pre = mean + std * self.noise(tuple(mean.shape), mean.device)
        action = torch.tanh(pre)
        log_prob = (-0.5 * ((pre - mean) / std) ** 2 - std.log() - 0.5 * math.log(2 * math.pi)).sum(
            -1
        )
        log_prob = log_prob - (2 * (math.log(2) - pre - F.softplus(-2 * pre))).sum(-1)
        return action, log_prob

    def param_groups(self) -> list[dict[str, Any]]:
        return [
            {"params": self.actor.parameters(), "lr": self.actor_lr},
            {"params": self.critics.parameters(), "lr": self.critic_lr},
            {"params": [self.log_temperature], "lr": self.alpha_lr},
        ]

    # -- losses -------------------------------------------------------------------------------
    def losses(self, batch: dict[str, Tensor]) -> dict[str, Tensor]:
        s, s2, instr = batch["state"], batch["next_state"], batch["instruction"]
        action = self.to_unit(batch["action"]).clamp(-1 + 1e-6, 1 - 1e-6)
        temperature = self.log_temperature.exp().detach()
        n, k = s.shape[0], self.num_sampled_actions

        # Policy improvement (SAC): critics frozen, gradients reach the actor only.
        pi, log_pi = self.sample(s, instr)
        q_pi = torch.min(*(frozen(c, s, instr, pi) for c in self.critics))
        actor_loss = (temperature * log_pi - q_pi).mean()
        temperature_loss = -(self.log_temperature * (log_pi.detach() + self.target_entropy)).mean()

        # Policy evaluation with the soft Bellman target.
        with torch.no_grad():
            a2, log_a2 = self.sample(s2, instr)
            q_next = torch.min(*(c(s2, instr, a2) for c in self.critics_target))
            discount = self.discount(batch["done"], self.gamma, self.undiscounted_td_bug)
            target = batch["reward"] + discount * (q_next - temperature * log_a2)

            # Actions for the logsumexp: uniform, and the policy's at s and at s'.
            rep = lambda x: x.repeat_interleave(k, dim=0)
            s_k, s2_k, instr_k = rep(s), rep(s2), rep(instr)
            uniform = (
                torch.rand((n * k, self.action_dim), generator=self.generator).to(s.device) * 2 - 1
            )
            a_s, logp_s = self.sample(s_k, instr_k)
            a_s2, logp_s2 = self.sample(s2_k, instr_k)
        uniform_logp = self.action_dim * math.log(0.5)
        critic_loss, conservative, q_data_mean = 0.0, 0.0, 0.0
        for critic in self.critics:
            q_data = critic(s, instr, action)
            critic_loss = critic_loss + F.mse_loss(q_data, target)
            sampled = torch.stack(
                [
                    critic(s_k, instr_k, uniform) - uniform_logp,
                    critic(s_k, instr_k, a_s) - logp_s,
                    critic(s_k, instr_k, a_s2) - logp_s2,
                ],
                dim=-1,
            ).view(n, k * 3)
            gap = (torch.logsumexp(sampled, dim=-1) - q_data).mean()
            conservative = conservative + gap
            q_data_mean = q_data_mean + q_data.mean().detach() / 2
        loss = actor_loss + temperature_loss + critic_loss + self.conservative_weight * conservative
        return {
            "loss": loss,
            "actor": actor_loss,
            "temperature_loss": temperature_loss,
            "critic_loss": critic_loss + self.conservative_weight * conservative,
            "critic": critic_loss.detach(),
            "conservative": conservative.detach(),
            "temperature": temperature,
            "q_data": q_data_mean,
        }

    def after_update(self) -> None:
        soft_update(self.critics_target, self.critics, self.tau)

    def policy(self, state: Tensor, instruction: Tensor) -> Tensor:
        return self.from_unit(self.actor(state, instruction))

    # -- checkpoint: the sampling generator is part of the training state ----------------------
    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        checkpoint["cql_generator"] = self.generator.get_state()

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        if "cql_generator" in checkpoint:
            self.generator.set_state(checkpoint["cql_generator"])
