"""Training runs end to end: resume equivalence, the CLI and its configs, DDP on CPU."""

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import lightning as L
import numpy as np
import pytest
import torch
import yaml

from imaginebench.callbacks.evaluation import wilson_interval
from imaginebench.config import load_config_file
from imaginebench.datamodules import RealImaginaryDataModule
from imaginebench.modules.offline import DiscreteCQL
from imaginebench.train_cli import complete_run_config, resolve_config, run

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = sorted(  # the offline RL configs of every domain (not grounding / imagination)
    c for c in (ROOT / "configs").glob("*_*.yaml") if "modules.offline" in c.read_text()
)


def _domain(config: Path) -> str:
    return load_config_file(config)["data"]["init_args"]["domain"]


def _collect(directory: Path, domain: str) -> Path:
    from imaginebench.data.collect import collect
    from imaginebench.data.format import save_dataset

    if domain == "libero":  # shipped: a LIBERO episode takes seconds to collect
        from imaginebench.data.shipped import resolve_data_path

        return resolve_data_path("shipped:libero/real_train.h5")
    path = directory / f"{domain}_real.h5"
    dataset, _ = collect(domain, "train", 40, seed=0, epsilon=0.2, progress=False)
    save_dataset(dataset, path)
    return path


@pytest.fixture(scope="module")
def real_path(tmp_path_factory):
    return _collect(tmp_path_factory.mktemp("data"), "clevr")


@pytest.fixture(scope="module")
def collected(tmp_path_factory, real_path):
    """``collected(domain)``: a small real dataset of ``domain``, collected once per module on
    first use (CLEVR's is ``real_path``)."""
    directory = tmp_path_factory.mktemp("domains")
    paths = {"clevr": real_path}

    def get(domain: str) -> Path:
        if domain not in paths:
            paths[domain] = _collect(directory, domain)
        return paths[domain]

    return get


@pytest.fixture(scope="module")
def real_paths(collected):
    """Small real datasets per domain (CLEVR's is ``real_path``)."""
    return {d: collected(d) for d in sorted({_domain(c) for c in CONFIGS})}


def _trainer(steps, **kwargs):
    return L.Trainer(
        max_steps=steps,
        accelerator="cpu",
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        deterministic=True,
        **kwargs,
    )


def _fresh(real_path):
    L.seed_everything(0)
    dm = RealImaginaryDataModule(real=str(real_path), ratio=0.0, batch_size=64, seed=3)
    model = DiscreteCQL(
        state_dim=dm.state_dim,
        action_spec=dm.action_spec,
        hidden=(64, 64),
        target_update_interval=7,
    )
    return dm, model


def test_resume_from_checkpoint_equals_uninterrupted_run(real_path, tmp_path):
    dm, straight = _fresh(real_path)
    _trainer(30, enable_checkpointing=False).fit(straight, dm)

    dm, first = _fresh(real_path)
    trainer = _trainer(13, enable_checkpointing=False)
    trainer.fit(first, dm)
    ckpt = tmp_path / "mid.ckpt"
    trainer.save_checkpoint(ckpt)
    dm, resumed = _fresh(real_path)
    _trainer(30, enable_checkpointing=False).fit(resumed, dm, ckpt_path=ckpt)

    a, b = straight.state_dict(), resumed.state_dict()
    assert a.keys() == b.keys()
    for k in a:
        assert torch.equal(a[k], b[k]), k
    # and the run really did change the weights after the checkpoint
    assert not torch.equal(first.state_dict()["q.out.weight"], b["q.out.weight"])


