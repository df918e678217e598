"""Real expert rollouts matched to an imaginary file: the same tasks, as many per task.

A control for what an imaginary file does to offline RL: train once on real + the imaginary
file and once on real + this file, which holds expert rollouts (e.g. the benchmark's oracle
data of the level) of exactly the tasks the imaginary file covers, as many per task, with the
level's wordings. The gap between the two runs is the imagined rollouts' quality; the gap
between this run and real-only is what covering only those tasks does (docs/metaworld.md):

    python benchmarks/matched_real_subset.py IMAGINARY.h5 ORACLE.h5 --out matched.h5
"""

from __future__ import annotations

import argparse
from collections import Counter

from imaginebench.data.hdf5 import load_dataset, save_dataset


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("imaginary")
    parser.add_argument("real", help="expert rollouts of the same level (e.g. its oracle file)")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    imagined, real = load_dataset(args.imaginary), load_dataset(args.real)
    wanted = Counter(imagined.tasks[k] for k in imagined.episode_task)
    picked: list[int] = []
    got: Counter[str] = Counter()
    for i, k in enumerate(real.episode_task):
        spec = real.tasks[k]
        if got[spec] < wanted[spec]:
            picked.append(i)
            got[spec] += 1
    short = {spec: n - got[spec] for spec, n in wanted.items() if got[spec] < n}
    if short:
        raise SystemExit(f"{args.real} has too few episodes of these tasks: {short}")
    save_dataset(real.select(picked), args.out, overwrite=True)
    print(f"{len(picked)} real episodes of {len(wanted)} tasks -> {args.out}")


if __name__ == "__main__":
    main()
