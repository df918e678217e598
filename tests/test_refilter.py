"""``imaginebench refilter`` on the shipped BabyAI rephrase file: the progress rule keeps exactly
the episodes whose imagined task potential never falls, the family rule drops exactly the
episodes longer than their family's limit, and the written file records the step, carries a
recomputed quality report and a manifest command that makes it again."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from imaginebench.cli import main
from imaginebench.data.format import load_dataset, save_dataset
from imaginebench.data.shipped import _regenerate_command, resolve_data_path
from imaginebench.envs.base import Task
from imaginebench.imagination.filters import FilterConfig, episode_families, within_task_cap
from imaginebench.imagination.refilter import keep_mask

FILE = resolve_data_path("shipped:babyai/imaginary_rephrase.h5")


@pytest.fixture(scope="module")
def real(tmp_path_factory):
    """A small real BabyAI file (training families, the expert at epsilon 0.2)."""
    from imaginebench.data.collect import collect
    from imaginebench.data.format import save_dataset

    path = tmp_path_factory.mktemp("real") / "babyai_real.h5"
    save_dataset(collect("babyai", "train", 40, seed=0, epsilon=0.2, progress=False)[0], path)
    return path


def _falls(data, i: int) -> bool:
    episode = data.episode(i)
    potential = Task.from_spec(episode.task_spec).progress(np.asarray(episode.states)[None])[0]
    return bool(np.any(np.diff(potential) < 0))


def test_progress_rule_keeps_exactly_the_episodes_whose_potential_never_falls():
    data = load_dataset(FILE)
    keep = keep_mask(data, max_progress_drop=0.0)
    assert 0 < keep.sum() < len(data)  # the shipped file has both kinds
    assert all(keep[i] != _falls(data, i) for i in range(len(data)))
    assert keep_mask(data, max_progress_drop=1e9).all()


def test_family_rule_drops_the_episodes_longer_than_their_family_limit():
    data = load_dataset(FILE)
    lengths, families = data.episode_lengths(), episode_families(data)
    limits = {family: 6 for family in set(families)}
    keep = keep_mask(data, family_limits=limits)
    np.testing.assert_array_equal(keep, lengths <= 6)
    assert keep_mask(data, family_limits={}).all()  # unknown families pass


def test_confidence_rule_keeps_the_episodes_trusted_at_every_transition(tmp_path, capsys):
    data = load_dataset(FILE)
    threshold = float(np.median(data.confidence["ensemble"]))
    keep = keep_mask(data, min_confidence=threshold)
    least = np.array([data.episode(i).confidence["ensemble"].min() for i in range(len(data))])
    assert 0 < keep.sum() < len(data)
    np.testing.assert_array_equal(keep, least >= threshold)
    out = tmp_path / "trusted.h5"
    shipped = "shipped:babyai/imaginary_rephrase.h5"  # FILE, named as the configs name it
    args = ["refilter", shipped, "--min-confidence", str(threshold), "--out", str(out)]
    assert main(args) == 0
    kept = load_dataset(out)
    assert len(kept) == keep.sum() and kept.confidence["ensemble"].min() >= threshold
    command = _regenerate_command(kept.provenance, "babyai", "x.h5")
    assert command.endswith(f"--min-confidence {threshold}")
    unscored = tmp_path / "unscored.h5"
    save_dataset(dataclasses.replace(kept, confidence={}), unscored)
    assert main(["refilter", str(unscored), "--min-confidence", "0.5", "--out",
                 str(tmp_path / "y.h5")]) == 2  # fmt: skip
    assert "does not store" in capsys.readouterr().err


def test_cli_writes_the_kept_episodes_their_quality_and_a_command_that_remakes_them(
    tmp_path, capsys, real
):
    out = tmp_path / "kept.h5"
    args = ["refilter", str(FILE), "--max-progress-drop", "0", "--out", str(out)]
    assert main(args) == 0
    data, kept = load_dataset(FILE), load_dataset(out)
    assert len(kept) == int(keep_mask(data, max_progress_drop=0.0).sum())
    assert f"kept {len(kept)} of {len(data)} episodes" in capsys.readouterr().out
    record = kept.provenance["post_filter"]
    assert record["max_progress_drop"] == 0.0 and record["of"] == len(data)
    report = json.loads(out.with_suffix(".quality.json").read_text())
    assert report["quality"]["rollouts"] == len(kept)
    assert report["provenance"]["post_filter"] == record
    command = _regenerate_command(kept.provenance, "babyai", "imaginary_rephrase.h5")
    out_path = "imaginebench/datasets/babyai/imaginary_rephrase.h5"
    assert command.endswith(
        f" && imaginebench refilter {out_path} --out {out_path} --overwrite --max-progress-drop 0.0"
    )
    assert main(args) == 2  # refuses to overwrite
    # in place, the family rule from the real data (the limits are recorded)
    assert main(["refilter", str(out), "--family-horizon", str(real), "--out", str(out),
                 "--overwrite"]) == 0  # fmt: skip
    again = load_dataset(out)
    limits = again.provenance["post_filter"]["family_horizon"]["limits"]
    families = episode_families(again)
    assert all(n <= limits.get(f, n) for f, n in zip(families, again.episode_lengths()))
    assert "--family-horizon" in _regenerate_command(again.provenance, "babyai", "x.h5")


@pytest.mark.parametrize(
    "args,message",
    [
        ([], "give erase_loops, max_progress_drop, family_horizon, min_confidence, max_per_task"),
        (["--max-per-task", "0"], "max_per_task must be >= 1"),
        (["--max-progress-drop", "-1"], "must be >= 0"),
        (["--min-confidence", "0"], "min_confidence must be in (0, 1]"),
    ],
)
def test_cli_rejects_a_missing_or_negative_step(tmp_path, capsys, args, message):
    assert main(["refilter", str(FILE), "--out", str(tmp_path / "x.h5"), *args]) == 2
    assert message in capsys.readouterr().err


def test_real_files_are_refused(tmp_path, capsys, real):
    args = ["refilter", str(real), "--max-progress-drop", "0", "--out", str(tmp_path / "x.h5")]
    assert main(args) == 2
    assert "real episodes" in capsys.readouterr().err


def test_the_regeneration_command_carries_instruction_guidance():
    """A file decoded with instruction guidance is regenerated with it; without, the command
    is what it was."""
    provenance = {
        "level": "rephrase",
        "rollouts_requested": 200,
        "seed": 0,
        "decoding": {"strategy": "greedy", "guidance": 4.0},
    }
    assert "--decoding.guidance 4.0 " in _regenerate_command(provenance, "halfcheetah", "x.h5")
    provenance["decoding"]["guidance"] = 1.0
    assert "guidance" not in _regenerate_command(provenance, "halfcheetah", "x.h5")


def test_task_cap_keeps_the_shortest_few_of_every_task(tmp_path):
    data = load_dataset(FILE)
    assert (
        main(["refilter", str(FILE), "--max-per-task", "2", "--out", str(tmp_path / "c.h5")]) == 0
    )
    capped = load_dataset(tmp_path / "c.h5")
    per_task = lambda d: [d.tasks[t] for t in d.episode_task]  # noqa: E731
    before, after = per_task(data), per_task(capped)
    assert max(after.count(t) for t in set(after)) == 2 < max(before.count(t) for t in before)
    assert set(after) == set(before)  # every task keeps a rollout
    lengths, kept_lengths = data.episode_lengths(), capped.episode_lengths()
    for task in set(before):  # the kept ones are the task's shortest
        mine = sorted(lengths[[i for i, t in enumerate(before) if t == task]])
        kept = sorted(kept_lengths[[i for i, t in enumerate(after) if t == task]])
        assert kept == mine[: len(kept)] and len(kept) == min(2, len(mine))
    # the shipped file's loops were erased (while imagining, or by an earlier refilter): the
    # command remakes that first, then the cap
    command = _regenerate_command(capped.provenance, "babyai", "x.h5")
    erased_at = max(command.find('"erase_loops": true'), command.find("--erase-loops"))
    assert 0 <= erased_at < command.index("--max-per-task 2")
    assert capped.provenance["post_filter"]["max_per_task"] == 2


def test_task_cap_breaks_ties_by_likelihood_then_order():
    keep = within_task_cap(["a", "a", "a", "b"], [3, 2, 2, 9], [0.0, -5.0, -1.0, -9.0], cap=1)
    assert keep.tolist() == [False, False, True, True]
    keep = within_task_cap(["a", "a"], [2, 2], [-1.0, -1.0], cap=1)
    assert keep.tolist() == [True, False]
    with pytest.raises(ValueError, match="max_per_task must be >= 1"):
        FilterConfig(max_per_task=0)
