"""Ensembles of probabilistic dynamics models, fitted with early stopping on a hold-out set.

:class:`DynamicsEnsemble` holds members ``(state, instruction, action) -> (mean, log-variance)``
of a Gaussian over a target (COMBO: the state change and the reward) plus a termination logit,
with learned soft bounds on the log-variance (the MBPO / PETS recipe). :func:`fit_ensemble`
trains every member by negative log-likelihood on its own mini-batches and keeps each member's
weights from its best hold-out evaluation. COMBO (``modules/offline/combo.py``) uses both for
its model; the imagination's ensemble confidence (``imagination/confidence.py``) fits the same
on the real data only.
"""

from __future__ import annotations

import copy
import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from tqdm.auto import tqdm

from imaginebench.modules.backbone import StateInstructionEncoder

#: the least per-entry spread that states are standardised with; an entry of the real data whose
#: spread is at most this never varied there, so a model of that data has learned nothing of
#: what other values of it do (Meta-World's wall, which no training task has)
SPREAD_FLOOR = 1e-3


def standardize_seen(state: Tensor, mean: Tensor, std: Tensor) -> Tensor:
    """``(state - mean) / std`` per entry (``std`` clamped at :data:`SPREAD_FLOOR`), with every
    entry whose spread is at most the floor given as its mean, 0, whatever its value: a model
    learned nothing of it, and a value it never saw (Meta-World's wall in the novel tasks)
    would otherwise enter a thousand spreads away."""
    return ((state - mean) / std).masked_fill(std <= SPREAD_FLOOR, 0.0)


class DynamicsEnsemble(nn.Module):
    """Members ``(s, instruction, a) -> (mean, log-variance)`` of a ``target_dim`` target and a
    termination logit; log-variances are softly bounded by learned ``[min, max]``.

    Args:
        trunks: one feature trunk per member (its input: state, instruction and action).
        target_dim: size of the predicted target (COMBO: ``state_dim + 1``, change and reward).
    """

    def __init__(self, trunks: list[StateInstructionEncoder], target_dim: int) -> None:
        super().__init__()
        self.target_dim = target_dim
        self.trunks = nn.ModuleList(trunks)
        self.heads = nn.ModuleList(
            [nn.Linear(t.feature_dim, 2 * self.target_dim + 1) for t in trunks]
        )
        self.max_logvar = nn.Parameter(torch.full((self.target_dim,), 0.5))
        self.min_logvar = nn.Parameter(torch.full((self.target_dim,), -10.0))

    def __len__(self) -> int:
        return len(self.trunks)

    def forward(
        self, member: int, state: Tensor, instruction: Tensor, action: Tensor
    ) -> tuple[Tensor, Tensor, Tensor]:
        out = self.heads[member](self.trunks[member](state, instruction, action))
        mean, raw, done = out.split([self.target_dim, self.target_dim, 1], dim=-1)
        logvar = self.max_logvar - F.softplus(self.max_logvar - raw)
        logvar = self.min_logvar + F.softplus(logvar - self.min_logvar)
        return mean, logvar, done.squeeze(-1)

    @torch.no_grad()
    def means(self, state: Tensor, instruction: Tensor, action: Tensor) -> Tensor:
        """``(members, n, target_dim)``: every member's predicted mean."""
        return torch.stack([self(m, state, instruction, action)[0] for m in range(len(self))])

    @torch.no_grad()
    def holdout_error(
        self, state: Tensor, instruction: Tensor, action: Tensor, target: Tensor
    ) -> Tensor:
        """Hold-out MSE of each member's mean prediction of ``target`` (on the CPU)."""
        return torch.stack(
            [F.mse_loss(self(m, state, instruction, action)[0], target) for m in range(len(self))]
        ).cpu()


def gaussian_nll(mean: Tensor, logvar: Tensor, target: Tensor, beta: float = 0.0) -> Tensor:
    """Mean Gaussian negative log-likelihood (up to constants) of ``target``; with ``beta > 0``
    the beta-NLL of Seitzer et al. (2022): each entry's term is weighted by its predicted
    variance to the power ``beta``, not differentiated, so at ``beta = 1`` the mean's gradient is
    the squared error's whatever variance is predicted."""
    nll = (mean - target) ** 2 * torch.exp(-logvar) + logvar
    if beta:
        nll = nll * torch.exp(beta * logvar.detach())
    return nll.mean()


