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
    # A wholly empty line (which the CSV reader skips) still counts: the bad row is on line 5.
    bad.write_text("comparison_id,image,caption,weight\nc1,a.png,a dog,1\n\n\nc1,a.png,a cat,minus one\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"bad\.csv: line 5: field 'weight'"):
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
    # The file's own line (3), blank lines counted: the row's ordinal (2) would point at the wrong line.
    with pytest.raises(ValueError, match=r"comparisons\.jsonl: line 3: field 'weight'"):
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


# --------------------------------------------------------------------------- shared readers


def test_load_benchmark_roots_subsets_and_their_sentences(tmp_path: Path, monkeypatch) -> None:
    missing = tmp_path / "nowhere"
    with pytest.raises(FileNotFoundError) as error:
        load_benchmark("aro", missing)
    assert str(error.value) == f"aro root {missing} does not exist; it must hold {adapters.get_adapter('aro').expects}"
    (tmp_path / "visual_genome_relation.json").write_text(json.dumps([_vg("1.jpg", "a b", "b a")]))
    (tmp_path / "coco_order.json").write_text(json.dumps([{"image": "x.jpg", "caption_options": ["a b", "b a"]}]))
    assert [s.name for s in load_benchmark("aro", tmp_path)] == ["vg_relation", "coco_order"]
    assert [s.name for s in load_benchmark("aro", tmp_path, ["coco_order"])] == ["coco_order"]
    assert [s.name for s in load_benchmark("aro", tmp_path, [])] == ["vg_relation", "coco_order"]
    with pytest.raises(ValueError) as error:
        load_benchmark("aro", tmp_path, ["coco_order", "vg_nope", "x"])
    assert str(error.value) == f"aro root {tmp_path} has no subset ['vg_nope', 'x']; it has ['vg_relation', 'coco_order']"
    monkeypatch.setenv("HOME", str(tmp_path))
    assert [s.name for s in load_benchmark("aro", "~", ["vg_relation"])] == ["vg_relation"]
    with pytest.raises(ValueError, match="benchmark format 'c_unknown'"):
        adapters.get_adapter("c_unknown")


def test_read_text_strips_a_byte_order_mark_and_names_a_file_that_is_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps([{"a": "\u00e9"}]).encode())
    assert adapters.read_text(path) == '[{"a": "\\u00e9"}]' and adapters.read_records(path) == [{"a": "\u00e9"}]
    path.write_bytes(b'[{"a": "\xff"}]')
    with pytest.raises(ValueError) as error:
        adapters.read_text(path)
    assert str(error.value).startswith(f"benchmark file {path} is not UTF-8 text: 'utf-8' codec can't decode byte 0xff")


