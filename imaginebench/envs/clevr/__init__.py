"""CLEVR-Robot: five balls pushed on a table, conditioned on a natural-language instruction."""

from imaginebench.envs.clevr.env import ClevrEnv
from imaginebench.envs.clevr.suite import ClevrTaskSuite

__all__ = ["ClevrEnv", "ClevrTaskSuite"]
