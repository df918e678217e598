"""HalfCheetah task families, suite and wordings: constructed state histories."""

import mujoco
import numpy as np
import pytest

from imaginebench.envs.base import LEVELS, Task
from imaginebench.envs.halfcheetah import instructions as text
from imaginebench.envs.halfcheetah.physics import clearance, load_model, set_state
from imaginebench.envs.halfcheetah.suite import HalfCheetahTaskSuite
from imaginebench.envs.halfcheetah.tasks import (
    JUMP_CLEARANCE,
    Jump,
    JumpInPlace,
    Run,
    Shuttle,
    displacement,
    jumped,
    takeoff_height,
)

# In the zero pose (every angle 0) the lowest point is linear in rootz.
_ZERO_POSE_CLEARANCE = float(clearance(np.zeros(18)))


def traj(dx, height=None):
    """States ``(T, 18)`` with the given per-step Δx (``dx[0]`` is the initial state's) and
    floor clearance of the body (default: on the floor, 0)."""
    dx = np.asarray(dx, dtype=np.float64)
    height = np.zeros_like(dx) if height is None else np.asarray(height, dtype=np.float64)
    s = np.zeros((len(dx), 18))
    s[:, 0] = dx
    s[:, 1] = height - _ZERO_POSE_CLEARANCE
    return s


def path(*legs):
    """Δx per step for legs ``(steps, metres)`` walked at constant speed, from rest."""
    return np.concatenate([[0.0]] + [np.full(n, metres / n) for n, metres in legs])


def first_success(task, states):
    hits = np.flatnonzero(task.success(states))
    return int(hits[0]) if len(hits) else None


def test_planar_clearance_matches_mujoco():
    model = load_model()
    data = mujoco.MjData(model)
    rng = np.random.default_rng(0)
    states = rng.normal(0, 0.6, size=(50, 18))
    states[:, 0] = 0.0
    expected = []
    for s in states:
        set_state(model, data, s)
        lowest = np.inf
        for g in range(1, model.ngeom):  # every capsule (geom 0 is the floor)
            half = data.geom_xmat[g].reshape(3, 3)[2, 2] * model.geom_size[g, 1]
            lowest = min(lowest, data.geom_xpos[g, 2] - abs(half) - model.geom_size[g, 0])
        expected.append(lowest)
    np.testing.assert_allclose(clearance(states), expected, atol=1e-9)
    np.testing.assert_allclose(clearance(traj([0.0], [0.37])), [0.37])


def test_displacement_ignores_the_initial_entry():
    s = traj([0.05, 0.1, -0.3, 0.2])  # an absolute x at reset (the original's quirk) is ignored
    np.testing.assert_allclose(displacement(s), [0.0, 0.1, -0.2, 0.0], atol=1e-12)


def test_run_needs_the_distance_and_99_steps():
    fast = path((70, 7.7), (130, 0.0))  # 7.7 m in 70 steps, then standing still
    assert first_success(Run("forward"), traj(fast)) == 99  # not before step 99
    assert not Run("backward").success(traj(fast)).any()
    assert first_success(Run("backward"), traj(-fast)) == 99
    assert first_success(Run("backward"), traj(-path((200, 7.5)))) == 187  # S < -7 from 187
    assert not Run("forward").success(traj(path((200, 6.9)))).any()
    mid = traj(path((150, 8.0)))
    assert Run("forward").success(mid)[-1] and not Run("forward", fast=True).success(mid).any()


def test_run_faster_is_a_pace_of_8_5_m_per_99_steps():
    quick = traj(path((200, 17.2)))  # 8.6 m per 100 steps
    assert first_success(Run("forward", fast=True), traj(path((200, 17.2)))) == 99
    assert first_success(Run("backward", fast=True), traj(-path((200, 17.2)))) == 99
    assert not Run("backward", fast=True).success(quick).any()
    # the training pace (7.7 m by step 99) passes "run" and never "faster", however long it runs
    steady = traj(path((200, 15.4)))
    assert first_success(Run("forward"), steady) == 99
    assert not Run("forward", fast=True).success(steady).any()
    assert not Run("backward", fast=True).success(traj(-path((200, 15.4)))).any()
    # ahead of the pace at step 99, then stopping: success at 99 only while above the pace
    sprint = traj(path((99, 9.0), (101, 0.0)))
    hits = np.flatnonzero(Run("forward", fast=True).success(sprint))
    assert hits[0] == 99 and hits[-1] == 104  # 9.0 > 8.5 t / 99 up to t = 104


