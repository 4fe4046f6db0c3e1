"""``clip-cycles page`` compares only equals: results share a row only when their ``items_sha256`` match (issue 36)."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pytest

from clip_cycles.cli import main
from clip_cycles.evaluation.page import build_page
from clip_cycles.evaluation.page_data import collect
from clip_cycles.experiments.item_sets import NOT_RECORDED, ItemSet, item_set_of
from clip_cycles.results import benchmark_record, write_json

WORLD_A = "shapes world: 1000 images, 64 px, seed 0, val 0.25"
WORLD_B = "shapes world: 400 images, 96 px, seed 0, val 0.25"
#: The structured sources the lines name (what a record's ``source`` holds).
SOURCES = {
    WORLD_A: {"kind": "shapes", "builder": "coco", "world": {"kind": "shapes", "n_images": 1000, "seed": 0, "image_size": 64}},
    WORLD_B: {"kind": "shapes", "builder": "coco", "world": {"kind": "shapes", "n_images": 400, "seed": 0, "image_size": 96}},
}
FAMILY = "shapes_strict_size"


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _metrics(cycle_acc: float) -> dict:
    return {"cycle_acc": cycle_acc, "cycle_acc_sd": 0.0, "n_cycles": 40, "seeds": [0], "tie_tolerance": 1e-9}


def _write(path: Path, pretrained: str, cycle_acc: float, *, split: str | None, source: str | None, items: str | None) -> None:
    record = benchmark_record(f"cycles/{FAMILY}", "m", pretrained, _metrics(cycle_acc))
    structured = {**SOURCES[source], "annotations": {}} if source is not None else None
    for name, value in (("split", split), ("source", structured), ("source_line", source), ("items_sha256", items)):
        if value is not None:
            record[name] = value
    write_json(record, path)


def _row(html: str, row: str) -> str:
    found = re.search(rf'<tr data-row="{re.escape(row)}">.*?</tr>', html, re.S)
    assert found, f"no leaderboard row {row!r}"
    return found.group(0)


def _value(row_html: str, n: int) -> str:
    """The ``data-value`` of the ``n``-th CycleAcc cell (one per model, in model order) of a leaderboard row."""
    return re.findall(r'<td class="num [a-z]+" data-value="([^"]*)"', row_html)[n]


def test_two_worlds_are_two_rows_with_a_note_naming_what_differs(tmp_path: Path) -> None:
    results = tmp_path / "in"
    a, b = _sha("world a"), _sha("world b")
    _write(results / "a.json", "x", 0.9, split="test", source=WORLD_A, items=a)
    _write(results / "b.json", "y", 0.4, split="test", source=WORLD_B, items=b)
    data = collect([results])
    rows = data.family_rows()
    assert sorted(rows) == sorted([f"{FAMILY}@{a[:12]}", f"{FAMILY}@{b[:12]}"])
    assert data.cells[f"{FAMILY}@{a[:12]}", "m (x)"].cycle_acc == 0.9
    assert (f"{FAMILY}@{a[:12]}", "m (y)") not in data.cells  # never in one row with the other world's number
    assert len(data.notes) == 1 and "n_images (1000 vs 400)" in data.notes[0] and "image_size (64 vs 96)" in data.notes[0]
    assert "seed" not in data.notes[0].split("differ in")[1]  # only what differs is named

    html = build_page([results], tmp_path / "site").read_text()
    row_a, row_b = _row(html, f"{FAMILY}@{a[:12]}"), _row(html, f"{FAMILY}@{b[:12]}")
    assert WORLD_A in row_a and WORLD_B in row_b
    assert _value(row_a, 0) == "0.9" and "not evaluated" in row_a  # model y has no number on world A
    assert _value(row_b, 1) == "0.4" and "not evaluated" in row_b
    assert "item-set-notes" in html and "n_images (1000 vs 400)" in html
    family = (tmp_path / "site" / "families" / f"{FAMILY}.html").read_text()
    line = re.search(r'<p class="item-set-line">.*?</p>', family, re.S).group(0)
    assert "Item set." in line and WORLD_A in line and WORLD_B in line


def test_one_model_on_two_worlds_keeps_both_numbers(tmp_path: Path) -> None:
    results = tmp_path / "in"
    a, b = _sha("a"), _sha("b")
    _write(results / "a.json", "x", 0.9, split="test", source=WORLD_A, items=a)
    _write(results / "b.json", "x", 0.4, split="test", source=WORLD_B, items=b)
    data = collect([results])
    assert not data.skipped  # today the second is skipped as "already read"
    assert {c.cycle_acc for c in data.cells.values()} == {0.9, 0.4}


def test_the_same_item_set_is_one_row_without_a_note(tmp_path: Path) -> None:
    results = tmp_path / "in"
    same = _sha("same")
    _write(results / "a.json", "x", 0.9, split="test", source=WORLD_A, items=same)
    _write(results / "b.json", "y", 0.4, split="test", source=WORLD_A, items=same)
    data = collect([results])
    assert data.family_rows() == [FAMILY]
    assert data.cells[FAMILY, "m (x)"].cycle_acc == 0.9 and data.cells[FAMILY, "m (y)"].cycle_acc == 0.4
    assert data.notes == []
    html = build_page([results], tmp_path / "site").read_text()
    row = _row(html, FAMILY)
    assert (_value(row, 0), _value(row, 1)) == ("0.9", "0.4") and WORLD_A in row
    assert "item-set-notes" not in html


def test_another_split_is_another_row_and_the_note_names_both_splits(tmp_path: Path) -> None:
    results = tmp_path / "in"
    _write(results / "a.json", "x", 0.9, split="test", source=WORLD_A, items=_sha("t"))
    _write(results / "b.json", "x", 0.7, split="validation", source=WORLD_A, items=_sha("v"))
    data = collect([results])
    assert len(data.family_rows()) == 2
    assert len(data.notes) == 1 and re.search(r"split (test vs validation|validation vs test)", data.notes[0])
    assert "two worlds" not in data.notes[0]


def test_results_without_item_sets_say_not_recorded(tmp_path: Path) -> None:
    results = tmp_path / "in"
    _write(results / "a.json", "x", 0.9, split=None, source=None, items=None)
    _write(results / "b.json", "y", 0.4, split=None, source=None, items=None)
    data = collect([results])
    assert data.family_rows() == [FAMILY]  # old results keep their one row ...
    assert len(data.notes) == 1 and data.notes[0].startswith(NOT_RECORDED) and FAMILY in data.notes[0]
    html = build_page([results], tmp_path / "site").read_text()
    assert NOT_RECORDED in _row(html, FAMILY) and "not known to be of the same items" in html  # ... with the reason


def test_a_recorded_and_an_unrecorded_result_are_apart(tmp_path: Path) -> None:
    results = tmp_path / "in"
    _write(results / "a.json", "x", 0.9, split="test", source=WORLD_A, items=_sha("a"))
    _write(results / "b.json", "y", 0.4, split=None, source=None, items=None)
    data = collect([results])
    assert sorted(data.family_rows()) == sorted([f"{FAMILY}@{_sha('a')[:12]}", f"{FAMILY}@not-recorded"])
    assert any(NOT_RECORDED in note and "shown apart" in note for note in data.notes)


def test_a_malformed_items_sha256_is_skipped_and_named(tmp_path: Path) -> None:
    results = tmp_path / "in"
    _write(results / "a.json", "x", 0.9, split="test", source=WORLD_A, items="abc")
    data = collect([results])
    assert "items_sha256" in data.skipped[str(results / "a.json")] and not data.cells


def test_the_item_set_is_read_from_the_nested_detail_too(tmp_path: Path) -> None:
    """A record written by results.write_result: the page reads its detail, which must carry the fields as well."""
    from clip_cycles.results import write_result

    record = benchmark_record(f"cycles/{FAMILY}", "m", "x", _metrics(0.9))
    record.update(split="test", source=SOURCES[WORLD_B], source_line=WORLD_B, items_sha256=_sha("n"))
    write_result(record, tmp_path / "in" / "r.json")
    data = collect([tmp_path / "in"])
    assert data.cells[FAMILY, "m (x)"].item_set == ItemSet("test", _sha("n"), SOURCES[WORLD_B], WORLD_B)


def test_the_world_is_read_from_the_structured_source_never_from_its_line() -> None:
    """The line is for people: a line that names another world than the object changes nothing a reader compares."""
    item = item_set_of({"items_sha256": _sha("z"), "source": SOURCES[WORLD_A], "source_line": WORLD_B})
    assert item.world() == SOURCES[WORLD_A]["world"]
    old = item_set_of({"items_sha256": _sha("o"), "source": WORLD_A})  # written before source was an object
    assert old.world() is None and old.source is None and old.line == WORLD_A


def test_two_old_results_with_line_only_sources_are_apart_saying_the_structure_is_not_recorded(tmp_path: Path) -> None:
    results = tmp_path / "in"
    for name, line, acc in (("a", WORLD_A, 0.9), ("b", WORLD_B, 0.4)):
        record = benchmark_record(f"cycles/{FAMILY}", "m", name, _metrics(acc))
        record.update(split="test", source=line, items_sha256=_sha(name))
        write_json(record, results / f"{name}.json")
    data = collect([results])
    assert len(data.family_rows()) == 2 and len(data.notes) == 1
    assert "not recorded" in data.notes[0] and "n_images" not in data.notes[0]  # no world parsed from prose


def test_item_set_fields_fall_back_to_the_metrics() -> None:
    item = item_set_of({"items_sha256": _sha("z")}, {"split": "validation", "source": SOURCES[WORLD_A], "source_line": WORLD_A})
    assert item == ItemSet("validation", _sha("z"), SOURCES[WORLD_A], WORLD_A) and item.label("f") == f"f.{_sha('z')[:12]}"


def test_an_old_record_shows_its_family_as_not_recorded_never_todays_registry(tmp_path: Path) -> None:
    from clip_cycles.data.families.registry import family_builder_source, get_family

    today = get_family(family_builder_source("strict_size"), "strict_size").predicate
    results = tmp_path / "in"
    _write(results / "a.json", "x", 0.9, split="test", source=WORLD_A, items=_sha("a"))
    build_page([results], tmp_path / "site")
    family = (tmp_path / "site" / "families" / f"{FAMILY}.html").read_text()
    assert "not recorded" in family and today not in family
    # A record that carries its family's facts is shown with them, whatever today's registry says.
    record = json.loads((results / "a.json").read_text())
    record["family"] = {"builder": "coco", "family": "strict_size", "source": "shapes", "predicate": "as it was then"}
    record["family"].update(provenance="paper 1: then", order=7)
    write_json(record, results / "a.json")
    build_page([results], tmp_path / "site")
    family = (tmp_path / "site" / "families" / f"{FAMILY}.html").read_text()
    assert "as it was then" in family and today not in family


def test_page_command_on_two_worlds_exits_zero_and_shows_them_apart(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    results = tmp_path / "in"
    _write(results / "a.json", "x", 0.9, split="test", source=WORLD_A, items=_sha("a"))
    _write(results / "b.json", "x", 0.4, split="test", source=WORLD_B, items=_sha("b"))
    assert main(["page", str(results), "--out", str(tmp_path / "site")]) == 0
    html = (tmp_path / "site" / "index.html").read_text()
    assert html.count(f'<tr data-row="{FAMILY}@') == 2 and "different item sets, shown apart" in html
