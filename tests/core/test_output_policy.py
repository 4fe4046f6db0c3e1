"""The boundary cases of issue 38, replayed on every run in this one module.

Writes: the one output policy: special files are streamed into and never replaced, multi-file outputs
are transactions that a kill leaves old or new byte for byte, every OS error is one sentence with exit 2.
Reads: each hostile value is a sentence naming the file and field, never a traceback or a wrong number,
and the real formats still read: values checked where they are read (result records), parsers bounded
(one JSON helper), weights checked before loading, one format gate over every reader of a built folder.

Special nodes are made inside the test's tmp folder (``os.mkfifo``, ``os.mknod``), never under /dev.
"""

from __future__ import annotations

import errno
import json
import os
import random
import shutil
import signal
import socket
import stat
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from benchmark_formats import write_sugarcrepe

from clip_cycles import outputs
from clip_cycles.cli import main
from clip_cycles.evaluation.samples import write_samples
from clip_cycles.outputs import OutputError, write_file_set, write_output, write_outputs
from clip_cycles.regular_files import MAX_JSON_DEPTH, JSONLimitError, load_json_text, read_json_file
from clip_cycles.results import benchmark_record, read_result, result_files, write_json, write_result
from clip_cycles.schemas.result import check_result_record

REPO = Path(__file__).resolve().parents[2]


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


# --- reads: hostile values ---------------------------------------------------------------------------------------

DEEP = 200_000


def _record(**metrics: object) -> dict:
    base = {
        "cycle_acc": 0.75,
        "cycle_acc_sd": 0.05,
        "n_cycles": 12,
        "n_images": 48,
        "cycle_acc_ci": {"method": "percentile", "low": 0.6, "high": 0.9, "level": 0.95, "n_resamples": 1000, "seed": 0},
        "tie_tolerance": 1e-9,
    }
    return benchmark_record("cycles/shapes_strict_size", "ViT-B-32", None, {**base, **metrics})


def _flat_result(tmp_path: Path, raw_value: str, field: str = "cycle_acc") -> Path:
    """A result file as write_result writes it, with ``field`` replaced by the JSON text ``raw_value``."""
    path = write_result(_record(), tmp_path / "results" / "r.json")
    path.with_name("r.detail.jsonl").unlink()  # the flat record alone, as a foreign tool may leave it
    flat = json.loads(path.read_text())
    flat["metrics"][field] = "@@"
    path.write_text(json.dumps(flat).replace('"@@"', raw_value))
    return path


# --- values checked where they are read -----------------------------------------------------------------------


def test_a_real_result_reads_back_with_its_nested_detail(tmp_path: Path) -> None:
    path = write_result(_record(), tmp_path / "r.json")
    record = read_result(path)
    assert record["metrics"]["cycle_acc"] == 0.75 and record["metrics"]["cycle_acc_ci"]["low"] == 0.6
    check_result_record(record, "here")  # the nested record is a valid declared record too
    assert read_result(_flat_result(tmp_path / "flat", "0.5"))["metrics"]["cycle_acc"] == 0.5


@pytest.mark.parametrize(
    ("field", "raw", "message"),
    [
        ("cycle_acc", "1e308", r"field 'metrics\.cycle_acc' is 1e\+308; must be a number in \[0, 1\]"),
        ("cycle_acc", "-5", r"field 'metrics\.cycle_acc' is -5; must be a number in \[0, 1\]"),
        ("cycle_acc", '"0.5"', r"field 'metrics\.cycle_acc' is '0\.5'; must be a number in \[0, 1\]"),
        ("cycle_acc", "true", r"field 'metrics\.cycle_acc' is True; must be a number in \[0, 1\]"),
        ("cycle_acc", "NaN", r"holds NaN, which standard JSON does not allow"),
        ("cycle_acc", "1" + "0" * 400, r"holds an integer of 401 digits, more than the 40 allowed"),
        ("cycle_acc_ci_low", "1.5", r"field 'metrics\.cycle_acc_ci_low' is 1\.5; must be a number in \[0, 1\]"),
        ("n_cycles", "-3", r"field 'metrics\.n_cycles' is -3; must be a non-negative integer"),
        ("n_cycles", "2.5", r"field 'metrics\.n_cycles' is 2\.5; must be a non-negative integer"),
        ("n_images", "false", r"field 'metrics\.n_images' is False; must be a non-negative integer"),
    ],
)
def test_a_result_value_no_run_could_produce_is_a_sentence_naming_file_and_field(
    tmp_path: Path, field: str, raw: str, message: str
) -> None:
    path = _flat_result(tmp_path, raw, field)
    with pytest.raises(ValueError, match=message) as error:
        read_result(path)
    assert str(path) in str(error.value)


