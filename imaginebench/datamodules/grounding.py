"""GroundingDataModule: real rollouts served as grounding-task references for the LM fine-tune.

Batches are ``{"task", "episode", "step"}`` tensors: which grounding task to build, from which
episode and (for dynamics prediction) which transition. The module turns them into token
sequences with its own tokenizer. Like the RL data module, batch ``k`` is a pure function of
``(seed, k)``, DDP ranks take slices of one global batch, and a resumed run sees the same
stream. Validation batches come from held-out rollouts (all wordings of a held-out rollout are
held out together).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import lightning as L
import numpy as np
import torch
from torch.utils.data import DataLoader

from imaginebench.config import as_config
from imaginebench.data.collect import CollectConfig
from imaginebench.data.format import RolloutDataset
from imaginebench.datamodules.sources import (
    default_cache_dir,
    domain_spec,
    ensure_real_dataset,
    load_real_dataset,
    real_dataset_path,
)
from imaginebench.modules.grounding.sequences import TASK_KINDS

log = logging.getLogger(__name__)

DEFAULT_TASK_WEIGHTS = {"generation": 1.0, "dynamics": 1.0, "explanation": 1.0, "final_state": 1.0}


class GroundingDataModule(L.LightningDataModule):
    """Real rollouts for the grounding fine-tune.

    Args:
        domain: environment domain.
        real: path of the real dataset (collected there if missing and ``collect`` is set;
            with ``real=None`` into the cache, named after ``collect``).
        collect: how to collect missing real data, a :class:`CollectConfig` or a dict of its
            fields.
        cache_dir: where collected data goes.
        task_weights: sampling weight of each grounding task (``generation``, ``dynamics``,
            ``explanation``, ``final_state``); 0 disables a task.
        batch_size: sequences per batch and process.
        seed: seed of the batch stream and of the validation split.
        val_fraction: fraction of rollouts held out for validation.
        val_batches: number of fixed validation batches.
        first_window_share: share of the generation sequences whose window starts at the
            episode's first transition (the rest start uniformly). Imagination always begins
            there, from a reset state where only the instruction tells the task; uniform windows
            of 100-200-step episodes start there about once in 75-175 draws, so later windows,
            whose states already show the task (a running cheetah's velocity), teach the LM to
            ignore the words. 0 (default): uniform starts. Needs the module's ``window``.
        instruction_dropout: share of the generation sequences whose instruction is replaced
            by the empty one (the references' ``blank`` flag), so the same model also learns the
            rollout without words, which instruction guidance (``decoding.guidance`` of
            :class:`~imaginebench.imagination.decoder.DecodingConfig`) contrasts with the
            instructed one. 0 (default): every sequence keeps its words.
    """

    def __init__(
        self,
        domain: str = "clevr",
        real: str | None = None,
        collect: CollectConfig | Mapping[str, Any] | None = None,
        cache_dir: str | None = None,
        task_weights: dict[str, float] | None = None,
        batch_size: int = 16,
        seed: int = 0,
        val_fraction: float = 0.05,
        val_batches: int = 4,
        first_window_share: float = 0.0,
        instruction_dropout: float = 0.0,
    ) -> None:
        super().__init__()
        collect = as_config(collect, CollectConfig, "collect")
        self.save_hyperparameters()  # after the conversion: records the CollectConfig
        self.spec = domain_spec(domain)
        weights = dict(DEFAULT_TASK_WEIGHTS if task_weights is None else task_weights)
        unknown = set(weights) - set(TASK_KINDS)
        if unknown:
            raise ValueError(f"unknown grounding tasks {sorted(unknown)}; known: {TASK_KINDS}")
        probs = np.array([max(float(weights.get(k, 0.0)), 0.0) for k in TASK_KINDS])
        if probs.sum() <= 0:
            raise ValueError(f"task_weights must give some task a positive weight: {weights}")
        self.task_probs = torch.as_tensor(probs / probs.sum(), dtype=torch.float64)
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if not 0.0 <= val_fraction < 1.0:
            raise ValueError(f"val_fraction must be in [0, 1), got {val_fraction}")
        if not 0.0 <= first_window_share <= 1.0:
            raise ValueError(f"first_window_share must be in [0, 1], got {first_window_share}")
        self.first_window_share = first_window_share
        if not 0.0 <= instruction_dropout < 1.0:
            raise ValueError(f"instruction_dropout must be in [0, 1), got {instruction_dropout}")
        self.instruction_dropout = instruction_dropout
        self.domain, self.real_path, self.collect = domain, real, collect
        self.cache_dir = Path(cache_dir) if cache_dir else default_cache_dir()
        self.batch_size, self.seed = batch_size, seed
        self.val_fraction, self.val_batches = val_fraction, val_batches
        self.state_dim, self.action_spec = self.spec.state_dim, dict(self.spec.action_spec)
        self.dataset: RolloutDataset | None = None
        self.train_episodes = torch.zeros(0, dtype=torch.long)
        self.val_episodes = torch.zeros(0, dtype=torch.long)
        self.lengths = torch.zeros(0, dtype=torch.long)

    # -- data ---------------------------------------------------------------------------------
    def resolved_real_path(self) -> Path:
        return real_dataset_path(self.domain, self.real_path, self.collect, self.cache_dir)

    def prepare_data(self) -> None:
        ensure_real_dataset(self.domain, self.resolved_real_path(), self.collect)

    def setup(self, stage: str | None = None) -> None:
        if self.dataset is not None:
            return
        path = self.resolved_real_path()
        dataset = load_real_dataset(self.domain, path, self.collect, self.spec)
        self.dataset = dataset
        self.lengths = torch.as_tensor(dataset.episode_lengths(), dtype=torch.long)
        # Wordings of one rollout share its first state: hold out whole rollouts.
        first_states = dataset.states[dataset.episode_offsets[:-1] + np.arange(len(dataset))]
        _, rollout = np.unique(first_states, axis=0, return_inverse=True)
        rng = np.random.default_rng([self.seed, 1])
        n_rollouts = int(rollout.max()) + 1
        held_out = rng.random(n_rollouts) < self.val_fraction
        is_val = held_out[rollout.ravel()]
        self.train_episodes = torch.as_tensor(np.flatnonzero(~is_val), dtype=torch.long)
        self.val_episodes = torch.as_tensor(np.flatnonzero(is_val), dtype=torch.long)
        if len(self.train_episodes) == 0:
            raise ValueError(f"{path}: no training episodes left after the validation split")
        log.info(
            "grounding data: %d training and %d validation episodes (%d rollouts)",
            len(self.train_episodes),
            len(self.val_episodes),
            n_rollouts,
        )

    def references(
        self, step: int, episodes: torch.Tensor, size: int, stream: int = 0
    ) -> dict[str, torch.Tensor]:
        """Batch ``step`` of ``size`` references drawn from ``episodes`` (a pure function of
        ``(seed, stream, step)``; stream 0 trains, stream 1 validates)."""
        generator = torch.Generator()
        seed = np.random.SeedSequence([self.seed, stream, step]).generate_state(1)[0]
        generator.manual_seed(int(seed))
        task = torch.multinomial(self.task_probs, size, replacement=True, generator=generator)
        episode = episodes[torch.randint(len(episodes), (size,), generator=generator)]
        fraction = torch.rand(size, generator=generator, dtype=torch.float64)
        step_in_episode = (fraction * self.lengths[episode]).long()
        if self.first_window_share > 0:  # drawn only then: the stream of 0 is unchanged
            draw = torch.rand(size, generator=generator, dtype=torch.float64)
            first = (draw < self.first_window_share) & (task == TASK_KINDS.index("generation"))
            step_in_episode[first] = 0
        refs = {"task": task, "episode": episode, "step": step_in_episode}
        if self.instruction_dropout > 0:  # drawn only then: the stream of 0 is unchanged
            draw = torch.rand(size, generator=generator, dtype=torch.float64)
            generation = task == TASK_KINDS.index("generation")
            refs["blank"] = (draw < self.instruction_dropout) & generation
        return refs

    # -- loaders ------------------------------------------------------------------------------
    def train_dataloader(self) -> "_ReferenceStream":
        return _ReferenceStream(self)

    def val_dataloader(self) -> DataLoader:
        self.setup()
        if len(self.val_episodes) == 0 or self.val_batches == 0:
            return DataLoader([], batch_size=None)
        trainer = self.trainer
        rank = trainer.global_rank if trainer is not None else 0
        world = trainer.world_size if trainer is not None else 1
        batches = []
        for k in range(self.val_batches):
            refs = self.references(k, self.val_episodes, self.batch_size * world, stream=1)
            batches.append({key: v[rank::world] for key, v in refs.items()})
        return DataLoader(batches, batch_size=None)  # batches are ready: no collation


class _ReferenceStream:
    """Endless training references starting at the trainer's step, sliced by rank."""

    def __init__(self, datamodule: GroundingDataModule) -> None:
        self.datamodule = datamodule

    def __iter__(self) -> Iterator[dict[str, torch.Tensor]]:
        dm = self.datamodule
        dm.setup()
        trainer = dm.trainer
        step = trainer.global_step if trainer is not None else 0
        rank = trainer.global_rank if trainer is not None else 0
        world = trainer.world_size if trainer is not None else 1
        while True:
            refs = dm.references(step, dm.train_episodes, dm.batch_size * world)
            yield {key: v[rank::world] for key, v in refs.items()}
            step += 1
