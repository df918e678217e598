"""Confidence of imagined transitions without the simulator: the dynamics-ensemble source
tells right transitions from wrong ones, and the AUROC that measures it is right on
constructed cases. (The LM-likelihood source is tested with the decoder in test_grounding.)"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from imaginebench.data.collect import collect
from imaginebench.data.dataset import Episode, RolloutDataset
from imaginebench.imagination.confidence import (
    SPREAD_FLOOR,
    EnsembleConfig,
    TransitionEnsemble,
    auroc,
)
from imaginebench.modules.dynamics import gaussian_nll

SMALL = EnsembleConfig(members=4, hidden=(64, 64), max_steps=400, eval_every=50)


@pytest.fixture(scope="module")
def clevr():
    """Real CLEVR pushes, an ensemble fitted on them, and other real pushes."""
    real, _ = collect("clevr", "train", 60, seed=0, epsilon=0.2, progress=False)
    other, _ = collect("clevr", "easy", 30, seed=5, epsilon=0.2, progress=False)
    return real, TransitionEnsemble.fit(real, SMALL), other


@pytest.mark.slow  # the real CLEVR data of the fixture: ~7 s
def test_the_ensemble_trusts_real_steps_more_than_the_same_steps_with_wrong_actions(clevr):
    """Same states before and after, other actions: the step (its change of state) disagrees
    with what the real-data models predict for the action, and the confidence says so. (The
    members' spread alone, blind to the step, separates these at AUROC 0.56; measured with
    this seed and budget: 0.87 for the committee.)"""
    _, scorer, real = clevr
    wrong = real.select(np.arange(len(real)))
    wrong.actions = np.random.default_rng(0).permutation(real.actions)
    moved = wrong.actions != real.actions
    right_conf, wrong_conf = scorer.confidence(real), scorer.confidence(wrong)[moved]
    assert right_conf.dtype == np.float32 and ((right_conf >= 0) & (right_conf <= 1)).all()
    spotted = auroc(
        np.r_[-right_conf, -wrong_conf], np.r_[np.zeros(len(right_conf)), np.ones(moved.sum())]
    )
    assert spotted > 0.8, spotted
    assert np.median(right_conf) > 1.5 * np.median(wrong_conf)


@pytest.mark.slow  # 430 real episodes and a 2-member fit: ~20 s (80 s on a busy machine)
def test_the_ensemble_predicts_real_next_states_of_unseen_tasks():
    """``next_states`` (what ``imagine`` with ``state_model: ensemble`` feeds the LM), fitted on
    real pushes of the training tasks: on real pushes of the easy tasks its next states are
    closer to the real ones than "nothing moves" is, and than its own prediction for other
    actions (measured with this seed and budget: mean absolute error 0.016 against 0.033 and
    0.063)."""
    real, _ = collect("clevr", "train", 400, seed=0, epsilon=0.2, progress=False)
    other, _ = collect("clevr", "easy", 30, seed=5, epsilon=0.2, progress=False)
    scorer = TransitionEnsemble.fit(
        real, EnsembleConfig(members=2, hidden=(128, 128), max_steps=1000, eval_every=100)
    )
    before, after = other.transition_indices()
    states, truth = other.states[before], other.states[after]
    predicted = scorer.next_states(states, other.actions)
    assert predicted.shape == truth.shape and predicted.dtype == np.float32
    moved = np.abs(truth - states).sum(1) > 1e-3
    error = np.abs(predicted - truth)[moved].mean()
    assert error < 0.7 * np.abs(states - truth)[moved].mean(), error
    others = np.random.default_rng(0).permutation(other.actions)
    changed = moved & (others != other.actions)
    wrong = np.abs(scorer.next_states(states, others) - truth)[changed].mean()
    assert error < 0.5 * wrong, (error, wrong)


@pytest.mark.slow  # the real CLEVR data of the fixture: ~7 s
def test_the_ensemble_is_fitted_reproducibly_and_scores_any_action_space(clevr):
    fitted_on, scorer, real = clevr
    again = TransitionEnsemble.fit(fitted_on, SMALL)
    np.testing.assert_array_equal(again.confidence(real), scorer.confidence(real))
    cheetah, _ = collect("halfcheetah", "train", 2, seed=0, progress=False)
    continuous = TransitionEnsemble.fit(
        cheetah, EnsembleConfig(members=2, hidden=(16,), max_steps=5, eval_every=5)
    )
    assert continuous.confidence(cheetah).shape == (cheetah.num_transitions,)
    with pytest.raises(ValueError, match="members >= 2"):
        EnsembleConfig(members=1)


def test_auroc_on_constructed_scores():
    labels = np.array([0, 0, 1, 1], dtype=bool)
    assert auroc(np.array([0.1, 0.2, 0.8, 0.9]), labels) == 1.0
    assert auroc(np.array([0.9, 0.8, 0.2, 0.1]), labels) == 0.0
    assert auroc(np.array([0.5, 0.5, 0.5, 0.5]), labels) == 0.5  # ties count half
    assert auroc(np.array([0.1, 0.6, 0.5, 0.9]), labels) == 0.75  # 3 of 4 pairs in order
    assert np.isnan(auroc(np.array([0.1, 0.2]), np.array([True, True])))


@pytest.mark.slow  # the real CLEVR data of the fixture: ~7 s
def test_score_files_checks_every_input_before_fitting(clevr, tmp_path, monkeypatch):
    """A missing file, or a file of another domain than the real data, is refused before the
    ensemble is fitted (and nothing is written)."""
    from imaginebench.data.format import save_dataset
    from imaginebench.imagination.score import score_files

    fitted_on, _, other = clevr
    real = save_dataset(fitted_on, tmp_path / "real.h5")
    clevr_file = save_dataset(other, tmp_path / "clevr.h5")
    cheetah_file = save_dataset(
        collect("halfcheetah", "train", 1, seed=0, progress=False)[0], tmp_path / "cheetah.h5"
    )

    def no_fit(*args, **kwargs):
        raise AssertionError("fitted before the inputs were checked")

    monkeypatch.setattr(TransitionEnsemble, "fit", no_fit)
    with pytest.raises(FileNotFoundError, match="missing.h5"):
        score_files(
            [str(clevr_file), str(tmp_path / "missing.h5")], real=str(real), sources=["ensemble"]
        )
    with pytest.raises(ValueError, match="cannot be scored by an ensemble fitted on"):
        score_files([str(clevr_file), str(cheetah_file)], real=str(real), sources=["ensemble"])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cheetah.h5", "clevr.h5", "real.h5"]


def test_beta_nll_gives_the_means_the_squared_errors_gradients():
    """``beta = 1``: the mean's gradient is the squared error's, whatever variance is
    predicted; ``beta = 0`` (the Gaussian NLL) scales it down where the variance is large,
    which lets a member explain a hard transition away instead of fitting it."""
    target = torch.tensor([[1.0, -2.0, 0.5]])
    logvar = torch.tensor([[0.0, 3.0, -2.0]])
    for beta, scale in ((1.0, torch.ones(1, 3)), (0.0, torch.exp(-logvar))):
        mean = torch.zeros(1, 3, requires_grad=True)
        gaussian_nll(mean, logvar, target, beta).backward()
        expected = 2 * (mean.detach() - target) * scale / target.numel()
        torch.testing.assert_close(mean.grad, expected)
    mean = torch.zeros(1, 3)
    assert float(gaussian_nll(mean, logvar, target, 0.0)) == pytest.approx(
        float(((target**2) * torch.exp(-logvar) + logvar).mean())
    )
    with pytest.raises(ValueError, match="nll_beta"):
        EnsembleConfig(nll_beta=1.5)


def _episode(states: np.ndarray, actions: np.ndarray) -> Episode:
    return Episode(
        states=states.astype(np.float32),
        actions=actions.astype(np.float32),
        rewards=np.zeros(len(actions), np.float32),
        terminated=False,
        truncated=True,
        instruction="move",
        task_spec='{"family": "toy"}',
        level="train",
        source="real",
        success=False,
    )


def _toy_real(rollout) -> RolloutDataset:
    """40 toy episodes of 10 steps, actions in [-1, 1]; ``rollout(i, actions, rng)`` gives
    episode ``i``'s first state and its changes of state."""
    rng = np.random.default_rng(0)
    episodes = []
    for i in range(40):
        actions = rng.uniform(-1, 1, (10, 1))
        start, steps = rollout(i, actions, rng)
        episodes.append(_episode(np.cumsum(np.r_[start[None], steps], 0), actions))
    spec = {"type": "continuous", "shape": [1], "low": [-1.0], "high": [1.0]}
    return RolloutDataset.from_episodes(episodes, domain="toy", action_spec=spec)


