"""Tests for RealImaginaryDataModule: ratio mixing, determinism, DDP slicing, batch content,
memory footprint, bad-data handling and automatic collection of real data."""

from __future__ import annotations

import json
import logging
import math
import re
from collections import defaultdict
from types import SimpleNamespace

import h5py
import numpy as np
import pytest
import torch

from imaginebench.batch import TRANSITION_KEYS
from imaginebench.data import collect as collect_module
from imaginebench.data.collect import collect
from imaginebench.data.format import (
    DatasetError,
    Episode,
    RolloutDataset,
    load_dataset,
    save_dataset,
)
from imaginebench.datamodules import CollectConfig, RealImaginaryDataModule, RolloutDataModule
from imaginebench.datamodules.stream import MixedBatches, stacked_batches

LOGGER = "imaginebench.datamodules"
CLEVR_ACTIONS = {"type": "discrete", "n": 40}
# CLEVR observation bounds (x in [-0.6, 0.6], y in [-0.3, 0.7] for each of the 5 balls).
LOW = np.tile(np.array([-0.6, -0.3], dtype=np.float32), 5)
HIGH = np.tile(np.array([0.6, 0.7], dtype=np.float32), 5)
KEYS = {"state", "next_state", "action", "reward", "done", "instruction_id", "source", "weight"}


# ------------------------------------------------------------------------------------ helpers


def imagine(real: RolloutDataset, episodes: int | None = None, seed: int = 1) -> list[Episode]:
    """Imaginary episodes: real states with small noise (still inside the table), random actions
    and rewards, invented instructions (episode 0 reuses a real instruction)."""
    rng = np.random.default_rng(seed)
    out = []
    for i, ep in enumerate(real):
        if episodes is not None and i >= episodes:
            break
        t = len(ep)
        states = ep.states + rng.normal(0.0, 0.01, size=ep.states.shape).astype(np.float32)
        out.append(
            Episode(
                states=np.clip(states, LOW + 0.02, HIGH - 0.02).astype(np.float32),
                actions=rng.integers(0, 40, size=t),
                rewards=rng.uniform(-1, 1, size=t).astype(np.float32),
                terminated=bool(i % 2 == 0),
                truncated=bool(i % 2 == 1),
                instruction=ep.instruction if i == 0 else f"imagined instruction {i % 4}",
                task_spec=json.dumps({"imagined": i % 3}),
                level=("train", "rephrase")[i % 2],
                source="imaginary",
                success=bool(i % 2 == 0),
            )
        )
    return out


def pack(episodes: list[Episode], domain: str = "clevr") -> RolloutDataset:
    return RolloutDataset.from_episodes(
        episodes, domain=domain, action_spec=CLEVR_ACTIONS, provenance={}
    )


def rows(batch) -> list[tuple]:
    """Transitions of a batch as hashable tuples (sortable multiset)."""
    cols = [
        batch["state"],
        batch["next_state"],
        batch["action"][:, None].double(),
        batch["reward"][:, None].double(),
        batch["done"][:, None].double(),
        batch["instruction_id"][:, None].double(),
        batch["source"][:, None].double(),
    ]
    table = torch.cat([c.double() for c in cols], dim=1)
    return sorted(tuple(r) for r in table.tolist())


def same_batch(a, b) -> bool:
    return set(a.keys()) == set(b.keys()) and all(torch.equal(a[k], b[k]) for k in a.keys())


class Lookup:
    """Finds the transitions of a dataset whose first state equals a given state row."""

    def __init__(self, ds: RolloutDataset) -> None:
        self.ds = ds
        self.state_idx, _ = ds.transition_indices()
        self.episode = ds.transition_episodes()
        self.by_state: dict[bytes, list[int]] = defaultdict(list)
        for j, s in enumerate(self.state_idx):
            self.by_state[ds.states[s].tobytes()].append(j)

    def __contains__(self, state: np.ndarray) -> bool:
        return state.astype(np.float32).tobytes() in self.by_state

    def matches(self, row: dict, instructions: list[str]) -> bool:
        """Is ``row`` one of this dataset's transitions (all fields consistent)?"""
        ds = self.ds
        for j in self.by_state.get(row["state"].tobytes(), []):
            ep = self.episode[j]
            if (
                np.array_equal(row["next_state"], ds.states[self.state_idx[j] + 1])
                and row["action"] == ds.actions[j]
                and row["reward"] == ds.rewards[j]
                and row["done"] == ds.terminals[j]
                and instructions[row["instruction_id"]]
                == ds.instructions[ds.episode_instruction[ep]]
            ):
                return True
        return False


