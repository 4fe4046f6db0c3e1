"""Every zero-shot result names what it scored: ``split``, ``items_sha256`` and ``source`` beside ``dataset``.

The digest is recomputed here from the files themselves (the image bytes under the world,
the captions and cycle ids of the samples file, build_info.json), never through the helper
that wrote it; and a validation run never writes over a test run, whatever the ``--output``.
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from clip_cycles.experiments.item_sets import ITEM_SET_BUILD_FIELDS, item_set_digest
from clip_cycles.results import (
    IDENTITY_FIELDS,
    ITEM_SET_NOT_RECORDED,
    detail_path,
    items_sha256_of,
    output_path,
    read_result,
    same_item_set,
)

TASK = "cycles/shapes_strict_left_right"
FLAT = "cycles_shapes_strict_left_right"


def _spec_digest(split: str, source: dict[str, Any], build: dict[str, Any], seeds: list[list[Any]]) -> str:
    """The documented layout, written out here: sha256 of sorted compact JSON of split, source, build, seeds."""
    payload = {"split": split, "source": source, "build": build, "seeds": seeds}
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


# --------------------------------------------------------------------------- the digest


BASE_SOURCE = {"kind": "shapes", "builder": "coco", "world": {"n_images": 10}, "annotations": {"a.json": "0" * 64}}
BASE_BUILD = {"min_cycles": 5, "validation_fraction": 0.25, "pools": {"train": 8, "val": 2}}
BASE_CYCLES = [
    (0, [("c0", "a" * 64, "b" * 64, "a red square", "a blue square"), ("c1", "c" * 64, "d" * 64, "x left", "y left")]),
    (1, [("c2", "e" * 64, "f" * 64, "one", "two")]),
]


def _digest(**changes: Any) -> str:
    args = {"split": "test", "source": BASE_SOURCE, "build": BASE_BUILD, "cycles": BASE_CYCLES, **changes}
    return item_set_digest(args["split"], args["source"], args["build"], args["cycles"])


def test_the_digest_is_the_documented_sha256() -> None:
    build = {key: BASE_BUILD.get(key) for key in ITEM_SET_BUILD_FIELDS}
    seeds = [[seed, [list(c) for c in cycles]] for seed, cycles in BASE_CYCLES]
    assert _digest() == _spec_digest("test", BASE_SOURCE, build, seeds)


def test_the_digest_is_stable_and_ignores_what_was_not_scored() -> None:
    copy = json.loads(json.dumps([[s, [list(c) for c in cs]] for s, cs in BASE_CYCLES]))
    assert _digest() == _digest(cycles=[(s, [tuple(c) for c in cs]) for s, cs in copy])
    # Seeds are taken in order whatever order they come in; a build_info key that is no threshold is ignored.
    assert _digest() == _digest(cycles=list(reversed(BASE_CYCLES)))
    assert _digest() == _digest(build={**BASE_BUILD, "rebuild_command": "clip-cycles build ..."})


@pytest.mark.parametrize(
    "change",
    [
        {"cycles": [(0, [BASE_CYCLES[0][1][0], ("c1", "c" * 64, "d" * 64, "x left", "y  left")]), BASE_CYCLES[1]]},
        {"cycles": [(0, [BASE_CYCLES[0][1][0], ("c1", "c" * 63 + "e", "d" * 64, "x left", "y left")]), BASE_CYCLES[1]]},
        # The order inside a cycle is its label: image_0 goes with caption_0.
        {"cycles": [(0, [("c0", "a" * 64, "b" * 64, "a blue square", "a red square"), BASE_CYCLES[0][1][1]]), BASE_CYCLES[1]]},
        {"cycles": BASE_CYCLES[:1]},
        {"split": "validation"},
        {"build": {**BASE_BUILD, "min_cycles": 6}},
        {"build": {**BASE_BUILD, "thresholds": {"margin": 0.1}}},
        {"source": {**BASE_SOURCE, "world": {"n_images": 11}}},
        {"source": {**BASE_SOURCE, "annotations": {"a.json": "1" * 64}}},
    ],
    ids=["caption", "image-byte", "label", "seed-dropped", "split", "min-cycles", "threshold", "world", "annotation"],
)
def test_the_digest_changes_with_any_one_input(change: dict[str, Any]) -> None:
    assert _digest(**change) != _digest()


# --------------------------------------------------------------------------- names and records


@pytest.mark.parametrize(
    ("template", "split", "expected"),
    [
        ("{dataset}_{model}.json", "test", f"{FLAT}_m.json"),
        ("{dataset}_{model}.json", "validation", f"{FLAT}@validation_m.json"),
        ("out/{model}.json", "validation", "out/m@validation.json"),
        ("out/{model}.json", "train", "out/m@train.json"),
        ("out/{model}.json", None, "out/m.json"),
        ("results", "validation", "results@validation"),
    ],
)
def test_a_non_test_split_is_part_of_the_file_name(template: str, split: str | None, expected: str) -> None:
    assert output_path(template, TASK, "m", None, split=split) == expected


def test_records_without_an_item_set_are_never_the_same() -> None:
    old = {"dataset": TASK, "metrics": {}}
    a = {"dataset": TASK, "metrics": {}, "items_sha256": "a" * 64}
    assert items_sha256_of(old) == ITEM_SET_NOT_RECORDED and items_sha256_of(a) == "a" * 64
    assert not same_item_set(old, old) and not same_item_set(old, a)
    assert same_item_set(a, dict(a)) and not same_item_set(a, {**a, "items_sha256": "b" * 64})


# --------------------------------------------------------------------------- clip-cycles eval


@pytest.fixture(scope="module")
def evaluated(shapes_cycles: Path, tiny: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`clip-cycles eval` on the test split, then on validation, with one --output template lacking {dataset}."""
    from clip_cycles.cli import main

    tmp = tmp_path_factory.mktemp("identity_eval")
    common = ["eval", "--task", TASK, "--model", tiny, "--pretrained", "none", "--dataset-root", str(shapes_cycles)]
    common += ["--cache-dir", str(tmp / "cache"), "--seeds", "0", "1", "--device", "cpu", "--num-workers", "0"]
    common += ["--output", str(tmp / "result.json")]
    assert main([*common, "--samples", str(tmp / "test.jsonl")]) == 0
    assert main([*common, "--split", "validation", "--samples", str(tmp / "validation.jsonl")]) == 0
    return tmp


