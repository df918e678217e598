"""PRDC (Ran, Li, Zhang & Lin, *Policy Regularization with Dataset Constraint for Offline
Reinforcement Learning*, ICML 2023).

TD3 whose actor is pulled towards the action of the *nearest dataset point* rather than the
data action of the same transition:

* critics, target smoothing, policy delay and Polyak targets exactly as :class:`TD3BC`;
* actor: ``-lambda Q_1(s, pi(s)) + (pi(s) - a_nn)^2`` with ``lambda = alpha / mean|Q_1|`` and
  ``a_nn`` the action of the dataset pair ``(s_i, a_i)`` whose key ``(beta s_i, a_i)`` is closest
  to ``(beta s, pi(s))``: a small ``beta`` lets the policy pick any action seen in the data,
  a large one ties it to the actions taken in states like ``s``.

Keys and language: the policy sees the normalised state and the instruction embedding. The
instruction is not put into the key as a 384-d vector (that would swamp the state distance at an
arbitrary scale and defeat a spatial index); instead the search is restricted to dataset
transitions *with the same instruction*, so ``a_nn`` is an action the data took for this
instruction in a nearby state. This is done with one :class:`scipy.spatial.cKDTree` over
``(beta * normalised state, action, c * instruction id)``, with ``c`` larger than any distance
inside one instruction's keys, built once at the start of ``fit`` over every training transition
(real and imaginary); each actor step makes one batched query.

Authors' defaults: ``alpha`` 2.5, ``beta`` 2 (MuJoCo locomotion), one neighbour, TD3's
``policy_noise`` 0.2, ``noise_clip`` 0.5, ``policy_freq`` 2, ``tau`` 0.005, lr 3e-4, batch 256,
normalised states. Deviations: those of :class:`TD3BC` (one backward pass; actor steps
``0, d, 2d, ...``); the same-instruction restriction above.

Per-transition weights (``batch["weight"]``) weight the terms as in :class:`TD3BC` (the
critics' TD errors, the actor's Q and constraint terms at each transition's state and the mean
``|Q|`` of ``lambda``); the neighbour index holds every transition whatever its weight.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from scipy.spatial import cKDTree
from torch import Tensor

from imaginebench.batch import PreparedBatch, RolloutData
from imaginebench.modules.offline.base import frozen, weighted_loss, weighted_mean
from imaginebench.modules.offline.common import dataset_transitions
from imaginebench.modules.offline.td3bc import TD3BC


class PRDC(TD3BC):
    """PRDC for continuous actions.

    Args:
        beta: scale of the state in the nearest-neighbour key ``(beta * s, a)``.
        alpha: weight of the Q term relative to the dataset constraint.
        workers: threads of each KD-tree query (-1: all cores).
        **kwargs: the TD3 arguments of :class:`TD3BC` (``actor_lr``, ``critic_lr``, ``gamma``,
            ``tau``, ``policy_noise``, ``noise_clip``, ``policy_freq``, ``sampling_seed``,
            ``undiscounted_td_bug``) and those of :class:`OfflineRLModule`.
    """

    def __init__(
        self,
        *args: Any,
        beta: float = 2.0,
        alpha: float = 2.5,
        workers: int = 1,
        **kwargs: Any,
    ) -> None:
        # TD3BC.__init__ saves the hyperparameters, these included.
        super().__init__(*args, alpha=alpha, **kwargs)
        self.beta, self.workers = beta, workers
        self.index: cKDTree | None = None
        self.index_actions = torch.zeros(0, self.action_dim)
        self.id_spacing = 0.0

    # -- the dataset index ----------------------------------------------------------------------
    def on_fit_data(self, datamodule: RolloutData) -> None:
        data = dataset_transitions(datamodule)
        self.build_index(
            self.normalize(data["state"].to(self.device)),
            self.to_unit(data["action"].to(self.device)).clamp(-1.0, 1.0),
            data["instruction_id"],
        )

    def build_index(self, states: Tensor, actions: Tensor, instruction_ids: Tensor) -> None:
        """Index ``(beta * state, action)`` per instruction; states normalised, actions in
        ``[-1, 1]``."""
        keys = torch.cat([self.beta * states, actions], dim=1).double().cpu().numpy()
        # Farther apart than any two keys of one instruction can be: neighbours never cross.
        self.id_spacing = 2.0 * math.sqrt(keys.shape[1]) * float(np.abs(keys).max() + 1.0)
        ids = instruction_ids.double().cpu().numpy()[:, None] * self.id_spacing
        self.index = cKDTree(np.concatenate([keys, ids], axis=1))
        self.index_actions = actions.detach().clone()

    def nearest_actions(self, states: Tensor, actions: Tensor, instruction_ids: Tensor) -> Tensor:
        """Dataset action of the nearest ``(beta * s, a)`` key with the same instruction."""
        if self.index is None:
            raise RuntimeError("PRDC has no dataset index: fit the module or call build_index()")
        key = torch.cat(
            [
                self.beta * states,
                actions,
                instruction_ids.to(states.dtype)[:, None] * self.id_spacing,
            ],
            dim=1,
        )
        _, idx = self.index.query(key.detach().double().cpu().numpy(), k=1, workers=self.workers)
        return self.index_actions[torch.as_tensor(idx, device=self.index_actions.device)].to(
            actions.device
        )

    # -- losses ---------------------------------------------------------------------------------
    def prepare(self, batch: Mapping[str, Tensor]) -> PreparedBatch:
        out = super().prepare(batch)
        out["instruction_id"] = batch.get("instruction_id")
        return out

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
            neighbour = self.nearest_actions(s, pi, batch["instruction_id"])
            constraint = weighted_loss(F.mse_loss, pi, neighbour, weight=weight)
            terms.update(
                actor_loss=-lmbda * weighted_mean(q_pi, weight) + constraint,
                constraint=constraint.detach(),
                lmbda=lmbda,
            )
            terms["loss"] = critic_loss + terms["actor_loss"]
        else:
            terms["loss"] = critic_loss
        return terms
