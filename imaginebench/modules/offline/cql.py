"""Conservative Q-Learning (Kumar et al., 2020).

* :class:`DiscreteCQL` — double DQN with the CQL(H) regulariser
  ``alpha * E_s[logsumexp_a Q(s, a) - Q(s, a_data)]`` (as in the paper's discrete experiments
  and d3rlpy's DiscreteCQL), Huber TD loss, periodic hard target updates.
* :class:`CQL` — SAC with twin critics and automatic entropy tuning plus the CQL(H)
  regulariser estimated by importance sampling over uniform actions and policy actions at
  ``s`` and ``s'`` (the paper's continuous variant).

Both discount with ``gamma``; ``undiscounted_td_bug=True`` reproduces the original
benchmark's effective gamma = 1 (its mini-batches set the discount exponent to the terminal flag).

Per-transition weights (``batch["weight"]``) weight every term of both: the TD errors, the
conservative gap (a transition's pushed-down log-sum-exp and its pushed-up data Q, so an
untrusted action is neither favoured nor penalised) and, continuous, the actor and temperature
terms at its state: each is a per-sample expectation over the data, and a transition of weight
0 is as if it were not in the batch.
"""

from __future__ import annotations

import copy
import math
from typing import Any, ClassVar, Literal, get_args

import torch
import torch.nn.functional as F
from torch import Tensor

from imaginebench.batch import PreparedBatch
from imaginebench.modules.backbone import DiscreteHead, StateInstructionEncoder
from imaginebench.modules.offline.base import (
    LossParts,
    OfflineRLModule,
    weighted_loss,
    weighted_mean,
)
from imaginebench.modules.offline.sac import SAC

ImaginaryConservative = Literal["like_real", "push_down", "td_only", "margin"]


def check_imaginary_conservative(mode: str, scale: float, margin: float = 0.8) -> None:
    """Refuse an unknown ``imaginary_conservative`` or a weight or margin it cannot take."""
    if mode not in get_args(ImaginaryConservative):
        raise ValueError(
            f"imaginary_conservative must be one of {get_args(ImaginaryConservative)}, got {mode!r}"
        )
    if not 0.0 <= scale <= 1.0:
        raise ValueError(f"imaginary_conservative_weight must be in [0, 1], got {scale}")
    if scale != 1.0 and mode != "like_real":
        raise ValueError(
            "imaginary_conservative_weight applies to imaginary_conservative='like_real' only"
        )
    if not margin > 0.0:
        raise ValueError(f"imaginary_margin must be positive, got {margin}")


def large_margin_gap(q_all: Tensor, action: Tensor, margin: float) -> Tensor:
    """Per-row ``max_a [Q(s, a) + margin * (a != a_data)] - Q(s, a_data)`` (Hester et al.,
    2018, DQfD's supervised loss): zero once the data action leads every other by ``margin``,
    so, unlike the log-sum-exp, it stops pushing where the ranking already holds."""
    q_data = q_all.gather(1, action[:, None]).squeeze(1)
    offsets = torch.full_like(q_all, margin).scatter(1, action[:, None], 0.0)
    return (q_all + offsets).amax(-1) - q_data