def batch_rows(batch) -> list[dict]:
    n = batch.batch_size[0]
    np_batch = {k: batch[k].numpy() for k in KEYS}
    return [{k: v[i] for k, v in np_batch.items()} for i in range(n)]


# ------------------------------------------------------------------------------------ fixtures


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """A real CLEVR dataset (30 expert episodes) and two imaginary ones, saved to files."""
    directory = tmp_path_factory.mktemp("datamodule")
    real_ds, _ = collect("clevr", "train", 30, seed=0, progress=False)
    real = save_dataset(real_ds, directory / "real.h5")
    imag = save_dataset(pack(imagine(real_ds, seed=1)), directory / "imag.h5")
    small = save_dataset(pack(imagine(real_ds, episodes=10, seed=2)), directory / "imag_small.h5")
    return SimpleNamespace(
        dir=directory,
        real_ds=real_ds,
        real=str(real),
        imag=str(imag),
        small=str(small),
        real_file=load_dataset(real),
        imag_file=load_dataset(imag),
        small_file=load_dataset(small),
    )


def make_dm(data, **kwargs) -> RealImaginaryDataModule:
    kwargs.setdefault("real", data.real)
    kwargs.setdefault("imaginary", [data.imag])
    kwargs.setdefault("batch_size", 64)
    dm = RealImaginaryDataModule(domain="clevr", cache_dir=str(data.dir / "cache"), **kwargs)
    dm.setup()
    return dm


# ------------------------------------------------------------------------------------ ratio


@pytest.mark.parametrize(
    "batch_size, ratio",
    [
        (64, 0),
        (64, 0.25),
        (64, 0.5),
        (64, 1.0),
        (10, 0.33),
        (6, 0.9),  # last two: rounded
    ],
)
def test_every_batch_has_exact_imaginary_share(data, batch_size, ratio):
    dm = make_dm(data, ratio=ratio, batch_size=batch_size, seed=3)
    expected = round(batch_size * ratio)
    assert dm.split() == (batch_size - expected, expected)
    real_lookup, imag_lookup = Lookup(data.real_file), Lookup(data.imag_file)
    stream = iter(dm.batches())
    for _ in range(20):
        batch = next(stream)
        assert set(batch.keys()) == KEYS and batch.batch_size == torch.Size([batch_size])
        source = batch["source"]
        assert int((source == 1).sum()) == expected
        assert int((source == 0).sum()) == batch_size - expected
        # the flags tell the truth: imaginary rows hold imaginary states and vice versa
        for state, src in zip(batch["state"].numpy(), source.tolist()):
            assert state in (imag_lookup if src == 1 else real_lookup)


def test_ratio_zero_ignores_imaginary_files(data):
    dm = make_dm(data, ratio=0.0, seed=5)
    assert dm.split() == (64, 0)
    real_lookup = Lookup(data.real_file)
    for step, batch in zip(range(10), dm.batches()):
        assert (batch["source"] == 0).all(), step
        assert all(s in real_lookup for s in batch["state"].numpy())


def test_pool_samples_uniformly_over_all_transitions(data):
    dm = make_dm(data, ratio="pool", imaginary=[data.small], batch_size=64, seed=11)
    n_real, n_imag = data.real_file.num_transitions, data.small_file.num_transitions
    assert dm.imaginary is None and len(dm.real) == n_real + n_imag
    assert dm.split() == (64, 0)
    p = n_imag / (n_real + n_imag)
    real_lookup, imag_lookup = Lookup(data.real_file), Lookup(data.small_file)
    n_batches, counts = 150, []
    for step, batch in zip(range(n_batches), dm.batches()):
        source = batch["source"]
        counts.append(int((source == 1).sum()))
        if step < 10:  # per-transition flags, not a per-batch split
            for state, src in zip(batch["state"].numpy(), source.tolist()):
                assert state in (imag_lookup if src == 1 else real_lookup)
    n = n_batches * 64
    share = sum(counts) / n
    tolerance = 4.5 * math.sqrt(p * (1 - p) / n)  # binomial bound, ~1e-5 false-alarm rate
    assert abs(share - p) <= tolerance, f"imaginary share {share:.4f}, expected {p:.4f}"
    assert len(set(counts)) > 1  # the per-batch count varies (not a fixed split)


