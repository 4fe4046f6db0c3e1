"""Kept row-file decodes (``BuiltFolder.rows_cache``): served only for the exact bytes, columns and code that made
them, checked again on reading, never trusted over the file; a warm evaluation reads no Parquet.

Expected rows come from a plain row-by-row reading of the Parquet file (``pq.read_table(...).to_pylist()``),
never from the reader under test.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import stat
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from clip_cycles.data.folder import reader
from clip_cycles.data.folder.reader import open_built_folder, read_cycle_rows
from clip_cycles.tasks.registry import expand_tasks

TASK = "cycles/shapes_strict_left_right"


@pytest.fixture(scope="module")
def specs() -> dict[str, Any]:
    return {t.name: t for t in expand_tasks([TASK])}


@pytest.fixture
def folder_copy(shapes_cycles: Path, tmp_path: Path) -> Path:
    root = tmp_path / "built"
    shutil.copytree(shapes_cycles, root)
    return root


def _plain(path: Path) -> dict[str, Any]:
    rows = pq.read_table(path).to_pylist()
    return {
        "ids": [r["cycle_id"] for r in rows],
        "images": [(r["image_0"], r["image_1"]) for r in rows],
        "captions": [(r["caption_0"], r["caption_1"]) for r in rows],
    }


def _as_plain(rows: reader.CycleRows, template: str = "{}") -> dict[str, Any]:
    return {
        "ids": list(rows.cycle_ids),
        "images": [(rows.image_items[a].key, rows.image_items[b].key) for a, b in rows.image_index.tolist()],
        "captions": [(rows.captions[a], rows.captions[b]) for a, b in rows.caption_index.tolist()],
    }


def _read(root: Path, cache: Path | None, specs: dict[str, Any], seed: int = 0, split: str = "test") -> reader.CycleRows:
    folder = open_built_folder(root, verify=False)
    folder.rows_cache = cache
    return read_cycle_rows(folder, specs[TASK], seed, split)


def _records(cache: Path) -> list[Path]:
    return sorted(cache.glob("*.rows")) if cache.is_dir() else []


def _parse(record: Path) -> tuple[dict[str, Any], np.ndarray, list[list[str]]]:
    """A kept decode by its documented layout: a JSON header line, int32 codes, then a JSON array of names."""
    line, _, payload = record.read_bytes().partition(b"\n")
    header = json.loads(line)
    n = header["code_bytes"]
    return header, np.frombuffer(payload[:n], dtype="<i4").copy(), json.loads(payload[n:])


def _write(record: Path, header: dict[str, Any], codes: np.ndarray, names: list[list[str]], sign: bool = True) -> None:
    """Write a record in that layout; ``sign``: with the payload's sha256 recomputed (an edit that keeps its checksum)."""
    payload = codes.astype("<i4").tobytes() + json.dumps(names, ensure_ascii=False).encode("utf-8")
    if sign:
        header = {**header, "sha256": hashlib.sha256(payload).hexdigest()}
    record.write_bytes(json.dumps(header).encode("utf-8") + b"\n" + payload)