@pytest.mark.parametrize("raw", ["1e308", "-5", "NaN", "1" + "0" * 400])
def test_the_page_refuses_such_a_value_with_exit_2_instead_of_rendering_it(
    tmp_path: Path, raw: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _flat_result(tmp_path, raw)
    assert main(["page", str(path.parent), "--out", str(tmp_path / "site")]) == 2
    err = capsys.readouterr().err
    assert str(path) in err and "Traceback" not in err
    assert not (tmp_path / "site" / "index.html").exists()


@pytest.mark.parametrize(
    ("metrics", "field"),
    [
        ({"cycle_acc": float("nan")}, "metrics.cycle_acc"),
        ({"cycle_acc": 1e308}, "metrics.cycle_acc"),
        ({"text_acc": -0.1}, "metrics.text_acc"),
        ({"cycle_acc": True}, "metrics.cycle_acc"),
        ({"cycle_acc": "high"}, "metrics.cycle_acc"),
        ({"cycle_acc": {"mean": 1.5, "sd": 0.0}}, "metrics.cycle_acc.mean"),
        ({"per_seed": {"0": {"cycle_acc": 2.0}}}, "metrics.per_seed.0.cycle_acc"),
        ({"cycle_acc_ci": {"method": "percentile", "low": -0.2, "high": 0.9}}, "metrics.cycle_acc_ci.low"),
        ({"n_cycles": -1}, "metrics.n_cycles"),
        ({"n_cycles": True}, "metrics.n_cycles"),
        ({"averaged_over": {"*_acc": 7}}, "metrics.averaged_over.*_acc"),
    ],
)
def test_the_result_schema_bounds_metric_fields(metrics: dict, field: str) -> None:
    with pytest.raises(ValueError, match=rf"here: result record field 'metrics': field '{field}' is "):
        check_result_record(_record(**metrics), "here")


def test_averaged_over_sentences_keyed_by_metric_names_are_descriptions_not_values() -> None:
    # The audit records name the set each accuracy averages over: a sentence under "*_acc" is valid.
    described = {"cycle_acc": 0.5, "averaged_over": {"*_acc": "the subset's comparisons", "n_cycles": "exact cycles"}}
    check_result_record(_record(**described), "here")  # no error
    with pytest.raises(ValueError, match=r"averaged_over.n_cycles' is 3; must be a sentence"):
        check_result_record(_record(averaged_over={"n_cycles": 3}), "here")


def test_the_shipped_json_schema_bounds_accuracies_and_counts_too() -> None:
    jsonschema = pytest.importorskip("jsonschema")
    from clip_cycles.commands.schema_formats import shipped_schema_dir

    schema = json.loads((shipped_schema_dir() / "result.schema.json").read_text(encoding="utf-8"))
    validator = jsonschema.Draft202012Validator(schema)
    assert list(validator.iter_errors(_record())) == []
    for bad in ({"cycle_acc": 1e308}, {"cycle_acc": -5}, {"cycle_acc": "0.5"}, {"cycle_acc": True}, {"n_cycles": -1}):
        assert list(validator.iter_errors(_record(**bad))) != [], bad


# --- parsers bounded ------------------------------------------------------------------------------------------


def test_a_200000_deep_result_file_is_a_sentence_not_a_recursion_error(tmp_path: Path) -> None:
    path = tmp_path / "deep.json"
    path.write_text('{"metrics": ' + "[" * DEEP + "]" * DEEP + "}")
    with pytest.raises(JSONLimitError, match=rf"{DEEP + 1} levels deep, more than the {MAX_JSON_DEPTH} allowed"):
        read_result(path)


def test_the_json_helper_counts_brackets_outside_strings_only_and_reads_real_json() -> None:
    text = json.dumps({"caption": "[[[[{{{{" * 100, "rows": [[1, 2], {"a": [3]}], "id": 123456789012})
    assert load_json_text(text, "x") == json.loads(text)
    assert load_json_text(("[" * MAX_JSON_DEPTH) + ("]" * MAX_JSON_DEPTH), "x") is not None  # at the limit: read
    with pytest.raises(JSONLimitError, match="x holds the number '1e999', too large for a float"):
        load_json_text('{"a": 1e999}', "x")
    with pytest.raises(JSONLimitError, match="x holds Infinity"):
        load_json_text('{"a": Infinity}', "x")


def test_a_200000_deep_sugarcrepe_file_is_a_sentence(tmp_path: Path) -> None:
    from clip_cycles.benchmark_audit.adapters import _read_json

    path = tmp_path / "replace_att.json"
    path.write_text("[" * DEEP + "]" * DEEP)
    with pytest.raises(ValueError, match=rf"{path} nests arrays or objects {DEEP} levels deep"):
        _read_json(path)


def test_a_deep_or_huge_samples_line_is_a_sentence_naming_the_line(tmp_path: Path) -> None:
    from clip_cycles.evaluation.compare import read_samples

    path = tmp_path / "samples.jsonl"
    path.write_text("[" * DEEP + "]" * DEEP + "\n")
    with pytest.raises(ValueError, match=rf"samples file {path}, line 1 nests arrays or objects"):
        read_samples(path)
    path.write_text('{"seed": ' + "9" * 5000 + "}\n")
    with pytest.raises(ValueError, match=rf"samples file {path}, line 1 holds an integer of 5000 digits"):
        read_samples(path)


def test_read_json_file_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "x.json"
    path.write_text("[" * 100 + "]" * 100)
    with pytest.raises(ValueError, match=rf"split file {path} nests arrays or objects 100 levels deep"):
        read_json_file(path, 1 << 20, "split file")


@pytest.mark.parametrize("flag", [["--seeds", "99999999999999999999"], ["--seeds", "4294967296"], ["--model-seed", "9" * 30]])
def test_huge_seed_flags_are_a_sentence(flag: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["eval", "--task", "cycles/shapes_strict_size", "--model", "cycles-tiny", *flag])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "seeds are 0 to 4294967295" in err and "Traceback" not in err


# --- weights checked before loading ---------------------------------------------------------------------------


def _lying_safetensors(path: Path) -> Path:
    """A safetensors file whose header declares a 2^40-byte tensor in a 40-byte file."""
    header = json.dumps({"w": {"dtype": "F32", "shape": [2**38], "data_offsets": [0, 2**40]}}).encode()
    path.write_bytes(struct.pack("<Q", len(header)) + header + b"\0" * 40)
    return path


def _open_clip_folder(folder: Path) -> Path:
    folder.mkdir(parents=True)
    config = {
        "model_cfg": {
            "embed_dim": 32,
            "vision_cfg": {"image_size": 32, "layers": 1, "width": 64, "patch_size": 8, "head_width": 32},
            "text_cfg": {"context_length": 16, "vocab_size": 49408, "width": 64, "heads": 2, "layers": 1},
        },
        "preprocess_cfg": {},
    }
    (folder / "open_clip_config.json").write_text(json.dumps(config))
    return folder


def _hf_folder(folder: Path, preprocessor: bool = True) -> Path:
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps({"model_type": "clip"}))
    if preprocessor:
        (folder / "preprocessor_config.json").write_text(json.dumps({"image_processor_type": "CLIPImageProcessor"}))
    return folder


