"""The numbers the results page shows, checked without a browser on hand-built page data.

Each rule is worked out here by hand (or with the dense two-way formula of tests/support): which rows the
overall column averages, which bound of an interval lands where, the "too few cycles" thresholds, the
comparison's sign and unit (images, two per cycle), which interval is the blind floor's, and the orders the
sortable tables start from and sort by.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from dense_intervals import dense_interval

from clip_cycles.algebra.paired import MIN_CYCLES, MIN_IMAGES
from clip_cycles.evaluation.page import _benchmarks, _board, _position, acc_view, comparison, overall
from clip_cycles.evaluation.page_data import Cell, FamilyInfo, PageData, add_benchmark_audit


def _cell(row: str, model: str, acc: float | None, low: float | None = None, high: float | None = None, n: int = 100) -> Cell:
    ci = {"low": low, "high": high, "level": 0.95} if low is not None else None
    return Cell(model, row, acc, ci=ci, n_cycles=n, family=row)


def _info(key: str, order: int) -> FamilyInfo:
    return FamilyInfo(key, "shapes", "shapes", key, "p", "ours", order)


def test_the_declared_minimum_of_evidence() -> None:
    # The page's "too few" rules are the paired module's constants; their values are the declared ones.
    assert (MIN_CYCLES, MIN_IMAGES) == (30, 20)


@pytest.mark.parametrize(("n", "few"), [(MIN_CYCLES - 1, True), (MIN_CYCLES, False), (1, True), (500, False)])
def test_too_few_cycles_marker_below_the_minimum_only(n: int, few: bool) -> None:
    css, _, words = _position(_cell("f", "m", 0.9, 0.8, 0.95, n=n))
    assert (css == "few") == few
    if few:
        assert words == f"too few cycles ({n} < 30) for a chance marker"
    else:
        assert css == "above"


def test_chance_markers_read_the_right_bound() -> None:
    # Above chance only when the LOW bound clears 0.5; below only when the HIGH bound is under it.
    assert _position(_cell("f", "m", 0.6, 0.51, 0.7))[0] == "above"
    assert _position(_cell("f", "m", 0.6, 0.49, 0.7))[0] == "chance"
    assert _position(_cell("f", "m", 0.4, 0.3, 0.49))[0] == "below"
    assert _position(_cell("f", "m", 0.4, 0.3, 0.51))[0] == "chance"
    assert _position(_cell("f", "m", 0.6, 0.5, 0.7))[0] == "chance"  # touching 0.5 is not above it
    view = acc_view(_cell("f", "m", 0.61234, 0.51111, 0.70999))
    assert (view["ci"]["low"], view["ci"]["high"]) == ("0.511", "0.710")
    assert (float(view["ci"]["low_value"]), float(view["ci"]["high_value"])) == (0.51111, 0.70999)
    assert view["acc"] == "0.612" and float(view["value"]) == 0.61234  # full precision for sorting


def _data() -> PageData:
    data = PageData()
    data.families = {"coarse": _info("coarse", 0), "strict": _info("strict", 5)}
    for row, model, acc, low, high in [
        ("strict", "m1", 0.8, 0.7, 0.85),
        ("coarse", "m1", 0.6, 0.55, 0.7),
        ("coarse", "m2", 0.5, 0.4, 0.6),
        ("zzz", "m1", 0.9, 0.85, 0.95),  # no recorded family facts: after the recorded ones
        ("audit/bench", "m1", 0.1, 0.0, 0.2),  # a benchmark row: never in the overall column
    ]:
        data.cells[row, model] = _cell(row, model, acc, low, high)
    data.cells["strict", "m2"] = _cell("strict", "m2", None)  # unavailable: not averaged
    return data


def test_family_rows_are_coarse_to_strict_then_by_name_and_benchmarks_apart() -> None:
    data = _data()
    assert data.family_rows() == ["coarse", "strict", "zzz"]
    assert data.benchmark_rows() == ["audit/bench"]
    assert data.models == ["m1", "m2"]


def test_the_overall_column_averages_the_family_rows_only() -> None:
    data = _data()
    board = {entry["model"]: entry for entry in _board(data, {}, {}, set())}
    m1, m2 = board["m1"]["overall"], board["m2"]["overall"]
    assert m1["mean"] == pytest.approx((0.6 + 0.8 + 0.9) / 3) and m1["k"] == 3  # not the audit row's 0.1
    assert m2["mean"] == pytest.approx(0.5) and m2["k"] == 1  # the unavailable cell is not a zero
    assert [c.get("acc") for c in board["m1"]["cells"]] == ["0.600", "0.800", "0.900"]
    # Without samples: each family's half-widths below and above added in quadrature, over k.
    low = m1["mean"] - math.sqrt(0.05**2 + 0.1**2 + 0.05**2) / 3
    high = m1["mean"] + math.sqrt(0.1**2 + 0.05**2 + 0.05**2) / 3
    assert (float(m1["ci"]["low_value"]), float(m1["ci"]["high_value"])) == pytest.approx((low, high), abs=1e-12)
    assert overall(data, "m1", ["coarse"])["mean"] == pytest.approx(0.6)


def _samples(task_cycles: dict[str, list[tuple[str, float, tuple[str, str]]]]) -> dict:
    return {
        row: {
            (0, c): {
                "seed": 0,
                "cycle_id": c,
                "credit": credit,
                "delta": 0.0,
                "image_0": i0,
                "image_1": i1,
                "caption_0": f"{c} a",
                "caption_1": f"{c} b",
            }
            for c, credit, (i0, i1) in cycles
        }  # fmt: skip
        for row, cycles in task_cycles.items()
    }


def test_the_joint_overall_weighs_families_equally_with_the_dense_interval() -> None:
    data = _data()
    rng = np.random.default_rng(5)
    cycles = {}
    for row, n in (("coarse", 12), ("strict", 30), ("zzz", 20)):
        cycles[row] = [(f"{row}{i}", float(rng.choice([0.0, 0.5, 1.0])), tuple(f"i{x}" for x in rng.permutation(15)[:2]))
                       for i in range(n)]  # fmt: skip
    got = overall(data, "m1", data.family_rows(), {"m1": {"tasks": _samples(cycles)}})
    assert got["joint"] and got["names"] == ["coarse", "strict", "zzz"]
    values = [credit for row in ("coarse", "strict", "zzz") for _, credit, _ in cycles[row]]
    images = [pair for row in ("coarse", "strict", "zzz") for _, _, pair in cycles[row]]
    groups = [row for row in ("coarse", "strict", "zzz") for _ in cycles[row]]
    weights = [1.0 / (3 * len(cycles[row])) for row in groups]
    _, low, high = dense_interval(values, images, 0.95, weights, groups)
    assert (float(got["ci"]["low_value"]), float(got["ci"]["high_value"])) == pytest.approx((low, high), abs=1e-9)


def test_the_comparison_is_a_minus_b_over_images_and_too_few_is_said() -> None:
    data = PageData()
    data.families = {"big": _info("big", 0), "small": _info("small", 1)}
    rng = np.random.default_rng(9)
    task_a, task_b = {}, {}
    for row, n in (("big", 60), ("small", MIN_CYCLES - 1)):
        pairs = [tuple(f"{row}-i{x}" for x in rng.permutation(25)[:2]) for _ in range(n)]
        credit_a = rng.choice([0.0, 1.0], size=n, p=[0.2, 0.8])
        credit_b = rng.choice([0.0, 1.0], size=n, p=[0.6, 0.4])
        task_a[row] = [(f"c{i}", float(credit_a[i]), pairs[i]) for i in range(n)]
        task_b[row] = [(f"c{i}", float(credit_b[i]), pairs[i]) for i in range(n)]
        data.cells[row, "A"] = _cell(row, "A", float(credit_a.mean()), n=n)
        data.cells[row, "B"] = _cell(row, "B", float(credit_b.mean()), n=n)
    samples = {"A": {"tasks": _samples(task_a)}, "B": {"tasks": _samples(task_b)}}
    page = comparison(data, "A", "B", samples)
    rows = {view["key"]: view for view in page["rows"]}
    for row in ("big", "small"):
        a = np.array([c for _, c, _ in task_a[row]])
        b = np.array([c for _, c, _ in task_b[row]])
        images = [p for _, _, p in task_a[row]]
        diff, low, high = dense_interval(a - b, images)
        view = rows[row]
        assert float(view["diff_value"]) == pytest.approx(a.mean() - b.mean(), abs=1e-12) and diff > 0  # A - B
        assert (float(view["low_value"]), float(view["high_value"])) == pytest.approx((low, high), abs=1e-9)
        assert view["n_images"] == len({i for pair in images for i in pair}) and view["n_cycles"] == len(a)
    assert rows["small"]["verdict_text"] == "too few cycles" and rows["small"]["raw_verdict"] == "too few comparisons"
    assert rows["big"]["verdict"] == "A above B" and rows["big"]["css"] == "excludes-zero"
    swapped = {view["key"]: view for view in comparison(data, "B", "A", samples)["rows"]}
    assert float(swapped["big"]["low_value"]) == pytest.approx(-float(rows["big"]["high_value"]), abs=1e-12)
    assert swapped["big"]["verdict"] == "B above A"


def test_the_blind_floor_interval_is_the_blind_floors_own() -> None:
    data = PageData()
    sub = {
        "model_acc": 0.7,
        "model_acc_ci": {"low": 0.6, "high": 0.8},
        "best_blind": "length",
        "best_blind_acc": 0.55,
        "best_blind_acc_ci": {"low": 0.5, "high": 0.62},
        "n_comparisons": 40,
        "cycles": {"cycle_acc": 0.65, "n_cycles": 7},
        "best_blind_vs_model": {"verdict": "within noise", "adjusted_verdict": "model above blind"},
    }
    add_benchmark_audit(data, "bench", "m", {**sub, "subsets": {"s": sub}}, "f.json")
    (row, _) = data.benchmarks
    assert row.best_blind_ci == (0.5, 0.62) and row.blind_verdict == "model above blind"
    assert row.cycle_acc == 0.65 and row.n_cycles == 7 and row.model_acc == 0.7 and row.best_blind_acc == 0.55
    view = _benchmarks(data)[0]
    assert view["blind_ci"] == "0.500\u20130.620" and float(view["blind_ci_value"]) == 0.5
    assert view["blind_acc"] == "0.550" and view["model_acc"] == "0.700" and view["wins"] is False
