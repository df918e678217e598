"""RMS norms computed by one compiled kernel each way (``GroundingModule(compile_norms=True)``).

A Llama-style RMS norm is six small elementwise operations forward and more backward, each a
pass over the activations; the LM has two per block. ``torch.compile`` fuses them into one
kernel forward and one backward, leaving the matrix products to PyTorch's own kernels
(compiling the whole body instead was slower:
docs/grounding.md#training-speed-what-makes-a-grounding-step-cheaper). The first call of
each kind (training, no-grad, autocast) compiles for a few seconds; later shapes reuse it
(dynamic shapes). On CPU, inductor needs a C++ compiler (``gcc``/``g++``).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn


@torch.compile(dynamic=True)
def _rms_norm(hidden: Tensor, weight: Tensor, eps: float) -> Tensor:
    dtype = hidden.dtype
    wide = hidden.float()
    wide = wide * torch.rsqrt(wide.pow(2).mean(-1, keepdim=True) + eps)
    return weight * wide.to(dtype)  # the same operations as transformers' LlamaRMSNorm


class FusedRMSNorm(nn.Module):
    """A Llama-style RMS norm (same ``weight``, same formula) run by a compiled kernel."""

    def __init__(self, weight: nn.Parameter, eps: float) -> None:
        super().__init__()
        self.weight = weight
        self.variance_epsilon = eps

    def forward(self, hidden: Tensor) -> Tensor:
        return _rms_norm(hidden, self.weight, self.variance_epsilon)


def fuse_rms_norms(lm: nn.Module) -> int:
    """Replace ``lm``'s RMS norms (modules named ``*RMSNorm`` with ``weight`` and
    ``variance_epsilon``) in place by :class:`FusedRMSNorm`; returns how many. The state
    dict keeps its keys."""
    norms = [
        (name, module)
        for name, module in lm.named_modules()
        if type(module).__name__.endswith("RMSNorm")
        and hasattr(module, "variance_epsilon")
        and isinstance(getattr(module, "weight", None), nn.Parameter)
    ]
    if not norms:
        raise ValueError("compile_norms needs an LM with Llama-style RMS norms")
    for name, module in norms:
        parent_name, _, child = name.rpartition(".")
        parent = lm.get_submodule(parent_name) if parent_name else lm
        setattr(parent, child, FusedRMSNorm(module.weight, float(module.variance_epsilon)))
    return len(norms)
