"""Folders fit to share on the Hub: images stored once, ``predicate`` as a struct, portable cards,
``DatasetInfo`` from the card, and a warning on an unavailable split.

Expected values come from the reference-mode folder's own files and the raw shapes world,
opened here with pyarrow and PIL, never from the writer's helpers.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import warnings
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from PIL import Image

from clip_cycles.data.folder.audit import audit_folder
from clip_cycles.data.folder.build import build_coco_folder, build_gqa_folder
from clip_cycles.data.folder.reader import UnavailableSplitWarning, load_split, open_built_folder, read_cycle_rows
from clip_cycles.data.folder.writer import predicate_type, read_build_info, verify_folder_files
from clip_cycles.tasks.registry import get_task

SPLITS = ("train", "validation", "test")
#: Absolute local paths as they would appear in a card (POSIX roots, Windows drives).
ABSOLUTE = re.compile(r"(?:^|[\s'\"`(=])(?:/(?:tmp|home|root|Users|work|var|mnt|data|private)/|[A-Za-z]:\\)")


@pytest.fixture(scope="module")
def self_contained(shapes_world: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The ``shapes_cycles`` build (all COCO families, seeds 0-2, min 5) with its images stored in the folder."""
    out = tmp_path_factory.mktemp("hub") / "shapes_cycles"
    folder, _ = build_coco_folder(shapes_world, out, min_cycles=5, self_contained=True)
    return folder


def folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def reference_images(folder: Path) -> set[str]:
    """Every image file name the rows of a reference-mode folder use."""
    names: set[str] = set()
    for path in (folder / "data").rglob("*.parquet"):
        table = pq.read_table(path, columns=["image_0", "image_1"])
        names.update(table.column("image_0").to_pylist(), table.column("image_1").to_pylist())
    return names


def test_embedding_adds_at_most_one_and_a_half_times_the_unique_image_bytes(shapes_cycles, self_contained, shapes_world):
    names = reference_images(shapes_cycles)
    unique = sum((shapes_world / name).stat().st_size for name in names)
    added = folder_bytes(self_contained) - folder_bytes(shapes_cycles)
    ratio = added / unique
    print(f"self-contained adds {added} bytes for {len(names)} unique images of {unique} bytes: {ratio:.3f}x")
    assert ratio <= 1.5  # every family x seed x split embedding its images again gave ~36x here
    readme = (Path(__file__).resolve().parents[3] / "README.md").read_text(encoding="utf-8")
    assert f"embedding adds {ratio:.2f}x the\nbytes of the unique images" in readme  # the README quotes this run's figure
    # Each image is one file in the folder, byte-identical to the source.
    images = self_contained / "data" / "images"
    stored = {p.relative_to(images).as_posix() for p in images.rglob("*") if p.is_file()}
    assert stored == names
    assert all((images / n).read_bytes() == (shapes_world / n).read_bytes() for n in names)
    rows = list((self_contained / "data").glob("*.parquet"))
    assert rows and all(pq.read_schema(p).field("image_0_file_name").type == "string" for p in rows)


@pytest.mark.parametrize(("config", "split"), [("strict_size", "test"), ("object_variant_seed1", "validation")])
def test_load_dataset_gives_the_reference_rows_and_pixel_identical_images(shapes_cycles, self_contained, shapes_world,
                                                                           tmp_path, config, split):  # fmt: skip
    import datasets

    embedded = datasets.load_dataset(str(self_contained), config, split=split, cache_dir=str(tmp_path / "a"))
    plain = datasets.load_dataset(str(shapes_cycles), config, split=split, cache_dir=str(tmp_path / "b"))
    assert embedded.column_names == plain.column_names
    assert embedded.column_names[:4] == ["image_0", "image_1", "caption_0", "caption_1"]
    assert isinstance(embedded.features["image_0"], datasets.Image) and isinstance(embedded.features["image_1"], datasets.Image)
    assert embedded.num_rows == plain.num_rows > 0
    others = [c for c in plain.column_names if c not in ("image_0", "image_1")]
    assert embedded.select_columns(others).to_list() == plain.select_columns(others).to_list()
    for got, want in zip(embedded, plain):
        for k in ("image_0", "image_1"):
            with Image.open(shapes_world / want[k]) as source:
                np.testing.assert_array_equal(np.asarray(got[k]), np.asarray(source))


