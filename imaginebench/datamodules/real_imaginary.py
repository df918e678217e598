"""RealImaginaryDataModule: real and imaginary rollouts mixed at a fixed ratio per batch."""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Iterator, Literal

import lightning as L
import numpy as np
import torch
from tensordict import TensorDict
from torch import Tensor

from imaginebench.config import as_config
from imaginebench.data.atomic import file_lock
from imaginebench.data.collect import CollectConfig
from imaginebench.data.format import DatasetError, RolloutDataset, load_dataset, save_dataset
from imaginebench.data.shipped import resolve_data_path
from imaginebench.datamodules.buffer import TransitionBuffer, cat_batches
from imaginebench.envs import get_domain, make
from imaginebench.envs.base import action_spec_of

log = logging.getLogger(__name__)


def default_cache_dir() -> Path:
    """``$IMAGINEBENCH_CACHE`` or ``~/.cache/imaginebench``."""
    return Path(os.environ.get("IMAGINEBENCH_CACHE", Path.home() / ".cache" / "imaginebench"))


def real_dataset_path(
    domain: str,
    real: str | None,
    collect: CollectConfig | Mapping[str, Any] | None,
    cache_dir: Path,
) -> Path:
    """``real`` if given, else the cache file named after the collection config."""
    collect = as_config(collect, CollectConfig, "collect")
    if real:
        return resolve_data_path(real)
    if collect is None:
        raise ValueError("no real dataset given: set data.real or data.collect")
    return cache_dir / collect.filename(domain)


def ensure_real_dataset(
    domain: str, path: Path, collect: CollectConfig | Mapping[str, Any] | None
) -> None:
    """Collect the real dataset at ``path`` with the expert if the file is missing.

    Runs started together on an empty cache collect it once: the others wait on a lock file
    beside it (``.<name>.lock``) and then find the file."""
    if path.exists():
        return
    collect = as_config(collect, CollectConfig, "collect")
    if collect is None:
        raise FileNotFoundError(f"real dataset {path} does not exist and data.collect is unset")
    from imaginebench.data.collect import collect as run_collection

    with file_lock(path.parent / f".{path.name}.lock"):
        if path.exists():  # collected by another run while we waited
            return
        log.warning("real dataset %s missing: collecting %s", path, collect)
        dataset, stats = run_collection(
            domain,
            collect.level,
            collect.episodes,
            collect.seed,
            epsilon=collect.epsilon,
            paraphrases=collect.paraphrases,
        )
        save_dataset(dataset, path)
    log.warning("%s -> %s", stats, path)


def check_matches_env(
    dataset: RolloutDataset, path: Path, domain: str, state_dim: int, action_spec: dict
) -> None:
    """Raise :class:`DatasetError` unless ``dataset`` fits the domain's environment: domain,
    state size, action type and size (``n``, or the continuous shape) and, for continuous
    actions, every action inside the environment's bounds."""
    if dataset.domain != domain:
        raise DatasetError(path, f"domain is {dataset.domain!r}, expected {domain!r}")
    if dataset.state_dim != state_dim:
        raise DatasetError(path, f"state_dim {dataset.state_dim} != env's {state_dim}")
    spec = dataset.action_spec
    size = "n" if action_spec["type"] == "discrete" else "shape"
    if spec.get("type") != action_spec["type"] or spec.get(size) != action_spec.get(size):
        raise DatasetError(path, f"action spec {spec} != env's {action_spec}")
    if action_spec["type"] == "continuous" and dataset.num_transitions:
        low, high = np.float32(action_spec["low"]), np.float32(action_spec["high"])
        outside = ((dataset.actions < low) | (dataset.actions > high)).reshape(
            dataset.num_transitions, -1
        )
        bad = np.flatnonzero(outside.any(axis=1))
        if bad.size:
            raise DatasetError(
                path,
                f"{bad.size} action(s) outside the env's bounds [{low:g}, {high:g}] "
                f"(first: transition {int(bad[0])}: {dataset.actions[bad[0]].tolist()})",
            )


def require_episodes(dataset: RolloutDataset, path: Path) -> None:
    """Raise :class:`DatasetError` if the training data ``dataset`` holds no episode."""
    if len(dataset) == 0:
        raise DatasetError(path, "holds 0 episodes: nothing to train on")


