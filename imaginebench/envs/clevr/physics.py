"""CLEVR-Robot physics on the official ``mujoco`` bindings.

The scene follows the original benchmark: five rubber balls (radius 0.13) on a table, four
invisible one-sided walls that stop the balls (not the pusher), and an actuated point-mass
pusher on two slide joints. One action = teleport the pusher behind the chosen ball, opposite to
the push direction, and drive it along that direction for 40 physics steps of 0.01 s.
"""

from __future__ import annotations

from dataclasses import dataclass

import mujoco
import numpy as np

NUM_BALLS = 5
STATE_DIM = 2 * NUM_BALLS
BALL_RADIUS = 0.13
COLORS: tuple[str, ...] = ("red", "blue", "green", "purple", "cyan")
RGBA: dict[str, str] = {
    "red": "0.87 0.15 0.15 1",
    "blue": "0.16 0.32 0.85 1",
    "green": "0.15 0.65 0.25 1",
    "purple": "0.55 0.25 0.75 1",
    "cyan": "0.15 0.75 0.80 1",
}
# Direction vectors of the 8 push directions (index = action % 8).
PUSH_DIRECTIONS = np.array(
    [[1, 0], [0, 1], [-1, 0], [0, -1], [0.8, 0.8], [-0.8, 0.8], [0.8, -0.8], [-0.8, -0.8]],
    dtype=np.float64,
)
NUM_ACTIONS = NUM_BALLS * len(PUSH_DIRECTIONS)
PUSH_OFFSET = 0.15  # the pusher starts this far behind the ball centre (times the direction)
SUBSTEPS = 40  # physics steps per action (frame_skip 20 x 2 in the original)
TABLE_Z = -0.325
WALL_X = 0.6
WALL_Y_FRONT = -0.3
WALL_Y_BACK = 0.7
# Ball centres can never leave this box: walls minus one radius.
X_RANGE = (-WALL_X + BALL_RADIUS, WALL_X - BALL_RADIUS)
Y_RANGE = (WALL_Y_FRONT + BALL_RADIUS, WALL_Y_BACK - BALL_RADIUS)


def scene_xml() -> str:
    """MJCF of the CLEVR-Robot scene (balls first in colour order, then the pusher)."""
    z = TABLE_Z + BALL_RADIUS
    balls = "\n".join(
        f"""    <body name="{c}" pos="0 0 {z}">
      <joint name="{c}_free" type="free" damping="0.75"/>
      <geom type="sphere" size="{BALL_RADIUS}" density="1" material="rubber" rgba="{RGBA[c]}"
            contype="1" conaffinity="3"/>
    </body>"""
        for c in COLORS
    )
    walls = "\n".join(
        f'    <geom name="wall_{n}" type="plane" size="2 2 0.1" pos="{p}" zaxis="{a}" '
        f'contype="2" conaffinity="0" rgba="0 0 0 0"/>'
        for n, p, a in (
            ("right", f"{WALL_X} 0 0", "-1 0 0"),
            ("left", f"{-WALL_X} 0 0", "1 0 0"),
            ("front", f"0 {WALL_Y_FRONT} 0", "0 1 0"),
            ("back", f"0 {WALL_Y_BACK} 0", "0 -1 0"),
        )
    )
    return f"""<mujoco model="clevr_robot">
  <compiler angle="radian"/>
  <option timestep="0.01" integrator="Euler" iterations="20" gravity="0 0 -9.81"/>
  <default>
    <joint armature="0.04"/>
    <geom friction="0.8 0.1 0.1" condim="3"/>
  </default>
  <visual><global offwidth="640" offheight="480"/></visual>
  <asset>
    <material name="rubber" specular="0.1" shininess="0.1"/>
    <texture name="grid" type="2d" builtin="checker" rgb1="0.82 0.82 0.80" rgb2="0.76 0.76 0.74"
             width="256" height="256"/>
    <material name="table" texture="grid" texrepeat="6 6"/>
  </asset>
  <worldbody>
    <light pos="0 -1 2.5" dir="0 0.4 -1" diffuse="0.8 0.8 0.8"/>
    <camera name="front" pos="0 -1.55 1.05" xyaxes="1 0 0 0 0.6 0.8"/>
    <geom name="table" type="plane" size="2 2 0.1" pos="0 0 {TABLE_Z}" material="table"
          contype="1" conaffinity="1"/>
{walls}
{balls}
    <body name="pusher" pos="0 0 -0.2">
      <joint name="pusher_x" type="slide" axis="1 0 0" damping="0.5"/>
      <joint name="pusher_y" type="slide" axis="0 1 0" damping="0.5"/>
      <geom type="sphere" size="0.05" density="0.5" rgba="0.3 0.3 0.3 0.6"
            contype="1" conaffinity="1"/>
    </body>
  </worldbody>
  <actuator>
    <motor joint="pusher_x" ctrlrange="-2 2" ctrllimited="true"/>
    <motor joint="pusher_y" ctrlrange="-2 2" ctrllimited="true"/>
  </actuator>
</mujoco>
"""


