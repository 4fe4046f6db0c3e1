"""The output policy's folder side and its named errors: staging beside a target, the swap, stale leftovers.

Moved here from ``test_fingerprints.py`` with the functions (``clip_cycles.outputs`` holds them now),
plus the writers that use them: a task's cached build (``tasks/loading``) is swapped in, never
deleted first.
"""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from clip_cycles import outputs
from clip_cycles.outputs import (
    OutputError,
    atomic_write_bytes,
    output_error,
    remove_stale_staging,
    replace_folder,
    set_target,
    staging_folder,
)


def _dead_pid() -> int:
    """The pid of a child that has exited and been reaped (no process has it now, barring reuse)."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


# --- named errors and atomic writes  ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("code", "words"),
    [
        (errno.ENOSPC, "no space left on the device"),
        (errno.EDQUOT, "disk quota exceeded"),
        (errno.EROFS, "the file system is read-only"),
        (errno.EACCES, "permission denied"),
    ],
)
def test_output_error_names_the_cause_the_path_and_what_to_do(code: int, words: str, tmp_path: Path) -> None:
    error = output_error(OSError(code, os.strerror(code)), tmp_path / "shard", "free space under --cache-dir")
    assert isinstance(error, OutputError) and isinstance(error, ValueError)
    assert error.errno == code
    assert str(error) == f"{words} while writing {tmp_path / 'shard'}; free space under --cache-dir"


def test_other_errors_and_named_errors_pass_through(tmp_path: Path) -> None:
    other = OSError(errno.EIO, "i/o error")
    assert output_error(other, tmp_path, "hint") is other
    named = OutputError("already named")
    named.errno = errno.ENOSPC
    assert output_error(named, tmp_path, "hint") is named


def test_atomic_write_makes_parents_and_leaves_no_temporary(tmp_path: Path) -> None:
    target = tmp_path / "a" / "b" / "file.bin"
    atomic_write_bytes(target, b"first")
    atomic_write_bytes(target, b"second")
    assert target.read_bytes() == b"second"
    assert sorted(p.name for p in target.parent.iterdir()) == ["file.bin"]


def test_a_failed_replace_removes_the_temporary_and_keeps_the_old_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "file.bin"
    target.write_bytes(b"old")

    def refuse(src: object, dst: object) -> None:
        raise OSError(errno.ENOSPC, "full")

    monkeypatch.setattr(outputs.os, "replace", refuse)
    with pytest.raises(OSError):
        atomic_write_bytes(target, b"new")
    assert target.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["file.bin"]


# --- folders a builder fills: staged beside the target, swapped in ------------------------------------------------


def test_set_target_follows_a_symlinked_out(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link").symlink_to(real, target_is_directory=True)
    assert set_target(tmp_path / "link") == real.resolve()
    assert set_target(tmp_path / "plain") == tmp_path / "plain"
    # A folder that is not a link stays as given: relative, or under a linked parent.
    assert set_target(Path("relative/out")) == Path("relative/out")
    assert set_target(tmp_path / "link" / "inner") == tmp_path / "link" / "inner"
    assert set_target(real) == real


def test_pid_alive(monkeypatch: pytest.MonkeyPatch) -> None:
    assert outputs._pid_alive(os.getpid())
    assert not outputs._pid_alive(_dead_pid())
    assert not outputs._pid_alive(2**80)  # beyond a pid_t

    def not_yours(pid: int, signal: int) -> None:
        raise PermissionError(errno.EPERM, "not permitted")

    monkeypatch.setattr(outputs.os, "kill", not_yours)
    assert outputs._pid_alive(1)


def test_remove_stale_staging_removes_only_the_leftovers_of_gone_processes(tmp_path: Path) -> None:
    dead, other_dead, live, own = _dead_pid(), _dead_pid(), os.getppid(), os.getpid()
    for name in (f".out.building-{dead}", f".out.building-{live}", f".out.building-{own}", f".out.old-{dead}",
                 ".out.building-notapid", ".out.building-"):  # fmt: skip
        (tmp_path / name).mkdir()
    (tmp_path / f".out.building-{dead}" / "part.parquet").write_bytes(b"x")
    (tmp_path / f".out.old-{other_dead}").write_bytes(b"a stray file")
    removed = remove_stale_staging(tmp_path, (".out.building-", ".out.old-"))
    # Per prefix, in name order: the dead process's and this process's own staging, then both old ones.
    building = sorted([tmp_path / f".out.building-{dead}", tmp_path / f".out.building-{own}"])
    old = sorted([tmp_path / f".out.old-{dead}", tmp_path / f".out.old-{other_dead}"])
    assert removed == building + old
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [f".out.building-{live}", ".out.building-notapid", ".out.building-"]
    )
    assert remove_stale_staging(tmp_path / "missing", (".out.building-",)) == []


def test_remove_stale_staging_unlinks_a_symlink_without_following_it(tmp_path: Path) -> None:
    target = tmp_path / "keep"
    target.mkdir()
    (target / "data").write_bytes(b"kept")
    parent = tmp_path / "parent"
    parent.mkdir()
    link = parent / f".out.building-{_dead_pid()}"
    link.symlink_to(target, target_is_directory=True)
    assert remove_stale_staging(parent, (".out.building-",)) == [link]
    assert not link.is_symlink() and (target / "data").read_bytes() == b"kept"


def test_staging_folder_is_fresh_and_beside_the_target(tmp_path: Path) -> None:
    target = tmp_path / "out"
    stale = tmp_path / f".out.building-{_dead_pid()}"
    stale.mkdir()
    stale_old = tmp_path / f".out.old-{_dead_pid()}"
    stale_old.mkdir()
    own = tmp_path / f".out.building-{os.getpid()}"
    staging = staging_folder(target)
    assert staging == own and staging.is_dir() and list(staging.iterdir()) == []
    # The old folder of a build killed between its two renames comes back as the (missing) target.
    assert not stale.exists() and not stale_old.exists() and target.is_dir()
    stale_old.mkdir()
    staging_folder(target)
    assert not stale_old.exists() and target.is_dir()  # with the target there, a stale old folder is removed
    (staging / "half.parquet").write_bytes(b"half")
    again = staging_folder(target)
    assert again == own and list(again.iterdir()) == []


def test_staging_folder_empties_its_own_folder_when_the_cleanup_left_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "out"
    own = tmp_path / f".out.building-{os.getpid()}"
    own.mkdir()
    (own / "half.parquet").write_bytes(b"half")
    monkeypatch.setattr(outputs, "recover_sets", lambda target: [])
    assert staging_folder(target) == own and list(own.iterdir()) == []


def test_replace_folder_moves_staging_into_place(tmp_path: Path) -> None:
    target = tmp_path / "out"
    first = tmp_path / "first"
    first.mkdir()
    (first / "v").write_text("1")
    replace_folder(first, target)
    assert (target / "v").read_text() == "1" and not first.exists()
    second = tmp_path / "second"
    second.mkdir()
    (second / "v").write_text("2")
    leftover = tmp_path / f".out.old-{os.getpid()}"
    leftover.mkdir()
    (leftover / "stale").write_text("old")
    replace_folder(second, target)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]
    assert [p.name for p in target.iterdir()] == ["v"] and (target / "v").read_text() == "2"


def test_pid_alive_only_probes_with_signal_zero(monkeypatch: pytest.MonkeyPatch) -> None:
    sent: list[tuple[int, int]] = []
    monkeypatch.setattr(outputs.os, "kill", lambda pid, signal: sent.append((pid, signal)))
    assert outputs._pid_alive(4242)
    assert sent == [(4242, 0)]  # any other signal would act on another user's live build


def test_staging_folder_makes_the_missing_parents_of_a_new_out(tmp_path: Path) -> None:
    target = tmp_path / "new" / "deeper" / "out"
    staging = staging_folder(target)
    assert staging == tmp_path / "new" / "deeper" / f".out.building-{os.getpid()}" and staging.is_dir()


def test_atomic_writes_fsync_by_default_and_skip_it_only_when_asked(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Results and records are durable unless the caller says the file is checksummed (``durable=False``)."""
    synced: list[int] = []
    real_fsync = outputs.os.fsync
    monkeypatch.setattr(outputs.os, "fsync", lambda fd: (synced.append(fd), real_fsync(fd)))
    atomic_write_bytes(tmp_path / "a.json", b"{}")
    assert len(synced) >= 1 and (tmp_path / "a.json").read_bytes() == b"{}"
    count = len(synced)
    atomic_write_bytes(tmp_path / "b.json", b"[]", durable=False)
    assert len(synced) == count and (tmp_path / "b.json").read_bytes() == b"[]"


