"""Tests for the HDF5 rollout dataset format (imaginebench.data.format)."""

from __future__ import annotations

import dataclasses
import json
import logging
import re
from pathlib import Path
from typing import Any, Callable

import h5py
import numpy as np
import pytest

from imaginebench.data import hdf5 as h5io
from imaginebench.data import validation
from imaginebench.data.format import (
    LEVELS,
    SCHEMA_VERSION,
    SOURCES,
    DatasetError,
    Episode,
    RolloutDataset,
    load_dataset,
    save_dataset,
    validate,
)

DISCRETE = {"type": "discrete", "n": 5}
CONTINUOUS = {"type": "continuous", "shape": [2], "low": -1.0, "high": 1.0}
ARRAY_FIELDS = (
    "states",
    "actions",
    "rewards",
    "terminals",
    "truncations",
    "episode_offsets",
    "episode_instruction",
    "episode_task",
    "episode_level",
    "episode_source",
    "episode_success",
)


# ------------------------------------------------------------------------------------ helpers


def make_episodes(
    n_eps: int,
    *,
    continuous: bool,
    seed: int = 0,
    state_dim: int = 3,
    source: str | None = None,
    instr_prefix: str = "go to",
) -> list[Episode]:
    rng = np.random.default_rng(seed)
    eps = []
    for i in range(n_eps):
        t = int(rng.integers(1, 6))
        if continuous:
            actions = rng.uniform(-1, 1, size=(t, 2)).astype(np.float32)
        else:
            actions = rng.integers(0, DISCRETE["n"], size=t)
        eps.append(
            Episode(
                states=rng.normal(size=(t + 1, state_dim)).astype(np.float32),
                actions=actions,
                rewards=rng.normal(size=t).astype(np.float32),
                terminated=bool(i % 3 == 0),
                truncated=bool(i % 3 == 1),
                instruction=f"{instr_prefix} {i % 3}",
                task_spec=json.dumps({"family": "reach", "target": i % 2}),
                level=LEVELS[i % len(LEVELS)],
                source=source or SOURCES[i % len(SOURCES)],
                success=bool(i % 3 == 0),
            )
        )
    return eps


def make_ds(continuous: bool = False, n_eps: int = 6, **kw) -> RolloutDataset:
    return RolloutDataset.from_episodes(
        make_episodes(n_eps, continuous=continuous, **kw),
        domain="toy",
        action_spec=CONTINUOUS if continuous else DISCRETE,
        provenance={"command": "pytest", "seed": 0, "nested": {"a": [1, 2]}},
    )


def assert_episode_equal(a: Episode, b: Episode) -> None:
    np.testing.assert_array_equal(a.states, b.states)
    np.testing.assert_array_equal(a.actions, b.actions)
    np.testing.assert_array_equal(a.rewards, b.rewards)
    for name in (
        "terminated",
        "truncated",
        "instruction",
        "task_spec",
        "level",
        "source",
        "success",
    ):
        assert getattr(a, name) == getattr(b, name), name


def assert_ds_equal(a: RolloutDataset, b: RolloutDataset) -> None:
    for name in ARRAY_FIELDS:
        x, y = getattr(a, name), getattr(b, name)
        assert x.dtype == y.dtype, name
        np.testing.assert_array_equal(x, y, err_msg=name)
    assert a.instructions == b.instructions
    assert a.tasks == b.tasks
    assert a.domain == b.domain
    assert a.action_spec == b.action_spec
    assert a.provenance == b.provenance
    assert a.confidence.keys() == b.confidence.keys()
    for name, values in a.confidence.items():
        assert values.dtype == b.confidence[name].dtype == np.float32, name
        np.testing.assert_array_equal(values, b.confidence[name], err_msg=name)


@pytest.fixture
def saved(tmp_path: Path) -> Path:
    return save_dataset(make_ds(), tmp_path / "ds.h5")


def expect_error(path: Path, *fragments: str, **load_kw) -> DatasetError:
    with pytest.raises(DatasetError) as info:
        load_dataset(path, **load_kw)
    msg = str(info.value)
    assert str(path) in msg, msg
    for frag in fragments:
        assert frag in msg, f"{frag!r} not in {msg!r}"
    return info.value


def replace_dataset(f: h5py.File, name: str, data) -> None:
    del f[name]
    f.create_dataset(name, data=data)


# ------------------------------------------------------------------------------------ in memory


@pytest.mark.parametrize("continuous", [False, True])
def test_from_episodes_and_episode_roundtrip(continuous: bool) -> None:
    eps = make_episodes(7, continuous=continuous)
    ds = RolloutDataset.from_episodes(
        eps, domain="toy", action_spec=CONTINUOUS if continuous else DISCRETE, provenance={}
    )
    assert len(ds) == 7
    assert ds.num_transitions == sum(len(e) for e in eps)
    assert ds.state_dim == 3
    np.testing.assert_array_equal(ds.episode_lengths(), [len(e) for e in eps])
    assert ds.states.dtype == np.float32 and ds.rewards.dtype == np.float32
    assert ds.actions.dtype == (np.float32 if continuous else np.int64)
    assert ds.episode_instruction.dtype == np.int32 and ds.episode_level.dtype == np.uint8
    assert ds.instructions == ["go to 0", "go to 1", "go to 2"]
    assert len(ds.tasks) == 2
    for i, ep in enumerate(eps):
        assert_episode_equal(ds.episode(i), ep)
    assert_episode_equal(ds.episode(-1), eps[-1])
    with pytest.raises(IndexError):
        ds.episode(7)
    validate(ds)  # from_episodes output is valid


def test_from_episodes_rejects_bad_episode() -> None:
    eps = make_episodes(2, continuous=False)
    eps[1].states = eps[1].states[:-1]  # missing the final state
    with pytest.raises(ValueError, match="episode 1"):
        RolloutDataset.from_episodes(eps, domain="toy", action_spec=DISCRETE, provenance={})
    eps = make_episodes(2, continuous=False)
    eps[0].level = "medium"
    with pytest.raises(ValueError, match="level"):
        RolloutDataset.from_episodes(eps, domain="toy", action_spec=DISCRETE, provenance={})


