"""Token sequences with numeric slots, for the four grounding tasks.

A sequence is text tokens interleaved with *slots*: one position per state vector and one per
action (or one per word of an action spelled in words), whose input embeddings the model
replaces with projections of the numbers. Every
position records what it holds (``kind``) and what it is supervised as (``target``: the item at
position ``p`` is predicted from the hidden state at ``p - 1``). Slot positions are explicit, so
nothing depends on how a tokenizer splits marker strings.

Tasks (prompt wording is ours; the structure follows KALM):

* ``generation`` (instruction -> rollout): ``<bos> header, instruction, "Trajectory:"`` then
  ``s0 a0 s1 ... aT-1 sT``; supervised: every action and every state after ``s0``.
* ``dynamics`` ((s, a) -> s'): one transition; supervised: the next state.
* ``explanation`` (rollout -> instruction): the trajectory, then the instruction's tokens and
  EOS, supervised as text.
* ``final_state`` ((instruction, s0) -> sT): supervised: the last state.

With a ``window`` of W transitions (long rollouts, e.g. HalfCheetah's 100-200 steps), generation
and explanation see W consecutive transitions starting at step ``t0`` and the header says
``Trajectory from step t0:`` (so the model knows the phase of the task); imagination then
decodes W transitions per prompt and re-prompts from the last state (see the decoder).

States after the first are supervised *relative* to the state they follow (``base``): the
model predicts the change, which is what the dynamics are about (KALM regresses absolute
coordinates; ``residual_states=False`` in the model restores that).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Sequence

import numpy as np
import torch
from torch import Tensor

TaskKind = Literal["generation", "dynamics", "explanation", "final_state"]
TASK_KINDS: tuple[TaskKind, ...] = ("generation", "dynamics", "explanation", "final_state")

#: the instruction of a rollout told without words (instruction dropout in training, the
#: reference that instruction guidance contrasts with while imagining)
NO_INSTRUCTION = ""

# position kinds (HIDDEN_ACTION: an action slot of a generation sequence whose value the LM is
# not shown, ``hide_generation_actions``; it is still the slot's target)
TEXT, STATE, ACTION, PAD, HIDDEN_ACTION = 0, 1, 2, 3, 4
# supervision targets
NONE, STATE_TARGET, ACTION_TARGET, TOKEN_TARGET = 0, 1, 2, 3

_HEADERS = {
    "generation": "Turn the instruction into a state/action trajectory.\nInstruction: {}\n"
    "Trajectory:",
    "explanation": "Turn the state/action trajectory into an instruction.\nTrajectory:",
    "dynamics": "Predict how the state changes.\nState:",
    "final_state": "Predict the final state.\nInstruction: {}\nInitial state:",
}
_WINDOW_HEADERS = {
    "generation": "Turn the instruction into a state/action trajectory.\nInstruction: {}\n"
    "Trajectory from step {}:",
    "explanation": "Turn the state/action trajectory into an instruction.\n"
    "Trajectory from step {}:",
}


@dataclass
class Item:
    """One sequence before padding (lists of equal length ``L``)."""

    tokens: list[int]
    kind: list[int]
    target: list[int]
    state: list[np.ndarray | None]  # state value at STATE positions
    action: list[Any]  # action value at ACTION positions
    base: list[np.ndarray | None]  # base state of STATE targets (None: absolute)
    word: list[int]  # which of an action's words an ACTION position holds (0 elsewhere)
    context: list[tuple[Any, Any]] | None = None  # set by packing (else :func:`context_of`)

    def __len__(self) -> int:
        return len(self.tokens)


class SequenceBuilder:
    """Builds :class:`Item` s for the grounding tasks and pads them into batches.

    Args:
        tokenizer: a Hugging Face tokenizer (its BOS/EOS, or CLS/SEP, tokens frame sequences).
        state_dim: size of a state.
        action_shape: ``()`` for discrete actions, ``(A,)`` for continuous ones.
        window: transitions per generation/explanation sequence (``None``: whole rollouts).
        words_per_action: positions per action (an action spelled as that many words, see
            :mod:`~imaginebench.modules.grounding.action_words`; 1: one action slot).
        hide_generation_actions: generation sequences mark their action slots
            ``HIDDEN_ACTION``: the LM learns to write each action without reading the earlier
            ones (other tasks still show them).
    """

    def __init__(
        self,
        tokenizer: Any,
        state_dim: int,
        action_shape: tuple[int, ...],
        window: int | None = None,
        words_per_action: int = 1,
        hide_generation_actions: bool = False,
    ) -> None:
        if window is not None and window < 1:
            raise ValueError(f"window must be >= 1 transitions or None, got {window}")
        if words_per_action < 1:
            raise ValueError(f"words_per_action must be >= 1, got {words_per_action}")
        self.window = window
        self.words_per_action = words_per_action
        self.hide_generation_actions = hide_generation_actions
        self.tokenizer = tokenizer
        self.state_dim = state_dim
        self.action_shape = tuple(action_shape)
        self.bos = _first_id(tokenizer, "bos_token_id", "cls_token_id")
        self.eos = _first_id(tokenizer, "eos_token_id", "sep_token_id")
        if self.eos is None:
            raise ValueError("the tokenizer has neither an EOS nor a SEP token")
        pad = tokenizer.pad_token_id
        self.pad = int(pad if pad is not None else self.eos)
        self._cache: dict[str, list[int]] = {}

    # -- pieces -------------------------------------------------------------------------------
    def encode(self, text: str) -> list[int]:
        """Token ids of ``text`` without special tokens (cached per string)."""
        ids = self._cache.get(text)
        if ids is None:
            ids = list(self.tokenizer(text, add_special_tokens=False)["input_ids"])
            self._cache[text] = ids
        return ids

    def _new(self) -> Item:
        item = Item([], [], [], [], [], [], [])
        if self.bos is not None:
            self._text(item, [self.bos], supervised=False)
        return item

    def _text(self, item: Item, ids: Sequence[int], supervised: bool) -> None:
        n = len(ids)
        item.tokens += list(ids)
        item.kind += [TEXT] * n
        item.target += [TOKEN_TARGET if supervised else NONE] * n
        item.state += [None] * n
        item.action += [None] * n
        item.base += [None] * n
        item.word += [0] * n

    def _slot(
        self, item: Item, kind: int, target: int, state: Any, action: Any, base: Any, word: int
    ) -> None:
        item.tokens.append(self.pad)
        item.kind.append(kind)
        item.target.append(target)
        item.state.append(state)
        item.action.append(action)
        item.base.append(base)
        item.word.append(word)

    def _state(self, item: Item, state: np.ndarray, supervised: bool, base: Any = None) -> None:
        target = STATE_TARGET if supervised else NONE
        self._slot(item, STATE, target, state, None, base, 0)

    def _action(self, item: Item, action: Any, supervised: bool, kind: int = ACTION) -> None:
        target = ACTION_TARGET if supervised else NONE
        for word in range(self.words_per_action):
            self._slot(item, kind, target, None, action, None, word)

    def _trajectory(
        self, item: Item, states: np.ndarray, actions: np.ndarray, supervised: bool
    ) -> None:
        """``s0 a0 s1 ...``; a supervised (generation) trajectory's action slots are
        ``HIDDEN_ACTION`` under ``hide_generation_actions``."""
        kind = HIDDEN_ACTION if supervised and self.hide_generation_actions else ACTION
        # The first state is never a target: initial states are drawn independently of the
        # instruction, so predicting one from text is pure noise (and imagination starts from a
        # real one). KALM regressed it anyway; its large, unlearnable error swamps the
        # state head's gradient from the transitions.
        self._state(item, states[0], False)
        for t in range(len(actions)):
            self._action(item, actions[t], supervised, kind)
            self._state(item, states[t + 1], supervised, base=states[t])

    # -- tasks --------------------------------------------------------------------------------
    def _header(self, kind: str, start: int, *fields: str) -> list[int]:
        if self.window is None:
            return self.encode(_HEADERS[kind].format(*fields))
        return self.encode(_WINDOW_HEADERS[kind].format(*fields, start))

    def prompt(self, instruction: str, start: int = 0) -> Item:
        """The generation prompt up to ``Trajectory:`` (imagination continues from here);
        with a window, the trajectory's first step is ``start``."""
        item = self._new()
        self._text(item, self._header("generation", start, instruction), False)
        return item

    def rollout_prompt(self, instruction: str, initial_state: np.ndarray, start: int = 0) -> Item:
        """The generation prompt followed by the initial state's slot (decoding starts here)."""
        item = self.prompt(instruction, start)
        self._state(item, initial_state, False)
        return item

    def generation(
        self, instruction: str, states: np.ndarray, actions: np.ndarray, start: int = 0
    ) -> Item:
        item = self.prompt(instruction, start)
        self._trajectory(item, states, actions, supervised=True)
        return item

    def explanation(
        self, instruction: str, states: np.ndarray, actions: np.ndarray, start: int = 0
    ) -> Item:
        item = self._new()
        self._text(item, self._header("explanation", start), False)
        self._trajectory(item, states, actions, supervised=False)
        self._text(item, self.encode("\nInstruction:"), False)
        self._text(item, [*self.encode(" " + instruction), self.eos], True)
        return item

    def dynamics(self, state: np.ndarray, action: Any, next_state: np.ndarray) -> Item:
        item = self._new()
        self._text(item, self.encode(_HEADERS["dynamics"]), False)
        self._state(item, state, False)
        self._text(item, self.encode(" Action:"), False)
        self._action(item, action, False)
        self._text(item, self.encode(" Next state:"), False)
        self._state(item, next_state, True, base=state)
        return item

    def final_state(self, instruction: str, first: np.ndarray, last: np.ndarray) -> Item:
        item = self._new()
        self._text(item, self.encode(_HEADERS["final_state"].format(instruction)), False)
        self._state(item, first, False)
        self._text(item, self.encode(" Final state:"), False)
        self._state(item, last, True, base=first)
        return item

    # -- batching -----------------------------------------------------------------------------
    def collate(
        self,
        items: Sequence[Item],
        padding_side: Literal["right", "left"] = "right",
        pack: bool = False,
    ):
        """Pad ``items`` into a dict of tensors (all ``(B, L, ...)``).

        Keys: ``input_ids``, ``kind``, ``target``, ``state``, ``base``, ``has_base``,
        ``action``, ``word``, ``attention_mask``, ``position_ids`` (0-based over the real
        positions, so left and right padding give every real position the same index), and the
        numbers known at each position (see :func:`context_of`): ``context_state``,
        ``has_context_state``, ``context_action``, ``has_context_action``.

        With ``pack``, the items are laid end to end in a few short rows (:func:`pack_rows`)
        and ``position_ids`` restart at 0 with each item and with the padding after a row's
        last (``attention_mask`` 0 there): the LM attends within each item only
        (:meth:`GroundedLM.hidden`), and each item's context is its own. Short
        rows keep attention cheap; one long row would cost about as many times more as it holds
        items. Every item's first position must be unsupervised, since the row's shift by one
        pairs it with the previous item's last.
        """
        if pack:
            return self._pack(items)
        b, length = len(items), max(len(i) for i in items)
        discrete = self.action_shape == ()
        out = {
            "input_ids": torch.full((b, length), self.pad, dtype=torch.long),
            "kind": torch.full((b, length), PAD, dtype=torch.long),
            "target": torch.full((b, length), NONE, dtype=torch.long),
            "state": torch.zeros(b, length, self.state_dim),
            "base": torch.zeros(b, length, self.state_dim),
            "has_base": torch.zeros(b, length, dtype=torch.bool),
            "action": torch.zeros((b, length, *self.action_shape), dtype=torch.long)
            if discrete
            else torch.zeros(b, length, *self.action_shape),
            "word": torch.zeros(b, length, dtype=torch.long),
            "attention_mask": torch.zeros(b, length, dtype=torch.long),
            "context_state": torch.zeros(b, length, self.state_dim),
            "has_context_state": torch.zeros(b, length, dtype=torch.bool),
            "context_action": torch.zeros((b, length, *self.action_shape), dtype=torch.long)
            if discrete
            else torch.zeros(b, length, *self.action_shape),
            "has_context_action": torch.zeros(b, length, dtype=torch.bool),
        }
        for row, item in enumerate(items):
            n = len(item)
            cols = slice(0, n) if padding_side == "right" else slice(length - n, length)
            start = cols.start
            out["input_ids"][row, cols] = torch.tensor(item.tokens)
            out["kind"][row, cols] = torch.tensor(item.kind)
            out["target"][row, cols] = torch.tensor(item.target)
            out["word"][row, cols] = torch.tensor(item.word)
            out["attention_mask"][row, cols] = 1
            for p, (s, a, base) in enumerate(zip(item.state, item.action, item.base)):
                if s is not None:
                    out["state"][row, start + p] = torch.as_tensor(s)
                if a is not None:
                    out["action"][row, start + p] = torch.as_tensor(a)
                if base is not None:
                    out["base"][row, start + p] = torch.as_tensor(base)
                    out["has_base"][row, start + p] = True
            context = (
                item.context
                if item.context is not None
                else context_of(item, self.words_per_action)
            )
            for p, (state, action) in enumerate(context):
                if state is not None:
                    out["context_state"][row, start + p] = torch.as_tensor(state)
                    out["has_context_state"][row, start + p] = True
                if action is not None:
                    out["context_action"][row, start + p] = torch.as_tensor(action)
                    out["has_context_action"][row, start + p] = True
        out["position_ids"] = (out["attention_mask"].cumsum(1) - 1).clamp_min(0)
        return out

    def _pack(self, items: Sequence[Item]) -> dict[str, Tensor]:
        if any(item.target[0] != NONE for item in items):
            raise ValueError("packing needs every item's first position unsupervised")
        rows = pack_rows([len(item) for item in items])
        wholes = []
        for row in rows:
            whole = Item([], [], [], [], [], [], [], context=[])
            for item in (items[k] for k in row):
                for name in ("tokens", "kind", "target", "state", "action", "base", "word"):
                    getattr(whole, name).extend(getattr(item, name))
                whole.context.extend(context_of(item, self.words_per_action))  # per item
            wholes.append(whole)
        out = self.collate(wholes)
        width = out["input_ids"].shape[1]
        for r, row in enumerate(rows):
            lengths = [len(items[k]) for k in row]
            lengths.append(width - sum(lengths))  # the padding: a segment of its own
            out["position_ids"][r] = torch.cat([torch.arange(n) for n in lengths])
        return out