def decode_action(action: int) -> tuple[int, int]:
    """Split an action index into (ball index, direction index)."""
    if not 0 <= int(action) < NUM_ACTIONS:
        raise ValueError(f"CLEVR action must be in [0, {NUM_ACTIONS}), got {action}")
    return int(action) // len(PUSH_DIRECTIONS), int(action) % len(PUSH_DIRECTIONS)


@dataclass
class Snapshot:
    """A copy of the full simulator state (to restore after a look-ahead)."""

    qpos: np.ndarray
    qvel: np.ndarray
    time: float


class ClevrPhysics:
    """The MuJoCo model plus the teleport-and-push action."""

    _ball_qpos = np.array([7 * i + k for i in range(NUM_BALLS) for k in (0, 1)])

    def __init__(self) -> None:
        self.model = mujoco.MjModel.from_xml_string(scene_xml())
        self.data = mujoco.MjData(self.model)
        self._pusher_qpos = 7 * NUM_BALLS
        self._pusher_dof = 6 * NUM_BALLS

    # --- state -----------------------------------------------------------------------------
    def state(self) -> np.ndarray:
        """The 10-d observation: (x, y) of the 5 balls in colour order, read from physics."""
        return self.data.qpos[self._ball_qpos].astype(np.float32)

    def set_state(self, xy: np.ndarray) -> None:
        """Place the balls at rest at ``xy`` (10-d), upright, and park the pusher."""
        xy = np.asarray(xy, dtype=np.float64).reshape(NUM_BALLS, 2)
        mujoco.mj_resetData(self.model, self.data)
        for i in range(NUM_BALLS):
            q = self.data.qpos[7 * i : 7 * i + 7]
            q[:] = (xy[i, 0], xy[i, 1], TABLE_Z + BALL_RADIUS, 1.0, 0.0, 0.0, 0.0)
        # Park the pusher far from every ball so it never touches one between actions.
        self.data.qpos[self._pusher_qpos : self._pusher_qpos + 2] = (0.0, 5.0)
        mujoco.mj_forward(self.model, self.data)

    def snapshot(self) -> Snapshot:
        return Snapshot(self.data.qpos.copy(), self.data.qvel.copy(), float(self.data.time))

    def restore(self, snap: Snapshot) -> None:
        self.data.qpos[:] = snap.qpos
        self.data.qvel[:] = snap.qvel
        self.data.time = snap.time
        self.data.ctrl[:] = 0.0
        mujoco.mj_forward(self.model, self.data)

    # --- dynamics --------------------------------------------------------------------------
    def push(self, action: int) -> np.ndarray:
        """Apply one push action and return the new 10-d state.

        The push starts behind the ball's *current* position, so an episode's first push moves
        its ball like any later one.
        """
        ball, direction = decode_action(action)
        d = PUSH_DIRECTIONS[direction]
        ball_xy = self.data.qpos[7 * ball : 7 * ball + 2]
        start = ball_xy - PUSH_OFFSET * d
        p, v = self._pusher_qpos, self._pusher_dof
        self.data.qpos[p : p + 2] = start
        self.data.qvel[v : v + 2] = 0.0
        self.data.ctrl[:] = d
        mujoco.mj_step(self.model, self.data, nstep=SUBSTEPS)
        self.data.ctrl[:] = 0.0
        # Take the pusher off the table so it cannot touch balls until the next action.
        self.data.qpos[p : p + 2] = (0.0, 5.0)
        self.data.qvel[v : v + 2] = 0.0
        mujoco.mj_forward(self.model, self.data)
        return self.state()
