"""LoRA adapters computed in the LM's bfloat16 (``GroundingModule(lora_autocast=True)``).

PEFT computes a LoRA layer as ``base(x) + B(A(x)) * scaling``, copying ``x`` to the adapters'
float32 first when the base weights are bfloat16. Under bfloat16 autocast the copy is not
needed, and the scaled low-rank product can be added to the frozen layer's output in one
``addmm`` (one pass over the output instead of a product, a scaling and a sum). The adapters'
weights, gradients and optimizer state stay float32; autocast casts them for the products.

The fused update is a PEFT ``LoraVariant`` (an interface PEFT marks as subject to change; the
pinned ``peft`` is the one it is tested with).
"""

from __future__ import annotations

from typing import Any

import torch
from peft.tuners.lora.layer import Linear as LoraLinear
from peft.tuners.lora.layer import LoraVariant
from torch import Tensor


class FusedLoraUpdate(LoraVariant):
    """Vanilla LoRA whose scaled update is added to the frozen output by one ``addmm``."""

    @staticmethod
    def init(module: Any, adapter_name: str, **kwargs: Any) -> None:
        pass

    @staticmethod
    def merge_safe(module: Any, active_adapter: str, orig_weight: Tensor) -> Tensor:
        return orig_weight + module.get_delta_weight(active_adapter).to(orig_weight.dtype)

    @staticmethod
    def merge_unsafe(module: Any, active_adapter: str, orig_weight: Tensor) -> None:
        orig_weight.data += module.get_delta_weight(active_adapter).to(orig_weight.dtype)

    @staticmethod
    def unmerge(module: Any, active_adapter: str, orig_weight: Tensor) -> Tensor:
        return orig_weight.data - module.get_delta_weight(active_adapter).to(orig_weight.dtype)

    @staticmethod
    def forward(
        module: Any, active_adapter: str, x: Tensor, result: Tensor, **kwargs: Any
    ) -> Tensor:
        low_rank = module.lora_A[active_adapter](module.lora_dropout[active_adapter](x))
        updated = torch.addmm(
            result.reshape(-1, result.shape[-1]),
            low_rank.reshape(-1, low_rank.shape[-1]),
            module.lora_B[active_adapter].weight.t(),
            alpha=module.scaling[active_adapter],
        )
        return updated.view(result.shape)


def compute_lora_under_autocast(lm: torch.nn.Module) -> None:
    """Switch ``lm``'s LoRA linear layers (in place) to bfloat16 products under autocast: no
    float32 copy of their inputs, and the fused update where the adapter has no bias."""
    for layer in lm.modules():
        if hasattr(layer, "cast_input_dtype_enabled"):  # every PEFT adapter layer
            layer.cast_input_dtype_enabled = False
        if type(layer) is LoraLinear:  # not the quantised ones
            for name, up in layer.lora_B.items():
                if up.bias is None and name not in layer.lora_variant:
                    layer.lora_variant[name] = FusedLoraUpdate()
