"""Tests for the Meta-World importer of the original file layout
(imaginebench.data.importers.metaworld).

The original files are not available: episodes are simulated with our env and expert and
packed into the original padded layouts (KALM's ``.npy`` dict; ImagineBench's ``.h5`` with the
768-d instruction encoding after the 91-d state and no names, plus a companion).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import h5py
import numpy as np
import pytest

from imaginebench.cli import main as cli_main
from imaginebench.data.format import DatasetError, load_dataset
from imaginebench.data.importers.metaworld import import_metaworld, task_of_env_name
from imaginebench.envs.metaworld.env import MetaWorldEnv, episode_rewards
from imaginebench.envs.metaworld.layout import entity_slice
from imaginebench.envs.metaworld.tasks import MetaWorldTask
from imaginebench.experts import make_expert

pytestmark = pytest.mark.filterwarnings("ignore:Constant\\(s\\) may be too high")
T_PAD = 100
N_INSTR = 20


@dataclass
class Sim:
    name: str
    states: np.ndarray  # (L + 1, 91)
    actions: np.ndarray  # (L, 4)
    solved: bool


@pytest.fixture(scope="module")
def sims() -> list[Sim]:
    """Two expert episodes that succeed and one of random actions that does not."""
    env = MetaWorldEnv("train")
    out = []
    for seed, (name, expert) in enumerate(
        [("coffee-button", True), ("door-unlock", True), ("coffee-button", False)]
    ):
        env.reset(seed=seed, options={"task": MetaWorldTask(name)})
        policy = make_expert("metaworld", epsilon=0.0 if expert else 1.0, seed=seed)
        actions, terminated = [], False
        for _ in range(60 if expert else 15):
            actions.append(policy.act(env))
            _, _, terminated, _, _ = env.step(actions[-1])
            if terminated:
                break
        out.append(Sim(name, np.stack(env.trajectory), np.stack(actions), bool(terminated)))
    assert [s.solved for s in out] == [True, True, False]
    return out


def pack(sims: list[Sim], names: list[str], width: int = 91, distractor: bool = False) -> dict:
    """The original padded layout (KALM's ``meta_world.npy`` keys)."""
    n = len(sims)
    rng = np.random.default_rng(0)
    obs = np.zeros((n, T_PAD, width))
    nxt = np.zeros((n, T_PAD, width))
    actions = np.zeros((n, T_PAD, 4))
    rewards = np.zeros((n, T_PAD, 1))
    masks = np.zeros((n, T_PAD, 1))
    terminals = np.zeros((n, T_PAD, 1))
    for i, sim in enumerate(sims):
        length = len(sim.actions)
        states = sim.states.copy()
        if distractor and i == 0:  # the original's per-step distractor in an unused slot
            states[:, entity_slice("hammer")] = rng.uniform(0.0, 0.5, (length + 1, 7))
        obs[i, :length, :91] = states[:-1]
        nxt[i, :length, :91] = states[1:]
        if width > 91:  # the instruction encoding, repeated at every step
            obs[i, :length, 91:] = nxt[i, :length, 91:] = rng.uniform(-1, 1, width - 91)
        actions[i, :length] = sim.actions
        rewards[i, :length, 0] = rng.uniform(-1, 1, length)  # Meta-World v2's: not ours
        rewards[i, length - 1, 0] = 10.0 if sim.solved else 0.3
        masks[i, :length] = 1.0
        terminals[i, length - 1] = sim.solved
    instructions = np.array(
        [[f"{name} instruction {k}." for k in range(N_INSTR)] for name in names]
    )
    return {
        "observations": obs,
        "next_observations": nxt,
        "actions": actions,
        "rewards": rewards,
        "masks": masks,
        "terminals": terminals,
        "goals": np.stack([s.states[0, 4:7] for s in sims]),
        "is_successes": np.array([[s.solved] for s in sims], dtype=np.float64),
        "env_names": np.array(names),
        "instructions": instructions,
    }


def save_npy(path: Path, data: dict) -> Path:
    np.save(path, data, allow_pickle=True)
    return path


def save_h5(path: Path, data: dict, keys=("masks", "observations", "actions", "rewards")) -> Path:
    with h5py.File(path, "w") as f:
        for key in keys:
            value = data[key]
            f.create_dataset(key, data=value.astype("S") if value.dtype.kind == "U" else value)
    return path


def test_env_names_map_to_our_tasks_and_levels():
    assert task_of_env_name("door-open") == (MetaWorldTask("door-open"), False)
    assert task_of_env_name("rep-door-open-v2-goal-observable") == (
        MetaWorldTask("door-open"),
        True,
    )
    assert task_of_env_name("Locked-Door-Open-v2")[0] == MetaWorldTask("locked-door-open")
    for bad in ("door-open-please", "rep-hammer", "drawer-open"):
        with pytest.raises(ValueError, match="unknown Meta-World env name"):
            task_of_env_name(bad)


@pytest.mark.parametrize("width", [91, 91 + 768])
def test_kalm_npy_is_rejudged_and_reported(sims, tmp_path, width):
    names = [s.name for s in sims]
    data = pack(sims, names, width=width, distractor=True)
    data["is_successes"][2] = 1.0  # the file claims the random episode succeeded
    dataset, report = import_metaworld(save_npy(tmp_path / "meta_world.npy", data))
    assert (report.episodes, report.imported) == (3, 3)
    assert (report.original_successes, report.our_successes, report.agreements) == (3, 2, 2)
    assert report.original_marking == "is_successes"
    assert report.per_task["coffee-button"] == {"episodes": 2, "original": 2, "ours": 1}
    assert report.cleared_distractors == 1
    assert dataset.provenance["import_report"]["our_successes"] == 2
    assert list(dataset.episode_success) == [True, True, False]
    for i, sim in enumerate(sims):
        episode = dataset.episode(i)
        np.testing.assert_allclose(episode.states, sim.states, atol=1e-6)  # distractor cleared
        np.testing.assert_allclose(episode.actions, sim.actions, atol=1e-6)
        task = MetaWorldTask(sim.name)
        np.testing.assert_allclose(
            episode.rewards, episode_rewards(task, sim.states, sim.actions), atol=1e-5
        )
        assert episode.terminated == sim.solved and episode.level == "train"
        assert episode.instruction == f"{sim.name} instruction 0."
    kept, _ = import_metaworld(tmp_path / "meta_world.npy", keep_distractor=True)
    assert kept.episode(0).states[:, entity_slice("hammer")].any()


def test_imaginebench_h5_with_encoding_and_companion(sims, tmp_path):
    names = [f"rep-{s.name}" for s in sims]
    data = pack(sims, names, width=91 + 768)
    path = save_h5(tmp_path / "metaworld_imaginary_rephrase.h5", data)
    with pytest.raises(DatasetError, match="env_names and instructions not in the file.*companion"):
        import_metaworld(path)
    companion = save_npy(
        tmp_path / "names.npy",
        {"env_names": data["env_names"], "instructions": data["instructions"]},
    )
    dataset, report = import_metaworld(
        path, companion=companion, source="imaginary", instruction="cycle"
    )
    assert report.original_marking == "reward 10 at the last step"
    # without next_observations the state an episode's last action reaches (for a successful
    # episode: the state that succeeds) is unknown, so no success can be confirmed
    assert report.dropped_final_transitions == 3
    assert (report.original_successes, report.our_successes) == (2, 0)
    assert "success on the last step cannot be judged" in report.summary()
    assert {dataset.episode(i).level for i in range(3)} == {"rephrase"}
    for i, sim in enumerate(sims):
        episode = dataset.episode(i)
        np.testing.assert_allclose(episode.states, sim.states[:-1], atol=1e-6)  # state only
        assert episode.instruction == f"rep-{sim.name} instruction {i % N_INSTR}."
    with pytest.raises(DatasetError, match="not a task of level 'easy'"):
        import_metaworld(path, companion=companion, level="easy")


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda d: d.update(observations=d["observations"][..., :90]), "must be \\(N, T, 91\\)"),
        (lambda d: d.update(actions=d["actions"][..., :3]), "'actions' must have shape"),
        (lambda d: d["masks"].__setitem__((0, 0, 0), 0.0), "contiguous prefix"),
        (lambda d: d.pop("rewards"), "missing required key"),
        (lambda d: d.update(env_names=np.array(["reach", "push"])), "'env_names' has 2"),
        (lambda d: d["env_names"].__setitem__(1, "drawer-open"), "episode 1: unknown"),
        (lambda d: d.update(is_successes=np.ones(5)), "one flag per episode"),
    ],
)
def test_bad_files_are_rejected_with_clear_errors(sims, tmp_path, change, message):
    data = pack(sims, [s.name for s in sims])
    data["env_names"] = data["env_names"].astype("<U20")
    change(data)
    with pytest.raises(DatasetError, match=message):
        import_metaworld(save_npy(tmp_path / "bad.npy", data))


