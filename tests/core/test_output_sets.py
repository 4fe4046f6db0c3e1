"""Multi-part outputs as one transaction, and folders that cannot be swapped (issue 55).

- ``audit-benchmark all``: every benchmark's folder and the combined table are one set; a full disk at
  any write, or a SIGKILL at any moment, leaves the old set or the new one byte for byte, never new
  benchmark folders beside an old table, and the message says only what happened.
- ``eval``'s several results (and its samples file): a rename that fails puts back the ones done.
- A folder that cannot be swapped (a mount point, a parent refusing writes, a rename refused with
  EBUSY) is written inside: staged in full, a manifest, then file by file; the note says that
  guarantee, a kill is finished by the next write, a full disk while staging leaves the old files.
- ``build shapes --out`` with a name too long, a read-only file system or a mount point: a sentence
  or a write inside, never a traceback.

Mount points are simulated (``os.path.ismount`` patched, a rename raising EBUSY); a read-only parent
by ``chmod`` where the tests do not run as root, by ``os.access`` patched where they do.
"""

from __future__ import annotations

import errno
import json
import os
import random
import shutil
import signal
import time
from pathlib import Path

import pytest
from benchmark_formats_published import write_cola, write_valse

from clip_cycles import outputs
from clip_cycles.cli import main
from clip_cycles.outputs import OutputError, write_file_set, write_outputs
from clip_cycles.results import benchmark_record, result_files, write_json, write_result

TRUE_HINT = "any previous output was left as it was"


