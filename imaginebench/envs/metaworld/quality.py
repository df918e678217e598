"""Physical plausibility of (imagined) Meta-World rollouts, for the imagination quality report.

* **legal state**: every entry finite; the hand inside Meta-World's hand box (the observation's
  clip box) widened by :data:`WORKSPACE_TOLERANCE`; the gripper opening in [0, 1] (same
  tolerance); every filled entity slot's position inside the table workspace
  (:data:`WORKSPACE_LOW` .. :data:`WORKSPACE_HIGH`: on or above the table top, within the arm's
  reach) and its quaternion either all zero (window handles report none) or of unit norm
  within :data:`QUAT_NORM_TOLERANCE`; and, in the four wall tasks, nothing inside the wall
  (:func:`wall_clear`: the hand, its tool centre point and the object stay out of the wall's
  collision box).
* **correct transition**: a **teacher-forced replay** in the simulator. The scene is identified
  from the rollout's initial state (the task whose reset reproduces it; states with a distractor
  entity cannot be matched and count as incorrect) and reset with the layout read from it.
  Then, for every step ``t``, the simulator's joint positions are **set to** ``s_t``: the
  joints (arm, fingers, free objects, door / lock / window / faucet / button / nail joints) are
  solved by damped least squares, warm-started from the replay's previous step, so that the
  simulator's reading matches ``s_t`` on every slot the task fills. What the 91-d state does
  not hold — joint velocities, the mocap target the hand is pulled towards (it leads the hand
  by up to 5 cm), the arm's redundant posture, contact forces — is carried over from the replay
  itself, which followed the rollout's actions. The step then executes ``a_t``; the transition
  is correct when every filled position entry of ``s_{t+1}`` is within
  :data:`POSITION_TOLERANCE` of the simulated one (1.5 mm, a fifth of the hand's median step
  of 7.6 mm in expert rollouts; the moving objects' median step is 6.4 mm), the gripper within
  :data:`GRIPPER_TOLERANCE` and the quaternion entries within :data:`QUAT_TOLERANCE`. The
  target slot is not judged (it is the task's goal, not physics).
  Real rollouts replay exactly (the forced positions are the simulator's own). A wrong state
  ``s_t`` fails the transitions into and out of it, and usually the next one too (the replay's
  velocities came from the wrong state).
"""

from __future__ import annotations

import mujoco
import numpy as np

from imaginebench.envs.base import check_rollout_actions
from imaginebench.envs.metaworld.layout import (
    ACTION_DIM,
    ENTITIES,
    GRIPPER,
    HAND,
    HAND_HIGH,
    HAND_LOW,
    STATE_DIM,
    TARGET,
    TASK_ENTITIES,
    TASK_NAMES,
    TCP_OFFSET,
    check_states,
    entity_slice,
)

WORKSPACE_TOLERANCE = 0.05
WORKSPACE_LOW = np.array([-0.6, 0.3, -0.05])
WORKSPACE_HIGH = np.array([0.6, 1.1, 0.6])
QUAT_NORM_TOLERANCE = 0.05
POSITION_TOLERANCE = 0.0015  # m: a fifth of the hand's median step (7.6 mm in expert data)
GRIPPER_TOLERANCE = 0.05
QUAT_TOLERANCE = 0.02
RESET_TOLERANCE = 1e-3  # an initial state is a task's reset state within this
SOLVER_ITERATIONS = 4
SOLVER_DAMPING = 1e-6
_EPS = 1e-6
# The wall's collision box, by the entity that shares its scene: (offset of the box's centre
# from the wall's reported position, half-sizes), from metaworld's scene files (tested against
# the compiled models): reach-, push- and pick-place-wall; button-press-wall.
WALL_BOXES: dict[str, tuple[np.ndarray, np.ndarray]] = {
    "target_object": (np.zeros(3), np.array([0.12, 0.01, 0.06])),
    "button": (np.array([0.0, 0.0, 0.075]), np.array([0.1, 0.01, 0.075])),
}
WALL_TOLERANCE = 0.003  # m: the tool centre point's offset from the hand is exact to a few mm
OBJECT_RADIUS = 0.02  # m: the wall tasks' puck (a cylinder; reach-wall's marker is 0.03)
OBJECT_HALF_HEIGHT = 0.015  # m: the smaller of the two objects' half-heights


def filled_entities(state: np.ndarray) -> tuple[str, ...]:
    """The entities whose slots are not all zero, in layout order."""
    return tuple(e for e in ENTITIES if np.any(state[entity_slice(e)] != 0.0))