# ------------------------------------------------------------------------------------ determinism


def test_batches_are_a_pure_function_of_seed_and_step(data):
    dm = make_dm(data, ratio=0.5, batch_size=32, seed=7)
    stream = iter(dm.batches())
    reference = [next(stream) for _ in range(6)]
    for k in range(6):
        assert same_batch(next(iter(dm.batches(start_step=k))), reference[k]), k
    assert not same_batch(reference[0], reference[1])
    again = make_dm(data, ratio=0.5, batch_size=32, seed=7)
    assert same_batch(next(iter(again.batches(start_step=4))), reference[4])
    other = make_dm(data, ratio=0.5, batch_size=32, seed=8)
    assert not same_batch(next(iter(other.batches())), reference[0])
    assert not same_batch(next(iter(other.batches(start_step=3))), reference[3])


@pytest.mark.parametrize("step", [0, 9])
def test_ddp_ranks_split_the_single_process_batch(data, step):
    b = 8
    dm = make_dm(data, ratio=0.25, batch_size=b, seed=13)
    rank0 = next(iter(dm.batches(step, 0, 2)))
    rank1 = next(iter(dm.batches(step, 1, 2)))
    for batch in (rank0, rank1):
        assert batch.batch_size == torch.Size([b])
        assert int((batch["source"] == 1).sum()) == 2
    assert not same_batch(rank0, rank1)
    single = make_dm(data, ratio=0.25, batch_size=2 * b, seed=13)
    whole = next(iter(single.batches(step)))
    assert sorted(rows(rank0) + rows(rank1)) == rows(whole)


# ------------------------------------------------------------------------------------ content


def test_batch_content_matches_the_files(data):
    dm = make_dm(data, ratio=0.5, batch_size=64, seed=17)
    expected = list(dict.fromkeys(data.real_file.instructions + data.imag_file.instructions))
    assert sorted(dm.instructions) == sorted(expected)
    assert len(set(dm.instructions)) == len(dm.instructions)
    real_lookup, imag_lookup = Lookup(data.real_file), Lookup(data.imag_file)
    seen_done = 0
    for step, batch in zip(range(8), dm.batches()):
        assert batch["action"].dtype == torch.int64
        assert batch["reward"].dtype == torch.float32 and batch["state"].dtype == torch.float32
        for row in batch_rows(batch):
            lookup = imag_lookup if row["source"] == 1 else real_lookup
            assert lookup.matches(row, dm.instructions), (step, row)
            seen_done += int(row["done"])
    assert seen_done > 0  # terminal transitions are sampled and flagged


def test_batches_hold_the_declared_keys(data):
    assert set(TRANSITION_KEYS) == KEYS
    assert list(next(iter(make_dm(data).batches())).keys()) == list(TRANSITION_KEYS)


def test_the_core_serves_in_memory_datasets_as_the_file_module_serves_files(data):
    files = make_dm(data, ratio=0.25, batch_size=16, seed=3)
    core = RolloutDataModule(
        data.real_file, data.imag_file, ratio=0.25, batch_size=16, seed=3, updates_per_batch=1
    )
    assert core.state_dim == files.state_dim and core.action_spec["n"] == 40
    core.setup()
    assert core.instructions == files.instructions and core.split() == files.split()
    for step in (0, 7):
        assert same_batch(core.batches(step).batch(step), files.batches(step).batch(step))


def test_contract_state_stats_and_transitions(data):
    dm = make_dm(data, ratio=0.5)
    mean, std = dm.state_stats()
    states = torch.as_tensor(data.real_file.states)
    assert torch.allclose(mean, states.mean(0)) and torch.allclose(std, states.std(0))
    real, imaginary, every = dm.transitions("real"), dm.transitions("imaginary"), dm.transitions()
    assert list(every) == list(TRANSITION_KEYS)
    assert len(real["action"]) == data.real_file.num_transitions and (real["source"] == 0).all()
    assert len(imaginary["action"]) == data.imag_file.num_transitions
    assert (imaginary["source"] == 1).all()
    for key in TRANSITION_KEYS:
        assert torch.equal(every[key], torch.cat([real[key], imaginary[key]])), key
    pool = make_dm(data, ratio="pool")
    assert len(pool.transitions("real")["action"]) == len(every["action"])
    with pytest.raises(ValueError, match="no imaginary transitions"):
        pool.transitions("imaginary")
    with pytest.raises(ValueError, match="source must be"):
        dm.transitions("fake")


