"""The Meta-World gymnasium environment, its scenes and quality judge: registration, seeding,
the 91-d slot layout, rewards, termination, the compositions' scenes, the distractor option
and the replay judge on real and corrupted transitions."""

import gymnasium as gym
import numpy as np
import pytest

import imaginebench  # noqa: F401  (registers the ids)
from imaginebench.envs import get_domain, make
from imaginebench.envs.base import EpisodeSpec
from imaginebench.envs.metaworld.env import SUCCESS_REWARD, episode_rewards
from imaginebench.envs.metaworld.layout import (
    DISTRACTOR_RANGES,
    ENTITIES,
    TASK_ENTITIES,
    TASK_NAMES,
    entity_slice,
)
from imaginebench.envs.metaworld.quality import MetaWorldQuality, filled_entities
from imaginebench.envs.metaworld.scenes import Scene, compiled_model
from imaginebench.envs.metaworld.suite import MetaWorldTaskSuite
from imaginebench.envs.metaworld.tasks import (
    NAIL_REST_Y,
    UNLOCK_TO_OPEN_GOAL,
    MetaWorldTask,
)


@pytest.fixture(scope="module")
def env():
    return make("metaworld", "hard").unwrapped


@pytest.fixture(scope="module")
def suite():
    return MetaWorldTaskSuite()


def random_actions(n, seed=0):
    return np.random.default_rng(seed).uniform(-1, 1, size=(n, 4))


@pytest.mark.parametrize("level", ["train", "rephrase", "easy", "hard"])
def test_registered_and_seeded_resets_reproduce(level):
    env = gym.make("imaginebench/MetaWorld-v0", level=level)
    obs1, info1 = env.reset(seed=11)
    obs2, info2 = env.reset(seed=11)
    assert obs1.shape == (91,) and obs1.dtype == np.float32
    np.testing.assert_array_equal(obs1, obs2)
    assert info1 == info2 and info1["level"] == level and info1["instruction"]
    assert set(info1) == {"instruction", "task", "level", "is_success"}
    assert env.action_space.shape == (4,) and (env.action_space.low == -1).all()
    assert env.observation_space.contains(obs1)
    actions = random_actions(5)
    first = [env.step(a)[0] for a in actions]
    env.reset(seed=11)
    np.testing.assert_array_equal(first, [env.step(a)[0] for a in actions])
    assert not np.array_equal(obs1, env.reset(seed=12)[0])


def test_every_tasks_reset_state_fills_its_slots_only(suite):
    rng = np.random.default_rng(0)
    for name in TASK_NAMES:
        task = MetaWorldTask(name)
        state = suite.sample_initial_state(task, rng)
        assert filled_entities(state) == TASK_ENTITIES[name], name
        for entity in ENTITIES:
            if entity not in TASK_ENTITIES[name]:
                assert not state[entity_slice(entity)].any(), (name, entity)
        assert (state[:3] != 0).all() and 0.9 <= state[3] <= 1.0  # hand, open gripper
        assert not task.success(state[None])[0], f"{name} accomplished at reset"


def test_the_wall_is_the_second_object_of_the_wall_tasks(suite):
    rng = np.random.default_rng(1)
    for name in ("reach-wall", "push-wall", "pick-place-wall", "button-press-wall"):
        scene = Scene(name)
        state = scene.reset(scene.sample_rand_vec(rng))
        wall = scene.sim.data.body("wall")
        np.testing.assert_allclose(state[entity_slice("wall")], [*wall.xpos, *wall.xquat])
        assert state[entity_slice("wall")][3] == 1.0


def test_slots_carry_meta_worlds_own_observation():
    """The first entity slot is Meta-World's object reading, the target its goal, the hand and
    gripper its first four numbers (checked over steps of random actions)."""
    for name in ("pick-place", "door-open", "hammer"):
        env = make("metaworld", "hard").unwrapped
        env.reset(seed=0, options={"task": MetaWorldTask(name)})
        first, second = TASK_ENTITIES[name][0], TASK_ENTITIES[name][-1]
        for action in random_actions(10, seed=1):
            obs, *_ = env.step(action)
            raw = env.scene.sim._get_obs()
            np.testing.assert_allclose(obs[:4], raw[:4], atol=1e-6)
            np.testing.assert_allclose(obs[entity_slice(first)], raw[4:11], atol=1e-6)
            np.testing.assert_allclose(obs[4:7], raw[36:39], atol=1e-6)
            if name == "hammer":
                np.testing.assert_allclose(obs[entity_slice(second)], raw[11:18], atol=1e-6)


