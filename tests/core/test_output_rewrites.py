"""write_outputs leaves a file that already holds its new bytes alone, and rewrites every other (issue 52)."""

from __future__ import annotations

import os
from pathlib import Path

from clip_cycles.outputs import write_outputs


def _identity(path: Path) -> tuple[int, int]:
    info = os.lstat(path)
    return info.st_ino, info.st_mtime_ns


def test_an_identical_file_is_not_rewritten_and_a_changed_one_is(tmp_path: Path) -> None:
    same, changed, longer, shorter = (tmp_path / f"{n}.json" for n in ("same", "changed", "longer", "shorter"))
    same.write_bytes(b'{"a": 1}')
    changed.write_bytes(b'{"a": 1}')
    longer.write_bytes(b'{"a": 1}')
    shorter.write_bytes(b'{"a": 1}xyz')
    os.utime(same, ns=(1_000_000_000, 1_000_000_000))  # an old mtime: a rewrite would move it
    before = {p: _identity(p) for p in (same, changed, longer, shorter)}
    write_outputs({same: b'{"a": 1}', changed: b'{"a": 2}', longer: b'{"a": 1}\n', shorter: b'{"a": 1}'})
    assert _identity(same) == before[same] and same.read_bytes() == b'{"a": 1}'
    for path, content in ((changed, b'{"a": 2}'), (longer, b'{"a": 1}\n'), (shorter, b'{"a": 1}')):
        assert path.read_bytes() == content
        assert _identity(path)[0] != before[path][0]  # a new file renamed into place
    assert sorted(p.name for p in tmp_path.iterdir()) == ["changed.json", "longer.json", "same.json", "shorter.json"]


def test_a_link_holding_the_same_bytes_is_still_replaced_by_a_file_of_its_own(tmp_path: Path) -> None:
    target = tmp_path / "users_file.json"
    target.write_bytes(b"payload")
    symbolic, hard = tmp_path / "sym.json", tmp_path / "hard.json"
    symbolic.symlink_to(target)
    os.link(target, hard)
    write_outputs({symbolic: b"payload", hard: b"payload"})
    assert not symbolic.is_symlink() and symbolic.read_bytes() == b"payload"
    assert os.lstat(hard).st_ino != os.lstat(target).st_ino and hard.read_bytes() == b"payload"
    assert target.read_bytes() == b"payload" and os.lstat(target).st_nlink == 1  # the other file keeps its content


def test_a_missing_file_is_written(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "new.json"
    write_outputs({path: b"x"})
    assert path.read_bytes() == b"x"
