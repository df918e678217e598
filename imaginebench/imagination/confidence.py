"""How far each imagined transition may be trusted, computed without the simulator.

Two confidence sources, each a value in ``[0, 1]`` per transition, stored in a dataset as
``confidence/<source>`` (``docs/confidence.md``):

* ``likelihood`` — the grounded LM's own probability of the step: ``exp`` of the
  log-likelihood of its action (every word of an action spelled in words) plus, under a
  categorical state head (BabyAI), of its next state. The decoder records it while imagining
  (:class:`~imaginebench.imagination.decoder.ImaginedRollout`); :func:`lm_step_log_likelihoods`
  recomputes it for an existing file by teacher forcing, window by window as the decoder
  prompts. A model with continuous actions and a regression state head (HalfCheetah) gives
  its steps no likelihood, so this source does not exist for it.
* ``ensemble`` — agreement with a small ensemble of dynamics models fitted on the real data
  only (:class:`~imaginebench.modules.dynamics.DynamicsEnsemble`, COMBO's, without the
  instruction: the physics does not depend on the wording, and imagined wordings are unseen).
  The LM's imagined change of state joins the members' predicted changes as one more member
  of a committee; the committee's spread ``u`` (the root of the summed per-entry variances,
  in units of the real data's per-entry spread of one transition's change) grows both when
  the members disagree (a state-action pair unlike the real data) and when the LM disagrees
  with them (a wrong step). The confidence is ``exp(-u)``.

A new source is a function from a dataset to ``(N,)`` values in ``[0, 1]``, stored with
``RolloutDataset.with_confidence(name, values)``; see ``docs/confidence.md``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor
from tqdm.auto import tqdm

from imaginebench.atomic import atomic_path
from imaginebench.config import as_config
from imaginebench.data.dataset import Episode, RolloutDataset
from imaginebench.data.schema import normalise_action_spec
from imaginebench.envs.base import Task
from imaginebench.modules.backbone import StateInstructionEncoder
from imaginebench.modules.dynamics import SPREAD_FLOOR, DynamicsEnsemble, fit_ensemble
from imaginebench.modules.grounding.sequences import ACTION_TARGET, STATE_TARGET, to_device

LIKELIHOOD = "likelihood"
ENSEMBLE = "ensemble"
CONFIDENCE_SOURCES = (LIKELIHOOD, ENSEMBLE)


def likelihood_confidence(step_log_likelihoods: np.ndarray) -> np.ndarray:
    """``(T,)`` float32 confidence of steps from their log-likelihoods: their probability."""
    return np.exp(np.minimum(np.asarray(step_log_likelihoods, dtype=np.float64), 0.0)).astype(
        np.float32
    )


# -- likelihood of existing rollouts -----------------------------------------------------------
@torch.no_grad()
def teacher_forced_actions(
    module: Any, instruction: str, states: np.ndarray, actions: np.ndarray
) -> np.ndarray:
    """The action head's continuous prediction at every action slot of one generation window
    (``states`` ``(T + 1, D)``, ``actions`` ``(T, A)``), teacher-forced: ``(T, A)``."""
    builder, model = module.builder, module.model
    batch = builder.collate([builder.generation(instruction, states, actions)])
    hidden, _ = model.hidden(model.embed(batch), batch["attention_mask"], batch["position_ids"])
    heads = model.batch_context(hidden[:, :-1], batch)
    at_actions = batch["target"][:, 1:] == ACTION_TARGET
    return model.action_out(heads)[at_actions].float().numpy().reshape(np.shape(actions))


@torch.no_grad()
def lm_step_log_likelihoods(
    module: Any, episodes: Sequence[Episode], batch_size: int = 16, progress: bool = False
) -> list[np.ndarray]:
    """Per episode, ``(T,)`` log-likelihood of each step under a grounding module by teacher
    forcing: the decoder's numbers for rollouts it imagined (same windows, same context).

    Args:
        module: a :class:`~imaginebench.modules.grounding.GroundingModule`.
        episodes: the rollouts to score (their instructions, states and actions).
        batch_size: windows per forward pass.
        progress: show a progress bar over the episodes.
    """
    model, builder = module.model, module.builder
    if not model.has_likelihood:
        raise ValueError(
            "the grounding model gives its steps no likelihood: its actions are continuous "
            "and its state head a regression (use the ensemble confidence instead)"
        )
    model.eval()
    device = next(model.parameters()).device
    window = builder.window
    items, owners = [], []  # one generation item per window, and (episode, first step)
    for e, ep in enumerate(episodes):
        length = len(ep.actions)
        for start in range(0, length, window or max(length, 1)):
            stop = min(length, start + (window or length))
            states, actions = ep.states[start : stop + 1], ep.actions[start:stop]
            items.append(builder.generation(ep.instruction, states, actions, start))
            owners.append((e, start))
    out = [np.zeros(len(ep.actions)) for ep in episodes]
    slots = model.words_per_action + 1  # action words, then the next state
    bar = tqdm(total=len(items), desc="LM likelihood", unit="window", disable=not progress)
    for first in range(0, len(items), batch_size):
        chunk = items[first : first + batch_size]
        batch = to_device(builder.collate(chunk), device)
        values = model.target_log_likelihoods(batch).cpu().numpy()
        targets = batch["target"][:, 1:].cpu().numpy()
        for row, item in enumerate(chunk):
            e, start = owners[first + row]
            scored = np.isin(targets[row], (ACTION_TARGET, STATE_TARGET))
            per_step = values[row][scored].reshape(-1, slots).sum(1)
            out[e][start : start + len(per_step)] = per_step
        bar.update(len(chunk))
    bar.close()
    return out


# -- ensemble disagreement ---------------------------------------------------------------------
@dataclass
class EnsembleConfig:
    """The dynamics ensemble of the ``ensemble`` confidence (fitted on the real data only).

    Args:
        members: dynamics models.
        hidden: hidden layer sizes of each member.
        max_steps: budget of updates (each member sees one mini-batch per update).
        batch_size: rows of each member's mini-batch.
        lr: Adam learning rate.
        eval_every: updates between hold-out evaluations.
        patience: evaluations without a 1 % improvement before stopping.
        holdout_fraction: share of the real transitions held out for model selection.
        nll_beta: beta of the members' beta-NLL loss (0: Gaussian NLL; 1: the means learn
            as with MSE, which discrete jumps such as a BabyAI pickup need; see
            :func:`~imaginebench.modules.dynamics.fit_ensemble`).
        seed: seed of the members' initialisation, the hold-out split and the mini-batches.
        still_measured_on: which transitions tell the entries that barely change (held in
            predicted states): ``in_use`` (default), for each entry the transitions in which it
            is non-zero, so that an entity slot is judged on the tasks that have the entity;
            ``all`` (the rule before 2026-12-06), every transition, which held the entities
            that few training tasks have and move (Meta-World's lock, button and coffee
            button: door-unlock, button-press and coffee-button could not be imagined).
    """

    members: int = 5
    hidden: tuple[int, ...] = (200, 200)
    max_steps: int = 3000
    batch_size: int = 256
    lr: float = 1e-3
    eval_every: int = 100
    patience: int = 5
    holdout_fraction: float = 0.2
    nll_beta: float = 0.0
    seed: int = 0
    still_measured_on: Literal["in_use", "all"] = "in_use"

    def __post_init__(self) -> None:
        self.hidden = tuple(int(h) for h in self.hidden)
        if self.still_measured_on not in ("in_use", "all"):
            raise ValueError(
                f"still_measured_on must be 'in_use' or 'all', got {self.still_measured_on!r}"
            )
        if self.members < 2:
            raise ValueError(f"an ensemble needs members >= 2, got {self.members}")
        if self.max_steps < 1 or self.batch_size < 1 or self.eval_every < 1:
            raise ValueError("max_steps, batch_size and eval_every must be >= 1")
        if not 0.0 <= self.nll_beta <= 1.0:
            raise ValueError(f"nll_beta must be in [0, 1], got {self.nll_beta}")


def entries_that_stay_zero(state: Tensor, next_state: Tensor) -> Tensor:
    """``(D,)`` bool: the entries that are zero in some of the ``(n, D)`` states and never
    leave zero in a transition (a Meta-World task's unused entity slots)."""
    was_zero = state == 0
    return was_zero.any(0) & ~(was_zero & (next_state != 0)).any(0)


def entries_that_barely_change(state: Tensor, next_state: Tensor, in_use: bool = True) -> Tensor:
    """``(D,)`` bool: the entries whose change over the ``(n, D)`` transitions has a spread
    and a mean of at most :data:`SPREAD_FLOOR` (still objects; measured on Meta-World: holding
    only the entries no transition changes at all let the hand of button-press-wall drift
    37 cm in 20 open-loop steps, holding these 2 cm). ``in_use``: each entry measured on the
    transitions in which it is non-zero (before or after), an entry never in use counted as
    still; else on all of them."""
    change = next_state - state
    if not in_use:
        return (change.std(0) <= SPREAD_FLOOR) & (change.mean(0).abs() <= SPREAD_FLOOR)
    used = ((state != 0) | (next_state != 0)).to(change.dtype)
    count = used.sum(0).clamp_min(1.0)
    mean = (change * used).sum(0) / count
    spread = (((change - mean) ** 2 * used).sum(0) / count).sqrt()
    return (spread <= SPREAD_FLOOR) & (mean.abs() <= SPREAD_FLOOR)


class TransitionEnsemble:
    """A dynamics ensemble fitted on real transitions that scores other transitions.

    Args:
        ensemble: the fitted members (targets: changes of state in ``change_std`` units).
        state_mean: per-entry mean of the real states (inputs are standardised with it).
        state_std: per-entry spread of the real states.
        change_std: per-entry spread of one real transition's change of state.
        action_spec: the data's action spec (discrete actions enter one-hot, continuous ones
            scaled to ``[-1, 1]``).
        metrics: what the fit reported (hold-out error, updates).
        zero_stays_zero: ``(D,)`` bool, entries that never leave zero in the real data (a
            Meta-World task's unused entity slots): :meth:`next_states` keeps them at zero
            where they are zero, rather than adding the members' small non-zero mean change.
        barely_changes: ``(D,)`` bool, entries that real transitions leave as they are (the
            spread and the mean of their change at most :data:`SPREAD_FLOOR`: a static
            object's pose, a button's axes it is not pressed along): :meth:`next_states`
            keeps their value.
        context: the domain's ``dynamics_context(task, states, actions) -> (T, K)``
            (:class:`~imaginebench.envs.Domain`): more inputs of every transition that its
            rollout's history determines (Meta-World: the mocap target); ``None``: none.
        context_mean: per-entry mean of the real transitions' context (standardises it).
        context_std: per-entry spread of the real transitions' context.
    """

    def __init__(
        self,
        ensemble: DynamicsEnsemble,
        state_mean: Tensor,
        state_std: Tensor,
        change_std: Tensor,
        action_spec: Mapping[str, Any],
        metrics: dict[str, float] | None = None,
        zero_stays_zero: Tensor | None = None,
        barely_changes: Tensor | None = None,
        context: Callable[[Task, np.ndarray, np.ndarray], np.ndarray] | None = None,
        context_mean: Tensor | None = None,
        context_std: Tensor | None = None,
    ) -> None:
        self.ensemble = ensemble.eval()
        self.context, self.context_mean, self.context_std = context, context_mean, context_std
        self.zero_stays_zero, self.barely_changes = (
            torch.zeros(len(state_mean), dtype=torch.bool)
            if mask is None
            else torch.as_tensor(mask, dtype=torch.bool)
            for mask in (zero_stays_zero, barely_changes)
        )
        self.state_mean, self.state_std, self.change_std = state_mean, state_std, change_std
        self.action_spec = dict(action_spec)
        self.metrics = dict(metrics or {})

    @classmethod
    def fit(
        cls,
        real: RolloutDataset,
        config: EnsembleConfig | Mapping[str, Any] | None = None,
        progress: bool = False,
        context: Callable[[Task, np.ndarray, np.ndarray], np.ndarray] | None = None,
    ) -> TransitionEnsemble:
        """Fit the members on the distinct transitions of ``real`` (a rollout stored once per
        wording is one transition to instruction-blind models; duplicates would also leak
        into the hold-out set); ``context``: the domain's ``dynamics_context``, if any."""
        config = as_config(config, EnsembleConfig, "ensemble") or EnsembleConfig()
        state, next_state = _transition_states(real)
        actions = np.asarray(real.actions).reshape(real.num_transitions, -1)
        extra = dataset_context(real, context) if context is not None else np.zeros((len(state), 0))
        rows = np.concatenate(
            [state.numpy(), actions.astype(np.float32), extra, next_state.numpy()], 1
        )
        distinct = np.sort(np.unique(rows, axis=0, return_index=True)[1])
        if len(distinct) < 2:
            raise ValueError("the real data needs at least 2 distinct transitions for an ensemble")
        index = torch.as_tensor(distinct)
        state, next_state = state[index], next_state[index]
        state_mean, state_std = state.mean(0), state.std(0).clamp_min(SPREAD_FLOOR)
        change_std = (next_state - state).std(0).clamp_min(SPREAD_FLOOR)
        extra = torch.as_tensor(extra, dtype=torch.float32)[index]
        generator = torch.Generator().manual_seed(config.seed)
        ensemble = _new_ensemble(config, real.state_dim, extra.shape[1], real.action_spec)
        scorer = cls(
            ensemble,
            state_mean,
            state_std,
            change_std,
            real.action_spec,
            zero_stays_zero=entries_that_stay_zero(state, next_state),
            barely_changes=entries_that_barely_change(
                state, next_state, config.still_measured_on == "in_use"
            ),
            context=context,
            context_mean=extra.mean(0) if context is not None else None,
            context_std=extra.std(0).clamp_min(SPREAD_FLOOR) if context is not None else None,
        )
        inputs = scorer._features(state, torch.as_tensor(np.asarray(real.actions))[index], extra)
        target = (next_state - state) / change_std
        done = torch.as_tensor(real.terminals, dtype=torch.float32)[index]
        best, steps = fit_ensemble(
            ensemble,
            *inputs,
            target,
            done,
            generator,
            lr=config.lr,
            batch_size=config.batch_size,
            max_steps=config.max_steps,
            eval_every=config.eval_every,
            patience=config.patience,
            holdout_fraction=config.holdout_fraction,
            nll_beta=config.nll_beta,
            progress=progress,
        )
        scorer.metrics = {
            "holdout_mse": float(best.mean()),
            "updates": float(steps),
            "transitions": float(len(distinct)),
        }
        return scorer

    def save(self, path: str | Path) -> None:
        """Write the fitted ensemble (weights, statistics, metrics) to ``path``, atomically;
        :meth:`load` restores it."""
        context_dim = 0 if self.context_mean is None else len(self.context_mean)
        stored = {
            "version": _STORED_VERSION,
            "weights": self.ensemble.state_dict(),
            "state_dim": len(self.state_mean),
            "context_dim": context_dim,
            "statistics": {
                "state_mean": self.state_mean,
                "state_std": self.state_std,
                "change_std": self.change_std,
                "zero_stays_zero": self.zero_stays_zero,
                "barely_changes": self.barely_changes,
                "context_mean": self.context_mean,
                "context_std": self.context_std,
            },
            "action_spec": normalise_action_spec(self.action_spec, str(path)),  # plain JSON
            "metrics": self.metrics,
        }
        with atomic_path(path) as tmp:
            torch.save(stored, tmp)

    @classmethod
    def load(
        cls,
        path: str | Path,
        config: EnsembleConfig,
        context: Callable[[Task, np.ndarray, np.ndarray], np.ndarray] | None = None,
    ) -> TransitionEnsemble:
        """The ensemble :meth:`save` wrote, with members shaped by ``config`` (the one it was
        fitted with) and the domain's ``context`` function."""
        stored = torch.load(path, map_location="cpu", weights_only=True)
        if stored.get("version") != _STORED_VERSION:
            raise ValueError(f"{path}: not a stored ensemble of this version")
        ensemble = _new_ensemble(
            config, stored["state_dim"], stored["context_dim"], stored["action_spec"]
        )
        ensemble.load_state_dict(stored["weights"])
        if stored["context_dim"] > 0 and context is None:
            raise ValueError(f"{path}: stored with a dynamics context; pass the domain's")
        if stored["context_dim"] == 0 and context is not None:
            raise ValueError(f"{path}: stored without a dynamics context")
        return cls(
            ensemble,
            action_spec=stored["action_spec"],
            metrics=stored["metrics"],
            context=context,
            **stored["statistics"],
        )

    def _features(
        self, state: Tensor, actions: Tensor, context: Tensor | np.ndarray | None = None
    ) -> tuple[Tensor, Tensor, Tensor]:
        """The members' inputs for ``(n, D)`` states, ``n`` actions and (with a domain
        context) the ``(n, K)`` context of each transition."""
        if self.action_spec["type"] == "discrete":
            features = F.one_hot(actions.long(), int(self.action_spec["n"])).float()
        else:
            shape = tuple(self.action_spec["shape"])
            low, high = (
                torch.tensor(np.broadcast_to(self.action_spec[k], shape), dtype=torch.float32)
                for k in ("low", "high")
            )
            features = (2 * (actions.float() - low) / (high - low) - 1).flatten(1)
        no_instruction = torch.zeros(len(state), 1)
        inputs = (state - self.state_mean) / self.state_std
        if self.context is not None:
            if context is None:
                raise ValueError("this ensemble models its domain's dynamics context: pass it")
            extra = torch.as_tensor(np.asarray(context), dtype=torch.float32)
            inputs = torch.cat([inputs, (extra - self.context_mean) / self.context_std], 1)
        return inputs, no_instruction, features

    def _held_features(
        self, state: Tensor, actions: Tensor, context: Any = None, hold_unvaried: bool = True
    ) -> tuple[Tensor, Tensor, Tensor]:
        """:meth:`_features`, with every entry that never varies in the real data (spread at
        most :data:`SPREAD_FLOOR`) given at its real mean when ``hold_unvaried``."""
        inputs, instruction, action = self._features(state, actions, context)
        if hold_unvaried:
            inputs[:, : state.shape[1]][:, self.state_std <= SPREAD_FLOOR] = 0.0
        return inputs, instruction, action

    @torch.no_grad()
    def next_states(
        self,
        states: np.ndarray,
        actions: np.ndarray,
        context: np.ndarray | None = None,
        hold_unvaried: bool = True,
        member: int | None = None,
    ) -> np.ndarray:
        """``(n, D)`` float32: the next state of each ``(state, action)`` pair (and its
        ``(n, K)`` domain context, if the ensemble models one), the state plus the members'
        mean predicted change (what ``imagine``'s ``state_model: ensemble`` feeds the LM instead
        of its own state head's prediction; ``member``: that member's change alone); entries
        that the real data never moves from zero stay zero.

        ``hold_unvaried``: an entry that never varies in the real data (its spread at most
        :data:`SPREAD_FLOOR`; a Meta-World entity that no training task has, such as the novel
        tasks' wall) says nothing the members could have learned, so it enters them at its
        real mean instead of many spreads away from it; and an entry that real transitions
        leave as they are (``barely_changes``: the wall, a button's axes it is not pressed
        along) keeps its value. ``False``: every entry as it is (the rule before 2026-12-01, for
        comparison).
        """
        state = torch.as_tensor(np.asarray(states, dtype=np.float32))
        inputs = self._held_features(
            state, torch.as_tensor(np.asarray(actions)), context, hold_unvaried
        )
        means = self.ensemble.means(*inputs)
        if member is not None and not 0 <= member < len(means):
            raise ValueError(f"member {member} of an ensemble of {len(means)}")
        return self._advance(
            state, means.mean(0) if member is None else means[member], hold_unvaried
        )

    @torch.no_grad()
    def step_with_spread(
        self, states: np.ndarray, actions: np.ndarray, context: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """``(n, D)`` next states as :meth:`next_states` gives them and ``(n,)`` the members'
        disagreement about them: ``sqrt(sum over entries of the variance)`` of their predicted
        changes, in units of a real change's spread (what a lookahead penalises)."""
        state = torch.as_tensor(np.asarray(states, dtype=np.float32))
        inputs = self._held_features(state, torch.as_tensor(np.asarray(actions)), context)
        means = self.ensemble.means(*inputs)
        spread = means.var(0, unbiased=False).sum(-1).sqrt().numpy()
        return self._advance(state, means.mean(0)), spread

    def _advance(self, state: Tensor, change: Tensor, hold_unvaried: bool = True) -> np.ndarray:
        """``state`` plus a predicted ``change`` (in change-spread units), with the entries the
        real data never moves from zero kept at zero and, ``hold_unvaried``, the entries it
        barely changes kept as they are."""
        change = change * self.change_std
        change[(state == 0) & self.zero_stays_zero] = 0.0
        if hold_unvaried:
            change[:, self.barely_changes] = 0.0
        return (state + change).numpy()

    @torch.no_grad()
    def member_rollouts(
        self, task: Task, first_state: np.ndarray, actions: np.ndarray
    ) -> np.ndarray:
        """``(M, T + 1, D)`` float32: the ``T`` actions rolled forward from ``first_state`` by
        each of the ``M`` members alone, each fed its own predictions (and the domain context of
        its own rollout so far), as :meth:`next_states` with ``member`` does step by step.
        Where the members disagree about what an action does (a push that may or may not
        reach the object), their rollouts part."""
        actions = np.asarray(actions)
        members = len(self.ensemble)
        rollouts = np.empty((members, len(actions) + 1, len(self.state_mean)), np.float32)
        rollouts[:, 0] = np.asarray(first_state, np.float32)
        for t in range(len(actions)):
            taken = np.repeat(actions[t : t + 1], members, axis=0)
            context = None
            if self.context is not None:
                context = np.stack(
                    [
                        self.context(task, rollouts[m, : t + 1], actions[: t + 1])[-1]
                        for m in range(members)
                    ]
                )
            state = torch.as_tensor(rollouts[:, t])
            inputs = self._held_features(state, torch.as_tensor(taken), context)
            own = self.ensemble.means(*inputs)[torch.arange(members), torch.arange(members)]
            rollouts[:, t + 1] = self._advance(state, own)
        return rollouts

    @torch.no_grad()
    def disagreement(self, dataset: RolloutDataset, chunk: int = 65536) -> np.ndarray:
        """``(N,)``: the spread of the committee of the members' predicted changes of state and
        the dataset's own change, ``sqrt(sum over entries of the variance)`` in units of the
        real data's per-entry spread of a change. The members are judged on the inputs they get
        when they imagine (:meth:`next_states`): an entry the real data never varies enters at
        its real mean. So an entity no real task has (Meta-World's wall) leaves the confidence
        of the steps it takes no part in as it would be without it; where something would
        touch it, the domain's legality rule (the wall is solid) rejects the state instead.
        (Before 2026-12-02 the members saw such an entry as it is, hundreds of spreads off,
        and every step of a scene with it scored 0.)"""
        state, next_state = _transition_states(dataset)
        actions = torch.as_tensor(np.asarray(dataset.actions))
        context = dataset_context(dataset, self.context) if self.context is not None else None
        out = [
            self._disagreement(
                state[rows],
                actions[rows],
                next_state[rows],
                None if context is None else context[rows],
            )
            for rows in (slice(first, first + chunk) for first in range(0, len(state), chunk))
        ]
        return torch.cat(out).numpy() if out else np.zeros(0, dtype=np.float32)

    def _disagreement(
        self, state: Tensor, actions: Tensor, next_state: Tensor, context: Any = None
    ) -> Tensor:
        means = self.ensemble.means(*self._held_features(state, actions, context))
        committee = torch.cat([means, ((next_state - state) / self.change_std)[None]])
        return committee.var(0, unbiased=False).sum(-1).sqrt()

    def confidence(self, dataset: RolloutDataset) -> np.ndarray:
        """``(N,)`` float32 in ``[0, 1]``: ``exp(-disagreement)``."""
        return _confidence(self.disagreement(dataset))

    @torch.no_grad()
    def transition_confidence(
        self,
        states: np.ndarray,
        actions: np.ndarray,
        next_states: np.ndarray,
        context: np.ndarray | None = None,
    ) -> np.ndarray:
        """``(n,)`` float32: :meth:`confidence` of ``n`` single transitions (what the
        ``min_confidence`` filter step judges while imagining; the same number the dataset's
        ``ensemble`` confidence later stores for a kept transition)."""
        spread = self._disagreement(
            torch.as_tensor(np.asarray(states, dtype=np.float32)),
            torch.as_tensor(np.asarray(actions)),
            torch.as_tensor(np.asarray(next_states, dtype=np.float32)),
            context,
        )
        return _confidence(spread.numpy())


def dataset_context(
    dataset: RolloutDataset, context: Callable[[Task, np.ndarray, np.ndarray], np.ndarray]
) -> np.ndarray:
    """``(N, K)``: the domain's dynamics context of every transition of ``dataset``, episode by
    episode (in the order of its transitions)."""
    tasks = [Task.from_spec(spec) for spec in dataset.tasks]
    parts = []
    for i in range(len(dataset)):
        episode = dataset.episode(i)
        task = tasks[dataset.episode_task[i]]
        parts.append(np.asarray(context(task, episode.states[:-1], episode.actions), np.float32))
    return np.concatenate(parts) if parts else np.zeros((0, 0), np.float32)


_STORED_VERSION = 2  # raise when the members' architecture or the stored fields change


def _new_ensemble(
    config: EnsembleConfig, state_dim: int, context_dim: int, action_spec: Mapping[str, Any]
) -> DynamicsEnsemble:
    """Freshly initialised members (seeded by ``config.seed``) for ``state_dim`` states with
    ``context_dim`` context inputs."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(config.seed)
        trunks = [
            StateInstructionEncoder(
                state_dim + context_dim, 1, config.hidden, 1, _action_width(action_spec)
            )
            for _ in range(config.members)
        ]
        return DynamicsEnsemble(trunks, state_dim)


def _confidence(disagreement: np.ndarray) -> np.ndarray:
    return np.exp(-disagreement.astype(np.float64)).astype(np.float32)


def _transition_states(dataset: RolloutDataset) -> tuple[Tensor, Tensor]:
    states = torch.as_tensor(np.asarray(dataset.states, dtype=np.float32))
    before, after = dataset.transition_indices()
    return states[torch.as_tensor(before)], states[torch.as_tensor(after)]


def _action_width(action_spec: Mapping[str, Any]) -> int:
    if action_spec["type"] == "discrete":
        return int(action_spec["n"])
    return int(np.prod(action_spec["shape"]))


def auroc(scores: np.ndarray, positive: np.ndarray) -> float:
    """Area under the ROC curve of ``scores`` for telling ``positive`` rows from the others:
    the probability that a random positive scores above a random negative (ties count half).
    NaN if either class is empty."""
    scores = np.asarray(scores, dtype=np.float64)
    positive = np.asarray(positive, dtype=bool)
    if scores.shape != positive.shape:
        raise ValueError(f"scores {scores.shape} and labels {positive.shape} differ in shape")
    n_pos, n_neg = int(positive.sum()), int((~positive).sum())
    if n_pos == 0 or n_neg == 0:
        return float("nan")
    order = np.argsort(scores, kind="mergesort")
    ranks = np.empty(len(scores))
    sorted_scores = scores[order]
    # average ranks of tied scores (1-based)
    starts = np.flatnonzero(np.r_[True, sorted_scores[1:] != sorted_scores[:-1]])
    ends = np.r_[starts[1:], len(scores)]
    for start, end in zip(starts, ends):
        ranks[order[start:end]] = (start + end + 1) / 2
    return float((ranks[positive].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))
