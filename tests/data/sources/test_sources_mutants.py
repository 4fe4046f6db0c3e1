"""What a rebuild says changed in a raw root, and the raw-root fingerprint, against values made in the test.

``fingerprint_changes`` is the reason a cached build is rebuilt (logged and recorded); its
words are asserted whole here. ``raw_root_fingerprint`` is compared with a fingerprint
assembled in the test from hashlib and the file listing (the mutation score of
``clip_cycles/data/sources/registry.py`` rests on this file and ``test_sources.py``).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace
from pathlib import Path

import pytest

from clip_cycles.data.sources import registry as sources
from clip_cycles.data.sources.registry import Source, SourceCard, fingerprint_changes, raw_root_fingerprint

A = {"size": 1, "mtime_ns": 1, "sha256": "a"}
B = {"size": 1, "mtime_ns": 1, "sha256": "b"}
LIST_1 = {"files": 1, "digest": "x"}
LIST_2 = {"files": 2, "digest": "y"}


def _fp(annotations: dict, images: dict) -> dict:
    return {"kind": "coco", "root": "/r", "annotations": annotations, "images": images}


def test_no_stored_fingerprint_is_named() -> None:
    new = _fp({"a.json": A}, {})
    assert fingerprint_changes(None, new) == "no source fingerprint was stored with the cached build"
    assert fingerprint_changes(["not", "a", "dict"], new) == "no source fingerprint was stored with the cached build"  # type: ignore[arg-type]


def test_each_annotation_file_is_named_removed_added_or_changed_in_name_order() -> None:
    old = _fp({"b.json": A, "c.json": A, "d.json": A}, {})
    new = _fp({"a.json": A, "c.json": B, "d.json": A}, {})
    assert fingerprint_changes(old, new) == "a.json added, b.json removed, c.json changed"


def test_each_image_folder_whose_listing_changed_is_named_after_the_files() -> None:
    old = _fp({"a.json": A}, {"train2017": LIST_1, "val2017": LIST_1, "old": LIST_1})
    new = _fp({"a.json": B}, {"train2017": LIST_1, "val2017": LIST_2, "new": LIST_1})
    assert fingerprint_changes(old, new) == "a.json changed, new/ listing changed, old/ listing changed, val2017/ listing changed"


def test_a_stored_fingerprint_without_the_parts_reads_them_as_empty() -> None:
    new = _fp({"a.json": A}, {"val2017": LIST_1})
    assert fingerprint_changes({"kind": "coco"}, new) == "a.json added, val2017/ listing changed"
    assert fingerprint_changes({"kind": "coco"}, _fp({}, {})) == "the fingerprint format changed"


def test_equal_parts_with_another_difference_say_the_format_changed() -> None:
    old = _fp({"a.json": A}, {"val2017": LIST_1})
    assert fingerprint_changes({**old, "kind": "gqa"}, old) == "the fingerprint format changed"


def _sha_file(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _listing(folder: Path) -> dict:
    entries = sorted(
        [p.relative_to(folder).as_posix(), p.stat().st_size, p.stat().st_mtime_ns] for p in folder.rglob("*") if p.is_file()
    )
    text = json.dumps(entries, separators=(",", ":"))
    return {"files": len(entries), "digest": hashlib.sha256(text.encode()).hexdigest()}


def test_raw_root_fingerprint_takes_the_annotation_globs_by_content_and_the_image_folders_by_listing(tmp_path: Path) -> None:
    root = tmp_path / "coco"
    files = {"annotations/instances_val2017.json": "{}", "annotations/captions_val2017.json": '{"a": 1}',
             "annotations/readme.txt": "not a glob match", "val2017/1.jpg": "j1", "val2017/sub/2.jpg": "j22",
             "train2017/3.jpg": "j333", "other/4.jpg": "not an image folder"}  # fmt: skip
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    expected_annotations = {
        name: {
            "size": (root / name).stat().st_size,
            "mtime_ns": (root / name).stat().st_mtime_ns,
            "sha256": _sha_file(root / name),
        }
        for name in ("annotations/captions_val2017.json", "annotations/instances_val2017.json")
    }
    fingerprint = raw_root_fingerprint("coco", tmp_path / "." / "coco")
    assert fingerprint == {
        "kind": "coco",
        "root": str(root.resolve()),
        "annotations": expected_annotations,
        "images": {"train2017": _listing(root / "train2017"), "val2017": _listing(root / "val2017")},
    }
    assert list(fingerprint["annotations"]) == sorted(expected_annotations)
    # A folder that is missing is left out, not listed as empty.
    (root / "train2017" / "3.jpg").unlink()
    (root / "train2017").rmdir()
    assert set(raw_root_fingerprint("coco", root)["images"]) == {"val2017"}


def test_raw_root_fingerprint_of_a_source_with_overlapping_globs_takes_each_file_once(tmp_path: Path) -> None:
    root = tmp_path / "world"
    root.mkdir()
    (root / "val_sceneGraphs.json").write_text("{}")
    twice = replace(
        sources.get_source("gqa"),
        name="gqa_twice",
        annotations=("*_sceneGraphs.json", "val_*.json"),
        builders=("gqa", "gqa_twice"),
    )
    sources.register_source(twice)
    try:
        fingerprint = raw_root_fingerprint("gqa_twice", root)
    finally:
        sources.unregister_source("gqa_twice")
    assert list(fingerprint["annotations"]) == ["val_sceneGraphs.json"]
    assert fingerprint["kind"] == "gqa_twice" and fingerprint["images"] == {}


def test_an_unknown_source_is_named() -> None:
    with pytest.raises(ValueError, match="unknown source 'nope'; registered: coco, gqa, shapes"):
        raw_root_fingerprint("nope", Path("."))


TOGETHER = (
    "source 'toy_m': families_module and build_families go together (a family builder registers families and "
    "builds folders from roots)"
)
CARD = SourceCard(title="t", license="cc0-1.0", license_text="l", citation="c")
BASE = Source(name="toy_m", title="toy", layout="toy.json", markers=("toy.json",), annotations=("toy.json",), image_dirs=(),
              builders=("coco",), card=CARD)  # fmt: skip


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"name": ""}, "source name '' must be a non-empty word without '/'"),
        ({"name": "a/b"}, "source name 'a/b' must be a non-empty word without '/'"),
        ({"markers": ()}, "source 'toy_m': markers and builders must not be empty (a root must be recognisable"),
        ({"builders": ()}, "source 'toy_m': markers and builders must not be empty"),
        ({"families_module": "m"}, TOGETHER),
        ({"build_families": print}, TOGETHER),
        (
            {"families_module": "m", "build_families": print},
            "source 'toy_m' is a family builder, so it must feed itself (builders ['coco'] lack 'toy_m')",
        ),  # fmt: skip
    ],
)
def test_each_registration_rule_is_named(change: dict, message: str) -> None:
    with pytest.raises(ValueError) as info:
        sources.register_source(replace(BASE, **change))
    assert str(info.value).startswith(message)
    assert "toy_m" not in sources.source_names() and "a/b" not in sources.source_names()


def test_a_valid_family_builder_source_registers(tmp_path: Path) -> None:
    builder = replace(BASE, builders=("coco", "toy_m"), families_module="m", build_families=print)
    assert sources.register_source(builder) is builder
    try:
        assert sources.get_builder("toy_m") is builder and "toy_m" in sources.builder_names()
        assert sources.source_names()[-1] == "toy_m"
    finally:
        assert sources.unregister_source("toy_m") is builder
    assert "toy_m" not in sources.source_names()
    with pytest.raises(TypeError, match="register_source takes a clip_cycles.data.sources.registry.Source, got dict"):
        sources.register_source({"name": "x"})  # type: ignore[arg-type]


class _Recorder:
    """A ``build_families`` that records how it was called and returns a folder name of its own."""

    def __init__(self) -> None:
        self.calls: list[tuple[tuple, dict]] = []

    def __call__(self, *args: object, **kwargs: object) -> tuple[str, list]:
        self.calls.append((args, kwargs))
        return "/built/here", []


@pytest.mark.parametrize("min_cycles", [None, 0, 7])
def test_build_from_raw_calls_the_builder_with_the_families_and_the_rule(min_cycles: int | None, tmp_path: Path) -> None:
    recorder = _Recorder()
    builder = replace(BASE, builders=("coco", "toy_m"), families_module="m", build_families=recorder)
    sources.register_source(builder)
    try:
        folder = sources.build_from_raw("toy_m", tmp_path / "raw", ("f1", "f2"), tmp_path / "out", min_cycles=min_cycles)
    finally:
        sources.unregister_source("toy_m")
    assert folder == Path("/built/here")
    rule = {} if min_cycles is None else {"min_cycles": min_cycles}
    assert recorder.calls == [((tmp_path / "raw", tmp_path / "out"), {"families": ["f1", "f2"], "allow_empty": True, **rule})]
    assert isinstance(recorder.calls[0][1]["families"], list)


def test_build_from_raw_names_a_bad_builder_hook(tmp_path: Path) -> None:
    sources.register_source(replace(BASE, builders=("coco", "toy_m"), families_module="m", build_families="no_colon"))
    try:
        with pytest.raises(ValueError) as info:
            sources.build_from_raw("toy_m", tmp_path, ["f"], tmp_path / "out")
    finally:
        sources.unregister_source("toy_m")
    assert str(info.value) == "source 'toy_m' build_families 'no_colon' must be a callable or 'package.module:function'"
    with pytest.raises(ValueError, match="unknown family builder 'shapes'; registered: coco, gqa"):
        sources.build_from_raw("shapes", tmp_path, ["f"], tmp_path / "out")


def test_get_builder_of_a_name_that_is_not_a_string_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match=r"unknown family builder \['coco'\]; registered: coco, gqa"):
        sources.get_builder(["coco"])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"unknown source \['coco'\]; registered: coco, gqa, shapes"):
        sources.get_source(["coco"])  # type: ignore[arg-type]


def test_resolve_hook_splits_at_the_first_colon_and_names_the_hook() -> None:
    with pytest.raises(ValueError) as info:
        sources.resolve_hook("no_colon")
    assert str(info.value) == "hook 'no_colon' must be a callable or 'package.module:function'"
    with pytest.raises(ValueError) as info:
        sources.resolve_hook(":run")
    assert str(info.value) == "hook ':run' must be a callable or 'package.module:function'"
    with pytest.raises(ValueError) as info:
        sources.resolve_hook("clip_cycles.data.folder.build:run_coco:extra")
    assert (
        str(info.value)
        == "hook 'clip_cycles.data.folder.build:run_coco:extra': clip_cycles.data.folder.build has no function 'run_coco:extra'"
    )
    with pytest.raises(ValueError) as info:
        sources.resolve_hook("clip_cycles.data.sources.registry:RAW_ROOT_KEY_FIELDS", "source 'x' build")
    assert str(info.value) == (
        "source 'x' build 'clip_cycles.data.sources.registry:RAW_ROOT_KEY_FIELDS': "
        "clip_cycles.data.sources.registry has no function 'RAW_ROOT_KEY_FIELDS'"
    )


def test_raw_root_fingerprint_keeps_its_annotation_hashes_in_the_hash_cache(tmp_path: Path) -> None:
    root = tmp_path / "coco"
    (root / "annotations").mkdir(parents=True)
    for name in ("instances_val2017.json", "captions_val2017.json"):
        (root / "annotations" / name).write_text("{}")
    hashes = tmp_path / "hashes"
    raw_root_fingerprint("coco", root, hash_cache=hashes)
    records = [json.loads(p.read_text()) for p in sorted(hashes.iterdir())]
    assert sorted(r["path"] for r in records) == sorted(str((root / "annotations" / n).resolve()) for n in
                                                         ("instances_val2017.json", "captions_val2017.json"))  # fmt: skip
    assert {r["sha256"] for r in records} == {hashlib.sha256(b"{}").hexdigest()}
