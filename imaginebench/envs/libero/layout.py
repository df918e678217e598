"""The 44-d LIBERO state: the original benchmark's layout (pure numpy).

| part | indices | content |
|---|---|---|
| joints | 0-6 | the Panda's 7 joint angles (rad) |
| end effector | 7-9 | the grip site's position (m, world frame) |
| | 10-13 | the hand's orientation, quaternion ``xyzw`` (robosuite's convention) |
| fingers | 14-15 | the two finger joints (m; about +-0.04 open, 0 closed) |
| alphabet_soup | 16-22 | position (3) + quaternion ``xyzw`` (4) |
| cream_cheese | 23-29 | 〃 |
| salad_dressing | 30-36 | 〃 |
| basket | 37-43 | 〃 |

These are robosuite's observables ``robot0_joint_pos``, ``robot0_eef_pos``, ``robot0_eef_quat``,
``robot0_gripper_qpos`` and ``<object>_1_pos`` / ``<object>_1_quat``, in the original's order, so
its data files map onto the layout unchanged. Together they fix every joint position of the
scene (arm, fingers and the four free bodies); velocities are not part of the state.
"""

from __future__ import annotations

import numpy as np

from imaginebench.envs.base import check_state_array

STATE_DIM = 44
ACTION_DIM = 7
JOINTS = slice(0, 7)
EEF_POS = slice(7, 10)
EEF_QUAT = slice(10, 14)
FINGERS = slice(14, 16)
ENTITY_DIM = 7
FIRST_ENTITY = 16
#: The three objects a task can name, in the state's order.
OBJECTS: tuple[str, ...] = ("alphabet_soup", "cream_cheese", "salad_dressing")
ENTITIES: tuple[str, ...] = (*OBJECTS, "basket")


def entity_slice(entity: str) -> slice:
    """The 7 indices (position, ``xyzw`` quaternion) of ``entity``."""
    if entity not in ENTITIES:
        raise ValueError(f"unknown LIBERO entity {entity!r}; expected one of {ENTITIES}")
    start = FIRST_ENTITY + ENTITY_DIM * ENTITIES.index(entity)
    return slice(start, start + ENTITY_DIM)


def entity_pos(entity: str) -> slice:
    """The 3 position indices of ``entity``."""
    start = entity_slice(entity).start
    return slice(start, start + 3)


def check_object(name: str) -> str:
    """``name`` if it is one of :data:`OBJECTS`, else a clear error."""
    if name not in OBJECTS:
        raise ValueError(f"unknown LIBERO object {name!r}; expected one of {OBJECTS}")
    return name


def check_states(states: np.ndarray) -> np.ndarray:
    """``states`` as float64 with a shape check (``(..., 44)``)."""
    return check_state_array(states, STATE_DIM, "LIBERO")


def pack_state(
    joints: np.ndarray,
    eef_pos: np.ndarray,
    eef_quat: np.ndarray,
    fingers: np.ndarray,
    entities: dict[str, np.ndarray],
) -> np.ndarray:
    """A 44-d state from its parts (``entities``: every entity's 7 numbers)."""
    missing = [e for e in ENTITIES if e not in entities]
    if missing:
        raise ValueError(f"pack_state needs every entity; missing {missing}")
    state = np.zeros(STATE_DIM)
    state[JOINTS] = joints
    state[EEF_POS] = eef_pos
    state[EEF_QUAT] = eef_quat
    state[FINGERS] = fingers
    for name in ENTITIES:
        state[entity_slice(name)] = entities[name]
    return state
