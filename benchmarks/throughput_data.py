"""The throughput benchmark's data: CLEVR-Robot expert episodes (collected once and cached),
the flat tensors the bare loop samples from, and the continuous view of the same transitions."""

from __future__ import annotations

import dataclasses
import inspect
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor

from imaginebench.modules.backbone import DEFAULT_ENCODER, shared_encoder

# CLEVR's 8 push directions (action % 8): the continuous actions of the continuous algorithms.
DIRECTIONS = np.array(
    [[1, 0], [0, 1], [-1, 0], [0, -1], [0.8, 0.8], [-0.8, 0.8], [0.8, -0.8], [-0.8, -0.8]],
    dtype=np.float32,
)


@dataclass(frozen=True)
class Hyper:
    """Sizes shared by all contenders."""

    batch_size: int = 256
    hidden: tuple[int, ...] = (256, 256)
    instruction_dim: int = 64


@dataclass
class Data:
    path: Path
    dataset: Any  # RolloutDataset (continuous actions for the continuous view)
    state_dim: int
    action_spec: dict
    instructions: list[str]
    embeddings: Tensor  # (num_instructions, 384), rows in the data module's instruction order
    standardized: bool  # embeddings standardised per dimension, as our modules do by default
    state_mean: Tensor
    state_std: Tensor
    # flat transition tensors (the data module's real buffer)
    states: Tensor
    state_index: Tensor
    action: Tensor  # int64 (discrete) or (N, 2) float32 in [-1, 1]
    reward: Tensor
    done: Tensor
    instruction_id: Tensor

    @property
    def transitions(self) -> int:
        return int(self.action.shape[0])

    @property
    def discrete(self) -> bool:
        return self.action_spec["type"] == "discrete"


def _module_default(name: str, fallback: object) -> object:
    """Default of an ``OfflineRLModule`` constructor argument (``fallback`` if it has none)."""
    from imaginebench.modules.offline.base import OfflineRLModule

    param = inspect.signature(OfflineRLModule.__init__).parameters.get(name)
    return fallback if param is None or param.default is inspect.Parameter.empty else param.default


def load_data(episodes: int, seed: int, cache_dir: Path) -> Data:
    from imaginebench.data.collect import collect
    from imaginebench.data.format import load_dataset, save_dataset
    from imaginebench.datamodules import RealImaginaryDataModule

    path = cache_dir / f"clevr_train_n{episodes}_s{seed}_e0.2.h5"
    if not path.exists():
        dataset, stats = collect("clevr", "train", episodes, seed=seed, epsilon=0.2, progress=False)
        save_dataset(dataset, path, overwrite=True)
        print(f"# {stats} -> {path}", flush=True)
    dm = RealImaginaryDataModule(real=str(path), ratio=0.0, batch_size=256)
    dm.setup()
    buf = dm.real
    assert buf is not None
    encoder = shared_encoder(DEFAULT_ENCODER, "mean", True)  # what the modules' banks use
    embeddings = encoder.encode(dm.instructions)
    # Match whatever our modules feed the network by default: if they standardise the
    # embeddings (with the training instructions' mean and std), the other contenders get the
    # same standardised table, computed once.
    standardize = _module_default("standardize_instructions", False) and len(embeddings) > 1
    if standardize:
        embeddings = (embeddings - embeddings.mean(0)) / embeddings.std(0).clamp_min(1e-4)
    return Data(
        path=path,
        dataset=load_dataset(path),
        state_dim=dm.state_dim,
        action_spec=dm.action_spec,
        instructions=list(dm.instructions),
        embeddings=embeddings,
        standardized=bool(standardize),
        state_mean=buf.states.mean(0),
        state_std=buf.states.std(0).clamp_min(1e-3),
        states=buf.states,
        state_index=buf.data["state_index"].long(),
        action=buf.data["action"].long(),
        reward=buf.data["reward"].float(),
        done=buf.data["done"].float(),
        instruction_id=buf.data["instruction_id"].long(),
    )


def continuous_view(data: Data) -> Data:
    """The same transitions with each push replaced by its 2-d direction in ``[-1, 1]^2``."""
    spec = {"type": "continuous", "shape": [2], "low": -1.0, "high": 1.0}
    dataset = dataclasses.replace(
        data.dataset, actions=DIRECTIONS[data.dataset.actions % 8], action_spec=spec
    )
    return dataclasses.replace(
        data,
        dataset=dataset,
        action_spec=spec,
        action=torch.as_tensor(DIRECTIONS)[data.action % 8],
    )