def test_transition_indices_handcrafted() -> None:
    # episodes of lengths 2, 1, 3 -> states rows: ep0 0..2, ep1 3..4, ep2 5..8
    lengths = [2, 1, 3]
    eps = [
        Episode(
            states=np.arange((t + 1) * 2, dtype=np.float32).reshape(t + 1, 2),
            actions=np.zeros(t, dtype=np.int64),
            rewards=np.zeros(t, np.float32),
            terminated=False,
            truncated=True,
            instruction="x",
            task_spec="{}",
            level="train",
            source="real",
            success=False,
        )
        for t in lengths
    ]
    ds = RolloutDataset.from_episodes(eps, domain="toy", action_spec=DISCRETE, provenance={})
    np.testing.assert_array_equal(ds.episode_offsets, [0, 2, 3, 6])
    s, s2 = ds.transition_indices()
    np.testing.assert_array_equal(s, [0, 1, 3, 5, 6, 7])
    np.testing.assert_array_equal(s2, [1, 2, 4, 6, 7, 8])
    assert s.dtype == np.int64 and s2.dtype == np.int64
    np.testing.assert_array_equal(ds.transition_episodes(), [0, 0, 1, 2, 2, 2])
    np.testing.assert_array_equal(ds.truncations, [False, True, True, False, False, True])
    assert ds.states.shape == (9, 2)


def test_only_level_names_the_one_level_or_refuses_several() -> None:
    def dataset(levels: list[str]) -> RolloutDataset:
        eps = [
            Episode(
                states=np.zeros((2, 2), np.float32),
                actions=np.zeros(1, dtype=np.int64),
                rewards=np.zeros(1, np.float32),
                terminated=True,
                truncated=False,
                instruction="go",
                task_spec="{}",
                level=level,
                source="imaginary",
                success=True,
            )
            for level in levels
        ]
        return RolloutDataset.from_episodes(eps, domain="toy", action_spec=DISCRETE)

    assert dataset(["easy", "easy"]).only_level() == "easy"
    with pytest.raises(ValueError, match=r"\['easy', 'hard'\]"):
        dataset(["hard", "easy"]).only_level()


def test_distinct_episodes_lists_one_copy_of_each_rollout_stored_under_several_wordings() -> None:
    """Episodes 0 and 2 are one rollout under two wordings (same first state), as are 1 and 3;
    episode 4 is another: one copy of each, the first, in order."""
    firsts = [0.0, 1.0, 0.0, 1.0, 2.0]
    eps = [
        Episode(
            states=np.array([[first, 0.0], [first + 0.5, 0.0]], np.float32),
            actions=np.zeros(1, dtype=np.int64),
            rewards=np.zeros(1, np.float32),
            terminated=True,
            truncated=False,
            instruction=f"wording {i}",
            task_spec="{}",
            level="train",
            source="real",
            success=True,
        )
        for i, first in enumerate(firsts)
    ]
    ds = RolloutDataset.from_episodes(eps, domain="toy", action_spec=DISCRETE, provenance={})
    distinct = ds.distinct_episodes()
    np.testing.assert_array_equal(distinct, [0, 1, 4])
    assert distinct.dtype == np.int64


def test_summary_mentions_counts() -> None:
    ds = make_ds(n_eps=8)
    text = ds.summary()
    for frag in (
        "domain: toy",
        "episodes: 8",
        f"transitions: {ds.num_transitions}",
        "train=2",
        "hard=2",
        "real=4",
        "imaginary=4",
        "success rate",
        "mean length",
        "instructions: 3",
    ):
        assert frag in text, frag


def test_select_keeps_ids_valid() -> None:
    ds = make_ds(n_eps=9)
    mask = np.zeros(9, dtype=bool)
    mask[[1, 4, 7]] = True  # all with instruction "go to 1"
    sub = ds.select(mask)
    assert len(sub) == 3
    assert sub.instructions == ["go to 1"]
    validate(sub)
    for j, i in enumerate([1, 4, 7]):
        assert_episode_equal(sub.episode(j), ds.episode(i))
    by_index = ds.select([8, 0])
    assert_episode_equal(by_index.episode(0), ds.episode(8))
    assert_episode_equal(by_index.episode(1), ds.episode(0))
    validate(by_index)
    empty = ds.select(np.zeros(9, dtype=bool))
    assert len(empty) == 0 and empty.num_transitions == 0 and empty.states.shape == (0, 3)
    validate(empty)


def test_concatenate_merges_tables() -> None:
    a = make_ds(n_eps=4, seed=1, source="real", instr_prefix="go to")
    b = make_ds(n_eps=5, seed=2, source="imaginary", instr_prefix="walk to")
    # make one instruction shared between the two datasets
    b.instructions[b.episode_instruction[0]] = a.instructions[0]
    cat = RolloutDataset.concatenate([a, b])
    validate(cat)
    assert len(cat) == 9
    assert cat.num_transitions == a.num_transitions + b.num_transitions
    assert len(cat.instructions) == len(set(cat.instructions))
    assert set(cat.instructions) == set(a.instructions) | set(b.instructions)
    assert len(cat.instructions) == len(a.instructions) + len(b.instructions) - 1
    assert cat.tasks == a.tasks  # identical task specs merge into one entry each
    for i in range(4):
        assert_episode_equal(cat.episode(i), a.episode(i))
    for i in range(5):
        assert_episode_equal(cat.episode(4 + i), b.episode(i))
    assert cat.provenance == a.provenance  # identical provenance is kept as-is
    b.provenance = {"command": "other"}
    assert "concatenated_from" in RolloutDataset.concatenate([a, b]).provenance
    b.domain = "other"
    with pytest.raises(ValueError, match="domain"):
        RolloutDataset.concatenate([a, b])
    with pytest.raises(ValueError, match="action spec"):
        RolloutDataset.concatenate([a, make_ds(continuous=True)])


# ------------------------------------------------------------------------------------ files


@pytest.mark.parametrize("continuous", [False, True])
def test_save_load_roundtrip(tmp_path: Path, continuous: bool) -> None:
    ds = make_ds(continuous)
    path = save_dataset(ds, tmp_path / "sub" / "dir" / "ds.h5")  # parents are created
    assert path.exists()
    loaded = load_dataset(path)
    assert_ds_equal(ds, loaded)
    assert loaded.dropped_nonfinite == 0
    for i in range(len(ds)):
        assert_episode_equal(loaded.episode(i), ds.episode(i))
    with h5py.File(path, "r") as f:
        assert f.attrs["format"] == "imaginebench-rollouts"
        assert int(f.attrs["schema_version"]) == SCHEMA_VERSION
        assert f.attrs["domain"] == "toy"
        assert int(f.attrs["state_dim"]) == 3
        assert json.loads(f.attrs["action_spec"]) == ds.action_spec
        assert json.loads(f.attrs["provenance"]) == ds.provenance
        assert json.loads(f.attrs["levels"]) == list(LEVELS)
        assert json.loads(f.attrs["sources"]) == list(SOURCES)
        assert h5py.check_string_dtype(f["instructions"].dtype).encoding == "utf-8"
        assert set(f.keys()) == set(ARRAY_FIELDS) | {"instructions", "tasks"}


