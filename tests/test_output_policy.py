"""The one output policy (issue 38): special files are streamed into and never replaced, multi-file outputs
are transactions that a kill leaves old or new byte for byte, every OS error is one sentence with exit 2.

Special nodes are made inside the test's tmp folder (``os.mkfifo``, ``os.mknod``), never under /dev.
"""

from __future__ import annotations

import errno
import json
import os
import random
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from benchmark_formats import write_sugarcrepe

from clip_cycles import outputs
from clip_cycles.cli import main
from clip_cycles.evaluation.zero_shot import write_samples
from clip_cycles.outputs import OutputError, write_file_set, write_output, write_outputs
from clip_cycles.results import benchmark_record, result_files, write_json, write_result

REPO = Path(__file__).resolve().parents[1]


def _char_device(path: Path, minor: int = 3) -> Path:
    """A copy of /dev/null (minor 3) or /dev/full (minor 7) made inside tmp; skips where mknod is not allowed."""
    try:
        os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, minor))
    except (PermissionError, OSError) as error:
        pytest.skip(f"cannot make a character device here ({error}); needs root or CAP_MKNOD")
    return path


def _is_char(path: Path) -> bool:
    return stat.S_ISCHR(os.lstat(path).st_mode)


class _Reader(threading.Thread):
    """Reads a FIFO to its end in the background (opened before the writer, as a shell's ``cat`` would be)."""

    def __init__(self, path: Path) -> None:
        super().__init__(daemon=True)
        self.path, self.data = path, b""
        self.opened = threading.Event()

    def run(self) -> None:
        fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK)
        self.opened.set()
        os.set_blocking(fd, True)
        chunks = []
        deadline = time.monotonic() + 300  # the writer may come after a slow evaluation
        while time.monotonic() < deadline:
            try:
                chunk = os.read(fd, 1 << 16)
            except BlockingIOError:
                continue
            if chunk:
                chunks.append(chunk)
            elif chunks:
                break
            else:
                time.sleep(0.01)  # no writer yet: a read of an unopened FIFO returns b"" at once
        os.close(fd)
        self.data = b"".join(chunks)


def _tree(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.parent.iterdir() if p.name.startswith(f".{folder.name}."))


# --------------------------------------------------------------------------- special files: streamed, never replaced


def test_a_character_device_is_written_as_a_stream_and_stays_a_device(tmp_path: Path) -> None:
    null = _char_device(tmp_path / "null")
    assert write_output(null, b"discarded\n") == null
    assert _is_char(null)
    write_json({"a": 1}, null)
    write_result(benchmark_record("cycles/shapes_strict_size", "m", "p", {"cycle_acc": 0.5}), null)
    assert _is_char(null)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["null"]  # no detail file, no temporary beside the device


def test_a_full_device_is_a_sentence_and_stays_a_device(tmp_path: Path) -> None:
    full = _char_device(tmp_path / "full", minor=7)
    with pytest.raises(OutputError, match=f"no space left on the device while writing {full}; free space there"):
        write_output(full, b"x" * 10)
    assert _is_char(full)


