"""Regenerate docs/results/<domain>_confidence.md: does trusting imagined transitions by their
confidence (docs/confidence.md) beat pooling them with real data uniformly?

    python benchmarks/confidence_results.py --domain clevr --algos bc cql --seeds 0 1 2 \\
        --imaginary 'data/clevr_imaginary_{level}.h5' --source ensemble --score

Two tables, per novel level:

1. **How well the confidence spots wrong transitions**: each imaginary file's transitions are
   judged after the fact by the domain's quality judge (the simulator replays each step,
   ``correct_transitions``); the AUROC of ``1 - confidence`` for telling the wrong ones from
   the right ones, for every confidence source the file holds (0.5: chance, 1: perfect).
2. **Success per level** of each algorithm trained on: real data only; real + oracle (expert
   rollouts of the level's tasks); real + the level's imaginary file mixed **uniformly**
   (today's default); **weighted** (each imaginary transition's losses weighted by
   ``confidence ** power``); **filtered** (the transitions below the ``--filter-quantile``
   quantile of the file's confidence never sampled, the rest weighted 1).

Every run is a cell of an ``imaginebench benchmark`` grid (one ``imaginebench fit -c
configs/<algo>_<domain>.yaml`` per seed, in ``<work-dir>/<variant>[/<level>]``; finished runs
are skipped, interrupted ones resume), the weighting given as
``--data.init_args.imaginary_weighting.*``; ``--max-steps`` / ``--eval-episodes`` shrink the
budget for a smoke run. Files without the chosen confidence are scored first with ``--score``
(``imaginebench score-imaginary``, written as copies into the work directory, never in place).
"""

from __future__ import annotations

import argparse
import json
import platform
import shlex
import sys
import time
from pathlib import Path

import numpy as np
import yaml

from imaginebench.benchmark import load_spec, run_benchmark
from imaginebench.benchmark.spec import NOVEL_LEVELS
from imaginebench.config import load_config_file
from imaginebench.data.collect import CollectConfig
from imaginebench.data.dataset import RolloutDataset
from imaginebench.data.format import load_dataset
from imaginebench.data.shipped import resolve_data_path
from imaginebench.datamodules.sources import default_cache_dir, ensure_real_dataset
from imaginebench.envs import DOMAINS, get_domain
from imaginebench.imagination.confidence import CONFIDENCE_SOURCES, auroc
from imaginebench.imagination.score import score_files
from imaginebench.report.results import load_runs
from imaginebench.report.stats import summarize

ROOT = Path(__file__).resolve().parents[1]

VARIANTS = ("real", "oracle", "uniform", "weighted", "filtered")
LABELS = {
    "real": "real",
    "oracle": "real + oracle",
    "uniform": "real + imaginary, uniform",
    "weighted": "real + imaginary, weighted",
    "filtered": "real + imaginary, filtered",
}


def real_file(domain: str, algo: str, episodes: int | None) -> Path:
    """The real data the runs train on (the config's collection, ``episodes`` overriding its
    size), collected into the cache if missing."""
    config = load_config_file(ROOT / "configs" / f"{algo}_{domain}.yaml")
    collect = dict(config["data"]["init_args"]["collect"])
    collect["episodes"] = episodes or collect["episodes"]
    path = default_cache_dir() / CollectConfig(**collect).filename(domain)
    ensure_real_dataset(domain, path, CollectConfig(**collect))
    return path


def imaginary_file(
    pattern: str, domain: str, level: str, source: str, real: Path, work: Path, args
) -> Path:
    """The level's imaginary file with confidence ``source`` (scored into ``work`` with
    ``--score`` when it lacks it)."""
    path = resolve_data_path(pattern.format(domain=domain, level=level))
    if source in load_dataset(path, nonfinite="drop").confidence:
        return path
    scored = work / "scored" / f"{domain}_imaginary_{level}.h5"
    if scored.exists() and source in load_dataset(scored).confidence:
        return scored
    if not args.score:
        raise SystemExit(
            f"{path} has no confidence {source!r}: pass --score (or run imaginebench "
            f"score-imaginary {path} --real {real})"
        )
    score_files(
        [str(path)], real=str(real), sources=[source], checkpoint=args.checkpoint, out=str(scored)
    )
    return scored


def wrong_transitions(dataset: RolloutDataset) -> np.ndarray:
    """``(N,)`` bool: the domain's judge (the simulator, after the fact) finds the step wrong."""
    judge = get_domain(dataset.domain).make_quality()
    return ~np.concatenate(
        [judge.correct_transitions(ep.states, ep.actions) for ep in dataset]
    ).astype(bool)


