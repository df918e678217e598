"""The mocap target rebuilt from a Meta-World rollout's actions, and the dynamics ensemble that
takes it as an input: the constants are metaworld's, the rebuilt target is the simulator's
to float precision along expert and random rollouts (clipping at the box included), and the
ensemble scores a dataset and single transitions alike."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("metaworld")

from imaginebench.envs import get_domain, make  # noqa: E402
from imaginebench.envs.metaworld.mocap import (  # noqa: E402
    ACTION_SCALE,
    MOCAP,
    dynamics_context,
    mocap_targets,
)
from imaginebench.envs.metaworld.scenes import SCENE_CLASSES, Scene  # noqa: E402


def test_the_constants_are_metaworlds_for_every_task():
    assert set(MOCAP) == set(SCENE_CLASSES)
    for name in SCENE_CLASSES:
        sim = Scene(name).sim
        low, high, start = MOCAP[name]
        np.testing.assert_allclose(low, sim.mocap_low, atol=1e-6)
        np.testing.assert_allclose(high, sim.mocap_high, atol=1e-6)
        np.testing.assert_allclose(start, sim.hand_init_pos, atol=1e-6)
        assert sim.action_scale == ACTION_SCALE


@pytest.mark.parametrize("policy", ["expert", "down"])
def test_the_rebuilt_target_is_the_simulators(policy):
    """Along whole episodes (``down`` pushes the target into the box's floor, where it is
    clipped, with random x and y), the target after each action equals the simulator's mocap
    position."""
    from imaginebench.experts.metaworld import MetaWorldExpert

    env = make("metaworld", "train").unwrapped
    expert, rng = MetaWorldExpert(), np.random.default_rng(0)
    for seed in range(3):
        state, _ = env.reset(seed=seed)
        states, actions, targets = [state], [], []
        for _ in range(60 if policy == "expert" else 100):
            action = expert.act(env) if policy == "expert" else rng.uniform(-1, 1, 4)
            if policy == "down":
                action[2] = -1.0
            state, _, terminated, _, _ = env.step(action)
            actions.append(action)
            targets.append(env.scene.sim.data.mocap_pos[0].copy())
            states.append(state)
            if terminated:
                break
        rebuilt = mocap_targets(env.task.name, np.array(actions))
        np.testing.assert_allclose(rebuilt, np.array(targets), atol=1e-6)
        if policy == "down":  # the floor of the box held the target
            assert np.isclose(rebuilt[-1, 2], MOCAP[env.task.name][0][2])
        context = dynamics_context(env.task, np.array(states[:-1]), np.array(actions))
        assert context.shape == (len(actions), 91 + 3)
        np.testing.assert_array_equal(context[0, :91], 0)  # no change before the first step
        np.testing.assert_allclose(context[1:, :91], np.diff(states[:-1], axis=0), atol=1e-6)
        np.testing.assert_allclose(
            context[:, 91:], rebuilt - np.array(states[:-1])[:, :3], atol=1e-5
        )
    env.close()
    with pytest.raises(ValueError, match="no mocap constants"):
        mocap_targets("open-the-fridge", np.zeros((1, 4)))
    with pytest.raises(ValueError, match="2 states before transitions, 1 actions"):
        dynamics_context(env.task, np.zeros((2, 91)), np.zeros((1, 4)))


def test_the_ensemble_scores_a_dataset_and_single_transitions_alike(tmp_path):
    """Fitted with the domain's context, the ensemble needs it for single transitions, and
    scoring a dataset equals scoring its transitions one call at a time with their context;
    stored and read back, it scores the same (and refuses to load without the context)."""
    from imaginebench.data.collect import collect
    from imaginebench.imagination.confidence import (
        EnsembleConfig,
        TransitionEnsemble,
        dataset_context,
    )

    real = collect("metaworld", "train", 6, seed=0, epsilon=0.1, progress=False)[0]
    hook = get_domain("metaworld").dynamics_context
    settings = {"members": 2, "hidden": [32], "max_steps": 30, "eval_every": 10}
    scorer = TransitionEnsemble.fit(real, settings, context=hook)
    context = dataset_context(real, hook)
    assert context.shape == (real.num_transitions, 94)
    before, after = real.transition_indices()
    states = np.asarray(real.states)
    single = scorer.transition_confidence(
        states[before], np.asarray(real.actions), states[after], context
    )
    np.testing.assert_allclose(scorer.confidence(real), single, atol=1e-6)
    with pytest.raises(ValueError, match="pass it"):
        scorer.next_states(states[before], np.asarray(real.actions))
    assert scorer.next_states(states[before], np.asarray(real.actions), context).shape == (
        real.num_transitions,
        91,
    )
    scorer.save(tmp_path / "ensemble.pt")
    config = EnsembleConfig(**settings)
    restored = TransitionEnsemble.load(tmp_path / "ensemble.pt", config, hook)
    np.testing.assert_array_equal(restored.confidence(real), scorer.confidence(real))
    with pytest.raises(ValueError, match="with a dynamics context"):
        TransitionEnsemble.load(tmp_path / "ensemble.pt", config)


def test_each_member_rolls_the_actions_forward_on_its_own_predictions():
    """``member_rollouts`` gives member ``m`` the rollout that stepping ``next_states`` with
    ``member=m`` gives, each step's context taken from that member's own rollout so far; the
    members' rollouts part (they are different models), and an unknown member is refused."""
    from imaginebench.data.collect import collect
    from imaginebench.envs.base import Task
    from imaginebench.imagination.confidence import TransitionEnsemble

    real = collect("metaworld", "train", 4, seed=0, epsilon=0.1, progress=False)[0]
    hook = get_domain("metaworld").dynamics_context
    settings = {"members": 3, "hidden": [32], "max_steps": 30, "eval_every": 10}
    scorer = TransitionEnsemble.fit(real, settings, context=hook)
    episode = real.episode(0)
    task = Task.from_spec(episode.task_spec)
    actions = np.asarray(episode.actions)[:12]
    rollouts = scorer.member_rollouts(task, episode.states[0], actions)
    assert rollouts.shape == (3, 13, 91)
    for m in range(3):
        states = [np.asarray(episode.states[0], np.float32)]
        for t in range(len(actions)):
            context = hook(task, np.stack(states), actions[: t + 1])[-1:]
            states.append(
                scorer.next_states(states[-1][None], actions[t : t + 1], context, member=m)[0]
            )
        np.testing.assert_allclose(rollouts[m], np.stack(states), atol=1e-5)
    assert np.abs(rollouts[0, -1] - rollouts[1, -1]).max() > 1e-4
    with pytest.raises(ValueError, match="member 3 of an ensemble of 3"):
        scorer.next_states(
            episode.states[:1], actions[:1], hook(task, episode.states[:1], actions[:1]), member=3
        )


