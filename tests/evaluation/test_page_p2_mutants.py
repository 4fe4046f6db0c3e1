"""The results page's cell views, overall column, board calls and comparison page, worked out by hand.

Issue 56's "page's numbers" without a browser: which interval bound decides which chance marker (and its
symbol and words), the "too few cycles" thresholds, the interval titles a reader hovers, the overall column's
mean and interval (joint with samples, quadrature without), who is "tied for first", and the comparison
page's rows (A - B, its interval over images, the adjusted verdict and its symbol, why a family is not
compared, the disagreeing cycles and the joint overall). Expected values are literals worked out here, or
come from the dense two-way formula of tests/support, never from the helper under test.
"""

from __future__ import annotations

import hashlib
import math
import re

import numpy as np
import pytest
from dense_intervals import dense_interval, dense_variance_and_df
from scipy import stats

from clip_cycles.evaluation.page import (
    _board,
    _ci_title,
    _f,
    _item_view,
    _overall_of,
    _position,
    _value,
    acc_view,
    board_calls,
    compare_page,
    comparison,
    model_slug,
    overall,
    verdict_view,
)
from clip_cycles.evaluation.page_data import Cell, FamilyInfo, PageData
from clip_cycles.experiments.item_sets import ItemSet

NO_SAMPLES = "no per-cycle samples: run eval --samples"


def _cell(acc: float | None, low: float | None = None, high: float | None = None, n: int | None = 100, **kw) -> Cell:
    ci = {"low": low, "high": high, "level": 0.95} if low is not None else None
    family = kw.pop("family", "f")
    return Cell(kw.pop("model", "m"), kw.pop("row", family), acc, ci=ci, n_cycles=n, family=family, **kw)


# --------------------------------------------------------------------------- formatting


def test_numbers_print_with_three_digits_and_missing_ones_say_n_a() -> None:
    assert [_f(None), _f(math.nan), _f(math.inf), _f(-math.inf)] == ["n/a"] * 4
    assert (_f(0.12345), _f(0.5, 1), _f(-0.0004)) == ("0.123", "0.5", "-0.000")
    assert _value(None) == "" and float(_value(0.1 + 0.2)) == 0.1 + 0.2  # full precision for sorting


def test_model_slug_keeps_plain_characters_and_a_digest() -> None:
    def digest(model: str) -> str:
        return hashlib.sha256(model.encode("utf-8")).hexdigest()[:8]

    for model, plain in [
        ("ViT-B/32 (openai)", "ViT-B-32-openai"),  # runs of other characters become one dash; ends trimmed
        ("X-ray.X", "X-ray.X"),  # only dashes and dots are trimmed from the ends
        ("-.abc_1.-", "abc_1"),
        ("UPPER lower", "UPPER-lower"),
        ("()", "model"),  # nothing plain left
        ("a" * 60, "a" * 48),  # at most 48 plain characters
    ]:
        slug = model_slug(model)
        assert slug == f"{plain}-{digest(model)}"
        assert re.fullmatch(r"[A-Za-z0-9_.-]+-[0-9a-f]{8}", slug)
    assert model_slug("a/b") != model_slug("a b")  # the same plain part, two digests


# --------------------------------------------------------------------------- interval titles and chance markers


@pytest.mark.parametrize(
    ("ci", "title"),
    [
        (
            {"level": 0.95, "method": "percentile", "n_resamples": 1000, "unit": "image", "computed_by": "by the page"},
            "0.95 percentile interval, 1000 resamples of images; by the page",
        ),
        ({}, "? ? interval, ? resamples of ?s; from the record (cycle_acc_ci)"),
        (
            {"level": 0.95, "method": "two-way image-cluster robust", "df": 17.26, "n_images": 40, "unit": "images"},
            "0.95 two-way image-cluster robust interval over 40 images, 17.3 df; from the record (cycle_acc_ci)",
        ),
        ({"df": 3}, "? ? interval over ? images, 3.0 df; from the record (cycle_acc_ci)"),
        (
            {"level": 0.9, "method": "m", "df": 8, "n_images": 12, "unit": "clusters"},
            "0.9 m interval over 12 clusters, 8.0 df; from the record (cycle_acc_ci)",
        ),
        # Resamples named: a bootstrap interval even when a df is recorded too.
        (
            {"level": 0.9, "method": "m", "n_resamples": 200, "df": 5, "unit": "cycle"},
            "0.9 m interval, 200 resamples of cycles; from the record (cycle_acc_ci)",
        ),
    ],
)
def test_interval_titles_say_where_the_interval_comes_from(ci: dict, title: str) -> None:
    assert _ci_title(ci) == title


