"""Audits that prove a comparison is immune to additive shortcuts, each returning a report.

- ``signed_degrees`` / ``comparison_balance``: Theorem 1 for ANY linear comparison given
  as (image id, caption id, weight) edges, with a witness additive score when unbalanced.
- ``cycle_edges`` / ``cycle_balance``: the same for a set of cycles.
- ``marginal_tv``: total variation between matched-side and swapped-side image and
  caption measures of a set of cycles.
- ``predicate_validity``: matched pairs that fail the predicate and swapped pairs that are
  not refuted by it (false beyond doubt, when a ``refutes`` test is given).
- ``audit_cycles``: all of the above in one report, as the builders record it.

Gates and identities: predicate validity is a *gate* (a faulty builder fails it). Marginal
TV and signed-degree balance of a set of complete 2x2 blocks are *identities of the block
design*: every image and caption of a block appears once on the matched side and once on
the swapped side, so both are exactly 0 / balanced for any well-formed cycle set. They are
reported as identities; they are not gates. Balance is a real test for designs that are
not made of cycles (``hard_negative_edges``, ``winoground_comparisons``), where it fails
and names a witness.

Ids may be any hashable values (COCO image ids, file names, caption strings).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Hashable, Iterable, Sequence

import numpy as np

#: Signed degrees whose absolute value is at most this are treated as zero; weights
#: are usually +-1 so degrees are exact integers, but float weights may round.
DEGREE_TOL: float = 1e-12


@dataclass(frozen=True)
class Witness:
    """An additive score that the comparison does not cancel.

    The score is ``a(vertex) = 1`` on one image (side ``"image"``) or ``b(vertex) = 1``
    on one caption (side ``"caption"``), 0 elsewhere; the comparison evaluates it to ``value``.
    """

    side: str
    vertex: Hashable
    value: float

    def score(self, image_id: Hashable, caption_id: Hashable) -> float:
        """The witness additive score s(u, v) = a(u) + b(v)."""
        hit = image_id == self.vertex if self.side == "image" else caption_id == self.vertex
        return 1.0 if hit else 0.0


@dataclass
class BalanceReport:
    """Signed degrees of every image and caption vertex of a linear comparison."""

    image_degrees: dict[Hashable, float]
    caption_degrees: dict[Hashable, float]
    balanced: bool
    witness: Witness | None
    n_edges: int
    max_abs_degree: float

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready summary (degrees of unbalanced vertices only, to stay small)."""
        return {
            "balanced": self.balanced,
            "n_edges": self.n_edges,
            "n_images": len(self.image_degrees),
            "n_captions": len(self.caption_degrees),
            "max_abs_degree": self.max_abs_degree,
            "unbalanced_images": {str(k): v for k, v in self.image_degrees.items() if abs(v) > DEGREE_TOL},
            "unbalanced_captions": {str(k): v for k, v in self.caption_degrees.items() if abs(v) > DEGREE_TOL},
            "witness": None if self.witness is None else {**asdict(self.witness), "vertex": str(self.witness.vertex)},
        }


def evaluate_comparison(
    score: Callable[[Hashable, Hashable], float],
    image_ids: Sequence[Hashable],
    caption_ids: Sequence[Hashable],
    weights: Sequence[float],
) -> float:
    """T_w(s) = sum_e w_e s(u_e, v_e) for the edges given as three parallel sequences."""
    return float(sum(w * score(u, v) for u, v, w in zip(image_ids, caption_ids, weights)))


