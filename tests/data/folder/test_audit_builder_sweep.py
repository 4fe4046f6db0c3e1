"""The audit against the builder: every caption meaning a build wrote, read on every fixture image.

``clip-cycles audit`` (clip_cycles.data.folder.audit) re-derives each caption's truth from the raw
annotations with its own code; the builder decides the same truth with ``Family.verdict``. Both
follow one rule, so on every image of every COCO and GQA fixture they must agree (builder's
undecided reasons count as the audit's "ambiguous"). A disagreement is a bug in one of them;
the failure message names the family, caption, image, and both verdicts.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from clip_cycles.data.families.registry import get_family, load_source
from clip_cycles.data.folder.audit import AMBIGUOUS, FALSE, TRUE, audit_folder, read_caption, read_world
from clip_cycles.data.folder.build import build_coco_folder, build_gqa_folder


def _rows(folder: Path) -> dict[str, list[dict]]:
    by_family: dict[str, list[dict]] = {}
    for path in sorted((folder / "data").glob("*/seed*/*.parquet")):
        by_family.setdefault(path.parent.parent.name, []).extend(pq.read_table(path).to_pylist())
    return by_family


def _meanings(rows: list[dict]) -> list[tuple[str, dict]]:
    """Distinct (caption, meaning) pairs of a family's rows, in a stable order."""
    seen: dict[str, tuple[str, dict]] = {}
    for row in rows:
        predicate = json.loads(row.get("predicate_json") or row["predicate"])  # the exact JSON beside the struct
        for k in (0, 1):
            meaning = predicate[f"caption_{k}"]
            seen.setdefault(row[f"caption_{k}"] + json.dumps(meaning, sort_keys=True), (row[f"caption_{k}"], meaning))
    return [seen[key] for key in sorted(seen)]


def _as_audit(verdict: str) -> str:
    return verdict if verdict in (TRUE, FALSE) else AMBIGUOUS


def sweep(source: str, root: Path, folder: Path) -> tuple[int, list[str]]:
    """(comparisons made, disagreements) between builder and audit on every image of ``root``."""
    index = load_source(source, root)
    world = read_world(source, root)
    compared, disagreements = 0, []
    for family_name, rows in sorted(_rows(folder).items()):
        family = get_family(source, family_name)
        for caption, meaning in _meanings(rows):
            reading = read_caption(world, family_name, caption, meaning, None)
            assert reading.evaluate is not None, reading.problem
            for image_id, image in sorted(world.images.items()):
                builder = _as_audit(family.verdict(index, image_id, meaning))
                audit = reading.evaluate(image)
                compared += 1
                if builder != audit:
                    disagreements.append(f"{family_name} {caption!r} image {image_id}: builder {builder}, audit {audit}")
    return compared, disagreements


def _with_crowd_regions(shapes_world: Path, target: Path) -> Path:
    """The shapes world in its real COCO format, plus ``iscrowd`` regions: on every third image one of a
    category absent from it, on every fifth one of a category it holds (crowd regions of both kinds)."""
    shutil.copytree(shapes_world, target)
    for split in ("train2017", "val2017"):
        path = target / "annotations" / f"instances_{split}.json"
        data = json.loads(path.read_text())
        categories = sorted(c["id"] for c in data["categories"])
        held: dict[int, set[int]] = {}
        for ann in data["annotations"]:
            held.setdefault(ann["image_id"], set()).add(ann["category_id"])
        next_id = max(a["id"] for a in data["annotations"]) + 1
        for n, entry in enumerate(sorted(data["images"], key=lambda e: e["id"])):
            present = sorted(held.get(entry["id"], ()))
            picks = []
            if n % 3 == 0:
                picks += [c for c in categories if c not in present][:1]
            if n % 5 == 0 and present:
                picks.append(present[n % len(present)])
            for cat in picks:
                rle = {"counts": [0, 36], "size": [entry["height"], entry["width"]]}  # COCO's crowd segmentation
                data["annotations"].append({"id": next_id, "image_id": entry["id"], "category_id": cat,
                                            "bbox": [2.0, 2.0, 6.0, 6.0], "area": 36.0, "iscrowd": 1,
                                            "segmentation": rle})  # fmt: skip
                next_id += 1
        path.write_text(json.dumps(data))
    return target


@pytest.fixture(scope="module")
def crowd_world(shapes_world, tmp_path_factory) -> Path:
    return _with_crowd_regions(shapes_world, tmp_path_factory.mktemp("crowd") / "world")


def test_audit_agrees_with_the_builder_on_every_coco_fixture_image(shapes_world, shapes_cycles, crowd_world):
    for root in (shapes_world, crowd_world):
        compared, disagreements = sweep("coco", root, shapes_cycles)
        assert compared > 10_000
        assert not disagreements, f"{len(disagreements)} disagreements on {root.name}, e.g. {disagreements[:5]}"


def test_audit_agrees_with_the_builder_on_every_gqa_fixture_image(shapes_world, tmp_path_factory):
    folder = build_gqa_folder(shapes_world, tmp_path_factory.mktemp("sweep_gqa") / "cycles", seeds=(0,), min_cycles=5)[0]
    compared, disagreements = sweep("gqa", shapes_world, folder)
    assert compared > 1_000
    assert not disagreements, f"{len(disagreements)} disagreements, e.g. {disagreements[:5]}"


def test_folders_built_from_a_world_with_crowd_regions_pass_the_audit(crowd_world, tmp_path):
    """Real COCO format with ``iscrowd`` regions: the builder's folder passes ``clip-cycles audit``; a swap
    whose image lacks one named object and holds a crowd region of the other is false, as the builder says."""
    folder = build_coco_folder(crowd_world, tmp_path / "cycles", min_cycles=5, seeds=[0])[0]
    result = audit_folder(folder)
    assert result["ok"], result["problems"][:5]
    index, world = load_source("coco", crowd_world), read_world("coco", crowd_world)
    # The build used at least one such swap: absent subject or object, crowd region of the other.
    absent_and_crowd = 0
    for family_name, rows in _rows(folder).items():
        for row in rows:
            predicate = json.loads(row.get("predicate_json") or row["predicate"])  # the exact JSON beside the struct
            for k in (0, 1):
                meaning, image = predicate[f"caption_{k}"], world.images[row[f"image_id_{1 - k}"]]
                if meaning.get("kind") != "relation":
                    continue
                names = (meaning["subject"], meaning["object"])
                present = [image.present(n) for n in names]
                if present.count(True) == 1 and names[present.index(True)] in image.crowd:
                    absent_and_crowd += 1
                    assert get_family("coco", family_name).verdict(index, row[f"image_id_{1 - k}"], meaning) == FALSE
    assert absent_and_crowd > 0