class MixedBatches:
    """An endless, stateless stream of batches: batch ``k`` is a pure function of
    ``(seed, k)`` and the rank, so a resumed run sees exactly the batches it would have seen.

    Every step draws one *global* batch of ``batch_size * world_size`` transitions (split
    ``ratio`` imaginary / rest real) and each rank takes its own slice: DDP over W ranks samples
    the same transitions as one process with a W times larger batch.
    """

    def __init__(
        self,
        real: TransitionBuffer | None,
        imaginary: TransitionBuffer | None,
        n_real: int,
        n_imaginary: int,
        seed: int,
        start_step: int = 0,
        rank: int = 0,
        world_size: int = 1,
    ) -> None:
        self.real, self.imaginary = real, imaginary
        self.n_real, self.n_imaginary = n_real, n_imaginary
        self.seed, self.start_step = seed, start_step
        self.rank, self.world_size = rank, world_size
        self.generator = torch.Generator()

    def _sources(self) -> list[tuple[TransitionBuffer, int]]:
        return [
            (buffer, n)
            for buffer, n in ((self.real, self.n_real), (self.imaginary, self.n_imaginary))
            if n > 0 and buffer is not None
        ]

    def indices(self, step: int) -> list[Tensor]:
        """This rank's transition indices of batch ``step``, one row per source."""
        # torch's CPU generator keeps 32 bits of a seed: hash (seed, step) into them.
        state = np.random.SeedSequence([self.seed, step]).generate_state(1)[0]
        self.generator.manual_seed(int(state))
        return [
            torch.randint(len(buffer), (self.world_size, n), generator=self.generator)[self.rank]
            for buffer, n in self._sources()
        ]

    def batch(self, step: int) -> TensorDict:
        return self.stacked(step, 1)[0]

    def stacked(self, step: int, k: int) -> TensorDict:
        """Batches ``step .. step + k - 1`` as one ``(k, batch_size)`` TensorDict, gathered
        in one indexing pass per source."""
        rows = [self.indices(step + j) for j in range(k)]
        parts = [
            buffer.gather(torch.stack([r[i] for r in rows]))
            for i, (buffer, _) in enumerate(self._sources())
        ]
        return cat_batches(parts, [k, self.n_real + self.n_imaginary])

    def __iter__(self) -> Iterator[TensorDict]:
        step = self.start_step
        while True:
            yield self.batch(step)
            step += 1


