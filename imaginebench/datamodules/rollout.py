"""RolloutDataModule: in-memory real and imaginary rollouts, mixed at a fixed ratio per batch.

The environment-free core of every offline RL data module: it takes datasets already in
memory, packs them into :class:`~imaginebench.datamodules.buffer.TransitionBuffer` s and serves
the deterministic, resumable, DDP-sliced :mod:`~imaginebench.datamodules.stream`. Where the
datasets come from (files, collection, environment checks) is the subclasses' business
(:class:`~imaginebench.datamodules.RealImaginaryDataModule`).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any, Literal, cast

import lightning as L
import numpy as np
import torch
from tensordict import TensorDict
from torch import Tensor

from imaginebench.batch import TRANSITION_KEYS, Source, TransitionBatch
from imaginebench.config import as_config
from imaginebench.data.format import RolloutDataset
from imaginebench.datamodules.buffer import TransitionBuffer
from imaginebench.datamodules.stream import MixedBatches, TrainerStream
from imaginebench.datamodules.weighting import ImaginaryWeighting, imaginary_weights

log = logging.getLogger(__name__)

Ratio = float | Literal["pool"]


class RolloutDataModule(L.LightningDataModule):
    """Real and imaginary datasets in memory, served as training batches in which a fraction
    ``ratio`` comes from the imaginary pool. Every transition carries a loss ``weight``: 1 for
    real ones; for imaginary ones 1 or, with ``imaginary_weighting``, a function of their
    stored confidence (those below its threshold are never sampled).

    Batch ``k`` is a pure function of ``(seed, k)``: a run resumed at step ``k`` sees the batches
    an uninterrupted run would. Under DDP every step draws one global batch of ``batch_size *
    world_size`` and each rank takes its slice. The batches hold :class:`TransitionBatch` keys.

    What the algorithms use (:class:`~imaginebench.batch.RolloutData`): ``state_dim``,
    ``action_spec``, ``instructions``, :meth:`state_stats`, :meth:`transitions` and
    :meth:`split`.

    Args:
        real: the real dataset (subclasses that load files pass ``None`` and call
            :meth:`build` in ``setup``).
        imaginary: imaginary datasets, pooled into one.
        ratio: fraction of each batch drawn from the imaginary pool (0 = real only), or
            ``"pool"`` to sample uniformly over all transitions (the original benchmark).
        batch_size: transitions per batch and per process.
        seed: seed of the sampling stream (each rank takes a different slice).
        updates_per_batch: hand the trainer ``K`` consecutive batches at once, stacked into a
            ``(K, batch_size)`` TensorDict; the module makes one gradient update per slice.
            The stream and ``global_step`` (one per update) are unchanged; only Lightning's
            per-batch overhead is paid once per ``K`` updates (default 8; 1 hands over
            single batches). Training still stops at exactly ``max_steps``; step-interval
            checkpoints must be multiples of ``K`` (checked).
        imaginary_weighting: loss weights of imaginary transitions from one of their
            confidence sources (:class:`ImaginaryWeighting` or a dict of its fields:
            ``source``, ``power``, ``threshold``); default: every transition weighs 1.
    """

    def __init__(
        self,
        real: RolloutDataset | None = None,
        imaginary: RolloutDataset | Sequence[RolloutDataset] | None = None,
        ratio: Ratio = 0.5,
        batch_size: int = 256,
        seed: int = 0,
        updates_per_batch: int = 8,
        imaginary_weighting: ImaginaryWeighting | Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__()
        if ratio != "pool" and not (isinstance(ratio, (int, float)) and 0.0 <= ratio <= 1.0):
            raise ValueError(f"ratio must be in [0, 1] or 'pool', got {ratio!r}")
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if updates_per_batch < 1:
            raise ValueError(f"updates_per_batch must be >= 1, got {updates_per_batch}")
        self.ratio, self.batch_size, self.seed = ratio, batch_size, seed
        self.updates_per_batch = updates_per_batch
        self.imaginary_weighting = (
            as_config(imaginary_weighting, ImaginaryWeighting, "imaginary_weighting")
            or ImaginaryWeighting()
        )
        self.weighting_usage: dict[str, Any] = {}
        self.real_dataset = real
        if isinstance(imaginary, RolloutDataset):
            imaginary = [imaginary]
        self.imaginary_datasets = list(imaginary or [])
        self.state_dim: int | None = real.state_dim if real is not None else None
        self.action_spec: dict[str, Any] | None = (
            dict(real.action_spec) if real is not None else None
        )
        self.instructions: list[str] = []
        self.real: TransitionBuffer | None = None  # the real pool (everything with "pool")
        self.imaginary: TransitionBuffer | None = None

    # -- data -------------------------------------------------------------------------------
    def setup(self, stage: str | None = None) -> None:
        if self.real is None:
            if self.real_dataset is None:
                raise ValueError(f"{type(self).__name__} has no real dataset")
            self.build(self.real_dataset, self.imaginary_datasets)

    def build(self, real: RolloutDataset, imaginary: Sequence[RolloutDataset]) -> None:
        """Pack ``real`` and the ``imaginary`` datasets into the sampling pools, with one
        instruction table over all of them (first appearance order)."""
        imaginary = [d for d in imaginary if len(d)]
        table: dict[str, int] = {}
        for d in [real, *imaginary]:
            for s in d.instructions:
                table.setdefault(s, len(table))
        self.instructions = list(table)

        def ids(d: RolloutDataset) -> np.ndarray:
            return np.array([table[s] for s in d.instructions], dtype=np.int64)

        weighting = self.imaginary_weighting
        parts = [
            imaginary_weights(d, weighting, f"imaginary dataset {k}")
            for k, d in enumerate(imaginary)
        ]
        weight = np.concatenate([w for w, _ in parts]) if parts else np.zeros(0, np.float32)
        keep = np.concatenate([k for _, k in parts]) if parts else np.zeros(0, bool)
        self.weighting_usage = {
            "source": weighting.source,
            "power": weighting.power,
            "threshold": weighting.threshold,
            "imaginary_transitions": len(keep),
            "removed_below_threshold": int((~keep).sum()),
            "mean_weight_kept": float(weight[keep].mean()) if keep.any() else None,
        }

        def buffer(d: RolloutDataset, w: np.ndarray, k: np.ndarray) -> TransitionBuffer:
            packed = TransitionBuffer.from_dataset(d, ids(d), None if weighting.uniform else w)
            return packed if k.all() else packed.select(k)

        if self.ratio == "pool":
            pooled = RolloutDataset.concatenate([real, *imaginary]) if imaginary else real
            ones = np.ones(real.num_transitions)
            self.real = buffer(pooled, np.r_[ones, weight], np.r_[ones.astype(bool), keep])
            return
        self.real = TransitionBuffer.from_dataset(real, ids(real))
        if imaginary and keep.any():
            pool = RolloutDataset.concatenate(imaginary) if len(imaginary) > 1 else imaginary[0]
            self.imaginary = buffer(pool, weight, keep)
        elif self.ratio > 0:
            why = "below the confidence threshold" if imaginary else "available"
            log.warning("no imaginary data %s: training on real data only", why)

    def _buffers(self, source: Source) -> list[TransitionBuffer]:
        if source not in ("all", "real", "imaginary"):
            raise ValueError(f"source must be 'all', 'real' or 'imaginary', got {source!r}")
        pools = {"real": [self.real], "imaginary": [self.imaginary]}.get(
            source, [self.real, self.imaginary]
        )
        return [b for b in pools if b is not None]

    def state_stats(self) -> tuple[Tensor, Tensor]:
        """Mean and standard deviation per dimension of the real pool's states."""
        self.setup()
        assert self.real is not None
        states = self.real.states
        return states.mean(0), states.std(0)

    def transitions(self, source: Source = "all") -> TransitionBatch:
        """Every transition of ``source`` (``"all"``: real, then imaginary; with ``ratio
        "pool"`` everything is in the real pool), unnormalised."""
        self.setup()
        parts = [b.gather(torch.arange(len(b))) for b in self._buffers(source)]
        if not parts:
            raise ValueError(f"the data module holds no {source} transitions")
        return cast(TransitionBatch, {k: torch.cat([p[k] for p in parts]) for k in TRANSITION_KEYS})

    # -- batches ----------------------------------------------------------------------------
    def split(self) -> tuple[int, int]:
        """(real, imaginary) transitions per batch and process."""
        if self.ratio == "pool" or self.imaginary is None:
            return self.batch_size, 0
        n_imaginary = int(round(self.batch_size * float(self.ratio)))
        return self.batch_size - n_imaginary, n_imaginary

    def batches(self, start_step: int = 0, rank: int = 0, world_size: int = 1) -> MixedBatches:
        """This rank's stream from batch ``start_step`` on."""
        self.setup()
        n_real, n_imaginary = self.split()
        return MixedBatches(
            self.real, self.imaginary, n_real, n_imaginary, self.seed, start_step, rank, world_size
        )

    def train_dataloader(self) -> TrainerStream:
        return TrainerStream(self)

    def transfer_batch_to_device(
        self, batch: Any, device: torch.device, dataloader_idx: int
    ) -> Any:
        """Skip the copy when the batch already lives on ``device`` (the CPU case: the per-tensor
        ``.to`` costs ~60 us a step)."""
        if isinstance(batch, TensorDict) and batch["state"].device == device:
            return batch
        return super().transfer_batch_to_device(batch, device, dataloader_idx)

    # -- reporting --------------------------------------------------------------------------
    @property
    def bytes_per_transition(self) -> float:
        buffers = self._buffers("all")
        return sum(b.nbytes for b in buffers) / max(sum(len(b) for b in buffers), 1)

    def describe(self) -> str:
        n_real = len(self.real) if self.real else 0
        n_imag = len(self.imaginary) if self.imaginary else 0
        split = self.split()
        return (
            f"{n_real} real + {n_imag} imaginary transitions, "
            f"{len(self.instructions)} instructions, batch {split[0]} real + {split[1]} imaginary, "
            f"{self.bytes_per_transition:.1f} bytes/transition"
        )
