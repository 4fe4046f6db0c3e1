"""The demo's SugarCrepe-format benchmark, detail by detail (benchmark_audit.shapes_benchmark; issue 56:
mutation-directed): id padding, the JSON bytes, the description record, the refusals' whole sentences and the
"already this benchmark" check. Images are in-memory bytes; every expected value is written out here."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clip_cycles.benchmark_audit.shapes_benchmark import (
    FORMAT,
    NAME,
    SPLIT,
    SUBSETS,
    hard_negatives,
    sugarcrepe_files,
    write_shapes_sugarcrepe,
)
from clip_cycles.data.folder.reader import CycleRows
from clip_cycles.data.sources.images import ImageItem


def _rows(n: int, prefix: str = "p") -> CycleRows:
    images = [
        (ImageItem(f"{prefix}/{2 * k}.png", data=b"A%d" % k), ImageItem(f"{prefix}/{2 * k + 1}.png", data=b"B%d" % k))
        for k in range(n)
    ]
    return CycleRows.from_pairs([f"c{k}" for k in range(n)], images, [(f"cap {k} é", f"neg {k}") for k in range(n)])


def test_hard_negatives_by_design() -> None:
    rows = _rows(2)
    assert hard_negatives(rows, "both_directions") == [
        ("p/0.png", "cap 0 é", "neg 0"),
        ("p/1.png", "neg 0", "cap 0 é"),
        ("p/2.png", "cap 1 é", "neg 1"),
        ("p/3.png", "neg 1", "cap 1 é"),
    ]
    assert hard_negatives(rows, "conjunction") == [
        ("p/0.png", "cap 0 é", "cap 0 é and neg 0"),
        ("p/2.png", "cap 1 é", "cap 1 é and neg 1"),
    ]
    with pytest.raises(ValueError) as caught:
        hard_negatives(rows, "reversed")
    assert str(caught.value) == "unknown subset design 'reversed'; known: both_directions, conjunction"


def test_ids_are_padded_to_the_longest_subset_and_names_are_checked() -> None:
    ten = [(f"i/{k}.png", f"c{k}", f"n{k}") for k in range(10)]
    files = sugarcrepe_files({"swap_att": ten, "add_obj": ten[:2]})
    assert list(files["swap_att"]) == [f"swap_att_{k:02d}" for k in range(10)]
    assert list(files["add_obj"]) == ["add_obj_00", "add_obj_01"]  # the width of the longest subset, for all
    assert files["add_obj"]["add_obj_01"] == {"filename": "i/1.png", "caption": "c1", "negative_caption": "n1"}
    nine = sugarcrepe_files({"s": ten[:9]})
    assert list(nine["s"])[-1] == "s_8"
    assert sugarcrepe_files({}) == {} and sugarcrepe_files({"s": []}) == {"s": {}}
    for key in ("../x.png", "/abs.png", "a\\b.png", "", "a/../../b.png"):
        with pytest.raises(ValueError) as caught:
            sugarcrepe_files({"s": [(key, "c", "n")]})
        assert str(caught.value) == f"image {key!r} is not a relative name below the source root; rebuild the family folder"
    assert sugarcrepe_files({"s": [("./a//b.png", "c", "n")]})["s"]["s_0"]["filename"] == "a/b.png"


def test_the_files_bytes_and_the_description(tmp_path: Path) -> None:
    rows = {"swap_att": _rows(1, "g"), "add_obj": _rows(2, "c")}
    description = write_shapes_sugarcrepe(tmp_path / "b", rows, {"z": "late", "a": "early"}, seed=3)
    by_design = {d.subset: d for d in SUBSETS}
    add, swap = by_design["add_obj"], by_design["swap_att"]
    assert description == {
        "benchmark": NAME,
        "format": FORMAT,
        "seed": 3,
        "split": SPLIT,
        "subsets": {
            "add_obj": {"task": add.task, "design": "conjunction", "description": add.description, "comparisons": 2},
            "swap_att": {"task": swap.task, "design": "both_directions", "description": swap.description, "comparisons": 2},
        },
        "unavailable": {"a": "early", "z": "late"},
        "images": 4,  # used ones only: c/1.png and c/3.png are no add_obj comparison's image
    }
    assert (NAME, FORMAT, SPLIT) == ("shapes_sugarcrepe", "sugarcrepe", "test")
    assert list(description["subsets"]) == ["add_obj", "swap_att"] and list(description["unavailable"]) == ["a", "z"]
    root = tmp_path / "b"
    assert sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()) == [
        "add_obj.json",
        "images/c/0.png",
        "images/c/2.png",
        "images/g/0.png",
        "images/g/1.png",
        "shapes_benchmark.json",
        "swap_att.json",
    ]
    assert (root / "images" / "c" / "2.png").read_bytes() == b"A1"
    text = (root / "swap_att.json").read_text(encoding="utf-8")
    assert text == (
        "{\n"
        '  "swap_att_0": {\n'
        '    "caption": "cap 0 é",\n'
        '    "filename": "g/0.png",\n'
        '    "negative_caption": "neg 0"\n'
        "  },\n"
        '  "swap_att_1": {\n'
        '    "caption": "neg 0",\n'
        '    "filename": "g/1.png",\n'
        '    "negative_caption": "cap 0 é"\n'
        "  }\n"
        "}\n"
    )
    assert json.loads((root / "shapes_benchmark.json").read_text(encoding="utf-8")) == description
    assert (root / "shapes_benchmark.json").read_bytes().endswith(b"}\n")
    default = write_shapes_sugarcrepe(tmp_path / "d", {"swap_att": _rows(1)})
    assert default["seed"] == 0 and default["unavailable"] == {} and list(default["subsets"]) == ["swap_att"]


def test_refusals_name_the_subsets(tmp_path: Path) -> None:
    with pytest.raises(ValueError) as caught:
        write_shapes_sugarcrepe(tmp_path / "b", {"swap_obj": _rows(1), "add_att": _rows(1), "swap_att": _rows(1)})
    assert str(caught.value) == (
        "subsets ['add_att', 'swap_obj'] are not shapes benchmark subsets; known: ['add_obj', 'replace_rel', 'swap_att']"
    )
    with pytest.raises(ValueError) as caught:
        write_shapes_sugarcrepe(tmp_path / "b", {}, {"swap_att": "too small"})
    assert str(caught.value) == "no subset of the shapes benchmark is available ({'swap_att': 'too small'})"
    with pytest.raises(ValueError) as caught:
        write_shapes_sugarcrepe(tmp_path / "b", {})
    assert str(caught.value) == "no subset of the shapes benchmark is available ({})"
    assert not (tmp_path / "b").exists()


def test_a_symlink_or_a_folder_in_place_of_a_file_is_written_again(tmp_path: Path) -> None:
    root = tmp_path / "deep" / "b"
    write_shapes_sugarcrepe(root, {"swap_att": _rows(1)})  # parents made
    original = (root / "swap_att.json").read_bytes()
    (tmp_path / "copy.json").write_bytes(original)
    (root / "swap_att.json").unlink()
    (root / "swap_att.json").symlink_to(tmp_path / "copy.json")  # same bytes, through a link
    write_shapes_sugarcrepe(root, {"swap_att": _rows(1)})
    assert not (root / "swap_att.json").is_symlink() and (root / "swap_att.json").read_bytes() == original
    (root / "images" / "p" / "0.png").unlink()
    (root / "images" / "p" / "0.png").mkdir()  # a folder where a file belongs
    write_shapes_sugarcrepe(root, {"swap_att": _rows(1)})
    assert (root / "images" / "p" / "0.png").read_bytes() == b"A0"
    (root / "extra").mkdir()  # an empty folder is no file: the folder still holds exactly the benchmark
    inode = (root / "swap_att.json").stat().st_ino
    write_shapes_sugarcrepe(root, {"swap_att": _rows(1)})
    assert (root / "swap_att.json").stat().st_ino == inode
    target = tmp_path / "file"
    target.write_text("not a folder")
    write_shapes_sugarcrepe(target, {"swap_att": _rows(1)})  # a file where the folder goes: replaced by it
    assert target.is_dir() and (target / "swap_att.json").read_bytes() == original


def test_a_write_that_fails_midway_removes_its_staging_and_keeps_the_previous_benchmark(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from clip_cycles.benchmark_audit import shapes_benchmark

    root = tmp_path / "b"
    write_shapes_sugarcrepe(root, {"swap_att": _rows(1)})
    before = {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}
    real = shapes_benchmark.atomic_write_bytes
    written: list[Path] = []

    def failing(path: Path, data: bytes) -> None:
        if written:
            raise OSError(28, "No space left on device")
        written.append(path)
        real(path, data)

    monkeypatch.setattr(shapes_benchmark, "atomic_write_bytes", failing)
    with pytest.raises(OSError, match="No space left on device"):
        write_shapes_sugarcrepe(root, {"swap_att": _rows(2)})
    assert written and not written[0].exists()  # the staging folder went with its first file
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b"]
    assert {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()} == before


def test_a_folder_that_cannot_be_read_is_written_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "b"
    write_shapes_sugarcrepe(root, {"swap_att": _rows(1)})
    inode = (root / "swap_att.json").stat().st_ino
    real = Path.read_bytes

    def refuse(self: Path) -> bytes:
        if self.is_relative_to(root):
            raise PermissionError(13, "Permission denied", str(self))
        return real(self)

    with monkeypatch.context() as patch:
        patch.setattr(Path, "read_bytes", refuse)
        write_shapes_sugarcrepe(root, {"swap_att": _rows(1)})
    assert (root / "swap_att.json").stat().st_ino != inode  # not taken for the same benchmark