def _independent_source(folder: Path) -> dict[str, Any]:
    """The structured source from the files: build_info.json's fingerprint and the world's shapes_world.json."""
    info = json.loads((folder / "build_info.json").read_text())
    fingerprint, world_root = info["source_fingerprint"], Path(info["source_root"])
    return {
        "kind": fingerprint["kind"],
        "builder": info["source"],
        "world": json.loads((world_root / "shapes_world.json").read_text()),
        "annotations": {name: entry["sha256"] for name, entry in fingerprint["annotations"].items()},
    }


def _independent_digest(samples: list[dict[str, Any]], folder: Path, split: str) -> str:
    """items_sha256 from the files: the samples' cycles, the images' bytes under the world, build_info.json."""
    info = json.loads((folder / "build_info.json").read_text())
    world_root = Path(info["source_root"])
    seeds: dict[int, list[list[str]]] = {}
    for line in samples:
        images = [hashlib.sha256((world_root / line[k]).read_bytes()).hexdigest() for k in ("image_0", "image_1")]
        seeds.setdefault(line["seed"], []).append([line["cycle_id"], *images, line["caption_0"], line["caption_1"]])
    source = _independent_source(folder)
    build = {key: info.get(key) for key in ITEM_SET_BUILD_FIELDS}
    return _spec_digest(split, source, build, [[seed, seeds[seed]] for seed in sorted(seeds)])


def test_eval_splits_leave_two_files_each_naming_its_item_set(evaluated: Path, shapes_cycles: Path) -> None:
    test_path, validation_path = evaluated / "result.json", evaluated / "result@validation.json"
    assert test_path.is_file() and validation_path.is_file()
    records = {}
    for split, path in (("test", test_path), ("validation", validation_path)):
        flat = json.loads(path.read_text())
        detail = json.loads(detail_path(path).read_text())
        samples = [json.loads(line) for line in (evaluated / f"{split}.jsonl").read_text().splitlines()]
        expected = _independent_digest(samples, shapes_cycles, split)
        for record in (flat, detail, read_result(path)):
            assert record["split"] == split and record["items_sha256"] == expected
            assert record["source_line"] == "shapes world: 300 images, 64 px, seed 0, val 0.25"
        for record in (detail, read_result(path)):  # the objects live in the detail: the flat file stays one CSV row
            assert record["source"] == _independent_source(shapes_cycles)  # the structure that entered the digest
        assert not [k for k, v in flat.items() if isinstance(v, (dict, list)) and k != "metrics"]
        assert not set(IDENTITY_FIELDS) & set(flat["metrics"])  # beside dataset and model, never a metric
        assert len(samples) == flat["metrics"]["n_cycles"]
        assert all((s["split"], s["items_sha256"]) == (flat["split"], flat["items_sha256"]) for s in samples)
        records[split] = read_result(path)
    assert not same_item_set(records["test"], records["validation"])


def test_the_same_items_scored_again_give_the_same_digest(evaluated: Path, shapes_cycles: Path, tiny: str) -> None:
    from clip_cycles.cli import main

    args = ["eval", "--task", TASK, "--model", tiny, "--pretrained", "none", "--dataset-root", str(shapes_cycles)]
    args += ["--cache-dir", str(evaluated / "cache"), "--seeds", "1", "0", "--device", "cpu", "--num-workers", "0"]
    assert main([*args, "--output", str(evaluated / "again.json")]) == 0
    assert same_item_set(read_result(evaluated / "again.json"), read_result(evaluated / "result.json"))


# --------------------------------------------------------------------------- the clip_benchmark plugin and its CSV