def test_chance_marker_of_every_branch_symbol_and_words() -> None:
    assert _position(_cell(0.9, 0.8, 0.95, n=29)) == ("few", "\u2026", "too few cycles (29 < 30) for a chance marker")
    assert _position(_cell(0.9, 0.8, 0.95, n=None))[0] == "above"  # no count recorded: not "too few"
    assert _position(_cell(0.5)) == ("chance", "\u25cb", "at chance (point only, no interval)")
    assert _position(_cell(0.6)) == ("above", "\u25b3", "above chance (point only, no interval)")
    assert _position(_cell(0.4)) == ("below", "\u25bd", "below chance (point only, no interval)")
    assert _position(_cell(0.6, 0.51, 0.7)) == ("above", "\u25b2", "above chance")
    assert _position(_cell(0.4, 0.3, 0.49)) == ("below", "\u25bc", "below chance")
    assert _position(_cell(0.45, 0.4, 0.51)) == ("chance", "\u25cf", "indistinguishable from chance")
    # A high bound touching 0.5 is not below it (as a low bound touching it is not above).
    assert _position(_cell(0.45, 0.4, 0.5)) == ("chance", "\u25cf", "indistinguishable from chance")


# --------------------------------------------------------------------------- a CycleAcc cell


def test_acc_view_missing_and_unavailable_cells() -> None:
    assert acc_view(None) == {"missing": True}
    assert acc_view(_cell(None, unavailable_reason="no cycles")) == {"missing": False, "unavailable": True, "reason": "no cycles"}
    assert acc_view(_cell(None)) == {"missing": False, "unavailable": True, "reason": ""}


def test_acc_view_numbers_bar_and_shade() -> None:
    view = acc_view(_cell(0.5, 0.40004, 0.6, sd=0.0123))
    assert view["missing"] is False and view["unavailable"] is False and view["tied"] is False
    assert (view["acc"], float(view["value"]), float(view["sd"])) == ("0.500", 0.5, 0.0123)
    assert view["ci"]["title"] == "0.95 ? interval, ? resamples of ?s; from the record (cycle_acc_ci)"
    assert (view["ci"]["low"], view["ci"]["high"], float(view["ci"]["low_value"])) == ("0.400", "0.600", 0.40004)
    assert acc_view(_cell(0.5))["ci"] is None and acc_view(_cell(0.5))["sd"] == ""
    assert acc_view(_cell(0.5), tied=True)["tied"] is True
    # The bar is 112 px at CycleAcc 1, clamped to [0, 1]; the shade is the tenth, clamped to [0, 10].
    for acc, bar, shade in [
        (0.5, "56.0", 5),
        (0.25, "28.0", 2),
        (0.02, "2.2", 0),
        (0.7, "78.4", 7),
        (1.2, "112.0", 10),
        (-0.1, "0.0", 0),
    ]:
        got = acc_view(_cell(acc))
        assert (got["bar"], got["shade"]) == (bar, shade), acc