def test_jump_needs_a_take_off_after_touching_the_floor():
    # on the floor for 10 steps, then 0.35 m in the air while moving 0.6 m forward in 5 steps
    dx = path((10, 0.0), (5, 0.6))
    heights = [0.0] * 11 + [0.1, 0.25, 0.35, 0.2, 0.05]
    assert first_success(Jump("forward"), traj(dx, heights)) == 13
    assert not Jump("backward").success(traj(dx, heights)).any()
    assert first_success(Jump("backward"), traj(-dx, heights)) == 13
    assert first_success(JumpInPlace(), traj(dx, heights)) == 13
    # the fall right after reset is no jump: start 0.35 m up, land, never leave the floor again
    drop = traj(path((20, 0.6)), [0.35, 0.2, 0.05] + [0.0] * 18)
    assert not jumped(drop).any() and not Jump("forward").success(drop).any()
    low = traj(path((10, 0.6)), [0.0] * 5 + [0.29] * 6)  # 0.29 m: not high enough
    assert not jumped(low).any() and not Jump("forward").success(low).any()
    hop = [0.0] * 5 + [0.4] + [0.0] * 5
    short = traj(path((10, 0.25)), hop)  # jumped, but only 0.25 m forward
    assert jumped(short)[5] and not Jump("forward").success(short).any()
    walked = traj(path((10, 2.0)))  # moved without leaving the floor
    assert not Jump("forward").success(walked).any()
    late = traj(path((10, 0.0), (10, 0.8)), hop + [0.0] * 10)  # jump in place, then walk
    assert first_success(Jump("forward"), late) == 14  # S = 0.32 > 0.3


def test_jump_in_place_must_stay_near_the_start():
    heights = [0.0] * 31 + [0.4] + [0.0] * 10
    there_and_back = traj(path((15, 1.2), (15, -1.2), (11, 0.0)), heights)
    assert displacement(there_and_back)[31] == pytest.approx(0.0, abs=1e-9)
    assert jumped(there_and_back)[31] and not JumpInPlace().success(there_and_back).any()
    drift = traj(path((41, 1.0)), heights)  # within 1.05 m throughout
    assert first_success(JumpInPlace(), drift) == 31
    assert not JumpInPlace().success(traj(path((41, 1.0)))).any()  # no jump


def test_shuttles_check_the_order():
    there_and_back = path((60, 3.5), (60, -3.5))
    forward_back, backward_forward = traj(there_and_back), traj(-there_and_back)
    first = first_success(Shuttle("forward"), forward_back)
    assert first is not None and displacement(forward_back)[first] <= 0.5 + 1e-9
    assert not Shuttle("forward").success(forward_back[:first]).any()
    # the original's test ignored the order: backward-then-forward passed forward-then-backward
    assert not Shuttle("forward").success(backward_forward).any()
    assert first_success(Shuttle("backward"), backward_forward) == first
    assert not Shuttle("backward").success(forward_back).any()
    not_far_enough = traj(path((60, 2.9), (60, -5.0)))
    assert not Shuttle("forward").success(not_far_enough).any()
    not_back_enough = traj(path((60, 5.0), (60, -2.9)))
    assert not Shuttle("forward").success(not_back_enough).any()
    # back first, then far forward and 3.5 m back from there: both orders are in it
    both = traj(path((40, -4.0), (80, 8.0), (40, -3.5)))
    assert Shuttle("forward").success(both)[-1] and Shuttle("backward").success(both)[-1]
    progress = Shuttle("forward").progress(forward_back)
    assert np.all(np.diff(progress[: first + 1]) >= 0) and progress[first] == pytest.approx(2.0)
    assert progress[30] < progress[60] < progress[90] < progress[first]


def test_judges_are_vectorised_and_validate_input():
    batch = np.stack(
        [
            np.stack([traj(path((120, 8.0))), traj(-path((120, 8.0))), traj(path((120, 1.0)))]),
            np.stack(
                [traj(path((120, -1.0))), traj(path((60, 4.0), (60, -4.0))), traj(path((120, 0.0)))]
            ),
        ]
    )
    for task in HalfCheetahTaskSuite().tasks("train") + HalfCheetahTaskSuite().tasks("hard"):
        succ, prog = task.success(batch), task.progress(batch)
        assert succ.shape == prog.shape == (2, 3, 121) and succ.dtype == bool
        for i in range(2):
            for j in range(3):
                np.testing.assert_array_equal(succ[i, j], task.success(batch[i, j]))
                np.testing.assert_allclose(prog[i, j], task.progress(batch[i, j]))
    with pytest.raises(ValueError, match="18 entries"):
        Run("forward").success(np.zeros((5, 17)))
    with pytest.raises(ValueError, match="direction"):
        Run("left")
    with pytest.raises(TypeError, match="fast"):
        Run("forward", fast="yes")
    with pytest.raises(ValueError, match="direction"):
        Shuttle("up")
    with pytest.raises(ValueError, match="wording"):
        Jump("forward").instructions("easy")
    nan = traj(path((120, 8.0)))
    nan[50, 0] = np.nan
    assert not Run("forward").success(nan)[50:].any()