def test_memory_per_transition_is_small(data):
    for ratio in (0.5, "pool"):
        dm = make_dm(data, ratio=ratio)
        bpt = dm.bytes_per_transition
        assert 0 < bpt <= 100, f"{bpt:.1f} bytes per CLEVR transition (ratio={ratio!r})"


# ------------------------------------------------------------------------------------ bad data


def test_missing_real_file_without_collect(data, tmp_path):
    missing = tmp_path / "no_such_real.h5"
    dm = RealImaginaryDataModule(real=str(missing), collect=None, cache_dir=str(tmp_path))
    with pytest.raises(FileNotFoundError, match=re.escape(str(missing))):
        dm.setup()
    with pytest.raises(FileNotFoundError, match=re.escape(str(missing))):
        dm.prepare_data()
    with pytest.raises(ValueError, match="real"):
        RealImaginaryDataModule(real=None, collect=None, cache_dir=str(tmp_path)).setup()


def test_corrupt_real_file(tmp_path):
    corrupt = tmp_path / "corrupt.h5"
    corrupt.write_bytes(b"this is not an HDF5 file\n" * 20)
    dm = RealImaginaryDataModule(real=str(corrupt), cache_dir=str(tmp_path))
    with pytest.raises(DatasetError, match=re.escape(str(corrupt))) as info:
        dm.setup()
    assert info.value.source == str(corrupt)


def test_imaginary_file_of_another_domain_or_state_dim(data, tmp_path):
    other_domain = save_dataset(
        pack(imagine(data.real_ds, episodes=3), domain="kitchen"), tmp_path / "kitchen.h5"
    )
    narrow = [
        Episode(
            states=np.zeros((3, 6), np.float32),
            actions=np.array([1, 2]),
            rewards=np.zeros(2, np.float32),
            terminated=True,
            truncated=False,
            instruction="x",
            task_spec="{}",
            level="train",
            source="imaginary",
            success=True,
        )
    ]
    other_dim = save_dataset(pack(narrow), tmp_path / "dim6.h5")
    for path, problem in ((other_domain, "domain"), (other_dim, "state_dim")):
        dm = RealImaginaryDataModule(
            real=data.real,
            imaginary=[data.imag, str(path)],
            ratio=0.5,
            batch_size=8,
            cache_dir=str(tmp_path),
        )
        with pytest.raises(DatasetError, match=re.escape(str(path))) as info:
            dm.setup()
        assert info.value.source == str(path) and problem in info.value.problem


def test_missing_imaginary_file_is_an_error_unless_optional(data, tmp_path, caplog):
    missing = tmp_path / "no_such_imaginary.h5"
    with pytest.raises(FileNotFoundError, match=re.escape(f"{missing}: imaginary dataset")):
        make_dm(data, imaginary=[data.small, str(missing)])
    caplog.set_level(logging.WARNING, logger=LOGGER)
    dm = make_dm(data, imaginary=[str(missing)], ratio=0.5, batch_size=16, imaginary_optional=True)
    assert dm.usage["effective_ratio"] == 0.0
    assert dm.usage["imaginary"] == [
        {"file": str(missing), "found": False, "episodes_kept": 0, "episodes_dropped": 0}
    ]
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert any(str(missing) in m and "skipped" in m for m in warnings), warnings
    assert any("real data only" in m for m in warnings), warnings
    assert dm.imaginary is None and dm.split() == (16, 0)
    for _, batch in zip(range(5), dm.batches()):
        assert batch.batch_size == torch.Size([16]) and (batch["source"] == 0).all()


def test_bad_imaginary_episodes_are_dropped(data, tmp_path, caplog):
    episodes = imagine(data.real_ds, episodes=12, seed=4)
    episodes[2].states[1, 0] = 5.0  # far off the table
    episodes[8].states[-1, 1] = 0.7 + 0.2  # beyond the margin
    episodes[9].states[0, 0] = 0.6 + 0.03  # within the default margin (0.05): kept
    path = save_dataset(pack(episodes), tmp_path / "bad.h5")
    nan_episode = 5
    ds = pack(episodes)
    with h5py.File(path, "r+") as h5:  # save_dataset refuses NaN: edit the file afterwards
        h5["states"][int(ds.episode_offsets[nan_episode]) + nan_episode + 1, 3] = np.nan
    caplog.set_level(logging.WARNING)
    dm = make_dm(data, imaginary=[str(path)], ratio=0.5, batch_size=32, seed=2)
    assert dm.dropped == {str(path): 3}
    assert any(str(path) in r.getMessage() for r in caplog.records)
    kept = [ep for i, ep in enumerate(episodes) if i not in (2, 5, 8)]
    assert len(dm.imaginary) == sum(len(ep) for ep in kept)
    lookup = Lookup(pack(kept))
    states = dm.imaginary.states.numpy()
    assert np.isfinite(states).all()
    assert (states >= LOW - 0.05).all() and (states <= HIGH + 0.05).all()
    assert episodes[9].states[0] in lookup
    for _, batch in zip(range(5), dm.batches()):
        imaginary = batch["state"][batch["source"] == 1].numpy()
        assert len(imaginary) == 16
        assert all(s in lookup for s in imaginary)


