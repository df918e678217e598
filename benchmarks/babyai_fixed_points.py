"""Why does a random policy beat the trained ones on BabyAI ``easy``? Count stuck episodes.

For each trained checkpoint (and the uniformly random policy) this runs the callback's fixed
evaluation episodes of a level and classifies every failed episode by its last ``--window``
states: **fixed point** (the state never changed: the policy repeats an action that changes
nothing), **cycle** (it revisits at most ``--max-period`` distinct states) or **moving**. The
state holds no step counter, so a deterministic policy that enters a fixed point or cycle stays
in it until the time limit.

    python benchmarks/babyai_fixed_points.py --checkpoints bc=RUNS/bc/real/seed0/checkpoints/last.ckpt \
        --level easy --episodes 200

Prints a Markdown table (success, and the failed episodes' classes), per policy and per task.
"""

from __future__ import annotations

import argparse
from collections import Counter
from collections.abc import Sequence

import numpy as np

from imaginebench.envs import make
from imaginebench.modules.offline import ALGORITHMS


def run_episodes(act, level: str, episodes: int, seed: int) -> list[dict]:
    """Roll out ``act(states, instructions)`` on the level's fixed evaluation episodes."""
    envs = [make("babyai", level).unwrapped for _ in range(episodes)]
    plans = envs[0].suite.episodes(level, episodes, seed)
    traces = [[env.reset(options={"episode": plan})[0]] for env, plan in zip(envs, plans)]
    out = [{"task": plan.task.family, "success": False} for plan in plans]
    active = list(range(episodes))
    while active:
        states = np.stack([traces[i][-1] for i in active])
        actions = act(states, [plans[i].instruction for i in active])
        still = []
        for i, action in zip(active, actions):
            state, _, terminated, truncated, info = envs[i].step(action)
            traces[i].append(state)
            if terminated or truncated:
                out[i]["success"] = bool(info["is_success"])
            else:
                still.append(i)
        active = still
    for record, trace in zip(out, traces):
        record["tail"] = np.stack(trace)
    return out


def epsilon_greedy(act, epsilon: float, n_actions: int, rng: np.random.Generator):
    """``act`` with each action replaced by a uniform one with probability ``epsilon``."""

    def noisy(states: np.ndarray, instructions: list[str]) -> np.ndarray:
        actions = np.asarray(act(states, instructions))
        swap = rng.random(len(actions)) < epsilon
        return np.where(swap, rng.integers(n_actions, size=len(actions)), actions)

    return noisy


def classify(tail: np.ndarray, max_period: int) -> str:
    """``fixed point``, ``cycle`` or ``moving`` from the distinct states of a trace's tail."""
    distinct = {row.tobytes() for row in tail}
    if len(distinct) == 1:
        return "fixed point"
    return "cycle" if len(distinct) <= max_period else "moving"


def summarise(name: str, records: Sequence[dict], window: int, max_period: int) -> list[str]:
    rows = []
    groups = {"all": records}
    for task in sorted({r["task"] for r in records}):
        groups[task] = [r for r in records if r["task"] == task]
    for group, members in groups.items():
        failed = [r for r in members if not r["success"]]
        kinds = Counter(classify(r["tail"][-window:], max_period) for r in failed)
        n = len(members)
        rows.append(
            f"| {name} | {group} | {n} | {100 * (n - len(failed)) / n:.1f} | {len(failed)} | "
            f"{kinds['fixed point']} | {kinds['cycle']} | {kinds['moving']} |"
        )
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--checkpoints",
        nargs="*",
        default=[],
        help="trained policies as ALGORITHM=PATH (bc, cql, ...)",
    )
    parser.add_argument("--level", default="easy")
    parser.add_argument("--episodes", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0, help="the evaluation episodes' seed")
    parser.add_argument(
        "--epsilon",
        type=float,
        nargs="*",
        default=[0.0],
        help="also run the trained policies epsilon-greedy (a uniform action with this chance)",
    )
    parser.add_argument("--window", type=int, default=20, help="tail states classified")
    parser.add_argument("--max-period", type=int, default=4, help="largest cycle counted")
    args = parser.parse_args(argv)

    print(
        f"BabyAI `{args.level}`, {args.episodes} episodes (seed {args.seed}); failed episodes "
        f"classified by their last {args.window} states.\n"
    )
    print("| policy | task | episodes | success % | failed | fixed point | cycle | moving |")
    print("|---|---|---|---|---|---|---|---|")
    rng = np.random.default_rng(0)
    n_actions = make("babyai", args.level).action_space.n
    policies = [("random", lambda s, i: rng.integers(n_actions, size=len(s)))]
    for given in args.checkpoints:
        name, _, path = given.partition("=")
        module = ALGORITHMS[name][0].load_from_checkpoint(path, map_location="cpu")
        for epsilon in args.epsilon:
            label = f"{type(module).__name__} ({path})" + (f", ε {epsilon}" if epsilon else "")
            policies.append((label, epsilon_greedy(module.act, epsilon, n_actions, rng)))
    for name, act in policies:
        records = run_episodes(act, args.level, args.episodes, args.seed)
        print("\n".join(summarise(name, records, args.window, args.max_period)), flush=True)


if __name__ == "__main__":
    main()
