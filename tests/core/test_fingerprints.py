"""Content fingerprints and hashes, each against a hash or listing made in the test.

Expected values are computed here with hashlib and hand-written JSON, never with the
helpers under test, so a dropped field, a wrong length or a skipped file changes a digest
the test can see (the mutation score of ``clip_cycles/fingerprints.py`` rests on this file).
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from clip_cycles import fingerprints
from clip_cycles.fingerprints import (
    canonical_json,
    content_hash,
    digest,
    file_fingerprint,
    file_sha256,
    listing_fingerprint,
    local_weights_path,
    stable_repr,
    text_hash,
    weights_fingerprint,
)


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _dead_pid() -> int:
    """The pid of a child that has exited and been reaped (no process has it now, barring reuse)."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


@pytest.fixture(autouse=True)
def _fresh_memo(monkeypatch: pytest.MonkeyPatch) -> None:
    # Each test starts with an empty in-process memo, so a hash it expects is computed, not remembered.
    monkeypatch.setattr(fingerprints, "_MEMO", {})


# --- canonical JSON and digests ------------------------------------------------------------------------------


def test_canonical_json_sorts_keys_is_compact_and_keeps_unicode() -> None:
    assert canonical_json({"b": 1, "a": [1, "é"], "c": {"z": None, "y": 2.5}}) == '{"a":[1,"é"],"b":1,"c":{"y":2.5,"z":null}}'


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf")])
def test_canonical_json_refuses_non_finite_numbers(value: float) -> None:
    with pytest.raises(ValueError):
        canonical_json({"x": value})


def test_digest_is_the_sha256_prefix_of_the_canonical_text() -> None:
    text = '{"a":"é","b":[1,2]}'
    assert digest({"b": [1, 2], "a": "é"}) == _sha(text)[:24]
    assert digest({"b": [1, 2], "a": "é"}, 64) == _sha(text)
    assert digest("x", 7) == _sha('"x"')[:7]
    assert digest({"a": 1}) != digest({"a": 2})


def test_content_and_text_hashes() -> None:
    assert content_hash(b"\x00pixels") == hashlib.sha256(b"\x00pixels").hexdigest()
    assert text_hash("a cat é") == hashlib.sha256(b"text\x00" + "a cat é".encode()).hexdigest()
    # The prefix keeps a caption's key apart from the key of an image file holding the same bytes.
    assert text_hash("abc") != content_hash(b"abc")


class _WithAddress:
    def __repr__(self) -> str:
        return "<Pipe at 0x7fA3b2 of <Norm at 0xDEAD01> at>"


def test_stable_repr_drops_every_memory_address_and_nothing_else() -> None:
    assert stable_repr(_WithAddress()) == "<Pipe of <Norm> at>"
    assert stable_repr([1, "at 0x1"]) == "[1, 'at 0x1']"  # no space before "at": not an address


# --- file hashes ----------------------------------------------------------------------------------------------


def test_file_sha256_reads_every_chunk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fingerprints, "_HASH_CHUNK", 5)
    data = bytes(range(256)) * 3 + b"tail"  # many chunks and a short last one
    path = tmp_path / "w.bin"
    path.write_bytes(data)
    assert file_sha256(path) == hashlib.sha256(data).hexdigest()
    assert file_sha256(tmp_path / "." / "w.bin") == hashlib.sha256(data).hexdigest()


def test_a_rewrite_that_restores_size_and_mtime_is_hashed_again(tmp_path: Path) -> None:
    path = tmp_path / "w.bin"
    path.write_bytes(b"aaaa")
    before = path.stat()
    assert file_sha256(path) == hashlib.sha256(b"aaaa").hexdigest()
    path.write_bytes(b"bbbb")
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert path.stat().st_size == before.st_size and path.stat().st_mtime_ns == before.st_mtime_ns
    assert file_sha256(path) == hashlib.sha256(b"bbbb").hexdigest()