def test_all_imaginary_episodes_bad_falls_back_to_real(data, tmp_path, caplog):
    episodes = imagine(data.real_ds, episodes=2, seed=4)
    for ep in episodes:
        ep.states[0, 0] = -5.0
    path = save_dataset(pack(episodes), tmp_path / "all_bad.h5")
    caplog.set_level(logging.WARNING, logger=LOGGER)
    dm = make_dm(data, imaginary=[str(path)], ratio=0.5, batch_size=8)
    assert dm.dropped == {str(path): 2}
    assert dm.imaginary is None and dm.split() == (8, 0)
    assert dm.usage["effective_ratio"] == 0.0
    assert dm.usage["imaginary"] == [
        {"file": str(path), "found": True, "episodes_kept": 0, "episodes_dropped": 2}
    ]
    assert (next(iter(dm.batches()))["source"] == 0).all()


@pytest.mark.parametrize(
    "kwargs",
    [
        {"ratio": -0.1},
        {"ratio": 1.5},
        {"ratio": "half"},
        {"ratio": float("nan")},
        {"batch_size": 0},
        {"domain": "no_such_domain"},
    ],
)
def test_invalid_arguments(kwargs, tmp_path):
    with pytest.raises(ValueError):
        RealImaginaryDataModule(real=str(tmp_path / "r.h5"), cache_dir=str(tmp_path), **kwargs)


# ------------------------------------------------------------------------------------ collection


def test_missing_real_data_is_collected_once(tmp_path, monkeypatch):
    calls = []
    original = collect_module.collect

    def counting_collect(*args, **kwargs):
        calls.append((args, kwargs))
        return original(*args, **kwargs)

    monkeypatch.setattr(collect_module, "collect", counting_collect)
    config = CollectConfig(episodes=5, seed=1)
    dm = RealImaginaryDataModule(
        real=None, collect=config, cache_dir=str(tmp_path), ratio=0.5, batch_size=8
    )
    path = tmp_path / config.filename("clevr")
    assert dm.resolved_real_path() == path and not path.exists()
    dm.prepare_data()
    assert path.exists() and len(calls) == 1
    mtime = path.stat().st_mtime_ns
    dm.prepare_data()
    RealImaginaryDataModule(real=None, collect=config, cache_dir=str(tmp_path)).prepare_data()
    assert path.stat().st_mtime_ns == mtime and len(calls) == 1
    dm.setup()
    expected, _ = original(
        "clevr",
        "train",
        5,
        1,
        epsilon=config.epsilon,
        paraphrases=config.paraphrases,
        progress=False,
    )
    assert len(dm.real) == expected.num_transitions
    assert np.array_equal(dm.real.states.numpy(), expected.states)
    assert dm.imaginary is None
    assert next(iter(dm.batches())).batch_size == torch.Size([8])


def test_a_new_expert_version_does_not_reuse_the_older_cached_data(tmp_path, monkeypatch):
    """Cached real data is keyed by the expert's data version: after an expert change (e.g.
    HalfCheetah's paced runs) the older file is left alone and the new expert collects
    (caught: a cache name without the version, which would reuse stale data silently)."""
    import imaginebench.data.collect as collect_module

    config = CollectConfig(episodes=3, seed=2)
    RealImaginaryDataModule(real=None, collect=config, cache_dir=str(tmp_path)).prepare_data()
    old = tmp_path / config.filename("clevr")
    monkeypatch.setitem(collect_module.EXPERT_DATA_VERSIONS, "clevr", 99)
    new = tmp_path / config.filename("clevr")
    assert new != old and not new.exists()
    dm = RealImaginaryDataModule(real=None, collect=config, cache_dir=str(tmp_path))
    assert dm.resolved_real_path() == new
    dm.prepare_data()
    assert new.exists() and old.exists()


