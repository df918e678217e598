"""Hostile or careless input: each test pins one behaviour listed in docs/reliability.md."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest
import yaml

from imaginebench.cli import main as cli_main
from imaginebench.config import load_config_file
from imaginebench.data.collect import collect
from imaginebench.data.format import DatasetError, save_dataset
from imaginebench.train_cli import run as train_cli

DOCS = Path(__file__).resolve().parents[1] / "docs"


def test_config_class_path_imports_code_as_documented(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    marker = tmp_path / "imported"
    (tmp_path / "sneaky_config_module.py").write_text(
        f"import pathlib\npathlib.Path({str(marker)!r}).touch()\nclass Model:\n    pass\n"
    )
    config = tmp_path / "shared.yaml"
    config.write_text("model:\n  class_path: sneaky_config_module.Model\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(SystemExit):  # Model is no LightningModule: rejected, but only after
        train_cli(["fit", "-c", str(config), "--print_config"])
    assert marker.exists()  # ... its module ran: what docs/training.md warns about
    assert "**A config file is code.**" in (DOCS / "training.md").read_text()


# ------------------------------------------------------------------------------------ CLI runs

CONFIG = Path(__file__).resolve().parents[1] / "configs" / "bc_clevr.yaml"


@pytest.fixture(scope="module")
def real_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("data") / "real.h5"
    dataset, _ = collect("clevr", "train", 12, seed=0, epsilon=0.2, progress=False)
    return save_dataset(dataset, path)


def small_config(
    tmp_path: Path,
    real: Path,
    imaginary: list[str] | None = None,
    test_after_fit: bool = True,
    ckpt_dir: str = "ckpt",
) -> Path:
    """configs/bc_clevr.yaml shrunk to 4 steps and one evaluation episode of one level,
    writing into ``tmp_path`` (checkpoints into ``tmp_path / ckpt_dir``)."""
    cfg = load_config_file(CONFIG)  # its configs/parts/ include merged in
    cfg["trainer"].update(max_steps=4, enable_progress_bar=False)
    cfg["trainer"]["logger"]["init_args"]["save_dir"] = str(tmp_path / "runs")
    for cb in cfg["trainer"]["callbacks"]:
        if cb["class_path"].endswith("SuccessRateEvaluation"):
            cb["init_args"].update(
                every_n_steps=0,
                episodes_per_level=1,
                test_episodes_per_level=1,
                levels=["easy"],
                test_after_fit=test_after_fit,
            )
        if cb["class_path"].endswith("ModelCheckpoint"):
            cb["init_args"].update(dirpath=str(tmp_path / ckpt_dir), every_n_train_steps=2)
    cfg["model"]["init_args"]["hidden"] = [16]
    cfg["data"]["init_args"].update(
        real=str(real), imaginary=imaginary or [], batch_size=16, updates_per_batch=2
    )
    path = tmp_path / "small.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def test_fit_with_zero_steps_is_refused(tmp_path: Path, real_path: Path) -> None:
    config = small_config(tmp_path, real_path)
    with pytest.raises(ValueError, match="max_steps 0: fit would train nothing"):
        train_cli(["fit", "-c", str(config), "--trainer.max_steps", "0"])
    assert not list(tmp_path.rglob("results.json"))


# ------------------------------------------------------------------------------------ data CLI


def test_info_fails_on_a_file_fit_rejects(
    tmp_path: Path, real_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "nan.h5"
    path.write_bytes(real_path.read_bytes())
    with h5py.File(path, "r+") as h5:
        h5["rewards"][0] = np.nan
    assert cli_main(["info", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{path}: non-finite values" in err
    assert cli_main(["info", "--drop-nonfinite", str(path)]) == 0
    assert "dropped (non-finite): 1" in capsys.readouterr().out


def test_manifest_refuses_a_missing_or_empty_directory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing, empty = tmp_path / "mistyped", tmp_path / "empty"
    empty.mkdir()
    for directory, problem in ((missing, "no such directory"), (empty, "no .h5 dataset files")):
        assert cli_main(["manifest", str(directory)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and f"{directory}: {problem}" in err
    assert not missing.exists() and not list(empty.iterdir())


def test_results_record_the_data_really_used(tmp_path: Path, real_path: Path) -> None:
    missing = str(tmp_path / "typo_imaginary.h5")
    config = small_config(tmp_path, real_path, imaginary=[missing])
    with pytest.raises(FileNotFoundError, match="typo_imaginary.h5: imaginary dataset"):
        train_cli(["fit", "-c", str(config)])
    asked = ["--data.init_args.imaginary_optional", "true", "--data.init_args.ratio", "0.5"]
    train_cli(["fit", "-c", str(config), *asked])
    (results,) = tmp_path.rglob("results.json")
    payload = json.loads(results.read_text())
    assert payload["data"]["ratio"] == 0.5  # asked for
    used = payload["data_used"]  # got
    assert used["effective_ratio"] == 0.0 and used["real"]["file"] == str(real_path)
    assert used["imaginary"] == [
        {"file": missing, "found": False, "episodes_kept": 0, "episodes_dropped": 0}
    ]


def test_test_reports_the_checkpoints_step(
    tmp_path: Path, real_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = small_config(tmp_path, real_path, test_after_fit=False)
    train_cli(["fit", "-c", str(config)])
    capsys.readouterr()
    train_cli(["test", "-c", str(config), "--ckpt_path", str(tmp_path / "ckpt" / "last.ckpt")])
    assert "DiscreteBC at step 4 " in capsys.readouterr().out
    (results,) = tmp_path.rglob("results.json")
    assert json.loads(results.read_text())["global_step"] == 4


# ------------------------------------------------------------------------------------ claims


def test_no_stale_aim_claim_about_the_original_clevr_data() -> None:
    """The original real episodes (replayed) have no blocked first push, so nothing may claim
    that the original's first push usually missed because it aimed at stale positions."""
    root = DOCS.parent
    for path in ("docs/clevr.md", "imaginebench/envs/clevr/physics.py", "tests/test_clevr_env.py"):
        text = (root / path).read_text().lower()
        assert "first push missed" not in text and "stale-aim" not in text, path
        assert "stale (pre-reset)" not in text and "stale right after a reset" not in text, path
    assert "no first push of an episode was blocked" in (DOCS / "clevr.md").read_text()


