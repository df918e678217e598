"""HalfCheetah task families and their success functions on the state history.

Every judge takes states ``(..., T, 18)`` (layout in :mod:`imaginebench.envs.halfcheetah.physics`;
index 0 = the initial state) and returns ``(..., T)``, vectorised over the leading dimensions.
Two histories drive them:

* the **net displacement** ``S_t = Δx_1 + ... + Δx_t`` (m, positive forward). The initial
  state's own ``Δx`` entry is ignored, so data carrying the original's absolute-x-at-reset
  value judges the same;
* the **take-off height** ``H_t``: the highest floor clearance of the body's lowest point
  (:func:`~imaginebench.envs.halfcheetah.physics.clearance`) at any step ``k <= t`` that comes
  after a step on the floor (clearance <= :data:`TOUCHDOWN_CLEARANCE`). A reset leaves the
  cheetah up to 0.18 m above the floor, so the first fall never counts. The cheetah **jumped**
  by ``t`` when ``H_t >= JUMP_CLEARANCE`` (0.3 m): with zero torques it never leaves the floor
  again after landing (``H`` at most 0.002 m over 40 episodes); uniformly random torques reach
  0.3 m in 5-9 % of 200-step episodes (and solve each jump task in 3-5 %); deliberate
  crouch-and-extend jumps reach 0.3-0.4 m and periodic bounding 0.45-0.96 m. The torso height
  alone would not do: reset leaves it 0.03-0.23 m above its resting height (rootz -0.13), and
  rearing up lifts it to rootz 0.30 with a foot still on the floor.

| family | success at step ``t`` |
|---|---|
| run forward / backward | ``S_t > 7`` / ``S_t < -7`` and ``t >= 99`` (the original's) |
| run faster (easy) | ``S_t > 8.5 t / 99`` / ``S_t < -8.5 t / 99`` and ``t >= 99`` (a pace) |
| jump forward / backward | jumped and ``S_t > 0.3`` / ``S_t < -0.3`` |
| jump in place (hard) | jumped and ``|S_k| < 1.05`` at every ``k <= t`` |
| shuttle forward first (hard) | the peak ``P_t = max_{k<=t} S_k >= 3`` and ``S_t <= P_t - 3`` |
| shuttle backward first (hard) | the trough ``V_t = min_{k<=t} S_k <= -3``, ``S_t >= V_t + 3`` |

The original judged the faster runs like the others (``S_t > 8.5`` at any ``t >= 99``), so a
runner at the training pace (about 7.7 m per 99 steps) passed "faster" just by running ~12
steps longer within the 200-step limit; here "faster" is a pace: 8.5 m per 99 steps on average,
from step 99 on.

``progress`` is the signed displacement for the runs; for the jumps and shuttles it sums the
thresholded quantities (take-off height, displacement, each leg), each scaled to reach 1 at its
threshold, and jumping in place subtracts the stray beyond 1.05 m (in units of 1.05 m).
``speed_reward`` is the task's use of the forward reward ``Δx / dt`` in the original's reward:
as is for forward, negated for backward, its absolute value for the shuttles and minus that for
jumping in place.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from imaginebench.envs.base import Task, Wording
from imaginebench.envs.halfcheetah import instructions as text
from imaginebench.envs.halfcheetah.physics import DX, check_states, clearance

RUN_DISTANCE = 7.0
FAST_RUN_DISTANCE = 8.5
RUN_MIN_STEPS = 99
SHUTTLE_DISTANCE = 3.0
JUMP_CLEARANCE = 0.3  # m between the floor and the body's lowest point
TOUCHDOWN_CLEARANCE = 0.01  # on the floor (soft contacts press a few mm into it)
JUMP_DISTANCE = 0.3
IN_PLACE_RADIUS = 1.05
DIRECTIONS: tuple[str, ...] = ("forward", "backward")


def direction_sign(direction: str) -> float:
    if direction not in DIRECTIONS:
        raise ValueError(f"unknown direction {direction!r}; expected one of {DIRECTIONS}")
    return 1.0 if direction == "forward" else -1.0


def displacement(states: np.ndarray) -> np.ndarray:
    """``(..., T)`` net displacement ``S_t`` since the initial state (``S_0 = 0``)."""
    dx = check_states(states)[..., DX].copy()
    dx[..., 0] = 0.0
    return np.cumsum(dx, axis=-1)


def takeoff_height(states: np.ndarray) -> np.ndarray:
    """``(..., T)`` highest clearance reached after a touchdown up to each step (``-inf``
    before any)."""
    height = clearance(states)
    down = height <= TOUCHDOWN_CLEARANCE
    after = np.zeros_like(down)
    after[..., 1:] = np.logical_or.accumulate(down, axis=-1)[..., :-1]
    return np.maximum.accumulate(np.where(after, height, -np.inf), axis=-1)


def jumped(states: np.ndarray) -> np.ndarray:
    """``(..., T)`` bool: the body left the floor by :data:`JUMP_CLEARANCE` after a touchdown."""
    return takeoff_height(states) >= JUMP_CLEARANCE


def _steps(shape: tuple[int, ...]) -> np.ndarray:
    return np.broadcast_to(np.arange(shape[-1]), shape)


def _height_progress(states: np.ndarray) -> np.ndarray:
    return np.clip(takeoff_height(states) / JUMP_CLEARANCE, 0.0, 1.0)


class HalfCheetahTask(Task):
    """Shared plumbing: parameter round trip and the forward-reward term."""

    def speed_reward(self, forward_reward: np.ndarray) -> np.ndarray:
        """The task's reward term from the forward reward ``Δx / dt``."""
        raise NotImplementedError

    def to_params(self) -> dict[str, Any]:
        return {}

    @classmethod
    def from_params(cls, params: dict[str, Any]) -> HalfCheetahTask:
        return cls(**params)


