"""The BabyAI room: the 17-integer symbolic state, its legality, and the one implementation of
the dynamics (on a minigrid :class:`~minigrid.core.grid.Grid`).

State layout (integers stored as float32; rows/cols are 0..7 with the interior 1..6):

====== ==========================================================================
index  meaning
====== ==========================================================================
0-2    ball colour, ball row, ball col
3-5    box colour, box row, box col
6-8    key colour, key row, key col
9-12   door colour, door row, door col (always 7), door state (0 open, 1 closed, 2 locked)
13-14  agent row, agent col
15-16  carried object (type index, colour index); (0, 0) when the hands are empty
====== ==========================================================================

A carried object's own position is reported as (0, 0). Colour and type indices are minigrid's
``COLOR_TO_IDX`` (red 0, green 1, blue 2, purple 3, yellow 4, grey 5) and ``OBJECT_TO_IDX``
(door 4, key 5, ball 6, box 7).

Actions (the original benchmark's numbering, absolute directions): 0 move left (-col), 1 move
right (+col), 2 move up (-row), 6 move down (+row), 3 pick up the object in the agent's own cell
(hands empty only), 4 drop the carried object into the own cell (if no object lies there), 5
toggle a door in the 4-neighbourhood (minigrid's door rules). The agent may share a cell with
the ball, box or key; walls and the door cell (open or not) block it.
"""

from __future__ import annotations

from enum import IntEnum

import numpy as np
from minigrid.core.constants import COLOR_TO_IDX, OBJECT_TO_IDX
from minigrid.core.grid import Grid
from minigrid.core.world_object import Ball, Box, Door, Key, Wall, WorldObj

STATE_DIM = 17
ROOM_SIZE = 8
INTERIOR = (1, 6)  # inclusive bounds of interior rows and columns
DOOR_COL = 7
MAX_STEPS = 128

COLOR_NAMES: tuple[str, ...] = tuple(sorted(COLOR_TO_IDX, key=COLOR_TO_IDX.__getitem__))
PICKABLE: tuple[str, ...] = ("ball", "box", "key")  # in state order
TYPE_IDX: dict[str, int] = {t: OBJECT_TO_IDX[t] for t in ("door", "key", "ball", "box")}
IDX_TYPE: dict[int, str] = {i: t for t, i in TYPE_IDX.items()}

# Slot offsets (colour, row, col) of the pickable objects, and of the other fields.
SLOT: dict[str, int] = {"ball": 0, "box": 3, "key": 6}
DOOR_COLOR, DOOR_ROW, DOOR_COL_IDX, DOOR_STATE = 9, 10, 11, 12
AGENT_ROW, AGENT_COL = 13, 14
CARRIED_TYPE, CARRIED_COLOR = 15, 16
OPEN, CLOSED, LOCKED = 0, 1, 2


class Action(IntEnum):
    """The seven actions, numbered as in the original benchmark."""

    LEFT = 0
    RIGHT = 1
    UP = 2
    PICKUP = 3
    DROP = 4
    TOGGLE = 5
    DOWN = 6


NUM_ACTIONS = len(Action)
# (d_row, d_col) and the minigrid facing direction (0 east, 1 south, 2 west, 3 north).
MOVES: dict[int, tuple[int, int, int]] = {
    Action.LEFT: (0, -1, 2),
    Action.RIGHT: (0, 1, 0),
    Action.UP: (-1, 0, 3),
    Action.DOWN: (1, 0, 1),
}
_OBJECT_CLASSES = {"ball": Ball, "box": Box, "key": Key}
_WALL = Wall()  # walls carry no state, so one instance serves every border cell
_WALL_TEMPLATE: list[WorldObj | None] = [
    _WALL if r in (0, ROOM_SIZE - 1) or c in (0, ROOM_SIZE - 1) else None
    for r in range(ROOM_SIZE)
    for c in range(ROOM_SIZE)
]


def compose_state(
    ball: tuple[str | int, int, int],
    box: tuple[str | int, int, int],
    key: tuple[str | int, int, int],
    door: tuple[str | int, int, int],
    agent: tuple[int, int],
    carried: str | None = None,
) -> np.ndarray:
    """Build a state: ``(colour, row, col)`` per object, door ``(colour, row, door state)``,
    agent ``(row, col)``; ``carried`` names the held object (its position becomes (0, 0)).
    Colours may be names or indices. The result is not validated."""

    def colour(c: str | int) -> int:
        return COLOR_TO_IDX[c] if isinstance(c, str) else int(c)

    s = np.zeros(STATE_DIM, dtype=np.float32)
    for name, (c, row, col) in zip(PICKABLE, (ball, box, key)):
        s[SLOT[name] : SLOT[name] + 3] = colour(c), row, col
    s[DOOR_COLOR : DOOR_STATE + 1] = colour(door[0]), door[1], DOOR_COL, door[2]
    s[AGENT_ROW], s[AGENT_COL] = agent
    if carried is not None:
        s[SLOT[carried] + 1 : SLOT[carried] + 3] = 0
        s[CARRIED_TYPE], s[CARRIED_COLOR] = TYPE_IDX[carried], s[SLOT[carried]]
    return s


