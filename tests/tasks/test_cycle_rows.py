"""The column-wise folder reader: the same rows and the same metrics as reading row by row; bad rows named; audit cache.

The reference here is a plain row-by-row reading of each Parquet file (``to_pylist``,
one tuple per row, dictionaries of keys), the way the reader worked before it was
rewritten column-wise; the scores are recomputed with a few lines of numpy.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from clip_cycles.data.folder.reader import CycleRows, open_built_folder, read_cycle_rows
from clip_cycles.encoding.encoder import ModelSpec, default_num_workers
from clip_cycles.encoding.task_encoding import cycle_index
from clip_cycles.evaluation import zero_shot
from clip_cycles.evaluation.zero_shot import evaluate
from clip_cycles.heads import additive_audit as audit_module
from clip_cycles.tasks.loading import load_task_data, unique_items
from clip_cycles.tasks.registry import expand_tasks

TASKS = ["cycles/shapes_strict_left_right", "cycles/shapes_coarse_object", "cycles/shapes_text_neighbor"]
FAMILIES = ["strict_left_right", "coarse_object", "text_neighbor"]
FIELDS = ("image_0", "image_1", "caption_0", "caption_1", "cycle_id")


def _row_by_row(path: Path, template: str = "{caption}") -> dict[str, list[Any]]:
    table = pq.read_table(path)
    rows = table.to_pylist()
    return {
        "ids": [r["cycle_id"] for r in rows],
        "images": [(r["image_0"], r["image_1"]) for r in rows],
        "captions": [(template.format(caption=r["caption_0"]), template.format(caption=r["caption_1"])) for r in rows],
    }


def _keys(rows: CycleRows) -> np.ndarray:
    return np.array([item.key for item in rows.image_items], dtype=object)[rows.image_index]


def test_every_split_of_every_family_reads_as_row_by_row(shapes_cycles: Path, specs: dict[str, Any]) -> None:
    folder = open_built_folder(shapes_cycles)
    tasks = [t for t in specs.values() if "gqa" not in t.name]
    assert len(tasks) == 14
    n_checked = 0
    for task in tasks:
        for seed in (0, 1, 2):
            for split in ("train", "validation", "test"):
                path = shapes_cycles / "data" / task.config / f"seed{seed}" / f"{split}.parquet"
                expected = _row_by_row(path)
                rows = read_cycle_rows(folder, task, seed, split)
                assert len(rows) == len(expected["ids"]) > 0
                assert rows.cycle_ids == expected["ids"]
                assert _keys(rows).tolist() == [list(p) for p in expected["images"]]
                texts = np.array(rows.captions, dtype=object)[rows.caption_index]
                assert texts.tolist() == [list(p) for p in expected["captions"]]
                # Unique, in order of first appearance (row by row, _0 before _1).
                flat = [k for pair in expected["images"] for k in pair]
                assert [i.key for i in rows.image_items] == list(dict.fromkeys(flat))
                assert rows.captions == list(dict.fromkeys(c for pair in expected["captions"] for c in pair))
                source = Path(folder.info["source_root"])
                assert all(item.path == source / item.key for item in rows.image_items)
                n_checked += 1
    assert n_checked == 14 * 9
    # Each distinct file is resolved once per folder: the same item object across splits and tasks.
    a = read_cycle_rows(folder, tasks[0], 0, "test").image_items[0]
    again = [i for t in tasks for i in read_cycle_rows(folder, t, 0, "test").image_items if i.key == a.key]
    assert all(item is a for item in again)


def test_caption_template_is_applied_once_per_distinct_caption(shapes_cycles: Path, specs: dict[str, Any]) -> None:
    from dataclasses import replace

    folder = open_built_folder(shapes_cycles)
    task = replace(specs[TASKS[0]], caption_template="a photo: {caption}.")
    rows = read_cycle_rows(folder, task, 1, "test")
    expected = _row_by_row(shapes_cycles / "data" / task.config / "seed1" / "test.parquet", "a photo: {caption}.")
    assert np.array(rows.captions, dtype=object)[rows.caption_index].tolist() == [list(p) for p in expected["captions"]]


@pytest.fixture(scope="module")
def specs() -> dict[str, Any]:
    """The shipped shapes tasks by name (the registry is read once)."""
    return {t.name: t for t in expand_tasks(["cycles/shapes_all"])}


@pytest.fixture(scope="module")
def features_file(shapes_cycles: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Random unit features for every image and caption of the fixture (the ``features`` backend: no model)."""
    images, captions = set(), set()
    for path in (shapes_cycles / "data").rglob("*.parquet"):
        expected = _row_by_row(path)
        images.update(k for pair in expected["images"] for k in pair)
        captions.update(c for pair in expected["captions"] for c in pair)
    rng = np.random.default_rng(0)
    path = tmp_path_factory.mktemp("features") / "features.npz"
    np.savez(
        path,
        image_features=rng.standard_normal((len(images), 16)),
        caption_features=rng.standard_normal((len(captions), 16)),
        image_keys=np.array(sorted(images)),
        caption_keys=np.array(sorted(captions)),
    )
    return path