def test_hash_cache_writes_a_record_and_serves_it_while_the_file_is_unchanged(tmp_path: Path) -> None:
    import json

    path = tmp_path / "w.bin"
    path.write_bytes(b"weights")
    cache = tmp_path / "hashes"
    expected = hashlib.sha256(b"weights").hexdigest()
    assert file_sha256(path, cache) == expected
    records = list(cache.iterdir())
    assert [p.name for p in records] == [_sha(json.dumps(str(path.resolve())))[:32] + ".json"]
    record = json.loads(records[0].read_text(encoding="utf-8"))
    stat = path.stat()
    assert record == {"path": str(path.resolve()), "size": stat.st_size, "mtime_ns": stat.st_mtime_ns,
                      "inode": stat.st_ino, "ctime_ns": stat.st_ctime_ns, "sha256": expected}  # fmt: skip
    # A fresh process (empty memo) trusts a record whose stat fields match: it does not read the file.
    record["sha256"] = "f" * 64
    records[0].write_text(json.dumps(record), encoding="utf-8")
    fingerprints._MEMO.clear()
    assert file_sha256(path, cache) == "f" * 64
    # A record of another state of the file is not trusted.
    for field, value in (("size", stat.st_size + 1), ("mtime_ns", 1), ("inode", stat.st_ino + 1), ("ctime_ns", 1),
                         ("path", "/elsewhere")):  # fmt: skip
        fingerprints._MEMO.clear()
        records[0].write_text(json.dumps({**record, field: value}), encoding="utf-8")
        assert file_sha256(path, cache) == expected, field
        fingerprints._MEMO.clear()
        assert file_sha256(path, cache) == expected, field  # and the rewritten record holds the real hash


def test_an_unreadable_hash_record_or_cache_is_only_a_rehash(tmp_path: Path) -> None:
    path = tmp_path / "w.bin"
    path.write_bytes(b"weights")
    cache = tmp_path / "hashes"
    file_sha256(path, cache)
    (record,) = cache.iterdir()
    for text in ("not json", "[1, 2]", '{"path": 1}'):
        record.write_text(text, encoding="utf-8")
        fingerprints._MEMO.clear()
        assert file_sha256(path, cache) == hashlib.sha256(b"weights").hexdigest()
    blocked = tmp_path / "blocked"
    blocked.write_text("a file where the cache folder should be")
    fingerprints._MEMO.clear()
    assert file_sha256(path, blocked) == hashlib.sha256(b"weights").hexdigest()


def test_file_fingerprint_is_size_mtime_and_content(tmp_path: Path) -> None:
    path = tmp_path / "w.bin"
    path.write_bytes(b"12345")
    stat = path.stat()
    assert file_fingerprint(path) == {"size": 5, "mtime_ns": stat.st_mtime_ns, "sha256": hashlib.sha256(b"12345").hexdigest()}


# --- weights and listings --------------------------------------------------------------------------------------


def test_weights_fingerprint_of_a_file(tmp_path: Path) -> None:
    path = tmp_path / "model.safetensors"
    path.write_bytes(b"tensor")
    assert weights_fingerprint(path) == {"file": "model.safetensors", "size": 6, "mtime_ns": path.stat().st_mtime_ns,
                                         "sha256": hashlib.sha256(b"tensor").hexdigest()}  # fmt: skip


def test_weights_fingerprint_of_a_folder_covers_every_file_by_content(tmp_path: Path) -> None:
    import json

    folder = tmp_path / "model"
    (folder / "sub").mkdir(parents=True)
    contents = {"config.json": b"{}", "sub/weights.bin": b"w" * 10}
    for name, data in contents.items():
        (folder / name).write_bytes(data)
    (folder / "weights.bin.tmp-12-34").write_bytes(b"an interrupted write")  # not part of the model
    files = {
        name: {"mtime_ns": (folder / name).stat().st_mtime_ns, "sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}
        for name, data in sorted(contents.items())
    }
    text = json.dumps(files, sort_keys=True, separators=(",", ":"))
    assert weights_fingerprint(folder) == {"folder_files": 2, "digest": _sha(text)}
    before = weights_fingerprint(folder)
    (folder / "sub" / "weights.bin").write_bytes(b"v" * 10)  # same size, new content
    assert weights_fingerprint(folder)["digest"] != before["digest"]


def test_weights_fingerprint_of_nothing_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=f"weights {tmp_path / 'none'} do not exist"):
        weights_fingerprint(tmp_path / "none")


def test_local_weights_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "ckpt.pt").write_bytes(b"x")
    assert local_weights_path(None) is None and local_weights_path("") is None
    assert local_weights_path(str(tmp_path / "ckpt.pt")) == tmp_path / "ckpt.pt"
    assert local_weights_path(f"local-dir:{tmp_path}") == tmp_path
    assert local_weights_path("local-dir:") == Path(".")  # the current folder exists
    assert local_weights_path("laion2b_s34b_b79k") is None  # a tag, not a path
    assert local_weights_path("org/" + "x" * 5000) is None  # a hub id longer than a path may be
    monkeypatch.setenv("HOME", str(tmp_path))
    assert local_weights_path("~/ckpt.pt") == tmp_path / "ckpt.pt"


