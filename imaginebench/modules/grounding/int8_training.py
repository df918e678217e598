"""Frozen linear layers multiplied in int8 while training (``GroundingModule(int8_training=True)``).

The frozen base weights of the LoRA layers take most of a grounding step: their forward
products and, backward, the products that carry the gradient to their inputs (they need no
weight gradient). CPUs with int8 dot-product instructions (AVX-512 VNNI, AMX) multiply int8
matrices about twice as fast as bfloat16 ones. While training, each frozen layer therefore
computes both products in int8, SwitchBack-style (Wortsman et al., 2023): activations and
output gradients quantised per row (symmetric, absmax), the weight per output channel for the
forward product and per input channel for the backward one, each product rescaled to the
activation's dtype. Outside training (validation, imagination, merged exports) the layer is its
plain product, so held-out losses measure the model that imagines.

The weight's int8 copies are made on first use and remade when the weight changes (merging an
adapter into it); they are not part of the state dict. The speed-up needs int8 dot-product
instructions (measured: docs/grounding.md#int8-products-for-the-frozen-weights-2026-12-06); on
CUDA, ``torch._int_mm`` also needs more than 16 rows and dimensions that are multiples of 8.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn


def quantise_rows(matrix: Tensor) -> tuple[Tensor, Tensor]:
    """Symmetric per-row int8 quantisation: ``(int8 matrix, float32 scale (rows, 1))`` with
    ``matrix ≈ int8 * scale``; an all-zero row gets scale 1."""
    wide = matrix.float()
    scale = wide.abs().amax(dim=-1, keepdim=True) / 127.0
    scale = torch.where(scale > 0, scale, torch.ones_like(scale))
    return (wide / scale).round().to(torch.int8), scale


# one fused pass instead of six (about 3x cheaper on CPU); the first call compiles (seconds)
_quantise_rows_fused = torch.compile(quantise_rows, dynamic=True)


def int8_product(matrix: Tensor, weight_t: Tensor, col_scale: Tensor) -> Tensor:
    """``matrix @ (weight_t * col_scale)`` by one int8 product, in ``matrix``'s dtype:
    ``matrix`` (n, k) is quantised per row, ``weight_t`` (k, m) is int8, ``col_scale``
    (1, m) float32."""
    rows, row_scale = _quantise_rows_fused(matrix)
    product = torch._int_mm(rows, weight_t).float()
    return product.mul_(row_scale).mul_(col_scale).to(matrix.dtype)


class _Int8Linear(torch.autograd.Function):
    """``x @ W.T`` with both the product and the input gradient computed in int8."""

    @staticmethod
    def forward(ctx: Any, x: Tensor, layer: Int8TrainingLinear) -> Tensor:
        forward_q, forward_scale, backward_q, backward_scale = layer.int8_weights()
        ctx.backward_weights = backward_q, backward_scale
        return int8_product(x, forward_q.t(), forward_scale.t())

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor, None]:
        backward_q, backward_scale = ctx.backward_weights
        return int8_product(grad.contiguous(), backward_q.t(), backward_scale.t()), None


class Int8TrainingLinear(nn.Linear):
    """A frozen ``nn.Linear`` whose training-mode products are int8 (same weight and bias
    parameters, same state dict); in eval mode it is ``nn.Linear``."""

    _int8_cache: tuple[tuple[int, int], tuple[Tensor, Tensor, Tensor, Tensor]] | None = None

    @classmethod
    def convert(cls, linear: nn.Linear) -> Int8TrainingLinear:
        """Turn ``linear`` (an exact ``nn.Linear`` with a frozen weight) into this class in
        place: its parameters, hooks and place in the model stay."""
        if type(linear) is not nn.Linear:
            raise TypeError(f"int8 training needs a plain nn.Linear, got {type(linear).__name__}")
        if linear.weight.requires_grad:
            raise ValueError("int8 training multiplies frozen weights only")
        linear.__class__ = cls
        return linear  # type: ignore[return-value]

    def int8_weights(self) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """The weight quantised per output row (forward) and per input column (backward)."""
        key = (self.weight.data_ptr(), self.weight._version)
        if self._int8_cache is None or self._int8_cache[0] != key:
            with torch.no_grad():
                weights = (*quantise_rows(self.weight), *quantise_rows(self.weight.t()))
            self._int8_cache = (key, weights)
        return self._int8_cache[1]

    def forward(self, x: Tensor) -> Tensor:
        if not self.training:
            return super().forward(x)
        flat = x.reshape(-1, x.shape[-1])
        out = _Int8Linear.apply(flat, self).view(*x.shape[:-1], self.out_features)
        return out if self.bias is None else out + self.bias.to(out.dtype)


def train_frozen_linears_in_int8(lm: nn.Module) -> int:
    """Convert the base layers of ``lm``'s PEFT LoRA linear layers to
    :class:`Int8TrainingLinear` (in place); returns how many."""
    from peft.tuners.lora.layer import Linear as LoraLinear

    layers = [m for m in lm.modules() if type(m) is LoraLinear]
    if not layers:
        raise ValueError("int8_training needs LoRA adapters on linear layers (set lora)")
    for layer in layers:
        Int8TrainingLinear.convert(layer.get_base_layer())
    return len(layers)