NO_AUDIT_YAML = """task: cycles/rows_{family}
dataset_path: shapes
dataset_kwargs: {{config: {family}, seeds: [0, 1, 2]}}
test_split: test
metric_list: [cycle_acc, text_acc, image_acc, group_acc, n_cycles]
tie_tolerance: 1.0e-9
"""


def test_metrics_equal_an_independent_row_by_row_computation_exactly(
    shapes_cycles: Path, features_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The same families as TASKS without the audit (scored on the test split only), to stay fast.
    (tmp_path / "tasks" / "cycles").mkdir(parents=True)
    families = FAMILIES
    for family in families:
        (tmp_path / "tasks" / "cycles" / f"rows_{family}.yaml").write_text(NO_AUDIT_YAML.format(family=family))
    monkeypatch.setenv("CLIP_CYCLES_TASKS_PATH", str(tmp_path / "tasks"))
    names = [f"cycles/rows_{family}" for family in families]
    records, encoded = evaluate(
        names, ModelSpec("features", str(features_file), None), shapes_cycles, tmp_path / "cache", seeds=[0, 2]
    )
    # The encoded tables list items in order of first appearance over tasks, seeds, rows.
    order_images: dict[str, None] = {}
    order_captions: dict[str, None] = {}
    for family in families:
        for seed in (0, 2):
            expected = _row_by_row(shapes_cycles / "data" / family / f"seed{seed}" / "test.parquet")
            order_images.update(dict.fromkeys(k for pair in expected["images"] for k in pair))
            order_captions.update(dict.fromkeys(c for pair in expected["captions"] for c in pair))
    assert list(encoded.image_rows) == list(order_images)
    assert list(encoded.caption_rows) == list(order_captions)
    phi = encoded.image_features.astype(np.float64)
    psi = encoded.caption_features.astype(np.float64)
    tasks = expand_tasks(names)
    for record, task in zip(records, tasks):
        assert record["dataset"] == task.name and "additive_audit" not in record["metrics"]
        for seed in (0, 2):
            expected = _row_by_row(shapes_cycles / "data" / task.config / f"seed{seed}" / "test.parquet")
            index = np.array(
                [
                    (encoded.image_rows[a], encoded.image_rows[b], encoded.caption_rows[c], encoded.caption_rows[d])
                    for (a, b), (c, d) in zip(expected["images"], expected["captions"])
                ]
            )
            data = load_task_data(task, open_built_folder(shapes_cycles), [seed])
            ours, dropped = cycle_index(data.splits[seed]["test"], encoded)
            assert dropped == 0 and ours.dtype == np.int64
            assert ours.tobytes() == index.astype(np.int64).tobytes()  # byte-identical index
            s = {(a, b): np.einsum("ij,ij->i", phi[index[:, a]], psi[index[:, 2 + b]]) for a in (0, 1) for b in (0, 1)}
            delta = s[0, 0] + s[1, 1] - s[0, 1] - s[1, 0]
            credit = np.where(delta > 1e-9, 1.0, np.where(delta < -1e-9, 0.0, 0.5))
            text_ok = (s[0, 0] > s[0, 1]) & (s[1, 1] > s[1, 0])
            image_ok = (s[0, 0] > s[1, 0]) & (s[1, 1] > s[0, 1])
            got = record["metrics"]["per_seed"][str(seed)]
            assert got["n_cycles"] == len(expected["ids"])
            assert got["cycle_acc"] == float(credit.mean())
            assert round(got["text_acc"] * len(delta)) == int(text_ok.sum())
            assert round(got["image_acc"] * len(delta)) == int(image_ok.sum())
            assert round(got["group_acc"] * len(delta)) == int((text_ok & image_ok).sum())


def test_the_audit_is_cached_by_content_and_equals_the_audit_on_the_full_tables(
    shapes_cycles: Path, features_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, specs: dict[str, Any]
) -> None:
    calls: list[int] = []
    real = audit_module.additive_audit

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(zero_shot, "additive_audit", counted)  # where zero-shot scoring looks it up
    spec = ModelSpec("features", str(features_file), None)
    first, encoded = evaluate(TASKS[:1], spec, shapes_cycles, tmp_path, seeds=[1])
    assert len(calls) == 1 and len(list((tmp_path / "audits").glob("*.json"))) == 1
    # Another task in the same run changes the feature tables, not this task's audit inputs: a hit.
    second, _ = evaluate(TASKS[:2], spec, shapes_cycles, tmp_path, seeds=[1])
    assert len(calls) == 2  # only the new task's audit ran
    assert second[0]["metrics"] == first[0]["metrics"]

    # The cached report is the audit of the full (uncompacted) tables, computed independently here:
    # by default (audit_fit: scored) the probes fit on the scored test cycles themselves.
    data = load_task_data(specs[TASKS[0]], open_built_folder(shapes_cycles), [1])
    test = cycle_index(data.splits[1]["test"], encoded)[0]
    full = real(
        encoded.image_features.astype(np.float64),
        encoded.caption_features.astype(np.float64),
        test,
        test,
        seed=1,
        tie_tolerance=1e-9,
    )
    expected = {**json.loads(json.dumps(full.to_dict())), "fit_split": "test"}
    assert first[0]["metrics"]["additive_audit"]["per_seed"]["1"] == expected

    # Different features: a different key, so the audit runs again.
    other = tmp_path / "other.npz"
    with np.load(features_file) as npz:
        np.savez(other, **{k: (npz[k] * 2 + 1 if k.endswith("features") else npz[k]) for k in npz.files})
    evaluate(TASKS[:1], ModelSpec("features", str(other), None), shapes_cycles, tmp_path, seeds=[1])
    assert len(calls) == 3
    # Without a cache nothing is stored and the audit runs every time.
    evaluate(TASKS[:1], spec, shapes_cycles, tmp_path / "unused", use_cache=False, seeds=[1])
    assert len(calls) == 4 and not (tmp_path / "unused").exists()
    # audit_fit: train fits on the train split (early-stop split counted), as paper 1's probes do.
    from clip_cycles.evaluation.zero_shot import evaluate_tasks

    trained, encoded = evaluate_tasks([replace(specs[TASKS[0]], audit_fit="train")], spec, shapes_cycles, None,
                                      tmp_path / "data", seeds=[1])  # fmt: skip
    data = load_task_data(specs[TASKS[0]], open_built_folder(shapes_cycles), [1], with_audit=True)
    index = {s: cycle_index(data.splits[1][s], encoded)[0] for s in ("train", "validation", "test")}
    full = real(
        encoded.image_features.astype(np.float64),
        encoded.caption_features.astype(np.float64),
        index["train"],
        index["test"],
        val_cycles=index["validation"],
        seed=1,
        tie_tolerance=1e-9,
    )
    expected = {**json.loads(json.dumps(full.to_dict())), "fit_split": "train"}
    assert trained[0]["metrics"]["additive_audit"]["per_seed"]["1"] == expected


def test_a_corrupt_cached_audit_is_recomputed(shapes_cycles: Path, features_file: Path, tmp_path: Path) -> None:
    spec = ModelSpec("features", str(features_file), None)
    first, _ = evaluate(TASKS[:1], spec, shapes_cycles, tmp_path, seeds=[0])
    (cached,) = (tmp_path / "audits").glob("*.json")
    cached.write_text(cached.read_text()[:50])
    again, _ = evaluate(TASKS[:1], spec, shapes_cycles, tmp_path, seeds=[0])
    assert again[0]["metrics"] == first[0]["metrics"]
    assert json.loads(cached.read_text())["report"] == first[0]["metrics"]["additive_audit"]["per_seed"]["0"]


def test_a_cached_audit_that_does_not_match_its_declaration_is_recomputed(
    shapes_cycles: Path, features_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from clip_cycles.schemas.audit_report import AdditiveAuditReport, additive_audit_json_schema
    from clip_cycles.schemas.declared import validate

    spec = ModelSpec("features", str(features_file), None)
    first, _ = evaluate(TASKS[:1], spec, shapes_cycles, tmp_path, seeds=[0])
    (cached,) = (tmp_path / "audits").glob("*.json")
    stored = json.loads(cached.read_text())
    assert validate(AdditiveAuditReport, stored["report"])[1] is None  # a real report matches its declaration
    try:
        import jsonschema
    except ImportError:
        pass
    else:
        jsonschema.validate(stored["report"], additive_audit_json_schema())
    calls: list[int] = []
    real = audit_module.additive_audit
    monkeypatch.setattr(zero_shot, "additive_audit", lambda *a, **k: calls.append(1) or real(*a, **k))
    # Valid JSON, the right settings, but a report whose shape is wrong: recomputed, not served.
    cached.write_text(json.dumps({**stored, "report": {**stored["report"], "passed": "yes"}}))
    with pytest.warns(UserWarning, match="fails its checksum; the audit is recomputed"):  # said, not silent
        again, _ = evaluate(TASKS[:1], spec, shapes_cycles, tmp_path, seeds=[0])
    assert calls == [1] and again[0]["metrics"] == first[0]["metrics"]
    assert json.loads(cached.read_text())["report"] == stored["report"]


def _crafted(shapes_cycles: Path, tmp_path: Path, change: Any) -> tuple[Any, Path]:
    """A copy of the fixture whose strict_left_right seed0 test file is rewritten by ``change(rows)``."""
    folder = tmp_path / "built"
    shutil.copytree(shapes_cycles, folder)
    path = folder / "data" / "strict_left_right" / "seed0" / "test.parquet"
    table = pq.read_table(path)
    rows = table.to_pylist()
    table = change(rows, table)
    pq.write_table(table, path)
    # The digest check refuses the edited file first; row validation is the second line of defence.
    with pytest.raises(ValueError, match="content differs from the sha256"):
        open_built_folder(folder)
    return open_built_folder(folder, verify=False), path


def _rewrite(edit: Any) -> Any:
    def change(rows: list[dict[str, Any]], table: pa.Table) -> pa.Table:
        edit(rows)
        return pa.Table.from_pylist(rows, schema=table.schema)

    return change


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda r: r[3].update(cycle_id=r[1]["cycle_id"]), r"row 3 \(cycle_id '.*-000001'\): cycle_id must be a unique"),
        (lambda r: r[2].update(cycle_id=""), r"row 2 \(cycle_id ''\): cycle_id must be a unique non-empty string"),
        (lambda r: r[4].update(caption_1="   "), r"row 4 \(cycle_id .*\): caption_1 is empty or not a string"),
        (lambda r: r[5].update(caption_0=None), r"row 5 \(cycle_id .*\): caption_0 is empty or not a string"),
        (lambda r: r[1].update(caption_1=r[1]["caption_0"]), r"row 1 .*caption_0 equals caption_1"),
        (lambda r: r[6].update(image_1=r[6]["image_0"]), r"row 6 .*image_0 equals image_1"),
        (lambda r: r[7].update(image_0="/etc/passwd"), r"row 7 .* image_0: image file name '/etc/passwd' must be relative"),
        (lambda r: r[8].update(image_1="../outside.jpg"), r"row 8 .* image_1: image file name '../outside.jpg' must be"),
        (lambda r: r[0].update(image_0=None), r"row 0 .* image_0: image value must be a file name"),
    ],
)
def test_bad_rows_are_named_with_file_row_and_cycle_id(
    shapes_cycles: Path, tmp_path: Path, edit: Any, message: str, specs: dict[str, Any]
) -> None:
    folder, path = _crafted(shapes_cycles, tmp_path, _rewrite(edit))
    with pytest.raises(ValueError, match=message) as info:
        read_cycle_rows(folder, specs[TASKS[0]], 0, "test")
    assert str(path) in str(info.value)


