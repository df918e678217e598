"""Import of the original LIBERO ``.npy`` files: a round trip through a file written in the
original layout, tasks found from the sentences, success and rewards judged again, bad files
refused (no simulator needed)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from test_libero_tasks import HOME, history, in_basket

from imaginebench.cli import main as cli_main
from imaginebench.data.format import DatasetError, load_dataset
from imaginebench.data.importers.libero import import_libero
from imaginebench.envs.base import Task
from imaginebench.envs.libero.tasks import LiberoTask

PLACE = "Employ the gripper to seize the cream_cheese and transfer the cream_cheese to the basket."
REACH = "Employ the gripper to get close to the alphabet_soup."


def episodes() -> list[tuple[np.ndarray, list[str]]]:
    """Two episodes: the cream cheese carried into the basket (a success), and the hand moving
    towards the soup without reaching it (a failure)."""
    cheese = np.array(HOME["cream_cheese"])
    placed = history(
        {"eef": cheese + [0, 0, 0.01]},
        {"eef": cheese + [0, 0, 0.1], "cream_cheese": cheese + [0, 0, 0.09]},
        {"eef": [0.0, 0.28, 0.15], "cream_cheese": [0.0, 0.28, 0.14]},
        {"eef": [0.0, 0.28, 0.15], "cream_cheese": in_basket(0.03)},
    )
    soup = np.array(HOME["alphabet_soup"])
    missed = history({}, {"eef": soup + [0, 0, 0.2]}, {"eef": soup + [0, 0, 0.1]})
    return [(placed, [PLACE] * 3), (missed, [REACH] * 10)]


def original_file(path: Path, with_encoding: bool = True, **override: Any) -> Path:
    """The original layout: padded (N, T, ...) arrays, observations with a 768-d encoding."""
    eps = episodes()
    t = max(len(s) for s, _ in eps) - 1
    width = 44 + (768 if with_encoding else 0)
    obs, nxt = np.zeros((len(eps), t, width)), np.zeros((len(eps), t, width))
    masks = np.zeros((len(eps), t, 1))
    for i, (states, _) in enumerate(eps):
        n = len(states) - 1
        obs[i, :n, :44], nxt[i, :n, :44], masks[i, :n] = states[:-1], states[1:], 1.0
        obs[i, :n, 44:] = 0.5  # an encoding, never read
    data = {
        "observations": obs.astype(np.float32),
        "next_observations": nxt.astype(np.float32),
        "actions": np.full((len(eps), t, 7), 0.25, dtype=np.float32),
        "rewards": np.full((len(eps), t, 1), 123.0, dtype=np.float32),  # never read
        "masks": masks,
        "terminals": np.zeros((len(eps), t, 1)),
        "instructions": [sentences for _, sentences in eps],
    }
    data.update(override)
    np.save(path, data, allow_pickle=True)
    return path


def test_round_trip_judges_success_and_rewards_again(tmp_path: Path) -> None:
    src = original_file(tmp_path / "libero_imaginary_easy.npy")
    data = import_libero(src, level="easy", source="imaginary")
    assert data.domain == "libero" and len(data) == 2
    placed, missed = data.episode(0), data.episode(1)
    assert Task.from_spec(placed.task_spec) == LiberoTask("pick-and-place-cream_cheese")
    assert Task.from_spec(missed.task_spec) == LiberoTask("reach-alphabet_soup")
    assert placed.success and placed.terminated and not missed.success and missed.truncated
    np.testing.assert_allclose(placed.states, episodes()[0][0], atol=1e-6)
    np.testing.assert_allclose(
        placed.rewards, LiberoTask("pick-and-place-cream_cheese").rewards(placed.states)
    )
    assert placed.instruction == PLACE and placed.source == "imaginary" and placed.level == "easy"
    # through the command line, into a dataset file
    out = tmp_path / "out.h5"
    args = ["import-libero", str(src), "--out", str(out), "--level", "easy"]
    assert cli_main([*args, "--instruction", "all"]) == 0
    assert len(load_dataset(out)) == 2  # one distinct sentence per episode


def test_without_next_observations_the_last_transition_is_dropped(tmp_path: Path) -> None:
    src = original_file(tmp_path / "f.npy", with_encoding=False)
    data = np.load(src, allow_pickle=True).item()
    del data["next_observations"]
    np.save(src, data, allow_pickle=True)
    imported = import_libero(src, level="easy")
    assert len(imported.episode(0).actions) == 2  # 3 transitions in the file, the last dropped
    assert imported.provenance["import_skipped"]["dropped_final_transition"] == 2


def test_sentences_must_name_a_task_of_the_level(tmp_path: Path) -> None:
    src = original_file(tmp_path / "f.npy")
    with pytest.raises(
        DatasetError, match="'pick-and-place-cream_cheese', not a task of level 'train'"
    ):
        import_libero(src, level="train")
    bad = original_file(tmp_path / "g.npy", instructions=[["Pick up the milk."], [REACH]])
    with pytest.raises(DatasetError, match="'Pick up the milk.' is not a LIBERO instruction"):
        import_libero(bad, level="easy")
    mixed = original_file(tmp_path / "h.npy", instructions=[[PLACE, REACH], [REACH]])
    with pytest.raises(DatasetError, match="ask for different tasks"):
        import_libero(mixed, level="easy")


def test_wrong_shapes_and_actions_are_refused(tmp_path: Path) -> None:
    wide = original_file(tmp_path / "a.npy", actions=np.zeros((2, 3, 4)))
    with pytest.raises(DatasetError, match=r"'actions' must have shape \(N, T, 7\)"):
        import_libero(wide, level="easy")
    big = original_file(tmp_path / "b.npy", actions=np.full((2, 3, 7), 1.5))
    with pytest.raises(DatasetError, match=r"must lie in \[-1, 1\]"):
        import_libero(big, level="easy")
    narrow = original_file(tmp_path / "c.npy", observations=np.zeros((2, 3, 43)))
    with pytest.raises(DatasetError, match="'observations' must be"):
        import_libero(narrow, level="easy")
    with pytest.raises(FileNotFoundError):
        import_libero(tmp_path / "missing.npy")


class _MakeDir:
    """Unpickling this calls ``os.mkdir(marker)``: a stand-in for any code hidden in a file."""

    def __init__(self, marker: Path) -> None:
        self.marker = str(marker)

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        return (os.mkdir, (self.marker,))


def test_a_file_with_code_in_its_pickle_is_refused_without_running_it(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    evil = original_file(tmp_path / "evil.npy", payload=_MakeDir(marker))
    with pytest.raises(DatasetError, match=r"evil\.npy: refused .*posix\.mkdir"):
        import_libero(evil, level="easy")
    assert not marker.exists()
    np.load(evil, allow_pickle=True)  # the file is really hostile: numpy's loader runs it
    assert marker.is_dir()
