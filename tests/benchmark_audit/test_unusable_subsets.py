"""An odd piece never stops the rest: a subset holding ``[]``, an empty file, a subset whose every item is
dropped, or an unreadable file is a row (count 0, reason) and every other subset is still audited.

The fixtures are VL-CheckList's, VALSE's and SugarCrepe's published shapes; the empty ``swig_place`` files
are laid out as VL-CheckList publishes them (``Object/Size/swig_size/swig_place/swig_place_small.json``
holding ``[]``).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from benchmark_formats import write_sugarcrepe
from benchmark_formats_published import write_valse, write_vl_checklist

from clip_cycles.benchmark_audit.report import markdown_table
from clip_cycles.benchmark_audit.run import audit_benchmark
from clip_cycles.cli import main

SWIG_PLACE = "Object/Size/swig_size/swig_place/swig_place_{}"


def write_odd_vl_checklist(root: Path) -> dict[str, str]:
    """The two usable fixture subsets, the three published empty ones, an empty file, an all-dropped one, a broken one."""
    write_vl_checklist(root)
    odd = {}
    for size in ("small", "medium", "large"):
        name = SWIG_PLACE.format(size)
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / f"{name}.json").write_text("[]")
        odd[name] = "empty: the subset holds no item"
    (root / "Attribute/vg/empty_file.json").write_text("")
    odd["Attribute/vg/empty_file"] = "empty file"
    # Every negative equals its positive: every item dropped, and counted.
    (root / "Attribute/vg/same.json").write_text(json.dumps([["a.jpg", {"POS": ["red car"], "NEG": ["red  car"]}]]))
    odd["Attribute/vg/same"] = "every item dropped (skipped: {'negative_equal_to_caption': 1})"
    (root / "Relation/broken.json").write_text('[["a.jpg", {"POS": ["x"]')
    odd["Relation/broken"] = "not valid JSON"
    return odd


def test_vl_checklist_with_odd_pieces_audits_every_other_subset(tmp_path: Path) -> None:
    odd = write_odd_vl_checklist(tmp_path)
    audit = audit_benchmark("vl_checklist", tmp_path)
    assert [a.name for a in audit.audits] == ["Attribute/vg/color", "Relation/swig/action"]
    assert audit.summary["n_comparisons"] == 4 + 3  # the usable subsets alone, pooled
    assert set(audit.unusable) == set(odd)
    for name, reason in odd.items():
        row = audit.unusable[name]
        assert row["n_comparisons"] == 0 and reason in row["reason"], (name, row)
    assert audit.unusable["Attribute/vg/same"]["skipped"] == {"negative_equal_to_caption": 1}
    metrics = audit.metrics()
    assert metrics["unusable_subsets"] == audit.unusable and set(metrics["subsets"]) == {a.name for a in audit.audits}
    table = markdown_table(audit)
    for size in ("small", "medium", "large"):
        assert f"| {SWIG_PLACE.format(size)} | 0 | 0 | not audited: empty: the subset holds no item |" in table


def test_an_audit_of_only_usable_subsets_keeps_its_record(tmp_path: Path) -> None:
    write_vl_checklist(tmp_path)
    audit = audit_benchmark("vl_checklist", tmp_path)
    assert audit.unusable == {} and "unusable_subsets" not in audit.metrics()
    assert "not audited" not in markdown_table(audit)


def test_valse_and_sugarcrepe_empty_and_unreadable_pieces(tmp_path: Path) -> None:
    write_valse(tmp_path / "valse")
    (tmp_path / "valse" / "plurals.json").write_text("{}")
    (tmp_path / "valse" / "counting-hard.json").write_bytes(b"\xff\xfe not utf-8")
    audit = audit_benchmark("valse", tmp_path / "valse")
    assert {a.name for a in audit.audits} == {"existence", "actant-swap"}
    assert audit.unusable["plurals"]["reason"] == "empty: the subset holds no item"
    assert "not UTF-8" in audit.unusable["counting-hard"]["reason"]

    write_sugarcrepe(tmp_path / "sc", images=False)
    (tmp_path / "sc" / "swap_obj.json").write_text("{}")
    (tmp_path / "sc" / "add_att.json").write_text("")
    audit = audit_benchmark("sugarcrepe", tmp_path / "sc")
    assert "swap_obj" in audit.unusable and "add_att" in audit.unusable and "add_obj" in {a.name for a in audit.audits}


def test_nothing_usable_is_one_clear_error(tmp_path: Path) -> None:
    (tmp_path / "a.json").write_text("[]")
    with pytest.raises(ValueError, match=r"no subset has a comparison to audit \(a: empty: the subset holds no item\)"):
        audit_benchmark("vl_checklist", tmp_path)


def test_command_completes_names_the_skipped_and_exits_0(tmp_path: Path, capsys) -> None:
    odd = write_odd_vl_checklist(tmp_path / "vl")
    code = main(["audit-benchmark", "vl_checklist", "--root", str(tmp_path / "vl"), "--out", str(tmp_path / "out")])
    captured = capsys.readouterr()
    assert code == 0 and "Traceback" not in captured.err
    assert f"{len(odd)} subset(s) not audited" in captured.err
    assert all(name in captured.err for name in odd)
    record = json.loads((tmp_path / "out" / "audit_vl_checklist.json").read_text())
    assert set(record["metrics"]["unusable_subsets"]) == set(odd)
    assert "| Object/Size/swig_size/swig_place/swig_place_small | 0 | 0 |" in captured.out
