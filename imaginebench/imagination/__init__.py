"""Imagination: decoding rollouts with a grounded LM, judging their quality, writing datasets."""

from imaginebench.imagination.decoder import DecodingConfig, ImaginedRollout, Imaginer, to_episode

__all__ = ["DecodingConfig", "ImaginedRollout", "Imaginer", "to_episode"]
