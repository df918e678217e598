"""COMBO (Yu, Kumar, Rafailov, Rajeswaran, Levine & Finn, *COMBO: Conservative Offline
Model-Based Policy Optimization*, NeurIPS 2021).

Model-based offline RL with a conservative critic instead of uncertainty penalties:

1. **Model phase** (once, at the start of ``fit``): an ensemble of probabilistic dynamics
   models, each a Gaussian over ``(s' - s, r)`` given ``(s, instruction, a)`` (plus a
   termination logit), is trained by negative log-likelihood with learned soft bounds on the
   log-variance. Training stops when no member's held-out MSE improved by 1 % for ``patience``
   evaluations (or after ``model_max_steps``); each member keeps its best weights and the
   ``num_elites`` members with the lowest held-out MSE are used for rollouts.
2. **Rollouts**: every ``rollout_every`` updates, ``rollout_batch_size`` dataset states start
   ``rollout_length``-step rollouts of the current policy in the model (a random elite per
   transition and step), stored in a FIFO model buffer.
3. **Policy optimisation**: SAC on batches whose fraction ``model_ratio`` comes from the model
   buffer and the rest from the data module, with the conservative critic term
   ``beta (E_{s ~ model, a ~ mu(.|s)} Q(s, a) - E_{(s, a) ~ data} Q(s, a))``; as in the authors'
   implementation the first expectation is the CQL(H) log-sum-exp over uniform and policy
   actions (importance-weighted) at the model states.

Defaults follow the paper's appendix and the MBPO code it builds on: 7 models / 5 elites,
model lr 1e-3 and batch 256, a 20 % hold-out set, rollout length 5, ``model_ratio`` (1 - f) 0.5,
``beta`` 1, 10 sampled actions, actor lr 1e-4, critic lr 3e-4, ``tau`` 0.005, ``gamma`` 0.99,
automatic entropy tuning towards ``-action_dim``. Deliberate deviations, mostly to keep it
CPU-sized:

* 10 000 rollout starts every 1000 updates and a 250 000-transition model buffer (authors:
  50 000 starts, a buffer keeping several epochs of rollouts); the model trains for at most
  ``model_max_steps`` mini-batch updates per member, with hold-out evaluations every
  ``model_eval_every`` updates (MBPO: epochs over the data);
* models are the shared state + instruction trunk (``hidden``) rather than 4 x 200 MLPs, without
  MBPO's per-layer weight decay. The instruction is an input because rewards and terminations
  depend on it;
* the termination function is learned (a Bernoulli head) since these domains have none in
  closed form; model next states are clipped to the data's state range;
* the model trains on every training transition (real and imaginary) with its own Adam
  optimiser, outside the one-optimiser RL update; the RL update is one backward pass (the
  actor and temperature use the critics from before this step's update);
* the model-buffer fraction is taken out of the data module's batch (``(1 - model_ratio) * B``
  evenly spaced rows of it are kept, preserving its real / imaginary mix), so the batch size
  stays ``B``.

The model buffer is saved in checkpoints, so a resumed run continues exactly. Under DDP every
rank trains the same models and runs the same rollouts (the generators stay in lockstep) and
takes its own slice of each step's model samples.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from imaginebench.batch import PreparedBatch, RolloutData
from imaginebench.modules.dynamics import DynamicsEnsemble, fit_ensemble
from imaginebench.modules.offline.common import dataset_transitions, make_trunk
from imaginebench.modules.offline.cql import CQL

BUFFER_KEYS = ("state", "action", "reward", "next_state", "done", "instruction_id")


class COMBO(CQL):
    """COMBO for continuous actions. It does not weight its losses by transition
    (``weighted_losses = False``): half of every batch comes from its own model, whose rows have
    no confidence, and its dynamics model trains on every transition alike.

    Args:
        actor_lr: learning rate of the tanh-Gaussian policy.
        critic_lr: learning rate of the twin Q-networks.
        alpha_lr: learning rate of the log temperature.
        conservative_weight: ``beta``, weight of the conservative critic term.
        num_sampled_actions: uniform and policy actions per model state in the log-sum-exp.
        model_ratio: fraction of every batch drawn from the model buffer (``1 - f``).
        ensemble_size: dynamics models.
        num_elites: models used for rollouts (lowest held-out error).
        model_lr: Adam learning rate of the dynamics models.
        model_batch_size: mini-batch of each model update.
        model_max_steps: budget of model updates (each member sees one mini-batch per update).
        model_eval_every: model updates between hold-out evaluations.
        model_patience: hold-out evaluations without a 1 % improvement before stopping.
        holdout_fraction: share of the transitions held out for model selection (at most 5000).
        rollout_length: ``h``, model steps per rollout.
        rollout_batch_size: rollouts started each time.
        rollout_every: updates between rollout rounds.
        model_buffer_size: capacity of the model buffer (FIFO).
        **kwargs: the SAC arguments of :class:`SAC` (``gamma``, ``tau``,
            ``initial_temperature``, ``target_entropy``, ``sampling_seed``, ``undiscounted_td_bug``)
            and those of :class:`OfflineRLModule`.
    """

    weighted_losses = False

    def __init__(
        self,
        *args: Any,
        actor_lr: float = 1e-4,
        critic_lr: float = 3e-4,
        alpha_lr: float = 1e-4,
        conservative_weight: float = 1.0,
        num_sampled_actions: int = 10,
        model_ratio: float = 0.5,
        ensemble_size: int = 7,
        num_elites: int = 5,
        model_lr: float = 1e-3,
        model_batch_size: int = 256,
        model_max_steps: int = 5000,
        model_eval_every: int = 250,
        model_patience: int = 5,
        holdout_fraction: float = 0.2,
        rollout_length: int = 5,
        rollout_batch_size: int = 10_000,
        rollout_every: int = 1000,
        model_buffer_size: int = 250_000,
        **kwargs: Any,
    ) -> None:
        # SAC.__init__ saves the hyperparameters, these included.
        super().__init__(
            *args,
            actor_lr=actor_lr,
            critic_lr=critic_lr,
            alpha_lr=alpha_lr,
            conservative_weight=conservative_weight,
            num_sampled_actions=num_sampled_actions,
            **kwargs,
        )
        if self.imaginary_conservative != "like_real" or self.imaginary_conservative_weight != 1.0:
            raise ValueError(
                "COMBO's conservative term is its own split (model states pushed down, data "
                "actions pushed up): imaginary_conservative does not apply"
            )
        if not 0 < num_elites <= ensemble_size:
            raise ValueError(f"need 0 < num_elites <= ensemble_size, got {num_elites}")
        if not 0.0 <= model_ratio < 1.0:
            raise ValueError(f"model_ratio must be in [0, 1), got {model_ratio}")
        self.model_ratio, self.model_lr, self.model_batch_size = (
            model_ratio,
            model_lr,
            model_batch_size,
        )
        self.model_max_steps, self.model_eval_every = model_max_steps, model_eval_every
        self.model_patience, self.holdout_fraction = model_patience, holdout_fraction
        self.rollout_length, self.rollout_batch_size = rollout_length, rollout_batch_size
        self.rollout_every, self.model_buffer_size = rollout_every, model_buffer_size
        trunks = [make_trunk(self, self.action_dim) for _ in range(ensemble_size)]
        target_dim = self.state_dim + 1  # the state change and the reward
        self.dynamics = DynamicsEnsemble(trunks, target_dim).requires_grad_(False)
        self.register_buffer("elites", torch.arange(num_elites))
        self.register_buffer("model_trained", torch.tensor(False))
        self.register_buffer("state_low", torch.zeros(self.state_dim))  # normalised data range
        self.register_buffer("state_high", torch.zeros(self.state_dim))
        self.model_buffer: dict[str, Tensor] = {}
        self.model_size, self.model_ptr = 0, 0
        self.starts: dict[str, Tensor] | None = None  # rollout start states (normalised) and ids

    # -- model phase ----------------------------------------------------------------------------
    def on_fit_data(self, datamodule: RolloutData) -> None:
        data = dataset_transitions(datamodule)
        device = self.device
        state = self.normalize(data["state"].to(device))
        self.starts = {"state": state, "instruction_id": data["instruction_id"].to(device)}
        if not bool(self.model_trained):
            self.state_low.copy_(state.min(0).values)
            self.state_high.copy_(state.max(0).values)
            metrics = self.train_dynamics(
                state,
                self.to_unit(data["action"].to(device)).clamp(-1.0, 1.0),
                data["reward"].to(device).float(),
                self.normalize(data["next_state"].to(device)),
                data["done"].to(device).float(),
                data["instruction_id"].to(device),
            )
            if self.logger is not None:
                self.logger.log_metrics(metrics, step=0)
        if self.model_size == 0:
            self.rollout()

    def train_dynamics(
        self,
        state: Tensor,
        action: Tensor,
        reward: Tensor,
        next_state: Tensor,
        done: Tensor,
        instruction_id: Tensor,
    ) -> dict[str, float]:
        """Fit the ensemble with early stopping on a hold-out set
        (:func:`~imaginebench.modules.dynamics.fit_ensemble`; each member keeps its best
        weights) and pick the elites. Returns the hold-out metrics."""
        best, steps = fit_ensemble(
            self.dynamics,
            state,
            self.train_embeddings[instruction_id],
            action,
            torch.cat([next_state - state, reward[:, None]], dim=1),
            done,
            self.generator,
            lr=self.model_lr,
            batch_size=self.model_batch_size,
            max_steps=self.model_max_steps,
            eval_every=self.model_eval_every,
            patience=self.model_patience,
            holdout_fraction=self.holdout_fraction,
        )
        self.elites.copy_(torch.argsort(best)[: len(self.elites)].to(self.elites.device))
        self.model_trained.fill_(True)
        elite_error = best[self.elites.cpu()]
        return {
            "model/holdout_mse": float(elite_error.mean()),
            "model/holdout_mse_worst_elite": float(elite_error.max()),
            "model/updates": float(steps),
        }

    # -- rollouts -------------------------------------------------------------------------------
    @torch.no_grad()
    def rollout(self) -> None:
        """``rollout_length`` policy steps in the model from random dataset states."""
        if self.starts is None:
            raise RuntimeError("COMBO has no start states: fit the module first")
        device = self.starts["state"].device
        pick = self.randint(len(self.starts["state"]), self.rollout_batch_size, device)
        state = self.starts["state"][pick]
        ids = self.starts["instruction_id"][pick]
        instruction = self.train_embeddings[ids]
        elites = self.elites.tolist()
        for _ in range(self.rollout_length):
            action, _ = self.tanh_gaussian(self.actor, state, instruction)
            member = self.randint(len(elites), len(state), device)
            mean = torch.empty(len(state), self.dynamics.target_dim, device=device)
            logvar, done_logit = torch.empty_like(mean), torch.empty(len(state), device=device)
            for j, m in enumerate(elites):
                rows = member == j
                if rows.any():
                    mean[rows], logvar[rows], done_logit[rows] = self.dynamics(
                        m, state[rows], instruction[rows], action[rows]
                    )
            sample = mean + (0.5 * logvar).exp() * self.normal(tuple(mean.shape), device)
            next_state = torch.max(
                torch.min(state + sample[:, :-1], self.state_high), self.state_low
            )
            done = done_logit > 0
            self.store(
                state=state,
                action=self.from_unit(action),  # the data's action space, like real rows
                reward=sample[:, -1],
                next_state=next_state,
                done=done,
                instruction_id=ids,
            )
            alive = ~done
            if not alive.any():
                break
            state, ids, instruction = next_state[alive], ids[alive], instruction[alive]

    def store(self, **rows: Tensor) -> None:
        """Append rows to the FIFO model buffer (allocated on first use)."""
        capacity = self.model_buffer_size
        if not self.model_buffer:
            self.model_buffer = {
                k: torch.zeros((capacity, *v.shape[1:]), dtype=v.dtype, device=v.device)
                for k, v in rows.items()
            }
        n = len(rows["state"])
        if n > capacity:
            rows, n = {k: v[-capacity:] for k, v in rows.items()}, capacity
        idx = (self.model_ptr + torch.arange(n, device=rows["state"].device)) % capacity
        for key, value in rows.items():
            self.model_buffer[key][idx] = value
        self.model_ptr = (self.model_ptr + n) % capacity
        self.model_size = min(self.model_size + n, capacity)

    def after_update(self) -> None:
        super().after_update()
        if (
            self.rollout_every
            and self.global_step % self.rollout_every == 0
            and self.starts is not None
        ):
            self.rollout()

    # -- losses ---------------------------------------------------------------------------------
    def losses(self, batch: PreparedBatch) -> dict[str, Tensor]:
        n = batch["state"].shape[0]
        n_model = min(round(self.model_ratio * n), n - 1) if self.model_size else 0
        n_real = n - n_model
        # Evenly spaced rows keep the data module's real / imaginary mix.
        keep = (torch.arange(n_real, device=batch["state"].device) * n) // n_real
        parts = {
            "state": batch["state"][keep],
            "action": batch["action"][keep],
            "reward": batch["reward"][keep],
            "next_state": batch["next_state"][keep],
            "done": batch["done"][keep].float(),
            "instruction": batch["instruction"][keep],
        }
        if n_model:
            idx = self.randint(self.model_size, n_model, keep.device, split=True)
            fake = {k: self.model_buffer[k][idx] for k in BUFFER_KEYS}
            fake["instruction"] = self.train_embeddings[fake.pop("instruction_id")]
            fake["done"] = fake["done"].float()
            parts = {k: torch.cat([v, fake[k]]) for k, v in parts.items()}
        # Push-down states: the model's (the batch's own if there are none yet).
        pushdown = slice(n_real, n) if n_model else slice(0, n)
        out = self.conservative_sac_losses(parts, pushdown, slice(0, n_real))
        out["model_fraction"] = torch.tensor(n_model / n)
        return out

    # -- checkpoint: the model buffer is training state -----------------------------------------
    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        super().on_save_checkpoint(checkpoint)
        checkpoint["combo_model_buffer"] = {
            "rows": {k: v[: self.model_size].clone() for k, v in self.model_buffer.items()},
            "ptr": self.model_ptr,
        }

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        super().on_load_checkpoint(checkpoint)
        saved = checkpoint.get("combo_model_buffer")
        if saved and saved["rows"]:
            self.model_buffer, self.model_size, self.model_ptr = {}, 0, 0
            self.store(**saved["rows"])
            self.model_ptr = int(saved["ptr"])