def test_records_of_an_object_of_records_and_a_wrong_top_level(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    path.write_text(json.dumps({"7": {"caption": "c"}, "8": [1], "9": "text"}))
    assert adapters.read_records(path) == [{"_id": "7", "caption": "c"}, {"_id": "8", "_bad": [1]}, {"_id": "9", "_bad": "text"}]
    path.write_text(json.dumps([{"a": 1}, {"b": 2}]))
    assert adapters.read_records(path) == [{"a": 1}, {"b": 2}]
    path.write_text("3")
    with pytest.raises(ValueError) as error:
        adapters.read_records(path)
    assert str(error.value) == f"{path}: expected a list of records or an object of records, got int"


def test_image_files_without_a_suffix_try_png_jpg_jpeg_in_that_order(tmp_path: Path) -> None:
    _png(tmp_path / "both.jpg")
    _png(tmp_path / "both.jpeg")
    _png(tmp_path / "j.jpeg")
    _png(tmp_path / "p.png")
    _png(tmp_path / "p.jpg")
    _png(tmp_path / "plain")  # a file without a suffix that exists is itself
    assert adapters.image_item(tmp_path, "both").path == tmp_path / "both.jpg"
    assert adapters.image_item(tmp_path, "j").path == tmp_path / "j.jpeg"
    assert adapters.image_item(tmp_path, "p").path == tmp_path / "p.png"
    assert adapters.image_item(tmp_path, "plain").path == tmp_path / "plain"
    assert adapters.image_item(tmp_path, "gone").path == tmp_path / "gone.png"  # missing: the encoder names it
    assert adapters.image_item(tmp_path, "x.gif").path == tmp_path / "x.gif"
    item = adapters.image_item(tmp_path / "sub", str(tmp_path / "p.jpg"))
    assert (item.key, item.path) == (str(tmp_path / "p.jpg"), tmp_path / "p.jpg")
    (tmp_path / "d2").mkdir()
    assert adapters.first_dir([tmp_path / "nope", tmp_path / "p.png", tmp_path / "d2", tmp_path]) == tmp_path / "d2"
    assert adapters.first_dir([tmp_path / "nope"]) is None


def test_block_subset_drops_repeats_and_case_only_captions_each_under_its_reason() -> None:
    from clip_cycles.data.sources.images import ImageItem

    a, b, c = ImageItem("a.png"), ImageItem("b.png"), ImageItem("c.png")
    blocks = [
        ("k0", a, b, "a dog on a cat", "a cat on a dog", ["t"]),
        ("k1", a, a, "x y", "y x", []),  # one image twice
        ("k2", b, c, "same", "same", []),  # one caption twice
        ("k3", b, c, "A  Dog", "a dog", []),  # equal up to whitespace and case
        ("k4", c, a, "left", "right", []),
    ]
    cs = adapters.block_subset("blocks", Path("b.jsonl"), blocks, skipped={"no_row": 2})
    assert (cs.name, cs.kind) == ("blocks", "winoground")
    assert cs.skipped == {"no_row": 2, "block_with_repeated_image_or_caption": 2, adapters.CAPTIONS_EQUAL_UNDER_KEY: 1}
    assert cs.comparison_ids == [
        "k0/text0",
        "k0/text1",
        "k0/image0",
        "k0/image1",
        "k4/text0",
        "k4/text1",
        "k4/image0",
        "k4/image1",
    ]
    assert cs.item_ids == ["k0"] * 4 + ["k4"] * 4 and cs.tags == [("t",)] * 4 + [()] * 4
    # Each comparison is won by the true pairs (caption_i true of image_i): +1 on them, -1 on the crossed ones.
    true = {("a.png", "a dog on a cat"), ("b.png", "a cat on a dog"), ("c.png", "left"), ("a.png", "right")}
    for cid, (_, _, edges) in comparisons(cs).items():
        assert sum(w for key, caption, w in edges if (key, caption) in true) == 1.0, cid
        assert sum(w for key, caption, w in edges if (key, caption) not in true) == -1.0, cid
    got = [(cs.images[u1].key, cs.images[u2].key, cs.captions[v1], cs.captions[v2]) for u1, u2, v1, v2 in cs.cycles.tolist()]
    assert got == [("a.png", "b.png", "a dog on a cat", "a cat on a dog"), ("c.png", "a.png", "left", "right")]
    assert cs.cycle_tags == [("t",), ()]


def test_a_quoted_csv_caption_keeps_its_line_break_as_published(tmp_path: Path) -> None:
    table = tmp_path / "comparisons.csv"
    table.write_bytes(b'comparison_id,image,caption,weight\r\nc,u.png,"two\r\nlines",1\r\nc,u.png,one line,-1\r\n')
    (cs,) = load_benchmark("comparison_table", tmp_path)
    assert cs.captions == ["two\r\nlines", "one line"]
    assert cs.caption_lengths().tolist() == [10.0, 8.0]  # the length rules read the caption as published


def test_json_lines_split_at_any_newline_convention_and_never_inside_a_string(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    path.write_text('{"a": 1}\r{"a": "x\u2028y"}\r\n{"a": 3}\n', newline="")
    assert adapters.read_records(path) == [{"a": 1}, {"a": "x\u2028y"}, {"a": 3}]


def test_a_csv_table_with_carriage_return_line_ends_is_read(tmp_path: Path) -> None:
    table = tmp_path / "comparisons.csv"
    table.write_bytes(b"comparison_id,image,caption,weight\rc,u.png,a dog,1\rc,u.png,a cat,-1\r")
    (cs,) = load_benchmark("comparison_table", tmp_path)
    assert comparisons(cs) == {"c": ("c", (), [("u.png", "a cat", -1.0), ("u.png", "a dog", 1.0)])}


def test_read_text_refuses_what_is_not_a_regular_file_as_a_benchmark_file(tmp_path: Path) -> None:
    with pytest.raises(ValueError) as error:
        adapters.read_text(tmp_path)
    assert str(error.value) == f"benchmark file {tmp_path} is a directory, not a regular file; only regular files are read"
