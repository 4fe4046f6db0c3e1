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


# --------------------------------------------------------------------------- what probe_attributes hands the solver
# and how it reports convergence (issue 56's class "partial non-convergence not reported"), with a stand-in solver
# whose predictions are fixed by its intercepts: F1 by hand, not through the probe.


def _fixed_solver(intercepts, converged, calls):
    from clip_cycles.attributes.attribute_probes import LogisticFits

    def fit(X, y, mask, *, max_iter, tol, progress, num_proc):
        calls.append({"max_iter": max_iter, "tol": tol, "progress": progress, "num_proc": num_proc, "k": y.shape[1]})
        k = y.shape[1]
        flags = None if converged is None else np.asarray(converged(k), dtype=bool)
        return LogisticFits(np.zeros((k, X.shape[1])), np.asarray(intercepts(k), dtype=float), np.arange(3, 3 + k), flags)

    return fit


def _probe(monkeypatch, n_attributes, intercepts, converged, **kwargs):
    from clip_cycles.attributes import attribute_probes
    from clip_cycles.attributes.attribute_probes import TOL, probe_attributes
    from clip_cycles.attributes.concepts import ConceptAttributeData
    from clip_cycles.registry import Registry

    calls: list = []
    solvers: Registry = Registry("probe solver")
    solvers.register("fixed", _fixed_solver(intercepts, converged, calls))
    monkeypatch.setattr(attribute_probes, "PROBE_SOLVERS", solvers)
    red = [1, 1, 0, 0, 1, 1, 0, 0]
    tall = [1, 0, 1, 0, 1, 0, 1, 0]
    names = ("red", "tall") + tuple(f"x{i}" for i in range(n_attributes - 2))
    labels = np.array([red, tall] + [red] * (n_attributes - 2), dtype=bool).T
    data = ConceptAttributeData(tuple(f"c{i}" for i in range(8)), names, labels, ("s",) * 4 + ("t",) * 4)
    halves = [(np.arange(4), np.arange(4, 8)), (np.arange(4, 8), np.arange(4))]
    result = probe_attributes(np.eye(8)[:, :3], data, [halves] * n_attributes, solver="fixed", **kwargs)
    assert all(call["tol"] == TOL for call in calls)
    return result, calls


def test_probe_attributes_passes_its_settings_and_names_exactly_the_columns_that_did_not_converge(monkeypatch, caplog):
    # Columns in order red/0, red/1, tall/0, tall/1. Intercept +1: every test concept positive; -1: none; a logit of
    # exactly 0 is negative (positive means logit > 0).
    with caplog.at_level("WARNING", logger="clip_cycles.attributes.attribute_probes"):
        result, calls = _probe(monkeypatch, 2, lambda k: [1.0, -1.0, 0.0, 1.0], lambda k: [True, False, True, False],
                               max_iter=17, progress=False, num_proc=3)  # fmt: skip
    assert calls == [{"max_iter": 17, "tol": calls[0]["tol"], "progress": False, "num_proc": 3, "k": 4}]
    # red/0: test c4..c7 = 1,1,0,0, all predicted positive: 2 TP, 2 FP -> 2*2 / (2*2 + 2) = 2/3; tall/1 likewise.
    np.testing.assert_allclose(result.f1, [[2 / 3, 0.0], [0.0, 2 / 3]], rtol=0, atol=1e-15)
    assert result.n_iter.tolist() == [[3, 4], [5, 6]]
    assert result.not_converged == ("red/fold 1", "tall/fold 1")
    summary = result.summary()
    assert (summary["n_probes_not_converged"], summary["probes_not_converged"]) == (2, ["red/fold 1", "tall/fold 1"])
    assert [r.getMessage() for r in caplog.records] == ["2 of 4 probes did not converge (solver fixed): red/fold 1, tall/fold 1"]


def test_probe_attributes_reports_nothing_when_every_column_converged_or_the_solver_does_not_say(monkeypatch, caplog):
    with caplog.at_level("WARNING", logger="clip_cycles.attributes.attribute_probes"):
        converged, _ = _probe(monkeypatch, 2, lambda k: [1.0] * k, lambda k: [True] * k)
        silent, _ = _probe(monkeypatch, 2, lambda k: [1.0] * k, None)
    assert converged.not_converged == () and silent.not_converged == ()
    assert converged.summary()["n_probes_not_converged"] == 0 and caplog.records == []


@pytest.mark.parametrize("n_failed", [10, 11])
def test_more_than_ten_columns_that_did_not_converge_are_cut_after_ten(monkeypatch, caplog, n_failed):
    with caplog.at_level("WARNING", logger="clip_cycles.attributes.attribute_probes"):
        result, _ = _probe(monkeypatch, 6, lambda k: [1.0] * k, lambda k: [False] * n_failed + [True] * (k - n_failed))
    names = [f"{a}/fold {f}" for a in ("red", "tall", "x0", "x1", "x2", "x3") for f in (0, 1)][:n_failed]
    assert result.not_converged == tuple(names)
    tail = " ..." if n_failed > 10 else ""
    assert [r.getMessage() for r in caplog.records] == [
        f"{n_failed} of 12 probes did not converge (solver fixed): {', '.join(names[:10])}{tail}"
    ]
