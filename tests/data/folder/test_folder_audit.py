"""``clip-cycles audit`` (clip_cycles.data.folder.audit): every check trips on a crafted violation."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from clip_cycles.cli import main
from clip_cycles.data.folder.audit import AMBIGUOUS, FALSE, TRUE, Image, audit_folder, coco_truth, gqa_relation_truth
from clip_cycles.data.folder.build import build_coco_folder, build_gqa_folder

COCO_FAMILIES = ["strict_left_right", "category_count", "coarse_object", "object_position", "object_variant"]
GQA_FAMILIES = ["attribute_color", "binding", "relation_spatial"]


@pytest.fixture(scope="module")
def coco_folder(shapes_world, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("audit_coco") / "cycles"
    return build_coco_folder(shapes_world, out, COCO_FAMILIES, seeds=[0, 1], min_cycles=5)[0]


@pytest.fixture(scope="module")
def gqa_folder(shapes_world, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("audit_gqa") / "cycles"
    return build_gqa_folder(shapes_world, out, families=GQA_FAMILIES, seeds=(0,), min_cycles=5)[0]


def copy(folder: Path, tmp_path: Path, name: str = "copy") -> Path:
    target = tmp_path / name
    shutil.copytree(folder, target)
    return target


def rows_of(folder: Path, family: str, split: str, seed: int = 0) -> list[dict]:
    """Rows with ``predicate`` as its JSON text (the column ``predicate_json``), which the tests edit."""
    rows = pq.read_table(folder / "data" / family / f"seed{seed}" / f"{split}.parquet").to_pylist()
    for row in rows:
        row["predicate"] = row.pop("predicate_json")
    return rows


def write_rows(folder: Path, family: str, split: str, rows: list[dict], seed: int = 0) -> None:
    """Write rows of :func:`rows_of` back: the edited JSON text, and the struct parsed from it (null if it does not parse)."""
    path = folder / "data" / family / f"seed{seed}" / f"{split}.parquet"
    schema = pq.read_table(path).schema
    out = []
    for row in rows:
        try:
            parsed = json.loads(row["predicate"])
        except ValueError:
            parsed = None
        out.append({**row, "predicate": parsed, "predicate_json": row["predicate"]})
    pq.write_table(pq.read_table(path).from_pylist(out, schema=schema), path)


def set_count(folder: Path, family: str, split: str, n: int, seed: int = 0) -> None:
    info = json.loads((folder / "build_info.json").read_text())
    info["families"][family]["counts"][str(seed)][split] = n
    (folder / "build_info.json").write_text(json.dumps(info))


def problems(folder: Path, source_root: Path | None = None, integrity: bool = False) -> list[str]:
    """The audit's problems; those of the file-integrity check only with ``integrity`` (crafted
    edits below rewrite Parquet files, which that check reports too: it has tests of its own)."""
    result = audit_folder(folder, source_root)
    assert result["ok"] is (not result["problems"] and result["checked_rows"] > 0)
    return [p for p in result["problems"] if integrity or not p.startswith("file integrity: ")]


def only(found: list[str], needle: str) -> None:
    """Every problem found mentions ``needle`` and there is at least one."""
    assert found, "the audit found nothing"
    assert all(needle in p for p in found), [p for p in found if needle not in p][:3]


# --- clean folders pass ------------------------------------------------------------------------------------------


def test_clean_coco_and_gqa_folders_pass(coco_folder, gqa_folder, capsys):
    for folder in (coco_folder, gqa_folder):
        result = audit_folder(folder)
        assert result["ok"], result["problems"][:5]
        info = json.loads((folder / "build_info.json").read_text())
        total = sum(n for e in info["families"].values() if e["available"] for c in e["counts"].values()
                    for n in c.values())  # fmt: skip
        assert result["checked_rows"] == total > 0
        # Every row's two matched pairs read true and its two swaps false.
        assert sum(r["matched_true"] for r in result["table"]) == 2 * total
        assert sum(r["swapped_false"] for r in result["table"]) == 2 * total
    assert main(["audit", str(coco_folder)]) == 0
    assert "audit passed" in capsys.readouterr().out


# --- build_info.json ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{}", "missing field(s) source, source_root, mode, families"),
        ("[1, 2]", "top level must be a JSON object, got list"),
        ("{not json", "not valid JSON"),
        (
            '{"source": "flickr", "source_root": "x", "mode": "reference", "families": {"a": {"available": true}}}',
            "field 'source' must be one of",
        ),
        ('{"source": "coco", "source_root": "x", "mode": "reference", "families": {}}', "must be a non-empty object"),
        (
            '{"source": "coco", "source_root": "x", "mode": "reference", "families": {"a": {"available": true, '
            '"counts": {"0": {"train": 1, "test": 1}}}}}',
            "must have exactly the splits",
        ),
        (
            '{"source": "coco", "source_root": "x", "mode": "reference", "families": {"a": {"available": true, '
            '"counts": {"0": {"train": 1, "validation": -1, "test": 1}}}}}',
            "must be a count >= 0",
        ),
        (
            '{"source": "coco", "source_root": "x", "mode": "reference", "families": {"a": {"available": "yes"}}}',
            "boolean 'available'",
        ),
    ],
)
def test_bad_build_info_is_a_named_error_not_a_traceback(tmp_path, capsys, content, message):
    (tmp_path / "build_info.json").write_text(content)
    assert main(["audit", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "build_info.json" in err and message in err and "Traceback" not in err


def test_a_folder_without_build_info_is_a_clear_error(tmp_path, capsys):
    assert main(["audit", str(tmp_path)]) == 2
    assert "build_info.json not found" in capsys.readouterr().err


def test_nothing_checked_fails(coco_folder, tmp_path, capsys):
    folder = copy(coco_folder, tmp_path)
    info = json.loads((folder / "build_info.json").read_text())
    for entry in info["families"].values():
        entry["available"] = False
    (folder / "build_info.json").write_text(json.dumps(info))
    shutil.rmtree(folder / "data")
    found = problems(folder)
    assert any("nothing was checked" in p for p in found)
    assert main(["audit", str(folder)]) == 1


# --- splits, duplicates, ids, labels, layout ---------------------------------------------------------------------


def test_test_images_leaked_into_train_are_reported(coco_folder, tmp_path, capsys):
    folder = copy(coco_folder, tmp_path)
    family = "category_count"
    test, train = rows_of(folder, family, "test"), rows_of(folder, family, "train")
    leaked = [{**row, "split": "train", "cycle_id": row["cycle_id"] + "-leak"} for row in test]
    write_rows(folder, family, "train", train + leaked)
    set_count(folder, family, "train", len(train) + len(leaked))
    found = problems(folder)
    leaks = [p for p in found if "image(s) in both train and test" in p]
    assert len(leaks) == 1 and leaks[0].startswith(f"{family} seed 0: ")
    # The copied cycles are also the same blocks as the test rows they came from.
    assert len(found) == 1 + len(test) and all("repeats the block of train row" in p for p in found if p not in leaks)
    assert main(["audit", str(folder)]) == 1
    assert "not image-disjoint" in capsys.readouterr().out


def test_validation_overlap_with_train_is_reported(coco_folder, tmp_path):
    folder = copy(coco_folder, tmp_path)
    family = "strict_left_right"
    train, validation = rows_of(folder, family, "train"), rows_of(folder, family, "validation")
    validation[0] = {**validation[0], "image_id_0": train[0]["image_id_0"], "image_0": train[0]["image_0"]}
    write_rows(folder, family, "validation", validation)
    # The moved image no longer matches its captions either; the disjointness problem must be among them.
    assert any("image(s) in both train and validation" in p for p in problems(folder))


def test_duplicate_blocks_are_reported(coco_folder, tmp_path):
    folder = copy(coco_folder, tmp_path)
    family = "object_position"
    train = rows_of(folder, family, "train")
    first = train[0]
    # The same block with its two pairs listed the other way round is still the same block.
    twin = {**first, "cycle_id": first["cycle_id"] + "-twin", "image_0": first["image_1"], "image_1": first["image_0"],
            "image_id_0": first["image_id_1"], "image_id_1": first["image_id_0"], "caption_0": first["caption_1"],
            "caption_1": first["caption_0"]}  # fmt: skip
    predicate = json.loads(first["predicate"])
    predicate["caption_0"], predicate["caption_1"] = predicate["caption_1"], predicate["caption_0"]
    twin["predicate"] = json.dumps(predicate)
    write_rows(folder, family, "train", train + [twin])
    set_count(folder, family, "train", len(train) + 1)
    only(problems(folder), "repeats the block of train row")


def test_duplicate_cycle_ids_are_reported(coco_folder, tmp_path):
    folder = copy(coco_folder, tmp_path)
    train = rows_of(folder, "category_count", "train")
    other = rows_of(folder, "strict_left_right", "test")
    train[0]["cycle_id"] = other[0]["cycle_id"]
    write_rows(folder, "category_count", "train", train)
    only(problems(folder), "cycle id(s) repeat in the folder")


def test_row_labels_must_match_the_file(coco_folder, tmp_path):
    folder = copy(coco_folder, tmp_path)
    for column, value in (("split", "train"), ("family", "strict_size"), ("seed", 1)):
        rows = rows_of(coco_folder, "category_count", "test")
        rows[0][column] = value
        write_rows(folder, "category_count", "test", rows)
        only(problems(folder), "is labelled")


def test_file_layout_problems_are_reported(coco_folder, tmp_path):
    extra = copy(coco_folder, tmp_path, "extra")
    (extra / "data" / "strict_size" / "seed0").mkdir(parents=True)
    shutil.copy(extra / "data" / "category_count" / "seed0" / "train.parquet",
                extra / "data" / "strict_size" / "seed0" / "train.parquet")  # fmt: skip
    (extra / "data" / "notes.txt").write_text("x")
    shutil.copy(extra / "data" / "category_count" / "seed0" / "train.parquet",
                extra / "data" / "category_count" / "seed0" / "dev.parquet")  # fmt: skip
    found = problems(extra)
    assert len(found) == 3
    assert any("family 'strict_size' seed 0 is not in build_info.json" in p for p in found)
    assert any("data/notes.txt: not a data/<family>/seed<k>/<split>.parquet file" in p for p in found)
    assert any("unknown split 'dev'" in p for p in found)

    missing = copy(coco_folder, tmp_path, "missing")
    (missing / "data" / "category_count" / "seed1" / "validation.parquet").unlink()
    found = problems(missing)
    assert any("missing file data/category_count/seed1/validation.parquet" in p for p in found)
    assert any("category_count seed 1 validation" in p for p in found)


def test_card_and_build_info_must_list_the_same_files(coco_folder, tmp_path):
    folder = copy(coco_folder, tmp_path)
    card = (folder / "README.md").read_text()
    (folder / "README.md").write_text(card.replace("    path: data/object_position/seed1/test.parquet\n", ""))
    only(problems(folder), "data/object_position/seed1/test.parquet: not listed in the card's configs")
    (folder / "README.md").unlink()
    only(problems(folder), "README.md (the dataset card) is missing")


def test_an_unavailable_family_with_data_on_disk_is_reported(coco_folder, tmp_path):
    folder = copy(coco_folder, tmp_path)
    info = json.loads((folder / "build_info.json").read_text())
    info["families"]["object_variant"].update(available=False, counts={})
    (folder / "build_info.json").write_text(json.dumps(info))
    found = problems(folder)
    assert any("object_variant: build_info.json records no rows for it but data/object_variant exists" in p for p in found)


def test_row_counts_columns_and_file_names_are_checked(coco_folder, tmp_path):
    dropped = copy(coco_folder, tmp_path, "dropped")
    rows = rows_of(dropped, "strict_left_right", "test")
    write_rows(dropped, "strict_left_right", "test", rows[:-1])
    only(problems(dropped), f"{len(rows) - 1} rows but build_info.json says {len(rows)}")

    renamed = copy(coco_folder, tmp_path, "renamed")
    rows = rows_of(renamed, "strict_left_right", "test")
    rows[0]["image_1"] = rows[1]["image_1"] if rows[1]["image_1"] != rows[0]["image_1"] else "val2017/x.jpg"
    write_rows(renamed, "strict_left_right", "test", rows)
    only(problems(renamed), "is not the file of image id")

    columns = copy(coco_folder, tmp_path, "columns")
    path = columns / "data" / "strict_left_right" / "seed0" / "test.parquet"
    table = pq.read_table(path)
    pq.write_table(table.drop(["predicate"]), path)
    only(problems(columns), "columns")

    unknown = copy(coco_folder, tmp_path, "unknown")
    rows = rows_of(unknown, "category_count", "train")
    rows[0]["image_id_0"] = 987654321
    write_rows(unknown, "category_count", "train", rows)
    assert any("image_id_0 987654321 is not in the raw annotations" in p for p in problems(unknown))


def test_strata_of_the_two_pairs_must_agree(coco_folder, tmp_path):
    folder = copy(coco_folder, tmp_path)
    rows = rows_of(folder, "strict_left_right", "test")
    for i, (s0, s1) in enumerate((("circle|square", "circle|square"), ("circle|square", "circle|star"))):
        predicate = json.loads(rows[i]["predicate"])
        predicate["details"]["stratum_0"], predicate["details"]["stratum_1"] = s0, s1
        rows[i]["predicate"] = json.dumps(predicate)
    write_rows(folder, "strict_left_right", "test", rows)
    found = problems(folder)
    assert len(found) == 1 and "pairs strata 'circle|square' and 'circle|star'" in found[0]

    for value, message in ((None, "records stratum None, not a non-empty string"), ("x", "row(s) record no stratum")):
        rows = rows_of(coco_folder, "category_count", "test")
        predicate = json.loads(rows[0]["predicate"])
        predicate["stratum"] = value
        rows[0]["predicate"] = json.dumps(predicate)
        if value is not None:  # one row with a stratum, the others without
            for row in rows[1:]:
                p = json.loads(row["predicate"])
                p.pop("stratum", None)
                row["predicate"] = json.dumps(p)
        strata = copy(coco_folder, tmp_path, f"strata_{value}")
        write_rows(strata, "category_count", "test", rows)
        assert any(message in p for p in problems(strata)), message


# --- captions and truth ------------------------------------------------------------------------------------------


def test_swapped_captions_are_matched_violations(coco_folder, gqa_folder, tmp_path):
    for source, folder, family in (("coco", coco_folder, "strict_left_right"), ("gqa", gqa_folder, "binding")):
        tampered = copy(folder, tmp_path, source)
        rows = rows_of(tampered, family, "test")
        row = rows[0]
        row["caption_0"], row["caption_1"] = row["caption_1"], row["caption_0"]
        predicate = json.loads(row["predicate"])
        predicate["caption_0"], predicate["caption_1"] = predicate["caption_1"], predicate["caption_0"]
        row["predicate"] = json.dumps(predicate)
        write_rows(tampered, family, "test", rows)
        found = problems(tampered)
        assert len(found) == 4, found  # two matched pairs false, two swaps true
        assert sum(f"matched (image_{k}, caption_{k})" in p and p.endswith(f"is {FALSE}") for p in found for k in (0, 1)) == 2
        assert sum("swapped" in p and f"is {TRUE}, not false" in p for p in found) == 2


def test_a_caption_must_say_its_stored_meaning(coco_folder, gqa_folder, tmp_path):
    folder = copy(coco_folder, tmp_path, "coco")
    rows = rows_of(folder, "object_position", "test")
    rows[0]["caption_0"] = rows[0]["caption_0"].replace(" left ", " right ") if " left " in rows[0]["caption_0"] \
        else rows[0]["caption_0"].replace(" right ", " left ")  # fmt: skip
    write_rows(folder, "object_position", "test", rows)
    found = problems(folder)
    assert any("caption_0: caption" in p and "but the predicate stores" in p for p in found)

    reworded = copy(coco_folder, tmp_path, "reworded")
    rows = rows_of(reworded, "category_count", "test")
    rows[0]["caption_1"] = "a lovely picture"
    write_rows(reworded, "category_count", "test", rows)
    only(problems(reworded), "follows no COCO template")

    human = copy(coco_folder, tmp_path, "human")
    rows = rows_of(human, "coarse_object", "test")
    rows[0]["caption_0"] = rows[1]["caption_1"] if rows[1]["caption_1"] != rows[0]["caption_0"] else "a picture"
    write_rows(human, "coarse_object", "test", rows)
    assert any("is not one of its image's own COCO captions" in p for p in problems(human))

    margin = copy(coco_folder, tmp_path, "margin")
    rows = rows_of(margin, "strict_left_right", "test")
    predicate = json.loads(rows[0]["predicate"])
    predicate["caption_0"]["margin"] = 0.0
    rows[0]["predicate"] = json.dumps(predicate)
    write_rows(margin, "strict_left_right", "test", rows)
    only(problems(margin), "stores margin 0.0, the rule says 0.1")

    gqa = copy(gqa_folder, tmp_path, "gqa")
    rows = rows_of(gqa, "attribute_color", "test")
    predicate = json.loads(rows[0]["predicate"])
    predicate["caption_0"]["value"] = "purple" if predicate["caption_0"]["value"] != "purple" else "cyan"
    rows[0]["predicate"] = json.dumps(predicate)
    write_rows(gqa, "attribute_color", "test", rows)
    only(problems(gqa), "but the predicate stores")

    broken = copy(coco_folder, tmp_path, "broken")
    rows = rows_of(broken, "category_count", "test")
    rows[0]["predicate"] = "{not json"
    write_rows(broken, "category_count", "test", rows)
    only(problems(broken), "unreadable predicate JSON")


def test_the_builds_thresholds_are_the_ones_checked(coco_folder, tmp_path):
    folder = copy(coco_folder, tmp_path)
    info = json.loads((folder / "build_info.json").read_text())
    info["thresholds"] = {"margin": 0.45, "size_ratio": None}
    (folder / "build_info.json").write_text(json.dumps(info))
    found = problems(folder)
    # Every stored margin now disagrees with the build's, so each relation/position caption is reported.
    assert found and all("stores margin 0.1, the rule says 0.45" in p for p in found if "stores" in p)
    assert {p.split(" seed ")[0] for p in found} == {"strict_left_right", "object_position"}


def _edit_instances(root: Path, split: str, edit) -> None:
    path = root / "annotations" / f"instances_{split}.json"
    data = json.loads(path.read_text())
    edit(data)
    path.write_text(json.dumps(data))


def test_raw_annotations_decide_moved_objects_and_crowd_regions(shapes_world, tmp_path):
    world = tmp_path / "world"
    shutil.copytree(shapes_world, world)
    out, _ = build_coco_folder(world, tmp_path / "cycles", ["object_position"], seeds=[0], min_cycles=5)
    assert audit_folder(out)["ok"]
    rows = rows_of(out, "object_position", "test")
    row = rows[0]
    meaning = json.loads(row["predicate"])["caption_0"]
    data = json.loads((world / "annotations" / "instances_val2017.json").read_text())
    cat_id = next(c["id"] for c in data["categories"] if c["name"] == meaning["subject"])
    width = next(i["width"] for i in data["images"] if i["id"] == row["image_id_0"])
    uses = [(r["cycle_id"], k) for r in rows for k in (0, 1) if r[f"image_id_{k}"] == row["image_id_0"]
            and json.loads(r["predicate"])[f"caption_{k}"]["subject"] == meaning["subject"]]  # fmt: skip

    def centre(data):
        for ann in data["annotations"]:
            if ann["image_id"] == row["image_id_0"] and ann["category_id"] == cat_id:
                ann["bbox"][0] = width / 2 - ann["bbox"][2] / 2

    _edit_instances(world, "val2017", centre)
    found = problems(out)
    # Each matched pair of that image and subject is now ambiguous, and so is each swap into it.
    matched = [p for p in found if "matched" in p]
    assert len(matched) == len(uses) and all(p.endswith(f"is {AMBIGUOUS}") for p in matched)

    shutil.copy(shapes_world / "annotations" / "instances_val2017.json", world / "annotations" / "instances_val2017.json")
    assert audit_folder(out)["ok"]

    def crowd(data):
        data["annotations"].append({"id": 10**9, "image_id": row["image_id_0"], "category_id": cat_id,
                                    "bbox": [1, 1, 3, 3], "area": 9, "iscrowd": 1, "segmentation": []})  # fmt: skip

    _edit_instances(world, "val2017", crowd)
    matched = [p for p in problems(out) if "matched" in p]
    assert len(matched) == len(uses) and all(p.endswith(f"is {AMBIGUOUS}") for p in matched)


# --- the truth of claims, by hand --------------------------------------------------------------------------------


def image(boxes, crowd=(), width=100.0, height=100.0) -> Image:
    return Image("x.jpg", width, height, {k: list(v) for k, v in boxes.items()}, set(crowd))


@pytest.mark.parametrize(
    ("relation", "a", "b", "expected"),
    [
        # Centres: a at (15, 50); b moved around it. Margin 0.1 x 100 = 10.
        ("to the left of", (10, 45, 10, 10), (40, 45, 10, 10), TRUE),
        ("to the left of", (40, 45, 10, 10), (10, 45, 10, 10), FALSE),
        ("to the left of", (10, 45, 10, 10), (15, 45, 10, 10), AMBIGUOUS),  # 5 px apart: inside the margin
        ("to the left of", (10, 45, 10, 10), (20, 45, 10, 10), TRUE),  # exactly the margin
        ("to the right of", (40, 45, 10, 10), (10, 45, 10, 10), TRUE),
        ("to the right of", (10, 45, 10, 10), (40, 45, 10, 10), FALSE),
        ("above", (45, 10, 10, 10), (45, 40, 10, 10), TRUE),
        ("above", (45, 40, 10, 10), (45, 10, 10, 10), FALSE),
        ("below", (45, 40, 10, 10), (45, 10, 10, 10), TRUE),
        ("below", (45, 10, 10, 10), (45, 40, 10, 10), FALSE),
        ("below", (45, 10, 10, 10), (45, 15, 10, 10), AMBIGUOUS),
        ("larger than", (0, 0, 30, 20), (50, 50, 20, 20), TRUE),  # 600 >= 1.5 x 400
        ("larger than", (0, 0, 20, 20), (50, 50, 30, 20), FALSE),
        ("larger than", (0, 0, 25, 20), (50, 50, 20, 20), AMBIGUOUS),  # 500 < 600 and 400 < 750
        ("smaller than", (0, 0, 20, 20), (50, 50, 30, 20), TRUE),
        ("smaller than", (0, 0, 30, 20), (50, 50, 20, 20), FALSE),
    ],
)
def test_relation_truth_by_hand(relation, a, b, expected):
    claim = {"kind": "relation", "subject": "cat", "relation": relation, "object": "dog"}
    assert coco_truth(claim, image({"cat": [a], "dog": [b]}), {}) == expected


def test_every_instance_pair_absence_and_crowd_decide_relations():
    claim = {"kind": "relation", "subject": "cat", "relation": "to the left of", "object": "dog"}
    two_dogs_right = image({"cat": [(0, 0, 10, 10)], "dog": [(50, 0, 10, 10), (80, 0, 10, 10)]})
    one_dog_each_side = image({"cat": [(40, 0, 10, 10)], "dog": [(80, 0, 10, 10), (0, 0, 10, 10)]})
    assert coco_truth(claim, two_dogs_right, {}) == TRUE
    assert coco_truth(claim, one_dog_each_side, {}) == AMBIGUOUS
    assert coco_truth(claim, image({"cat": [(0, 0, 10, 10)]}), {}) == FALSE  # dog absent
    crowd = image({"cat": [(0, 0, 10, 10)], "dog": [(50, 0, 10, 10)]}, crowd={"dog"})
    assert coco_truth(claim, crowd, {}) == AMBIGUOUS
    assert coco_truth(claim, image({"cat": [(0, 0, 10, 10)]}, crowd={"dog"}), {}) == AMBIGUOUS
    # Absence decides before crowd ambiguity (the builder's rule): no cat at all, a crowd of dogs -> false.
    assert coco_truth(claim, image({}, crowd={"dog"}), {}) == FALSE
    assert coco_truth(claim, image({"dog": [(50, 0, 10, 10)]}, crowd={"dog"}), {}) == FALSE


def test_positions_counts_presence_by_hand():
    left = {"kind": "position", "subject": "cat", "side": "left"}
    right = {**left, "side": "right"}
    assert coco_truth(left, image({"cat": [(10, 0, 20, 10)]}), {}) == TRUE  # centre 20 <= 40
    assert coco_truth(right, image({"cat": [(10, 0, 20, 10)]}), {}) == FALSE
    assert coco_truth(left, image({"cat": [(35, 0, 20, 10)]}), {}) == AMBIGUOUS  # centre 45
    assert coco_truth(left, image({"cat": [(10, 0, 20, 10), (70, 0, 20, 10)]}), {}) == AMBIGUOUS
    assert coco_truth(right, image({"cat": [(60, 0, 20, 10), (70, 0, 20, 10)]}), {}) == TRUE
    assert coco_truth(left, image({"cat": [(10, 0, 20, 10)]}, crowd={"cat"}), {}) == AMBIGUOUS
    assert coco_truth(left, image({"dog": [(10, 0, 20, 10)]}), {}) == FALSE
    two = {"kind": "count", "subject": "cat", "count": 2}
    assert coco_truth(two, image({"cat": [(0, 0, 5, 5), (9, 9, 5, 5)]}), {}) == TRUE
    assert coco_truth(two, image({"cat": [(0, 0, 5, 5)]}), {}) == FALSE
    assert coco_truth(two, image({"cat": [(0, 0, 5, 5), (9, 9, 5, 5)]}, crowd={"cat"}), {}) == AMBIGUOUS
    animal = {"kind": "supercategory", "supercategory": "animal"}
    assert coco_truth(animal, image({"car": [(0, 0, 5, 5)]}, crowd={"cat"}), {"cat": "animal", "car": "vehicle"}) == TRUE
    assert coco_truth(animal, image({"car": [(0, 0, 5, 5)]}), {"cat": "animal", "car": "vehicle"}) == FALSE
    pair = {"kind": "mentions", "categories": ["cat", "car"]}
    assert coco_truth(pair, image({"car": [(0, 0, 5, 5)]}, crowd={"cat"}), {}) == TRUE
    assert coco_truth(pair, image({"car": [(0, 0, 5, 5)]}), {}) == FALSE


def test_gqa_spatial_relations_need_every_pair_and_no_contradiction():
    def graph(edges, names=("cup", "plate")):
        objects = {str(i): {"name": n, "attributes": [], "relations": []} for i, n in enumerate(names)}
        for source, relation, target in edges:
            objects[source]["relations"].append({"name": relation, "object": target})
        return Image("x.jpg", 100, 100, objects=objects)

    assert gqa_relation_truth("cup", "to the left of", "plate", graph([("0", "to the left of", "1")])) == TRUE
    # The inverse edge of the opposite relation states the same fact.
    assert gqa_relation_truth("cup", "to the left of", "plate", graph([("1", "to the right of", "0")])) == TRUE
    assert gqa_relation_truth("cup", "to the left of", "plate", graph([("0", "to the right of", "1")])) == FALSE
    both = graph([("0", "to the left of", "1"), ("1", "to the left of", "0")])
    assert gqa_relation_truth("cup", "to the left of", "plate", both) == AMBIGUOUS
    assert gqa_relation_truth("cup", "to the left of", "plate", graph([])) == AMBIGUOUS  # a missing edge is not falsity
    assert gqa_relation_truth("cup", "to the left of", "fork", graph([])) == FALSE  # a named object is absent
    two_plates = graph([("0", "above", "1")], names=("cup", "plate", "plate"))
    assert gqa_relation_truth("cup", "above", "plate", two_plates) == AMBIGUOUS
    assert gqa_relation_truth("cup", "holding", "plate", graph([("0", "holding", "1")])) == TRUE
    assert gqa_relation_truth("cup", "holding", "plate", graph([])) == AMBIGUOUS


def test_the_full_shapes_folder_passes(shapes_cycles, capsys):
    """Every COCO family built from the shapes world satisfies the audit's reading of its captions."""
    result = audit_folder(shapes_cycles)
    families = {row["family"] for row in result["table"]}
    assert len(families) == 14
    assert result["ok"], sorted({p.split(":")[0] for p in result["problems"]})


