"""Meta-World 3.1.1 simulators behind the tasks: one ``-v3`` environment per task, read out as
the 91-d entity-slot state (:mod:`imaginebench.envs.metaworld.layout`).

A :class:`Scene` wraps one Meta-World environment with the goal observable and its task
parameters (``rand_vec``: object and goal positions) frozen, so a reset is a pure function of the
``rand_vec`` it is given. Twenty tasks use their ``-v3`` environment unchanged. The two
compositions of the ``hard`` level are built from installed scenes:

* **make-coffee** is the coffee-push scene (``sawyer_coffee.xml``), which also holds the
  machine's button: stage 1 pushes the mug under the nozzle, stage 2 presses the button (the
  coffee-button task's target, ``button + (0, 0.03, 0)``).
* **locked-door-open** is the door-lock scene (``sawyer_door_lock.xml``, the door with a lock)
  with a door hinge ``doorjoint`` (range [-2, 0], as in the door-open door) added to the door
  and its handle geom named ``handle``, built with ``mujoco.MjSpec`` from the installed XML. It
  resets locked, like door-unlock. A **latch** (a joint equality holding the hinge at 0) keeps
  the door shut while the lock is turned down more than :data:`LATCH_ANGLE` and the door is
  closed, so the door physically opens only after it is unlocked. The door is placed in
  door-open's range (:data:`LOCKED_DOOR_LOW` .. :data:`LOCKED_DOOR_HIGH`), where the opened
  door's handle stays within the hand's reach. The door panel's collision box is door-open's
  (:data:`DOOR_OPEN_PANEL`): door-lock's reaches the hinge, and the hinged panel hit the safe's
  side wall at 0.62 rad, short of the 1.4 rad the open goal needs. The original added the hinge
  to the shared door-lock XML, which shifted the lock's qpos index and left door-unlock starting
  unlocked (unsolvable); here door-unlock and door-lock keep the unmodified XML.

Each scene XML is compiled once per process (:func:`compiled_model`); every simulator runs its
own copy of the model.

Meta-World's own reward and success (``evaluate_state``) are computed by its ``step`` but not
used: rewards and success are functions of the 91-d state (:mod:`.tasks`).
"""

from __future__ import annotations

import copy
import importlib
from functools import cache
from typing import Any

import mujoco
import numpy as np

from imaginebench.envs.metaworld.layout import (
    GRIPPER,
    HAND,
    HAND_HIGH,
    HAND_LOW,
    STATE_DIM,
    TARGET,
    TASK_ENTITIES,
    check_task_name,
    entity_slice,
)

# Task -> the Meta-World v3 environment class (module, class) its scene runs.
SCENE_CLASSES: dict[str, tuple[str, str]] = {
    "reach": ("sawyer_reach_v3", "SawyerReachEnvV3"),
    "push": ("sawyer_push_v3", "SawyerPushEnvV3"),
    "pick-place": ("sawyer_pick_place_v3", "SawyerPickPlaceEnvV3"),
    "button-press": ("sawyer_button_press_v3", "SawyerButtonPressEnvV3"),
    "door-unlock": ("sawyer_door_unlock_v3", "SawyerDoorUnlockEnvV3"),
    "door-open": ("sawyer_door_v3", "SawyerDoorEnvV3"),
    "window-open": ("sawyer_window_open_v3", "SawyerWindowOpenEnvV3"),
    "faucet-open": ("sawyer_faucet_open_v3", "SawyerFaucetOpenEnvV3"),
    "coffee-push": ("sawyer_coffee_push_v3", "SawyerCoffeePushEnvV3"),
    "coffee-button": ("sawyer_coffee_button_v3", "SawyerCoffeeButtonEnvV3"),
    "reach-wall": ("sawyer_reach_wall_v3", "SawyerReachWallEnvV3"),
    "push-wall": ("sawyer_push_wall_v3", "SawyerPushWallEnvV3"),
    "pick-place-wall": ("sawyer_pick_place_wall_v3", "SawyerPickPlaceWallEnvV3"),
    "button-press-wall": ("sawyer_button_press_wall_v3", "SawyerButtonPressWallEnvV3"),
    "door-lock": ("sawyer_door_lock_v3", "SawyerDoorLockEnvV3"),
    "door-close": ("sawyer_door_close_v3", "SawyerDoorCloseEnvV3"),
    "window-close": ("sawyer_window_close_v3", "SawyerWindowCloseEnvV3"),
    "faucet-close": ("sawyer_faucet_close_v3", "SawyerFaucetCloseEnvV3"),
    "make-coffee": ("sawyer_coffee_push_v3", "SawyerCoffeePushEnvV3"),
    "locked-door-open": ("sawyer_door_unlock_v3", "SawyerDoorUnlockEnvV3"),
    "hammer": ("sawyer_hammer_v3", "SawyerHammerEnvV3"),
    "soccer": ("sawyer_soccer_v3", "SawyerSoccerEnvV3"),
}