def test_predicate_is_a_struct_with_the_json_text_beside_it(shapes_cycles, self_contained, tmp_path):
    import datasets

    for folder in (shapes_cycles, self_contained):
        test = datasets.load_dataset(str(folder), "strict_left_right", split="test", cache_dir=str(tmp_path / folder.name))
        feature = test.features["predicate"]
        assert isinstance(feature, dict) and feature["details"]["margin"] == datasets.Value("float64")
        assert feature["caption_0"]["relation"] == datasets.Value("string")
        for row in test:
            parsed = json.loads(row["predicate_json"])
            assert row["predicate"]["caption_0"]["relation"] == parsed["caption_0"]["relation"]
            assert row["predicate"]["details"]["pair"] == parsed["details"]["pair"]
            assert row["predicate"]["stratum"] == parsed["stratum"]
    # Families whose fields differ get their own struct types; every field is typed from the rows.
    counts = pq.read_schema(shapes_cycles / "data" / "category_count" / "seed0" / "test.parquet").field("predicate").type
    assert counts.field("caption_0").type.field("count").type == "int64"


def test_predicate_struct_errors_name_the_problem():
    assert str(predicate_type(['{"a": 1}', '{"a": 2.5, "b": "x"}'])) == "struct<a: double, b: string>"
    with pytest.raises(ValueError, match="cannot share one struct type"):
        predicate_type(['{"a": 1}', '{"a": "one"}'])
    with pytest.raises(ValueError, match="details is always an empty object"):
        predicate_type(['{"details": {}, "stratum": "s"}'])


def test_old_folders_with_a_json_predicate_still_audit(shapes_world, tmp_path):
    out, _ = build_coco_folder(shapes_world, tmp_path / "old", ["strict_size"], seeds=[0], min_cycles=5)
    info = json.loads((out / "build_info.json").read_text())
    for name in info["files"]:
        path = out / name
        table = pq.read_table(path)
        text = table.column("predicate_json")
        old = table.drop(["predicate", "predicate_json"]).append_column("predicate", text)
        pq.write_table(old, path)
        info["files"][name]["sha256"] = hashlib.sha256(path.read_bytes()).hexdigest()
    (out / "build_info.json").write_text(json.dumps(info))
    assert pq.read_schema(out / "data" / "strict_size" / "seed0" / "test.parquet").field("predicate").type == "string"
    assert verify_folder_files(out, read_build_info(out)) == []
    assert audit_folder(out)["ok"]


def test_cards_name_no_local_path(shapes_cycles, self_contained, shapes_world, tmp_path):
    gqa, _ = build_gqa_folder(shapes_world, tmp_path / "gqa", families=["relation_spatial"], seeds=(0,), min_cycles=5,
                              self_contained=True)  # fmt: skip
    for folder in (shapes_cycles, self_contained, gqa):
        card = (folder / "README.md").read_text()
        for path in (shapes_world, shapes_world.resolve(), folder, folder.resolve(), tmp_path):
            assert str(path) not in card
        assert not ABSOLUTE.search(card), ABSOLUTE.search(card)
        assert "--out " + folder.name in card and ("<coco root>" in card or "<gqa root>" in card)
        # build_info.json keeps the absolute raw root: reference mode reads the images from it.
        assert Path(json.loads((folder / "build_info.json").read_text())["source_root"]) == shapes_world.resolve()


def test_dataset_info_description_and_citation_come_from_the_card(self_contained, tmp_path):
    import datasets

    builder = datasets.load_dataset_builder(str(self_contained), "strict_size_seed2", cache_dir=str(tmp_path))
    assert "family strict_size" in builder.info.description and "seed 2" in builder.info.description
    assert "Can the Parts Fool the Test?" in builder.info.citation and "@" in builder.info.citation
    loaded = datasets.load_dataset(str(self_contained), "strict_size_seed2", split="test", cache_dir=str(tmp_path))
    assert loaded.info.description == builder.info.description


