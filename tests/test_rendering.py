"""Rendered rollouts: frames follow the states, captions are drawn, files hold one frame per
state, bad input gets a clear error, and the evaluation callback logs videos only when asked."""

from __future__ import annotations

import sys

import numpy as np
import pytest
from PIL import Image

from imaginebench.cli import main
from imaginebench.data.format import load_dataset
from imaginebench.data.shipped import resolve_data_path
from imaginebench.envs import DOMAINS, Domain, make, make_renderer
from imaginebench.envs.base import Task
from imaginebench.video import caption_frames, render_rollout, write_video

SHIPPED = "shipped:babyai/imaginary_easy.h5"


def _initial(domain: str) -> tuple[object, np.ndarray]:
    env = make(domain).unwrapped
    state, _ = env.reset(seed=0)
    return env.task, state.astype(np.float64)


def _centroid_x(mask: np.ndarray) -> float:
    assert mask.any(), "the object is not in the frame"
    return float(np.nonzero(mask)[1].mean())


def test_clevr_frame_shows_a_moved_ball_where_the_state_puts_it():
    task, state = _initial("clevr")
    left, right = state.copy(), state.copy()
    left[:2], right[:2] = (-0.35, 0.55), (0.35, 0.55)  # the red ball, at the back
    with make_renderer("clevr", 60, 80) as renderer:
        frames = renderer.render(task, np.stack([left, right]))
    assert frames.shape == (2, 60, 80, 3) and frames.dtype == np.uint8
    r, g, b = (frames[..., c].astype(int) for c in range(3))
    red = (r > 120) & (g < 80) & (b < 80)
    assert _centroid_x(red[0]) + 20 < _centroid_x(red[1])


