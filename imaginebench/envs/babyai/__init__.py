"""BabyAI: one minigrid room with a ball, a box, a key and a door, conditioned on an instruction."""

from imaginebench.envs.babyai.env import BabyAIEnv
from imaginebench.envs.babyai.suite import BabyAITaskSuite

__all__ = ["BabyAIEnv", "BabyAITaskSuite"]