def test_a_lying_safetensors_header_is_refused_before_allocation_in_each_place(tmp_path: Path) -> None:
    from clip_cycles.encoding import backends

    hf = _hf_folder(tmp_path / "hf")
    _lying_safetensors(hf / "model.safetensors")
    with pytest.raises(ValueError, match=r"model\.safetensors: tensor 'w' ends at byte 1099511627776 of the data"):
        backends.load_model("hf", str(hf), None)
    local = _open_clip_folder(tmp_path / "local")
    _lying_safetensors(local / "open_clip_model.safetensors")
    with pytest.raises(ValueError, match=r"open_clip_model\.safetensors: tensor 'w' ends at byte 1099511627776"):
        backends.load_model("open_clip", f"local-dir:{local}", None)
    checkpoint = _lying_safetensors(tmp_path / "x.safetensors")
    with pytest.raises(ValueError, match=rf"checkpoint {checkpoint}: tensor 'w' ends at byte 1099511627776"):
        backends.load_model("open_clip", f"local-dir:{_open_clip_folder(tmp_path / 'plain')}", str(checkpoint))


def test_a_header_whose_shape_and_range_disagree_is_refused(tmp_path: Path) -> None:
    from clip_cycles.encoding.weights_files import check_weights_file

    header = json.dumps({"w": {"dtype": "F32", "shape": [1000], "data_offsets": [0, 8]}}).encode()
    path = tmp_path / "w.safetensors"
    path.write_bytes(struct.pack("<Q", len(header)) + header + b"\0" * 8)
    with pytest.raises(ValueError, match=r"tensor 'w' declares 4000 bytes \(F32 of shape \[1000\]\) in a range of 8"):
        check_weights_file(path)
    path.write_bytes(struct.pack("<Q", 2**60) + header)
    with pytest.raises(ValueError, match=r"declares a 1152921504606846976-byte header"):
        check_weights_file(path)


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="needs /dev/zero to link to")
def test_weights_linked_to_a_device_are_refused_by_name(tmp_path: Path) -> None:
    from clip_cycles.encoding import backends

    hf = _hf_folder(tmp_path / "hf")
    (hf / "model.safetensors").symlink_to("/dev/zero")
    with pytest.raises(ValueError, match=rf"{hf / 'model.safetensors'} \(a link to /dev/zero\) is a character device"):
        backends.load_model("hf", str(hf), None)
    local = _open_clip_folder(tmp_path / "local")
    (local / "open_clip_pytorch_model.bin").symlink_to("/dev/zero")
    with pytest.raises(ValueError, match=r"open_clip_pytorch_model\.bin \(a link to /dev/zero\) is a character device"):
        backends.load_model("open_clip", f"local-dir:{local}", None)
    link = tmp_path / "x.safetensors"
    link.symlink_to("/dev/zero")
    with pytest.raises(ValueError, match=rf"checkpoint {link} \(a link to /dev/zero\) is a character device"):
        backends.load_model("open_clip", f"local-dir:{_open_clip_folder(tmp_path / 'plain')}", str(link))


