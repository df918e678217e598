"""benchmarks/babyai_fixed_points.py: stuck episodes are told from moving ones, and a greedy
policy that takes a no-op in the real BabyAI env is classified as stuck while a mover is not."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "babyai_fixed_points.py"
spec = importlib.util.spec_from_file_location("babyai_fixed_points", SCRIPT)
fixed_points = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = fixed_points
spec.loader.exec_module(fixed_points)


def test_classify_fixed_point_cycle_and_moving():
    a, b, c = np.zeros(3), np.ones(3), np.full(3, 2.0)
    assert fixed_points.classify(np.stack([a] * 5), max_period=4) == "fixed point"
    assert fixed_points.classify(np.stack([a, b] * 3), max_period=4) == "cycle"
    assert fixed_points.classify(np.stack([a, b, c]), max_period=2) == "moving"
    assert fixed_points.classify(np.stack([a, b, c]), max_period=3) == "cycle"


def test_a_policy_that_only_picks_up_on_an_empty_cell_is_stuck_in_the_real_env():

    pickup = 3  # Discrete(7): 3 picks up; no easy task starts with an object under the agent
    records = fixed_points.run_episodes(
        lambda s, i: np.full(len(s), int(pickup)), "easy", episodes=4, seed=0
    )
    assert all(not r["success"] for r in records)
    assert all(fixed_points.classify(r["tail"][-20:], 4) == "fixed point" for r in records)


def test_epsilon_greedy_replaces_about_epsilon_of_the_actions():
    rng = np.random.default_rng(0)
    act = fixed_points.epsilon_greedy(lambda s, i: np.zeros(len(s), int), 0.25, 7, rng)
    actions = act(np.zeros((20000, 1)), [""] * 20000)
    changed = np.mean(actions != 0)
    assert abs(changed - 0.25 * 6 / 7) < 0.02  # a uniform draw keeps 0 one time in 7
    assert np.array_equal(
        fixed_points.epsilon_greedy(lambda s, i: np.ones(5, int), 0.0, 7, rng)(
            np.zeros((5, 1)), [""] * 5
        ),
        np.ones(5),
    )