def _toy_ensemble(rollout, **settings) -> TransitionEnsemble:
    """A tiny ensemble fitted on :func:`_toy_real` (``settings``: more ``EnsembleConfig``)."""
    config = dict(members=2, hidden=(16,), max_steps=20, eval_every=10) | settings
    return TransitionEnsemble.fit(_toy_real(rollout), EnsembleConfig(**config))


def test_entries_the_real_data_never_moves_from_zero_stay_zero_in_predicted_states():
    """Entry 0 moves with the action; entry 1 is an unused slot (zero, staying zero) in half
    the episodes and moves in the others; entry 2 starts at zero and leaves it. Only entry 1
    is kept at zero where it is zero: the members' mean change there is small but not zero,
    and on Meta-World such a slot would count as a filled entity (measured: every imagined
    candidate illegal before this rule)."""

    def rollout(i, actions, rng):
        steps = np.c_[actions[:, 0], (i % 2) * 0.5 * actions[:, 0], np.full(10, 0.3)]
        return np.array([rng.uniform(-1, 1), (i % 2) * rng.uniform(0.5, 1), 0.0]), steps

    scorer = _toy_ensemble(rollout)
    assert scorer.zero_stays_zero.tolist() == [False, True, False]
    states = np.array([[0.2, 0.0, 0.0], [0.2, 0.7, 0.0]], np.float32)
    predicted = scorer.next_states(states, np.array([[0.5], [0.5]], np.float32))
    assert predicted[0, 1] == 0.0  # an unused slot stays unused
    assert predicted[1, 1] != 0.7 and predicted[:, 2].all()  # the others move as fitted


