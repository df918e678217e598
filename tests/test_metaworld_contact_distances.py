"""benchmarks/metaworld_contact_distances.py on constructed Meta-World states: a puck pushed by
the hand moves at the hand's distance, one that moves with the hand far away is measured as
far, a puck sliding on after the push counts the push within the window, a still entity has
no moving steps."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

from imaginebench.envs.metaworld.layout import TCP_OFFSET, pack_state

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "metaworld_contact_distances.py"
spec = importlib.util.spec_from_file_location("metaworld_contact_distances", SCRIPT)
contact = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = contact
spec.loader.exec_module(contact)

UNIT_QUAT = np.array([1.0, 0.0, 0.0, 0.0])


def _episode(hand_tcp: list[list[float]], puck: list[list[float]]) -> np.ndarray:
    """States whose tool centre point and puck follow the given paths; a still faucet beside."""
    faucet = np.concatenate([[0.3, 0.8, 0.0], UNIT_QUAT])
    return np.stack(
        [
            pack_state(
                np.asarray(h) - TCP_OFFSET,
                0.0,
                np.zeros(3),
                {"target_object": np.concatenate([p, UNIT_QUAT]), "faucet": faucet},
            )
            for h, p in zip(hand_tcp, puck)
        ]
    )


def test_a_pushed_puck_moves_at_the_hands_distance_and_a_still_entity_never_moves():
    hand = [[0.0, 0.60 + 0.01 * t, 0.02] for t in range(6)]
    puck = [[0.0, 0.62, 0.02]] * 3 + [[0.0, 0.62 + 0.01 * t, 0.02] for t in range(1, 4)]
    distances = contact.contact_distances(_episode(hand, puck))
    assert len(distances["target_object"]) == 3  # the hand reaches it at step 2 and pushes it on
    assert distances["target_object"].max() == pytest.approx(0.0, abs=1e-9)
    assert len(distances["faucet"]) == 0


def test_a_puck_moving_with_the_hand_far_away_is_measured_far():
    hand = [[0.0, 0.40, 0.20]] * 6
    puck = [[0.0, 0.70 + 0.01 * t, 0.02] for t in range(6)]
    far = contact.contact_distances(_episode(hand, puck))["target_object"]
    assert len(far) == 5 and far.min() > 0.3


def test_a_puck_sliding_on_after_the_push_counts_the_push_within_the_window():
    # the hand touches the puck at step 0, then draws back 0.1 m per step; the puck slides on
    hand = [[0.0, 0.60, 0.02]] + [[0.0, 0.60 - 0.1 * t, 0.02] for t in range(1, 9)]
    puck = [[0.0, 0.60 + 0.01 * t, 0.02] for t in range(9)]
    states = _episode(hand, puck)
    within = contact.contact_distances(states, window=10)["target_object"]
    assert within.max() == pytest.approx(0.0, abs=1e-9)
    narrow = contact.contact_distances(states, window=1)["target_object"]
    assert narrow.max() > 0.5  # the last slide: the hand is 0.7 m back by then
