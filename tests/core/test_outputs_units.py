"""Fast unit tests of outputs.py's writers: streams (FIFO, character device, socket, folder), the temporary-file
helpers, the sentences of output_error and check_path_length, plan_outputs, write_outputs' rollback and drawn_files.

Every expected sentence, byte and inode is written out here by hand (never computed by the helper under test).
"""

from __future__ import annotations

import errno
import os
import re
import socket
import stat
import threading
import time
from pathlib import Path

import pytest

from clip_cycles import outputs
from clip_cycles.outputs import (
    DEFAULT_HINT,
    OutputCollision,
    OutputError,
    atomic_write_bytes,
    check_path_length,
    drawn_files,
    drawn_files_cache,
    output_error,
    plan_outputs,
    remove_stale_temporaries,
    write_atomic_raw,
    write_file_set,
    write_output,
    write_outputs,
    write_text_output,
)

#: A pid above Linux's largest pid_max (2**22): never a live process.
DEAD_PID = 99999999


def _tmp_siblings(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if ".tmp-" in p.name)


# --- output_error and its reasons ---------------------------------------------------------------------------------

SENTENCES = {
    errno.ENOSPC: "no space left on the device",
    errno.EDQUOT: "disk quota exceeded",
    errno.EROFS: "the file system is read-only",
    errno.EACCES: "permission denied",
    errno.EPERM: "operation not permitted",
    errno.ENAMETOOLONG: "the path is too long for the file system",
    errno.ELOOP: "the path loops through symbolic links",
    errno.EISDIR: "a folder is in the way",
    errno.ENOTDIR: "a file is in the way where a folder is needed",
}


@pytest.mark.parametrize("code", sorted(SENTENCES))
def test_each_reason_is_its_sentence_with_path_and_hint(code: int) -> None:
    named = output_error(OSError(code, "x"), "/some/file.json", "do this")
    assert isinstance(named, OutputError)
    assert str(named) == f"{SENTENCES[code]} while writing /some/file.json; do this"
    assert named.errno == code
    default = output_error(OSError(code, "x"), Path("a/b"))
    assert str(default) == (
        f"{SENTENCES[code]} while writing a/b; free space there, fix the permissions or choose another path; "
        "any previous output was left as it was"
    )


def test_errors_outside_the_reasons_and_named_ones_come_back_unchanged() -> None:
    for code in (errno.ENOENT, errno.EIO, errno.EBUSY, None):
        error = OSError(code, "boom") if code is not None else OSError("boom")
        assert output_error(error, "p") is error
    already = OutputError("said")
    already.errno = errno.ENOSPC
    assert output_error(already, "p") is already


# --- check_path_length ------------------------------------------------------------------------------------------


def test_a_path_of_4096_bytes_passes_and_4097_is_refused_with_its_sentence() -> None:
    ok = "/" + "/".join(["a" * 200] * 20)
    ok += "/" + "b" * (4096 - len(ok) - 1)
    assert len(ok) == 4096
    assert check_path_length(ok) == Path(ok)
    long = ok + "c"
    with pytest.raises(OutputError) as caught:
        check_path_length(long, "--out")
    short = long[:40] + "..." + long[-30:]
    assert str(caught.value) == (
        f"--out path of 4097 bytes ({short}) is longer than the 4096 the system accepts; choose a shorter path"
    )
    assert caught.value.errno == errno.ENAMETOOLONG
    assert isinstance(caught.value, ValueError)


def test_a_name_of_255_bytes_passes_and_256_is_refused_with_its_sentence() -> None:
    assert check_path_length("x/" + "n" * 255) == Path("x/" + "n" * 255)
    name = "n" * 256
    with pytest.raises(OutputError) as caught:
        check_path_length("x/" + name)
    path_short = ("x/" + name)[:40] + "..." + name[-30:]
    name_short = name[:40] + "..." + name[-30:]
    assert str(caught.value) == (
        f"output {path_short}: the name {name_short} has 256 bytes, more than the 255 a file system accepts for "
        "one name; choose a shorter path"
    )
    assert caught.value.errno == errno.ENAMETOOLONG


def test_names_are_counted_in_bytes_and_short_texts_are_shown_whole() -> None:
    check_path_length("é" * 127)  # 254 bytes
    with pytest.raises(OutputError, match="has 256 bytes"):
        check_path_length("é" * 128)
    # 80 characters are shown whole, 81 are cut to 40 + ... + 30.
    assert outputs._short(b"a" * 80) == "a" * 80
    assert outputs._short(b"a" * 40 + b"b" * 41) == "a" * 40 + "..." + "b" * 30


# --- streams --------------------------------------------------------------------------------------------------


def test_dev_null_is_streamed_into_and_stays_a_character_device() -> None:
    assert write_output("/dev/null", b"gone") == Path("/dev/null")
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)
    assert outputs.is_stream("/dev/null")
    assert not list(Path("/dev").glob("null.tmp-*"))


def test_a_fifo_with_a_reader_gets_every_byte_in_order_and_stays_a_fifo(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    data = bytes(range(256)) * 1200  # 300 KiB: more than a pipe holds, so the writer blocks and loops
    got = bytearray()
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)

    def read_all() -> None:
        os.set_blocking(reader, True)
        deadline = time.monotonic() + 5
        while len(got) < len(data) and time.monotonic() < deadline:
            chunk = os.read(reader, 65536)  # b"" until the writer opens (no writer yet): read again
            if not chunk:
                time.sleep(0.001)
            got.extend(chunk)

    thread = threading.Thread(target=read_all)
    thread.start()
    try:
        write_output(fifo, data)
    finally:
        thread.join(timeout=5)
        os.close(reader)
    assert bytes(got) == data
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    assert outputs.is_stream(fifo)
    assert _tmp_siblings(tmp_path) == []


