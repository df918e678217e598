"""Why the lookahead moves no object on Meta-World: the search, imagined beside replayed.

Two measurements on the tasks whose object must be grasped and carried (push, pick-place, ...):

1. ``--open-loop HELDOUT``: real expert episodes the ensemble never saw, their own actions rolled
   through the dynamics ensemble from their first state (with the mocap context): does the state
   model carry a grasped object when the actions are right?
2. the search alone (as ``benchmarks/lookahead_metaworld.py``: zero actions refined at every
   step, no LM) on ``--starts`` scenes per task, with the task's own potential
   (``Task.progress``: approach and place) or ``--potential grasp``, which adds a grasp stage
   (the tool centre within ``--grasp-radius`` of the object with the gripper closed on it, at
   the opening the experts hold a puck with) and counts an object sunk into the table as lost.
   Printed every ``--every`` steps: hand-object and object-goal distances, the gripper opening
   and the object's height, imagined and with the same actions replayed in the simulator (the
   simulator only judges).

    python benchmarks/metaworld_object_search.py --real <the imagination's real file> \\
        --tasks push pick-place --potential grasp --penalty 0.1 --open-loop <held-out file>
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from lookahead_metaworld import ENSEMBLE, imagined_step, replayed, search  # noqa: E402

from imaginebench.data.format import load_dataset  # noqa: E402
from imaginebench.envs import get_domain  # noqa: E402
from imaginebench.envs.metaworld.layout import GRIPPER, TASK_ENTITIES, entity_pos, tcp  # noqa: E402
from imaginebench.envs.metaworld.tasks import (  # noqa: E402
    GOALS,
    MIN_PLACE_MARGIN,
    MetaWorldTask,
    tolerance,
)
from imaginebench.imagination.lookahead import LookaheadConfig  # noqa: E402
from imaginebench.imagination.score import fit_ensemble_on  # noqa: E402

#: the gripper opening at which the experts hold a puck or mug (0.41-0.53 in the real data; fully
#: closed on nothing: 0.30)
HELD_OPENING = 0.5


class GraspPotential:
    """A task whose ``progress`` has a grasp stage: ``0.2 approach + 0.3 grasp + 0.5 place``,
    less 100 per metre the object has sunk more than 3 mm below its first height."""

    def __init__(self, task: MetaWorldTask, radius: float) -> None:
        self.task, self.radius = task, radius
        self.goal = GOALS[task.name]

    def __getattr__(self, name: str) -> Any:
        return getattr(self.task, name)

    def progress(self, states: np.ndarray) -> np.ndarray:
        s = np.asarray(states, dtype=np.float64)
        obj = s[..., entity_pos(self.goal.entity)]
        measure = self.goal.measure(s, s[..., 0, 4:7])
        margin = np.maximum(measure[..., :1] - self.goal.threshold, MIN_PLACE_MARGIN)
        place = tolerance(measure, self.goal.threshold, margin)
        gap = np.linalg.norm(tcp(s) - obj, axis=-1)
        approach = tolerance(gap, self.radius, 0.3)
        held = tolerance(s[..., GRIPPER] - HELD_OPENING, 0.0, 0.5)
        grasp = tolerance(gap, self.radius, 0.02) * held
        sunk = np.maximum(obj[..., :1, 2] - 0.003 - obj[..., 2], 0.0)
        return 0.2 * approach + 0.3 * grasp + 0.5 * place - 100.0 * sunk


def roll(ensemble, task, first: np.ndarray, actions: np.ndarray) -> np.ndarray:
    """``(T + 1, 91)``: ``actions`` rolled through the ensemble's mean from ``first``."""
    history = [np.asarray(first, np.float32)]
    for k in range(len(actions)):
        history.append(imagined_step(ensemble, task, np.stack(history), actions[: k + 1])[0])
    return np.stack(history)


def distances(states: np.ndarray, entity: str, goal: np.ndarray) -> np.ndarray:
    """``(T, 4)``: hand-object distance, object-goal distance, gripper opening, object height."""
    obj = states[:, entity_pos(entity)]
    return np.stack(
        [
            np.linalg.norm(tcp(states) - obj, axis=-1),
            np.linalg.norm(obj - goal, axis=-1),
            states[:, GRIPPER],
            obj[:, 2],
        ],
        axis=-1,
    )


def _xyz(p: np.ndarray) -> str:
    return "(" + ", ".join(f"{v:.3f}" for v in p) + ")"