def test_acc_view_few_and_the_adjusted_call_over_the_cells_own() -> None:
    few = acc_view(_cell(0.9, 0.8, 0.95, n=10))
    assert few["few"] is True and few["css"] == "few" and few["symbol"] == "\u2026"
    own = acc_view(_cell(0.9, 0.8, 0.95))
    assert (own["css"], own["symbol"], own["label"], own["few"]) == ("above", "\u25b2", "above chance", False)
    # The board's adjusted call replaces the cell's own interval's call.
    called = acc_view(_cell(0.9, 0.8, 0.95), call="chance")
    assert (called["css"], called["symbol"]) == ("chance", "\u25cf")
    assert called["label"] == "not separable from chance (Benjamini-Hochberg over the board)"
    below = acc_view(_cell(0.9, 0.8, 0.95), call="below")
    assert (below["css"], below["symbol"], below["label"]) == (
        "below",
        "\u25bc",
        "below chance (Benjamini-Hochberg over the board)",
    )
    assert acc_view(_cell(0.9, 0.8, 0.95), call="elsewhere")["css"] == "above"  # an unknown call: the cell decides


def test_acc_view_marks_only_a_failed_additive_audit() -> None:
    assert acc_view(_cell(0.7, audit="failed"))["audit_mark"] == "\u2717"
    for audit in ("passed", "unavailable", "not run"):
        view = acc_view(_cell(0.7, audit=audit))
        assert view["audit_mark"] == "" and view["audit"] == audit


# --------------------------------------------------------------------------- the audit cell


EMPTY_VERDICT = {"css": "", "value": "", "note": "", "symbol": "\u00b7", "text": ""}


def test_verdict_view_of_cells_without_an_audit() -> None:
    assert verdict_view(None) == EMPTY_VERDICT
    assert verdict_view(_cell(None, audit="not run")) == EMPTY_VERDICT
    # A scored cell whose audit did not run still says so; an unavailable record's audit is still shown.
    assert verdict_view(_cell(0.7, audit="not run")) == {
        "css": "additive-verdict",
        "value": "not run",
        "note": "additive audit: ",
        "symbol": "\u00b7",
        "text": "not run",
    }
    assert verdict_view(_cell(None, audit="unavailable", audit_note="one seed")) == {
        "css": "additive-verdict",
        "value": "unavailable",
        "note": "additive audit: one seed",
        "symbol": "\u2013",
        "text": "unavailable",
    }


@pytest.mark.parametrize(
    ("family", "audit", "css", "kind", "symbol"),
    [
        ("f", "failed", "verdict-failed additive-verdict", "additive audit", "\u2717"),
        ("f", "passed", "additive-verdict", "additive audit", "\u2713"),
        ("f", "model ahead", "additive-verdict", "additive audit", "?"),  # a benchmark word on a family row
        ("f", "blind beats model", "verdict-failed additive-verdict", "additive audit", "?"),
        ("audit/wino", "blind beats model", "verdict-failed benchmark-verdict", "benchmark audit", "\u2691"),
        ("audit/wino", "model ahead", "benchmark-verdict", "benchmark audit", "\u25c6"),
        ("audit/wino", "too few comparisons", "benchmark-verdict", "benchmark audit", "\u2218"),
        ("audit/wino", "passed", "benchmark-verdict", "benchmark audit", "?"),  # a family word on a benchmark row
        ("audit/wino", "failed", "verdict-failed benchmark-verdict", "benchmark audit", "?"),
    ],
)
def test_verdict_view_uses_each_audits_own_symbols(family: str, audit: str, css: str, kind: str, symbol: str) -> None:
    view = verdict_view(_cell(0.7, family=family, audit=audit, audit_note="why"))
    assert view == {"css": css, "value": audit, "note": f"{kind}: why", "symbol": symbol, "text": audit}


def test_item_view_names_the_rows_family_and_item_set() -> None:
    data = PageData()
    data.rows["fam.abab"] = ("fam", ItemSet("test", "ab" * 32, None, "shapes world"))
    assert _item_view(data, "fam.abab") == {
        "label": "fam.abababababab",
        "describe": "shapes world; split test; items abababababab",
    }


# --------------------------------------------------------------------------- overall column, board calls, ties