def test_missing_columns_empty_files_and_wrong_types_are_clear_errors(
    shapes_cycles: Path, tmp_path: Path, specs: dict[str, Any]
) -> None:
    task = specs[TASKS[0]]
    folder, path = _crafted(shapes_cycles, tmp_path, lambda rows, table: table.drop_columns(["caption_1"]))
    with pytest.raises(ValueError, match=r"columns \['caption_1'\] are missing"):
        read_cycle_rows(folder, task, 0, "test")
    pq.write_table(pq.read_table(shapes_cycles / "data" / "strict_left_right" / "seed0" / "test.parquet").slice(0, 0), path)
    with pytest.raises(ValueError, match="holds no cycles"):
        read_cycle_rows(folder, task, 0, "test")
    table = pq.read_table(shapes_cycles / "data" / "strict_left_right" / "seed0" / "test.parquet")
    numbers = pa.array(range(table.num_rows), type=pa.int64())
    pq.write_table(table.set_column(table.schema.get_field_index("caption_0"), "caption_0", numbers), path)
    with pytest.raises(ValueError, match="caption_0 .*int64.* caption_1 .*must have the same type"):
        read_cycle_rows(folder, task, 0, "test")
    pq.write_table(table.set_column(table.schema.get_field_index("cycle_id"), "cycle_id", numbers), path)
    with pytest.raises(ValueError, match="column cycle_id holds int64"):
        read_cycle_rows(folder, task, 0, "test")
    path.write_bytes(b"PAR1 not really")
    with pytest.raises(ValueError, match="is not a readable Parquet file"):
        read_cycle_rows(folder, task, 0, "test")


