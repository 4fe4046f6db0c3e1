"""page_data's discovery and record classification on small hand-written files (one tmp folder each).

Expected rows, cells, skips and notes are written out from the files the test writes.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clip_cycles.evaluation import page_data as pd
from clip_cycles.evaluation.page_data import Cell, FamilyInfo, PageData, add_record, assign_rows, collect
from clip_cycles.experiments.item_sets import NOT_RECORDED, ItemSet

SHA_A = "a" * 64
SHA_B = "b" * 64
FACTS = {"builder": "coco", "family": "strict", "source": "coco", "predicate": "p", "provenance": "paper 1", "order": 3}


def _write(path: Path, value) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value))
    return path


def _cycles(name: str, acc: float, model: str = "M", **extra) -> dict:
    return {
        "dataset": f"cycles/{name}",
        "model": model,
        "pretrained": "openai",
        "task": "cycles",
        "metrics": {"cycle_acc": acc},
        **extra,
    }


def test_json_files_are_sorted_depth_bounded_and_skip_links_and_hidden(tmp_path: Path) -> None:
    root = tmp_path / "r"
    _write(root / "b.json", {})
    _write(root / "a.json", {})
    _write(root / ".hidden.json", {})
    _write(root / "page_manifest.json", {})
    _write(root / "notes.txt", {})
    _write(root / "d1" / "d2" / "d3" / "d4" / "deep.json", {})  # in a folder at depth 4: read
    _write(root / "d1" / "d2" / "d3" / "d4" / "d5" / "deeper.json", {})  # depth 5: not searched
    (root / "link.json").symlink_to(root / "a.json")
    data = PageData()
    found = [p.relative_to(root).as_posix() for p in pd._json_files(root, data)]
    assert found == ["a.json", "b.json", "d1/d2/d3/d4/deep.json"]
    assert data.skipped == {
        str(root / "link.json"): "not a regular file: not read",
        str(root / "d1" / "d2" / "d3" / "d4"): f"deeper than 4 folders below {root}: not searched",
    }
    # A file given directly is read; a linked input is named; a missing one is refused.
    assert list(pd._json_files(root / "a.json", data)) == [root / "a.json"]
    (tmp_path / "ln").symlink_to(root)
    assert list(pd._json_files(tmp_path / "ln", data)) == []
    assert data.skipped[str(tmp_path / "ln")] == "a symbolic link: not followed"
    with pytest.raises(FileNotFoundError, match="results input .* does not exist"):
        list(pd._json_files(tmp_path / "missing", data))


def test_read_bounds_size_and_names_invalid_json(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = PageData()
    good = _write(tmp_path / "g.json", {"x": 1})
    assert pd._read(good, data) == {"x": 1}
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    assert pd._read(bad, data) is None and data.skipped[str(bad)].startswith("not valid JSON (")
    size = good.stat().st_size
    monkeypatch.setattr(pd, "MAX_JSON_BYTES", size)
    assert pd._read(good, data) == {"x": 1}  # at the bound: read
    monkeypatch.setattr(pd, "MAX_JSON_BYTES", size - 1)
    assert pd._read(good, data) is None
    assert data.skipped[str(good)] == f"{size} bytes, over the {size - 1}-byte bound for a result JSON"


def test_records_are_classified_and_the_rest_named(tmp_path: Path) -> None:
    root = tmp_path / "res"
    _write(root / "c.json", _cycles("coco_strict", 0.75, items_sha256=SHA_A, family=FACTS))
    _write(root / "list.json", [1, 2])
    _write(root / "other.json", {"hello": 1})
    _write(root / "cb.json", {"dataset": "imagenet", "model": "M", "pretrained": "", "task": "zs", "metrics": {"acc1": 0.5}})
    _write(root / "noacc.json", {"dataset": "cycles/x", "model": "M", "pretrained": "", "task": "t", "metrics": {"n": 1}})
    _write(root / "exp.json", {"experiment": "probe", "model": "M", "pretrained": "openai", "value": 3})
    data = collect([root])
    assert data.skipped == {
        str(root / "list.json"): "top level is not a JSON object",
        str(root / "other.json"): "not a clip_cycles or clip_benchmark result",
        str(root / "cb.json"): "clip_benchmark record of 'imagenet': not a cycles, audit or attributes result",
        str(root / "noacc.json"): "clip_benchmark record of 'cycles/x': not a cycles, audit or attributes result",
    }
    ((row, model),) = data.cells
    assert (row, model) == ("coco_strict", "M (openai)")
    cell = data.cells[row, model]
    assert cell.cycle_acc == 0.75 and cell.item_set.items_sha256 == SHA_A and cell.source_file == str(root / "c.json")
    assert data.families["coco_strict"] == FamilyInfo("coco_strict", "coco", "coco", "strict", "p", "paper 1", 3)
    assert data.experiments == {
        "M (openai)": {"probe": {"experiment": "probe", "model": "M", "pretrained": "openai", "value": 3}}
    }
    assert data.inputs == [str(root)]


def test_zero_shot_record_families_unavailable_and_attributes(tmp_path: Path) -> None:
    record = {
        "experiment": "zero_shot",
        "model": "M",
        "pretrained": "openai",
        "split": "test",
        "families": {"b_fam": {"cycle_acc": 0.5, "items_sha256": SHA_B}, "a_fam": {"cycle_acc": 0.25, "items_sha256": SHA_A}},
        "unavailable": {"c_fam": "no images"},
    }
    data = PageData()
    add_record(data, tmp_path / "z.json", record)
    cells = {c.family: c for c in data.cells.values()}
    assert sorted(cells) == ["a_fam", "b_fam", "c_fam"]
    assert (cells["a_fam"].cycle_acc, cells["a_fam"].item_set.split, cells["a_fam"].item_set.items_sha256) == (
        0.25,
        "test",
        SHA_A,
    )
    assert cells["c_fam"].cycle_acc is None and cells["c_fam"].unavailable_reason == "no images"
    assert cells["c_fam"].item_set == ItemSet("test", None)
    assert data.experiments["M (openai)"]["zero_shot"] is record
    attributes = {"experiment": "attributes", "model": "M", "pretrained": "openai", "strategies": {"s": 1}, "seeds": [0]}
    add_record(data, tmp_path / "a.json", attributes)
    assert data.attributes == [
        {"model": "M (openai)", "protocol": "seeds [0]", "strategies": {"s": 1}, "file": str(tmp_path / "a.json")}
    ]


def test_grid_and_attribute_metrics_records(tmp_path: Path) -> None:
    data = PageData()
    add_record(data, tmp_path / "g.json", {"grid": {"table": {"b": {"x": 1}, "a": {"y": 2}}}, "seeds": [1]})
    assert [a["model"] for a in data.attributes] == ["a", "b"]
    assert data.attributes[0] == {"model": "a", "protocol": "seeds [1]", "strategies": {"y": 2}, "file": str(tmp_path / "g.json")}
    record = {
        "dataset": "attributes/color",
        "model": "M",
        "pretrained": "",
        "task": "t",
        "metrics": {"f1_selectivity": 0.4, "cs": 0.2},
    }
    add_record(data, tmp_path / "at.json", record)
    assert data.attributes[-1] == {
        "model": "M (random init)",
        "protocol": "not recorded",
        "strategies": {"color": {"f1_selectivity": 0.4, "cs": 0.2}},
        "file": str(tmp_path / "at.json"),
    }
    named = dict(record, metrics={"f1_selectivity": 0.4, "strategy": "split"})
    add_record(data, tmp_path / "at2.json", named)
    assert list(data.attributes[-1]["strategies"]) == ["split"]


def test_audit_record_without_a_model_gives_rows_only(tmp_path: Path) -> None:
    record = {
        "dataset": "audit/wino",
        "model": "",
        "pretrained": "",
        "task": "audit",
        "metrics": {"subsets": {}, "n_comparisons": 4},
    }
    data = PageData()
    add_record(data, tmp_path / "w.json", record)
    assert not data.cells and [(r.benchmark, r.subset, r.model) for r in data.benchmarks] == [("wino", "all", pd.NO_MODEL)]
    data2 = PageData()
    add_record(data2, tmp_path / "w.json", dict(record, model="M"))
    assert list(data2.cells) == [("audit/wino\x1f" + ItemSet().ident, "M (random init)")]


def test_malformed_item_set_is_skipped_and_named(tmp_path: Path) -> None:
    data = PageData()
    add_record(data, tmp_path / "x.json", _cycles("fam", 0.5, items_sha256="not-hex"))
    assert not data.cells
    assert data.skipped[str(tmp_path / "x.json")].endswith(": not shown")


def test_rows_split_by_item_set_with_notes_and_unrecorded_listed_once() -> None:
    data = PageData()
    a, b = ItemSet("test", SHA_A), ItemSet("test", SHA_B)
    for family, item, model in (("f", a, "M"), ("f", b, "N"), ("g", ItemSet(), "M"), ("h", ItemSet(), "M"), ("k", a, "M")):
        pd.add_cycle_metrics(data, family, model, {"cycle_acc": 0.5}, f"{family}{model}.json", item)
    assign_rows(data)
    assert set(data.cells) == {(f"f@{SHA_A[:12]}", "M"), (f"f@{SHA_B[:12]}", "N"), ("g", "M"), ("h", "M"), ("k", "M")}
    assert data.rows["k"] == ("k", a) and data.rows[f"f@{SHA_B[:12]}"] == ("f", b)
    assert all(cell.row == row for (row, _), cell in data.cells.items())
    assert data.notes[-1] == (
        f"{NOT_RECORDED} for g, h (no items_sha256: results written before item sets were recorded): "
        "the numbers in each of these rows are not known to be of the same items"
    )
    assert any("f" in note for note in data.notes[:-1])
    assert data.family_of(f"f@{SHA_A[:12]}") == "f" and data.family_of("zzz") == "zzz"
    assert data.item_set("k") == a and data.item_set("zzz") == ItemSet()
    assert data.models == ["M", "N"]


def test_family_rows_order_and_shown_paths() -> None:
    data = PageData()
    for key, order in (("late", 5), ("early", 1), ("zz_unrecorded", -1), ("aa_unrecorded", -1)):
        data.cells[key, "M"] = Cell("M", key, 0.5, family=key)
        data.families[key] = FamilyInfo(key, "s", "b", key, "p", "paper", order)
    data.cells["audit/x", "M"] = Cell("M", "audit/x", 0.5, family="audit/x")
    data.cells["nofacts", "M"] = Cell("M", "nofacts", 0.5, family="nofacts")
    assert data.family_rows() == ["early", "late", "aa_unrecorded", "nofacts", "zz_unrecorded"]
    assert data.family_keys() == data.family_rows()
    assert data.benchmark_rows() == ["audit/x"]
    data.inputs = ["/r", "/r/sub", "rel"]
    assert data.shown_path("/r/sub/x/y.json") == "sub/x/y.json"
    assert data.shown_path("/r/a.json") == "r/a.json"
    assert data.shown_path("/r/sub") == "sub"
    assert data.shown_path("/elsewhere/f.json") == "f.json"
    assert data.shown_path("other/f.json") == "other/f.json"
    assert data.shown_path("rel/f.json") == "rel/f.json"
    data.inputs = ["/"]
    assert data.shown_path("/a/b.json") == "./a/b.json"


def test_family_info_and_samples_reference(tmp_path: Path) -> None:
    assert pd.family_info("k", FACTS) == FamilyInfo("k", "coco", "coco", "strict", "p", "paper 1", 3)
    missing = pd.family_info("k", None)
    assert missing == FamilyInfo("k", "not recorded", "not recorded", "k", "not recorded", "not recorded", -1)
    assert pd.family_info("k", {**FACTS, "order": -2}).order == -1
    assert missing.recorded is False and pd.family_info("k", FACTS).paper is True
    assert pd.family_info("k", {**FACTS, "provenance": "this project"}).paper is False
    sha = "c" * 64
    record = {"samples": {"path": "s/x.jsonl", "sha256": sha}}
    assert pd.samples_of(record, tmp_path / "r.json") == (str(tmp_path.resolve() / "s/x.jsonl"), sha)
    assert pd.samples_of({"samples": {"path": "x", "sha256": "no"}}, tmp_path / "r.json") is None
    assert pd.samples_of({}, tmp_path / "r.json") is None


def test_a_recorded_family_replaces_an_unrecorded_one_never_the_reverse() -> None:
    data = PageData()
    pd.add_cycle_metrics(data, "f", "M", {"cycle_acc": 0.5}, "old.json")
    assert data.families["f"].recorded is False
    pd.add_cycle_metrics(data, "f", "N", {"cycle_acc": 0.5}, "new.json", facts=FACTS)
    assert data.families["f"].order == 3
    pd.add_cycle_metrics(data, "f", "O", {"cycle_acc": 0.5}, "older.json")
    other = {**FACTS, "order": 7}
    pd.add_cycle_metrics(data, "f", "P", {"cycle_acc": 0.5}, "newer.json", facts=other)
    assert data.families["f"].order == 3  # the first recorded facts stay


def test_flat_cycles_record_keeps_samples_weights_and_unavailable_cells(tmp_path: Path) -> None:
    sha = "d" * 64
    record = _cycles("fam", 0.5, weights_sha256=sha, samples={"path": "s.jsonl", "sha256": sha})
    data = PageData()
    add_record(data, tmp_path / "r.json", record)
    (cell,) = data.cells.values()
    assert cell.samples == (str(tmp_path.resolve() / "s.jsonl"), sha) and cell.weights_sha256 == sha
    assert cell.model == "M (openai, weights dddddddddddd)"
    unavailable = dict(_cycles("gone", 0.0), metrics={"available": False, "unavailable_reason": "no images"})
    add_record(data, tmp_path / "u.json", unavailable)
    cell = next(c for c in data.cells.values() if c.family == "gone")
    assert (cell.model, cell.row, cell.cycle_acc, cell.unavailable_reason) == (
        "M (openai)",
        f"gone\x1f{ItemSet().ident}",
        None,
        "no images",
    )
    assert cell.source_file == str(tmp_path / "u.json")


def test_an_unscored_family_keeps_the_records_split_and_source_without_items() -> None:
    record = {
        "experiment": "zero_shot",
        "model": "M",
        "pretrained": "openai",
        "split": "val",
        "source": {"kind": "coco"},
        "source_line": "coco val2017",
        "unavailable": {"x": "why"},
    }
    data = PageData()
    add_record(data, Path("z.json"), record)
    (cell,) = data.cells.values()
    assert cell.item_set == ItemSet("val", None, {"kind": "coco"}, "coco val2017")
    assert (cell.model, cell.source_file, cell.unavailable_reason) == ("M (openai)", "z.json", "why")


def test_benchmark_cell_reads_the_flat_interval() -> None:
    data = PageData()
    metrics = {
        "subsets": {},
        "model_acc": 0.8,
        "best_blind_acc": 0.5,
        "cycle_acc": 0.7,
        "cycle_acc_ci_low": 0.6,
        "cycle_acc_ci_high": 0.8,
    }
    pd.add_benchmark_audit(data, "b", "M", metrics, "f.json")
    (cell,) = data.cells.values()
    assert (cell.ci["low"], cell.ci["high"], cell.ci_note) == (0.6, 0.8, "")
    assert (cell.model, cell.row) == ("M", "audit/b\x1f" + ItemSet().ident)
    assert data.benchmarks[-1].source_file == "f.json"
    pd.add_benchmark_audit(data, "c", "M", {"subsets": {}, "cycle_acc": 0.7}, "g.json")
    assert data.cells["audit/c\x1f" + ItemSet().ident, "M"].ci_note == "the record has no cycle_acc_ci"
