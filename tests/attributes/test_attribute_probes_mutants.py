"""attribute_probes' metrics at the edges the reference tests leave open: float32 inputs, empty results.

Written against the survivors of ``benchmarks/mutation_score.py attribute_probes``; expected values
come from numpy in float64 written here (``np.corrcoef``), never from the functions under test.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from clip_cycles.attributes.attribute_probes import AttributeProbeResult, pearson
from clip_cycles.attributes.splitters import coverage_report


def float32_pair() -> tuple[np.ndarray, np.ndarray]:
    """Values on a large offset: float32 keeps ~3 decimals of them, float64 all; r differs visibly."""
    rng = np.random.default_rng(3)
    x = 1e4 + rng.random(40)
    y = x - 1e4 + 0.3 * rng.random(40)
    return x, y


def test_pearson_computes_in_float64_whatever_the_input_dtype():
    x, y = float32_pair()
    expected = np.corrcoef(x.astype(np.float32).astype(np.float64), y)[0, 1]
    # The float32 input itself is exact in float64; only a float32 computation would lose the small digits.
    assert pearson(x.astype(np.float32), y) == pytest.approx(expected, abs=1e-9)
    expected_y = np.corrcoef(y, x.astype(np.float32).astype(np.float64))[0, 1]
    assert pearson(y, x.astype(np.float32)) == pytest.approx(expected_y, abs=1e-9)
    # Plain lists with None (a missing value) read as NaN and are left out, like any non-finite pair.
    values = [1.0, 2.0, None, 4.0, 3.0]
    other = [2.0, 1.0, 5.0, 7.0, 3.5]
    keep = [0, 1, 3, 4]
    expected_none = np.corrcoef([values[i] for i in keep], [other[i] for i in keep])[0, 1]
    assert pearson(values, other) == pytest.approx(expected_none, abs=1e-12)
    assert pearson(other, values) == pytest.approx(expected_none, abs=1e-12)


def empty_result() -> AttributeProbeResult:
    labels = np.ones((4, 0), dtype=bool)
    coverage = coverage_report(labels, [], ())
    return AttributeProbeResult((), np.zeros((0, 1)), np.zeros(0), np.zeros(0), np.zeros(0), coverage, np.zeros((0, 1)))


def test_summary_of_no_attributes_is_nan_without_a_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # np.mean of an empty array would warn "Mean of empty slice"
        summary = empty_result().summary()
    assert np.isnan(summary["f1_selectivity"]) and np.isnan(summary["mean_f1"]) and np.isnan(summary["cs"])
    assert (summary["n_attributes"], summary["n_attributes_scored"], summary["n_attributes_cs"]) == (0, 0, 0)


def test_summary_says_what_it_averaged_over():
    labels = np.ones((4, 1), dtype=bool)
    coverage = coverage_report(labels, [[(np.array([0, 1]), np.array([2, 3]))]], ("a",))
    result = AttributeProbeResult(("a",), np.ones((1, 1)), np.ones(1), np.zeros(1), np.ones(1), coverage, np.ones((1, 1)))
    text = result.summary()["averaged_over"]
    # The record's reader learns the rule from this field: each part of it is there, in these words.
    assert text.startswith("all attributes; every fold scored (degenerate folds: test F1 = 0); ")
    assert text.endswith("; CS over the attributes with a finite supercategory dominance")


def test_pearson_of_a_constant_is_nan_without_a_warning_and_small_spreads_still_correlate():
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # 0 / 0 would warn "invalid value encountered"
        assert np.isnan(pearson([0.5, 0.5, 0.5, 0.5], [1.0, 2.0, 3.0, 5.0]))
        assert np.isnan(pearson([1.0, 2.0, 3.0], [7.0, 7.0, 7.0]))
    # Spreads far below 1 (dominance shares, F1 fractions): sum of squares well under 1, still a correlation.
    x, y = [0.01, 0.02, 0.03, 0.05], [0.010, 0.030, 0.020, 0.040]
    assert pearson(x, y) == pytest.approx(np.corrcoef(x, y)[0, 1], abs=1e-12)