def test_self_contained_images_read_from_their_embedded_bytes(shapes_cycles: Path, tmp_path: Path, specs: dict[str, Any]) -> None:
    folder = open_built_folder(shapes_cycles)
    source = Path(folder.info["source_root"])

    def embed(rows: list[dict[str, Any]], table: pa.Table) -> pa.Table:
        for row in rows:
            for k in ("image_0", "image_1"):
                row[k] = {"bytes": (source / row[k]).read_bytes(), "path": row[k]}
        image = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
        schema = pa.schema([pa.field(f.name, image if f.name in ("image_0", "image_1") else f.type) for f in table.schema])
        return pa.Table.from_pylist(rows, schema=schema)

    crafted, path = _crafted(shapes_cycles, tmp_path, embed)
    rows = read_cycle_rows(crafted, specs[TASKS[0]], 0, "test")
    plain = read_cycle_rows(folder, specs[TASKS[0]], 0, "test")
    assert _keys(rows).tolist() == _keys(plain).tolist()
    assert all(item.path is None and item.read_bytes() == (source / item.key).read_bytes() for item in rows.image_items)


def test_concat_and_unique_items_keep_first_appearance(shapes_cycles: Path, specs: dict[str, Any]) -> None:
    folder = open_built_folder(shapes_cycles)
    task = specs[TASKS[0]]
    parts = [read_cycle_rows(folder, task, seed, "test") for seed in (0, 1)]
    merged = CycleRows.concat(parts)
    assert len(merged) == sum(len(p) for p in parts)
    assert _keys(merged).tolist() == _keys(parts[0]).tolist() + _keys(parts[1]).tolist()
    assert merged.cycle_ids == parts[0].cycle_ids + parts[1].cycle_ids
    assert merged.caption_pair(len(parts[0])) == parts[1].caption_pair(0)
    data = load_task_data(task, folder, [0, 1])
    images, captions = unique_items([data])
    assert [i.key for i in images] == list(dict.fromkeys(_keys(merged).ravel().tolist()))
    assert captions == list(dict.fromkeys(np.array(merged.captions, dtype=object)[merged.caption_index].ravel()))