@pytest.mark.parametrize("self_contained_mode", [False, True])
def test_an_unavailable_split_is_left_out_of_configs_and_loads_with_a_warning(shapes_world, tmp_path, self_contained_mode):
    import datasets

    out, builds = build_coco_folder(shapes_world, tmp_path / "u", ["strict_size"], seeds=[0], min_cycles=30,
                                    self_contained=self_contained_mode)  # fmt: skip
    counts = builds[0].counts[0]
    short = [s for s in SPLITS if counts[s] < 30]
    assert short and len(short) < 3, counts  # the shapes world gives a mix at this minimum
    split, kept = short[0], next(s for s in SPLITS if s not in short)
    header = (out / "README.md").read_text().split("---")[1]
    assert f"unavailable_splits:\n- config_name: strict_size\n  split: {split}\n" in header
    assert f"  cycles: {counts[split]}\n" in header
    cache = str(tmp_path / "hf")
    with pytest.raises(ValueError, match=f'Unknown split "{split}"'):
        datasets.load_dataset(str(out), "strict_size", split=split, cache_dir=cache)
    description = datasets.load_dataset_builder(str(out), "strict_size", cache_dir=cache).info.description
    assert f"UNAVAILABLE split(s) {', '.join(short)}: fewer than 30 cycles" in description
    with pytest.warns(UnavailableSplitWarning, match=f"split '{split}' of config 'strict_size' \\({counts[split]} cycles\\)"):
        rows = load_split(out, "strict_size", split, cache_dir=cache)
    assert rows.num_rows == counts[split] and set(rows["split"]) == {split}
    assert isinstance(rows.features["predicate"], dict)
    if self_contained_mode:
        assert rows[0]["image_0"].size == (64, 64)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # an available split loads without a warning
        assert load_split(out, "strict_size", kept, cache_dir=cache).num_rows == counts[kept]
    with pytest.raises(ValueError, match="no config 'strict_size_seed4'"):
        load_split(out, "strict_size_seed4", kept)
    assert audit_folder(out)["ok"]


def test_the_reader_reads_stored_images_as_the_reference_files(shapes_cycles, self_contained, shapes_world):
    task = get_task("cycles/coco_strict_size")
    embedded = read_cycle_rows(open_built_folder(self_contained), task, 1, "test")
    plain = read_cycle_rows(open_built_folder(shapes_cycles), task, 1, "test")
    assert [i.key for i in embedded.image_items] == [i.key for i in plain.image_items]
    assert embedded.image_index.tolist() == plain.image_index.tolist()
    assert embedded.captions == plain.captions and embedded.cycle_ids == plain.cycle_ids
    for item in embedded.image_items:
        assert item.path is not None and self_contained in item.path.parents
        assert item.read_bytes() == (shapes_world / item.key).read_bytes()


def test_an_edited_or_missing_stored_image_is_caught(self_contained, tmp_path):
    info = read_build_info(self_contained)
    assert verify_folder_files(self_contained, info) == [] and audit_folder(self_contained)["ok"]
    edited = tmp_path / "edited"
    shutil.copytree(self_contained, edited)
    victim = sorted(info["images"])[3]
    (edited / victim).write_bytes((edited / victim).read_bytes()[:-1] + b"\0")
    problems = verify_folder_files(edited, info, families=["strict_size"])  # shared images: checked for any family
    assert problems == [
        f"{edited / victim}: stored image differs from its size and sha256 in build_info.json; rebuild the folder"
    ]
    assert any(victim in p and "stored image differs" in p for p in audit_folder(edited)["problems"])
    with pytest.raises(ValueError, match="does not match its build_info.json"):
        open_built_folder(edited)
    (edited / victim).unlink()
    assert any("stored image listed in build_info.json but missing" in p for p in verify_folder_files(edited, info))


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda info: info.pop("images"), "field 'images' is missing"),
        (lambda info: info["images"].update({"data/images/../x.jpg": {"bytes": 1, "sha256": "0" * 64}}), "not a path below"),
        (lambda info: info.update(layout="zip"), "field 'layout': 'zip' is not one of"),
        (lambda info: info["files"].update({"data/strict_size/seed0/test.parquet": {"rows": 1, "sha256": "0" * 64}}),
         "is not a data/<family>-seed0-<split>.parquet path"),
    ],
)  # fmt: skip
def test_build_info_of_the_imagefolder_layout_is_validated(self_contained, tmp_path, edit, message):
    folder = tmp_path / "f"
    folder.mkdir()
    info = json.loads((self_contained / "build_info.json").read_text())
    edit(info)
    (folder / "build_info.json").write_text(json.dumps(info))
    with pytest.raises(ValueError, match=re.escape(message)):
        read_build_info(folder)


