"""Data modules: rollouts in memory, mixed per batch (:class:`RolloutDataModule`, and
:class:`RealImaginaryDataModule` over a domain's files); grounding references."""

from imaginebench.batch import PreparedBatch, RolloutData, TransitionBatch
from imaginebench.data.collect import CollectConfig
from imaginebench.datamodules.grounding import GroundingDataModule
from imaginebench.datamodules.real_imaginary import RealImaginaryDataModule
from imaginebench.datamodules.rollout import RolloutDataModule
from imaginebench.datamodules.weighting import ImaginaryWeighting

__all__ = [
    "CollectConfig",
    "GroundingDataModule",
    "ImaginaryWeighting",
    "PreparedBatch",
    "RealImaginaryDataModule",
    "RolloutData",
    "RolloutDataModule",
    "TransitionBatch",
]
