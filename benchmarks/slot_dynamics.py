"""Does an object-centric state model carry Meta-World's contact physics to unseen scenes?

The imagine config's dynamics ensemble reads the whole 91-d state, so a scene it never saw
(two entities together, as in ``hard``'s make-coffee and locked-door-open; an entity no
training task has, as hammer's and soccer's) is an input unlike any it was fitted on, and it
holds unseen entities still. This fits a *slot* model on the same real training data instead:

* a hand model: the hand's and gripper's change from the hand, gripper, action and the
  domain's dynamics context (last change, mocap pull);
* one entity model shared by every entity slot: that entity's change (position, quaternion)
  from its offset to the tool centre point, its own pose, the gripper, the action, the hand's
  last change and pull, and a one-hot of its type (``--momentum``: also the entity's own last
  change, which fed back open loop keeps objects moving). The type is hidden (all zeros) on a
  share of training rows (``--type-dropout``), so the model also learns what an entity of
  unknown type does near the hand; an entity type the training data never moves enters with
  its type hidden, or is held still (``--unseen static``). The wall is static (a domain fact),
  empty slots stay empty, a type's entries its real changes leave alone stay as they are, a
  change stays within the range of real changes, quaternions stay unit quaternions, and the
  hand and gripper stay within the observation's bounds.

Five members (different initialisations and mini-batches). Measured on real data only (the
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
from torch import Tensor, nn

from imaginebench.data.dataset import RolloutDataset
from imaginebench.data.format import load_dataset
from imaginebench.envs.base import Task
from imaginebench.envs.metaworld.layout import (
    ENTITIES,
    ENTITY_DIM,
    GRIPPER,
    HAND,
    HAND_HIGH,
    HAND_LOW,
    TASK_ENTITIES,
    entity_pos,
    entity_slice,
    tcp,
)
from imaginebench.envs.metaworld.mocap import dynamics_context
from imaginebench.imagination.confidence import (
    TransitionEnsemble,
    dataset_context,
    entries_that_barely_change,
)
from imaginebench.imagination.quality import replayed_success

STATIC = ("wall",)
FLOOR = 1e-3
HAND_FEATURES = 15
ENTITY_FEATURES = 28  # before the type one-hot
TYPES = slice(ENTITY_FEATURES, ENTITY_FEATURES + len(ENTITIES))


def hand_inputs(states: np.ndarray, actions: np.ndarray, context: np.ndarray) -> np.ndarray:
    """``(n, 15)``: hand, gripper, action, the hand's and gripper's last change, mocap pull."""
    last = context[:, :91]
    return np.concatenate([states[:, :4], actions, last[:, :4], context[:, 91:94]], 1).astype(
        np.float32
    )


def entity_inputs(
    states: np.ndarray,
    actions: np.ndarray,
    context: np.ndarray,
    entity: str,
    typed: bool,
    momentum: bool = False,
) -> np.ndarray:
    """``(n, 40)`` inputs of one entity slot: offset to the tool centre, pose, last change,
    gripper, action, the hand's last change, mocap pull, type one-hot (zeros if not ``typed``);
    without ``momentum`` the entity's last change is given as zeros."""
    where = entity_slice(entity)
    pose = states[:, where]
    offset = pose[:, :3] - tcp(states)
    one_hot = np.zeros((len(states), len(ENTITIES)), np.float32)
    if typed:
        one_hot[:, ENTITIES.index(entity)] = 1.0
    return np.concatenate(
        [
            offset,
            pose,
            context[:, where] if momentum else np.zeros_like(pose),
            states[:, GRIPPER : GRIPPER + 1],
            actions,
            context[:, HAND],
            context[:, 91:94],
            one_hot,
        ],
        1,
    ).astype(np.float32)


class Standard(nn.Module):
    """Per-column standardisation fitted on the training rows."""

    def __init__(self, rows: Tensor) -> None:
        super().__init__()
        self.register_buffer("mean", rows.mean(0))
        self.register_buffer("std", rows.std(0).clamp_min(FLOOR))

    def forward(self, x: Tensor) -> Tensor:
        return (x - self.mean) / self.std


