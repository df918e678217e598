"""The worked example of docs/writing_an_algorithm.md trains through the CLI with its own YAML
(its algorithm also runs through tests/test_conformance.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml

from imaginebench.train_cli import run

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"


@pytest.fixture(scope="module")
def real_path(tmp_path_factory) -> Path:
    from imaginebench.data.collect import collect
    from imaginebench.data.format import save_dataset

    path = tmp_path_factory.mktemp("data") / "real.h5"
    dataset, _ = collect("clevr", "train", 12, seed=0, epsilon=0.2, progress=False)
    save_dataset(dataset, path)
    return path


def test_example_config_fits_through_the_cli(tmp_path, real_path, monkeypatch):
    monkeypatch.syspath_prepend(str(EXAMPLES))  # what PYTHONPATH=examples does
    cfg = yaml.safe_load((EXAMPLES / "my_algorithm_clevr.yaml").read_text())
    assert cfg["model"]["class_path"] == "my_algorithm.DiscreteAWAC"
    cfg["trainer"].update({"max_steps": 4, "enable_progress_bar": False})
    cfg["trainer"]["logger"]["init_args"]["save_dir"] = str(tmp_path / "runs")
    for cb in cfg["trainer"]["callbacks"]:
        if cb["class_path"].endswith("SuccessRateEvaluation"):
            cb["init_args"].update(every_n_steps=2, episodes_per_level=2, test_after_fit=False)
        if cb["class_path"].endswith("ModelCheckpoint"):
            cb["init_args"].update(dirpath=str(tmp_path / "ckpt"), every_n_train_steps=2)
    data = cfg["data"].get("init_args", cfg["data"])
    data.update(real=str(real_path), imaginary=[], batch_size=32, updates_per_batch=2)
    config = tmp_path / "my_algorithm.yaml"
    config.write_text(yaml.safe_dump(cfg))

    cli = run(["fit", "-c", str(config)])
    assert type(cli.model).__name__ == "DiscreteAWAC" and cli.trainer.global_step == 4
    evaluation = next(
        c for c in cli.trainer.callbacks if type(c).__name__ == "SuccessRateEvaluation"
    )
    assert {r.level for r in evaluation.last_results} == {"train", "rephrase", "easy", "hard"}
    restored = type(cli.model).load_from_checkpoint(tmp_path / "ckpt" / "last.ckpt")
    states = np.random.default_rng(0).uniform(-0.4, 0.4, size=(3, 10)).astype(np.float32)
    words = ["Push the red ball to the left of the blue ball"] * 3
    np.testing.assert_array_equal(restored.act(states, words), cli.model.act(states, words))