def _cycles(credits, pairs, deltas=None) -> dict:
    """One task's samples, (seed, cycle_id) -> line, as find_samples keeps them."""
    out = {}
    for i, credit in enumerate(credits):
        line = {"seed": 0, "cycle_id": f"c{i}", "credit": float(credit), "image_0": pairs[i][0], "image_1": pairs[i][1],
                "caption_0": f"c{i} one", "caption_1": f"c{i} two"}  # fmt: skip
        if deltas is not None:
            line["delta"] = float(deltas[i])
        out[0, f"c{i}"] = line
    return out


def _pairs(rng: np.random.Generator, n: int, n_images: int, prefix: str = "i") -> list[tuple[str, str]]:
    return [tuple(f"{prefix}{x}" for x in rng.permutation(n_images)[:2]) for _ in range(n)]  # type: ignore[misc]


def _one_family(credit_b_prob: float, seed: int = 3) -> tuple[PageData, dict]:
    """Family f, models A (about 0.9) and B, 80 cycles on 40 images, both with samples."""
    rng = np.random.default_rng(seed)
    pairs = _pairs(rng, 80, 40)
    credit_a = (rng.random(80) < 0.9).astype(float)
    credit_b = credit_a.copy() if credit_b_prob < 0 else (rng.random(80) < credit_b_prob).astype(float)
    data = PageData()
    for model, credits in (("A", credit_a), ("B", credit_b)):
        mean = float(credits.mean())
        data.cells["f", model] = _cell(mean, mean - 0.08, mean + 0.08, n=80, model=model)
    samples = {m: {"tasks": {"f": _cycles(c, pairs)}} for m, c in (("A", credit_a), ("B", credit_b))}
    return data, samples


def test_overall_without_samples_or_intervals() -> None:
    data = PageData()
    data.cells["f", "m"] = _cell(0.7)
    data.cells["g", "m"] = _cell(0.5)
    data.cells["h", "m"] = _cell(None)  # unavailable: not a zero
    got = overall(data, "m", ["f", "g", "h", "absent"])
    assert got["k"] == 2 and got["mean"] == pytest.approx(0.6) and got["joint"] is False
    assert got["acc"] == "0.600" and float(got["value"]) == pytest.approx(0.6)
    assert got["ci"] is None  # one family without an interval: no quadrature interval either
    assert overall(data, "m", ["h", "absent"]) is None


def test_overall_in_quadrature_is_titled_so() -> None:
    data = PageData()
    data.cells["f", "m"] = _cell(0.7, 0.6, 0.75)
    data.cells["g", "m"] = _cell(0.5, 0.45, 0.6)
    got = overall(data, "m", ["f", "g"], {"m": {"tasks": {"f": {}}}})  # samples of one family only: not joint
    assert got["joint"] is False and got["acc"] == "0.600"
    assert got["ci"]["title"] == (
        "\u2020 families' interval half-widths in quadrature (as independent normal errors): no per-cycle samples"
    )
    assert float(got["ci"]["low_value"]) == pytest.approx(0.6 - math.hypot(0.1, 0.05) / 2)
    assert float(got["ci"]["high_value"]) == pytest.approx(0.6 + math.hypot(0.05, 0.1) / 2)


def test_the_joint_overall_is_read_with_or_without_a_memo() -> None:
    data, samples = _one_family(0.2)
    acc_a = data.cells["f", "A"].cycle_acc
    for memo in (None, {}):
        got = _overall_of(data, "A", ["f"], samples, memo)
        assert got["joint"] is True and got["names"] == ["f"] and got["k"] == 1
        assert got["acc"] == f"{acc_a:.3f}" and float(got["value"]) == acc_a
        credits = [s["credit"] for s in samples["A"]["tasks"]["f"].values()]
        pairs = [(s["image_0"], s["image_1"]) for s in samples["A"]["tasks"]["f"].values()]
        _, low, high = dense_interval(credits, pairs)
        assert (float(got["ci"]["low_value"]), float(got["ci"]["high_value"])) == pytest.approx((low, high), abs=1e-9)
    memo: dict = {}
    _overall_of(data, "A", ["f"], samples, memo)
    assert list(memo) == [("A", ("f",))]


