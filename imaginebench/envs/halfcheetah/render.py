"""HalfCheetah frames from states: gymnasium's model set to each state and seen by its ``track``
camera (which follows the body, as gymnasium's renders do)."""

from __future__ import annotations

from typing import Any, ClassVar

import mujoco
import numpy as np

from imaginebench.envs.base import Task
from imaginebench.envs.halfcheetah.physics import DX, STATE_DIM, VELOCITIES, model_path
from imaginebench.envs.rendering import (
    RolloutRenderer,
    drawable_states,
    frame_steps,
    mujoco_renderer,
    plain_lighting,
)


def root_x(states: np.ndarray) -> np.ndarray:
    """``(T,)`` root x of a rollout: the running sum of the stored ``Δx`` from 0 at the start
    (the state's only trace of where the body is)."""
    dx = np.asarray(states, dtype=np.float64)[:, DX].copy()
    dx[0] = 0.0  # the initial state's Δx is 0 by definition
    return np.cumsum(dx)


class HalfCheetahRenderer(RolloutRenderer):
    """Sets ``qpos = [x_t, s[1:9]]`` and ``qvel = s[9:18]`` for each state, ``x_t`` the summed
    ``Δx`` (:func:`root_x`), and renders without stepping the physics.

    The 18-d state determines the whole simulator state but root x, which the ``Δx`` entries
    give up to the start position; the floor's checker pattern moves under the body by exactly
    the distance the rollout says it covered. Out-of-range joint angles are drawn as stated
    (the joint limits are soft constraints that only stepping would enforce).

    Args:
        height: frame height in pixels.
        width: frame width in pixels.
    """

    fps: ClassVar[int] = 20  # one step is 0.05 s: real time

    def __init__(self, height: int = 240, width: int = 320) -> None:
        super().__init__(height, width)
        self.model = mujoco.MjModel.from_xml_path(str(model_path()))
        self.data = mujoco.MjData(self.model)
        self._renderer = mujoco_renderer(self.model, self.height, self.width)

    def render(self, task: Task, states: np.ndarray, steps: Any = None) -> np.ndarray:
        s = drawable_states(states, STATE_DIM, "HalfCheetah")
        keep = frame_steps(steps, len(s))
        frames = []
        for x, state in zip(root_x(s)[keep], s[keep]):
            mujoco.mj_resetData(self.model, self.data)
            self.data.qpos[0] = x
            self.data.qpos[1:] = state[1:9]
            self.data.qvel[:] = state[VELOCITIES]
            mujoco.mj_forward(self.model, self.data)
            self._renderer.update_scene(self.data, camera="track")
            plain_lighting(self._renderer.scene)
            frames.append(self._renderer.render().copy())
        return np.stack(frames)

    def close(self) -> None:
        self._renderer.close()
