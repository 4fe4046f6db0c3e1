"""``clip-cycles report`` never merges results of one family on different item sets (issue 36)."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pytest

from clip_cycles.experiments.item_sets import NOT_RECORDED
from clip_cycles.experiments.report import benchmark_sections, build_report
from clip_cycles.results import benchmark_record, write_json, write_result

WORLD_A = "shapes world: 1000 images, 64 px, seed 0, val 0.25"
WORLD_B = "shapes world: 400 images, 96 px, seed 0, val 0.25"
#: The structured sources the lines name (a record's ``source``; ``source_line`` is the line).
SOURCES = {
    WORLD_A: {"kind": "shapes", "builder": "coco", "world": {"n_images": 1000, "seed": 0, "image_size": 64}, "annotations": {}},
    WORLD_B: {"kind": "shapes", "builder": "coco", "world": {"n_images": 400, "seed": 0, "image_size": 96}, "annotations": {}},
}


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _write(path: Path, family: str, cycle_acc: float, **identity: str) -> None:
    metrics = {"cycle_acc": cycle_acc, "cycle_acc_sd": 0.0, "n_cycles": 30, "seeds": [0], "tie_tolerance": 1e-9}
    metrics.update(text_acc=0.5, image_acc=0.5, group_acc=0.25)
    record = benchmark_record(f"cycles/{family}", "m", "x", metrics)
    record.update(identity)
    if isinstance(identity.get("source"), str) and identity["source"] in SOURCES:
        record.update(source=SOURCES[identity["source"]], source_line=identity["source"])
    write_result(record, path)


def _table_row(text: str, row: str) -> str:
    return next(line for line in text.splitlines() if line.startswith(f"| {row} |"))


def test_two_worlds_are_two_rows_with_the_world_named_and_a_note(tmp_path: Path) -> None:
    a, b = _sha("a"), _sha("b")
    _write(tmp_path / "r_a.json", "shapes_strict_size", 0.9, split="test", source=WORLD_A, items_sha256=a)
    _write(tmp_path / "r_b.json", "shapes_strict_size", 0.4, split="test", source=WORLD_B, items_sha256=b)
    text = build_report(tmp_path).markdown.read_text()
    row_a = _table_row(text, f"shapes_strict_size@{a[:12]}")
    row_b = _table_row(text, f"shapes_strict_size@{b[:12]}")
    assert "0.9000" in row_a and WORLD_A in row_a and "0.4000" in row_b and WORLD_B in row_b
    assert not any(line.startswith("| shapes_strict_size |") for line in text.splitlines())  # never merged
    note = next(line for line in text.splitlines() if line.startswith("- shapes_strict_size: "))
    assert "two worlds" in note and re.search(r"image_size \((64 vs 96|96 vs 64)\), n_images \((1000 vs 400|400 vs 1000)\)", note)


def test_the_same_item_set_keeps_one_row_per_family(tmp_path: Path) -> None:
    same = _sha("s")
    _write(tmp_path / "r1.json", "shapes_strict_size", 0.9, split="test", source=WORLD_A, items_sha256=same)
    _write(tmp_path / "r2.json", "shapes_coarse_object", 0.8, split="test", source=WORLD_A, items_sha256=_sha("c"))
    text = build_report(tmp_path).markdown.read_text()
    assert WORLD_A in _table_row(text, "shapes_strict_size") and "0.8000" in _table_row(text, "shapes_coarse_object")
    assert "Numbers share a row only" not in text


def test_a_second_result_on_the_same_item_set_is_refused_naming_both_files(tmp_path: Path) -> None:
    same = _sha("s")
    _write(tmp_path / "r1.json", "shapes_strict_size", 0.9, split="test", source=WORLD_A, items_sha256=same)
    _write(tmp_path / "r2.json", "shapes_strict_size", 0.8, split="test", source=WORLD_A, items_sha256=same)
    with pytest.raises(ValueError, match=r"r2\.json: a second result .* as r1\.json"):
        benchmark_sections(tmp_path)


def test_a_validation_run_beside_a_test_run_is_its_own_row(tmp_path: Path) -> None:
    _write(tmp_path / "t.json", "shapes_strict_size", 0.9, split="test", source=WORLD_A, items_sha256=_sha("t"))
    _write(tmp_path / "v.json", "shapes_strict_size", 0.7, split="validation", source=WORLD_A, items_sha256=_sha("v"))
    zero = benchmark_sections(tmp_path)["zero_shot"]
    assert sorted(zero["families"]) == sorted([f"shapes_strict_size@{_sha('t')[:12]}", f"shapes_strict_size@{_sha('v')[:12]}"])
    assert len(zero["item_set_notes"]) == 1 and "two worlds" not in zero["item_set_notes"][0]
    assert re.search(r"split (test vs validation|validation vs test)", zero["item_set_notes"][0])


def test_results_without_item_sets_say_not_recorded(tmp_path: Path) -> None:
    _write(tmp_path / "r1.json", "shapes_strict_size", 0.9)
    write_json(
        benchmark_record("cycles/shapes_box_size", "m", "x", {"available": False, "unavailable_reason": "few"}),
        tmp_path / "u.json",
    )
    text = build_report(tmp_path).markdown.read_text()
    assert _table_row(text, "shapes_strict_size").rstrip(" |").endswith(NOT_RECORDED)
    assert _table_row(text, "shapes_box_size").startswith("| shapes_box_size | unavailable: few |")
    assert re.search(rf"^- {NOT_RECORDED} for shapes_box_size, shapes_strict_size", text, re.M)
