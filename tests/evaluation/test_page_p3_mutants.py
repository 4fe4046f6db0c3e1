"""The page's tables, pages and files by hand (issue 56, group p3 of ``evaluation/page.py``).

Each expected value is worked out here from the hand-made input: a label read back out of the rendered
HTML and compared with what the input says, a digest or a byte count computed in the test, a message
written out in full. Covered: the family and model pages, the index's columns, groups, family table,
benchmark and attribute tables and compare pairs, the samples a result names (and why one is not used),
the example cycles, the page builder's bootstrap, the site's files and manifest, and the writer's refusals.
"""

from __future__ import annotations

import hashlib
import html
import io
import json
import re
from pathlib import Path

import pytest
from PIL import Image

from clip_cycles.evaluation.page import (
    NO_SAMPLES,
    OVERALL_HOW,
    Site,
    _attributes,
    _benchmarks,
    _column_groups,
    _columns,
    _example_view,
    _family_group,
    _family_table_rows,
    _read_named,
    apply_bootstrap,
    build_page,
    build_site,
    docstring_markup,
    family_examples,
    family_page,
    find_samples,
    index_page,
    model_page,
    model_slug,
    write_site,
)
from clip_cycles.evaluation.page_data import BenchmarkRow, Cell, FamilyInfo, PageData, collect
from clip_cycles.evaluation.page_examples import ExampleCycle, ExampleImage, FamilyExamples
from clip_cycles.experiments.item_sets import ItemSet
from clip_cycles.results import benchmark_record, write_json

AB, CD = "ab" * 32, "cd" * 32


def _info(key: str, order: int, provenance: str = "ours", builder: str = "gqa", family: str | None = None) -> FamilyInfo:
    return FamilyInfo(key, "gqa", builder, family or key, f"``{key}`` holds", provenance, order)


def _cell(row: str, model: str, acc: float | None, ci: tuple[float, float] | None = None, **extra: object) -> Cell:
    interval = {"low": ci[0], "high": ci[1], "level": 0.95} if ci is not None else None
    extra.setdefault("n_cycles", 100)
    extra.setdefault("family", row.split("@")[0])
    return Cell(model, row, acc, ci=interval, **extra)  # type: ignore[arg-type]


def _rows_of(page: str, table_id: str) -> dict[str, str]:
    """``data-row`` -> the row's HTML inside the table ``table_id``."""
    table = re.search(rf'<table id="{table_id}".*?</table>', page, re.S).group(0)
    return dict(re.findall(r'<tr data-row="([^"]*)">(.*?)</tr>', table, re.S))


# --------------------------------------------------------------------------- markup and groups


def test_docstring_markup_marks_both_quotings_as_literals_and_keeps_the_text_between() -> None:
    assert docstring_markup("a ``b`` c `d` e") == [("a ", False), ("b", True), (" c ", False), ("d", True), (" e", False)]
    assert docstring_markup("``x``") == [("x", True)]
    assert docstring_markup("`y` tail") == [("y", True), (" tail", False)]
    assert docstring_markup(7) == [("7", False)]


def test_a_family_group_is_its_builder_and_source_or_says_why_not() -> None:
    assert _family_group("audit/sugarcrepe", None) == "benchmark (exact cycles found)"
    assert _family_group("audit/sugarcrepe", _info("x", 0)) == "benchmark (exact cycles found)"
    assert _family_group("f", None) == "family facts not recorded"
    assert _family_group("f", _info("f", -1)) == "family facts not recorded"  # an older record: no facts
    # builder and source are two different words here, so a swap or a lost one shows.
    assert _family_group("f", _info("f", 0, builder="coco")) == "builder COCO, source GQA"
    assert _family_group("Audit/x", _info("x", 3)) == "builder GQA, source GQA"


def test_column_groups_are_runs_of_neighbours() -> None:
    columns = [{"group": g} for g in ("a", "a", "a", "b", "a")]
    assert _column_groups(columns) == [{"label": "a", "span": 3}, {"label": "b", "span": 1}, {"label": "a", "span": 1}]
    assert _column_groups([]) == []


def _board_data() -> PageData:
    """Rows ``f0`` (paper, builder COCO), ``f1@abc`` and ``f2`` (builder GQA), ``zz`` (no facts) and ``audit/b``."""
    data = PageData()
    data.families = {
        "f0": _info("f0", 0, provenance="paper 1, ``Table 2``", builder="coco"),
        "f1": _info("f1", 1),
        "f2": _info("f2", 2),
    }
    data.rows = {"f1@abc": ("f1", ItemSet(split="test", items_sha256=AB, source_line="shapes world"))}
    # A's f0 clears chance on its own interval (low 0.505) but not after Benjamini-Hochberg over the board.
    data.cells["f0", "A"] = _cell("f0", "A", 0.6, (0.505, 0.695), audit="failed", source_file="/r/in/a/f0.json")
    data.cells["f1@abc", "A"] = _cell("f1@abc", "A", 0.5, (0.4, 0.6), n_cycles=None, source_file="/r/in/a/f1.json")
    data.cells["f2", "A"] = _cell("f2", "A", 0.5, (0.4, 0.6), audit="passed")
    data.cells["zz", "A"] = _cell("zz", "A", 0.7, (0.6, 0.8))
    data.cells["audit/b", "A"] = _cell("audit/b", "A", 0.4, (0.3, 0.5), audit="within noise")
    for model in ("B", "C", "D"):
        data.cells["f2", model] = _cell("f2", model, 0.5, (0.4, 0.6), source_file=f"/r/in/{model}/f2.json")
    data.inputs = ["/r/in"]
    return data