def test_board_calls_adjust_the_chance_markers_and_one_best_model_is_not_tied() -> None:
    data, samples = _one_family(0.1)
    calls, tied = board_calls(data, samples)
    assert calls == {("f", "A"): "above", ("f", "B"): "below"}
    assert tied == set()  # A alone is first: not "tied"
    same, same_samples = _one_family(-1)  # B's credits are A's: not separable
    assert board_calls(same, same_samples)[1] == {("f", "A"), ("f", "B")}
    # A model's samples without tasks, or none at all: nobody is tied.
    assert board_calls(same, {"A": {"rows": {}}})[1] == set()


def test_the_board_shows_the_joint_overall_the_adjusted_calls_and_ties() -> None:
    data, samples = _one_family(0.1)
    calls = {("f", "A"): "chance", ("f", "B"): "below"}
    board = {entry["model"]: entry for entry in _board(data, samples, calls, set())}
    assert board["A"]["overall"]["joint"] is True and board["B"]["overall"]["joint"] is True
    assert board["A"]["tied"] is False and board["B"]["tied"] is False  # A alone is first overall
    assert board["A"]["slug"] == model_slug("A")
    (cell_a,) = board["A"]["cells"]
    assert (cell_a["css"], cell_a["symbol"]) == ("chance", "\u25cf")  # the board's call, not A's own "above"
    same, same_samples = _one_family(-1)
    board = {entry["model"]: entry for entry in _board(same, same_samples, {}, {("f", "B")})}
    assert board["A"]["tied"] is True and board["B"]["tied"] is True
    assert board["A"]["cells"][0]["tied"] is False and board["B"]["cells"][0]["tied"] is True
    # Without samples: no joint overall and nobody tied overall.
    board = {entry["model"]: entry for entry in _board(same, {}, {}, set())}
    assert board["A"]["overall"]["joint"] is False and board["A"]["tied"] is False


# --------------------------------------------------------------------------- the comparison page