def _small_config(
    config: Path, tmp_path: Path, real: Path, imaginary: Path | None = None, **trainer
) -> Path:
    """``config`` shrunk to 6 steps on ``real`` with batch 32. Without ``imaginary``, the
    imaginary entry names a missing file that is skipped (real data only); with it, that file is
    required."""
    cfg = load_config_file(config)  # its configs/parts/ include merged in: the copy stands alone
    cfg["trainer"].update({"max_steps": 6, "enable_progress_bar": False, **trainer})
    cfg["trainer"]["logger"]["init_args"]["save_dir"] = str(tmp_path / "runs")
    for cb in cfg["trainer"]["callbacks"]:
        args = cb["init_args"]
        if cb["class_path"].endswith("SuccessRateEvaluation"):
            args.update(
                every_n_steps=3,
                episodes_per_level=2,
                test_episodes_per_level=3,
                test_after_fit=False,
            )
            if _domain(config) == "libero":  # each simulator takes seconds to build and an
                # episode up to 500 steps of 15-25 ms: one level, one simulator, 10 steps
                args.update(levels=["train"], max_envs=1, max_episode_steps=10)
        if cb["class_path"].endswith("ModelCheckpoint"):
            args.update(dirpath=str(tmp_path / "ckpt"), every_n_train_steps=3)
    if cfg["model"]["class_path"].endswith(".COMBO"):  # a short dynamics-model fit
        cfg["model"]["init_args"].update(model_max_steps=200, model_eval_every=50)
    data = cfg["data"]["init_args"]
    data["real"] = str(real)
    data["imaginary"] = [str(imaginary or tmp_path / "absent_imaginary.h5")]
    data["imaginary_optional"] = imaginary is None
    data["batch_size"] = 32
    data["updates_per_batch"] = 3  # 6 steps = 2 Lightning batches of 3 updates
    data["seed"] = 3  # a data seed unlike the modules' sampling seeds: their hparams must merge
    tmp_path.mkdir(parents=True, exist_ok=True)
    out = tmp_path / config.name
    out.write_text(yaml.safe_dump(cfg))
    return out


@pytest.mark.slow
@pytest.mark.parametrize("config", CONFIGS, ids=[c.stem for c in CONFIGS])
def test_config_fits_and_tests_through_the_cli(config, tmp_path, real_paths):
    from imaginebench.data.format import load_dataset

    real = real_paths[_domain(config)]
    small = _small_config(config, tmp_path, real)
    cli = run(["fit", "-c", str(small)])
    assert cli.trainer.global_step == 6
    last = tmp_path / "ckpt" / "last.ckpt"
    assert last.exists()
    # a checkpoint alone rebuilds the policy (sizes and normalisers included)
    restored = type(cli.model).load_from_checkpoint(last)
    data = load_dataset(real)
    states = data.states[:5]
    words = [data.instructions[data.episode_instruction[0]]] * 5
    # equal up to float rounding: the sentence encoder's output depends slightly on which
    # sentences it batches together (padding), which changes continuous actions by ~1e-7
    np.testing.assert_allclose(
        restored.act(states, words), cli.model.act(states, words), rtol=0, atol=1e-5
    )
    events = list((tmp_path / "runs").rglob("events.out.tfevents.*"))
    assert events, "TensorBoard logging is on by default"
    validated = run(["validate", "-c", str(small), "--ckpt_path", str(last)])
    evaluation = next(
        c for c in validated.trainer.callbacks if type(c).__name__ == "SuccessRateEvaluation"
    )
    levels = ["train"] if _domain(config) == "libero" else ["train", "rephrase", "easy", "hard"]
    assert [r.level for r in evaluation.last_results] == levels
    run(["test", "-c", str(small), "--ckpt_path", str(last)])
    results = list((tmp_path / "runs").rglob("results.json"))
    assert results
    payload = json.loads(results[-1].read_text())
    assert set(payload["levels"]) == set(levels)
    for level in payload["levels"].values():
        assert level["episodes"] == 3 and level["success"] == level["successes"] / 3
        assert tuple(level["ci95"]) == wilson_interval(level["successes"], 3)


