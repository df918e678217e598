"""The paper's Figures 5 and 6 and the aggregate-score plot, drawn with matplotlib (no
``pyplot`` state: each figure is its own ``Figure``) and saved as PNG and SVG."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from imaginebench.report.results import BenchmarkRuns
from imaginebench.report.stats import Aggregate, level_values, levels_of, summarize
from imaginebench.report.tables import LABELS

COLOURS = {
    "real": "#7f7f7f",
    "imaginary": "#1f77b4",
    "imaginary_all": "#9467bd",
    "oracle": "#2ca02c",
    "oracle_all": "#17becf",
}


def _figure(width: float, height: float) -> Any:
    try:
        from matplotlib.figure import Figure
    except ImportError as err:  # an optional extra
        raise ImportError("figures need matplotlib: pip install 'imaginebench[report]'") from err
    return Figure(figsize=(width, height), layout="constrained")


def _save(figure: Any, out: Path, stem: str) -> list[Path]:
    import matplotlib

    paths = [out / f"{stem}.png", out / f"{stem}.svg"]
    with matplotlib.rc_context({"svg.hashsalt": "imaginebench"}):  # reproducible files
        figure.savefig(paths[0], dpi=120, metadata={"Software": None})
        figure.savefig(paths[1], metadata={"Date": None})
    return paths


def _bars(bench: BenchmarkRuns, variants: list[str], levels: list[str], title: str) -> Any | None:
    """One panel per level: per algorithm, a bar per data variant (mean over seeds, error bar:
    standard deviation), the random policy and the expert as lines. ``None`` if no level has a
    bar of every variant."""
    runs = bench.runs
    algorithms = bench.algorithms
    labels = [next(r.label for r in runs if r.algorithm == a) for a in algorithms]
    panels = [
        lv
        for lv in levels
        if all(any(level_values(runs, a, v, lv) for a in algorithms) for v in variants)
    ]
    if not panels:
        return None
    figure = _figure(max(7.5, 2.2 + 2.6 * len(panels)), 3.6)
    axes = figure.subplots(1, len(panels), sharey=True, squeeze=False)[0]
    width = 0.8 / len(variants)
    x = np.arange(len(algorithms))
    for ax, level in zip(axes, panels):
        for k, variant in enumerate(variants):
            means, errors = [], []
            for algorithm in algorithms:
                values = level_values(runs, algorithm, variant, level)
                s = summarize(values) if values else None
                means.append(100 * s.mean if s else np.nan)
                errors.append(100 * s.std if s and s.n > 1 else 0.0)
            ax.bar(
                x + (k - (len(variants) - 1) / 2) * width,
                means,
                width,
                yerr=errors,
                capsize=3,
                color=COLOURS.get(variant),
                label=LABELS.get(variant, variant),
            )
        for name, style in (("random", "--"), ("expert", ":")):
            ref = bench.references.get(name)
            if ref is not None and level in ref.success:
                label = "random policy" if name == "random" else "expert"
                ax.axhline(100 * ref.success[level], color="black", ls=style, lw=1, label=label)
        ax.set_title(level)
        ax.set_xticks(x, labels, rotation=20)
        ax.set_ylim(0, 105)
        ax.grid(axis="y", alpha=0.3)
    axes[0].set_ylabel("success (%)")
    handles, names = axes[0].get_legend_handles_labels()
    figure.legend(
        handles, names, loc="outside lower center", ncols=min(len(names), 5), frameon=False
    )
    figure.suptitle(title)
    return figure


def figure5(bench: BenchmarkRuns, out: Path) -> list[Path]:
    """Figure 5: success per algorithm and level with and without imaginary rollouts (error
    bars: std over seeds); per-level imaginary runs and runs on every level's imaginary data
    side by side when both exist. Nothing is written without imaginary runs."""
    found = {r.variant for r in bench.runs}
    imaginary = [v for v in ("imaginary", "imaginary_all") if v in found] or ["imaginary"]
    figure = _bars(
        bench,
        ["real", *imaginary],
        levels_of(bench.runs),
        "Without and with imaginary rollouts (mean ± std over seeds)",
    )
    return _save(figure, out, "figure5_imaginary") if figure is not None else []


def figure6(bench: BenchmarkRuns, out: Path) -> list[Path]:
    """Figure 6: imaginary rollouts against real expert rollouts of the same level's tasks
    (oracle), real data alone beside them, on the novel levels; per level or of all levels in
    one run, as found. Nothing is written without both imaginary and oracle runs."""
    novel = [lv for lv in levels_of(bench.runs) if lv != "train"]
    found = {r.variant for r in bench.runs}
    imaginary = [v for v in ("imaginary", "imaginary_all") if v in found] or ["imaginary"]
    oracle = [v for v in ("oracle", "oracle_all") if v in found] or ["oracle"]
    figure = _bars(
        bench,
        ["real", *imaginary, *oracle],
        novel,
        "Imaginary vs real expert (oracle) rollouts (mean ± std over seeds)",
    )
    return _save(figure, out, "figure6_oracle") if figure is not None else []


def aggregate_figure(aggregates: dict[tuple[str, str], Aggregate], out: Path) -> list[Path]:
    """IQM and mean success across (level, task) pairs per method, with their 95 %
    stratified-bootstrap intervals."""
    if not aggregates:
        return []
    names = [f"{algorithm} ({data})" for algorithm, data in aggregates]
    figure = _figure(9, 0.9 + 0.45 * len(names))
    axes = figure.subplots(1, 2, sharey=True)
    y = np.arange(len(names))
    for ax, (metric, title) in zip(axes, (("iqm", "IQM"), ("mean", "mean"))):
        points = np.array([100 * getattr(a, metric) for a in aggregates.values()])
        low = np.array([100 * getattr(a, f"{metric}_ci")[0] for a in aggregates.values()])
        high = np.array([100 * getattr(a, f"{metric}_ci")[1] for a in aggregates.values()])
        ax.barh(y, high - low, left=low, height=0.6, color="#1f77b4", alpha=0.35)
        ax.plot(points, y, "|", color="black", markersize=14)
        ax.set_title(f"{title} success (%), 95 % CI")
        ax.grid(axis="x", alpha=0.3)
    axes[0].set_yticks(y, names)
    axes[0].invert_yaxis()
    return _save(figure, out, "aggregate")
