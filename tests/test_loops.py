"""Loop erasure (``filters.erase_loops``, ``imaginebench refilter --erase-loops``): on constructed
paths it keeps exactly the loop-free route; a detour the BabyAI simulator makes (a step left and
back) is erased to exactly the simulator's direct rollout, with its larger reward; a path-judged
task keeps its loop; the shipped BabyAI files hold no loops."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from imaginebench.cli import main
from imaginebench.data.dataset import Episode, RolloutDataset
from imaginebench.data.format import load_dataset, save_dataset
from imaginebench.data.shipped import _regenerate_command, resolve_data_path
from imaginebench.envs import get_domain, make
from imaginebench.envs.base import EpisodeSpec, Task
from imaginebench.imagination.decoder import ImaginedRollout
from imaginebench.imagination.filters import FilterConfig, select
from imaginebench.imagination.loops import erasable_steps, erase_loops, loop_free_steps
from imaginebench.imagination.quality import replayed_success
from imaginebench.imagination.refilter import without_loops

FILE = resolve_data_path("shipped:babyai/imaginary_rephrase.h5")


def _path(*names: str) -> np.ndarray:
    """States named by letters, one number each."""
    return np.array([[ord(n)] for n in names], dtype=np.float32)


@pytest.mark.parametrize(
    ("visits", "steps"),
    [
        ("ABC", [0, 1]),  # no loop
        ("ABAC", [2]),  # A -> B -> A: leave A with the second visit's action
        ("AABC", [1, 2]),  # a step that stays put
        ("ABCBAD", [4]),  # nested loops back to the start
        ("ABCDBE", [0, 4]),  # a loop in the middle
        ("ABA", []),  # back where it began: nothing left
    ],
)
def test_the_loop_free_route_through_constructed_paths(visits, steps):
    np.testing.assert_array_equal(loop_free_steps(_path(*visits)), steps)


DETOUR = (0, 1)  # BabyAI: a step left, then a step right (back, or twice blocked by a wall)


def _simulated(env, episode, actions) -> Episode:
    """The simulator's rollout of ``actions`` from ``episode``'s start, to its first success."""
    task = Task.from_spec(episode.task_spec)
    spec = EpisodeSpec(task, episode.instruction, episode.states[0], episode.level)
    state, _ = env.reset(options={"episode": spec})
    states, taken, success = [state], [], False
    for action in actions:
        state, _, _, _, info = env.step(action)
        states.append(state)
        taken.append(action)
        if success := info["is_success"]:
            break
    states, taken = np.stack(states), np.asarray(taken, dtype=np.int64)
    return dataclasses.replace(
        episode, states=states, actions=taken, success=success, terminated=success,
        truncated=not success, rewards=get_domain("babyai").episode_rewards(task, states, taken),
        confidence={},
    )  # fmt: skip


@pytest.fixture(scope="module")
def detours():
    """``(direct, detoured)`` pairs made by the simulator from the shipped rephrase rollouts:
    each rollout's own actions, and the same with a step left and back right first."""
    shipped = load_dataset(FILE)
    env = make("babyai", "rephrase", max_episode_steps=10**9).unwrapped
    pairs = []
    for i in range(len(shipped)):
        episode = shipped.episode(i)
        direct = _simulated(env, episode, episode.actions)
        detoured = _simulated(env, episode, [*DETOUR, *episode.actions])
        back_at_start = np.array_equal(detoured.states[len(DETOUR)], direct.states[0])
        # a step left that a wall blocks, then one right that moves, is no detour
        if back_at_start and direct.success and detoured.success:
            pairs.append((direct, detoured))
        if len(pairs) == 30:
            break
    env.close()
    return pairs


def _triples(states: np.ndarray, actions: np.ndarray) -> set[tuple[bytes, int, bytes]]:
    return {
        (states[t].tobytes(), int(actions[t]), states[t + 1].tobytes()) for t in range(len(actions))
    }


def test_erasing_a_simulated_detour_gives_back_the_direct_rollout(detours):
    assert len(detours) == 30
    rewards_of = get_domain("babyai").episode_rewards
    shorter = []
    for direct, detoured in detours:
        erased = erase_loops(detoured, rewards_of)
        # the direct rollout, itself loop-free (a move the simulator blocks is a loop too)
        expected = erase_loops(direct, rewards_of)
        np.testing.assert_array_equal(erased.states, expected.states)
        np.testing.assert_array_equal(erased.actions, expected.actions)
        np.testing.assert_allclose(erased.rewards, expected.rewards)
        assert erased.rewards.sum() > detoured.rewards.sum()  # sooner at the goal: more reward
        assert _triples(erased.states, erased.actions) <= _triples(
            detoured.states, detoured.actions
        )
        shorter.append(erased)
    assert replayed_success("babyai", shorter).all()