def signed_degrees(image_ids: Sequence[Hashable], caption_ids: Sequence[Hashable], weights: Sequence[float]) -> BalanceReport:
    """Theorem 1: a linear comparison cancels every additive score iff all signed degrees are 0.

    Parameters
    ----------
    image_ids, caption_ids, weights:
        Parallel sequences; edge e is the evaluated pair (image_ids[e], caption_ids[e])
        with signed weight weights[e] (positive: the side that should score higher).

    Returns
    -------
    BalanceReport with per-vertex degrees, ``balanced`` and, when unbalanced, the
    witness additive score on the vertex of largest |degree| and the value it achieves.
    """
    if not (len(image_ids) == len(caption_ids) == len(weights)):
        raise ValueError(
            f"edges need parallel sequences: {len(image_ids)} image ids, {len(caption_ids)} caption ids, {len(weights)} weights"
        )
    if len(weights) == 0:
        raise ValueError("empty comparison: no edges to audit")
    w = np.asarray(weights, dtype=np.float64)
    bad = ~np.isfinite(w)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(f"edge {i} has a non-finite weight {w[i]!r}")
    image_degrees: dict[Hashable, float] = {}
    caption_degrees: dict[Hashable, float] = {}
    for u, v, weight in zip(image_ids, caption_ids, w.tolist()):
        image_degrees[u] = image_degrees.get(u, 0.0) + weight
        caption_degrees[v] = caption_degrees.get(v, 0.0) + weight
    witness = None
    best = 0.0
    for side, degrees in (("image", image_degrees), ("caption", caption_degrees)):
        for vertex, degree in degrees.items():
            if abs(degree) > DEGREE_TOL and abs(degree) > abs(best):
                best = degree
                witness = Witness(side=side, vertex=vertex, value=degree)
    return BalanceReport(
        image_degrees=image_degrees,
        caption_degrees=caption_degrees,
        balanced=witness is None,
        witness=witness,
        n_edges=len(weights),
        max_abs_degree=abs(best),
    )


#: The signed weights of a cycle's four pairs in the order (u1,v1), (u1,v2), (u2,v1), (u2,v2).
CYCLE_WEIGHTS = (1.0, -1.0, -1.0, 1.0)


class _CycleRows(list):
    """Rows already checked by :func:`_as_cycle_rows`: the audit's parts share one pass over them."""


def _as_cycle_rows(cycles: Iterable[Sequence[Hashable]]) -> list[tuple[Hashable, Hashable, Hashable, Hashable]]:
    if isinstance(cycles, _CycleRows):
        return cycles
    rows = _CycleRows()
    for i, row in enumerate(cycles):
        row = tuple(row.tolist() if isinstance(row, np.ndarray) else row)
        if len(row) != 4:
            raise ValueError(f"cycle {i} must be (u1, u2, v1, v2), got {len(row)} fields")
        rows.append(row)
    if not rows:
        raise ValueError("empty cycle set: nothing to audit")
    return rows


def cycle_edges(cycles: Iterable[Sequence[Hashable]]) -> tuple[list[Hashable], list[Hashable], list[float]]:
    """The signed edges of a set of cycles ``(u1, u2, v1, v2)``: four per cycle with weights +1, -1, -1, +1."""
    images: list[Hashable] = []
    captions: list[Hashable] = []
    weights: list[float] = []
    for u1, u2, v1, v2 in _as_cycle_rows(cycles):
        images += [u1, u1, u2, u2]
        captions += [v1, v2, v1, v2]
        weights += list(CYCLE_WEIGHTS)
    return images, captions, weights


def cycle_balance(cycles: Iterable[Sequence[Hashable]]) -> BalanceReport:
    """Signed-degree balance of the comparison formed by all cycles together."""
    return signed_degrees(*cycle_edges(cycles))


def hard_negative_edges(
    triples: Iterable[tuple[Hashable, Hashable, Hashable]],
) -> tuple[list[Hashable], list[Hashable], list[float]]:
    """Edges of image-to-caption hard-negative tests (u, v+) vs (u, v-): weights +1, -1."""
    images: list[Hashable] = []
    captions: list[Hashable] = []
    weights: list[float] = []
    for u, positive, negative in triples:
        images += [u, u]
        captions += [positive, negative]
        weights += [1.0, -1.0]
    return images, captions, weights