# ----------------------------------------------------------------------------------------------
# Legality
# ----------------------------------------------------------------------------------------------
def _interior(x: np.ndarray) -> np.ndarray:
    return (x >= INTERIOR[0]) & (x <= INTERIOR[1])


def state_violations(states: np.ndarray) -> dict[str, np.ndarray]:
    """Which legality rules each state ``(..., 17)`` breaks: ``{rule: (...) bool}``."""
    raw = np.asarray(states, dtype=np.float64)
    if raw.shape[-1] != STATE_DIM:
        raise ValueError(f"BabyAI states must have {STATE_DIM} entries, got shape {raw.shape}")
    finite = np.isfinite(raw).all(axis=-1)
    s = np.rint(np.nan_to_num(raw, nan=-1.0, posinf=-1.0, neginf=-1.0))
    integral = finite & (np.abs(raw - s) <= 1e-3).all(axis=-1)
    s = s.astype(np.int64)
    colours = s[..., [0, 3, 6, DOOR_COLOR]]
    out = {
        "not finite integers": ~integral,
        "colour outside 0..5": ((colours < 0) | (colours >= len(COLOR_NAMES))).any(axis=-1),
        "door state outside 0..2": (s[..., DOOR_STATE] < 0) | (s[..., DOOR_STATE] > 2),
        "door not on the east wall (col 7, row 1..6)": (s[..., DOOR_COL_IDX] != DOOR_COL)
        | ~_interior(s[..., DOOR_ROW]),
        "agent outside the interior": ~(
            _interior(s[..., AGENT_ROW]) & _interior(s[..., AGENT_COL])
        ),
    }
    ctype, ccolour = s[..., CARRIED_TYPE], s[..., CARRIED_COLOR]
    at_origin = []
    bad_place = np.zeros(s.shape[:-1], dtype=bool)
    bad_carry = ~np.isin(ctype, [0, *(TYPE_IDX[t] for t in PICKABLE)])
    bad_carry |= (ctype == 0) & (ccolour != 0)
    for name in PICKABLE:
        k = SLOT[name]
        row, col = s[..., k + 1], s[..., k + 2]
        origin = (row == 0) & (col == 0)
        carried = ctype == TYPE_IDX[name]
        at_origin.append(origin)
        bad_place |= ~origin & ~(_interior(row) & _interior(col))
        bad_carry |= origin != carried
        bad_carry |= carried & (ccolour != s[..., k])
    out["object outside the interior"] = bad_place
    out["carried slot does not match the object at (0, 0)"] = bad_carry
    out["more than one object carried"] = np.sum(at_origin, axis=0) > 1
    cells = [s[..., SLOT[n] + 1] * ROOM_SIZE + s[..., SLOT[n] + 2] for n in PICKABLE]
    clash = np.zeros(s.shape[:-1], dtype=bool)
    for i in range(3):
        for j in range(i + 1, 3):
            clash |= (cells[i] == cells[j]) & ~at_origin[i] & ~at_origin[j]
    out["two objects in one cell"] = clash
    return out


def legal_states(states: np.ndarray) -> np.ndarray:
    """``(...)`` bool: the states ``(..., 17)`` are physically possible."""
    return ~np.any(list(state_violations(states).values()), axis=0)


def check_state(state: np.ndarray) -> np.ndarray:
    """The state as an ``int64`` vector, or a ``ValueError`` naming every broken rule."""
    arr = np.asarray(state, dtype=np.float64)
    if arr.shape != (STATE_DIM,):
        raise ValueError(f"a BabyAI state must be {STATE_DIM} numbers, got shape {arr.shape}")
    broken = [rule for rule, bad in state_violations(arr).items() if bool(bad)]
    if broken:
        raise ValueError(f"illegal BabyAI state {arr.tolist()}: {'; '.join(broken)}")
    return np.rint(arr).astype(np.int64)


