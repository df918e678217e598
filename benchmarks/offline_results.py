"""Regenerate docs/results/<domain>_offline.md: success per level of offline RL algorithms
trained on real data only, on real + imaginary data of a level, and on real + "oracle" data
(expert rollouts of the level's novel tasks) — ImagineBench's Fig. 5/6 comparison — over
several seeds, plus the random-policy chance level.

    python benchmarks/offline_results.py --domain clevr --algos bc cql --seeds 0 1 2
    python benchmarks/offline_results.py --domain babyai --variants real     # real-only baselines

Each run is exactly ``imaginebench fit -c configs/<algo>_<domain>.yaml`` with the seed, the
output folders and the second data stream changed (``--data.init_args.imaginary``; half of
every batch comes from it):

* ``real``: no second stream;
* ``imaginary``: one run per level with the shipped imaginary dataset of that level
  (``shipped:<domain>/imaginary_<level>.h5``, from ``imaginebench imagine``);
* ``oracle``: one run per level with real expert rollouts of that level's tasks, collected like
  the real data (``--oracle-episodes`` episodes, epsilon 0.2, one wording each).

The final score is the config's ``test_episodes_per_level`` episodes per level on the fixed
evaluation set (seed 0). Per-level variants report each level from the run with that level's
data, and for ``train`` the mean over their three runs. Each run writes its ``results.json``
and its checkpoints (``checkpoints/``) into its own folder
``<work-dir>/runs/<variant>[_<level>]/<config>/seed<seed>``; finished runs are found again
there (``--reuse``; ``--existing-only`` tabulates them without training).
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import json
import platform
import shlex
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from imaginebench.callbacks.evaluation import evaluate_level
from imaginebench.config import load_config_file
from imaginebench.data.collect import CollectConfig
from imaginebench.datamodules.sources import default_cache_dir, ensure_real_dataset
from imaginebench.envs import DOMAINS, get_domain, make
from imaginebench.envs.base import LEVELS

ROOT = Path(__file__).resolve().parents[1]


class RandomPolicy:
    """Uniformly random actions of an environment's action space."""

    def __init__(self, action_space, seed: int) -> None:
        self.space = action_space
        self.rng = np.random.default_rng(seed)

    def act(self, states, instructions):
        if hasattr(self.space, "n"):
            return self.rng.integers(0, self.space.n, size=len(states))
        low, high = self.space.low, self.space.high
        return self.rng.uniform(low, high, size=(len(states), *self.space.shape))


NOVEL_LEVELS = ("rephrase", "easy", "hard")


def oracle_path(domain: str, level: str, episodes: int) -> Path:
    """Expert rollouts of ``level`` (collected once into the cache)."""
    config = CollectConfig(episodes=episodes, seed=0, level=level, epsilon=0.2, paraphrases=1)
    path = default_cache_dir() / config.filename(domain)
    ensure_real_dataset(domain, path, config)
    return path


SHIPPED_IMAGINARY = "shipped:{domain}/imaginary_{level}.h5"


def second_stream(
    domain: str,
    variant: str,
    level: str | None,
    oracle_episodes: int,
    imaginary: str = SHIPPED_IMAGINARY,
) -> list[str]:
    if variant == "real":
        return []
    if variant == "imaginary":
        return [imaginary.format(domain=domain, level=level)]
    return [str(oracle_path(domain, level, oracle_episodes))]


def has_sampling_seed(config: Path) -> bool:
    """Whether the config's module draws training noise from its own seeded stream."""
    module, name = load_config_file(config)["model"]["class_path"].rsplit(".", 1)
    cls = getattr(importlib.import_module(module), name)
    return any(
        "sampling_seed" in inspect.signature(klass.__init__).parameters
        for klass in cls.__mro__
        if "__init__" in vars(klass)
    )


