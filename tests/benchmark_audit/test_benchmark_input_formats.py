"""The benchmark rows the adapters read are declared (benchmark_audit.input_formats): valid published-format
rows pass, each crafted violation is refused with the file, the row and the field named."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from benchmark_formats import (
    aro_order_cases,
    aro_vg_rows,
    cycle_table_rows,
    sugarcrepe_items,
    winoground_rows,
    write_aro,
    write_table,
    write_winoground,
)

from clip_cycles.benchmark_audit.adapters import load_benchmark
from clip_cycles.benchmark_audit.input_formats import (
    AroOrderCase,
    AroVisualGenomeItem,
    ComparisonEdge,
    SugarCrepeItem,
    WinogroundBlock,
    checked_row,
)


def test_valid_rows_of_every_format_pass_unchanged() -> None:
    for model, rows in (
        (SugarCrepeItem, list(sugarcrepe_items()["add_obj"].values())),
        (AroVisualGenomeItem, aro_vg_rows()),
        (AroOrderCase, aro_order_cases()),
        (WinogroundBlock, winoground_rows()),
        (ComparisonEdge, cycle_table_rows(2)),
    ):
        for number, row in enumerate(rows):
            parsed = checked_row(model, row, "f.json", f"row {number}")
            assert {k: parsed.model_dump()[k] for k in model.model_fields if k in row} == {
                k: (str(row[k]) if k == "comparison_id" else row[k]) for k in model.model_fields if k in row
            }
            assert parsed.model_extra == {k: v for k, v in row.items() if k not in model.model_fields}  # extra columns kept
    # A CSV cell is text: the table's weight is read as a number from it.
    assert (
        checked_row(ComparisonEdge, {"image": "a.png", "caption": "c", "weight": "-1", "comparison_id": 7}, "t.csv", "x").weight
        == -1.0
    )


def test_aro_box_and_order_violations_name_file_item_and_field(tmp_path: Path) -> None:
    write_aro(tmp_path / "aro")
    rows = aro_vg_rows()
    rows[1]["bbox_w"] = 0
    (tmp_path / "aro" / "visual_genome_relation.json").write_text(json.dumps(rows))
    with pytest.raises(
        ValueError,
        match=r"visual_genome_relation\.json: item 1: field 'bbox_w' must be a positive number: the box's width, got 0 ",
    ):
        load_benchmark("aro", tmp_path / "aro")
    rows[1]["bbox_w"] = True  # not a number, though Python would take it as 1
    (tmp_path / "aro" / "visual_genome_relation.json").write_text(json.dumps(rows))
    with pytest.raises(ValueError, match=r"item 1: field 'bbox_w' must be a positive number: the box's width, got True"):
        load_benchmark("aro", tmp_path / "aro")
    (tmp_path / "aro" / "visual_genome_relation.json").write_text(json.dumps(aro_vg_rows()))
    cases = aro_order_cases()
    cases[1]["caption_options"] = ["only the true caption"]
    (tmp_path / "aro" / "coco_order.json").write_text(json.dumps(cases))
    with pytest.raises(ValueError, match=r"coco_order\.json: test case 1: field 'caption_options' must be a list of the true"):
        load_benchmark("aro", tmp_path / "aro")
    cases[1]["caption_options"] = ["a dog", "  "]
    (tmp_path / "aro" / "coco_order.json").write_text(json.dumps(cases))
    with pytest.raises(ValueError, match=r"test case 1: field 'caption_options\[1\]' must be a non-empty string, got '  '"):
        load_benchmark("aro", tmp_path / "aro")


def test_winoground_and_table_violations_name_file_row_and_field(tmp_path: Path) -> None:
    rows = write_winoground(tmp_path / "wg")
    rows[2]["caption_1"] = 5
    (tmp_path / "wg" / "examples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(ValueError, match=r"examples\.jsonl: row 2 \(id 2\): field 'caption_1' must be a non-empty string"):
        load_benchmark("winoground", tmp_path / "wg")
    table = cycle_table_rows(2)
    del table[2]["comparison_id"]
    with pytest.raises(ValueError, match=r"t\.jsonl: line 3: field 'comparison_id' is missing"):
        load_benchmark("comparison_table", write_table(tmp_path / "t.jsonl", table))
    table = cycle_table_rows(2)
    table[0]["weight"] = "inf"
    with pytest.raises(ValueError, match=r"t\.csv: line 2: field 'weight' must be a number, finite"):
        load_benchmark("comparison_table", write_table(tmp_path / "t.csv", table))
    with pytest.raises(ValueError, match=r"f\.json: row 0 must be an object with filename, caption, negative_caption"):
        checked_row(SugarCrepeItem, ["a.jpg", "a", "b"], "f.json", "row 0")
