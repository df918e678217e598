"""HalfCheetah experts: skill rewards, task-to-skill composition, shipped weights solve tasks."""

from __future__ import annotations

import json

import mujoco
import numpy as np
import pytest
import torch

from imaginebench.data.shipped import verify_manifest
from imaginebench.envs import make
from imaginebench.envs.halfcheetah.env import episode_rewards
from imaginebench.envs.halfcheetah.physics import DT, ROOTZ, clearance, load_model, set_state
from imaginebench.envs.halfcheetah.tasks import Jump, JumpInPlace, Run, Shuttle
from imaginebench.experts import make_expert
from imaginebench.experts.halfcheetah import (
    JUMP_HEIGHT_WEIGHT,
    MANIFEST,
    SKILLS,
    WEIGHTS_DIR,
    HalfCheetahExpert,
    SkillEnv,
    load_actor,
    save_actor,
    skill_for,
)
from imaginebench.experts.online_sac import OnlineSACConfig, make_agent


def _states_with_dx(dx: list[float]) -> np.ndarray:
    states = np.zeros((len(dx) + 1, 18), dtype=np.float32)
    states[1:, 0] = dx
    return states


def test_tasks_map_to_skills_and_shuttles_turn_after_3_5_m():
    assert skill_for(Run("forward", fast=True), []) == "run_forward"
    assert skill_for(Run("backward"), []) == "run_backward"
    assert skill_for(Jump("backward"), []) == "jump_backward"
    assert skill_for(JumpInPlace(), []) == "jump_in_place"
    out = _states_with_dx([0.5] * 6)  # 3.0 m out: keep going
    assert skill_for(Shuttle("forward"), out) == "run_forward"
    turned = _states_with_dx([0.5] * 7 + [-0.2])  # peaked at 3.5 m: come back
    assert skill_for(Shuttle("forward"), turned) == "run_backward"
    back = _states_with_dx([-0.5] * 7)
    assert skill_for(Shuttle("backward"), back) == "run_forward"
    assert skill_for(Shuttle("backward"), back[:4]) == "run_backward"
    with pytest.raises(ValueError, match="unknown HalfCheetah skill"):
        SkillEnv("moonwalk")


def test_run_skill_reward_is_the_run_tasks_reward():
    env = SkillEnv("run_backward")
    state = env.reset(np.random.default_rng(0))
    action = np.full(6, 0.5, dtype=np.float32)
    next_state, reward = env.step(action)
    expected = episode_rewards(Run("backward"), np.stack([state, next_state]), action[None])
    assert reward == pytest.approx(float(expected[0]), rel=1e-5)


def test_jump_skill_rewards_height_only_in_flight():
    env = SkillEnv("jump_in_place")
    env.reset(np.random.default_rng(0))
    for _ in range(30):  # settle on the floor with zero torques
        _, reward = env.step(np.zeros(6, dtype=np.float32))
    assert abs(reward) < 0.5  # no height reward standing still
    # Lifted 1 m and let go: the reward is the height weight times the lowest point's clearance
    # (x drifts ~1e-3 m while falling, which the in-place term charges at 1 per m / DT).
    lifted = env.sim.data.qpos.copy()
    lifted[ROOTZ] += 1.0
    set_state(env.sim.model, env.sim.data, np.concatenate([[0.0], lifted[1:], np.zeros(9)]))
    state, reward = env.step(np.zeros(6, dtype=np.float32))
    height = float(clearance(state))
    assert height > 0.8
    assert reward == pytest.approx(JUMP_HEIGHT_WEIGHT * height - abs(float(state[0])) / DT)


def _mujoco_lowest_point(state: np.ndarray) -> float:
    """Height of the body's lowest point by MuJoCo's own kinematics (not :func:`clearance`)."""
    model = load_model()
    data = mujoco.MjData(model)
    set_state(model, data, state)
    lowest = np.inf
    for g in range(1, model.ngeom):  # every capsule (geom 0 is the floor)
        half = data.geom_xmat[g].reshape(3, 3)[2, 2] * model.geom_size[g, 1]
        lowest = min(lowest, data.geom_xpos[g, 2] - abs(half) - model.geom_size[g, 0])
    return float(lowest)