def test_setup_collects_without_prepare_data(tmp_path):
    config = CollectConfig(episodes=3, seed=2)
    dm = RealImaginaryDataModule(real=None, collect=config, cache_dir=str(tmp_path))
    dm.setup()
    assert (tmp_path / config.filename("clevr")).exists() and len(dm.real) > 0


# ------------------------------------------------------------------------------------ Lightning


def test_train_dataloader_without_and_with_trainer(data):
    dm = make_dm(data, ratio=0.5, batch_size=16, seed=21, updates_per_batch=1)
    assert dm.trainer is None
    first = next(iter(dm.train_dataloader()))
    assert same_batch(first, next(iter(dm.batches(0, 0, 1))))
    dm.trainer = SimpleNamespace(global_step=5, global_rank=1, world_size=2)
    try:
        resumed = next(iter(dm.train_dataloader()))
    finally:
        dm.trainer = None
    assert same_batch(resumed, next(iter(dm.batches(5, 1, 2))))
    assert not same_batch(resumed, next(iter(dm.batches(5, 0, 2))))


def test_stacked_batches_are_the_stream_and_stop_at_max_steps(data):
    """The default hands over 8 consecutive batches per Lightning step; the stack before
    max_steps is shortened so training ends exactly there."""
    dm = make_dm(data, ratio=0.5, batch_size=16, seed=4)
    assert dm.updates_per_batch == 8
    dm.trainer = SimpleNamespace(
        global_step=3, global_rank=0, world_size=1, max_steps=14, callbacks=[]
    )
    try:
        stacks = iter(dm.train_dataloader())
        first, second = next(stacks), next(stacks)
    finally:
        dm.trainer = None
    assert first.batch_size == torch.Size([8, 16]) and second.batch_size == torch.Size([3, 16])
    singles = iter(dm.batches(3, 0, 1))
    for stack in (first, second):
        for sub in stack.unbind(0):
            assert same_batch(sub, next(singles))


def test_checkpoint_interval_must_be_a_multiple_of_updates_per_batch(data):
    """Callbacks without a step interval (none, or 0) pass; a step interval that is not a
    multiple of updates_per_batch is refused, naming the callback, until it is one."""

    class EverySix:
        _every_n_train_steps = 6

    dm = make_dm(data, updates_per_batch=4)
    no_interval = [SimpleNamespace(), SimpleNamespace(_every_n_train_steps=0)]
    dm.trainer = SimpleNamespace(
        global_step=0, global_rank=0, world_size=1, max_steps=-1, callbacks=no_interval
    )
    try:
        assert next(iter(dm.train_dataloader())).batch_size == torch.Size([4, 64])
        every_6 = EverySix()
        dm.trainer.callbacks = [*no_interval, every_6]
        message = (
            r"^EverySix\(every_n_train_steps=6\) is not a multiple of the data module's "
            r"updates_per_batch=4: its checkpoints would be skipped; use a multiple or set "
            r"data.updates_per_batch: 1$"
        )
        with pytest.raises(ValueError, match=message):
            iter(dm.train_dataloader())
        every_6._every_n_train_steps = 8
        assert next(iter(dm.train_dataloader())).batch_size == torch.Size([4, 64])
    finally:
        dm.trainer = None


@pytest.mark.parametrize(
    ("start", "max_steps", "stacks"), [(0, 9, [8, 1]), (0, 17, [8, 8, 1]), (7, 9, [2])]
)
def test_the_last_stack_holds_only_the_updates_left(data, start, max_steps, stacks):
    dm = make_dm(data, ratio=0.5, batch_size=16, seed=4)
    stream = stacked_batches(dm.batches(start), 8, max_steps)
    assert [next(stream).batch_size[0] for _ in stacks] == stacks


def test_without_a_trainer_the_stack_is_never_cut(data):
    dm = make_dm(data, ratio=0.5, batch_size=16, seed=4, updates_per_batch=3)
    assert dm.trainer is None
    stacks = iter(dm.train_dataloader())
    assert [next(stacks).batch_size for _ in range(3)] == [torch.Size([3, 16])] * 3


def test_a_stream_by_default_is_the_only_rank_from_batch_0(data):
    dm = make_dm(data, ratio=0.5, batch_size=16, seed=4)
    default = MixedBatches(dm.real, dm.imaginary, 8, 8, seed=4)
    first = next(iter(default))
    assert same_batch(first, next(iter(dm.batches(0, 0, 1))))
    assert not same_batch(first, next(iter(dm.batches(0, 0, 2))))