def test_an_hf_folder_without_preprocessor_config_names_the_file_and_the_fix(tmp_path: Path) -> None:
    from clip_cycles.encoding import backends

    hf = _hf_folder(tmp_path / "hf", preprocessor=False)
    with pytest.raises(ValueError, match=r"has no preprocessor_config\.json .*save_pretrained\(<folder>\)"):
        backends.load_model("hf", str(hf), None)


def test_real_safetensors_weights_pass_the_checks_and_load(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    from safetensors.torch import save_file

    from clip_cycles.encoding import backends
    from clip_cycles.encoding.weights_files import check_weights_file

    path = tmp_path / "w.safetensors"
    save_file(
        {"a": torch.arange(6, dtype=torch.float32).reshape(2, 3), "b": torch.zeros(0), "c": torch.ones(4, dtype=torch.bfloat16)},
        str(path),
    )
    check_weights_file(path)
    state = backends.load_weights_only(path)
    assert state["a"].tolist() == [[0, 1, 2], [3, 4, 5]] and state["c"].dtype == torch.bfloat16


# --- one format gate ------------------------------------------------------------------------------------------

NEWER = "folder format version 99 was written by a newer clip_cycles; this clip_cycles reads format version 1 and older"


@pytest.fixture
def newer_folder(shapes_cycles: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "newer"
    shutil.copytree(shapes_cycles, copy)
    info = json.loads((copy / "build_info.json").read_text())
    info["format_version"] = 99
    (copy / "build_info.json").write_text(json.dumps(info))
    return copy


def test_audit_refuses_a_newer_format_with_the_same_sentence(newer_folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["audit", str(newer_folder)]) == 2
    assert NEWER in capsys.readouterr().err


def test_load_split_and_page_refuse_a_newer_format_with_the_same_sentence(
    newer_folder: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from clip_cycles.data.folder.reader import load_split

    with pytest.raises(ValueError, match=NEWER):
        load_split(newer_folder, "strict_size", "test")
    results = tmp_path / "results"
    results.mkdir()
    (results / "build_info.json").write_text((newer_folder / "build_info.json").read_text())
    assert main(["page", str(results), "--out", str(tmp_path / "site")]) == 2
    assert NEWER in capsys.readouterr().err


def test_eval_refuses_a_newer_format_with_the_same_sentence(
    newer_folder: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["eval", "--task", "cycles/shapes_strict_size", "--model", "cycles-tiny", "--dataset-root", str(newer_folder)]
    assert main([*argv, "--cache-dir", str(tmp_path / "cache"), "--num-workers", "0", "--output", "-"]) == 2
    assert NEWER in capsys.readouterr().err


def test_eval_with_a_lying_hf_folder_exits_2_with_the_sentence(
    shapes_cycles: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    hf = _hf_folder(tmp_path / "hf")
    _lying_safetensors(hf / "model.safetensors")
    argv = ["eval", "--task", "cycles/shapes_strict_size", "--model-type", "hf", "--model", str(hf)]
    argv += ["--dataset-root", str(shapes_cycles), "--cache-dir", str(tmp_path / "cache"), "--num-workers", "0"]
    assert main([*argv, "--output", str(tmp_path / "r.json")]) == 2
    err = capsys.readouterr().err
    assert "tensor 'w' ends at byte 1099511627776" in err and "Traceback" not in err
    assert not (tmp_path / "r.json").exists()


def test_the_clip_benchmark_plugin_refuses_a_newer_format_with_the_same_sentence(
    newer_folder: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("clip_benchmark")
    from clip_cycles.commands.clip_benchmark import main as plugin_main

    monkeypatch.setenv("CLIP_CYCLES_CACHE", str(tmp_path / "cache"))
    argv = ["eval", "--dataset", "cycles/shapes_strict_size", "--model", "cycles-tiny", "--dataset_root", str(newer_folder)]
    argv += ["--num_workers", "0", "--output", str(tmp_path / "{dataset}_{task}.json")]
    try:
        code = plugin_main(argv)
    except SystemExit as exit_:
        code = exit_.code
    assert code not in (0, None)
    assert NEWER in capsys.readouterr().err
    assert not list(tmp_path.glob("*.json"))


def test_drawn_files_are_kept_by_their_inputs_and_a_damaged_entry_is_drawn_again(tmp_path: Path) -> None:
    from clip_cycles.outputs import drawn_files, drawn_files_cache

    calls: list[int] = []

    def draw() -> dict[str, bytes]:
        calls.append(1)
        return {"figure.svg": b"<svg/>", "figure.png": b"png bytes"}  # not in sorted order

    assert drawn_files("kind", {"x": 1}, draw) == draw() and len(calls) == 2  # no cache: drawn every time
    kept = tmp_path / "kept"
    with drawn_files_cache(kept):
        first = drawn_files("kind", {"x": 1}, draw)
        assert drawn_files("kind", {"x": 1}, draw) == first and len(calls) == 3  # reused, in the same order
        assert list(first) == ["figure.svg", "figure.png"]
        assert list(drawn_files("kind", {"x": 1}, draw)) == ["figure.svg", "figure.png"]  # kept in the order drawn
        drawn_files("kind", {"x": 2}, draw)  # other inputs, other key
        drawn_files("other kind", {"x": 1}, draw)  # other code, other key
        assert len(calls) == 5
        entries = sorted(kept.iterdir())
        assert len(entries) == 3
        for entry in entries:
            (entry / "files" / "figure.png").write_bytes(b"torn")  # fails its sha256: drawn again and rewritten
        assert drawn_files("kind", {"x": 1}, draw) == first and len(calls) == 6
        assert drawn_files("kind", {"x": 1}, draw) == first and len(calls) == 6
        for entry in entries:
            manifest = json.loads((entry / "manifest.json").read_text())
            (entry / "manifest.json").write_text(json.dumps({"../escape": manifest["figure.png"]}))
        assert drawn_files("kind", {"x": 1}, draw) == first and len(calls) == 7  # a name out of the entry is refused
    with drawn_files_cache(None):
        drawn_files("kind", {"x": 1}, draw)
        assert len(calls) == 8


def test_drawn_files_never_key_by_an_eliding_repr(tmp_path: Path) -> None:
    # Two arrays whose repr is the same ("[0 1 2 ... 1997 1998 1999]") but whose values differ are never one key.
    import numpy as np

    from clip_cycles.outputs import drawn_files, drawn_files_cache

    first, second = np.arange(2000), np.arange(2000)
    second[1000] = -1
    assert repr(first) == repr(second)
    calls: list[int] = []
    with drawn_files_cache(tmp_path / "kept"):
        for values in (first, second):
            got = drawn_files("test figure v1", {"values": values}, lambda v=values: calls.append(1) or {"f.bin": v.tobytes()})
            assert got == {"f.bin": values.tobytes()}
        assert drawn_files("test figure v1", {"x": np.float64(0.5)}, lambda: {"f.bin": b"a"}) == {"f.bin": b"a"}
        assert drawn_files("test figure v1", {"x": np.float64(0.5)}, lambda: {"f.bin": b"b"}) == {"f.bin": b"a"}  # kept
    assert len(calls) == 2
