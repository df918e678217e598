"""Meta-World frames from states: the task's scene posed to match each 91-d state.

The state lists positions (hand, gripper opening, goal, entities), not the simulator's joints,
so each frame solves for them: the arm's seven joints, the two fingers and the objects' joints
(hinges, slides, free bodies' positions) are fitted by bounded least squares so that the scene's
own read-out of the hand, the gripper opening and the task's entity positions matches the state,
the hand keeping Meta-World's fixed gripper orientation. Each frame starts from the previous
frame's pose, so the arm moves continuously. The target slot is drawn as a green sphere.
"""

from __future__ import annotations

from typing import Any, ClassVar

import mujoco
import numpy as np
from scipy.optimize import least_squares

from imaginebench.envs.base import Task
from imaginebench.envs.metaworld.layout import (
    GRIPPER,
    HAND,
    HAND_HIGH,
    HAND_LOW,
    STATE_DIM,
    TARGET,
    TASK_ENTITIES,
    entity_pos,
)
from imaginebench.envs.metaworld.scenes import Scene
from imaginebench.envs.metaworld.tasks import MetaWorldTask
from imaginebench.envs.rendering import (
    RolloutRenderer,
    drawable_states,
    frame_steps,
    mujoco_renderer,
    plain_lighting,
)

GRIPPER_SCALE = 0.1  # m per unit of the gripper opening (Meta-World divides by 0.1)
ORIENTATION_WEIGHT = 0.1  # hand quaternion error, weighed against metres
STAY_WEIGHT = 1e-3  # pull towards the previous pose (the arm's redundant joint)
MAX_EVALUATIONS = 60  # per frame (a reachable pose takes about 5)
TARGET_RGBA = np.array([0.1, 0.8, 0.2, 0.6], dtype=np.float32)
TARGET_RADIUS = 0.02


def free_camera() -> mujoco.MjvCamera:
    """A view of the table from the front left, the arm on the right."""
    camera = mujoco.MjvCamera()
    camera.type = mujoco.mjtCamera.mjCAMERA_FREE
    camera.lookat[:] = (0.0, 0.65, 0.12)
    camera.distance, camera.azimuth, camera.elevation = 1.35, 145.0, -30.0
    return camera


class PoseFit:
    """The joints of one scene that a state positions, and the least-squares fit of them.

    Variables: every hinge and slide joint (the arm, the fingers, articulated objects) within
    its range, and the position of every free body (its orientation stays the reset's).
    """

    def __init__(self, scene: Scene) -> None:
        self.scene = scene
        model = scene.sim.model
        index, low, high = [], [], []
        for j in range(model.njnt):
            adr = int(model.jnt_qposadr[j])
            if model.jnt_type[j] == mujoco.mjtJoint.mjJNT_FREE:
                index += [adr, adr + 1, adr + 2]
                low += [-np.inf] * 3
                high += [np.inf] * 3
            elif model.jnt_type[j] in (mujoco.mjtJoint.mjJNT_HINGE, mujoco.mjtJoint.mjJNT_SLIDE):
                limited = bool(model.jnt_limited[j])
                index.append(adr)
                low.append(float(model.jnt_range[j, 0]) if limited else -np.inf)
                high.append(float(model.jnt_range[j, 1]) if limited else np.inf)
        self.index = np.array(index)
        self.low, self.high = np.array(low), np.array(high)
        self.entities = [entity_pos(e) for e in TASK_ENTITIES[scene.name]]

    def start(self) -> np.ndarray:
        """The current pose's variables (after a reset: the reset pose) and hand orientation."""
        data = self.scene.sim.data
        self.hand_quat = data.body("hand").xquat.copy()
        return data.qpos[self.index].copy()

    def residuals(self, x: np.ndarray, state: np.ndarray, previous: np.ndarray) -> np.ndarray:
        sim = self.scene.sim
        data = sim.data
        data.qpos[self.index] = x
        mujoco.mj_kinematics(sim.model, data)
        hand = data.body("hand").xpos - state[HAND]
        fingers = data.body("rightclaw").xpos - data.body("leftclaw").xpos
        opening = np.linalg.norm(fingers) - GRIPPER_SCALE * state[GRIPPER]
        quat = data.body("hand").xquat
        turn = quat * np.sign(quat @ self.hand_quat) - self.hand_quat
        read = self.scene.state()
        objects = [read[p] - state[p] for p in self.entities]
        return np.concatenate(
            [hand, [opening], ORIENTATION_WEIGHT * turn, *objects, STAY_WEIGHT * (x - previous)]
        )

    def fit(self, state: np.ndarray, previous: np.ndarray) -> np.ndarray:
        """The variables that best reproduce ``state``, starting from ``previous``; the scene
        is left in that pose (positions only: velocities are zero). The hand and gripper are
        aimed at the state's values clipped to Meta-World's observation box, as its
        observations are."""
        state = state.copy()
        state[HAND] = np.clip(state[HAND], HAND_LOW, HAND_HIGH)
        state[GRIPPER] = np.clip(state[GRIPPER], 0.0, 1.0)
        span = np.where(np.isfinite(self.high - self.low), self.high - self.low, 1.0)
        x0 = np.clip(previous, self.low + 1e-6 * span, self.high - 1e-6 * span)
        result = least_squares(
            self.residuals,
            x0,
            bounds=(self.low, self.high),
            args=(state, previous),
            max_nfev=MAX_EVALUATIONS,
            xtol=1e-6,
        )
        data = self.scene.sim.data
        data.qpos[self.index] = result.x
        data.qvel[:] = 0.0
        mujoco.mj_forward(self.scene.sim.model, data)
        return result.x


