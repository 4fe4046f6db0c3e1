"""What clip_cycles says and where: results on stdout, notes through logging, set by -q/-v.

- ``clip-cycles eval ... -q`` prints the result lines alone (stdout) and nothing on stderr,
  even on a cold cache where families are built and images encoded;
- the default level shows the build and encoding notes; ``-v`` adds the cache decisions;
- ``import clip_cycles`` and library calls print nothing (a subprocess, and capfd in-process),
  while their notes do reach a handler the application configures (caplog);
- ``CLIP_CYCLES_LOG_LEVEL`` sets the level where no flag does; a bad value is a sentence;
- progress bars show on a terminal and are off with -q.
"""

from __future__ import annotations

import argparse
import io
import json
import logging
import os
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import pytest

import clip_cycles
from clip_cycles import verbosity
from clip_cycles.cli import main
from clip_cycles.settings import LOG_LEVEL_ENV, MIN_CYCLES_ENV

REPO = Path(__file__).resolve().parents[2]
TASK = "cycles/shapes_strict_size"
MODEL = ["--model-type", "open_clip", "--model", "cycles-tiny", "--pretrained", "shapes"]


def _env(tmp: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != LOG_LEVEL_ENV}
    return {**env, "PYTHONPATH": str(REPO), "CLIP_CYCLES_CACHE": str(tmp / "default_cache")}