def test_a_fifo_with_a_reader_gets_the_bytes_and_stays_a_fifo(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    reader = _Reader(fifo)
    reader.start()
    reader.opened.wait(5)
    payload = b"".join(b"line %d\n" % i for i in range(20000))  # more than a pipe buffer
    write_output(fifo, payload)
    reader.join(30)
    assert reader.data == payload
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_a_fifo_without_a_reader_and_a_socket_are_refused_and_kept(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(OutputError, match=f"{fifo} is a FIFO with no reader; start its reader first"):
        write_output(fifo, b"x")
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    sock_path = tmp_path / "s"
    server = socket.socket(socket.AF_UNIX)
    try:
        server.bind(str(sock_path))
        with pytest.raises(OutputError, match=f"{sock_path} is a socket; it is never written nor replaced"):
            write_output(sock_path, b"x")
        assert stat.S_ISSOCK(os.lstat(sock_path).st_mode)
    finally:
        server.close()


def test_eval_output_to_a_device_discards_and_samples_to_a_fifo_stream(tmp_path: Path, shapes_world: Path, capsys) -> None:
    null = _char_device(tmp_path / "null")
    fifo = tmp_path / "samples"
    os.mkfifo(fifo)
    reader = _Reader(fifo)
    reader.start()
    reader.opened.wait(5)
    common = ["--model", "cycles-tiny", "--task", "cycles/shapes_strict_size", "--device", "cpu", "--num-workers", "0"]
    code = main(["eval", *common, "--dataset-root", str(shapes_world), "--output", str(null), "--samples", str(fifo)])
    reader.join(60)
    assert code == 0, capsys.readouterr().err
    assert _is_char(null) and stat.S_ISFIFO(os.lstat(fifo).st_mode)
    lines = [json.loads(line) for line in reader.data.decode().splitlines()]
    assert lines and all(line["task"] == "cycles/shapes_strict_size" and "s11" in line for line in lines)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["null", "samples"]


# --------------------------------------------------------------------------- OS errors: one sentence, exit 2, old output intact


def test_eval_samples_to_a_full_device_is_exit_2_and_writes_no_result(tmp_path: Path, shapes_world: Path, capsys) -> None:
    full = _char_device(tmp_path / "full", minor=7)
    common = ["--model", "cycles-tiny", "--task", "cycles/shapes_strict_size", "--device", "cpu", "--num-workers", "0"]
    output = tmp_path / "r.json"
    assert main(["eval", *common, "--dataset-root", str(shapes_world), "--output", str(output), "--samples", str(full)]) == 2
    err = capsys.readouterr().err
    assert f"no space left on the device while writing {full}" in err and "Traceback" not in err
    assert _is_char(full) and sorted(p.name for p in tmp_path.iterdir()) == ["full"]


def _no_space(monkeypatch: pytest.MonkeyPatch, after: int = 0) -> None:
    """``os.write`` inside the output module fails with ENOSPC after ``after`` successful writes."""
    real = os.write
    calls = {"n": 0}

    def write(fd: int, data) -> int:  # noqa: ANN001
        calls["n"] += 1
        if calls["n"] > after:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(fd, data)

    monkeypatch.setattr(outputs.os, "write", write)


@pytest.mark.parametrize(
    ("code", "words"),
    [
        (errno.ENOSPC, "no space left on the device"),
        (errno.EDQUOT, "disk quota exceeded"),
        (errno.EROFS, "the file system is read-only"),
        (errno.EACCES, "permission denied"),
        (errno.ENAMETOOLONG, "the path is too long"),
        (errno.ELOOP, "loops through symbolic links"),
        (errno.EISDIR, "a folder is in the way"),
        (errno.ENOTDIR, "a file is in the way"),
    ],
)
def test_every_os_error_of_a_write_is_one_sentence_and_the_old_file_stays(
    code: int, words: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "r.json"
    target.write_text("old\n")

    def refuse(*args, **kwargs):  # noqa: ANN002, ANN003
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(outputs.os, "replace", refuse)
    with pytest.raises(OutputError, match=f"{words}.* while writing {target}; ") as raised:
        write_json({"new": 1}, target)
    assert isinstance(raised.value, ValueError) and raised.value.errno == code
    assert "\n" not in str(raised.value)
    assert target.read_text() == "old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json"]


def test_enospc_in_a_result_keeps_the_old_one_and_leaves_no_temporary(tmp_path: Path, monkeypatch) -> None:
    target = tmp_path / "r.json"
    write_json({"old": 1}, target)
    before = target.read_bytes()
    _no_space(monkeypatch)
    with pytest.raises(OutputError, match=f"^no space left on the device while writing {target}; free space there"):
        write_json({"new": 2}, target)
    assert target.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json"]


def test_several_results_are_written_all_or_none(tmp_path: Path, monkeypatch) -> None:
    first, second = tmp_path / "a" / "r1.json", tmp_path / "b" / "r2.json"
    record = benchmark_record("cycles/shapes_strict_size", "m", "p", {"cycle_acc": 0.5})
    write_result(record, first)
    write_result(record, second)
    before = {**_tree(tmp_path / "a"), **{f"b/{k}": v for k, v in _tree(tmp_path / "b").items()}}
    newer = benchmark_record("cycles/shapes_strict_size", "m", "p", {"cycle_acc": 0.75})
    files = {**result_files(newer, first), **result_files(newer, second)}
    assert len(files) == 4
    with monkeypatch.context() as patch:
        _no_space(patch, after=3)  # the fourth file finds the disk full: nothing is renamed
        with pytest.raises(OutputError, match=f"no space left on the device while writing {second}"):
            write_outputs(files, what="--output")
    assert {**_tree(tmp_path / "a"), **{f"b/{k}": v for k, v in _tree(tmp_path / "b").items()}} == before
    write_outputs(files, what="--output")
    assert json.loads(first.read_text())["metrics"]["cycle_acc"] == 0.75
    assert json.loads(second.read_text())["metrics"]["cycle_acc"] == 0.75
    assert sorted(p.name for p in (tmp_path / "b").iterdir()) == ["r2.detail.jsonl", "r2.json"]


def test_a_read_only_samples_file_is_a_sentence(tmp_path: Path, monkeypatch) -> None:
    target = tmp_path / "s.jsonl"

    def read_only(*args, **kwargs):  # noqa: ANN002, ANN003
        raise OSError(errno.EROFS, os.strerror(errno.EROFS))

    monkeypatch.setattr(outputs.os, "open", read_only)
    with pytest.raises(OutputError, match=f"^the file system is read-only while writing {target}; "):
        write_samples([{"a": 1}], target)
    assert not target.exists()


def test_a_temporary_left_by_a_dead_process_is_removed_by_the_next_write(tmp_path: Path) -> None:
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    pid = int(dead.stdout)
    stale = tmp_path / f"r.json.tmp-{pid}-123"
    stale.write_text("torn")
    alive = tmp_path / f"r.json.tmp-{os.getppid()}-5"  # a live process's write in progress is left alone
    alive.write_text("busy")
    write_json({"a": 1}, tmp_path / "r.json")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["r.json", alive.name])


def _page_inputs(folder: Path, acc: float) -> Path:
    write_json(
        benchmark_record("cycles/shapes_strict_size", "m", "a", {"cycle_acc": acc, "acc": acc, "n_cycles": 40}), folder / "r.json"
    )
    return folder


def test_page_enospc_is_exit_2_with_the_older_page_intact(tmp_path: Path, monkeypatch, capsys) -> None:
    site = tmp_path / "site"
    assert main(["page", str(_page_inputs(tmp_path / "in1", 0.8)), "--out", str(site)]) == 0
    before = _tree(site)
    capsys.readouterr()
    _no_space(monkeypatch, after=1)
    assert main(["page", str(_page_inputs(tmp_path / "in2", 0.3)), "--out", str(site)]) == 2
    err = capsys.readouterr().err.strip()
    assert "no space left on the device while writing" in err and str(site) in err and "Traceback" not in err
    assert len(err.splitlines()) == 1
    assert _tree(site) == before
    assert _leftovers(site) == []


def test_splits_results_enospc_leaves_no_folder_and_a_whole_write_has_every_file(tmp_path: Path, monkeypatch) -> None:
    from clip_cycles.commands import splits

    def figures(results: dict, folder: Path) -> list[Path]:  # the grid's charts stand in for the real ones
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "strategies.png").write_bytes(b"png")
        return [folder / "strategies.png"]

    monkeypatch.setattr(splits, "write_figures", figures)
    monkeypatch.setattr(splits, "markdown_report", lambda results: "# report\n")
    out = tmp_path / "splits"
    with monkeypatch.context() as patch:
        _no_space(patch)
        with pytest.raises(OutputError, match=f"no space left on the device while writing {out}; "):
            splits._write_results({"grid": {}}, out)
    assert sorted(p.name for p in tmp_path.iterdir()) == []
    assert splits._write_results({"grid": {}}, out) == [out / "figures" / "strategies.png"]
    assert _tree(out) == {"figures/strategies.png": b"png", "results.json": b'{\n  "grid": {}\n}\n', "results.md": b"# report\n"}


