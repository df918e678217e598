"""Apply imagination's state-only filter steps to an imaginary dataset that already exists.

The ablations of docs/grounding.md that keep a subset of a file without imagining it again:
``--max-progress-drop D`` keeps the episodes whose task potential (the state-only
``Task.progress`` on the imagined states) never falls by more than D at one step, the rule of
``filters.max_progress_drop``; ``--family-horizon REAL`` keeps the episodes no longer than
their task family's limit in the real data (``--quantile`` of its successful lengths times
``--scale``), the rule of ``filters.family_horizon_scale``. Inside ``imaginebench imagine`` the
same steps may pick another candidate of the same episode; here a failing episode is simply
dropped. Neither step runs the simulator. The kept episodes are written unchanged, with the
filter recorded in the file's provenance (``post_filter``).

    python benchmarks/post_filter.py imaginebench/datasets/babyai/imaginary_rephrase.h5 \\
        --max-progress-drop 0 --out babyai_no_regress_rephrase.h5
"""

from __future__ import annotations

import argparse
from collections import Counter

import numpy as np

from imaginebench.data.format import RolloutDataset, load_dataset, save_dataset
from imaginebench.envs.base import Task
from imaginebench.imagination.filters import (
    episode_families,
    family_horizons,
    largest_potential_drop,
)


def keep_mask(
    data: RolloutDataset,
    max_progress_drop: float | None = None,
    family_limits: dict[str, int] | None = None,
) -> np.ndarray:
    """``(episodes,)`` bool: the episodes that pass both steps (a step left ``None`` passes)."""
    lengths = data.episode_lengths()
    keep = np.ones(len(data), dtype=bool)
    for i, family in enumerate(episode_families(data)):
        if family_limits is not None and lengths[i] > family_limits.get(family, lengths[i]):
            keep[i] = False
        elif max_progress_drop is not None:
            episode = data.episode(i)
            drop = largest_potential_drop(Task.from_spec(episode.task_spec), episode.states)
            keep[i] = drop <= max_progress_drop
    return keep


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("file", help="imaginary dataset file (.h5)")
    parser.add_argument("--out", required=True, help="where to write the kept episodes")
    parser.add_argument("--max-progress-drop", type=float, default=None)
    parser.add_argument(
        "--family-horizon",
        metavar="REAL",
        default=None,
        help="real dataset file whose successful lengths set each family's limit",
    )
    parser.add_argument("--quantile", type=float, default=0.95)
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--overwrite", action="store_true")
    args = parser.parse_args()
    if args.max_progress_drop is None and args.family_horizon is None:
        parser.error("give --max-progress-drop, --family-horizon or both")
    if args.max_progress_drop is not None and args.max_progress_drop < 0:
        parser.error(f"--max-progress-drop must be >= 0, got {args.max_progress_drop}")

    data = load_dataset(args.file)
    limits = None
    if args.family_horizon is not None:
        real = load_dataset(args.family_horizon)
        limits = family_horizons(
            episode_families(real),
            real.episode_lengths(),
            real.episode_success,
            args.quantile,
            args.scale,
        )
        print("family limits (steps):", limits)
    keep = keep_mask(data, args.max_progress_drop, limits)

    kept = data.select(keep)
    all_families, kept_families = Counter(episode_families(data)), Counter(episode_families(kept))
    print(
        f"kept {int(keep.sum())} of {len(data)} episodes, "
        f"{len(set(data.episode_task[keep].tolist()))} of "
        f"{len(set(data.episode_task.tolist()))} tasks"
    )
    for family, n in sorted(all_families.items()):
        print(f"  {family}: {kept_families.get(family, 0)} of {n}")

    kept.provenance["post_filter"] = {
        "source": args.file,
        "max_progress_drop": args.max_progress_drop,
        "family_horizon": None
        if limits is None
        else {
            "real": args.family_horizon,
            "quantile": args.quantile,
            "scale": args.scale,
            "limits": limits,
        },
        "kept": int(keep.sum()),
        "of": len(data),
    }
    save_dataset(kept, args.out, overwrite=args.overwrite)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
