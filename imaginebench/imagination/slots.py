"""An object-centric Meta-World state model: one hand model and one entity model shared by
every entity slot (``imaginebench imagine --state_model slots``; fitted on real data only).

The dynamics ensemble reads the whole 91-d state, so a scene it never saw (two entities
together, an entity beside the wall, an entity no training task has) is an input unlike any
it was fitted on. Here each entity is read on its own:

* the hand model predicts the hand's and gripper's change from the hand, gripper, action and
  the domain's dynamics context (the last change and the mocap pull);
* the entity model predicts one entity's change (position, quaternion) from its offset to the
  tool centre point, its pose, the gripper, the action, the hand's last change and pull, and a
  one-hot of its type. The type is hidden on a share of training rows, so the model also learns
  what an entity of unknown type does near the hand; an entity type the real data never moves
  enters untyped (or is held still, ``unseen: static``).

Domain facts bound the predictions: the wall is static, empty slots stay empty, the entries a
type's real changes leave alone stay put, a change stays within the range of real changes,
quaternions stay unit quaternions, and the hand and gripper stay inside the observation's
bounds. Measured against the simulator in docs/metaworld.md ("An object-centric state model").
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal

import numpy as np
import torch
from torch import Tensor, nn

from imaginebench.data.dataset import RolloutDataset
from imaginebench.envs.base import Task
from imaginebench.envs.metaworld.layout import (
    ENTITIES,
    ENTITY_DIM,
    GRIPPER,
    HAND,
    HAND_HIGH,
    HAND_LOW,
    entity_pos,
    entity_slice,
    tcp,
)
from imaginebench.envs.metaworld.mocap import dynamics_context
from imaginebench.imagination.confidence import dataset_context, entries_that_barely_change
from imaginebench.modules.backbone import mlp

STATIC = ("wall",)
FLOOR = 1e-3  # smallest standard deviation of a standardised column; a "moved" change
HAND_FEATURES = 15
ENTITY_FEATURES = 28  # before the type one-hot
TYPES = slice(ENTITY_FEATURES, ENTITY_FEATURES + len(ENTITIES))


@dataclass
class SlotConfig:
    """Settings of :class:`SlotDynamics`.

    Args:
        members: (hand, entity) model pairs; the prediction is their mean change.
        hidden: hidden layer sizes of every model.
        max_steps: Adam updates of each member (one mini-batch of hand and of entity rows).
        batch_size: rows of each mini-batch.
        lr: Adam learning rate.
        type_dropout: share of entity rows whose type one-hot is hidden while fitting.
        unseen: an entity type the real data never moves: ``untyped`` (the entity model with
            its type hidden) or ``static`` (held still).
        momentum: entities also read their own last change (fed back open loop, it keeps
            objects moving after the hand leaves them; off by default, measured worse).
        seed: seed of the initialisation and the mini-batches.
    """

    members: int = 5
    hidden: tuple[int, ...] = (200, 200)
    max_steps: int = 6000
    batch_size: int = 256
    lr: float = 1e-3
    type_dropout: float = 0.3
    unseen: Literal["untyped", "static"] = "untyped"
    momentum: bool = False
    seed: int = 0

    def __post_init__(self) -> None:
        self.hidden = tuple(int(h) for h in self.hidden)
        if self.unseen not in ("untyped", "static"):
            raise ValueError(f"slots.unseen must be 'untyped' or 'static', got {self.unseen!r}")
        if self.members < 1 or self.max_steps < 1 or self.batch_size < 1:
            raise ValueError("slots.members, max_steps and batch_size must be >= 1")
        if not 0.0 <= self.type_dropout <= 1.0:
            raise ValueError(f"slots.type_dropout must be in [0, 1], got {self.type_dropout}")

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "hidden": list(self.hidden)}


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
    """``(n, 40)`` inputs of one entity slot: offset to the tool centre, pose, last change
    (zeros without ``momentum``), gripper, action, the hand's last change, mocap pull, type
    one-hot (zeros if not ``typed``)."""
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


def _filled(states: np.ndarray, entity: str) -> np.ndarray:
    return np.any(states[:, entity_pos(entity)] != 0, 1)


class SlotDynamics:
    """Members of (hand model, shared entity model); build with :meth:`fit`.

    ``next_states(states, actions, context)`` has the signature of
    :meth:`~imaginebench.imagination.confidence.TransitionEnsemble.next_states`, so imagination
    advances its states with either."""

    def __init__(self, config: SlotConfig, moved_types: set[str]) -> None:
        self.config, self.moved_types = config, moved_types
        self.members = [
            (
                mlp([HAND_FEATURES, *config.hidden, 4], nn.SiLU),
                mlp([TYPES.stop, *config.hidden, ENTITY_DIM], nn.SiLU),
            )
            for _ in range(config.members)
        ]
        self.scales: dict[str, Standard] = {}
        self.bounds: dict[str, tuple[Tensor, Tensor]] = {}
        self.still: dict[str, np.ndarray] = {}  # per type, the entries its real changes leave

    @classmethod
    def fit(cls, real: RolloutDataset, config: SlotConfig | None = None) -> SlotDynamics:
        """Fit on every transition of the Meta-World dataset ``real``."""
        config = config or SlotConfig()
        if real.domain != "metaworld":
            raise ValueError(f"the slot model is Meta-World's; got {real.domain!r} data")
        states = np.asarray(real.states, np.float32)
        before, after = real.transition_indices()
        s, s2 = states[before], states[after]
        actions = np.asarray(real.actions, np.float32).reshape(len(s), -1)
        context = dataset_context(real, dynamics_context)
        h_in, h_out = hand_inputs(s, actions, context), (s2 - s)[:, :4]
        e_in, e_out, moved, still = [], [], set(), {}
        for entity in ENTITIES:
            filled = _filled(s, entity)
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
                entity_inputs(s[rows], actions[rows], context[rows], entity, True, config.momentum)
            )
            e_out.append(change)
        if not e_in:
            raise ValueError("the real data fill no entity slot: nothing to fit entities on")
        model = cls(config, moved)
        model.still = still
        tensors = {
            "h_in": torch.as_tensor(h_in),
            "h_out": torch.as_tensor(h_out),
            "e_in": torch.as_tensor(np.concatenate(e_in)),
            "e_out": torch.as_tensor(np.concatenate(e_out)),
        }
        model.scales = {k: Standard(v) for k, v in tensors.items()}
        # a predicted change stays within the range real changes take
        model.bounds = {
            k: (tensors[k].min(0).values, tensors[k].max(0).values) for k in ("h_out", "e_out")
        }
        # the type one-hot stays 0/1 (a hidden type is all zeros, as an unseen one is)
        model.scales["e_in"].mean[TYPES] = 0.0
        model.scales["e_in"].std[TYPES] = 1.0
        norm = {k: model.scales[k](v) for k, v in tensors.items()}
        generator = torch.Generator().manual_seed(config.seed)
        for index, (hand, entity) in enumerate(model.members):
            torch.manual_seed(config.seed + index)
            for net in (hand, entity):
                net.apply(lambda m: m.reset_parameters() if isinstance(m, nn.Linear) else None)
            optimiser = torch.optim.Adam([*hand.parameters(), *entity.parameters()], lr=config.lr)
            for _ in range(config.max_steps):
                h = torch.randint(len(h_in), (config.batch_size,), generator=generator)
                e = torch.randint(len(norm["e_in"]), (config.batch_size,), generator=generator)
                x = norm["e_in"][e].clone()
                hide = torch.rand(config.batch_size, generator=generator) < config.type_dropout
                x[hide, TYPES] = 0.0
                loss = nn.functional.mse_loss(hand(norm["h_in"][h]), norm["h_out"][h])
                loss = loss + nn.functional.mse_loss(entity(x), norm["e_out"][e])
                optimiser.zero_grad()
                loss.backward()
                optimiser.step()
        return model

    @torch.no_grad()
    def _change(self, member: int, s: np.ndarray, a: np.ndarray, c: np.ndarray) -> np.ndarray:
        hand, entity = self.members[member]
        out = np.zeros_like(s)
        h = hand(self.scales["h_in"](torch.as_tensor(hand_inputs(s, a, c))))
        h = h * self.scales["h_out"].std + self.scales["h_out"].mean
        out[:, :4] = torch.clamp(h, *self.bounds["h_out"]).numpy()
        for name in ENTITIES:
            filled = _filled(s, name)
            if name in STATIC or not filled.any():
                continue
            if name not in self.moved_types and self.config.unseen == "static":
                continue
            rows = np.flatnonzero(filled)
            x = entity_inputs(
                s[rows], a[rows], c[rows], name, name in self.moved_types, self.config.momentum
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
        """``(n, 91)`` next states of ``(n, 91)`` states under ``(n, 4)`` actions with the
        domain's ``(n, 94)`` dynamics context: the members' mean change (``member``: one's)."""
        if context is None:
            raise ValueError("the slot model needs Meta-World's dynamics context")
        s = np.asarray(states, np.float32)
        a = np.asarray(actions, np.float32).reshape(len(s), -1)
        c = np.asarray(context, np.float32)
        chosen = range(len(self.members)) if member is None else [member]
        out = s + np.mean([self._change(m, s, a, c) for m in chosen], 0)
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
        """``(members, T + 1, 91)``: each member's open-loop states along ``actions``."""
        actions = np.asarray(actions, np.float32)
        out = np.empty((len(self.members), len(actions) + 1, len(first_state)), np.float32)
        out[:, 0] = first_state
        for m in range(len(self.members)):
            for t in range(len(actions)):
                step = dynamics_context(task, out[m, : t + 1], actions[: t + 1])[-1:]
                out[m, t + 1] = self.next_states(out[m, t][None], actions[t : t + 1], step, m)[0]
        return out
