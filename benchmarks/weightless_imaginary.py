"""Copies of imaginary files whose rows weigh nothing: the control that keeps imaginary rows in
every batch (and their instructions in the instruction standardisation) while removing what
they teach.

Each copy's stored confidence ``--source`` is set to 0; trained with
``--set=--data.init_args.imaginary_weighting.source=<source>`` every imaginary transition gets
weight 0, which every weighted loss treats as if the row were not in the batch
(``weighted_mean``). The BabyAI control of docs/grounding.md ("where in CQL the `train` loss
arises"):

    python benchmarks/weightless_imaginary.py --out-dir /tmp/zero \\
        shipped:babyai/imaginary_rephrase.h5 shipped:babyai/imaginary_easy.h5 \\
        shipped:babyai/imaginary_hard.h5
    imaginebench benchmark -c configs/benchmark/babyai.yaml --algorithms cql \\
        --variants imaginary_all --levels rephrase easy hard --ratio 0.03 \\
        --imaginary '/tmp/zero/babyai_zero_{level}.h5' \\
        --set=--data.init_args.imaginary_weighting.source=ensemble
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

import h5py
import numpy as np

from imaginebench.data.format import load_dataset
from imaginebench.data.shipped import resolve_data_path


def weightless_copy(source_file: Path, out: Path, source: str) -> int:
    """Copy ``source_file`` to ``out`` with confidence ``source`` set to 0; its transitions."""
    dataset = load_dataset(source_file)
    if source not in dataset.confidence:
        has = ", ".join(sorted(dataset.confidence)) or "none"
        raise SystemExit(f"{source_file}: no confidence {source!r} (it has: {has})")
    shutil.copyfile(source_file, out)
    with h5py.File(out, "r+") as f:
        stored = f[f"confidence/{source}"]
        stored[...] = np.zeros(stored.shape, dtype=stored.dtype)
    return dataset.num_transitions


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="+", help="imaginary files (paths or shipped:...)")
    parser.add_argument("--out-dir", type=Path, required=True)
    parser.add_argument("--source", default="ensemble", help="the confidence to zero")
    args = parser.parse_args()
    args.out_dir.mkdir(parents=True, exist_ok=True)
    for name in args.files:
        path = resolve_data_path(name)
        dataset = load_dataset(path)
        try:
            level = dataset.only_level()
        except ValueError as error:
            raise SystemExit(f"{path}: {error}") from None
        out = args.out_dir / f"{dataset.domain}_zero_{level}.h5"
        n = weightless_copy(path, out, args.source)
        print(f"{out}: {n} transitions, confidence {args.source!r} set to 0")


if __name__ == "__main__":
    main()
