"""The ``ours`` contender: our module fitted by ``lightning.Trainer`` on our data module, the
steps after the warm-up timed by a callback."""

from __future__ import annotations

import time
from typing import Any

import torch
from throughput_data import Data, Hyper
from throughput_settings import settings

UPDATES_PER_BATCH = 8  # the ours contender: the data module's default updates per batch


def make_module(algo: str, state_dim: int, action_spec: dict, hp: Hyper) -> Any:
    from imaginebench.modules import offline

    cls = getattr(offline, algo)
    return cls(
        state_dim=state_dim,
        action_spec=action_spec,
        hidden=hp.hidden,
        instruction_dim=hp.instruction_dim,
        **settings(algo),
    )


def buffer_datamodule(data: Data, hp: Hyper, seed: int, k: int) -> Any:
    """The continuous transitions served like ``RealImaginaryDataModule(ratio=0)``: its
    environment-free core over the in-memory dataset."""
    from imaginebench.datamodules import RolloutDataModule

    return RolloutDataModule(
        data.dataset, ratio=0.0, batch_size=hp.batch_size, seed=seed, updates_per_batch=k
    )


def run_ours(
    algo: str, data: Data, hp: Hyper, warmup: int, steps: int, seed: int, k: int = UPDATES_PER_BATCH
) -> dict:
    import lightning as L

    from imaginebench.datamodules import RealImaginaryDataModule

    class StepTimer(L.Callback):
        """Time from the end of step ``warmup`` to the end of step ``warmup + steps``."""

        def __init__(self) -> None:
            self.t0, self.t1 = None, None

        def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
            step = trainer.global_step  # one per update, also with k updates per batch
            if step >= warmup and self.t0 is None:
                self.t0 = (time.perf_counter(), time.process_time())
            elif step >= warmup + steps and self.t1 is None:
                self.t1 = (time.perf_counter(), time.process_time())

    torch.manual_seed(seed)
    if data.discrete:
        dm = RealImaginaryDataModule(
            real=str(data.path), ratio=0.0, batch_size=hp.batch_size, seed=seed, updates_per_batch=k
        )
    else:
        dm = buffer_datamodule(data, hp, seed, k)
    model = make_module(algo, dm.state_dim, dm.action_spec, hp)
    timer = StepTimer()
    trainer = L.Trainer(
        max_steps=warmup + steps,
        accelerator="cpu",
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=[timer],
    )
    trainer.fit(model, dm)
    assert timer.t0 is not None and timer.t1 is not None, "the trainer stopped early"
    return {"seconds": timer.t1[0] - timer.t0[0], "cpu_seconds": timer.t1[1] - timer.t0[1]}