# ------------------------------------------------------------------------------------ one line


@pytest.mark.parametrize("command", ["fit", "validate", "test"])
def test_trainer_commands_report_data_errors_in_one_line(
    tmp_path: Path, real_path: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    corrupt = tmp_path / "corrupt.h5"
    corrupt.write_bytes(b"not an HDF5 file\n" * 10)
    config = small_config(tmp_path, real_path)
    args = [command, "-c", str(config), "--data.init_args.real", str(corrupt)]
    assert cli_main(args) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert err.splitlines()[-1].startswith(f"error: {corrupt}: not a readable HDF5 file")
    with pytest.raises(DatasetError, match="not a readable HDF5 file"):
        cli_main([*args, "--debug"])


# ------------------------------------------------------------------------------------ resume


def test_resume_refuses_another_runs_checkpoint(tmp_path: Path, real_path: Path) -> None:
    config = str(small_config(tmp_path, real_path, test_after_fit=False))

    def fit(seed: int, steps: int, *extra: str) -> Any:
        args = ["--data.init_args.seed", str(seed), "--trainer.max_steps", str(steps)]
        return train_cli(["fit", "-c", config, *args, *extra])

    fit(1, 4)  # seed 1 writes ckpt/last.ckpt into the folder both runs share
    with pytest.raises(ValueError, match=r"last\.ckpt: written by .*data\.seed 1 -> 0"):
        fit(0, 6, "--ckpt_path", "last")
    assert fit(1, 6, "--ckpt_path", "last").trainer.global_step == 6  # the same run resumes
    forced = fit(0, 8, "--ckpt_path", "last", "--allow_resume_mismatch", "true")
    assert forced.trainer.global_step == 8


def shipped_ckpt_dir(config: Path) -> str:
    """The checkpoint folder a shipped config gives (from its configs/parts/ include), before the
    CLI fills in ``{name}`` (the logger's name) and ``{seed}``."""
    (dirpath,) = [
        cb["init_args"]["dirpath"]
        for cb in load_config_file(config)["trainer"]["callbacks"]
        if cb["class_path"].endswith("ModelCheckpoint")
    ]
    return dirpath


def test_seeds_of_one_config_checkpoint_into_their_own_folders(
    tmp_path: Path, real_path: Path
) -> None:
    offline_rl = [
        c for c in CONFIG.parent.glob("*.yaml") if not c.stem.startswith(("grounding_", "imagine_"))
    ]
    # every config in configs/ but the grounding and imagination ones trains an offline RL module
    assert len(offline_rl) >= 15 and all("modules.offline" in c.read_text() for c in offline_rl)
    for config in offline_rl:  # every shipped offline RL config: runs/<config>/seed{seed}/...
        assert shipped_ckpt_dir(config) == "runs/{name}/seed{seed}/checkpoints"
        logger = load_config_file(config)["trainer"]["logger"]["init_args"]
        assert logger["name"] == config.stem
    config = str(small_config(tmp_path, real_path, ckpt_dir=shipped_ckpt_dir(CONFIG)))
    folders = []
    for seed in (0, 1):
        cli = train_cli(["fit", "-c", config, "--seed_everything", str(seed)])
        folders.append(Path(cli.trainer.checkpoint_callback.dirpath))
    assert folders == [tmp_path / f"runs/bc_clevr/seed{seed}/checkpoints" for seed in (0, 1)]
    for folder in folders:
        assert sorted(p.name for p in folder.iterdir()) == ["last.ckpt"]  # no last-v1.ckpt


def test_ckpt_path_last_resumes_the_runs_own_seed(tmp_path: Path, real_path: Path) -> None:
    config = str(small_config(tmp_path, real_path, test_after_fit=False, ckpt_dir="c/s{seed}"))

    def fit(seed: int, steps: int, *extra: str) -> Any:
        args = ["--seed_everything", str(seed), "--data.init_args.seed", str(seed)]
        return train_cli(["fit", "-c", config, *args, "--trainer.max_steps", str(steps), *extra])

    fit(0, 4)
    fit(1, 4)  # the newer checkpoint: what a folder shared by both seeds would resume
    resumed = fit(0, 6, "--ckpt_path", "last")
    assert resumed.trainer.ckpt_path == str(tmp_path / "c" / "s0" / "last.ckpt")
    assert resumed.trainer.global_step == 6
    # the resume check stays: seed 0's folder, but another data seed than its checkpoint's
    with pytest.raises(ValueError, match=r"s0/last\.ckpt: written by .*data\.seed 0 -> 1"):
        fit(0, 8, "--ckpt_path", "last", "--data.init_args.seed", "1")
    # ...and so does a run seed that differs when nothing else does (a folder without {seed})
    shared = ["--seed_everything", "1", "--data.init_args.seed", "0", "--ckpt_path", "last"]
    with pytest.raises(ValueError, match=r"s0/last\.ckpt: written by .*seed_everything 0 -> 1"):
        train_cli(["fit", "-c", config, *shared, "--trainer.max_steps", "8",
                   "--trainer.callbacks.dirpath", str(tmp_path / "c" / "s0")])


def test_checkpoint_folder_placeholder_must_be_seed_and_the_seed_known(
    tmp_path: Path, real_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    unknown = small_config(tmp_path, real_path, ckpt_dir="ckpt/{foo}-{seed}")
    assert cli_main(["fit", "-c", str(unknown), "--seed_everything", "3"]) == 2
    err = capsys.readouterr().err.splitlines()[-1]
    assert err.startswith("error: ModelCheckpoint dirpath ")
    assert err.endswith(
        "ckpt/{foo}-{seed}: unknown placeholder {foo} "
        "(known: {seed}, and {name}, which the CLI fills from the logger's name)"
    )
    unseeded = small_config(tmp_path, real_path, ckpt_dir="ckpt/seed{seed}")
    assert cli_main(["fit", "-c", str(unseeded), "--seed_everything", "false"]) == 2
    err = capsys.readouterr().err.splitlines()[-1]
    assert err.endswith("{seed} needs an explicit seed_everything (an integer), got False")
    assert not (tmp_path / "ckpt").exists() and not list(tmp_path.rglob("results.json"))
    drawn = train_cli(["fit", "-c", str(unseeded), "--seed_everything", "true"])
    seed = drawn.config.fit.seed_everything  # the seed Lightning drew
    assert type(seed) is int and drawn.trainer.checkpoint_callback.dirpath == str(
        tmp_path / "ckpt" / f"seed{seed}"
    )
