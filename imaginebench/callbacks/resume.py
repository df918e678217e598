"""Refuse to resume a fit from a checkpoint written by a differently configured run."""

from __future__ import annotations

from typing import Any

import lightning as L


def _differences(prefix: str, saved: dict[str, Any], current: dict[str, Any]) -> list[str]:
    return [
        f"{prefix}.{key} {saved.get(key)!r} -> {current.get(key)!r}"
        for key in sorted(set(saved) | set(current))
        if saved.get(key) != current.get(key)
    ]


class ResumeCheck(L.Callback):
    """On ``fit --ckpt_path``, compare the checkpoint's model and data hyperparameters (seed,
    files, ratio, ...) and run seed (``seed_everything``, stored in checkpoints as
    ``"seed_everything"``) with the current run's and raise ``ValueError`` if they differ,
    unless ``allow_mismatch``. ``--ckpt_path last`` picks the newest ``last*.ckpt`` of the
    checkpoint folder, which may be another run's when runs share a folder."""

    def __init__(self, allow_mismatch: bool = False, seed: int | None = None) -> None:
        self.allow_mismatch = allow_mismatch
        self.seed = seed

    def on_save_checkpoint(
        self, trainer: L.Trainer, pl_module: L.LightningModule, checkpoint: dict[str, Any]
    ) -> None:
        if self.seed is not None:
            checkpoint["seed_everything"] = self.seed

    def on_load_checkpoint(
        self, trainer: L.Trainer, pl_module: L.LightningModule, checkpoint: dict[str, Any]
    ) -> None:
        datamodule = getattr(trainer, "datamodule", None)
        diffs = _differences(
            "model", checkpoint.get("hyper_parameters", {}), dict(pl_module.hparams)
        ) + _differences(
            "data",
            checkpoint.get("datamodule_hyper_parameters", {}),
            dict(getattr(datamodule, "hparams", {})),
        )
        saved_seed = checkpoint.get("seed_everything")
        if None not in (saved_seed, self.seed) and saved_seed != self.seed:
            diffs.append(f"seed_everything {saved_seed!r} -> {self.seed!r}")
        if diffs and not self.allow_mismatch:
            raise ValueError(
                f"{trainer.ckpt_path}: written by a differently configured run "
                f"({'; '.join(diffs)}); give each run its own checkpoint folder, or pass "
                "--allow_resume_mismatch true to resume anyway"
            )