def test_constants_of_the_judges_match_the_simulator():
    hammer = Scene("hammer")
    hammer.reset(hammer.default_rand_vec())
    nail = hammer.sim.data.body("nail_link").xpos
    assert nail[1] == pytest.approx(NAIL_REST_Y, abs=1e-6)
    door = Scene("locked-door-open")
    state = door.reset(door.default_rand_vec())
    open_goal = door.door_pos() + [-0.3, -0.45, 0.0]
    np.testing.assert_allclose(state[4:7] + UNLOCK_TO_OPEN_GOAL, open_goal, atol=1e-6)


def test_rewards_terminate_and_truncate(env):
    task = MetaWorldTask("window-open")
    env.reset(seed=1, options={"task": task})
    actions = random_actions(100, seed=2) * 0.2
    rewards = []
    for t, action in enumerate(actions):
        _obs, reward, terminated, truncated, info = env.step(action)
        rewards.append(reward)
        assert not terminated and truncated == (t == 99) and info["is_success"] is False
    states = np.stack(env.trajectory)
    assert len(states) == 101
    np.testing.assert_allclose(episode_rewards(task, states, actions), rewards, atol=1e-5)
    np.testing.assert_allclose(
        get_domain("metaworld").episode_rewards(task, states, actions), rewards, atol=1e-5
    )


@pytest.mark.filterwarnings("ignore:Constant\\(s\\) may be too high")
def test_success_terminates_with_reward_10(env):
    from imaginebench.experts import make_expert

    task = MetaWorldTask("coffee-button")
    env.reset(seed=3, options={"task": task})
    expert = make_expert("metaworld")
    for _ in range(100):
        _obs, reward, terminated, truncated, info = env.step(expert.act(env))
        if terminated or truncated:
            break
    assert terminated and reward == SUCCESS_REWARD and info["is_success"] and not truncated
    states = np.stack(env.trajectory)
    assert task.success(states).tolist() == [False] * (len(states) - 1) + [True]
    assert env.scene.info["success"]  # Meta-World's own judge agrees


def test_reset_from_an_initial_state_and_bad_input(env, suite):
    task = MetaWorldTask("coffee-push")
    initial = suite.sample_initial_state(task, np.random.default_rng(5))
    spec = EpisodeSpec(task, "Push the mug under the coffee machine.", initial, "train")
    obs, info = env.reset(options={"episode": spec})
    np.testing.assert_allclose(obs, initial, atol=1e-6)
    assert info["instruction"] == spec.instruction and info["task"] == task.spec()
    obs, info = env.reset(options={"task": task.spec(), "initial_state": initial})
    np.testing.assert_allclose(obs, initial, atol=1e-6)
    assert info["instruction"] in task.instructions("train")  # the env's level is hard
    with pytest.raises(ValueError, match="initial_state"):
        env.reset(options={"task": task, "initial_state": np.zeros(90)})
    env.reset(seed=0)
    with pytest.raises(ValueError, match="4 finite"):
        env.step(np.zeros(3))
    with pytest.raises(ValueError, match="4 finite"):
        env.step(np.array([0, np.nan, 0, 0]))


def test_locked_door_scene_has_a_hinge_held_by_a_latch_until_unlocked():
    scene = Scene("locked-door-open")
    sim = scene.sim
    model, data = sim.model, sim.data
    initial = scene.reset(scene.default_rand_vec())
    for _ in range(30):  # the hand out of the door's way
        scene.step(np.array([-1.0, -1.0, 1.0, 0.0]))
    hinge = model.joint("doorjoint")
    lock_adr = int(model.jnt_qposadr[model.body("lock_link").jntadr[0]])
    assert data.qpos[lock_adr] == pytest.approx(1.5708, abs=1e-3)  # starts locked

    def pull(steps=20, torque=3.0):  # pull the door open (negative angle)
        for _ in range(steps):
            data.qfrc_applied[:] = 0.0
            data.qfrc_applied[hinge.dofadr[0]] = -torque
            scene.step(np.zeros(4))
        data.qfrc_applied[:] = 0.0
        return float(data.qpos[hinge.qposadr[0]])

    assert abs(pull()) < 0.01  # locked: the latch holds the door shut
    qpos = data.qpos.copy()
    qpos[lock_adr] = 0.0  # unlock
    sim.set_state(qpos, data.qvel.copy())
    unlocked = scene.state()
    assert pull() < -0.1  # the door swings open
    # ... far enough for the open goal (door-lock's own panel stops at the safe's wall, 0.66 rad)
    assert pull(60, torque=20.0) < -1.4
    states = np.stack([initial, unlocked, scene.state()])
    assert MetaWorldTask("locked-door-open").success(states)[-1]
    # door-unlock keeps the unmodified scene: it starts locked (the original's did not)
    unlock = Scene("door-unlock")
    unlock.reset(unlock.default_rand_vec())
    assert unlock.sim.data.qpos[9] == pytest.approx(1.5708, abs=1e-3)
    assert "doorjoint" not in [unlock.sim.model.joint(i).name for i in range(unlock.sim.model.njnt)]


