"""Regenerate docs/results/clevr_offline.md: success per level of BC and CQL on CLEVR-Robot
trained on real data only, on real + imaginary data of a level, and on real + "oracle" data
(expert rollouts of the level's novel tasks) — ImagineBench's Fig. 5/6 comparison — over
several seeds, plus the random-policy chance level.

    python benchmarks/clevr_offline.py --seeds 0 1 2
    python benchmarks/clevr_offline.py --seeds 0 --variants real     # real-only baselines

Each run is exactly ``imaginebench fit -c configs/<algo>_clevr.yaml`` with the seed and the
second data stream changed (``--data.init_args.imaginary``; half of every batch comes from it):

* ``real``: no second stream;
* ``imaginary``: one run per level with the shipped imaginary dataset of that level
  (``shipped:clevr/imaginary_<level>.h5``, from ``imaginebench imagine``);
* ``oracle``: one run per level with real expert rollouts of that level's tasks, collected like
  the real data (``--oracle-episodes`` episodes, epsilon 0.2, one wording each).

The final score is the config's ``test_episodes_per_level`` episodes per level on the fixed
evaluation set (seed 0). Per-level variants report each level from the run with that level's
data, and for ``train`` the mean over their three runs.
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import yaml

from imaginebench.callbacks.evaluation import evaluate_level
from imaginebench.data.collect import CollectConfig
from imaginebench.datamodules.real_imaginary import default_cache_dir, ensure_real_dataset
from imaginebench.envs.base import LEVELS

ROOT = Path(__file__).resolve().parents[1]


class RandomPolicy:
    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)

    def act(self, states, instructions):
        return self.rng.integers(0, 40, size=len(states))


NOVEL_LEVELS = ("rephrase", "easy", "hard")


def oracle_path(level: str, episodes: int) -> Path:
    """Expert rollouts of ``level`` (collected once into the cache)."""
    config = CollectConfig(episodes=episodes, seed=0, level=level, epsilon=0.2, paraphrases=1)
    path = default_cache_dir() / config.filename("clevr")
    ensure_real_dataset("clevr", path, config)
    return path


def second_stream(variant: str, level: str | None, oracle_episodes: int) -> list[str]:
    if variant == "real":
        return []
    if variant == "imaginary":
        return [f"shipped:clevr/imaginary_{level}.h5"]
    return [str(oracle_path(level, oracle_episodes))]


def run(
    algo: str,
    seed: int,
    out_dir: Path,
    reuse: bool,
    data: list[str],
    tag: str,
    existing_only: bool = False,
) -> dict | None:
    config = ROOT / "configs" / f"{algo}_clevr.yaml"
    save_dir = out_dir / "runs" / tag
    name = yaml.safe_load(config.read_text())["trainer"]["logger"]["init_args"]["name"]
    result_file = save_dir / name / f"seed{seed}" / "results.json"
    if (reuse or existing_only) and result_file.exists():
        return json.loads(result_file.read_text())
    if existing_only:
        return None
    cmd = [
        sys.executable,
        "-m",
        "imaginebench.cli",
        "fit",
        "-c",
        str(config),
        f"--seed_everything={seed}",
        f"--data.init_args.seed={seed}",
        f"--data.init_args.imaginary={json.dumps(data)}",
        f"--trainer.logger.init_args.save_dir={save_dir}",
        f"--trainer.logger.init_args.version=seed{seed}",
        "--trainer.enable_progress_bar=false",
    ]
    start = time.time()
    subprocess.run(cmd, check=True, cwd=out_dir, stdout=subprocess.DEVNULL)
    results = json.loads(result_file.read_text())
    results["seconds"] = time.time() - start
    result_file.write_text(json.dumps(results, indent=2))
    return results


def _cell(values: list[float], seeds: int) -> str:
    if not values:
        return "—"
    v = 100 * np.array(values)
    partial = f" (n={len(values)})" if len(values) < seeds else ""
    return f"{v.mean():.1f} ± {v.std():.1f}{partial}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--algos", nargs="+", default=["bc", "cql"])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument(
        "--variants",
        nargs="+",
        default=["real", "imaginary", "oracle"],
        choices=["real", "imaginary", "oracle"],
    )
    parser.add_argument("--oracle-episodes", type=int, default=1000)
    parser.add_argument("--work-dir", default="outputs/clevr_offline")
    parser.add_argument("--out", default="docs/results/clevr_offline.md")
    parser.add_argument("--reuse", action="store_true", help="reuse finished runs' results.json")
    parser.add_argument(
        "--existing-only",
        action="store_true",
        help="tabulate finished runs only (cells with fewer seeds say n=...)",
    )
    args = parser.parse_args()
    work = Path(args.work_dir).resolve()
    work.mkdir(parents=True, exist_ok=True)

    rows, budgets, episodes = [], [], 200
    for algo in args.algos:
        for variant in args.variants:
            levels = [None] if variant == "real" else list(NOVEL_LEVELS)
            runs = {}  # level -> results per seed
            for level in levels:
                data = second_stream(variant, level, args.oracle_episodes)
                tag = variant if level is None else f"{variant}_{level}"
                done = [
                    run(algo, s, work, args.reuse, data, tag, args.existing_only)
                    for s in args.seeds
                ]
                runs[level] = [r for r in done if r is not None]
            present = [rs[0] for rs in runs.values() if rs]
            if not present:
                continue
            first = present[0]
            episodes = first["episodes_per_level"]
            if variant == "real":
                budgets.append(f"{first['algorithm']} {first['global_step']} steps")
            cells = []
            for level in LEVELS:
                if variant == "real":
                    values = [r["levels"][level]["success"] for r in runs[None]]
                elif level == "train":  # over the per-level runs
                    values = [r["levels"]["train"]["success"] for rs in runs.values() for r in rs]
                else:
                    values = [r["levels"][level]["success"] for r in runs[level]]
                cells.append(
                    _cell(
                        values,
                        len(args.seeds) * (1 if level != "train" or variant == "real" else 3),
                    )
                )
            seconds = [r["seconds"] for rs in runs.values() for r in rs if "seconds" in r]
            minutes = f"{np.mean(seconds) / 60:.1f}" if seconds else ""
            label = {"real": "real", "imaginary": "real + imaginary", "oracle": "real + oracle"}
            rows.append(
                f"| {first['algorithm']} | {label[variant]} | "
                + " | ".join(cells)
                + f" | {minutes} |"
            )
            print(rows[-1], flush=True)
    config = yaml.safe_load((ROOT / "configs" / "cql_clevr.yaml").read_text())
    collect = config["data"]["init_args"]["collect"]
    chance = [
        evaluate_level(RandomPolicy(0), "clevr", lv, episodes, seed=0).success for lv in LEVELS
    ]
    rows.append("| random policy | | " + " | ".join(f"{100 * c:.1f}" for c in chance) + " | |")
    lines = [
        "# CLEVR-Robot: offline RL on real, imaginary and oracle data",
        "",
        "Generated by `python benchmarks/clevr_offline.py --seeds "
        f"{' '.join(map(str, args.seeds))} --variants {' '.join(args.variants)}` "
        f"on {time.strftime('%Y-%m-%d')} ({platform.machine()}, CPU, 2 cores). Each run: the "
        f"shipped config (`configs/<algo>_clevr.yaml`; {', '.join(budgets)}, batch 256), real "
        f"data collected by the expert ({collect['episodes']} episodes, epsilon "
        f"{collect['epsilon']}, each stored with {collect['paraphrases']} training wordings); "
        "`real + imaginary` adds, per level, the shipped imaginary dataset of that level "
        "(half of every batch); `real + oracle` adds instead real expert rollouts of that "
        f"level's tasks ({args.oracle_episodes} episodes, epsilon 0.2). Then {episodes} "
        "evaluation episodes per level on the fixed evaluation set (seed 0; time limit 50 "
        "steps, 5 at the easy level). Success in % (mean ± std over the seeds); per-level "
        "variants score each level with the runs trained on that level's data and `train` "
        "with the mean over all their runs; `n=` marks cells with fewer runs than asked. "
        "The random policy pushes a uniformly random ball in a "
        "uniformly random direction.",
        "",
        "| algorithm | data | train | rephrase | easy | hard | minutes per run |",
        "|---|---|---|---|---|---|---|",
        *rows,
    ]
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