def test_entries_the_real_data_never_varies_or_barely_changes_are_held_in_predicted_states():
    """Entry 0 moves with the action; entry 1 is a static object at 0.25 in every real state
    (Meta-World's wall slot is zero in every training task); entry 2 differs between episodes
    but no step changes it (a button's axes it is not pressed along). Met at another value (the
    novel tasks' wall), entry 1 says nothing the members learned: held, it enters them at its
    real mean, and entries 1 and 2 keep their values; as they are, entry 1 sits 650 spreads
    from its mean and moves the prediction of entry 0 (measured on Meta-World: the imagined
    hand left its box within 3 steps)."""

    def rollout(i, actions, rng):
        steps = np.c_[0.1 * actions[:, 0], np.zeros((10, 2))]
        return np.array([rng.uniform(-1, 1), 0.25, rng.uniform(-1, 1)]), steps

    scorer = _toy_ensemble(rollout)
    assert scorer.barely_changes.tolist() == [False, True, True]
    states = np.array([[0.2, 0.25, 0.4], [0.2, 0.9, 0.4]], np.float32)
    actions = np.array([[0.5], [0.5]], np.float32)
    held = scorer.next_states(states, actions)
    as_they_are = scorer.next_states(states, actions, hold_unvaried=False)
    assert held[1, 0] == held[0, 0] == as_they_are[0, 0]  # the model does not see entry 1
    assert np.array_equal(held[:, 1:], states[:, 1:])  # entries 1 and 2 keep their values
    assert abs(as_they_are[1, 0] - as_they_are[0, 0]) > 0.05  # as it is, entry 1 moves entry 0
    # the confidence judges the members on the same inputs: entry 1 at another value changes
    # nothing, while a step its members did not predict still scores low
    confidence = scorer.transition_confidence(states, actions, held)
    np.testing.assert_allclose(confidence[1], confidence[0], rtol=1e-5)
    assert confidence[0] > 0.5
    wrong = held[1:].copy()
    wrong[0, 0] += 0.3
    assert scorer.transition_confidence(states[1:], actions[1:], wrong)[0] < 0.5 * confidence[1]


