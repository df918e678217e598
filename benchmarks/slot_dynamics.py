"""Does an object-centric state model carry Meta-World's contact physics to unseen scenes?

The imagine config's dynamics ensemble reads the whole 91-d state, so a scene it never saw
(two entities together, as in ``hard``'s make-coffee and locked-door-open; an entity no
training task has, as hammer's and soccer's) is an input unlike any it was fitted on. This
fits the slot model of :mod:`imaginebench.imagination.slots` (a hand model and one entity
model shared by every slot, with domain facts as bounds; ``--momentum``, ``--type-dropout``
and ``--unseen`` set its :class:`SlotConfig`) on the same real training data instead.

Measured on real data only (the
simulator made it; here it judges the model): held-out training episodes as
``ensemble_contact.py`` does (errors along the expert's actions; own-success recall and
precision against the simulator on those actions with noise), and real episodes of the novel
levels (``--novel``): per task, the hand's and each entity's error after 10 and 40 steps and
at the end, and the model's own success against the simulator's on those episodes' actions
and on the same actions with noise:

    python benchmarks/slot_dynamics.py \
        --real ~/.cache/imaginebench/metaworld_train_real_n2000_s0_e0.05_p5_x3.h5 \
        --novel <imaginebench collect --domain metaworld --level hard --episodes 80 --seed 0>
"""

from __future__ import annotations

import argparse
import time
from collections import defaultdict

import numpy as np
import torch
from ensemble_contact import action_sets, measure, open_loop
from ensemble_open_loop import ensemble_settings, held_out_split

from imaginebench.data.format import load_dataset
from imaginebench.envs.base import Task
from imaginebench.envs.metaworld.layout import HAND, TASK_ENTITIES, entity_pos
from imaginebench.envs.metaworld.mocap import dynamics_context
from imaginebench.imagination.confidence import TransitionEnsemble
from imaginebench.imagination.quality import replayed_success
from imaginebench.imagination.slots import SlotConfig, SlotDynamics


def novel_table(
    model,
    sets: dict[float, list],
    judged: dict[float, np.ndarray],
    steps: tuple[int, ...] = (10, 40, 1000),
) -> list[str]:
    """Per task of the novel episodes (``sets``: per action noise, the episodes with their
    actions perturbed; ``judged``: the simulator's verdict on each): the hand's and each
    entity's median error (mm) after ``steps`` (1000: the episode's end) along the recorded
    actions, with how far the entity really moved (mm, median); then per noise the simulator's
    successes, the model's own successes and how many of those the simulator confirms."""
    per_task: dict[str, list[int]] = defaultdict(list)
    for i, episode in enumerate(sets[0.0]):
        per_task[Task.from_spec(episode.task_spec).name].append(i)

    def own_success(episode) -> bool:
        imagined = open_loop(model, episode, dynamics_context).astype(np.float64)
        return bool(np.any(Task.from_spec(episode.task_spec).success(imagined)))

    own = {noise: np.array([own_success(ep) for ep in eps]) for noise, eps in sets.items()}
    lines = []
    for name, rows in sorted(per_task.items()):
        errors, moved = defaultdict(list), defaultdict(list)
        for i in rows:
            episode = sets[0.0][i]
            real = np.asarray(episode.states, np.float64)
            imagined = open_loop(model, episode, dynamics_context).astype(np.float64)
            for step in steps:
                t = min(step, len(real) - 1)
                at = "end" if step >= 1000 else step
                hand_error = np.linalg.norm(imagined[t, HAND] - real[t, HAND])
                errors[f"hand {at}"].append(1000 * hand_error)
                for entity in TASK_ENTITIES[name]:
                    where = entity_pos(entity)
                    errors[f"{entity} {at}"].append(
                        1000 * np.linalg.norm(imagined[t, where] - real[t, where])
                    )
                    moved[f"{entity} {at}"].append(
                        1000 * np.linalg.norm(real[t, where] - real[0, where])
                    )
        cells = "; ".join(
            f"{k} {np.median(v):.0f}"
            + (f" (moved {np.median(moved[k]):.0f})" if k in moved else "")
            for k, v in errors.items()
        )
        agreement = " | ".join(
            f"{judged[n][rows].sum()} / {own[n][rows].sum()} / "
            f"{(judged[n][rows] & own[n][rows]).sum()}"
            for n in sets
        )
        lines.append(f"| {name} | {len(rows)} | {cells} | {agreement} |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--real", required=True)
    parser.add_argument("--novel", nargs="*", default=[], help="real files of novel levels")
    parser.add_argument("--test", type=int, default=100, help="held-out distinct rollouts")
    parser.add_argument("--max-steps", type=int, default=6000)
    parser.add_argument("--type-dropout", type=float, default=0.3)
    parser.add_argument(
        "--momentum",
        action="store_true",
        help="entities also see their own last change (fed back open loop, it keeps them moving)",
    )
    parser.add_argument(
        "--unseen",
        choices=["untyped", "static"],
        default="untyped",
        help="entity types the real data never moves: the entity model with the type hidden, "
        "or held still",
    )
    parser.add_argument("--noise", type=float, nargs="+", default=[0.0, 0.3, 0.6])
    parser.add_argument("--models", nargs="+", default=["slots", "ensemble"])
    parser.add_argument("--skip-held-out", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(1)
    real = load_dataset(args.real)
    fit_on, test = held_out_split(real, args.test)
    noises = sorted(set([0.0, *args.noise]))
    held_out = action_sets(real, test, noises, seed=0)
    novel = {}
    for path in args.novel:
        data = load_dataset(path)
        sets = action_sets(data, data.distinct_episodes(), noises, seed=0)
        novel[path] = (sets, {n: replayed_success(data.domain, eps) for n, eps in sets.items()})
    for name in args.models:
        started = time.time()
        if name == "slots":
            config = SlotConfig(
                max_steps=args.max_steps,
                type_dropout=args.type_dropout,
                momentum=args.momentum,
                unseen=args.unseen,
            )
            model = SlotDynamics.fit(fit_on, config)
            detail = f"types that move: {sorted(model.moved_types)}"
        else:
            settings = ensemble_settings(args.max_steps)
            model = TransitionEnsemble.fit(fit_on, settings, context=dynamics_context)
            detail = f"{int(model.metrics['updates'])} updates"
        print(f"\n## {name}: fitted in {time.time() - started:.0f} s; {detail}\n", flush=True)
        if not args.skip_held_out:
            judged = {n: replayed_success(real.domain, eps) for n, eps in held_out.items()}
            row = measure(model, held_out, judged, dynamics_context)
            print("| " + " | ".join(row) + " |")
            print("|" + "---|" * len(row))
            values = (v if isinstance(v, str) else f"{v:.2f}" for v in row.values())
            print("| " + " | ".join(values) + " |")
        for path, (sets, judged) in novel.items():
            noise_columns = " | ".join(f"σ {n}: sim / own / both" for n in sets)
            print(f"\n{path}\n\n| task | episodes | median error (mm) | {noise_columns} |")
            print("|---|---|---|" + "---|" * len(sets))
            for line in novel_table(model, sets, judged):
                print(line, flush=True)


if __name__ == "__main__":
    main()