def test_names_and_paths_too_long_are_sentences(tmp_path: Path, monkeypatch, capsys) -> None:
    long_name = "x" * 300
    assert main(["page", str(_page_inputs(tmp_path / "in", 0.8)), "--out", str(tmp_path / long_name)]) == 2
    assert "has 300 bytes, more than the 255" in capsys.readouterr().err
    common = ["--model", "cycles-tiny", "--task", "cycles/shapes_strict_size", "--device", "cpu", "--num-workers", "0"]
    assert main(["eval", *common, "--output", str(tmp_path / f"{long_name}.json")]) == 2
    assert "choose a shorter path" in capsys.readouterr().err
    deep = tmp_path / "/".join(["d" * 200] * 25)  # over 4,096 bytes
    monkeypatch.setenv("CLIP_CYCLES_CACHE", str(deep))
    assert main(["eval", *common, "--output", str(tmp_path / "r.json")]) == 2
    err = capsys.readouterr().err
    assert "longer than the 4096 the system accepts" in err and "CLIP_CYCLES_CACHE" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in"]


# --------------------------------------------------------------------------- transactions: a kill leaves old or new


def test_a_file_set_swaps_in_whole_and_keeps_the_folder_s_other_files(tmp_path: Path) -> None:
    out = tmp_path / "out"
    write_file_set(out, {"a.json": b"1", "a.md": b"1"})
    (out / "mine.txt").write_text("keep")
    write_file_set(out, {"a.json": b"2", "a.md": b"2", "sub/a.png": b"2"})
    assert _tree(out) == {"a.json": b"2", "a.md": b"2", "mine.txt": b"keep", "sub/a.png": b"2"}
    write_file_set(out, {"index.html": b"3"}, keep_others=False)
    assert _tree(out) == {"index.html": b"3"}
    assert _leftovers(out) == []