def _tree(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder``, hidden ones (a staging folder, a manifest) included."""
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _leftovers(folder: Path) -> list[str]:
    beside = [p.name for p in folder.parent.iterdir() if p.name.startswith(f".{folder.name}.")]
    inside = [p.name for p in folder.iterdir() if p.name.startswith(f".{folder.name}.")] if folder.is_dir() else []
    return sorted(beside + inside)


def _benchmarks(root: Path) -> list[str]:
    write_cola(root / "cola")
    write_valse(root / "valse")
    return ["audit-benchmark", "all", "--benchmark", f"cola={root / 'cola'}", f"valse={root / 'valse'}"]


def _all(args: list[str], out: Path, tolerance: str) -> list[str]:
    """The command line of one version of the set: the tie tolerance is recorded, so the versions differ."""
    return [*args, "--tie-tolerance", tolerance, "--out", str(out)]


def _no_space_after(monkeypatch: pytest.MonkeyPatch, budget: int) -> None:
    """``os.write`` inside the output module writes ``budget`` bytes in all, then fails with ENOSPC."""
    real = os.write
    left = {"n": budget}

    def write(fd: int, data) -> int:  # noqa: ANN001
        if left["n"] <= 0:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        done = real(fd, bytes(data)[: left["n"]])
        left["n"] -= done
        return done

    monkeypatch.setattr(outputs.os, "write", write)


# --------------------------------------------------------------------------- audit-benchmark all: one set


def test_audit_all_is_one_set_a_full_disk_anywhere_leaves_the_old_set_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    args = _benchmarks(tmp_path / "in")
    out = tmp_path / "out"
    assert main(_all(args, out, "0")) == 0
    (out / "notes.txt").write_text("someone else's file")
    old = _tree(out)
    assert {"cola/audit_cola.json", "valse/audit_valse.png", "audit_all.csv"} <= set(old)
    size = sum(len(v) for v in old.values())
    capsys.readouterr()
    for budget in sorted({0, 1, 100, size // 3, size // 2, size - 200}):
        with monkeypatch.context() as patch:
            _no_space_after(patch, budget)
            assert main(_all(args, out, "0.001")) == 2
        err = capsys.readouterr().err
        assert f"no space left on the device while writing {out}; " in err and TRUE_HINT in err and "Traceback" not in err
        assert _tree(out) == old, f"budget {budget}: the old set changed"
        assert _leftovers(out) == []
    assert main(_all(args, out, "0.001")) == 0
    new = _tree(out)
    assert new["notes.txt"] == b"someone else's file"
    changed = {name for name in new if new[name] != old.get(name)}
    assert {"cola/audit_cola.json", "valse/audit_valse.json", "audit_all.json"} <= changed  # one run replaced all three


def test_an_unreadable_benchmark_is_a_row_of_the_one_set(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = _benchmarks(tmp_path / "in")
    (tmp_path / "in" / "valse" / "existence.json").write_text("[1]")  # the second benchmark refuses its file
    out = tmp_path / "out"
    assert main(_all(args, out, "0")) == 0
    assert "existence.json: item 0 must be an object" in capsys.readouterr().err
    # The set is written once, with cola's folder and valse as a row of the table, never a folder of its own.
    record = json.loads((out / "audit_all.json").read_text())
    assert "existence.json: item 0 must be an object" in record["unusable_benchmarks"]["valse"]["reason"]
    assert (out / "cola").is_dir() and not (out / "valse").exists()


def _child(argv: list[str], report: int, inside: bool) -> None:
    """The forked child: runs the command with its set writer wrapped to report when it starts (never returns)."""
    import clip_cycles.commands.audit_benchmark as audit_command

    real = audit_command.write_all

    def write_all(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        os.write(report, f"writing {time.monotonic()}\n".encode())
        result = real(*args, **kwargs)
        os.write(report, f"done {time.monotonic()}\n".encode())
        return result

    code = 3
    try:
        audit_command.write_all = write_all
        if inside:
            os.path.ismount = lambda path: str(path).endswith("out")  # type: ignore[assignment]
        code = main(argv)
    except BaseException:  # noqa: BLE001  (the child must never return into pytest)
        import traceback

        traceback.print_exc()
    finally:
        os._exit(code)


def _kill_runs(argv: list[str], calibration: list[str], out: Path, *, inside: bool, seed: int, kills: int = 20) -> list[dict]:
    """Run ``argv`` in a forked child ``kills`` times and SIGKILL it at a seeded moment of its write; returns each
    kill's snapshot of ``out`` (taken after the next run's recovery when ``inside``)."""

    def start(args: list[str]) -> tuple[int, object]:
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(read)
            _child(args, write, inside)
        os.close(write)
        lines = os.fdopen(read, "r")
        line = lines.readline()
        assert line.startswith("writing"), f"the child ended before writing: {line!r}"
        return pid, lines

    pid, lines = start(calibration)
    began = time.monotonic()
    lines.readline()  # type: ignore[attr-defined]
    window = 1.3 * (time.monotonic() - began)
    lines.close()  # type: ignore[attr-defined]
    assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0
    rng = random.Random(seed)
    snapshots = []
    for _ in range(kills):
        pid, lines = start(argv)
        time.sleep(rng.uniform(0, window))
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        lines.close()  # type: ignore[attr-defined]
        if inside:
            outputs.recover_sets(out)  # what the next write does first
        snapshots.append(_tree(out))
    return snapshots


@pytest.mark.parametrize("inside", [False, True], ids=["swapped", "mount-point"])
def test_twenty_kills_of_audit_all_leave_the_old_or_the_new_set(tmp_path: Path, inside: bool) -> None:
    args = _benchmarks(tmp_path / "in")
    out = tmp_path / "out"
    assert main(_all(args, out, "0")) == 0
    (out / "notes.txt").write_text("someone else's file")
    old = _tree(out)
    snapshots = _kill_runs(
        _all(args, out, "0.001"), _all(args, tmp_path / "calibration", "0.001"), out, inside=inside, seed=55 + inside
    )
    if inside:
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(outputs.os.path, "ismount", lambda path: Path(path) == out)
            assert main(_all(args, out, "0.001")) == 0
    else:
        assert main(_all(args, out, "0.001")) == 0
    new = _tree(out)
    assert new != old and new["notes.txt"] == b"someone else's file"
    mixed = [k for k, snapshot in enumerate(snapshots) if snapshot not in (old, new)]
    assert not mixed, f"kills {mixed}: a mixture of the old and the new set"
    assert any(s == new for s in snapshots) or any(s == old for s in snapshots)
    assert _leftovers(out) == []


# --------------------------------------------------------------------------- a folder that cannot be swapped


def _mount(monkeypatch: pytest.MonkeyPatch, target: Path) -> None:
    real = os.path.ismount
    monkeypatch.setattr(outputs.os.path, "ismount", lambda path: Path(path) == target or real(path))


def _page_inputs(folder: Path, acc: float) -> Path:
    record = benchmark_record("cycles/shapes_strict_size", "m", "a", {"cycle_acc": acc, "acc": acc, "n_cycles": 40})
    write_json(record, folder / "r.json")
    return folder


def test_page_out_on_a_mount_point_is_written_inside_and_the_note_says_the_guarantee(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    site = tmp_path / "site"
    (site / "lost+found").mkdir(parents=True)  # a fresh ext4 volume's mount point
    _mount(monkeypatch, site)
    inode = os.stat(site).st_ino
    assert main(["page", str(_page_inputs(tmp_path / "old", 0.3)), "--out", str(site)]) == 0  # an empty mount point
    (site / "assets" / "stale.css").write_bytes(b"a file an older page had")  # as a page of another version
    capsys.readouterr()
    assert main(["page", str(_page_inputs(tmp_path / "in", 0.8)), "--out", str(site)]) == 0
    assert os.stat(site).st_ino == inode  # the mount point itself was never moved
    assert (site / "index.html").is_file() and not (site / "assets" / "stale.css").exists()  # the page is the whole folder
    assert (site / "lost+found").is_dir()  # the file system's own folder stays
    assert _leftovers(site) == []
    note = capsys.readouterr().err  # the guarantee that holds there, said once
    assert f"page --out {site} cannot be swapped whole (it is a mount point): " in note
    assert "moved into place one by one: each file is whole" in note and "finished by the next write" in note
    # The same inputs give the same bytes as a folder that is swapped.
    monkeypatch.undo()
    assert main(["page", str(tmp_path / "in"), "--out", str(tmp_path / "swapped")]) == 0
    assert _tree(site) == _tree(tmp_path / "swapped")


def test_audit_out_whose_rename_is_refused_with_ebusy_is_written_inside(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "out"
    write_file_set(out, {"a.json": b"1", "keep/b.md": b"1"})
    (out / "mine.txt").write_text("keep")

    def busy(a: Path, b: Path) -> bool:  # a bind mount os.path.ismount does not see
        raise OSError(errno.EBUSY, os.strerror(errno.EBUSY), os.fspath(a))

    monkeypatch.setattr(outputs, "exchange_paths", busy)
    write_file_set(out, {"a.json": b"2", "keep/b.md": b"2"})
    assert _tree(out) == {"a.json": b"2", "keep/b.md": b"2", "mine.txt": b"keep"} and _leftovers(out) == []


def test_a_read_only_parent_is_written_inside(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    parent = tmp_path / "parent"
    out = parent / "out"
    write_file_set(out, {"a.json": b"1"})
    parent.chmod(0o555)
    try:
        if os.geteuid() == 0:  # root writes through the mode bits: the parent refuses by the patched check
            real = os.access
            monkeypatch.setattr(outputs.os, "access", lambda path, mode: Path(path) != parent and real(path, mode))
        assert outputs.unswappable_reason(out) == "its parent folder is not writable"
        write_file_set(out, {"a.json": b"2", "b.json": b"2"})
        assert _tree(out) == {"a.json": b"2", "b.json": b"2"} and _leftovers(out) == []
    finally:
        parent.chmod(0o755)


def test_a_full_disk_while_staging_inside_leaves_every_old_file_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "out"
    write_file_set(out, {"a.json": b"1" * 50, "b.json": b"1" * 50})
    old = _tree(out)
    _mount(monkeypatch, out)
    for budget in (0, 60):
        with monkeypatch.context() as patch:
            _no_space_after(patch, budget)
            with pytest.raises(OutputError, match=f"^no space left on the device while writing {out}; .*{TRUE_HINT}"):
                write_file_set(out, {"a.json": b"2" * 50, "b.json": b"2" * 50})
        assert _tree(out) == old and _leftovers(out) == []


def test_a_failed_move_inside_says_which_files_wait_and_the_next_write_finishes_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "out"
    write_file_set(out, {"a.json": b"1", "b.json": b"1"})
    _mount(monkeypatch, out)
    real = os.replace

    def second_fails(source, destination):  # noqa: ANN001, ANN202
        if Path(destination) == out / "b.json":
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        return real(source, destination)

    with monkeypatch.context() as patch:
        patch.setattr(outputs.os, "replace", second_fails)
        with pytest.raises(OutputError) as raised:
            write_file_set(out, {"a.json": b"2", "b.json": b"2"})
    message = str(raised.value)
    assert "some files are new, the rest wait in" in message and TRUE_HINT not in message
    assert (out / "a.json").read_bytes() == b"2" and (out / "b.json").read_bytes() == b"1"
    outputs.recover_sets(out)  # the next write's first step: the set is finished
    assert _tree(out) == {"a.json": b"2", "b.json": b"2"} and _leftovers(out) == []


def test_a_builder_s_failed_move_inside_keeps_the_rest_for_the_next_build(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "world"
    out.mkdir()
    (out / "old.json").write_text("old")
    _mount(monkeypatch, out)
    staging = outputs.staging_folder(out)
    assert staging.parent == out  # staged inside the mount point
    for name in ("a.json", "sub/b.json"):
        (staging / name).parent.mkdir(parents=True, exist_ok=True)
        (staging / name).write_text("new")
    real = os.replace

    def second_fails(source, destination):  # noqa: ANN001, ANN202
        if Path(destination) == out / "sub" / "b.json":
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        return real(source, destination)

    with monkeypatch.context() as patch:
        patch.setattr(outputs.os, "replace", second_fails)
        with pytest.raises(OutputError, match="some files are new, the rest wait in"):
            outputs.replace_folder(staging, out)
    shutil.rmtree(staging, ignore_errors=True)  # what every builder's clean-up does: the files to move are elsewhere
    outputs.recover_sets(out)
    assert _tree(out) == {"a.json": b"new", "sub/b.json": b"new"} and _leftovers(out) == []


def test_a_planted_manifest_cannot_move_files_out_of_the_folder(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    dead = 2**22 + 12345  # above the default pid_max: no such process
    _, moving, manifest = outputs._inside_names(out, dead)
    moving.mkdir()
    (moving / "x").write_text("x")
    manifest.write_text(json.dumps({"files": ["../escaped", "/etc/passwd", "x"], "remove_others": False}))
    outputs.recover_sets(out)
    assert _tree(out) == {"x": b"x"} and not (tmp_path / "escaped").exists()


# --------------------------------------------------------------------------- eval's several files


def test_a_rename_that_fails_puts_back_the_results_already_renamed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first, second = tmp_path / "a" / "r1.json", tmp_path / "b" / "r2.json"
    samples = tmp_path / "s.jsonl"
    samples.write_text('{"old": 1}\n')
    record = benchmark_record("cycles/shapes_strict_size", "m", "p", {"cycle_acc": 0.5})
    write_result(record, first)
    before = {p: p.read_bytes() for p in (samples, first, first.with_name("r1.detail.jsonl"))}
    newer = benchmark_record("cycles/shapes_strict_size", "m", "p", {"cycle_acc": 0.75})
    files = {samples: b'{"new": 1}\n', **result_files(newer, first), **result_files(newer, second)}
    real = os.replace

    def last_fails(source, destination):  # noqa: ANN001, ANN202
        if Path(destination) == second:
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        return real(source, destination)

    with monkeypatch.context() as patch:
        patch.setattr(outputs.os, "replace", last_fails)
        with pytest.raises(OutputError, match=f"could not write --output {second}: .*{TRUE_HINT}"):
            write_outputs(files, what="--output")
    assert {p: p.read_bytes() for p in before} == before
    assert sorted(p.name for p in (tmp_path / "b").iterdir()) == []  # the new detail file was taken back
    assert sorted(p.name for p in (tmp_path / "a").iterdir()) == ["r1.detail.jsonl", "r1.json"]
    write_outputs(files, what="--output")
    assert json.loads(second.read_text())["metrics"]["cycle_acc"] == 0.75 and samples.read_text() == '{"new": 1}\n'


def test_eval_samples_and_result_are_one_set_a_full_disk_keeps_both_old_files(
    tmp_path: Path, shapes_world: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    common = ["--model", "cycles-tiny", "--task", "cycles/shapes_strict_size", "--device", "cpu", "--num-workers", "0"]
    common += ["--dataset-root", str(shapes_world), "--cache-dir", str(tmp_path / "cache")]
    output, samples = tmp_path / "out" / "r.json", tmp_path / "out" / "s.jsonl"
    assert main(["eval", *common, "--output", str(output), "--samples", str(samples)]) == 0
    old = _tree(tmp_path / "out")
    assert set(old) == {"r.json", "r.detail.jsonl", "s.jsonl"}
    newer = ["--seeds", "1"]
    scratch = tmp_path / "scratch"
    assert main(["eval", *common, *newer, "--output", str(scratch / "r.json"), "--samples", str(scratch / "s.jsonl")]) == 0
    capsys.readouterr()
    with monkeypatch.context() as patch:
        # The new samples file is staged whole, then the disk fills while the result is staged: nothing is renamed.
        _no_space_after(patch, len((scratch / "s.jsonl").read_bytes()) + 10)
        assert main(["eval", *common, *newer, "--output", str(output), "--samples", str(samples)]) == 2
    err = capsys.readouterr().err
    assert "no space left on the device while writing" in err and TRUE_HINT in err and "Traceback" not in err
    assert _tree(tmp_path / "out") == old  # the old samples file stays beside its own result


# --------------------------------------------------------------------------- build --out through the policy


@pytest.mark.parametrize(
    "command", [["shapes", "--n-images", "8"], ["coco", "--coco-root", "nowhere"], ["gqa", "--gqa-root", "nowhere"]]
)
def test_build_with_a_name_too_long_is_a_sentence_naming_the_limit_before_any_work(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: list[str]
) -> None:
    assert main(["build", *command, "--out", str(tmp_path / ("w" * 300))]) == 2
    err = capsys.readouterr().err
    assert "has 300 bytes, more than the 255 a file system accepts for one name" in err and "Traceback" not in err
    assert list(tmp_path.iterdir()) == []


def test_build_shapes_on_a_read_only_file_system_is_a_sentence(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def read_only(self, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        raise OSError(errno.EROFS, os.strerror(errno.EROFS), os.fspath(self))

    monkeypatch.setattr(Path, "mkdir", read_only)
    assert main(["build", "shapes", "--out", str(tmp_path / "w"), "--n-images", "8"]) == 2
    err = capsys.readouterr().err
    assert "the file system is read-only while writing" in err and str(tmp_path / "w") in err and "Traceback" not in err


def test_build_shapes_on_a_mount_point_is_written_inside_with_the_same_bytes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert main(["build", "shapes", "--out", str(tmp_path / "plain"), "--n-images", "8"]) == 0
    world = tmp_path / "w"
    world.mkdir()
    _mount(monkeypatch, world)
    inode = os.stat(world).st_ino
    assert main(["build", "shapes", "--out", str(world), "--n-images", "8"]) == 0
    assert os.stat(world).st_ino == inode and _tree(world) == _tree(tmp_path / "plain")
    assert main(["build", "shapes", "--out", str(world), "--n-images", "8", "--seed", "1"]) == 0  # replaced in place
    assert _tree(world) != _tree(tmp_path / "plain") and _leftovers(world) == []


def test_a_manifest_temporary_of_a_dead_writer_is_removed_by_the_next_write(tmp_path: Path) -> None:
    # A kill inside the manifest's own atomic write leaves `<manifest>.tmp-<pid>-<ns>`; the next write removes it.
    target = tmp_path / "out"
    target.mkdir()
    dead = os.fork()
    if dead == 0:
        os._exit(0)
    os.waitpid(dead, 0)
    stray = target / f".out.manifest-{dead}.json.tmp-{dead}-123456789"
    stray.write_bytes(b'{"files": [')
    alive = target / f".out.manifest-{os.getppid()}.json.tmp-{os.getppid()}-1"  # a live writer's is left alone
    alive.write_bytes(b"{")
    assert outputs.recover_sets(target) and not stray.exists() and alive.exists()
