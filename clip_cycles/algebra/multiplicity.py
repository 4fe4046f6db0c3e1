"""Adjusting many calls made together: Holm and Benjamini-Hochberg, and the verdicts after them; numpy only, no I/O.

A comparison over several families calls a difference on each; at 5 % each, 14 families of two
indistinguishable models call at least one difference about half the time. :func:`holm`
controls the family-wise error rate (the chance of any false call) across the calls of one
comparison; :func:`benjamini_hochberg` controls the false discovery rate (the expected share of
false calls among those made), the rule for a whole board of models x families. Both take
two-sided p-values and return adjusted ones: a call is made when its adjusted p-value is at most
``alpha`` = 1 - level. Both are monotone step procedures on the sorted p-values:

- Holm: ``p~(k) = max_{j <= k} min(1, (m - j + 1) p(j))`` (k-th smallest of m).
- Benjamini-Hochberg: ``p~(k) = min_{j >= k} min(1, m p(j) / j)``.

:func:`adjusted_verdicts` turns raw paired verdicts into adjusted ones, and names an
underpowered family's "no call" "could not tell" (:func:`callable_difference`).
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from clip_cycles.algebra.crossed import t_quantile

#: The adjustment of the calls of one comparison (its families; a benchmark's subsets).
COMPARISON_ADJUSTMENT = "holm"
#: The adjustment of a board's markers (every model pair x family cell at once).
BOARD_ADJUSTMENT = "benjamini-hochberg"
#: A family that could not call a difference of this size (in CycleAcc) says "could not tell", not "within noise".
RESOLUTION = 0.10
#: The verdict of a difference not called by a family too small to call one of :data:`RESOLUTION`.
COULD_NOT_TELL = "could not tell"


def _p_values(p_values: Sequence[float]) -> np.ndarray:
    p = np.asarray(p_values, dtype=np.float64).reshape(-1)
    if not np.isfinite(p).all() or (p < 0.0).any() or (p > 1.0).any():
        raise ValueError(f"p-values must lie in [0, 1], got {p.tolist()}")
    return p


def holm(p_values: Sequence[float]) -> np.ndarray:
    """Holm's step-down adjusted p-values, in the input's order (module docstring)."""
    p = _p_values(p_values)
    m = p.size
    if m == 0:
        return p
    order = np.argsort(p, kind="stable")
    stepped = np.minimum(1.0, (m - np.arange(m)) * p[order])
    out = np.empty(m)
    out[order] = np.maximum.accumulate(stepped)
    return out


def benjamini_hochberg(p_values: Sequence[float]) -> np.ndarray:
    """Benjamini-Hochberg step-up adjusted p-values (q-values), in the input's order (module docstring)."""
    p = _p_values(p_values)
    m = p.size
    if m == 0:
        return p
    order = np.argsort(p, kind="stable")
    stepped = np.minimum(1.0, m * p[order] / np.arange(1, m + 1))
    out = np.empty(m)
    out[order] = np.minimum.accumulate(stepped[::-1])[::-1]
    return out


ADJUSTMENTS = {"holm": holm, "benjamini-hochberg": benjamini_hochberg, "none": lambda p: _p_values(p)}


def adjust(p_values: Sequence[float], method: str) -> np.ndarray:
    """Adjusted p-values by ``method`` (a key of :data:`ADJUSTMENTS`)."""
    if method not in ADJUSTMENTS:
        raise ValueError(f"unknown adjustment {method!r}; one of {sorted(ADJUSTMENTS)}")
    return ADJUSTMENTS[method](p_values)


def callable_difference(se: float, df: float, n_comparisons: int, level: float) -> float:
    """The smallest |difference| certain to be called after adjusting over ``n_comparisons`` calls.

    The half-width at the Bonferroni level ``1 - alpha / m`` (the strictest step of Holm): a
    difference at least this far from 0 is called whatever the other calls' p-values.
    ``df`` 0 means a normal quantile (bootstrap intervals).
    """
    alpha = (1.0 - float(level)) / max(int(n_comparisons), 1)
    probability = 1.0 - alpha / 2.0
    quantile = t_quantile(probability, df if df > 0 else float("inf"))
    return float(quantile * se)


def adjusted_verdicts(
    records: Sequence[dict[str, Any]],
    method: str,
    level: float,
    called: Sequence[str] = ("A above B", "B above A"),
    not_called: str = "within noise",
) -> list[dict[str, Any]]:
    """Each paired record (``p_value``, ``verdict``, ``diff``, ``se``, ``df``) with its adjusted call added.

    Adjusted over the records whose raw verdict is a call or "no call" (those with enough
    evidence); a record with too little evidence keeps its verdict and is not counted. Added
    fields: ``adjusted_p``, ``adjusted_verdict`` (the raw call when ``adjusted_p <= alpha``, else
    ``not_called``, or :data:`COULD_NOT_TELL` when :func:`callable_difference` exceeds
    :data:`RESOLUTION`), ``adjustment`` and ``n_adjusted`` (the number of calls adjusted over),
    ``callable_difference``.
    """
    eligible = [k for k, r in enumerate(records) if r["verdict"] in (*called, not_called)]
    adjusted = adjust([records[k]["p_value"] for k in eligible], method)
    alpha = 1.0 - float(level)
    out = [dict(r) for r in records]
    for k, p in zip(eligible, adjusted.tolist()):
        record = out[k]
        smallest = callable_difference(record.get("se", 0.0), record.get("df", 0.0), len(eligible), level)
        if p <= alpha and record["diff"] != 0.0:
            verdict = called[0] if record["diff"] > 0.0 else called[1]
        else:
            verdict = COULD_NOT_TELL if smallest > RESOLUTION else not_called
        record.update(
            adjusted_p=float(p),
            adjusted_verdict=verdict,
            callable_difference=smallest,
            adjustment=method,
            n_adjusted=len(eligible),
        )
    for k, record in enumerate(out):
        if k not in eligible:
            record.update(adjusted_p=None, adjusted_verdict=record["verdict"], callable_difference=None, adjustment=method)
            record["n_adjusted"] = len(eligible)
    return out