def test_babyai_frame_shows_the_agent_in_its_cell():
    task, state = _initial("babyai")
    moved = state.copy()
    moved[13:15] = (1, 1) if tuple(state[13:15]) != (1, 1) else (6, 6)  # agent row, col
    with make_renderer("babyai", 64, 64) as renderer:  # 8 cells of 8 pixels
        frames = renderer.render(task, np.stack([state, moved]))
    assert frames.shape == (2, 64, 64, 3)
    changed = np.abs(frames[0].astype(int) - frames[1]).sum(-1) > 0
    rows, cols = np.nonzero(changed)
    cells = {(r // 8, c // 8) for r, c in zip(rows, cols)}
    assert cells == {tuple(int(v) for v in state[13:15]), tuple(int(v) for v in moved[13:15])}


@pytest.mark.parametrize(
    "domain",
    [
        "halfcheetah",
        pytest.param("metaworld", marks=pytest.mark.slow),
        pytest.param("libero", marks=pytest.mark.slow),
    ],
)  # Meta-World and LIBERO build their scene twice (env and renderer): 5 to 30 s
def test_mujoco_frames_follow_the_state_and_survive_illegal_ones(domain):
    if domain == "libero":
        pytest.importorskip("libero.libero", reason="the libero extra is not installed")
    task, state = _initial(domain)
    moved, bent, broken = state.copy(), state.copy(), state.copy()
    if domain == "halfcheetah":
        moved[0] = 0.3  # one step covering 0.3 m (root x: 0.3 from here on)
        bent[6] += 1.0  # front thigh angle
    elif domain == "libero":
        moved[16:19] += (0.1, 0.0, 0.2)  # the alphabet soup, lifted
        bent[1] += 0.5  # the shoulder
        broken[20:24] = 0.0  # a quaternion of no length: drawn unrotated
    else:
        bent[:3] += (0.15, -0.1, 0.1)  # the hand
    broken[1:6] = (np.nan, np.inf, -1e9, 40.0, -40.0)  # nothing a simulator would reach
    states = np.stack([state, moved, bent, broken])
    with make_renderer(domain, 48, 64) as renderer:
        frames = renderer.render(task, states)
        last = renderer.render(task, states, steps=[3])  # drawn after the whole history
    assert frames.shape == (4, 48, 64, 3)
    assert np.abs(frames[1].astype(int) - frames[2]).mean() > 1.0  # the pose shows
    assert np.array_equal(last[0], frames[3])
    if domain == "halfcheetah":  # the floor moves under the tracked body
        assert np.abs(frames[0].astype(int) - frames[1]).mean() > 1.0
    if domain == "libero":  # the can leaves its place: pixels change, not only noise
        assert (np.abs(frames[0].astype(int) - frames[1]).sum(-1) > 60).sum() >= 10


def test_illegal_grid_and_table_states_are_drawn_without_error():
    task, state = _initial("babyai")
    illegal = np.array([[9, -3, 20, 1, 1, 1, 2, 1, 1, 7, 9, 3, 5, 0, 0, 9, 9]], dtype=float)
    with make_renderer("babyai", 32, 48) as renderer:
        assert renderer.render(task, np.concatenate([state[None], illegal])).shape == (
            2,
            32,
            48,
            3,
        )
    task, state = _initial("clevr")
    with make_renderer("clevr", 32, 48) as renderer:
        far = np.full_like(state, 7.0)
        assert renderer.render(task, np.stack([state, far, far * np.nan])).shape[0] == 3


def test_caption_draws_the_instruction_below_the_frame():
    frames = np.zeros((2, 40, 120, 3), dtype=np.uint8)
    a = caption_frames(frames, "push the red ball left", ["step 0", "step 1"])
    b = caption_frames(frames, "push the blue ball right", ["step 0", "step 1"])
    assert a.shape[0] == 2 and a.shape[1] > 40 and a.shape[2] == 120
    assert (a[:, :40] == 0).all()  # the frame itself is untouched
    band = a[0, 40:]
    assert band.min() < 100 and band.max() == 255  # dark text on white
    assert not np.array_equal(a[0, 40:], b[0, 40:])  # the instruction is what is written
    assert not np.array_equal(a[0, 40:], a[1, 40:])  # and the per-frame notes


def test_render_command_writes_one_gif_frame_per_state(tmp_path, capsys):
    episode = load_dataset(resolve_data_path(SHIPPED)).episode(3)
    out = tmp_path / "x.gif"
    args = [SHIPPED, "--episode", "3", "--out", str(out), "--height", "32", "--width", "48"]
    assert main(["render", *args]) == 0
    with Image.open(out) as gif:
        assert gif.n_frames == len(episode.states)
        assert gif.size[0] == 48
    assert "wrote" in capsys.readouterr().out


def test_every_keeps_those_frames_and_the_last():
    dataset = load_dataset(resolve_data_path(SHIPPED))
    episode = dataset.episode(int(np.flatnonzero(dataset.episode_lengths() == 5)[0]))  # 6 states
    task = Task.from_spec(episode.task_spec)
    with make_renderer("babyai", 32, 32) as renderer:
        every = render_rollout(renderer, task, episode.instruction, episode.states, every=2)
        whole = render_rollout(renderer, task, episode.instruction, episode.states)
    assert len(whole) == 6 and np.array_equal(every, whole[[0, 2, 4, 5]])


def test_render_command_errors_are_clear(tmp_path, capsys):
    out = str(tmp_path / "x.gif")
    assert main(["render", SHIPPED, "--episode", "100000", "--out", out]) == 2
    assert "no episode 100000; the file has" in capsys.readouterr().err
    assert main(["render", str(tmp_path / "missing.h5"), "--out", out]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert main(["render", SHIPPED, "--out", str(tmp_path / "x.avi")]) == 2
    assert "unknown video format '.avi'" in capsys.readouterr().err
    with pytest.raises(ValueError, match="unknown domain 'nowhere'"):
        make_renderer("nowhere")


def test_a_domain_without_a_renderer_says_so(monkeypatch):
    clevr = DOMAINS["clevr"]
    plain = Domain(
        "plain", clevr.env_id, clevr.make_suite, clevr.episode_rewards, clevr.make_quality
    )
    monkeypatch.setitem(DOMAINS, "plain", plain)
    with pytest.raises(ValueError, match="'plain' has no renderer yet.*babyai, clevr"):
        make_renderer("plain")


def test_mp4_needs_an_encoder_and_names_it(tmp_path, monkeypatch):
    frames = np.random.default_rng(0).integers(0, 255, (5, 17, 23, 3), dtype=np.uint8)
    try:
        import imageio_ffmpeg
    except ImportError:
        imageio_ffmpeg = None
    if imageio_ffmpeg is not None:
        write_video(frames, tmp_path / "x.mp4", fps=5)
        reader = imageio_ffmpeg.read_frames(str(tmp_path / "x.mp4"))
        assert next(reader)["size"] == (24, 18)  # padded to even sizes for H.264
        assert sum(1 for _ in reader) == 5
    monkeypatch.setitem(sys.modules, "imageio_ffmpeg", None)  # as if not installed
    with pytest.raises(ImportError, match=r"pip install 'imaginebench\[video\]'"):
        write_video(frames, tmp_path / "y.mp4", fps=5)
    assert not (tmp_path / "y.mp4").exists()


@pytest.mark.parametrize("videos", [None, 1], ids=["default-off", "on"])
def test_evaluation_logs_rendered_episodes_only_when_asked(tmp_path, videos):
    import io

    import lightning as L
    from lightning.pytorch.loggers import TensorBoardLogger
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from imaginebench.callbacks import SuccessRateEvaluation
    from imaginebench.data.collect import collect
    from imaginebench.data.format import save_dataset
    from imaginebench.datamodules import RealImaginaryDataModule
    from imaginebench.modules.offline import DiscreteBC

    dataset, _ = collect("clevr", "easy", 4, seed=0, progress=False)
    dm = RealImaginaryDataModule(real=str(save_dataset(dataset, tmp_path / "r.h5")), batch_size=8)
    model = DiscreteBC(dm.state_dim, dm.action_spec, hidden=[8])
    asked = {} if videos is None else {"video_episodes_per_level": videos}
    evaluation = SuccessRateEvaluation(
        every_n_steps=0, test_episodes_per_level=1, levels=["easy"], video_size=(32, 48), **asked
    )
    trainer = L.Trainer(
        max_steps=1,
        accelerator="cpu",
        logger=TensorBoardLogger(str(tmp_path), name="tb"),
        callbacks=[evaluation],
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    trainer.fit(model, datamodule=dm)
    trainer.test(model, datamodule=dm)
    trainer.loggers[0].experiment.flush()
    accumulator = EventAccumulator(trainer.log_dir)
    accumulator.Reload()
    images = accumulator.Tags()["images"]
    if not videos:
        assert images == []
        return
    assert images == ["test/easy/episode_0"]
    (event,) = accumulator.Images("test/easy/episode_0")
    with Image.open(io.BytesIO(event.encoded_image_string)) as gif:
        assert gif.format == "GIF" and gif.size[0] == 48
        assert gif.n_frames == evaluation.last_results[0].mean_length + 1  # every state


@pytest.mark.slow  # builds a Meta-World scene: about 3 s
def test_metaworld_pose_fit_reproduces_a_posed_scene():
    """A state read from the scene with the arm moved, the gripper half closed and the door
    opened is fitted back from the reset pose: the fitted scene reads out the same hand, gripper
    and handle."""
    import mujoco

    from imaginebench.envs.metaworld.layout import entity_pos
    from imaginebench.envs.metaworld.render import PoseFit
    from imaginebench.envs.metaworld.scenes import Scene

    scene = Scene("door-open")
    rand_vec = scene.default_rand_vec()
    scene.reset(rand_vec)
    model, data = scene.sim.model, scene.sim.data
    data.qpos[:7] += np.random.default_rng(0).uniform(-0.15, 0.15, 7)  # the arm
    data.qpos[7:9] = (0.03, -0.025)  # the fingers (r_close, l_close), half closed
    data.qpos[model.joint("doorjoint").qposadr[0]] = -0.6  # the door, opened
    mujoco.mj_kinematics(model, data)
    target = scene.state()
    scene.reset(rand_vec)
    fit = PoseFit(scene)
    fit.fit(target, fit.start())
    read = scene.state()
    for slot in (slice(0, 4), entity_pos("handle")):
        np.testing.assert_allclose(read[slot], target[slot], atol=1e-4)
