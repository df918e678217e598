"""The object-centric Meta-World state model (imaginebench.imagination.slots): it learns the
hand's motion from real transitions, keeps the domain's facts whatever the action (the wall
and empty slots still, unit quaternions, the hand and gripper in bounds), holds still the
entries real changes never move, and refuses what it cannot model."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("metaworld")

from imaginebench.data.collect import collect  # noqa: E402
from imaginebench.envs.metaworld.layout import (  # noqa: E402
    ENTITIES,
    GRIPPER,
    HAND,
    HAND_HIGH,
    HAND_LOW,
    entity_pos,
    entity_slice,
)
from imaginebench.envs.metaworld.mocap import dynamics_context  # noqa: E402
from imaginebench.imagination.confidence import dataset_context  # noqa: E402
from imaginebench.imagination.slots import SlotConfig, SlotDynamics  # noqa: E402

TINY = SlotConfig(members=2, hidden=(64,), max_steps=300, seed=0)


@pytest.fixture(scope="module")
def real():
    return collect("metaworld", "train", 12, seed=0, epsilon=0.1, progress=False)[0]


@pytest.fixture(scope="module")
def model(real):
    return SlotDynamics.fit(real, TINY)


def _transitions(data):
    before, after = data.transition_indices()
    states = np.asarray(data.states, np.float32)
    return states[before], np.asarray(data.actions, np.float32), states[after]


def test_it_predicts_the_hands_motion_better_than_standing_still(model):
    """On episodes it never saw, the predicted hand position after one step is far closer to
    the simulator's than the current position is (the hand moves about a centimetre a step)."""
    fresh = collect("metaworld", "train", 4, seed=7, epsilon=0.1, progress=False)[0]
    s, a, s2 = _transitions(fresh)
    predicted = model.next_states(s, a, dataset_context(fresh, dynamics_context))
    error = np.linalg.norm(predicted[:, HAND] - s2[:, HAND], axis=1).mean()
    still = np.linalg.norm(s[:, HAND] - s2[:, HAND], axis=1).mean()
    assert error < 0.5 * still


def test_domain_facts_hold_under_any_action(real, model):
    """Random actions, even pushing out of the box: the hand stays in Meta-World's box, the
    gripper in [0, 1], the wall where it was, empty slots zero, quaternions unit length (zero
    where unused), and the entries of each type that its real changes leave alone stay put."""
    s, _, _ = _transitions(real)
    rng = np.random.default_rng(0)
    a = rng.uniform(-1, 1, (len(s), 4)).astype(np.float32) * 3
    context = dataset_context(real, dynamics_context)
    wall = s.copy()
    wall[:, entity_slice("wall")] = [0.1, 0.8, 0.1, 1.0, 0.0, 0.0, 0.0]  # a wall in the scene
    out = model.next_states(wall, a, context)
    assert np.all(out[:, HAND] >= np.asarray(HAND_LOW) - 1e-6)
    assert np.all(out[:, HAND] <= np.asarray(HAND_HIGH) + 1e-6)
    assert np.all((out[:, GRIPPER] >= 0) & (out[:, GRIPPER] <= 1))
    np.testing.assert_array_equal(out[:, entity_slice("wall")], wall[:, entity_slice("wall")])
    for entity in ENTITIES:
        where = entity_slice(entity)
        empty = ~np.any(wall[:, entity_pos(entity)] != 0, 1)
        np.testing.assert_array_equal(out[empty][:, where], 0.0)
        quat = slice(where.start + 3, where.stop)  # unit stays unit, an unused zero stays zero
        had = np.linalg.norm(wall[:, quat], axis=1) > 0
        np.testing.assert_allclose(np.linalg.norm(out[:, quat], axis=1), had, atol=1e-5)
    for entity, still in model.still.items():
        rows = np.any(s[:, entity_pos(entity)] != 0, 1)
        changed = out[rows][:, entity_slice(entity)] - wall[rows][:, entity_slice(entity)]
        assert still.any()  # the real data leave some entries of every type alone
        position = still & (np.arange(len(still)) < 3)  # a quaternion's are renormalised
        np.testing.assert_allclose(changed[:, position], 0.0, atol=1e-6)


def test_members_are_distinct_models_and_the_mean_is_their_average(real, model):
    s, a, _ = _transitions(real)
    context = dataset_context(real, dynamics_context)
    one, two = (model.next_states(s[:50], a[:50], context[:50], member=m) for m in (0, 1))
    assert not np.allclose(one, two)
    episode = real.episode(0)
    from imaginebench.envs.base import Task

    rollouts = model.member_rollouts(
        Task.from_spec(episode.task_spec), episode.states[0], episode.actions[:5]
    )
    assert rollouts.shape == (2, 6, 91)
    np.testing.assert_allclose(rollouts[:, 0], np.stack([episode.states[0]] * 2), atol=1e-6)


def test_what_it_cannot_model_is_refused(real, model):
    s, a, _ = _transitions(real)
    with pytest.raises(ValueError, match="dynamics context"):
        model.next_states(s[:3], a[:3])
    babyai = collect("babyai", "train", 2, seed=0, epsilon=0.0, progress=False)[0]
    with pytest.raises(ValueError, match="Meta-World's"):
        SlotDynamics.fit(babyai, TINY)
    with pytest.raises(ValueError, match="unseen"):
        SlotConfig(unseen="frozen")
    with pytest.raises(ValueError, match="type_dropout"):
        SlotConfig(type_dropout=1.5)