def test_listing_fingerprint_takes_path_size_and_mtime_of_wanted_files(tmp_path: Path) -> None:
    import json

    folder = tmp_path / "images"
    (folder / "nested" / "deeper").mkdir(parents=True)
    for name, data in {"b.jpg": b"bb", "a.PNG": b"a", "nested/deeper/c.jpg": b"ccc", "notes.txt": b"t"}.items():
        (folder / name).write_bytes(data)
    linked = tmp_path / "linked"
    linked.mkdir()
    (linked / "d.jpg").write_bytes(b"dddd")
    (folder / "link").symlink_to(linked, target_is_directory=True)
    (folder / "e.jpg").symlink_to(linked / "d.jpg")  # a linked file counts as the file it points to

    def entries(names: list[str]) -> list[list[object]]:
        return sorted([name, (folder / name).stat().st_size, (folder / name).stat().st_mtime_ns] for name in names)

    everything = ["a.PNG", "b.jpg", "e.jpg", "link/d.jpg", "nested/deeper/c.jpg", "notes.txt"]
    compact = (",", ":")
    assert listing_fingerprint(folder) == {"files": 6, "digest": _sha(json.dumps(entries(everything), separators=compact))}
    images = ["a.PNG", "b.jpg", "e.jpg", "link/d.jpg", "nested/deeper/c.jpg"]
    assert listing_fingerprint(folder, (".jpg", ".png")) == {
        "files": 5,
        "digest": _sha(json.dumps(entries(images), separators=compact)),
    }
    assert listing_fingerprint(folder / "missing") == {"files": 0, "digest": _sha("[]")}


def test_weights_and_file_fingerprints_keep_their_hashes_in_the_hash_cache(tmp_path: Path) -> None:
    import json

    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "a.bin").write_bytes(b"a")
    (folder / "b.json").write_bytes(b"{}")
    single = tmp_path / "ckpt.pt"
    single.write_bytes(b"c")
    for call, paths in (
        (lambda cache: weights_fingerprint(folder, cache), [folder / "a.bin", folder / "b.json"]),
        (lambda cache: weights_fingerprint(single, cache), [single]),
        (lambda cache: file_fingerprint(single, cache), [single]),
    ):
        cache = tmp_path / f"hashes{len(list(tmp_path.iterdir()))}"
        fingerprints._MEMO.clear()  # as in a fresh process: the hash is computed and recorded
        call(cache)
        records = [json.loads(p.read_text(encoding="utf-8")) for p in cache.iterdir()]
        assert sorted(r["path"] for r in records) == sorted(str(p.resolve()) for p in paths)
        assert all(r["sha256"] == hashlib.sha256(Path(r["path"]).read_bytes()).hexdigest() for r in records)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_a_fifo_or_oversized_hash_record_is_a_rehash_not_a_hang(tmp_path: Path) -> None:
    import json

    path = tmp_path / "w.bin"
    path.write_bytes(b"weights")
    expected = hashlib.sha256(b"weights").hexdigest()
    cache = tmp_path / "hashes"
    file_sha256(path, cache)
    (record,) = cache.iterdir()
    stat = path.stat()
    trusted = {"path": str(path.resolve()), "size": stat.st_size, "mtime_ns": stat.st_mtime_ns, "inode": stat.st_ino,
               "ctime_ns": stat.st_ctime_ns, "sha256": "f" * 64}  # fmt: skip
    # Padded past the bound, a record that would otherwise be trusted is not read at all.
    record.write_text(json.dumps(trusted) + " " * fingerprints.MAX_HASH_RECORD_BYTES, encoding="utf-8")
    fingerprints._MEMO.clear()
    assert file_sha256(path, cache) == expected
    record.write_text(json.dumps(trusted) + " " * 100, encoding="utf-8")  # within it: read and trusted
    fingerprints._MEMO.clear()
    assert file_sha256(path, cache) == "f" * 64
    record.unlink()
    os.mkfifo(record)  # no writer: a plain read would wait forever
    fingerprints._MEMO.clear()
    assert file_sha256(path, cache) == expected
    record.unlink()
    record.write_bytes(b"\xff\xfe not utf-8")
    fingerprints._MEMO.clear()
    assert file_sha256(path, cache) == expected
