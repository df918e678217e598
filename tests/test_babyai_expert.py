"""The scripted BabyAI expert, the quality judge, and collection through the CLI."""

import numpy as np
import pytest

from imaginebench.cli import main
from imaginebench.data.collect import collect
from imaginebench.data.format import load_dataset
from imaginebench.envs import get_domain, make
from imaginebench.envs.babyai.tasks import PutLine, PutNext, PutPile
from imaginebench.envs.babyai.world import CLOSED, LOCKED, OPEN, Action, compose_state, transition
from imaginebench.envs.base import EpisodeSpec
from imaginebench.experts.babyai import BabyAIExpert, navigate
from imaginebench.imagination.quality import quality_report


def layout(agent=(3, 3), door=(3, CLOSED), carried=None, ball=(2, 2), box=(4, 5), key=(5, 2)):
    return compose_state(
        ball=("red", *ball),
        box=("green", *box),
        key=("blue", *key),
        door=("blue", *door),
        agent=agent,
        carried=carried,
    )


@pytest.mark.parametrize("level", ["train", "rephrase", "easy", "hard"])
def test_expert_solves_every_level(level):
    data, stats = collect("babyai", level, 40, seed=3, progress=False)
    assert stats.success_rate == 1.0
    assert max(np.diff(data.episode_offsets)) < 40  # far inside the 128-step limit
    judge = get_domain("babyai").make_quality()
    for i in range(len(data)):
        ep = data.episode(i)
        assert judge.legal(ep.states).all()
        assert judge.correct_transitions(ep.states, ep.actions).all()
        assert judge.exact_transitions(ep.states, ep.actions).all()


def test_noisy_expert_still_succeeds_and_is_seeded():
    a, stats = collect("babyai", "hard", 30, seed=1, epsilon=0.2, progress=False)
    b, _ = collect("babyai", "hard", 30, seed=1, epsilon=0.2, progress=False)
    assert stats.success_rate >= 0.95
    np.testing.assert_array_equal(a.actions, b.actions)
    report = quality_report("babyai", "hard", [a.episode(i) for i in range(len(a))])
    assert report.legality == 1.0 and report.transition_correctness == 1.0


def run(task, start, epsilon=0.0):
    env = make("babyai", "hard").unwrapped
    env.reset(options={"episode": EpisodeSpec(task, "x", start, "hard")})
    expert = BabyAIExpert(epsilon=epsilon, seed=0)
    for _ in range(128):
        *_, terminated, truncated, _ = env.step(expert.act(env))
        if terminated or truncated:
            break
    return env, terminated


def test_expert_drops_a_wrong_object_and_handles_crowded_pile_corners():
    held_box = layout(agent=(1, 1), carried="box")
    env, ok = run(PutNext("ball", "red", "key", "blue"), held_box)
    assert ok
    corner = layout(ball=(1, 1), box=(1, 2), key=(1, 3), agent=(6, 6))  # a row: must break it
    env, ok = run(PutPile(), corner)
    assert ok and len(env.trajectory) < 30
    column = layout(ball=(1, 4), box=(2, 4), key=(6, 1), agent=(6, 6))
    env, ok = run(PutLine(), column)
    assert ok and env.trajectory[-1][1:3].tolist() == [1, 4]  # kept the items already in line


def test_navigate_bfs():
    assert navigate((3, 3), [(3, 3)]) is None
    assert navigate((3, 3), [(3, 6)]) == Action.RIGHT
    assert navigate((3, 3), [(1, 3), (6, 6)]) == Action.UP
    with pytest.raises(ValueError):
        navigate((3, 3), [(0, 0)])  # a wall cell is never reachable


def test_quality_judge_flags_illegal_states_and_transitions():
    judge = get_domain("babyai").make_quality()
    s = layout()
    overlap = s.copy()
    overlap[1:3] = overlap[4:6]
    assert judge.legal(np.stack([s, overlap])).tolist() == [True, False]

    def ok(a, b, action=0):
        return bool(judge.correct_transitions(np.stack([a, b]), np.array([action]))[0])

    assert ok(s, transition(s, Action.UP)) and ok(s, s)  # a move and a no-op
    jump = layout(agent=(3, 5))
    assert not ok(s, jump)  # two cells in one step
    pushed = layout(ball=(2, 3))
    assert not ok(s, pushed)  # an object moved by itself
    near = layout(agent=(2, 3))
    assert not ok(near, layout(agent=(2, 3), carried="ball"))  # picked up from a neighbour cell
    on = layout(agent=(2, 2))
    assert ok(on, layout(agent=(2, 2), carried="ball"))
    assert not ok(layout(agent=(4, 4), carried="ball"), layout(agent=(4, 4), ball=(4, 3)))
    assert not ok(s, layout(door=(3, OPEN)))  # toggled from afar
    front = layout(agent=(3, 6))
    assert ok(front, layout(agent=(3, 6), door=(3, OPEN)))
    locked = layout(agent=(3, 6), door=(3, LOCKED))
    assert not ok(locked, layout(agent=(3, 6), door=(3, OPEN)))  # no key
    recoloured = s.copy()
    recoloured[3] = 4
    assert not ok(s, recoloured)
    both = layout(agent=(3, 5), door=(3, OPEN))
    assert not ok(layout(agent=(3, 6)), both)  # moved and opened in one step
    illegal = overlap
    assert not ok(illegal, illegal)
    # exact replay also checks the recorded action
    pair = np.stack([s, transition(s, Action.UP)])
    assert judge.exact_transitions(pair, np.array([Action.UP])).all()
    assert not judge.exact_transitions(pair, np.array([Action.DOWN])).any()
    assert judge.correct_transitions(pair, np.array([Action.DOWN])).all()


def test_cli_collects_babyai(tmp_path):
    out = tmp_path / "b.h5"
    args = [
        "collect",
        "--domain",
        "babyai",
        "--level",
        "train",
        "--episodes",
        "8",
        "--out",
        str(out),
    ]
    assert main([*args, "--quiet"]) == 0
    ds = load_dataset(out)
    assert ds.domain == "babyai" and len(ds) == 8 and ds.states.shape[1] == 17
    assert ds.episode_success.all()