def test_unicode_and_float64_input(tmp_path: Path) -> None:
    ds = make_ds()
    ds.instructions = [s + " — café ✓" for s in ds.instructions]
    ds.states = ds.states.astype(np.float64)
    loaded = load_dataset(save_dataset(ds, tmp_path / "u.h5"))
    assert loaded.instructions == ds.instructions
    assert loaded.states.dtype == np.float32


def test_overwrite_refused(saved: Path) -> None:
    before = saved.read_bytes()
    with pytest.raises(FileExistsError, match="overwrite=True"):
        save_dataset(make_ds(n_eps=2), saved)
    assert saved.read_bytes() == before
    save_dataset(make_ds(n_eps=2), saved, overwrite=True)
    assert len(load_dataset(saved)) == 2
    assert not list(saved.parent.glob(".*.tmp"))


def _failing_create_array(monkeypatch: pytest.MonkeyPatch, fail_at: int) -> None:
    real = h5io._create_array
    calls = {"n": 0}

    def flaky(h5, name, data):
        calls["n"] += 1
        if calls["n"] == fail_at:
            raise RuntimeError("simulated crash mid-write")
        real(h5, name, data)

    monkeypatch.setattr(h5io, "_create_array", flaky)


def test_atomic_write_new_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _failing_create_array(monkeypatch, fail_at=4)
    target = tmp_path / "new.h5"
    with pytest.raises(RuntimeError, match="simulated"):
        save_dataset(make_ds(), target)
    assert not target.exists()
    assert list(tmp_path.iterdir()) == []  # no temp file left behind


