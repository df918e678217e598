"""The in-memory transition buffer: compact storage, exact batches."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from imaginebench.data.dataset import Episode, RolloutDataset
from imaginebench.datamodules.buffer import TransitionBuffer


def _dataset(actions: list, action_spec: dict, source: str = "real") -> RolloutDataset:
    """One episode of ``len(actions)`` steps through the 3-d states 0, 1, 2, ... (row-major)."""
    steps = len(actions)
    episode = Episode(
        states=np.arange((steps + 1) * 3, dtype=np.float32).reshape(steps + 1, 3),
        actions=np.asarray(actions),
        rewards=np.arange(steps, dtype=np.float32) / 10,
        terminated=True,
        truncated=False,
        instruction="go",
        task_spec='{"family": "x"}',
        level="train" if source == "real" else "rephrase",
        source=source,
        success=True,
    )
    return RolloutDataset.from_episodes([episode], domain="clevr", action_spec=action_spec)


@pytest.mark.parametrize(
    ("n", "stored"),
    [
        (40, torch.uint8),
        (256, torch.uint8),
        (257, torch.int16),
        (32767, torch.int16),
        (32768, torch.int64),
    ],
)
def test_discrete_actions_are_stored_in_the_smallest_type_that_holds_every_action(n, stored):
    """Action ids 0 .. n-1: uint8 holds 256 of them, int16 32767 (its largest is 32767, so an
    id of n - 1 = 32767 would not fit with n = 32768); batches return them as int64."""
    dataset = _dataset([0, n - 1, 3], {"type": "discrete", "n": n})
    buffer = TransitionBuffer.from_dataset(dataset, np.array([5]))
    assert buffer.data["action"].dtype == stored
    batch = buffer.gather(torch.tensor([1, 0, 2]))
    assert batch["action"].dtype == torch.int64
    assert batch["action"].tolist() == [n - 1, 0, 3]


def test_a_batch_is_the_transitions_at_its_indices_in_their_stored_types():
    dataset = _dataset(
        [[0.25, -0.5], [0.75, 1.0], [-1.0, 0.125]],
        {"type": "continuous", "shape": [2], "low": -1.0, "high": 1.0},
        source="imaginary",
    )
    buffer = TransitionBuffer.from_dataset(dataset, np.array([7]), weight=np.array([1, 0.5, 0]))
    assert buffer.states.dtype == torch.float32
    batch = buffer.gather(torch.tensor([2, 0]))
    np.testing.assert_array_equal(batch["state"], [[6, 7, 8], [0, 1, 2]])
    np.testing.assert_array_equal(batch["next_state"], [[9, 10, 11], [3, 4, 5]])
    assert batch["action"].dtype == torch.float32  # continuous actions are not rounded
    np.testing.assert_array_equal(batch["action"], [[-1.0, 0.125], [0.25, -0.5]])
    assert batch["reward"].dtype == torch.float32
    np.testing.assert_allclose(batch["reward"], [0.2, 0.0])
    assert batch["done"].dtype == torch.bool and batch["done"].tolist() == [True, False]
    assert batch["instruction_id"].dtype == torch.int64
    assert batch["instruction_id"].tolist() == [7, 7]
    assert batch["source"].dtype == torch.uint8 and batch["source"].tolist() == [1, 1]
    assert batch["weight"].dtype == torch.float32 and batch["weight"].tolist() == [0.0, 1.0]
    assert buffer.nbytes == 4 * 4 * 3 + sum(t.nbytes for t in buffer.data.values())
