"""The Python API as Lightning users drive it (issue 25): ``trainer.test`` returns and logs the
scores per level, algorithms take their sizes from the data module, the issue's snippet works
as written, and every example of docs/python_api.md runs."""

from __future__ import annotations

import json
import re
from pathlib import Path

import lightning as L
import pytest
import torch

from imaginebench.callbacks import SuccessRateEvaluation
from imaginebench.data.collect import collect
from imaginebench.data.format import save_dataset
from imaginebench.datamodules import RealImaginaryDataModule
from imaginebench.envs.base import LEVELS
from imaginebench.modules.offline import ALGORITHMS, DiscreteBC, DiscreteCQL

DOC = Path(__file__).resolve().parents[1] / "docs" / "python_api.md"
DETAILS = ("success", "success_ci_low", "success_ci_high", "return", "length")


@pytest.fixture(scope="module")
def real_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("data") / "real.h5"
    dataset, _ = collect("clevr", "train", 12, seed=0, epsilon=0.2, progress=False)
    return save_dataset(dataset, path)


def _dm(real_path: Path) -> RealImaginaryDataModule:
    return RealImaginaryDataModule(real=str(real_path), imaginary=[], batch_size=16)


def _trainer(steps: int, evaluation: SuccessRateEvaluation, **kwargs) -> L.Trainer:
    kwargs.setdefault("logger", False)
    return L.Trainer(
        max_steps=steps,
        accelerator="cpu",
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=[evaluation],
        **kwargs,
    )