def test_atomic_write_keeps_existing(saved: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    before = saved.read_bytes()
    _failing_create_array(monkeypatch, fail_at=2)
    with pytest.raises(RuntimeError, match="simulated"):
        save_dataset(make_ds(n_eps=3), saved, overwrite=True)
    assert saved.read_bytes() == before
    assert sorted(p.name for p in saved.parent.iterdir()) == [saved.name]


def test_atomic_write_fails_at_rename(saved: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    before = saved.read_bytes()

    def broken_replace(src, dst):
        assert Path(src).name.startswith(".") and Path(src).name.endswith(".tmp")
        assert Path(src).parent == saved.parent
        raise OSError("simulated rename failure")

    monkeypatch.setattr(h5io.os, "replace", broken_replace)
    with pytest.raises(OSError, match="simulated"):
        save_dataset(make_ds(n_eps=3), saved, overwrite=True)
    assert saved.read_bytes() == before
    assert sorted(p.name for p in saved.parent.iterdir()) == [saved.name]


def test_save_validates_strictly(tmp_path: Path) -> None:
    ds = make_ds()
    ds.rewards[0] = np.nan
    with pytest.raises(DatasetError, match="non-finite"):
        save_dataset(ds, tmp_path / "x.h5")
    ds = make_ds()
    k = int(np.flatnonzero(ds.episode_lengths() >= 2)[0])
    ds.terminals[ds.episode_offsets[k]] = True  # first of >= 2 transitions: not the last
    with pytest.raises(DatasetError, match="terminals"):
        save_dataset(ds, tmp_path / "x.h5")
    ds = make_ds()
    ds.episode_task[0] = 99
    with pytest.raises(DatasetError, match="episode_task"):
        save_dataset(ds, tmp_path / "x.h5")
    assert list(tmp_path.iterdir()) == []


# ------------------------------------------------------------------------------------ corruption


def test_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "nope.h5"
    with pytest.raises(FileNotFoundError) as info:
        load_dataset(path)
    assert (info.value.errno, info.value.filename) == (2, str(path))
    assert info.value.strerror == f"{path}: dataset file does not exist"


def test_a_directory_or_a_bad_nonfinite_mode_is_refused(tmp_path: Path) -> None:
    error = expect_error(tmp_path, "is a directory, not a dataset file")
    assert str(error) == f"{tmp_path}: is a directory, not a dataset file"
    with pytest.raises(ValueError, match=r"^nonfinite must be 'raise' or 'drop', got 'keep'$"):
        load_dataset(tmp_path, nonfinite="keep")  # type: ignore[arg-type]


def test_an_unexpected_read_failure_is_a_dataset_error(
    saved: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def fail(h5, src, nonfinite):
        raise KeyError("no such object")

    monkeypatch.setattr(h5io, "_load_open", fail)
    error = expect_error(saved)
    assert str(error) == f"{saved}: failed to read the file (KeyError: 'no such object')"


def test_invalid_json_is_quoted_up_to_80_characters(saved: Path) -> None:
    text = "[" + "1, " * 40
    with h5py.File(saved, "r+") as f:
        f.attrs["provenance"] = text
    error = expect_error(saved, "root attribute 'provenance' is not valid JSON")
    assert str(error).endswith(f": {text[:80]!r}")


def test_not_hdf5(tmp_path: Path) -> None:
    path = tmp_path / "text.h5"
    path.write_text("this is not an HDF5 file\n" * 20)
    expect_error(path, "not a readable HDF5 file")


@pytest.mark.parametrize("keep", [0.0, 0.01, 0.5, 0.99])
def test_truncated_file(saved: Path, keep: float) -> None:
    data = saved.read_bytes()
    cut = saved.parent / "cut.h5"
    cut.write_bytes(data[: int(len(data) * keep)])
    expect_error(cut)


def _set_attr(name: str, value) -> Callable[[h5py.File], None]:
    def edit(f: h5py.File) -> None:
        f.attrs[name] = value

    return edit


def _del_attr(name: str) -> Callable[[h5py.File], None]:
    def edit(f: h5py.File) -> None:
        del f.attrs[name]

    return edit


def _del_ds(name: str) -> Callable[[h5py.File], None]:
    def edit(f: h5py.File) -> None:
        del f[name]

    return edit


def _map_ds(name: str, fn) -> Callable[[h5py.File], None]:
    def edit(f: h5py.File) -> None:
        replace_dataset(f, name, fn(f[name][()], f))

    return edit


def _set_item(name: str, index, value):
    def fn(arr, f):
        arr = arr.copy()
        arr[index] = value
        return arr

    return _map_ds(name, fn)


def _mid_episode_flag(arr, f):
    off = f["episode_offsets"][()]
    k = int(np.flatnonzero(np.diff(off) >= 2)[0])  # an episode with >= 2 transitions
    arr = arr.copy()
    arr[off[k]] = True
    return arr


def _zero_length_episode(arr, f):
    arr = arr.copy()
    arr[2] = arr[1]
    return arr


def _group_instead(name: str) -> Callable[[h5py.File], None]:
    def edit(f: h5py.File) -> None:
        del f[name]
        f.create_group(name)

    return edit


def _reordered_with_id(attr: str, order: list[str], ids: str, bad: int):
    """Store the enum ``attr`` in another order (so ids are remapped) and one id out of it."""

    def edit(f: h5py.File) -> None:
        f.attrs[attr] = json.dumps(order)
        values = f[ids][()].copy()
        values[0] = bad
        replace_dataset(f, ids, values)

    return edit


def _shorten_transitions(f: h5py.File) -> None:
    for name in ("actions", "rewards", "terminals", "truncations"):
        replace_dataset(f, name, f[name][()][:-1])


CORRUPTIONS = {
    "format": (_set_attr("format", "something-else"), ["format", "something-else"]),
    "schema": (_set_attr("schema_version", 99), ["schema_version", "99"]),
    "missing_rewards": (_del_ds("rewards"), ["missing dataset 'rewards'"]),
    "missing_tasks": (_del_ds("tasks"), ["missing dataset 'tasks'"]),
    "missing_domain": (_del_attr("domain"), ["missing root attribute 'domain'"]),
    "missing_action_spec": (_del_attr("action_spec"), ["action_spec"]),
    "bad_action_spec_json": (_set_attr("action_spec", "{not json"), ["action_spec", "JSON"]),
    "bad_action_spec": (
        _set_attr("action_spec", json.dumps({"type": "discrete", "n": 0})),
        ["action_spec"],
    ),
    "bad_provenance": (_set_attr("provenance", "[1, 2"), ["provenance"]),
    "unknown_level_name": (
        _set_attr("levels", json.dumps(["train", "medium"])),
        ["levels", "medium"],
    ),
    "states_int": (
        _map_ds("states", lambda a, f: a.astype(np.int32)),
        ["dataset 'states' has dtype int32 (signed integer), expected floating point"],
    ),
    "terminals_int": (_map_ds("terminals", lambda a, f: a.astype(np.int8)), ["terminals", "dtype"]),
    "actions_float": (
        _map_ds("actions", lambda a, f: a.astype(np.float32)),
        [
            "dataset 'actions' has dtype float32 (floating point), expected signed integer or "
            "unsigned integer"
        ],
    ),
    "instructions_not_str": (
        _map_ds("instructions", lambda a, f: np.arange(len(a))),
        ["instructions", "string"],
    ),
    "state_dim": (_set_attr("state_dim", 4), ["state_dim", "states"]),
    "actions_2d": (_map_ds("actions", lambda a, f: a[:, None]), ["actions", "shape"]),
    "action_too_big": (_set_item("actions", 3, DISCRETE["n"]), ["actions", "outside [0, 5)"]),
    "action_negative": (_set_item("actions", 0, -1), ["actions", "outside"]),
    "rewards_short": (_map_ds("rewards", lambda a, f: a[:-1]), ["rewards=", "inconsistent"]),
    "truncations_short": (
        _map_ds("truncations", lambda a, f: a[:-1]),
        ["truncations=", "inconsistent"],
    ),
    "all_transitions_short": (_shorten_transitions, ["episode_offsets", "ends at"]),
    "offsets_start": (_set_item("episode_offsets", 0, 1), ["episode_offsets", "start at 0"]),
    "offsets_zero_len": (
        _map_ds("episode_offsets", _zero_length_episode),
        ["episode_offsets", "increasing"],
    ),
    "offsets_last": (_set_item("episode_offsets", -1, 10_000), ["episode_offsets", "ends at"]),
    "states_rows": (_map_ds("states", lambda a, f: a[:-1]), ["states", "N + E"]),
    "success_len": (_map_ds("episode_success", lambda a, f: a[:-1]), ["episode_success"]),
    "instr_id": (_set_item("episode_instruction", 0, 50), ["episode_instruction", "range"]),
    "task_id": (_set_item("episode_task", 1, -1), ["episode_task", "range"]),
    "level_id": (_set_item("episode_level", 0, 7), ["episode_level", "range"]),
    "source_id": (_set_item("episode_source", 0, 2), ["episode_source", "range"]),
    "terminal_mid": (_map_ds("terminals", _mid_episode_flag), ["terminals", "not the last"]),
    "truncation_mid": (
        _map_ds("truncations", _mid_episode_flag),
        ["truncations", "not the last"],
    ),
    "duplicate_instruction": (
        _map_ds("instructions", lambda a, f: np.array([a[0]] * len(a), dtype=object)),
        ["instructions", "duplicate"],
    ),
    "task_not_json": (
        _map_ds("tasks", lambda a, f: np.array([f"x{i}{{" for i in range(len(a))], dtype=object)),
        ["tasks", "JSON"],
    ),
    "missing_format": (_del_attr("format"), ["missing root attribute 'format'"]),
    "missing_state_dim": (_del_attr("state_dim"), ["missing root attribute 'state_dim'"]),
    "missing_sources": (_del_attr("sources"), ["missing root attribute 'sources'"]),
    "levels_not_json": (
        _set_attr("levels", "[train"),
        ["root attribute 'levels' is not valid JSON"],
    ),
    "schema_not_int": (
        _set_attr("schema_version", "two"),
        ["root attribute 'schema_version' must be an integer, got 'two'"],
    ),
    "state_dim_not_int": (
        _set_attr("state_dim", np.array([3, 3])),
        ["root attribute 'state_dim' must be an integer"],
    ),
    "domain_not_str": (_set_attr("domain", 5), ["root attribute 'domain' must be a string, got"]),
    "rewards_a_group": (_group_instead("rewards"), ["'rewards' must be a dataset, found Group"]),
    "instructions_2d": (
        _map_ds("instructions", lambda a, f: np.array([list(a), list(a)], dtype=object)),
        ["dataset 'instructions' must be 1-D, got shape (2, "],
    ),
    "levels_not_strings": (
        _set_attr("levels", json.dumps([0, 1])),
        ["root attribute 'levels' must be a JSON list of strings"],
    ),
    "sources_not_a_list": (
        _set_attr("sources", json.dumps("real")),
        ["root attribute 'sources' must be a JSON list of strings"],
    ),
    "remapped_source_out_of_range": (
        _reordered_with_id("sources", ["imaginary", "real"], "episode_source", 2),
        [
            "dataset 'episode_source' has 1 value(s) out of range [0, 2) (index into the file's "
            "'sources' attribute)"
        ],
    ),
    "remapped_level_out_of_range": (
        _reordered_with_id("levels", list(reversed(LEVELS)), "episode_level", 9),
        [
            f"dataset 'episode_level' has 1 value(s) out of range [0, {len(LEVELS)}) (index into "
            "the file's 'levels' attribute)"
        ],
    ),
}


@pytest.mark.parametrize("case", sorted(CORRUPTIONS))
def test_corruption_detected(saved: Path, case: str) -> None:
    edit, fragments = CORRUPTIONS[case]
    with h5py.File(saved, "r+") as f:
        edit(f)
    expect_error(saved, *fragments)


def test_continuous_action_shape_mismatch(tmp_path: Path) -> None:
    path = save_dataset(make_ds(continuous=True), tmp_path / "c.h5")
    with h5py.File(path, "r+") as f:
        f.attrs["action_spec"] = json.dumps({**CONTINUOUS, "shape": [3]})
    expect_error(path, "actions", "shape", "[3]")


@pytest.mark.parametrize(
    "name, shape, dtype",
    [
        ("states", (10**12, 3), "f4"),  # 12 TB in a file of a few KB
        ("rewards", (10**11,), "f4"),
        ("instructions", (10**10,), h5py.string_dtype("utf-8")),
        ("states", (10**6, 3), "f4"),  # 12 MB declared, over the 1 MiB slack only in bytes
    ],
)
def test_huge_declared_array_is_refused_before_reading(
    saved: Path, name: str, shape: tuple[int, ...], dtype: object
) -> None:
    with h5py.File(saved, "r+") as f:  # declared, never written: the file stays tiny
        del f[name]
        f.create_dataset(name, shape=shape, dtype=dtype, chunks=(1024, *shape[1:]))
    assert saved.stat().st_size < 100_000
    expect_error(saved, f"dataset '{name}' declares shape {shape}", "stores only 0 bytes")


def test_reordered_enums_are_remapped(saved: Path) -> None:
    original = load_dataset(saved)
    with h5py.File(saved, "r+") as f:
        f.attrs["sources"] = json.dumps(["imaginary", "real"])
        replace_dataset(f, "episode_source", 1 - f["episode_source"][()])
    loaded = load_dataset(saved)
    np.testing.assert_array_equal(loaded.episode_source, original.episode_source)


def test_byte_string_attributes_are_decoded_and_bad_bytes_replaced(saved: Path) -> None:
    with h5py.File(saved, "r+") as f:
        f.attrs["domain"] = np.bytes_(b"to\xffy")
        f.attrs["format"] = np.bytes_(f.attrs["format"].encode())
    assert load_dataset(saved).domain == "to\ufffdy"


@pytest.mark.parametrize(
    ("raised", "message"),
    [
        (MemoryError(), "dataset 'states' needs {size} bytes: not enough memory"),
        (OSError("disk gone"), "cannot read dataset 'states' (disk gone)"),
    ],
)
def test_a_failing_array_read_is_a_dataset_error(
    saved: Path, monkeypatch: pytest.MonkeyPatch, raised: Exception, message: str
) -> None:
    original = h5py.Dataset.__getitem__
    size = 0

    def read(dset, key):
        nonlocal size
        if dset.name == "/states":
            size = dset.size * dset.dtype.itemsize
            raise raised
        return original(dset, key)

    monkeypatch.setattr(h5py.Dataset, "__getitem__", read)
    error = expect_error(saved)
    assert str(error) == f"{saved}: " + message.format(size=size)


def test_a_failing_string_read_is_a_dataset_error(
    saved: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(dset, *args, **kwargs):
        raise OSError("bad block")

    monkeypatch.setattr(h5py.Dataset, "asstr", broken)
    error = expect_error(saved)
    assert str(error) == f"{saved}: cannot read string dataset 'instructions' (bad block)"


def test_big_arrays_are_compressed_and_json_attributes_canonical(tmp_path: Path) -> None:
    ds = make_ds()
    ds.provenance = {"b": 1, "a": {"d": 2, "c": 3}}
    ds.confidence = {"likelihood": np.full(ds.num_transitions, 0.5, np.float32)}
    path = save_dataset(ds, tmp_path / "c.h5")
    with h5py.File(path, "r") as f:
        for name in ("states", "actions", "rewards", "confidence/likelihood"):
            assert (f[name].compression, f[name].compression_opts, f[name].shuffle) == (
                "gzip",
                4,
                True,
            ), name
        assert f["terminals"].compression is None and f["instructions"].compression is None
        assert f.attrs["provenance"] == '{"a": {"c": 3, "d": 2}, "b": 1}'
        assert f.attrs["action_spec"] == json.dumps(DISCRETE, sort_keys=True)
        assert f["instructions"].shape == (len(ds.instructions),)


def test_saving_names_the_file_in_its_errors(tmp_path: Path) -> None:
    with pytest.raises(IsADirectoryError, match=r"is a directory, cannot write a dataset file"):
        save_dataset(make_ds(), tmp_path)
    bad = make_ds()
    bad.rewards = bad.rewards[:-1]
    target = tmp_path / "bad.h5"
    with pytest.raises(DatasetError, match=re.escape(f"{target.absolute()} (while saving): ")):
        save_dataset(bad, target)


def test_a_file_that_appears_while_saving_is_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "race.h5"
    original = h5io._write_payload

    def write_while_another_run_saves(h5, ds):
        target.write_bytes(b"the other run's file")
        original(h5, ds)

    monkeypatch.setattr(h5io, "_write_payload", write_while_another_run_saves)
    with pytest.raises(FileExistsError, match=r"race.h5: file already exists; pass overwrite"):
        save_dataset(make_ds(), target)
    assert target.read_bytes() == b"the other run's file"


# ------------------------------------------------------------------------------------ non-finite


def _inject_nonfinite(path: Path) -> None:
    with h5py.File(path, "r+") as f:
        states = f["states"][()]
        rewards = f["rewards"][()]
        off = f["episode_offsets"][()]
        states[off[1] + 1 + 0, 0] = np.nan  # first state of episode 1
        states[off[2] + 2, 1] = np.inf  # first state of episode 2
        rewards[off[4]] = -np.inf  # first transition of episode 4
        replace_dataset(f, "states", states)
        replace_dataset(f, "rewards", rewards)


def test_nonfinite_raise(saved: Path) -> None:
    _inject_nonfinite(saved)
    expect_error(saved, "non-finite", "3 of 6 episodes")


def test_nonfinite_drop(saved: Path, caplog: pytest.LogCaptureFixture) -> None:
    clean = load_dataset(saved)
    _inject_nonfinite(saved)
    with caplog.at_level(logging.WARNING, logger=validation.__name__):
        ds = load_dataset(saved, nonfinite="drop")
    assert ds.dropped_nonfinite == 3
    assert len(ds) == 3
    assert any(
        "dropping 3" in r.getMessage() and str(saved) in r.getMessage() for r in caplog.records
    )
    kept = [0, 3, 5]
    for j, i in enumerate(kept):
        assert_episode_equal(ds.episode(j), clean.episode(i))
    validate(ds)
    assert "dropped (non-finite): 3" in ds.summary()


def test_nonfinite_continuous_actions(tmp_path: Path) -> None:
    path = save_dataset(make_ds(continuous=True), tmp_path / "c.h5")
    with h5py.File(path, "r+") as f:
        actions = f["actions"][()]
        actions[0, 1] = np.nan
        replace_dataset(f, "actions", actions)
    expect_error(path, "1 of 6 episodes")
    assert load_dataset(path, nonfinite="drop").dropped_nonfinite == 1


def test_atomic_path_keeps_the_old_file_when_writing_fails(tmp_path: Path) -> None:
    from imaginebench.atomic import atomic_path, write_text_atomically

    target = tmp_path / "sub" / "results.json"
    write_text_atomically(target, "old")
    with pytest.raises(RuntimeError, match="interrupted"):
        with atomic_path(target) as tmp:
            tmp.write_text("half of the new")
            raise RuntimeError("interrupted")
    assert target.read_text() == "old"
    assert [p.name for p in target.parent.iterdir()] == ["results.json"]  # no temporary left
    write_text_atomically(target, "new")
    assert target.read_text() == "new"


def test_a_killed_writes_leftover_is_removed_by_the_next_write(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    target = tmp_path / "real.h5"
    killed = subprocess.run(  # kill -9 in the middle of an atomic write
        [
            sys.executable,
            "-c",
            "import os, sys\nfrom imaginebench.atomic import atomic_path\n"
            "with atomic_path(sys.argv[1]) as tmp:\n"
            "    tmp.write_text('half')\n    os.kill(os.getpid(), 9)\n",
            str(target),
        ]
    )
    assert killed.returncode == -9
    (leftover,) = tmp_path.glob(".real.h5.*.tmp")
    dead_pid = leftover.name.split(".")[3]
    fresh = tmp_path / f".other.h5.{dead_pid}.0123abcd.tmp"  # maybe a writer on another host
    alive = tmp_path / f".third.h5.{os.getpid()}.0123abcd.tmp"  # a live writer
    fresh.write_text("x")
    alive.write_text("x")
    hour_ago = leftover.stat().st_mtime - 3600
    os.utime(leftover, (hour_ago, hour_ago))
    os.utime(alive, (hour_ago, hour_ago))
    save_dataset(make_ds(n_eps=2), tmp_path / "next.h5")
    assert not leftover.exists() and fresh.exists() and alive.exists()


# ---------------------------------------------------------------------------------- confidence


def scored(ds: RolloutDataset, *names: str, seed: int = 0) -> RolloutDataset:
    rng = np.random.default_rng(seed)
    for name in names:
        ds = ds.with_confidence(name, rng.uniform(size=ds.num_transitions))
    return ds


def test_confidence_travels_with_its_transitions(tmp_path: Path) -> None:
    """Per-transition confidence survives a file round trip, and episode, select, concatenate
    and from_episodes keep each value with its own transition."""
    ds = scored(make_ds(n_eps=8), "likelihood", "ensemble")
    back = load_dataset(save_dataset(ds, tmp_path / "c.h5"))
    assert_ds_equal(validate(ds), back)
    assert "confidence likelihood: mean" in back.summary()
    ep = back.episode(5)
    t0, t1 = back.episode_offsets[5], back.episode_offsets[6]
    np.testing.assert_array_equal(ep.confidence["ensemble"], back.confidence["ensemble"][t0:t1])
    picked = back.select([5, 2])
    np.testing.assert_array_equal(
        picked.episode(0).confidence["likelihood"], ep.confidence["likelihood"]
    )
    rebuilt = RolloutDataset.from_episodes(list(back), domain="toy", action_spec=DISCRETE)
    assert_ds_equal(back, dataclasses.replace(rebuilt, provenance=back.provenance))
    # concatenating keeps the sources every part has
    joined = RolloutDataset.concatenate([back, scored(make_ds(n_eps=2), "ensemble")])
    assert list(joined.confidence) == ["ensemble"]
    assert joined.confidence["ensemble"].shape == (joined.num_transitions,)


@pytest.mark.parametrize(
    "values,name,fragments",
    [
        ("nan", "likelihood", ["confidence/likelihood", "NaN", "transition 3"]),
        ("big", "likelihood", ["outside [0, 1]", "1.5"]),
        ("negative", "likelihood", ["-0.25"]),
        ("short", "likelihood", ["shape", "one per transition"]),
        ("int", "likelihood", ["dtype", "floating point"]),
        ("ok", "Likelihood!", ["lower-case"]),
    ],
)
def test_bad_confidence_is_refused_in_memory_and_in_files(
    tmp_path: Path, values: str, name: str, fragments: list[str]
) -> None:
    ds = make_ds(n_eps=6)
    n = ds.num_transitions
    arr = {
        "nan": np.where(np.arange(n) == 3, np.nan, 0.5),
        "big": np.full(n, 1.5),
        "negative": np.full(n, -0.25),
        "short": np.full(n - 1, 0.5),
        "int": np.ones(n, dtype=np.int64),
        "ok": np.full(n, 0.5),
    }[values]
    bad = ds.with_confidence(name, arr)
    for nonfinite in ("raise", "drop"):  # never dropped: a confidence has no episode to lose
        with pytest.raises(DatasetError) as info:
            validate(bad, nonfinite=nonfinite)
        for fragment in fragments:
            assert fragment in str(info.value)
    if values in ("ok", "short"):
        return
    path = save_dataset(ds.with_confidence(name, np.full(n, 0.5)), tmp_path / "ds.h5")
    with h5py.File(path, "r+") as f:
        replace_dataset(f, f"confidence/{name}", arr)
    expect_error(path, *fragments, nonfinite="drop")


def test_files_of_schema_version_1_still_load(tmp_path: Path) -> None:
    """``tests/data/schema_v1.h5`` was written by the version-1 code (commit b7283b5, before
    confidence existed): it loads, without confidence, and saves again as the current version.
    A version-1 file never holds a confidence group, so one added by hand is ignored."""
    old = Path(__file__).parent / "data" / "schema_v1.h5"
    with h5py.File(old, "r") as f:
        assert int(f.attrs["schema_version"]) == 1 and "confidence" not in f
    ds = load_dataset(old)
    assert ds.confidence == {} and len(ds) == 3 and ds.num_transitions == 9
    copy = tmp_path / "v1.h5"
    copy.write_bytes(old.read_bytes())
    with h5py.File(copy, "r+") as f:
        f.create_dataset("confidence/likelihood", data=np.full(9, np.nan))
    assert load_dataset(copy).confidence == {}
    resaved = save_dataset(scored(ds, "likelihood"), tmp_path / "v2.h5")
    with h5py.File(resaved, "r") as f:
        assert int(f.attrs["schema_version"]) == SCHEMA_VERSION == 2
    assert list(load_dataset(resaved).confidence) == ["likelihood"]


def test_a_confidence_that_is_not_a_group_is_refused(saved: Path) -> None:
    with h5py.File(saved, "r+") as f:
        f.create_dataset("confidence", data=np.zeros(3))
    expect_error(saved, "'confidence' must be a group of datasets, found Dataset")


def _in_memory(edit: Callable[[RolloutDataset], None]) -> RolloutDataset:
    """``make_ds(n_eps=6)`` edited: 20 transitions, episode offsets 0 5 8 11 14 15 20 (26 states),
    instructions "go to 0/1/2" (per episode 0 1 2 0 1 2), two tasks, terminal flags on
    transitions 4 and 13."""
    ds = make_ds(n_eps=6)
    edit(ds)
    return ds


def _set(**fields: Any) -> Callable[[RolloutDataset], None]:
    def edit(ds: RolloutDataset) -> None:
        for name, value in fields.items():
            setattr(ds, name, value)

    return edit


def _item(name: str, index: Any, value: Any) -> Callable[[RolloutDataset], None]:
    def edit(ds: RolloutDataset) -> None:
        arr = getattr(ds, name).copy()
        arr[index] = value
        setattr(ds, name, arr)

    return edit


def _map(name: str, fn: Callable[[np.ndarray], np.ndarray]) -> Callable[[RolloutDataset], None]:
    return lambda ds: setattr(ds, name, fn(getattr(ds, name)))


_instruction_id = _item("episode_instruction", 3, 7)


IN_MEMORY_REFUSALS = {
    "table_not_str": (
        _set(instructions=["a", 3, "c"]),
        "string table 'instructions' must be a list of str",
    ),
    "table_duplicate": (  # the entry seen twice, not the first one
        _set(tasks=("a", "b", "b")),
        "string table 'tasks' has duplicate entry 'b'",
    ),
    "action_spec": (
        _set(action_spec={"type": "discrete", "n": 0}),
        "invalid action_spec {'type': 'discrete', 'n': 0}: discrete spec needs an integer 'n' >= 1",
    ),
    "continuous_actions_int": (
        _set(action_spec=CONTINUOUS),
        "dataset 'actions' has dtype int64 (signed integer), expected floating point",
    ),
    "level_id": (
        _item("episode_level", 0, 7),
        "dataset 'episode_level' has 1 value(s) out of range [0, 4) (index into levels "
        "['train', 'rephrase', 'easy', 'hard']); first at episode 0: 7",
    ),
    "confidence_not_mapping": (
        _set(confidence=[("a", np.zeros(20))]),
        "'confidence' must map source names to (N,) arrays",
    ),
    "confidence_name": (
        _set(confidence={"Bad": np.zeros(20)}),
        "confidence source name 'Bad' must be lower-case letters, digits and underscores, "
        "starting with a letter",
    ),
    "confidence_int": (
        _set(confidence={"c": np.zeros(20, dtype=np.int32)}),
        "dataset 'confidence/c' has dtype int32 (signed integer), expected floating point",
    ),
    "confidence_short": (
        _set(confidence={"c": np.zeros(19)}),
        "dataset 'confidence/c' has shape (19,), expected (20,) (one per transition)",
    ),
    "confidence_big": (
        _set(confidence={"c": np.r_[np.zeros(19), 2.0]}),
        "dataset 'confidence/c' has 1 value(s) that are NaN, infinite or outside [0, 1] (first: "
        "transition 19: 2.0); a confidence is a finite number in [0, 1] (recompute it with "
        "imaginebench score-imaginary)",
    ),
    "states_timedelta": (  # a dtype kind without a name in words: its letter
        lambda ds: setattr(ds, "states", np.zeros(ds.states.shape, dtype="m8[s]")),
        "dataset 'states' has dtype timedelta64[s] ('m'), expected floating point",
    ),
    "actions_float": (
        lambda ds: setattr(ds, "actions", ds.actions.astype(np.float32)),
        "dataset 'actions' has dtype float32 (floating point), expected signed integer or "
        "unsigned integer",
    ),
    "instruction_id": (  # only episode 3 is out of range; episode 0 holds id 0
        _instruction_id,
        "dataset 'episode_instruction' has 1 value(s) out of range [0, 3) (index into "
        "'instructions'); first at episode 3: 7",
    ),
    "task_id": (
        _item("episode_task", 2, 5),
        "dataset 'episode_task' has 1 value(s) out of range [0, 2) (index into 'tasks'); first "
        "at episode 2: 5",
    ),
    "source_id": (
        _item("episode_source", 1, 9),
        "dataset 'episode_source' has 1 value(s) out of range [0, 2) (index into sources "
        "['real', 'imaginary']); first at episode 1: 9",
    ),
    "domain_empty": (_set(domain=""), "'domain' must be a non-empty string, got ''"),
    "provenance_list": (_set(provenance=[1]), "'provenance' must be a JSON object, got list"),
    "provenance_object": (
        _set(provenance={"x": object()}),
        "'provenance' is not JSON-serialisable (Object of type object is not JSON serializable)",
    ),
    "states_1d": (
        _map("states", lambda a: a[:, 0]),
        "dataset 'states' must be 2-D (num_states, state_dim>=1), got shape (26,)",
    ),
    "states_no_columns": (
        _map("states", lambda a: a[:, :0]),
        "dataset 'states' must be 2-D (num_states, state_dim>=1), got shape (26, 0)",
    ),
    "rewards_2d": (
        _map("rewards", lambda a: a[:, None]),
        "dataset 'rewards' must be 1-D, got shape (20, 1)",
    ),
    "actions_scalar": (
        _set(actions=np.asarray(3)),
        "transition datasets have inconsistent lengths (actions=None, rewards=20, terminals=20, "
        "truncations=20); all must have one entry per transition",
    ),
    "actions_2d": (
        _map("actions", lambda a: a[:, None]),
        "dataset 'actions' has shape (20, 1), expected (20,) (one per transition)",
    ),
    "terminals_2d": (
        _map("terminals", lambda a: a[:, None]),
        "dataset 'terminals' has shape (20, 1), expected (20,) (one per transition)",
    ),
    "truncations_2d": (
        _map("truncations", lambda a: a[:, None]),
        "dataset 'truncations' has shape (20, 1), expected (20,) (one per transition)",
    ),
    "offsets_2d": (
        _map("episode_offsets", lambda a: a[None]),
        "dataset 'episode_offsets' must be 1-D with E + 1 >= 1 entries, got shape (1, 7)",
    ),
    "offsets_start": (
        _item("episode_offsets", 0, 1),
        "dataset 'episode_offsets' must start at 0, starts at 1",
    ),
    "offsets_empty_episode": (  # after an episode of length 1: the empty one is named
        _item("episode_offsets", 6, 15),
        "dataset 'episode_offsets' must be strictly increasing (every episode has >= 1 "
        "transition); episode 5 spans [15, 15)",
    ),
    "offsets_end": (
        _item("episode_offsets", 6, 19),
        "dataset 'episode_offsets' ends at 19 but there are 20 transitions (length of 'rewards')",
    ),
    "states_rows": (
        _map("states", lambda a: a[:-1]),
        "dataset 'states' has 25 rows, expected N + E = 20 + 6 = 26 (one extra final state per "
        "episode)",
    ),
    "success_short": (
        _map("episode_success", lambda a: a[:-1]),
        "dataset 'episode_success' has shape (5,), expected (6,) (one per episode)",
    ),
    "task_not_json": (
        _set(tasks=['{"a": 1}', "x" * 100]),
        f"string table 'tasks' entry 1 is not valid JSON: {'x' * 80!r}",
    ),
    "terminal_first_of_episode": (  # transition 5 opens episode 1 (transitions 5-7)
        _item("terminals", 5, True),
        "dataset 'terminals' is set on 1 transition(s) that are not the last of their episode "
        "(first: transition 5 of episode 1, which ends at 7)",
    ),
    "truncation_mid": (
        _item("truncations", 16, True),
        "dataset 'truncations' is set on 1 transition(s) that are not the last of their "
        "episode (first: transition 16 of episode 5, which ends at 19)",
    ),
    "nonfinite": (  # a reward of episode 2 (transitions 8-10)
        _item("rewards", 9, np.nan),
        "non-finite values (NaN/inf) in states/actions/rewards of 1 of 6 episodes (first: "
        "episode 2); load with nonfinite='drop' (imaginebench info --drop-nonfinite) to discard "
        "them",
    ),
    "action_uint64_huge": (  # above int64's range: must not wrap into a valid action
        lambda ds: setattr(
            ds, "actions", np.where(np.arange(20) == 4, np.iinfo(np.uint64).max, 1).astype("u8")
        ),
        "dataset 'actions' has 1 discrete action(s) outside [0, 5) (action_spec n); first at "
        "transition 4: 18446744073709551615",
    ),
    "continuous_action_shape": (
        lambda ds: setattr(ds, "action_spec", CONTINUOUS) or _map("actions", np.float32)(ds),
        "dataset 'actions' has shape (20,), expected (20, 2) (action_spec shape [2])",
    ),
}


@pytest.mark.parametrize("case", sorted(IN_MEMORY_REFUSALS))
def test_in_memory_refusals_name_the_source_and_the_problem(case: str) -> None:
    """The whole message, ``<source>: <problem>``: the source as given (or the in-memory
    default), the dataset, what it holds and what was expected."""
    edit, problem = IN_MEMORY_REFUSALS[case]
    with pytest.raises(DatasetError) as info:
        validate(_in_memory(edit), source_name="mine.h5")
    assert str(info.value) == f"mine.h5: {problem}"
    with pytest.raises(DatasetError) as info:
        validate(_in_memory(edit))
    assert str(info.value) == f"<in-memory dataset>: {problem}"


def test_confidence_of_exactly_0_and_1_is_valid() -> None:
    ds = make_ds(n_eps=6)
    values = np.where(np.arange(ds.num_transitions) % 2 == 0, 0.0, 1.0)
    out = validate(ds.with_confidence("edge", values))
    np.testing.assert_array_equal(out.confidence["edge"], values.astype(np.float32))


def test_validate_keeps_what_is_valid_at_the_edges(caplog: pytest.LogCaptureFixture) -> None:
    """One state dimension, unsigned discrete actions, a drop that adds to an earlier count;
    ``nonfinite`` other than raise / drop is refused."""
    ds = make_ds(n_eps=6, state_dim=1)
    assert validate(ds).state_dim == 1
    unsigned = make_ds(n_eps=6)
    unsigned.actions = unsigned.actions.astype(np.uint64)
    out = validate(unsigned)
    assert out.actions.dtype == np.int64
    np.testing.assert_array_equal(out.actions, unsigned.actions)
    dropped = make_ds(n_eps=6)
    dropped.dropped_nonfinite = 2
    dropped.rewards = dropped.rewards.copy()
    dropped.rewards[9] = np.inf  # episode 2
    with caplog.at_level(logging.WARNING, logger=validation.__name__):
        out = validate(dropped, source_name="mine.h5", nonfinite="drop")
    assert len(out) == 5 and out.dropped_nonfinite == 3
    assert [r.getMessage() for r in caplog.records] == [
        "mine.h5: dropping 1 of 6 episodes with non-finite states/actions/rewards"
    ]
    with pytest.raises(ValueError, match="nonfinite must be 'raise' or 'drop', got 'keep'"):
        validate(make_ds(), nonfinite="keep")  # type: ignore[arg-type]
