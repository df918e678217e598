"""In-memory transition buffers: compact tensors, batches gathered with a few index ops.

A buffer stores each state once (episodes are contiguous, so a transition's next state is the
row after its state) plus per-transition action, reward, done flag, instruction id and, when
they are not all 1, loss weights. Nothing per-step is derived on the fly except two gathers,
so sampling costs microseconds.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from tensordict import TensorDict
from torch import Tensor

from imaginebench.batch import TransitionBatch
from imaginebench.data.format import RolloutDataset


@dataclass
class TransitionBuffer:
    """Transitions of one pool of episodes; each keeps its source (0 real, 1 imaginary)."""

    states: Tensor  # (S, D) float32
    # (N,): state_index i32, action, reward f32, done, instruction_id i32, source u8 and, if
    # given, weight f32 (otherwise every transition weighs 1)
    data: TensorDict

    @classmethod
    def from_dataset(
        cls, dataset: RolloutDataset, instruction_ids: np.ndarray, weight: np.ndarray | None = None
    ) -> "TransitionBuffer":
        """Pack a dataset; ``instruction_ids`` maps its instruction table to global ids and
        ``weight`` gives each transition's loss weight (default 1)."""
        state_idx, _ = dataset.transition_indices()
        episode = dataset.transition_episodes()
        if dataset.is_discrete:
            n = int(dataset.action_spec["n"])
            dtype = torch.uint8 if n <= 256 else torch.int16 if n <= 32767 else torch.int64
            action = torch.as_tensor(dataset.actions.astype(np.int64)).to(dtype)
        else:
            action = torch.as_tensor(dataset.actions, dtype=torch.float32)
        data = TensorDict(
            {
                "state_index": torch.as_tensor(state_idx.astype(np.int32)),
                "action": action,
                "reward": torch.as_tensor(dataset.rewards, dtype=torch.float32),
                "done": torch.as_tensor(dataset.terminals, dtype=torch.bool),
                "instruction_id": torch.as_tensor(
                    instruction_ids[dataset.episode_instruction[episode]].astype(np.int32)
                ),
                "source": torch.as_tensor(dataset.episode_source[episode].astype(np.uint8)),
            },
            batch_size=[dataset.num_transitions],
        )
        if weight is not None:
            data["weight"] = torch.as_tensor(np.asarray(weight, dtype=np.float32))
        return cls(torch.as_tensor(dataset.states, dtype=torch.float32), data)

    def select(self, keep: np.ndarray) -> TransitionBuffer:
        """The buffer of the transitions where ``keep`` (``(N,)`` bool) holds."""
        rows = torch.as_tensor(np.flatnonzero(keep))
        return TransitionBuffer(self.states, self.data[rows])

    def __len__(self) -> int:
        return int(self.data.batch_size[0])

    @property
    def nbytes(self) -> int:
        return self.states.nbytes + sum(t.nbytes for t in self.data.values())

    def gather(self, index: Tensor) -> TransitionBatch:
        """The transitions at ``index`` as a dict of tensors (action as int64 / float32)."""
        d = self.data
        state_index = d["state_index"][index].long()
        action = d["action"][index]
        return {
            "state": self.states[state_index],
            "next_state": self.states[state_index + 1],
            "action": action.long() if not action.is_floating_point() else action,
            "reward": d["reward"][index],
            "done": d["done"][index],
            "instruction_id": d["instruction_id"][index].long(),
            "source": d["source"][index],
            "weight": d["weight"][index] if "weight" in d else torch.ones(index.shape),
        }


def cat_batches(parts: list[TransitionBatch], batch_size: list[int]) -> TensorDict:
    """One TensorDict of ``batch_size`` from per-source parts, concatenated along the last
    batch dimension."""
    if len(parts) == 1:
        return TensorDict(parts[0], batch_size=batch_size)
    dim = len(batch_size) - 1
    return TensorDict(
        {k: torch.cat([p[k] for p in parts], dim=dim) for k in parts[0]}, batch_size=batch_size
    )
