"""Push statistics of CLEVR transitions, to compare the simulator with the original real data."""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from imaginebench.envs.clevr.physics import NUM_BALLS, PUSH_DIRECTIONS

BLOCKED_BELOW = 0.03  # a push that moves its ball less than this counts as blocked

# Measured on the original KALM real data (80 episodes, 898 transitions).
ORIGINAL = {
    "pushed_mean": 0.161,
    "pushed_median": 0.173,
    "pushed_std": 0.105,
    "pushed_max": 0.449,
    "blocked_fraction": 0.22,
    "unblocked_mean_+x": 0.183,
    "unblocked_mean_+y": 0.220,
    "unblocked_mean_-x": 0.187,
    "unblocked_mean_-y": 0.182,
    "other_mean": 0.020,
    "other_moving_fraction": 0.28,
    "pushed_is_largest_mover": 0.865,
}


@dataclass(frozen=True)
class PushStatistics:
    transitions: int
    pushed_mean: float
    pushed_median: float
    pushed_std: float
    pushed_max: float
    blocked_fraction: float
    unblocked_mean_by_direction: dict[str, float]
    other_mean: float
    other_moving_fraction: float
    pushed_is_largest_mover: float

    def as_flat_dict(self) -> dict[str, float]:
        flat = {k: v for k, v in asdict(self).items() if k != "unblocked_mean_by_direction"}
        flat.update({f"unblocked_mean_{k}": v for k, v in self.unblocked_mean_by_direction.items()})
        return flat


_DIRECTION_NAMES = ("+x", "+y", "-x", "-y", "+x+y", "-x+y", "+x-y", "-x-y")


def push_statistics(
    states: np.ndarray, next_states: np.ndarray, actions: np.ndarray
) -> PushStatistics:
    """Displacement statistics of the pushed ball and of the other balls per transition."""
    before = np.asarray(states, dtype=np.float64).reshape(-1, NUM_BALLS, 2)
    after = np.asarray(next_states, dtype=np.float64).reshape(-1, NUM_BALLS, 2)
    actions = np.asarray(actions)
    ball, direction = actions // len(PUSH_DIRECTIONS), actions % len(PUSH_DIRECTIONS)
    moved = np.linalg.norm(after - before, axis=-1)  # (N, 5)
    rows = np.arange(len(actions))
    pushed = moved[rows, ball]
    others = np.ones_like(moved, dtype=bool)
    others[rows, ball] = False
    unblocked = pushed >= BLOCKED_BELOW
    by_direction = {
        name: float(pushed[unblocked & (direction == j)].mean())
        for j, name in enumerate(_DIRECTION_NAMES)
        if (unblocked & (direction == j)).any()
    }
    return PushStatistics(
        transitions=len(actions),
        pushed_mean=float(pushed.mean()),
        pushed_median=float(np.median(pushed)),
        pushed_std=float(pushed.std()),
        pushed_max=float(pushed.max()),
        blocked_fraction=float(np.mean(~unblocked)),
        unblocked_mean_by_direction=by_direction,
        other_mean=float(moved[others].mean()),
        other_moving_fraction=float(np.mean(moved[others] > 0.01)),
        pushed_is_largest_mover=float(np.mean(moved.argmax(axis=1) == ball)),
    )