def test_a_fifo_without_a_reader_is_refused_at_once_and_kept(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(OutputError) as caught:
        write_output(fifo, b"x")
    assert str(caught.value) == f"output {fifo} is a FIFO with no reader; start its reader first or choose a regular file"
    with pytest.raises(OutputError) as caught:
        write_outputs({fifo: b"x"}, what="--samples")
    assert str(caught.value) == f"--samples {fifo} is a FIFO with no reader; start its reader first or choose a regular file"
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)


def test_a_reader_that_goes_away_midway_is_its_own_sentence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    original = os.set_blocking

    def close_reader_first(fd: int, blocking: bool) -> None:
        os.close(reader)
        original(fd, blocking)

    monkeypatch.setattr(os, "set_blocking", close_reader_first)
    with pytest.raises(OutputError) as caught:
        write_outputs({fifo: b"x" * 10}, what="--samples")
    assert str(caught.value) == (f"--samples {fifo}: its reader went away before everything was written; run again with a reader")


def test_a_socket_and_a_folder_are_refused_with_their_sentences(tmp_path: Path) -> None:
    path = tmp_path / "sock"
    server = socket.socket(socket.AF_UNIX)
    try:
        server.bind(os.fspath(path))
        with pytest.raises(OutputError) as caught:
            write_output(path, b"x")
        assert str(caught.value) == f"output {path} is a socket; it is never written nor replaced: choose a regular file"
        with pytest.raises(OutputError) as caught:
            write_outputs({path: b"x"}, what="--detail")
        assert str(caught.value) == f"--detail {path} is a socket; it is never written nor replaced: choose a regular file"
        assert stat.S_ISSOCK(os.stat(path).st_mode)
        assert not outputs.is_stream(path)
    finally:
        server.close()
    folder = tmp_path / "folder"
    folder.mkdir()
    with pytest.raises(OutputError) as caught:
        write_output(folder, b"x")
    assert str(caught.value) == f"output {folder} is a folder; name a file inside it"
    assert not outputs.is_stream(folder)


def test_the_stream_sentences_of_block_devices_and_other_kinds(tmp_path: Path) -> None:
    path = tmp_path / "dev"
    with pytest.raises(OutputError) as caught:
        outputs._stream(path, b"x", "block", "--out")
    assert str(caught.value) == f"--out {path} is a block device; it is never written nor replaced: choose a regular file"
    with pytest.raises(OutputError) as caught:
        outputs._stream(path, b"x", "other", "--out")
    assert str(caught.value) == f"--out {path} is not a regular file; it is never written nor replaced: choose a regular file"
    assert not path.exists()


def test_an_open_refused_by_the_system_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)

    def refuse(*args, **kwargs):
        raise OSError(errno.EACCES, "Permission denied")

    monkeypatch.setattr(outputs.os, "open", refuse)
    with pytest.raises(OutputError) as caught:
        outputs._stream(fifo, b"x", "fifo", "--out")
    assert str(caught.value) == f"permission denied while writing {fifo}; {DEFAULT_HINT}"


def test_a_full_device_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def full(fd: int, data) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(outputs.os, "write", full)
    with pytest.raises(OutputError) as caught:
        write_output("/dev/null", b"x")
    assert str(caught.value) == f"no space left on the device while writing /dev/null; {DEFAULT_HINT}"


def test_special_kind_names_each_kind(tmp_path: Path) -> None:
    (tmp_path / "file").write_bytes(b"")
    os.mkfifo(tmp_path / "fifo")
    assert outputs._special_kind(tmp_path / "file") is None
    assert outputs._special_kind(tmp_path / "missing") is None
    assert outputs._special_kind(tmp_path / "file" / "below") is None  # ENOTDIR: reported when written
    assert outputs._special_kind(tmp_path / "fifo") == "fifo"
    assert outputs._special_kind(Path("/dev/null")) == "char"
    assert outputs._special_kind(tmp_path) == "dir"
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    with pytest.raises(OSError) as caught:
        outputs._special_kind(tmp_path / "loop")
    assert caught.value.errno == errno.ELOOP
    assert outputs.is_stream(tmp_path / "loop") is False
    assert outputs.is_stream(tmp_path / "file") is False
    assert outputs.is_stream(tmp_path / "missing") is False


# --- temporaries --------------------------------------------------------------------------------------------------


def test_remove_stale_temporaries_removes_dead_and_own_leftovers_only(tmp_path: Path) -> None:
    target = tmp_path / "result.json"
    names = {
        f"result.json.tmp-{DEAD_PID}-1": True,  # a dead process's
        f"result.json.tmp-{os.getpid()}-2": True,  # this process's own
        f"result.json.tmp-{os.getppid()}-3": False,  # a live process's
        "result.json.tmp-abc-4": False,  # not a pid
        f"other.json.tmp-{DEAD_PID}-5": False,  # another file's
        f"result.jsonx.tmp-{DEAD_PID}-6": False,
        f"xresult.json.tmp-{DEAD_PID}-7": False,
        f"result.json.tmp{DEAD_PID}-8": False,
    }
    for name in names:
        (tmp_path / name).write_bytes(b"")
    removed = remove_stale_temporaries(target)
    expected = sorted(tmp_path / name for name, gone in names.items() if gone)
    assert sorted(removed) == expected
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(name for name, gone in names.items() if not gone)


