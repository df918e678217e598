"""Drawing rollouts from their state vectors: the interface each domain's renderer implements.

A renderer sees only what a dataset stores, the task and the states, so a real rollout and an
imagined one are drawn the same way. Imagined states may be slightly illegal (a ball inside a
wall, a colour index out of range, a joint past its limit): a renderer draws what the state says
wherever the scene can show it and never raises on such a state; non-finite entries are replaced
by :func:`drawable_states` first.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, ClassVar, Self

import numpy as np

from imaginebench.envs.base import Task, check_state_array

# Non-finite or huge state entries are drawn as this magnitude at most (far outside every scene).
DRAW_LIMIT = 1e3


def drawable_states(states: Any, state_dim: int, domain: str) -> np.ndarray:
    """``states`` ``(T, state_dim)`` as float64 with NaN replaced by 0 and every entry clipped to
    ``±DRAW_LIMIT``; a clear error for a wrong shape."""
    arr = check_state_array(states, state_dim, domain)
    if arr.ndim != 2 or len(arr) == 0:
        raise ValueError(
            f"{domain} rollout states must have shape (T, {state_dim}), got {arr.shape}"
        )
    arr = np.nan_to_num(arr, nan=0.0, posinf=DRAW_LIMIT, neginf=-DRAW_LIMIT)
    return np.clip(arr, -DRAW_LIMIT, DRAW_LIMIT)


class RolloutRenderer(ABC):
    """Draws a rollout's states as RGB frames of ``height`` x ``width`` pixels.

    Subclasses set ``fps`` (the playback speed that suits the domain's step) and implement
    :meth:`render`; those holding an OpenGL context free it in :meth:`close`. Use as a context
    manager or call :meth:`close`.

    Args:
        height: frame height in pixels.
        width: frame width in pixels.
    """

    fps: ClassVar[int] = 4

    def __init__(self, height: int = 240, width: int = 320) -> None:
        if int(height) < 16 or int(width) < 16:
            raise ValueError(f"frames must be at least 16x16 pixels, got {height}x{width}")
        self.height, self.width = int(height), int(width)

    @abstractmethod
    def render(self, task: Task, states: np.ndarray, steps: Any = None) -> np.ndarray:
        """Frames ``(S, height, width, 3)`` uint8 of the states at indices ``steps`` (default:
        all ``T``) of the rollout ``states`` ``(T, state_dim)`` of ``task`` (index 0 = the
        initial state). The whole rollout is read: a frame may depend on the states before it
        (the distance covered, the way the agent faces)."""

    def close(self) -> None:
        """Free the renderer's resources (an OpenGL context); it cannot render afterwards."""

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def frame_steps(steps: Any, length: int) -> np.ndarray:
    """``steps`` (default: all of ``range(length)``) as an int array, each in ``[0, length)``."""
    if steps is None:
        return np.arange(length)
    index = np.asarray(steps)
    if (
        index.ndim != 1
        or index.dtype.kind not in "iu"
        or not ((0 <= index) & (index < length)).all()
    ):
        raise ValueError(f"steps must be integer indices in [0, {length}), got {steps!r}")
    return index


def plain_lighting(scene: Any) -> None:
    """Switch off shadows and reflections in a ``mujoco.MjvScene``: software OpenGL (Mesa's
    llvmpipe, what headless CPUs render with) draws them 5 to 30 times slower than the rest."""
    import mujoco

    scene.flags[mujoco.mjtRndFlag.mjRND_SHADOW] = False
    scene.flags[mujoco.mjtRndFlag.mjRND_REFLECTION] = False


def mujoco_renderer(model: Any, height: int, width: int) -> Any:
    """A ``mujoco.Renderer`` of ``height`` x ``width`` for ``model``, its offscreen buffer enlarged
    first if the model's is smaller. Headless machines need ``MUJOCO_GL=egl`` (the package's
    default, set on import) or ``osmesa``; see ``docs/rendering.md``."""
    import mujoco

    model.vis.global_.offwidth = max(int(model.vis.global_.offwidth), width)
    model.vis.global_.offheight = max(int(model.vis.global_.offheight), height)
    return mujoco.Renderer(model, height=height, width=width)