def run(
    domain: str,
    algo: str,
    seed: int,
    out_dir: Path,
    reuse: bool,
    data: list[str],
    tag: str,
    existing_only: bool = False,
    real_episodes: int | None = None,
    ratio: float | None = None,
    extra: list[str] | None = None,
) -> dict | None:
    """One ``imaginebench fit`` run (its ``results.json``), or the finished run's with
    ``reuse``; ``extra`` command-line arguments go after the others (they win)."""
    config = ROOT / "configs" / f"{algo}_{domain}.yaml"
    save_dir = out_dir / "runs" / tag
    name = load_config_file(config)["trainer"]["logger"]["init_args"]["name"]
    result_file = save_dir / name / f"seed{seed}" / "results.json"
    if (reuse or existing_only) and result_file.exists():
        return json.loads(result_file.read_text())
    if existing_only:
        return None
    model_seed = [f"--model.init_args.sampling_seed={seed}"] if has_sampling_seed(config) else []
    cmd = [
        sys.executable,
        "-m",
        "imaginebench.cli",
        "fit",
        "-c",
        str(config),
        f"--seed_everything={seed}",
        f"--data.init_args.seed={seed}",
        *model_seed,
        *([f"--data.init_args.collect.episodes={real_episodes}"] if real_episodes else []),
        f"--data.init_args.imaginary={json.dumps(data)}",
        *([f"--data.init_args.ratio={ratio}"] if ratio is not None and data else []),
        f"--trainer.logger.init_args.save_dir={save_dir}",
        f"--trainer.logger.init_args.version=seed{seed}",
        # the config's last callback, its ModelCheckpoint: one folder per run, beside its results
        f"--trainer.callbacks.init_args.dirpath={result_file.parent / 'checkpoints'}",
        "--trainer.enable_progress_bar=false",
        *(extra or []),
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
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--domain", default="clevr", choices=sorted(DOMAINS))
    parser.add_argument("--algos", nargs="+", default=["bc", "cql"])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument(
        "--variants",
        nargs="+",
        default=["real", "imaginary", "oracle"],
        choices=["real", "imaginary", "oracle"],
    )
    parser.add_argument(
        "--levels",
        nargs="+",
        default=list(NOVEL_LEVELS),
        choices=NOVEL_LEVELS,
        help="levels of the per-level variants to run (e.g. one per job to split the work)",
    )
    parser.add_argument("--oracle-episodes", type=int, default=1000)
    parser.add_argument(
        "--imaginary",
        default=SHIPPED_IMAGINARY,
        help="imaginary file of a level, {domain} and {level} filled in (default: the shipped "
        "one), e.g. to compare freshly imagined data before shipping it",
    )
    parser.add_argument(
        "--ratio",
        type=float,
        help="override the configs' share of each batch drawn from the second stream",
    )
    parser.add_argument(
        "--real-episodes",
        type=int,
        help="override the configs' collect.episodes (the real data every variant shares)",
    )
    parser.add_argument("--work-dir", default=None, help="default: outputs/<domain>_offline")
    parser.add_argument("--out", default=None, help="default: docs/results/<domain>_offline.md")
    parser.add_argument("--reuse", action="store_true", help="reuse finished runs' results.json")
    parser.add_argument(
        "--existing-only",
        action="store_true",
        help="tabulate finished runs only (cells with fewer seeds say n=...)",
    )
    args = parser.parse_args()
    domain = args.domain
    for algo in args.algos:
        if not (ROOT / "configs" / f"{algo}_{domain}.yaml").is_file():
            parser.error(f"no config configs/{algo}_{domain}.yaml")
    work = Path(args.work_dir or f"outputs/{domain}_offline").resolve()
    out = Path(args.out or f"docs/results/{domain}_offline.md")
    work.mkdir(parents=True, exist_ok=True)

    rows, budgets, episodes = [], [], 200
    for algo in args.algos:
        for variant in args.variants:
            levels = [None] if variant == "real" else args.levels
            runs = {}  # level -> results per seed
            for level in levels:
                data = second_stream(domain, variant, level, args.oracle_episodes, args.imaginary)
                tag = variant if level is None else f"{variant}_{level}"
                done = [
                    run(
                        domain,
                        algo,
                        s,
                        work,
                        args.reuse,
                        data,
                        tag,
                        args.existing_only,
                        args.real_episodes,
                        args.ratio,
                    )
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
                    values = [r["levels"][level]["success"] for r in runs.get(level, [])]
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
    config = load_config_file(ROOT / "configs" / f"{args.algos[0]}_{domain}.yaml")
    collect = dict(config["data"]["init_args"]["collect"])
    collect["episodes"] = args.real_episodes or collect["episodes"]
    limits, chance = [], []
    for level in LEVELS:
        env = make(domain, level).unwrapped
        limits.append(f"{level} {env.max_episode_steps}")
        policy = RandomPolicy(env.action_space, seed=0)
        chance.append(evaluate_level(policy, domain, level, episodes, seed=0).success)
    rows.append("| random policy | | " + " | ".join(f"{100 * c:.1f}" for c in chance) + " | |")
    command = shlex.join(["python", "benchmarks/offline_results.py", *sys.argv[1:]])
    lines = [
        f"# {get_domain(domain).env_id}: offline RL on real, imaginary and oracle data",
        "",
        f"Generated by `{command}` on {time.strftime('%Y-%m-%d')} ({platform.machine()}, CPU, "
        f"2 cores). Each run: the shipped config (`configs/<algo>_{domain}.yaml`; "
        f"{', '.join(budgets)}, batch 256), real data collected by the expert "
        f"({collect['episodes']} episodes, epsilon {collect['epsilon']}, each stored with "
        f"{collect['paraphrases']} training wordings); `real + imaginary` adds, per level, the "
        f"imaginary dataset of that level (`{args.imaginary}`, "
        f"{'half' if args.ratio is None else f'a share {args.ratio:g}'} of every batch); "
        "`real + oracle` adds "
        f"instead real expert rollouts of that level's tasks ({args.oracle_episodes} episodes, "
        f"epsilon 0.2). Then {episodes} evaluation episodes per level on the fixed evaluation "
        f"set (seed 0; time limits {', '.join(limits)} steps). Success in % (mean ± std over "
        "the seeds); per-level variants score each level with the runs trained on that level's "
        "data and `train` with the mean over all their runs; `n=` marks cells with fewer runs "
        "than asked. The random policy takes uniformly random actions. Minutes per run are "
        "wall-clock on a shared machine (indicative only).",
        "",
        "| algorithm | data | train | rephrase | easy | hard | minutes per run |",
        "|---|---|---|---|---|---|---|",
        *rows,
    ]
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