class RealImaginaryDataModule(L.LightningDataModule):
    """Loads one real dataset and any number of imaginary ones into in-memory buffers and
    yields training batches in which a fraction ``ratio`` comes from the imaginary pool.

    Args:
        domain: environment domain of the data (``clevr``, ...).
        real: path of the real dataset; if the file is missing and ``collect`` is set, the
            expert collects it there once (with ``real=None``: into ``cache_dir``, named after
            the collection config).
        imaginary: paths of imaginary datasets (``shipped:<domain>/<file>`` names a dataset
            shipped with the package); a missing file is an error unless
            ``imaginary_optional``.
            Imaginary episodes with non-finite values or states outside the environment's
            bounds (plus ``state_margin``) are dropped and counted.
        ratio: fraction of each batch drawn from the imaginary pool (0 = real only), or
            ``"pool"`` to sample uniformly over all transitions (the original benchmark).
        batch_size: transitions per batch and per process.
        seed: seed of the sampling stream (each rank takes a different slice).
        collect: how to collect missing real data, a :class:`CollectConfig` or a dict of its
            fields (None: raise instead).
        cache_dir: where collected data goes (default ``$IMAGINEBENCH_CACHE`` or
            ``~/.cache/imaginebench``).
        state_margin: tolerance around the environment's state bounds for imaginary data.
        imaginary_optional: skip missing imaginary files with a warning instead of failing.
            What was used in the end (files, episodes kept and dropped, the effective ratio) is
            in :attr:`usage`, which ``results.json`` records.
        updates_per_batch: hand the trainer ``K`` consecutive batches at once, stacked into a
            ``(K, batch_size)`` TensorDict; the module makes one gradient update per slice.
            The stream and ``global_step`` (one per update) are unchanged; only Lightning's
            per-batch overhead is paid once per ``K`` updates (default 8; 1 hands over
            single batches). Training still stops at exactly ``max_steps``; step-interval
            checkpoints must be multiples of ``K`` (checked).
    """

    def __init__(
        self,
        domain: str = "clevr",
        real: str | None = None,
        imaginary: list[str] | None = None,
        ratio: float | Literal["pool"] = 0.5,
        batch_size: int = 256,
        seed: int = 0,
        collect: CollectConfig | Mapping[str, Any] | None = None,
        cache_dir: str | None = None,
        state_margin: float = 0.05,
        updates_per_batch: int = 8,
        imaginary_optional: bool = False,
    ) -> None:
        super().__init__()
        collect = as_config(collect, CollectConfig, "collect")
        self.save_hyperparameters()  # after the conversion: records the CollectConfig
        get_domain(domain)
        if ratio != "pool" and not (isinstance(ratio, (int, float)) and 0.0 <= ratio <= 1.0):
            raise ValueError(f"ratio must be in [0, 1] or 'pool', got {ratio!r}")
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if updates_per_batch < 1:
            raise ValueError(f"updates_per_batch must be >= 1, got {updates_per_batch}")
        self.updates_per_batch = updates_per_batch
        self.domain, self.real_path = domain, real
        self.imaginary_paths = list(imaginary or [])
        self.ratio, self.batch_size, self.seed = ratio, batch_size, seed
        self.collect = collect
        self.cache_dir = Path(cache_dir) if cache_dir else default_cache_dir()
        self.state_margin = state_margin
        self.imaginary_optional = imaginary_optional
        env = make(domain).unwrapped
        self.state_dim = int(env.observation_space.shape[0])
        self.state_low = np.asarray(env.observation_space.low, dtype=np.float32)
        self.state_high = np.asarray(env.observation_space.high, dtype=np.float32)
        self.action_spec = action_spec_of(env.action_space)
        env.close()
        self.instructions: list[str] = []
        self.real: TransitionBuffer | None = None
        self.imaginary: TransitionBuffer | None = None
        self.dropped: dict[str, int] = {}
        self.usage: dict[str, Any] = {}
        self._loaded = False

    # -- files ------------------------------------------------------------------------------
    def resolved_real_path(self) -> Path:
        return real_dataset_path(self.domain, self.real_path, self.collect, self.cache_dir)

    def prepare_data(self) -> None:
        """Collect the real dataset if it is missing (runs once, on global rank 0)."""
        ensure_real_dataset(self.domain, self.resolved_real_path(), self.collect)

    def _check_domain(self, dataset: RolloutDataset, path: Path) -> None:
        check_matches_env(dataset, path, self.domain, self.state_dim, self.action_spec)

    def _load_imaginary(self, path: Path) -> RolloutDataset | None:
        if not path.exists():
            if not self.imaginary_optional:
                raise FileNotFoundError(
                    f"{path}: imaginary dataset does not exist (set data.imaginary_optional: "
                    "true to train without it)"
                )
            log.warning("imaginary dataset %s not found: skipped", path)
            return None
        dataset = load_dataset(path, nonfinite="drop")
        self._check_domain(dataset, path)
        low, high = self.state_low - self.state_margin, self.state_high + self.state_margin
        inside = ((dataset.states >= low) & (dataset.states <= high)).all(axis=1)
        episode_of_state = np.repeat(np.arange(len(dataset)), dataset.episode_lengths() + 1)
        bad = np.zeros(len(dataset), dtype=bool)
        bad[episode_of_state[~inside]] = True
        self.dropped[str(path)] = int(dataset.dropped_nonfinite + bad.sum())
        if bad.any() or dataset.dropped_nonfinite:
            log.warning(
                "%s: dropped %d episodes with non-finite values and %d with out-of-range states",
                path,
                dataset.dropped_nonfinite,
                int(bad.sum()),
            )
        return dataset.select(~bad) if bad.any() else dataset

    def setup(self, stage: str | None = None) -> None:
        if self._loaded:
            return
        real_path = self.resolved_real_path()
        ensure_real_dataset(self.domain, real_path, self.collect)
        real = load_dataset(real_path)
        self._check_domain(real, real_path)
        require_episodes(real, real_path)
        imaginary, files = [], []
        for p in self.imaginary_paths:
            path = resolve_data_path(p)
            d = self._load_imaginary(path)
            kept = len(d) if d is not None else 0
            files.append(
                {
                    "file": str(path),
                    "found": d is not None,
                    "episodes_kept": kept,
                    "episodes_dropped": self.dropped.get(str(path), 0),
                }
            )
            if kept:
                imaginary.append(d)
        table: dict[str, int] = {}
        for d in [real, *imaginary]:
            for s in d.instructions:
                table.setdefault(s, len(table))
        self.instructions = list(table)

        def ids(d: RolloutDataset) -> np.ndarray:
            return np.array([table[s] for s in d.instructions], dtype=np.int64)

        if self.ratio == "pool":
            pooled = RolloutDataset.concatenate([real, *imaginary]) if imaginary else real
            self.real = TransitionBuffer.from_dataset(pooled, ids(pooled))
        else:
            self.real = TransitionBuffer.from_dataset(real, ids(real))
            if imaginary:
                pool = RolloutDataset.concatenate(imaginary) if len(imaginary) > 1 else imaginary[0]
                self.imaginary = TransitionBuffer.from_dataset(pool, ids(pool))
            elif self.ratio > 0:
                log.warning("no imaginary data available: training on real data only")
        self._loaded = True
        if self.ratio == "pool":
            n_imaginary = sum(d.num_transitions for d in imaginary)
            effective = n_imaginary / (real.num_transitions + n_imaginary)
        else:
            effective = self.split()[1] / self.batch_size
        self.usage = {
            "real": {"file": str(real_path), "episodes": len(real)},
            "imaginary": files,
            "effective_ratio": effective,
        }
        log.info(self.describe())

    # -- batches ----------------------------------------------------------------------------
    def split(self) -> tuple[int, int]:
        """(real, imaginary) transitions per batch and process."""
        if self.ratio == "pool" or self.imaginary is None:
            return self.batch_size, 0
        n_imaginary = int(round(self.batch_size * float(self.ratio)))
        return self.batch_size - n_imaginary, n_imaginary

    def batches(self, start_step: int = 0, rank: int = 0, world_size: int = 1) -> MixedBatches:
        self.setup()
        n_real, n_imaginary = self.split()
        return MixedBatches(
            self.real, self.imaginary, n_real, n_imaginary, self.seed, start_step, rank, world_size
        )

    def train_dataloader(self) -> "_StreamFromTrainer":
        return _StreamFromTrainer(self)

    def transfer_batch_to_device(
        self, batch: Any, device: torch.device, dataloader_idx: int
    ) -> Any:
        """Skip the copy when the batch already lives on ``device`` (the CPU case: the per-tensor
        ``.to`` costs ~60 us a step). Free of ``super()``, so other data modules can reuse it."""
        if isinstance(batch, TensorDict) and batch["state"].device == device:
            return batch
        return L.LightningDataModule.transfer_batch_to_device(self, batch, device, dataloader_idx)

    def val_dataloader(self) -> list[int]:
        """One dummy batch: ``trainer.validate`` evaluation happens in the evaluation callback."""
        return [0]

    def test_dataloader(self) -> list[int]:
        """One dummy batch: ``trainer.test`` evaluation happens in the evaluation callback."""
        return [0]

    # -- reporting --------------------------------------------------------------------------
    @property
    def bytes_per_transition(self) -> float:
        buffers = [b for b in (self.real, self.imaginary) if b is not None]
        return sum(b.nbytes for b in buffers) / max(sum(len(b) for b in buffers), 1)

    def describe(self) -> str:
        n_real = len(self.real) if self.real else 0
        n_imag = len(self.imaginary) if self.imaginary else 0
        split = self.split()
        return (
            f"{self.domain}: {n_real} real + {n_imag} imaginary transitions, "
            f"{len(self.instructions)} instructions, batch {split[0]} real + {split[1]} imaginary, "
            f"{self.bytes_per_transition:.1f} bytes/transition, dropped {self.dropped or 'none'}"
        )


