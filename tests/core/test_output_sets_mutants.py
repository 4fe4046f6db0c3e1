"""Fast, by-hand tests of outputs.py's set writers and the helpers under them (issue 56).

A set written beside its folder (swapped in) or inside it (a manifest, then one rename per file), a crash
at each rename followed by the next write's recovery, the recovery of every leftover kind by name, the
staging names, the refused targets with their sentences, and the flags each open uses. Every expected
name, sentence, byte and listing is written out here by hand (never computed by the helper under test).
Nothing here writes to a device: streams are FIFOs made in tmp_path, and their writer is replaced.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import pathlib
import stat
from pathlib import Path

import pytest

from clip_cycles import outputs
from clip_cycles.outputs import DEFAULT_HINT, OutputError, write_file_set, write_outputs

#: A pid above Linux's largest pid_max (2**22): never a live process.
DEAD_PID = 99999999
EIO_WORDS = "Input/output error"
#: INSIDE_GUARANTEE, written out by hand: the note a set written inside its folder logs.
GUARANTEE = (
    "every file was staged in full inside it first, then moved into place one by one: each file is whole, "
    "a reader during the moves may see old and new files together, and a run killed midway is finished by the "
    "next write of this folder"
)


def _tree(folder: Path) -> dict[str, object]:
    """Every entry under ``folder`` (without following links): bytes for a file, ``("link", to)``, ``"dir"``."""
    found: dict[str, object] = {}
    for path in sorted(folder.rglob("*")):
        key = path.relative_to(folder).as_posix()
        if path.is_symlink():
            found[key] = ("link", os.readlink(path))
        elif path.is_dir():
            found[key] = "dir"
        else:
            found[key] = path.read_bytes()
    return found


def _fill(folder: Path, files: dict[str, bytes]) -> None:
    for name, data in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(data)


def _eio(*_args, **_kwargs):
    raise OSError(errno.EIO, EIO_WORDS)


def _fail_replace_at(monkeypatch: pytest.MonkeyPatch, k: int) -> list[tuple[str, str]]:
    """Make the k-th ``os.replace`` from now raise EIO (a crash at that rename); returns the calls seen."""
    real = os.replace
    calls: list[tuple[str, str]] = []

    def replace(src, dst, *args, **kwargs):
        calls.append((os.fspath(src), os.fspath(dst)))
        if len(calls) == k:
            raise OSError(errno.EIO, EIO_WORDS)
        return real(src, dst, *args, **kwargs)

    monkeypatch.setattr(outputs.os, "replace", replace)
    return calls


# --- a crash at each rename, then the next write's recovery: the old set or the new one, whole -------------------

OLD = {"a.txt": b"old a", "gone.txt": b"old gone", "d/b.txt": b"old b"}
NEW = {"a.txt": b"new a", "d/b.txt": b"new b", "e/c.txt": b"new c"}


def _as_tree(files: dict[str, bytes]) -> dict[str, object]:
    tree: dict[str, object] = {}
    for name, data in files.items():
        parts = name.split("/")
        for depth in range(1, len(parts)):
            tree["/".join(parts[:depth])] = "dir"
        tree[name] = data
    return dict(sorted(tree.items()))


@pytest.mark.parametrize("keep_others", [False, True], ids=["replace", "keep-others"])
@pytest.mark.parametrize("inside", [False, True], ids=["beside", "inside"])
def test_a_crash_at_every_rename_leaves_the_old_or_the_new_set_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, inside: bool, keep_others: bool
) -> None:
    new_set = {**OLD, **NEW} if keep_others else NEW
    for k in range(1, 30):
        root = tmp_path / str(k)
        folder = root / "set"
        folder.mkdir(parents=True)
        _fill(folder, OLD)
        if inside:
            monkeypatch.chdir(folder)  # the working folder is never swapped: written inside
        else:
            monkeypatch.setattr(outputs, "exchange_paths", lambda a, b: False)  # the two-rename swap
        calls = _fail_replace_at(monkeypatch, k)
        try:
            write_file_set(folder, NEW, keep_others=keep_others, what="--out")
        except OutputError as error:
            assert str(error).startswith(f"could not write --out {folder}: {EIO_WORDS}; ")
            crashed = True
        else:
            crashed = False
        monkeypatch.undo()
        outputs.recover_sets(folder)  # what the next write does first
        tree = _tree(folder)
        assert tree in (_as_tree(OLD), _as_tree(new_set)), (k, calls, tree)
        assert sorted(p.name for p in root.iterdir()) == ["set"]
        if not crashed:
            assert tree == _as_tree(new_set)
            assert len(calls) < k
            break
    else:
        pytest.fail("the write never finished")
    # Inside: the staging rename and the manifest come before the moves; beside: the swap's two renames.
    assert k == (len(NEW) + 3 if inside else 3)


def test_the_inside_set_crashed_after_its_manifest_is_finished_and_before_it_is_dropped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "set"
    folder.mkdir()
    _fill(folder, OLD)
    monkeypatch.chdir(folder)
    outcomes = {}
    for k in (1, 2, 3):
        _fill(folder, OLD)
        _fail_replace_at(monkeypatch, k)
        with pytest.raises(OutputError):
            write_file_set(folder, NEW, keep_others=False)
        monkeypatch.undo()
        monkeypatch.chdir(folder)
        outputs.recover_sets(folder)
        outcomes[k] = _tree(folder)
    assert outcomes[1] == _as_tree(OLD)  # the staging folder's rename: nothing of the folder touched
    assert outcomes[2] == _as_tree(OLD)  # the manifest's rename: no manifest, the set is dropped
    assert outcomes[3] == _as_tree(NEW)  # the first move: the manifest exists, the recovery finishes it


# --- _commit_inside ------------------------------------------------------------------------------------------------


def _staged(target: Path, files: dict[str, bytes]) -> Path:
    staging = target / f".{target.name}.building-{os.getpid()}"
    staging.mkdir()
    _fill(staging, files)
    return staging


def test_commit_inside_moves_every_file_removes_the_others_and_logs_the_guarantee(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    target = tmp_path / "out"
    target.mkdir()
    _fill(target, {"a": b"old", "x": b"other"})
    stale = target / f".out.moving-{os.getpid()}"  # left by this pid before: emptied, never in the way
    _fill(stale, {"junk": b"j"})
    staging = _staged(target, {"a": b"new", "s/b": b"b"})
    with caplog.at_level(logging.INFO, logger="clip_cycles.outputs"):
        outputs._commit_inside(target, staging, True, "a reason", "--x")
    assert _tree(target) == {"a": b"new", "s": "dir", "s/b": b"b"}
    assert [r.getMessage() for r in caplog.records] == [f"--x {target} cannot be swapped whole (a reason): {GUARANTEE}"]


def test_commit_inside_keeps_the_others_when_asked(tmp_path: Path) -> None:
    target = tmp_path / "out"
    target.mkdir()
    _fill(target, {"a": b"old", "x": b"other"})
    outputs._commit_inside(target, _staged(target, {"a": b"new"}), False, "r", "--x")
    assert _tree(target) == {"a": b"new", "x": b"other"}


def test_a_commit_failing_before_its_manifest_leaves_the_folder_and_no_leftover(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "out"
    target.mkdir()
    _fill(target, {"a": b"old"})
    staging = _staged(target, {"a": b"new"})
    monkeypatch.setattr(outputs, "write_atomic_raw", _eio)
    with pytest.raises(OutputError) as caught:
        outputs._commit_inside(target, staging, True, "r", "--x")
    assert str(caught.value) == f"could not write --x {target}: {EIO_WORDS}; {DEFAULT_HINT}"
    assert caught.value.errno == errno.EIO
    assert _tree(target) == {"a": b"old"}


def test_a_commit_failing_while_moving_names_the_waiting_folder_and_the_next_write_finishes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "out"
    target.mkdir()
    _fill(target, {"a": b"old", "x": b"other"})
    staging = _staged(target, {"a": b"new", "s/b": b"b", "s/c": b"c"})
    (staging / "ln").symlink_to("a")
    seen = {}

    def broken_move(target_, moving, manifest):
        seen["manifest"] = manifest.read_bytes()
        seen["moving"] = moving
        raise OSError(errno.EIO, EIO_WORDS)

    monkeypatch.setattr(outputs, "_move_in", broken_move)
    with pytest.raises(OutputError) as caught:
        outputs._commit_inside(target, staging, True, "it is a mount point", "--x")
    moving = target / f".out.moving-{os.getpid()}"
    assert seen["moving"] == moving
    assert seen["manifest"] == b'{"files": ["a", "ln", "s/b", "s/c"], "remove_others": true}'
    assert str(caught.value) == (
        f"could not write --x {target}: {EIO_WORDS}; {target} cannot be swapped whole (it is a mount point), so its "
        f"staged files are moved in one by one and that stopped midway: some files are new, the rest wait in {moving}; "
        "the next write of this folder moves them in"
    )
    assert caught.value.errno == errno.EIO
    monkeypatch.undo()
    outputs.recover_sets(target)
    assert _tree(target) == {"a": b"new", "ln": ("link", "a"), "s": "dir", "s/b": b"b", "s/c": b"c"}


# --- _move_in, _remove_others, _staged_files, _safe_name ------------------------------------------------------------


def _manifest(path: Path, plan: object) -> Path:
    path.write_text(json.dumps(plan))
    return path


def test_move_in_skips_moved_files_replaces_a_folder_and_a_link_and_ignores_unsafe_names(tmp_path: Path) -> None:
    target, moving = tmp_path / "out", tmp_path / "moving"
    target.mkdir()
    _fill(target, {"a": b"moved before the kill", "d/old": b"o", "real/f": b"f", "keep": b"k"})
    (target / "ln").symlink_to("real")
    _fill(moving, {"b": b"new b", "d": b"new d", "ln": b"new ln", "sub/e": b"new e"})
    (tmp_path / "evil").write_bytes(b"outside")
    names = ["a", "b", "d", "ln", "sub/e", "../evil", "/abs", "", 5]
    manifest = _manifest(tmp_path / "m.json", {"files": names, "remove_others": False})
    outputs._move_in(target, moving, manifest)
    assert _tree(target) == {
        "a": b"moved before the kill",
        "b": b"new b",
        "d": b"new d",
        "keep": b"k",
        "ln": b"new ln",
        "real": "dir",
        "real/f": b"f",
        "sub": "dir",
        "sub/e": b"new e",
    }
    assert not moving.exists() and not manifest.exists()
    assert (tmp_path / "evil").read_bytes() == b"outside"


def test_move_in_refuses_a_manifest_that_is_not_an_object_and_finishes_an_empty_one(tmp_path: Path) -> None:
    target, moving = tmp_path / "out", tmp_path / "moving"
    target.mkdir()
    listed = _manifest(tmp_path / "list.json", ["a"])
    with pytest.raises(ValueError) as caught:
        outputs._move_in(target, moving, listed)
    assert str(caught.value) == f"{listed} is not a manifest"
    moving.mkdir()
    bare = _manifest(tmp_path / "bare.json", {"remove_others": False})
    outputs._move_in(target, moving, bare)
    assert not moving.exists() and not bare.exists()
    # Killed after the moving folder went and before the manifest did: running it again just ends it.
    late = _manifest(tmp_path / "late.json", {"files": ["a"], "remove_others": False})
    outputs._move_in(target, tmp_path / "gone", late)
    assert not late.exists() and list(target.iterdir()) == []


def test_remove_others_keeps_the_set_its_own_entries_and_lost_found_and_prunes_empty_folders(tmp_path: Path) -> None:
    target = tmp_path / "out"
    target.mkdir()
    _fill(
        target,
        {
            "keep.txt": b"k",
            "drop.txt": b"d",
            "sub/keep2": b"k2",
            "sub/drop2": b"d2",
            "deep/a/b/c.txt": b"c",
            "lost+found/x": b"x",
            ".out.building-123/f": b"staged",
            ".out.manifest-1.json": b"{}",
            ".other.building-5": b"not ours",
        },
    )
    (target / ".out.moving-7").mkdir()  # another set's (empty) moving folder: never pruned
    (target / "linkdir").symlink_to("sub")
    (target / "sub" / "inner").symlink_to("../deep")
    outputs._remove_others(target, {"keep.txt", "sub/keep2"})
    assert _tree(target) == {
        ".out.building-123": "dir",
        ".out.building-123/f": b"staged",
        ".out.manifest-1.json": b"{}",
        ".out.moving-7": "dir",
        "keep.txt": b"k",
        "lost+found": "dir",
        "lost+found/x": b"x",
        "sub": "dir",
        "sub/keep2": b"k2",
    }


def test_remove_others_never_prunes_an_empty_lost_found(tmp_path: Path) -> None:
    target = tmp_path / "out"
    (target / "lost+found").mkdir(parents=True)
    (target / "empty" / "er").mkdir(parents=True)
    outputs._remove_others(target, set())
    assert _tree(target) == {"lost+found": "dir"}


def test_staged_files_lists_files_and_linked_folders_at_every_depth(tmp_path: Path) -> None:
    staging = tmp_path / "s"
    _fill(staging, {"a": b"a", "d/b": b"b", "e/f": b"f"})
    (staging / "d" / "dl").symlink_to("../e")
    (staging / "top").symlink_to("e")
    (staging / "fl").symlink_to("a")
    assert outputs._staged_files(staging) == ["a", "d/b", "d/dl", "e/f", "fl", "top"]


@pytest.mark.parametrize(
    ("name", "safe"),
    [("a", True), ("a/b.txt", True), ("..x", True), ("", False), ("/abs", False), ("../x", False), ("a/../b", False), (5, False)],
)
def test_safe_name(name: object, safe: bool) -> None:
    assert outputs._safe_name(name) is safe


# --- names: staging, moving, manifest, own entries ---------------------------------------------------------------


def test_inside_names_and_own_entries_by_hand() -> None:
    assert outputs._inside_names(Path("/x/out"), 42) == (
        Path("/x/out/.out.building-42"),
        Path("/x/out/.out.moving-42"),
        Path("/x/out/.out.manifest-42.json"),
    )
    assert outputs._inside_names(Path("/"), 7) == (
        Path("/.root.building-7"),
        Path("/.root.moving-7"),
        Path("/.root.manifest-7.json"),
    )
    for name in (".out.building-1", ".out.moving-2", ".out.manifest-3.json"):
        assert outputs._own_entry(name, Path("/x/out")) is True
    for name in (".out.x", ".out.tmp-1", ".other.building-1", "out.building-1", ".outer.building-1", "a"):
        assert outputs._own_entry(name, Path("/x/out")) is False
    assert outputs._own_entry(".root.moving-1", Path("/")) is True
    assert outputs._own_entry(".ROOT.moving-1", Path("/")) is False


# --- recovery of what dead processes left ---------------------------------------------------------------------------


def test_recover_inside_handles_each_leftover_by_its_name(tmp_path: Path) -> None:
    target = tmp_path / "out"
    target.mkdir()
    me, live = os.getpid(), os.getppid()
    names = {
        "stranger": ".aaa",
        "odd_pid": ".out.building-0x",
        "live": f".out.building-{live}",
        "dead_tmp": f".out.manifest-{DEAD_PID}.json.tmp-{DEAD_PID}-5",
        "dead_tmp_dashes": f".out.manifest-{DEAD_PID - 9}.json.tmp-{DEAD_PID - 9}-5-6",
        "own_tmp": f".out.manifest-{DEAD_PID - 1}.json.tmp-{me}-5",
        "live_tmp": f".out.manifest-{DEAD_PID - 2}.json.tmp-{live}-5",
        "odd_tmp": f".out.manifest-{DEAD_PID - 3}.json.tmp-x-5",
        "look_alike": f".out.manifest-{DEAD_PID - 4}",
        "dead_moving": f".out.moving-{DEAD_PID - 5}",
        "own_staging": f".out.building-{me}",
    }
    for key, name in names.items():
        if key in ("odd_pid", "live", "look_alike", "dead_moving", "own_staging"):
            _fill(target / name, {"f": b"f"})
        else:
            (target / name).write_bytes(b"t")
    touched = outputs._recover_inside(target)
    gone = ("dead_tmp", "dead_tmp_dashes", "own_tmp", "dead_moving", "own_staging")
    assert sorted(touched) == sorted(target / names[key] for key in gone)
    assert sorted(p.name for p in target.iterdir()) == sorted(names[key] for key in names if key not in gone)


@pytest.mark.parametrize("name", ["a.tmp-b", "my-out"])
def test_recover_inside_reads_the_pid_after_the_last_separator(tmp_path: Path, name: str) -> None:
    target = tmp_path / name
    target.mkdir()
    tmp = target / f".{name}.manifest-{DEAD_PID}.json.tmp-{DEAD_PID}-5"
    tmp.write_bytes(b"t")
    touched = outputs._recover_inside(target)
    assert touched == [tmp] and list(target.iterdir()) == []
    if "tmp" not in name:
        moving = target / f".{name}.moving-{DEAD_PID}"
        _fill(moving, {"f": b"f"})
        assert outputs._recover_inside(target) == [moving] and list(target.iterdir()) == []


def test_a_manifest_over_the_size_limit_is_dropped_and_one_at_it_is_finished(tmp_path: Path, monkeypatch) -> None:
    target = tmp_path / "out"
    target.mkdir()
    text = b'{"files": ["a"], "remove_others": false}'
    for limit, finished in ((len(text), True), (len(text) - 1, False)):
        monkeypatch.setattr(outputs, "_MAX_MANIFEST_BYTES", limit)
        _fill(target, {"a": b"old", f".out.moving-{DEAD_PID}/a": b"new"})
        manifest = target / f".out.manifest-{DEAD_PID}.json"
        manifest.write_bytes(text)
        moving = target / f".out.moving-{DEAD_PID}"  # listed before the manifest went: named as handled too
        assert outputs._recover_inside(target) == [manifest, moving]
        assert _tree(target) == {"a": b"new" if finished else b"old"}


def test_a_broken_manifest_is_dropped_with_its_moving_folder_or_without_one(tmp_path: Path) -> None:
    target = tmp_path / "out"
    target.mkdir()
    _fill(target, {"a": b"old", f".out.moving-{DEAD_PID}/a": b"new"})
    manifest = target / f".out.manifest-{DEAD_PID}.json"
    manifest.write_bytes(b"not json")
    assert outputs._recover_inside(target) == [manifest, target / f".out.moving-{DEAD_PID}"]
    assert _tree(target) == {"a": b"old"}
    manifest.write_bytes(b"[1]")  # no moving folder left
    assert outputs._recover_inside(target) == [manifest]
    assert _tree(target) == {"a": b"old"}


def test_recover_sets_goes_past_a_name_it_skips_and_never_looks_through_a_link(tmp_path: Path) -> None:
    target = tmp_path / "site"
    skipped = tmp_path / ".site.building-0x"
    dead = tmp_path / f".site.building-{DEAD_PID}"
    skipped.mkdir()
    dead.mkdir()
    assert outputs.recover_sets(target) == [dead]
    assert sorted(p.name for p in tmp_path.iterdir()) == [".site.building-0x"]
    real = tmp_path / "real"
    _fill(real, {f".site.building-{DEAD_PID}/f": b"f"})
    target.symlink_to("real")
    assert outputs.recover_sets(target) == []
    assert _tree(real) == {f".site.building-{DEAD_PID}": "dir", f".site.building-{DEAD_PID}/f": b"f"}


def test_remove_stale_temporaries_reads_the_pid_before_the_first_dash(tmp_path: Path) -> None:
    path = tmp_path / "f.json"
    stale = tmp_path / f"f.json.tmp-{DEAD_PID}-1-2"
    stale.write_bytes(b"s")
    assert outputs.remove_stale_temporaries(path) == [stale]


# --- staging_folder, replace_folder, set_target, unswappable_reason ---------------------------------------------


def _refuse_mkdir_beside(monkeypatch: pytest.MonkeyPatch, target: Path, code: int) -> None:
    real = pathlib.Path.mkdir
    beside = target.parent / f".{target.name}.building-{os.getpid()}"

    def mkdir(self, *args, **kwargs):
        if self == beside:
            raise OSError(code, os.strerror(code))
        return real(self, *args, **kwargs)

    monkeypatch.setattr(pathlib.Path, "mkdir", mkdir)


def test_staging_folder_falls_back_inside_a_folder_when_nothing_can_be_made_beside_it(tmp_path: Path, monkeypatch) -> None:
    target = tmp_path / "out"
    target.mkdir()
    _refuse_mkdir_beside(monkeypatch, target, errno.EACCES)
    staging = outputs.staging_folder(target)
    assert staging == target / f".out.building-{os.getpid()}"
    assert staging.is_dir() and list(staging.iterdir()) == []


@pytest.mark.parametrize(
    ("code", "exists", "sentence"),
    [
        (errno.EACCES, False, "permission denied while writing {t}; " + DEFAULT_HINT),
        (errno.ENOSPC, True, "no space left on the device while writing {t}; " + DEFAULT_HINT),
        (errno.EIO, True, f"could not write output folder {{t}}: {EIO_WORDS}; " + DEFAULT_HINT),
    ],
)
def test_staging_folder_refusals_are_sentences(tmp_path: Path, monkeypatch, code: int, exists: bool, sentence: str) -> None:
    target = tmp_path / "out"
    if exists:
        target.mkdir()
    _refuse_mkdir_beside(monkeypatch, target, code)
    with pytest.raises(OutputError) as caught:
        outputs.staging_folder(target)
    assert str(caught.value) == sentence.format(t=target)
    assert caught.value.errno == code
    assert [p.name for p in tmp_path.iterdir()] == (["out"] if exists else [])
    if exists:
        assert list(target.iterdir()) == []


@pytest.mark.parametrize(
    ("how", "words"), [("exchange", "Device or resource busy"), ("rename", "Invalid cross-device link")], ids=["ebusy", "exdev"]
)
@pytest.mark.parametrize("stale", [False, True], ids=["fresh", "stale-inside"])
def test_a_folder_that_will_not_move_gets_its_files_moved_in(
    tmp_path: Path, monkeypatch, caplog, how: str, words: str, stale: bool
) -> None:
    target, staging = tmp_path / "out", tmp_path / f".out.building-{os.getpid()}"
    _fill(target, {"a": b"old", "gone": b"g", "d/x": b"x"})
    if stale:
        _fill(target / f".out.building-{os.getpid()}", {"junk": b"j"})
    _fill(staging, {"a": b"new", "sub/c": b"c"})
    (staging / "ln").symlink_to("a")
    inode = target.stat().st_ino
    if how == "exchange":

        def busy(a, b):
            raise OSError(errno.EBUSY, words)

        monkeypatch.setattr(outputs, "exchange_paths", busy)
    else:
        real = os.replace

        def cross(src, dst):
            if Path(src) == target:
                raise OSError(errno.EXDEV, words)
            return real(src, dst)

        monkeypatch.setattr(outputs, "exchange_paths", lambda a, b: False)
        monkeypatch.setattr(outputs.os, "replace", cross)
    with caplog.at_level(logging.INFO, logger="clip_cycles.outputs"):
        outputs.replace_folder(staging, target)
    assert target.stat().st_ino == inode
    assert _tree(target) == {"a": b"new", "ln": ("link", "a"), "sub": "dir", "sub/c": b"c"}
    assert [p.name for p in tmp_path.iterdir()] == ["out"]
    message = f"output folder {target} cannot be swapped whole (it could not be renamed: {words}): {GUARANTEE}"
    assert [r.getMessage() for r in caplog.records] == [message]


def test_a_staging_folder_made_inside_a_swappable_folder_says_it_could_not_be_renamed(tmp_path: Path, caplog) -> None:
    target = tmp_path / "out"
    _fill(target, {"a": b"old"})
    staging = _staged(target, {"b": b"new"})
    with caplog.at_level(logging.INFO, logger="clip_cycles.outputs"):
        outputs.replace_folder(staging, target)
    assert _tree(target) == {"b": b"new"}
    assert [r.getMessage() for r in caplog.records] == [
        f"output folder {target} cannot be swapped whole (it could not be renamed): {GUARANTEE}"
    ]


def test_a_swap_whose_undo_fails_says_where_the_old_folder_is_and_the_next_write_puts_it_back(
    tmp_path: Path, monkeypatch
) -> None:
    folder = tmp_path / "set"
    _fill(folder, {"a": b"old"})
    old = tmp_path / f".set.old-{os.getpid()}"
    real = os.replace

    def second_and_undo_fail(src, dst):
        if Path(dst) == folder:
            code = errno.EIO if Path(src) != old else errno.EACCES
            raise OSError(code, os.strerror(code))
        return real(src, dst)

    monkeypatch.setattr(outputs, "exchange_paths", lambda a, b: False)
    monkeypatch.setattr(outputs.os, "replace", second_and_undo_fail)
    with pytest.raises(OutputError) as caught:
        write_file_set(folder, {"a": b"new"}, what="--out")
    assert str(caught.value) == (
        f"could not move the new {folder} into place, nor the previous one back (Permission denied); "
        f"the previous folder is {old}, and the next write to {folder} puts it back"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == [old.name]  # the staging folder is gone
    monkeypatch.undo()
    assert outputs.recover_sets(folder) == [old]
    assert _tree(folder) == {"a": b"old"}


def test_set_target_names_what_on_a_long_path_and_an_unreadable_one(tmp_path: Path, monkeypatch) -> None:
    long = tmp_path / ("n" * 256)
    with pytest.raises(OutputError, match=r"^--out .* has 256 bytes"):
        outputs.set_target(long)
    with pytest.raises(OutputError, match=r"^--page .* has 256 bytes"):
        outputs.set_target(long, "--page")
    monkeypatch.setattr(pathlib.Path, "is_symlink", _eio)
    for call in (lambda: outputs.set_target(tmp_path / "s", "--page"), lambda: write_file_set(tmp_path / "s", {}, what="--page")):
        with pytest.raises(OutputError) as caught:
            call()
        assert str(caught.value) == f"could not write --page {tmp_path / 's'}: {EIO_WORDS}; {DEFAULT_HINT}"
        assert caught.value.errno == errno.EIO


def test_unswappable_reasons_by_hand(tmp_path: Path, monkeypatch) -> None:
    folder = tmp_path / "f"
    folder.mkdir()
    (tmp_path / "file").write_bytes(b"x")
    assert outputs.unswappable_reason("/") == "it is the root folder"
    assert outputs.unswappable_reason(folder) is None
    assert outputs.unswappable_reason(tmp_path / "file") is None
    assert outputs.unswappable_reason(tmp_path / "missing") is None
    modes = []

    def access(path, mode):
        modes.append(mode)
        return mode != os.W_OK | os.X_OK  # the parent may be read, never written

    monkeypatch.setattr(outputs.os, "access", access)
    assert outputs.unswappable_reason(folder) == "its parent folder is not writable"
    assert modes == [os.W_OK | os.X_OK]
    monkeypatch.setattr(outputs.os.path, "ismount", lambda path: Path(path) == folder)
    assert outputs.unswappable_reason(folder) == "it is a mount point"
    monkeypatch.chdir(folder)
    assert outputs.unswappable_reason(tmp_path) == "it is the working folder or holds it"


# --- write_file_set's sentences on the inside path ---------------------------------------------------------------


def test_the_inside_writer_stages_under_its_own_name_and_says_the_caller_s_hint(tmp_path: Path, monkeypatch) -> None:
    folder = tmp_path / "set"
    _fill(folder, {"a": b"old"})
    monkeypatch.chdir(folder)
    written = []
    real = outputs._write_new_file

    def record(path, data, durable=True):
        written.append(Path(path))
        real(path, data, durable)

    monkeypatch.setattr(outputs, "_write_new_file", record)
    write_file_set(folder, {"b": b"new"})
    pid = os.getpid()
    assert written[0] == folder / f".set.building-{pid}" / "b" and len(written) == 2
    assert written[1].parent == folder and written[1].name.startswith(f".set.manifest-{pid}.json.tmp-{pid}-")
    monkeypatch.setattr(outputs, "_write_new_file", _eio)
    with pytest.raises(OutputError) as caught:
        write_file_set(folder, {"b": b"newer"}, what="--x", hint="h")
    assert str(caught.value) == f"could not write --x {folder}: {EIO_WORDS}; h"
    assert caught.value.errno == errno.EIO
    monkeypatch.setattr(outputs, "recover_sets", _eio)  # before the staging folder exists
    with pytest.raises(OutputError) as caught:
        write_file_set(folder, {"b": b"newer"}, what="--x", hint="h")
    assert str(caught.value) == f"could not write --x {folder}: {EIO_WORDS}; h"
    assert _tree(folder) == {"a": b"old", "b": b"new"}


def test_a_fallback_inside_names_an_error_without_words_by_its_number(tmp_path: Path, monkeypatch, caplog) -> None:
    folder = tmp_path / "set"
    _fill(folder, {"a": b"old"})

    def refuse(staging, target):
        raise OSError(errno.EBUSY, "")

    monkeypatch.setattr(outputs, "replace_folder", refuse)
    with caplog.at_level(logging.INFO, logger="clip_cycles.outputs"):
        write_file_set(folder, {"a": b"new"}, what="--x")
    assert _tree(folder) == {"a": b"new"}
    reason = f"[Errno {errno.EBUSY}] "  # str() of an OSError with a number and no words
    assert [r.getMessage() for r in caplog.records] == [
        f"--x {folder} cannot be swapped whole (nothing could be staged beside it: {reason}): {GUARANTEE}"
    ]


def test_a_set_that_falls_back_inside_keeps_the_caller_s_hint(tmp_path: Path, monkeypatch) -> None:
    folder = tmp_path / "set"
    _fill(folder, {"a": b"old"})

    def refuse(staging, target):
        raise OSError(errno.EACCES, "Permission denied")

    calls = []
    real = outputs._write_new_file

    def second_fails(path, data, durable=True):
        calls.append(path)
        if len(calls) == 2:  # the first is beside the folder, the second inside it
            raise OSError(errno.EIO, EIO_WORDS)
        real(path, data, durable)

    monkeypatch.setattr(outputs, "replace_folder", refuse)
    monkeypatch.setattr(outputs, "_write_new_file", second_fails)
    with pytest.raises(OutputError) as caught:
        write_file_set(folder, {"a": b"new"}, what="--x", hint="h")
    assert str(caught.value) == f"could not write --x {folder}: {EIO_WORDS}; h"
    assert [Path(p).parent.name for p in calls] == [".set.building-" + str(os.getpid())] * 2
    assert Path(calls[0]).parent.parent == tmp_path and Path(calls[1]).parent.parent == folder
    assert _tree(folder) == {"a": b"old"} and [p.name for p in tmp_path.iterdir()] == ["set"]


# --- the helpers under every writer: flags, reads, identities, kinds -------------------------------------------


def _record_open(monkeypatch: pytest.MonkeyPatch, fail: int | None = None) -> list[tuple[str, int]]:
    real = os.open
    opened: list[tuple[str, int]] = []

    def fake_open(path, flags, *args):
        opened.append((os.fspath(path), flags))
        if fail is not None:
            raise OSError(fail, os.strerror(fail))
        return real(path, flags, *args)

    monkeypatch.setattr(outputs.os, "open", fake_open)
    return opened


def test_new_files_are_opened_exclusive_without_following_links_and_synced_by_default(tmp_path: Path, monkeypatch) -> None:
    opened = _record_open(monkeypatch)
    synced = []
    real_fsync = os.fsync
    monkeypatch.setattr(outputs.os, "fsync", lambda fd: (synced.append(fd), real_fsync(fd))[1])
    outputs._write_new_file(tmp_path / "f", b"data")
    assert opened == [(os.fspath(tmp_path / "f"), os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW)]
    assert len(synced) == 1 and (tmp_path / "f").read_bytes() == b"data"


@pytest.mark.parametrize(("kind", "extra"), [("char", 0), ("fifo", os.O_NONBLOCK)])
def test_a_stream_is_opened_write_only_never_as_a_terminal(tmp_path: Path, monkeypatch, kind: str, extra: int) -> None:
    opened = _record_open(monkeypatch, fail=errno.ENOSPC)
    path = tmp_path / "s"
    with pytest.raises(OutputError) as caught:
        outputs._stream(path, b"x", kind, "--x")
    assert str(caught.value) == f"no space left on the device while writing {path}; {DEFAULT_HINT}"
    assert opened == [(os.fspath(path), os.O_WRONLY | os.O_NOCTTY | extra)]


def test_holds_already_reads_without_following_links_one_byte_past_the_size(tmp_path: Path, monkeypatch) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"abcde")
    opened = _record_open(monkeypatch)
    real_read = os.read
    asked = []

    def short_read(fd, size):
        asked.append(size)
        return real_read(fd, min(size, 2))  # the system may return less than asked

    monkeypatch.setattr(outputs.os, "read", short_read)
    assert outputs._holds_already(path, b"abcde") is True
    assert opened == [(os.fspath(path), os.O_RDONLY | os.O_NOFOLLOW)]
    assert asked == [6, 4, 2, 1]  # data + 1 - held, at least 1: the last asks past the end
    assert outputs._holds_already(path, b"abcdf") is False


def test_holds_already_says_no_for_links_other_sizes_and_read_errors(tmp_path: Path, monkeypatch) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"abc")
    assert outputs._holds_already(path, b"abc") is True
    assert outputs._holds_already(path, b"abcd") is False
    assert outputs._holds_already(path, b"ab") is False
    os.link(path, tmp_path / "hard")
    assert outputs._holds_already(path, b"abc") is False  # two links: rewritten to give the path its own file
    os.unlink(tmp_path / "hard")
    (tmp_path / "sym").symlink_to("f")
    assert outputs._holds_already(tmp_path / "sym", b"abc") is False
    assert outputs._holds_already(tmp_path / "missing", b"") is False
    monkeypatch.setattr(outputs.os, "read", _eio)
    assert outputs._holds_already(path, b"abc") is False


def test_file_identity_by_hand(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"x")
    info = os.stat(path)
    assert outputs._file_identity(path) == ("inode", info.st_dev, info.st_ino)
    (tmp_path / "real").mkdir()
    (tmp_path / "ln").symlink_to("real")
    assert outputs._file_identity(tmp_path / "ln" / "new") == ("path", os.fspath(tmp_path / "real" / "new"))


def test_an_unknown_file_type_is_other_and_not_a_stream(tmp_path: Path, monkeypatch) -> None:
    odd = tmp_path / "x"
    real = os.stat
    unknown = os.stat_result((0, *tuple(real(tmp_path))[1:]))  # no S_IF* bit: none of the kinds

    # Only this path is odd: pytest's own reports stat files while the patch is on.
    monkeypatch.setattr(outputs.os, "stat", lambda path, *a, **k: unknown if Path(path) == odd else real(path, *a, **k))
    assert outputs._special_kind(odd) == "other"
    assert outputs.is_stream(odd) is False


def test_exchange_paths_loads_the_c_library_by_its_found_name_else_libc_so_6(monkeypatch) -> None:
    loaded = []

    class Function:
        def __call__(self, *args):
            self.args = args
            return 0

    function = Function()

    class Library:
        renameat2 = function

    def cdll(name, use_errno=False):
        loaded.append((name, use_errno))
        return Library()

    monkeypatch.setattr(outputs.ctypes, "CDLL", cdll)
    monkeypatch.setattr(outputs.ctypes.util, "find_library", lambda name: {"c": "libc-found.so"}.get(name))
    assert outputs.exchange_paths(Path("a"), Path("b")) is True
    monkeypatch.setattr(outputs.ctypes.util, "find_library", lambda name: None)
    assert outputs.exchange_paths(Path("a"), Path("b")) is True
    assert loaded == [("libc-found.so", True), ("libc.so.6", True)]
    assert function.args == (-100, b"a", -100, b"b", 2)  # AT_FDCWD twice, RENAME_EXCHANGE
    assert len(function.argtypes) == 5

    def missing(name, use_errno=False):
        raise OSError("no C library")

    monkeypatch.setattr(outputs.ctypes, "CDLL", missing)
    assert outputs.exchange_paths(Path("a"), Path("b")) is False


# --- write_outputs with streams (a FIFO whose writer is replaced: nothing is opened) -----------------------------


def test_write_outputs_renames_every_file_around_a_stream_and_lists_them_when_it_fails(tmp_path: Path, monkeypatch) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    first, second = tmp_path / "first", tmp_path / "second"
    streamed = []
    monkeypatch.setattr(outputs, "_stream", lambda path, data, kind, what: streamed.append((path, data, kind, what)))
    write_outputs({fifo: b"s", first: b"1", second: b"2"}, what="--x")
    assert streamed == [(fifo, b"s", "fifo", "--x")]
    assert first.read_bytes() == b"1" and second.read_bytes() == b"2"
    monkeypatch.setattr(outputs, "_stream", _eio)
    with pytest.raises(OutputError) as caught:
        write_outputs({fifo: b"s", first: b"one", second: b"two"}, what="--x", hint="h")
    assert str(caught.value) == (
        f"could not write --x {fifo}: {EIO_WORDS}; {first}, {second} hold the new content; "
        f"{fifo} did not receive it all: write it again"
    )
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_write_outputs_names_every_file_it_could_not_put_back(tmp_path: Path, monkeypatch) -> None:
    a, b, c = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    real_replace, real_unlink = os.replace, os.unlink

    def replace(src, dst):
        if Path(dst) == c:
            raise OSError(errno.EIO, EIO_WORDS)
        return real_replace(src, dst)

    def unlink(path, *args, **kwargs):
        if Path(path) in (a, b):
            raise OSError(errno.EACCES, "Permission denied")
        return real_unlink(path, *args, **kwargs)

    monkeypatch.setattr(outputs.os, "replace", replace)
    monkeypatch.setattr(outputs.os, "unlink", unlink)
    with pytest.raises(OutputError) as caught:
        write_outputs({a: b"1", b: b"2", c: b"3"})
    assert str(caught.value) == (
        f"could not write output {c}: {EIO_WORDS}; the files renamed before the error could not all be put back "
        f"({b}, {a} hold the new content); run again once the cause is fixed"
    )


def test_named_keeps_the_errno_of_a_generic_sentence(tmp_path: Path) -> None:
    named = outputs._named(OSError(errno.EIO, EIO_WORDS), tmp_path, "--x", "h")
    assert str(named) == f"could not write --x {tmp_path}: {EIO_WORDS}; h" and named.errno == errno.EIO


# --- folder names the recovery must read as text (the fix of issue 56's outputs round) -----------------------------


@pytest.mark.parametrize("name", ["run[1]", "a*b", "q?", "x.tmp-3"])
def test_a_folder_named_with_glob_characters_or_tmp_gets_its_own_old_set_back_and_no_other(tmp_path: Path, name: str) -> None:
    target = tmp_path / name
    old = tmp_path / f".{name}.old-{DEAD_PID}"
    _fill(old, {"f": b"old"})
    other = tmp_path / f".{name.replace('[', '').replace(']', '').replace('*', 'X').replace('?', 'Z')}.old-{DEAD_PID}"
    if other != old:
        _fill(other, {"f": b"another folder's"})  # what the name read as a pattern would also match
    assert outputs.recover_sets(target) == [old]
    assert _tree(target) == {"f": b"old"}
    building = tmp_path / f".{name}.building-{DEAD_PID}"
    building.mkdir()
    assert outputs.remove_stale_staging(tmp_path, [f".{name}.building-"]) == [building]
    if other != old:
        assert _tree(other) == {"f": b"another folder's"}


@pytest.mark.parametrize("name", ["a.tmp-b", "x.tmp-3"])
def test_a_set_killed_inside_a_folder_named_with_tmp_is_finished_by_the_next_write(tmp_path: Path, name: str) -> None:
    target = tmp_path / name
    _fill(target, {"a": b"old", f".{name}.moving-{DEAD_PID}/a": b"new"})
    manifest = target / f".{name}.manifest-{DEAD_PID}.json"
    manifest.write_bytes(b'{"files": ["a"], "remove_others": false}')
    outputs.recover_sets(target)
    assert _tree(target) == {"a": b"new"}


def test_an_unlistable_parent_has_no_leftovers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pathlib.Path, "iterdir", _eio)
    assert outputs.remove_stale_staging(tmp_path, [".x.building-"]) == []
    assert outputs.recover_sets(tmp_path / "x") == []