def open_loop(ensemble, path: str, names: list[str], per_task: int, every: int) -> None:
    data = load_dataset(path)
    shown: dict[str, int] = {}
    for i in range(len(data.episode_lengths())):
        episode = data.episode(i)
        name = json.loads(episode.task_spec)["name"]
        if name not in names or shown.get(name, 0) >= per_task:
            continue
        shown[name] = shown.get(name, 0) + 1
        task = MetaWorldTask(name)
        real = np.asarray(episode.states, np.float32)
        imagined = roll(ensemble, task, real[0], np.asarray(episode.actions, np.float32))
        entity = TASK_ENTITIES[name][0]
        print(
            f"\n{name}, held-out expert episode {i} ({len(real) - 1} steps): success real "
            f"{bool(task.success(real).any())}, its actions in the state model "
            f"{bool(task.success(imagined).any())}"
        )
        print("| step | object, real | object, state model | gripper real / model |")
        print("|---|---|---|---|")
        for t in sorted({*range(0, len(real), every), len(real) - 1}):
            r, m = real[t, entity_pos(entity)], imagined[t, entity_pos(entity)]
            print(
                f"| {t} | {_xyz(r)} | {_xyz(m)} | "
                f"{real[t, GRIPPER]:.2f} / {imagined[t, GRIPPER]:.2f} |"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--real", required=True, help="real data the ensemble is fitted on")
    parser.add_argument("--tasks", nargs="+", default=["push", "pick-place"])
    parser.add_argument("--level", default="rephrase")
    parser.add_argument("--potential", choices=["task", "grasp"], default="task")
    parser.add_argument("--grasp-radius", type=float, default=0.01)
    parser.add_argument("--penalty", type=float, default=0.1)
    parser.add_argument("--horizon", type=int, default=12)
    parser.add_argument("--candidates", type=int, default=256)
    parser.add_argument("--elites", type=int, default=24)
    parser.add_argument("--iterations", type=int, default=4)
    parser.add_argument("--starts", type=int, default=2, help="scenes per task")
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--every", type=int, default=10, help="print every this many steps")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--open-loop", metavar="HELDOUT", help="held-out real episodes")
    parser.add_argument("--no-search", action="store_true", help="the open-loop part only")
    args = parser.parse_args()
    torch.set_num_threads(1)
    ensemble, _ = fit_ensemble_on(args.real, ENSEMBLE, progress=False)
    if args.open_loop:
        open_loop(ensemble, args.open_loop, args.tasks, args.starts, args.every)
    if args.no_search:
        return
    suite = get_domain("metaworld").make_suite()
    chosen = sorted(
        (t for t in suite.tasks(args.level) if t.name in args.tasks), key=lambda t: t.name
    )
    specs = suite.episodes_of(args.level, chosen, args.starts, args.seed, draw=1)
    tasks = [
        GraspPotential(s.task, args.grasp_radius) if args.potential == "grasp" else s.task
        for s in specs
    ]
    config = LookaheadConfig(
        horizon=args.horizon,
        candidates=args.candidates,
        elites=args.elites,
        iterations=args.iterations,
        spread_penalty=args.penalty,
    )
    found, imagined_success, _, paths = search(
        ensemble, config, specs, args.steps, args.seed, tasks
    )
    actions = [np.stack(a) for a in found]
    print(
        f"\nthe search alone, potential {args.potential}, disagreement weight {args.penalty}, "
        f"horizon {args.horizon}, {args.candidates} candidates / {args.elites} elites / "
        f"{args.iterations} iterations"
    )
    for spec, acts, ok, imagined in zip(specs, actions, imagined_success, paths, strict=True):
        entity = TASK_ENTITIES[spec.task.name][0]
        real, success = replayed(spec, acts)
        goal = imagined[0, 4:7]
        im, re = distances(imagined, entity, goal), distances(real, entity, goal)
        print(
            f"\n{spec.task.name}: imagined success {bool(ok)}, replayed success {success}, "
            f"{len(acts)} steps"
        )
        print(
            "| step | hand-object imagined / real | object-goal imagined / real "
            "| gripper imagined / real | object height imagined / real |"
        )
        print("|---|---|---|---|---|")
        for t in sorted({*range(0, len(acts) + 1, args.every), len(acts)}):
            r = re[min(t, len(re) - 1)]
            print(
                f"| {t} | {im[t, 0]:.3f} / {r[0]:.3f} | {im[t, 1]:.3f} / {r[1]:.3f} | "
                f"{im[t, 2]:.2f} / {r[2]:.2f} | {im[t, 3]:.3f} / {r[3]:.3f} |"
            )


if __name__ == "__main__":
    main()