# ----------------------------------------------------------------------------------------------
# The world on a minigrid grid
# ----------------------------------------------------------------------------------------------
class BabyAIWorld:
    """The room held in a minigrid :class:`Grid` (walls, door, ball, box, key) plus the agent.

    ``carrying`` is the held :class:`WorldObj` (named so for minigrid's ``Door.toggle``).
    """

    def __init__(self, state: np.ndarray, validate: bool = True) -> None:
        self.set_state(state, validate=validate)

    def set_state(self, state: np.ndarray, validate: bool = True) -> None:
        s = check_state(state) if validate else np.rint(np.asarray(state)).astype(np.int64)
        s = [int(v) for v in s]
        self.grid = Grid(ROOM_SIZE, ROOM_SIZE)
        self.grid.grid = list(_WALL_TEMPLATE)
        self.objects: dict[str, WorldObj] = {}
        self.positions: dict[str, tuple[int, int] | None] = {}  # (row, col); None when carried
        self.carrying: WorldObj | None = None
        for name in PICKABLE:
            k = SLOT[name]
            obj = _OBJECT_CLASSES[name](COLOR_NAMES[s[k]])
            self.objects[name] = obj
            if s[CARRIED_TYPE] == TYPE_IDX[name]:
                self.carrying, self.positions[name] = obj, None
            else:
                self.positions[name] = (s[k + 1], s[k + 2])
                self.grid.set(s[k + 2], s[k + 1], obj)
        state_ = s[DOOR_STATE]
        self.door = Door(COLOR_NAMES[s[DOOR_COLOR]], state_ == OPEN, state_ == LOCKED)
        self.door_row = s[DOOR_ROW]
        self.grid.set(DOOR_COL, self.door_row, self.door)
        self.agent = (s[AGENT_ROW], s[AGENT_COL])
        self.agent_dir = 0  # facing east; only used for drawing

    def state(self) -> np.ndarray:
        """The 17-d float32 state vector."""
        s = [0] * STATE_DIM
        for name in PICKABLE:
            k = SLOT[name]
            s[k] = COLOR_TO_IDX[self.objects[name].color]
            pos = self.positions[name]
            if pos is not None:
                s[k + 1], s[k + 2] = pos
        door = self.door
        s[DOOR_COLOR] = COLOR_TO_IDX[door.color]
        s[DOOR_ROW], s[DOOR_COL_IDX] = self.door_row, DOOR_COL
        s[DOOR_STATE] = OPEN if door.is_open else (LOCKED if door.is_locked else CLOSED)
        s[AGENT_ROW], s[AGENT_COL] = self.agent
        if self.carrying is not None:
            s[CARRIED_TYPE] = TYPE_IDX[self.carrying.type]
            s[CARRIED_COLOR] = COLOR_TO_IDX[self.carrying.color]
        return np.asarray(s, dtype=np.float32)

    def step(self, action: int) -> None:
        """Apply one action in place (see the module docstring for the rules)."""
        action = int(action)
        row, col = self.agent
        if action in MOVES:
            d_row, d_col, facing = MOVES[action]
            self.agent_dir = facing
            target = self.grid.get(col + d_col, row + d_row)
            if not isinstance(target, (Wall, Door)):  # ball/box/key cells may be shared
                self.agent = (row + d_row, col + d_col)
        elif action == Action.PICKUP:
            obj = self.grid.get(col, row)
            if self.carrying is None and obj is not None and obj.can_pickup():
                self.carrying = obj
                self.positions[obj.type] = None
                self.grid.set(col, row, None)
        elif action == Action.DROP:
            if self.carrying is not None and self.grid.get(col, row) is None:
                self.grid.set(col, row, self.carrying)
                self.positions[self.carrying.type] = (row, col)
                self.carrying = None
        elif action == Action.TOGGLE:
            for d_row, d_col, _ in MOVES.values():
                cell = self.grid.get(col + d_col, row + d_row)
                if isinstance(cell, Door):
                    cell.toggle(self, (col + d_col, row + d_row))  # minigrid's door rules
        else:
            raise ValueError(f"action must be an integer in [0, {NUM_ACTIONS}), got {action}")

    def render(self, tile_size: int = 32) -> np.ndarray:
        """An RGB image of the room drawn by minigrid (the agent as a triangle)."""
        return self.grid.render(tile_size, (self.agent[1], self.agent[0]), self.agent_dir)


def transition(state: np.ndarray, action: int, validate: bool = True) -> np.ndarray:
    """The state after ``action`` from ``state`` (pure; the env uses the same world code)."""
    world = BabyAIWorld(state, validate=validate)
    world.step(action)
    return world.state()


def successors(state: np.ndarray, validate: bool = True) -> np.ndarray:
    """``(7, 17)``: the next state under each action (row ``a`` for action ``a``)."""
    if validate:
        check_state(state)
    return np.stack([transition(state, a, validate=False) for a in range(NUM_ACTIONS)])
