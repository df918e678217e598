"""Data modules: real and imaginary rollouts in memory, mixed per batch; grounding references."""

from imaginebench.datamodules.grounding import GroundingDataModule
from imaginebench.datamodules.real_imaginary import CollectConfig, RealImaginaryDataModule

__all__ = ["CollectConfig", "GroundingDataModule", "RealImaginaryDataModule"]