def _comparison_fixture() -> tuple[PageData, dict, dict]:
    """Rows: big (A far ahead), rev (B far ahead), same (equal credits), tiny (4 cycles, by hand), and three
    rows that cannot be compared (one cycle set larger, one side without samples, one side not evaluated)."""
    rng = np.random.default_rng(11)
    data = PageData()
    data.families = {"big": FamilyInfo("big", "shapes", "shapes", "big", "p", "ours", 0)}
    credits: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    pairs: dict[str, list[tuple[str, str]]] = {}
    for row, p_a, p_b in (("big", 0.9, 0.1), ("rev", 0.15, 0.85), ("same", 0.6, -1.0)):
        pairs[row] = _pairs(rng, 60, 25, prefix=f"{row}-")
        a = (rng.random(60) < p_a).astype(float)
        credits[row] = (a, a.copy() if p_b < 0 else (rng.random(60) < p_b).astype(float))
    tasks_a = {row: _cycles(a, pairs[row]) for row, (a, _) in credits.items()}
    tasks_b = {row: _cycles(b, pairs[row]) for row, (_, b) in credits.items()}
    # tiny, by hand: c0, c3 and x/1 disagree (x/1's id holds a slash; A records no delta for x/1, B none for c3),
    # c2 agrees.
    tiny = [
        ("c0", 1.0, 0.0, 0.25, -0.5),
        ("x/1", 0.0, 1.0, None, 0.125),
        ("c2", 1.0, 1.0, 0.0, 0.0),
        ("c3", 0.0, 1.0, 0.375, None),
    ]
    tasks_a["tiny"], tasks_b["tiny"] = {}, {}
    for k, (cycle, x, y, dx, dy) in enumerate(tiny):
        line = {"seed": 0, "cycle_id": cycle, "image_0": f"t{k}", "image_1": f"t{k + 1}", "caption_0": f"{cycle} one",
                "caption_1": f"{cycle} two"}  # fmt: skip
        tasks_a["tiny"][0, cycle] = {**line, "credit": x, **({"delta": dx} if dx is not None else {})}
        tasks_b["tiny"][0, cycle] = {**line, "credit": y, **({"delta": dy} if dy is not None else {})}
    credits["tiny"] = (np.array([1.0, 0.0, 1.0, 0.0]), np.array([0.0, 1.0, 1.0, 1.0]))
    # mism.r1 (family mism): A holds one cycle more than B.
    data.rows["mism.r1"] = ("mism", ItemSet())
    four = _pairs(rng, 4, 6, prefix="m-")
    tasks_a["mism.r1"] = _cycles([1.0, 0.0, 1.0, 1.0], four)
    tasks_b["mism.r1"] = _cycles([1.0, 0.0, 1.0], four[:3])
    # nosamp: B names why it has none; onlya: B has no result at all.
    tasks_a["nosamp"] = tasks_a["onlya"] = _cycles([1.0, 0.0, 1.0], four[:3])
    for row in ("big", "rev", "same", "tiny", "mism.r1", "nosamp", "onlya"):
        for model, side in (("A", 0), ("B", 1)):
            if (row, model) == ("onlya", "B"):
                continue
            acc = float(credits[row][side].mean()) if row in credits else 0.6
            data.cells[row, model] = Cell(model, row, acc, n_cycles=60, family=data.family_of(row))
    samples = {
        "A": {"tasks": tasks_a, "files": ["a/one.jsonl", "a/two.jsonl"], "rows": {}},
        "B": {"tasks": tasks_b, "files": ["b/one.jsonl", "b/two.jsonl"], "rows": {"nosamp": "the result names no samples file"}},
    }
    return data, samples, {row: (credits[row], pairs.get(row)) for row in credits}


def test_comparison_rows_are_a_minus_b_with_the_image_interval_and_the_adjusted_call() -> None:
    data, samples, worked = _comparison_fixture()
    page = comparison(data, "A", "B", samples)
    rows = {view["key"]: view for view in page["rows"]}
    assert list(rows) == ["big", "mism.r1", "nosamp", "onlya", "rev", "same", "tiny"]
    n_adjusted = 3  # big, rev, same: tiny has too few cycles and is not adjusted over
    for row in ("big", "rev", "same"):
        (a, b), pairs = worked[row]
        view = rows[row]
        diff, low, high = dense_interval(a - b, pairs)
        assert float(view["diff_value"]) == pytest.approx(a.mean() - b.mean(), abs=1e-12)
        assert view["diff"] == f"{a.mean() - b.mean():.3f}"
        assert (float(view["low_value"]), float(view["high_value"])) == pytest.approx((low, high), abs=1e-9)
        assert abs(float(view["low"]) - low) <= 5e-4 + 1e-9 and abs(float(view["high"]) - high) <= 5e-4 + 1e-9
        assert (view["acc_a"], view["acc_b"]) == (f"{a.mean():.3f}", f"{b.mean():.3f}")
        assert (float(view["acc_a_value"]), float(view["acc_b_value"])) == (a.mean(), b.mean())
        assert view["n_cycles"] == 60 and view["n_images"] == len({i for p in pairs for i in p})
        # The smallest difference sure to be called: the t quantile at Bonferroni's level over the calls, times se.
        variance, df = dense_variance_and_df(a - b, pairs)
        smallest = float(stats.t.ppf(1 - 0.05 / n_adjusted / 2, df)) * math.sqrt(variance) if variance > 0 else 0.0
        assert float(view["callable_value"]) == pytest.approx(smallest, abs=1e-7)
        assert abs(float(view["callable"]) - smallest) <= 5e-4 + 1e-9
        assert view["n_adjusted"] == n_adjusted and view["link"] is True
    big, rev, same, tiny = rows["big"], rows["rev"], rows["same"], rows["tiny"]
    assert (big["verdict"], big["verdict_text"], big["symbol"], big["css"]) == (
        "A above B",
        "A above B",
        "\u25b2",
        "excludes-zero",
    )
    assert (rev["verdict"], rev["verdict_text"], rev["symbol"], rev["css"]) == (
        "B above A",
        "B above A",
        "\u25bc",
        "excludes-zero",
    )
    assert (same["verdict"], same["verdict_text"], same["symbol"], same["css"]) == ("within noise", "within noise", "\u2248", "")
    assert (same["callable"], same["diff"]) == ("0.000", "0.000")
    assert (tiny["verdict"], tiny["verdict_text"], tiny["raw_verdict"]) == (
        "too few comparisons",
        "too few cycles",
        "too few comparisons",
    )
    assert (tiny["symbol"], tiny["css"], tiny["callable"], tiny["callable_value"]) == ("\u2218", "", "n/a", "")