# ------------------------------------------------------------------------------------ usage


def test_defaults_and_what_is_known_before_setup(data, monkeypatch):
    monkeypatch.setenv("IMAGINEBENCH_CACHE", str(data.dir / "env_cache"))
    dm = RealImaginaryDataModule(domain="clevr", real=data.real)
    assert (dm.batch_size, dm.seed, dm.ratio) == (256, 0, 0.5)
    assert dm.cache_dir == data.dir / "env_cache"
    assert dm.action_spec == CLEVR_ACTIONS and dm.state_dim == 10
    assert dm.usage == {} and dm.dropped == {}


@pytest.mark.parametrize("ratio", [0.25, "pool"])
def test_usage_records_the_files_and_the_share_actually_used(data, ratio, caplog):
    with caplog.at_level(logging.INFO, logger="imaginebench.datamodules.real_imaginary"):
        dm = make_dm(data, ratio=ratio, batch_size=64)
    assert [r.getMessage() for r in caplog.records] == [dm.describe()]
    n_real, n_imag = data.real_file.num_transitions, data.imag_file.num_transitions
    effective = 16 / 64 if ratio == 0.25 else n_imag / (n_real + n_imag)
    assert dm.usage["effective_ratio"] == pytest.approx(effective, rel=1e-12)
    assert dm.usage["real"] == {"file": data.real, "episodes": len(data.real_file)}
    assert dm.describe().startswith("clevr: ")
    assert dm.describe().endswith(f"dropped {{'{data.imag}': 0}}")
    real_only = make_dm(data, ratio=0, imaginary=[])
    assert real_only.describe().endswith(", dropped none")


@pytest.mark.parametrize(
    ("argument", "value"),
    [("collect", {"episodez": 3}), ("imaginary_weighting", {"sauce": "ensemble"})],
)
def test_a_bad_sub_config_is_named_in_the_error(tmp_path, argument, value):
    from imaginebench.config import ConfigError

    with pytest.raises(ConfigError, match=rf"^{argument}: unknown key"):
        RealImaginaryDataModule(real=str(tmp_path / "r.h5"), **{argument: value})


# ------------------------------------------------------------------------------------ bad input


def cheetah_file(path, actions: np.ndarray) -> str:
    """A one-episode HalfCheetah file with the given ``(T, ...)`` continuous actions."""
    t = len(actions)
    episode = Episode(
        states=np.zeros((t + 1, 18), np.float32),
        actions=actions.astype(np.float32),
        rewards=np.zeros(t, np.float32),
        terminated=False,
        truncated=True,
        instruction="run forward",
        task_spec="{}",
        level="train",
        source="real",
        success=False,
    )
    spec = {"type": "continuous", "shape": list(actions.shape[1:]), "low": -2.0, "high": 2.0}
    ds = RolloutDataset.from_episodes([episode], domain="halfcheetah", action_spec=spec)
    return str(save_dataset(ds, path))


@pytest.mark.parametrize(
    "actions, problem",
    [
        (np.zeros((4, 3)), r"action spec .*'shape': \[3\].* != env's .*'shape': \[6\]"),
        (np.full((4, 6), 0.5) + np.eye(4, 6), r"4 action\(s\) outside the env's bounds \[-1, 1\]"),
    ],
)
def test_continuous_actions_must_fit_the_env(tmp_path, actions, problem):
    path = cheetah_file(tmp_path / "cheetah_real.h5", actions)
    dm = RealImaginaryDataModule(domain="halfcheetah", real=path, cache_dir=str(tmp_path))
    with pytest.raises(DatasetError, match=problem) as info:
        dm.setup()
    assert info.value.source == path


def test_real_dataset_without_episodes_is_refused_at_setup(data, tmp_path):
    from imaginebench.datamodules import GroundingDataModule

    empty = data.real_file.select(np.zeros(len(data.real_file), dtype=bool))
    path = str(save_dataset(empty, tmp_path / "empty_real.h5"))
    assert len(load_dataset(path)) == 0  # a valid file
    for module in (RealImaginaryDataModule, GroundingDataModule):
        dm = module(real=path, cache_dir=str(tmp_path))
        with pytest.raises(DatasetError, match="0 episodes") as info:
            dm.setup()
        assert info.value.source == path