def test_the_continuation_gives_each_candidate_its_paths_context():
    """Continued from a rollout's history along candidate plans, ``MocapContinuation`` gives
    at every step the context ``dynamics_context`` gives for each candidate's whole path,
    clipping at the mocap box included."""
    from imaginebench.envs.metaworld.mocap import MocapContinuation
    from imaginebench.envs.metaworld.tasks import MetaWorldTask

    rng = np.random.default_rng(0)
    task = MetaWorldTask("door-unlock")
    for t in (0, 1, 7):
        history = rng.normal(size=(t + 1, 91))
        taken = rng.uniform(-1, 1, size=(t, 4))
        candidates, horizon = 4, 5
        plans = rng.uniform(-3, 3, size=(candidates, horizon, 4))  # beyond [-1, 1]: clipped
        futures = rng.normal(size=(candidates, horizon, 91))
        continuation = MocapContinuation(task, history, taken, candidates)
        state = np.repeat(history[-1:], candidates, axis=0)
        for h in range(horizon):
            context = continuation.step(state, plans[:, h])
            for c in range(candidates):
                path = np.concatenate([history, futures[c, :h]])
                actions = np.concatenate([taken, plans[c, : h + 1]])
                expected = dynamics_context(task, path, actions)[-1]
                np.testing.assert_allclose(context[c], expected, atol=1e-6)
            state = futures[:, h]
    with pytest.raises(ValueError, match="2 states need 1 actions"):
        MocapContinuation(task, np.zeros((2, 91)), np.zeros((0, 4)), 3)


