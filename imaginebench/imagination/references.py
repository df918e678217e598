"""The instruction a rollout's words are contrasted with under instruction guidance.

``decoding.guidance_reference: nearest_seen`` (:class:`~imaginebench.imagination.decoder.
DecodingConfig`) contrasts each novel instruction with the training instruction closest to it
in meaning, so that guidance amplifies what the new words add to a task the grounded LM knows
("run forward faster" against "run forward") instead of everything the words say.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch


class NearestSeenInstruction:
    """``instruction -> the closest of the seen instructions`` by cosine similarity of
    sentence embeddings (all-MiniLM-L6-v2 by default), computed once per instruction.

    Args:
        seen: the instructions the grounding was fine-tuned on (the real data's).
        encoder: an object with ``encode(list[str]) -> (n, dim)`` L2-normalised embeddings
            (default: :class:`~imaginebench.modules.backbone.InstructionEncoder`).
    """

    def __init__(self, seen: Sequence[str], encoder: Any | None = None) -> None:
        self.seen = sorted({text for text in seen if text})
        if not self.seen:
            raise ValueError("nearest_seen needs at least one non-empty seen instruction")
        if encoder is None:
            from imaginebench.modules.backbone import InstructionEncoder

            encoder = InstructionEncoder()
        self.encoder = encoder
        self._seen_embeddings = encoder.encode(self.seen)
        self.chosen: dict[str, str] = {}  # every instruction answered so far, for provenance

    def __call__(self, instruction: str) -> str:
        if instruction not in self.chosen:
            similarity = self.encoder.encode([instruction]) @ self._seen_embeddings.T
            self.chosen[instruction] = self.seen[int(torch.argmax(similarity))]
        return self.chosen[instruction]