def test_the_working_folder_is_never_swapped_out(tmp_path: Path, monkeypatch) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "mine.txt").write_text("keep")
    monkeypatch.chdir(work)
    inode = os.stat(work).st_ino
    write_file_set(".", {"a.json": b"1"})
    assert os.stat(work).st_ino == inode and _tree(work) == {"a.json": b"1", "mine.txt": b"keep"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["work"]


def _dead_pid() -> int:
    return int(subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True).stdout)


def test_without_an_exchange_a_set_killed_between_its_renames_gets_the_old_folder_back(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(outputs, "exchange_paths", lambda a, b: False)
    out = tmp_path / "out"
    write_file_set(out, {"a": b"1"})
    write_file_set(out, {"a": b"2"})  # the two-rename fallback
    assert _tree(out) == {"a": b"2"} and _leftovers(out) == []
    pid = _dead_pid()
    out.rename(tmp_path / f".out.old-{pid}")  # killed after the first rename: no folder at --out
    (tmp_path / f".out.building-{pid}").mkdir()
    assert outputs.recover_sets(out)
    assert _tree(out) == {"a": b"2"} and _leftovers(out) == []


def _child(argv: list[str], report: int) -> None:
    """The forked child: runs the command with its writer wrapped to report when it starts and ends (never returns)."""
    import clip_cycles.commands.audit_benchmark as audit_command
    import clip_cycles.evaluation.page as page

    def signalled(real):  # noqa: ANN001, ANN202
        def write(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
            os.write(report, f"writing {time.monotonic()}\n".encode())
            result = real(*args, **kwargs)
            os.write(report, f"done {time.monotonic()}\n".encode())
            return result

        return write

    code = 3
    try:
        page.write_site = signalled(page.write_site)
        audit_command.write_outputs = signalled(audit_command.write_outputs)
        code = main(argv)
    except BaseException:  # noqa: BLE001  (the child must never return into pytest)
        import traceback

        traceback.print_exc()
    finally:
        os._exit(code)


def _kill_runs(argv, out: Path, tmp_path: Path, seed: int, kills: int = 20) -> None:  # noqa: ANN001
    """Run ``argv(out)`` in a forked child ``kills`` times, SIGKILL it at a seeded random moment of its write, and
    check each time that ``out`` holds the old output or the new one byte for byte; the next run removes leftovers.

    A fork of this process (its imports done) costs milliseconds where a fresh interpreter costs seconds.
    """

    def start(folder: Path) -> tuple[int, object, float]:
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(read)
            _child(argv(folder), write)
        os.close(write)
        lines = os.fdopen(read, "r")
        line = lines.readline()
        assert line.startswith("writing"), f"the child ended before writing: {line!r}"
        return pid, lines, float(line.split()[1])

    def wait(pid: int) -> int:
        return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])

    # A whole run on a scratch folder measures the write; the kills fall in that window (and a little after).
    pid, lines, began = start(tmp_path / "calibration")
    ended = float(lines.readline().split()[1])  # type: ignore[attr-defined]
    lines.close()  # type: ignore[attr-defined]
    assert wait(pid) == 0
    window = 1.3 * (ended - began)
    old = _tree(out)
    rng = random.Random(seed)
    snapshots = []
    for _ in range(kills):
        pid, lines, _ = start(out)
        time.sleep(rng.uniform(0, window))
        os.kill(pid, signal.SIGKILL)
        wait(pid)
        lines.close()  # type: ignore[attr-defined]
        snapshots.append(_tree(out))
    pid, lines, _ = start(out)
    assert lines.readline().startswith("done")  # type: ignore[attr-defined]
    lines.close()  # type: ignore[attr-defined]
    assert wait(pid) == 0
    new = _tree(out)
    assert new != old
    for k, snapshot in enumerate(snapshots):
        assert snapshot in (old, new), f"kill {k}: a mixture of the old and the new output"
    assert _leftovers(out) == [], "the next run removes the staging a killed run left"


