"""CLEVR-Robot frames from states: the env's MuJoCo scene seen by its ``front`` camera, with the
four walls (invisible in the simulator) drawn as low grey rails."""

from __future__ import annotations

from typing import Any, ClassVar

import mujoco
import numpy as np

from imaginebench.envs.base import Task
from imaginebench.envs.clevr.physics import (
    STATE_DIM,
    TABLE_Z,
    WALL_X,
    WALL_Y_BACK,
    WALL_Y_FRONT,
    ClevrPhysics,
)
from imaginebench.envs.rendering import (
    RolloutRenderer,
    drawable_states,
    frame_steps,
    mujoco_renderer,
    plain_lighting,
)

RAIL_HALF_HEIGHT = 0.02
RAIL_HALF_THICKNESS = 0.008
RAIL_RGBA = np.array([0.35, 0.35, 0.38, 1.0], dtype=np.float32)


def wall_rails() -> list[tuple[np.ndarray, np.ndarray]]:
    """``(centre, half sizes)`` of the four wall rails on the table."""
    z = TABLE_Z + RAIL_HALF_HEIGHT
    mid_y, half_y = (WALL_Y_BACK + WALL_Y_FRONT) / 2, (WALL_Y_BACK - WALL_Y_FRONT) / 2
    t, h = RAIL_HALF_THICKNESS, RAIL_HALF_HEIGHT
    return [(np.array([x, mid_y, z]), np.array([t, half_y + t, h])) for x in (-WALL_X, WALL_X)] + [
        (np.array([0.0, y, z]), np.array([WALL_X + t, t, h])) for y in (WALL_Y_FRONT, WALL_Y_BACK)
    ]


class ClevrRenderer(RolloutRenderer):
    """Places the five balls at the state's positions (at rest, on the table) and renders.

    Any finite positions are drawn as they are: balls past a wall appear beyond its rail,
    overlapping balls interpenetrate (the renderer never steps the physics).

    Args:
        height: frame height in pixels.
        width: frame width in pixels.
    """

    fps: ClassVar[int] = 2

    def __init__(self, height: int = 240, width: int = 320) -> None:
        super().__init__(height, width)
        self.physics = ClevrPhysics()
        self._renderer = mujoco_renderer(self.physics.model, self.height, self.width)

    def render(self, task: Task, states: np.ndarray, steps: Any = None) -> np.ndarray:
        s = drawable_states(states, STATE_DIM, "CLEVR")
        frames = []
        for state in s[frame_steps(steps, len(s))]:
            self.physics.set_state(state)
            self._renderer.update_scene(self.physics.data, camera="front")
            plain_lighting(self._renderer.scene)
            self._add_rails()
            frames.append(self._renderer.render().copy())
        return np.stack(frames)

    def _add_rails(self) -> None:
        scene = self._renderer.scene
        for centre, half in wall_rails():
            if scene.ngeom >= scene.maxgeom:
                return
            mujoco.mjv_initGeom(
                scene.geoms[scene.ngeom],
                mujoco.mjtGeom.mjGEOM_BOX,
                half,
                centre,
                np.eye(3).ravel(),
                RAIL_RGBA,
            )
            scene.ngeom += 1

    def close(self) -> None:
        self._renderer.close()
