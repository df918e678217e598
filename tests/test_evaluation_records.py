"""What the evaluation records beyond the per-level score: success per task, the expert scored
on the evaluation set, and the final scores with the run's hyperparameters in TensorBoard's
HParams tab."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

import lightning as L
import numpy as np
import pytest

from imaginebench.benchmark.references import RandomPolicy
from imaginebench.callbacks import SuccessRateEvaluation
from imaginebench.callbacks.evaluation import ExpertPolicy, evaluate_level
from imaginebench.envs import make
from imaginebench.experts import make_expert


class StateHash:
    """A deterministic CLEVR policy: its action depends on the state alone."""

    def act(self, states, instructions):
        return (np.abs(states).sum(1) * 1000).astype(int) % 40


def test_success_is_recorded_per_task():
    env = make("clevr", "easy").unwrapped
    result = evaluate_level(RandomPolicy(env.action_space, seed=0), "clevr", "easy", 40, seed=0)
    plans = env.suite.episodes("easy", 40, 0)
    expected = Counter(plan.task.spec() for plan in plans)
    assert {t["task"]: t["episodes"] for t in result.tasks} == dict(expected)
    assert sum(t["successes"] for t in result.tasks) == result.successes
    assert 0 < result.successes < 40  # some solved, some not: the split is informative
    first = plans[0].task
    assert result.tasks[0]["task"] == first.spec()  # in the order tasks first occur
    assert result.tasks[0]["name"] == first.instructions("train")[0]


def test_the_expert_is_scored_on_the_evaluation_set():
    made = []

    def expert():
        made.append(make_expert("babyai", seed=0))
        return made[-1]

    # the episodes run side by side; BabyAI's expert plans from the live env it is handed
    result = evaluate_level(ExpertPolicy(expert), "babyai", "hard", 6, seed=0)
    assert result.success == 1.0  # the expert solves every hard task (docs/results)
    assert len(made) == 6  # one expert per episode: experts may remember their episode


def test_episodes_in_groups_of_environments_score_as_side_by_side():
    """``max_envs`` runs the episodes in consecutive groups on fewer simulators (LIBERO's are
    large): the same episodes, the same outcomes, and a fresh expert for every episode."""
    together = evaluate_level(StateHash(), "clevr", "hard", 12, 0)
    envs: list = []
    grouped = evaluate_level(StateHash(), "clevr", "hard", 12, 0, envs, max_envs=5)
    assert len(envs) == 5 and grouped == together and 0 < together.successes < 12
    made = []

    def expert():
        made.append(make_expert("babyai", seed=0))
        return made[-1]

    result = evaluate_level(ExpertPolicy(expert), "babyai", "hard", 6, seed=0, max_envs=4)
    assert result.success == 1.0 and len(made) == 6
    with pytest.raises(ValueError, match="max_envs must be >= 1"):
        evaluate_level(StateHash(), "clevr", "hard", 2, 0, max_envs=0)


def test_the_final_scores_extra_environments_are_closed_after_their_level():
    """A final score with more episodes than the training-time evaluation closes the extra
    environments after each level (Meta-World would otherwise hold 100 simulators per level
    for all four levels) and scores exactly as before."""
    closed = []
    callback = SuccessRateEvaluation(episodes_per_level=3, levels=["hard", "easy"])
    trainer = SimpleNamespace(datamodule=SimpleNamespace(domain="clevr"))
    for level in callback.levels:
        envs = callback._envs.setdefault(level, [])
        for _ in range(12):
            env = make("clevr", level).unwrapped
            env.close = lambda env=env: closed.append(env)
            envs.append(env)
    first = callback.run(trainer, StateHash(), 12)
    assert len(closed) == 2 * 9 and {len(e) for e in callback._envs.values()} == {3}
    assert not any(env in closed for envs in callback._envs.values() for env in envs)
    assert callback.run(trainer, StateHash(), 12) == first  # rebuilt, the same episodes
    assert [r.episodes for r in first] == [12, 12] and 0 < first[0].successes < 12


def _hparams_records(log_dir: Path) -> tuple[set[str], dict[str, object]]:
    """The metric tags of the HParams experiment and the hyperparameters of the session that
    TensorBoard reads from the run's event files."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from tensorboard.plugins.hparams import plugin_data_pb2

    accumulator = EventAccumulator(str(log_dir))
    accumulator.Reload()
    content = accumulator.PluginTagToContent("hparams")
    experiment = plugin_data_pb2.HParamsPluginData.FromString(content["_hparams_/experiment"])
    session = plugin_data_pb2.HParamsPluginData.FromString(content["_hparams_/session_start_info"])
    metrics = {m.name.tag for m in experiment.experiment.metric_infos}
    params = {}
    for key, value in session.session_start_info.hparams.items():
        kind = value.WhichOneof("kind")
        params[key] = getattr(value, kind)
    return metrics, params


def test_final_scores_reach_the_hparams_tab_with_the_hyperparameters(tmp_path, one_thread):
    from lightning.pytorch.loggers import TensorBoardLogger

    from imaginebench.data.collect import collect
    from imaginebench.data.format import save_dataset
    from imaginebench.datamodules import RealImaginaryDataModule
    from imaginebench.modules.offline import DiscreteBC

    dataset, _ = collect("clevr", "train", 8, seed=0, epsilon=0.2, progress=False)
    real = save_dataset(dataset, tmp_path / "real.h5")
    dm = RealImaginaryDataModule(real=str(real), imaginary=[], batch_size=16)
    model = DiscreteBC(hidden=[16], lr=0.002)
    levels = ["easy", "hard"]
    evaluation = SuccessRateEvaluation(
        every_n_steps=0, test_episodes_per_level=2, levels=levels, test_after_fit=True
    )
    logger = TensorBoardLogger(str(tmp_path), name="tb", version="run")  # default_hp_metric on
    trainer = L.Trainer(
        max_steps=8,
        accelerator="cpu",
        logger=logger,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=[evaluation],
    )
    trainer.fit(model, datamodule=dm)

    metrics, params = _hparams_records(Path(logger.log_dir))
    assert metrics == {"test/easy/success", "test/hard/success", "test/mean_success"}
    assert params["algorithm"] == "DiscreteBC"
    assert params["model/lr"] == pytest.approx(0.002)
    assert params["data/batch_size"] == 16
    saved = json.loads((Path(logger.log_dir) / "results.json").read_text())
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    scalars = EventAccumulator(logger.log_dir)
    scalars.Reload()
    last = scalars.Scalars("test/hard/success")[-1]
    assert (last.step, last.value) == (8, pytest.approx(saved["levels"]["hard"]["success"]))
    assert "hp_metric" not in scalars.Tags()["scalars"]  # Lightning's placeholder is off