def mlp(inputs: int, outputs: int, hidden: tuple[int, ...]) -> nn.Sequential:
    layers: list[nn.Module] = []
    for width in hidden:
        layers += [nn.Linear(inputs, width), nn.SiLU()]
        inputs = width
    return nn.Sequential(*layers, nn.Linear(inputs, outputs))


class SlotDynamics:
    """Members of (hand model, shared entity model); see the module docstring.

    Exposes what ``ensemble_contact.measure`` needs: ``next_states``, ``member_rollouts`` and
    ``ensemble`` (one entry per member)."""

    def __init__(
        self,
        members: int,
        hidden: tuple[int, ...],
        moved_types: set[str],
        momentum: bool = False,
        unseen: str = "untyped",
    ) -> None:
        if unseen not in ("untyped", "static"):
            raise ValueError(f"unseen must be 'untyped' or 'static', got {unseen!r}")
        self.moved_types, self.momentum = moved_types, momentum
        self.unseen = unseen
        self.ensemble = [
            (mlp(HAND_FEATURES, 4, hidden), mlp(TYPES.stop, ENTITY_DIM, hidden))
            for _ in range(members)
        ]
        self.scales: dict[str, Standard] = {}
        self.bounds: dict[str, tuple[Tensor, Tensor]] = {}
        self.still: dict[str, np.ndarray] = {}  # per type, the entries its real changes leave

    # -- fitting -----------------------------------------------------------------------------
    @classmethod
    def fit(
        cls,
        real: RolloutDataset,
        members: int = 5,
        hidden: tuple[int, ...] = (200, 200),
        max_steps: int = 6000,
        batch_size: int = 256,
        lr: float = 1e-3,
        type_dropout: float = 0.3,
        momentum: bool = False,
        unseen: str = "untyped",
        seed: int = 0,
    ) -> SlotDynamics:
        states = np.asarray(real.states, np.float32)
        before, after = real.transition_indices()
        s, s2 = states[before], states[after]
        actions = np.asarray(real.actions, np.float32).reshape(len(s), -1)
        context = dataset_context(real, dynamics_context)
        h_in, h_out = hand_inputs(s, actions, context), (s2 - s)[:, :4]
        e_in, e_out, moved, still = [], [], set(), {}
        for entity in ENTITIES:
            filled = np.any(s[:, entity_pos(entity)] != 0, 1)
            if not filled.any() or entity in STATIC:
                continue
            rows = np.flatnonzero(filled)
            change = (s2 - s)[rows][:, entity_slice(entity)]
            if np.abs(change).max() > FLOOR:
                moved.add(entity)
            still[entity] = entries_that_barely_change(
                torch.as_tensor(s[rows][:, entity_slice(entity)]),
                torch.as_tensor(s2[rows][:, entity_slice(entity)]),
            ).numpy()
            e_in.append(
                entity_inputs(s[rows], actions[rows], context[rows], entity, True, momentum)
            )
            e_out.append(change)
        model = cls(members, hidden, moved, momentum, unseen)
        model.still = still
        tensors = {
            "h_in": torch.as_tensor(h_in),
            "h_out": torch.as_tensor(h_out),
            "e_in": torch.as_tensor(np.concatenate(e_in)),
            "e_out": torch.as_tensor(np.concatenate(e_out)),
        }
        model.scales = {k: Standard(v) for k, v in tensors.items()}
        # a predicted change stays within the range real changes take (fed back open loop, an
        # entity's last change otherwise compounds into runaway motion)
        model.bounds = {
            k: (tensors[k].min(0).values, tensors[k].max(0).values) for k in ("h_out", "e_out")
        }
        # the type one-hot stays 0/1 (a hidden type is all zeros, as it is for an unseen one)
        model.scales["e_in"].mean[TYPES] = 0.0
        model.scales["e_in"].std[TYPES] = 1.0
        norm = {k: model.scales[k](v) for k, v in tensors.items()}
        generator = torch.Generator().manual_seed(seed)
        for index, (hand, entity) in enumerate(model.ensemble):
            torch.manual_seed(seed + index)
            for net in (hand, entity):
                net.apply(lambda m: m.reset_parameters() if isinstance(m, nn.Linear) else None)
            optimiser = torch.optim.Adam([*hand.parameters(), *entity.parameters()], lr=lr)
            for _ in range(max_steps):
                h = torch.randint(len(h_in), (batch_size,), generator=generator)
                e = torch.randint(len(norm["e_in"]), (batch_size,), generator=generator)
                x = norm["e_in"][e].clone()
                hide = torch.rand(batch_size, generator=generator) < type_dropout
                x[hide, TYPES] = 0.0
                loss = nn.functional.mse_loss(hand(norm["h_in"][h]), norm["h_out"][h])
                loss = loss + nn.functional.mse_loss(entity(x), norm["e_out"][e])
                optimiser.zero_grad()
                loss.backward()
                optimiser.step()
        return model

    # -- prediction --------------------------------------------------------------------------
    @torch.no_grad()
    def _change(self, member: int, s: np.ndarray, a: np.ndarray, c: np.ndarray) -> np.ndarray:
        hand, entity = self.ensemble[member]
        out = np.zeros_like(s)
        h = hand(self.scales["h_in"](torch.as_tensor(hand_inputs(s, a, c))))
        h = h * self.scales["h_out"].std + self.scales["h_out"].mean
        out[:, :4] = torch.clamp(h, *self.bounds["h_out"]).numpy()
        for name in ENTITIES:
            filled = np.any(s[:, entity_pos(name)] != 0, 1)
            if name in STATIC or not filled.any():
                continue
            if name not in self.moved_types and self.unseen == "static":
                continue
            rows = np.flatnonzero(filled)
            x = entity_inputs(
                s[rows], a[rows], c[rows], name, name in self.moved_types, self.momentum
            )
            y = entity(self.scales["e_in"](torch.as_tensor(x)))
            y = y * self.scales["e_out"].std + self.scales["e_out"].mean
            y = torch.clamp(y, *self.bounds["e_out"]).numpy()
            y[:, self.still.get(name, np.zeros(ENTITY_DIM, bool))] = 0.0
            out[rows, entity_slice(name)] = y
        return out

    def next_states(
        self,
        states: np.ndarray,
        actions: np.ndarray,
        context: np.ndarray | None = None,
        member: int | None = None,
    ) -> np.ndarray:
        s = np.asarray(states, np.float32)
        a = np.asarray(actions, np.float32).reshape(len(s), -1)
        c = np.asarray(context, np.float32)
        chosen = range(len(self.ensemble)) if member is None else [member]
        change = np.mean([self._change(m, s, a, c) for m in chosen], 0)
        out = s + change
        # the observation's own bounds: the hand in Meta-World's box, the gripper in [0, 1]
        out[:, HAND] = np.clip(out[:, HAND], HAND_LOW, HAND_HIGH)
        out[:, GRIPPER] = np.clip(out[:, GRIPPER], 0.0, 1.0)
        for name in ENTITIES:  # a quaternion stays a unit quaternion (zeros stay zeros)
            quat = entity_slice(name).start + 3
            norm = np.linalg.norm(out[:, quat : quat + 4], axis=1, keepdims=True)
            had = np.linalg.norm(s[:, quat : quat + 4], axis=1, keepdims=True) > 0
            out[:, quat : quat + 4] = np.where(
                had, out[:, quat : quat + 4] / np.maximum(norm, 1e-8), 0.0
            )
        return out

    def member_rollouts(self, task: Task, first_state: np.ndarray, actions: np.ndarray):
        actions = np.asarray(actions, np.float32)
        out = np.empty((len(self.ensemble), len(actions) + 1, len(first_state)), np.float32)
        out[:, 0] = first_state
        for m in range(len(self.ensemble)):
            for t in range(len(actions)):
                step = dynamics_context(task, out[m, : t + 1], actions[: t + 1])[-1:]
                out[m, t + 1] = self.next_states(out[m, t][None], actions[t : t + 1], step, m)[0]
        return out


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
            model = SlotDynamics.fit(
                fit_on,
                max_steps=args.max_steps,
                type_dropout=args.type_dropout,
                momentum=args.momentum,
                unseen=args.unseen,
            )
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
