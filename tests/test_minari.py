"""Minari interchange: ``imaginebench export-minari`` / ``import-minari`` round trips every array
and string, ``minari.load_dataset`` reads the export and recovers the environment of its level,
existing datasets are not replaced unasked, foreign datasets are refused."""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import minari  # in the test extra: CI runs this module, it is never skipped
import numpy as np
import pytest

from imaginebench.cli import main
from imaginebench.data.collect import collect
from imaginebench.data.format import (
    DatasetError,
    RolloutDataset,
    load_dataset,
    save_dataset,
)
from imaginebench.data.minari_io import export_minari, import_minari
from imaginebench.data.shipped import SHIPPED_ROOT
from imaginebench.envs import make

ARRAYS = (
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


@pytest.fixture(autouse=True)
def _minari_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Minari never writes to ~/.minari here, even through its defaults."""
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path / "minari-default"))


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Small real CLEVR (easy) and HalfCheetah (hard) files, and a mixed one: real + imagined
    CLEVR of two levels whose string tables are not in first-use order and hold an unused
    (non-ASCII) entry, with a confidence per transition."""
    out = tmp_path_factory.mktemp("files")
    clevr, _ = collect("clevr", "easy", 4, seed=3, paraphrases=2, progress=False)
    cheetah, _ = collect("halfcheetah", "hard", 2, seed=1, progress=False)
    imagined = load_dataset(SHIPPED_ROOT / "clevr" / "imaginary_hard.h5")
    mixed = RolloutDataset.concatenate([clevr.select([5, 0, 3]), imagined.select([7, 2, 11])])
    states = np.array(mixed.states)
    states[-1, 0] = 1.5  # an imagined ball beyond the wall (x in [-0.6, 0.6]), as drifting
    mixed = dataclasses.replace(mixed, states=states)  # rollouts of the first recipe had
    confidence = np.random.default_rng(0).uniform(size=mixed.num_transitions)
    mixed = mixed.with_confidence("likelihood", confidence.astype(np.float32))
    mixed.instructions.append("an instruction no episode uses — café ✓")
    assert mixed.instructions[0] != mixed.instructions[int(mixed.episode_instruction[0])]
    paths = {}
    for name, ds in (("clevr", clevr), ("halfcheetah", cheetah), ("mixed", mixed)):
        paths[name] = save_dataset(ds, out / f"{name}.h5")
    return paths


def export(file: Path, root: Path, *extra: str) -> int:
    return main(["export-minari", str(file), "--out", str(root), *extra])


def assert_same(a: RolloutDataset, b: RolloutDataset) -> None:
    for name in ARRAYS:
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
        np.testing.assert_array_equal(values, b.confidence[name], err_msg=name)
    for i in range(len(a)):
        ea, eb = a.episode(i), b.episode(i)
        for name in ("instruction", "task_spec", "level", "source", "success"):
            assert getattr(ea, name) == getattr(eb, name), (i, name)


@pytest.mark.parametrize(
    "name, dataset_id, extra",
    [
        ("clevr", "imaginebench/clevr-easy-real-v0", []),
        ("halfcheetah", "imaginebench/halfcheetah-hard-real-v0", []),
        ("mixed", "imaginebench/clevr-mixed-mixed-v0", ["--env-level", "hard"]),
    ],
)
def test_round_trip_preserves_every_array_and_string(
    files: dict[str, Path], tmp_path: Path, capsys, name: str, dataset_id: str, extra: list[str]
) -> None:
    root = tmp_path / "minari"
    assert export(files[name], root, *extra) == 0
    assert f"wrote Minari dataset {dataset_id}" in capsys.readouterr().out
    assert (root / dataset_id / "data" / "metadata.json").is_file()
    back = tmp_path / "back.h5"
    args = ["import-minari", dataset_id, "--root", str(root), "--out", str(back)]
    assert main(args) == 0
    assert_same(load_dataset(files[name]), load_dataset(back))
    # a dataset folder works as well as an id, and the Python API gives the same
    assert_same(load_dataset(files[name]), import_minari(root / dataset_id))
    assert not list(root.glob(".*")), "no staging folder is left behind"
    # the dataset's observation space holds its states: the environment's, unless (imagined)
    # states leave it
    md = minari.MinariDataset(root / dataset_id / "data")
    states = load_dataset(files[name]).states
    outside = md.storage.metadata["imaginebench"]["states_outside_env_space"]
    assert all(md.observation_space.contains(row) for row in states)
    assert (outside > 0) == (name == "mixed")
    env_space = make(load_dataset(files[name]).domain).observation_space
    assert (md.observation_space == env_space) == (name != "mixed")


def test_mixed_levels_need_an_env_level(files: dict[str, Path], tmp_path: Path, capsys) -> None:
    assert export(files["mixed"], tmp_path / "minari") == 2
    err = capsys.readouterr().err
    assert "--env-level" in err and "easy" in err and "hard" in err
    assert not (tmp_path / "minari" / "imaginebench").exists()


@pytest.mark.parametrize("name, level", [("clevr", "easy"), ("halfcheetah", "hard")])
def test_minari_loads_the_export_and_recovers_the_environment(
    files: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, level: str
) -> None:
    root = tmp_path / "minari"
    assert export(files[name], root) == 0
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(root))
    dataset_id = f"imaginebench/{name}-{level}-real-v0"
    assert dataset_id in minari.list_local_datasets()
    md = minari.load_dataset(dataset_id)
    ds = load_dataset(files[name])
    assert md.total_episodes == len(ds) and md.total_steps == ds.num_transitions
    metas = list(md.storage.get_episode_metadata(md.episode_indices))
    for i, (ep, meta) in enumerate(zip(md.iterate_episodes(), metas, strict=True)):
        ours = ds.episode(i)
        np.testing.assert_array_equal(ep.observations, ours.states)
        np.testing.assert_array_equal(ep.actions, ours.actions)
        np.testing.assert_array_equal(ep.rewards, ours.rewards)
        assert ep.terminations[-1] == ours.terminated and ep.truncations[-1] == ours.truncated
        assert meta["instruction"] == ours.instruction and meta["task"] == ours.task_spec
        assert (meta["level"], meta["source"]) == (ours.level, ours.source)
        assert bool(meta["success"]) == ours.success
        json.loads(meta["task"])
    ours_meta = md.storage.metadata["imaginebench"]
    assert ours_meta["provenance"] == ds.provenance
    assert ours_meta["domain"] == name and ours_meta["action_spec"] == ds.action_spec

    assert md.env_spec.kwargs == {"level": level}
    for env in (md.recover_environment(), md.recover_environment(eval_env=True)):
        assert env.unwrapped.level == level
        assert env.observation_space == md.observation_space
        assert env.action_space == md.action_space
        obs, info = env.reset(seed=0)
        assert obs.shape == (ds.state_dim,) and info["level"] == level
        obs, reward, terminated, truncated, info = env.step(env.action_space.sample())
        assert obs.shape == (ds.state_dim,) and np.isfinite(reward)
        env.close()


