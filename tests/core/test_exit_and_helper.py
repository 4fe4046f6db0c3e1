"""The process's own ends: the console script's exit without teardown, and the forked helper beside the parent.

``exit_without_teardown`` must keep every promise of Python's exit that anything outside sees (threads
joined, ``atexit`` handlers run, streams flushed, the exit code) and skip only the teardown. The helper
(:func:`clip_cycles.processes.start_helper`) runs beside the parent, stops when asked, and a helper that
fails leaves no trace: not a line on the terminal, not a changed exit code.
"""

from __future__ import annotations

import configparser
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from clip_cycles import processes
from clip_cycles.processes import start_helper

REPO = Path(__file__).resolve().parents[2]
#: Buffered standard streams, as a user's shell has them (PYTHONUNBUFFERED would write through and flush nothing).
BUFFERED = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}

EXITING = textwrap.dedent(
    """
    import atexit, sys, threading, time
    from clip_cycles.processes import exit_without_teardown
    stem = sys.argv[1]

    def late() -> None:  # a thread that is no daemon: Python's exit waits for it, so must ours
        time.sleep(0.3)
        open(stem + ".thread", "w").write("joined")

    class TornDown:
        def __del__(self, opener=open) -> None:  # runs in the teardown of the module's globals (builtins gone)
            opener(self.path, "w").write("torn down")

    kept = TornDown()
    kept.path = stem + ".teardown"
    threading.Thread(target=late).start()
    atexit.register(lambda: open(stem + ".atexit", "w").write("ran"))
    print("x" * 100000, end="")  # stays in the buffer of a piped stdout until the exit flushes it
    if sys.argv[2] == "ours":
        exit_without_teardown(7)
    sys.exit(7)
    """
)


@pytest.mark.parametrize("how", ["ours", "python"])
def test_the_exit_joins_threads_runs_atexit_and_flushes_and_only_ours_skips_the_teardown(tmp_path: Path, how: str) -> None:
    stem = str(tmp_path / "probe")
    done = subprocess.run([sys.executable, "-c", EXITING, stem, how], capture_output=True, text=True, timeout=120, env=BUFFERED)
    assert done.returncode == 7, done.stderr
    assert done.stdout == "x" * 100000 and done.stderr == ""
    assert Path(stem + ".thread").read_text() == "joined"
    assert Path(stem + ".atexit").read_text() == "ran"
    # Python's own exit frees the module's objects (the second it costs once torch is loaded); ours does not.
    assert Path(stem + ".teardown").exists() == (how == "python")


def test_a_stream_that_cannot_be_flushed_exits_120_as_python_does() -> None:
    script = (
        "import os\nfrom clip_cycles.processes import exit_without_teardown\n"
        "print('lost', end='')\nos.close(1)\nexit_without_teardown(0)"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=120, env=BUFFERED)
    assert done.returncode == 120


def test_the_console_script_and_python_m_end_through_the_fast_exit_with_mains_output_and_code(
    capsys: pytest.CaptureFixture,
) -> None:
    from clip_cycles.cli import main

    config = configparser.ConfigParser()
    config.read(REPO / "setup.cfg")
    scripts = [line.strip() for line in config["options.entry_points"]["console_scripts"].strip().splitlines()]
    assert "clip-cycles = clip_cycles.cli:run" in scripts
    assert main(["tasks"]) == 0
    expected = capsys.readouterr().out
    done = subprocess.run(
        [sys.executable, "-m", "clip_cycles", "tasks"], capture_output=True, text=True, timeout=300, cwd=REPO, env=BUFFERED
    )
    assert (done.returncode, done.stdout) == (0, expected)
    # An argument error is argparse's SystemExit: its code and its sentence, as before.
    bad = subprocess.run(
        [sys.executable, "-m", "clip_cycles", "eval", "--no-such-flag"], capture_output=True, text=True, timeout=300
    )
    assert bad.returncode == 2 and "the following arguments are required: --task, --model" in bad.stderr


NEEDS_FORK_AND_TWO_CORES = pytest.mark.skipif(
    not sys.platform.startswith("linux") or processes.usable_cores() < 2, reason="a helper needs Linux and 2 cores"
)


def _wait_for(path: Path, seconds: float = 60) -> None:
    end = time.monotonic() + seconds
    while not path.exists():
        assert time.monotonic() < end, f"{path} never appeared"
        time.sleep(0.01)


@NEEDS_FORK_AND_TWO_CORES
def test_a_helper_runs_in_another_process_until_the_parent_says_stop(tmp_path: Path) -> None:
    def work(stopped) -> None:
        (tmp_path / "pid").write_text(str(os.getpid()))
        rounds = 0
        while not stopped():
            rounds += 1
            time.sleep(0.005)
        (tmp_path / "stopped").write_text(str(rounds))

    helper = start_helper(work)
    assert helper is not None
    _wait_for(tmp_path / "pid")
    time.sleep(0.1)
    assert not (tmp_path / "stopped").exists()  # it keeps going while the parent works
    assert int((tmp_path / "pid").read_text()) == helper.pid != os.getpid()
    assert helper.finish() is True
    assert int((tmp_path / "stopped").read_text()) > 0
    assert helper.finish() is False  # once only


@NEEDS_FORK_AND_TWO_CORES
def test_a_failing_helper_says_nothing_and_changes_nothing(tmp_path: Path, capfd: pytest.CaptureFixture) -> None:
    import logging
    import warnings

    def work(stopped) -> None:
        print("helper stdout", flush=True)
        print("helper stderr", file=sys.stderr, flush=True)
        logging.getLogger("clip_cycles").error("helper log")
        warnings.warn("helper warning", stacklevel=1)
        (tmp_path / "reached").write_text("yes")
        raise RuntimeError("helper boom")

    helper = start_helper(work)
    assert helper is not None
    _wait_for(tmp_path / "reached")
    assert helper.finish() is False  # it failed: the parent does the work itself
    out, err = capfd.readouterr()
    assert "helper" not in out + err


def test_no_helper_on_one_core_or_inside_a_pool_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(processes, "usable_cores", lambda: 1)
    assert start_helper(lambda stopped: None) is None
    monkeypatch.setattr(processes, "usable_cores", lambda: 2)
    monkeypatch.setattr(processes, "_SHARED", (print, None))  # what a forked pool worker sees
    assert start_helper(lambda stopped: None) is None
    monkeypatch.setattr(processes, "_SHARED", None)
    monkeypatch.setattr(processes.sys, "platform", "darwin")  # fork beside Accelerate and libdispatch is not safe
    assert start_helper(lambda stopped: None) is None


@NEEDS_FORK_AND_TWO_CORES
def test_a_helper_that_does_not_stop_is_killed_after_the_timeout(tmp_path: Path) -> None:
    def stuck(stopped) -> None:
        (tmp_path / "started").write_text("yes")
        time.sleep(300)  # never looks at stopped(): a stalled file system

    helper = start_helper(stuck)
    assert helper is not None
    _wait_for(tmp_path / "started")
    start = time.monotonic()
    assert helper.finish(timeout=0.5) is False
    assert time.monotonic() - start < 10
    with pytest.raises(ChildProcessError):
        os.waitpid(helper.pid, os.WNOHANG)  # reaped: no zombie left
