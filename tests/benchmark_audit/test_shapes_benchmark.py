"""The demo's SugarCrepe-format benchmark: valid for the adapter, read back independently, byte-identical, refusals.

Cycle rows are built in code over small JPEGs; every expectation (the items of each file,
the cycles the adapter must find, the length baseline's accuracy) is computed here from
those rows with a few lines of our own, never with the generator's helpers.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from benchmark_formats import write_image

from clip_cycles.benchmark_audit.adapters import SUGARCREPE_SUBSETS, load_benchmark
from clip_cycles.benchmark_audit.audit import audit_subset
from clip_cycles.benchmark_audit.design import pair_crossing_comparisons
from clip_cycles.benchmark_audit.shapes_benchmark import SUBSETS, hard_negatives, write_shapes_sugarcrepe
from clip_cycles.data.folder.reader import CycleRows
from clip_cycles.data.sources.images import ImageItem

LEFT, RIGHT = "a circle to the left of a cross", "a circle to the right of a cross"
CYCLES = {
    # Two cycles share a caption pair and a third has it reversed: the pairing must still give back each cycle.
    "replace_rel": [
        (0, 1, LEFT, RIGHT),
        (2, 3, LEFT, RIGHT),
        (4, 2, RIGHT, LEFT),
        (1, 4, "a star above a cube", "a star below a cube"),
    ],
    "swap_att": [(0, 5, "a red cube and a blue star", "a blue cube and a red star"), (3, 0, "a small ring", "a large ring")],
    "add_obj": [(5, 1, "a star and a blue square", "a drawing with an orange ring"), (2, 5, "a cube", "two crosses")],
}


def _rows(images: list[ImageItem]) -> dict[str, CycleRows]:
    return {
        subset: CycleRows.from_pairs(
            [f"{subset}-{k}" for k in range(len(cycles))],
            [(images[a], images[b]) for a, b, _, _ in cycles],
            [(c0, c1) for _, _, c0, c1 in cycles],
        )
        for subset, cycles in CYCLES.items()
    }


@pytest.fixture()
def images(tmp_path: Path) -> list[ImageItem]:
    source = tmp_path / "world"
    return [
        ImageItem(f"val2017/{k:012d}.jpg", write_image(source / "val2017" / f"{k:012d}.jpg", k, fmt="JPEG")) for k in range(6)
    ]


def _expected_items(subset: str, images: list[ImageItem]) -> list[dict[str, str]]:
    """What each file must hold, in file order: both directions of a cycle, or caption_0 vs the conjunction."""
    out = []
    for a, b, c0, c1 in CYCLES[subset]:
        if subset == "add_obj":
            out.append({"filename": images[a].key, "caption": c0, "negative_caption": f"{c0} and {c1}"})
        else:
            out.append({"filename": images[a].key, "caption": c0, "negative_caption": c1})
            out.append({"filename": images[b].key, "caption": c1, "negative_caption": c0})
    return out


def _tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_files_hold_sugarcrepe_items_read_back_with_plain_json(tmp_path: Path, images: list[ImageItem]) -> None:
    root = tmp_path / "bench"
    description = write_shapes_sugarcrepe(root, _rows(images), {"other": "not built"}, seed=0)
    assert {p.name for p in root.glob("*.json")} == {f"{s}.json" for s in CYCLES} | {"shapes_benchmark.json"}
    assert set(CYCLES) <= set(SUGARCREPE_SUBSETS)  # only SugarCrepe's own file names are read by the adapter
    for subset in CYCLES:
        text = (root / f"{subset}.json").read_text(encoding="utf-8")
        data = json.loads(text)  # SugarCrepe's shape: {id: {filename, caption, negative_caption}}
        assert isinstance(data, dict) and list(data) == sorted(data)  # sorted ids are the file order
        items = list(data.values())
        assert all(set(item) == {"filename", "caption", "negative_caption"} for item in items)
        assert all(isinstance(v, str) for item in items for v in item.values())
        assert items == _expected_items(subset, images), subset
        for item in items:
            stored = root / "images" / item["filename"]
            source = next(i for i in images if i.key == item["filename"])
            assert stored.read_bytes() == source.path.read_bytes()  # type: ignore[union-attr]
    meta = json.loads((root / "shapes_benchmark.json").read_text())
    assert meta == description
    assert meta["unavailable"] == {"other": "not built"}
    assert {s: m["comparisons"] for s, m in meta["subsets"].items()} == {s: len(_expected_items(s, images)) for s in CYCLES}
    assert meta["images"] == len({i["filename"] for s in CYCLES for i in _expected_items(s, images)})


def test_the_sugarcrepe_adapter_reads_it_and_finds_every_cycle_again(tmp_path: Path, images: list[ImageItem]) -> None:
    root = tmp_path / "bench"
    write_shapes_sugarcrepe(root, _rows(images))
    subsets = {cs.name: cs for cs in load_benchmark("sugarcrepe", root)}
    assert set(subsets) == set(CYCLES)
    for name, cs in subsets.items():
        assert cs.n_comparisons == len(_expected_items(name, images)) and cs.skipped == {}
        pairing = pair_crossing_comparisons(cs)
        found = [
            (cs.images[u1].key, cs.images[u2].key, cs.captions[v1], cs.captions[v2]) for u1, u2, v1, v2 in pairing.cycles.tolist()
        ]
        expected = [] if name == "add_obj" else [(images[a].key, images[b].key, c0, c1) for a, b, c0, c1 in CYCLES[name]]
        assert found == expected, name
        # The length rule, by hand: the shorter caption wins (1), equal lengths tie (0.5).
        credit = [
            1.0
            if len(i["caption"]) < len(i["negative_caption"])
            else 0.5
            if len(i["caption"]) == len(i["negative_caption"])
            else 0.0
            for i in _expected_items(name, images)
        ]
        metrics = audit_subset(cs).metrics
        assert metrics["shortest_caption_acc"] == pytest.approx(float(np.mean(credit)), abs=1e-12), name
        assert metrics["cycles"]["n_cycles"] == len(expected)
    assert audit_subset(subsets["add_obj"]).metrics["shortest_caption_acc"] == 1.0  # the designed length artefact


def test_same_rows_give_byte_identical_files(tmp_path: Path, images: list[ImageItem]) -> None:
    first, second = tmp_path / "one", tmp_path / "two"
    write_shapes_sugarcrepe(first, _rows(images))
    write_shapes_sugarcrepe(second, _rows(images))
    tree = _tree(first)
    assert tree and tree == _tree(second)
    write_shapes_sugarcrepe(first, _rows(images))  # a rerun into the same folder replaces it with the same bytes
    assert _tree(first) == tree
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no staging folder left behind


def test_bad_rows_are_refused_and_the_previous_benchmark_kept(tmp_path: Path, images: list[ImageItem]) -> None:
    root = tmp_path / "bench"
    write_shapes_sugarcrepe(root, _rows(images))
    before = _tree(root)
    rows = _rows(images)
    with pytest.raises(ValueError, match="'swap_obj'.*not shapes benchmark subsets"):
        write_shapes_sugarcrepe(root, {"swap_obj": rows["swap_att"]})
    with pytest.raises(ValueError, match="no subset of the shapes benchmark is available.*too small"):
        write_shapes_sugarcrepe(root, {}, {"swap_att": "too small"})
    for key in ("../outside.jpg", "/etc/passwd", "val2017\\x.jpg"):
        escaping = CycleRows.from_pairs(["x"], [(ImageItem(key, images[0].path), images[1])], [("a cube", "a star")])
        with pytest.raises(ValueError, match="is not a relative name below the source root"):
            write_shapes_sugarcrepe(root, {"swap_att": escaping})
    missing = CycleRows.from_pairs(
        ["x"], [(ImageItem("val2017/gone.jpg", tmp_path / "gone.jpg"), images[1])], [("a cube", "a star")]
    )
    with pytest.raises(FileNotFoundError, match="val2017/gone.jpg"):
        write_shapes_sugarcrepe(root, {"swap_att": missing})
    assert _tree(root) == before
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []
    with pytest.raises(ValueError, match="unknown subset design 'reversed'"):
        hard_negatives(rows["swap_att"], "reversed")
    assert {d.design for d in SUBSETS} == {"both_directions", "conjunction"}


def test_demo_step_without_any_family_names_each_reason_and_removes_a_stale_audit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from clip_cycles.evaluation import demo

    caplog.set_level(logging.INFO, logger="clip_cycles")  # the step's notes go through logging

    out = tmp_path / "results"
    out.mkdir()
    for suffix in (".json", ".md", ".png"):
        (out / f"audit_shapes_sugarcrepe{suffix}").write_text("an earlier run's audit")
    (out / "zero_shot.json").write_text("{}")  # not the audit's: left alone
    reasons = {"add_obj": "family 'coarse_object' split 'test' is unavailable: 3 cycles", "swap_att": "not built"}
    monkeypatch.setattr(demo, "demo_subset_rows", lambda root, cache, seed: ({}, dict(reasons)))
    context = SimpleNamespace(cache_dir=tmp_path / "cache", data_cache_dir=tmp_path / "cache", seeds=(0,), dataset_root=tmp_path)
    assert demo.audit_shapes_benchmark(context, out) is None  # type: ignore[arg-type]
    assert sorted(p.name for p in out.iterdir()) == ["zero_shot.json"]  # the page can never show stale numbers
    err = caplog.text
    for subset, reason in reasons.items():
        assert f"subset {subset} left out: {reason}" in err
    assert "benchmark audit skipped" in err


def test_a_rerun_on_the_same_rows_leaves_the_folder_alone_and_a_changed_folder_is_rewritten(
    tmp_path: Path, images: list[ImageItem]
) -> None:
    root = tmp_path / "bench"
    write_shapes_sugarcrepe(root, _rows(images))
    tree = _tree(root)
    inode = (root / "shapes_benchmark.json").stat().st_ino
    write_shapes_sugarcrepe(root, _rows(images))  # already this benchmark, byte for byte: nothing rewritten
    assert (root / "shapes_benchmark.json").stat().st_ino == inode and _tree(root) == tree
    image = next(p for p in sorted((root / "images").rglob("*")) if p.is_file())
    image.write_bytes(b"edited")  # a changed file, then an extra one: each makes the folder be written again
    write_shapes_sugarcrepe(root, _rows(images))
    assert _tree(root) == tree
    (root / "stray.json").write_text("{}")
    write_shapes_sugarcrepe(root, _rows(images))
    assert _tree(root) == tree and not (root / "stray.json").exists()
