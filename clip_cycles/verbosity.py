"""How much clip_cycles says: a logger per module, configured by the entry points alone.

Every module that has something to say holds ``logger = logging.getLogger(__name__)``; the
loggers sit under the package logger ``clip_cycles``, which carries a ``NullHandler`` (added
in ``clip_cycles/__init__``). So a library call prints nothing, and its records reach whatever
handlers the application (lmms-eval, a job scheduler, a notebook) configures on the root logger.

The entry points (``clip-cycles``, the clip_benchmark plugin's run, the lmms-eval bridge's
command) run inside :func:`configured_logging`: one handler writing to stderr, on the package
logger, for the length of the command, at the level of :func:`command_level` (``-q``: WARNING,
``-v``: DEBUG, else ``$CLIP_CYCLES_LOG_LEVEL``, else INFO). Progress bars follow the level:
:func:`progress_disable` is tqdm's ``disable`` argument, off while the level is above INFO.
"""

from __future__ import annotations

import logging
import sys
from contextlib import contextmanager
from typing import Iterator

from clip_cycles.settings import LOG_LEVEL_ENV, log_level

PACKAGE_LOGGER = "clip_cycles"

#: While False (``-q``), every progress bar of the package is off; set by :func:`configured_logging`.
_progress_bars = True


class _StderrHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """A handler that writes to ``sys.stderr`` as it is at each record, not as it was when made.

    A test's captured stream, or a stream redirected after start-up, receives the records.
    """

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    @property  # type: ignore[override]
    def stream(self) -> object:
        return sys.stderr

    @stream.setter
    def stream(self, value: object) -> None:  # StreamHandler.__init__ assigns it; the property wins
        pass


class _NoteFormatter(logging.Formatter):
    """Notes as plain lines (as the commands printed them); ``warning: `` / ``debug: `` before other levels."""

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        return text if record.levelno == logging.INFO else f"{record.levelname.lower()}: {text}"


QUIET_FLAGS = ("-q", "--quiet")
VERBOSE_FLAGS = ("-v", "--verbose")


def command_level(quiet: bool = False, verbose: bool = False) -> int:
    """The level a command runs at: ``-v`` DEBUG, ``-q`` WARNING, else ``$CLIP_CYCLES_LOG_LEVEL``, else INFO.

    Raises ValueError when both flags are given, or when the variable names no level.
    """
    if quiet and verbose:
        raise ValueError("-q/--quiet and -v/--verbose contradict each other; give one of them")
    if verbose:
        return logging.DEBUG
    if quiet:
        return logging.WARNING
    from_env = log_level()
    return logging.INFO if from_env is None else from_env


@contextmanager
def configured_logging(level: int) -> Iterator[logging.Logger]:
    """Within the block: notes of ``level`` and above on stderr, and progress bars only at INFO or below.

    The handler, the package logger's level and the progress switch are restored on exit, so
    a command run inside a test (or a plugin run inside a harness) leaves logging as it found
    it. Nested blocks share the outer handler (no line is written twice).
    """
    global _progress_bars
    package = logging.getLogger(PACKAGE_LOGGER)
    previous = (package.level, package.propagate, _progress_bars)
    handler: _StderrHandler | None = None
    if not any(isinstance(h, _StderrHandler) for h in package.handlers):
        handler = _StderrHandler()
        handler.setFormatter(_NoteFormatter("%(message)s"))
        package.addHandler(handler)
    package.setLevel(level)
    # Not on to the root logger as well: a library's module-level `logging.info` (open_clip's) gives the
    # root a handler of its own (logging.basicConfig), which would print every note a second time.
    package.propagate = False
    _progress_bars = level <= logging.INFO
    try:
        yield package
    finally:
        if handler is not None:
            package.removeHandler(handler)
        package.setLevel(previous[0])  # setLevel, not the attribute: it clears the loggers' cached levels
        package.propagate, _progress_bars = previous[1], previous[2]


def progress_disable(progress: bool | None = None) -> bool | None:
    """tqdm's ``disable`` for a bar: ``not progress`` when asked, else None (a bar on a terminal only), True under ``-q``."""
    if progress is not None:
        return not progress
    return None if _progress_bars else True


def set_progress_bars(enabled: bool) -> None:
    """Turn every progress bar of the package off (or back on) outside a command, as ``-q`` does."""
    global _progress_bars
    _progress_bars = bool(enabled)


__all__ = [
    "LOG_LEVEL_ENV",
    "PACKAGE_LOGGER",
    "QUIET_FLAGS",
    "VERBOSE_FLAGS",
    "command_level",
    "configured_logging",
    "progress_disable",
    "set_progress_bars",
]
