"""ImagineBench: offline RL from real and LLM-imagined rollouts, on PyTorch Lightning."""

import os as _os

# MuJoCo rendering on headless machines (set before mujoco is imported; users may override).
_os.environ.setdefault("MUJOCO_GL", "egl")

__version__ = "0.1.0"

from imaginebench import envs  # noqa: E402  (registers the gymnasium ids)

__all__ = ["__version__", "envs"]
