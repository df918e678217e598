"""Regenerate docs/results/clevr_expert.md: expert success per level and task family,
collection speed, and push statistics against the original real data.

    python benchmarks/clevr_report.py --episodes 200 --seed 0
"""

from __future__ import annotations

import argparse
from pathlib import Path

from expert_report import expert_section, header

from imaginebench.envs.clevr.stats import ORIGINAL, push_statistics


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--episodes", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--epsilon", type=float, default=0.0)
    parser.add_argument("--out", default="docs/results/clevr_expert.md")
    args = parser.parse_args()

    table, collected = expert_section("clevr", args.episodes, args.seed, args.epsilon)
    lines = [
        "# CLEVR-Robot expert and dynamics report",
        "",
        *header("clevr_report.py", "clevr", args),
    ]
    lines += table
    train_data = collected["train"]
    s, s1 = train_data.transition_indices()
    ours = push_statistics(train_data.states[s], train_data.states[s1], train_data.actions)
    lines += [
        "",
        f"## Push statistics on the train-level expert episodes ({ours.transitions} transitions)",
        "",
        "| statistic | ours | original real data |",
        "|---|---|---|",
    ]
    for key, value in ours.as_flat_dict().items():
        ref = ORIGINAL.get(key)
        lines.append(f"| {key} | {value:.3f} | {'' if ref is None else f'{ref:.3f}'} |")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text("\n".join(lines) + "\n")
    print("\n".join(lines[-len(ours.as_flat_dict()) - 4 :]))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
