"""Lightning callbacks: simulator evaluation per task level, a progress bar in updates."""

from imaginebench.callbacks.evaluation import (
    LevelResult,
    SuccessRateEvaluation,
    evaluate_level,
    wilson_interval,
)
from imaginebench.callbacks.progress import (
    UpdateRichProgressBar,
    UpdateTQDMProgressBar,
    update_progress_bar,
)

__all__ = [
    "LevelResult",
    "SuccessRateEvaluation",
    "UpdateRichProgressBar",
    "UpdateTQDMProgressBar",
    "evaluate_level",
    "update_progress_bar",
    "wilson_interval",
]