def conservative_row_weights(
    mode: ImaginaryConservative, scale: float, source: Tensor, weight: Tensor | None
) -> tuple[Tensor | None, Tensor | None]:
    """Per-row weights ``(pushed_down, pushed_up)`` of the conservative gap
    ``E_down[logsumexp_a Q(s, a)] - E_up[Q(s, a_data)]`` (``None``: every row alike).

    ``like_real``: every row, an imaginary one counted ``scale`` times; ``push_down`` (COMBO's
    split): the log-sum-exp on every row, the data action on real rows only, so an imagined
    action is never favoured; ``td_only``: real rows only. ``source`` is 1 on imaginary rows;
    ``weight`` (the batch's per-transition weights, if any) multiplies both."""
    if mode == "like_real" and scale == 1.0:
        return weight, weight
    imaginary = (source != 0).to(torch.float32)
    real = 1.0 - imaginary
    if mode == "like_real":
        rows = real + scale * imaginary
        return (rows, rows) if weight is None else (rows * weight, rows * weight)
    real = real if weight is None else real * weight
    return (weight if mode == "push_down" else real), real


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
        imaginary_conservative: what the conservative term does on imaginary rows:
            ``like_real`` (CQL(H) on every row), ``push_down`` (COMBO's split: the log-sum-exp
            is pushed down on every row, the data action pushed up on real rows only, so an
            imagined action is never favoured) or ``td_only`` (imaginary rows enter the TD
            loss only).
            ``margin`` replaces CQL(H) on imaginary rows by DQfD's large-margin loss (the
            imagined action must lead every other by ``imaginary_margin``, no more).
        imaginary_conservative_weight: with ``like_real``, how much an imaginary row counts in
            the conservative term beside a real row (1: alike; 0: as ``td_only``; between: the
            term at imagined states scaled down).
        imaginary_margin: with ``margin``, the lead the imagined action must keep (DQfD: 0.8).
        **kwargs: see :class:`OfflineRLModule`.
    """

    discrete = True
    weighted_losses = True
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
        imaginary_conservative: ImaginaryConservative = "like_real",
        imaginary_conservative_weight: float = 1.0,
        imaginary_margin: float = 0.8,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.save_hyperparameters()
        check_imaginary_conservative(
            imaginary_conservative, imaginary_conservative_weight, imaginary_margin
        )
        self.imaginary_conservative = imaginary_conservative
        self.imaginary_conservative_weight = imaginary_conservative_weight
        self.imaginary_margin = imaginary_margin
        self.lr, self.gamma, self.alpha = lr, gamma, alpha
        self.target_update_interval, self.double_q = target_update_interval, double_q
        self.undiscounted_td_bug = undiscounted_td_bug
        trunk = StateInstructionEncoder(
            self.state_dim, self.embedding_dim, self.hidden, self.instruction_dim
        )
        self.q = DiscreteHead(trunk, self.num_actions)
        self.q_target = copy.deepcopy(self.q).requires_grad_(False)

    def losses(self, batch: PreparedBatch) -> dict[str, Tensor]:
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
        weight = batch.get("weight")
        td = weighted_loss(F.smooth_l1_loss, q_data, target, weight=weight)
        conservative = self.conservative_gap(
            q_all, q_data, batch["action"], batch["source"], weight
        )
        return {
            "loss": td + self.alpha * conservative,
            "td": td,
            "conservative": conservative,
            "q_data": q_data.mean().detach(),
        }

    def conservative_gap(
        self,
        q_all: Tensor,
        q_data: Tensor,
        action: Tensor,
        source: Tensor,
        weight: Tensor | None,
    ) -> Tensor:
        """``E[logsumexp_a Q(s, a)] - E[Q(s, a_data)]`` over the rows
        ``imaginary_conservative`` says (``q_data``: ``q_all`` at the data's ``action``, the
        TD loss's own tensor, so both terms share one node of the graph; ``source``: 1 on
        imaginary rows); with ``margin``, the mean over all rows of each real row's gap and
        each imaginary row's :func:`large_margin_gap`."""
        if self.imaginary_conservative == "margin":
            per_row = torch.where(
                source != 0,
                large_margin_gap(q_all, action, self.imaginary_margin),
                torch.logsumexp(q_all, dim=-1) - q_data,
            )
            return weighted_mean(per_row, weight)
        down, up = conservative_row_weights(
            self.imaginary_conservative, self.imaginary_conservative_weight, source, weight
        )
        return weighted_mean(torch.logsumexp(q_all, dim=-1), down) - weighted_mean(q_data, up)

    def after_update(self) -> None:
        if (self.global_step + 1) % self.target_update_interval == 0:
            self.q_target.load_state_dict(self.q.state_dict())

    def policy(self, state: Tensor, instruction: Tensor) -> Tensor:
        return self.q(state, instruction).argmax(-1)