def test_progress_grows_towards_success():
    assert np.all(np.diff(Run("backward").progress(traj(-path((20, 2.0))))) > 0)
    rise = Jump("forward").progress(traj(path((4, 0.0)), [0.0, 0.0, 0.1, 0.2, 0.3]))
    assert np.all(np.diff(rise[1:]) > 0) and rise[-1] == pytest.approx(1.0)
    stray = JumpInPlace().progress(traj(path((10, 3.0))))
    assert stray[0] == 0.0 and stray[-1] < 0


def test_suite_levels_and_spec_round_trip():
    suite = HalfCheetahTaskSuite()
    train = list(suite.tasks("train"))
    assert train == [Run("forward"), Run("backward"), Jump("forward"), Jump("backward")]
    assert list(suite.tasks("rephrase")) == train
    assert list(suite.tasks("easy")) == [Run("forward", fast=True), Run("backward", fast=True)]
    assert list(suite.tasks("hard")) == [Shuttle("forward"), Shuttle("backward"), JumpInPlace()]
    for level in LEVELS:
        for task in suite.tasks(level):
            assert Task.from_spec(task.spec()) == task
    assert Task.from_spec('{"family": "halfcheetah_run", "direction": "backward"}') == Run(
        "backward"
    )


def test_wordings_canonical_first_not_swapped_and_rephrase_disjoint():
    suite = HalfCheetahTaskSuite()
    canonical = ["Run forward.", "Run backward.", "Jump a step forward.", "Jump a step backward."]
    assert [t.instructions()[0] for t in suite.tasks("train")] == canonical
    train_sentences = {w.lower() for t in suite.tasks("train") for w in t.instructions("train")}
    for task in suite.tasks("rephrase"):
        train, rephrase = task.instructions("train"), task.instructions("rephrase")
        assert len(train) >= 8 and len(rephrase) >= 10
        assert len(set(train)) == len(train) and len(set(rephrase)) == len(rephrase)
        assert not {w.lower() for w in rephrase} & train_sentences
    assert "forward" in Jump("forward").instructions()[0]
    assert all("back" in w for w in Jump("backward").instructions("rephrase"))
    originals = {
        Run("forward", fast=True): "Move forward faster.",
        Run("backward", fast=True): "Move backward faster.",
        Shuttle("forward"): "Move forward and slow down. Move backward.",
        Shuttle("backward"): "Move backward and slow down. Move forward.",
        JumpInPlace(): "Jump in the original position.",
    }
    for task, sentence in originals.items():
        assert task.instructions("train")[0] == sentence
        assert task.instructions("rephrase") == task.instructions("train")
    assert set(text.TRAIN) == set(text.REPHRASE)


def test_initial_states_follow_the_v5_reset_distribution():
    suite = HalfCheetahTaskSuite()
    draws = np.stack(
        [suite.sample_initial_state(Run("forward"), np.random.default_rng(s)) for s in range(300)]
    )
    assert draws.dtype == np.float32 and (draws[:, 0] == 0).all()
    assert (np.abs(draws[:, 1:9]) <= 0.1).all() and np.abs(draws[:, 1:9]).max() > 0.09
    assert 0.08 < draws[:, 9:].std() < 0.12
    again = suite.sample_initial_state(Run("forward"), np.random.default_rng(7))
    np.testing.assert_array_equal(again, draws[7])
    for level in LEVELS:
        episodes = suite.episodes(level, 6, seed=3)
        for ep in episodes:
            assert not ep.task.success(ep.initial_state[None]).any()
        replay = suite.episodes(level, 6, seed=3)
        assert [e.instruction for e in episodes] == [e.instruction for e in replay]
        np.testing.assert_array_equal(
            np.stack([e.initial_state for e in episodes]),
            np.stack([e.initial_state for e in replay]),
        )
    with pytest.raises(TypeError, match="HalfCheetah task"):
        suite.sample_initial_state(object(), np.random.default_rng(0))


def at_clearance(height: float) -> np.ndarray:
    """A zero-pose state whose :func:`clearance` is exactly ``height`` (rootz nudged by ulps)."""
    state = traj([0.0], [height])[0]
    for _ in range(16):
        got = float(clearance(state))
        if got == height:
            return state
        state[1] = np.nextafter(state[1], -np.inf if got > height else np.inf)
    raise AssertionError(f"no rootz gives a clearance of exactly {height}")