def test_comparison_says_why_a_family_is_not_compared() -> None:
    data, samples, _ = _comparison_fixture()
    rows = {view["key"]: view for view in comparison(data, "A", "B", samples)["rows"]}
    assert rows["mism.r1"]["reason"] == (
        "not the same cycles: cycles/mism: the cycle sets differ (1 only in A, 0 only in B; e.g. seed 0 cycle c3); "
        "evaluate both models on the same tasks, seeds and split"
    )
    assert rows["nosamp"]["reason"] == "B: the result names no samples file"
    assert rows["onlya"]["reason"] == "not evaluated for both models"
    assert (rows["onlya"]["acc_b"], rows["onlya"]["acc_b_value"], rows["onlya"]["acc_a"]) == ("n/a", "", "0.600")
    for row in ("mism.r1", "nosamp", "onlya"):
        assert rows[row]["diff"] is None and rows[row]["css"] == "" and "verdict" not in rows[row]
        assert rows[row]["link"] is True
    # Samples of neither side: each side named, with the reason its samples gave or the default.
    only_b_rows = {"B": {"rows": {"big": "why not"}}}
    view = next(v for v in comparison(data, "A", "B", only_b_rows)["rows"] if v["key"] == "big")
    assert view["reason"] == f"A: {NO_SAMPLES}; B: why not"
    view = next(v for v in comparison(data, "B", "A", only_b_rows)["rows"] if v["key"] == "big")
    assert view["reason"] == f"B: why not; A: {NO_SAMPLES}"
    nothing = comparison(data, "A", "B", only_b_rows)
    assert nothing["overall"] is None and nothing["cycles"] == [] and (nothing["samples_a"], nothing["samples_b"]) == ("", "")


def test_comparison_lists_the_disagreeing_cycles_with_their_credits_and_deltas() -> None:
    data, samples, _ = _comparison_fixture()
    page = comparison(data, "A", "B", samples)
    tiny = next(v for v in page["rows"] if v["key"] == "tiny")
    # Equal credit gaps: the larger delta gap first (0.75, 0.375, 0.125; a missing delta counts as 0).
    assert [d["id"] for d in tiny["disagree"]] == ["0/c0", "0/c3", "0/x/1"]
    shown = [c for c in page["cycles"] if c["key"] == "tiny"]
    fields = ("id", "caption_0", "caption_1", "credit_a", "credit_b", "delta_a", "delta_b")
    assert [tuple(c[k] for k in fields) for c in shown] == [
        ("0/c0", "c0 one", "c0 two", "1", "0", "0.2500", "-0.5000"),
        ("0/c3", "c3 one", "c3 two", "0", "1", "0.3750", "nan"),
        ("0/x/1", "x/1 one", "x/1 two", "0", "1", "nan", "0.1250"),  # no delta recorded: nan
    ]
    anchors = [c["anchor"] for c in page["cycles"]]
    assert all(re.fullmatch(r"c-[0-9a-f]{12}", anchor) for anchor in anchors)
    assert len(set(anchors)) == len(anchors)  # one anchor per (family, cycle)
    assert [d["anchor"] for d in tiny["disagree"]] == [c["anchor"] for c in shown]
    assert (page["samples_a"], page["samples_b"]) == ("a/one.jsonl, a/two.jsonl", "b/one.jsonl, b/two.jsonl")
    assert (page["a"], page["b"], page["adjustment"]) == ("A", "B", "holm")
    assert (page["slug_a"], page["slug_b"]) == (model_slug("A"), model_slug("B"))


