"""Meta-World: a Sawyer arm's tabletop manipulation tasks (metaworld 3.1.1, ``-v3``), conditioned
on an instruction, observed as the original benchmark's 91-d entity-slot state."""

from imaginebench.envs.metaworld.env import MetaWorldEnv
from imaginebench.envs.metaworld.suite import MetaWorldTaskSuite

__all__ = ["MetaWorldEnv", "MetaWorldTaskSuite"]