@pytest.mark.parametrize("name", ["door-open", "locked-door-open"])
def test_simulators_of_one_task_run_independent_copies_of_the_compiled_model(name):
    # Meta-World's resets move bodies of the model (the door): one simulator's reset must not
    # move another's door, nor the compiled model that later simulators copy.
    compiled = compiled_model(Scene(name).sim.fullpath, name == "locked-door-open")
    compiled_door = compiled.body("door").pos.copy()
    first, second = Scene(name), Scene(name)
    rng = np.random.default_rng(3)
    first_params, second_params = first.sample_rand_vec(rng), second.sample_rand_vec(rng)
    first.reset(first_params)
    second.reset(second_params)
    assert np.abs(first.door_pos() - second.door_pos()).max() > 0.01
    actions = random_actions(8, seed=5)
    interleaved = []
    for action in actions:
        interleaved.append(first.step(action))
        second.step(-action)
    alone = Scene(name)
    alone.reset(first_params)
    np.testing.assert_array_equal(interleaved, [alone.step(a) for a in actions])
    np.testing.assert_array_equal(compiled.body("door").pos, compiled_door)


def test_a_scene_reused_after_another_episode_replays_like_a_fresh_one():
    # the evaluation closes its extra simulators after each level and builds new ones next
    # time: that changes no score only if a reset leaves nothing of the previous episode
    used, rng = Scene("window-open"), np.random.default_rng(4)
    params, other = used.sample_rand_vec(rng), used.sample_rand_vec(rng)
    used.reset(other)
    for action in random_actions(30, seed=1):
        used.step(action)
    actions = random_actions(20, seed=2)
    replay = [used.reset(params)] + [used.step(a) for a in actions]
    fresh = Scene("window-open")
    np.testing.assert_array_equal(replay, [fresh.reset(params)] + [fresh.step(a) for a in actions])


def test_distractor_option(suite):
    env = make("metaworld", "train", distractor=True).unwrapped
    obs, _ = env.reset(seed=4)
    entity = env.distractor_entity
    assert entity not in TASK_ENTITIES[env.task.name]
    low, high, quat = DISTRACTOR_RANGES[entity]
    rows = [obs[entity_slice(entity)]]
    for action in random_actions(5):
        obs, *_ = env.step(action)
        rows.append(obs[entity_slice(entity)])
        others = [e for e in ENTITIES if e not in (*TASK_ENTITIES[env.task.name], entity)]
        assert not any(obs[entity_slice(e)].any() for e in others)
    rows = np.array(rows)
    assert len({tuple(r) for r in rows}) == len(rows)  # a new reading every step
    assert ((rows[:, :3] >= low - 1e-6) & (rows[:, :3] <= high + 1e-6)).all()
    np.testing.assert_allclose(rows[:, 3:], np.broadcast_to(quat, (len(rows), 4)), atol=1e-6)
    plain = make("metaworld", "train").unwrapped
    obs, _ = plain.reset(seed=4)
    assert plain.distractor_entity is None
    assert filled_entities(obs) == TASK_ENTITIES[plain.task.name]


def test_distractor_ranges_cover_the_home_tasks_resets():
    home = {
        "target_object": "reach",
        "lock": "door-unlock",
        "coffee": "coffee-push",
        "nail": "hammer",
    }
    rng = np.random.default_rng(2)
    for entity, name in home.items():
        scene = Scene(name)
        low, high, _ = DISTRACTOR_RANGES[entity]
        for _ in range(5):
            position = scene.reset(scene.sample_rand_vec(rng))[entity_slice(entity)][:3]
            assert ((position >= low - 1e-3) & (position <= high + 1e-3)).all(), entity


