"""Pieces several algorithms share.

* :class:`StochasticModule` — an :class:`OfflineRLModule` with its own seeded random stream,
  saved in checkpoints so that a resumed run draws exactly what an uninterrupted run would, plus
  tanh-Gaussian sampling from it.
* :func:`make_trunk` — a fresh state + instruction trunk sized from a module's settings.
* :func:`expectile_loss` — the asymmetric squared loss of IQL.
* :func:`dataset_transitions` — every transition of a data module, for algorithms that index or
  model the whole dataset (PRDC, COMBO).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from imaginebench.batch import RolloutData, TransitionBatch
from imaginebench.modules.backbone import GaussianHead, StateInstructionEncoder
from imaginebench.modules.offline.base import OfflineRLModule, weighted_mean


def make_trunk(module: OfflineRLModule, extra_dim: int = 0) -> StateInstructionEncoder:
    """A new trunk over ``[state ‖ Linear(instruction) ‖ extra]`` with the module's sizes."""
    return StateInstructionEncoder(
        module.state_dim, module.embedding_dim, module.hidden, module.instruction_dim, extra_dim
    )


def expectile_loss(diff: Tensor, expectile: float, weight: Tensor | None = None) -> Tensor:
    """``mean(|expectile - 1(diff < 0)| * diff^2)`` with ``diff = target - prediction``, each
    sample counted ``weight[i]`` times if given (:func:`weighted_mean`)."""
    asymmetry = torch.where(diff > 0, expectile, 1.0 - expectile)
    return weighted_mean(asymmetry * diff.pow(2), weight)


def dataset_transitions(datamodule: RolloutData) -> TransitionBatch:
    """All transitions of the data module (real, then imaginary), unnormalised."""
    return datamodule.transitions("all")


def _rank_rows(trainer: Any, n: int) -> Tensor:
    """This rank's rows of a draw for the ``world * n`` rows of the global batch. The data
    module's global batch holds every rank's real rows, then every rank's imaginary rows, and a
    rank trains on its slice of each (``split()`` per rank): a draw of ``n`` rows takes the same
    rows, so each transition gets the draw it gets in one process with the larger batch. Other
    row counts take the rank's contiguous slice."""
    rank, world = trainer.global_rank, trainer.world_size
    split = getattr(getattr(trainer, "datamodule", None), "split", None)
    sizes = split() if callable(split) else (n,)
    if sum(sizes) != n:
        sizes = (n,)
    starts = [world * sum(sizes[:i]) + rank * size for i, size in enumerate(sizes)]
    return torch.cat([torch.arange(start, start + size) for start, size in zip(starts, sizes)])


class StochasticModule(OfflineRLModule):
    """Base of algorithms that sample during training (noise, actions, mini-batches).

    Subclasses call :meth:`seed_sampling` in ``__init__``; all training-time randomness then
    comes from ``self.generator``, whose state is part of every checkpoint. Evaluation
    (``policy``) never draws from it, so evaluating mid-run does not change training.

    Draws for the rows of a batch pass ``split=True``: with DDP every rank then draws the
    values of the *global* batch and keeps its own slice (as the data module slices one global
    batch), so ranks get different noise while their generators stay in lockstep. Other draws
    (e.g. COMBO's rollouts) are the same on every rank.
    """

    generator: torch.Generator

    def seed_sampling(self, seed: int) -> None:
        self.generator = torch.Generator().manual_seed(int(seed))

    def _draw(
        self, sample: Callable[[tuple[int, ...]], Tensor], shape: tuple[int, ...], split: bool
    ) -> Tensor:
        trainer = self._trainer
        world = trainer.world_size if trainer is not None and split else 1
        if world == 1:
            return sample(shape)
        return sample((world * shape[0], *shape[1:]))[_rank_rows(trainer, shape[0])]

    def normal(self, shape: tuple[int, ...], device: torch.device, split: bool = False) -> Tensor:
        draw = self._draw(lambda sh: torch.randn(sh, generator=self.generator), shape, split)
        return draw.to(device)

    def uniform(self, shape: tuple[int, ...], device: torch.device, split: bool = False) -> Tensor:
        """Uniform in ``[-1, 1)``."""
        draw = self._draw(lambda sh: torch.rand(sh, generator=self.generator), shape, split)
        return (draw * 2 - 1).to(device)

    def randint(self, high: int, size: int, device: torch.device, split: bool = False) -> Tensor:
        draw = self._draw(
            lambda sh: torch.randint(high, sh, generator=self.generator), (size,), split
        )
        return draw.to(device)

    def tanh_gaussian(
        self, head: GaussianHead, state: Tensor, instruction: Tensor, split: bool = False
    ) -> tuple[Tensor, Tensor]:
        """Reparameterised tanh-Gaussian sample of ``head`` and its log-probability."""
        mean, std = head.distribution(state, instruction)
        pre = mean + std * self.normal(tuple(mean.shape), mean.device, split)
        log_prob = (-0.5 * ((pre - mean) / std) ** 2 - std.log() - 0.5 * math.log(2 * math.pi)).sum(
            -1
        )
        log_prob = log_prob - (2 * (math.log(2) - pre - F.softplus(-2 * pre))).sum(-1)
        return torch.tanh(pre), log_prob

    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        checkpoint["sampling_generator"] = self.generator.get_state()

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        super().on_load_checkpoint(checkpoint)
        if "sampling_generator" in checkpoint:
            self.generator.set_state(checkpoint["sampling_generator"])