def pack_rows(lengths: Sequence[int]) -> list[list[int]]:
    """Indices of items grouped into rows of about twice the longest item: as many rows as
    that takes, each as short as first fit (longest first) allows, so that the padding after
    the rows' ends stays small and attention (quadratic in a row's length) cheap. Within a row,
    the items keep their order."""
    total, longest = sum(lengths), max(lengths)
    n_rows = -(-total // (2 * longest))
    width = max(longest, -(-total // n_rows))
    while len(rows := first_fit(lengths, width)) > n_rows:
        width += 1
    return rows


def first_fit(lengths: Sequence[int], width: int) -> list[list[int]]:
    """Indices of items grouped into rows of at most ``width`` (each item at least as long
    as ``width`` takes a row of its own): longest first, each into the first row with room;
    within a row, in their order."""
    rows: list[list[int]] = []
    free: list[int] = []
    for k in sorted(range(len(lengths)), key=lambda k: -lengths[k]):
        row = next((r for r, room in enumerate(free) if room >= lengths[k]), None)
        if row is None:
            rows.append([])
            free.append(width)
            row = len(rows) - 1
        rows[row].append(k)
        free[row] -= lengths[k]
    return [sorted(row) for row in rows]


def context_of(item: Item, words_per_action: int) -> list[tuple[Any, Any]]:
    """Per position, the numbers known once that position is read: the latest state slot and
    the latest *complete* action (its last word read) at or before it, ``None`` before any.

    A head reading position ``p`` may use them without leaking its target: the action whose
    first words are being written is not complete until its last word.
    """
    state, action, out = None, None, []
    for kind, value, act, word in zip(item.kind, item.state, item.action, item.word):
        if kind == STATE:
            state = value
        elif kind == ACTION and word == words_per_action - 1:
            action = act
        out.append((state, action))
    return out


def _first_id(tokenizer: Any, *names: str) -> int | None:
    for name in names:
        value = getattr(tokenizer, name, None)
        if value is not None:
            return int(value)
    return None


def build_item(
    builder: SequenceBuilder,
    kind: TaskKind,
    instruction: str,
    states: np.ndarray,
    actions: np.ndarray,
    step: int,
) -> Item:
    """The ``kind`` task's item for one episode (``step`` picks the dynamics transition and,
    with a window, where the generation/explanation window starts)."""
    if kind in ("generation", "explanation"):
        start = window_start(len(actions), step, builder.window)
        stop = start + (builder.window or len(actions))
        make = builder.generation if kind == "generation" else builder.explanation
        return make(instruction, states[start : stop + 1], actions[start:stop], start)
    if kind == "dynamics":
        return builder.dynamics(states[step], actions[step], states[step + 1])
    if kind == "final_state":
        return builder.final_state(instruction, states[0], states[-1])
    raise ValueError(f"unknown grounding task {kind!r}; known: {', '.join(TASK_KINDS)}")


def window_start(length: int, step: int, window: int | None) -> int:
    """First transition of the window for a reference ``step`` in ``[0, length)``: windows
    start uniformly over ``[0, length - window]`` as ``step`` is uniform (0 without one)."""
    if window is None or length <= window:
        return 0
    return step * (length - window + 1) // length


def to_device(batch: dict[str, Tensor], device: torch.device) -> dict[str, Tensor]:
    return {k: v.to(device) for k, v in batch.items()}
