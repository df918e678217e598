"""benchmarks/post_filter.py on the shipped BabyAI rephrase file: the progress rule keeps exactly
the episodes whose imagined task potential never falls, the family rule drops exactly the
episodes longer than their family's limit, and the written file records the filter."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import numpy as np

from imaginebench.data.format import load_dataset
from imaginebench.data.shipped import resolve_data_path
from imaginebench.envs.base import Task
from imaginebench.imagination.filters import episode_families

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "post_filter.py"
spec = importlib.util.spec_from_file_location("post_filter", SCRIPT)
post_filter = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = post_filter
spec.loader.exec_module(post_filter)

FILE = resolve_data_path("shipped:babyai/imaginary_rephrase.h5")


def _falls(data, i: int) -> bool:
    episode = data.episode(i)
    potential = Task.from_spec(episode.task_spec).progress(np.asarray(episode.states)[None])[0]
    return bool(np.any(np.diff(potential) < 0))


def test_progress_rule_keeps_exactly_the_episodes_whose_potential_never_falls():
    data = load_dataset(FILE)
    keep = post_filter.keep_mask(data, max_progress_drop=0.0)
    assert 0 < keep.sum() < len(data)  # the shipped file has both kinds
    assert all(keep[i] != _falls(data, i) for i in range(len(data)))
    assert post_filter.keep_mask(data, max_progress_drop=1e9).all()


def test_family_rule_drops_the_episodes_longer_than_their_family_limit():
    data = load_dataset(FILE)
    lengths, families = data.episode_lengths(), episode_families(data)
    limits = {family: 6 for family in set(families)}
    keep = post_filter.keep_mask(data, family_limits=limits)
    np.testing.assert_array_equal(keep, lengths <= 6)
    assert post_filter.keep_mask(data, family_limits={}).all()  # unknown families pass


def test_cli_writes_the_kept_episodes_and_records_the_filter(tmp_path):
    out = tmp_path / "kept.h5"
    cmd = [sys.executable, str(SCRIPT), str(FILE), "--max-progress-drop", "0", "--out", str(out)]
    subprocess.run(cmd, check=True, capture_output=True, text=True)
    data, kept = load_dataset(FILE), load_dataset(out)
    assert len(kept) == int(post_filter.keep_mask(data, max_progress_drop=0.0).sum())
    assert kept.provenance["post_filter"]["max_progress_drop"] == 0.0
    assert kept.provenance["post_filter"]["of"] == len(data)
    bad = subprocess.run([*cmd[:3], "--out", str(out)], capture_output=True, text=True)
    assert bad.returncode != 0 and "give --max-progress-drop" in bad.stderr