def _depth_inside(points: np.ndarray, centre: np.ndarray, half: np.ndarray) -> np.ndarray:
    """``(...)``: how far each point lies inside the axis-aligned box (negative: outside)."""
    return (half - np.abs(points - centre)).min(axis=-1)


def wall_clear(states: np.ndarray) -> np.ndarray:
    """``(N,)`` bool: nothing is inside the wall (True where the wall slot is empty).

    The wall is rigid and fixed: its collision box (:data:`WALL_BOXES`, placed by the wall's
    reported position) may not hold the hand body, the tool centre point (hand +
    :data:`~imaginebench.envs.metaworld.layout.TCP_OFFSET`) or, grown by the object's radius,
    the centre of the task's object, beyond :data:`WALL_TOLERANCE` (the tool centre's offset
    is exact to a few millimetres). Real expert states of the four wall tasks keep at least
    0.5 mm short of it (tested), so only states that pass through the wall are illegal."""
    s = np.asarray(states, dtype=np.float64)
    wall = s[..., entity_slice("wall")]
    clear = np.ones(s.shape[:-1], dtype=bool)
    has_wall = np.any(wall != 0.0, axis=-1)
    if not has_wall.any():
        return clear
    with_button = np.any(s[..., entity_slice("button")] != 0.0, axis=-1)
    hand = s[..., HAND]
    for partner, (offset, half) in WALL_BOXES.items():
        rows = has_wall & (with_button == (partner == "button"))
        centre = wall[..., :3] + offset
        inside = (_depth_inside(hand, centre, half) > WALL_TOLERANCE) | (
            _depth_inside(hand + TCP_OFFSET, centre, half) > WALL_TOLERANCE
        )
        if partner == "target_object":
            grown = half + np.array([OBJECT_RADIUS, OBJECT_RADIUS, OBJECT_HALF_HEIGHT])
            obj = s[..., entity_slice("target_object")][..., :3]
            inside |= _depth_inside(obj, centre, grown) > WALL_TOLERANCE
        clear &= ~(rows & inside)
    return clear


def legal_states(states: np.ndarray) -> np.ndarray:
    """``(N,)`` bool for states ``(N, 91)`` (see the module docstring)."""
    s = check_states(states)
    finite = np.isfinite(s).all(axis=-1)
    s = np.nan_to_num(s, nan=1e6, posinf=1e6, neginf=-1e6)
    tol = WORKSPACE_TOLERANCE
    hand = ((s[..., HAND] >= HAND_LOW - tol) & (s[..., HAND] <= HAND_HIGH + tol)).all(axis=-1)
    gripper = (s[..., GRIPPER] >= -tol) & (s[..., GRIPPER] <= 1.0 + tol)
    ok = finite & hand & gripper
    for entity in ENTITIES:
        slot = s[..., entity_slice(entity)]
        filled = np.any(slot != 0.0, axis=-1)
        pos, quat = slot[..., :3], slot[..., 3:]
        inside = ((pos >= WORKSPACE_LOW) & (pos <= WORKSPACE_HIGH)).all(axis=-1)
        norm = np.linalg.norm(quat, axis=-1)
        unit = (norm == 0.0) | (np.abs(norm - 1.0) <= QUAT_NORM_TOLERANCE)
        ok &= ~filled | (inside & unit)
    return ok & wall_clear(s)


class _Replay:
    """A scene being replayed: which state entries it reads and how to force them."""

    def __init__(self, scene: object, initial: np.ndarray) -> None:
        self.scene = scene
        model = scene.sim.model  # type: ignore[attr-defined]
        self.model, self.data = model, scene.sim.data  # type: ignore[attr-defined]
        compared = [np.arange(4)]
        self.positions = [np.arange(3)]
        self.quats: list[np.ndarray] = []
        for entity in scene.entities:  # type: ignore[attr-defined]
            start = entity_slice(entity).start
            self.positions.append(np.arange(start, start + 3))
            compared.append(np.arange(start, start + 3))
            if np.any(initial[start + 3 : start + 7] != 0.0):
                self.quats.append(np.arange(start + 3, start + 7))
                compared.append(self.quats[-1])
        self.compared = np.concatenate(compared)
        self.position_index = np.concatenate(self.positions)
        self.quat_index = np.concatenate(self.quats) if self.quats else np.zeros(0, dtype=int)

    def reading(self, qpos: np.ndarray) -> np.ndarray:
        self.data.qpos[:] = qpos
        mujoco.mj_kinematics(self.model, self.data)
        return self.scene.state()[self.compared]  # type: ignore[attr-defined]

    def force(self, state: np.ndarray) -> None:
        """Set the joint positions so that the simulator reads ``state`` (damped least
        squares in the joints' tangent space, from the current positions)."""
        model, data = self.model, self.data
        qvel = data.qvel.copy()
        qpos = data.qpos.copy()
        goal = state[self.compared]
        for _ in range(SOLVER_ITERATIONS):
            residual = goal - self.reading(qpos)
            if np.max(np.abs(residual)) < 1e-7:
                break
            jac = np.zeros((len(goal), model.nv))
            base = goal - residual
            for i in range(model.nv):
                dq = np.zeros(model.nv)
                dq[i] = _EPS
                moved = qpos.copy()
                mujoco.mj_integratePos(model, moved, dq, 1.0)
                jac[:, i] = (self.reading(moved) - base) / _EPS
            lhs = jac.T @ jac + SOLVER_DAMPING * np.eye(model.nv)
            step = np.linalg.solve(lhs, jac.T @ residual)
            mujoco.mj_integratePos(model, qpos, step, 1.0)
        data.qpos[:] = qpos
        data.qvel[:] = qvel
        mujoco.mj_forward(model, data)


