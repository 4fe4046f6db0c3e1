"""Fast, by-hand tests of the drawn-file cache (outputs.drawn_files, issue 56): the key field by field, hits
and misses, what a kept entry holds, and what is refused as a kept file or a key value.

Each expected key is the sha256 of a JSON text written out here by hand, never computed by the helper.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import numpy as np
import pytest

from clip_cycles import outputs
from clip_cycles.outputs import drawn_files, drawn_files_cache

FILES = {"b.png": b"B", "a.svg": b"A"}


class Drawer:
    """A drawing that counts its calls."""

    def __init__(self, files: dict[str, bytes] = FILES) -> None:
        self.files, self.calls = files, 0

    def __call__(self) -> dict[str, bytes]:
        self.calls += 1
        return dict(self.files)


def _entry(folder: Path, key_text: str) -> Path:
    return folder / hashlib.sha256(key_text.encode("utf-8")).hexdigest()[:32]


def test_the_key_is_the_sorted_json_of_kind_and_inputs_and_the_entry_holds_files_and_manifest(tmp_path: Path) -> None:
    draw = Drawer()
    with drawn_files_cache(tmp_path):
        assert drawn_files("scatter v1", {"b": 1, "a": [1.5, None, "t"]}, draw) == FILES
    entry = _entry(tmp_path, '["scatter v1", {"a": [1.5, null, "t"], "b": 1}]')
    assert sorted(p.name for p in tmp_path.iterdir()) == [entry.name]
    assert sorted(p.name for p in entry.iterdir()) == ["files", "manifest.json"]
    assert {p.name: p.read_bytes() for p in (entry / "files").iterdir()} == FILES
    sha_b, sha_a = hashlib.sha256(b"B").hexdigest(), hashlib.sha256(b"A").hexdigest()
    assert (entry / "manifest.json").read_text() == f'{{"b.png": "{sha_b}", "a.svg": "{sha_a}"}}'  # in the order drawn


def test_each_field_of_the_key_changes_it_and_key_order_does_not(tmp_path: Path) -> None:
    draw = Drawer()
    with drawn_files_cache(tmp_path):
        drawn_files("k", {"a": 2, "b": 1}, draw)
        drawn_files("k", {"b": 1, "a": 2}, draw)  # the same inputs written in another order: a hit
        assert draw.calls == 1
        for kind, inputs in (("k2", {"a": 2, "b": 1}), ("k", {"a": 3, "b": 1}), ("k", {"a": 2}), ("k", {"a": 2, "b": 1.5})):
            drawn_files(kind, inputs, draw)
        assert draw.calls == 5
    assert len(list(tmp_path.iterdir())) == 5


def test_numpy_scalars_and_nan_are_keyed_by_their_values(tmp_path: Path) -> None:
    draw = Drawer()
    with drawn_files_cache(tmp_path):
        drawn_files("k", {"x": np.float64(0.25), "n": np.int64(3)}, draw)
        drawn_files("k", {"x": 0.25, "n": 3}, draw)
        assert draw.calls == 1
        drawn_files("k", {"x": float("nan")}, draw)
        drawn_files("k", {"x": float("nan")}, draw)
        assert draw.calls == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [_entry(tmp_path, '["k", {"n": 3, "x": 0.25}]').name, _entry(tmp_path, '["k", {"x": NaN}]').name]
    )


def test_an_input_without_an_exact_json_form_is_drawn_and_never_kept(tmp_path: Path) -> None:
    draw = Drawer()
    with drawn_files_cache(tmp_path):
        for _ in range(2):
            assert drawn_files("k", {"x": np.array([1.0, 2.0])}, draw) == FILES
            assert drawn_files("k", {"x": {1, 2}}, draw) == FILES
    assert draw.calls == 4 and list(tmp_path.iterdir()) == []


def test_a_kept_entry_is_written_without_syncing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    synced = []
    monkeypatch.setattr(outputs.os, "fsync", lambda fd: synced.append(fd))
    entry = _entry(tmp_path, '["k", 1]')
    stale = entry / "files" / f"b.png.tmp-{os.getpid()}-1"  # a sweep (a durable write) would remove it
    stale.parent.mkdir(parents=True)
    stale.write_bytes(b"s")
    with drawn_files_cache(tmp_path):
        drawn_files("k", 1, Drawer())
    assert synced == [] and stale.exists()


def test_a_manifest_naming_a_path_out_of_its_entry_is_drawn_again(tmp_path: Path) -> None:
    entry = _entry(tmp_path, '["k", 1]')
    (entry / "files").mkdir(parents=True)
    (entry / "evil").write_bytes(b"E")
    (entry / "manifest.json").write_text(json.dumps({"../evil": hashlib.sha256(b"E").hexdigest()}))
    draw = Drawer()
    with drawn_files_cache(tmp_path):
        assert drawn_files("k", 1, draw) == FILES
    assert draw.calls == 1
    assert json.loads((entry / "manifest.json").read_text()) == {n: hashlib.sha256(d).hexdigest() for n, d in FILES.items()}


def test_kept_file_refuses_a_folder_and_a_file_over_the_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "d").mkdir()
    with pytest.raises(ValueError) as caught:
        outputs._kept_file(tmp_path / "d")
    assert str(caught.value) == f"{tmp_path / 'd'}: not a kept file"
    monkeypatch.setattr(outputs, "_KEPT_MAX_BYTES", 4)
    (tmp_path / "four").write_bytes(b"1234")
    (tmp_path / "five").write_bytes(b"12345")
    assert outputs._kept_file(tmp_path / "four") == b"1234"
    with pytest.raises(ValueError, match=r": not a kept file$"):
        outputs._kept_file(tmp_path / "five")


class ShapedWithoutItem:
    shape = ()


class ItemWithoutShape:
    def item(self) -> int:
        return 1


def test_key_value_takes_numpy_scalars_only() -> None:
    value = outputs._key_value(np.float64(0.25))
    assert value == 0.25 and type(value) is float
    value = outputs._key_value(np.int32(7))
    assert value == 7 and type(value) is int
    for bad, name in (
        (np.array([7]), "ndarray"),
        (object(), "object"),
        (ShapedWithoutItem(), "ShapedWithoutItem"),
        (ItemWithoutShape(), "ItemWithoutShape"),
    ):
        with pytest.raises(TypeError) as caught:
            outputs._key_value(bad)
        assert str(caught.value) == f"{name} has no exact JSON form"
