"""The lookahead: a search in the real-data dynamics ensemble that steers each imagined action
towards its rollout's own task (imaginebench.imagination.lookahead)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from imaginebench.data.collect import collect
from imaginebench.envs.halfcheetah.tasks import Run, displacement
from imaginebench.imagination.confidence import TransitionEnsemble
from imaginebench.imagination.decoder import Imaginer
from imaginebench.imagination.lookahead import Lookahead, LookaheadConfig

SMALL = LookaheadConfig(horizon=5, candidates=48, elites=8, iterations=2, spread_penalty=0.0)


@pytest.fixture(scope="module")
def cheetah():
    """Real HalfCheetah expert episodes and a small ensemble fitted on them."""
    real, _ = collect("halfcheetah", "train", 12, seed=0, epsilon=0.1, progress=False)
    ensemble = TransitionEnsemble.fit(real, {"max_steps": 1500, "hidden": (64, 64), "members": 3})
    return real, ensemble


def _imagine(ensemble, lookahead, task, starts, steps, seed=0):
    """Roll ``steps`` actions forward in the ensemble, each the lookahead's refinement of a
    zero torque: the imagined states ``(B, steps + 1, D)`` and the members' disagreement about
    each step taken ``(B, steps)``."""
    generator = torch.Generator().manual_seed(seed)
    histories = [[np.asarray(s, np.float32)] for s in starts]
    rows, spreads = list(range(len(starts))), []
    for _ in range(steps):
        proposed = np.zeros((len(starts), 6), np.float32)
        past = [np.stack(h) for h in histories]
        action = lookahead.refine(rows, [task] * len(rows), past, proposed, generator)
        assert action.shape == (len(starts), 6) and np.abs(action).max() <= 1.0
        current = np.stack([p[-1] for p in past])
        nxt, spread = ensemble.step_with_spread(current, action)
        np.testing.assert_allclose(nxt, ensemble.next_states(current, action), atol=1e-6)
        spreads.append(spread)
        for h, s in zip(histories, nxt):
            h.append(s)
    return np.stack([np.stack(h) for h in histories]), np.stack(spreads, axis=1)


def _starts(real, n=3):
    return [real.episode(i).states[0] for i in range(n)]


def test_the_search_moves_the_imagined_cheetah_the_way_its_task_asks(cheetah):
    """Told to run forward the searched actions carry the imagined cheetah forward, told to
    run backward, backward; both beyond where zero torques leave it."""
    real, ensemble = cheetah
    starts = _starts(real)
    forward, _ = _imagine(ensemble, Lookahead(ensemble, SMALL), Run("forward"), starts, 25)
    backward, _ = _imagine(ensemble, Lookahead(ensemble, SMALL), Run("backward"), starts, 25)
    still = np.stack([starts] * 26, axis=1).astype(np.float32)
    for t in range(25):
        still[:, t + 1] = ensemble.next_states(still[:, t], np.zeros((len(starts), 6), np.float32))
    ahead, behind, idle = (displacement(x)[:, -1] for x in (forward, backward, still))
    assert (ahead > idle + 0.3).all(), (ahead, idle)
    assert (behind < idle - 0.3).all(), (behind, idle)


def test_plans_avoid_states_the_legality_rule_rejects(cheetah):
    """A rule that forbids any forward step leaves the run-forward search nothing to gain by
    moving forward: the imagined cheetah covers far less ground than without the rule."""
    real, ensemble = cheetah
    starts = _starts(real)

    def no_forward_step(states):
        return np.asarray(states)[:, 0] <= 0.0

    free, _ = _imagine(ensemble, Lookahead(ensemble, SMALL), Run("forward"), starts, 20)
    ruled = Lookahead(ensemble, SMALL, legal=no_forward_step)
    held, _ = _imagine(ensemble, ruled, Run("forward"), starts, 20)
    assert (displacement(held)[:, -1] < displacement(free)[:, -1] - 0.3).all()


def test_the_spread_penalty_keeps_plans_where_the_members_agree(cheetah):
    """With the disagreement penalised, the imagined path takes steps the ensemble's members
    agree on more than without it."""
    real, ensemble = cheetah
    starts = _starts(real)
    careful = dataclasses.replace(SMALL, spread_penalty=1.0)
    _, free = _imagine(ensemble, Lookahead(ensemble, SMALL), Run("forward"), starts, 20)
    _, kept = _imagine(ensemble, Lookahead(ensemble, careful), Run("forward"), starts, 20)
    assert kept.mean() < 0.8 * free.mean(), (kept.mean(), free.mean())


def test_the_search_is_seeded_and_keeps_each_rollouts_plan(cheetah):
    """The same generator seed gives the same actions; a rollout's plan is kept under its own
    key and forgotten by reset()."""
    real, ensemble = cheetah
    starts = _starts(real, 2)
    a, _ = _imagine(ensemble, Lookahead(ensemble, SMALL), Run("forward"), starts, 4, seed=3)
    b, _ = _imagine(ensemble, Lookahead(ensemble, SMALL), Run("forward"), starts, 4, seed=3)
    np.testing.assert_array_equal(a, b)
    lookahead = Lookahead(ensemble, SMALL)
    lookahead.refine(
        [7, 9],
        [Run("forward")] * 2,
        [s[None] for s in starts],
        np.zeros((2, 6), np.float32),
        torch.Generator().manual_seed(0),
    )
    assert sorted(lookahead.plans) == [7, 9] and lookahead.plans[7].shape == (5, 6)
    lookahead.reset()
    assert lookahead.plans == {}


@pytest.mark.parametrize(
    "field,value,message",
    [
        ("horizon", -1, "horizon must be >= 0"),
        ("candidates", 1, "candidates must be >= 2"),
        ("elites", 0, "elites must be in 1..candidates"),
        ("iterations", 0, "iterations must be >= 1"),
        ("noise", 0.0, "noise must be > 0"),
        ("spread_penalty", float("nan"), "spread_penalty must be >= 0"),
    ],
)
def test_bad_settings_are_refused(field, value, message):
    with pytest.raises(ValueError, match=message):
        LookaheadConfig(**{field: value})


def test_the_lookahead_needs_a_horizon_continuous_actions_and_a_state_model(cheetah):
    _, ensemble = cheetah
    with pytest.raises(ValueError, match="horizon >= 1"):
        Lookahead(ensemble, LookaheadConfig())

    class Discrete:  # only what Imaginer reads before it refuses
        class model:
            hidden_action = None

        builder = None
        action_spec = {"type": "discrete", "n": 4}

    with pytest.raises(ValueError, match="continuous actions and dynamics"):
        Imaginer(Discrete(), lookahead=Lookahead(ensemble, SMALL), dynamics=ensemble.next_states)
