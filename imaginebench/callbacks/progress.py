"""A progress bar that counts gradient updates.

The offline RL modules run ``updates_per_batch`` updates per Lightning batch on an endless
stream, bounded by ``max_steps`` (= updates). Lightning's bars count batches against a total of
``max_steps - global_step`` and title the bar ``Epoch 0/-2``, so a finished run stops at
``750/6000``. This bar counts ``global_step`` instead whenever the run is bounded by steps.
"""

from __future__ import annotations

from typing import Any

import lightning as L
from lightning.pytorch.callbacks import RichProgressBar, TQDMProgressBar
from lightning.pytorch.utilities.imports import _RICH_AVAILABLE


def _bounded_by_steps(trainer: L.Trainer) -> bool:
    return trainer.max_epochs == -1 and trainer.max_steps is not None and trainer.max_steps > 0


class _CountUpdates:
    """Mixin for Lightning's progress bars: in a step-bounded run, report the updates done
    since the epoch started (what the bar's total counts) as the position."""

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        # a run resumed mid-epoch gets no on_train_epoch_start: count from here then
        self._first_step = trainer.global_step
        super().on_train_start(trainer, pl_module)  # type: ignore[misc]

    def on_train_epoch_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._first_step = trainer.global_step
        super().on_train_epoch_start(trainer, pl_module)  # type: ignore[misc]

    def on_train_batch_end(
        self,
        trainer: L.Trainer,
        pl_module: L.LightningModule,
        outputs: Any,
        batch: Any,
        batch_idx: int,
    ) -> None:
        if _bounded_by_steps(trainer):  # the bar shows position batch_idx + 1
            batch_idx = trainer.global_step - self._first_step - 1
        super().on_train_batch_end(trainer, pl_module, outputs, batch, batch_idx)  # type: ignore[misc]


class UpdateRichProgressBar(_CountUpdates, RichProgressBar):
    """Lightning's rich bar, counting updates and titled ``Training`` in step-bounded runs."""

    def _get_train_description(self, current_epoch: int) -> str:
        if _bounded_by_steps(self.trainer):
            return f"{'Training':{len(self.validation_description)}}"
        return super()._get_train_description(current_epoch)


class UpdateTQDMProgressBar(_CountUpdates, TQDMProgressBar):
    """Lightning's tqdm bar, counting updates in step-bounded runs."""


def update_progress_bar() -> RichProgressBar | TQDMProgressBar:
    """The bar Lightning would pick by default (rich when installed), counting updates."""
    return UpdateRichProgressBar() if _RICH_AVAILABLE else UpdateTQDMProgressBar()