def test_unreadable_and_unsafe_files_are_refused(tmp_path):
    with pytest.raises(FileNotFoundError):
        import_metaworld(tmp_path / "missing.npy")
    (tmp_path / "junk.h5").write_bytes(b"not hdf5")
    with pytest.raises(DatasetError, match="not a readable HDF5"):
        import_metaworld(tmp_path / "junk.h5")
    with pytest.raises(DatasetError, match="unknown extension"):
        import_metaworld(save_npy(tmp_path / "x.npy", {}).rename(tmp_path / "x.pkl"))

    class Payload:
        def __reduce__(self):
            return (os.system, ("echo pwned",))

    np.save(tmp_path / "evil.npy", {"observations": Payload()}, allow_pickle=True)
    with pytest.raises(DatasetError, match="refused"):
        import_metaworld(tmp_path / "evil.npy")


def test_cli_imports_and_prints_the_report(sims, tmp_path, capsys):
    path = save_npy(tmp_path / "meta_world.npy", pack(sims, [s.name for s in sims]))
    out = tmp_path / "imported.h5"
    args = ["import-kalm", str(path), "--domain", "metaworld", "--out", str(out)]
    assert cli_main(args) == 0
    printed = capsys.readouterr().out
    assert "successful: 2 by the file's marking (is_successes), 2 by our success functions" in (
        printed
    )
    dataset = load_dataset(out)
    assert dataset.domain == "metaworld" and len(dataset) == 3
