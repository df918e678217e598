"""Lightning callbacks: simulator evaluation per task level."""

from imaginebench.callbacks.evaluation import (
    LevelResult,
    SuccessRateEvaluation,
    evaluate_level,
    wilson_interval,
)

__all__ = ["LevelResult", "SuccessRateEvaluation", "evaluate_level", "wilson_interval"]