@dataclass(frozen=True)
class Run(HalfCheetahTask):
    """Run 7 m forward or backward, judged from step 99 on; ``fast``: at 8.5 m per 99 steps
    on average, from step 99 on."""

    direction: str
    fast: bool = False
    family = "halfcheetah_run"

    def __post_init__(self) -> None:
        direction_sign(self.direction)
        if not isinstance(self.fast, (bool, np.bool_)):
            raise TypeError(f"fast must be a bool, got {self.fast!r}")
        object.__setattr__(self, "fast", bool(self.fast))

    @property
    def distance(self) -> float:
        return FAST_RUN_DISTANCE if self.fast else RUN_DISTANCE

    def success(self, states: np.ndarray) -> np.ndarray:
        along = direction_sign(self.direction) * displacement(states)
        steps = _steps(along.shape)
        needed = self.distance * steps / RUN_MIN_STEPS if self.fast else self.distance
        return (along > needed) & (steps >= RUN_MIN_STEPS)

    def progress(self, states: np.ndarray) -> np.ndarray:
        return direction_sign(self.direction) * displacement(states)

    def speed_reward(self, forward_reward: np.ndarray) -> np.ndarray:
        return direction_sign(self.direction) * forward_reward

    def instructions(self, wording: Wording = "train") -> list[str]:
        if self.fast:
            return text.fixed_wordings(f"run_{self.direction}_fast", wording)
        return text.train_wordings(f"run_{self.direction}", wording)

    def to_params(self) -> dict[str, Any]:
        return {"direction": self.direction, "fast": self.fast}


@dataclass(frozen=True)
class Jump(HalfCheetahTask):
    """Jump (see :func:`jumped`) and end up more than 0.3 m forward or backward."""

    direction: str
    family = "halfcheetah_jump"

    def __post_init__(self) -> None:
        direction_sign(self.direction)

    def success(self, states: np.ndarray) -> np.ndarray:
        along = direction_sign(self.direction) * displacement(states)
        return jumped(states) & (along > JUMP_DISTANCE)

    def progress(self, states: np.ndarray) -> np.ndarray:
        along = direction_sign(self.direction) * displacement(states)
        return _height_progress(states) + np.minimum(along / JUMP_DISTANCE, 1.0)

    def speed_reward(self, forward_reward: np.ndarray) -> np.ndarray:
        return direction_sign(self.direction) * forward_reward

    def instructions(self, wording: Wording = "train") -> list[str]:
        return text.train_wordings(f"jump_{self.direction}", wording)

    def to_params(self) -> dict[str, Any]:
        return {"direction": self.direction}


@dataclass(frozen=True)
class JumpInPlace(HalfCheetahTask):
    """Jump without ever straying 1.05 m or more from the start."""

    family = "halfcheetah_jump_in_place"

    def _reach(self, states: np.ndarray) -> np.ndarray:
        return np.maximum.accumulate(np.abs(displacement(states)), axis=-1)

    def success(self, states: np.ndarray) -> np.ndarray:
        return jumped(states) & (self._reach(states) < IN_PLACE_RADIUS)

    def progress(self, states: np.ndarray) -> np.ndarray:
        stray = np.maximum(self._reach(states) - IN_PLACE_RADIUS, 0.0) / IN_PLACE_RADIUS
        return _height_progress(states) - stray

    def speed_reward(self, forward_reward: np.ndarray) -> np.ndarray:
        return -np.abs(forward_reward)

    def instructions(self, wording: Wording = "train") -> list[str]:
        return text.fixed_wordings("jump_in_place", wording)


@dataclass(frozen=True)
class Shuttle(HalfCheetahTask):
    """Go at least 3 m in the ``first`` direction, then at least 3 m back from that extreme."""

    first: str
    family = "halfcheetah_shuttle"

    def __post_init__(self) -> None:
        direction_sign(self.first)

    def _legs(self, states: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        along = direction_sign(self.first) * displacement(states)
        peak = np.maximum.accumulate(along, axis=-1)
        return peak, peak - along

    def success(self, states: np.ndarray) -> np.ndarray:
        out, back = self._legs(states)
        return (out >= SHUTTLE_DISTANCE) & (back >= SHUTTLE_DISTANCE)

    def progress(self, states: np.ndarray) -> np.ndarray:
        out, back = self._legs(states)
        first = np.clip(out / SHUTTLE_DISTANCE, None, 1.0)
        second = np.where(out >= SHUTTLE_DISTANCE, np.clip(back / SHUTTLE_DISTANCE, 0, 1), 0.0)
        return first + second

    def speed_reward(self, forward_reward: np.ndarray) -> np.ndarray:
        return np.abs(forward_reward)

    def instructions(self, wording: Wording = "train") -> list[str]:
        return text.fixed_wordings(f"shuttle_{self.first}", wording)

    def to_params(self) -> dict[str, Any]:
        return {"first": self.first}