def test_existing_dataset_is_replaced_only_with_overwrite(
    files: dict[str, Path], tmp_path: Path, capsys
) -> None:
    root = tmp_path / "minari"
    dataset_id = "imaginebench/shared-v0"
    assert export(files["clevr"], root, "--dataset-id", dataset_id) == 0
    data = root / dataset_id / "data"
    before = {p.name: p.read_bytes() for p in data.iterdir()}
    capsys.readouterr()
    assert export(files["halfcheetah"], root, "--dataset-id", dataset_id) == 2
    err = capsys.readouterr().err
    assert "already exists" in err and "--overwrite" in err
    assert {p.name: p.read_bytes() for p in data.iterdir()} == before
    assert export(files["halfcheetah"], root, "--dataset-id", dataset_id, "--overwrite") == 0
    assert_same(load_dataset(files["halfcheetah"]), import_minari(dataset_id, root))
    assert sorted(p.name for p in (root / "imaginebench").iterdir()) == [
        "namespace_metadata.json",
        "shared-v0",
    ]  # the replaced dataset is gone, no staging folder is left
    # --overwrite replaces Minari datasets only
    (root / "imaginebench" / "notes-v0").mkdir()
    assert export(files["clevr"], root, "--dataset-id", "imaginebench/notes-v0", "--overwrite") == 2
    assert "not a Minari dataset" in capsys.readouterr().err
    # and the output file of an import is protected the same way
    out = tmp_path / "back.h5"
    out.write_bytes(b"keep me")
    assert main(["import-minari", dataset_id, "--root", str(root), "--out", str(out)]) == 2
    assert out.read_bytes() == b"keep me" and "--overwrite" in capsys.readouterr().err