@pytest.mark.parametrize(
    "skill, speed_term",  # the speed term at v = +1 m/s: +-0.5 v for the jumps, -|v| in place
    [("jump_forward", 0.5), ("jump_backward", -0.5), ("jump_in_place", -1.0)],
)
@pytest.mark.parametrize("clearance_m, height_term", [(0.4, 4.0), (-0.01, 0.0)])
def test_jump_skill_reward_of_a_constructed_state(
    skill: str, speed_term: float, clearance_m: float, height_term: float
) -> None:
    """Zero pose with its lowest point 0.4 m above the floor (in flight) or 1 cm into it, 5 cm
    forward in one step (v = 1 m/s), action 0.5 on every joint (control cost 0.1 * 6 * 0.25):
    reward = 10 * max(h, 0) + speed term - 0.15."""
    state = np.zeros(18)
    state[ROOTZ] = clearance_m - _mujoco_lowest_point(state)  # the zero pose's offset
    assert _mujoco_lowest_point(state) == pytest.approx(clearance_m, abs=1e-12)
    state[0] = 1.0 * DT
    action = np.full(6, 0.5, dtype=np.float32)
    reward = SKILLS[skill](action, state.astype(np.float32))
    assert reward == pytest.approx(height_term + speed_term - 0.15, abs=1e-5)
    if skill == "jump_in_place":  # |v|: running backwards costs the same
        state[0] = -1.0 * DT
        reward = SKILLS[skill](action, state.astype(np.float32))
        assert reward == pytest.approx(height_term + speed_term - 0.15, abs=1e-5)


def test_actor_round_trip_is_exact_up_to_float16(tmp_path):
    agent = make_agent(18, 6, OnlineSACConfig(hidden=(32, 32)))
    path = tmp_path / "run_forward.pt"
    save_actor(agent, path, {"skill": "run_forward"})
    actor, instruction = load_actor(path)
    state = torch.randn(5, 18)
    with torch.no_grad():
        ours = actor(state, instruction.expand(5, -1))
        theirs = agent.actor(state, torch.zeros(5, agent.embedding_dim))
    torch.testing.assert_close(ours, theirs, atol=5e-3, rtol=0)
    with pytest.raises(FileNotFoundError, match="train-expert"):
        load_actor(tmp_path / "jump_forward.pt")


def test_shipped_weights_match_their_manifest():
    manifest = json.loads((WEIGHTS_DIR / MANIFEST).read_text())["files"]
    assert set(manifest) == {f"{skill}.pt" for skill in SKILLS}
    verify_manifest(WEIGHTS_DIR)  # every file present with its recorded SHA-256
    for entry in manifest.values():
        assert "imaginebench train-expert" in entry["command"]


@pytest.mark.parametrize(
    "task",
    [
        Run("forward", fast=True),
        Run("backward", fast=True),
        Jump("forward"),
        Jump("backward"),
        JumpInPlace(),
        Shuttle("forward"),
        Shuttle("backward"),
    ],
    ids=lambda t: t.spec(),
)
def test_shipped_expert_solves_every_task(task):
    env = make("halfcheetah", "hard").unwrapped
    expert = make_expert("halfcheetah", seed=0)
    assert isinstance(expert, HalfCheetahExpert)
    solved = 0
    for seed in range(3):
        env.reset(seed=seed, options={"task": task.spec()})
        done = False
        while not done:
            _, _, terminated, truncated, info = env.step(expert.act(env))
            done = terminated or truncated
        solved += info["is_success"]
    assert solved >= 2, f"{task.spec()}: {solved}/3"


@pytest.mark.parametrize("direction", ["forward", "backward"])
def test_training_runs_are_paced_below_the_faster_runs(direction):
    """The training tasks' runs reach 7 m at step 99 without ever running at the 8.5 m pace of
    "faster" (so the real data shows no faster run); the faster runs do run at that pace."""
    env = make("halfcheetah", "easy", max_episode_steps=99).unwrapped
    expert = make_expert("halfcheetah", seed=0)
    for task in (Run(direction), Run(direction, fast=True)):
        covered = []
        for seed in range(3):
            env.reset(seed=seed, options={"task": task.spec()})
            for _ in range(99):
                state, *_ = env.step(expert.act(env))
            trajectory = np.stack(env.trajectory)
            covered.append(float(Run(direction).progress(trajectory)[-1]))
            paced = Run(direction, fast=True).success(trajectory).any()
            assert paced == task.fast, (task, covered)
        if task.fast:
            assert min(covered) > 8.5, covered
        else:
            assert 7.0 < min(covered) and max(covered) < 8.5, covered
