"""``imaginebench score-imaginary``: add or refresh the confidence of existing imaginary files.

For each file the chosen sources (:mod:`~imaginebench.imagination.confidence`) are computed —
``ensemble`` from a dynamics ensemble fitted once on the real file, ``likelihood`` by teacher
forcing the grounding checkpoint that imagined it (named in its provenance, or given) — and the
file is rewritten atomically with ``confidence/<source>`` and a ``confidence`` entry in its
provenance saying how each was computed. Everything else in the file is kept as it was; an
interrupted run leaves every file either untouched or completely rewritten.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from imaginebench.config import as_config
from imaginebench.data.dataset import RolloutDataset
from imaginebench.data.hdf5 import load_dataset, save_dataset
from imaginebench.data.shipped import SHIPPED_ROOT, file_sha256, resolve_data_path
from imaginebench.datamodules.sources import default_cache_dir
from imaginebench.envs import get_domain
from imaginebench.imagination.confidence import (
    CONFIDENCE_SOURCES,
    ENSEMBLE,
    LIKELIHOOD,
    EnsembleConfig,
    TransitionEnsemble,
    likelihood_confidence,
    lm_step_log_likelihoods,
)

log = logging.getLogger(__name__)


def with_confidence(
    dataset: RolloutDataset, source: str, values: Any, how: Mapping[str, Any]
) -> RolloutDataset:
    """``dataset`` with confidence ``source`` set to ``values`` and ``how`` it was computed
    recorded in its provenance (``provenance["confidence"][source]``)."""
    provenance = dict(dataset.provenance)
    record = dict(provenance.get("confidence", {}))
    record[source] = {**how, "computed": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    provenance["confidence"] = record
    scored = dataset.with_confidence(source, values)
    scored.provenance = provenance
    return scored


def fit_ensemble_on(
    real: str | Path,
    config: EnsembleConfig | Mapping[str, Any] | None,
    progress: bool,
    loaded: RolloutDataset | None = None,
    cache_dir: str | Path | None = None,
) -> tuple[TransitionEnsemble, dict[str, Any]]:
    """The ensemble scorer fitted on the real file (``loaded``: its dataset, if already read),
    with the domain's dynamics context as more inputs where it has one, and how (for the
    provenance). The fit is seeded, so it is stored under ``<cache>/ensembles/`` (default:
    the data cache, ``$IMAGINEBENCH_CACHE``) keyed by the real file's SHA-256 and the
    settings, and read back by the next call with the same ones instead of fitted again."""
    path = resolve_data_path(str(real))
    config = as_config(config, EnsembleConfig, "ensemble") or EnsembleConfig()
    settings = asdict(config)
    real_sha256 = file_sha256(path)
    dataset = loaded if loaded is not None else load_dataset(path)
    context = get_domain(dataset.domain).dynamics_context
    key = hashlib.sha256(
        json.dumps(
            {"real": real_sha256, "settings": settings, "context": context is not None},
            sort_keys=True,
        ).encode()
    ).hexdigest()[:20]
    stored = Path(cache_dir or default_cache_dir()) / "ensembles" / f"{dataset.domain}_{key}.pt"
    scorer = None
    if stored.is_file():
        try:
            scorer = TransitionEnsemble.load(stored, config, context)
            log.info("dynamics ensemble read from %s", stored)
        except Exception as error:  # a cache: whatever cannot be read is fitted again
            log.warning("%s: not a usable stored ensemble (%s); fitting again", stored, error)
    if scorer is None:
        scorer = TransitionEnsemble.fit(dataset, config, progress=progress, context=context)
        scorer.save(stored)
    how = {
        "method": "committee spread of a dynamics ensemble fitted on the real data and the "
        "imagined change, exp(-spread)",
        "real": str(path),
        "real_sha256": real_sha256,
        "ensemble": {**settings, "hidden": list(settings.get("hidden", ()))},
        "fit": scorer.metrics,
    }
    if context is not None:
        how["context"] = f"{dataset.domain} dynamics_context (docs/confidence.md)"
    return scorer, how


def likelihood_of(
    dataset: RolloutDataset, module: Any, batch_size: int, progress: bool
) -> np.ndarray:
    """The ``likelihood`` confidence of every transition of ``dataset`` under ``module``."""
    episodes = [dataset.episode(i) for i in range(len(dataset))]
    per_episode = lm_step_log_likelihoods(module, episodes, batch_size, progress)
    return likelihood_confidence(np.concatenate(per_episode) if per_episode else np.zeros(0))


def _checkpoint_of(dataset: RolloutDataset, given: str | None, path: Path) -> Path:
    checkpoint = given or dataset.provenance.get("adapter_checkpoint")
    if not checkpoint:
        raise ValueError(
            f"{path}: its provenance names no grounding checkpoint; pass --checkpoint for the "
            "likelihood confidence (or --sources ensemble)"
        )
    checkpoint = Path(checkpoint)
    if not checkpoint.is_file():
        raise FileNotFoundError(
            f"{path}: grounding checkpoint {checkpoint} not found; pass --checkpoint (the "
            "likelihood needs the model that imagined the file) or --sources ensemble"
        )
    recorded = dataset.provenance.get("adapter_checkpoint_sha256")
    if recorded and recorded != file_sha256(checkpoint):
        raise ValueError(
            f"{path}: was imagined by the checkpoint with sha256 {recorded[:12]}..., "
            f"{checkpoint} is another ({file_sha256(checkpoint)[:12]}...); the likelihood "
            "confidence is the imagining model's own (or use --sources ensemble)"
        )
    return checkpoint


def score_files(
    paths: Sequence[str],
    real: str | None = None,
    sources: Sequence[str] = CONFIDENCE_SOURCES,
    checkpoint: str | None = None,
    out: str | None = None,
    ensemble: EnsembleConfig | Mapping[str, Any] | None = None,
    batch_size: int = 16,
    progress: bool = True,
) -> list[Path]:
    """Add (or refresh) the confidence ``sources`` of imaginary dataset files; return the
    files written.

    Args:
        paths: imaginary dataset files (``shipped:<domain>/<file>`` only with ``out``).
        real: the real dataset the ``ensemble`` is fitted on (needed for that source).
        sources: which confidences to compute (``likelihood``, ``ensemble``).
        checkpoint: the grounding checkpoint for ``likelihood`` (default: the one named in
            each file's provenance).
        out: write the result here instead of replacing the file (one input file only).
        ensemble: the ensemble's settings (:class:`EnsembleConfig` or a dict of its fields).
        batch_size: windows per forward pass of the LM.
        progress: show progress bars.
    """
    unknown = sorted(set(sources) - set(CONFIDENCE_SOURCES))
    if unknown or not sources:
        raise ValueError(
            f"unknown confidence source(s) {unknown or sources}; known: "
            f"{', '.join(CONFIDENCE_SOURCES)}"
        )
    if out is not None and len(paths) != 1:
        raise ValueError("--out writes one file: give exactly one input file")
    if ENSEMBLE in sources and not real:
        raise ValueError("the ensemble confidence is fitted on the real data: pass --real FILE")
    jobs = []  # (path, target, dataset, checkpoint): every input checked before any work
    for name in paths:
        path = resolve_data_path(name)
        target = Path(out) if out is not None else path
        if target.resolve().is_relative_to(SHIPPED_ROOT.resolve()):
            raise ValueError(
                f"{name}: a dataset shipped with the package is not rewritten in place "
                "(its checksum is in the manifest); pass --out"
            )
        dataset = load_dataset(path)  # strict: a rewrite must not lose episodes
        ckpt = _checkpoint_of(dataset, checkpoint, path) if LIKELIHOOD in sources else None
        jobs.append((path, target, dataset, ckpt))
    if ENSEMBLE in sources:
        real_data = load_dataset(resolve_data_path(real))
        for path, _, dataset, _ in jobs:
            _check_same_domain(real_data, dataset, path, real)
        scorer, ensemble_how = fit_ensemble_on(real, ensemble, progress, real_data)
    modules: dict[Path, Any] = {}
    written = []
    for path, target, dataset, ckpt in jobs:
        if ENSEMBLE in sources:
            dataset = with_confidence(dataset, ENSEMBLE, scorer.confidence(dataset), ensemble_how)
        if ckpt is not None:
            if ckpt not in modules:
                modules[ckpt] = _load_grounding(ckpt)
            values = likelihood_of(dataset, modules[ckpt], batch_size, progress)
            how = {
                "method": "exp(log-likelihood of the step's action and categorical next state "
                "under the grounded LM), by teacher forcing",
                "checkpoint": str(ckpt),
                "checkpoint_sha256": file_sha256(ckpt),
            }
            dataset = with_confidence(dataset, LIKELIHOOD, values, how)
        written.append(save_dataset(dataset, target, overwrite=True))
    return written


def _check_same_domain(
    real: RolloutDataset, dataset: RolloutDataset, path: Path, real_name: str
) -> None:
    if (real.domain, real.state_dim, real.action_spec) != (
        dataset.domain,
        dataset.state_dim,
        dataset.action_spec,
    ):
        raise ValueError(
            f"{path}: {dataset.domain} data ({dataset.state_dim}-d states, actions "
            f"{dataset.action_spec}) cannot be scored by an ensemble fitted on {real_name} "
            f"({real.domain}, {real.state_dim}-d states, actions {real.action_spec})"
        )


def _load_grounding(checkpoint: Path) -> Any:
    import imaginebench.data.collect  # noqa: F401  (allowed under weights_only, see run.py)
    from imaginebench.modules.grounding import GroundingModule

    module = GroundingModule.load_from_checkpoint(
        str(checkpoint), map_location="cpu", weights_only=True
    )
    module.merge_lora()
    return module


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="imaginebench score-imaginary",
        description="Add or refresh the per-transition confidence of imaginary dataset files "
        "(docs/confidence.md); each file is rewritten atomically.",
    )
    parser.add_argument("paths", nargs="+", help="imaginary dataset files")
    parser.add_argument("--real", help="real dataset the ensemble is fitted on")
    parser.add_argument(
        "--sources",
        nargs="+",
        default=list(CONFIDENCE_SOURCES),
        choices=CONFIDENCE_SOURCES,
        help="confidences to compute (default: all)",
    )
    parser.add_argument(
        "--checkpoint", help="grounding checkpoint (default: the file's adapter_checkpoint)"
    )
    parser.add_argument("--out", help="write here instead of in place (one input file)")
    parser.add_argument("--batch-size", type=int, default=16, help="LM windows per pass")
    defaults = EnsembleConfig()
    parser.add_argument("--members", type=int, default=defaults.members)
    parser.add_argument("--ensemble-steps", type=int, default=defaults.max_steps)
    parser.add_argument("--seed", type=int, default=defaults.seed)
    parser.add_argument("--quiet", action="store_true", help="no progress bars")
    return parser


def main(argv: list[str]) -> int:
    """``imaginebench score-imaginary FILE [FILE ...] --real REAL [...]``."""
    args = build_parser().parse_args(argv)
    ensemble = EnsembleConfig(members=args.members, max_steps=args.ensemble_steps, seed=args.seed)
    written = score_files(
        args.paths,
        real=args.real,
        sources=args.sources,
        checkpoint=args.checkpoint,
        out=args.out,
        ensemble=ensemble,
        batch_size=args.batch_size,
        progress=not args.quiet,
    )
    for path in written:
        dataset = load_dataset(path)
        means = ", ".join(
            f"{name} mean {float(values.mean()):.3f}" for name, values in dataset.confidence.items()
        )
        print(f"{path}: {dataset.num_transitions} transitions; confidence {means}")
    return 0