def spotting(dataset: RolloutDataset) -> dict[str, dict[str, float]]:
    """Per confidence source of ``dataset``: AUROC of ``1 - confidence`` for its wrong steps,
    and the mean confidence of the right and the wrong ones."""
    wrong = wrong_transitions(dataset)
    out = {}
    for name, confidence in sorted(dataset.confidence.items()):
        out[name] = {
            "auroc": auroc(1.0 - confidence, wrong),
            "wrong_fraction": float(wrong.mean()),
            "mean_right": float(confidence[~wrong].mean()) if (~wrong).any() else float("nan"),
            "mean_wrong": float(confidence[wrong].mean()) if wrong.any() else float("nan"),
            "transitions": len(wrong),
        }
    return out


def budget_overlay(work: Path, max_steps: int | None, episodes: int | None) -> list[str]:
    """``-c overlay.yaml`` shrinking the configs' budget (none: the configs' own)."""
    if max_steps is None and episodes is None:
        return []
    steps = max_steps or 4000
    every = max(8, steps // 8 * 8)  # checkpoints fire on multiples of updates_per_batch (8)
    episodes = episodes or 200
    overlay = {
        "trainer": {
            "max_steps": steps,
            "callbacks": [
                {
                    "class_path": "imaginebench.callbacks.SuccessRateEvaluation",
                    "init_args": {
                        "every_n_steps": every,
                        "episodes_per_level": episodes,
                        "test_episodes_per_level": episodes,
                        "test_after_fit": True,
                    },
                },
                {  # no dirpath: the checkpoints go beside the run's results.json
                    "class_path": "lightning.pytorch.callbacks.ModelCheckpoint",
                    "init_args": {"save_last": True, "every_n_train_steps": every, "save_top_k": 0},
                },
            ],
        }
    }
    path = work / "budget.yaml"
    path.write_text(yaml.safe_dump(overlay, sort_keys=False))
    return ["-c", str(path)]


def run_grid(out: Path, **fields) -> dict[str, list[float]]:
    """Run (or resume, or skip when finished) the benchmark grid ``fields`` (BenchmarkSpec
    fields, no reference policies) in ``out``; success per level over its finished runs."""
    spec = load_spec(
        None,
        references=[],
        out=str(out),
        config="{algorithm}_{domain}.yaml",
        base_dir=str(ROOT / "configs"),
        **fields,
    )
    outcome = run_benchmark(spec, command=["python", *sys.argv], progress=False)
    if outcome.failed:
        raise SystemExit(f"{len(outcome.failed)} runs failed (logs in {out}/runs/*/log.txt)")
    success: dict[str, list[float]] = {}
    for result in load_runs(out).runs:
        for level in [result.level] if result.level else fields["levels"]:
            success.setdefault(level, []).append(result.success[level])
    return success


def cell(values: list[float], expected: int) -> str:
    """``mean ± std`` in % over the seeds; ``(n=k)`` when fewer runs than asked; ``—`` none."""
    if not values:
        return "—"
    summary = summarize(values)
    partial = f" (n={len(values)})" if len(values) < expected else ""
    spread = f" ± {100 * summary.std:.1f}" if len(values) > 1 else ""
    return f"{100 * summary.mean:.1f}{spread}{partial}"


def weighting_args(variant: str, source: str, power: float, threshold: float) -> list[str]:
    prefix = "--data.init_args.imaginary_weighting"
    if variant == "weighted":
        return [f"{prefix}.source={source}", f"{prefix}.power={power}"]
    if variant == "filtered":
        return [f"{prefix}.source={source}", f"{prefix}.power=0", f"{prefix}.threshold={threshold}"]
    return []


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--domain", default="clevr", choices=sorted(DOMAINS))
    parser.add_argument("--algos", nargs="+", default=["bc", "cql"])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--levels", nargs="+", default=list(NOVEL_LEVELS), choices=NOVEL_LEVELS)
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=VARIANTS)
    parser.add_argument(
        "--imaginary",
        default="shipped:{domain}/imaginary_{level}.h5",
        help="imaginary file of a level ({domain} and {level} filled in)",
    )
    parser.add_argument("--source", default="ensemble", choices=CONFIDENCE_SOURCES)
    parser.add_argument("--power", type=float, default=1.0, help="weighted: confidence ** power")
    parser.add_argument(
        "--filter-quantile",
        type=float,
        default=0.25,
        help="filtered: drop the transitions below this quantile of the file's confidence",
    )
    parser.add_argument("--score", action="store_true", help="score files lacking --source")
    parser.add_argument("--checkpoint", help="grounding checkpoint for --score of likelihood")
    parser.add_argument("--oracle-episodes", type=int, default=1000)
    parser.add_argument("--real-episodes", type=int, help="override the configs' real data size")
    parser.add_argument("--ratio", type=float, help="override the configs' imaginary share")
    parser.add_argument("--max-steps", type=int, help="override the configs' training steps")
    parser.add_argument("--eval-episodes", type=int, help="override the evaluation episodes")
    parser.add_argument("--work-dir", default=None, help="default: outputs/<domain>_confidence")
    parser.add_argument("--out", default=None, help="default: docs/results/<domain>_confidence.md")
    args = parser.parse_args()
    domain = args.domain
    work = Path(args.work_dir or f"outputs/{domain}_confidence").resolve()
    out = Path(args.out or f"docs/results/{domain}_confidence.md")
    work.mkdir(parents=True, exist_ok=True)
    real = real_file(domain, args.algos[0], args.real_episodes)
    budget = budget_overlay(work, args.max_steps, args.eval_episodes)

    files, thresholds, quality = {}, {}, {}
    for level in args.levels:
        files[level] = imaginary_file(args.imaginary, domain, level, args.source, real, work, args)
        dataset = load_dataset(files[level], nonfinite="drop")
        quality[level] = spotting(dataset)
        confidence = dataset.confidence[args.source]
        thresholds[level] = float(np.quantile(confidence, args.filter_quantile))
        print(level, json.dumps(quality[level]), flush=True)

    common = {
        "domain": domain,
        "seeds": args.seeds,
        "real_episodes": args.real_episodes,
        "ratio": args.ratio,
        "oracle": {"episodes": args.oracle_episodes},
    }
    rows = []
    for algo in args.algos:
        for variant in args.variants:
            grid = dict(common, algorithms=[algo], levels=args.levels)
            if variant in ("real", "oracle"):
                success = run_grid(
                    work / algo / variant, variants=[variant], overrides=budget, **grid
                )
            else:  # one grid per level: the filtered runs' threshold is the level's
                success = {}
                for level in args.levels:
                    weighting = weighting_args(variant, args.source, args.power, thresholds[level])
                    found = run_grid(
                        work / algo / variant / level,
                        **dict(grid, levels=[level]),
                        variants=["imaginary"],
                        imaginary=str(files[level]),
                        overrides=budget + weighting,
                    )
                    success[level] = found.get(level, [])
            cells = [cell(success.get(level, []), len(args.seeds)) for level in args.levels]
            rows.append(f"| {algo} | {LABELS[variant]} | " + " | ".join(cells) + " |")
            print(rows[-1], flush=True)

    command = shlex.join(["python", "benchmarks/confidence_results.py", *sys.argv[1:]])
    auroc_rows = [
        f"| {level} | {name} | {q['transitions']} | {100 * q['wrong_fraction']:.1f} % | "
        f"{q['auroc']:.3f} | {q['mean_right']:.3f} | {q['mean_wrong']:.3f} |"
        for level in args.levels
        for name, q in quality[level].items()
    ]
    budget_text = (
        f"{args.max_steps or 'the configs'} training steps, {args.eval_episodes or 'the configs'}"
        " evaluation episodes per level"
        if budget
        else "the configs' training steps and evaluation episodes"
    )
    lines = [
        f"# {get_domain(domain).env_id}: imaginary rollouts weighted by their confidence",
        "",
        (
            f"Generated by `{command}` on {time.strftime('%Y-%m-%d')} ({platform.machine()}, "
            f"CPU). Imaginary files: `{args.imaginary}`; real data: `{real.name}`. Method and "
            "commands: [confidence.md](../confidence.md)."
        ),
        "",
        "## How well the confidence spots wrong transitions",
        "",
        (
            "Wrong = the simulator, replaying the step after the fact, disagrees with the "
            "imagined next state (the domain's quality judge). AUROC of `1 - confidence` for "
            "the wrong ones (0.5: chance)."
        ),
        "",
        "| level | source | transitions | wrong | AUROC | mean confidence, right "
        + "| mean confidence, wrong |",
        "|---|---|---|---|---|---|---|",
        *auroc_rows,
        "",
        "## Success per level",
        "",
        f"Seeds {', '.join(map(str, args.seeds))}; {budget_text}. Success in % (mean ± std "
        f"over the seeds) on each level, from the runs with that level's data. `weighted`: "
        f"losses weighted by `{args.source}` confidence ** {args.power:g}; `filtered`: "
        f"transitions below the {args.filter_quantile:g} quantile of the file's `{args.source}` "
        "confidence dropped ("
        + ", ".join(f"{level} {thresholds[level]:.3f}" for level in args.levels)
        + f"); oracle: {args.oracle_episodes} expert episodes of the level.",
        "",
        "| algorithm | data | " + " | ".join(args.levels) + " |",
        "|---|---|" + "---|" * len(args.levels),
        *rows,
    ]
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines) + "\n")
    (work / "confidence_quality.json").write_text(json.dumps(quality, indent=2))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
