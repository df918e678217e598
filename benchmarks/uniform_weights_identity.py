"""Does a checkout train every algorithm bit-identically to another? (Used to check that
per-transition loss weights, uniform by default, changed no algorithm's training.)

    mkdir /tmp/before && git archive <commit before the change> | tar -x -C /tmp/before
    python benchmarks/uniform_weights_identity.py /tmp/before .

Each checkout trains every registered algorithm (and the AWAC example) for 8 seeded updates on
the tests' synthetic line task (real + imaginary data, half of each batch imaginary) in a fresh
process importing that checkout; the script prints a hash of each final state dict per
checkout and whether they agree.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

TRAIN = r"""
import hashlib, sys
root = sys.argv[1]
sys.path[:0] = [root, root + "/tests", root + "/examples"]
import lightning as L
import imaginebench
from helpers import LEFT, RIGHT, LineTask, TaskDataModule, trainer
from imaginebench.modules.offline import ALGORITHMS
from my_algorithm import DiscreteAWAC

assert imaginebench.__file__.startswith(root), imaginebench.__file__
classes = [c for pair in ALGORITHMS.values() for c in pair if c is not None] + [DiscreteAWAC]
combo = {"ensemble_size": 3, "num_elites": 2, "model_max_steps": 100, "rollout_batch_size": 100}
for cls in classes:
    task = LineTask(discrete=bool(cls.discrete))
    real = task.dataset(LEFT[:2] + RIGHT[:2], 100, seed=0)
    imaginary = task.dataset(LEFT[2:] + RIGHT[2:], 100, seed=1, source="imaginary")
    L.seed_everything(0)
    dm = TaskDataModule(real, imaginary, ratio=0.5, batch_size=64, seed=0)
    extra = combo if cls.__name__ == "COMBO" else {}
    module = cls(state_dim=3, action_spec=task.action_spec, hidden=(64, 64), **extra)
    trainer(8, deterministic=True).fit(module, dm)
    digest = hashlib.sha256()
    for key, value in sorted(module.state_dict().items()):
        digest.update(key.encode())
        digest.update(value.cpu().numpy().tobytes())
    print(cls.__name__, digest.hexdigest()[:16], flush=True)
"""


def hashes(root: Path) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(root), "OMP_NUM_THREADS": "1"}
    out = subprocess.run(
        [sys.executable, "-c", TRAIN, str(root)],
        env=env,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return dict(line.split() for line in out.splitlines() if line.strip())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("before", type=Path, help="checkout to compare against")
    parser.add_argument("after", type=Path, help="checkout under test")
    args = parser.parse_args()
    before, after = hashes(args.before.resolve()), hashes(args.after.resolve())
    for name in before:
        same = "identical" if before[name] == after.get(name) else "DIFFERENT"
        print(f"{name:14s} {before[name]} {after.get(name, '-'):16s} {same}")
    sys.exit(0 if before == after else 1)


if __name__ == "__main__":
    main()