def test_the_comparisons_overall_is_the_mean_over_families_with_the_joint_interval() -> None:
    data, samples, worked = _comparison_fixture()
    joint = comparison(data, "A", "B", samples)["overall"]
    diffs, images, groups, weights = [], [], [], []
    compared = ("big", "rev", "same", "tiny")
    for row in compared:
        (a, b), pairs = worked[row]
        if pairs is None:
            pairs = [(f"t{k}", f"t{k + 1}") for k in range(4)]
        diffs += list(a - b)  # the joint interval does not depend on the cycles' order
        images += pairs
        groups += [row] * len(a)
        weights += [1.0 / (len(compared) * len(a))] * len(a)
    estimate, low, high = dense_interval(diffs, images, 0.95, weights, groups)
    mean_of_means = float(np.mean([worked[r][0][0].mean() - worked[r][0][1].mean() for r in compared]))
    assert estimate == pytest.approx(mean_of_means, abs=1e-12)
    assert joint["n_families"] == 4
    assert joint["method"] == "two-way image-cluster robust, t (Bell-McCaffrey df), joint over families"
    for key, value in (("diff", estimate), ("low", low), ("high", high)):
        assert re.fullmatch(r"-?\d\.\d{3}", joint[key]) and abs(float(joint[key]) - value) <= 5e-4 + 1e-9, key


def test_compare_page_renders_the_titles_levels_and_thresholds() -> None:
    data, samples, _ = _comparison_fixture()
    html = compare_page(data, "A", "B", samples)
    assert "<title>clip_cycles: A vs B</title>" in html
    assert 'href="../assets/page.css"' in html and 'href="../models/' + model_slug("A") + '.html"' in html
    assert "unadjusted 95% two-way image-cluster robust interval" in html
    assert "at least 30 cycles on 20 distinct images" in html
    assert "None" not in html
    big = re.search(r'<tr data-family="big" class="excludes-zero">.*?</tr>', html)
    assert big is not None and "\u25b2 A above B" in big.group(0)


def test_swapping_a_and_b_negates_each_row_and_swaps_its_bounds_and_call() -> None:
    data, samples, _ = _comparison_fixture()
    ab = {view["key"]: view for view in comparison(data, "A", "B", samples)["rows"]}
    ba = {view["key"]: view for view in comparison(data, "B", "A", samples)["rows"]}
    swapped = {"A above B": "B above A", "B above A": "A above B"}
    for row in ("big", "rev", "same", "tiny"):
        x, y = ab[row], ba[row]
        assert float(y["diff_value"]) == pytest.approx(-float(x["diff_value"]), abs=1e-12)
        assert float(y["low_value"]) == pytest.approx(-float(x["high_value"]), abs=1e-12)
        assert float(y["high_value"]) == pytest.approx(-float(x["low_value"]), abs=1e-12)
        assert (y["acc_a"], y["acc_b"]) == (x["acc_b"], x["acc_a"])
        assert y["verdict"] == swapped.get(x["verdict"], x["verdict"]) and y["css"] == x["css"]
        assert y["callable"] == x["callable"]
    joint_ab, joint_ba = comparison(data, "A", "B", samples)["overall"], comparison(data, "B", "A", samples)["overall"]
    assert float(joint_ba["diff"]) == -float(joint_ab["diff"])
    assert (float(joint_ba["low"]), float(joint_ba["high"])) == (-float(joint_ab["high"]), -float(joint_ab["low"]))
