"""Holm and Benjamini-Hochberg against hand-computed examples, and the adjusted verdicts of paired records."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

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


def _holm_by_loop(p: list[float]) -> list[float]:
    """Holm written from its definition: the k-th smallest gets max over j <= k of min(1, (m - j + 1) p(j))."""
    m = len(p)
    order = sorted(range(m), key=lambda i: (p[i], i))
    out = [0.0] * m
    for k in range(m):
        out[order[k]] = max(min(1.0, (m - j) * p[order[j]]) for j in range(k + 1))
    return out


def _bh_by_loop(p: list[float]) -> list[float]:
    """Benjamini-Hochberg from its definition: the k-th smallest gets min over j >= k of min(1, m p(j) / j)."""
    m = len(p)
    order = sorted(range(m), key=lambda i: (p[i], i))
    out = [0.0] * m
    for k in range(m):
        out[order[k]] = min(min(1.0, m * p[order[j]] / (j + 1)) for j in range(k, m))
    return out


p_lists = st.lists(st.sampled_from([0.0, 0.001, 0.01, 0.02, 0.03, 0.04, 0.05, 0.2, 0.5, 0.9, 1.0]), min_size=1, max_size=8)


@settings(max_examples=80, deadline=None)
@given(p_lists)
def test_holm_and_bh_equal_their_definitions_written_as_loops(p: list[float]) -> None:
    np.testing.assert_allclose(holm(p), _holm_by_loop(p), rtol=0, atol=1e-15)
    np.testing.assert_allclose(benjamini_hochberg(p), _bh_by_loop(p), rtol=0, atol=1e-15)
    np.testing.assert_allclose(adjust(p, "none"), p, rtol=0, atol=0)
    # Both never lower a p-value, and Holm (family-wise) is never below BH (false discovery rate).
    assert (holm(p) >= np.asarray(p) - 1e-15).all() and (benjamini_hochberg(p) >= np.asarray(p) - 1e-15).all()
    assert (holm(p) >= benjamini_hochberg(p) - 1e-15).all()


def test_empty_input_and_p_values_out_of_range() -> None:
    assert holm([]).size == 0 and benjamini_hochberg([]).size == 0
    for bad in ([-0.01], [1.01], [float("nan")], [0.1, float("inf")]):
        with pytest.raises(ValueError, match=r"^p-values must lie in \[0, 1\], got "):
            adjust(bad, "holm")
    assert holm([0.0, 1.0]).tolist() == [0.0, 1.0]


def test_the_adjusted_call_at_the_edges() -> None:
    # An adjusted p exactly at alpha is a call (p <= alpha); a zero difference is never one.
    at_alpha = adjusted_verdicts([_record(0.05, 0.25)], "holm", 0.75)[0]  # alpha = 0.25 exactly in binary
    assert at_alpha["adjusted_verdict"] == "A above B" and at_alpha["adjusted_p"] == 0.25
    zero = adjusted_verdicts([_record(0.0, 0.0, verdict="within noise")], "holm", 0.95)[0]
    assert zero["adjusted_verdict"] == "within noise"
    below = adjusted_verdicts([_record(-0.05, 0.01)], "holm", 0.9)[0]
    assert below["adjusted_verdict"] == "B above A" and below["adjustment"] == "holm" and below["n_adjusted"] == 1
    # BH over the eligible records only; the ineligible keep their verdict and carry no adjusted p.
    records = [_record(0.1, 0.01), _record(0.1, 0.04), _record(0.1, 0.3, verdict="too few comparisons")]
    out = adjusted_verdicts(records, "benjamini-hochberg", 0.95)
    assert [r["adjusted_p"] for r in out[:2]] == pytest.approx([0.02, 0.04]) and out[2]["adjusted_p"] is None
    assert out[2]["callable_difference"] is None and out[2]["adjustment"] == "benjamini-hochberg"
    assert [r["n_adjusted"] for r in out] == [2, 2, 2]
    # Other labels: a caller's own called / not-called words.
    words = adjusted_verdicts([{**_record(0.2, 0.001), "verdict": "up"}], "holm", 0.95, called=("up", "down"), not_called="same")
    assert words[0]["adjusted_verdict"] == "up"


@pytest.mark.parametrize(("se", "df", "m", "level"), [(0.02, 7.0, 3, 0.95), (0.05, 0.0, 4, 0.9), (0.01, 30.0, 1, 0.99)])
def test_the_callable_difference_by_scipy(se: float, df: float, m: int, level: float) -> None:
    alpha = (1 - level) / m
    quantile = stats.t.ppf(1 - alpha / 2, df) if df > 0 else stats.norm.ppf(1 - alpha / 2)
    assert callable_difference(se, df, m, level) == pytest.approx(quantile * se, abs=1e-7)
    assert callable_difference(se, df, 0, level) == callable_difference(se, df, 1, level)  # no comparison: as one
    # The resolution rule: could-not-tell exactly when the callable difference exceeds RESOLUTION.
    record = _record(0.01, 0.6, se=RESOLUTION / quantile * 1.01) | {"df": df}
    out = adjusted_verdicts([record] + [_record(0.0, 0.9)] * (m - 1), "holm", level)[0]
    assert out["adjusted_verdict"] == COULD_NOT_TELL
    record = _record(0.01, 0.6, se=RESOLUTION / quantile * 0.99) | {"df": df}
    assert adjusted_verdicts([record] + [_record(0.0, 0.9)] * (m - 1), "holm", level)[0]["adjusted_verdict"] == "within noise"


def test_records_without_se_or_df_and_a_t_quantile_at_one_df() -> None:
    # No se recorded: nothing to resolve, the callable difference is 0 (never "could not tell").
    bare = {"diff": 0.01, "p_value": 0.7, "verdict": "within noise"}
    out = adjusted_verdicts([bare], "holm", 0.95)[0]
    assert out["callable_difference"] == 0.0 and out["adjusted_verdict"] == "within noise"
    # An se without df: the normal quantile.
    out = adjusted_verdicts([{**bare, "se": 0.01}], "holm", 0.95)[0]
    assert out["callable_difference"] == pytest.approx(stats.norm.ppf(0.975) * 0.01, abs=1e-9)
    # One degree of freedom is a t quantile, not the normal one.
    assert callable_difference(0.01, 1.0, 1, 0.95) == pytest.approx(stats.t.ppf(0.975, 1.0) * 0.01, abs=1e-6)
    assert callable_difference(0.01, 1.5, 2, 0.9) == pytest.approx(stats.t.ppf(0.975, 1.5) * 0.01, abs=1e-6)
