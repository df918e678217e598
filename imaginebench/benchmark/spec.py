"""What a benchmark grid is made of: :class:`BenchmarkSpec`, read from
``configs/benchmark/<domain>.yaml`` with command-line overrides."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from imaginebench.config import as_config
from imaginebench.envs import DOMAINS

#: The data variants: real data alone; a second stream per level of imaginary rollouts or of
#: real expert rollouts of the level's tasks ("oracle"); or one second stream of the imaginary
#: rollouts of every level at once ("imaginary_all", the paper's setup: one policy for all levels),
#: or of the real expert rollouts of every level at once ("oracle_all", its upper bound).
VARIANTS = ("real", "imaginary", "oracle", "imaginary_all", "oracle_all")
#: The variants with one run per level (the others: one run scored on every level).
PER_LEVEL_VARIANTS = ("imaginary", "oracle")
#: The levels whose tasks the training data lacks: the per-level variants' levels.
NOVEL_LEVELS = ("rephrase", "easy", "hard")
#: Reference policies scored on the same evaluation set, shown beside the algorithms.
REFERENCES = ("random", "expert")
SHIPPED_IMAGINARY = "shipped:{domain}/imaginary_{level}.h5"


@dataclass(frozen=True)
class OracleData:
    """How the oracle variant's expert rollouts of a level are collected (once, into the cache;
    like the real data, but of that level's tasks)."""

    episodes: int = 1000
    epsilon: float = 0.2
    paraphrases: int = 1
    seed: int = 0

    def __post_init__(self) -> None:
        if self.episodes < 1:
            raise ValueError(f"episodes must be >= 1, got {self.episodes}")


@dataclass(frozen=True)
class BenchmarkSpec:
    """A grid of algorithms x data variants x seeds on one domain; every run is a normal
    ``imaginebench fit`` of ``configs/<algorithm>_<domain>.yaml`` with the run's seed and data.

    Args:
        domain: environment domain (``clevr``, ``babyai``, ``halfcheetah``, ``metaworld``).
        algorithms: algorithm names; each names the training config ``config`` points to.
        seeds: run seeds (``seed_everything``, the data module's and the module's sampling
            seed).
        variants: ``real`` (real data only), ``imaginary`` (one run per level with the level's
            imaginary file as second stream), ``oracle`` (one run per level with real expert
            rollouts of the level's tasks instead), ``imaginary_all`` (one run with the
            imaginary files of all ``levels`` together as second stream), ``oracle_all`` (one
            run with the oracle rollouts of all ``levels`` together).
        levels: the levels of the per-level variants and of ``imaginary_all``/``oracle_all``.
        imaginary_levels: the levels that have imaginary data (a level whose imagination kept
            no rollout ships no file): the imaginary variants use the ``levels`` among them;
            default: every level.
        imaginary: the imaginary file of a level, ``{domain}`` and ``{level}`` filled in.
        oracle: collection settings of the oracle data (:class:`OracleData` fields).
        ratio: share of every batch drawn from the second stream, or ``"pool"`` (both streams
            pooled, each transition equally likely); ``None``: the config's.
        real_episodes: episodes of real data (``None``: the config's ``collect.episodes``).
        overrides: extra command-line arguments given to every run, e.g.
            ``--trainer.max_steps=500``.
        references: reference policies scored beside the algorithms (``random``, ``expert``).
        config: training config of an algorithm, ``{algorithm}`` and ``{domain}`` filled in,
            relative to the benchmark file's folder.
        out: folder of the runs (relative to the working directory), ``{domain}`` filled in.
        base_dir: the folder ``config`` is relative to (set to the benchmark file's).
    """

    domain: str
    algorithms: list[str]
    seeds: list[int]
    variants: list[str] = field(default_factory=lambda: ["real", "imaginary", "oracle"])
    levels: list[str] = field(default_factory=lambda: list(NOVEL_LEVELS))
    imaginary_levels: list[str] = field(default_factory=lambda: list(NOVEL_LEVELS))
    imaginary: str = SHIPPED_IMAGINARY
    oracle: OracleData = field(default_factory=OracleData)
    ratio: float | Literal["pool"] | None = None
    real_episodes: int | None = None
    overrides: list[str] = field(default_factory=list)
    references: list[str] = field(default_factory=lambda: list(REFERENCES))
    config: str = "../{algorithm}_{domain}.yaml"
    out: str = "runs/benchmark/{domain}"
    base_dir: str = "."

    def __post_init__(self) -> None:
        if self.domain not in DOMAINS:
            raise ValueError(f"unknown domain {self.domain!r}; known: {', '.join(DOMAINS)}")
        for name, kind in LIST_FIELDS.items():
            values = getattr(self, name)
            if not isinstance(values, list) or not all(_is(v, kind) for v in values):
                raise ValueError(f"{name} must be a list of {kind.__name__}, got {values!r}")
        _check_choices("variants", self.variants, VARIANTS)
        _check_choices("levels", self.levels, NOVEL_LEVELS)
        _check_choices("imaginary_levels", self.imaginary_levels, NOVEL_LEVELS)
        _check_choices("references", self.references, REFERENCES)
        if not self.algorithms:
            raise ValueError("algorithms: give at least one")
        if not self.seeds:
            raise ValueError("seeds: give at least one")
        for name in ("algorithms", "seeds", "variants", "levels", "imaginary_levels", "references"):
            values = getattr(self, name)
            if len(set(values)) != len(values):
                raise ValueError(f"{name}: {values} repeats an entry")
        if self.ratio not in (None, "pool"):
            if not (_is(self.ratio, float) or _is(self.ratio, int)):
                raise ValueError(f"ratio must be a number in [0, 1] or 'pool', got {self.ratio!r}")
            if not 0.0 <= self.ratio <= 1.0:
                raise ValueError(f"ratio must be in [0, 1] or 'pool', got {self.ratio}")
        if self.real_episodes is not None and self.real_episodes < 1:
            raise ValueError(f"real_episodes must be >= 1, got {self.real_episodes}")
        object.__setattr__(self, "oracle", as_config(self.oracle, OracleData, "oracle"))

    def config_path(self, algorithm: str) -> Path:
        """The training config of ``algorithm`` (an error naming it if it does not exist)."""
        path = Path(self.base_dir) / self.config.format(algorithm=algorithm, domain=self.domain)
        if not path.is_file():
            raise FileNotFoundError(f"{path}: no training config for algorithm {algorithm!r}")
        return path.resolve()

    def variant_levels(self, variant: str) -> list[str]:
        """The levels whose second stream ``variant`` adds: ``levels``, for the imaginary
        variants only those with imaginary data (``imaginary_levels``)."""
        if variant.startswith("imaginary"):
            return [level for level in self.levels if level in self.imaginary_levels]
        return list(self.levels)

    def imaginary_file(self, level: str) -> str:
        """The imaginary dataset of ``level`` (``shipped:...`` or a path)."""
        return self.imaginary.format(domain=self.domain, level=level)

    @property
    def out_dir(self) -> Path:
        return Path(self.out.format(domain=self.domain))

    def to_dict(self) -> dict[str, Any]:
        """The spec as plain data (what ``benchmark.yaml`` in the output folder records)."""
        return dataclasses.asdict(self)