def test_columns_name_the_row_its_family_the_paper_mark_and_the_group() -> None:
    assert _columns(_board_data()) == [
        {"row": "f0", "key": "f0", "label": "f0", "paper": True, "group": "builder COCO, source GQA"},
        {"row": "f1@abc", "key": "f1", "label": "f1@abc", "paper": False, "group": "builder GQA, source GQA"},
        {"row": "f2", "key": "f2", "label": "f2", "paper": False, "group": "builder GQA, source GQA"},
        {"row": "zz", "key": "zz", "label": "zz", "paper": False, "group": "family facts not recorded"},
    ]


def test_the_family_table_rows_read_facts_calls_and_audits() -> None:
    data = _board_data()
    rows = {r["row"]: r for r in _family_table_rows(data, {("f0", "A"): "chance"})}
    assert list(rows) == ["f0", "f1@abc", "f2", "zz", "audit/b"]
    assert [(r["key"], r["link"], r["group"], r["paper"]) for r in rows.values()] == [
        ("f0", True, "builder COCO, source GQA", True),
        ("f1", True, "builder GQA, source GQA", False),
        ("f2", True, "builder GQA, source GQA", False),
        ("zz", True, "family facts not recorded", False),
        ("audit/b", False, "benchmark (exact cycles found)", False),
    ]
    assert rows["f0"]["provenance"] == [("paper 1, ", False), ("Table 2", True)]
    assert rows["zz"]["provenance"] == [("not recorded", False)]
    assert rows["audit/b"]["provenance"] == [("audited benchmark", False)]
    assert rows["f1@abc"]["item"]["label"] == "f1." + AB[:12]
    # Models in order A, B, C, D; A's f0 cell follows the board's call, not its own interval.
    f0 = rows["f0"]["cells"]
    assert (f0[0]["acc"]["css"], f0[0]["acc"]["symbol"]) == ("chance", "\u25cf")
    assert (f0[0]["verdict"]["text"], f0[0]["verdict"]["symbol"]) == ("failed", "\u2717")
    assert f0[1]["acc"] == {"missing": True}
    assert rows["audit/b"]["cells"][0]["verdict"]["text"] == "within noise"
    # Without calls each cell's own interval decides (its low bound 0.505 is above 0.5).
    assert _family_table_rows(data)[0]["cells"][0]["acc"]["css"] == "above"
    assert _family_table_rows(data, {})[0]["cells"][0]["acc"]["css"] == "above"


# --------------------------------------------------------------------------- benchmark and attribute tables


def test_a_benchmark_row_shows_each_number_and_its_sort_value() -> None:
    data = PageData()
    full = BenchmarkRow("bench", "sub", "A", 0.71234, "length", 0.55555, 0.65432, 7, 40, "f.json")
    full.blind_verdict, full.bag_of_words_ceiling, full.length_ceiling = "within noise", 0.87654, 0.61111
    full.best_blind_ci = (0.5, 0.62)
    empty = BenchmarkRow("bench", "all", "B", None, None, None, None, None, None, "g.json")
    data.benchmarks = [full, empty]
    got = _benchmarks(data)
    assert got[0] == {
        "benchmark": "bench",
        "subset": "sub",
        "model": "A",
        "model_acc": "0.712",
        "model_acc_value": "0.71234",
        "best_blind": "length",
        "blind_acc": "0.556",
        "blind_acc_value": "0.55555",
        "blind_ci": "0.500\u20130.620",
        "blind_ci_value": "0.5",
        "n": 40,
        "n_value": 40,
        "bow": "0.877",
        "bow_value": "0.87654",
        "length": "0.611",
        "length_value": "0.61111",
        "n_cycles": 7,
        "n_cycles_value": 7,
        "cycle_acc": "0.654",
        "cycle_acc_value": "0.65432",
        "wins": False,
        "verdict": "within noise",
    }
    assert got[1] == {
        "benchmark": "bench",
        "subset": "all",
        "model": "B",
        "model_acc": "n/a",
        "model_acc_value": "",
        "best_blind": "n/a",
        "blind_acc": "n/a",
        "blind_acc_value": "",
        "blind_ci": "n/a",
        "blind_ci_value": "",
        "n": "n/a",
        "n_value": "",
        "bow": "n/a",
        "bow_value": "",
        "length": "n/a",
        "length_value": "",
        "n_cycles": None,
        "n_cycles_value": "",
        "cycle_acc": "n/a",
        "cycle_acc_value": "",
        "wins": False,
        "verdict": None,
    }


