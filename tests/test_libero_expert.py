"""The scripted LIBERO expert: its plan per task, its waypoint commands, and solving a sample of
task families in the simulator (one episode each)."""

from __future__ import annotations

import numpy as np
import pytest
from test_libero_tasks import HOME, history

from imaginebench.envs.libero.starts import HAND_DOWN
from imaginebench.envs.libero.tasks import LiberoTask
from imaginebench.experts import expert_class, make_expert
from imaginebench.experts.libero import MAX_COMMAND, Job, LiberoExpert, jobs, move


def test_plans_and_registry():
    assert expert_class("libero") is LiberoExpert
    assert jobs(LiberoTask("sequential-pick-and-place-all")) == tuple(
        Job(obj, "basket") for obj in ("alphabet_soup", "cream_cheese", "salad_dressing")
    )
    assert jobs(LiberoTask("pick-cream_cheese-and-place-to-salad_dressing")) == (
        Job("cream_cheese", "beside:salad_dressing"),
    )
    with pytest.raises(ValueError, match="epsilon"):
        LiberoExpert(epsilon=1.5)


def test_move_commands_the_remaining_distance_capped():
    state = history({"eef": [0.0, 0.0, 0.2]})[0]
    state[10:14] = HAND_DOWN
    near = move(state, [0.01, 0.0, 0.2], HAND_DOWN, 1.0)
    np.testing.assert_allclose(near, [0.2, 0, 0, 0, 0, 0, 1.0], atol=1e-9)  # 1 cm of 5 cm
    far = move(state, [0.0, -0.5, 0.2], HAND_DOWN, -1.0)
    assert far[1] == pytest.approx(-MAX_COMMAND) and far[6] == -1.0
    # a hand turned 0.2 rad about z is turned back about -z
    turned = state.copy()
    turned[10:14] = [np.cos(0.1), np.sin(0.1), 0.0, 0.0]  # (1, 0, 0, 0) after 0.2 rad about z
    assert move(turned, state[7:10], HAND_DOWN, 0.0)[5] == pytest.approx(-0.4, abs=1e-6)
    assert HOME  # the layout the tasks test builds states on


@pytest.fixture(scope="module")
def env():
    pytest.importorskip("libero.libero", reason="needs the libero extra")
    from imaginebench.envs import make

    env = make("libero", "hard").unwrapped
    yield env
    env.close()


@pytest.mark.slow
@pytest.mark.parametrize(
    "name",
    [
        "pick-salad_dressing",
        "place-cream_cheese",
        "reach-alphabet_soup",
        "pick-cream_cheese-and-place-to-alphabet_soup",
        "pick-and-place-aside-alphabet_soup",
        "pick-out-of-salad_dressing",
    ],
)
def test_expert_solves_a_task_of_each_family(env, name):
    expert = make_expert("libero", seed=0)
    env.reset(seed=7, options={"task": LiberoTask(name)})
    for _ in range(300):
        _, _, terminated, truncated, _ = env.step(expert.act(env))
        if terminated or truncated:
            break
    assert terminated, (name, expert.job, expert.phase)
