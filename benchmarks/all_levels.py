"""Every level's success of every run in a results folder of ``offline_results.py``.

``offline_results.py`` scores a per-level variant (``imaginary_easy``, ...) on its own level;
this table shows what the same runs do on the other levels too (mean ± std over seeds, in %):

    python benchmarks/all_levels.py outputs/clevr_offline [--out FILE]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

LEVEL_ORDER = ("train", "rephrase", "easy", "hard")


def collect(work_dir: Path) -> dict[tuple[str, str], dict[str, list[float]]]:
    """``{(config, variant): {level: [success % per seed]}}`` of ``<work_dir>/runs``."""
    rows: dict[tuple[str, str], dict[str, list[float]]] = {}
    for path in sorted((work_dir / "runs").glob("*/*/seed*/results.json")):
        variant, config = path.relative_to(work_dir / "runs").parts[:2]
        for level, result in json.loads(path.read_text())["levels"].items():
            rows.setdefault((config, variant), {}).setdefault(level, []).append(
                100 * result["success"]
            )
    return rows


def table(rows: dict[tuple[str, str], dict[str, list[float]]]) -> str:
    lines = ["| config | data | seeds | " + " | ".join(LEVEL_ORDER) + " |", "|---" * 7 + "|"]
    for (config, variant), levels in sorted(rows.items()):
        cells = [
            f"{np.mean(levels[lv]):.1f} ± {np.std(levels[lv]):.1f}" if lv in levels else "—"
            for lv in LEVEL_ORDER
        ]
        seeds = max(len(v) for v in levels.values())
        lines.append(f"| {config} | {variant} | {seeds} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("work_dir", type=Path, help="an offline_results.py --work-dir")
    parser.add_argument("--out", type=Path, help="also write the table to this file")
    args = parser.parse_args()
    if not (args.work_dir / "runs").is_dir():
        parser.error(f"{args.work_dir}/runs not found: not an offline_results.py work dir")
    text = table(collect(args.work_dir))
    print(text, end="")
    if args.out:
        args.out.write_text(text)


if __name__ == "__main__":
    main()