def test_attribute_rows_read_means_or_plain_numbers_in_the_strategies_order() -> None:
    data = PageData()
    data.inputs = ["/r/in"]
    strategies = {
        "zzz_unknown": {"f1_selectivity": 0.5, "cs": 0.25},
        "aaa_unknown": None,
        "random": {"f1_selectivity": {"mean": 0.123456, "sd": 0.2}, "cs": {"mean": 0.98765, "sd": 0.1}},
    }
    data.attributes = [{"model": "A", "protocol": "p2", "file": "/r/in/x/attr.json", "strategies": strategies}]
    (table,) = _attributes(data)
    assert (table["model"], table["protocol"], table["file"]) == ("A", "p2", "in/x/attr.json")
    assert table["rows"] == [
        {"name": "random", "f1": "0.12", "f1_value": "0.123456", "cs": "0.988", "cs_value": "0.98765"},
        {"name": "aaa_unknown", "f1": "n/a", "f1_value": "", "cs": "n/a", "cs_value": ""},
        {"name": "zzz_unknown", "f1": "0.50", "f1_value": "0.5", "cs": "0.250", "cs_value": "0.25"},
    ]


# --------------------------------------------------------------------------- index and model pages


def test_the_index_names_inputs_counts_pairs_and_the_boards_calls() -> None:
    data = _board_data()
    # A and D have no samples entry; B and C name tasks (of no board row, so no interval changes).
    samples = {"B": {"tasks": {"elsewhere": {}}}, "C": {"tasks": {"elsewhere": {}}}}
    page = index_page(data, samples)
    assert "<title>clip_cycles results</title>" in page and '<link rel="stylesheet" href="assets/page.css">' in page
    assert "Read from <code>in</code>. Models: 4; families: 4; benchmarks: 1." in page
    assert "fewer than 30 cycles" in page  # the declared minimum reaches the legend
    assert OVERALL_HOW in html.unescape(page)
    pairs = re.findall(r'<li><a href="compare/([^"]+)">(\w) vs (\w)</a>( \(no per-cycle samples\))?</li>', page)
    assert "every pair (6)" in page and len(pairs) == 6
    for file, a, b, missing in pairs:
        assert file == f"{model_slug(a)}--{model_slug(b)}.html"
        assert (missing == "") == ({a, b} == {"B", "C"}), (a, b)  # samples only where both sides have them
    by_family = _rows_of(page, "leaderboard")
    assert '<span class="sym" aria-label="not separable from chance (Benjamini-Hochberg over the board)"' in by_family["f0"]
    assert '<a href="families/f0.html">f0</a>' in by_family["f0"] and "★ paper 1, <code>Table 2</code>" in by_family["f0"]
    assert '<th scope="row" data-value="audit/b">audit/b</th>' in by_family["audit/b"]
    groups = re.findall(r'<th scope="colgroup" colspan="(\d+)" class="group">([^<]*)</th>', page)
    assert groups == [("1", "builder COCO, source GQA"), ("2", "builder GQA, source GQA"), ("1", "family facts not recorded")]


def test_a_model_page_shows_each_row_where_it_was_read_and_the_overall() -> None:
    data = _board_data()
    page = model_page(data, "A")
    assert "<title>clip_cycles: A</title>" in page and '<link rel="stylesheet" href="../assets/page.css">' in page
    assert "<h1>Model A</h1>" in page and "fewer than 30 cycles" in page
    # Overall: the mean of A's four family rows (not the audit row), as the page rounds it.
    assert f"Overall: {(0.6 + 0.5 + 0.5 + 0.7) / 4:.3f} [" in page
    assert f", mean over 4 families ({OVERALL_HOW})" in html.unescape(page)
    rows = _rows_of(page, "model-scores")
    assert list(rows) == ["f0", "f1@abc", "f2", "zz", "audit/b"]
    assert rows["f0"].startswith('<th scope="row"><a href="../families/f0.html">f0</a></th>')
    assert rows["f1@abc"].startswith('<th scope="row"><a href="../families/f1.html">f1@abc</a></th>')
    assert rows["audit/b"].startswith('<th scope="row">audit/b</th>')
    assert f'data-value="f1.{AB[:12]}"' in rows["f1@abc"] and "shapes world; split test" in rows["f1@abc"]
    assert '<span class="acc">0.600</span>' in rows["f0"] and "\u2717 failed" in rows["f0"]
    assert '<td class="num">100</td><td><code>in/a/f0.json</code></td>' in rows["f0"]
    assert '<td class="num">n/a</td><td><code>in/a/f1.json</code></td>' in rows["f1@abc"]  # n_cycles not recorded
    other = _rows_of(model_page(data, "B"), "model-scores")
    assert "— not evaluated" in other["f0"] and other["f0"].endswith('<td class="num">n/a</td><td><code></code></td>')
    assert other["f2"].endswith('<td class="num">100</td><td><code>in/B/f2.json</code></td>')
    assert "Overall: 0.500 [" in model_page(data, "B")


