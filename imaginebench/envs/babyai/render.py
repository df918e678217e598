"""BabyAI frames from states: the room drawn by minigrid's own tile renderer.

The state holds no facing direction; the agent's triangle points the way it last moved (east
at the start). A carried object is drawn at half size in the corner of the agent's cell.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
from minigrid.core.grid import Grid
from minigrid.core.world_object import Door, WorldObj

from imaginebench.envs.babyai.world import (
    _OBJECT_CLASSES,
    _WALL_TEMPLATE,
    AGENT_COL,
    AGENT_ROW,
    CARRIED_TYPE,
    COLOR_NAMES,
    DOOR_COL,
    DOOR_COLOR,
    DOOR_ROW,
    DOOR_STATE,
    INTERIOR,
    LOCKED,
    MOVES,
    OPEN,
    PICKABLE,
    ROOM_SIZE,
    SLOT,
    STATE_DIM,
    TYPE_IDX,
)
from imaginebench.envs.base import Task
from imaginebench.envs.rendering import RolloutRenderer, drawable_states, frame_steps

BACKGROUND = 40  # grey level of the margin around the square room


def drawable_cells(state: np.ndarray) -> np.ndarray:
    """The state rounded to integers with every field clipped into what can be drawn: colours
    0..5, cells inside the 8x8 room, the door on the east wall, the agent inside the walls."""
    s = np.rint(state).astype(np.int64)
    for k in (*(SLOT[n] for n in PICKABLE), DOOR_COLOR):
        s[k] = np.clip(s[k], 0, len(COLOR_NAMES) - 1)
    for name in PICKABLE:
        cell = slice(SLOT[name] + 1, SLOT[name] + 3)
        s[cell] = np.clip(s[cell], 0, ROOM_SIZE - 1)
    s[DOOR_ROW] = np.clip(s[DOOR_ROW], *INTERIOR)
    s[DOOR_STATE] = np.clip(s[DOOR_STATE], OPEN, LOCKED)
    s[[AGENT_ROW, AGENT_COL]] = np.clip(s[[AGENT_ROW, AGENT_COL]], *INTERIOR)
    return s


def facing(previous: tuple[int, int], current: tuple[int, int], last: int) -> int:
    """minigrid's direction of the move ``previous -> current`` (row, col); ``last`` if the agent
    did not move along one axis."""
    step = (int(np.sign(current[0] - previous[0])), int(np.sign(current[1] - previous[1])))
    for d_row, d_col, direction in MOVES.values():
        if step == (d_row, d_col):
            return direction
    return last


class BabyAIRenderer(RolloutRenderer):
    """Builds minigrid's grid (walls, door, ball, box, key) from each state and renders it with
    minigrid's tiles, centred in the frame.

    Imagined states are drawn after :func:`drawable_cells`: two objects in one cell show the
    later one (ball, box, key order), an object at (0, 0) that the carried slot does not name is
    left out (it is neither on the floor nor held), and an object on a wall cell replaces the
    wall there.

    Args:
        height: frame height in pixels.
        width: frame width in pixels.
    """

    fps: ClassVar[int] = 4

    def render(self, task: Task, states: np.ndarray, steps: Any = None) -> np.ndarray:
        tile = min(self.height, self.width) // ROOM_SIZE
        cells = [drawable_cells(s) for s in drawable_states(states, STATE_DIM, "BabyAI")]
        directions, direction, agent = [], 0, None
        for s in cells:
            position = (int(s[AGENT_ROW]), int(s[AGENT_COL]))
            direction = facing(agent or position, position, direction)
            directions.append(direction)
            agent = position
        keep = frame_steps(steps, len(cells))
        return np.stack([self._frame(cells[t], directions[t], tile) for t in keep])

    def _frame(self, s: np.ndarray, direction: int, tile: int) -> np.ndarray:
        grid = Grid(ROOM_SIZE, ROOM_SIZE)
        grid.grid = list(_WALL_TEMPLATE)
        state = int(s[DOOR_STATE])
        door = Door(COLOR_NAMES[s[DOOR_COLOR]], is_open=state == OPEN, is_locked=state == LOCKED)
        grid.set(DOOR_COL, int(s[DOOR_ROW]), door)
        carried: WorldObj | None = None
        for name in PICKABLE:
            k = SLOT[name]
            obj = _OBJECT_CLASSES[name](COLOR_NAMES[s[k]])
            if s[CARRIED_TYPE] == TYPE_IDX[name]:
                carried = obj
            elif (s[k + 1], s[k + 2]) != (0, 0):
                grid.set(int(s[k + 2]), int(s[k + 1]), obj)
        row, col = int(s[AGENT_ROW]), int(s[AGENT_COL])
        room = grid.render(tile, (col, row), direction)
        if carried is not None:
            half = tile // 2
            icon = Grid.render_tile(carried, tile_size=half)
            room[
                (row + 1) * tile - half : (row + 1) * tile,
                (col + 1) * tile - half : (col + 1) * tile,
            ] = icon
        frame = np.full((self.height, self.width, 3), BACKGROUND, dtype=np.uint8)
        top, left = (self.height - room.shape[0]) // 2, (self.width - room.shape[1]) // 2
        frame[top : top + room.shape[0], left : left + room.shape[1]] = room
        return frame