def test_self_contained_builds_are_byte_identical_and_rebuild_in_place(shapes_world, tmp_path):
    def tree(folder: Path) -> dict[str, bytes]:
        return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}

    a, _ = build_coco_folder(shapes_world, tmp_path / "a" / "sc", ["strict_size", "box_size"], seeds=[0, 1], min_cycles=5,
                             self_contained=True)  # fmt: skip
    b, _ = build_coco_folder(shapes_world, tmp_path / "b" / "sc", ["strict_size", "box_size"], seeds=[0, 1], min_cycles=5,
                             self_contained=True)  # fmt: skip
    first, second = tree(a), tree(b)
    info_a, info_b = (json.loads(t.pop("build_info.json")) for t in (first, second))
    assert first == second  # rows, images and the card (no machine path in it)
    assert info_a.pop("rebuild_command") != info_b.pop("rebuild_command") and info_a == info_b  # only --out differs
    # A rebuild over its own folder needs no --overwrite: the stored images are the build's own files.
    build_coco_folder(shapes_world, a, ["strict_size"], seeds=[0], min_cycles=5, self_contained=True)
    again = tree(a)
    assert not any("box_size" in name for name in again) and verify_folder_files(a, read_build_info(a)) == []
    assert set(json.loads(again["build_info.json"])["images"]) == {n for n in again if n.startswith("data/images/")}


def test_the_hf_datasets_builder_script_writes_its_own_folder(tmp_path, monkeypatch):
    """The script builds next to itself and its card template (files no build wrote), self-contained."""
    import runpy
    import sys

    import datasets

    folder = tmp_path / "shapes_cycles"
    shutil.copytree(Path(__file__).resolve().parents[3] / "hf_datasets" / "shapes_cycles", folder)
    argv = ["build.py", "--world", str(tmp_path / "world"), "--n-images", "300", "--image-size", "64", "--min-cycles", "5",
            "--seeds", "0", "--self-contained"]  # fmt: skip
    monkeypatch.setattr(sys, "argv", argv)
    with pytest.raises(SystemExit) as stop:  # the script exits with the command's status, as gqa_cycles/build.py
        runpy.run_path(str(folder / "build.py"), run_name="__main__")
    assert stop.value.code == 0
    assert (folder / "build.py").is_file() and "card template" not in (folder / "README.md").read_text()
    assert read_build_info(folder)["layout"] == "imagefolder" and (folder / "data" / "images").is_dir()
    test = datasets.load_dataset(str(folder), "box_size", split="test", cache_dir=str(tmp_path / "hf"))
    assert test.num_rows > 0 and test[0]["image_1"].size == (64, 64)
    assert audit_folder(folder)["ok"]


def test_the_coco_builder_script_is_the_build_command_with_this_folder(shapes_world, tmp_path, capsys):
    """hf_datasets/coco_cycles/build.py forwards its flags to `clip-cycles build coco`: the same bytes as the library."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "coco_cycles_build", Path(__file__).resolve().parents[3] / "hf_datasets" / "coco_cycles" / "build.py"
    )
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    flags = ["--families", "strict_size", "--seeds", "0", "--min-cycles", "5", "--pool-train", "0", "--pool-val", "0"]
    assert script.main(["--coco-root", str(shapes_world), "--out", str(tmp_path / "script" / "cycles"), *flags]) == 0
    assert "written to" in capsys.readouterr().out
    library, _ = build_coco_folder(shapes_world, tmp_path / "library" / "cycles", ["strict_size"], seeds=[0], min_cycles=5,
                                   pool_train=None, pool_val=None)  # fmt: skip
    for path in sorted(library.rglob("*")):
        if path.is_file():
            other = tmp_path / "script" / "cycles" / path.relative_to(library)
            assert path.read_bytes().replace(b"/library/", b"/script/") == other.read_bytes(), path.name


def test_the_lmms_eval_bridge_refuses_an_unavailable_scored_split(shapes_world, tmp_path):
    from clip_cycles.integrations.lmms_bridge import write_lmms_tasks

    out, builds = build_coco_folder(shapes_world, tmp_path / "u", ["strict_size"], seeds=[0], min_cycles=40)
    assert builds[0].counts[0]["test"] < 40 <= builds[0].counts[0]["train"]  # test is short, train is not
    with pytest.raises(ValueError, match="split 'test' of family 'strict_size' is unavailable .*fewer than 40 cycles"):
        write_lmms_tasks(out, tmp_path / "tasks", ["cycles/coco_strict_size"], seeds=[0])
    assert not (tmp_path / "tasks").exists()