# Scenes whose Meta-World reset re-draws the task parameters until the object (first three
# numbers) and the goal (last three) are at least 0.15 apart in xy; a frozen rand_vec that breaks
# the rule would loop forever, so the sampler rejects it.
MIN_OBJECT_GOAL_XY = 0.15
_OBJECT_GOAL_RULE = {
    "reach",
    "push",
    "pick-place",
    "coffee-push",
    "reach-wall",
    "push-wall",
    "pick-place-wall",
    "make-coffee",
    "soccer",
}

# Where each rand_vec entry is read back from a reset state: a state index (the rand_vec entry is
# that state entry plus a constant offset, calibrated per scene at construction) or None (the
# entry's range is a single value, or the entry does not shape the scene: its mid-range value).
_RAND_SOURCES: dict[str, tuple[int | None, ...]] = {
    "reach": (7, 8, None, 4, 5, 6),
    "push": (7, 8, None, 4, 5, None),
    "pick-place": (7, 8, None, 4, 5, 6),
    "button-press": (14, 15, 16),
    "door-unlock": (4, 5, 6),
    "door-open": (4, 5, 6),
    "window-open": (4, 5, 6),
    "faucet-open": (4, 5, 6),
    "coffee-push": (56, 57, 58, 4, 5, 6),
    "coffee-button": (4, 5, 6),
    "reach-wall": (7, 8, None, 4, 5, 6),
    "push-wall": (7, 8, None, 4, 5, None),
    "pick-place-wall": (7, 8, None, 4, 5, 6),
    "button-press-wall": (14, 15, 16),
    "door-lock": (4, 5, 6),
    "door-close": (4, 5, 6),
    "window-close": (4, 5, 6),
    "faucet-close": (4, 5, 6),
    "make-coffee": (56, 57, 58, 4, 5, 6),
    "locked-door-open": (4, 5, 6),
    "hammer": (70, 71, None),
    "soccer": (84, 85, None, 4, 5, None),
}

LATCH_ANGLE = 0.5  # rad: the lock (0 open .. 1.5708 locked) holds the door beyond this
DOOR_CLOSED = 0.01  # rad: the latch only engages on a closed door
# locked-door-open's door positions: door-open's range. With door-lock's (y 0.80-0.85) the
# handle of the opened door would lie beyond the hand's reach (y < 0.40).
LOCKED_DOOR_LOW = (0.0, 0.85, 0.15)
LOCKED_DOOR_HIGH = (0.1, 0.95, 0.15)
# The door panel's collision box (half sizes): door-lock's (doorlockA.xml) reaches the hinge and
# hits the safe's side wall at 0.62 rad, short of the ~1.4 rad the open goal needs; door-open's
# hinged door (doorlockB.xml) has a narrower panel that swings past it.
DOOR_LOCK_PANEL = (0.184, 0.01, 0.124)
DOOR_OPEN_PANEL = (0.18, 0.01, 0.123)


def _env_class(name: str) -> type:
    module, cls = SCENE_CLASSES[check_task_name(name)]
    return getattr(importlib.import_module(f"metaworld.envs.{module}"), cls)


def _scipy_quat(xmat: np.ndarray) -> np.ndarray:
    from scipy.spatial.transform import Rotation

    return Rotation.from_matrix(np.asarray(xmat).reshape(3, 3)).as_quat()


@cache
def compiled_model(xml_path: str, locked_door: bool = False) -> mujoco.MjModel:
    """The model compiled from ``xml_path`` (``locked_door``: with the hinge, latch and panel of
    :func:`locked_door_spec`), once per process: compiling takes ~0.7 s (meshes), a copy
    ~0.08 s. Each simulator gets its own copy (Meta-World's resets move bodies and sites of
    the model)."""
    if locked_door:
        return locked_door_spec(xml_path).compile()
    return mujoco.MjModel.from_xml_path(xml_path)


