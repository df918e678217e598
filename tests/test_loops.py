"""Loop erasure (``filters.erase_loops``, ``imaginebench refilter --erase-loops``): on constructed
paths it keeps exactly the loop-free route; on the shipped BabyAI imagined rollouts it keeps only
transitions the rollout imagined, the same start, end and verdict, and the simulator replays the
shorter rollouts to their goal wherever it replayed the originals."""

from __future__ import annotations

import numpy as np
import pytest

from imaginebench.cli import main
from imaginebench.data.format import load_dataset
from imaginebench.data.shipped import _regenerate_command, resolve_data_path
from imaginebench.envs import get_domain
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


@pytest.fixture(scope="module")
def shipped():
    return load_dataset(FILE)


@pytest.fixture(scope="module")
def erased(shipped):
    return without_loops(shipped)


def _triples(states: np.ndarray, actions: np.ndarray) -> set[tuple[bytes, int, bytes]]:
    return {
        (states[t].tobytes(), int(actions[t]), states[t + 1].tobytes()) for t in range(len(actions))
    }


def test_erased_rollouts_keep_imagined_transitions_start_end_and_verdict(shipped, erased):
    rewards_of = get_domain("babyai").episode_rewards
    lengths, shorter = shipped.episode_lengths(), erased.episode_lengths()
    assert len(erased) == len(shipped)
    assert (shorter < lengths).sum() >= 50  # the shipped file's detours are common
    assert (shorter <= lengths).all()
    for i in range(len(shipped)):
        before, after = shipped.episode(i), erased.episode(i)
        task = Task.from_spec(before.task_spec)
        np.testing.assert_array_equal(after.states[[0, -1]], before.states[[0, -1]])
        assert _triples(after.states, after.actions) <= _triples(before.states, before.actions)
        assert len({s.tobytes() for s in after.states}) == len(after.states)  # no state twice
        assert task.success(after.states)[1:].any() == task.success(before.states)[1:].any()
        np.testing.assert_allclose(after.rewards, rewards_of(task, after.states, after.actions))
        if len(after) < len(before) and before.success:  # fewer steps, larger success reward
            assert after.rewards.sum() > before.rewards.sum()


def test_the_simulator_replays_the_shorter_rollouts_to_their_goal(shipped, erased):
    changed = np.flatnonzero(erased.episode_lengths() < shipped.episode_lengths())[:40]
    before = replayed_success("babyai", [shipped.episode(i) for i in changed])
    after = replayed_success("babyai", [erased.episode(i) for i in changed])
    assert before.sum() >= 20
    assert after[before].all()  # every loop erased from a working rollout was a detour


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


def test_select_erases_before_judging_length_and_counts_the_steps(shipped, erased):
    lengths, shorter = shipped.episode_lengths(), erased.episode_lengths()
    for i in np.flatnonzero(shorter < lengths)[:10]:
        candidate = _candidate(shipped.episode(i))
        limit = {candidate.spec.task.family: int(shorter[i])}  # the erased length passes
        plain, plain_counts = select([candidate], FilterConfig(), limit)
        kept, counts = select([candidate], FilterConfig(erase_loops=True), limit)
        assert not plain and plain_counts.too_long == 1 and plain_counts.loop_steps_erased == 0
        assert len(kept) == 1 and counts.loop_steps_erased == lengths[i] - shorter[i]
        np.testing.assert_array_equal(kept[0].actions, erased.episode(i).actions)
        assert kept[0].log_likelihood == pytest.approx(kept[0].step_log_likelihoods.sum())
        assert len(kept[0].step_log_likelihoods) == len(kept[0].actions)


def test_refilter_erases_loops_records_it_and_remakes_it(tmp_path, capsys, shipped, erased):
    out = tmp_path / "no_loops.h5"
    assert main(["refilter", str(FILE), "--erase-loops", "--out", str(out)]) == 0
    written = load_dataset(out)
    np.testing.assert_array_equal(written.episode_lengths(), erased.episode_lengths())
    record = written.provenance["post_filter"]
    assert record["erase_loops"] and record["loop_steps_erased"] == int(
        shipped.episode_lengths().sum() - erased.episode_lengths().sum()
    )
    assert "loop steps erased" in capsys.readouterr().out
    assert _regenerate_command(written.provenance, "babyai", "x.h5").endswith("--erase-loops")
    assert (tmp_path / "no_loops.quality.json").exists()


def test_continuous_rollouts_have_no_exact_loops():
    data = load_dataset(resolve_data_path("shipped:halfcheetah/imaginary_rephrase.h5"))
    assert without_loops(data) is data
    episode = data.episode(0)
    assert erase_loops(episode, lambda s, a: np.zeros(len(a))) is episode