def test_the_shipped_babyai_files_hold_no_loops():
    for level in ("rephrase", "easy", "hard"):
        data = load_dataset(resolve_data_path(f"shipped:babyai/imaginary_{level}.h5"))
        assert without_loops(data) is data, level


class _FirstBThenD(Task):
    """Judged on the path: D counts only after a visit to B (not registered: no ``family``)."""

    def success(self, states):
        letters = np.asarray(states)[..., 0]
        return np.maximum.accumulate(letters == ord("B"), axis=-1) & (letters == ord("D"))

    def progress(self, states):
        return np.zeros(np.shape(states)[:-1])

    def instructions(self, wording="train"):
        return ["Visit B, then D."]

    def to_params(self):
        return {}

    @classmethod
    def from_params(cls, params):
        return cls()


def test_a_rollout_whose_verdict_needs_its_loop_or_has_none_is_left_whole():
    task = _FirstBThenD()
    assert erasable_steps(task, _path(*"ABAD")) is None  # erasing the B loop undoes success
    assert erasable_steps(task, _path(*"ABD")) is None  # nothing to erase
    assert erasable_steps(task, _path(*"ABCA")) is None  # nothing would be left
    np.testing.assert_array_equal(erasable_steps(task, _path(*"ACABD")), [2, 3])


def _candidate(episode) -> ImaginedRollout:
    task = Task.from_spec(episode.task_spec)
    spec = EpisodeSpec(task, episode.instruction, episode.states[0], episode.level)
    steps = np.linspace(-1.0, -0.1, len(episode))
    return ImaginedRollout(
        spec, episode.states, episode.actions, episode.success, False,
        log_likelihood=float(steps.sum()), step_log_likelihoods=steps,
    )  # fmt: skip


def test_select_erases_before_judging_length_and_counts_the_steps(detours):
    for direct, detoured in detours[:10]:
        candidate = _candidate(detoured)
        shortest = len(loop_free_steps(direct.states))
        limit = {candidate.spec.task.family: shortest}  # the erased length passes
        plain, plain_counts = select([candidate], FilterConfig(), limit)
        kept, counts = select([candidate], FilterConfig(erase_loops=True), limit)
        assert not plain and plain_counts.too_long == 1 and plain_counts.loop_steps_erased == 0
        assert len(kept) == 1 and counts.loop_steps_erased == len(detoured) - shortest
        np.testing.assert_array_equal(
            kept[0].actions, direct.actions[loop_free_steps(direct.states)]
        )
        assert kept[0].log_likelihood == pytest.approx(kept[0].step_log_likelihoods.sum())
        assert len(kept[0].step_log_likelihoods) == len(kept[0].actions)


def test_refilter_erases_loops_records_it_and_remakes_it(tmp_path, capsys, detours):
    looping = tmp_path / "looping.h5"
    source = load_dataset(FILE)  # its imagine provenance, without its own post_filter
    provenance = {k: v for k, v in source.provenance.items() if k != "post_filter"}
    data = RolloutDataset.from_episodes(
        [d for _, d in detours], domain="babyai", action_spec=source.action_spec,
        provenance=provenance,
    )  # fmt: skip
    save_dataset(data, looping)
    out = tmp_path / "no_loops.h5"
    assert main(["refilter", str(looping), "--erase-loops", "--out", str(out)]) == 0
    written = load_dataset(out)
    shortest = [len(loop_free_steps(d.states)) for d, _ in detours]
    np.testing.assert_array_equal(written.episode_lengths(), shortest)
    record = written.provenance["post_filter"]
    assert record["erase_loops"]
    assert record["loop_steps_erased"] == sum(len(d) for _, d in detours) - sum(shortest)
    assert "loop steps erased" in capsys.readouterr().out
    assert _regenerate_command(written.provenance, "babyai", "x.h5").endswith("--erase-loops")
    assert (tmp_path / "no_loops.quality.json").exists()


def test_continuous_rollouts_have_no_exact_loops():
    data = load_dataset(resolve_data_path("shipped:halfcheetah/imaginary_rephrase.h5"))
    assert without_loops(data) is data
    episode = data.episode(0)
    assert erase_loops(episode, lambda task, s, a: np.zeros(len(a))) is episode