def test_thresholds_at_their_exact_values():
    """Each documented comparison at its boundary: ``S_t > 7``, ``S_t > 0.3``, ``|S_k| < 1.05``,
    ``P_t >= 3`` and ``S_t <= P_t - 3``, take-off ``H_t >= 0.3`` (the touchdown's ``<= 0.01`` is
    not tested at equality: no rootz of the zero pose gives a clearance of exactly 0.01)."""
    # 112 steps of 1/16 m reach exactly 7 m (binary fractions: the sums are exact)
    run = traj(path((113, 7.0625)))
    assert displacement(run)[112] == 7.0 and first_success(Run("forward"), run) == 113
    floor, up = traj([0.0, 0.0], [0.0, 0.4])
    hop = np.stack([floor, floor, up, floor, floor])
    hop[:, 0] = [0.0, 0.0, 0.0, 0.3, 0.0625]  # S = 0, 0, 0, 0.3, 0.3625
    assert first_success(Jump("forward"), hop) == 4
    hop[:, 0] = [0.0, 0.0, 1.0, 0.05, 0.0]  # |S| = 1, then 1.05
    assert JumpInPlace().success(hop).tolist() == [False, False, True, False, False]
    shuttle = traj([0.0, 3.0, -1.5, -1.5])  # S = 0, 3, 1.5, 0
    assert Shuttle("forward").success(shuttle).tolist() == [False, False, False, True]
    np.testing.assert_allclose(Shuttle("forward").progress(shuttle), [0.0, 1.0, 1.5, 2.0])
    exact = np.stack([floor, at_clearance(JUMP_CLEARANCE)])
    assert jumped(exact).tolist() == [False, True]


def test_takeoff_height_per_history_of_a_batch():
    """Take-off heights by hand for two histories judged as one batch: the first starts in the
    air (reset), so its fall does not count until it has touched the floor."""
    heights = np.array([[0.35, 0.2, 0.0, 0.2, 0.4, 0.0], [0.0, 0.2, 0.0, 0.32, 0.1, 0.0]])
    batch = np.stack([traj(np.zeros(6), h) for h in heights])
    expected = [[-np.inf, -np.inf, -np.inf, 0.2, 0.4, 0.4], [-np.inf, 0.2, 0.2, 0.32, 0.32, 0.32]]
    np.testing.assert_allclose(takeoff_height(batch), expected, atol=1e-12)
    assert jumped(batch).tolist() == [[False] * 4 + [True] * 2, [False] * 3 + [True] * 3]


def test_jump_progress_values():
    """Height progress (take-off / 0.3, at most 1) plus displacement progress (S / 0.3, at most
    1); jumping in place subtracts the stray beyond 1.05 m in units of 1.05 m."""
    dx, heights = np.array([0.0, 0.0, 0.15, 0.0, 0.45]), [0.0, 0.0, 0.15, 0.6, 0.0]
    states = traj(dx, heights)  # S = 0, 0, 0.15, 0.15, 0.6; take-off -inf, 0, 0.15, 0.6, 0.6
    np.testing.assert_allclose(Jump("forward").progress(states), [0, 0, 1, 1.5, 2], atol=1e-9)
    backward = Jump("backward")
    np.testing.assert_allclose(backward.progress(traj(-dx, heights)), [0, 0, 1, 1.5, 2], atol=1e-9)
    np.testing.assert_allclose(backward.progress(states), [0, 0, 0, 0.5, -1], atol=1e-9)
    np.testing.assert_allclose(JumpInPlace().progress(states), [0, 0, 0.5, 1, 1], atol=1e-9)
    stray = JumpInPlace().progress(traj([0.0, 2.1]))  # 1.05 m beyond the radius
    np.testing.assert_allclose(stray, [0.0, -1.0], atol=1e-12)


def test_speed_reward_per_family():
    """The forward reward as is (forward), negated (backward), its absolute value (shuttles),
    minus its absolute value (jumping in place)."""
    r = np.array([-2.0, 0.0, 3.0])
    for task in (Run("forward"), Run("forward", fast=True), Jump("forward")):
        np.testing.assert_array_equal(task.speed_reward(r), r)
    for task in (Run("backward"), Jump("backward")):
        np.testing.assert_array_equal(task.speed_reward(r), -r)
    for task in (Shuttle("forward"), Shuttle("backward")):
        np.testing.assert_array_equal(task.speed_reward(r), [2.0, 0.0, 3.0])
    np.testing.assert_array_equal(JumpInPlace().speed_reward(r), [-2.0, 0.0, -3.0])


def test_fixed_wordings_default_to_train_and_refuse_other_sets():
    for task in (Run("forward", fast=True), Shuttle("backward"), JumpInPlace()):
        assert task.instructions() == task.instructions("train")
        with pytest.raises(ValueError, match="wording"):
            task.instructions("easy")
    fast = Run("forward", fast=np.bool_(True))  # a NumPy flag is stored as a plain bool
    assert type(fast.fast) is bool and fast.to_params() == {"direction": "forward", "fast": True}
