"""Holm and Benjamini-Hochberg against hand-computed examples, and the adjusted verdicts of paired records."""

from __future__ import annotations

import numpy as np
import pytest

from clip_cycles.algebra.multiplicity import (
    COULD_NOT_TELL,
    RESOLUTION,
    adjust,
    adjusted_verdicts,
    benjamini_hochberg,
    callable_difference,
    holm,
)

P = [0.01, 0.04, 0.03, 0.005]


def test_holm_by_hand() -> None:
    # Sorted 0.005, 0.01, 0.03, 0.04 times 4, 3, 2, 1 = 0.02, 0.03, 0.06, 0.04; running max 0.02, 0.03, 0.06, 0.06.
    np.testing.assert_allclose(holm(P), [0.03, 0.06, 0.06, 0.02], rtol=0, atol=1e-15)


def test_benjamini_hochberg_by_hand() -> None:
    # Sorted p * 4 / rank = 0.02, 0.02, 0.04, 0.04; running min from the largest: unchanged.
    np.testing.assert_allclose(benjamini_hochberg(P), [0.02, 0.04, 0.04, 0.02], rtol=0, atol=1e-15)
    # A step-up: a large p-value at the top rank pulls the lower ones down to its level.
    np.testing.assert_allclose(benjamini_hochberg([0.04, 0.045, 0.05]), [0.05, 0.05, 0.05], rtol=0, atol=1e-15)


def test_adjustments_cap_at_one_keep_one_p_value_and_refuse_bad_input() -> None:
    assert holm([0.6, 0.7]).tolist() == [1.0, 1.0]
    assert adjust([0.03], "holm").tolist() == [0.03] == adjust([0.03], "benjamini-hochberg").tolist()
    with pytest.raises(ValueError, match="p-values"):
        holm([1.5])
    with pytest.raises(ValueError, match="unknown adjustment"):
        adjust([0.1], "bonferroni")


def _record(diff: float, p: float, se: float = 0.01, verdict: str | None = None) -> dict:
    raw = verdict or ("within noise" if p > 0.05 else ("A above B" if diff > 0 else "B above A"))
    return {"diff": diff, "p_value": p, "se": se, "df": 50.0, "verdict": raw}


def test_a_raw_call_that_holm_does_not_keep_reads_within_noise() -> None:
    records = [_record(0.05, 0.02), _record(-0.08, 0.001), _record(0.01, 0.5), _record(0.2, 0.001, verdict="too few comparisons")]
    out = adjusted_verdicts(records, "holm", 0.95)
    # Three calls adjusted (the too-few record is not one): 0.02 * 2 = 0.04 is kept, 0.001 * 3 too.
    assert [r["adjusted_verdict"] for r in out] == ["A above B", "B above A", "within noise", "too few comparisons"]
    assert [r["n_adjusted"] for r in out] == [3, 3, 3, 3]
    assert out[0]["adjusted_p"] == pytest.approx(0.04) and out[3]["adjusted_p"] is None
    assert all(r["verdict"] == s["verdict"] and r["diff"] == s["diff"] for r, s in zip(out, records))  # raw kept
    tighter = adjusted_verdicts([_record(0.05, 0.02), *[_record(0.0, 0.9) for _ in range(3)]], "holm", 0.95)
    assert tighter[0]["adjusted_verdict"] == "within noise"  # 0.02 * 4 > 0.05


def test_an_underpowered_family_could_not_tell() -> None:
    wide = _record(0.05, 0.3, se=0.06)
    narrow = _record(0.005, 0.7, se=0.005)
    out = adjusted_verdicts([wide, narrow], "holm", 0.95)
    assert out[0]["callable_difference"] > RESOLUTION and out[0]["adjusted_verdict"] == COULD_NOT_TELL
    assert out[1]["callable_difference"] < RESOLUTION and out[1]["adjusted_verdict"] == "within noise"


def test_the_callable_difference_is_the_bonferroni_half_width() -> None:
    # 2 comparisons at 95 %: the 1 - 0.025 / 2 = 0.9875 quantile; t(50) there is 2.3109.
    assert callable_difference(0.01, 50.0, 2, 0.95) == pytest.approx(0.023109, abs=2e-6)
    assert callable_difference(0.01, 0.0, 1, 0.95) == pytest.approx(0.0195996, abs=1e-6)  # normal