def test_clip_benchmark_splits_get_their_own_files_and_csv_columns(shapes_cycles: Path, tiny: str, tmp_path: Path) -> None:
    common = ["--dataset", TASK, "--model", tiny, "--pretrained", "none", "--dataset_root", str(shapes_cycles)]
    common += ["--no_amp", "--num_workers", "0", "--batch_size", "32", "--task", "auto"]
    named = str(tmp_path / "named" / "{dataset}_{pretrained}_{language}_{task}.json")
    bare = str(tmp_path / "bare" / "result.json")
    script = (
        "import sys, json; from clip_cycles.commands.clip_benchmark import main; a = json.loads(sys.argv[1]); "
        "[main(x) for x in a]"
    )
    runs = [
        ["eval", *common, "--output", named],
        ["eval", *common, "--output", named, "--split", "validation"],
        ["eval", *common, "--output", bare],
        ["eval", *common, "--output", bare, "--split", "validation"],
        ["build", str(tmp_path / "named"), "--output", str(tmp_path / "bench.csv")],
    ]
    env = {k: v for k, v in os.environ.items() if not k.startswith("CLIP_CYCLES_")}  # PYTHONPATH kept: this checkout
    env.update(
        CLIP_CYCLES_CACHE=str(tmp_path / "cache"),
        TQDM_DISABLE="1",
        CLIP_CYCLES_SAMPLES=str(tmp_path / "samples" / "{dataset}.jsonl"),
    )
    done = subprocess.run(
        [sys.executable, "-c", script, json.dumps(runs)], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert sorted(p.name for p in (tmp_path / "bare").glob("*.json")) == ["result.json", "result@validation.json"]
    named_files = sorted(p.name for p in (tmp_path / "named").glob("*.json"))
    assert named_files == [f"{FLAT}@validation_none_en_cycles.json", f"{FLAT}_none_en_cycles.json"]
    assert sorted(p.name for p in (tmp_path / "samples").iterdir()) == [f"{FLAT}.jsonl", f"{FLAT}@validation.jsonl"]
    with open(tmp_path / "bench.csv") as handle:
        rows = {row["split"]: row for row in csv.DictReader(handle)}
    assert sorted(rows) == ["test", "validation"]
    for split, row in rows.items():
        record = read_result(tmp_path / "bare" / ("result.json" if split == "test" else "result@validation.json"))
        assert row["items_sha256"] == record["items_sha256"] and row["source_line"] == record["source_line"]
        assert row["dataset"] == TASK
    assert rows["test"]["items_sha256"] != rows["validation"]["items_sha256"]
    assert rows["test"]["source_line"] == rows["validation"]["source_line"] == "shapes world: 300 images, 64 px, seed 0, val 0.25"


def test_the_identity_fields_are_declared_in_the_result_schema(evaluated: Path) -> None:
    from clip_cycles.commands.schema_formats import shipped_schema_dir
    from clip_cycles.schemas.result import check_result_record

    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads((shipped_schema_dir() / "result.schema.json").read_text())
    validator = jsonschema.Draft202012Validator(schema)
    record = json.loads((evaluated / "result@validation.json").read_text())
    assert not list(validator.iter_errors(record))
    check_result_record(record, "here")
    for field, bad in (("items_sha256", "abc"), ("items_sha256", "A" * 64), ("split", ""), ("source", 3), ("source", "a line")):
        broken = {**record, field: bad}
        assert list(validator.iter_errors(broken)), (field, bad)
        with pytest.raises(ValueError, match=f"result record field '{field}'"):
            check_result_record(broken, "here")


def test_scored_cycles_hash_the_bytes_and_skip_cycles_of_images_not_encoded(tmp_path: Path) -> None:
    from types import SimpleNamespace

    from clip_cycles.data.folder.reader import CycleRows
    from clip_cycles.data.sources.images import ImageItem
    from clip_cycles.experiments.item_sets import scored_cycles

    a, b, c = (ImageItem(k, data=k.encode() * 3) for k in ("a.jpg", "b.jpg", "c.jpg"))
    gone = ImageItem("gone.jpg", path=tmp_path / "gone.jpg")  # features precomputed elsewhere: no file to read
    rows = CycleRows.from_pairs(["x", "y", "z"], [(a, b), (b, c), (a, gone)], [("p", "q"), ("q", "r"), ("p", "r")])
    # c was not encoded (a skipped bad image): cycle y was not scored; b's hash is known from the encoder.
    encoded = SimpleNamespace(image_rows={"a.jpg": 0, "b.jpg": 1, "gone.jpg": 2}, image_hashes={"b.jpg": "f" * 64})
    sha = hashlib.sha256(b"a.jpga.jpga.jpg").hexdigest()
    assert scored_cycles(rows, encoded) == [("x", sha, "f" * 64, "p", "q"), ("z", sha, "key:gone.jpg", "p", "r")]


def test_eval_split_reaches_zero_shot_tasks_only() -> None:
    from clip_cycles.commands.eval import with_split
    from clip_cycles.tasks.registry import expand_tasks

    (task,) = with_split(expand_tasks([TASK]), "validation")
    assert task.split == "validation" and task.name == TASK
    with pytest.raises(ValueError, match=r"--split validation: cycles_probe/shapes_strict_size read the splits"):
        with_split(expand_tasks(["cycles/shapes_strict_size", "cycles_probe/shapes_strict_size"]), "validation")