# --------------------------------------------------------------------------- family page and example cycles


def _example(kind: str, cycle_id: str, keys: tuple[str, str]) -> ExampleCycle:
    images = (ExampleImage(keys[0], None), ExampleImage(keys[1], None))
    return ExampleCycle(
        kind, cycle_id, 2, "test", images, (f"{cycle_id} one", f"{cycle_id} two"), ((0.5, 0.25), (0.125, 0.75)), 0.875, 1.0
    )


def test_an_example_view_names_every_score_and_keeps_full_precision() -> None:
    example = ExampleCycle(
        "hardest",
        "c7",
        3,
        "val",
        (ExampleImage("i0.png", None), ExampleImage("i1.png", None)),
        ("a dog", "a cat"),
        ((0.123456, 0.2), (0.3, 0.45678)),
        0.123456 + 0.45678 - 0.2 - 0.3,
        0.5,
    )
    view = _example_view(example, ["t0.jpg", None])
    assert (view["kind"], view["cycle_id"], view["seed"], view["split"]) == ("hardest", "c7", 3, "val")
    assert view["figures"] == [
        {"thumb": "t0.jpg", "caption": "a dog", "key": "i0.png"},
        {"thumb": None, "caption": "a cat", "key": "i1.png"},
    ]
    assert view["score_rows"] == [
        [{"name": "s11", "value": "0.123456", "text": "0.1235"}, {"name": "s12", "value": "0.2", "text": "0.2000"}],
        [{"name": "s21", "value": "0.3", "text": "0.3000"}, {"name": "s22", "value": "0.45678", "text": "0.4568"}],
    ]
    assert view["delta"] == "0.0802" and float(view["delta_value"]) == pytest.approx(0.080236, abs=1e-12)
    assert (view["credit"], view["credit_value"]) == ("0.5", "0.5")


def _family_data() -> PageData:
    data = PageData()
    data.inputs = ["/r/in"]
    data.families = {"f1": _info("f1", 1, provenance="paper 2, ``Fig 3``", builder="coco", family="f1fam")}
    data.rows = {
        "f1@abc": ("f1", ItemSet(split="test", items_sha256=AB, source_line="shapes world")),
        "f1@cd": ("f1", ItemSet(split="val", items_sha256=CD, source_line="shapes world")),
    }
    data.cells["f1@abc", "A"] = _cell("f1@abc", "A", 0.7, (0.6, 0.8), n_cycles=40, audit="passed")
    data.cells["f1@abc", "B"] = _cell("f1@abc", "B", 0.55, (0.45, 0.65), n_cycles=None, audit="failed")
    data.cells["f1@cd", "A"] = _cell("f1@cd", "A", 0.65, (0.55, 0.75), n_cycles=50)
    data.cells["zz", "A"] = _cell("zz", "A", 0.6, (0.55, 0.65))
    data.notes = ["f1: two item sets shown apart", "f2: not this one"]
    data.builds = [("/r/in/built", {"source": "coco", "families": {"f1fam": {"counts": {"0": {"test": 5}}}}})]
    data.experiments = {
        "A": {
            "probe": {"families": {"f1": {"available": False, "unavailable_reason": "too few cycles to fit"}}},
            "transfer": {"families": ["f1", "f2"], "mean": {"transfer": [[0.61, 0.72], [0.83, 0.94]]}},
        }
    }
    return data


