"""The 91-d Meta-World state: a fixed entity-slot layout shared by every task (pure numpy).

| entity | indices | content |
|---|---|---|
| gripper | 0-3 | hand (end-effector body) xyz, gripper opening (finger distance / 0.1, in [0, 1]) |
| target_location | 4-6 | the task's goal position (Meta-World's ``_target_pos``) |
| target_object | 7-13 | position (3) + quaternion (4) |
| button | 14-20 | 〃 |
| lock | 21-27 | 〃 |
| handle | 28-34 | 〃 (the door's handle) |
| window | 35-41 | 〃 (the window's handle) |
| faucet | 42-48 | 〃 (the faucet's handle) |
| wall | 49-55 | 〃 |
| coffee | 56-62 | 〃 (the mug) |
| coffee_button | 63-69 | 〃 |
| hammer | 70-76 | 〃 |
| nail | 77-83 | 〃 |
| soccer | 84-90 | 〃 (the ball) |

Each task fills the slots of its one or two entities (:data:`TASK_ENTITIES`) from Meta-World's
own observation (its first object into the first entity, its second into the second); every
other slot is zero unless the env adds a distractor (see :mod:`imaginebench.envs.metaworld.env`).
Quaternions follow each upstream task's convention (some scipy ``xyzw``, some MuJoCo ``wxyz``;
window handles report zeros), as in the original benchmark.
"""

from __future__ import annotations

import numpy as np

from imaginebench.envs.base import check_state_array

STATE_DIM = 91
ACTION_DIM = 4
ENTITY_DIM = 7
HAND = slice(0, 3)
GRIPPER = 3
TARGET = slice(4, 7)
ENTITIES: tuple[str, ...] = (
    "target_object",
    "button",
    "lock",
    "handle",
    "window",
    "faucet",
    "wall",
    "coffee",
    "coffee_button",
    "hammer",
    "nail",
    "soccer",
)
FIRST_ENTITY = 7

# Task name -> the entities its scene fills, in Meta-World's object order.
TASK_ENTITIES: dict[str, tuple[str, ...]] = {
    "reach": ("target_object",),
    "push": ("target_object",),
    "pick-place": ("target_object",),
    "button-press": ("button",),
    "door-unlock": ("lock",),
    "door-open": ("handle",),
    "window-open": ("window",),
    "faucet-open": ("faucet",),
    "coffee-push": ("coffee",),
    "coffee-button": ("coffee_button",),
    "reach-wall": ("target_object", "wall"),
    "push-wall": ("target_object", "wall"),
    "pick-place-wall": ("target_object", "wall"),
    "button-press-wall": ("button", "wall"),
    "door-lock": ("lock",),
    "door-close": ("handle",),
    "window-close": ("window",),
    "faucet-close": ("faucet",),
    "make-coffee": ("coffee", "coffee_button"),
    "locked-door-open": ("lock", "handle"),
    "hammer": ("hammer", "nail"),
    "soccer": ("soccer",),
}
TASK_NAMES: tuple[str, ...] = tuple(TASK_ENTITIES)

# Meta-World's observation box for the hand (the env clips observations to it).
HAND_LOW = np.array([-0.525, 0.348, -0.0525])
HAND_HIGH = np.array([0.525, 1.025, 0.7])
# The tool centre point (between the fingertips) relative to the hand body: the gripper keeps
# a fixed orientation, so it is a constant offset up to a few millimetres (the mean over expert
# rollouts; the y part varies between 0 and 0.007 m with the arm's posture).
TCP_OFFSET = np.array([-0.0007, 0.003, -0.0448])


def entity_slice(entity: str) -> slice:
    """The 7 indices (position, quaternion) of ``entity``."""
    if entity not in ENTITIES:
        raise ValueError(f"unknown Meta-World entity {entity!r}; expected one of {ENTITIES}")
    start = FIRST_ENTITY + ENTITY_DIM * ENTITIES.index(entity)
    return slice(start, start + ENTITY_DIM)


def entity_pos(entity: str) -> slice:
    """The 3 position indices of ``entity``."""
    start = entity_slice(entity).start
    return slice(start, start + 3)


def check_task_name(name: str) -> str:
    if name not in TASK_ENTITIES:
        raise ValueError(f"unknown Meta-World task {name!r}; expected one of {TASK_NAMES}")
    return name


def unused_entities(name: str) -> tuple[str, ...]:
    """The entities whose slots ``name`` leaves empty (the distractor candidates)."""
    used = TASK_ENTITIES[check_task_name(name)]
    return tuple(e for e in ENTITIES if e not in used)


def check_states(states: np.ndarray) -> np.ndarray:
    """``states`` as float64 with a shape check (``(..., 91)``)."""
    return check_state_array(states, STATE_DIM, "Meta-World")


def tcp(states: np.ndarray) -> np.ndarray:
    """``(..., 3)`` tool centre point estimated from the hand position."""
    return check_states(states)[..., HAND] + TCP_OFFSET


def pack_state(
    hand: np.ndarray,
    gripper: float,
    target: np.ndarray,
    entities: dict[str, np.ndarray],
) -> np.ndarray:
    """Build a 91-d state from its parts (``entities``: name -> 7 numbers)."""
    state = np.zeros(STATE_DIM)
    state[HAND] = hand
    state[GRIPPER] = gripper
    state[TARGET] = target
    for name, value in entities.items():
        state[entity_slice(name)] = value
    return state


# Distractor readings per entity: position uniform in (low, high), the reset orientation; the
# position range an entity takes at the reset of its home task (checked by the tests).
_RANGES: dict[str, tuple[tuple[float, ...], tuple[float, ...], tuple[float, ...]]] = {
    "target_object": ((-0.1, 0.6, 0.02), (0.1, 0.7, 0.02), (0.0, 0.0, 0.0, 1.0)),
    "button": ((-0.1, 0.657, 0.115), (0.1, 0.707, 0.115), (1.0, 0.0, 0.0, 0.0)),
    "lock": ((-0.11, 0.642, 0.121), (0.09, 0.692, 0.121), (1.0, 0.0, 0.0, 0.0)),
    "handle": ((0.1907, 0.6429, 0.15), (0.2907, 0.7429, 0.15), (0.6908, -0.1506, 0.6909, 0.1512)),
    "window": ((-0.14, 0.605, 0.16), (0.06, 0.805, 0.16), (0.0, 0.0, 0.0, 0.0)),
    "faucet": ((-0.065, 0.625, 0.114), (0.035, 0.675, 0.114), (1.0, 0.0, 0.0, 0.0)),
    "wall": ((0.1, 0.75, 0.06), (0.1, 0.75, 0.06), (1.0, 0.0, 0.0, 0.0)),
    "coffee": ((-0.1, 0.55, -0.001), (0.1, 0.65, 0.001), (0.0047, -0.0026, -0.0298, 0.9995)),
    "coffee_button": ((-0.1, 0.58, 0.299), (0.1, 0.68, 0.301), (1.0, 0.0, 0.0, 0.0)),
    "hammer": ((-0.1, 0.4, 0.0), (0.1, 0.5, 0.0), (0.9996, 0.0002, -0.0297, 0.0)),
    "nail": ((0.24, 0.64, 0.11), (0.24, 0.64, 0.11), (1.0, 0.0, 0.0, 0.0)),
    "soccer": ((-0.1, 0.6, 0.03), (0.1, 0.7, 0.03), (0.0, 0.0, 0.0, 1.0)),
}
DISTRACTOR_RANGES: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]] = {
    name: (np.array(low), np.array(high), np.array(quat))
    for name, (low, high, quat) in _RANGES.items()
}
