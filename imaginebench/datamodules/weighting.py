"""How much each imaginary transition counts in training, from its stored confidence.

A data module's ``imaginary_weighting`` (:class:`ImaginaryWeighting`) turns one confidence
source of the imaginary datasets (``confidence/<source>``, ``docs/confidence.md``) into a loss
weight per transition, ``confidence ** power``, and removes from the sampling pool the
transitions whose confidence is below ``threshold``. Real transitions always weigh 1. The
default (no source) weighs every transition 1: uniform mixing.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from imaginebench.data.dataset import RolloutDataset


@dataclass
class ImaginaryWeighting:
    """Loss weights of imaginary transitions from their confidence.

    Args:
        source: the confidence source (``likelihood``, ``ensemble``, ...; ``None``: every
            transition weighs 1).
        power: the weight is ``confidence ** power`` (0: weight 1, e.g. to only filter).
        threshold: transitions whose confidence is below it are never sampled (``None``: all
            are).
    """

    source: str | None = None
    power: float = 1.0
    threshold: float | None = None

    def __post_init__(self) -> None:
        if self.power < 0:
            raise ValueError(f"imaginary_weighting.power must be >= 0, got {self.power}")
        if self.threshold is not None and not 0.0 <= self.threshold <= 1.0:
            raise ValueError(
                f"imaginary_weighting.threshold must be in [0, 1] or null, got {self.threshold}"
            )
        if self.source is None and (self.power != 1.0 or self.threshold is not None):
            raise ValueError(
                "imaginary_weighting: power and threshold need a confidence source "
                "(source: likelihood or ensemble)"
            )

    @property
    def uniform(self) -> bool:
        return self.source is None


def check_confidence_source(dataset: RolloutDataset, source: str, where: str) -> None:
    """Raise a ``ValueError`` (naming ``where``) unless ``dataset`` has confidence ``source``."""
    if source not in dataset.confidence:
        has = ", ".join(sorted(dataset.confidence)) or "none"
        raise ValueError(
            f"{where}: has no confidence {source!r} (it has: {has}) for "
            f"imaginary_weighting.source; compute it with imaginebench score-imaginary "
            f"(docs/confidence.md)"
        )


def imaginary_weights(
    dataset: RolloutDataset, weighting: ImaginaryWeighting, where: str = "imaginary data"
) -> tuple[np.ndarray, np.ndarray]:
    """``(weight, keep)``, both ``(N,)``: each transition's loss weight and whether it stays in
    the sampling pool."""
    n = dataset.num_transitions
    if weighting.uniform:
        return np.ones(n, dtype=np.float32), np.ones(n, dtype=bool)
    check_confidence_source(dataset, weighting.source, where)
    confidence = np.asarray(dataset.confidence[weighting.source], dtype=np.float64)
    weight = np.power(confidence, weighting.power).astype(np.float32)
    keep = (
        confidence >= weighting.threshold
        if weighting.threshold is not None
        else np.ones(n, dtype=bool)
    )
    return weight, keep