def fit_ensemble(
    ensemble: DynamicsEnsemble,
    state: Tensor,
    instruction: Tensor,
    action: Tensor,
    target: Tensor,
    done: Tensor,
    generator: torch.Generator,
    lr: float = 1e-3,
    batch_size: int = 256,
    max_steps: int = 5000,
    eval_every: int = 250,
    patience: int = 5,
    holdout_fraction: float = 0.2,
    nll_beta: float = 0.0,
    progress: bool = False,
) -> tuple[Tensor, int]:
    """Fit every member by Gaussian negative log-likelihood (plus the termination's
    cross-entropy and a small penalty on the log-variance bounds) with one Adam optimiser.

    A random ``holdout_fraction`` of the rows (at most 5000) is held out; every ``eval_every``
    updates each member's hold-out MSE is measured, and a member that improved on its best by
    1 % keeps these weights. Training stops after ``patience`` evaluations without any member
    improving, or after ``max_steps`` updates; the ensemble ends with each member's best
    weights and without gradients.

    Args:
        ensemble: the members to fit (in place).
        state: ``(n, state_dim)`` inputs.
        instruction: ``(n, embedding_dim)`` instruction embeddings (width 0: none).
        action: ``(n, action_features)`` actions as the trunks take them.
        target: ``(n, target_dim)`` what the members predict.
        done: ``(n,)`` float termination flags.
        generator: the random stream of the hold-out split and the mini-batches.
        lr: Adam learning rate.
        batch_size: rows of each member's mini-batch.
        max_steps: budget of updates (each member sees one mini-batch per update).
        eval_every: updates between hold-out evaluations.
        patience: evaluations without a 1 % improvement before stopping.
        holdout_fraction: share of the rows held out for model selection.
        nll_beta: ``beta`` of :func:`gaussian_nll`: 0 is the plain Gaussian NLL; 1 gives the
            means the squared error's gradients, so hard transitions (a BabyAI pickup) are
            fitted instead of explained away by a large predicted variance.
        progress: show a progress bar over the updates.

    Returns:
        Each member's best hold-out MSE, and the number of updates run.
    """
    n = state.shape[0]
    device = state.device
    perm = torch.randperm(n, generator=generator).to(device)
    n_hold = min(max(1, int(holdout_fraction * n)), 5000, n - 1)
    hold, train = (perm[:n_hold], perm[n_hold:]) if n_hold > 0 else (perm, perm)
    members = len(ensemble)
    best = torch.full((members,), math.inf)
    best_state = copy.deepcopy(ensemble.state_dict())
    optimizer = torch.optim.Adam(ensemble.parameters(), lr=lr)
    stale, steps = 0, 0
    ensemble.requires_grad_(True)
    bar = tqdm(total=max_steps, desc="dynamics ensemble", unit="update", disable=not progress)
    with torch.enable_grad():
        for steps in range(1, max_steps + 1):
            loss = 0.01 * (ensemble.max_logvar.sum() - ensemble.min_logvar.sum())
            for m in range(members):
                draw = torch.randint(len(train), (batch_size,), generator=generator)
                idx = train[draw.to(device)]
                mean, logvar, done_logit = ensemble(m, state[idx], instruction[idx], action[idx])
                nll = gaussian_nll(mean, logvar, target[idx], nll_beta)
                loss = loss + nll + F.binary_cross_entropy_with_logits(done_logit, done[idx])
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            bar.update()
            if steps % eval_every == 0 or steps == max_steps:
                error = ensemble.holdout_error(
                    state[hold], instruction[hold], action[hold], target[hold]
                )
                improved = error < best * 0.99
                if improved.any():
                    stale = 0
                    params = ensemble.state_dict()
                    for m in improved.nonzero().flatten().tolist():
                        best[m] = error[m]
                        for key, value in params.items():
                            if key.startswith((f"trunks.{m}.", f"heads.{m}.")):
                                best_state[key] = value.clone()
                    for key in ("max_logvar", "min_logvar"):
                        best_state[key] = params[key].clone()
                else:
                    stale += 1
                bar.set_postfix(holdout_mse=f"{float(best.min()):.3g}")
                if stale >= patience:
                    break
    bar.close()
    ensemble.load_state_dict(best_state)
    ensemble.requires_grad_(False)
    return best, steps