def test_a_family_page_shows_facts_scores_figures_and_examples() -> None:
    data = _family_data()
    unavailable = FamilyExamples("f1", "B", "", unavailable_reason="the result names no samples file")
    shown = FamilyExamples("f1", "A", "/r/in/a/s.jsonl", row="f1@cd")
    shown.examples = [_example("hardest", "c1", ("k1", "k2")), _example("hardest", "c2", ("k3", "k4"))]
    shown.examples.append(_example("easiest", "c3", ("k5", "k6")))
    thumbs = {"k1": "t1.jpg", "k5": "t5.jpg", "k2": None}  # four of six images have no thumbnail
    page = family_page(data, "f1", [unavailable, shown], thumbs)
    assert "<title>clip_cycles: f1</title>" in page and '<link rel="stylesheet" href="../assets/page.css">' in page
    assert "<h1>Family f1</h1>" in page
    assert "<strong>Predicate.</strong> <code>f1</code> holds" in page
    assert "★ paper 2, <code>Fig 3</code></span>; family <code>f1fam</code> of the COCO builder on the gqa source." in page
    assert "<li>f1: two item sets shown apart</li>" in page and "f2: not this one" not in page
    assert "Built folder <code>in/built</code> (source coco)" in page
    assert "rank sweep unavailable: too few cycles to fit" in page and "<h3>Transfer: A</h3>" in page
    scores = _rows_of(page, "family-scores")
    assert list(scores) == ["f1@abc", "f1@cd"]
    rows = re.findall(r'<tr data-row="([^"]*)"><th scope="row"><a href="../models/([^"]+).html">(\w)</a></th>(.*?)</tr>', page)
    assert [(r, slug, m) for r, slug, m, _ in rows] == [
        ("f1@abc", model_slug("A"), "A"),
        ("f1@abc", model_slug("B"), "B"),
        ("f1@cd", model_slug("A"), "A"),
    ]
    a_abc, b_abc, a_cd = (body for *_, body in rows)
    assert f'data-value="f1.{AB[:12]}"' in a_abc and f'data-value="f1.{CD[:12]}"' in a_cd
    assert '<span class="acc">0.700</span>' in a_abc and "\u2713 passed" in a_abc and a_abc.endswith('<td class="num">40</td>')
    assert '<span class="acc">0.550</span>' in b_abc and "\u2717 failed" in b_abc and b_abc.endswith('<td class="num">n/a</td>')
    assert a_cd.endswith('<td class="num">50</td>')
    # Examples: B's reason, then A's cycles (the loop goes on after an unavailable entry).
    assert "<p>B: no example cycles: the result names no samples file</p>" in page
    assert f"<h3>A · f1.{CD[:12]}</h3>" in page
    assert "The 2 lowest-Delta (hardest)" in page
    assert "<code>in/a/s.jsonl</code>" in page and 'data-samples="in/a/s.jsonl"' in page
    assert " 4 image files the samples name are not reachable from here" in page
    assert page.count('<img src="../thumbs/') == 2
    assert '<img src="../thumbs/t1.jpg" alt="c1 one"' in page and '<img src="../thumbs/t5.jpg" alt="c3 one"' in page
    assert "image not reachable: k2" in page
    assert page.count('data-family="f1"') == 3


def test_a_family_without_recorded_facts_says_so() -> None:
    data = _family_data()
    page = family_page(data, "zz", [], {})
    assert "Predicate, provenance and order: not recorded" in page and "<strong>Predicate.</strong>" not in page
    rows = _rows_of(page, "family-scores")
    assert list(rows) == ["zz"] and rows["zz"].endswith('<td class="num">100</td>')
    data.families["zz"] = FamilyInfo("zz", "gqa", "gqa", "zz", "p", "ours", -1)  # facts of an older record
    assert "Predicate, provenance and order: not recorded" in family_page(data, "zz", [], {})


# --------------------------------------------------------------------------- samples a result names


def _line(task: str, cycle: int, credit: float, items: str | None = AB, **extra: object) -> dict:
    return {
        "task": task,
        "seed": 0,
        "split": "test",
        "cycle_id": f"c{cycle:02d}",
        "image_0": f"i{cycle}.png",
        "image_1": f"i{cycle + 1}.png",
        "caption_0": f"caption {cycle} a",
        "caption_1": f"caption {cycle} b",
        **{"s11": 0.5, "s12": 0.25, "s21": 0.125, "s22": 0.5 + cycle / 100},
        "delta": 0.625 + cycle / 100,
        "credit": credit,
        "items_sha256": items,
        **extra,
    }


def _write_lines(path: Path, lines: list[dict]) -> str:
    content = "".join(json.dumps(line) + "\n" for line in lines).encode()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content)
    return hashlib.sha256(content).hexdigest()


def test_read_named_says_why_a_named_file_cannot_be_shown(tmp_path: Path) -> None:
    data = PageData()
    data.inputs = [str(tmp_path / "in")]
    files: dict = {}
    missing = str(tmp_path / "in" / "m" / "gone.jsonl")
    assert _read_named(missing, "0" * 64, data, files) == "the samples file the result names, in/m/gone.jsonl, is not there"
    assert files[missing] == "the samples file the result names, in/m/gone.jsonl, is not there"
    folder = tmp_path / "in" / "m" / "dir.jsonl"
    folder.mkdir(parents=True)
    assert _read_named(str(folder), "0" * 64, data, files) == (
        "the samples file the result names is not readable "
        "(samples file in/m/dir.jsonl is a directory, not a regular file; only regular files are read)"
    )
    good = tmp_path / "in" / "m" / "s.jsonl"
    sha = _write_lines(good, [_line("cycles/f", 1, 1.0)])
    wrong = "0123456789ab" + "f" * 52
    assert _read_named(str(good), wrong, data, files) == (
        f"samples file in/m/s.jsonl is not the file the result names (sha256 {sha[:12]}, the result recorded 0123456789ab)"
    )
    parsed = _read_named(str(good), sha, data, {})
    assert list(parsed) == ["cycles/f"] and parsed["cycles/f"][0, "c01"]["credit"] == 1.0
    bad = tmp_path / "in" / "m" / "bad.jsonl"
    bad_sha = _write_lines(bad, [_line("cycles/f", 1, 5.0)])  # a credit of 5 is no credit
    why = _read_named(str(bad), bad_sha, data, files)
    assert isinstance(why, str) and "in/m/bad.jsonl" in why and "credit" in why and str(tmp_path) not in why
    assert files[str(bad)] == why
    bad.unlink()
    assert _read_named(str(bad), bad_sha, data, files) == why  # read once


