"""RealImaginaryDataModule: a domain's real and imaginary dataset files, mixed per batch."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from imaginebench.config import as_config
from imaginebench.data.collect import CollectConfig
from imaginebench.data.format import RolloutDataset
from imaginebench.data.shipped import resolve_data_path
from imaginebench.datamodules.rollout import RolloutDataModule
from imaginebench.datamodules.sources import (
    default_cache_dir,
    domain_spec,
    ensure_real_dataset,
    load_imaginary_dataset,
    load_real_dataset,
    real_dataset_path,
)
from imaginebench.datamodules.weighting import ImaginaryWeighting, check_confidence_source

log = logging.getLogger(__name__)


class RealImaginaryDataModule(RolloutDataModule):
    """Loads one real dataset and any number of imaginary ones into in-memory buffers and
    yields training batches in which a fraction ``ratio`` comes from the imaginary pool.

    Args:
        domain: environment domain of the data (``clevr``, ...).
        real: path of the real dataset; if the file is missing and ``collect`` is set, the
            expert collects it there once (with ``real=None``: into ``cache_dir``, named after
            the collection config).
        imaginary: paths of imaginary datasets (``shipped:<domain>/<file>`` names a dataset
            shipped with the package); a missing file is an error unless
            ``imaginary_optional``.
            Imaginary episodes with non-finite values or states outside the environment's
            bounds (plus ``state_margin``) are dropped and counted.
        ratio: fraction of each batch drawn from the imaginary pool (0 = real only), or
            ``"pool"`` to sample uniformly over all transitions (the original benchmark).
        batch_size: transitions per batch and per process.
        seed: seed of the sampling stream (each rank takes a different slice).
        collect: how to collect missing real data, a :class:`CollectConfig` or a dict of its
            fields (None: raise instead).
        cache_dir: where collected data goes (default ``$IMAGINEBENCH_CACHE`` or
            ``~/.cache/imaginebench``).
        state_margin: tolerance around the environment's state bounds for imaginary data.
        imaginary_optional: skip missing imaginary files with a warning instead of failing.
            What was used in the end (files, episodes kept and dropped, the effective ratio) is
            in :attr:`usage`, which ``results.json`` records.
        updates_per_batch: consecutive batches handed to the trainer at once, one gradient
            update each (as in :class:`RolloutDataModule`; default 8).
        imaginary_weighting: loss weights of imaginary transitions from a confidence source
            stored in the imaginary files (``source``, ``power``, ``threshold``; as in
            :class:`RolloutDataModule`; default: every transition weighs 1).
    """

    def __init__(
        self,
        domain: str = "clevr",
        real: str | None = None,
        imaginary: list[str] | None = None,
        ratio: float | Literal["pool"] = 0.5,
        batch_size: int = 256,
        seed: int = 0,
        collect: CollectConfig | Mapping[str, Any] | None = None,
        cache_dir: str | None = None,
        state_margin: float = 0.05,
        updates_per_batch: int = 8,
        imaginary_optional: bool = False,
        imaginary_weighting: ImaginaryWeighting | Mapping[str, Any] | None = None,
    ) -> None:
        collect = as_config(collect, CollectConfig, "collect")
        imaginary_weighting = as_config(
            imaginary_weighting, ImaginaryWeighting, "imaginary_weighting"
        )
        super().__init__(
            ratio=ratio,
            batch_size=batch_size,
            seed=seed,
            updates_per_batch=updates_per_batch,
            imaginary_weighting=imaginary_weighting,
        )
        self.save_hyperparameters()  # after the conversion: records the CollectConfig
        self.spec = domain_spec(domain)
        self.domain, self.real_path = domain, real
        self.imaginary_paths = list(imaginary or [])
        self.collect = collect
        self.cache_dir = Path(cache_dir) if cache_dir else default_cache_dir()
        self.state_margin = state_margin
        self.imaginary_optional = imaginary_optional
        self.state_dim = self.spec.state_dim
        self.action_spec = dict(self.spec.action_spec)
        self.dropped: dict[str, int] = {}
        self.usage: dict[str, Any] = {}

    # -- files ------------------------------------------------------------------------------
    def resolved_real_path(self) -> Path:
        return real_dataset_path(self.domain, self.real_path, self.collect, self.cache_dir)

    def prepare_data(self) -> None:
        """Collect the real dataset if it is missing (runs once, on global rank 0)."""
        ensure_real_dataset(self.domain, self.resolved_real_path(), self.collect)

    def setup(self, stage: str | None = None) -> None:
        if self.real is not None:
            return
        real_path = self.resolved_real_path()
        real = load_real_dataset(self.domain, real_path, self.collect, self.spec)
        imaginary: list[RolloutDataset] = []
        files = []
        for p in self.imaginary_paths:
            path = resolve_data_path(p)
            d, dropped = load_imaginary_dataset(
                self.domain, path, self.spec, self.state_margin, self.imaginary_optional
            )
            if d is not None:
                self.dropped[str(path)] = dropped
            kept = len(d) if d is not None else 0
            files.append(
                {
                    "file": str(path),
                    "found": d is not None,
                    "episodes_kept": kept,
                    "episodes_dropped": dropped,
                }
            )
            if kept:
                if not self.imaginary_weighting.uniform:
                    check_confidence_source(d, self.imaginary_weighting.source, str(path))
                imaginary.append(d)
        self.build(real, imaginary)
        if self.ratio == "pool":
            n_imaginary = sum(d.num_transitions for d in imaginary)
            effective = n_imaginary / (real.num_transitions + n_imaginary)
        else:
            effective = self.split()[1] / self.batch_size
        self.usage = {
            "real": {"file": str(real_path), "episodes": len(real)},
            "imaginary": files,
            "effective_ratio": effective,
            "imaginary_weighting": self.weighting_usage,
        }
        log.info(self.describe())

    # -- evaluation ---------------------------------------------------------------------------
    def val_dataloader(self) -> list[int]:
        """One dummy batch: ``trainer.validate`` evaluation happens in the evaluation callback."""
        return [0]

    def test_dataloader(self) -> list[int]:
        """One dummy batch: ``trainer.test`` evaluation happens in the evaluation callback."""
        return [0]

    def describe(self) -> str:
        return f"{self.domain}: {super().describe()}, dropped {self.dropped or 'none'}"