def test_replace_folder_puts_the_old_folder_back_when_the_second_rename_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "out"
    target.mkdir()
    (target / "v").write_text("old")
    staging = tmp_path / ".out.building-1"
    staging.mkdir()
    (staging / "v").write_text("new")
    real_replace = os.replace

    def refuse_the_new_folder(src: object, dst: object) -> None:
        if Path(os.fspath(src)) == staging:
            raise OSError(errno.ENOSPC, "planted")
        real_replace(src, dst)

    monkeypatch.setattr(outputs, "exchange_paths", lambda a, b: False)  # a system without an atomic exchange
    monkeypatch.setattr(outputs.os, "replace", refuse_the_new_folder)
    with pytest.raises(OSError, match="planted"):
        replace_folder(staging, target)
    assert (target / "v").read_text() == "old" and (staging / "v").read_text() == "new"
    assert sorted(p.name for p in tmp_path.iterdir()) == [".out.building-1", "out"]


# --- a task's cached build (tasks/loading): built beside the cached folder, then swapped in -------------------

TASK = "cycles/shapes_strict_left_right"


def _listing(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _cached_build(shapes_world: Path, cache: Path) -> Path:
    from clip_cycles.tasks.loading import resolve_dataset_roots
    from clip_cycles.tasks.registry import get_task

    return resolve_dataset_roots([get_task(TASK)], shapes_world, cache)[TASK].root


def test_a_rebuilt_task_folder_is_swapped_in_and_never_missing(
    shapes_world: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import shutil

    from clip_cycles.settings import MIN_CYCLES_ENV

    cache = tmp_path / "datasets"
    monkeypatch.delenv(MIN_CYCLES_ENV, raising=False)
    target = _cached_build(shapes_world, cache)
    present: list[bool] = []

    def watched(step):
        def call(*args, **kwargs):
            try:
                return step(*args, **kwargs)
            finally:
                present.append((target / "build_info.json").is_file())

        return call

    # Every removal and rename of the rebuild is followed by a look at the cached folder.
    monkeypatch.setattr(shutil, "rmtree", watched(shutil.rmtree))
    monkeypatch.setattr(os, "replace", watched(os.replace))
    monkeypatch.setenv(MIN_CYCLES_ENV, "5")  # another minimum-cycle rule: the cached build is rebuilt
    rebuilt = _cached_build(shapes_world, cache)
    assert rebuilt == target
    assert present and all(present)
    assert '"min_cycles": 5' in (target / "build_info.json").read_text()
    assert [p.name for p in cache.iterdir() if p.name.startswith(".") or ".building-" in p.name] == []


@pytest.mark.parametrize("where", ["exchange", "second rename"])
def test_a_crash_at_the_swap_of_a_task_folder_leaves_the_old_folder_whole(
    where: str, shapes_world: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from clip_cycles.settings import MIN_CYCLES_ENV

    cache = tmp_path / "datasets"
    monkeypatch.delenv(MIN_CYCLES_ENV, raising=False)
    target = _cached_build(shapes_world, cache)
    before = _listing(target)
    real_replace = os.replace

    def crash(*args: object) -> bool:
        raise OSError(errno.EIO, "planted crash")

    def crash_into_target(src: object, dst: object) -> None:
        if Path(os.fspath(dst)) == target and ".building-" in Path(os.fspath(src)).name:
            raise OSError(errno.EIO, "planted crash")
        real_replace(src, dst)

    if where == "exchange":
        monkeypatch.setattr(outputs, "exchange_paths", crash)
    else:  # no atomic exchange: the old folder is renamed aside, and the new one's rename fails
        monkeypatch.setattr(outputs, "exchange_paths", lambda a, b: False)
        monkeypatch.setattr(os, "replace", crash_into_target)
    monkeypatch.setenv(MIN_CYCLES_ENV, "5")
    with pytest.raises(OSError, match="planted crash"):
        _cached_build(shapes_world, cache)
    assert _listing(target) == before
    assert [p.name for p in cache.iterdir() if p.name.startswith(".") or ".building-" in p.name] == []


def test_a_staged_folder_is_named_by_its_target(tmp_path: Path) -> None:
    from clip_cycles.outputs import staged_name, staging_folder

    staging = staging_folder(tmp_path / "shapes-coco-0123")
    assert staging.name.startswith(".shapes-coco-0123.building-")  # the form the pattern must undo
    assert staged_name(staging) == "shapes-coco-0123"
    assert staged_name(tmp_path / "my_cycles") == "my_cycles"
    # Only the exact staging form: a user's folder that merely looks alike keeps its name.
    for name in (".x.building-12a", "x.building-12", ".x.building-", "..building-3"):
        assert staged_name(tmp_path / name) == name


def test_a_build_staged_by_any_process_writes_the_same_card(shapes_world: Path, tmp_path: Path, monkeypatch) -> None:
    """A cached task build is written into ``.<name>.building-<pid>`` and swapped in: its card and
    build_info.json name the folder it becomes, so two processes write the same bytes."""
    import os

    from clip_cycles.data.folder.build import build_coco_folder
    from clip_cycles.outputs import replace_folder, staging_folder

    written = {}
    for pid in (1111, 2222):
        monkeypatch.setattr(os, "getpid", lambda pid=pid: pid)
        target = tmp_path / str(pid) / "shapes-coco-0123"
        staging = staging_folder(target)
        build_coco_folder(shapes_world, staging, families=["coarse_object"], seeds=[0], min_cycles=5)
        replace_folder(staging, target)
        card = (target / "README.md").read_text(encoding="utf-8")
        info = json.loads((target / "build_info.json").read_text(encoding="utf-8"))
        assert "building-" not in card and info["folder_name"] == "shapes-coco-0123"
        assert 'datasets.load_dataset("shapes-coco-0123", "coarse_object", split="test")' in card
        written[pid] = (card, info["folder_name"])
    assert written[1111] == written[2222]