def _no_parquet(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("the row file was decoded from its Parquet")

    monkeypatch.setattr(reader, "_decode", refuse)


def _rows_path(root: Path, specs: dict[str, Any], seed: int = 0, split: str = "test") -> Path:
    return root / "data" / specs[TASK].config / f"seed{seed}" / f"{split}.parquet"


def test_a_kept_decode_serves_the_same_rows_without_reading_the_parquet(
    folder_copy: Path, tmp_path: Path, specs: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "rows"
    expected = _plain(_rows_path(folder_copy, specs))
    first = _read(folder_copy, cache, specs)
    assert _as_plain(first) == expected
    assert len(_records(cache)) == 1
    _no_parquet(monkeypatch)
    second = _read(folder_copy, cache, specs)
    assert _as_plain(second) == expected
    assert second.image_index.dtype == second.caption_index.dtype == first.image_index.dtype
    # What the file decides is kept, not what the task or folder add: the record holds the raw captions.
    header, codes, (ids, captions, images) = _parse(_records(cache)[0])
    assert ids == expected["ids"] and header["rows"] == len(ids)
    assert set(captions) == {c for pair in expected["captions"] for c in pair}
    pairs = codes.reshape(2, -1, 2)
    assert [(captions[a], captions[b]) for a, b in pairs[0].tolist()] == expected["captions"]
    assert [(images[a], images[b]) for a, b in pairs[1].tolist()] == expected["images"]


def test_the_key_names_the_bytes_the_columns_the_code_and_the_version(
    folder_copy: Path, tmp_path: Path, specs: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each key field, changed alone, makes another record (a miss), listed field by field."""
    path = _rows_path(folder_copy, specs)
    base = {
        "version": reader.ROWS_CACHE_VERSION,
        "code": hashlib.sha256(Path(reader.__file__).read_bytes()).hexdigest(),
        "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
        "columns": list(reader.ROW_FIELDS),
    }
    cache = tmp_path / "rows"
    _read(folder_copy, cache, specs)
    (record,) = _records(cache)
    assert _parse(record)[0]["settings"] == base  # the key is exactly these four fields
    changed = {"version": base["version"] + 1, "code": "0" * 64, "sha256": "f" * 64, "columns": ["x"] * 5}
    names = {reader.digest({**base, field: value}, 32) for field, value in changed.items()}
    assert len(names) == 4 and record.stem not in names
    # The code: another source digest misses and decodes again.
    monkeypatch.setattr(reader, "_reader_digest", lambda: "1" * 64)
    _read(folder_copy, cache, specs)
    assert len(_records(cache)) == 2


def test_a_changed_file_is_decoded_again_never_served_the_old_rows(
    folder_copy: Path, tmp_path: Path, specs: dict[str, Any]
) -> None:
    cache = tmp_path / "rows"
    path = _rows_path(folder_copy, specs)
    _read(folder_copy, cache, specs)
    table = pq.read_table(path)
    captions = [f"{c} (edited)" for c in table.column("caption_0").to_pylist()]
    pq.write_table(table.set_column(table.schema.get_field_index("caption_0"), "caption_0", pa.array(captions)), path)
    rows = _read(folder_copy, cache, specs)
    assert [rows.captions[a] for a in rows.caption_index[:, 0].tolist()] == captions
    assert _as_plain(rows) == _plain(path)
    assert len(_records(cache)) == 2


@pytest.mark.parametrize(
    "tamper",
    ["torn", "checksum", "duplicate_ids", "code_out_of_range", "same_captions", "settings", "not_json_list"],
)
def test_a_bad_record_is_refused_with_a_warning_and_decoded_again(
    folder_copy: Path, tmp_path: Path, specs: dict[str, Any], tamper: str, caplog: pytest.LogCaptureFixture
) -> None:
    cache = tmp_path / "rows"
    expected = _plain(_rows_path(folder_copy, specs))
    _read(folder_copy, cache, specs)
    (record,) = _records(cache)
    header, codes, names = _parse(record)
    ids, captions, images = names
    sign = True
    if tamper == "torn":
        record.write_bytes(record.read_bytes()[:-100])
    else:
        if tamper == "duplicate_ids":
            ids[1] = ids[0]
        elif tamper == "code_out_of_range":
            codes[len(codes) // 2 + 3] = len(images)  # an image code
        elif tamper == "same_captions":
            codes[1] = codes[0]  # the first cycle's two caption codes
        elif tamper == "settings":
            header["settings"] = {**header["settings"], "columns": ["image_0", "image_1", "caption_1", "caption_0", "cycle_id"]}
        elif tamper == "not_json_list":
            names = [ids, {"0": captions[0]}, images]
        elif tamper == "checksum":  # an edit whose checksum was not redone
            captions[0] = captions[0] + " (edited)"
            sign = False
        _write(record, header, codes, names, sign)
    with caplog.at_level(logging.WARNING, logger=reader.__name__):
        got = _read(folder_copy, cache, specs)
    assert _as_plain(got) == expected
    assert any(str(record) in m for m in caplog.messages), caplog.messages
    assert _parse(record)[2][0] == expected["ids"]  # rewritten whole


def test_the_same_record_passes_untouched_without_a_warning(
    folder_copy: Path, tmp_path: Path, specs: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    cache = tmp_path / "rows"
    _read(folder_copy, cache, specs)
    (record,) = _records(cache)
    before = (record.read_bytes(), record.stat().st_ino)
    with caplog.at_level(logging.WARNING, logger=reader.__name__):
        _read(folder_copy, cache, specs)
    assert not caplog.messages
    assert (record.read_bytes(), record.stat().st_ino) == before


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_a_fifo_or_link_in_place_of_a_record_is_neither_waited_on_nor_replaced(
    folder_copy: Path, tmp_path: Path, specs: dict[str, Any]
) -> None:
    cache = tmp_path / "rows"
    _read(folder_copy, cache, specs)
    (record,) = _records(cache)
    record.unlink()
    os.mkfifo(record)
    rows = _read(folder_copy, cache, specs)
    assert _as_plain(rows) == _plain(_rows_path(folder_copy, specs))
    assert stat.S_ISFIFO(os.lstat(record).st_mode)  # still the FIFO: never written into, never replaced
    record.unlink()
    users = tmp_path / "users_file.txt"
    users.write_text("not the cache's")
    record.symlink_to(users)
    assert _as_plain(_read(folder_copy, cache, specs)) == _plain(_rows_path(folder_copy, specs))
    assert record.is_symlink() and users.read_text() == "not the cache's"


def test_an_unwritable_cache_is_said_once_and_the_rows_are_still_read(
    folder_copy: Path, tmp_path: Path, specs: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    blocker = tmp_path / "rows"
    blocker.write_text("a file where the cache folder would be")
    folder = open_built_folder(folder_copy, verify=False)
    folder.rows_cache = blocker
    with caplog.at_level(logging.WARNING, logger=reader.__name__):
        rows = [read_cycle_rows(folder, specs[TASK], seed, "test") for seed in (0, 1, 2)]
    for seed, got in enumerate(rows):
        assert _as_plain(got) == _plain(_rows_path(folder_copy, specs, seed))
    assert len(caplog.messages) == 1 and "could not be written" in caplog.messages[0]  # once, not once a file
    assert folder.rows_cache_writable is False
    assert blocker.read_text() == "a file where the cache folder would be"


def test_a_read_only_cache_still_serves_what_it_holds(
    folder_copy: Path, tmp_path: Path, specs: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "rows"
    _read(folder_copy, cache, specs)
    folder = open_built_folder(folder_copy, verify=False)
    folder.rows_cache, folder.rows_cache_writable = cache, False
    _no_parquet(monkeypatch)
    assert _as_plain(read_cycle_rows(folder, specs[TASK], 0, "test")) == _plain(_rows_path(folder_copy, specs))


def test_no_cache_keeps_nothing_and_a_bad_file_is_named_either_way(
    folder_copy: Path, tmp_path: Path, specs: dict[str, Any]
) -> None:
    path = _rows_path(folder_copy, specs)
    table = pq.read_table(path)
    ids = table.column("cycle_id").to_pylist()
    ids[2] = ids[1]
    pq.write_table(table.set_column(table.schema.get_field_index("cycle_id"), "cycle_id", pa.array(ids)), path)
    for cache in (None, tmp_path / "rows"):
        with pytest.raises(ValueError, match=rf"{path} row 2 \(cycle_id '{ids[1]}'\): cycle_id must be a unique"):
            _read(folder_copy, cache, specs)
    assert _records(tmp_path / "rows") == []  # a file that fails its checks is never kept


def test_image_structs_are_decoded_from_the_file_and_not_kept(folder_copy: Path, tmp_path: Path, specs: dict[str, Any]) -> None:
    path = _rows_path(folder_copy, specs)
    table = pq.read_table(path)
    structs = {}
    for column in ("image_0", "image_1"):
        names = table.column(column).to_pylist()
        structs[column] = [{"path": None, "bytes": f"image bytes of {n}".encode()} for n in names]
        table = table.set_column(table.schema.get_field_index(column), column, pa.array(structs[column]))
    pq.write_table(table, path)
    cache = tmp_path / "rows"
    rows = _read(folder_copy, cache, specs)
    assert len(rows) == len(structs["image_0"])
    first = [rows.image_items[a].data for a in rows.image_index[:, 0].tolist()]
    assert first == [s["bytes"] for s in structs["image_0"]]
    assert _records(cache) == []