def locked_door_spec(xml_path: str) -> mujoco.MjSpec:
    """The door-lock scene with a door hinge, a named handle, door-open's panel collision box
    and a latch (:data:`LATCH_ANGLE`)."""
    spec = mujoco.MjSpec.from_file(xml_path)
    door = spec.body("door_link")
    door.add_joint(
        name="doorjoint",
        type=mujoco.mjtJoint.mjJNT_HINGE,
        axis=[0, 0, 1],
        range=[-2.0, 0.0],
        limited=mujoco.mjtLimited.mjLIMITED_TRUE,
        damping=2.0,
        armature=0.001,
    )
    for geom in door.geoms:
        if geom.meshname == "door_handle":
            geom.name = "handle"
        if geom.type == mujoco.mjtGeom.mjGEOM_BOX and geom.size[0] == DOOR_LOCK_PANEL[0]:
            geom.size = DOOR_OPEN_PANEL  # the panel's collision box: clear the safe's wall
    spec.add_equality(
        name="latch",
        type=mujoco.mjtEq.mjEQ_JOINT,
        name1="doorjoint",
        objtype=mujoco.mjtObj.mjOBJ_JOINT,
    )
    return spec


@cache
def _scene_class(name: str) -> type:
    """Meta-World's class for task ``name``, simulating a copy of the cached compiled model;
    for locked-door-open the door-unlock environment on :func:`locked_door_spec`'s scene."""
    base = _env_class("door-unlock" if name == "locked-door-open" else name)
    locked_door = name == "locked-door-open"

    class CachedModelEnv(base):  # type: ignore[misc, valid-type]
        def _initialize_simulation(self) -> tuple[mujoco.MjModel, mujoco.MjData]:
            model = copy.copy(compiled_model(self.fullpath, locked_door))
            model.vis.global_.offwidth = max(model.vis.global_.offwidth, self.width)
            model.vis.global_.offheight = max(model.vis.global_.offheight, self.height)
            return model, mujoco.MjData(model)

    CachedModelEnv.__name__ = CachedModelEnv.__qualname__ = base.__name__
    return _locked_door_class(CachedModelEnv) if locked_door else CachedModelEnv


def _locked_door_class(base: type) -> type:
    """Resets and steps of the locked door: the lock set by name, the latch updated."""

    class SawyerLockedDoorOpenEnv(base):  # type: ignore[misc, valid-type]
        def _lock_adr(self) -> int:
            hinge = self.model.body("lock_link").jntadr[0]
            return int(self.model.jnt_qposadr[hinge])

        def _set_obj_xyz(self, pos: np.ndarray) -> None:  # the lock, not qpos[9]
            qpos, qvel = self.data.qpos.copy(), self.data.qvel.copy()
            qpos[self._lock_adr()] = pos
            qpos[self.model.joint("doorjoint").qposadr[0]] = 0.0
            qvel[:] = 0.0
            self.set_state(qpos, qvel)
            self.update_latch()

        def update_latch(self) -> None:
            lock = float(self.data.qpos[self._lock_adr()])
            door = float(self.data.qpos[self.model.joint("doorjoint").qposadr[0]])
            latch = self.model.equality("latch").id
            self.data.eq_active[latch] = lock > LATCH_ANGLE and abs(door) < DOOR_CLOSED

        def step(self, action: np.ndarray) -> Any:
            self.update_latch()
            return super().step(action)

    return SawyerLockedDoorOpenEnv


def make_sim(name: str, **kwargs: Any) -> Any:
    """A Meta-World environment for task ``name``: goal observable, task set, rand_vec frozen."""
    sim = _scene_class(check_task_name(name))(**kwargs)
    sim._partially_observable = False
    sim._set_task_called = True
    sim._freeze_rand_vec = True
    sim.max_path_length = 10**9  # our env truncates; Meta-World's own limit (500) never fires
    if name == "locked-door-open":  # door-open's door range: the opened door stays in reach
        sim._random_reset_space = type(sim._random_reset_space)(
            np.array(LOCKED_DOOR_LOW), np.array(LOCKED_DOOR_HIGH), dtype=np.float64
        )
    if name in ("make-coffee", "locked-door-open"):
        # the stage-2 target lies outside the stage-1 goal box that observations are clipped to
        sim.goal_space = type(sim.goal_space)(-np.inf, np.inf, (3,), np.float64)
    if "sawyer_observation_space" in sim.__dict__:
        del sim.sawyer_observation_space
    return sim


