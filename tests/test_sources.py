"""Where a data module's rollouts come from: the cache, collection on first use, and the checks
that a file fits its domain's environment (imaginebench.datamodules.sources)."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest

from imaginebench.config import ConfigError
from imaginebench.data.dataset import Episode, RolloutDataset
from imaginebench.data.format import DatasetError, save_dataset
from imaginebench.datamodules.sources import (
    DomainSpec,
    check_matches_env,
    default_cache_dir,
    domain_spec,
    ensure_real_dataset,
    load_imaginary_dataset,
    real_dataset_path,
    require_episodes,
)

BOX = {"type": "continuous", "shape": [2], "low": -1.0, "high": 1.0}


def _episode(states: np.ndarray, actions: np.ndarray) -> Episode:
    steps = len(actions)
    return Episode(
        states=np.asarray(states, dtype=np.float32),
        actions=np.asarray(actions),
        rewards=np.zeros(steps, dtype=np.float32),
        terminated=False,
        truncated=True,
        instruction="go",
        task_spec='{"family": "x"}',
        level="rephrase",
        source="imaginary",
        success=False,
    )


def _continuous(actions: list[list[float]]) -> RolloutDataset:
    steps = len(actions)
    episode = _episode(np.zeros((steps + 1, 3)), np.asarray(actions, dtype=np.float32))
    return RolloutDataset.from_episodes([episode], domain="toy", action_spec=BOX)


# ------------------------------------------------------------------------------ the environment


def test_domain_spec_is_the_envs_float32_state_box_and_action_spec():
    spec = domain_spec("clevr")
    assert spec.state_dim == 10
    assert spec.state_low.dtype == np.float32 and spec.state_high.dtype == np.float32
    assert spec.state_low.shape == spec.state_high.shape == (10,)
    assert (spec.state_low < spec.state_high).all()
    assert spec.action_spec == {"type": "discrete", "n": 40}


def test_the_cache_is_the_environment_variable_else_under_home(tmp_path, monkeypatch):
    monkeypatch.setenv("IMAGINEBENCH_CACHE", str(tmp_path / "mine"))
    assert default_cache_dir() == tmp_path / "mine"
    monkeypatch.delenv("IMAGINEBENCH_CACHE")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert default_cache_dir() == tmp_path / "home" / ".cache" / "imaginebench"


# ------------------------------------------------------------------------------ real data


def test_real_data_path_needs_a_file_or_a_collection_config(tmp_path):
    with pytest.raises(ValueError, match="^no real dataset given: set data.real or data.collect$"):
        real_dataset_path("clevr", None, None, tmp_path)
    path = real_dataset_path("clevr", None, {"episodes": 3, "seed": 4}, tmp_path)
    assert path.parent == tmp_path and "n3_s4" in path.name


@pytest.mark.parametrize("call", ["path", "ensure"])
def test_a_bad_collection_config_is_named_in_the_error(tmp_path, call):
    bad = {"episodes": 3, "epsiode_seed": 1}
    with pytest.raises(ConfigError, match=r"^collect: unknown key\(s\) 'epsiode_seed'"):
        if call == "path":
            real_dataset_path("clevr", None, bad, tmp_path)
        else:
            ensure_real_dataset("clevr", tmp_path / "missing.h5", bad)


def test_missing_real_data_is_collected_and_the_log_says_what_and_where(tmp_path, caplog):
    path = tmp_path / "real.h5"
    with caplog.at_level(logging.WARNING, logger="imaginebench.datamodules.sources"):
        ensure_real_dataset("clevr", path, {"episodes": 2, "seed": 0})
    assert path.exists()
    first, last = (r.getMessage() for r in caplog.records)
    assert first.startswith(f"real dataset {path} missing: collecting CollectConfig(episodes=2")
    assert last.startswith("collected 2 episodes") and last.endswith(f" -> {path}")


def test_a_real_file_without_episodes_is_refused(tmp_path):
    empty = _continuous([[0.0, 0.0]])
    empty = empty.select(np.zeros(1, dtype=bool))
    with pytest.raises(DatasetError, match="empty.h5: holds 0 episodes: nothing to train on$"):
        require_episodes(empty, tmp_path / "empty.h5")


# ------------------------------------------------------------------------------ fits the env


def test_discrete_data_with_another_number_of_actions_is_refused(tmp_path):
    episode = _episode(np.zeros((3, 3)), np.array([0, 39]))
    dataset = RolloutDataset.from_episodes(
        [episode], domain="toy", action_spec={"type": "discrete", "n": 40}
    )
    check_matches_env(dataset, tmp_path, "toy", 3, {"type": "discrete", "n": 40})
    with pytest.raises(DatasetError, match="action spec"):
        check_matches_env(dataset, tmp_path, "toy", 3, {"type": "discrete", "n": 41})


def test_continuous_actions_on_the_bounds_fit_and_the_first_outside_is_named(tmp_path):
    check_matches_env(_continuous([[-1.0, 1.0], [1.0, -1.0]]), tmp_path, "toy", 3, BOX)
    outside = _continuous([[0.0, 0.0], [0.5, 1.5], [0.0, 0.0], [-2.0, 0.0]])
    with pytest.raises(
        DatasetError,
        match=r"2 action\(s\) outside .* \(first: transition 1: "
        r"\[0\.5, 1\.5\]\)",
    ):
        check_matches_env(outside, tmp_path, "toy", 3, BOX)


# ------------------------------------------------------------------------------ imaginary data


def _spec() -> DomainSpec:
    return DomainSpec(
        state_dim=3,
        state_low=np.full(3, -1.0, dtype=np.float32),
        state_high=np.full(3, 1.0, dtype=np.float32),
        action_spec=BOX,
    )


def _imaginary_file(path: Path, last_states: list[float]) -> Path:
    """One two-step episode per value ``v``: states 0, 0, then every coordinate ``v``."""
    episodes = [
        _episode(np.array([[0.0] * 3, [0.0] * 3, [v] * 3]), np.zeros((2, 2), np.float32))
        for v in last_states
    ]
    return save_dataset(RolloutDataset.from_episodes(episodes, domain="toy", action_spec=BOX), path)


def test_imaginary_states_within_the_margin_are_kept_and_beyond_it_dropped(tmp_path, caplog):
    # bounds [-1, 1], margin 0.25: -1.25 and 1.25 are on the edge of what is kept
    values = [-1.25, -1.125, 0.0, 1.125, 1.25, -1.5, 1.5]
    path = _imaginary_file(tmp_path / "imag.h5", values)
    with caplog.at_level(logging.WARNING, logger="imaginebench.datamodules.sources"):
        kept, dropped = load_imaginary_dataset("toy", path, _spec(), 0.25, optional=False)
    assert dropped == 2
    assert sorted(kept.states[:, 0].tolist()) == sorted([0.0] * 10 + values[:5])
    [record] = caplog.records
    assert record.getMessage() == (
        f"{path}: dropped 0 episodes with non-finite values and 2 with out-of-range states"
    )


def test_imaginary_data_inside_the_bounds_is_returned_whole(tmp_path, caplog):
    path = _imaginary_file(tmp_path / "imag.h5", [-1.0, 0.5, 1.0])
    with caplog.at_level(logging.WARNING, logger="imaginebench.datamodules.sources"):
        kept, dropped = load_imaginary_dataset("toy", path, _spec(), 0.0, optional=False)
    assert (dropped, len(kept), caplog.records) == (0, 3, [])


def test_a_missing_imaginary_file_is_an_error_or_a_warning_if_optional(tmp_path, caplog):
    path = tmp_path / "nowhere.h5"
    with pytest.raises(FileNotFoundError, match="set data.imaginary_optional: true to train"):
        load_imaginary_dataset("toy", path, _spec(), 0.0, optional=False)
    with caplog.at_level(logging.WARNING, logger="imaginebench.datamodules.sources"):
        assert load_imaginary_dataset("toy", path, _spec(), 0.0, optional=True) == (None, 0)
    assert caplog.records[0].getMessage() == f"imaginary dataset {path} not found: skipped"
