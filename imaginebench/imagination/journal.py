"""Decoded batches of an imagination run, kept on disk so an interrupted run resumes.

``imaginebench imagine`` decodes its candidates batch by batch (first round, coverage rounds,
start-difficulty rounds). Each finished batch is written atomically to ``<out>.partial/`` as an
``.npz`` file (no pickles) together with the sampler's random state after it. Rerunning the
same command reads those batches back instead of decoding them again and restores the random
state, so a resumed run writes the dataset an uninterrupted run would have written. The folder
is removed when the run ends; a folder left by a run with other settings is refused.
"""

from __future__ import annotations

import json
import logging
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from imaginebench.atomic import atomic_path, write_text_atomically
from imaginebench.imagination.decoder import ImaginedRollout

log = logging.getLogger(__name__)

#: bump when the stored layout changes (an older folder is then refused, not misread)
JOURNAL_VERSION = 2
_FLAGS = ("success", "diverged", "illegal", "uncertain")


def journal_path(out: str | Path) -> Path:
    """The journal folder of the dataset file ``out``."""
    out = Path(out)
    return out.with_name(out.name + ".partial")


class Journal:
    """The decoded batches of one imagination run, numbered in the order they are decoded.

    Args:
        directory: the folder (created if missing).
        settings: everything the decoded rollouts depend on (JSON-serialisable); a folder
            written under other settings raises ``ValueError``.
    """

    def __init__(self, directory: str | Path, settings: Mapping[str, Any]) -> None:
        self.directory = Path(directory)
        header = {"version": JOURNAL_VERSION, "settings": json.loads(json.dumps(settings))}
        meta = self.directory / "settings.json"
        if meta.is_file():
            if json.loads(meta.read_text()) != header:
                raise ValueError(
                    f"{self.directory} holds the decoded batches of an imagination run with "
                    "other settings (or an older layout): rerun that run's command to finish "
                    "it, or delete the folder to start afresh"
                )
        else:
            self.directory.mkdir(parents=True, exist_ok=True)
            write_text_atomically(meta, json.dumps(header, indent=1) + "\n")
        self.stored = len(list(self.directory.glob("batch_*.npz")))
        if self.stored:
            log.info("resuming: %d decoded batches in %s", self.stored, self.directory)

    def _file(self, index: int) -> Path:
        return self.directory / f"batch_{index:06d}.npz"

    def load(
        self, index: int, specs: Sequence[Any]
    ) -> tuple[list[ImaginedRollout], torch.Tensor] | None:
        """Batch ``index`` of episodes ``specs`` and the random state after it, if stored."""
        path = self._file(index)
        if not path.is_file():
            return None
        with np.load(path, allow_pickle=False) as z:
            stored = [str(s) for s in z["instructions"]]
            if stored != [s.instruction for s in specs] or not all(
                np.array_equal(z[f"states_{i}"][0], np.asarray(s.initial_state, np.float32))
                for i, s in enumerate(specs)
            ):
                raise ValueError(
                    f"{path} holds other episodes than this run decodes at batch {index}: "
                    "delete the journal folder to start afresh"
                )
            rollouts = [
                ImaginedRollout(
                    spec,
                    z[f"states_{i}"],
                    z[f"actions_{i}"],
                    bool(z["success"][i]),
                    bool(z["diverged"][i]),
                    bool(z["illegal"][i]),
                    float(z["log_likelihood"][i]),
                    int(z["redrawn"][i]),
                    z[f"step_log_likelihoods_{i}"],
                    bool(z["uncertain"][i]),
                )
                for i, spec in enumerate(specs)
            ]
            random_state = torch.from_numpy(z["random_state"].copy())
        return rollouts, random_state

    def save(self, index: int, rollouts: Sequence[ImaginedRollout], random_state: Any) -> None:
        """Store batch ``index`` and the random state after it (atomically)."""
        arrays: dict[str, np.ndarray] = {
            "instructions": np.array([r.spec.instruction for r in rollouts], dtype=np.str_),
            "log_likelihood": np.array([r.log_likelihood for r in rollouts], dtype=np.float64),
            "redrawn": np.array([r.redrawn for r in rollouts], dtype=np.int64),
            "random_state": np.asarray(random_state.numpy(), dtype=np.uint8),
        }
        for flag in _FLAGS:
            arrays[flag] = np.array([getattr(r, flag) for r in rollouts], dtype=bool)
        for i, r in enumerate(rollouts):
            arrays[f"states_{i}"] = r.states
            arrays[f"actions_{i}"] = r.actions
            arrays[f"step_log_likelihoods_{i}"] = r.step_log_likelihoods
        with atomic_path(self._file(index)) as tmp, open(tmp, "wb") as f:
            np.savez(f, **arrays)

    def remove(self) -> None:
        """Delete the folder (the run has ended)."""
        shutil.rmtree(self.directory, ignore_errors=True)
