"""The per-cycle credit a samples file records: 0.5 exactly when |delta| <= the task's tie tolerance, else 1 or 0."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from clip_cycles.data.folder.reader import CycleRows
from clip_cycles.data.sources.images import ImageItem
from clip_cycles.encoding.encoder import EncodedFeatures, EncodeStats
from clip_cycles.evaluation.samples import cycle_samples


def _lines(deltas: list[float], tolerance: float) -> list[dict]:
    """Samples of one cycle per delta: the block [[delta, 0], [0, 0]], so delta is exact."""
    a, b = ImageItem(key="a.jpg"), ImageItem(key="b.jpg")
    n = len(deltas)
    rows = CycleRows.from_pairs([f"c{i}" for i in range(n)], [(a, b)] * n, [("x", "y")] * n)
    encoded = EncodedFeatures(np.zeros((2, 2), np.float32), np.zeros((2, 2), np.float32), {"a.jpg": 0, "b.jpg": 1},
                              {"x": 0, "y": 1}, EncodeStats())  # fmt: skip
    blocks = np.zeros((n, 2, 2))
    blocks[:, 0, 0] = deltas
    task = SimpleNamespace(name="cycles/t", split="test", tie_tolerance=tolerance)
    return cycle_samples(task, 0, rows, encoded, blocks)  # type: ignore[arg-type]


def _rule(delta: float, tolerance: float) -> float:
    """REFERENCE.md: 1 if delta > tau; 0.5 if |delta| <= tau; 0 if delta < -tau."""
    if abs(delta) <= tolerance:
        return 0.5
    return 1.0 if delta > 0 else 0.0


def test_credit_at_and_around_the_tolerance_by_hand() -> None:
    tau = 0.125  # exact in binary, so the boundary is hit exactly
    deltas = [0.125, -0.125, 0.0, 0.124, -0.124, 0.126, -0.126, 0.5, -0.5, 1e-12]
    lines = _lines(deltas, tau)
    assert [line["credit"] for line in lines] == [0.5, 0.5, 0.5, 0.5, 0.5, 1.0, 0.0, 1.0, 0.0, 0.5]
    assert [line["delta"] for line in lines] == deltas
    # The task's own tolerance is the one used, not a default: with tau = 0 only an exact 0 ties.
    assert [line["credit"] for line in _lines(deltas, 0.0)] == [1.0, 0.0, 0.5, 1.0, 0.0, 1.0, 0.0, 1.0, 0.0, 1.0]


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.floats(-2.0, 2.0, allow_nan=False), min_size=1, max_size=12),
    st.sampled_from([0.0, 1e-9, 0.03125, 0.25, 1.0]),
)
def test_credit_is_one_half_exactly_within_the_tolerance_and_nowhere_else(deltas: list[float], tau: float) -> None:
    # Points on the boundary and just beside it, besides the drawn ones.
    probes = deltas + [tau, -tau, float(np.nextafter(tau, 3.0)), float(np.nextafter(-tau, -3.0))]
    lines = _lines(probes, tau)
    for line, delta in zip(lines, probes):
        assert line["credit"] == _rule(delta, tau), (delta, tau, line["credit"])