def test_an_entity_few_episodes_have_is_judged_still_on_those_episodes_alone():
    """Entry 1 is an unused slot (zero) in 9 of 10 episodes and, where the entity is in use,
    moves 2 mm a step on half of its steps (Meta-World's lock: 7 % of the real transitions,
    turned on some of door-unlock's steps). Over every transition its change has a spread
    below the floor, and the rule before 2026-12-06 (``still_measured_on: all``) held it, so
    the state model never turned the lock; measured on the transitions in use it moves, and
    the predicted state moves it."""

    def rollout(i, actions, rng):
        used = i % 10 == 0
        pushes = used * 0.004 * (actions[:, 0] > 0)
        return np.array([rng.uniform(-1, 1), 0.5 * used]), np.c_[0.1 * actions[:, 0], pushes]

    real = _toy_real(rollout)
    change = np.concatenate([np.diff(real.episode(i).states, axis=0) for i in range(len(real))])
    assert change[:, 1].std() < SPREAD_FLOOR  # still, over every transition
    in_use = _toy_ensemble(rollout, max_steps=300, eval_every=100)
    every = _toy_ensemble(rollout, max_steps=300, eval_every=100, still_measured_on="all")
    assert not in_use.barely_changes[1] and every.barely_changes[1]
    state, push = np.array([[0.0, 0.5]], np.float32), np.array([[1.0]], np.float32)
    assert every.next_states(state, push)[0, 1] == 0.5  # held
    assert in_use.next_states(state, push)[0, 1] > 0.5 + 0.001  # pushed, as the data show
    with pytest.raises(ValueError, match="still_measured_on"):
        EnsembleConfig(still_measured_on="some")


def test_a_stored_ensemble_is_read_back_instead_of_fitted_again(tmp_path, monkeypatch, caplog):
    """``fit_ensemble_on`` stores the seeded fit under the cache, keyed by the real file and
    the settings: the next call reads it back (the same next states and confidences, no fit),
    other settings fit anew, and an unreadable stored file is fitted again, not trusted."""
    from imaginebench.data.hdf5 import save_dataset
    from imaginebench.imagination.score import fit_ensemble_on

    cheetah, _ = collect("halfcheetah", "train", 3, seed=0, progress=False)
    real = tmp_path / "real.h5"
    save_dataset(cheetah, real)
    settings = EnsembleConfig(members=2, hidden=(16,), max_steps=20, eval_every=10)
    first, how = fit_ensemble_on(real, settings, False, cache_dir=tmp_path)
    (stored,) = (tmp_path / "ensembles").glob("halfcheetah_*.pt")
    fits = []
    original_fit = TransitionEnsemble.fit.__func__
    monkeypatch.setattr(
        TransitionEnsemble,
        "fit",
        classmethod(lambda cls, *a, **k: fits.append(1) or original_fit(cls, *a, **k)),
    )
    again, how_again = fit_ensemble_on(real, settings, False, cache_dir=tmp_path)
    assert fits == [] and how_again == how
    before, after = cheetah.transition_indices()
    states, actions = cheetah.states[before], cheetah.actions
    np.testing.assert_array_equal(
        again.next_states(states, actions), first.next_states(states, actions)
    )
    np.testing.assert_array_equal(again.confidence(cheetah), first.confidence(cheetah))
    other = EnsembleConfig(members=2, hidden=(16,), max_steps=20, eval_every=10, seed=1)
    fit_ensemble_on(real, other, False, cache_dir=tmp_path)
    assert fits == [1] and len(list((tmp_path / "ensembles").glob("*.pt"))) == 2
    stored.write_bytes(b"not a checkpoint")
    with caplog.at_level("WARNING"):
        refitted, _ = fit_ensemble_on(real, settings, False, cache_dir=tmp_path)
    assert fits == [1, 1] and "fitting again" in caplog.text
    np.testing.assert_array_equal(refitted.confidence(cheetah), first.confidence(cheetah))