def _clip_cycles(args: list[str], tmp: Path, **extra: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [sys.executable, "-m", "clip_cycles", *args],
        env={**_env(tmp), **extra},
        cwd=tmp,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def _eval_args(world: Path, cache: Path, out: Path) -> list[str]:
    return ["--task", TASK, *MODEL, "--dataset-root", str(world), "--cache-dir", str(cache), "--num-workers", "0",
            "--output", str(out / "{dataset}.json")]  # fmt: skip


def _result_line(out: Path) -> str:
    """The line `eval` prints for the task, from the file it wrote (flat metrics, clip_benchmark's record)."""
    (path,) = out.glob("*.json")
    record = json.loads(path.read_text())
    return f"{record['dataset']}: cycle_acc {record['metrics']['cycle_acc']} -> {path}\n"


@pytest.fixture(scope="module")
def runs(shapes_world: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, subprocess.CompletedProcess[str]]:
    """Three `clip-cycles eval` runs: -q on a cold cache, the default on another cold cache, -v on that one warm."""
    tmp = tmp_path_factory.mktemp("logging_runs")
    quiet = _clip_cycles(["eval", *_eval_args(shapes_world, tmp / "cold", tmp / "quiet"), "-q"], tmp)
    default = _clip_cycles(["eval", *_eval_args(shapes_world, tmp / "cache", tmp / "default")], tmp)
    verbose = _clip_cycles(["-v", "eval", *_eval_args(shapes_world, tmp / "cache", tmp / "verbose")], tmp)
    return {"tmp": tmp, "quiet": quiet, "default": default, "verbose": verbose}  # type: ignore[dict-item]


def test_quiet_eval_prints_the_result_line_only(runs: dict) -> None:
    tmp, quiet = runs["tmp"], runs["quiet"]
    # A cold cache: the families were built and every image encoded, yet not a note was printed.
    assert list((tmp / "cold" / "datasets").glob("shapes-coco-*/build_info.json"))
    assert quiet.stdout == _result_line(tmp / "quiet")
    assert quiet.stderr == ""


def test_default_level_shows_the_build_and_encoding_notes(runs: dict) -> None:
    tmp, default = runs["tmp"], runs["default"]
    assert default.stdout == _result_line(tmp / "default")
    lines = default.stderr.splitlines()
    assert any(line.startswith("building coco families ['strict_size'] from ") for line in lines), default.stderr
    assert any(line.startswith("encoded ") and "(0 + 0 from the cache;" in line for line in lines), default.stderr
    # No debug line, and each note once (not again through a root handler that open_clip's logging sets up).
    assert "debug:" not in default.stderr and len(lines) == len(set(lines)) == 2, default.stderr


def test_verbose_adds_the_cache_decisions(runs: dict) -> None:
    tmp, verbose = runs["tmp"], runs["verbose"]
    assert verbose.stdout == _result_line(tmp / "verbose")
    debug = [line for line in verbose.stderr.splitlines() if line.startswith("debug: ")]
    # The families and both feature tables came from the cache, and -v says so; nothing was built.
    assert any("coco families ['strict_size'] from the cache" in line for line in debug), verbose.stderr
    assert sum(" items from the cache" in line and "feature cache" in line for line in debug) >= 2, verbose.stderr
    assert "building" not in verbose.stderr
    encoded = [line for line in verbose.stderr.splitlines() if line.startswith("encoded ")]
    assert encoded and encoded[0].startswith("encoded 0 images and 0 captions"), verbose.stderr


def configure_notes_parser(parser: argparse.ArgumentParser) -> None:
    """A stand-in command (registered by the test below) that logs one note of each level, then prints its result."""
    parser.add_argument("--what", default="done")

    def run(args: argparse.Namespace) -> int:
        note = logging.getLogger("clip_cycles.stand_in")
        note.debug("a cache decision")
        note.info("a progress note")
        note.warning("a warning note")
        print(f"result: {args.what}")
        return 0

    parser.set_defaults(func=run)


@pytest.fixture
def notes_command(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    from clip_cycles import cli

    monkeypatch.delenv(LOG_LEVEL_ENV, raising=False)
    cli.register_command("notes", f"{__name__}:configure_notes_parser", help="test")
    yield "notes"
    cli.unregister_command("notes")


@pytest.mark.parametrize(
    "argv, env, expected",
    [
        ([], None, "a progress note\nwarning: a warning note\n"),
        (["-q"], None, "warning: a warning note\n"),
        (["--quiet"], "debug", "warning: a warning note\n"),  # a flag wins over the variable
        (["-v"], None, "debug: a cache decision\na progress note\nwarning: a warning note\n"),
        ([], "DEBUG", "debug: a cache decision\na progress note\nwarning: a warning note\n"),
        ([], "warning", "warning: a warning note\n"),
        ([], "error", ""),
    ],
)
def test_flags_and_variable_set_what_a_command_says(
    notes_command: str, argv: list[str], env: str | None, expected: str, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    if env is not None:
        monkeypatch.setenv(LOG_LEVEL_ENV, env)
    for placed in ([*argv, notes_command], [notes_command, *argv]):  # before the command's name, or after it
        assert main(placed) == 0
        assert capsys.readouterr() == ("result: done\n", expected), placed


def test_contradicting_flags_and_a_bad_variable_are_a_sentence(notes_command: str, monkeypatch, capsys) -> None:
    assert main(["-q", notes_command, "-v"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err == "clip-cycles notes: error: -q/--quiet and -v/--verbose contradict each other; give one of them\n"
    monkeypatch.setenv(LOG_LEVEL_ENV, "chatty")
    assert main([notes_command]) == 2
    out, err = capsys.readouterr()
    assert out == "" and "CLIP_CYCLES_LOG_LEVEL='chatty' is not a log level; give one of debug, info, warning, error" in err
    # The variable is read when a command runs, not at import: unset, the same command runs.
    monkeypatch.delenv(LOG_LEVEL_ENV)
    assert main([notes_command, "--what", "again"]) == 0 and capsys.readouterr().out == "result: again\n"


def test_a_subcommands_subcommand_takes_the_flags_too(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["-q", "build", "shapes"], ["build", "-q", "shapes"], ["build", "shapes", "-q"]):
        out = tmp_path / str(len(list(tmp_path.iterdir())))
        assert main([*argv, "--out", str(out), "--n-images", "4", "--image-size", "64"]) == 0, argv
        assert capsys.readouterr() == (f"shapes world: 4 images, 64 px, seed 0, val 0.25 written to {out}\n", ""), argv


# --------------------------------------------------------------------------- the library says nothing

LIBRARY_CALLS = """
import sys
from pathlib import Path
import clip_cycles
from clip_cycles.data.folder.build import build_coco_folder
from clip_cycles.data.sources.shapes_world import write_shapes_world
from clip_cycles.encoding.encoder import ModelSpec
from clip_cycles.evaluation.zero_shot import evaluate
from clip_cycles.results import read_result, write_result

tmp = Path(sys.argv[1])
world = write_shapes_world(tmp / "world", n_images=300, seed=0, image_size=64)  # progress: the default
folder, _ = build_coco_folder(world, tmp / "folder", families=["strict_size"], min_cycles=5)
spec = ModelSpec("open_clip", "cycles-tiny", "shapes")
# From the raw root (its families built into the data cache: a note), then from the built folder.
(record,), _ = evaluate(["cycles/shapes_strict_size"], spec, world, tmp / "cache", num_workers=0, seeds=[0])
(again,), _ = evaluate(["cycles/shapes_strict_size"], spec, folder, tmp / "cache", num_workers=0, seeds=[0])
path = write_result(record, tmp / "result.json")
assert read_result(path)["metrics"]["per_seed"] == again["metrics"]["per_seed"]
assert (tmp / "cache" / "datasets").is_dir()
"""


def test_import_and_library_calls_print_nothing(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", LIBRARY_CALLS, str(tmp_path)], env=_env(tmp_path), capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert (done.stdout, done.stderr) == ("", "")


def test_library_notes_reach_the_applications_handler_and_are_not_printed(
    shapes_world: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    from clip_cycles.tasks.loading import load_task_data, resolve_dataset_roots
    from clip_cycles.tasks.registry import get_task

    assert any(isinstance(h, logging.NullHandler) for h in logging.getLogger("clip_cycles").handlers)
    task = get_task(TASK)
    caplog.set_level(logging.DEBUG, logger="clip_cycles")  # as a harness that wants every note
    folder = resolve_dataset_roots([task], shapes_world, tmp_path / "datasets")[TASK]
    resolve_dataset_roots([task], shapes_world, tmp_path / "datasets")
    # A family the folder declares unavailable: a warning note, and the task reads as unavailable.
    monkeypatch.setenv(MIN_CYCLES_ENV, "10000")  # a minimum no family meets
    short = resolve_dataset_roots([task], shapes_world, tmp_path / "short")[TASK]
    data = load_task_data(task, short)
    assert data.unavailable and folder.root.is_dir()
    notes = [(r.name, r.levelno, r.getMessage()) for r in caplog.records]
    assert ("clip_cycles.tasks.loading", logging.INFO) in {n[:2] for n in notes}
    assert any(level == logging.DEBUG and "from the cache" in text for _, level, text in notes)
    assert any(level == logging.WARNING and text == data.unavailable for _, level, text in notes)
    assert capfd.readouterr() == ("", "")  # the library added no handler that prints


# --------------------------------------------------------------------------- the logging set-up itself


def test_configured_logging_restores_what_it_found_and_never_doubles_a_line(capsys: pytest.CaptureFixture[str]) -> None:
    package = logging.getLogger("clip_cycles")
    before = (list(package.handlers), package.level, package.propagate)
    note = logging.getLogger("clip_cycles.some.module")
    with verbosity.configured_logging(logging.INFO):
        with verbosity.configured_logging(logging.DEBUG):  # a plugin run inside a command: one handler
            note.debug("inner %d", 1)
        note.info("outer")
        note.debug("hidden again")
        note.warning("careful")
    assert capsys.readouterr().err == "debug: inner 1\nouter\nwarning: careful\n"
    assert (list(package.handlers), package.level, package.propagate) == before
    note.warning("after")  # no handler of ours left: nothing printed
    assert capsys.readouterr() == ("", "")


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_bars_show_on_a_terminal_and_are_off_with_q(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from clip_cycles.data.sources.shapes_world import write_shapes_world

    for level, shown in ((logging.INFO, True), (logging.WARNING, False)):
        terminal = _Terminal()
        monkeypatch.setattr(sys, "stderr", terminal)
        with verbosity.configured_logging(level):
            write_shapes_world(tmp_path / str(level), n_images=4, seed=0, image_size=64)
        monkeypatch.undo()
        assert ("shapes world" in terminal.getvalue()) is shown, (level, terminal.getvalue())
    assert verbosity.progress_disable() is None and verbosity.progress_disable(False) is True


def test_package_logger_has_only_a_null_handler_after_import() -> None:
    code = "import logging, clip_cycles; print([type(h).__name__ for h in logging.getLogger('clip_cycles').handlers])"
    done = subprocess.run([sys.executable, "-c", code], env=_env(Path.cwd()), capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == "['NullHandler']", done.stderr
    assert clip_cycles.__name__ == verbosity.PACKAGE_LOGGER


@pytest.mark.parametrize("quiet", [False, True])
def test_clip_benchmarks_quiet_quiets_the_plugins_notes(
    quiet: bool, shapes_world: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """clip_benchmark configures no logging: the plugin's run does, and clip_benchmark's --quiet keeps warnings only."""
    from clip_cycles.commands.clip_benchmark import main as clip_benchmark_main

    monkeypatch.setenv("CLIP_CYCLES_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv(LOG_LEVEL_ENV, raising=False)
    monkeypatch.delenv(MIN_CYCLES_ENV, raising=False)
    monkeypatch.setattr(sys, "argv", list(sys.argv))  # clip_benchmark's main reads (and the plugin sets) sys.argv
    argv = ["eval", "--dataset", TASK, "--dataset_root", str(shapes_world), "--model", "cycles-tiny", "--pretrained", "shapes",
            "--num_workers", "0", "--no_amp", "--output", str(tmp_path / "{dataset}.json")]  # fmt: skip
    clip_benchmark_main([*argv, "--quiet"] if quiet else argv)
    assert list(tmp_path.glob("*.json"))  # the result was written either way
    out, err = capsys.readouterr()
    # On a cold cache the families are built: said (stderr) at the default level only, never at debug level.
    assert ("building coco families ['strict_size']" in err) is not quiet and "debug:" not in err, err
    # clip_benchmark's own --verbose lines (stdout), as for its own datasets.
    assert ("Dump results to: " in out) is not quiet, out