def test_find_samples_uses_only_the_lines_of_each_result_and_says_why_not(tmp_path: Path) -> None:
    data = PageData()
    data.inputs = [str(tmp_path / "in")]
    good = tmp_path / "in" / "a" / "s.jsonl"
    lines = [_line(f"cycles/{fam}", c, float(c % 2)) for fam in ("f", "f2", "w", "x") for c in range(3)]
    sha = _write_lines(good, lines)
    gone = str(tmp_path / "in" / "a" / "gone.jsonl")
    items = ItemSet(items_sha256=AB)

    def cell(row: str, acc: float | None = 0.6, samples: tuple[str, str] | None = (str(good), sha), **extra: object) -> None:
        data.cells[row, "A"] = Cell("A", row, acc, family=row, item_set=extra.pop("item_set", items), samples=samples, **extra)

    cell("audit/b", samples=None)  # a benchmark row: its exact cycles have no samples here
    cell("f")
    cell("f2")
    cell("g")  # the file holds no cycle of cycles/g
    cell("h", samples=None)
    cell("k", samples=(gone, sha))
    cell("u", acc=None, samples=None)  # unavailable: nothing to pair
    cell("w", weights_sha256="b" * 64)
    cell("x", item_set=ItemSet(items_sha256=CD))
    data.cells["audit/b", "B"] = Cell("B", "audit/b", 0.5, family="audit/b")
    found = find_samples(data)
    assert list(found) == ["A"]  # B has only a benchmark row
    entry = found["A"]
    assert sorted(entry["tasks"]) == ["f", "f2"] and entry["paths"] == {"f": str(good), "f2": str(good)}
    assert sorted(entry["tasks"]["f"]) == [(0, "c00"), (0, "c01"), (0, "c02")]
    assert entry["tasks"]["f2"][0, "c01"]["task"] == "cycles/f2"
    assert entry["files"] == ["in/a/s.jsonl"]  # named once for two rows
    not_there = "the samples file the result names, in/a/gone.jsonl, is not there"
    assert entry["rows"] == {
        "g": "in/a/s.jsonl is not of this result: the samples file holds no cycle of cycles/g; shown apart, not used",
        "h": f"the result names no samples file ({NO_SAMPLES})",
        "k": not_there,
        "w": "in/a/s.jsonl is not of this result: the samples are of weights none recorded, the result of "
        f"{'b' * 12}; shown apart, not used",
        "x": "in/a/s.jsonl is not of this result: the samples are of item set "
        f"{AB[:12]}, the result of {CD[:12]}; shown apart, not used",
    }
    # The first reason a file is not used is the one the skipped list keeps.
    assert data.skipped == {str(good): entry["rows"]["g"], gone: not_there}


# --------------------------------------------------------------------------- examples and the page's bootstrap


def _example_data() -> tuple[PageData, dict]:
    data = PageData()
    data.families = {"f1": _info("f1", 1), "f2": _info("f2", 2)}
    data.rows = {"f1@abc": ("f1", ItemSet(items_sha256=AB)), "f1@cd": ("f1", ItemSet(items_sha256=CD))}
    data.cells["f1@abc", "A"] = _cell("f1@abc", "A", 0.5)  # no interval: the page bootstraps one
    data.cells["f1@cd", "A"] = _cell("f1@cd", "A", 0.5)
    data.cells["f1@abc", "B"] = _cell("f1@abc", "B", 0.5)
    data.cells["f2", "A"] = _cell("f2", "A", 0.5, (0.4, 0.6))  # an interval recorded: none bootstrapped
    data.cells["f3", "A"] = _cell("f3", "A", None)  # unavailable: no examples
    cycles = {
        (s, f"c{c:02d}"): {**_line("cycles/f1", c, float((c * 7 + s) % 3 == 0)), "seed": s} for s in (0, 1) for c in range(30)
    }
    samples = {
        "A": {
            "tasks": {"f1@abc": cycles, "f2": cycles},
            "paths": {"f1@abc": "/r/in/a.jsonl", "f2": "/r/in/b.jsonl"},
            "rows": {"f1@cd": "why not"},
        }
    }  # B has no entry at all
    return data, samples


