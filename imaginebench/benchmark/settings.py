"""A run's settings: the ``fit`` arguments of a grid cell, the config they resolve to, and the
hash that recognises a finished run."""

from __future__ import annotations

import hashlib
import importlib
import inspect
import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from imaginebench.benchmark.grid import Run
from imaginebench.benchmark.spec import BenchmarkSpec, OracleData
from imaginebench.config import load_config_file
from imaginebench.data.collect import CollectConfig
from imaginebench.data.shipped import file_sha256, resolve_data_path
from imaginebench.datamodules.sources import default_cache_dir


@dataclass(frozen=True)
class RunSettings:
    """What a run trains with. ``args``: the ``fit`` arguments without the run's folders
    (``-c CONFIG``, seeds, data, overrides); ``config``: what they resolve to; ``hash``: of the
    config and the contents of the data files named by path (:func:`config_hash`);
    ``oracles``: the oracle files to collect before the fit, each with its level (none for
    the variants without oracle data)."""

    args: list[str]
    config: dict[str, Any]
    hash: str
    oracles: tuple[tuple[str, Path], ...] = ()


def oracle_path(domain: str, level: str, oracle: OracleData) -> Path:
    """Where the expert rollouts of ``level`` are collected (the cache, named after their
    collection settings)."""
    return default_cache_dir() / oracle_collect(level, oracle).filename(domain)


def oracle_collect(level: str, oracle: OracleData) -> CollectConfig:
    return CollectConfig(
        episodes=oracle.episodes,
        seed=oracle.seed,
        level=level,
        epsilon=oracle.epsilon,
        paraphrases=oracle.paraphrases,
    )


@cache
def has_sampling_seed(config: Path) -> bool:
    """Whether the config's module draws training noise from its own seeded stream
    (a ``sampling_seed`` argument)."""
    module, name = load_config_file(config)["model"]["class_path"].rsplit(".", 1)
    cls = getattr(importlib.import_module(module), name)
    return any(
        "sampling_seed" in inspect.signature(klass.__init__).parameters
        for klass in cls.__mro__
        if "__init__" in vars(klass)
    )


def fit_arguments(spec: BenchmarkSpec, run: Run) -> tuple[list[str], tuple[tuple[str, Path], ...]]:
    """The ``fit`` arguments of ``run`` (without its folders) and its oracle files with their
    levels (none for the variants without oracle data).

    The seed sets ``seed_everything``, the data module's sampling seed and the module's
    ``sampling_seed`` (if it has one); the second stream is empty (``real``), the level's
    imaginary file, every level's imaginary file (``imaginary_all``), the level's oracle
    file or every level's oracle file (``oracle_all``)."""
    config = spec.config_path(run.algorithm)
    seed = run.seed
    args = ["-c", str(config), f"--seed_everything={seed}", f"--data.init_args.seed={seed}"]
    if has_sampling_seed(config):
        args.append(f"--model.init_args.sampling_seed={seed}")
    if spec.real_episodes is not None:
        args.append(f"--data.init_args.collect.episodes={spec.real_episodes}")
    oracle_levels = {"oracle": [run.level], "oracle_all": spec.levels}.get(run.variant, [])
    oracles = tuple((lv, oracle_path(spec.domain, lv, spec.oracle)) for lv in oracle_levels)
    if run.variant == "imaginary":
        second = [spec.imaginary_file(run.level)]
    elif run.variant == "imaginary_all":
        second = [spec.imaginary_file(level) for level in spec.variant_levels(run.variant)]
    else:  # real (no second stream) or oracle data
        second = [str(path) for _, path in oracles]
    args.append(f"--data.init_args.imaginary={json.dumps(second)}")
    if second and spec.ratio is not None:
        args.append(f"--data.init_args.ratio={spec.ratio}")
    return args + list(spec.overrides), oracles


def run_settings(spec: BenchmarkSpec, run: Run) -> RunSettings:
    """``run``'s arguments, resolved config and hash (a clear error for arguments the fit
    would refuse, a missing imaginary file or a config the runner cannot place in its
    folder)."""
    from imaginebench.train_cli import resolve_config

    args, oracles = fit_arguments(spec, run)
    config = resolve_config(args)
    check_placeable(config, spec.config_path(run.algorithm))
    data = config["data"]["init_args"]
    collected = {str(path) for _, path in oracles}
    named = [f for f in data.get("imaginary") or [] if f not in collected]
    if data.get("real"):
        named.append(data["real"])
    settings_hash = config_hash(portable_config(config, collected), named)
    return RunSettings(args, config, settings_hash, oracles)


def portable_config(config: dict[str, Any], collected: set[str]) -> dict[str, Any]:
    """``config`` as hashed: the ``collected`` (oracle) files by file name, which holds their
    collection settings, not by their path in this machine's cache, so that a finished run's
    records still match on another machine or with another ``IMAGINEBENCH_CACHE``."""
    data = config["data"]["init_args"]
    if not data.get("imaginary"):
        return config
    names = [f"collected:{Path(f).name}" if f in collected else f for f in data["imaginary"]]
    return {**config, "data": {**config["data"], "init_args": {**data, "imaginary": names}}}


def check_placeable(config: dict[str, Any], path: Path) -> None:
    """The runner gives each run its own folders through the config's logger
    (``save_dir``/``name``/``version``) and its last callback, a ``ModelCheckpoint``
    (``dirpath``), and reads ``results.json`` written by ``SuccessRateEvaluation`` with
    ``test_after_fit``: refuse a config without them."""
    trainer = config.get("trainer") or {}
    logger = trainer.get("logger")
    if not isinstance(logger, dict) or "save_dir" not in (logger.get("init_args") or {}):
        raise ValueError(f"{path}: the benchmark needs a logger with a save_dir (TensorBoard)")
    callbacks = trainer.get("callbacks") or []
    if not callbacks or not callbacks[-1]["class_path"].endswith("ModelCheckpoint"):
        raise ValueError(f"{path}: the benchmark needs a ModelCheckpoint as the last callback")
    evaluation = [c for c in callbacks if c["class_path"].endswith("SuccessRateEvaluation")]
    if not evaluation or not evaluation[0]["init_args"].get("test_after_fit"):
        raise ValueError(
            f"{path}: the benchmark needs a SuccessRateEvaluation callback with "
            "test_after_fit: true (it writes the run's results.json)"
        )


def config_hash(config: dict[str, Any], data_files: list[str]) -> str:
    """A short hash of a resolved config and the contents of ``data_files`` (``shipped:`` or
    paths; an error naming a missing one): a changed setting or file changes it, the same
    ones give the same hash. Collected files (real data from ``collect``, oracle data) are
    named after their collection settings, which the config holds."""
    contents = {}
    for name in sorted(set(data_files)):
        path = resolve_data_path(name)
        if not path.is_file():
            raise FileNotFoundError(f"{name}: data file does not exist")
        stat = path.stat()
        contents[name] = _file_digest(str(path.resolve()), stat.st_mtime_ns, stat.st_size)
    text = json.dumps({"config": config, "files": contents}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@cache
def _file_digest(path: str, mtime_ns: int, size: int) -> str:
    """sha256 of a file, computed once per path, modification time and size."""
    return file_sha256(path)
