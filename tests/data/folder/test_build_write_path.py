"""The build's fast write path (each predicate parsed once per family, columns without row dicts) writes
the bytes of the plain one: every row's predicate parsed by the standard library, row dicts, and
``pyarrow.Table.from_pylist``, computed here independently on crafted records."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from clip_cycles.data.families.registry import ROW_COLUMNS, CycleRecord
from clip_cycles.data.folder import writer as dataset_folder
from clip_cycles.data.folder.writer import parse_predicates, predicate_type, write_parquet

#: Predicates that repeat, whose fields first appear in different rows, and mix int and float values.
PREDICATES = [
    '{"caption_0":{"kind":"count","count":1},"caption_1":{"kind":"count","count":2},"stratum":"cat"}',
    '{"caption_0":{"kind":"relation","margin":0.1},"details":{"pair":["a","b"]},"stratum":"a|b"}',
    '{"caption_0":{"kind":"count","count":1},"caption_1":{"kind":"count","count":2},"stratum":"cat"}',
    '{"caption_0":{"kind":"count","count":3,"margin":1},"caption_1":{"kind":"count","count":2},"stratum":"cat"}',
    '{"caption_0":{"kind":"relation","margin":0.1},"details":{"pair":["a","b"]},"stratum":"a|b"}',
]


def records() -> list[CycleRecord]:
    return [
        CycleRecord(f"train2017/{i:04d}.jpg", f"train2017/{i + 7:04d}.jpg", f"caption {i}", f"caption {i + 1}",
                    f"fam-s0-train-{i:06d}", "fam", 0, "train", i, i + 7, text)
        for i, text in enumerate(PREDICATES * 3)
    ]  # fmt: skip


def plain_parquet(path: Path, rows: list[CycleRecord], mode: str) -> None:
    """The plain write: every predicate parsed by json.loads, one dict per row, Table.from_pylist."""
    kind = pa.array([json.loads(r.predicate) for r in rows]).type
    dicts = []
    for r in rows:
        row = {name: getattr(r, name) for name in ROW_COLUMNS}
        row["predicate_json"] = row["predicate"]
        row["predicate"] = json.loads(row["predicate"])
        if mode == "self_contained":
            row["image_0_file_name"] = "images/" + row.pop("image_0")
            row["image_1_file_name"] = "images/" + row.pop("image_1")
        dicts.append(row)
    table = pa.Table.from_pylist(dicts, schema=dataset_folder._schema(mode, kind))
    pq.write_table(table, path, compression="zstd", compression_level=3, row_group_size=4096)


@pytest.mark.parametrize("mode", ["reference", "self_contained"])
def test_fast_write_gives_the_plain_writes_bytes(tmp_path: Path, mode: str) -> None:
    rows = records()
    plain = tmp_path / "plain.parquet"
    plain_parquet(plain, rows, mode)
    parsed: dict = {}
    kind = predicate_type((r.predicate for r in rows), parsed)
    fast = tmp_path / "fast.parquet"
    write_parquet(fast, rows, mode, tmp_path, kind, parsed)
    assert fast.read_bytes() == plain.read_bytes()
    alone = tmp_path / "alone.parquet"  # no type, no memo: the split types and parses itself
    write_parquet(alone, rows, mode, tmp_path)
    assert alone.read_bytes() == plain.read_bytes()
    # The values really went in: the struct column reads back as the standard library parses the text.
    table = pq.read_table(fast)
    assert table.column("predicate").to_pylist()[1]["details"] == {"pair": ["a", "b"]}
    assert table.column("predicate").to_pylist()[0]["caption_0"]["margin"] is None


def test_distinct_texts_infer_the_type_of_every_row() -> None:
    # Fields in first-appearance order over all rows, int widened to double by a later float.
    texts = ['{"b":1}', '{"a":"x","b":1}', '{"b":1}', '{"b":2.5}', '{"a":"x","b":1}']
    assert predicate_type(texts) == pa.array([json.loads(t) for t in texts]).type
    assert str(predicate_type(texts)) == "struct<b: double, a: string>"


def test_parse_predicates_parses_each_text_once(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    real = dataset_folder.parse_json
    monkeypatch.setattr(dataset_folder, "parse_json", lambda text: calls.append(text) or real(text))
    memo = parse_predicates(PREDICATES)
    parse_predicates(PREDICATES, memo)
    assert sorted(calls) == sorted(set(PREDICATES))
    assert list(memo) == list(dict.fromkeys(PREDICATES))
    assert all(memo[t] == json.loads(t) for t in PREDICATES)


@pytest.mark.parametrize("mode", ["reference", "self_contained"])
def test_a_familys_files_encoded_on_its_worker_are_the_plain_writes_bytes(tmp_path: Path, mode: str) -> None:
    from clip_cycles.data.families.registry import FamilyBuild
    from clip_cycles.data.folder.writer import encode_family, parquet_path

    rows = records()
    by_split = {"train": rows[:6], "validation": rows[6:9], "test": rows[9:]}
    build = FamilyBuild("coco", "fam", "a predicate", records={0: by_split, 1: {s: r[::-1] for s, r in by_split.items()}})
    encode_family(build, mode)
    layout = dataset_folder.LAYOUT_OF_MODE[mode]
    assert sorted(build.encoded) == sorted((mode, parquet_path("fam", seed, split, layout)) for seed in (0, 1)
                                           for split in by_split)  # fmt: skip
    # One struct type for the whole family (every seed and split), as the plain write of all rows infers it.
    kind = pa.array([json.loads(r.predicate) for seed in (0, 1) for rs in build.records[seed].values() for r in rs]).type
    for seed in (0, 1):
        for split, split_rows in build.records[seed].items():
            plain = tmp_path / f"plain-{seed}-{split}.parquet"
            table = pa.Table.from_pylist(
                [{**{n: getattr(r, n) for n in ROW_COLUMNS}, "predicate": json.loads(r.predicate),
                  "predicate_json": r.predicate} for r in split_rows] if mode == "reference" else
                [{**{n: getattr(r, n) for n in ROW_COLUMNS if n not in ("image_0", "image_1")},
                  "image_0_file_name": "images/" + r.image_0, "image_1_file_name": "images/" + r.image_1,
                  "predicate": json.loads(r.predicate), "predicate_json": r.predicate} for r in split_rows],
                schema=dataset_folder._schema(mode, kind),
            )  # fmt: skip
            pq.write_table(table, plain, compression="zstd", compression_level=3, row_group_size=4096)
            assert build.encoded[mode, parquet_path("fam", seed, split, layout)] == plain.read_bytes(), (seed, split)
    written = tmp_path / "written.parquet"  # the writer writes the bytes it is given, as they are
    write_parquet(written, rows, mode, tmp_path, None, None, b"PAR1 encoded elsewhere")
    assert written.read_bytes() == b"PAR1 encoded elsewhere"


def test_a_build_without_encoded_files_is_encoded_by_the_writer_to_the_same_bytes(
    shapes_world: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from clip_cycles.data.folder.build import build_coco_folder

    names = ["coarse_object", "strict_size"]
    usual, _ = build_coco_folder(shapes_world, tmp_path / "usual", families=names, seeds=[0], min_cycles=5)
    real = dataset_folder.build_families
    seen = []

    def without_finish(*args, **kwargs):  # the builds arrive as a caller of write_folder might hand them over
        kwargs.pop("finish")
        builds = real(*args, **kwargs)
        assert not any(b.encoded for b in builds)
        seen.extend(b.encoded for b in builds)
        return builds

    monkeypatch.setattr(dataset_folder, "build_families", without_finish)
    late, _ = build_coco_folder(shapes_world, tmp_path / "late", families=names, seeds=[0], min_cycles=5)
    assert seen and all(encoded for encoded in seen)  # the writer filled them in
    files = sorted(p.relative_to(usual) for p in usual.rglob("*.parquet"))
    assert len(files) == 6 and files == sorted(p.relative_to(late) for p in late.rglob("*.parquet"))
    for name in files:
        assert (usual / name).read_bytes() == (late / name).read_bytes(), name
