"""The LM body on a batch's real positions only: attention ``unpadded``.

A padded or packed batch keeps empty slots that every linear layer of the LM would compute.
With ``unpadded`` the real positions are taken out into one row, so the layers compute them
alone, and only attention sees padding: each sequence (its positions numbered from 0, as
:meth:`~.sequences.SequenceBuilder.collate` gives both padded and packed batches) attends
within itself, computed for a few sequences at a time laid in small padded groups
(:class:`Segments`). Decoding with a KV cache falls back to PyTorch's fused attention.

The attention is registered with transformers under :data:`ATTENTION_NAME`
(``load_causal_lm(attention="unpadded")``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from imaginebench.modules.grounding.sequences import first_fit

ATTENTION_NAME = "imaginebench_unpadded"


@dataclass(frozen=True)
class Block:
    """Sequences attended together: ``gather`` ``(groups, width)`` indexes each group slot
    into the real positions (0 on empty slots); ``bias`` ``(groups, 1, 1, width, width)`` is
    the additive mask, 0 where a slot's query may read a key (an earlier or the same position
    of its own sequence), ``-inf`` elsewhere; an empty slot reads itself, so that no softmax
    row is empty."""

    gather: Tensor
    bias: Tensor


@dataclass(frozen=True)
class Segments:
    """Where a batch's real positions go when the LM body runs on them alone.

    ``real``: flat indices (into ``batch * length``) of the real positions, in order.
    ``blocks``: the sequences in groups of one width per block (shorter sequences share a
    narrower block: attention costs the square of the width). ``scatter``: each real
    position's slot among the blocks' slots, flattened one after the other.
    """

    real: Tensor
    blocks: tuple[Block, ...]
    scatter: Tensor

    @classmethod
    def of(cls, attention_mask: Tensor, position_ids: Tensor, dtype: torch.dtype) -> Segments:
        """Segments of a batch whose real positions (``attention_mask``) number each of its
        sequences from 0 (``position_ids``)."""
        real = attention_mask.flatten().nonzero().squeeze(1)
        positions = position_ids.flatten()[real]
        if real.numel() == 0 or int(positions[0]) != 0:
            raise ValueError("every sequence's real positions must be numbered from 0")
        starts = (positions == 0).nonzero().squeeze(1).tolist()
        lengths = [end - start for start, end in zip(starts, starts[1:] + [len(real)])]
        scatter = torch.empty(len(real), dtype=torch.long)
        device = attention_mask.device
        blocks, offset = [], 0
        for members in _two_widths(lengths):
            block = _block(members, starts, lengths, offset, scatter, dtype, device)
            blocks.append(block)
            offset += block.gather.numel()
        return cls(real.to(device), tuple(blocks), scatter.to(device))


def _block(
    members: list[int],
    starts: list[int],
    lengths: list[int],
    offset: int,
    scatter: Tensor,
    dtype: torch.dtype,
    device: torch.device,
) -> Block:
    """The block of sequences ``members`` (first fit into groups as wide as the longest),
    whose slots start at ``offset``; writes the members' positions' slots into ``scatter``."""
    widest = max(lengths[k] for k in members)
    groups = [[members[i] for i in g] for g in first_fit([lengths[k] for k in members], widest)]
    width = max(sum(lengths[k] for k in group) for group in groups)
    gather = torch.zeros(len(groups), width, dtype=torch.long)
    sequence = torch.full((len(groups), width), -1, dtype=torch.long)
    for g, group in enumerate(groups):
        column = 0
        for k in group:
            start, n = starts[k], lengths[k]
            gather[g, column : column + n] = torch.arange(start, start + n)
            sequence[g, column : column + n] = k
            first = offset + g * width + column
            scatter[start : start + n] = torch.arange(first, first + n)
            column += n
    slot = torch.arange(width)
    allowed = (sequence[:, :, None] == sequence[:, None, :]) & (slot[:, None] >= slot)
    allowed |= torch.eye(width, dtype=torch.bool)
    bias = torch.zeros(allowed.shape, dtype=dtype).masked_fill_(~allowed, float("-inf"))
    return Block(gather.to(device), bias[:, None, None].to(device))


def _two_widths(lengths: list[int]) -> list[list[int]]:
    """Sequence indices split by length into at most two blocks, so that the sum over blocks
    of sequences x width^2 (attention's cost) is least."""
    order = sorted(range(len(lengths)), key=lambda k: lengths[k])
    best, split = len(order) * lengths[order[-1]] ** 2, len(order)
    for cut in range(1, len(order)):
        cost = cut * lengths[order[cut - 1]] ** 2 + (len(order) - cut) * lengths[order[-1]] ** 2
        if cost < best:
            best, split = cost, cut
    return [order[:split], order[split:]] if split < len(order) else [order]


def unpadded_attention(
    module: torch.nn.Module,
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attention_mask: Tensor | None,
    scaling: float | None = None,
    dropout: float = 0.0,
    segments: Segments | None = None,
    **kwargs: Any,
) -> tuple[Tensor, None]:
    """transformers attention interface: ``query`` ``(1, heads, n, dim)``, ``key``/``value``
    ``(1, kv_heads, n, dim)`` over the real positions of :class:`Segments` -> ``(1, n,
    heads, dim)``. Query heads sharing a key/value head (grouped-query attention) are stacked
    over its positions instead of copying the keys. Without ``segments`` (decoding), PyTorch's
    fused attention with transformers' mask."""
    if segments is None:
        from transformers.integrations.sdpa_attention import sdpa_attention_forward

        return sdpa_attention_forward(
            module, query, key, value, attention_mask, scaling=scaling, dropout=dropout, **kwargs
        )
    kv_heads, dim = key.shape[1], key.shape[3]
    shared = query.shape[1] // kv_heads
    scaling = dim**-0.5 if scaling is None else scaling
    outputs = []
    for block in segments.blocks:
        groups, width = block.gather.shape
        q = _grouped(query, block.gather).unflatten(1, (kv_heads, shared)).flatten(2, 3)
        k, v = _grouped(key, block.gather), _grouped(value, block.gather)
        scores = torch.matmul(q, k.transpose(-1, -2)).unflatten(2, (shared, width))
        scores = scores * scaling + block.bias
        weights = torch.softmax(scores, dim=-1, dtype=torch.float32).to(query.dtype)
        weights = torch.nn.functional.dropout(weights, p=dropout, training=module.training)
        out = torch.matmul(weights.flatten(2, 3), v).unflatten(2, (shared, width)).flatten(1, 2)
        outputs.append(out.transpose(1, 2).flatten(0, 1))  # (groups * width, h, d)
    out = torch.cat(outputs).index_select(0, segments.scatter)  # (n, h, d)
    return out[None], None


def _grouped(x: Tensor, gather: Tensor) -> Tensor:
    """``(1, heads, n, dim)`` -> ``(groups, heads, width, dim)`` at ``gather``'s slots."""
    slots = x[0].index_select(1, gather.flatten())
    return slots.unflatten(1, gather.shape).transpose(0, 1)


def register() -> None:
    """Make ``attn_implementation=ATTENTION_NAME`` known to transformers (idempotent); its
    masks, needed only when decoding, are the fused kernel's."""
    from transformers import AttentionInterface
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, sdpa_mask

    AttentionInterface.register(ATTENTION_NAME, unpadded_attention)
    ALL_MASK_ATTENTION_FUNCTIONS.register(ATTENTION_NAME, sdpa_mask)
