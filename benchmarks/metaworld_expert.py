"""Meta-World expert success per task (docs/results/metaworld_expert.md).

    python benchmarks/metaworld_expert.py --episodes 30 --seed 0 --epsilons 0 0.2
    python benchmarks/metaworld_expert.py --tasks soccer locked-door-open --epsilons 0 0.05 0.2
    python benchmarks/metaworld_expert.py --tasks locked-door-open --max-steps 150 --epsilons 0

For every task of the ``train`` (= ``rephrase``: same tasks and physics), ``easy`` and ``hard``
levels: ``--episodes`` episodes from the task suite's initial states (generator
``default_rng([seed, task index])``), the scripted expert with each ``--epsilons`` value
(expert seed = ``--seed``), at most 100 steps. Reported per task: success, mean steps to
success, and how often Meta-World's own ``info["success"]`` first fires at the same step as our
state-only judge (single-stage tasks: Meta-World has no judge for the compositions); for
locked-door-open, where the steps of the solved episodes at epsilon 0 go (reaching and turning
the lever, hooking the handle, swinging the door). Then the speed of ``imaginebench collect``'s
code path on the ``train`` level.

``--tasks`` re-runs only the named tasks: their rows in ``--out`` are replaced (the task index,
hence the initial states, is the task's place in the full list) and the run is listed under
"Partial re-runs". ``--max-steps`` lengthens the episodes (a diagnostic: the benchmark's episodes
are 100 steps); such runs go to their own section, not the main table. A full run rewrites
``--out`` but keeps the sections named in ``KEPT_SECTIONS``.
"""

from __future__ import annotations

import argparse
import platform
import re
import time
from pathlib import Path

import numpy as np

from imaginebench.data.collect import collect
from imaginebench.envs.metaworld.env import MAX_EPISODE_STEPS, MetaWorldEnv
from imaginebench.envs.metaworld.layout import entity_pos
from imaginebench.envs.metaworld.suite import (
    EASY_TASKS,
    HARD_TASKS,
    TRAIN_TASKS,
    MetaWorldTaskSuite,
)
from imaginebench.envs.metaworld.tasks import MetaWorldTask
from imaginebench.experts import make_expert

LEVELS = {"train": TRAIN_TASKS, "easy": EASY_TASKS, "hard": HARD_TASKS}
# sections of --out a full run keeps (measured separately, each quoting its command); the
# partial re-runs and longer-episode diagnostics are dropped with the table they amended
KEPT_SECTIONS = ("`imaginebench collect`",)
STAGES_SECTION = "locked-door-open: steps per stage"


def run_task(env, task: MetaWorldTask, index: int, args, epsilon: float) -> dict:
    suite = MetaWorldTaskSuite()
    rng = np.random.default_rng([args.seed, index])
    expert = make_expert("metaworld", epsilon=epsilon, seed=args.seed)
    lengths, agree, steps, solved_runs = [], [], 0, []
    start = time.perf_counter()
    for _ in range(args.episodes):
        initial = suite.sample_initial_state(task, rng)
        env.reset(options={"task": task, "initial_state": initial})
        ours = theirs = None
        for t in range(args.max_steps):
            _, _, terminated, truncated, _ = env.step(expert.act(env))
            steps += 1
            if theirs is None and env.scene.info["success"]:
                theirs = t + 1
            if terminated or truncated:
                ours = t + 1 if terminated else None
                break
        lengths.append(ours)
        agree.append(ours == theirs)
        if ours is not None:
            solved_runs.append(np.stack(env.trajectory))
    seconds = time.perf_counter() - start
    solved = [n for n in lengths if n is not None]
    return {
        "success": len(solved) / args.episodes,
        "length": float(np.mean(solved)) if solved else float("nan"),
        "agree": float(np.mean(agree)) if not task.two_stage else None,
        "steps_per_s": steps / seconds,
        "solved_runs": solved_runs,
    }


STAGE_EVENTS = ("the lever moves", "unlocked", "the door moves", "opened (success)")