def test_family_examples_read_the_named_samples_or_say_why_not() -> None:
    data, samples = _example_data()
    assert family_examples(data, samples, 0) == {}
    got = family_examples(data, samples, 2, seed=4)
    assert sorted(got) == ["f1", "f2"]
    f1 = {(e.row, e.model): e for e in got["f1"]}
    assert sorted(f1) == [("f1@abc", "A"), ("f1@abc", "B"), ("f1@cd", "A")]
    shown = f1["f1@abc", "A"]
    assert (shown.key, shown.model, shown.samples_file, shown.unavailable_reason) == ("f1", "A", "/r/in/a.jsonl", None)
    assert [e.kind for e in shown.examples] == ["hardest"] * 2 + ["easiest"] * 2 + ["random"] * 2
    # The hardest are the lowest deltas of the first seed: delta grows with the cycle number here.
    assert [e.cycle_id for e in shown.examples[:4]] == ["c00", "c01", "c29", "c28"] and shown.examples[0].seed == 0
    assert shown.bootstrap is not None and shown.bootstrap["low"] < 1 / 3 < shown.bootstrap["high"]
    assert got["f2"][0].bootstrap is None and got["f2"][0].row == "f2" and len(got["f2"][0].examples) == 6
    for (row, model), reason in {("f1@cd", "A"): "why not", ("f1@abc", "B"): NO_SAMPLES}.items():
        entry = f1[row, model]
        assert (entry.key, entry.model, entry.samples_file, entry.examples) == ("f1", model, "", [])
        assert entry.unavailable_reason == reason
    assert len(family_examples(data, samples, 1)["f2"][0].examples) == 3
    # The seed reaches both the random sample and the bootstrap; the default is seed 0.
    again, other, default = (family_examples(data, samples, 2, seed=s) for s in (4, 9, 0))
    assert again["f1"][0].bootstrap == shown.bootstrap and [e.cycle_id for e in again["f1"][0].examples] == [
        e.cycle_id for e in shown.examples
    ]
    assert other["f1"][0].bootstrap != shown.bootstrap
    assert family_examples(data, samples, 2)["f1"][0].bootstrap == default["f1"][0].bootstrap


def test_the_page_bootstrap_fills_only_cells_without_an_interval() -> None:
    data, _ = _example_data()
    recorded = dict(data.cells["f2", "A"].ci)
    boot = {"low": 0.25, "high": 0.75, "computed_by": "the page builder's bootstrap"}
    entries = [
        FamilyExamples("f1", "A", "x", bootstrap=boot, row="f1@abc"),
        FamilyExamples("f1", "B", "x", row="f1@abc"),  # no bootstrap: left without an interval
        FamilyExamples("f2", "A", "x", bootstrap={"low": 0.0, "high": 1.0, "computed_by": "no"}, row="f2"),
        FamilyExamples("f9", "A", "x", bootstrap=boot, row="f9"),  # no such cell
    ]
    apply_bootstrap(data, {"f1": entries[:2], "f2": entries[2:]})
    assert data.cells["f1@abc", "A"].ci == boot and data.cells["f1@abc", "A"].ci_note == "the page builder's bootstrap"
    assert data.cells["f1@abc", "B"].ci is None and data.cells["f1@abc", "B"].ci_note == ""
    assert data.cells["f2", "A"].ci == recorded and data.cells["f2", "A"].ci_note == ""


# --------------------------------------------------------------------------- the site, its writer and the command


def _png(color: tuple[int, int, int]) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (40, 20), color).save(buffer, format="PNG")
    return buffer.getvalue()


@pytest.fixture()
def results(tmp_path: Path) -> Path:
    """Two models' results of one family, each naming a samples file; images i0..i11 exist, the rest do not."""
    out = tmp_path / "in"
    images = tmp_path / "images"
    images.mkdir()
    for i in range(12):
        (images / f"i{i}.png").write_bytes(_png((20 * i, 10, 200 - 10 * i)))
    for n, model in enumerate(("ma", "mb")):
        lines = [
            _line("cycles/shapes_strict_size", c, float((c + n) % 3 != 0), items=None, image_root=str(images)) for c in range(40)
        ]
        sha = _write_lines(out / model / "s.jsonl", lines)
        metrics = {"cycle_acc": 0.6 + 0.1 * n, "n_cycles": 40, "seeds": [0]}
        record = benchmark_record("cycles/shapes_strict_size", model, "a", metrics)
        record["samples"] = {"path": "s.jsonl", "sha256": sha}
        write_json(record, out / model / "r.json")
    return out


