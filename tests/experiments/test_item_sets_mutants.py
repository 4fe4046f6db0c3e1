"""``item_sets`` by hand: the source identity and line, the scored items, the combined digest, the family
facts, ``ItemSet``'s fields and the notes that keep two item sets apart (issue 56, mutation-directed).

Every expected digest is written out here with hashlib and json (sorted keys, compact separators), and
every sentence in full, never through the helper under test.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from clip_cycles.data.folder.reader import CycleRows
from clip_cycles.data.sources.images import ImageItem
from clip_cycles.experiments import item_sets
from clip_cycles.experiments.item_sets import (
    ItemSet,
    combined_identity,
    family_facts,
    item_identity,
    item_set_notes,
    item_set_of,
    scored_cycles,
    source_identity,
    source_line,
    world_parameters,
)


def _sha(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()).hexdigest()


def _folder(root: Path, source: str = "shapes", info: dict[str, Any] | None = None) -> SimpleNamespace:
    return SimpleNamespace(source_root=root, source=source, info=info or {})


def _world_file(root: Path, content: Any) -> None:
    root.mkdir(parents=True, exist_ok=True)
    (root / "shapes_world.json").write_text(content if isinstance(content, str) else json.dumps(content))


WORLD = {"kind": "shapes", "n_images": 400, "seed": 3, "image_size": 96, "val_fraction": 0.5}


# --------------------------------------------------------------------------- the source


def test_world_parameters_read_only_a_shapes_marker(tmp_path: Path) -> None:
    _world_file(tmp_path / "w", WORLD)
    assert world_parameters(_folder(tmp_path / "w")) == WORLD
    _world_file(tmp_path / "c", {**WORLD, "kind": "coco"})
    assert world_parameters(_folder(tmp_path / "c")) is None
    _world_file(tmp_path / "l", [WORLD])
    assert world_parameters(_folder(tmp_path / "l")) is None
    _world_file(tmp_path / "bad", "{not json")
    assert world_parameters(_folder(tmp_path / "bad")) is None
    assert world_parameters(_folder(tmp_path / "missing")) is None
    (tmp_path / "dir" / "shapes_world.json").mkdir(parents=True)  # not a regular file: a ValueError, read as None
    assert world_parameters(_folder(tmp_path / "dir")) is None


def test_source_identity_takes_the_annotation_hashes_sorted_and_the_fingerprints_kind(tmp_path: Path) -> None:
    info = {
        "source_fingerprint": {
            "kind": "coco",
            "annotations": {"b.json": {"sha256": "2" * 64, "size": 3}, "a.json": {"sha256": "1" * 64}, "skip": "not a mapping"},
        }
    }
    identity = source_identity(_folder(tmp_path, "gqa", info))
    assert identity == {"kind": "coco", "builder": "gqa", "world": None, "annotations": {"a.json": "1" * 64, "b.json": "2" * 64}}
    assert list(identity["annotations"]) == ["a.json", "b.json"]
    # No fingerprint, or one that is not an object: the builder's own name is the kind, no annotations.
    _world_file(tmp_path / "w", WORLD)
    assert source_identity(_folder(tmp_path / "w", "shapes")) == {
        "kind": "shapes",
        "builder": "shapes",
        "world": WORLD,
        "annotations": {},
    }
    assert source_identity(_folder(tmp_path, "coco", {"source_fingerprint": "x"})) == {
        "kind": "coco",
        "builder": "coco",
        "world": None,
        "annotations": {},
    }
    assert (
        source_identity(_folder(tmp_path, "coco", {"source_fingerprint": {"kind": None, "annotations": None}}))["kind"] == "coco"
    )


def test_source_line_names_the_world_or_the_roots_annotations(tmp_path: Path) -> None:
    _world_file(tmp_path / "w", WORLD)
    assert source_line(_folder(tmp_path / "w")) == "shapes world: 400 images, 96 px, seed 3, val 0.5"
    # A hand-edited marker outside the ranges: the parameters it says, in the documented order.
    _world_file(tmp_path / "x", {"kind": "shapes", "n_images": 2, "seed": 1, "image_size": 64})
    assert source_line(_folder(tmp_path / "x")) == "shapes world n_images=2 seed=1 image_size=64"
    annotations = {"a.json": {"sha256": "1" * 64}}
    expected = _sha({"a.json": "1" * 64})[:12]
    coco = _folder(tmp_path, "coco", {"source_fingerprint": {"kind": "coco", "annotations": annotations}})
    assert source_line(coco) == f"COCO root {expected}"
    mine = _folder(tmp_path, "coco", {"source_fingerprint": {"kind": "mine", "annotations": annotations}})
    assert source_line(mine) == f"mine root {expected}"


# --------------------------------------------------------------------------- the scored items


def _rows() -> tuple[CycleRows, list[ImageItem]]:
    a, b, c = (ImageItem(k, data=k.encode() * 2) for k in ("a.jpg", "b.jpg", "c.jpg"))
    rows = CycleRows.from_pairs(["x", "y"], [(a, b), (c, a)], [("p", "q"), ("r", "p")])
    return rows, [a, b, c]


def test_scored_cycles_hash_every_image_when_the_backend_hashed_none() -> None:
    rows, items = _rows()
    sha = {item.key: hashlib.sha256(item.key.encode() * 2).hexdigest() for item in items}
    encoded = SimpleNamespace(image_rows={"a.jpg": 0, "b.jpg": 1, "c.jpg": 2})  # no image_hashes attribute
    assert scored_cycles(rows, encoded) == [
        ("x", sha["a.jpg"], sha["b.jpg"], "p", "q"),
        ("y", sha["c.jpg"], sha["a.jpg"], "r", "p"),
    ]
    encoded = SimpleNamespace(image_rows={"a.jpg": 0, "b.jpg": 1, "c.jpg": -1}, image_hashes=None)
    assert scored_cycles(rows, encoded) == [("x", sha["a.jpg"], sha["b.jpg"], "p", "q")]
    # A cycle whose first image was not encoded is not scored either.
    encoded = SimpleNamespace(image_rows={"b.jpg": 0, "c.jpg": 1}, image_hashes={})
    assert scored_cycles(rows, encoded) == []


def test_item_identity_digests_each_seeds_scored_cycles_in_seed_order(tmp_path: Path) -> None:
    _world_file(tmp_path, WORLD)
    rows, items = _rows()
    sha = {item.key: hashlib.sha256(item.key.encode() * 2).hexdigest() for item in items}
    info = {"min_cycles": 2, "validation_fraction": 0.1, "other": "ignored"}
    folder = _folder(tmp_path, "shapes", info)
    task = SimpleNamespace(split="validation")
    one, _ = _rows()
    splits = {5: {"validation": rows, "test": None}, 2: {"validation": one}}
    data = SimpleNamespace(task=task, folder=folder, unavailable=None, splits=splits)
    encoded = SimpleNamespace(image_rows={"a.jpg": 0, "b.jpg": 1, "c.jpg": 2}, image_hashes={"b.jpg": "f" * 64})
    source = {"kind": "shapes", "builder": "shapes", "world": WORLD, "annotations": {}}
    cycles = [["x", sha["a.jpg"], "f" * 64, "p", "q"], ["y", sha["c.jpg"], sha["a.jpg"], "r", "p"]]
    payload = {
        "split": "validation",
        "source": source,
        "build": {"min_cycles": 2, "validation_fraction": 0.1, "pools": None, "pool_requested": None, "thresholds": None},
        "seeds": [[2, cycles], [5, cycles]],
    }
    line = "shapes world: 400 images, 96 px, seed 3, val 0.5"
    expected = {"split": "validation", "items_sha256": _sha(payload), "source": source, "source_line": line}
    assert item_identity(data, encoded) == expected
    gone = SimpleNamespace(task=task, folder=folder, unavailable="no cycles", splits={})
    assert item_identity(gone, encoded) == {**expected, "items_sha256": None}


def test_an_unreadable_image_enters_by_its_key(tmp_path: Path) -> None:
    item = ImageItem("k/1.jpg", path=tmp_path / "gone.jpg")
    assert item_sets._hash_or_key(item) == "key:k/1.jpg"
    (tmp_path / "empty.jpg").write_bytes(b"")  # an empty file is refused (ValueError): its key too
    assert item_sets._hash_or_key(ImageItem("e.jpg", path=tmp_path / "empty.jpg")) == "key:e.jpg"


def test_the_digest_takes_seeds_in_ascending_order_whatever_their_items() -> None:
    first, second = ("c9", "1" * 64, "2" * 64, "p", "q"), ("c0", "3" * 64, "4" * 64, "r", "s")
    payload = {
        "split": "test",
        "source": {},
        "build": dict.fromkeys(item_sets.ITEM_SET_BUILD_FIELDS),
        "seeds": [[0, [list(first)]], [1, [list(second)]]],
    }
    # Seed 1's items sort before seed 0's: only the seed decides the order.
    assert item_sets.item_set_digest("test", {}, {}, [(1, [second]), (0, [first])]) == _sha(payload)


# --------------------------------------------------------------------------- combined identity


def test_combined_identity_of_none_one_and_several_families() -> None:
    assert combined_identity({}) is None
    a = {"split": "test", "items_sha256": "a" * 64, "source": {"kind": "shapes"}, "source_line": "W"}
    alone = combined_identity({"f": a})
    assert alone == a and alone is not a
    b = {"split": "test", "items_sha256": "b" * 64, "source": {"kind": "shapes"}, "source_line": "V"}
    both = combined_identity({"g": b, "f": a})
    assert both == {
        "split": "test",
        "items_sha256": _sha([["f", "a" * 64], ["g", "b" * 64]]),
        "source": {"kind": "shapes"},
        "source_line": "2 families of V; W",
    }
    c = {"split": "validation", "items_sha256": None, "source": {"kind": "coco"}, "source_line": "W"}
    three = combined_identity({"h": c, "g": b, "f": a})
    assert three == {"split": "test, validation", "items_sha256": None, "source": None, "source_line": "3 families of V; W"}
    # Families that name no split give a combined identity without one (None, not the word "None").
    unnamed = combined_identity({"f": {**a, "split": None}, "g": {**b, "split": None}})
    assert unnamed is not None and unnamed["split"] is None


# --------------------------------------------------------------------------- family facts


def test_family_facts_name_the_builder_and_its_order() -> None:
    from clip_cycles.data.families.registry import builder_names, get_family, list_families

    coco = family_facts(SimpleNamespace(config="strict_left_right", source="shapes"))
    assert coco is not None
    index = list_families("coco").index("strict_left_right")
    assert (coco["builder"], coco["family"], coco["source"], coco["order"]) == ("coco", "strict_left_right", "shapes", index)
    assert coco["predicate"] == get_family("coco", "strict_left_right").predicate
    assert coco["provenance"].startswith("paper 1") or coco["provenance"] == "added by this project"
    gqa = family_facts(SimpleNamespace(config="binding", source="gqa"))
    assert gqa is not None and gqa["builder"] == "gqa"
    assert gqa["order"] == list(builder_names()).index("gqa") * 1000 + list_families("gqa").index("binding") == 1006
    assert set(gqa) == {"builder", "family", "source", "predicate", "provenance", "order"}
    assert family_facts(SimpleNamespace(config="no_such_family", source="coco")) is None


# --------------------------------------------------------------------------- ItemSet


SHA_A, SHA_B = "a" * 64, "0123456789" * 6 + "abcd"


def test_item_set_fields_by_hand() -> None:
    full = ItemSet("test", SHA_B, {"kind": "coco", "world": None}, "COCO root x")
    assert full.recorded and full.ident == SHA_B and full.short == "012345678901"
    assert full.label("fam") == "fam.012345678901" and full.line == "COCO root x"
    assert full.describe() == "COCO root x; split test; items 012345678901"
    assert full.world() is None
    empty = ItemSet()
    assert not empty.recorded and empty.ident == "not-recorded" and empty.short == "not-recorded"
    assert empty.line is None and empty.world() is None
    assert empty.describe() == "item set not recorded"
    assert ItemSet(split="val").describe() == "item set not recorded (split val)"
    # The kind stands in for a missing (or empty) line; no kind, no line.
    kind_only = ItemSet(None, None, {"kind": "gqa"}, "")
    assert kind_only.line == "gqa" and kind_only.describe() == "item set not recorded (gqa)"
    assert ItemSet("test", None, {"kind": "gqa"}).describe() == "item set not recorded (gqa; split test)"
    assert ItemSet(None, None, {"kind": ""}).line is None
    assert ItemSet(None, SHA_A).describe() == f"source not recorded; split not recorded; items {'a' * 12}"
    world = {"n_images": 4}
    shaped = ItemSet("test", SHA_A, {"kind": "shapes", "world": world})
    assert shaped.world() == world and shaped.world() is not world
    assert ItemSet("test", SHA_A, {"kind": "shapes", "world": [1]}).world() is None


def test_item_sets_hash_by_every_field() -> None:
    base = ItemSet("test", SHA_A, {"kind": "shapes", "world": {"n": 1}}, "W")
    same = ItemSet("test", SHA_A, {"world": {"n": 1}, "kind": "shapes"}, "W")
    assert hash(base) == hash(same) and len({base, same}) == 1
    others = [
        ItemSet("val", SHA_A, {"kind": "shapes", "world": {"n": 1}}, "W"),
        ItemSet("test", SHA_B, {"kind": "shapes", "world": {"n": 1}}, "W"),
        ItemSet("test", SHA_A, {"kind": "shapes", "world": {"n": 2}}, "W"),
        ItemSet("test", SHA_A, {"kind": "shapes", "world": {"n": 1}}, "V"),
    ]
    assert all(hash(other) != hash(base) for other in others)
    assert hash(ItemSet()) == hash((None, None, "{}", None))


def test_item_set_of_reads_fallbacks_and_refuses_bad_values() -> None:
    source = {"kind": "shapes", "world": None}
    item = item_set_of({"items_sha256": SHA_A, "split": ""}, {"split": "val", "source": source, "source_line": "L"})
    assert item == ItemSet(None, SHA_A, source, "L")  # an empty split is a recorded value: not looked up, read as None
    assert item.source is not source
    assert item_set_of({"split": "test"}, None) == ItemSet("test")
    assert item_set_of({"source": "an old line", "split": "test"}) == ItemSet("test", None, None, "an old line")
    assert item_set_of({"source": "old", "source_line": "new"}) == ItemSet(None, None, None, "new")
    with pytest.raises(ValueError) as bad:
        item_set_of({"items_sha256": SHA_A.upper()})
    assert str(bad.value) == f"field 'items_sha256' is {SHA_A.upper()!r}; expected 64 lower-case hex digits (sha256)"
    with pytest.raises(ValueError, match="expected 64 lower-case hex digits"):
        item_set_of({"items_sha256": SHA_A + "a"})
    with pytest.raises(ValueError) as bad:
        item_set_of({"source": 3})
    assert str(bad.value) == "field 'source' is 3; expected an object (kind, builder, world, annotations)"


# --------------------------------------------------------------------------- notes


def _notes(*sets: ItemSet) -> list[str]:
    return item_set_notes("fam", list(sets))


def test_notes_name_the_worlds_parameters_that_differ() -> None:
    a = ItemSet("test", SHA_A, {"kind": "shapes", "world": {"n_images": 1000, "seed": 0, "val_fraction": 0.5}}, "WA")
    b = ItemSet("test", SHA_B, {"kind": "shapes", "world": {"n_images": 400, "seed": 0, "image_size": 64}}, "WB")
    assert _notes(a) == [] and _notes(a, a) == []
    assert _notes(a, b) == [
        "fam: fam.aaaaaaaaaaaa and fam.012345678901 are different item sets, shown apart "
        "(two worlds: 'WA' and 'WB' differ in image_size (? vs 64), n_images (1000 vs 400), val_fraction (0.5 vs ?))"
    ]


def test_notes_name_two_sources_two_splits_or_other_items() -> None:
    a = ItemSet("test", SHA_A, {"kind": "coco", "annotations": {"x": "1"}}, "A")
    b = ItemSet("val", SHA_B, {"kind": "coco", "annotations": {"x": "2"}}, None)
    head = "fam: fam.aaaaaaaaaaaa and fam.012345678901 are different item sets, shown apart"
    assert _notes(a, b) == [f"{head} (two sources: 'A' and 'coco'; split test vs val)"]
    same_source = ItemSet("test", SHA_B, {"annotations": {"x": "1"}, "kind": "coco"}, "other line")
    assert _notes(a, same_source) == [
        f"{head} (same source and split, different items (the build's thresholds or builder differ))"
    ]
    line_only = ItemSet(None, SHA_B, None, "A")
    assert _notes(a, line_only) == [
        f"{head} (two sources: 'A' and 'A' (the structure of a source is not recorded in results written before it was);"
        " split test vs not recorded)"
    ]
    no_split = ItemSet(None, SHA_A, {"kind": "coco", "annotations": {"x": "1"}}, "A")
    assert _notes(no_split, same_source) == [f"{head} (split not recorded vs test)"]
    old_a, old_b = ItemSet("test", SHA_A, None, "L"), ItemSet("test", SHA_B, None, None)
    assert _notes(old_a, ItemSet("test", SHA_B, None, "L")) == [
        f"{head} (same source and split, different items (the build's thresholds or builder differ))"
    ]
    assert _notes(old_a, old_b) == [
        f"{head} (two sources: 'L' and 'not recorded' (the structure of a source is not recorded in results written"
        " before it was))"
    ]
    # A world on one side only is compared as two sources, not two worlds.
    world = ItemSet("test", SHA_B, {"kind": "shapes", "world": {"n_images": 4}}, "W")
    assert _notes(a, world) == [f"{head} (two sources: 'A' and 'W')"]


def test_unrecorded_item_sets_get_one_note_of_their_own() -> None:
    a, b = ItemSet("test", SHA_A), ItemSet("test", SHA_B)
    old, older = ItemSet("test"), ItemSet("val")
    tail = (
        "fam: item set not recorded for some results (no items_sha256: written before item sets were recorded); "
        "they share a row only with each other, and are not known to be comparable"
    )
    assert _notes(old, older) == [tail]
    assert _notes(old, a) == [tail + "; results that record their item set are shown apart"]
    notes = _notes(b, old, a, b, a)
    assert len(notes) == 2 and notes[0].startswith("fam: fam.012345678901 and fam.aaaaaaaaaaaa are different")
    assert notes[1] == tail + "; results that record their item set are shown apart"