def test_default_decoding_workers_leave_one_cpu_to_the_model() -> None:
    assert default_num_workers(10_000, 64, cpus=2) == 1
    assert default_num_workers(10_000, 64, cpus=1) == 0
    assert default_num_workers(10_000, 64, cpus=16) == 4
    assert default_num_workers(128, 64, cpus=16) == 0  # two batches: no workers to start
    assert default_num_workers(129, 64, cpus=16) == 4


def test_records_name_the_backend_and_weights_and_the_page_labels_from_them(
    shapes_cycles: Path, features_file: Path, tmp_path: Path
) -> None:
    import hashlib

    from clip_cycles.evaluation.page_data import collect
    from clip_cycles.results import write_result

    spec = ModelSpec("features", str(features_file), None)
    records, _ = evaluate(TASKS[:1], spec, shapes_cycles, tmp_path / "cache", seeds=[0])
    record = records[0]
    assert record["backend"] == "features" and record["pretrained"] == ""
    # The digest follows the file's bytes (hashed here, not by the helper): a copy elsewhere keeps it,
    # one changed byte does not.
    copy = tmp_path / "elsewhere" / features_file.name
    copy.parent.mkdir()
    shutil.copyfile(features_file, copy)
    again, _ = evaluate(TASKS[:1], ModelSpec("features", str(copy), None), shapes_cycles, tmp_path / "cache", seeds=[0])
    assert again[0]["weights_sha256"] == record["weights_sha256"]
    assert hashlib.sha256(copy.read_bytes()).hexdigest() == hashlib.sha256(features_file.read_bytes()).hexdigest()
    copy.write_bytes(copy.read_bytes() + b"\0")  # one more byte: other content, so another digest
    assert ModelSpec("features", str(copy), None).source()["weights_sha256"] != record["weights_sha256"]
    # An OpenCLIP tag names its weights itself: no digest, and the label keeps the tag.
    assert ModelSpec("open_clip", "ViT-B-32", "laion2b_s34b_b79k").source() == {"backend": "open_clip"}
    # The page's label comes from the record: not "random init" for features without a tag, and the file by its
    # name and digest, never the machine path it was given as (issue 51).
    write_result(record, tmp_path / "results" / "r.json")
    assert collect([tmp_path / "results"]).models == [f"{features_file.name} (weights {record['weights_sha256'][:12]})"]
