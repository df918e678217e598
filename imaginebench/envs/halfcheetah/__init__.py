"""HalfCheetah: gymnasium's MuJoCo cheetah running and jumping, conditioned on an instruction."""

from imaginebench.envs.halfcheetah.env import HalfCheetahEnv
from imaginebench.envs.halfcheetah.suite import HalfCheetahTaskSuite

__all__ = ["HalfCheetahEnv", "HalfCheetahTaskSuite"]