def _tensorboard_scalars(directory: Path) -> dict[str, tuple[int, float]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    (run,) = {events.parent for events in directory.rglob("events.out.tfevents.*")}
    accumulator = EventAccumulator(str(run))  # every event file of the run
    accumulator.Reload()
    last = {tag: accumulator.Scalars(tag)[-1] for tag in accumulator.Tags()["scalars"]}
    return {tag: (event.step, event.value) for tag, event in last.items()}


def test_test_returns_and_logs_the_scores_per_level(tmp_path, real_path):
    from lightning.pytorch.loggers import TensorBoardLogger

    dm = _dm(real_path)
    model = DiscreteBC(dm.state_dim, dm.action_spec, hidden=[16])
    levels = ["easy", "hard"]
    evaluation = SuccessRateEvaluation(
        every_n_steps=0, episodes_per_level=2, test_episodes_per_level=3, levels=levels
    )
    trainer = _trainer(2, evaluation, logger=TensorBoardLogger(str(tmp_path), name="tb"))
    trainer.fit(model, datamodule=dm)

    (val,) = trainer.validate(model, datamodule=dm)
    assert set(val) == {f"val/{level}/success" for level in levels} | {"step"}
    (scores,) = trainer.test(model, datamodule=dm)

    expected = {f"test/{level}/{d}" for level in levels for d in DETAILS} | {"test/mean_success"}
    assert set(scores) == expected | {"step"} and scores["step"] == 2  # the weights' step
    saved = json.loads((Path(trainer.log_dir) / "results.json").read_text())["levels"]
    for level in levels:
        r = saved[level]
        values = (r["success"], *r["ci95"], r["mean_return"], r["mean_length"])
        for detail, value in zip(DETAILS, values):
            assert scores[f"test/{level}/{detail}"] == pytest.approx(value, abs=1e-6)
    mean = sum(saved[level]["success"] for level in levels) / len(levels)
    assert scores["test/mean_success"] == pytest.approx(mean, abs=1e-6)
    assert trainer.callback_metrics["test/hard/success"] == pytest.approx(saved["hard"]["success"])

    logged = _tensorboard_scalars(tmp_path / "tb")  # what TensorBoard shows, at step 2
    for key in expected:
        assert logged[key] == (2, pytest.approx(scores[key], abs=1e-6)), key


def test_without_a_logger_results_go_under_default_root_dir(
    tmp_path, real_path, monkeypatch, capsys
):
    monkeypatch.chdir(tmp_path)
    dm = _dm(real_path)
    model = DiscreteBC(dm.state_dim, dm.action_spec, hidden=[16])
    evaluation = SuccessRateEvaluation(test_episodes_per_level=1, levels=["easy"])
    trainer = _trainer(1, evaluation, default_root_dir="out")
    trainer.test(model, datamodule=dm)
    path = (tmp_path / "out" / "results.json").resolve()
    assert path.is_file() and not (tmp_path / "results.json").exists()
    assert f"results written to {path}\n" in capsys.readouterr().out  # absolute


@pytest.mark.parametrize("cls", [c for pair in ALGORITHMS.values() for c in pair if c])
def test_algorithms_built_without_sizes_take_the_data_modules(cls, real_path):
    """``cls()`` rebuilt for the data equals ``cls(state_dim, action_spec)`` made at the same
    moment: the same networks, initial weights and hyperparameters."""
    dm = _dm(real_path)
    dm.state_dim, dm.action_spec = 7, (
        {"type": "discrete", "n": 5}
        if cls.discrete
        else {"type": "continuous", "shape": [3], "low": -2.0, "high": 2.0}
    )
    torch.manual_seed(0)
    deferred = cls(hidden=[8])
    torch.manual_seed(0)
    explicit = cls(state_dim=7, action_spec=dm.action_spec, hidden=[8])
    deferred.build_for_data(dm)
    assert deferred.sizes_from_data == () and deferred.state_dim == 7
    a, b = deferred.state_dict(), explicit.state_dict()
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert dict(deferred.hparams) == dict(explicit.hparams)


def test_fit_without_sizes_trains_and_checkpoints_like_with_them(tmp_path, real_path):
    weights = []
    for sizes in (False, True):
        dm = _dm(real_path)
        L.seed_everything(0)
        given = {"state_dim": dm.state_dim, "action_spec": dm.action_spec} if sizes else {}
        model = DiscreteCQL(hidden=[16], **given)
        trainer = _trainer(3, SuccessRateEvaluation(every_n_steps=0))
        trainer.fit(model, datamodule=dm)
        weights.append(model.state_dict())
    assert all(torch.equal(weights[0][k], weights[1][k]) for k in weights[1])
    trainer.save_checkpoint(tmp_path / "m.ckpt")
    restored = DiscreteCQL.load_from_checkpoint(tmp_path / "m.ckpt")  # sizes in hparams
    assert restored.state_dim == dm.state_dim and restored.action_spec == dm.action_spec


def test_without_sizes_or_data_module_the_error_says_what_to_pass(real_path):
    model = DiscreteCQL(hidden=[16])
    with pytest.raises(RuntimeError, match="come from the data module"):
        model.act([0.0] * 10, "push the red ball left")
    loader = [0]
    with pytest.raises(ValueError, match=r"without state_dim and action_spec .* no data module"):
        _trainer(1, SuccessRateEvaluation()).fit(model, train_dataloaders=loader)


def test_the_issue_snippet_returns_the_scores_per_level(tmp_path, real_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("IMAGINEBENCH_CACHE", str(tmp_path / "cache"))
    first, data = _trainer(2, SuccessRateEvaluation(every_n_steps=0)), _dm(real_path)
    sizes = {"state_dim": data.state_dim, "action_spec": data.action_spec}
    first.fit(DiscreteCQL(hidden=[16], **sizes), datamodule=data)
    # where the snippet looks: where configs/cql_clevr.yaml writes with seed_everything 0
    first.save_checkpoint("runs/cql_clevr/seed0/checkpoints/last.ckpt")

    # issue 25's snippet, with a short budget (8 instead of 1000 episodes, 2 instead of 50)
    model = DiscreteCQL.load_from_checkpoint("runs/cql_clevr/seed0/checkpoints/last.ckpt")
    dm = RealImaginaryDataModule(
        domain="clevr", collect={"episodes": 8, "seed": 0, "epsilon": 0.2, "paraphrases": 2}
    )
    trainer = L.Trainer(
        accelerator="cpu",
        logger=False,
        callbacks=[SuccessRateEvaluation(test_episodes_per_level=2)],
    )
    returned = trainer.test(model, datamodule=dm)

    saved = json.loads((tmp_path / "results.json").read_text())  # default_root_dir: the cwd
    assert {f"test/{level}/success" for level in LEVELS} <= set(returned[0])
    for level in LEVELS:
        assert returned[0][f"test/{level}/success"] == saved["levels"][level]["success"]
    assert saved["data"]["collect"] == str(dm.collect)  # the dict became a CollectConfig
    assert returned[0]["step"] == saved["global_step"] == 2  # the checkpoint's, not 0


def python_blocks(markdown: str) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", markdown, flags=re.S | re.M)


def test_docs_python_api_examples_run(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("IMAGINEBENCH_CACHE", str(tmp_path / "cache"))
    blocks = python_blocks(DOC.read_text())
    assert len(blocks) >= 6
    namespace: dict = {}
    for i, block in enumerate(blocks):
        exec(compile(block, f"{DOC.name} block {i + 1}", "exec"), namespace)
    out = capsys.readouterr().out
    assert "results written to" in out and "mean over levels" in out
    assert set(namespace["scores"]) >= {f"test/{level}/success" for level in LEVELS}
    assert (tmp_path / "runs/python_api/test/results.json").is_file()
    assert namespace["mixed"].imaginary is not None