class MetaWorldRenderer(RolloutRenderer):
    """Resets the task's scene with the first state's object and goal placement (Meta-World's
    reset, as the env does; a placement Meta-World would reject falls back to the middle of the
    range), then poses it to each state with :class:`PoseFit` and renders from a fixed view.

    What the state cannot set: velocities (zero), the orientation of free objects (kept from
    the reset: quaternion conventions differ between tasks) and anything that Meta-World's reset
    fixes for the episode (the door's frame, the coffee machine, the wall). A hand position out
    of reach or objects in impossible places are fitted as closely as the joints allow.

    Args:
        height: frame height in pixels.
        width: frame width in pixels.
    """

    fps: ClassVar[int] = 25

    def __init__(self, height: int = 240, width: int = 320) -> None:
        super().__init__(height, width)
        self._scenes: dict[str, tuple[Scene, PoseFit, Any]] = {}
        self.camera = free_camera()
        self.options = mujoco.MjvOption()
        self.options.sitegroup[:] = 0  # Meta-World's site markers: the target is drawn instead

    def _scene(self, name: str) -> tuple[Scene, PoseFit, Any]:
        if name not in self._scenes:
            scene = Scene(name)
            renderer = mujoco_renderer(scene.sim.model, self.height, self.width)
            self._scenes[name] = (scene, PoseFit(scene), renderer)
        return self._scenes[name]

    def render(self, task: Task, states: np.ndarray, steps: Any = None) -> np.ndarray:
        if not isinstance(task, MetaWorldTask):
            raise TypeError(f"not a Meta-World task: {task!r}")
        s = drawable_states(states, STATE_DIM, "Meta-World")
        scene, pose, renderer = self._scene(task.name)
        try:
            scene.reset(scene.rand_vec_from_state(s[0]))
        except ValueError:
            scene.reset(scene.default_rand_vec())
        keep = set(frame_steps(steps, len(s)).tolist())
        x = pose.start()
        frames = {}
        for t, state in enumerate(s[: max(keep) + 1]):  # every pose, for continuity
            x = pose.fit(state, x)
            if t in keep:
                renderer.update_scene(scene.sim.data, camera=self.camera, scene_option=self.options)
                plain_lighting(renderer.scene)
                self._add_target(renderer.scene, state[TARGET])
                frames[t] = renderer.render().copy()
        return np.stack([frames[t] for t in frame_steps(steps, len(s))])

    @staticmethod
    def _add_target(scene: Any, position: np.ndarray) -> None:
        if scene.ngeom < scene.maxgeom:
            mujoco.mjv_initGeom(
                scene.geoms[scene.ngeom],
                mujoco.mjtGeom.mjGEOM_SPHERE,
                np.array([TARGET_RADIUS, 0.0, 0.0]),
                position,
                np.eye(3).ravel(),
                TARGET_RGBA,
            )
            scene.ngeom += 1

    def close(self) -> None:
        for scene, _, renderer in self._scenes.values():
            renderer.close()
            scene.close()
        self._scenes.clear()
