"""The runs of a benchmark grid, their folders, and shards of the grid for job arrays."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from imaginebench.benchmark.spec import PER_LEVEL_VARIANTS, BenchmarkSpec


@dataclass(frozen=True)
class Run:
    """One cell of the grid: an algorithm's fit on a data variant with a seed, or (``algorithm
    == "reference"``) a reference policy (``variant`` ``random`` or ``expert``) scored once.

    ``level`` is the level whose second stream a per-level variant adds (``None`` for ``real``,
    ``imaginary_all`` and references)."""

    algorithm: str
    variant: str
    level: str | None
    seed: int

    @property
    def is_reference(self) -> bool:
        return self.algorithm == "reference"

    @property
    def data(self) -> str:
        """The data variant's folder name: ``real``, ``imaginary-easy``, ``oracle-hard``, ..."""
        return self.variant if self.level is None else f"{self.variant}-{self.level}"

    @property
    def name(self) -> str:
        """``<algorithm>/<data>/seed<seed>`` (references: ``reference/<policy>``), the run's
        folder under ``<out>/runs``."""
        if self.is_reference:
            return f"reference/{self.variant}"
        return f"{self.algorithm}/{self.data}/seed{self.seed}"

    def directory(self, out: Path) -> Path:
        return Path(out) / "runs" / self.name


def expand_grid(spec: BenchmarkSpec) -> list[Run]:
    """Every run of ``spec`` in a fixed order: the reference policies, then per algorithm, per
    variant (per level for the per-level variants), per seed."""
    runs = [Run("reference", policy, None, 0) for policy in spec.references]
    for algorithm in spec.algorithms:
        for variant in spec.variants:
            levels = spec.variant_levels(variant) if variant in PER_LEVEL_VARIANTS else [None]
            for level in levels:
                runs.extend(Run(algorithm, variant, level, seed) for seed in spec.seeds)
    return runs


def parse_shard(text: str) -> tuple[int, int]:
    """``"i/n"`` -> ``(i, n)`` with ``0 <= i < n`` (a clear error otherwise)."""
    match = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", text)
    if not match:
        raise ValueError(f"--shard {text!r}: expected i/n, e.g. 0/4 (the first of 4 shards)")
    index, count = int(match.group(1)), int(match.group(2))
    if count < 1 or index >= count:
        raise ValueError(f"--shard {text!r}: need 0 <= i < n (shards are numbered from 0)")
    return index, count


def shard(runs: list[Run], index: int, count: int) -> list[Run]:
    """Shard ``index`` of ``count``: every ``count``-th run from position ``index``, so the
    shards partition the grid and each gets a mix of algorithms and variants."""
    return runs[index::count]
