"""Mutation-directed tests of the benchmark readers (``clip_cycles/benchmark_audit/adapters.py``), issue 56.

Each test reads a hand-written file and checks the subset's comparisons, roles and counts against
values worked out by hand here, never through the reader's own helpers.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clip_cycles.benchmark_audit import adapters
from clip_cycles.benchmark_audit.adapters import load_benchmark
from clip_cycles.benchmark_audit.design import ComparisonSet, CroppedImageItem


def comparisons(cs: ComparisonSet) -> dict[str, tuple[str, tuple[str, ...], list[tuple[str, str, float]]]]:
    """``{comparison id: (item id, tags, sorted edges (image key, caption, weight))}`` read off the arrays."""
    out = {}
    for c, cid in enumerate(cs.comparison_ids):
        edges = sorted(
            (cs.images[u].key, cs.captions[v], float(w))
            for e, (u, v, w) in enumerate(zip(cs.edge_image, cs.edge_caption, cs.edge_weight))
            if cs.edge_comparison[e] == c
        )
        out[cid] = (cs.item_ids[c], cs.tags[c], edges)
    return out


def image_of(cs: ComparisonSet, key: str):
    (found,) = [item for item in cs.images if item.key == key]
    return found


def _png(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"\x89PNG not decoded by a reader")
    return path


# --------------------------------------------------------------------------- ARO


def _vg(image: str, true: str, false: str, box=(2, 3, 20, 10.5), **extra) -> dict:
    x, y, w, h = box
    return {"image_path": image, "bbox_x": x, "bbox_y": y, "bbox_w": w, "bbox_h": h, "true_caption": true,
            "false_caption": false, **extra}  # fmt: skip


def test_aro_visual_genome_items_boxes_tags_ids_and_roles(tmp_path: Path) -> None:
    (tmp_path / "annotations").mkdir()
    relation = [
        _vg("1.jpg", "the man is on the horse", "the horse is on the man", relation_name="on", id="r7"),
        _vg("2.jpg", "a cup under a table", "a table under a cup", box=(0, 0.25, 30, 25)),  # no relation, no id
    ]
    attribution = [
        _vg("3.jpg", "the red cup", "the blue cup", attributes=["red", 2], relation_name="ignored"),
        _vg("3.jpg", "the tall man", "the short man", box=(1, 1, 5, 5), attributes="tall"),  # not a list: no tag
    ]
    (tmp_path / "annotations" / "visual_genome_relation.json").write_text(json.dumps(relation))
    (tmp_path / "visual_genome_attribution.json").write_text(json.dumps(attribution))
    _png(tmp_path / "images" / "1.jpg")
    rel, att = load_benchmark("aro", tmp_path)
    assert (rel.name, att.name, rel.kind, att.kind) == ("vg_relation", "vg_attribution", "hard_negative", "hard_negative")
    assert comparisons(rel) == {
        "r7": ("r7", ("relation=on",), [("1.jpg#box=2,3,20,10.5", "the horse is on the man", -1.0),
                                        ("1.jpg#box=2,3,20,10.5", "the man is on the horse", 1.0)]),
        "1": ("1", (), [("2.jpg#box=0,0.25,30,25", "a cup under a table", 1.0),
                        ("2.jpg#box=0,0.25,30,25", "a table under a cup", -1.0)]),
    }  # fmt: skip
    assert comparisons(att) == {
        "0": ("0", ("attributes=red_2",), [("3.jpg#box=2,3,20,10.5", "the blue cup", -1.0),
                                           ("3.jpg#box=2,3,20,10.5", "the red cup", 1.0)]),
        "1": ("1", (), [("3.jpg#box=1,1,5,5", "the short man", -1.0), ("3.jpg#box=1,1,5,5", "the tall man", 1.0)]),
    }  # fmt: skip
    crop = image_of(rel, "1.jpg#box=2,3,20,10.5")
    assert isinstance(crop, CroppedImageItem) and crop.box == (2.0, 3.0, 20.0, 10.5)
    assert crop.path == tmp_path / "images" / "1.jpg"
    assert image_of(att, "3.jpg#box=1,1,5,5").path == tmp_path / "images" / "3.jpg"  # missing: named, read later


def test_aro_order_true_caption_first_numbering_skips_and_image_lookup(tmp_path: Path) -> None:
    (tmp_path / "annotations").mkdir()
    cases = [
        {
            "image": "a.jpg",
            "caption_options": ["a man rides a horse", "a horse rides a man", "A man  rides a HORSE", "man a rides horse a"],
        },  # fmt: skip
        {"image": "b.jpg", "caption_options": ["two dogs play", "two play dogs"]},
        {"image": "c.jpg", "caption_options": ["a red car", "a car red"]},
    ]
    (tmp_path / "annotations" / "coco_order.jsonl").write_text("".join(json.dumps(c) + "\n" for c in cases))
    (tmp_path / "flickr30k_order.json").write_text(json.dumps(cases[1:2]))
    _png(tmp_path / "a.jpg")  # in the root and in images/: the root's copy
    _png(tmp_path / "images" / "a.jpg")
    _png(tmp_path / "images" / "b.jpg")  # only under images/
    coco, flickr = load_benchmark("aro", tmp_path)
    assert (coco.name, flickr.name, coco.kind) == ("coco_order", "flickr_order", "caption_order")
    assert comparisons(coco) == {
        "0/1": ("0", (), [("a.jpg", "a horse rides a man", -1.0), ("a.jpg", "a man rides a horse", 1.0)]),
        "0/3": ("0", (), [("a.jpg", "a man rides a horse", 1.0), ("a.jpg", "man a rides horse a", -1.0)]),
        "1/1": ("1", (), [("b.jpg", "two dogs play", 1.0), ("b.jpg", "two play dogs", -1.0)]),
        "2/1": ("2", (), [("c.jpg", "a car red", -1.0), ("c.jpg", "a red car", 1.0)]),
    }
    assert coco.skipped == {"perturbation_equal_to_caption": 1}
    assert [len([e for e in coco.edge_comparison if e == c]) for c in range(4)] == [2, 2, 2, 2]
    assert image_of(coco, "a.jpg").path == tmp_path / "a.jpg"
    assert image_of(coco, "b.jpg").path == tmp_path / "images" / "b.jpg"
    assert image_of(coco, "c.jpg").path == tmp_path / "c.jpg"  # nowhere: the root's name, for the encoder to name
    assert comparisons(flickr) == {"0/1": ("0", (), [("b.jpg", "two dogs play", 1.0), ("b.jpg", "two play dogs", -1.0)])}


def test_aro_without_files_names_them(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError) as error:
        load_benchmark("aro", tmp_path)
    assert str(error.value) == (
        f"{tmp_path}: no ARO file found; expected visual_genome_relation.json, visual_genome_attribution.json or "
        "coco_order.json, coco_order.jsonl, flickr30k_order.json, flickr30k_order.jsonl"
    )


# --------------------------------------------------------------------------- comparison table


def test_a_csv_table_strips_headers_and_cells_drops_blank_lines_and_numbers_lines_from_2(tmp_path: Path) -> None:
    table = tmp_path / "t.csv"
    table.write_text(
        " comparison_id , image ,caption, weight ,tag\n"
        "c1, a.png ,  a dog  ,1, x\n"
        ",,,,\n"
        "c1,a.png,a cat,-1,y\n"
        "c2,b.png,a cat,1\n"
        "c2,b.png,a dog,-1,\n",
        encoding="utf-8",
    )
    (cs,) = load_benchmark("comparison_table", table)
    assert (cs.name, cs.kind) == ("table", "table")
    assert comparisons(cs) == {
        "c1": ("c1", ("x", "y"), [("a.png", "a cat", -1.0), ("a.png", "a dog", 1.0)]),
        "c2": ("c2", (), [("b.png", "a cat", 1.0), ("b.png", "a dog", -1.0)]),
    }
    assert cs.captions == ["a dog", "a cat"] and image_of(cs, "a.png").path == tmp_path / "a.png"
    bad = tmp_path / "bad.csv"
    bad.write_text("comparison_id,image,caption,weight\nc1,a.png,a dog,1\n,,,\nc1,a.png,a cat,minus one\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"bad\.csv: line 4: field 'weight'"):
        load_benchmark("comparison_table", bad)


def test_a_jsonl_table_numbers_lines_from_1_skips_blank_lines_and_reads_non_finite_as_refused(tmp_path: Path) -> None:
    table = tmp_path / "comparisons.jsonl"
    rows = [
        {"comparison_id": 3, "image": "u.png", "caption": "left", "weight": 0.5, "subset": "s", "item_id": "i"},
        {"comparison_id": 3, "image": "u.png", "caption": "right", "weight": -0.5, "subset": "s", "item_id": "i"},
    ]
    table.write_text("\r\n" + json.dumps(rows[0]) + "\r\n\n" + json.dumps(rows[1]) + "\n\n")
    (cs,) = load_benchmark("comparison_table", tmp_path)
    assert cs.name == "s" and comparisons(cs) == {"3": ("i", (), [("u.png", "left", 0.5), ("u.png", "right", -0.5)])}
    table.write_text(json.dumps(rows[0]) + "\n\n" + '{"comparison_id": 3, "image": "u.png", "caption": "x", "weight": NaN}\n')
    # The table's line is the row's ordinal among the non-blank lines (the reader's own errors name the file's line).
    with pytest.raises(ValueError, match=r"comparisons\.jsonl: line 2: field 'weight'"):
        load_benchmark("comparison_table", tmp_path)
    table.write_text(json.dumps(rows[0]) + "\n[1, 2]\n")
    with pytest.raises(ValueError) as error:
        load_benchmark("comparison_table", tmp_path)
    assert str(error.value) == f"{table}: line 2 must be a JSON object, got list"
    table.write_text(json.dumps(rows[0]) + "\n{oops\n")
    with pytest.raises(ValueError, match=rf"^{table}: line 2 is not valid JSON: "):
        load_benchmark("comparison_table", tmp_path)


def test_a_table_of_another_suffix_is_refused_by_name(tmp_path: Path) -> None:
    table = tmp_path / "t.tsv"
    table.write_text("comparison_id\timage\n")
    with pytest.raises(ValueError) as error:
        load_benchmark("comparison_table", table)
    assert str(error.value) == f"{table}: a comparison table must be .csv or .jsonl"


# --------------------------------------------------------------------------- Winoground


def test_winoground_tags_in_field_order_secondary_split_and_empty_fields_left_out(tmp_path: Path) -> None:
    rows = [
        {"id": 5, "image_0": "p", "image_1": "q", "caption_0": "a dog bites a man", "caption_1": "a man bites a dog",
         "tag": "Relation, Object", "secondary_tag": "Symbolic, Pragmatics,", "num_main_preds": 1},
        {"id": 6, "image_0": "r.png", "image_1": "s.png", "caption_0": "red over blue", "caption_1": "blue over red",
         "collapsed_tag": "Object", "tag": "", "secondary_tag": None},
    ]  # fmt: skip
    (tmp_path / "examples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    for name in ("p.png", "q.png", "r.png", "s.png"):
        _png(tmp_path / "images" / name)
    (cs,) = load_benchmark("winoground", tmp_path)
    first = ("tag=Relation, Object", "secondary_tag=Symbolic", "secondary_tag=Pragmatics", "num_main_preds=1")
    assert cs.tags == [first] * 4 + [("collapsed_tag=Object",)] * 4
    assert cs.cycle_tags == [first, ("collapsed_tag=Object",)]
    assert (cs.name, cs.kind, cs.comparison_ids[:4]) == (
        "winoground",
        "winoground",
        ["5/text0", "5/text1", "5/image0", "5/image1"],
    )
    assert image_of(cs, "p.png").path == tmp_path / "images" / "p.png"


def test_winoground_images_as_bytes_paths_and_files_outside_the_images_folder(tmp_path: Path) -> None:
    outside = _png(tmp_path / "elsewhere" / "far.png")
    tmp_path = tmp_path / "root"
    tmp_path.mkdir()
    rows = [
        {"image_0": {"bytes": [1, 2, 3], "path": "b0.png"}, "image_1": {"bytes": None, "path": "n1.png"},
         "caption_0": "a cat on a mat", "caption_1": "a mat on a cat"},
        {"image_0": str(outside), "image_1": "x.png", "caption_0": "one", "caption_1": "two"},
    ]  # fmt: skip
    (tmp_path / "examples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (cs,) = load_benchmark("winoground", tmp_path)
    keys = [item.key for item in cs.images]
    assert keys == ["row 0 (id 0)/image_0:b0.png", "n1.png", str(outside), "x.png"]
    assert cs.images[0].data == b"\x01\x02\x03" and cs.images[0].path is None
    assert cs.images[1].path == tmp_path / "n1.png" and cs.images[1].data is None
    assert cs.images[2].path == outside and cs.images[3].path == tmp_path / "x.png"
    bad = [{**rows[1], "image_0": ""}]
    (tmp_path / "examples.jsonl").write_text(json.dumps(bad[0]) + "\n")
    with pytest.raises(ValueError) as error:
        load_benchmark("winoground", tmp_path)
    assert str(error.value) == (
        f"{tmp_path / 'examples.jsonl'}: row 0 (id 0): field 'image_0' must name an image file or hold image bytes, got ''"
    )


def test_image_from_value_names_the_field_where_and_table() -> None:
    with pytest.raises(ValueError) as error:
        adapters.image_from_value({"bytes": b""}, Path("imgs"), "row 3", Path("t.parquet"), "image_1")
    assert str(error.value) == "t.parquet: row 3: field 'image_1' must name an image file or hold image bytes, got {'bytes': b''}"
    item = adapters.image_from_value({"bytes": b"xy", "path": None}, Path("imgs"), "row 3", Path("t.parquet"), "image_1")
    assert (item.key, item.data) == ("row 3/image_1:", b"xy")


# --------------------------------------------------------------------------- the registry


def test_register_adapter_keeps_name_reader_texts_and_refuses_a_taken_name() -> None:
    def reader(root: Path) -> list[ComparisonSet]:
        return [adapters.unreadable_subset(f"from {root.name}", ValueError("boom"))]

    try:
        assert adapters.register_adapter("c_mutants_fmt", "what it is", "what it needs")(reader) is reader
        adapter = adapters.get_adapter("c_mutants_fmt")
        assert (adapter.name, adapter.reader, adapter.description, adapter.expects) == (
            "c_mutants_fmt", reader, "what it is", "what it needs"
        )  # fmt: skip
        with pytest.raises(ValueError, match="already registered"):
            adapters.register_adapter("c_mutants_fmt", "again", "again")(reader)
        adapters.register_adapter("c_mutants_fmt", "again", "again", replace=True)(reader)
        assert adapters.get_adapter("c_mutants_fmt").description == "again"
        (cs,) = load_benchmark("c_mutants_fmt", Path("/"))
        assert (cs.name, cs.unusable, cs.n_comparisons) == ("from ", "unreadable: boom", 0)
    finally:
        adapters.ADAPTERS.unregister("c_mutants_fmt")


def test_a_parquet_table_that_is_a_folder_is_refused_as_a_benchmark_file(tmp_path: Path) -> None:
    (tmp_path / "data" / "test.parquet").mkdir(parents=True)
    with pytest.raises(ValueError) as error:
        load_benchmark("winoground", tmp_path)
    table = tmp_path / "data" / "test.parquet"
    assert str(error.value) == f"benchmark file {table} is a directory, not a regular file; only regular files are read"


def test_hard_negative_subset_kind_ids_reader_counts_and_equal_negatives() -> None:
    from clip_cycles.data.sources.images import ImageItem

    u, v = ImageItem("u.png"), ImageItem("v.png")
    items = [
        (("c0", "item"), u, "a dog", "a cat", ("t",)),
        (("c1", "item"), u, "a dog", "A  DOG", ()),  # one caption vertex: dropped and counted
        ("c2", v, "a red cup", "a cup red", ()),
    ]
    cs = adapters.hard_negative_subset("s", Path("s.json"), items, skipped={"no_image": 3})
    assert (cs.name, cs.kind) == ("s", "hard_negative")
    assert cs.skipped == {"no_image": 3, "negative_equal_to_caption": 1}
    assert comparisons(cs) == {
        "c0": ("item", ("t",), [("u.png", "a cat", -1.0), ("u.png", "a dog", 1.0)]),
        "c2": ("c2", (), [("v.png", "a cup red", -1.0), ("v.png", "a red cup", 1.0)]),
    }
    assert adapters.hard_negative_subset("o", Path("o.json"), items[2:], kind="caption_order").kind == "caption_order"


def test_json_files_empty_invalid_and_non_finite(tmp_path: Path) -> None:
    path = tmp_path / "x.json"
    path.write_text("  \n")
    with pytest.raises(ValueError) as error:
        adapters.read_json(path)
    assert str(error.value) == f"{path}: empty file (no JSON value)"
    path.write_text("{oops")
    with pytest.raises(ValueError, match=rf"^{path}: not valid JSON: "):
        adapters.read_json(path)
    path.write_text('{"a": NaN, "b": [Infinity]}')  # published files carry NaN; a reader checks its own fields
    found = adapters.read_json(path)
    assert found["a"] != found["a"] and found["b"] == [float("inf")]
    path.write_text('{"a": ' + "9" * 5000 + "}")
    with pytest.raises(ValueError, match=rf"^{path} holds an integer of 5000 digits"):
        adapters.read_json(path)  # the bounded parser names the file
    lines = tmp_path / "x.jsonl"
    lines.write_text('{"a": 1}\n{"a": ' + "9" * 5000 + "}\n")
    with pytest.raises(ValueError, match=rf"^{lines}: line 2 holds an integer of 5000 digits"):
        adapters.read_records(lines)
    lines.write_text('{"a": NaN}\n')
    assert adapters.read_records(lines)[0]["a"] != 0.0
