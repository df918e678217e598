"""Behaviour cloning (Pomerleau 1991): supervised learning of the data's actions.

* :class:`DiscreteBC` — cross-entropy on the action logits (optionally plus a logit penalty).
* :class:`BC` — deterministic tanh policy regressed onto the (rescaled) data actions with MSE.

Per-transition weights (``batch["weight"]``) weight every term: each is a per-sample imitation
(or regularisation) loss of one transition, so a transition counts as much as it is trusted.
"""

from __future__ import annotations

from typing import Any, ClassVar

import torch.nn.functional as F
from torch import Tensor

from imaginebench.batch import PreparedBatch
from imaginebench.modules.backbone import DeterministicHead, DiscreteHead, StateInstructionEncoder
from imaginebench.modules.offline.base import (
    LossParts,
    OfflineRLModule,
    weighted_loss,
    weighted_mean,
)


class DiscreteBC(OfflineRLModule):
    """Behaviour cloning for discrete actions.

    Args:
        lr: Adam learning rate.
        logit_penalty: weight of a ``mean(logits^2) / 2`` regulariser on the raw logits (0,
            the default, is plain maximum likelihood; d3rlpy's ``beta`` penalises normalised
            log-probabilities instead).
        **kwargs: see :class:`OfflineRLModule`.
    """

    discrete = True
    uses_next_state = False
    weighted_losses = True  # the cross-entropy and the logit penalty, per transition
    loss_parts: ClassVar[LossParts] = {"loss": ("logits",)}

    def __init__(
        self, *args: Any, lr: float = 1e-3, logit_penalty: float = 0.0, **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        self.save_hyperparameters()
        self.lr, self.logit_penalty = lr, logit_penalty
        trunk = StateInstructionEncoder(
            self.state_dim, self.embedding_dim, self.hidden, self.instruction_dim
        )
        self.logits = DiscreteHead(trunk, self.num_actions)

    def losses(self, batch: PreparedBatch) -> dict[str, Tensor]:
        weight = batch.get("weight")
        logits = self.logits(batch["state"], batch["instruction"])
        nll = weighted_loss(F.cross_entropy, logits, batch["action"], weight=weight)
        terms = {"loss": nll, "nll": nll.detach()}
        if self.logit_penalty:
            penalty = weighted_mean(logits.pow(2), weight)
            terms["loss"] = nll + self.logit_penalty * 0.5 * penalty
        if self.log_now:
            terms["accuracy"] = (logits.argmax(-1) == batch["action"]).float().mean()
        return terms

    def policy(self, state: Tensor, instruction: Tensor) -> Tensor:
        return self.logits(state, instruction).argmax(-1)


class BC(OfflineRLModule):
    """Behaviour cloning for continuous actions (deterministic policy, MSE).

    Args:
        lr: Adam learning rate.
        **kwargs: see :class:`OfflineRLModule`.
    """

    discrete = False
    uses_next_state = False
    weighted_losses = True  # the squared error, per transition
    loss_parts: ClassVar[LossParts] = {"loss": ("actor",)}

    def __init__(self, *args: Any, lr: float = 1e-3, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.save_hyperparameters()
        self.lr = lr
        trunk = StateInstructionEncoder(
            self.state_dim, self.embedding_dim, self.hidden, self.instruction_dim
        )
        self.actor = DeterministicHead(trunk, self.action_dim)

    def losses(self, batch: PreparedBatch) -> dict[str, Tensor]:
        target = self.to_unit(batch["action"]).clamp(-1, 1)
        prediction = self.actor(batch["state"], batch["instruction"])
        mse = weighted_loss(F.mse_loss, prediction, target, weight=batch.get("weight"))
        return {"loss": mse, "mse": mse}

    def policy(self, state: Tensor, instruction: Tensor) -> Tensor:
        return self.from_unit(self.actor(state, instruction))
