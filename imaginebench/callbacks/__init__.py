"""Lightning callbacks: simulator evaluation per task level, a progress bar in updates, and a
check that a resumed fit continues its own run."""

from imaginebench.callbacks.evaluation import (
    LevelResult,
    SuccessRateEvaluation,
    evaluate_level,
    level_metrics,
    wilson_interval,
)
from imaginebench.callbacks.progress import (
    UpdateRichProgressBar,
    UpdateTQDMProgressBar,
    update_progress_bar,
)
from imaginebench.callbacks.resume import ResumeCheck

__all__ = [
    "LevelResult",
    "ResumeCheck",
    "SuccessRateEvaluation",
    "UpdateRichProgressBar",
    "UpdateTQDMProgressBar",
    "evaluate_level",
    "level_metrics",
    "update_progress_bar",
    "wilson_interval",
]