# --- file integrity (recomputed digests, not the builder's verification) -----------------------------------------


def _record(folder: Path) -> dict:
    return json.loads((folder / "build_info.json").read_text())


def test_an_edited_file_with_the_same_rows_fails_the_digest(coco_folder, tmp_path):
    target = copy(coco_folder, tmp_path)
    path = target / "data" / "strict_left_right" / "seed0" / "test.parquet"
    table = pq.read_table(path)
    pq.write_table(table, path, compression="gzip")  # same rows and values, different bytes
    assert pq.read_table(path).equals(table)
    found = problems(target, integrity=True)
    only(found, "file integrity: data/strict_left_right/seed0/test.parquet: sha256")


def test_row_counts_and_listing_in_the_files_record_are_checked(coco_folder, tmp_path):
    target = copy(coco_folder, tmp_path)
    info = _record(target)
    rel = "data/strict_left_right/seed0/train.parquet"
    info["files"][rel]["rows"] += 1
    info["files"]["data/strict_left_right/seed0/extra.parquet"] = {"rows": 1, "sha256": "0" * 64}
    del info["files"]["data/coarse_object/seed1/test.parquet"]
    (target / "build_info.json").write_text(json.dumps(info))
    found = problems(target, integrity=True)
    rows = pq.ParquetFile(target / rel).metadata.num_rows  # the count on disk, read independently
    assert f"file integrity: {rel}: {rows} rows but build_info.json `files` records {rows + 1}" in found
    assert any("extra.parquet: listed in build_info.json `files`" in p for p in found)
    assert "file integrity: data/coarse_object/seed1/test.parquet: not listed in build_info.json `files`" in found
    assert len(found) == 3, found


def test_a_folder_without_a_files_record_is_reported(coco_folder, tmp_path):
    target = copy(coco_folder, tmp_path)
    info = _record(target)
    del info["files"]
    (target / "build_info.json").write_text(json.dumps(info))
    only(problems(target, integrity=True), "no `files` record")


def test_the_audit_reads_raw_annotations_as_a_strangers_files(tmp_path: Path) -> None:
    """A FIFO named like an annotation file is refused without waiting on it; deep nesting is a named error."""
    import os

    from clip_cycles.data.folder.audit import _load_json

    fifo = tmp_path / "instances_val2017.json"
    os.mkfifo(fifo)
    with pytest.raises(ValueError, match="not a regular file"):
        _load_json(fifo)  # would block forever in a plain open()
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(ValueError, match=r"deep\.json: JSON nested too deeply"):
        _load_json(deep)
    valid = tmp_path / "ok.json"
    valid.write_text('{"images": [{"id": 1}]}')
    assert _load_json(valid) == {"images": [{"id": 1}]}
    with pytest.raises(FileNotFoundError, match="--source-root"):
        _load_json(tmp_path / "missing.json")