def test_foreign_dataset_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys):
    import gymnasium as gym
    from minari.data_collector import EpisodeBuffer

    root = tmp_path / "minari"
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(root))
    buffers = [
        EpisodeBuffer(
            observations=np.zeros((4, 3), np.float32),
            actions=np.zeros(3, np.int64),
            rewards=np.ones(3, np.float32),
            terminations=np.array([False, False, True]),
            truncations=np.zeros(3, bool),
        )
    ]
    with pytest.warns(UserWarning):  # Minari asks for author, permalink, ...
        minari.create_dataset_from_buffers(
            "someone/cartpole-expert-v0",
            buffers,
            observation_space=gym.spaces.Box(-1, 1, (3,), np.float32),
            action_space=gym.spaces.Discrete(2),
        )
    out = tmp_path / "x.h5"
    assert main(["import-minari", "someone/cartpole-expert-v0", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "someone/cartpole-expert-v0: not exported by ImagineBench" in err
    for what in ("'imaginebench' entry", "instruction", "task", "export-minari"):
        assert what in err, what
    assert not out.exists()
    with pytest.raises(DatasetError, match="not exported by ImagineBench"):
        import_minari("someone/cartpole-expert-v0", root)
    assert main(["import-minari", "nobody/nothing-v0", "--out", str(out)]) == 2
    assert "no Minari dataset with this id" in capsys.readouterr().err


def test_tampered_episode_metadata_is_named(files: dict[str, Path], tmp_path: Path) -> None:
    import h5py

    root = tmp_path / "minari"
    target = export_minari(load_dataset(files["clevr"]), root, source_name="clevr.h5")
    with h5py.File(target / "data" / "main_data.hdf5", "r+") as f:
        f["episode_2"].attrs["instruction"] = "an instruction of nowhere"
        del f["episode_5"].attrs["level"]
    with pytest.raises(DatasetError, match="episode 2: its instruction 'an instruction of"):
        import_minari(target)
    with h5py.File(target / "data" / "main_data.hdf5", "r+") as f:
        f["episode_2"].attrs["instruction"] = load_dataset(files["clevr"]).episode(2).instruction
    with pytest.raises(DatasetError, match="episode 5: episode metadata lacks level"):
        import_minari(target)


def test_without_minari_the_commands_say_how_to_install_it(
    files: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    monkeypatch.setitem(sys.modules, "minari", None)  # `import minari` raises ImportError
    assert export(files["clevr"], tmp_path / "minari") == 2
    assert "pip install 'imaginebench[minari]'" in capsys.readouterr().err
    out = tmp_path / "x.h5"
    assert main(["import-minari", "a/b-v0", "--root", str(tmp_path), "--out", str(out)]) == 2
    assert "pip install 'imaginebench[minari]'" in capsys.readouterr().err
    assert not (tmp_path / "minari").exists() and not out.exists()


def test_an_export_that_does_not_read_back_identically_leaves_nothing(
    files: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from imaginebench.data import minari_io

    root = tmp_path / "minari"
    assert export(files["clevr"], root, "--dataset-id", "imaginebench/kept-v0") == 0
    before = (root / "imaginebench/kept-v0/data/main_data.hdf5").read_bytes()
    monkeypatch.setattr(minari_io, "_differences", lambda a, b: ["states"])
    with pytest.raises(DatasetError, match="does not read back identically .states differ"):
        export_minari(load_dataset(files["halfcheetah"]), root, dataset_id="imaginebench/new-v0")
    with pytest.raises(DatasetError, match="does not read back identically"):
        export_minari(
            load_dataset(files["halfcheetah"]),
            root,
            dataset_id="imaginebench/kept-v0",
            overwrite=True,
        )
    assert (root / "imaginebench/kept-v0/data/main_data.hdf5").read_bytes() == before
    assert sorted(p.name for p in root.iterdir()) == ["imaginebench"]
    assert sorted(p.name for p in (root / "imaginebench").iterdir()) == [
        "kept-v0",
        "namespace_metadata.json",
    ]