def test_the_lookahead_searches_with_each_candidates_mocap_context():
    """With Meta-World's state model, the lookahead gives every candidate plan its own mocap
    context: told to reach, the searched actions pull the hand towards the goal and bring the
    imagined hand closer to it than the proposed zero actions, unsearched, leave it; without
    the domain's plan_context the lookahead is refused."""
    import torch

    from imaginebench.data.collect import collect
    from imaginebench.envs.base import Task
    from imaginebench.envs.metaworld.layout import TARGET, tcp
    from imaginebench.imagination.confidence import TransitionEnsemble
    from imaginebench.imagination.lookahead import Lookahead, LookaheadConfig

    real = collect("metaworld", "train", 10, seed=0, epsilon=0.1, progress=False)[0]
    domain = get_domain("metaworld")
    settings = {"members": 2, "hidden": [64, 64], "max_steps": 600, "eval_every": 200}
    scorer = TransitionEnsemble.fit(real, settings, context=domain.dynamics_context)
    config = LookaheadConfig(horizon=4, candidates=32, elites=6, iterations=2, spread_penalty=0)
    with pytest.raises(ValueError, match="plan_context"):
        Lookahead(scorer, config)
    lookahead = Lookahead(scorer, config, plan_context=domain.plan_context)
    episodes = [real.episode(i) for i in range(len(real))]
    reach = [e for e in episodes if Task.from_spec(e.task_spec).name == "reach"][:2]
    assert reach, "the collected data should hold reach episodes"
    task = Task.from_spec(reach[0].task_spec)
    generator = torch.Generator().manual_seed(0)
    rows, STEPS = list(range(len(reach))), 15
    states = [[np.asarray(e.states[0], np.float32)] for e in reach]
    actions: list[list[np.ndarray]] = [[] for _ in reach]
    for _ in range(STEPS):
        past = [np.stack(s) for s in states]
        taken = [np.stack(a) if a else np.zeros((0, 4), np.float32) for a in actions]
        proposed = np.zeros((len(rows), 4), np.float32)
        action = lookahead.refine(rows, [task] * len(rows), past, proposed, generator, taken)
        for row in rows:
            context = domain.dynamics_context(task, past[row], np.stack([*taken[row], action[row]]))
            nxt = scorer.next_states(past[row][-1:], action[row : row + 1], context[-1:])[0]
            states[row].append(nxt)
            actions[row].append(action[row])

    def gap(path):  # the hand's distance to reach's goal at the end
        return np.linalg.norm(tcp(path[-1]) - path[-1][TARGET])

    searched = np.array([gap(s) for s in states])
    still = []  # the proposed zero actions, unsearched, in the same state model
    for episode in reach:
        path, zeros = [np.asarray(episode.states[0], np.float32)], np.zeros((STEPS, 4), np.float32)
        for t in range(STEPS):
            context = domain.dynamics_context(task, np.stack(path), zeros[: t + 1])
            path.append(scorer.next_states(path[-1][None], zeros[t : t + 1], context[-1:])[0])
        still.append(gap(path))
    assert (searched < np.array(still)).all(), (still, searched)
    for row, episode in enumerate(reach):  # and the searched actions pull the hand goalwards
        start = np.asarray(episode.states[0])
        way = start[TARGET] - tcp(start)
        pull = np.stack(actions[row])[:, :3].sum(0)
        assert way @ pull / np.linalg.norm(way) / np.linalg.norm(pull) > 0.7
    with pytest.raises(ValueError, match="actions taken so far"):
        lookahead.refine(rows, [task] * len(rows), past, proposed, generator)
