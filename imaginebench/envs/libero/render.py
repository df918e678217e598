"""LIBERO frames from states: the scene posed to each 44-d state, seen by the ``agentview``
camera (the original benchmark's)."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from imaginebench.envs.base import Task
from imaginebench.envs.libero.layout import ENTITIES, STATE_DIM, entity_slice
from imaginebench.envs.libero.scene import Scene
from imaginebench.envs.rendering import RolloutRenderer, drawable_states, frame_steps

IDENTITY_XYZW = np.array([0.0, 0.0, 0.0, 1.0])


def drawable_quaternions(states: np.ndarray) -> np.ndarray:
    """``states`` with each body's quaternion that has (almost) no length, which no rotation
    has, replaced by the identity (imagined or zero-filled states may hold one)."""
    out = np.array(states, dtype=np.float64)
    for entity in ENTITIES:
        quat = slice(entity_slice(entity).start + 3, entity_slice(entity).stop)
        empty = np.linalg.norm(out[:, quat], axis=1) < 1e-6
        out[empty, quat] = IDENTITY_XYZW
    return out


class LiberoRenderer(RolloutRenderer):
    """Writes each state's joint positions into LIBERO's scene (arm, fingers, the four bodies'
    poses; :meth:`Scene.qpos_of`), runs MuJoCo's forward kinematics without stepping, and
    renders the ``agentview`` camera.

    The 44-d state fixes every joint position of the scene, so a frame shows exactly what the
    state says; velocities are not drawn. The hand's stored position and orientation are
    redundant with the arm's joint angles and are not used. Impossible states (objects inside
    each other or the table, joints past their limits) are drawn as stated.

    Args:
        height: frame height in pixels.
        width: frame width in pixels.
    """

    fps: ClassVar[int] = 20  # one control step is 0.05 s: real time

    def __init__(self, height: int = 240, width: int = 320) -> None:
        super().__init__(height, width)
        self.scene = Scene(render=True, render_size=(self.height, self.width))

    def render(self, task: Task, states: np.ndarray, steps: Any = None) -> np.ndarray:
        import mujoco

        s = drawable_quaternions(drawable_states(states, STATE_DIM, "LIBERO"))
        keep = frame_steps(steps, len(s))
        scene, frames = self.scene, []
        for state in s[keep]:
            scene.data.qpos[:] = scene.qpos_of(state)
            scene.data.qvel[:] = 0.0
            mujoco.mj_forward(scene.model, scene.data)
            frames.append(scene.render())
        return np.stack(frames)

    def close(self) -> None:
        self.scene.close()
