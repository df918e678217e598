"""Real-data collection: deterministic per seed, paraphrase copies, the CLI."""

import json
import os

import numpy as np
import pytest

from imaginebench.cli import main
from imaginebench.data import collect as collect_module
from imaginebench.data.collect import collect
from imaginebench.data.format import load_dataset
from imaginebench.envs.base import Task


def test_collection_is_deterministic_and_successful():
    a, stats = collect("clevr", "train", 12, seed=5, progress=False)
    b, _ = collect("clevr", "train", 12, seed=5, progress=False)
    c, _ = collect("clevr", "train", 12, seed=6, progress=False)
    for field in ("states", "actions", "rewards", "episode_offsets"):
        np.testing.assert_array_equal(getattr(a, field), getattr(b, field))
    assert a.instructions == b.instructions and a.tasks == b.tasks
    assert not np.array_equal(a.states[:10], c.states[:10])
    assert stats.episodes == 12 and stats.success_rate == 1.0 and stats.episodes_per_second > 0
    assert a.episode_success.all() and (a.episode_source == 0).all()
    # the provenance says how to collect the same again
    assert a.provenance["seed"] == 5 and a.provenance["epsilon"] == 0.0
    # rewards are the env's: the final transition of a successful episode carries the bonus
    last = a.episode_offsets[1:] - 1
    assert (a.rewards[last] > 5).all() and a.terminals[last].all()


def test_paraphrase_copies_share_the_rollout():
    ds, stats = collect("clevr", "train", 6, seed=0, paraphrases=4, progress=False)
    assert len(ds) == 24 and stats.episodes == 6
    for group in range(6):
        copies = [ds.episode(4 * group + k) for k in range(4)]
        wordings = {e.instruction for e in copies}
        assert len(wordings) == 4
        task = Task.from_spec(copies[0].task_spec)
        assert wordings <= set(task.instructions("train"))
        for e in copies[1:]:
            np.testing.assert_array_equal(e.states, copies[0].states)
            np.testing.assert_array_equal(e.actions, copies[0].actions)


def test_bad_arguments():
    with pytest.raises(ValueError, match="unknown level"):
        collect("clevr", "medium", 2, seed=0, progress=False)
    with pytest.raises(ValueError, match="unknown domain"):
        collect("atari", "train", 2, seed=0, progress=False)
    with pytest.raises(ValueError, match="episodes"):
        collect("clevr", "train", 0, seed=0, progress=False)
    with pytest.raises(ValueError, match="workers must be >= 1"):
        collect("clevr", "train", 2, seed=0, progress=False, workers=0)


@pytest.mark.slow
def test_worker_processes_give_the_same_data_whatever_their_number():
    """Each episode has its own seeded expert: two or three workers collect the same data (the
    CLEVR expert breaks ties at random, so a chunk-seeded expert would not); every episode comes
    back in order, with its paraphrase copies."""
    a, stats = collect(
        "clevr", "train", 5, seed=2, epsilon=0.2, paraphrases=2, progress=False, workers=2
    )
    b, _ = collect(
        "clevr", "train", 5, seed=2, epsilon=0.2, paraphrases=2, progress=False, workers=3
    )
    for field in ("states", "actions", "rewards", "episode_offsets"):
        np.testing.assert_array_equal(getattr(a, field), getattr(b, field))
    assert a.instructions == b.instructions and stats.episodes == 5 and len(a) == 10
    assert a.provenance["workers"] == 2
    serial, _ = collect("clevr", "train", 5, seed=2, paraphrases=2, progress=False)
    assert serial.instructions == a.instructions  # the same plans and wordings


@pytest.mark.slow
def test_cli_collect_info_and_overwrite_protection(tmp_path, capsys):
    out = tmp_path / "real.h5"
    args = [
        "collect",
        "--level",
        "hard",
        "--episodes",
        "3",
        "--seed",
        "1",
        "--out",
        str(out),
        "--quiet",
    ]
    assert main(args) == 0
    ds = load_dataset(out)
    assert len(ds) == 3 and (ds.episode_level == 3).all()
    assert json.loads(ds.tasks[0])["family"] in {"all_of", "sequential", "line", "gather"}
    assert ds.provenance["seed"] == 1 and "episodes/s" in capsys.readouterr().out
    before = out.read_bytes()
    assert main(args) == 2  # refuses to overwrite
    assert out.read_bytes() == before
    assert main(["info", str(out)]) == 0
    assert "episodes: 3" in capsys.readouterr().out
    assert main(["info", str(tmp_path / "missing.h5")]) == 2


def _unwritable_destinations(tmp_path):
    """``(--out, extra flags, expected error)`` that must fail before anything is collected."""
    folder = tmp_path / "a_folder"
    folder.mkdir()
    a_file = tmp_path / "a_file.txt"
    a_file.write_text("x")
    cases = [
        (folder, ["--overwrite"], "is a directory"),
        (a_file / "real.h5", [], "is not a directory"),
    ]
    if os.geteuid() != 0:  # root writes into read-only folders anyway
        read_only = tmp_path / "read_only"
        read_only.mkdir(mode=0o555)
        cases.append((read_only / "real.h5", [], "cannot write"))
    return cases


def test_cli_collect_checks_the_destination_before_collecting(tmp_path, capsys, monkeypatch):
    def must_not_run(*args, **kwargs):
        raise AssertionError("collected before checking the destination")

    monkeypatch.setattr(collect_module, "collect", must_not_run)
    for out, flags, problem in _unwritable_destinations(tmp_path):
        assert main(["collect", "--episodes", "2", "--out", str(out), "--quiet", *flags]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and str(out) in err and problem in err, err


def test_evaluation_set_never_replays_a_training_start():
    from imaginebench.envs.clevr.suite import ClevrTaskSuite

    data, _ = collect("clevr", "train", 30, seed=0, progress=False)
    starts = {tuple(np.round(data.episode(i).states[0], 5)) for i in range(len(data))}
    for seed in (0, 1):
        evaluation = ClevrTaskSuite().episodes("train", 30, seed=seed)
        assert not starts & {tuple(np.round(e.initial_state, 5)) for e in evaluation}