def winoground_comparisons(
    cycles: Iterable[Sequence[Hashable]], which: str
) -> list[tuple[list[Hashable], list[Hashable], list[float]]]:
    """Each directional Winoground comparison of each block (u1, u2, v1, v2) as edges.

    ``which="text"``: per image, its caption vs the other caption, i.e.
    (u1,v1) - (u1,v2) and (u2,v2) - (u2,v1); ``which="image"``: per caption, its
    image vs the other image, (u1,v1) - (u2,v1) and (u2,v2) - (u1,v2). Each single
    comparison is unbalanced (a text-only score can decide it), while the two of a
    block summed are exactly the cycle contrast.
    """
    if which not in ("text", "image"):
        raise ValueError(f"which must be 'text' or 'image', got {which!r}")
    comparisons = []
    for u1, u2, v1, v2 in _as_cycle_rows(cycles):
        if which == "text":
            comparisons.append(([u1, u1], [v1, v2], [1.0, -1.0]))
            comparisons.append(([u2, u2], [v2, v1], [1.0, -1.0]))
        else:
            comparisons.append(([u1, u2], [v1, v1], [1.0, -1.0]))
            comparisons.append(([u2, u1], [v2, v2], [1.0, -1.0]))
    return comparisons


@dataclass
class MarginalReport:
    """Total variation between matched-side and swapped-side component measures."""

    image_tv: float
    caption_tv: float
    n_cycles: int

    @property
    def balanced(self) -> bool:
        return self.image_tv == 0.0 and self.caption_tv == 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"image_tv": self.image_tv, "caption_tv": self.caption_tv, "n_cycles": self.n_cycles}


def _total_variation(p: Counter, q: Counter) -> float:
    total_p, total_q = sum(p.values()), sum(q.values())
    keys = set(p) | set(q)
    # Exact rational arithmetic on counts: equal measures give exactly 0.0.
    numerator = sum(abs(p[k] * total_q - q[k] * total_p) for k in keys)
    return numerator / (2.0 * total_p * total_q)


def marginal_tv(
    cycles: Iterable[Sequence[Hashable]],
) -> MarginalReport:
    """TV distance of image and caption measures between matched and swapped pairs.

    Matched pairs are (u1, v1), (u2, v2); swapped pairs (u1, v2), (u2, v1). For
    complete blocks both sides use the same images and captions, so both TVs are 0.
    An incomplete design is audited with ``pair_measure_tv`` on explicit matched and
    swapped pair lists.
    """
    rows = _as_cycle_rows(cycles)
    matched = [(u1, v1) for u1, _, v1, _ in rows] + [(u2, v2) for _, u2, _, v2 in rows]
    swapped = [(u1, v2) for u1, _, _, v2 in rows] + [(u2, v1) for _, u2, v1, _ in rows]
    return pair_measure_tv(matched, swapped)


def pair_measure_tv(matched: Sequence[tuple[Hashable, Hashable]], swapped: Sequence[tuple[Hashable, Hashable]]) -> MarginalReport:
    """TV distance of image and caption measures between explicit matched and swapped pair lists."""
    if not matched or not swapped:
        raise ValueError(f"need matched and swapped pairs, got {len(matched)} matched and {len(swapped)} swapped")
    image_tv = _total_variation(Counter(u for u, _ in matched), Counter(u for u, _ in swapped))
    caption_tv = _total_variation(Counter(v for _, v in matched), Counter(v for _, v in swapped))
    return MarginalReport(image_tv=image_tv, caption_tv=caption_tv, n_cycles=min(len(matched), len(swapped)) // 2)


@dataclass
class ValidityReport:
    """Predicate violations: matched pairs that fail it and swapped pairs it does not refute."""

    n_cycles: int
    matched_violations: int
    swap_violations: int
    matched_violation_cycles: list[Hashable] = field(default_factory=list)
    swap_violation_cycles: list[Hashable] = field(default_factory=list)

    @property
    def valid(self) -> bool:
        return self.matched_violations == 0 and self.swap_violations == 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "n_cycles": self.n_cycles,
            "matched_violations": self.matched_violations,
            "swap_violations": self.swap_violations,
            "matched_violation_cycles": [str(c) for c in self.matched_violation_cycles],
            "swap_violation_cycles": [str(c) for c in self.swap_violation_cycles],
        }


