"""Dynamics fidelity: push displacements on expert episodes against the original real data."""

import numpy as np
import pytest

from imaginebench.data.collect import collect
from imaginebench.envs.clevr.physics import ClevrPhysics
from imaginebench.envs.clevr.stats import ORIGINAL, push_statistics
from imaginebench.envs.clevr.suite import sample_ball_positions


@pytest.fixture(scope="module")
def expert_stats():
    data, _ = collect("clevr", "train", 150, seed=0, epsilon=0.2, progress=False)
    s, s1 = data.transition_indices()
    return push_statistics(data.states[s], data.states[s1], data.actions)


def test_pushed_ball_moves_like_the_original(expert_stats):
    st = expert_stats
    # Magnitude of a free push: within 0.05 of the original's per-direction means.
    for axis in ("+x", "+y", "-x", "-y"):
        assert abs(st.unblocked_mean_by_direction[axis] - ORIGINAL[f"unblocked_mean_{axis}"]) < 0.05
    assert 0.15 <= st.pushed_median <= 0.26  # original 0.173
    assert 0.14 <= st.pushed_mean <= 0.25  # original 0.161
    assert st.pushed_max < 0.45  # original max 0.449


def test_other_balls_mostly_still(expert_stats):
    st = expert_stats
    assert st.other_mean < 0.04  # original 0.020
    assert st.other_moving_fraction < 0.4  # original 0.28
    assert st.pushed_is_largest_mover > 0.85  # original 0.865


def test_random_pushes_and_wall_blocking():
    """Random scenes: free pushes move ~0.2; pushes into a wall are blocked (< 0.03)."""
    rng = np.random.default_rng(0)
    physics = ClevrPhysics()
    free, blocked = [], []
    for _ in range(60):
        start = sample_ball_positions(rng)
        physics.set_state(start)
        action = int(rng.integers(40))
        after = physics.push(action)
        free.append(np.linalg.norm((after - start).reshape(5, 2)[action // 8]))
        # Pin red against the left wall, then push it further left.
        pinned = start.copy()
        pinned[0] = -0.47
        if np.min(np.linalg.norm(pinned[2:].reshape(4, 2) - pinned[:2], axis=1)) > 0.3:
            physics.set_state(pinned)
            blocked.append(np.linalg.norm(physics.push(2)[:2] - pinned[:2]))
    assert 0.17 < np.median(free) < 0.26
    assert blocked and np.max(blocked) < 0.03
