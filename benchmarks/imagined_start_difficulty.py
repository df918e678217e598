"""Which starts an imaginary dataset keeps: its keep rate per quartile of start difficulty.

`imaginebench imagine` draws its first-round episodes with ``suite.episodes(level, rollouts,
seed, split="data")``; this script draws the same episodes again from the file's provenance,
measures each start's difficulty by the task's own shaped potential at the initial state
(state-only, no simulator: for CLEVR relations the negative gap to the goal), and reports, per
quartile of the level's starts, how many episodes the file kept. A file whose keep rate falls
from the near to the far starts teaches the level mostly where the goal is already close.
Episodes from later rounds (coverage, start difficulty: new draws) are counted apart.

    python benchmarks/imagined_start_difficulty.py imaginebench/datasets/clevr/imaginary_rephrase.h5
"""

from __future__ import annotations

import argparse

import numpy as np

from imaginebench.data.format import load_dataset
from imaginebench.envs import get_domain
from imaginebench.imagination.filters import start_bin, start_bin_edges, start_potential


def keep_rates(path: str, bins: int = 4) -> list[dict[str, float]]:
    data = load_dataset(path)
    provenance = data.provenance
    level, seed = provenance["level"], int(provenance["seed"])
    specs = (
        get_domain(data.domain)
        .make_suite()
        .episodes(level, int(provenance["rollouts_requested"]), seed, split="data")
    )
    starts = np.stack([np.asarray(spec.initial_state, dtype=np.float32) for spec in specs])
    potential = [start_potential(spec) for spec in specs]
    kept = np.zeros(len(specs), dtype=bool)
    later = []
    for index in range(len(data)):
        first = np.asarray(data.episode(index).states[0], dtype=np.float32)
        match = np.flatnonzero(np.abs(starts - first).max(axis=1) < 1e-5)
        if len(match):
            kept[match[0]] = True
        else:
            later.append(index)
    edges = start_bin_edges(potential, bins)
    which = start_bin(potential, edges)
    rows = [
        {
            "bin": b,
            "low": float(edges[b]),
            "high": float(edges[b + 1]),
            "episodes": int((which == b).sum()),
            "kept": int(kept[which == b].sum()),
        }
        for b in range(bins)
    ]
    rows.append({"bin": -1, "episodes": len(specs), "kept": int(kept.sum()), "later": len(later)})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="+")
    parser.add_argument("--bins", type=int, default=4)
    args = parser.parse_args()
    for path in args.files:
        rows = keep_rates(path, args.bins)
        total = rows.pop()
        print(
            f"\n{path}: {total['kept']} of {total['episodes']} first-round episodes kept, "
            f"{total['later']} kept rollouts from later rounds (coverage, start difficulty)"
        )
        print("| start difficulty (initial potential) | episodes | kept | keep rate |")
        print("|---|---|---|---|")
        for r in rows:
            rate = 100 * r["kept"] / max(r["episodes"], 1)
            print(
                f"| [{r['low']:.2f}, {r['high']:.2f}] | {r['episodes']} | {r['kept']} | "
                f"{rate:.1f} % |"
            )


if __name__ == "__main__":
    main()