class _StreamFromTrainer:
    """Iterable handed to Lightning: starts at the trainer's current step (so ``--ckpt_path``
    resumes the exact stream), slices the global batch by the trainer's rank, and stacks
    ``updates_per_batch`` consecutive batches when asked to."""

    def __init__(self, datamodule: RealImaginaryDataModule) -> None:
        self.datamodule = datamodule

    def __iter__(self) -> Iterator[TensorDict]:
        trainer = self.datamodule.trainer
        start = trainer.global_step if trainer is not None else 0
        rank = trainer.global_rank if trainer is not None else 0
        world = trainer.world_size if trainer is not None else 1
        batches = self.datamodule.batches(start, rank, world)
        k = self.datamodule.updates_per_batch
        if k == 1:
            return iter(batches)
        if trainer is not None:
            _check_checkpoint_intervals(trainer, k)
        max_steps = trainer.max_steps if trainer is not None else -1
        return _stacked(batches, k, max_steps)


def _stacked(batches: MixedBatches, k: int, max_steps: int) -> Iterator[TensorDict]:
    """Endless ``(k, batch_size)`` stacks of consecutive batches; the last stack before
    ``max_steps`` (``-1``: none) is shortened so training stops at exactly ``max_steps``."""
    step = batches.start_step
    while True:
        n = k if max_steps < 0 else max(1, min(k, max_steps - step))
        yield batches.stacked(step, n)
        step += n


def _check_checkpoint_intervals(trainer: Any, k: int) -> None:
    """Step-interval checkpoints fire only on steps a batch ends on: multiples of ``k``."""
    for callback in trainer.callbacks:
        every = getattr(callback, "_every_n_train_steps", 0) or 0
        if every % k:
            raise ValueError(
                f"{type(callback).__name__}(every_n_train_steps={every}) is not a multiple of "
                f"the data module's updates_per_batch={k}: its checkpoints would be skipped; "
                "use a multiple or set data.updates_per_batch: 1"
            )