LIST_FIELDS = {
    "algorithms": str,
    "seeds": int,
    "variants": str,
    "levels": str,
    "imaginary_levels": str,
    "overrides": str,
    "references": str,
}


def _is(value: Any, kind: type) -> bool:
    return isinstance(value, kind) and not (kind is int and isinstance(value, bool))


def _check_choices(name: str, values: list[str], known: tuple[str, ...]) -> None:
    unknown = [v for v in values if v not in known]
    if unknown:
        raise ValueError(f"{name}: unknown {', '.join(map(repr, unknown))} (known: {known})")


def load_spec(path: str | Path | None, **overrides: Any) -> BenchmarkSpec:
    """The grid of the benchmark file ``path`` (YAML with :class:`BenchmarkSpec`'s fields),
    with ``overrides`` (fields given on the command line; ``None`` values ignored) applied.

    Raises a ``ValueError`` naming the file for an unreadable file, an unknown field or a value
    of the wrong type."""
    import yaml

    fields: dict[str, Any] = {}
    base_dir = Path(".")
    if path is not None:
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"{path}: no such benchmark file")
        try:
            loaded = yaml.safe_load(path.read_text())
        except yaml.YAMLError as err:
            raise ValueError(f"{path}: not valid YAML: {err}") from err
        if not isinstance(loaded, dict):
            raise ValueError(f"{path}: a benchmark file is a mapping of BenchmarkSpec fields")
        fields = loaded
        base_dir = path.parent
    fields = {**fields, **{k: v for k, v in overrides.items() if v is not None}}
    fields.setdefault("base_dir", str(base_dir))
    return as_config(fields, BenchmarkSpec, str(path or "benchmark"))
