"""``ImaginaryWeighting`` and ``imaginary_weights`` on their own: exact weights and pools of a
small in-memory dataset (the data module's use of them is in ``test_datamodule.py``)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from imaginebench.datamodules.weighting import ImaginaryWeighting, imaginary_weights


def scored(**confidence: list[float]) -> SimpleNamespace:
    """What ``imaginary_weights`` reads of a dataset: its size and float32 confidences."""
    arrays = {k: np.asarray(v, dtype=np.float32) for k, v in confidence.items()}
    n = len(next(iter(arrays.values()))) if arrays else 3
    return SimpleNamespace(num_transitions=n, confidence=arrays)


def test_uniform_weights_are_float32_ones_and_keep_everything():
    weight, keep = imaginary_weights(scored(), ImaginaryWeighting())
    assert weight.dtype == np.float32 and weight.tolist() == [1.0, 1.0, 1.0]
    assert keep.dtype == bool and keep.tolist() == [True, True, True]


def test_weights_are_confidence_to_the_power_rounded_once_to_float32():
    """0.2697867155 ** 1.7 computed in float64 then rounded, not in float32 (they differ)."""
    c = [0.2697867155075073, 0.5, 1.0, 0.0]
    weight, keep = imaginary_weights(
        scored(likelihood=c), ImaginaryWeighting("likelihood", power=1.7)
    )
    expected = [np.float32(float(np.float32(x)) ** 1.7) for x in c]
    assert weight.dtype == np.float32 and weight.tolist() == [float(e) for e in expected]
    assert keep.dtype == bool and keep.tolist() == [True] * 4  # no threshold: all kept


def test_a_threshold_keeps_confidences_equal_to_it():
    weight, keep = imaginary_weights(
        scored(ensemble=[0.25, 0.5, 0.75]), ImaginaryWeighting("ensemble", power=0.0, threshold=0.5)
    )
    assert keep.tolist() == [False, True, True] and weight.tolist() == [1.0, 1.0, 1.0]


def test_a_threshold_of_0_is_valid_and_keeps_everything():
    weighting = ImaginaryWeighting("ensemble", threshold=0.0)
    _, keep = imaginary_weights(scored(ensemble=[0.0, 0.5]), weighting)
    assert keep.tolist() == [True, True]


def test_a_missing_source_names_the_data_and_the_sources_it_has():
    data = scored(likelihood=[0.5], ensemble=[0.5])
    with pytest.raises(ValueError) as err:
        imaginary_weights(data, ImaginaryWeighting("other"), "run/imag.h5")
    assert str(err.value).startswith(
        "run/imag.h5: has no confidence 'other' (it has: ensemble, likelihood)"
    )
    with pytest.raises(ValueError, match=r"^imaginary data: has no confidence 'other'"):
        imaginary_weights(data, ImaginaryWeighting("other"))  # the default name


def test_power_or_threshold_without_a_source_is_refused_with_the_fix():
    with pytest.raises(ValueError) as err:
        ImaginaryWeighting(threshold=0.5)
    assert str(err.value) == (
        "imaginary_weighting: power and threshold need a confidence source "
        "(source: likelihood or ensemble)"
    )