def locked_door_stages(task: MetaWorldTask, runs: list[np.ndarray]) -> list[str]:
    """Where the steps of solved locked-door-open episodes go: the first step at which the
    lock's lever has moved 1 cm, the task's stage 1 (unlocked), the handle has moved 1 cm (the
    door opens) and the episode's success, from the states alone."""
    lock, handle = entity_pos("lock"), entity_pos("handle")
    events = []
    for states in runs:
        moved = np.linalg.norm(states[:, lock] - states[0, lock], axis=-1) > 0.01
        opened = np.linalg.norm(states[:, handle] - states[0, handle], axis=-1) > 0.01
        unlocked = task.stage(states) > 0
        events.append([int(np.argmax(moved)), int(np.argmax(unlocked)), int(np.argmax(opened))])
        events[-1].append(len(states) - 1)
    steps = np.array(events, dtype=float)
    intro = (
        f"Solved episodes at ε = 0 ({len(runs)}): the first step at which "
        f"{', '.join(STAGE_EVENTS)} (the lever and the handle: moved 1 cm from their initial "
        "readings)."
    )
    lines = [
        intro,
        "",
        "| event | mean step | min | max | steps since the previous event (mean) |",
        "|---|---|---|---|---|",
    ]
    previous = np.zeros(len(runs))
    for k, event in enumerate(STAGE_EVENTS):
        column = steps[:, k]
        lines.append(
            f"| {event} | {column.mean():.1f} | {column.min():.0f} | {column.max():.0f} "
            f"| {(column - previous).mean():.1f} |"
        )
        previous = column
    return lines


def table_row(level: str, name: str, results: list[dict]) -> str:
    cells = " | ".join(f"{100 * r['success']:.0f} | {r['length']:.1f}" for r in results)
    agree = results[0]["agree"]
    agree_cell = "n/a (composition)" if agree is None else f"{100 * agree:.0f}%"
    return f"| {level} | {name} | {cells} | {agree_cell} | {results[0]['steps_per_s']:.0f} |"


def command(args: argparse.Namespace) -> str:
    eps = " ".join(f"{e:g}" for e in args.epsilons)
    parts = [f"--episodes {args.episodes} --seed {args.seed} --epsilons {eps}"]
    if args.tasks:
        parts.append("--tasks " + " ".join(args.tasks))
    if args.max_steps != MAX_EPISODE_STEPS:
        parts.append(f"--max-steps {args.max_steps}")
    if not args.tasks:
        parts.append(f"--collect-episodes {args.collect_episodes}")
    return "`python benchmarks/metaworld_expert.py " + " ".join(parts) + "`"


def header(args: argparse.Namespace) -> list[str]:
    eps = args.epsilons
    return [
        "# Meta-World expert report",
        "",
        (
            f"Generated by {command(args)} on {time.strftime('%Y-%m-%d')} "
            f"({platform.processor() or platform.machine()}, 1 process, 1 thread). "
            "metaworld 3.1.1, mujoco 3.3.0; 100-step episodes."
        ),
        "",
        (
            f"{args.episodes} episodes per task and epsilon; initial states from the task suite "
            f"(`default_rng([{args.seed}, task index])`); expert seed {args.seed}. Success in %, "
            "mean steps to success, agreement = episodes in which Meta-World's own "
            "`info['success']` first fires at the same step as our state-only judge."
        ),
        "",
        "| level | task | "
        + " | ".join(f"success ε={e:g} | steps ε={e:g}" for e in eps)
        + " | agreement ε=0 | steps/s |",
        "|---|---|" + "---|---|" * len(eps) + "---|---|",
    ]


