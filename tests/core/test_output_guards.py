"""The folder swap never reaches the working folder or one above it: such a set is written file by file in place,
the folder keeps its identity (inode), and the process's working folder survives."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from clip_cycles.outputs import write_file_set


def _tree(tmp_path: Path) -> tuple[Path, Path]:
    top = tmp_path / "top"
    work = top / "mid" / "work"
    work.mkdir(parents=True)
    (top / "keep.txt").write_text("kept")
    return top, work


@pytest.mark.parametrize("spelling", [".", "..", "../..", "../../", "./sub/..", "{work}", "{top}", "../../../top/mid"])
def test_a_set_at_or_above_the_working_folder_is_written_in_place(spelling: str, tmp_path: Path, monkeypatch) -> None:
    top, work = _tree(tmp_path)
    monkeypatch.chdir(work)
    folder = spelling.format(work=work, top=top)
    target = Path(os.path.abspath(folder))
    before = target.stat().st_ino
    written = write_file_set(folder, {"result.json": b"{}", "nested/page.html": b"<p>"})
    assert written == target
    assert target.stat().st_ino == before  # not swapped: the same folder, written into
    assert Path(os.getcwd()) == work and work.is_dir()  # the working folder is still there
    assert (target / "result.json").read_bytes() == b"{}" and (target / "nested" / "page.html").read_bytes() == b"<p>"
    assert (top / "keep.txt").read_text() == "kept"
    leftovers = [p for p in tmp_path.rglob(".*") if ".building-" in p.name or ".old-" in p.name]
    assert leftovers == []


def test_a_symlink_to_a_folder_above_is_followed_and_not_swapped(tmp_path: Path, monkeypatch) -> None:
    top, work = _tree(tmp_path)
    link = tmp_path / "link"
    link.symlink_to(top, target_is_directory=True)
    monkeypatch.chdir(work)
    before = top.stat().st_ino
    write_file_set(link, {"a.txt": b"x"})
    assert top.stat().st_ino == before and link.is_symlink() and (top / "a.txt").read_bytes() == b"x"
    assert Path(os.getcwd()) == work


def test_a_folder_beside_or_below_the_working_folder_is_swapped_in(tmp_path: Path, monkeypatch) -> None:
    top, work = _tree(tmp_path)
    for folder in (work / "out", top / "mid" / "sibling"):
        folder.mkdir()
        (folder / "old.txt").write_text("old")
        monkeypatch.chdir(work)
        before = folder.stat().st_ino
        write_file_set(folder, {"new.txt": b"new"})
        assert folder.stat().st_ino != before  # one swap: a new folder took its place
        assert (folder / "old.txt").read_text() == "old" and (folder / "new.txt").read_bytes() == b"new"