def test_concurrent_runs_collect_the_missing_real_data_once(tmp_path, monkeypatch):
    import threading

    from imaginebench.datamodules.sources import ensure_real_dataset

    calls = []
    original = collect_module.collect

    def counting_collect(*args, **kwargs):
        calls.append(args)
        return original(*args, **kwargs)

    monkeypatch.setattr(collect_module, "collect", counting_collect)
    config = CollectConfig(episodes=4, seed=3, paraphrases=1)
    path = tmp_path / config.filename("clevr")
    errors = []

    def run():  # two runs started together on an empty cache
        try:
            ensure_real_dataset("clevr", path, config)
        except Exception as err:
            errors.append(err)

    threads = [threading.Thread(target=run) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and len(calls) == 1
    assert len(load_dataset(path)) == 4


# ------------------------------------------------------------------------------------ weights


@pytest.fixture(scope="module")
def scored(data):
    """The imaginary file with a confidence that can be read off each transition: (reward + 1)
    / 2, so a sampled row's confidence is known from its reward."""
    imag = data.imag_file
    confidence = (imag.rewards + 1) / 2
    return str(save_dataset(imag.with_confidence("likelihood", confidence), data.dir / "sc.h5"))


def imaginary_rows(batch) -> tuple[torch.Tensor, torch.Tensor]:
    """Confidence and weight of a batch's imaginary rows; its real rows must weigh 1."""
    real = batch["source"] == 0
    assert torch.equal(batch["weight"][real], torch.ones(int(real.sum())))
    return (batch["reward"][~real] + 1) / 2, batch["weight"][~real]


def test_every_transition_weighs_1_unless_a_confidence_source_is_chosen(data, scored):
    for ratio in (0.5, "pool"):
        dm = make_dm(data, imaginary=[scored], ratio=ratio)
        for step in range(3):
            weight = dm.batches(step).batch(step)["weight"]
            assert weight.dtype == torch.float32 and torch.equal(weight, torch.ones(64))


@pytest.mark.parametrize("ratio", [0.5, "pool"])
def test_imaginary_weights_follow_their_confidence(data, scored, ratio):
    """``confidence ** power`` per imaginary transition, real ones 1, and transitions below the
    threshold never sampled; what was removed is reported in the usage."""
    weighting = {"source": "likelihood", "power": 2.0, "threshold": 0.3}
    dm = make_dm(data, imaginary=[scored, scored], imaginary_weighting=weighting, ratio=ratio)
    seen = 0
    for step in range(20):
        confidence, weight = imaginary_rows(dm.batches(step).batch(step))
        torch.testing.assert_close(weight, confidence**2, rtol=1e-5, atol=1e-6)
        assert (confidence >= 0.3 - 1e-6).all()
        seen += len(weight)
    assert seen > 100
    usage = dm.usage["imaginary_weighting"]
    below = int(((data.imag_file.rewards + 1) / 2 < 0.3).sum())
    assert usage["removed_below_threshold"] == 2 * below > 0
    assert usage["imaginary_transitions"] == 2 * data.imag_file.num_transitions


def test_a_threshold_above_every_confidence_leaves_real_data_only(data, scored, caplog):
    weighting = {"source": "likelihood", "power": 0.0, "threshold": 1.0}
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        dm = make_dm(data, imaginary=[scored], imaginary_weighting=weighting)
    assert dm.split() == (64, 0) and "below the confidence threshold" in caplog.text


def test_weighting_needs_the_confidence_in_every_imaginary_file(data, scored):
    weighting = {"source": "ensemble"}
    with pytest.raises(
        ValueError,
        match=r"sc\.h5: has no confidence 'ensemble' \(it has: "
        r"likelihood\).*score-imaginary",
    ):
        make_dm(data, imaginary=[scored], imaginary_weighting=weighting)
    with pytest.raises(
        ValueError, match=r"imag\.h5: has no confidence 'likelihood' \(it has: none"
    ):
        make_dm(data, imaginary=[scored, data.imag], imaginary_weighting={"source": "likelihood"})
    for bad, problem in [
        ({"source": "likelihood", "power": -1.0}, "power must be >= 0"),
        ({"source": "likelihood", "threshold": 1.5}, "threshold must be in"),
        ({"threshold": 0.5}, "need a confidence source"),
    ]:
        with pytest.raises(ValueError, match=problem):
            make_dm(data, imaginary=[scored], imaginary_weighting=bad)