def test_killing_page_leaves_the_old_or_the_new_site(tmp_path: Path) -> None:
    site = tmp_path / "site"
    assert main(["page", str(_page_inputs(tmp_path / "in1", 0.8)), "--out", str(site)]) == 0
    inputs = _page_inputs(tmp_path / "in2", 0.3)
    write_json(benchmark_record("cycles/shapes_coarse_object", "m", "a", {"cycle_acc": 0.6, "n_cycles": 40}), inputs / "r2.json")
    _kill_runs(lambda out: ["page", str(inputs), "--out", str(out)], site, tmp_path, seed=38)


def test_killing_audit_benchmark_leaves_the_old_or_the_new_set(tmp_path: Path) -> None:
    write_sugarcrepe(tmp_path / "sc")
    out = tmp_path / "audit"
    out.mkdir()
    for suffix in ("json", "md", "png"):
        (out / f"audit_sugarcrepe.{suffix}").write_bytes(f"old {suffix}".encode())
    (out / "notes.txt").write_text("someone else's file")
    _kill_runs(
        lambda folder: ["audit-benchmark", "sugarcrepe", "--root", str(tmp_path / "sc"), "--out", str(folder)],
        out,
        tmp_path,
        seed=40,
    )
    assert (out / "notes.txt").read_text() == "someone else's file"


def test_plugin_samples_to_a_fifo_and_output_to_a_device(shapes_cycles: Path, tmp_path: Path) -> None:
    from tiny_models import TINY_OPEN_CLIP

    null = _char_device(tmp_path / "null")
    fifo = tmp_path / "samples"
    os.mkfifo(fifo)
    (tmp_path / "tiny").mkdir()
    (tmp_path / "tiny" / "open_clip_config.json").write_text(json.dumps(TINY_OPEN_CLIP))
    reader = _Reader(fifo)
    reader.start()
    reader.opened.wait(5)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CLIP_CYCLES_", "PYTHONPATH"))}
    env.update({"CLIP_CYCLES_CACHE": str(tmp_path / "cache"), "TQDM_DISABLE": "1", "CLIP_CYCLES_SAMPLES": str(fifo)})
    env["PYTHONPATH"] = str(REPO)
    script = "import sys; from clip_cycles.commands.clip_benchmark import main; sys.exit(main(sys.argv[1:]))"
    args = ["--dataset", "cycles/shapes_strict_left_right", "--model", f"local-dir:{tmp_path / 'tiny'}", "--pretrained"]
    args += ["none", "--dataset_root", str(shapes_cycles), "--no_amp", "--num_workers", "0", "--output", str(null)]
    done = subprocess.run([sys.executable, "-c", script, "eval", *args], env=env, cwd=tmp_path, capture_output=True, text=True)
    reader.join(60)
    assert done.returncode == 0, done.stderr[-3000:]
    assert _is_char(null) and stat.S_ISFIFO(os.lstat(fifo).st_mode)
    lines = [json.loads(line) for line in reader.data.decode().splitlines()]
    assert lines and all(line["task"] == "cycles/shapes_strict_left_right" and "s11" in line for line in lines)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cache", "null", "samples", "tiny"]
