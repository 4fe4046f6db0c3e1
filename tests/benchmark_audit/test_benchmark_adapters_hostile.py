"""Well-formed hostile input to the adapters (issue 55): every shape an adapter does not expect is one
sentence naming the file and the item (exit 2, no traceback), a CSV field of any size is read, and an
image crop is bounded before PIL allocates it, with ``--skip-bad-images`` counting every decode error.
The published shapes still read as before.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from benchmark_formats import aro_vg_rows, write_aro, write_image, write_sugarcrepe
from benchmark_formats_published import (
    CREPE_HEADER,
    write_crepe,
    write_mmvp_vlm,
    write_sugarcrepe_pp,
    write_valse,
)

from clip_cycles.benchmark_audit.adapters import load_benchmark
from clip_cycles.benchmark_audit.design import CroppedImageItem, check_box
from clip_cycles.cli import main

#: A field longer than the csv module's default limit (131,072 characters).
LONG = 200_000


def _audit(name: str, root: Path, out: Path, *extra: str) -> int:
    return main(["audit-benchmark", name, "--root", str(root), "--out", str(out), *extra])


# --------------------------------------------------------------------------- a list of non-objects


def _first_piece(name: str, root: Path) -> Path:
    if name == "sugarcrepe":
        write_sugarcrepe(root, images=False)
        return root / "add_obj.json"
    if name == "sugarcrepe_pp":
        write_sugarcrepe_pp(root)
        return root / "replace_obj.json"
    write_valse(root)
    return root / "existence.json"


@pytest.mark.parametrize("name", ["sugarcrepe", "sugarcrepe_pp", "valse", "valse_all"])
@pytest.mark.parametrize(("content", "item"), [([1, 2], 0), ([None], 0), (["text"], 0), ([[]], 0)])
def test_a_list_of_non_objects_is_a_sentence_naming_file_and_item(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, content: list, item: int
) -> None:
    path = _first_piece(name, tmp_path / "root")
    path.write_text(json.dumps(content))
    assert _audit(name, tmp_path / "root", tmp_path / "out") == 2
    err = capsys.readouterr().err
    assert f"{path}: item {item} must be an object with " in err and "Traceback" not in err, err
    assert not (tmp_path / "out").exists()  # refused before anything is written


@pytest.mark.parametrize("name", ["sugarcrepe", "sugarcrepe_pp", "valse"])
def test_a_non_object_after_good_items_is_named_by_its_position(tmp_path: Path, name: str) -> None:
    path = _first_piece(name, tmp_path / "root")
    data = json.loads(path.read_text())
    good = list(data.values()) if isinstance(data, dict) else data
    path.write_text(json.dumps([*good, 7]))
    with pytest.raises(ValueError, match=rf"^{path}: item {len(good)} must be an object with "):
        load_benchmark(name, tmp_path / "root")


# --------------------------------------------------------------------------- CSV fields of any size


def test_a_crepe_caption_longer_than_the_csv_default_limit_is_read(tmp_path: Path) -> None:
    expected = write_crepe(tmp_path / "crepe")
    path = next((tmp_path / "crepe").rglob("prod_*.csv"))
    long_caption = "a dog " * (LONG // 6)
    with open(path, "a", newline="") as handle:
        csv.writer(handle).writerow(["2399999", 1, 2, 30, 40, long_caption, repr(["a cat"])])
    sets = {s.name: s for s in load_benchmark("crepe", tmp_path / "crepe")}
    found = sets[path.stem]
    assert found.n_comparisons == len(expected[path.stem]) + 1
    assert long_caption in found.captions
    assert _audit("crepe", tmp_path / "crepe", tmp_path / "out") == 0


def test_an_mmvp_statement_longer_than_the_csv_default_limit_is_read(tmp_path: Path) -> None:
    write_mmvp_vlm(tmp_path / "mmvp")
    table = tmp_path / "mmvp" / "MMVP_VLM" / "Questions.csv"
    rows = list(csv.reader(io.StringIO(table.read_text())))
    rows[1][2] = "The dog's face is facing left " + "and left " * (LONG // 9)
    with open(table, "w", newline="") as handle:
        csv.writer(handle).writerows(rows)
    sets = {s.name: s for s in load_benchmark("mmvp_vlm", tmp_path / "mmvp")}
    assert rows[1][2] in sets["Orientation and Direction"].captions
    assert _audit("mmvp_vlm", tmp_path / "mmvp", tmp_path / "out") == 0


def test_the_csv_limit_follows_the_file_and_is_never_lowered(tmp_path: Path) -> None:
    write_crepe(tmp_path / "crepe")
    before = csv.field_size_limit()
    load_benchmark("crepe", tmp_path / "crepe")  # a small file: the limit stays where it was
    assert csv.field_size_limit() == before


# --------------------------------------------------------------------------- image crops bounded


@pytest.mark.parametrize(
    "box",
    [(0.0, 0.0, 1e300, 1e300), (0.0, 0.0, 1e9, 10.0), (-1e12, 0.0, 5.0, 5.0), (2.0, 3.0, float("inf"), 4.0), (0, 0, -5, 5)],
)
def test_a_box_that_does_not_fit_its_image_is_a_sentence_before_the_crop(tmp_path: Path, box: tuple) -> None:
    path = write_image(tmp_path / "1.jpg", 1, fmt="JPEG")  # 40 x 30
    item = CroppedImageItem(key="1.jpg#box", path=path, box=box)
    with pytest.raises(ValueError, match=r"box .* does not fit its 40x30 image; .*--skip-bad-images"):
        item.read_bytes()


def test_a_published_box_crops_exactly_as_pil_does(tmp_path: Path) -> None:
    from PIL import Image

    path = write_image(tmp_path / "1.jpg", 1, fmt="JPEG")
    for box in [(2.0, 3.0, 20.0, 10.0), (0.0, 0.0, 40.0, 30.0), (35.0, 25.0, 10.0, 10.0)]:  # the last runs past the edge
        check_box(box, (40, 30), "image")
        x, y, w, h = box
        with Image.open(path) as image:
            expected = io.BytesIO()
            image.convert("RGB").crop((x, y, x + w, y + h)).save(expected, format="PNG")
        assert CroppedImageItem(key="k", path=path, box=box).read_bytes() == expected.getvalue()


def test_a_truncated_image_under_a_box_is_a_sentence_naming_it(tmp_path: Path) -> None:
    path = write_image(tmp_path / "1.png", 1)
    path.write_bytes(path.read_bytes()[:60])  # a PNG header and half a chunk
    with pytest.raises(ValueError, match=r"image 'k' at .*1\.png cannot be decoded"):
        CroppedImageItem(key="k", path=path, box=(0.0, 0.0, 5.0, 5.0)).read_bytes()


def test_aro_boxes_of_1e300_are_skipped_and_named_with_the_flag_and_a_sentence_without(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_aro(tmp_path / "aro")
    rows = aro_vg_rows()
    rows[2].update(bbox_w=1e300, bbox_h=1e300)  # the unpaired item: the paired two stay a cycle
    (tmp_path / "aro" / "visual_genome_relation.json").write_text(json.dumps(rows))
    model = ["--model", "cycles-tiny", "--pretrained", "shapes", "--cache-dir", str(tmp_path / "cache")]
    model += ["--device", "cpu", "--num-workers", "0"]
    assert _audit("aro", tmp_path / "aro", tmp_path / "a", *model) == 2
    err = capsys.readouterr().err
    assert "3.jpg#box=5,5,1e+300,1e+300" in err and "does not fit its 40x30 image" in err and "Traceback" not in err, err
    assert not (tmp_path / "a").exists()
    assert _audit("aro", tmp_path / "aro", tmp_path / "b", *model, "--skip-bad-images") == 0
    metrics = json.loads((tmp_path / "b" / "audit_aro.json").read_text())["metrics"]
    relation = metrics["subsets"]["vg_relation"]
    assert relation["skipped"] == {"comparison_of_item_with_bad_image": 1} and relation["n_comparisons"] == 2
    assert list(metrics["encoding"]["bad_images"]) == ["3.jpg#box=5,5,1e+300,1e+300"]
    assert "does not fit" in metrics["encoding"]["bad_images"]["3.jpg#box=5,5,1e+300,1e+300"]


# --------------------------------------------------------------------------- the published shapes still pass


def test_the_published_shapes_still_read_with_their_counts(tmp_path: Path) -> None:
    expected = {
        "sugarcrepe_pp": write_sugarcrepe_pp(tmp_path / "sugarcrepe_pp"),
        "valse": write_valse(tmp_path / "valse"),
        "crepe": write_crepe(tmp_path / "crepe"),
    }
    for name, pairs in expected.items():
        found = {s.name: s.n_comparisons for s in load_benchmark(name, tmp_path / name)}
        assert found == {subset: len(rows) for subset, rows in pairs.items()}, name
    blocks = write_mmvp_vlm(tmp_path / "mmvp")
    found = {s.name: s.n_comparisons for s in load_benchmark("mmvp_vlm", tmp_path / "mmvp")}
    assert found == {subset: 4 * len(rows) for subset, rows in blocks.items()}
    assert CREPE_HEADER[5] == "caption"
