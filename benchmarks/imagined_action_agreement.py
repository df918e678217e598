"""How often a dataset's actions are ones the CLEVR expert would take, step by step.

For every episode the simulator is reset to the episode's initial state and task, then follows
the episode's own actions. Before each step it judges the action taken against the expert's
choices in the *simulated* state (no exploration): ``expert`` counts an action the expert could
have picked (it accomplishes the task or raises its potential the most), ``progress`` one that
accomplishes the task or raises its potential at all, ``harm`` one that lowers it. The first step
starts from a real state in every file, so its row compares imagined and real actions on equal
terms; later rows judge the actions where they actually lead. The simulator only judges here:
nothing is written back. Works for real (expert, oracle) and imaginary files alike.

    python benchmarks/imagined_action_agreement.py imaginebench/datasets/clevr/imaginary_rephrase.h5
"""

from __future__ import annotations

import argparse
import json

import numpy as np

from imaginebench.data.format import load_dataset
from imaginebench.envs import make
from imaginebench.envs.base import EpisodeSpec, Task
from imaginebench.experts import make_expert

TOLERANCE = 1e-4


def judge_file(path: str, max_episodes: int | None = None) -> dict[str, object]:
    """Per step index (0, 1, 2+) and overall: the share of actions the expert could pick, that
    make progress, and that lower the task's potential; and the replayed success."""
    data = load_dataset(path)
    if data.domain != "clevr":
        raise ValueError(f"{path}: this diagnostic is for CLEVR files, got domain {data.domain!r}")
    env = make("clevr", data.episode(0).level).unwrapped
    expert = make_expert("clevr", epsilon=0.0, seed=0)
    counts: dict[str, np.ndarray] = {}
    successes = 0
    n = len(data) if max_episodes is None else min(max_episodes, len(data))
    for index in range(n):
        episode = data.episode(index)
        task = Task.from_spec(episode.task_spec)
        plan = EpisodeSpec(task, episode.instruction, episode.states[0], episode.level)
        env.reset(options={"episode": plan})
        success = False
        for step, action in enumerate(np.asarray(episode.actions, dtype=int)):
            history = np.stack(env.trajectory)
            before = float(task.progress(history[None])[0, -1])
            choices = expert.choices(env)
            _, _, terminated, truncated, _ = env.step(int(action))
            after_states = np.stack(env.trajectory)
            done = bool(task.success(after_states[None])[0, -1])
            after = float(task.progress(after_states[None])[0, -1])
            key = str(min(step, 2))
            row = counts.setdefault(key, np.zeros(4))
            row += (
                1,
                int(action) in set(choices.tolist()),
                done or after > before + TOLERANCE,
                after < before - TOLERANCE,
            )
            if done:
                success = True
                break
            if terminated or truncated:
                break
        successes += success
    total = sum(counts.values())
    rows = {("2+" if k == "2" else k): v for k, v in sorted(counts.items())}
    rows["all"] = total
    return {
        "file": path,
        "episodes": n,
        "replayed_success": successes / max(n, 1),
        "steps": {
            k: {
                "actions": int(v[0]),
                "expert": float(v[1] / v[0]),
                "progress": float(v[2] / v[0]),
                "harm": float(v[3] / v[0]),
            }
            for k, v in rows.items()
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="+")
    parser.add_argument("--max-episodes", type=int, default=None)
    parser.add_argument("--json", default=None, help="also write the results here")
    args = parser.parse_args()
    results = [judge_file(f, args.max_episodes) for f in args.files]
    print(
        "| file | episodes | replayed success | step | actions | expert's choice | progress "
        "| harm |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for r in results:
        for k, v in r["steps"].items():
            print(
                f"| {r['file']} | {r['episodes']} | {100 * r['replayed_success']:.1f} % | {k} | "
                f"{v['actions']} | {100 * v['expert']:.1f} % | {100 * v['progress']:.1f} % | "
                f"{100 * v['harm']:.1f} % |"
            )
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(results, handle, indent=1)


if __name__ == "__main__":
    main()