class Scene:
    """One task's Meta-World simulator, read out as 91-d states.

    ``reset(rand_vec)`` runs Meta-World's reset with the given task parameters and returns the
    state; ``step(action)`` runs Meta-World's step (mocap move of ``0.01 a[:3]`` m, gripper
    ``a[3]``, 5 physics steps of 2.5 ms) and returns the next state.
    """

    def __init__(self, name: str, **sim_kwargs: Any) -> None:
        self.name = check_task_name(name)
        self.sim = make_sim(name, **sim_kwargs)
        self.entities = TASK_ENTITIES[name]
        space = self.sim._random_reset_space
        self.rand_low = np.asarray(space.low, dtype=np.float64)
        self.rand_high = np.asarray(space.high, dtype=np.float64)
        self.sources = _RAND_SOURCES[name]
        # calibrate the rand_vec <- reset-state offsets on the middle of the range
        middle = self.default_rand_vec()
        state = self.reset(middle)
        self.offsets = np.array(
            [0.0 if i is None else middle[k] - state[i] for k, i in enumerate(self.sources)]
        )

    # -- task parameters -----------------------------------------------------------------------
    def default_rand_vec(self) -> np.ndarray:
        """The middle of the reset range, nudged to respect the object-goal distance rule."""
        middle = (self.rand_low + self.rand_high) / 2
        if self.name in _OBJECT_GOAL_RULE:  # push the object to its low-y end, goal to high-y
            middle[1], middle[4] = self.rand_low[1], self.rand_high[4]
        return middle

    def valid_rand_vec(self, rand_vec: np.ndarray) -> bool:
        if self.name not in _OBJECT_GOAL_RULE:
            return True
        return bool(np.linalg.norm(rand_vec[:2] - rand_vec[3:5]) >= MIN_OBJECT_GOAL_XY)

    def sample_rand_vec(self, rng: np.random.Generator) -> np.ndarray:
        """Task parameters uniform in Meta-World's reset range (rejecting what its reset would
        re-draw)."""
        while True:
            rand_vec = rng.uniform(self.rand_low, self.rand_high)
            if self.valid_rand_vec(rand_vec):
                return rand_vec

    def rand_vec_from_state(self, state: np.ndarray) -> np.ndarray:
        """The task parameters of a reset state (inverse of :meth:`reset`)."""
        state = np.asarray(state, dtype=np.float64)
        out = (self.rand_low + self.rand_high) / 2
        for k, i in enumerate(self.sources):
            if i is not None:
                out[k] = state[i] + self.offsets[k]
        return np.clip(out, self.rand_low, self.rand_high)

    # -- simulation ----------------------------------------------------------------------------
    def reset(self, rand_vec: np.ndarray) -> np.ndarray:
        rand_vec = np.asarray(rand_vec, dtype=np.float64)
        if rand_vec.shape != self.rand_low.shape or not self.valid_rand_vec(rand_vec):
            raise ValueError(f"invalid task parameters for {self.name}: {rand_vec!r}")
        self.sim._last_rand_vec = rand_vec.copy()
        self.sim.reset()
        # Meta-World's resets set some joints (window slide, door hinge) after their last
        # forward pass, so their observation is stale until the first step: refresh it
        mujoco.mj_forward(self.sim.model, self.sim.data)
        return self.state()

    def step(self, action: np.ndarray) -> np.ndarray:
        _, _, _, _, self.info = self.sim.step(np.asarray(action, dtype=np.float64))
        return self.state()

    @property
    def target(self) -> np.ndarray:
        return np.asarray(self.sim._target_pos, dtype=np.float64).copy()

    def set_target(self, target: np.ndarray) -> None:
        """Switch the task's goal (the composition's stage 2); observed in the target slot."""
        self.sim._target_pos = np.asarray(target, dtype=np.float64).copy()

    def state(self) -> np.ndarray:
        """The current 91-d state (float64), read from the simulator."""
        sim = self.sim
        current = sim._get_curr_obs_combined_no_goal()
        state = np.zeros(STATE_DIM)
        state[HAND] = np.clip(current[:3], HAND_LOW, HAND_HIGH)
        state[GRIPPER] = np.clip(current[3], -1.0, 1.0)
        state[TARGET] = sim._target_pos
        objects = [current[4:11], current[11:18]]
        for k, entity in enumerate(self.entities):
            extra = self._extra(entity) if k == 1 else None
            state[entity_slice(entity)] = objects[k] if extra is None else extra
        return state

    def _extra(self, entity: str) -> np.ndarray | None:
        """A second entity that Meta-World's observation leaves out (zeros), read directly."""
        data = self.sim.data
        if entity == "wall":
            return np.concatenate([data.body("wall").xpos, data.body("wall").xquat])
        if entity == "coffee_button":  # as the coffee-button task reports it
            return np.concatenate([data.site("buttonStart").xpos, [1.0, 0.0, 0.0, 0.0]])
        if entity == "handle" and self.name == "locked-door-open":  # as door-open reports it
            return np.concatenate([data.geom("handle").xpos, _scipy_quat(data.geom("handle").xmat)])
        return None

    # -- composition targets (from the simulator, for tests and the env) -----------------------
    def door_pos(self) -> np.ndarray:
        return np.asarray(self.sim.model.body("door").pos, dtype=np.float64).copy()

    def close(self) -> None:
        self.sim.close()


@cache
def shared_scene(name: str) -> Scene:
    """A per-process scene used to sample initial states (never one an env is running)."""
    return Scene(name)
