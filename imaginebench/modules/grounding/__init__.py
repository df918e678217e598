"""LLM grounding (KALM-style): a causal LM fine-tuned to read and write rollouts."""

from imaginebench.modules.grounding.language_models import DEFAULT_LM, load_causal_lm
from imaginebench.modules.grounding.model import GroundedLM
from imaginebench.modules.grounding.module import GroundingModule, LoraSettings, LossWeights
from imaginebench.modules.grounding.sequences import TASK_KINDS, SequenceBuilder

__all__ = [
    "DEFAULT_LM",
    "TASK_KINDS",
    "GroundedLM",
    "GroundingModule",
    "LoraSettings",
    "LossWeights",
    "SequenceBuilder",
    "load_causal_lm",
]