@pytest.mark.slow
@pytest.mark.parametrize("config", CONFIGS, ids=[c.stem for c in CONFIGS])
def test_shipped_configs_parse(config):
    out = subprocess.run(
        [sys.executable, "-m", "imaginebench.cli", "fit", "-c", str(config), "--print_config"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    printed = yaml.safe_load(out.stdout)
    assert printed["model"]["class_path"].startswith("imaginebench.modules.offline.")
    # load_config_file (tests, benchmarks) resolves the configs/parts/ includes as the CLI does
    given = load_config_file(config)
    _assert_within(given, printed)
    # the run's config (what it records and the benchmark hashes) has the shared callbacks'
    # placeholders filled: the config's own folder and its one evaluation/checkpoint cadence
    resolved = resolve_config(["-c", str(config)])
    evaluation, checkpoint = (c["init_args"] for c in resolved["trainer"]["callbacks"])
    every = given["every_n_steps"]
    if evaluation["every_n_steps"] == 0:  # scored once after fit (LIBERO: long episodes)
        assert evaluation["test_after_fit"] and checkpoint["every_n_train_steps"] == every > 0
    else:
        assert evaluation["every_n_steps"] == checkpoint["every_n_train_steps"] == every > 0
    assert checkpoint["dirpath"] == f"runs/{config.stem}/seed{{seed}}/checkpoints"
    assert "every_n_steps" not in resolved


def _assert_within(given: Any, printed: Any, where: str = "") -> None:
    """Every value ``given`` sets is what the CLI resolved (which adds the defaults)."""
    if isinstance(given, dict):
        for key, value in given.items():
            _assert_within(value, printed[key], f"{where}.{key}")
    elif isinstance(given, list) and given and isinstance(given[0], dict):
        assert len(given) == len(printed), where
        for n, (value, resolved) in enumerate(zip(given, printed)):
            _assert_within(value, resolved, f"{where}[{n}]")
    else:
        assert given == printed, where


def _printed(args: list[str], capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    """What ``fit ARGS --print_config`` prints, as a dict."""
    with pytest.raises(SystemExit):
        run(["fit", *args, "--print_config"])
    return yaml.safe_load(capsys.readouterr().out)


def test_load_config_file_reads_includes_as_the_cli_does(tmp_path, capsys):
    """The jsonargparse behaviour the shipped configs rely on, and load_config_file with it:
    nested includes arrive, a dotted key sets one value, a plain key replaces the whole
    included group."""
    parts = tmp_path / "parts"
    parts.mkdir()
    trainer = {
        "accelerator": "cpu",
        "log_every_n_steps": 7,
        "logger": {
            "class_path": "lightning.pytorch.loggers.TensorBoardLogger",
            "init_args": {"save_dir": "runs"},
        },
    }
    (parts / "trainer.yaml").write_text(yaml.safe_dump({"trainer": trainer}))
    (parts / "domain.yaml").write_text(
        "config: trainer.yaml\n"
        + yaml.safe_dump(
            {
                "trainer.callbacks": [
                    {"class_path": "lightning.pytorch.callbacks.ModelCheckpoint"}
                ],
                "data": {
                    "class_path": "imaginebench.datamodules.RealImaginaryDataModule",
                    "init_args": {"domain": "clevr", "batch_size": 16},
                },
            }
        )
    )
    model = {"class_path": "imaginebench.modules.offline.DiscreteBC"}
    run_file, replacing = tmp_path / "run.yaml", tmp_path / "replacing.yaml"
    run_file.write_text(
        "config: parts/domain.yaml\n"
        + yaml.safe_dump(
            {
                "trainer.max_steps": 6,
                "trainer.logger.init_args.name": "mine",
                "data.init_args.ratio": 0.25,
                "model": model,
            }
        )
    )
    replacing.write_text(
        "config: parts/domain.yaml\n"
        + yaml.safe_dump({"trainer": {"max_steps": 6}, "model": model})
    )
    printed = _printed(["-c", str(run_file)], capsys)
    _assert_within(load_config_file(run_file), printed)
    assert printed["trainer"]["accelerator"] == "cpu" and printed["trainer"]["max_steps"] == 6
    assert printed["trainer"]["logger"]["init_args"]["save_dir"] == "runs"
    assert printed["trainer"]["logger"]["init_args"]["name"] == "mine"
    assert printed["data"]["init_args"]["batch_size"] == 16
    assert printed["data"]["init_args"]["ratio"] == 0.25
    printed = _printed(["-c", str(replacing)], capsys)
    _assert_within(load_config_file(replacing), printed)
    assert load_config_file(replacing)["trainer"] == {"max_steps": 6}
    assert printed["trainer"]["accelerator"] == "auto"  # Lightning's default: not merged
    assert printed["trainer"]["callbacks"] is None


def _callbacks_config(every: int | None, name: Any = "mine", **given: Any) -> Any:
    """A parsed-looking config: a named TensorBoard logger, an evaluation and a checkpoint
    callback with ``given`` init_args (cadences null and dirpath ``runs/{name}`` unless
    given)."""
    from jsonargparse import Namespace

    logger = Namespace(
        class_path="lightning.pytorch.loggers.TensorBoardLogger",
        init_args=Namespace(save_dir="runs", name=name),
    )
    evaluation = Namespace(
        class_path="imaginebench.callbacks.SuccessRateEvaluation",
        init_args=Namespace(every_n_steps=given.get("every_n_steps")),
    )
    checkpoint = Namespace(
        class_path="lightning.pytorch.callbacks.ModelCheckpoint",
        init_args=Namespace(
            dirpath=given.get("dirpath", "runs/{name}/seed{seed}"),
            every_n_train_steps=given.get("every_n_train_steps"),
        ),
    )
    trainer = Namespace(logger=logger, callbacks=[evaluation, checkpoint])
    return Namespace(trainer=trainer, every_n_steps=every)


def _filled(config: Any) -> tuple[Any, Any, str]:
    complete_run_config(config)
    evaluation, checkpoint = (c.init_args for c in config.trainer.callbacks)
    return evaluation.every_n_steps, checkpoint.every_n_train_steps, checkpoint.dirpath


def test_the_cli_fills_the_callbacks_run_name_and_cadence():
    config = _callbacks_config(500)
    assert _filled(config) == (500, 500, "runs/mine/seed{seed}")
    assert "every_n_steps" not in config  # consumed: the recorded config holds the values
    # a callback's own value wins; without every_n_steps, null stays null
    own = _filled(_callbacks_config(500, every_n_train_steps=8))
    assert own == (500, 8, "runs/mine/seed{seed}")
    assert _filled(_callbacks_config(500, every_n_steps=0))[:2] == (0, 500)
    assert _filled(_callbacks_config(None))[:2] == (None, None)
    # a folder of its own needs no name; {name} without a named logger is refused
    assert _filled(_callbacks_config(None, name="", dirpath="/tmp/c"))[2] == "/tmp/c"
    for name in ("", None):
        with pytest.raises(ValueError, match=r"runs/\{name\}/seed\{seed\}: \{name\} stands for"):
            _filled(_callbacks_config(None, name=name))


@pytest.mark.slow
def test_a_shipped_config_builds_its_callbacks_from_the_shared_parts(tmp_path, monkeypatch):
    """The instantiated callbacks of configs/cql_clevr.yaml: its own folder and cadence, as when
    the config spelled them out."""
    import lightning as L
    from lightning.pytorch.callbacks import ModelCheckpoint

    from imaginebench.callbacks import SuccessRateEvaluation
    from imaginebench.train_cli import ImagineBenchCLI

    monkeypatch.chdir(tmp_path)
    config = ROOT / "configs" / "cql_clevr.yaml"

    def callbacks(*extra: str) -> tuple[Any, Any]:
        cli = ImagineBenchCLI(
            L.LightningModule,
            L.LightningDataModule,
            subclass_mode_model=True,
            subclass_mode_data=True,
            run=False,
            args=["-c", str(config), "--seed_everything", "4", *extra],
        )
        evaluation = next(c for c in cli.trainer.callbacks if isinstance(c, SuccessRateEvaluation))
        return evaluation, cli.trainer.checkpoint_callback

    evaluation, checkpoint = callbacks()
    assert isinstance(checkpoint, ModelCheckpoint)
    assert checkpoint.dirpath == str(tmp_path / "runs" / "cql_clevr" / "seed4" / "checkpoints")
    assert evaluation.every_n_steps == checkpoint._every_n_train_steps == 2000
    evaluation, checkpoint = callbacks(
        "--every_n_steps", "500", "--trainer.logger.init_args.name", "b"
    )
    assert checkpoint.dirpath == str(tmp_path / "runs" / "b" / "seed4" / "checkpoints")
    assert evaluation.every_n_steps == checkpoint._every_n_train_steps == 500
    with pytest.raises(SystemExit):  # a negative cadence is refused when parsing
        callbacks("--every_n_steps", "-1")


def _imaginary_from(real: Path, path: Path) -> tuple[Path, int, int]:
    """A small imaginary dataset at ``path`` made of ``real``'s odd episodes, relabelled as
    imagined, with their states scaled by 0.9 (so they differ from the real ones and stay inside
    the environment's bounds, which contain 0), plus, if the states are bounded, one episode far
    outside the bounds, which the data module must drop. Returns ``path`` and the numbers of
    episodes to be kept and dropped."""
    from dataclasses import replace

    from imaginebench.data.format import RolloutDataset, load_dataset, save_dataset
    from imaginebench.envs import make

    data = load_dataset(real)
    episodes = [
        replace(e, source="imaginary", states=0.9 * e.states)
        for e in map(data.episode, range(1, len(data), 2))
    ]
    env = make(data.domain).unwrapped
    bounded = bool(np.isfinite(env.observation_space.high).all())
    env.close()
    outside = [replace(episodes[0], states=episodes[0].states + 10.0)] if bounded else []
    dataset = RolloutDataset.from_episodes(
        episodes + outside,
        domain=data.domain,
        action_spec=data.action_spec,
        provenance={"generator": "tests/test_training.py", "from": str(real)},
    )
    save_dataset(dataset, path)
    return path, len(episodes), len(outside)


@pytest.mark.parametrize(
    "stem",
    ["cql_clevr", "cql_halfcheetah"],
    ids=["cql_clevr-no_noise", "cql_halfcheetah-noise"],
)
def test_ddp_two_cpu_processes_match_one_process(tmp_path, collected, stem):
    """2 gloo processes with batch b train like 1 process with batch 2b, so after a few steps
    both runs hold the same weights (with rank-0 evaluation in between): each rank takes its
    slice of one global batch of half real, half imaginary transitions (MixedBatches), and of
    the noise drawn for the global batch's rows (StochasticModule). DiscreteCQL on CLEVR draws
    no noise; CQL on HalfCheetah draws uniform and tanh-Gaussian actions for every row in every
    update. The imaginary file exists and is mixed in (CLEVR's also has an out-of-bounds
    episode, dropped): results.json's data_used says so."""
    config = ROOT / "configs" / f"{stem}.yaml"
    real = collected(_domain(config))
    imaginary, kept, dropped = _imaginary_from(real, tmp_path / "imaginary.h5")
    assert kept > 0

    def fit(name, devices, batch):
        small = _small_config(config, tmp_path / name, real, imaginary)
        cfg = yaml.safe_load(small.read_text())
        cfg["data"]["init_args"].update(batch_size=batch, ratio=0.5)
        cfg["trainer"].update(devices=devices, strategy="ddp" if devices > 1 else "auto")
        for cb in cfg["trainer"]["callbacks"]:  # rank-0 evaluation mid-run and after fit
            if cb["class_path"].endswith("SuccessRateEvaluation"):
                cb["init_args"].update(test_after_fit=True, test_episodes_per_level=2)
        small.write_text(yaml.safe_dump(cfg))
        env = {**os.environ, "OMP_NUM_THREADS": "1"}
        out = subprocess.run(
            [sys.executable, "-m", "imaginebench.cli", "fit", "-c", str(small)],
            capture_output=True,
            text=True,
            timeout=300,
            env=env,
            cwd=tmp_path,
        )
        assert out.returncode == 0, out.stderr[-3000:]
        assert "results written" in out.stdout
        (results,) = (tmp_path / name / "runs").rglob("results.json")
        used = json.loads(results.read_text())["data_used"]
        (file,) = used["imaginary"]
        assert Path(file["file"]) == imaginary and file["found"]
        assert (file["episodes_kept"], file["episodes_dropped"]) == (kept, dropped)
        assert used["effective_ratio"] == 0.5  # half of every batch is imagined
        return torch.load(tmp_path / name / "ckpt" / "last.ckpt", weights_only=False)

    single = fit("single", 1, 64)
    ddp = fit("ddp", 2, 32)
    assert ddp["global_step"] == single["global_step"] == 6
    assert single["state_dict"].keys() == ddp["state_dict"].keys()
    for k, v in single["state_dict"].items():
        torch.testing.assert_close(ddp["state_dict"][k], v, rtol=1e-4, atol=1e-5, msg=k)


def test_several_updates_per_batch_train_exactly_like_one(real_path):
    """updates_per_batch only amortises Lightning's per-batch overhead: same stream, same steps."""
    runs = []
    for k in (1, 4):
        L.seed_everything(0)
        dm = RealImaginaryDataModule(
            real=str(real_path), ratio=0.0, batch_size=32, seed=1, updates_per_batch=k
        )
        model = DiscreteCQL(
            state_dim=dm.state_dim,
            action_spec=dm.action_spec,
            hidden=(32, 32),
            target_update_interval=5,
        )
        trainer = _trainer(24, enable_checkpointing=False)
        trainer.fit(model, dm)
        assert trainer.global_step == 24
        runs.append(model.state_dict())
    for key in runs[0]:
        assert torch.equal(runs[0][key], runs[1][key]), key


def test_cli_ckpt_path_last_resumes_to_the_uninterrupted_result(tmp_path, real_path):
    config = CONFIGS[[c.stem for c in CONFIGS].index("cql_clevr")]

    def final_weights(name, *runs):
        small = _small_config(config, tmp_path / name, real_path)
        for args in runs:
            cli = run(["fit", "-c", str(small), *args])
            if "--ckpt_path=last" in args:  # really resumed, not restarted from scratch
                assert str(cli.trainer.ckpt_path).endswith("last.ckpt")
        ckpt = torch.load(tmp_path / name / "ckpt" / "last.ckpt", weights_only=False)
        assert ckpt["global_step"] == 12
        return ckpt["state_dict"]

    straight = final_weights("straight", ["--trainer.max_steps=12"])
    resumed = final_weights(
        "resumed", ["--trainer.max_steps=6"], ["--trainer.max_steps=12", "--ckpt_path=last"]
    )
    for key, value in straight.items():
        assert torch.equal(value, resumed[key]), key


class _BackwardCounter(L.Callback):
    """A callback on the backward hook: its presence forces Lightning's hooked update path."""

    def __init__(self) -> None:
        self.calls = 0

    def on_after_backward(self, trainer, pl_module) -> None:
        self.calls += 1


def test_direct_updates_train_exactly_like_lightnings_hooked_path(real_path):
    """Without step hooks to serve, updates bypass manual_backward / LightningOptimizer.step;
    a callback on a backward hook switches back to them, and both give the same weights."""
    runs = []
    for callbacks in ([], [_BackwardCounter()]):
        dm, model = _fresh(real_path)
        trainer = _trainer(10, enable_checkpointing=False, callbacks=callbacks)
        trainer.fit(model, dm)
        assert trainer.global_step == 10
        assert model.direct_updates == (not callbacks)
        runs.append(model.state_dict())
    assert callbacks[0].calls == 10  # the hooked path ran every hook
    for key in runs[0]:
        assert torch.equal(runs[0][key], runs[1][key]), key


@pytest.mark.parametrize("rich", [True, False], ids=["rich", "tqdm"])
def test_progress_bar_counts_updates_not_batches(tmp_path, real_path, rich):
    """With several updates per Lightning batch, the CLI's bar ends at max_steps of max_steps
    (Lightning's own would stop at max_steps / updates_per_batch)."""
    import imaginebench.callbacks.progress as progress
    from imaginebench.callbacks import UpdateRichProgressBar, UpdateTQDMProgressBar

    config = CONFIGS[[c.stem for c in CONFIGS].index("bc_clevr")]
    small = _small_config(config, tmp_path, real_path, enable_progress_bar=True)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(progress, "_RICH_AVAILABLE", rich)
        bar = run(["fit", "-c", str(small)]).trainer.progress_bar_callback
    if rich:
        assert type(bar) is UpdateRichProgressBar
        task = bar.progress.tasks[bar.train_progress_bar_id]
        assert (task.completed, task.total) == (6, 6)
        assert task.description.strip() == "Training"
    else:
        assert type(bar) is UpdateTQDMProgressBar
        assert (bar.train_progress_bar.n, bar.train_progress_bar.total) == (6, 6)


def test_a_progress_bar_named_in_the_config_is_kept(tmp_path, real_path):
    from lightning.pytorch.callbacks import TQDMProgressBar

    config = CONFIGS[[c.stem for c in CONFIGS].index("bc_clevr")]
    small = _small_config(config, tmp_path, real_path, enable_progress_bar=True)
    cfg = yaml.safe_load(small.read_text())
    cfg["trainer"]["callbacks"].append(
        {"class_path": "lightning.pytorch.callbacks.TQDMProgressBar", "init_args": {}}
    )
    small.write_text(yaml.safe_dump(cfg))
    bar = run(["fit", "-c", str(small)]).trainer.progress_bar_callback
    assert type(bar) is TQDMProgressBar


def test_fit_overrides_the_batch_transfer_in_one_place_only(real_path):
    """The in-memory batch skips Lightning's device copy without a double-override warning."""
    import warnings

    dm, model = _fresh(real_path)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _trainer(4, enable_checkpointing=False).fit(model, dm)
    assert not [w for w in caught if "transfer_batch_to_device" in str(w.message)]