def test_quality_judge_replays_real_rollouts_and_rejects_corrupted_ones():
    env = make("metaworld", "hard").unwrapped
    judge = get_domain("metaworld").make_quality()
    assert isinstance(judge, MetaWorldQuality)
    env.reset(seed=2, options={"task": MetaWorldTask("hammer")})
    actions = random_actions(30, seed=3)
    for action in actions:
        env.step(action)
    states = np.stack(env.trajectory)
    assert judge.identify(states[0]) == "hammer"
    assert judge.legal(states).all()
    assert judge.correct_transitions(states, actions).all()
    assert judge.correct_transitions(states, -actions).mean() < 0.3  # other hand moves
    for index in (0, 2, 70):  # hand x, hand z, hammer x
        bad = states.copy()
        bad[15, index] += 0.03
        correct = judge.correct_transitions(bad, actions)
        # into and out of state 15; the next step too (the replay carries its velocities over)
        assert not correct[14] and correct[:14].all() and correct[17:].all()
    distracted = states.copy()
    distracted[:, entity_slice("soccer")] = [0.0, 0.65, 0.03, 0, 0, 0, 1]
    assert judge.identify(distracted[0]) is None
    assert not judge.correct_transitions(distracted, actions).any()
    with pytest.raises(ValueError, match="actions must have shape"):
        judge.correct_transitions(states, actions[:-1])


def test_quality_judge_legality():
    judge = MetaWorldQuality()
    suite = MetaWorldTaskSuite()
    state = suite.sample_initial_state(MetaWorldTask("push"), np.random.default_rng(0))
    assert judge.legal(state[None])[0]
    cases = {
        "nan": (8, np.nan),
        "hand outside its box": (1, 1.2),
        "gripper beyond fully open": (3, 1.3),
        "object under the table": (9, -0.2),
        "object out of reach": (7, 0.9),
        "not a rotation": (10, 0.7),
    }
    bad = np.repeat(state[None], len(cases), axis=0)
    for row, (index, value) in enumerate(cases.values()):
        bad[row, index] = value
    assert not judge.legal(bad).any()


@pytest.mark.filterwarnings("ignore:Constant\\(s\\) may be too high")
@pytest.mark.parametrize(
    "task", ["reach-wall", "push-wall", "pick-place-wall", "button-press-wall"]
)
def test_wall_is_solid_to_the_legality_judge(task):
    from imaginebench.envs.metaworld.layout import HAND, TCP_OFFSET, entity_pos
    from imaginebench.envs.metaworld.quality import WALL_BOXES, WALL_TOLERANCE, wall_clear
    from imaginebench.experts import make_expert

    env = make("metaworld", "easy").unwrapped
    task = MetaWorldTask(task)
    env.reset(seed=0, options={"task": task})
    # the box the judge uses is the compiled scene's collision box of the wall
    model, data = env.scene.sim.model, env.scene.sim.data
    wall = model.body("wall").id
    boxes = [
        g
        for g in range(model.ngeom)
        if wall in (model.geom_bodyid[g], model.body_parentid[model.geom_bodyid[g]])
        and model.geom_conaffinity[g]
    ]
    partner = "button" if task.name == "button-press-wall" else "target_object"
    offset, half = WALL_BOXES[partner]
    assert boxes
    for box in boxes:
        np.testing.assert_allclose(model.geom_size[box], half)
        np.testing.assert_allclose(data.geom_xpos[box] - data.body("wall").xpos, offset, atol=1e-9)
    # every state of expert episodes is clear of the wall
    expert = make_expert("metaworld", seed=0)
    for seed in range(3):
        env.reset(seed=seed, options={"task": task})
        for _ in range(100):
            _, _, terminated, truncated, _ = env.step(expert.act(env))
            if terminated or truncated:
                break
        states = np.stack(env.trajectory)
        assert wall_clear(states).all()
        assert MetaWorldQuality().legal(states).all()
    # the hand, its tool centre and the object moved into the wall are not
    state = states[0]
    centre = state[entity_pos("wall")] + offset
    hand_in = state.copy()
    hand_in[HAND] = centre
    tcp_in = state.copy()
    tcp_in[HAND] = centre - TCP_OFFSET
    grazing = state.copy()  # the tool centre within the tolerance of the wall's face
    grazing[HAND] = centre - TCP_OFFSET + [half[0] - WALL_TOLERANCE / 2, 0, 0]
    cases = [hand_in, tcp_in, grazing]
    if partner == "target_object":
        obj_in = state.copy()
        obj_in[entity_pos("target_object")] = centre - [0, half[1] + 0.01, 0]  # puck overlaps
        cases.append(obj_in)
    assert wall_clear(np.stack(cases)).tolist() == [False, False, True] + [False] * (len(cases) - 3)
    assert not MetaWorldQuality().legal(np.stack([hand_in, tcp_in])).any()
    no_wall = np.stack(cases)
    no_wall[:, entity_slice("wall")] = 0.0
    assert wall_clear(no_wall).all()


def test_render_rgb_frame():
    env = make("metaworld", render_mode="rgb_array", render_size=(48, 64)).unwrapped
    env.reset(seed=0)
    frame = env.render()
    assert frame.shape == (48, 64, 3) and frame.dtype == np.uint8 and frame.std() > 1
    env.close()