class CQL(SAC):
    """CQL(H) on top of SAC for continuous actions.

    The critics minimise the soft TD error plus ``conservative_weight`` times the gap between a
    log-sum-exp of Q over sampled actions (uniform, and the policy's at ``s`` and ``s'``, each
    importance-weighted by its density) and Q of the data's actions. Paper defaults: actor lr
    1e-4, critic lr 3e-4, 10 sampled actions of each kind, weight 5 (the Lagrange variant is not
    implemented).

    Args:
        actor_lr: learning rate of the tanh-Gaussian policy.
        critic_lr: learning rate of the twin Q-networks.
        alpha_lr: learning rate of the entropy temperature.
        conservative_weight: weight of the CQL regulariser (paper: 5 or 10).
        num_sampled_actions: uniform and policy actions per state for the logsumexp.
        imaginary_conservative: what the conservative term does on imaginary rows, as for
            :class:`DiscreteCQL` (``like_real``, ``push_down`` or ``td_only``).
        imaginary_conservative_weight: with ``like_real``, how much an imaginary row counts in
            the conservative term beside a real row (as for :class:`DiscreteCQL`).
        **kwargs: the SAC arguments of :class:`SAC` (``gamma``, ``tau``,
            ``initial_temperature``, ``target_entropy``, ``sampling_seed``, ``undiscounted_td_bug``)
            and those of :class:`OfflineRLModule`.
    """

    def __init__(
        self,
        *args: Any,
        actor_lr: float = 1e-4,
        critic_lr: float = 3e-4,
        alpha_lr: float = 1e-4,
        conservative_weight: float = 5.0,
        num_sampled_actions: int = 10,
        imaginary_conservative: ImaginaryConservative = "like_real",
        imaginary_conservative_weight: float = 1.0,
        **kwargs: Any,
    ) -> None:
        # SAC.__init__ saves the hyperparameters, these included.
        super().__init__(*args, actor_lr=actor_lr, critic_lr=critic_lr, alpha_lr=alpha_lr, **kwargs)
        check_imaginary_conservative(imaginary_conservative, imaginary_conservative_weight)
        if imaginary_conservative == "margin":
            raise ValueError("imaginary_conservative='margin' is DiscreteCQL's only")
        self.conservative_weight = conservative_weight
        self.num_sampled_actions = num_sampled_actions
        self.imaginary_conservative = imaginary_conservative
        self.imaginary_conservative_weight = imaginary_conservative_weight

    @torch.no_grad()
    def pushdown_actions(
        self, state: Tensor, next_state: Tensor, instruction: Tensor
    ) -> tuple[Tensor, list[tuple[Tensor, Tensor]]]:
        """``num_sampled_actions`` uniform actions and policy actions at ``s`` and at ``s'`` per
        state, with their log-densities: the importance samples of the log-sum-exp. Returns
        the states repeated ``(n, k, state_dim)`` and the ``(n, k, ...)`` samples."""
        n, k = state.shape[0], self.num_sampled_actions
        s_k, s2_k = (x.unsqueeze(1).expand(-1, k, -1) for x in (state, next_state))
        uniform = self.uniform((n, k, self.action_dim), state.device, split=True)
        uniform_logp = torch.full((n, k), self.action_dim * math.log(0.5), device=state.device)
        samples = [
            (uniform, uniform_logp),
            self.tanh_gaussian(self.actor, s_k, instruction, split=True),
            self.tanh_gaussian(self.actor, s2_k, instruction, split=True),
        ]
        return s_k, samples

    def conservative_sac_losses(
        self,
        batch: dict[str, Tensor],
        pushdown_rows: slice = slice(None),
        data_rows: slice = slice(None),
        row_weights: tuple[Tensor | None, Tensor | None] | None = None,
    ) -> dict[str, Tensor]:
        """SAC losses with the conservative critic term
        ``E_{s in pushdown_rows}[logsumexp_a Q(s, a)] - E_{data_rows}[Q(s, a_data)]``, every
        expectation weighted by ``batch["weight"]`` if given; ``row_weights`` (full-batch
        ``(pushed_down, pushed_up)`` weights, see :func:`conservative_row_weights`) replace it
        in the two conservative expectations."""
        s, s2, instr = batch["state"], batch["next_state"], batch["instruction"]
        weight = batch.get("weight")
        down_weight, up_weight = (weight, weight) if row_weights is None else row_weights
        action = self.to_unit(batch["action"]).clamp(-1.0, 1.0)
        temperature = self.log_temperature.exp().detach()
        actor_loss, temperature_loss, _ = self.policy_terms(s, instr, temperature, weight)
        target = self.soft_backup(batch["reward"], s2, instr, batch["done"], temperature)
        instr_pushdown = instr[pushdown_rows]
        s_k, samples = self.pushdown_actions(s[pushdown_rows], s2[pushdown_rows], instr_pushdown)
        td, conservative, q_data_mean = 0.0, 0.0, 0.0
        for critic in self.critics:
            q_data = critic(s, instr, action)
            td = td + weighted_loss(F.mse_loss, q_data, target, weight=weight)
            sampled = torch.cat([critic(s_k, instr_pushdown, a) - logp for a, logp in samples], 1)
            logsumexp = torch.logsumexp(sampled, dim=-1)
            pushed_down = weighted_mean(logsumexp, _rows(down_weight, pushdown_rows))
            pushed_up = weighted_mean(q_data[data_rows], _rows(up_weight, data_rows))
            conservative = conservative + pushed_down - pushed_up
            q_data_mean = q_data_mean + q_data.mean().detach() / len(self.critics)
        critic_loss = td + self.conservative_weight * conservative
        return {
            "loss": actor_loss + temperature_loss + critic_loss,
            "actor_loss": actor_loss,
            "temperature_loss": temperature_loss,
            "critic_loss": critic_loss,
            "td": td.detach(),
            "conservative": conservative.detach(),
            "temperature": temperature,
            "q_data": q_data_mean,
        }

    def losses(self, batch: PreparedBatch) -> dict[str, Tensor]:
        row_weights = conservative_row_weights(
            self.imaginary_conservative,
            self.imaginary_conservative_weight,
            batch["source"],
            batch.get("weight"),
        )
        return self.conservative_sac_losses(batch, row_weights=row_weights)


def _rows(weight: Tensor | None, rows: slice) -> Tensor | None:
    return None if weight is None else weight[rows]
