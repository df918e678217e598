"""Data modules: real and imaginary rollouts in memory, mixed per batch."""

from imaginebench.datamodules.real_imaginary import CollectConfig, RealImaginaryDataModule

__all__ = ["CollectConfig", "RealImaginaryDataModule"]