def test_remove_stale_temporaries_works_on_a_bare_name_and_a_missing_folder(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    Path(f"r.txt.tmp-{DEAD_PID}-1").write_bytes(b"")
    assert remove_stale_temporaries(Path("r.txt")) == [Path(f"r.txt.tmp-{DEAD_PID}-1")]
    assert list(tmp_path.iterdir()) == []
    assert remove_stale_temporaries(tmp_path / "missing" / "r.txt") == []


def test_a_temporary_that_cannot_be_removed_is_skipped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (f"r.tmp-{DEAD_PID}-1", f"r.tmp-{DEAD_PID}-2"):
        (tmp_path / name).write_bytes(b"")
    real = os.unlink

    def refuse_first(path, *args, **kwargs):
        if os.fspath(path).endswith("-1"):
            raise OSError(errno.EACCES, "no")
        real(path, *args, **kwargs)

    monkeypatch.setattr(outputs.os, "unlink", refuse_first)
    assert remove_stale_temporaries(tmp_path / "r") == [tmp_path / f"r.tmp-{DEAD_PID}-2"]


def test_pid_alive_cases() -> None:
    assert outputs._pid_alive(os.getpid()) is True
    assert outputs._pid_alive(DEAD_PID) is False
    assert outputs._pid_alive(0) is False
    assert outputs._pid_alive(2**80) is False


def test_temporary_name_is_pid_tagged_and_never_longer_than_a_name(tmp_path: Path) -> None:
    short = outputs._temporary_name(tmp_path / "a.json")
    assert short.parent == tmp_path
    assert re.fullmatch(rf"a\.json\.tmp-{os.getpid()}-\d+", short.name)
    assert outputs._temporary_name(tmp_path / "a.json") != short  # a fresh name each time
    long = outputs._temporary_name(tmp_path / ("n" * 255))
    assert len(long.name.encode()) == 255
    suffix = f".tmp-{os.getpid()}-"
    assert re.fullmatch(rf"n+{re.escape(suffix)}\d+", long.name)
    wide = outputs._temporary_name(tmp_path / ("é" * 127))
    assert len(wide.name.encode()) <= 255 and len(wide.name.encode()) >= 254
    assert wide.name.startswith("é")


def test_write_atomic_raw_replaces_the_file_and_never_writes_through_a_link(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "er" / "out.bin"
    write_atomic_raw(path, b"old")
    link = tmp_path / "hard"
    os.link(path, link)
    before = path.stat().st_ino
    (path.parent / f"out.bin.tmp-{DEAD_PID}-1").write_bytes(b"stale")
    write_atomic_raw(path, b"new content")
    assert path.read_bytes() == b"new content"
    assert path.stat().st_ino != before  # a new file renamed over, not the old one rewritten
    assert link.read_bytes() == b"old"
    assert _tmp_siblings(path.parent) == []


def test_write_atomic_raw_without_sweep_leaves_other_temporaries(tmp_path: Path) -> None:
    stale = tmp_path / f"out.bin.tmp-{DEAD_PID}-1"
    stale.write_bytes(b"stale")
    write_atomic_raw(tmp_path / "out.bin", b"x", sweep=False)
    assert stale.exists()
    atomic_write_bytes(tmp_path / "out.bin", b"y", durable=False)  # no sweep either
    assert stale.exists() and (tmp_path / "out.bin").read_bytes() == b"y"
    atomic_write_bytes(tmp_path / "out.bin", b"z")
    assert not stale.exists() and (tmp_path / "out.bin").read_bytes() == b"z"


def test_write_atomic_raw_fsyncs_only_when_durable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    real = os.fsync
    monkeypatch.setattr(outputs.os, "fsync", lambda fd: (calls.append(fd), real(fd))[1])
    write_atomic_raw(tmp_path / "a", b"1", durable=False)
    assert calls == []
    write_atomic_raw(tmp_path / "a", b"2")
    assert len(calls) == 1
    atomic_write_bytes(tmp_path / "a", b"3", durable=False)
    assert len(calls) == 1
    write_output(tmp_path / "a", b"4", durable=False)
    assert len(calls) == 1
    write_text_output(tmp_path / "a", "5")
    assert len(calls) == 2


def test_a_failed_raw_write_raises_the_os_error_and_leaves_no_temporary(tmp_path: Path, monkeypatch) -> None:
    path = tmp_path / "out.bin"
    path.write_bytes(b"old")

    def refuse(src, dst):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(outputs.os, "replace", refuse)
    with pytest.raises(OSError) as caught:
        write_atomic_raw(path, b"new")
    assert type(caught.value) is OSError and caught.value.errno == errno.ENOSPC
    assert path.read_bytes() == b"old"
    assert _tmp_siblings(tmp_path) == []


def test_write_new_file_writes_everything_and_refuses_an_existing_name(tmp_path: Path, monkeypatch) -> None:
    real = os.write
    monkeypatch.setattr(outputs.os, "write", lambda fd, view: real(fd, view[:3]))  # short writes: the loop goes on
    outputs._write_new_file(tmp_path / "f", b"abcdefghij")
    assert (tmp_path / "f").read_bytes() == b"abcdefghij"
    with pytest.raises(FileExistsError):
        outputs._write_new_file(tmp_path / "f", b"x")
    (tmp_path / "link").symlink_to(tmp_path / "nowhere")
    with pytest.raises(OSError):
        outputs._write_new_file(tmp_path / "link", b"x")
    assert not (tmp_path / "nowhere").exists()


def test_write_output_names_unknown_errors_with_what_and_hint(tmp_path: Path, monkeypatch) -> None:
    def broken(src, dst):
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(outputs.os, "replace", broken)
    with pytest.raises(OutputError) as caught:
        write_output(tmp_path / "r.json", b"x", what="--output", hint="try later")
    assert str(caught.value) == f"could not write --output {tmp_path / 'r.json'}: Input/output error; try later"
    with pytest.raises(OutputError) as caught:
        write_text_output(tmp_path / "r.json", "x", what="--samples", hint="h")
    assert str(caught.value) == f"could not write --samples {tmp_path / 'r.json'}: Input/output error; h"

    def full(src, dst):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(outputs.os, "replace", full)
    with pytest.raises(OutputError) as caught:
        write_output(tmp_path / "r.json", b"x", hint="free it")
    assert str(caught.value) == f"no space left on the device while writing {tmp_path / 'r.json'}; free it"
    assert caught.value.errno == errno.ENOSPC


def test_write_output_checks_the_length_first(tmp_path: Path) -> None:
    with pytest.raises(OutputError, match=r"^--x .*has 300 bytes"):
        write_output(tmp_path / ("n" * 300), b"x", what="--x")


def test_write_text_output_is_utf8(tmp_path: Path) -> None:
    assert write_text_output(tmp_path / "t.txt", "é€") == tmp_path / "t.txt"
    assert (tmp_path / "t.txt").read_bytes() == b"\xc3\xa9\xe2\x82\xac"


# --- write_outputs ----------------------------------------------------------------------------------------------


def test_write_outputs_writes_every_file_in_several_folders(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "one").write_bytes(b"old one")
    (tmp_path / "a" / f"one.tmp-{DEAD_PID}-9").write_bytes(b"stale")
    write_outputs({tmp_path / "a" / "one": b"1", tmp_path / "b" / "c" / "two": b"2", "/dev/null": b"3"})
    assert (tmp_path / "a" / "one").read_bytes() == b"1"
    assert (tmp_path / "b" / "c" / "two").read_bytes() == b"2"
    assert _tmp_siblings(tmp_path / "a") == [] and _tmp_siblings(tmp_path / "b" / "c") == []


def test_a_failed_rename_puts_back_the_renamed_files_by_inode(tmp_path: Path, monkeypatch) -> None:
    first, new, third = tmp_path / "first", tmp_path / "new", tmp_path / "third"
    first.write_bytes(b"old first")
    third.write_bytes(b"old third")
    inode = first.stat().st_ino
    real = os.replace

    def fail_on_third(src, dst):
        if Path(dst) == third:
            raise OSError(errno.ENOSPC, "No space left on device")
        real(src, dst)

    monkeypatch.setattr(outputs.os, "replace", fail_on_third)
    with pytest.raises(OutputError) as caught:
        write_outputs({first: b"new first", new: b"brand new", third: b"new third"}, what="--output", hint="fix it")
    assert str(caught.value) == f"no space left on the device while writing {third}; fix it"
    assert first.read_bytes() == b"old first" and first.stat().st_ino == inode
    assert not new.exists()
    assert third.read_bytes() == b"old third"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["first", "third"]


def test_a_failure_before_the_renames_touches_nothing(tmp_path: Path, monkeypatch) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    first.write_bytes(b"old")
    calls = []
    real = outputs._write_new_file

    def full_on_second(path, data, durable=True):
        calls.append(path)
        if len(calls) == 2:
            raise OSError(errno.EIO, "Input/output error")
        real(path, data, durable)

    monkeypatch.setattr(outputs, "_write_new_file", full_on_second)
    with pytest.raises(OutputError) as caught:
        write_outputs({first: b"new", second: b"new"}, what="--samples", hint="h")
    assert str(caught.value) == f"could not write --samples {second}: Input/output error; h"
    assert first.read_bytes() == b"old" and not second.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["first"]


def test_files_that_cannot_be_put_back_are_named(tmp_path: Path, monkeypatch) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    first.write_bytes(b"old")
    real = os.replace
    state = {"renamed": 0}

    def one_rename_then_nothing(src, dst):
        if state["renamed"]:
            raise OSError(errno.EIO, "Input/output error")
        state["renamed"] += 1
        real(src, dst)

    monkeypatch.setattr(outputs.os, "replace", one_rename_then_nothing)
    with pytest.raises(OutputError) as caught:
        write_outputs({first: b"new", second: b"new"}, what="--output")
    assert str(caught.value) == (
        f"could not write --output {second}: Input/output error; the files renamed before the error could not all be "
        f"put back ({first} hold the new content); run again once the cause is fixed"
    )
    assert first.read_bytes() == b"new"
    assert _tmp_siblings(tmp_path) == []  # the kept link is removed too


def test_put_back_undoes_newest_first_and_reports_what_is_left(tmp_path: Path, monkeypatch) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.write_bytes(b"new a")
    b.write_bytes(b"new b")
    keep_a = tmp_path / "keep_a"
    keep_a.write_bytes(b"old a")
    order = []
    real = os.unlink
    monkeypatch.setattr(outputs.os, "unlink", lambda p: (order.append(Path(p)), real(p))[1])
    assert outputs._put_back([a, b], {a: keep_a, b: None}) == []
    assert order == [b]
    assert a.read_bytes() == b"old a" and not b.exists() and not keep_a.exists()
    assert outputs._put_back([tmp_path / "gone"], {}) == [tmp_path / "gone"]


def test_keep_previous_links_a_regular_file_only(tmp_path: Path, monkeypatch) -> None:
    path = tmp_path / "f"
    assert outputs._keep_previous(path) is None
    path.write_bytes(b"old")
    link = outputs._keep_previous(path)
    assert link is not None and link.parent == tmp_path and link.name.startswith("f.tmp-")
    assert link.stat().st_ino == path.stat().st_ino
    (tmp_path / "s").symlink_to(path)
    assert outputs._keep_previous(tmp_path / "s") is None

    def no_links(src, dst):
        raise OSError(errno.EPERM, "no")

    monkeypatch.setattr(outputs.os, "link", no_links)
    copy = outputs._keep_previous(path)
    assert copy is not None and copy.read_bytes() == b"old" and copy.stat().st_ino != path.stat().st_ino


def test_streams_are_written_after_every_rename(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    path = tmp_path / "r.json"
    with pytest.raises(OutputError, match="FIFO with no reader"):
        write_outputs({fifo: b"s", path: b"r"})
    assert path.read_bytes() == b"r"


def test_write_outputs_refuses_a_long_name_before_writing(tmp_path: Path) -> None:
    with pytest.raises(OutputError, match=r"^--o .* has 256 bytes"):
        write_outputs({tmp_path / "ok": b"1", tmp_path / ("n" * 256): b"2"}, what="--o")
    assert list(tmp_path.iterdir()) == []


def test_link_or_copy(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "a").write_bytes(b"x")
    outputs._link_or_copy(os.fspath(tmp_path / "a"), os.fspath(tmp_path / "b"))
    assert (tmp_path / "b").stat().st_ino == (tmp_path / "a").stat().st_ino

    def no_links(src, dst):
        raise OSError(errno.EPERM, "no")

    monkeypatch.setattr(outputs.os, "link", no_links)
    outputs._link_or_copy(os.fspath(tmp_path / "a"), os.fspath(tmp_path / "c"))
    assert (tmp_path / "c").read_bytes() == b"x" and (tmp_path / "c").stat().st_ino != (tmp_path / "a").stat().st_ino


# --- plan_outputs ---------------------------------------------------------------------------------------------


def test_plan_outputs_returns_paths_and_skips_what_was_not_asked(tmp_path: Path) -> None:
    plan = plan_outputs({"--output": tmp_path / "r.json", "--samples": None, "--x": str(tmp_path / "s")}, {"A": None})
    assert plan == {"--output": tmp_path / "r.json", "--x": tmp_path / "s"}
    assert all(type(p) is type(Path()) for p in plan.values())


def test_two_outputs_on_one_file_are_one_sentence(tmp_path: Path) -> None:
    with pytest.raises(OutputCollision) as caught:
        plan_outputs({"--output": tmp_path / "r.json", "--samples": tmp_path / "." / "r.json"})
    assert str(caught.value) == (
        f"--output {tmp_path / 'r.json'} and --samples {tmp_path / 'r.json'} name the same file: one would overwrite "
        "the other; give each its own path"
    )
    (tmp_path / "real").write_bytes(b"")
    os.link(tmp_path / "real", tmp_path / "hard")
    (tmp_path / "soft").symlink_to(tmp_path / "real")
    for other in ("hard", "soft"):
        with pytest.raises(OutputCollision, match="name the same file"):
            plan_outputs({"a": tmp_path / "real", "b": tmp_path / other})
    (tmp_path / "dir").mkdir()
    (tmp_path / "alias").symlink_to(tmp_path / "dir")
    with pytest.raises(OutputCollision, match="name the same file"):
        plan_outputs({"a": tmp_path / "dir" / "new", "b": tmp_path / "alias" / "new"})


def test_an_output_on_an_input_is_one_sentence(tmp_path: Path) -> None:
    (tmp_path / "in.json").write_bytes(b"{}")
    with pytest.raises(OutputCollision) as caught:
        plan_outputs({"--out": tmp_path / "in.json"}, {"A": tmp_path / "in.json", "B": tmp_path / "in.json"})
    assert str(caught.value) == (
        f"--out {tmp_path / 'in.json'} is the input A ({tmp_path / 'in.json'}): an output never replaces what its "
        "command reads; give --out another path"
    )


def test_streams_may_be_shared_and_distinct_files_pass(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    plan = plan_outputs(
        {"a": "/dev/null", "b": "/dev/null", "c": fifo, "d": fifo, "e": tmp_path / "e", "f": tmp_path / "f"},
        {"in": "/dev/null", "in2": fifo, "in3": tmp_path / "g"},
    )
    assert list(plan) == ["a", "b", "c", "d", "e", "f"]


# --- drawn files ----------------------------------------------------------------------------------------------


def test_drawn_files_reuse_a_kept_entry_and_redraw_a_damaged_one(tmp_path: Path) -> None:
    draws = []

    def draw():
        draws.append(1)
        return {"b.png": b"B", "a.svg": b"A"}

    assert drawn_files("k", {"x": 1}, draw) == {"b.png": b"B", "a.svg": b"A"}  # no cache: always drawn
    assert len(draws) == 1
    with drawn_files_cache(tmp_path):
        first = drawn_files("k", {"x": 1}, draw)
        again = drawn_files("k", {"x": 1}, draw)
        assert len(draws) == 2
        assert again == first and list(again) == ["b.png", "a.svg"]
        drawn_files("k", {"x": 2}, draw)
        drawn_files("k2", {"x": 1}, draw)
        assert len(draws) == 4
        entries = [p for p in tmp_path.iterdir() if p.is_dir()]
        assert len(entries) == 3 and all(re.fullmatch(r"[0-9a-f]{32}", p.name) for p in entries)
        for entry in entries:
            (entry / "files" / "b.png").write_bytes(b"damaged")
        assert drawn_files("k", {"x": 1}, draw) == {"b.png": b"B", "a.svg": b"A"}
        assert len(draws) == 5
        assert drawn_files("k", {"x": object()}, draw) == {"b.png": b"B", "a.svg": b"A"}
        assert len(draws) == 6
    drawn_files("k", {"x": 1}, draw)
    assert len(draws) == 7  # outside the block: drawn again


# --- sets: exchange, recovery, write_file_set -------------------------------------------------------------------


def test_exchange_paths_swaps_two_folders_by_inode(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    (a / "f").write_text("A")
    ino_a, ino_b = a.stat().st_ino, b.stat().st_ino
    assert outputs.exchange_paths(a, b) is True
    assert a.stat().st_ino == ino_b and b.stat().st_ino == ino_a
    assert (b / "f").read_text() == "A" and not (a / "f").exists()


def test_exchange_paths_raises_a_missing_path_and_says_false_where_it_cannot(tmp_path: Path) -> None:
    a = tmp_path / "a"
    a.mkdir()
    with pytest.raises(OSError) as caught:
        outputs.exchange_paths(tmp_path / "missing", a)
    assert caught.value.errno == errno.ENOENT and caught.value.filename == os.fspath(tmp_path / "missing")
    (a / "sub").mkdir()
    assert outputs.exchange_paths(a, a / "sub") is False  # EINVAL: a folder into itself
    assert (a / "sub").is_dir()


def test_recover_sets_puts_back_an_old_folder_and_removes_dead_leftovers(tmp_path: Path) -> None:
    target = tmp_path / "site"
    old = tmp_path / f".site.old-{DEAD_PID}"
    old.mkdir()
    (old / "index.html").write_text("old")
    building = tmp_path / f".site.building-{DEAD_PID + 1}"
    building.mkdir()
    own = tmp_path / f".site.building-{os.getpid()}"
    own.write_text("file")
    live = tmp_path / f".site.building-{os.getppid()}"
    live.mkdir()
    odd = tmp_path / ".site.building-x1"
    odd.mkdir()
    touched = outputs.recover_sets(target)
    assert touched == [old, building, own]
    assert (target / "index.html").read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["site", live.name, odd.name])


def test_recover_sets_removes_an_old_folder_when_the_target_is_there(tmp_path: Path) -> None:
    target = tmp_path / "site"
    target.mkdir()
    (target / "new").write_text("new")
    old = tmp_path / f".site.old-{DEAD_PID}"
    old.mkdir()
    link = tmp_path / f".site.building-{DEAD_PID}"
    link.symlink_to(target)
    assert outputs.recover_sets(target) == [old, link]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["site"]
    assert (target / "new").read_text() == "new"
    assert outputs.recover_sets(tmp_path / "missing" / "site") == []


def test_recover_sets_finishes_a_set_written_inside_and_drops_one_without_manifest(tmp_path: Path) -> None:
    target = tmp_path / "out"
    target.mkdir()
    (target / "a.txt").write_text("old a")
    (target / "stay.txt").write_text("stay")
    moving = target / f".out.moving-{DEAD_PID}"
    (moving / "sub").mkdir(parents=True)
    (moving / "a.txt").write_text("new a")
    (moving / "sub" / "b.txt").write_text("new b")
    manifest = target / f".out.manifest-{DEAD_PID}.json"
    manifest.write_text('{"files": ["a.txt", "sub/b.txt"], "remove_others": false}')
    orphan = target / f".out.building-{DEAD_PID + 1}"
    orphan.mkdir()
    (orphan / "a.txt").write_text("never")
    touched = outputs.recover_sets(target)
    assert sorted(touched) == sorted([orphan, manifest, moving])  # the moving folder went with the finished set
    assert not moving.exists() and not manifest.exists()
    assert (target / "a.txt").read_text() == "new a" and (target / "sub" / "b.txt").read_text() == "new b"
    assert (target / "stay.txt").read_text() == "stay"
    assert sorted(p.name for p in target.iterdir()) == ["a.txt", "stay.txt", "sub"]


def test_write_file_set_swaps_in_a_new_folder_keeping_or_dropping_others(tmp_path: Path) -> None:
    folder = tmp_path / "set"
    written = write_file_set(folder, {"a.json": b"1", "d/b.md": b"2"})
    assert written == folder
    (folder / "other.txt").write_text("other")
    os.link(folder / "a.json", tmp_path / "hard")
    before = folder.stat().st_ino
    write_file_set(folder, {"a.json": b"new"})
    assert folder.stat().st_ino != before  # swapped, not written into
    assert (folder / "a.json").read_bytes() == b"new" and (tmp_path / "hard").read_bytes() == b"1"
    assert (folder / "d" / "b.md").read_bytes() == b"2" and (folder / "other.txt").read_text() == "other"
    write_file_set(folder, {"only": b"x"}, keep_others=False)
    assert sorted(p.name for p in folder.iterdir()) == ["only"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hard", "set"]


def test_write_file_set_sentences(tmp_path: Path) -> None:
    for name in ("/abs", "../up", "a/../../b", ""):
        with pytest.raises(ValueError) as caught:
            write_file_set(tmp_path / "s", {name: b"x"}, what="--out")
        assert (
            str(caught.value)
            == f"--out {tmp_path / 's'}: file name {name!r} would land outside the folder; refusing to write any"
        )
    (tmp_path / "file").write_text("f")
    with pytest.raises(OutputError) as caught:
        write_file_set(tmp_path / "file", {"a": b"x"}, what="--out")
    assert str(caught.value) == f"--out {tmp_path / 'file'} is an existing file, not a folder; choose a folder (new or existing)"
    assert (tmp_path / "file").read_text() == "f"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]


def test_write_file_set_errors_keep_the_old_set(tmp_path: Path, monkeypatch) -> None:
    folder = tmp_path / "set"
    write_file_set(folder, {"a": b"old"})

    def full(path, data, durable=True):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(outputs, "_write_new_file", full)
    with pytest.raises(OutputError) as caught:
        write_file_set(folder, {"a": b"new"}, what="--out", hint="h")
    assert str(caught.value) == f"no space left on the device while writing {folder}; h"
    assert (folder / "a").read_bytes() == b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["set"]


def test_a_folder_that_will_not_move_is_written_inside(tmp_path: Path, monkeypatch, caplog) -> None:
    folder = tmp_path / "set"
    write_file_set(folder, {"a": b"old", "gone": b"g"})
    before = folder.stat().st_ino

    def busy(staging, target):
        raise OSError(errno.EBUSY, "Device or resource busy")

    monkeypatch.setattr(outputs, "replace_folder", busy)
    with caplog.at_level("INFO", logger="clip_cycles.outputs"):
        assert write_file_set(folder, {"a": b"new", "n/b": b"b"}, keep_others=False) == folder
    assert folder.stat().st_ino == before
    assert (folder / "a").read_bytes() == b"new" and (folder / "n" / "b").read_bytes() == b"b"
    assert sorted(p.name for p in folder.iterdir()) == ["a", "n"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["set"]
    assert f"output {folder} cannot be swapped whole (nothing could be staged beside it: Device or resource busy)" in caplog.text


def test_write_file_set_makes_parents_returns_the_absolute_target_and_follows_a_link(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert write_file_set("x/y/set", {"a": b"1"}) == tmp_path / "x" / "y" / "set"
    assert (tmp_path / "x" / "y" / "set" / "a").read_bytes() == b"1"
    (tmp_path / "link").symlink_to(tmp_path / "x" / "y" / "set")
    assert write_file_set("link", {"b": b"2"}) == tmp_path / "x" / "y" / "set"
    assert (tmp_path / "link").is_symlink() and (tmp_path / "link" / "b").read_bytes() == b"2"
    assert (tmp_path / "link" / "a").read_bytes() == b"1"


def test_kept_files_are_linked_and_kept_links_stay_links(tmp_path: Path) -> None:
    folder = tmp_path / "set"
    write_file_set(folder, {"keep": b"k", "sub/f": b"f"})
    (folder / "ln").symlink_to("keep")
    inode = (folder / "keep").stat().st_ino
    write_file_set(folder, {"new": b"n"})
    assert (folder / "keep").stat().st_ino == inode  # linked into the new folder, not copied
    assert (folder / "ln").is_symlink() and os.readlink(folder / "ln") == "keep"
    assert (folder / "sub" / "f").read_bytes() == b"f" and (folder / "new").read_bytes() == b"n"


@pytest.mark.parametrize(("code", "reason"), [(errno.EACCES, "permission denied"), (errno.EBUSY, "Device or resource busy")])
def test_a_refused_staging_beside_writes_inside_with_the_reason(
    code: int, reason: str, tmp_path: Path, monkeypatch, caplog
) -> None:
    folder = tmp_path / "set"
    write_file_set(folder, {"a": b"old", "other": b"o"})
    before = folder.stat().st_ino

    def refuse(staging, target):
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(outputs, "replace_folder", refuse)
    with caplog.at_level("INFO", logger="clip_cycles.outputs"):
        write_file_set(folder, {"a": b"new"}, what="--out")
    assert folder.stat().st_ino == before
    assert sorted(p.name for p in folder.iterdir()) == ["a", "other"]  # keep_others: the other file stays
    assert (folder / "a").read_bytes() == b"new"
    assert f"--out {folder} cannot be swapped whole (nothing could be staged beside it: {reason})" in caplog.text


def test_a_new_folder_refused_with_ebusy_is_a_sentence(tmp_path: Path, monkeypatch) -> None:
    def refuse(staging, target):
        raise OSError(errno.EBUSY, "Device or resource busy")

    monkeypatch.setattr(outputs, "replace_folder", refuse)
    with pytest.raises(OutputError) as caught:
        write_file_set(tmp_path / "new", {"a": b"x"}, what="--out", hint="h")
    assert str(caught.value) == f"could not write --out {tmp_path / 'new'}: Device or resource busy; h"
    assert list(tmp_path.iterdir()) == []


def test_write_file_set_refuses_a_long_name_naming_what(tmp_path: Path) -> None:
    with pytest.raises(OutputError, match=r"^--page .* has 256 bytes"):
        write_file_set(tmp_path / "s", {"n" * 256: b"x"}, what="--page")
    with pytest.raises(OutputError, match=r"^--page .* has 256 bytes"):
        write_file_set(tmp_path / ("s" * 256), {"a": b"x"}, what="--page")
    assert list(tmp_path.iterdir()) == []


def test_pid_one_is_alive_and_new_files_get_the_usual_mode(tmp_path: Path) -> None:
    assert outputs._pid_alive(1) is True
    umask = os.umask(0o022)
    os.umask(umask)
    write_atomic_raw(tmp_path / "f", b"x")
    assert stat.S_IMODE((tmp_path / "f").stat().st_mode) == 0o666 & ~umask


def test_exchange_errors_carry_the_system_s_words(tmp_path: Path) -> None:
    with pytest.raises(OSError) as caught:
        outputs.exchange_paths(tmp_path / "missing", tmp_path)
    assert caught.value.strerror == os.strerror(errno.ENOENT)


def test_write_output_names_itself_output_by_default(tmp_path: Path, monkeypatch) -> None:
    def broken(src, dst):
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(outputs.os, "replace", broken)
    with pytest.raises(OutputError) as caught:
        write_output(tmp_path / "r", b"x", hint="h")
    assert str(caught.value) == f"could not write output {tmp_path / 'r'}: Input/output error; h"


def test_a_stream_failing_after_the_renames_is_a_sentence_and_keeps_the_new_files(tmp_path: Path, monkeypatch) -> None:
    real = os.write

    def device_broken(fd: int, data) -> int:
        if os.readlink(f"/proc/self/fd/{fd}") == "/dev/null":
            raise OSError(errno.EIO, "Input/output error")
        return real(fd, data)

    monkeypatch.setattr(outputs.os, "write", device_broken)
    with pytest.raises(OutputError) as caught:
        write_outputs({"/dev/null": b"s", tmp_path / "r": b"new"}, what="--x", hint="h")
    # The sentence names the stream that failed and says the regular file was written (never "left as it was").
    assert str(caught.value) == (
        f"could not write --x /dev/null: Input/output error; {tmp_path / 'r'} hold the new content; "
        "/dev/null did not receive it all: write it again"
    )
    assert (tmp_path / "r").read_bytes() == b"new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r"]


def test_a_staging_folder_inside_the_working_folder_replaces_every_file(tmp_path: Path, monkeypatch, caplog) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "old.txt").write_text("old")
    monkeypatch.chdir(work)
    staging = outputs.staging_folder(work)
    assert staging.parent == work
    (staging / "d" / "e").mkdir(parents=True)
    (staging / "d" / "e" / "new.txt").write_text("new")
    with caplog.at_level("INFO", logger="clip_cycles.outputs"):
        outputs.replace_folder(staging, work)
    assert sorted(p.relative_to(work).as_posix() for p in work.rglob("*")) == ["d", "d/e", "d/e/new.txt"]
    assert f"output folder {work} cannot be swapped whole (it is the working folder or holds it)" in caplog.text


def test_a_set_in_the_working_folder_says_why_and_nests_names(tmp_path: Path, monkeypatch, caplog) -> None:
    monkeypatch.chdir(tmp_path)
    with caplog.at_level("INFO", logger="clip_cycles.outputs"):
        write_file_set(".", {"a/b/c.txt": b"c"}, what="--out")
    assert (tmp_path / "a" / "b" / "c.txt").read_bytes() == b"c"
    assert f"--out {tmp_path} cannot be swapped whole (it is the working folder or holds it)" in caplog.text
    write_file_set(tmp_path / "s", {"x/y/z": b"z"})
    write_file_set(tmp_path / "s", {"p/q/r": b"r"})
    assert (tmp_path / "s" / "p" / "q" / "r").read_bytes() == b"r" and (tmp_path / "s" / "x" / "y" / "z").read_bytes() == b"z"


def test_defaults_name_the_output_output(tmp_path: Path, monkeypatch) -> None:
    def broken(src, dst):
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(outputs.os, "replace", broken)
    for write in (lambda: write_outputs({tmp_path / "r": b"x"}), lambda: write_text_output(tmp_path / "r", "x")):
        with pytest.raises(OutputError) as caught:
            write()
        assert str(caught.value) == f"could not write output {tmp_path / 'r'}: Input/output error; {DEFAULT_HINT}"


def test_a_set_under_a_file_is_a_sentence(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("f")
    with pytest.raises(OutputError) as caught:
        write_file_set(tmp_path / "file" / "set", {"a": b"x"}, what="--out", hint="h")
    assert str(caught.value).startswith(f"could not write --out {tmp_path / 'file' / 'set'}: ")
    assert str(caught.value).endswith("; h")
    assert (tmp_path / "file").read_text() == "f"


def test_a_linked_folder_in_a_set_stays_a_link(tmp_path: Path) -> None:
    folder = tmp_path / "set"
    write_file_set(folder, {"sub/f": b"f"})
    (folder / "dl").symlink_to("sub")
    write_file_set(folder, {"g": b"g"})
    assert (folder / "dl").is_symlink() and os.readlink(folder / "dl") == "sub"
