"""Tests for the KALM / ImagineBench CLEVR importer (imaginebench.data.importers.kalm).

The original files are rebuilt synthetically: real episodes are simulated with ``ClevrEnv`` and
``ClevrExpert`` and then packed into the original padded layouts.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import h5py
import numpy as np
import pytest

from imaginebench.cli import main as cli_main
from imaginebench.data.format import DatasetError, load_dataset, save_dataset
from imaginebench.data.importers.kalm import SkippedGoal, import_kalm_clevr, kalm_goal_to_task
from imaginebench.data.safe_npy import load_npy
from imaginebench.envs.clevr.env import ClevrEnv
from imaginebench.envs.clevr.tasks import AllOf, Gather, Line, Push, Relation
from imaginebench.experts.clevr import ClevrExpert

T_PAD = 50
N_PARA = 54
EMBED = 768
STILL = 4


# ------------------------------------------------------------------------------------ simulation


@dataclass
class Sim:
    task: Any
    states: np.ndarray  # (L + 1, 10)
    actions: np.ndarray  # (L,)
    rewards: np.ndarray  # (L,)
    terminated: bool

    @property
    def length(self) -> int:
        return len(self.actions)


def simulate(level: str, tasks: list, max_steps: int = 50) -> list[Sim]:
    env = ClevrEnv(level, max_episode_steps=max_steps)
    expert = ClevrExpert(seed=0)
    out = []
    for seed, task in enumerate(tasks):
        state, _ = env.reset(seed=seed, options={"task": task})
        states, actions, rewards = [state], [], []
        term = trunc = False
        while not (term or trunc):
            action = expert.act(env)
            state, reward, term, trunc, _ = env.step(action)
            states.append(state)
            actions.append(action)
            rewards.append(reward)
        out.append(
            Sim(
                task,
                np.asarray(states, np.float32),
                np.asarray(actions, np.int64),
                np.asarray(rewards, np.float32),
                bool(term),
            )
        )
    return out


@pytest.fixture(scope="module")
def relation_sims() -> list[Sim]:
    tasks = [
        Relation(0, 1, 0),
        Relation(2, 3, 1),
        Relation(4, 0, 2),
        Relation(1, 2, 3),
        Relation(3, 4, 0),
        Relation(0, 2, 1),
    ]
    sims = simulate("train", tasks)
    assert all(s.terminated for s in sims)
    assert any(s.length == 1 for s in sims) and sum(s.length >= 2 for s in sims) >= 3
    return sims


@pytest.fixture(scope="module")
def push_sims() -> list[Sim]:
    sims = simulate("easy", [Push(0, 0), Push(2, 1), Push(4, 2)])
    assert all(s.terminated for s in sims)
    return sims


@pytest.fixture(scope="module")
def hard_sims() -> list[Sim]:
    solved = simulate("hard", [AllOf([(0, 1, 0), (2, 3, 1)]), Gather("green")])
    assert all(s.terminated for s in solved)
    short = simulate(
        "hard",
        [
            AllOf([(0, 1, 0), (2, 3, 1), (4, 0, 3)]),
            Line(("red", "blue", "green", "purple", "cyan")),
        ],
        max_steps=4,
    )
    return solved + short


# ------------------------------------------------------------------------------------ goal vectors


def tau_goal(rel: Relation) -> np.ndarray:
    g = np.zeros(6, np.float32)
    g[rel.moved], g[rel.anchor], g[5] = 1, 2, rel.direction
    return g


def easy_goal(ball: int, direction: int) -> np.ndarray:
    g = np.zeros(6, np.float32)
    g[ball], g[5] = 1, direction
    return g


def hard_goal(indicator: int, relations: tuple = ()) -> np.ndarray:
    g = np.zeros(24, np.float32)
    g[5] = indicator
    for j, rel in enumerate(relations):
        g[6 * (j + 1) : 6 * (j + 2)] = tau_goal(rel)
    return g


def goal_for(task: Any) -> np.ndarray:
    if isinstance(task, Relation):
        return tau_goal(task)
    if isinstance(task, Push):
        return easy_goal(task.ball, task.direction)
    if isinstance(task, AllOf):
        return hard_goal(len(task.relations) - 2, task.relations)
    if isinstance(task, Line):
        return hard_goal(2)
    if isinstance(task, Gather):
        return hard_goal(3)
    raise AssertionError(task)


def paraphrases(i: int) -> list[str]:
    return [f"episode {i} wording {k}" for k in range(N_PARA)]


# ------------------------------------------------------------------------------------ packing


def pack(
    sims: list[Sim],
    goals: list[np.ndarray] | None = None,
    *,
    final_state: bool = True,
    seed: int = 0,
) -> dict[str, np.ndarray]:
    """The original padded arrays.  ``final_state=False`` gives the h5 view: ``L`` observations
    per episode (the state after the last action is not stored)."""
    rng = np.random.default_rng(seed)
    n = len(sims)
    goals = goals if goals is not None else [goal_for(s.task) for s in sims]
    g = len(goals[0])
    d = {
        "observations": np.zeros((n, T_PAD, 10), np.float32),
        "next_observations": np.zeros((n, T_PAD, 10), np.float32),
        "actions": np.zeros((n, T_PAD), np.int64),
        "rewards": np.zeros((n, T_PAD, 1), np.float32),
        "terminals": np.zeros((n, T_PAD, 1), bool),
        "masks": np.zeros((n, T_PAD), np.int32),
        "goals": np.zeros((n, T_PAD, g), np.float32),
        "instructions": np.array([paraphrases(i) for i in range(n)], dtype="<U80"),
        "states": rng.normal(size=(n, T_PAD, 69)).astype(np.float32),
        "num_trajectories": n,
        "observation_dim": 10,
        "action_dim": 40,
        "number_of_objects": 5,
    }
    for i, s in enumerate(sims):
        length = s.length
        d["observations"][i, :length] = s.states[:length]
        d["next_observations"][i, :length] = s.states[1:]
        d["actions"][i, :length] = s.actions
        d["rewards"][i, :length, 0] = s.rewards
        d["terminals"][i, length - 1, 0] = True
        d["masks"][i, :length] = 1
        d["goals"][i] = goals[i]
    if not final_state:
        del d["next_observations"], d["terminals"]
    return d


def write_npy(path: Path, d: dict[str, Any]) -> Path:
    np.save(path, d, allow_pickle=True)
    return path


def write_h5(
    path: Path, d: dict[str, Any], *, companion: Path | None = None, seed: int = 0
) -> Path:
    """The ImagineBench layout: obs + 768-d embedding in the .h5, instructions/goals aside."""
    rng = np.random.default_rng(seed)
    obs = d["observations"]
    emb = rng.normal(size=(obs.shape[0], 1, EMBED)).astype(np.float32)
    obs778 = np.concatenate([obs, np.broadcast_to(emb, (*obs.shape[:2], EMBED))], axis=-1)
    obs778 = obs778 * (d["masks"][..., None] != 0)  # zero padding
    with h5py.File(path, "w") as h5:
        h5["masks"] = d["masks"]
        h5["observations"] = obs778
        h5["actions"] = d["actions"]
        h5["rewards"] = d["rewards"]
    companion = companion or path.with_suffix(".npy")
    np.save(
        companion,
        {"instructions": d["instructions"], "goals": d["goals"], "extra": np.arange(3)},
        allow_pickle=True,
    )
    return path


# ------------------------------------------------------------------------------------ helpers


def check_episode(ep: Any, sim: Sim, *, n_steps: int) -> None:
    np.testing.assert_array_equal(ep.states, sim.states[: n_steps + 1])
    np.testing.assert_array_equal(ep.actions, sim.actions[:n_steps])
    np.testing.assert_array_equal(ep.rewards, sim.rewards[:n_steps])
    assert ep.actions.dtype == np.int64 and ep.rewards.dtype == np.float32
    assert ep.task_spec == sim.task.spec()


def roundtrip(ds: Any, tmp_path: Path) -> Any:
    out = save_dataset(ds, tmp_path / "roundtrip.h5", overwrite=True)
    back = load_dataset(out)
    assert len(back) == len(ds)
    np.testing.assert_array_equal(back.states, ds.states)
    np.testing.assert_array_equal(back.episode_success, ds.episode_success)
    assert back.tasks == ds.tasks and back.instructions == ds.instructions
    assert back.provenance["import_skipped"] == ds.provenance["import_skipped"]
    return back


# ------------------------------------------------------------------------------------ KALM .npy


def test_npy_round_trip(relation_sims: list[Sim], tmp_path: Path) -> None:
    src = write_npy(tmp_path / "clevr_robot.npy", pack(relation_sims))
    ds = import_kalm_clevr(src)
    assert len(ds) == len(relation_sims)
    for i, sim in enumerate(relation_sims):
        ep = ds.episode(i)
        check_episode(ep, sim, n_steps=sim.length)
        assert ep.terminated and not ep.truncated
        assert ep.success
        assert ep.instruction == paraphrases(i)[0]
        assert ep.level == "train" and ep.source == "real"
    assert ds.domain == "clevr" and ds.action_spec == {"type": "discrete", "n": 40}
    prov = ds.provenance
    assert prov["importer"] == "kalm" and prov["format"] == "kalm-npy"
    assert prov["imported_from"] == str(src)
    assert "created" in prov and "numpy" in prov
    assert prov["import_skipped"] == {
        "still_goal": 0,
        "non_finite": 0,
        "incompatible_goal": 0,
        "dropped_final_transition": 0,
        "empty": 0,
    }
    roundtrip(ds, tmp_path)


def test_npy_variants_778_obs_3d_masks_float_actions(
    relation_sims: list[Sim], tmp_path: Path
) -> None:
    d = pack(relation_sims)
    rng = np.random.default_rng(1)
    for key in ("observations", "next_observations"):
        d[key] = np.concatenate(
            [d[key], rng.normal(size=(*d[key].shape[:2], EMBED)).astype(np.float32)], axis=-1
        )
    d["masks"] = d["masks"][..., None].astype(np.float32)
    d["actions"] = d["actions"].astype(np.float32)
    d["goals"] = d["goals"][:, 0]  # (N, G)
    d["instructions"] = np.char.add(d["instructions"], "  ")  # trailing blanks are stripped
    ds = import_kalm_clevr(
        write_npy(tmp_path / "variant.npy", d), level="rephrase", source="imaginary"
    )
    for i, sim in enumerate(relation_sims):
        ep = ds.episode(i)
        check_episode(ep, sim, n_steps=sim.length)
        assert ep.level == "rephrase" and ep.source == "imaginary" and ep.success
        assert ep.instruction == paraphrases(i)[0]


def test_terminated_follows_terminals(relation_sims: list[Sim], tmp_path: Path) -> None:
    d = pack(relation_sims)
    d["terminals"][1] = False
    ds = import_kalm_clevr(write_npy(tmp_path / "k.npy", d))
    assert not ds.episode(1).terminated and ds.episode(1).truncated
    del d["terminals"]
    ds = import_kalm_clevr(write_npy(tmp_path / "k2.npy", d))
    assert all(ds.episode(i).terminated for i in range(len(ds)))


def test_instruction_modes(relation_sims: list[Sim], tmp_path: Path) -> None:
    src = write_npy(tmp_path / "k.npy", pack(relation_sims))
    n = len(relation_sims)
    first = import_kalm_clevr(src, instruction="first")
    cycle = import_kalm_clevr(src, instruction="cycle")
    every = import_kalm_clevr(src, instruction="all")
    assert len(first) == len(cycle) == n
    assert [first.episode(i).instruction for i in range(n)] == [paraphrases(i)[0] for i in range(n)]
    assert [cycle.episode(i).instruction for i in range(n)] == [
        paraphrases(i)[i % N_PARA] for i in range(n)
    ]
    assert len(every) == n * N_PARA and len(every.instructions) == n * N_PARA
    by_task: dict[str, set[str]] = {}
    for i in range(len(every)):
        ep = every.episode(i)
        by_task.setdefault(ep.task_spec, set()).add(ep.instruction)
    for i, sim in enumerate(relation_sims):
        assert by_task[sim.task.spec()] == set(paraphrases(i))
    np.testing.assert_array_equal(every.episode(N_PARA + 3).states, relation_sims[1].states)
    with pytest.raises(ValueError, match="instruction mode"):
        import_kalm_clevr(src, instruction="random")  # type: ignore[arg-type]


def test_all_mode_dedupes_and_ignores_empty_paraphrases(
    relation_sims: list[Sim], tmp_path: Path
) -> None:
    d = pack(relation_sims[:2])
    d["instructions"][0, 1] = d["instructions"][0, 0]
    d["instructions"][0, 2] = ""
    ds = import_kalm_clevr(write_npy(tmp_path / "k.npy", d), instruction="all")
    assert len(ds) == (N_PARA - 2) + N_PARA


# --------------------------------------------------------------------------------- ImagineBench .h5


def test_h5_drops_final_transition(
    relation_sims: list[Sim], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    src = write_h5(tmp_path / "clevr_train.h5", pack(relation_sims, final_state=False))
    with caplog.at_level(logging.WARNING):
        ds = import_kalm_clevr(src, companion=src.with_suffix(".npy"))
    kept = [s for s in relation_sims if s.length >= 2]
    assert len(ds) == len(kept)
    for i, sim in enumerate(kept):
        ep = ds.episode(i)
        check_episode(ep, sim, n_steps=sim.length - 1)  # states[:L], L - 1 transitions
        assert ep.truncated and not ep.terminated
        assert ep.success == bool(sim.task.success(sim.states[: sim.length])[-1])
    skipped = ds.provenance["import_skipped"]
    assert skipped["dropped_final_transition"] == len(kept)
    assert skipped["empty"] == len(relation_sims) - len(kept)  # length-1 episodes
    assert ds.provenance["format"] == "imaginebench-h5"
    assert ds.provenance["companion"] == str(src.with_suffix(".npy"))
    assert "dropped the final transition" in caplog.text
    roundtrip(ds, tmp_path)


def test_h5_explicit_companion_and_hdf5_suffix(relation_sims: list[Sim], tmp_path: Path) -> None:
    comp = tmp_path / "goals_and_text.npy"
    src = write_h5(tmp_path / "data.hdf5", pack(relation_sims, final_state=False), companion=comp)
    with pytest.raises(DatasetError, match="data.hdf5.*companion"):
        import_kalm_clevr(src)
    ds = import_kalm_clevr(src, companion=comp, instruction="cycle")
    assert ds.provenance["companion"] == str(comp)
    assert len(ds) == sum(s.length >= 2 for s in relation_sims)


def test_h5_nonfinite_embedding_is_ignored(relation_sims: list[Sim], tmp_path: Path) -> None:
    src = write_h5(tmp_path / "e.h5", pack(relation_sims, final_state=False))
    with h5py.File(src, "r+") as h5:
        obs = h5["observations"][()]
        obs[:, 0, 100] = np.nan  # inside the dropped embedding
        obs[3, 1, 4] = np.inf  # ball position of episode 3 (length 4)
        del h5["observations"]
        h5["observations"] = obs
    ds = import_kalm_clevr(src, companion=src.with_suffix(".npy"))
    assert ds.provenance["import_skipped"]["non_finite"] == 1
    assert len(ds) == sum(s.length >= 2 for s in relation_sims) - 1


# ------------------------------------------------------------------------------------ goal levels


def test_hard_goals(hard_sims: list[Sim], relation_sims: list[Sim], tmp_path: Path) -> None:
    sims = hard_sims + [relation_sims[1]]
    goals = [goal_for(s.task) for s in hard_sims]
    # Two relations moving the same ball: our AllOf rejects it -> skipped.
    goals.append(hard_goal(0, (Relation(0, 1, 0), Relation(0, 2, 1))))
    ds = import_kalm_clevr(write_npy(tmp_path / "hard.npy", pack(sims, goals)), level="hard")
    assert ds.provenance["import_skipped"]["incompatible_goal"] == 1
    assert len(ds) == len(hard_sims)
    expected = [
        AllOf((Relation("red", "blue", "behind"), Relation("green", "purple", "left"))),
        Gather("green"),
        AllOf(
            (
                Relation("red", "blue", "behind"),
                Relation("green", "purple", "left"),
                Relation("cyan", "red", "right"),
            )
        ),
        Line(("red", "blue", "green", "purple", "cyan")),
    ]
    for i, (sim, task) in enumerate(zip(hard_sims, expected)):
        ep = ds.episode(i)
        assert ep.task_spec == task.spec()
        check_episode(ep, sim, n_steps=sim.length)
        assert ep.level == "hard"
        assert ep.success == bool(task.success(sim.states)[-1])
    assert ds.episode(0).success and ds.episode(1).success  # solved by the expert
    roundtrip(ds, tmp_path)


def test_hard_level_with_six_number_goals_reads_relations(
    relation_sims: list[Sim], tmp_path: Path
) -> None:
    ds = import_kalm_clevr(write_npy(tmp_path / "h6.npy", pack(relation_sims)), level="hard")
    assert [ds.episode(i).task_spec for i in range(len(ds))] == [
        s.task.spec() for s in relation_sims
    ]


def test_easy_goals_and_still_skipped(
    push_sims: list[Sim], relation_sims: list[Sim], tmp_path: Path
) -> None:
    sims = push_sims + [relation_sims[0]]
    goals = [goal_for(s.task) for s in push_sims] + [easy_goal(1, STILL)]
    ds = import_kalm_clevr(write_npy(tmp_path / "easy.npy", pack(sims, goals)), level="easy")
    assert ds.provenance["import_skipped"]["still_goal"] == 1
    assert len(ds) == len(push_sims)
    for i, sim in enumerate(push_sims):
        ep = ds.episode(i)
        check_episode(ep, sim, n_steps=sim.length)
        assert ep.success and ep.level == "easy"
    # Only STILL goals: nothing left.
    still = [easy_goal(b, STILL) for b in (0, 1, 2)]
    src = write_npy(tmp_path / "still.npy", pack(push_sims, still))
    with pytest.raises(DatasetError, match=r"still\.npy.*no usable episodes"):
        import_kalm_clevr(src, level="easy")


@pytest.mark.parametrize(
    "goal, level, expected",
    [
        ([1, 2, 0, 0, 0, 3], "train", Relation("red", "blue", "right")),
        ([[0, 0, 2, 0, 1, 1]] * 3, "rephrase", Relation("cyan", "green", "left")),
        ([0, 0, 0, 1, 0, 2], "easy", Push("purple", "front")),
        (list(hard_goal(2)) + [0] * 6, "hard", Line((0, 1, 2, 3, 4))),
        (hard_goal(3), "hard", Gather(2)),
    ],
)
def test_goal_to_task(goal: Any, level: str, expected: Any) -> None:
    assert kalm_goal_to_task(goal, level=level) == expected


@pytest.mark.parametrize(
    "goal, level, match",
    [
        ([1, 1, 0, 0, 0, 0], "train", "exactly one ball marked 1"),
        ([1, 2, 2, 0, 0, 0], "train", "exactly one ball marked 1"),
        ([1, 2, 0, 0, 0, 4], "train", "direction"),
        ([1, 2, 0, 0, 0, 0.5], "train", "whole number"),
        ([1, 2, 3, 0, 0, 0], "train", "ball mark"),
        ([1, 2, 0, 0, 0, 0, 0], "train", "7 entries"),
        ([1, 0, 0, 0, 0, 7], "easy", "direction"),
        ([1, 2, 0, 0, 0, 1], "easy", "ball mark"),
        (hard_goal(9), "hard", "indicator"),
        (hard_goal(0), "hard", "sub-goal 0"),
        ([0] * 12, "hard", "12 entries"),
    ],
)
def test_goal_to_task_rejects(goal: Any, level: str, match: str) -> None:
    with pytest.raises(ValueError, match=match) as info:
        kalm_goal_to_task(goal, level=level)
    assert not isinstance(info.value, SkippedGoal)


def test_goal_to_task_skips() -> None:
    with pytest.raises(SkippedGoal) as info:
        kalm_goal_to_task([0, 0, 1, 0, 0, STILL], level="easy")
    assert info.value.reason == "still_goal"
    with pytest.raises(SkippedGoal) as info:
        kalm_goal_to_task(
            hard_goal(1, (Relation(0, 1, 0), Relation(1, 2, 0), Relation(2, 0, 0))), level="hard"
        )
    assert info.value.reason == "incompatible_goal"  # a cycle


# ------------------------------------------------------------------------------------ bad input


def test_non_finite_episodes_are_skipped(
    relation_sims: list[Sim], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    d = pack(relation_sims)
    d["observations"][1, 1, 3] = np.nan  # inside episode 1 (length 3)
    d["rewards"][3, 0, 0] = np.inf
    d["goals"][4, 0, 5] = np.nan
    d["observations"][0, 40] = np.nan  # padding: harmless
    with caplog.at_level(logging.WARNING):
        ds = import_kalm_clevr(write_npy(tmp_path / "nan.npy", d))
    assert ds.provenance["import_skipped"]["non_finite"] == 3
    assert [ds.episode(i).task_spec for i in range(len(ds))] == [
        relation_sims[i].task.spec() for i in (0, 2, 5)
    ]
    assert "non finite" in caplog.text


Mutator = Callable[[dict[str, Any]], None]


def _set(key: str, value: Callable[[dict[str, Any]], Any]) -> Mutator:
    def f(d: dict[str, Any]) -> None:
        d[key] = value(d)

    return f


def _del(key: str) -> Mutator:
    def f(d: dict[str, Any]) -> None:
        del d[key]

    return f


def _gap_in_mask(d: dict[str, Any]) -> None:
    d["masks"][1, 5] = 1


def _bad_mask_value(d: dict[str, Any]) -> None:
    d["masks"][0, 0] = 2


def _bad_goal(d: dict[str, Any]) -> None:
    d["goals"][2, :, :] = [1, 1, 0, 0, 0, 0]


def _bad_action(d: dict[str, Any]) -> None:
    d["actions"][0, 0] = 40


def _no_instruction(d: dict[str, Any]) -> None:
    d["instructions"][2, :] = ""


@pytest.mark.parametrize(
    "mutate, match",
    [
        (_del("actions"), r"missing required key.*'actions'"),
        (_del("goals"), r"missing required key.*'goals'"),
        (_set("observations", lambda d: d["observations"][..., :8]), "last dim is 8"),
        (_set("observations", lambda d: d["observations"][0]), r"\(N, T, D\)"),
        (_set("actions", lambda d: d["actions"][:-1]), "'actions' must have shape"),
        (_set("rewards", lambda d: d["rewards"][:, :-1]), "'rewards' must have shape"),
        (_set("masks", lambda d: d["masks"][:, :10]), "'masks' must have shape"),
        (_set("next_observations", lambda d: d["next_observations"][:-1]), "'next_observations'"),
        (_set("goals", lambda d: d["goals"][:-1]), "'goals' must be"),
        (_set("goals", lambda d: d["goals"][..., :5]), "5 entries"),
        (_set("instructions", lambda d: d["instructions"][:-1]), "'instructions' has"),
        (_set("actions", lambda d: d["actions"].astype(str)), "must be numeric"),
        (_gap_in_mask, "contiguous prefix"),
        (_bad_mask_value, "only 0 and 1"),
        (_bad_goal, "goal vector of episode 2"),
        (_bad_action, r"integers in \[0, 40\)"),
        (_no_instruction, "episode 2 has no non-empty instruction"),
    ],
)
def test_malformed_npy(
    relation_sims: list[Sim], tmp_path: Path, mutate: Mutator, match: str
) -> None:
    d = pack(relation_sims)
    mutate(d)
    src = write_npy(tmp_path / "broken_kalm.npy", d)
    with pytest.raises(ValueError, match=match) as info:
        import_kalm_clevr(src)
    assert "broken_kalm.npy" in str(info.value)


def test_malformed_files(relation_sims: list[Sim], tmp_path: Path) -> None:
    txt = tmp_path / "data.txt"
    txt.write_text("hello")
    with pytest.raises(ValueError, match=r"data\.txt.*unknown extension"):
        import_kalm_clevr(txt)
    arr = tmp_path / "plain_array.npy"
    np.save(arr, np.zeros((3, 4)))
    with pytest.raises(ValueError, match=r"plain_array\.npy.*pickled dict"):
        import_kalm_clevr(arr)
    garbage = tmp_path / "garbage.npy"
    garbage.write_bytes(b"not numpy at all")
    with pytest.raises(ValueError, match=r"garbage\.npy"):
        import_kalm_clevr(garbage)
    with pytest.raises(FileNotFoundError, match="missing.npy"):
        import_kalm_clevr(tmp_path / "missing.npy")
    bad_h5 = tmp_path / "not_hdf5.h5"
    bad_h5.write_bytes(b"nope")
    with pytest.raises(ValueError, match=r"not_hdf5\.h5.*HDF5"):
        import_kalm_clevr(bad_h5)
    # h5 without a companion, and h5 missing a required dataset
    d = pack(relation_sims, final_state=False)
    src = write_h5(tmp_path / "lonely.h5", d)
    src.with_suffix(".npy").unlink()
    with pytest.raises(ValueError, match=r"lonely\.h5.*companion"):
        import_kalm_clevr(src)
    src = write_h5(tmp_path / "no_rewards.h5", d)
    with h5py.File(src, "r+") as h5:
        del h5["rewards"]
    with pytest.raises(ValueError, match=r"no_rewards\.h5.*'rewards'"):
        import_kalm_clevr(src)
    src = write_h5(tmp_path / "wide.h5", d)
    with h5py.File(src, "r+") as h5:
        obs = h5["observations"][()]
        del h5["observations"]
        h5["observations"] = obs[..., :100]
    with pytest.raises(ValueError, match=r"wide\.h5.*last dim is 100"):
        import_kalm_clevr(src, companion=src.with_suffix(".npy"))
    comp = tmp_path / "comp_without_goals.npy"
    np.save(comp, {"instructions": d["instructions"]}, allow_pickle=True)
    with pytest.raises(ValueError, match=r"comp_without_goals\.npy.*'goals'"):
        import_kalm_clevr(write_h5(tmp_path / "good.h5", d), companion=comp)
    with pytest.raises(ValueError, match="unknown level"):
        import_kalm_clevr(tmp_path / "wide.h5", level="medium")
    with pytest.raises(ValueError, match="unknown source"):
        import_kalm_clevr(tmp_path / "wide.h5", source="dreamed")


def test_all_episodes_unusable(relation_sims: list[Sim], tmp_path: Path) -> None:
    one_step = [s for s in relation_sims if s.length == 1]
    src = write_h5(tmp_path / "short.h5", pack(one_step, final_state=False))
    with pytest.raises(DatasetError, match=r"short\.h5.*no usable episodes"):
        import_kalm_clevr(src, companion=src.with_suffix(".npy"))


# ------------------------------------------------------------------------------------ pickles


class _MakeDir:
    """Unpickling this calls ``os.mkdir(marker)``: a stand-in for any code hidden in a file."""

    def __init__(self, marker: Path) -> None:
        self.marker = str(marker)

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        return (os.mkdir, (self.marker,))


def write_evil_npy(path: Path, marker: Path) -> Path:
    return write_npy(path, {"observations": np.zeros((1, 2, 10)), "payload": _MakeDir(marker)})


def test_malicious_npy_is_refused_without_running(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    marker = tmp_path / "pwned"
    evil = write_evil_npy(tmp_path / "evil.npy", marker)
    with pytest.raises(DatasetError, match=r"evil\.npy: refused .*posix\.mkdir"):
        import_kalm_clevr(evil)
    assert cli_main(["import-kalm", str(evil), "--out", str(tmp_path / "out.h5")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "evil.npy" in err and "refused" in err
    assert not marker.exists() and not (tmp_path / "out.h5").exists()
    np.load(evil, allow_pickle=True)  # the file is really hostile: numpy's loader runs it
    assert marker.is_dir()


def test_h5_never_reads_an_unnamed_companion(relation_sims: list[Sim], tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    src = write_h5(tmp_path / "ib.h5", pack(relation_sims, final_state=False))
    write_evil_npy(src.with_suffix(".npy"), marker)  # the sibling someone left next to it
    with pytest.raises(DatasetError, match=r"ib\.h5: .*--companion"):
        import_kalm_clevr(src)
    assert not marker.exists()


def test_safe_loader_reads_plain_pickled_data(tmp_path: Path) -> None:
    d = {
        "instructions": np.array([["a", "b"], ["c", ""]], dtype=object),
        "goals": np.arange(6.0).reshape(2, 3),
        "n": 2,
        "scalar": np.float32(1.5),
        "names": ["x", ("y", 3)],
        "nested": {"flag": True, "none": None, "raw": b"\x00"},
    }
    back = load_npy(write_npy(tmp_path / "plain.npy", d))
    assert back.keys() == d.keys() and back["names"] == d["names"]
    np.testing.assert_array_equal(back["instructions"], d["instructions"])
    np.testing.assert_array_equal(back["goals"], d["goals"])
    assert back["scalar"] == d["scalar"] and back["nested"] == d["nested"]
    np.save(tmp_path / "array.npy", np.ones((2, 2), np.int8))
    np.testing.assert_array_equal(load_npy(tmp_path / "array.npy"), np.ones((2, 2)))


# ------------------------------------------------------------------------------------ CLI


def test_cli_import_kalm(
    relation_sims: list[Sim], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = write_npy(tmp_path / "clevr_robot.npy", pack(relation_sims))
    dst = tmp_path / "out" / "imported.h5"
    assert cli_main(["import-kalm", str(src), "--out", str(dst)]) == 0
    ds = load_dataset(dst)
    assert len(ds) == len(relation_sims) and ds.episode_success.all()
    assert f"wrote {dst}" in capsys.readouterr().out
    # existing output without --overwrite: error code naming the CLI flag, file untouched
    assert cli_main(["import-kalm", str(src), "--out", str(dst)]) == 2
    err = capsys.readouterr().err
    assert "pass --overwrite" in err and "overwrite=True" not in err
    h5src = write_h5(tmp_path / "ib.h5", pack(relation_sims, final_state=False))
    assert (
        cli_main(
            [
                "import-kalm",
                str(h5src),
                "--companion",
                str(h5src.with_suffix(".npy")),
                "--out",
                str(dst),
                "--overwrite",
                "--instruction",
                "all",
                "--level",
                "rephrase",
                "--as-source",
                "imaginary",
            ]
        )
        == 0
    )
    ds = load_dataset(dst)
    assert len(ds) == N_PARA * sum(s.length >= 2 for s in relation_sims)
    assert ds.provenance["instruction_mode"] == "all"
    assert (ds.episode_source == 1).all() and (ds.episode_level == 1).all()
    broken = tmp_path / "broken.txt"
    broken.write_text("x")
    assert cli_main(["import-kalm", str(broken), "--out", str(tmp_path / "x.h5")]) == 2
    assert "broken.txt" in capsys.readouterr().err