def replace_section(text: str, title: str, lines: list[str]) -> str:
    """``text`` with the section ``## title`` replaced by (or appended as) ``lines``."""
    section = "\n".join([f"## {title}", "", *lines, ""])
    pattern = re.compile(rf"^## {re.escape(title)}\n.*?(?=^## |\Z)", re.DOTALL | re.MULTILINE)
    if pattern.search(text):
        return pattern.sub(lambda _: section + "\n", text).rstrip("\n") + "\n"
    return text.rstrip("\n") + "\n\n" + section


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--episodes", type=int, default=30)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--epsilons", type=float, nargs="+", default=[0.0, 0.2])
    parser.add_argument("--collect-episodes", type=int, default=200)
    parser.add_argument("--tasks", nargs="+", default=None, help="re-run only these tasks")
    parser.add_argument("--max-steps", type=int, default=MAX_EPISODE_STEPS)
    parser.add_argument("--out", default="docs/results/metaworld_expert.md")
    args = parser.parse_args()
    names = [name for level_names in LEVELS.values() for name in level_names]
    unknown = sorted(set(args.tasks or ()) - set(names))
    if unknown:
        parser.error(f"unknown tasks {unknown}; expected some of {names}")
    env = MetaWorldEnv("hard", max_episode_steps=args.max_steps)
    rows: dict[str, str] = {}
    stages: list[str] = []
    index = 0
    for level, level_names in LEVELS.items():
        for name in level_names:
            if args.tasks is None or name in args.tasks:
                task = MetaWorldTask(name)
                results = [run_task(env, task, index, args, e) for e in args.epsilons]
                rows[name] = table_row(level, name, results)
                print(rows[name], flush=True)
                if name == "locked-door-open" and 0.0 in args.epsilons:
                    stages = locked_door_stages(
                        task, results[args.epsilons.index(0.0)]["solved_runs"]
                    )
            index += 1
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = args.tasks is not None or args.max_steps != MAX_EPISODE_STEPS
    if partial and not out.exists():
        raise SystemExit(f"{out} does not exist: run the full benchmark first")
    if args.max_steps != MAX_EPISODE_STEPS:
        title = f"Longer episodes ({args.max_steps} steps)"
        lines = [
            f"{command(args)}, {time.strftime('%Y-%m-%d')}: a diagnostic, not the benchmark.",
            "",
        ]
        lines += header(args)[-2:] + list(rows.values())
        out.write_text(replace_section(out.read_text(), title, lines))
        print(f"updated {out}")
        return
    if args.tasks:
        text = out.read_text()
        for name, row in rows.items():
            text, count = re.subn(
                rf"^\| \w+ \| {re.escape(name)} \|.*$", row, text, flags=re.MULTILINE
            )
            if count != 1:
                raise SystemExit(f"{out} has no row for {name}: run the full benchmark first")
        match = re.search(
            r"^## Partial re-runs\n\n(.*?)(?=^## |\Z)", text, re.DOTALL | re.MULTILINE
        )
        runs = [line for line in (match.group(1).splitlines() if match else []) if line.strip()]
        runs.append(f"* {', '.join(rows)}: {command(args)}, {time.strftime('%Y-%m-%d')}")
        text = replace_section(text, "Partial re-runs", runs)
        if stages:
            text = replace_section(text, STAGES_SECTION, stages)
        out.write_text(text)
        print(f"updated {out}")
        return
    lines = header(args) + list(rows.values())
    if stages:
        lines += ["", f"## {STAGES_SECTION}", "", *stages]
    lines += ["", "## Collection speed", ""]
    for epsilon in args.epsilons:
        _, stats = collect(
            "metaworld", "train", args.collect_episodes, args.seed, epsilon=epsilon, progress=False
        )
        lines.append(
            f"* `collect('metaworld', 'train', {args.collect_episodes}, seed={args.seed}, "
            f"epsilon={epsilon:g})`: {stats}."
        )
        print(lines[-1], flush=True)
    text = "\n".join(lines) + "\n"
    if out.exists():  # sections measured by hand (their commands quoted in them) stay
        for title in KEPT_SECTIONS:
            kept = re.search(
                rf"^## {re.escape(title)}\n.*?(?=^## |\Z)",
                out.read_text(),
                re.DOTALL | re.MULTILINE,
            )
            if kept:
                text = text.rstrip("\n") + "\n\n" + kept.group(0).rstrip("\n") + "\n"
    out.write_text(text)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
