"""What flows from a rollout data module into an offline RL module, declared once.

* :class:`TransitionBatch` — the keys of a sampled batch (and of
  :meth:`RolloutData.transitions`): raw states, instruction ids.
* :class:`PreparedBatch` — what ``OfflineRLModule.prepare`` makes of it for ``losses``:
  normalised states, instruction embeddings.
* :class:`RolloutData` — the part of a data module the algorithms use; anything with these
  attributes and methods can feed them (``RolloutDataModule`` and its subclasses do).

This module imports nothing from the package, so data modules and algorithms both depend on it
and not on each other.
"""

from __future__ import annotations

from typing import Any, Literal, NotRequired, Protocol, TypedDict

from torch import Tensor

Source = Literal["all", "real", "imaginary"]


class TransitionBatch(TypedDict):
    """``B`` transitions as sampled (a ``TensorDict`` of these keys in training; stacked
    batches add a leading ``K`` dimension)."""

    state: Tensor  # (B, state_dim) float32, as stored (not normalised)
    next_state: Tensor  # (B, state_dim) float32
    action: Tensor  # (B,) int64 class indices, or (B, *shape) float32 in the env's units
    reward: Tensor  # (B,) float32
    done: Tensor  # (B,) bool: the episode terminated here (time-limit cuts are not done)
    instruction_id: Tensor  # (B,) int64 index into the data module's ``instructions``
    source: Tensor  # (B,) uint8: 0 real, 1 imaginary
    # (B,) float32 >= 0: how much the transition counts in the losses (real ones 1; imaginary
    # ones 1, or from their confidence with the data module's ``imaginary_weighting``)
    weight: Tensor


TRANSITION_KEYS: tuple[str, ...] = tuple(TransitionBatch.__annotations__)


class PreparedBatch(TypedDict):
    """One update's batch as ``losses`` receives it."""

    state: Tensor  # (B, state_dim) normalised with the data's state statistics
    next_state: NotRequired[Tensor]  # normalised; absent when the module sets uses_next_state
    instruction: Tensor  # (B, embedding_dim) standardised instruction embeddings
    action: Tensor
    reward: Tensor
    done: Tensor
    source: Tensor
    instruction_id: NotRequired[Tensor]  # kept by modules that need it (PRDC)
    # per-transition loss weights; absent when they are all equal (every loss is then the plain
    # mean, exactly as without weights): reduce with ``weighted_mean`` (offline/base.py)
    weight: NotRequired[Tensor]


class RolloutData(Protocol):
    """The data module contract of :class:`~imaginebench.modules.offline.OfflineRLModule`."""

    state_dim: int
    action_spec: dict[str, Any]
    instructions: list[str]  # unique; ``instruction_id`` indexes it

    def setup(self, stage: str | None = None) -> None: ...

    def state_stats(self) -> tuple[Tensor, Tensor]:
        """Per-dimension mean and standard deviation of the states normalisation uses."""
        ...

    def transitions(self, source: Source = "all") -> TransitionBatch:
        """Every transition of ``source``, real first."""
        ...

    def split(self) -> tuple[int, int]:
        """(real, imaginary) rows of each batch and process."""
        ...
