"""Initial-state distributions of the LIBERO tasks, built from the scene.

The original drew initial states from data files (``{pick, place, safe}_{object}_inits.npz``)
that are not available; these three distributions rebuild them from the scene with a seeded
generator. Each composes a configuration, writes it into the simulator and runs the original's
reset (:meth:`~imaginebench.envs.libero.scene.Scene.start`: five zero-action steps); the state
after them is the episode's initial state.

* **pick** (every task but place and pick-out-of): the reference layout. LIBERO's reset of the
  scene, settled (the *home* state: the soup at (-0.12, -0.24), the salad dressing at
  (0.05, -0.10), the cream cheese at (-0.15, 0.06), the basket at (0.00, 0.27), the Panda in
  its default posture), with every object moved uniformly within its BDDL region (+-2.5 cm in
  x and y; the basket +-1 cm) and every arm joint by up to +-0.02 rad. The original's pick
  files vary the objects by about 3 mm.
* **place** (place tasks): a pick layout with the hand at the object's grasp pose
  (:data:`GRASP_OFFSET`, :func:`grasp_quat`) and the fingers open, as the original's place
  files (the end effector at the object, fingers at about 0.037).
* **out-of-basket** (pick-out-of tasks): a pick layout with the object dropped into the basket
  (uniformly within +-2 cm of its centre, 1 cm above its rest height there; it settles during
  :data:`DROP_STEPS` zero-action steps) and the hand open, :data:`HOVER` above its grasp pose.

The hand is placed by inverse kinematics (:meth:`~imaginebench.envs.libero.scene.Scene.arm_for`).
No task is accomplished in its initial state (tested).
"""

from __future__ import annotations

import numpy as np

from imaginebench.envs.libero.layout import (
    FINGERS,
    JOINTS,
    OBJECTS,
    check_object,
    entity_pos,
    entity_slice,
)

# half-widths (x, y) of the BDDL regions the objects are drawn from (scene.bddl)
REGION_HALF_WIDTH: dict[str, tuple[float, float]] = {
    "alphabet_soup": (0.025, 0.025),
    "cream_cheese": (0.025, 0.025),
    "salad_dressing": (0.025, 0.025),
    "basket": (0.01, 0.01),
}
JOINT_NOISE = 0.02  # rad
OPEN_FINGERS = np.array([0.036, -0.036])  # the opening the open gripper settles at
BASKET_FLOOR = 0.017  # an object resting in the basket stands this much higher than on the floor
IN_BASKET_SPREAD = 0.02
DROP_HEIGHT = 0.01
DROP_STEPS = 15
HOVER = 0.10
# The grip site's offset from an object's position when grasping it. The hand points straight
# down (:data:`HAND_DOWN`) and its fingers close along the world y axis, across each object's
# y extent as the scene lays it out (the soup 6.3 cm, the cream cheese box 4.3 cm, the salad
# dressing 5.3 cm; the open gripper spans 7.2 cm).
GRASP_OFFSET: dict[str, tuple[float, float, float]] = {
    "alphabet_soup": (0.0, 0.0, 0.005),
    "cream_cheese": (0.0, 0.0, 0.004),
    "salad_dressing": (0.0, 0.0, 0.01),
}
HAND_DOWN = np.array([1.0, 0.0, 0.0, 0.0])  # xyzw: the hand pointing straight down


def grasp_quat(obj: str) -> np.ndarray:
    """The hand's orientation (``xyzw``) for grasping ``obj``: straight down."""
    check_object(obj)
    return HAND_DOWN.copy()


def grasp_position(state: np.ndarray, obj: str) -> np.ndarray:
    """Where the grip site goes to grasp ``obj`` in ``state``."""
    return np.asarray(state)[entity_pos(obj)] + np.asarray(GRASP_OFFSET[obj])


def pick_layout(home: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """The home state with the objects moved within their regions and the arm joints
    perturbed (not yet simulated)."""
    state = np.asarray(home, dtype=np.float64).copy()
    for entity, (hx, hy) in REGION_HALF_WIDTH.items():
        start = entity_slice(entity).start
        state[start : start + 2] += rng.uniform([-hx, -hy], [hx, hy])
    state[JOINTS] += rng.uniform(-JOINT_NOISE, JOINT_NOISE, 7)
    return state


def with_hand_at(
    scene: object, state: np.ndarray, eef_pos: np.ndarray, eef_quat: np.ndarray
) -> np.ndarray:
    """``state`` with the arm placed (inverse kinematics) and the fingers open."""
    out = np.asarray(state, dtype=np.float64).copy()
    out[JOINTS] = scene.arm_for(out[JOINTS], eef_pos, eef_quat)  # type: ignore[attr-defined]
    out[FINGERS] = OPEN_FINGERS
    return out


def pick_start(scene: object, rng: np.random.Generator) -> np.ndarray:
    """An initial state of the pick distribution (see the module docstring)."""
    return scene.start(pick_layout(scene.home, rng))  # type: ignore[attr-defined]


def place_start(scene: object, obj: str, rng: np.random.Generator) -> np.ndarray:
    """An initial state of the place distribution for ``obj``."""
    layout = pick_layout(scene.home, rng)  # type: ignore[attr-defined]
    state = with_hand_at(scene, layout, grasp_position(layout, obj), grasp_quat(obj))
    return scene.start(state)  # type: ignore[attr-defined]


def out_of_basket_start(scene: object, obj: str, rng: np.random.Generator) -> np.ndarray:
    """An initial state of the out-of-basket distribution for ``obj``."""
    check_object(obj)
    home = scene.home  # type: ignore[attr-defined]
    layout = pick_layout(home, rng)
    where = entity_pos(obj)
    basket = layout[entity_pos("basket")]
    layout[where.start : where.start + 2] = basket[:2] + rng.uniform(
        -IN_BASKET_SPREAD, IN_BASKET_SPREAD, 2
    )
    layout[where.start + 2] = home[where.start + 2] + BASKET_FLOOR + DROP_HEIGHT
    hover = grasp_position(layout, obj) + np.array([0.0, 0.0, HOVER])
    state = with_hand_at(scene, layout, hover, grasp_quat(obj))
    scene.set_state(state)  # type: ignore[attr-defined]
    return scene.settle(DROP_STEPS)  # type: ignore[attr-defined]


def initial_state(scene: object, kind: str, objects: tuple[str, ...], rng) -> np.ndarray:
    """The initial state of a task of ``kind`` on ``objects``: place tasks start at the
    object, pick-out-of tasks with it in the basket, every other task from the pick layout."""
    if kind == "place":
        return place_start(scene, objects[0], rng)
    if kind == "pick-out-of":
        return out_of_basket_start(scene, objects[0], rng)
    return pick_start(scene, rng)


__all__ = [
    "GRASP_OFFSET",
    "OBJECTS",
    "grasp_position",
    "grasp_quat",
    "initial_state",
    "out_of_basket_start",
    "pick_start",
    "place_start",
]