def test_the_site_holds_every_page_its_thumbnails_and_a_manifest_of_them(results: Path, tmp_path: Path) -> None:
    site = build_site(collect([results]), n_examples=2, seed=0)
    files = site.files
    models = sorted({m for (_, m) in collect([results]).cells})
    assert len(models) == 2
    for model in models:
        assert f"<h1>Model {html.escape(model)}</h1>" in files[f"models/{model_slug(model)}.html"].decode()
    assert f"compare/{model_slug(models[0])}--{model_slug(models[1])}.html" in files
    family = files["families/shapes_strict_size.html"].decode()
    shown = set(re.findall(r'<img src="../thumbs/([^"]+)" alt="([^"]*)"', family))
    assert shown, "no thumbnail on the family page"
    for name, _ in shown:
        content = files[f"thumbs/{name}"]
        assert content[:2] == b"\xff\xd8"  # a JPEG
        key = re.fullmatch(r"([0-9a-f]{20})-96\.jpg", name).group(1)
        sources = {hashlib.sha256(p.read_bytes()).hexdigest()[:20]: p for p in (tmp_path / "images").iterdir()}
        assert key in sources  # named by its source image's content
    unreachable = set(re.findall(r"image not reachable: (i\d+\.png)", family))
    assert unreachable and all(int(k[1:-4]) >= 12 for k in unreachable)  # only the images that are not there
    thumbs = sorted(p for p in files if p.startswith("thumbs/"))
    assert len(thumbs) == len({n for n, _ in shown})
    # The model page's overall is the board's (one computation per model, with the samples).
    index = files["index.html"].decode()
    for model in models:
        board = re.search(rf'<tr data-model="{re.escape(html.escape(model))}">.*?<span class="ci"[^>]*>([^<]*)</span>', index)
        low, high = board.group(1).split("\u2013")
        assert f" [{low}, {high}], mean over 1 families" in files[f"models/{model_slug(model)}.html"].decode()
    manifest = {
        path: {"bytes": len(content), "sha256": hashlib.sha256(content).hexdigest()}
        for path, content in files.items()
        if path != "page_manifest.json"
    }
    text = files["page_manifest.json"].decode()
    assert json.loads(text) == {"files": manifest}
    assert text == json.dumps({"files": manifest}, indent=2, sort_keys=True) + "\n"
    assert text.startswith('{\n  "files": {\n    "assets/page.css": {\n      "bytes": ')


def test_the_seed_reaches_the_examples_and_the_default_is_seed_0(results: Path) -> None:
    def family(**kwargs: int) -> bytes:
        return build_site(collect([results]), 2, **kwargs).files["families/shapes_strict_size.html"]

    zero = family(seed=0)
    assert family(seed=7) != zero and family(seed=7) == family(seed=7)
    assert family() == zero


def test_write_site_refuses_what_is_not_an_older_page(tmp_path: Path) -> None:
    site = Site({"index.html": b"<p>x</p>"})
    a_file = tmp_path / "file"
    a_file.write_text("x")
    with pytest.raises(ValueError, match=rf"^--out {re.escape(str(a_file))} is a file; give a folder for the page$"):
        write_site(site, a_file)
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "page_manifest.json").write_text("[1, 2]")  # JSON, but not a manifest
    with pytest.raises(ValueError, match=rf"^{re.escape(str(broken / 'page_manifest.json'))} is not a page manifest \("):
        write_site(site, broken)
    older = tmp_path / "older"
    older.mkdir()
    (older / "page_manifest.json").write_text(json.dumps({"files": {"caf\u00e9.html": {"bytes": 1}}}), encoding="utf-8")
    assert write_site(site, older) == older / "index.html" and (older / "index.html").read_bytes() == b"<p>x</p>"
    mount = tmp_path / "mount"
    (mount / "lost+found").mkdir(parents=True)  # a fresh file system's mount point
    assert write_site(site, mount).read_bytes() == b"<p>x</p>"
    long_name = "n" * 300
    with pytest.raises(ValueError, match=r"^page --out .*: the name n+\.\.\.n+ has 300 bytes"):
        write_site(site, tmp_path / long_name)
    site.add(f"families/{long_name}.html", "<p>y</p>")
    with pytest.raises(ValueError, match=r"^page --out .*: the name n+\.\.\.n+\.html has 305 bytes"):
        write_site(site, tmp_path / "fresh")


def test_build_page_checks_its_arguments_and_passes_budget_and_seed(results: Path, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"^--examples must be 0 or more, not -1$"):
        build_page([results], tmp_path / "never", n_examples=-1)
    index = build_page([results], tmp_path / "none", n_examples=0)
    assert "No example cycles" in (tmp_path / "none" / "families" / "shapes_strict_size.html").read_text()
    assert index == tmp_path / "none" / "index.html"
    (tmp_path / "e1").mkdir()
    (tmp_path / "e2").mkdir()
    with pytest.raises(ValueError, match=rf"^no results found in {re.escape(str(tmp_path / 'e1'))}, "):
        build_page([tmp_path / "e1", tmp_path / "e2"], tmp_path / "never")
    with pytest.raises(ValueError, match=r"over the budget of 1000 \(--max-bytes\)"):
        build_page([results], tmp_path / "never", max_bytes=1000)

    def family(out: str, **kwargs: int) -> str:
        build_page([results], tmp_path / out, n_examples=2, **kwargs)
        return (tmp_path / out / "families" / "shapes_strict_size.html").read_text()

    zero = family("s0", seed=0)
    assert family("default") == zero
    seven = family("s7", seed=7)
    assert seven != zero and family("s7b", seed=7) == seven