def predicate_validity(
    cycles: Iterable[Sequence[Hashable]],
    predicate: Callable[[Hashable, Hashable], bool],
    cycle_ids: Sequence[Hashable] | None = None,
    refutes: Callable[[Hashable, Hashable], bool] | None = None,
) -> ValidityReport:
    """Check that both matched pairs satisfy ``predicate(image, caption)`` and both swaps are false.

    A swap is a violation when ``refutes(image, caption)`` is False (it is not false beyond
    doubt); without ``refutes``, when ``predicate`` holds for it. A violation counts once per
    pair (a cycle can contribute up to two of each kind); the offending cycle ids are listed
    once each, in order.
    """
    if refutes is None:

        def refutes(u: Hashable, v: Hashable) -> bool:
            return not predicate(u, v)

    rows = _as_cycle_rows(cycles)
    ids = list(range(len(rows))) if cycle_ids is None else list(cycle_ids)
    if len(ids) != len(rows):
        raise ValueError(f"{len(ids)} cycle ids for {len(rows)} cycles")
    report = ValidityReport(n_cycles=len(rows), matched_violations=0, swap_violations=0)
    for cycle_id, (u1, u2, v1, v2) in zip(ids, rows):
        bad_matched = (not predicate(u1, v1)) + (not predicate(u2, v2))
        bad_swapped = (not refutes(u1, v2)) + (not refutes(u2, v1))
        if bad_matched:
            report.matched_violations += bad_matched
            report.matched_violation_cycles.append(cycle_id)
        if bad_swapped:
            report.swap_violations += bad_swapped
            report.swap_violation_cycles.append(cycle_id)
    return report


@dataclass
class CycleAuditReport:
    """Everything a builder records for one family split: validity (a gate); marginals and balance
    (identities of the block design, recorded for the card)."""

    validity: ValidityReport | None
    marginals: MarginalReport
    balance: BalanceReport

    @property
    def passed(self) -> bool:
        """The gate: no matched or swap violation. TV and balance are identities, not part of it."""
        return self.validity is None or self.validity.valid

    @property
    def identities_hold(self) -> bool:
        """TV 0 and balanced: true for every set of well-formed complete blocks."""
        return self.marginals.balanced and self.balance.balanced

    def to_dict(self) -> dict[str, Any]:
        return {
            "passed": self.passed,
            "matched_violations": None if self.validity is None else self.validity.matched_violations,
            "swap_violations": None if self.validity is None else self.validity.swap_violations,
            "image_tv": self.marginals.image_tv,
            "caption_tv": self.marginals.caption_tv,
            "balanced": self.balance.balanced,
            "identities_hold": self.identities_hold,
            "validity": None if self.validity is None else self.validity.to_dict(),
            "balance": self.balance.to_dict(),
        }


def audit_cycles(
    cycles: Iterable[Sequence[Hashable]],
    predicate: Callable[[Hashable, Hashable], bool] | None = None,
    cycle_ids: Sequence[Hashable] | None = None,
    refutes: Callable[[Hashable, Hashable], bool] | None = None,
) -> CycleAuditReport:
    """Run the validity gate (when a predicate is given) and record marginal TV and balance (identities)."""
    rows = _as_cycle_rows(cycles)
    return CycleAuditReport(
        validity=None if predicate is None else predicate_validity(rows, predicate, cycle_ids, refutes),
        marginals=marginal_tv(rows),
        balance=cycle_balance(rows),
    )
