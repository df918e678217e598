"""Discrete actions written with the language model's own words.

An action of a discrete space is spelled as ``K`` words, one per *position*, each chosen from
that position's word list; the action index is the mixed-radix number of the word indices, the
first position most significant. CLEVR-Robot's 40 pushes (``action = ball * 8 + direction``)
are ``[colour, direction]``, e.g. ``"red" "left"``; a space with no structure is one position
listing one word per action.

Each word takes one sequence position. Its input embedding is the mean of the LM's input
embeddings of its tokens, and its logit is the hidden state's dot product with the mean of
their output embeddings, plus a learned correction of that vector (zero at the start) and a
learned bias: at the start, the LM's own head restricted to the candidates.
So an instruction that says "red" and "left" already points the pretrained model at the
words of the action that pushes the red ball left, where a fresh linear head over action
indices has to learn every such link from the data (and, trained longer, memorises them).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor, nn


class ActionWords(nn.Module):
    """The words of a discrete action space and the arithmetic between words and actions.

    Args:
        words: per position, its words (``[["red", "blue", ...], ["right", "behind", ...]]``).
        tokenizer: the LM's tokenizer (each word is tokenised with a leading space).
        num_actions: size of the action space; must equal the product of the list sizes.
        hidden_size: the LM's hidden size (of the learned corrections of the output vectors).
    """

    def __init__(
        self, words: Sequence[Sequence[str]], tokenizer: Any, num_actions: int, hidden_size: int
    ) -> None:
        super().__init__()
        if not words or any(len(position) == 0 for position in words):
            raise ValueError(f"action_words needs at least one non-empty word list, got {words}")
        self.sizes = [len(position) for position in words]
        if math.prod(self.sizes) != num_actions:
            raise ValueError(
                f"action_words spell {' x '.join(map(str, self.sizes))} = "
                f"{math.prod(self.sizes)} actions, the action space has {num_actions}"
            )
        for position in words:
            if len(set(position)) != len(position):
                raise ValueError(f"action_words repeat a word within one position: {position}")
        self.words = [list(map(str, position)) for position in words]
        self.count = len(self.sizes)
        self.offsets = [sum(self.sizes[:k]) for k in range(self.count)]
        self.strides = [math.prod(self.sizes[k + 1 :]) for k in range(self.count)]
        ids = [
            list(tokenizer(" " + word, add_special_tokens=False)["input_ids"])
            for position in self.words
            for word in position
        ]
        if any(not i for i in ids):
            raise ValueError(f"the tokenizer turns an action word into no tokens: {self.words}")
        longest = max(len(i) for i in ids)
        token_ids = torch.zeros(len(ids), longest, dtype=torch.long)
        weights = torch.zeros(len(ids), longest)
        for row, word_ids in enumerate(ids):
            token_ids[row, : len(word_ids)] = torch.tensor(word_ids)
            weights[row, : len(word_ids)] = 1.0 / len(word_ids)
        # Derived from the words and the tokenizer (both rebuilt from the hyperparameters).
        self.register_buffer("token_ids", token_ids, persistent=False)
        self.register_buffer("token_weights", weights, persistent=False)
        self.register_buffer("strides_t", torch.tensor(self.strides), persistent=False)
        self.register_buffer("sizes_t", torch.tensor(self.sizes), persistent=False)
        self.register_buffer("offsets_t", torch.tensor(self.offsets), persistent=False)
        self.bias = nn.Parameter(torch.zeros(len(ids)))
        self.correction = nn.Parameter(torch.zeros(len(ids), hidden_size))

    def digit(self, action: Tensor, position: Tensor | int) -> Tensor:
        """Index of the action's word at ``position`` within that position's list."""
        return (action // self.strides_t[position]) % self.sizes_t[position]

    def vectors(self, table: Tensor) -> Tensor:
        """``(total words, H)``: each word's mean row of an embedding ``table``."""
        rows = table[self.token_ids].float()
        return (rows * self.token_weights[..., None]).sum(1)

    def embed(self, table: Tensor, action: Tensor, position: Tensor | int) -> Tensor:
        """Input embeddings of the action's word at ``position`` (broadcast over ``action``)."""
        word = self.offsets_t[position] + self.digit(action, position)
        return self.vectors(table)[word]

    def output_vectors(self, table: Tensor) -> Tensor:
        """``(total words, H)``: the words' rows of the LM's output ``table``, corrected."""
        return self.vectors(table) + self.correction

    def logits(self, table: Tensor, hidden: Tensor, position: int) -> Tensor:
        """``(..., size of position)`` logits of the words at ``position``."""
        rows = slice(self.offsets[position], self.offsets[position] + self.sizes[position])
        return hidden @ self.output_vectors(table)[rows].T + self.bias[rows]

    def all_logits(self, table: Tensor, hidden: Tensor, position: Tensor) -> Tensor:
        """``(N, total words)`` logits with the words of other positions masked out
        (``hidden``: ``(N, H)``, ``position``: ``(N,)``), for the training loss."""
        logits = hidden @ self.output_vectors(table).T + self.bias
        word_position = torch.repeat_interleave(
            torch.arange(self.count, device=hidden.device), self.sizes_t
        )
        return logits.masked_fill(word_position[None] != position[:, None], float("-inf"))

    def target(self, action: Tensor, position: Tensor) -> Tensor:
        """Column of the action's word at ``position`` in :meth:`all_logits`."""
        return self.offsets_t[position] + self.digit(action, position)
