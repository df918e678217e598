"""The batch stream: batch ``k`` is a pure function of ``(seed, k)`` and the rank.

:class:`MixedBatches` draws the batches from a real and an imaginary buffer;
:class:`TrainerStream` is what a data module hands Lightning: it starts at the trainer's step (so
a resumed run sees the batches an uninterrupted one would), slices by rank and stacks
``updates_per_batch`` consecutive batches.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from tensordict import TensorDict
from torch import Tensor

from imaginebench.datamodules.buffer import TransitionBuffer, cat_batches

if TYPE_CHECKING:
    from imaginebench.datamodules.rollout import RolloutDataModule


class MixedBatches:
    """An endless, stateless stream of batches: batch ``k`` is a pure function of
    ``(seed, k)`` and the rank, so a resumed run sees exactly the batches it would have seen.

    Every step draws one *global* batch of ``batch_size * world_size`` transitions (split
    ``ratio`` imaginary / rest real) and each rank takes its own slice: DDP over W ranks samples
    the same transitions as one process with a W times larger batch.
    """

    def __init__(
        self,
        real: TransitionBuffer | None,
        imaginary: TransitionBuffer | None,
        n_real: int,
        n_imaginary: int,
        seed: int,
        start_step: int = 0,
        rank: int = 0,
        world_size: int = 1,
    ) -> None:
        self.real, self.imaginary = real, imaginary
        self.n_real, self.n_imaginary = n_real, n_imaginary
        self.seed, self.start_step = seed, start_step
        self.rank, self.world_size = rank, world_size
        self.generator = torch.Generator()

    def _sources(self) -> list[tuple[TransitionBuffer, int]]:
        return [
            (buffer, n)
            for buffer, n in ((self.real, self.n_real), (self.imaginary, self.n_imaginary))
            if n > 0 and buffer is not None
        ]

    def indices(self, step: int) -> list[Tensor]:
        """This rank's transition indices of batch ``step``, one row per source."""
        # torch's CPU generator keeps 32 bits of a seed: hash (seed, step) into them.
        state = np.random.SeedSequence([self.seed, step]).generate_state(1)[0]
        self.generator.manual_seed(int(state))
        return [
            torch.randint(len(buffer), (self.world_size, n), generator=self.generator)[self.rank]
            for buffer, n in self._sources()
        ]

    def batch(self, step: int) -> TensorDict:
        return self.stacked(step, 1)[0]

    def stacked(self, step: int, k: int) -> TensorDict:
        """Batches ``step .. step + k - 1`` as one ``(k, batch_size)`` TensorDict, gathered
        in one indexing pass per source."""
        rows = [self.indices(step + j) for j in range(k)]
        parts = [
            buffer.gather(torch.stack([r[i] for r in rows]))
            for i, (buffer, _) in enumerate(self._sources())
        ]
        return cat_batches(parts, [k, self.n_real + self.n_imaginary])

    def __iter__(self) -> Iterator[TensorDict]:
        step = self.start_step
        while True:
            yield self.batch(step)
            step += 1


def stacked_batches(batches: MixedBatches, k: int, max_steps: int) -> Iterator[TensorDict]:
    """Endless ``(k, batch_size)`` stacks of consecutive batches; the last stack before
    ``max_steps`` (``-1``: none) is shortened so training stops at exactly ``max_steps``."""
    step = batches.start_step
    while True:
        n = k if max_steps < 0 else max(1, min(k, max_steps - step))
        yield batches.stacked(step, n)
        step += n


def check_checkpoint_intervals(trainer: Any, k: int) -> None:
    """Step-interval checkpoints fire only on steps a batch ends on: multiples of ``k``."""
    for callback in trainer.callbacks:
        every = getattr(callback, "_every_n_train_steps", 0) or 0
        if every % k:
            raise ValueError(
                f"{type(callback).__name__}(every_n_train_steps={every}) is not a multiple of "
                f"the data module's updates_per_batch={k}: its checkpoints would be skipped; "
                "use a multiple or set data.updates_per_batch: 1"
            )


class TrainerStream:
    """Iterable handed to Lightning: starts at the trainer's current step (so ``--ckpt_path``
    resumes the exact stream), slices the global batch by the trainer's rank, and stacks
    ``updates_per_batch`` consecutive batches when asked to."""

    def __init__(self, datamodule: RolloutDataModule) -> None:
        self.datamodule = datamodule

    def __iter__(self) -> Iterator[TensorDict]:
        trainer = self.datamodule.trainer
        start = trainer.global_step if trainer is not None else 0
        rank = trainer.global_rank if trainer is not None else 0
        world = trainer.world_size if trainer is not None else 1
        batches = self.datamodule.batches(start, rank, world)
        k = self.datamodule.updates_per_batch
        if k == 1:
            return iter(batches)
        if trainer is not None:
            check_checkpoint_intervals(trainer, k)
        max_steps = trainer.max_steps if trainer is not None else -1
        return stacked_batches(batches, k, max_steps)