class MetaWorldQuality:
    """Legality of states and correctness of transitions (teacher-forced simulator replay)."""

    def __init__(self) -> None:
        self.scenes: dict[str, object] = {}

    def legal(self, states: np.ndarray) -> np.ndarray:
        return legal_states(states)

    def _scene(self, name: str) -> object:
        if name not in self.scenes:
            from imaginebench.envs.metaworld.scenes import Scene

            self.scenes[name] = Scene(name)
        return self.scenes[name]

    def identify(self, initial: np.ndarray) -> str | None:
        """The task whose reset state ``initial`` is (``None`` if none is)."""
        filled = filled_entities(initial)
        for name in TASK_NAMES:
            if TASK_ENTITIES[name] != filled:
                continue
            scene = self._scene(name)
            try:
                parameters = scene.rand_vec_from_state(initial)  # type: ignore[attr-defined]
                state = scene.reset(parameters)  # type: ignore[attr-defined]
            except ValueError:
                continue
            if np.max(np.abs(state - initial)) <= RESET_TOLERANCE:
                return name
        return None

    def transition_errors(self, states: np.ndarray, actions: np.ndarray) -> np.ndarray:
        """``(T, 91)`` absolute differences between ``states[1:]`` and the replayed next
        states on the entries the task fills (0 elsewhere; ``inf`` where the step could not be
        replayed: an illegal state, a non-finite action, an unidentified scene)."""
        states = check_states(states)
        if states.ndim != 2:
            raise ValueError(f"states must be one rollout (T + 1, {STATE_DIM}), got {states.shape}")
        actions = check_rollout_actions(states, actions, ACTION_DIM)
        out = np.full((len(actions), STATE_DIM), np.inf)
        name = self.identify(states[0]) if legal_states(states[:1])[0] else None
        if name is None or len(actions) == 0:
            return out
        scene = self._scene(name)
        replay = _Replay(scene, states[0])
        scene.reset(scene.rand_vec_from_state(states[0]))  # type: ignore[attr-defined]
        ok = legal_states(states[:-1]) & np.isfinite(actions).all(axis=-1)
        mask = np.zeros(STATE_DIM, dtype=bool)
        mask[replay.compared] = True
        for t in range(len(actions)):
            if not ok[t]:
                continue  # the replay carries on from its own state
            replay.force(states[t])
            scene.set_target(states[t, TARGET])  # type: ignore[attr-defined]
            predicted = scene.step(np.clip(actions[t], -1.0, 1.0))  # type: ignore[attr-defined]
            out[t] = np.where(mask, np.abs(states[t + 1] - predicted), 0.0)
        return np.nan_to_num(out, nan=np.inf)

    def correct_transitions(self, states: np.ndarray, actions: np.ndarray) -> np.ndarray:
        """``(T,)`` bool: ``states[t + 1]`` matches the replayed outcome of ``actions[t]``."""
        errors = self.transition_errors(states, actions)
        positions = np.zeros(STATE_DIM, dtype=bool)
        positions[HAND] = True
        for entity in ENTITIES:
            start = entity_slice(entity).start
            positions[start : start + 3] = True
        quats = ~positions
        quats[GRIPPER] = quats[TARGET] = False
        return (
            (errors[:, positions] <= POSITION_TOLERANCE).all(axis=1)
            & (errors[:, GRIPPER] <= GRIPPER_TOLERANCE)
            & (errors[:, quats] <= QUAT_TOLERANCE).all(axis=1)
        )
